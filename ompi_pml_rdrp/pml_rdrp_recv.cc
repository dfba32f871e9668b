/* pml/rdrp: the receive side: posting, arrivals, matching, probe/mprobe. */
#include "pml_rdrp_request.h"
#include "pml_rdrp_arrival.h"
#include "pml_rdrp_credit.h"

#include <cstdlib>
#include <cstring>

namespace rdrp {

/* ------------------------------------------------------------ delivery */
void send_ack(CommState *cs, int src, uint64_t sreq)
{
    Ctrl *c = ctrl_alloc();
    c->h.fin.sreq = sreq;
    ctrl_send(comm_endpoint(cs->comm, src), RDRP_AM_ACK, c, sizeof(rdrp_ack_hdr_t));
}

/* A matched (arrival, receive) pair: move the data or start the pull. */
void deliver(Unexpected *u, Request *r)
{
    size_t take = set_status(r, u->match.src, u->match.tag, u->total);
    if (u->type == RDRP_AM_EAGER) {
        req_unpack(r, 0, u->data, take);
        if (u->flags & RDRP_FLAG_SYNC) {
            send_ack(reinterpret_cast<CommState *>(r->comm->c_pml_comm), u->match.src, u->sreq);
        }
        unex_release(u);
        req_complete(r);
        return;
    }
    /* each releases u */
    if (u->proto == RDRP_PROTO_GET) get_recv_start(r, u);
    else if (u->proto == RDRP_PROTO_PUT) put_recv_start(r, u);
    else rndv_recv_start(r, u);
}

static void on_match(void *ctx, rdrp_match_item_t *arrival, rdrp_match_item_t *recv)
{
    (void)ctx;
    arrival->flags |= RDRP_ITEM_MATCHED;
    deliver(container_of(arrival, &Unexpected::match), container_of(recv, &Request::match));
}

/* Replay an arrival kept while its communicator did not exist here yet
 * (its payload is already ours). */
void arrival(CommState *cs, Unexpected *u)
{
    if (const char *why = wire::check_source(u->match.src, cs->size)) {
        unex_release(u);
        bad_header(why, static_cast<uint64_t>(u->match.src));
        return;
    }
    rdrp_match_arrive(cs->mq, &u->match, on_match, nullptr);
}

/* Copy transport-owned payload into memory of our own. */
static bool own_payload(Unexpected *u)
{
    if (u->credit_due) {  /* unmatched: it holds a mailbox slot from now on */
        u->credit_due = false;
        u->slot = credit_arrive(u->credit_src, u->credit_piggy);
    }
    if (u->owns_data || u->data_len == 0) return true;
    if (u->data_len <= sizeof(u->small)) {  /* small: in the descriptor (see Unexpected::small) */
        std::memcpy(u->small, u->data, u->data_len);
        u->data = u->small;
        ++stats.unexpected_inline;
        return true;
    }
    if (u->slot >= 0) {  /* credit-gated: the payload waits in its mailbox slot */
        char *mem = credit_slot_mem(u->slot);
        std::memcpy(mem, u->data, u->data_len);
        u->data = mem;
        return true;
    }
    char *copy = static_cast<char *>(malloc(u->data_len));
    if (!copy) return false;
    std::memcpy(copy, u->data, u->data_len);
    u->data = copy;
    u->owns_data = true;
    return true;
}

/* Common tail of the eager and RTS handlers. */
static void handle_arrival(const rdrp_match_hdr_t &m, Unexpected *u)
{
    u->match.src = m.src;
    u->match.tag = m.tag;
    u->match.seq = m.seq;
    u->match.flags = 0;
    u->cid = m.cid;
    CommState *cs = comm_state(m.cid);
    if (OPAL_UNLIKELY(!cs)) {
        /* the peer created the communicator before we did: keep it for add_comm */
        if (!own_payload(u)) mca_pml_rdrp_fatal("send-failed", "out of memory", "");
        g.pending_cid[m.cid].push_back(u);
        return;
    }
    if (const char *why = wire::check_source(m.src, cs->size)) {
        unex_release(u);
        bad_header(why, static_cast<uint64_t>(m.src));
        return;
    }
    /* When matched, deliver() released u to the pool, which keeps the
     * memory: the flag set by on_match is still readable. */
    rdrp_match_arrive(cs->mq, &u->match, on_match, nullptr);
    if (!(u->match.flags & RDRP_ITEM_MATCHED)) {
        ++stats.unexpected;
        if (!own_payload(u)) mca_pml_rdrp_fatal("send-failed", "out of memory", "");
    }
}

/* An eager message that did not meet its receive at once (eager_arrival's
 * slow path): a descriptor, queued as unexpected unless a receive takes it
 * in order (held-back messages, wildcards matched by order). */
void eager_unexpected(const rdrp_eager_hdr_t &h, void *data, size_t len)
{
    Unexpected *u = unex_alloc();
    if (!u) mca_pml_rdrp_fatal("send-failed", "out of memory", "");
    if (h.flags & RDRP_FLAG_CREDIT) {
        /* accounted when matched (deferred) or when it needs its mailbox slot */
        u->credit_due = true;
        u->credit_src = h.src_vpid;
        u->credit_piggy = h.credits;
    }
    u->type = RDRP_AM_EAGER;
    u->flags = h.flags;
    u->sreq = h.sreq;
    u->total = len;
    u->data_len = len;
    u->data = static_cast<char *>(data);
    handle_arrival(h.m, u);
}

/* The data of eager messages and of an RTS is read as payload: refuse it
 * when UCX delivered it by rendezvous (wire::check_eager_delivery). */
static inline bool delivered_eagerly(const ucp_am_recv_param_t *param, size_t len)
{
    const char *why = wire::check_eager_delivery(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV);
    if (OPAL_LIKELY(why == nullptr)) return true;
    bad_header(why, len);
    return false;
}

ucs_status_t am_eager_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                         const ucp_am_recv_param_t *param)
{
    (void)arg;
    Guard guard;
    if (!delivered_eagerly(param, len)) return UCS_OK;
    if (OPAL_UNLIKELY(hlen != sizeof(rdrp_eager_hdr_t))) {
        bad_header("eager header length", hlen);
        return UCS_OK;
    }
    rdrp_eager_hdr_t h;
    std::memcpy(&h, hdr, sizeof(h));
    eager_arrival(h, data, len);
    return UCS_OK;
}

