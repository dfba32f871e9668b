/*
 * btl/credit: remote atomics (btl_atomic_op, _fop, _cswap) for osc/rdma.
 *
 * osc/rdma takes a btl for MPI windows only if it offers RDMA and fetching
 * atomics; it builds its locks from fetch-and-add and compare-and-swap and
 * does single-element accumulates with the others.  Each maps onto one
 * ucp_atomic_op_nbx to the peer's registered memory (the rkey travels in
 * the registration handle, as for get).
 *
 * Every operation fetches: a non-fetching UCX atomic completes once it has
 * left (a later flush would be needed to know it was applied), while osc/rdma
 * takes the completion callback as the operation being done at the target
 * (it releases a lock, or returns from MPI_Win_flush, right after).  A
 * fetching one completes when the old value is back, so the result of an
 * atomic_op goes to a word in the op and is dropped.
 *
 * The context runs UCX's CPU atomic mode (rdrp_ucx_context_amo_cpu), so
 * these are atomic with respect to the target's own CPU atomics and the
 * module says MCA_BTL_ATOMIC_SUPPORTS_GLOB: osc/rdma then updates its own
 * rank's window with the CPU and needs no btl endpoint to itself.
 * Operations UCP lacks (MIN, MAX, the logical ones, floating point) return
 * OPAL_ERR_NOT_SUPPORTED before anything is sent; osc/rdma then
 * accumulates by get-op-put under its accumulate lock.
 */
#include "btl_credit_internal.h"

#include <cstring>

namespace btlcredit {

/* The UCP operation for a btl one; false if UCP has none. */
static bool ucp_op_for(mca_btl_base_atomic_op_t op, ucp_atomic_op_t *out)
{
    switch (op) {
    case MCA_BTL_ATOMIC_ADD: *out = UCP_ATOMIC_OP_ADD; return true;
    case MCA_BTL_ATOMIC_AND: *out = UCP_ATOMIC_OP_AND; return true;
    case MCA_BTL_ATOMIC_OR: *out = UCP_ATOMIC_OP_OR; return true;
    case MCA_BTL_ATOMIC_XOR: *out = UCP_ATOMIC_OP_XOR; return true;
    case MCA_BTL_ATOMIC_SWAP: *out = UCP_ATOMIC_OP_SWAP; return true;
    default: return false;
    }
}

/* Start one fetching atomic; lock held.  result: where the old value goes
 * (nullptr: into the op, dropped).  CSWAP: operand is the compare value and
 * swap the new one, which UCX takes from the reply buffer. */
static int amo_start(mca_btl_base_endpoint_t *ep, ucp_atomic_op_t uop, void *result,
                     uint64_t remote, mca_btl_base_registration_handle_t *local_handle,
                     mca_btl_base_registration_handle_t *remote_handle, uint64_t operand,
                     uint64_t swap, int flags, mca_btl_base_rdma_completion_fn_t cb, void *ctx,
                     void *data)
{
    if (OPAL_UNLIKELY(flags & MCA_BTL_ATOMIC_FLAG_FLOAT)) return OPAL_ERR_NOT_SUPPORTED;
    if (OPAL_UNLIKELY(remote_handle == nullptr || remote_handle->region_id == 0 ||
                      remote_handle->rkey_len > g.rkey_cap))
        return OPAL_ERR_BAD_PARAM;
    const bool is32 = (flags & MCA_BTL_ATOMIC_FLAG_32BIT) != 0;
    const size_t width = is32 ? 4 : 8;
    if (OPAL_UNLIKELY(remote % width != 0)) return OPAL_ERR_BAD_PARAM;  /* UCX requires alignment */
    int rc;
    RdmaOp *op = rdma_op_for(ep, remote_handle, result, local_handle, cb, ctx, data, &rc);
    if (OPAL_UNLIKELY(!op)) return rc;
    rdrp_ucx_rkey_t *k = op->rkey;
    /* UCX reads the operand and the swap value of a width-sized word at the
     * addresses given; the op keeps both alive until completion. */
    void *reply = result ? result : &op->amo_reply;
    if (is32) {
        const uint32_t o = static_cast<uint32_t>(operand), s = static_cast<uint32_t>(swap);
        std::memcpy(&op->amo_operand, &o, 4);
        if (uop == UCP_ATOMIC_OP_CSWAP) std::memcpy(reply, &s, 4);
    } else {
        op->amo_operand = operand;
        if (uop == UCP_ATOMIC_OP_CSWAP) std::memcpy(reply, &swap, 8);
    }
    ucp_request_param_t p;
    rdma_op_param(&p, op);
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER;
    p.datatype = ucp_dt_make_contig(width);
    p.reply_buffer = reply;
    ++g.stats[MCA_BTL_CREDIT_STAT_ATOMICS];
    return rdma_started("atomic", ep,
                        ucp_atomic_op_nbx(ep->ep, uop, &op->amo_operand, 1, remote,
                                          rdrp_ucx_rkey_handle(k), &p),
                        op);
}

}  // namespace btlcredit

using namespace btlcredit;

extern "C" int mca_btl_credit_aop(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *ep,
                                  uint64_t remote_address,
                                  mca_btl_base_registration_handle_t *remote_handle,
                                  mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
                                  mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                                  void *cbdata)
{
    (void)btl;
    (void)order;
    ucp_atomic_op_t uop;
    if (!ucp_op_for(op, &uop)) return OPAL_ERR_NOT_SUPPORTED;
    Lock lock;
    return amo_start(ep, uop, nullptr, remote_address, nullptr, remote_handle, operand, 0, flags,
                     cbfunc, cbcontext, cbdata);
}

extern "C" int mca_btl_credit_afop(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *ep,
                                   void *local_address, uint64_t remote_address,
                                   mca_btl_base_registration_handle_t *local_handle,
                                   mca_btl_base_registration_handle_t *remote_handle,
                                   mca_btl_base_atomic_op_t op, uint64_t operand, int flags,
                                   int order, mca_btl_base_rdma_completion_fn_t cbfunc,
                                   void *cbcontext, void *cbdata)
{
    (void)btl;
    (void)order;
    ucp_atomic_op_t uop;
    if (!ucp_op_for(op, &uop)) return OPAL_ERR_NOT_SUPPORTED;
    if (OPAL_UNLIKELY(local_address == nullptr)) return OPAL_ERR_BAD_PARAM;
    Lock lock;
    return amo_start(ep, uop, local_address, remote_address, local_handle, remote_handle, operand, 0,
                     flags, cbfunc, cbcontext, cbdata);
}

extern "C" int mca_btl_credit_acswap(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *ep,
                                     void *local_address, uint64_t remote_address,
                                     mca_btl_base_registration_handle_t *local_handle,
                                     mca_btl_base_registration_handle_t *remote_handle,
                                     uint64_t compare, uint64_t value, int flags, int order,
                                     mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext,
                                     void *cbdata)
{
    (void)btl;
    (void)order;
    if (OPAL_UNLIKELY(local_address == nullptr)) return OPAL_ERR_BAD_PARAM;
    Lock lock;
    return amo_start(ep, UCP_ATOMIC_OP_CSWAP, local_address, remote_address, local_handle,
                     remote_handle, compare, value, flags, cbfunc, cbcontext, cbdata);
}
