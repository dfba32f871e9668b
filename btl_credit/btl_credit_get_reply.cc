/*
 * btl/credit: gets from MPI windows answered by a rendezvous send.
 *
 * On UCX 1.13 a ucp_get_nbx from user memory on the node (and over TCP) is
 * emulated: one request per 8 KiB fragment, each answered by the target's
 * progress (ucx-1.13-notes.md §2).  ob1's RGET does not mind (its target is
 * the sender, which spins on the FIN meanwhile), but an osc/rdma window's
 * owner is usually elsewhere -- in a barrier, in a sched_yield when
 * oversubscribed -- and every fragment waited for it: MPICH's
 * derived_acc_flush_local (500 accumulates of 4 MB, each a get-op-put)
 * took 243 s at np 3 on 2 cores against 25 s under ob1 + vader, whose CMA
 * get needs no target at all.
 *
 * So a get from memory registered for atomics, on the node or to a remote
 * peer without a native get, is one request (BTL_CREDIT_AM_GET_REQ) that the target answers once
 * with the whole range as a UCX rendezvous active message
 * (BTL_CREDIT_AM_GET_REP); the origin receives it straight into the get's
 * buffer (UCX pulls it by CMA on the node).  The target checks the range
 * lies in a region it registered before sending a byte, as for puts.
 * Completion is the data landing, as for ucp_get_nbx.
 */
#include "btl_credit_internal.h"
#include "btl_credit_wire_check.h"

#include <cstdio>
#include <cstring>
#include <new>
#include <unordered_map>

namespace btlcredit {

namespace {

/* The origin's gets awaiting their answer, by token. */
std::unordered_map<uint64_t, RdmaOp *> awaiting;
uint64_t next_token = 1;

/* A request or an answer's header, alive until UCX is done with it. */
struct HdrSend {
    union {
        btl_credit_get_req_t req;
        btl_credit_get_rep_t rep;
    };
};

void hdr_sent(void *request, ucs_status_t status, void *user_data)
{
    if (OPAL_UNLIKELY(status != UCS_OK) && g.up) fatal_status("window get", status);
    delete static_cast<HdrSend *>(user_data);
    --g.outstanding;
    ucp_request_free(request);
}

/* Send header (and payload) as one AM; the header is freed when UCX is
 * done with it.  Lock held. */
ucs_status_t send_hdr(ucp_ep_h ep, unsigned id, HdrSend *h, size_t hlen, const void *data,
                      size_t len, uint32_t flags)
{
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    p.cb.send = hdr_sent;
    p.user_data = h;
    p.flags = flags;
    ucs_status_ptr_t sp = ucp_am_send_nbx(ep, id, h, hlen, data, len, &p);
    if (sp == nullptr) {
        delete h;
        return UCS_OK;
    }
    if (UCS_PTR_IS_ERR(sp)) {
        delete h;
        return UCS_PTR_STATUS(sp);
    }
    ++g.outstanding;
    return UCS_OK;
}

[[noreturn]] void bad(const char *why, uint32_t src, uint64_t a, uint64_t b)
{
    char v[128];
    snprintf(v, sizeof(v), "(window get from vpid %u: 0x%llx, %llu)", src, (unsigned long long)a,
             (unsigned long long)b);
    fatal("bad-header", why, v);
}

/* Target: answer a request (inside ucp_worker_progress, lock held). */
ucs_status_t am_get_req(void *arg, const void *header, size_t hlen, void *data, size_t len,
                        const ucp_am_recv_param_t *param)
{
    (void)arg;
    (void)data;
    (void)param;
    btl_credit_get_req_t h{};
    if (hlen == sizeof(h)) std::memcpy(&h, header, sizeof(h));
    const FrameLimits limits{g.nprocs, g.me, g.payload_cap, MCA_BTL_TAG_PML};
    const char *why = check_get_req(hlen, h, len, limits);
    if (!why && !rdrp_ucx_reg_covers(h.region_id, static_cast<uintptr_t>(h.addr), h.len))
        why = "get outside the target's registered memory";
    if (OPAL_UNLIKELY(why != nullptr)) bad(why, h.src, h.addr, h.len);
    mca_btl_base_endpoint_t *ep = endpoint_for_index(peer_index(h.src));
    endpoint_connect(ep);
    auto *rep = new (std::nothrow) HdrSend;
    if (!rep) fatal_status("window get answer", UCS_ERR_NO_MEMORY);
    rep->rep = btl_credit_get_rep_t{BTL_CREDIT_WIRE_VERSION, 0, g.me, h.token};
    ucs_status_t st = send_hdr(ep->ep, BTL_CREDIT_AM_GET_REP, rep, sizeof(rep->rep),
                               reinterpret_cast<const void *>(static_cast<uintptr_t>(h.addr)),
                               h.len, 0 /* UCX's choice: eager when small, else rendezvous */);
    if (st != UCS_OK) fatal_status("window get answer", st);
    return UCS_OK;
}

void get_landed(void *request, ucs_status_t status, size_t length, void *user_data)
{
    (void)length;
    RdmaOp *op = static_cast<RdmaOp *>(user_data);
    op->status = status == UCS_OK ? OPAL_SUCCESS : OPAL_ERROR;
    --g.outstanding;
    g.rdma_done.push_back(op);
    ucp_request_free(request);
}

/* Origin: the answer (inside ucp_worker_progress, lock held). */
ucs_status_t am_get_rep(void *arg, const void *header, size_t hlen, void *data, size_t len,
                        const ucp_am_recv_param_t *param)
{
    (void)arg;
    btl_credit_get_rep_t h{};
    if (hlen == sizeof(h)) std::memcpy(&h, header, sizeof(h));
    const FrameLimits limits{g.nprocs, g.me, g.payload_cap, MCA_BTL_TAG_PML};
    const char *why = check_get_rep(hlen, h, limits);
    auto it = why ? awaiting.end() : awaiting.find(h.token);
    if (!why && it == awaiting.end()) why = "answer to no window get in flight";
    if (!why && it->second->get_len != len) why = "window get answered with another length";
    if (OPAL_UNLIKELY(why != nullptr)) bad(why, h.src, h.token, len);
    RdmaOp *op = it->second;
    awaiting.erase(it);
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        if (len) std::memcpy(op->local, data, len);
        g.rdma_done.push_back(op);
        return UCS_OK;
    }
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv_am = get_landed;
    p.user_data = op;
    ucs_status_ptr_t sp = ucp_am_recv_data_nbx(g.worker, data, op->local, len, &p);
    if (UCS_PTR_IS_ERR(sp)) fatal_status("window get receive", UCS_PTR_STATUS(sp));
    if (sp == nullptr) g.rdma_done.push_back(op);
    else ++g.outstanding;
    return UCS_INPROGRESS;
}

}  // namespace