/* RDRP_AM_EAGER_PACKED: the header is the first bytes of the payload. */
ucs_status_t am_eager_packed_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                                const ucp_am_recv_param_t *param)
{
    (void)arg; (void)hdr;
    Guard guard;
    if (!delivered_eagerly(param, len)) return UCS_OK;
    if (const char *why = wire::check_packed_length(hlen, len)) {
        bad_header(why, len);
        return UCS_OK;
    }
    rdrp_eager_hdr_t h;
    std::memcpy(&h, data, sizeof(h));
    eager_arrival(h, static_cast<char *>(data) + sizeof(h), len - sizeof(h));
    return UCS_OK;
}

ucs_status_t am_rts_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                       const ucp_am_recv_param_t *param)
{
    (void)arg;
    Guard guard;
    if (!delivered_eagerly(param, len)) return UCS_OK;
    if (OPAL_UNLIKELY(hlen < sizeof(rdrp_rts_hdr_t))) {
        bad_header("RTS header length", hlen);
        return UCS_OK;
    }
    rdrp_rts_hdr_t h;
    std::memcpy(&h, hdr, sizeof(h));
    if (const char *why = wire::check_rts(h, hlen, len, credit_limits())) {
        bad_header(why, h.rkey_len);
        return UCS_OK;
    }
    Unexpected *u = unex_alloc();
    if (!u) mca_pml_rdrp_fatal("send-failed", "out of memory", "");
    if (h.flags & RDRP_FLAG_CREDIT) u->slot = credit_arrive(h.src_vpid, h.credits);
    u->type = RDRP_AM_RTS;
    u->flags = h.flags;
    u->sreq = h.sreq;
    u->total = h.total_len;
    u->data_len = len;
    u->data = static_cast<char *>(data);
    u->path = h.path;
    u->proto = h.proto;
    u->raddr = h.raddr;
    u->region_id = h.region_id;
    u->rkey_len = h.rkey_len;
    std::memcpy(u->rkey, static_cast<const char *>(hdr) + sizeof(h), h.rkey_len);
    handle_arrival(h.m, u);
    return UCS_OK;
}

