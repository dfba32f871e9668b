/*
 * btl/credit: memory registration, put and get for ob1's RGET / RPUT and
 * osc/rdma (atomics: btl_credit_atomic.cc; windows on the node by CMA:
 * btl_credit_window_cma.cc; other gets from windows where UCX would emulate
 * them: btl_credit_get_reply.cc).
 *
 * register_mem maps memory that peers will access through ucx_glue's
 * registration cache and puts the packed rkey inline in the handle (ob1
 * copies the handle into its RGET / PUT headers); a handle for local use
 * only maps nothing, since ucp_get_nbx / ucp_put_nbx need no local memory
 * handle.  get and put unpack the peer's rkey through ucx_glue's rkey
 * cache.  A get is complete when ucp_get_nbx completes.
 *
 * On UCX 1.13 over shared memory and tcp these operations are emulated
 * through the peer's progress (ucx-1.13-notes.md §2): the peer of an ob1
 * RGET is its sender, which progresses our worker while it waits for FIN.
 *
 * A put is an active message (BTL_CREDIT_AM_PUT) that UCX moves by its own
 * rendezvous, which is zero-copy wherever UCX has a bandwidth lane (TCP's
 * put_zcopy, CMA, RDMA), while ucp_put_nbx over TCP is emulated in 8 KiB
 * fragments acknowledged one by one.  The target checks that the address
 * lies in a region it registered (rdrp_ucx_reg_covers) and receives the
 * data straight into it.  A rendezvous send completes only after the
 * target has the data, so the put is remotely complete when its callback
 * runs (ob1 sends FIN right after).  Like TCP's btl put, ob1 uses it for
 * RPUT to peers whose module offers PUT (remote peers without a native
 * get: btl_credit_endpoint.cc).
 *
 * Over TCP, UCX 1.13's rendezvous costs three control messages in the
 * reverse direction (ob1's PUT, UCX's RTR, TCP's PUT_ACK), each behind the
 * peer's own traffic.  Behind a full switch queue (ports shaped to
 * 2 Gbit/s, 1000 packets) that halved the bidirectional bandwidth at 1 MiB
 * (242-295 MB/s against ob1/tcp's 464-476), while UCX's eager protocol (the
 * receiver copies) reached 428-477 there but lost 30-45 % unshaped.  So
 * each peer's puts take the protocol its measured delivery rate calls for
 * (btl_credit_put_rate.h, btl_credit_put_eager_rate).
 */
#include "btl_credit_internal.h"
#include "btl_credit_wire_check.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <new>

