/* pml/rdrp: request, unexpected-descriptor and control-buffer pools;
 * request completion and the datatype helpers. */
#include "pml_rdrp_request.h"
#include "pml_rdrp_credit.h"
#include "pml_rdrp_pacing.h"

#include <cstdlib>
#include <cstring>

namespace rdrp {

State g;

/* ------------------------------------------------------------ ids */
uint64_t IdTable::add(void *p)
{
    uint32_t idx;
    if (!free_.empty()) {
        idx = free_.back();
        free_.pop_back();
    } else {
        idx = static_cast<uint32_t>(slots_.size());
        slots_.push_back({nullptr, 1});
    }
    slots_[idx].p = p;
    return (static_cast<uint64_t>(slots_[idx].gen) << 32) | idx;
}

void *IdTable::get(uint64_t id) const
{
    uint32_t idx = static_cast<uint32_t>(id);
    if (idx >= slots_.size()) return nullptr;
    const Slot &s = slots_[idx];
    return (s.gen == static_cast<uint32_t>(id >> 32)) ? s.p : nullptr;
}

void IdTable::remove(uint64_t id)
{
    uint32_t idx = static_cast<uint32_t>(id);
    if (idx >= slots_.size() || slots_[idx].gen != static_cast<uint32_t>(id >> 32)) return;
    slots_[idx].p = nullptr;
    if (++slots_[idx].gen == 0) slots_[idx].gen = 1;
    free_.push_back(idx);
}

/* ------------------------------------------------------------ requests */
Request *req_alloc_fresh(ReqKind kind)
{
    Request *r = static_cast<Request *>(calloc(1, sizeof(Request)));
    if (!r) return nullptr;
    OBJ_CONSTRUCT(&r->ompi, ompi_request_t);
    OBJ_CONSTRUCT(&r->conv, opal_convertor_t);
    ++g.live_requests;
    req_reinit(r, kind);
    return r;
}

/* Drop everything an activation owns (staging, convertor, registrations). */
static void req_reset_activation_slow(Request *r)
{
    if (r->buffered_len) {  /* an early-completed copy is done: the budget has room again */
        pacing_buffered -= r->buffered_len;
        r->buffered_len = 0;
    }
    if (r->staging) {
        if (r->staging_bsend) mca_pml_base_bsend_request_free(r->staging);
        else free(r->staging);
        r->staging = nullptr;
        r->staging_bsend = false;
    }
    if (r->conv_ready) {
        opal_convertor_cleanup(&r->conv);
        r->conv_ready = false;
    }
    if (r->region) {
        rdrp_ucx_reg_release(r->region);
        r->region = nullptr;
    }
    if (r->rkey) {
        rdrp_ucx_rkey_put(g.uw, r->rkey);
        r->rkey = nullptr;
    }
    if (r->id) {
        g.ids.remove(r->id);
        r->id = 0;
    }
    delete r->deferred;
    r->deferred = nullptr;
}

/* Most activations (every eager message) own nothing: one test, no call.
 * Called at completion and again at release. */
static inline void req_reset_activation(Request *r)
{
    if (OPAL_UNLIKELY((r->buffered_len | r->id | reinterpret_cast<uintptr_t>(r->staging) |
                       reinterpret_cast<uintptr_t>(r->region) | reinterpret_cast<uintptr_t>(r->rkey) |
                       reinterpret_cast<uintptr_t>(r->deferred) | static_cast<uintptr_t>(r->conv_ready)) != 0))
        req_reset_activation_slow(r);
}

void req_release(Request *r)
{
    if (!r->pml_done) req_reset_activation(r);  /* req_complete did it for a completed one */
    if (r->dtype) {
        OMPI_DATATYPE_RELEASE(r->dtype);
        r->dtype = nullptr;
    }
    r->ompi.req_state = OMPI_REQUEST_INVALID;
    OMPI_REQUEST_FINI(&r->ompi);
    --g.live_requests;
    g.req_pool.push_back(r);
    if (r->comm) {
        /* last: the last reference destructs the communicator (del_comm) */
        ompi_communicator_t *comm = r->comm;
        r->comm = nullptr;
        OBJ_RELEASE(comm);
    }
}

/* Does completing r hand control back to the application?  Yes when r
 * is the last request its waiter waits for (MPI_Wait, the last of an
 * MPI_Waitall: its wait-sync's count is 1), and when nobody waits on it
 * (an MPI_Test loop looks at it after this progress pass; MPI_Recv's
 * own spin loop).  The last
 * completion of a Waitall ends a ring pass (transport_progress); the
 * others must not: a window of 64 receives completed one per pass meets
 * the producer in lock step, one shared cache line per message (half the
 * message rate at some sizes, measured). */
static bool ends_a_wait(const Request *r)
{
    void *state = const_cast<void *>(r->ompi.req_complete);
    if (state == REQUEST_PENDING) return true;  /* also the reused MPI_Recv request: no wait-sync */
    if (state == REQUEST_COMPLETED) return false;
    /* the count is another thread's only under MPI_THREAD_MULTIPLE; a
     * stale read merely ends a pass early or late */
    return __atomic_load_n(&static_cast<ompi_wait_sync_t *>(state)->count, __ATOMIC_RELAXED) <= 1;
}

void req_complete(Request *r)
{
    req_reset_activation(r);
    r->pml_done = true;
    if (r->internal || (r->user_freed && !r->persistent) ||
        (r->user_freed && r->persistent)) {
        req_release(r);
        return;
    }
    if (ends_a_wait(r)) ++g.wakeups;
    if (r == g.blocking_recv && !g.threads) {
        /* the reused MPI_Recv request: only our own spin loop waits on it,
         * with no callback and no wait-sync, so a plain store completes it
         * (ompi_request_complete's atomic exchange is on the latency path) */
        r->ompi.req_complete = REQUEST_COMPLETED;
        return;
    }
    /* last action: the completion callback may free the request */
    ompi_request_complete(&r->ompi, true);
}

int req_free_fn(ompi_request_t **rptr)
{
    Request *r = reinterpret_cast<Request *>(*rptr);
    Guard guard;
    r->user_freed = true;
    if (r->pml_done || (r->persistent && r->ompi.req_state == OMPI_REQUEST_INACTIVE)) {
        req_release(r);
    }
    *rptr = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

int req_cancel_fn(ompi_request_t *req, int complete)
{
    (void)complete;
    Request *r = reinterpret_cast<Request *>(req);
    Guard guard;
    /* Sends are never cancelled (MPI allows a cancel to fail: the send then
     * completes normally and MPI_Test_cancelled reports false).  A receive
     * is cancelled if it is still posted, i.e. not matched yet. */
    if (r->kind != REQ_RECV || r->pml_done) return OMPI_SUCCESS;
    CommState *cs = reinterpret_cast<CommState *>(r->comm->c_pml_comm);
    if (cs && rdrp_match_cancel(cs->mq, &r->match)) {
        r->ompi.req_status._cancelled = true;
        r->ompi.req_status.MPI_ERROR = MPI_SUCCESS;
        r->ompi.req_status._ucount = 0;
        req_complete(r);
    }
    return OMPI_SUCCESS;
}

/* ------------------------------------------------------------ data */
/* what req_prepare_data does not do inline: an empty buffer, or a
 * non-contiguous one (a convertor) */
int req_prepare_data_slow(Request *r)
{
    ompi_datatype_t *dt = r->dtype;
    if (r->count == 0 || dt->super.size == 0) {
        r->contig = true;
        r->data = const_cast<char *>(static_cast<const char *>(r->buf));
        r->packed = 0;
        return OMPI_SUCCESS;
    }
    r->contig = false;
    r->data = nullptr;
    if (r->kind == REQ_SEND) {
        opal_convertor_copy_and_prepare_for_send(ompi_proc_local_proc->super.proc_convertor,
                                                 &dt->super, r->count, r->buf, 0, &r->conv);
    } else {
        opal_convertor_copy_and_prepare_for_recv(ompi_proc_local_proc->super.proc_convertor,
                                                 &dt->super, r->count, r->buf, 0, &r->conv);
    }
    r->conv_ready = true;
    opal_convertor_get_packed_size(&r->conv, &r->packed);
    return OMPI_SUCCESS;
}

/* req_unpack() of a non-contiguous receive. */
void req_unpack_convertor(Request *r, size_t offset, const void *src, size_t len)
{
    size_t pos = offset;
    opal_convertor_set_position(&r->conv, &pos);
    struct iovec iov;
    iov.iov_base = const_cast<void *>(src);
    iov.iov_len = len;
    uint32_t iov_count = 1;
    size_t max = len;
    opal_convertor_unpack(&r->conv, &iov, &iov_count, &max);
}

/* ------------------------------------------------------------ pools */
Unexpected *unex_alloc()
{
    Unexpected *u;
    if (!g.unex_pool.empty()) {
        u = g.unex_pool.back();
        g.unex_pool.pop_back();
    } else {
        u = static_cast<Unexpected *>(malloc(sizeof(Unexpected)));
        if (!u) return nullptr;
        ++g.unex_made;
    }
    u->match.flags = 0;
    u->data = nullptr;
    u->owns_data = false;
    u->data_len = 0;
    u->rkey_len = 0;
    u->slot = -1;
    u->credit_due = false;
    return u;
}

void unex_release(Unexpected *u)
{
    if (u->credit_due) {  /* matched on arrival: account it off the latency path */
        u->credit_due = false;
        credit_consumed(u->credit_src, u->credit_piggy);
    }
    if (u->slot >= 0) {  /* matched and copied: the mailbox slot may earn its credit back */
        int32_t slot = u->slot;
        u->slot = -1;
        credit_slot_free(slot);
    }
    if (u->owns_data) free(u->data);
    u->data = nullptr;
    u->owns_data = false;
    g.unex_pool.push_back(u);
}

Ctrl *ctrl_alloc()
{
    if (!g.ctrl_pool.empty()) {
        Ctrl *c = g.ctrl_pool.back();
        g.ctrl_pool.pop_back();
        return c;
    }
    Ctrl *c = static_cast<Ctrl *>(calloc(1, sizeof(Ctrl)));
    if (c) ++g.ctrl_made;
    return c;
}

void ctrl_release(Ctrl *c) { g.ctrl_pool.push_back(c); }

}  // namespace rdrp