/* ------------------------------------------------------------ posting */
static inline __attribute__((always_inline)) void init_recv(Request *r, void *buf, size_t count,
                                                            ompi_datatype_t *dt, int src, int tag,
                                                            ompi_communicator_t *comm, bool retain = true)
{
    r->buf = buf;
    r->count = count;
    r->dtype = dt;
    r->comm = comm;
    if (retain) {
        OMPI_DATATYPE_RETAIN(dt);
        /* MPI_Comm_free with this receive pending must not take the
         * communicator (and its context id) away: released in req_release */
        OBJ_RETAIN(comm);
    }
    r->peer = src;
    r->tag = tag;
    r->ompi.req_mpi_object.comm = comm;
}

static void reset_recv_status(Request *r)
{
    r->ompi.req_status.MPI_SOURCE = MPI_ANY_SOURCE;
    r->ompi.req_status.MPI_TAG = MPI_ANY_TAG;
    r->ompi.req_status.MPI_ERROR = MPI_SUCCESS;
    r->ompi.req_status._ucount = 0;
    r->ompi.req_status._cancelled = 0;
}

/* Post receive r (inline into MPI_Irecv and MPI_Recv; recv_restart for
 * the persistent ones' start). */
static inline __attribute__((always_inline)) int recv_post(Request *r)
{
    /* a receive being posted is not waiting for anything yet: a good
     * moment to account the packets matched since the last send */
    credit_settle_if_due();
    reset_recv_status(r);
    int rc = req_prepare_data(r);
    if (rc != OMPI_SUCCESS) return rc;
    CommState *cs = reinterpret_cast<CommState *>(r->comm->c_pml_comm);
    r->match.src = r->peer;
    r->match.tag = r->tag;
    r->match.flags = 0;
    rdrp_match_item_t *hit = rdrp_match_post(cs->mq, &r->match);
    if (hit) deliver(container_of(hit, &Unexpected::match), r);
    return OMPI_SUCCESS;
}

int recv_restart(Request *r) { return recv_post(r); }

/* Fill a status from an unexpected arrival (probe).  MPI_ERROR is left
 * alone: MPI reserves it to the functions that complete several requests. */
static void probe_status(Unexpected *u, ompi_status_public_t *status)
{
    if (status == MPI_STATUS_IGNORE) return;
    status->MPI_SOURCE = u->match.src;
    status->MPI_TAG = u->match.tag;
    status->_ucount = u->total;
    status->_cancelled = 0;
}

/* A blocking receive's status for the user: everything but MPI_ERROR (the
 * error is the return value), as Open MPI's own PMLs do. */
static void user_status(ompi_status_public_t *status, const ompi_status_public_t &from)
{
    if (status != MPI_STATUS_IGNORE) OMPI_COPY_STATUS(status, from, false);
}

/* The message object handed out by mprobe keeps the arrival. */
static Unexpected *mprobe_once(int src, int tag, ompi_communicator_t *comm, bool remove)
{
    CommState *cs = reinterpret_cast<CommState *>(comm->c_pml_comm);
    rdrp_match_item_t *it = rdrp_match_probe(cs->mq, src, tag, remove ? 1 : 0);
    return it ? container_of(it, &Unexpected::match) : nullptr;
}