namespace btlcredit {

RdmaOp *rdma_op_get()
{
    if (!g.op_pool.empty()) {
        RdmaOp *op = g.op_pool.back();
        g.op_pool.pop_back();
        return op;
    }
    RdmaOp *op = new (std::nothrow) RdmaOp;
    if (op) ++g.ops_made;
    return op;
}

static uint64_t now_ns()
{
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
}

/* A put to ep finished: feed its peer's delivered rate (lock held). */
static void put_finished(mca_btl_base_endpoint_t *ep, size_t bytes, bool eager)
{
    const bool was = ep->put_rate.eager();
    ep->put_rate.completed(now_ns(), bytes, eager);
    if (ep->put_rate.eager() != was)
        BTL_CREDIT_VERBOSE(5, "puts to %s now by UCX %s: delivered at %.0f MB/s (btl_credit_put_eager_rate %.0f)",
                           OPAL_NAME_PRINT(ep->name), ep->put_rate.eager() ? "eager" : "rendezvous",
                           ep->put_rate.last_rate_mb_s(), mca_btl_credit_params.put_eager_rate);
}

static void rdma_done(void *request, ucs_status_t status, void *user_data)
{
    RdmaOp *op = static_cast<RdmaOp *>(user_data);
    op->status = status == UCS_OK ? OPAL_SUCCESS : OPAL_ERROR;
    if (op->put_bytes) put_finished(op->ep, op->put_bytes, op->put_eager);
    --g.outstanding;
    g.rdma_done.push_back(op);
    ucp_request_free(request);
}

static ucs_status_t am_put(void *arg, const void *header, size_t hlen, void *data, size_t len,
                           const ucp_am_recv_param_t *param);

bool rdma_init()
{
    if (rdrp_ucx_set_am_handler(g.uw, BTL_CREDIT_AM_PUT, am_put, nullptr) != 0) return false;
    if (!get_reply_init()) return false;
    window_cma_init();
    /* Size the handles from a real rkey (it depends on the transports). */
    static char probe[4096];
    rdrp_ucx_region_t *r = rdrp_ucx_reg_acquire(probe, sizeof(probe));
    if (!r) return false;
    size_t len = r->rkey_len;
    rdrp_ucx_reg_release(r);
    const size_t head = offsetof(mca_btl_base_registration_handle_t, rkey);
    g.rkey_cap = std::min<size_t>(std::max<size_t>(2 * len, 64), MCA_BTL_REG_HANDLE_MAX_SIZE - head);
    mca_btl_credit_module.btl_registration_handle_size = head + g.rkey_cap;
    BTL_CREDIT_VERBOSE(2, "registration handles of %zu bytes (rkey %zu bytes here)",
                       head + g.rkey_cap, len);
    return true;
}

/* ------------------------------------------------------------ put target */
static void put_landed(void *request, ucs_status_t status, size_t length, void *user_data)
{
    (void)length;
    (void)user_data;
    if (OPAL_UNLIKELY(status != UCS_OK) && g.up) fatal_status("put receive", status);
    --g.outstanding;
    ucp_request_free(request);
}

/* Runs inside ucp_worker_progress (lock held).  Nothing is written before
 * the header and the target range are checked. */
static ucs_status_t am_put(void *arg, const void *header, size_t hlen, void *data, size_t len,
                           const ucp_am_recv_param_t *param)
{
    (void)arg;
    btl_credit_put_hdr_t h{};
    if (hlen == sizeof(h)) std::memcpy(&h, header, sizeof(h));
    const FrameLimits limits{g.nprocs, g.me, g.payload_cap, MCA_BTL_TAG_PML};
    const char *bad = check_put(hlen, h, len, limits);
    if (!bad && !rdrp_ucx_reg_covers(h.region_id, static_cast<uintptr_t>(h.addr), len))
        bad = "put outside the receiver's registered memory";
    if (OPAL_UNLIKELY(bad != nullptr)) {
        char v[128];
        snprintf(v, sizeof(v), "(%zu bytes at 0x%llx, region %llu, from vpid %u)", len,
                 (unsigned long long)h.addr, (unsigned long long)h.region_id, h.src);
        fatal("bad-header", bad, v);
    }
    void *dst = reinterpret_cast<void *>(static_cast<uintptr_t>(h.addr));
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        if (len) std::memcpy(dst, data, len);
        return UCS_OK;
    }
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
    p.cb.recv_am = put_landed;
    ucs_status_ptr_t sp = ucp_am_recv_data_nbx(g.worker, data, dst, len, &p);
    if (UCS_PTR_IS_ERR(sp)) fatal_status("put receive", UCS_PTR_STATUS(sp));
    if (sp != nullptr) ++g.outstanding;
    return UCS_INPROGRESS;
}

int complete_rdma()
{
    thread_local std::vector<RdmaOp *> done;
    {
        Lock lock;
        if (g.rdma_done.empty()) return 0;
        done.swap(g.rdma_done);
    }
    for (RdmaOp *op : done)
        if (op->cb) op->cb(&mca_btl_credit_module, op->ep, op->local, op->local_handle, op->ctx, op->data,
               op->status);
    int n = static_cast<int>(done.size());
    Lock lock;
    for (RdmaOp *op : done) {
        if (op->rkey) rdrp_ucx_rkey_put(g.uw, op->rkey);
        g.op_pool.push_back(op);
    }
    done.clear();
    return n;
}

void rdma_fini()
{
    get_reply_fini();
    for (RdmaOp *op : g.op_pool) delete op;
    g.op_pool.clear();
    g.rdma_done.clear();
}

static int start_failed(const char *what, mca_btl_base_endpoint_t *ep, ucs_status_t st, RdmaOp *op)
{
    BTL_CREDIT_VERBOSE(1, "%s to %s failed: %s", what, OPAL_NAME_PRINT(ep->name), ucs_status_string(st));
    if (op->rkey) rdrp_ucx_rkey_put(g.uw, op->rkey);
    g.op_pool.push_back(op);
    return OPAL_ERROR;
}

/* A started operation: done at once (its callback then runs from
 * progress, never inside put/get), failed, or in flight. */
int rdma_started(const char *what, mca_btl_base_endpoint_t *ep, ucs_status_ptr_t sp, RdmaOp *op)
{
    if (op->put_bytes && !UCS_PTR_IS_ERR(sp)) ep->put_rate.started(now_ns(), op->put_bytes, op->put_eager);
    if (sp == nullptr) {
        if (op->put_bytes) put_finished(ep, op->put_bytes, op->put_eager);
        g.rdma_done.push_back(op);
    }
    else if (UCS_PTR_IS_ERR(sp)) return start_failed(what, ep, UCS_PTR_STATUS(sp), op);
    else ++g.outstanding;
    return OPAL_SUCCESS;
}

