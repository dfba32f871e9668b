/*
 * btl/credit: puts and gets to MPI windows on the node by one CMA copy.
 *
 * Through UCX 1.13 a put to a peer on the node is a rendezvous active
 * message whose data the target pulls when its progress sees the request,
 * and a get is a request the target answers (btl_credit_get_reply.cc): both
 * wait for the window's owner to call MPI.  ob1's own traffic does not mind
 * (its peer waits for the FIN in progress), but a window's owner is in a
 * barrier, in sched_yield when oversubscribed, or computing, and MPICH's
 * rma tests ran 3-10x longer than under vader, whose CMA copies need no
 * owner.  So, like vader, a put or get to memory registered for atomics
 * (osc/rdma's windows) of a process on this node is one process_vm_writev
 * or process_vm_readv by the origin (common/shm), complete when it returns.
 *
 * CMA writes straight into another process's memory, so the peer is checked
 * first, once: the handle carries its owner's pid and the address and value
 * of a random cookie of the owner's; the origin reads the cookie at that pid
 * and uses CMA with that peer only if it reads the same value (another pid
 * namespace, or a kernel refusing CMA under Yama's ptrace scope, fails the
 * check and leaves the peer to UCX).  btl_credit_window_cma 0 turns it off.
 */
#include "btl_credit_internal.h"

#include "common/shm/shm_segment.h"

#include <cstring>
#include <random>
#include <unistd.h>

namespace btlcredit {

namespace {
volatile uint64_t cookie = 0;    /* read by peers through CMA */
}

void window_cma_init()
{
    std::random_device rd;
    uint64_t c = 0;
    while (c == 0) c = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    cookie = c;
}

void window_cma_stamp(mca_btl_base_registration_handle_t *h)
{
    h->owner_pid = static_cast<uint64_t>(getpid());
    h->cookie_addr = reinterpret_cast<uintptr_t>(&cookie);
    h->cookie = cookie;
}

/* Once per peer: is the handle's owner the process at its pid, and does
 * the kernel let us copy to it?  Remembered in ep->cma_pid. */
static bool check_peer(mca_btl_base_endpoint_t *ep, const mca_btl_base_registration_handle_t *h)
{
    const bool ok = h->owner_pid < (1ull << 31) && h->cookie != 0 &&  /* cma_check refuses pid 0 */
                    rdrp::shm::cma_check(static_cast<int>(h->owner_pid), h->cookie_addr, h->cookie);
    BTL_CREDIT_VERBOSE(5, "windows of %s (pid %llu): %s", OPAL_NAME_PRINT(ep->name),
                       (unsigned long long)h->owner_pid,
                       ok ? "by CMA" : "through UCX (CMA refused, or the pid is another process)");
    ep->cma_pid = ok ? static_cast<int64_t>(h->owner_pid) : -1;
    return ok;
}

int window_cma(bool write, mca_btl_base_endpoint_t *ep, void *local, uint64_t remote,
               mca_btl_base_registration_handle_t *local_handle,
               mca_btl_base_registration_handle_t *remote_handle, size_t size,
               mca_btl_base_rdma_completion_fn_t cb, void *ctx, void *data)
{
    if (!mca_btl_credit_params.window_cma || ep->remote || ep->cma_pid < 0 ||
        !(remote_handle->access & MCA_BTL_REG_FLAG_REMOTE_ATOMIC))
        return OPAL_ERR_NOT_AVAILABLE;
    if (ep->cma_pid == 0 && !check_peer(ep, remote_handle)) return OPAL_ERR_NOT_AVAILABLE;
    if (static_cast<int64_t>(remote_handle->owner_pid) != ep->cma_pid) return OPAL_ERR_NOT_AVAILABLE;
    /* Unlike a UCX put, whose target checks the range against its own
     * registrations, the origin cannot see the owner's regions: it relies on
     * osc/rdma, which checks every access against the window's size
     * (MPI_ERR_RMA_RANGE) before it calls the btl; here only a wrap. */
    if (OPAL_UNLIKELY(size > UINT64_MAX - remote)) return OPAL_ERR_BAD_PARAM;
    RdmaOp *op = rdma_op_get();
    if (OPAL_UNLIKELY(!op)) return OPAL_ERR_OUT_OF_RESOURCE;
    const int pid = static_cast<int>(remote_handle->owner_pid);
    const int rc = size == 0 ? 0
                   : write  ? rdrp::shm::cma_write(pid, remote, local, size)
                            : rdrp::shm::cma_read(pid, local, remote, size);
    if (OPAL_UNLIKELY(rc != 0)) {
        /* the owner unmapped the window (erroneous program) or exited */
        BTL_CREDIT_VERBOSE(1, "CMA %s of %zu bytes at 0x%llx in %s failed: %s", write ? "put" : "get", size,
                           (unsigned long long)remote, OPAL_NAME_PRINT(ep->name), strerror(-rc));
        g.op_pool.push_back(op);
        return OPAL_ERROR;
    }
    *op = RdmaOp{ep, local, local_handle, cb, ctx, data, nullptr, OPAL_SUCCESS, {}, 0, false};
    g.rdma_done.push_back(op);  /* the callback runs from progress, never inside put/get */
    ++g.stats[MCA_BTL_CREDIT_STAT_WINDOW_CMA];
    return OPAL_SUCCESS;
}

}  // namespace btlcredit