/* An unsuccessful (m)probe already progressed our worker; let the rest of
 * Open MPI progress too, every progress_iterations misses (oversubscribed:
 * every miss, rounds_per_full_progress). */
static void miss_progress()
{
    static thread_local int misses;
    if (++misses >= rounds_per_full_progress()) {
        misses = 0;
        opal_progress();
    }
}

}  // namespace rdrp

using namespace rdrp;

extern "C" int mca_pml_rdrp_irecv_init(void *buf, size_t count, ompi_datatype_t *dt, int src,
                                       int tag, ompi_communicator_t *comm,
                                       ompi_request_t **request)
{
    Guard guard;
    Request *r = req_alloc(REQ_RECV);
    if (!r) return OMPI_ERR_OUT_OF_RESOURCE;
    init_recv(r, buf, count, dt, src, tag, comm);
    r->persistent = true;
    r->pml_done = true;
    r->ompi.req_persistent = true;
    r->ompi.req_state = OMPI_REQUEST_INACTIVE;
    r->ompi.req_start = mca_pml_rdrp_start;
    r->ompi.req_complete = REQUEST_COMPLETED;
    *request = &r->ompi;
    return OMPI_SUCCESS;
}

extern "C" int mca_pml_rdrp_irecv(void *buf, size_t count, ompi_datatype_t *dt, int src, int tag,
                                  ompi_communicator_t *comm, ompi_request_t **request)
{
    Guard guard;
    Request *r = req_alloc(REQ_RECV);
    if (!r) return OMPI_ERR_OUT_OF_RESOURCE;
    init_recv(r, buf, count, dt, src, tag, comm);
    *request = &r->ompi;  /* before posting: a match completes it at once */
    int rc = recv_post(r);
    if (rc != OMPI_SUCCESS) {
        req_release(r);
        return rc;
    }
    return OMPI_SUCCESS;
}

extern "C" int mca_pml_rdrp_recv(void *buf, size_t count, ompi_datatype_t *dt, int src, int tag,
                                 ompi_communicator_t *comm, ompi_status_public_t *status)
{
    if (!g.threads && !g.blocking_busy) {
        /* one request object serves every blocking receive: no pool traffic,
         * no datatype reference (the call does not return before the end) */
        Request *r = g.blocking_recv;
        if (!r) {
            r = g.blocking_recv = req_alloc(REQ_RECV);
            if (!r) return OMPI_ERR_OUT_OF_RESOURCE;
            --g.live_requests;
        } else {
            req_reinit(r, REQ_RECV);
        }
        g.blocking_busy = true;
        init_recv(r, buf, count, dt, src, tag, comm, false);
        int rc = recv_post(r);
        if (rc == OMPI_SUCCESS) {
            wait_request(&r->ompi);
            rc = r->ompi.req_status.MPI_ERROR;
            user_status(status, r->ompi.req_status);
        }
        r->dtype = nullptr;
        r->comm = nullptr;  /* not retained: the call held it */
        g.blocking_busy = false;
        return rc;
    }
    ompi_request_t *req;
    int rc = mca_pml_rdrp_irecv(buf, count, dt, src, tag, comm, &req);
    if (rc != OMPI_SUCCESS) return rc;
    wait_request(req);
    rc = req->req_status.MPI_ERROR;
    user_status(status, req->req_status);
    ompi_request_free(&req);
    return rc;
}

extern "C" int mca_pml_rdrp_iprobe(int src, int tag, ompi_communicator_t *comm, int *matched,
                                   ompi_status_public_t *status)
{
    Unexpected *u;
    {
        Guard guard;
        u = mprobe_once(src, tag, comm, false);
        if (!u) {
            while (progress_once()) {}
            u = mprobe_once(src, tag, comm, false);
        }
        if (u) probe_status(u, status);
    }
    *matched = u != nullptr;
    if (!u) miss_progress();
    return OMPI_SUCCESS;
}