void rdma_op_param(ucp_request_param_t *p, RdmaOp *op)
{
    p->op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p->cb.send = rdma_done;
    p->user_data = op;
}

RdmaOp *rdma_op_for(mca_btl_base_endpoint_t *ep, mca_btl_base_registration_handle_t *h, void *local,
                    mca_btl_base_registration_handle_t *local_handle,
                    mca_btl_base_rdma_completion_fn_t cb, void *ctx, void *data, int *rc)
{
    endpoint_connect(ep);
    rdrp_ucx_rkey_t *k = rdrp_ucx_rkey_get(g.uw, ep->ep, ep->peer_id, h->region_id, h->rkey, h->rkey_len);
    if (OPAL_UNLIKELY(!k)) {
        BTL_CREDIT_VERBOSE(1, "cannot unpack the rkey of %s: %s", OPAL_NAME_PRINT(ep->name),
                           rdrp_ucx_last_error());
        *rc = OPAL_ERROR;
        return nullptr;
    }
    RdmaOp *op = rdma_op_get();
    if (OPAL_UNLIKELY(!op)) {
        rdrp_ucx_rkey_put(g.uw, k);
        *rc = OPAL_ERR_OUT_OF_RESOURCE;
        return nullptr;
    }
    *op = RdmaOp{ep, local, local_handle, cb, ctx, data, k, OPAL_SUCCESS, {}, 0, false};
    return op;
}

/* Start a get; lock held. */
static int get_start(mca_btl_base_endpoint_t *ep, void *local, uint64_t remote,
                     mca_btl_base_registration_handle_t *local_handle,
                     mca_btl_base_registration_handle_t *remote_handle, size_t size,
                     mca_btl_base_rdma_completion_fn_t cb, void *ctx, void *data)
{
    if (OPAL_UNLIKELY(remote_handle == nullptr || remote_handle->region_id == 0 ||
                      remote_handle->rkey_len > g.rkey_cap))
        return OPAL_ERR_BAD_PARAM;
    endpoint_connect(ep);
    const int cma = window_cma(false, ep, local, remote, local_handle, remote_handle, size, cb, ctx, data);
    if (cma != OPAL_ERR_NOT_AVAILABLE) return cma;
    if (get_by_reply(ep, remote_handle))
        return get_reply_start(ep, local, remote, local_handle, remote_handle, size, cb, ctx, data);
    int rc;
    RdmaOp *op = rdma_op_for(ep, remote_handle, local, local_handle, cb, ctx, data, &rc);
    if (OPAL_UNLIKELY(!op)) return rc;
    rdrp_ucx_rkey_t *k = op->rkey;
    ucp_request_param_t p;
    rdma_op_param(&p, op);
    ++g.stats[MCA_BTL_CREDIT_STAT_GETS];
    return rdma_started("get", ep, ucp_get_nbx(ep->ep, local, size, remote, rdrp_ucx_rkey_handle(k), &p), op);
}

/* Start a put (an active message to the target's registered memory, see
 * the top of this file); lock held. */
