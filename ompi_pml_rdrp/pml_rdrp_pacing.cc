/*
 * pml/rdrp: sends waiting for credit, the budget of early-completed
 * copies, and the wait limit after which a waiting send goes by
 * rendezvous.  See pml_rdrp_pacing.h.
 */
#include "pml_rdrp_request.h"
#include "pml_rdrp_credit.h"
#include "pml_rdrp_pacing.h"
#include "pml_rdrp_throttle.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace rdrp {

size_t pacing_waiting_eps = 0;
size_t pacing_buffered = 0;
thread_local bool pacing_blocking_send = false;

namespace {

std::vector<Endpoint *> waiting;  /* endpoints with a non-empty queue */

inline uint32_t vpid_of(const Endpoint *ep) { return ep->proc->super.proc_name.vpid; }

/* A user's blocking standard send of eager size may complete from a copy. */
bool may_copy(const Request *r)
{
    return pacing_blocking_send && !r->internal && r->mode != MCA_PML_BASE_SEND_SYNCHRONOUS &&
           eager_for(r->ep, r->packed) &&
           pacing_buffered + r->packed + sizeof(Request) <= mca_pml_rdrp_params.send_buffer;
}

/* An internal request that carries a copy of r's data and r's place in
 * the stream (sequence number, admission tokens); r completes now. */
Request *copy_carrier(Request *r)
{
    Request *c = req_alloc(REQ_SEND);
    char *copy = static_cast<char *>(malloc(r->packed ? r->packed : 1));
    if (!c || !copy) {
        free(copy);
        if (c) req_release(c);
        return nullptr;
    }
    if (r->packed) std::memcpy(copy, r->data, r->packed);
    c->buf = copy;
    c->count = r->packed;
    c->dtype = &ompi_mpi_byte.dt;
    OMPI_DATATYPE_RETAIN(c->dtype);
    c->comm = r->comm;
    OBJ_RETAIN(c->comm);  /* the carrier outlives r: released in req_release */
    c->peer = r->peer;
    c->tag = r->tag;
    c->mode = MCA_PML_BASE_SEND_STANDARD;
    c->internal = true;
    c->ep = r->ep;
    c->ompi.req_mpi_object.comm = r->comm;
    c->ucx_pending = 0;
    c->need_ack = c->acked = false;
    c->rndv = c->rndv_done = false;
    req_prepare_data(c);
    c->staging = copy;  /* freed with the carrier's activation */
    c->seq = r->seq;
    c->thr_held = r->thr_held;  /* the carrier's injection is what the tokens pay for */
    c->thr_tokens = r->thr_tokens;
    r->thr_held = false;
    c->buffered_len = r->packed + sizeof(Request);
    pacing_buffered += c->buffered_len;
    if (pacing_buffered > stats.send_buffered_hwm) stats.send_buffered_hwm = pacing_buffered;
    ++stats.send_buffered;
    return c;
}

/* Send the head of ep's queue if it may go; false if it must wait. */
bool try_leave(Request *r, double now)
{
    const mca_pml_rdrp_params_t &p = mca_pml_rdrp_params;
    int rc;
    if (eager_for(r->ep, r->packed)) {
        uint32_t piggy;
        if (credit_take(vpid_of(r->ep), &piggy, false)) {
            rc = send_eager(r, r->seq, true, piggy);
        } else if (peer_has_unread(r->ep)) {
            /* the receiver has not read what we sent yet (it is away:
             * asleep, descheduled, computing): nothing it waits for can
             * be stuck behind its mailbox, and an RTS would wait for it
             * like the credits do.  The wait is counted from its reading. */
            r->wait_since = now;
            return false;
        } else if (now - r->wait_since >= p.credit_wait_us * 1e-6) {
            ++stats.credit_wait_timeouts;  /* the envelope goes ahead without a credit */
            rc = send_rts(r, r->seq);
        } else {
            return false;
        }
    } else {
        rc = send_rts(r, r->seq);  /* takes a credit for its first chunk if it can */
    }
    if (r->thr_held && (rc != OMPI_SUCCESS || r->ucx_pending == 0)) throttle_release(r);  /* left inline */
    if (rc != OMPI_SUCCESS) {
        r->ompi.req_status.MPI_ERROR = MPI_ERR_INTERN;
        req_complete(r);
        return true;
    }
    send_check_complete(r);
    return true;
}

/* Let ep's waiting sends go, in order, as far as they may. */
void drain(Endpoint *ep, double now)
{
    while (!ep->waiting.empty()) {
        Request *r = ep->waiting.front();
        if (!try_leave(r, now)) break;
        ep->waiting.pop_front();
    }
}

}  // namespace

int pacing_enqueue(Request *r)
{
    Endpoint *ep = r->ep;
    Request *q = r;
    r->wait_since = MPI_Wtime();
    if (may_copy(r)) {
        q = copy_carrier(r);
        if (!q) return OMPI_ERR_OUT_OF_RESOURCE;
        q->wait_since = r->wait_since;
    }
    if (ep->waiting.empty()) {
        waiting.push_back(ep);
        pacing_waiting_eps = waiting.size();
    }
    ep->waiting.push_back(q);
    ++stats.credit_waits;
    if (q != r) {
        r->ompi.req_status.MPI_ERROR = MPI_SUCCESS;
        req_complete(r);
    }
    /* credit packets may be waiting for us: a producer that never waits
     * must still hear its receiver */
    progress_once();
    drain(ep, MPI_Wtime());
    return OMPI_SUCCESS;
}

int pacing_progress()
{
    if (waiting.empty()) return 0;
    static bool draining = false;  /* a send completing inline may come back here */
    if (draining) return 0;
    draining = true;
    int n = 0;
    double now = MPI_Wtime();
    for (size_t i = 0; i < waiting.size();) {
        Endpoint *ep = waiting[i];
        size_t before = ep->waiting.size();
        drain(ep, now);
        n += static_cast<int>(before - ep->waiting.size());
        if (ep->waiting.empty()) {
            waiting[i] = waiting.back();
            waiting.pop_back();
        } else {
            ++i;
        }
    }
    pacing_waiting_eps = waiting.size();
    draining = false;
    return n;
}

void pacing_fini()
{
    for (Endpoint *ep : waiting) {
        if (!ep->waiting.empty())
            RDRP_VERBOSE(1, "finalize: %zu sends still wait for credit", ep->waiting.size());
        ep->waiting.clear();
    }
    waiting.clear();
    pacing_waiting_eps = 0;
}

}  // namespace rdrp