extern "C" int mca_pml_rdrp_probe(int src, int tag, ompi_communicator_t *comm,
                                  ompi_status_public_t *status)
{
    int matched = 0;
    while (!matched) mca_pml_rdrp_iprobe(src, tag, comm, &matched, status);
    return OMPI_SUCCESS;
}

extern "C" int mca_pml_rdrp_improbe(int src, int tag, ompi_communicator_t *comm, int *matched,
                                    ompi_message_t **message, ompi_status_public_t *status)
{
    Unexpected *u;
    ompi_message_t *msg = nullptr;
    {
        Guard guard;
        u = mprobe_once(src, tag, comm, true);
        if (!u) {
            while (progress_once()) {}
            u = mprobe_once(src, tag, comm, true);
        }
        if (u) {
            probe_status(u, status);
            /* a synchronous send completes once its message is matched */
            if (u->type == RDRP_AM_EAGER && (u->flags & RDRP_FLAG_SYNC)) {
                send_ack(reinterpret_cast<CommState *>(comm->c_pml_comm), u->match.src, u->sreq);
                u->flags &= ~RDRP_FLAG_SYNC;
            }
            /* taken and filled under the lock that imrecv returns it under:
             * the message object is recycled by another thread's
             * MPI_Mrecv through Open MPI's free list, whose lock-free
             * push/pop (uninstrumented libopen-pal) is the only order
             * between the two threads' stores otherwise (ThreadSanitizer,
             * p2p_threads: MPI_Mprobe from 4 threads) */
            msg = ompi_message_alloc();
            if (msg) {
                msg->comm = comm;
                msg->req_ptr = u;
                msg->peer = u->match.src;
                msg->count = u->total;
            }
        }
    }
    *matched = u != nullptr;
    if (!u) {
        *message = MPI_MESSAGE_NULL;
        miss_progress();
        return OMPI_SUCCESS;
    }
    if (!msg) return OMPI_ERR_OUT_OF_RESOURCE;
    *message = msg;
    return OMPI_SUCCESS;
}

extern "C" int mca_pml_rdrp_mprobe(int src, int tag, ompi_communicator_t *comm,
                                   ompi_message_t **message, ompi_status_public_t *status)
{
    int matched = 0;
    while (!matched) mca_pml_rdrp_improbe(src, tag, comm, &matched, message, status);
    return OMPI_SUCCESS;
}

extern "C" int mca_pml_rdrp_imrecv(void *buf, size_t count, ompi_datatype_t *dt,
                                   ompi_message_t **message, ompi_request_t **request)
{
    Guard guard;
    ompi_message_t *msg = *message;
    Unexpected *u = static_cast<Unexpected *>(msg->req_ptr);
    Request *r = req_alloc(REQ_RECV);
    if (!r) return OMPI_ERR_OUT_OF_RESOURCE;
    init_recv(r, buf, count, dt, u->match.src, u->match.tag, msg->comm);
    reset_recv_status(r);
    int rc = req_prepare_data(r);
    if (rc != OMPI_SUCCESS) {
        req_release(r);
        return rc;
    }
    *request = &r->ompi;
    ompi_message_return(msg);
    *message = MPI_MESSAGE_NULL;
    deliver(u, r);
    return OMPI_SUCCESS;
}

extern "C" int mca_pml_rdrp_mrecv(void *buf, size_t count, ompi_datatype_t *dt,
                                  ompi_message_t **message, ompi_status_public_t *status)
{
    ompi_request_t *req;
    int rc = mca_pml_rdrp_imrecv(buf, count, dt, message, &req);
    if (rc != OMPI_SUCCESS) return rc;
    wait_request(req);
    rc = req->req_status.MPI_ERROR;
    user_status(status, req->req_status);
    ompi_request_free(&req);
    return rc;
}
