/*
 * btl/credit: memory registration, put and get for ob1's RGET / RPUT.
 *
 * register_mem maps memory that peers will access through ucx_glue's
 * registration cache and puts the packed rkey inline in the handle (ob1
 * copies the handle into its RGET / PUT headers); a handle for local use
 * only maps nothing, since ucp_get_nbx / ucp_put_nbx need no local memory
 * handle.  get and put unpack the peer's rkey through ucx_glue's rkey
 * cache.  A get is complete when ucp_get_nbx completes; a put only when a
 * flush of the endpoint completes (remote completion: ob1 sends FIN right
 * after, and an active message is not ordered after a put by itself).
 *
 * On UCX 1.13 over shared memory and tcp these operations are emulated
 * through the peer's progress (ucx-1.13-notes.md §2): the peer of an ob1
 * RGET is its sender, which progresses our worker while it waits for FIN.
 */
#include "btl_credit_internal.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

namespace btlcredit {

static RdmaOp *op_get()
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

static void rdma_done(void *request, ucs_status_t status, void *user_data)
{
    RdmaOp *op = static_cast<RdmaOp *>(user_data);
    op->status = status == UCS_OK ? OPAL_SUCCESS : OPAL_ERROR;
    --g.outstanding;
    g.rdma_done.push_back(op);
    ucp_request_free(request);
}

bool rdma_init()
{
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

int complete_rdma()
{
    thread_local std::vector<RdmaOp *> done;
    {
        Lock lock;
        if (g.rdma_done.empty()) return 0;
        done.swap(g.rdma_done);
    }
    for (RdmaOp *op : done)
        op->cb(&mca_btl_credit_module, op->ep, op->local, op->local_handle, op->ctx, op->data,
               op->status);
    int n = static_cast<int>(done.size());
    Lock lock;
    for (RdmaOp *op : done) {
        rdrp_ucx_rkey_put(g.uw, op->rkey);
        g.op_pool.push_back(op);
    }
    done.clear();
    return n;
}

void rdma_fini()
{
    for (RdmaOp *op : g.op_pool) delete op;
    g.op_pool.clear();
    g.rdma_done.clear();
}

/* Start a put or a get; lock held. */
static int rdma_start(bool is_put, mca_btl_base_endpoint_t *ep, void *local, uint64_t remote,
                      mca_btl_base_registration_handle_t *local_handle,
                      mca_btl_base_registration_handle_t *remote_handle, size_t size,
                      mca_btl_base_rdma_completion_fn_t cb, void *ctx, void *data)
{
    if (OPAL_UNLIKELY(remote_handle == nullptr || remote_handle->region_id == 0 ||
                      remote_handle->rkey_len > g.rkey_cap))
        return OPAL_ERR_BAD_PARAM;
    endpoint_connect(ep);
    rdrp_ucx_rkey_t *k = rdrp_ucx_rkey_get(g.uw, ep->ep, ep->peer_id, remote_handle->region_id,
                                           remote_handle->rkey, remote_handle->rkey_len);
    if (OPAL_UNLIKELY(!k)) {
        BTL_CREDIT_VERBOSE(1, "cannot unpack the rkey of %s: %s", OPAL_NAME_PRINT(ep->name),
                           rdrp_ucx_last_error());
        return OPAL_ERROR;
    }
    RdmaOp *op = op_get();
    if (OPAL_UNLIKELY(!op)) {
        rdrp_ucx_rkey_put(g.uw, k);
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    *op = RdmaOp{ep, local, local_handle, cb, ctx, data, k, OPAL_SUCCESS};
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = rdma_done;
    p.user_data = op;
    ucs_status_ptr_t sp;
    if (is_put) {
        ucp_request_param_t pp;
        pp.op_attr_mask = 0;
        sp = ucp_put_nbx(ep->ep, local, size, remote, rdrp_ucx_rkey_handle(k), &pp);
        if (UCS_PTR_IS_PTR(sp)) ucp_request_free(sp);  /* released when done; the flush waits */
        if (!UCS_PTR_IS_ERR(sp)) sp = ucp_ep_flush_nbx(ep->ep, &p);
        ++g.stats[MCA_BTL_CREDIT_STAT_PUTS];
    } else {
        sp = ucp_get_nbx(ep->ep, local, size, remote, rdrp_ucx_rkey_handle(k), &p);
        ++g.stats[MCA_BTL_CREDIT_STAT_GETS];
    }
    if (sp == nullptr) {
        g.rdma_done.push_back(op);  /* callback from progress, never inside put/get */
    } else if (UCS_PTR_IS_ERR(sp)) {
        BTL_CREDIT_VERBOSE(1, "%s to %s failed: %s", is_put ? "put" : "get",
                           OPAL_NAME_PRINT(ep->name), ucs_status_string(UCS_PTR_STATUS(sp)));
        rdrp_ucx_rkey_put(g.uw, k);
        g.op_pool.push_back(op);
        return OPAL_ERROR;
    } else {
        ++g.outstanding;
    }
    return OPAL_SUCCESS;
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
    return rdma_start(false, ep, local_address, remote_address, local_handle, remote_handle, size,
                      cbfunc, cbcontext, cbdata);
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
    return rdma_start(true, ep, local_address, remote_address, local_handle, remote_handle, size,
                      cbfunc, cbcontext, cbdata);
}