bool get_reply_init()
{
    return rdrp_ucx_set_am_handler(g.uw, BTL_CREDIT_AM_GET_REQ, am_get_req, nullptr) == 0 &&
           rdrp_ucx_set_am_handler(g.uw, BTL_CREDIT_AM_GET_REP, am_get_rep, nullptr) == 0;
}

/* On the node UCX 1.13's get lanes (posix/sysv) serve only memory UCX
 * allocated itself: from user memory, which windows are, it emulates the get
 * whatever the endpoint's lanes say (ucx-1.13-notes.md §2). */
bool get_by_reply(const mca_btl_base_endpoint_t *ep, const mca_btl_base_registration_handle_t *h)
{
    return (h->access & MCA_BTL_REG_FLAG_REMOTE_ATOMIC) && (!ep->remote || !ep->native_get);
}

int get_reply_start(mca_btl_base_endpoint_t *ep, void *local, uint64_t remote,
                    mca_btl_base_registration_handle_t *local_handle,
                    mca_btl_base_registration_handle_t *remote_handle, size_t size,
                    mca_btl_base_rdma_completion_fn_t cb, void *ctx, void *data)
{
    RdmaOp *op = rdma_op_get();
    if (OPAL_LIKELY(op) && size == 0) {
        *op = RdmaOp{ep, local, local_handle, cb, ctx, data, nullptr, OPAL_SUCCESS, {}, 0, false};
        g.rdma_done.push_back(op);  /* nothing to move; completes from progress */
        return OPAL_SUCCESS;
    }
    auto *req = new (std::nothrow) HdrSend;
    if (OPAL_UNLIKELY(!op || !req)) {
        if (op) g.op_pool.push_back(op);
        delete req;
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    *op = RdmaOp{ep, local, local_handle, cb, ctx, data, nullptr, OPAL_SUCCESS, {}, 0, false};
    op->get_len = size;
    const uint64_t token = next_token++;
    req->req = btl_credit_get_req_t{BTL_CREDIT_WIRE_VERSION, 0, g.me, remote_handle->region_id, remote,
                                    size, token};
    ucs_status_t st = send_hdr(ep->ep, BTL_CREDIT_AM_GET_REQ, req, sizeof(req->req), nullptr, 0,
                               UCP_AM_SEND_FLAG_EAGER);
    if (st != UCS_OK) {
        BTL_CREDIT_VERBOSE(1, "window get from %s failed: %s", OPAL_NAME_PRINT(ep->name),
                           ucs_status_string(st));
        g.op_pool.push_back(op);
        return OPAL_ERROR;
    }
    awaiting.emplace(token, op);
    ++g.stats[MCA_BTL_CREDIT_STAT_GETS];
    ++g.stats[MCA_BTL_CREDIT_STAT_WINDOW_GETS];
    return OPAL_SUCCESS;
}

void get_reply_fini() { awaiting.clear(); }

}  // namespace btlcredit