static int put_start(mca_btl_base_endpoint_t *ep, void *local, uint64_t remote,
                     mca_btl_base_registration_handle_t *local_handle,
                     mca_btl_base_registration_handle_t *remote_handle, size_t size,
                     mca_btl_base_rdma_completion_fn_t cb, void *ctx, void *data)
{
    if (OPAL_UNLIKELY(remote_handle == nullptr || remote_handle->region_id == 0))
        return OPAL_ERR_BAD_PARAM;
    endpoint_connect(ep);
    const int cma = window_cma(true, ep, local, remote, local_handle, remote_handle, size, cb, ctx, data);
    if (cma != OPAL_ERR_NOT_AVAILABLE) return cma;
    RdmaOp *op = rdma_op_get();
    if (OPAL_UNLIKELY(!op)) return OPAL_ERR_OUT_OF_RESOURCE;
    *op = RdmaOp{ep, local, local_handle, cb, ctx, data, nullptr, OPAL_SUCCESS, {}, size, false};
    op->put_hdr.version = BTL_CREDIT_WIRE_VERSION;
    op->put_hdr.src = g.me;
    op->put_hdr.region_id = remote_handle->region_id;
    op->put_hdr.addr = remote;
    ucp_request_param_t p;
    rdma_op_param(&p, op);
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    /* Rendezvous: completion = the data is at the target.  Eager (a slow
     * link, btl_credit_put_rate.h): completion = the data is in UCX's
     * hands; the target's handler copies it in before anything sent later
     * on this endpoint is handled (UCX sends every active message of an
     * endpoint on its one AM lane, in order), so ob1's FIN still finds it
     * there. */
    /* Never to memory registered for atomics (an MPI window): osc/rdma
     * takes a put's completion as the data being at the target, and a
     * window is read by other peers and the owner, which no FIN orders. */
    const bool eager = ep->emulated_rma() && !(remote_handle->access & MCA_BTL_REG_FLAG_REMOTE_ATOMIC) &&
                       ep->put_rate.next_eager();
    op->put_eager = eager;
    p.flags = eager ? UCP_AM_SEND_FLAG_EAGER : UCP_AM_SEND_FLAG_RNDV;
    ++g.stats[MCA_BTL_CREDIT_STAT_PUTS];
    if (eager) ++g.stats[MCA_BTL_CREDIT_STAT_EAGER_PUTS];
    return rdma_started("put", ep, ucp_am_send_nbx(ep->ep, BTL_CREDIT_AM_PUT, &op->put_hdr, sizeof(op->put_hdr),
                                               local, size, &p), op);
}

}  // namespace btlcredit

using namespace btlcredit;

extern "C" mca_btl_base_registration_handle_t *
mca_btl_credit_register_mem(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *ep, void *base,
                            size_t size, uint32_t flags)
{
    (void)ep;
    auto *h = static_cast<mca_btl_base_registration_handle_t *>(
        std::calloc(1, btl->btl_registration_handle_size));
    if (!h) return nullptr;
    const uint32_t remote_access = MCA_BTL_REG_FLAG_REMOTE_READ | MCA_BTL_REG_FLAG_REMOTE_WRITE |
                                   MCA_BTL_REG_FLAG_REMOTE_ATOMIC;
    if (!(flags & remote_access)) return h;  /* local only: nothing to map */
    Lock lock;
    rdrp_ucx_region_t *r = rdrp_ucx_reg_acquire(base, size);
    if (!r || r->rkey_len > g.rkey_cap) {
        if (r) {
            BTL_CREDIT_VERBOSE(1, "rkey of %zu bytes does not fit the %zu-byte handle", r->rkey_len,
                               g.rkey_cap);
            rdrp_ucx_reg_release(r);
        }
        std::free(h);
        return nullptr;
    }
    h->region_id = r->id;
    h->rkey_len = static_cast<uint32_t>(r->rkey_len);
    h->access = flags;
    window_cma_stamp(h);
    h->local = reinterpret_cast<uintptr_t>(r);
    std::memcpy(h->rkey, r->rkey_buf, r->rkey_len);
    return h;
}

extern "C" int mca_btl_credit_deregister_mem(mca_btl_base_module_t *btl,
                                             mca_btl_base_registration_handle_t *handle)
{
    (void)btl;
    if (!handle) return OPAL_SUCCESS;
    if (handle->local) {
        Lock lock;
        rdrp_ucx_reg_release(reinterpret_cast<rdrp_ucx_region_t *>(handle->local));
    }
    std::free(handle);
    return OPAL_SUCCESS;
}

extern "C" int mca_btl_credit_get(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *ep,
                                  void *local_address, uint64_t remote_address,
                                  mca_btl_base_registration_handle_t *local_handle,
                                  mca_btl_base_registration_handle_t *remote_handle, size_t size,
                                  int flags, int order, mca_btl_base_rdma_completion_fn_t cbfunc,
                                  void *cbcontext, void *cbdata)
{
    (void)btl;
    (void)flags;
    (void)order;
    Lock lock;
    return get_start(ep, local_address, remote_address, local_handle, remote_handle, size, cbfunc,
                     cbcontext, cbdata);
}

extern "C" int mca_btl_credit_put(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *ep,
                                  void *local_address, uint64_t remote_address,
                                  mca_btl_base_registration_handle_t *local_handle,
                                  mca_btl_base_registration_handle_t *remote_handle, size_t size,
                                  int flags, int order, mca_btl_base_rdma_completion_fn_t cbfunc,
                                  void *cbcontext, void *cbdata)
{
    (void)btl;
    (void)flags;
    (void)order;
    Lock lock;
    return put_start(ep, local_address, remote_address, local_handle, remote_handle, size, cbfunc,
                     cbcontext, cbdata);
}
