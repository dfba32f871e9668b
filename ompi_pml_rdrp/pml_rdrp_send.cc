/* pml/rdrp: the send side: modes, eager, RTS, control messages. */
#include "pml_rdrp_request.h"
#include "pml_rdrp_credit.h"
#include "pml_rdrp_pacing.h"
#include "pml_rdrp_throttle.h"

#include <cstdlib>
#include <cstring>

namespace rdrp {

/* ------------------------------------------------------------ completion */
void send_check_complete(Request *r)
{
    /* over the self transport a whole rendezvous can run inside the call
     * that started it, so the starter's own check may come second */
    if (r->pml_done) return;
    if (r->ucx_pending > 0) return;
    if (r->need_ack && !r->acked) return;
    if (r->rndv && !r->rndv_done) return;
    r->ompi.req_status.MPI_ERROR = MPI_SUCCESS;
    req_complete(r);
}

void send_ucx_cb(void *request, ucs_status_t status, void *user_data)
{
    Request *r = static_cast<Request *>(user_data);
    if (request) ucp_request_free(request);  /* NULL: it left a ring's backlog */
    if (r->thr_held) throttle_release(r);  /* its eager message or RTS has left */
    if (status != UCS_OK) fatal_peer_status(r->ep, "send completion", status);
    --r->ucx_pending;
    send_check_complete(r);
}

/* Send one message of a request; its completion is tracked in ucx_pending. */
static inline int track(Request *r, unsigned id, const void *hdr, size_t hlen, const void *payload,
                        size_t plen)
{
    if (am_send(r->ep, id, hdr, hlen, payload, plen, UCP_AM_SEND_FLAG_EAGER, send_ucx_cb, r) == TX_PENDING)
        ++r->ucx_pending;
    return OMPI_SUCCESS;
}

/* ------------------------------------------------------------ control messages */
static void ctrl_ucx_cb(void *request, ucs_status_t status, void *user_data)
{
    if (request) ucp_request_free(request);
    if (status != UCS_OK) fatal_status("control message", status);
    --g.ctrl_pending;
    ctrl_release(static_cast<Ctrl *>(user_data));
}

int ctrl_send(Endpoint *ep, unsigned am_id, Ctrl *c, size_t hlen)
{
    if (am_send(ep, am_id, &c->h, hlen, nullptr, 0, UCP_AM_SEND_FLAG_EAGER, ctrl_ucx_cb, c) == TX_DONE) {
        ctrl_release(c);
        return OMPI_SUCCESS;
    }
    ++g.ctrl_pending;
    return OMPI_SUCCESS;
}

/* ------------------------------------------------------------ protocols */
static inline uint32_t peer_vpid(Endpoint *ep) { return ep->proc->super.proc_name.vpid; }

/* Credits are kept per process index of this job: a process of another job
 * (MPI_Comm_spawn, connect/accept) may have any index, also one of ours, so
 * what goes to it is never gated (as with credits off). */
static inline bool credit_gates(Endpoint *ep)
{
    return credit_engine != nullptr && ep->proc->super.proc_name.jobid == OMPI_PROC_MY_NAME->jobid;
}

/* The header of an eager message (every eager send path fills it here). */
static inline void fill_eager_hdr(rdrp_eager_hdr_t *h, const ompi_communicator_t *comm, int tag,
                                  uint32_t seq, bool gated, uint32_t piggy)
{
    h->m.cid = comm->c_contextid;
    h->m.src = comm->c_my_rank;
    h->m.tag = tag;
    h->m.seq = seq;
    h->flags = gated ? RDRP_FLAG_CREDIT : 0;
    h->credits = static_cast<uint16_t>(piggy);
    h->src_vpid = credit_self();
    h->sreq = 0;
}

int send_eager(Request *r, uint32_t seq, bool gated, uint32_t piggy)
{
    rdrp_eager_hdr_t *h = &r->hdr.eager;
    fill_eager_hdr(h, r->comm, r->tag, seq, gated, piggy);
    if (r->mode == MCA_PML_BASE_SEND_SYNCHRONOUS) {
        r->id = g.ids.add(r);
        h->sreq = r->id;
        h->flags |= RDRP_FLAG_SYNC;
        r->need_ack = true;
    }
    ++stats.eager_sent;
    int rc = track(r, RDRP_AM_EAGER, h, sizeof(*h), r->data, r->packed);
    data_sent(r->ep);
    credit_settle_if_due();
    return rc;
}

static inline int data_path_for(const Request *r) { return data_path_for(r->ep, r->packed); }

/* Register the send buffer and describe it in the RTS (rma data path and
 * the get protocol); returns the header length. */
static size_t rts_add_rkey(Request *r, rdrp_rts_hdr_t *h)
{
    transport_ucx_busy = true;  /* UCX serves the peer's GETs through our progress */
    r->region = rdrp_ucx_reg_acquire(r->data, r->packed);
    if (!r->region || r->region->rkey_len > RDRP_MAX_RKEY) {
        mca_pml_rdrp_fatal("send-failed", "memory registration for rendezvous failed",
                           rdrp_ucx_last_error());
        return 0;
    }
    h->raddr = reinterpret_cast<uint64_t>(r->data);
    h->region_id = r->region->id;
    h->rkey_len = static_cast<uint16_t>(r->region->rkey_len);
    std::memcpy(r->hdr.rts.rkey, r->region->rkey_buf, r->region->rkey_len);
    return sizeof(*h) + r->region->rkey_len;
}

int send_rts(Request *r, uint32_t seq)
{
    rdrp_rts_hdr_t *h = &r->hdr.rts.h;
    std::memset(h, 0, sizeof(*h));
    h->m.cid = r->comm->c_contextid;
    h->m.src = r->comm->c_my_rank;
    h->m.tag = r->tag;
    h->m.seq = seq;
    r->id = g.ids.add(r);
    h->sreq = r->id;
    h->total_len = r->packed;
    /* a small message here waited for a credit in vain: its RTS (which
     * needs none) carries no data; the receiver fetches it */
    bool small = eager_for(r->ep, r->packed);
    r->proto = small ? RDRP_PROTO_RDRP : static_cast<uint8_t>(rndv_protocol_for(r->packed));
    h->proto = r->proto;
    h->src_vpid = credit_self();
    r->rndv = true;
    r->rndv_done = false;
    r->first_len = 0;
    size_t hlen = sizeof(*h);
    switch (r->proto) {
    case RDRP_PROTO_GET:
        /* one GET of everything; its completion completes the receive */
        hlen = rts_add_rkey(r, h);
        ++stats.rndv_get;
        break;
    case RDRP_PROTO_PUT:
        /* the receiver answers with an RTR saying where to PUT */
        ++stats.rndv_put;
        break;
    default:
        /* (a CMA receiver reads the whole message in one copy: a first
         * chunk would only be copied twice more, into and out of the ring) */
        r->first_len = rts_first_chunk_for(r->ep, r->packed);
        if (r->first_len > 0 && credit_gates(r->ep)) {
            /* the first chunk may wait at the receiver: it needs a credit */
            uint32_t piggy;
            if (credit_take(peer_vpid(r->ep), &piggy)) {
                h->flags |= RDRP_FLAG_CREDIT;
                h->credits = piggy;
            } else {
                r->first_len = 0;
            }
        }
        /* nothing left to pull after the RTS: no registration needed */
        h->path = static_cast<uint8_t>(r->packed > r->first_len ? data_path_for(r) : RDRP_PATH_AM);
        if (h->path == RDRP_PATH_RMA) {
            hlen = rts_add_rkey(r, h);
            ++stats.rndv_rma;
        } else if (h->path == RDRP_PATH_CMA) {
            h->raddr = reinterpret_cast<uint64_t>(r->data);  /* the receiver reads it from here */
            ++stats.rndv_cma;
        } else {
            ++stats.rndv_am;
        }
        ++stats.rndv_rdrp;
        break;
    }
    if (hlen == 0) return OMPI_ERROR;
    h->first_len = r->first_len;
    ++stats.rndv_sent;
    int rc = track(r, RDRP_AM_RTS, h, hlen, r->data, r->first_len);
    data_sent(r->ep);
    return rc;
}

/* Pack non-contiguous data into an owned contiguous staging buffer. */
static int pack_to_staging(Request *r, char *dst)
{
    struct iovec iov;
    iov.iov_base = dst;
    iov.iov_len = r->packed;
    uint32_t iov_count = 1;
    size_t max = r->packed;
    size_t pos = 0;
    opal_convertor_set_position(&r->conv, &pos);
    if (opal_convertor_pack(&r->conv, &iov, &iov_count, &max) < 0) return OMPI_ERROR;
    r->data = dst;
    return OMPI_SUCCESS;
}

/* Start (or restart, for persistent requests) a prepared send request. */
int send_start(Request *r)
{
    r->ucx_pending = 0;
    r->need_ack = r->acked = false;
    r->rndv = r->rndv_done = false;
    r->ompi.req_status._cancelled = 0;
    r->ompi.req_status._ucount = 0;
    int rc = req_prepare_data(r);
    if (rc != OMPI_SUCCESS) return rc;
    if (!r->contig && r->packed > 0) {
        char *st = static_cast<char *>(malloc(r->packed));
        if (!st) return OMPI_ERR_OUT_OF_RESOURCE;
        r->staging = st;
        if (pack_to_staging(r, st) != OMPI_SUCCESS) return OMPI_ERROR;
    }
    /* token throttling: a refused send waits in order and comes back
     * through send_admitted() from progress */
    if (OPAL_UNLIKELY(throttle_active) && !throttle_admit(r)) return OMPI_SUCCESS;
    return send_admitted(r);
}

/* Inject a prepared send (holding its admission tokens, if throttled):
 * the sequence number is drawn here, so queued sends keep their order.
 * An eager-size send without credit, and every send behind one, waits on
 * its endpoint (pml_rdrp_pacing.h). */
int send_admitted(Request *r)
{
    int rc;
    r->seq = next_send_seq(r->comm, r->peer);
    if (OPAL_UNLIKELY(!r->ep->waiting.empty())) return pacing_enqueue(r);
    bool eager = eager_for(r->ep, r->packed);
    bool gated = false;
    uint32_t piggy = 0;
    if (eager && credit_gates(r->ep)) {
        gated = credit_take_inline(peer_vpid(r->ep), &piggy);
        if (!gated) return pacing_enqueue(r);
    }
    if (eager) rc = send_eager(r, r->seq, gated, piggy);
    else rc = send_rts(r, r->seq);
    if (r->thr_held && (rc != OMPI_SUCCESS || r->ucx_pending == 0)) throttle_release(r);  /* left inline */
    if (rc != OMPI_SUCCESS) return rc;
    send_check_complete(r);
    return OMPI_SUCCESS;
}

/* A buffered send: pack into the attached buffer, send that from an
 * internal request, and let the user's request complete at once. */
static int bsend_start(Request *user, Request *carrier)
{
    int rc = req_prepare_data(carrier);
    if (rc != OMPI_SUCCESS) return rc;
    size_t len = carrier->packed;
    char *buf = static_cast<char *>(mca_pml_base_bsend_request_alloc_buf(len ? len : 1));
    if (!buf) {
        mca_pml_rdrp_show_help("send-failed", "MPI_Bsend: the attached buffer is too small or missing",
                               "(see MPI_Buffer_attach)");
        return OMPI_ERR_BUFFER;
    }
    if (carrier->contig) {
        if (len) std::memcpy(buf, carrier->data, len);
    } else if (pack_to_staging(carrier, buf) != OMPI_SUCCESS) {
        mca_pml_base_bsend_request_free(buf);
        return OMPI_ERROR;
    }
    if (carrier->conv_ready) {
        opal_convertor_cleanup(&carrier->conv);
        carrier->conv_ready = false;
    }
    /* the carrier now sends contiguous bytes from the bsend buffer */
    carrier->buf = buf;
    carrier->count = len;
    OMPI_DATATYPE_RELEASE(carrier->dtype);
    carrier->dtype = &ompi_mpi_byte.dt;
    OMPI_DATATYPE_RETAIN(carrier->dtype);
    carrier->mode = MCA_PML_BASE_SEND_STANDARD;
    /* the buffer goes back to the bsend allocator with the carrier's activation */
    carrier->staging = buf;
    carrier->staging_bsend = true;
    rc = send_start(carrier);
    if (rc != OMPI_SUCCESS) return rc;  /* the caller releases the carrier and the buffer */
    if (user) {
        user->ompi.req_status.MPI_ERROR = MPI_SUCCESS;
        req_complete(user);
    }
    return OMPI_SUCCESS;
}

static void init_send(Request *r, const void *buf, size_t count, ompi_datatype_t *dt, int dst,
                      int tag, mca_pml_base_send_mode_t mode, ompi_communicator_t *comm)
{
    r->buf = buf;
    r->count = count;
    r->dtype = dt;
    OMPI_DATATYPE_RETAIN(dt);
    r->comm = comm;
    OBJ_RETAIN(comm);  /* a send pending past MPI_Comm_free; released in req_release */
    r->peer = dst;
    r->tag = tag;
    r->mode = mode;
    r->ompi.req_mpi_object.comm = comm;
    r->ompi.req_status.MPI_SOURCE = comm->c_my_rank;
    r->ompi.req_status.MPI_TAG = tag;
}

/* Start a send request in its mode: shared by isend, send and start. */
static int start_in_mode(Request *r)
{
    if (r->mode == MCA_PML_BASE_SEND_BUFFERED) {
        Request *carrier = req_alloc(REQ_SEND);
        if (!carrier) return OMPI_ERR_OUT_OF_RESOURCE;
        init_send(carrier, r->buf, r->count, r->dtype, r->peer, r->tag,
                  static_cast<mca_pml_base_send_mode_t>(r->mode), r->comm);
        carrier->internal = true;
        carrier->ep = r->ep;
        int rc = bsend_start(r, carrier);
        if (rc != OMPI_SUCCESS) req_release(carrier);
        return rc;
    }
    return send_start(r);
}

/* ------------------------------------------------------------ ACK handler */
ucs_status_t am_ack_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                       const ucp_am_recv_param_t *param)
{
    (void)arg; (void)data; (void)len; (void)param;
    if (hlen != sizeof(rdrp_ack_hdr_t)) {
        bad_header("ACK header length", hlen);
        return UCS_OK;
    }
    rdrp_ack_hdr_t h;
    std::memcpy(&h, hdr, sizeof(h));
    Request *r = static_cast<Request *>(g.ids.get(h.sreq));
    if (!r || r->kind != REQ_SEND || !r->need_ack || r->acked) {
        bad_header("ACK for an unknown send", h.sreq);
        return UCS_OK;
    }
    r->acked = true;
    send_check_complete(r);
    return UCS_OK;
}

}  // namespace rdrp

using namespace rdrp;

extern "C" int mca_pml_rdrp_isend_init(const void *buf, size_t count, ompi_datatype_t *dt, int dst,
                                       int tag, mca_pml_base_send_mode_t mode,
                                       ompi_communicator_t *comm, ompi_request_t **request)
{
    Guard guard;
    Request *r = req_alloc(REQ_SEND);
    if (!r) return OMPI_ERR_OUT_OF_RESOURCE;
    init_send(r, buf, count, dt, dst, tag, mode, comm);
    r->persistent = true;
    r->pml_done = true;
    r->ompi.req_persistent = true;
    r->ompi.req_state = OMPI_REQUEST_INACTIVE;
    r->ompi.req_start = mca_pml_rdrp_start;
    r->ompi.req_complete = REQUEST_COMPLETED;
    *request = &r->ompi;
    return OMPI_SUCCESS;
}

static bool send_eager_inline(const void *buf, size_t count, ompi_datatype_t *dt, int dst, int tag,
                              ompi_communicator_t *comm, int *rc);

/* A heap copy's send completed: from a ring backlog (no request) or from
 * UCX, whose request is ours to free. */
static void free_copy_cb(void *request, ucs_status_t status, void *user_data)
{
    (void)status;
    free(user_data);
    if (request) ucp_request_free(request);
}

/* Send active message id (hdr, then len bytes of data) from one heap copy
 * of both, freed when it has left: the caller's buffers are free at once.
 * For the request-free sends that could not leave in place. */
static void am_send_copy(Endpoint *ep, unsigned id, const void *hdr, size_t hlen, const char *data, size_t len)
{
    char *copy = static_cast<char *>(malloc(hlen + len));
    if (!copy) {
        mca_pml_rdrp_fatal("send-failed", "out of memory", "");
        return;
    }
    if (hlen) std::memcpy(copy, hdr, hlen);
    if (len) std::memcpy(copy + hlen, data, len);
    if (am_send(ep, id, copy, hlen, copy + hlen, len, UCP_AM_SEND_FLAG_EAGER, free_copy_cb, copy) == TX_DONE)
        free(copy);
}

/* The request-free eager send found its ring full after all (credit
 * packets that its credit_take sent took the room): header and payload
 * go into one heap copy that waits in the endpoint's backlog, in order,
 * and is freed when it has left.  The caller's buffer is free at once. */
static void ring_send_copy(Endpoint *ep, ompi_communicator_t *comm, int tag, uint32_t seq, bool gated,
                           uint32_t piggy, const char *data, size_t len)
{
    rdrp_eager_hdr_t h;
    fill_eager_hdr(&h, comm, tag, seq, gated, piggy);
    am_send_copy(ep, RDRP_AM_EAGER, &h, sizeof(h), data, len);
}

/* Put an eager message into ring peer ep's ring now, built in place in
 * the ring entry (no request, no staging copy of the header).  false:
 * it cannot leave at once (no room, no credit) and nothing was sent;
 * the caller takes the request path. */
static inline __attribute__((always_inline)) bool ring_send_now(Endpoint *ep, ompi_communicator_t *comm,
                                                                int dst, int tag, const char *data,
                                                                size_t len)
{
    /* up to 8 bytes in the compact format where it can say everything
     * (wire::tiny_fits): half a line of ring instead of a line */
    bool tiny = wire::tiny_msg_fits(len, tag) && reinterpret_cast<CommState *>(comm->c_pml_comm)->tiny_ok;
    size_t hlen = tiny ? sizeof(rdrp_tiny_hdr_t) : sizeof(rdrp_eager_hdr_t);
    char *body = ep->node.tx.reserve(hlen, len);
    if (OPAL_UNLIKELY(!body)) return false;
    uint32_t piggy = 0;
    bool gated = credit_gates(ep);
    if (gated && OPAL_UNLIKELY(!credit_take_fast(peer_vpid(ep), &piggy))) {
        /* credits to piggyback or none left: the full engine call may send
         * credit packets into this very ring, so the reservation is void */
        if (!credit_take(peer_vpid(ep), &piggy, false)) return false;  /* wait for credit */
        if (piggy) {  /* the compact header has no room for them */
            tiny = false;
            hlen = sizeof(rdrp_eager_hdr_t);
        }
        body = ep->node.tx.reserve(hlen, len);
    }
    uint32_t seq = next_send_seq(comm, dst);
    ++stats.eager_sent;
    if (OPAL_LIKELY(body != nullptr)) {
        if (tiny) {
            shm::RingProducer::fill(body, hlen, data, len, [&](char *at) {
                rdrp_tiny_hdr_t t = {static_cast<uint16_t>(comm->c_contextid), static_cast<int16_t>(tag), seq};
                std::memcpy(at, &t, sizeof(t));
            });
            ep->node.tx.commit(gated ? RDRP_RING_EAGER_TINY_GATED : RDRP_RING_EAGER_TINY, hlen, len);
        } else {
            const bool non_temporal = ring_non_temporal(ep, len);
            shm::RingProducer::fill(
                body, hlen, data, len,
                [&](char *at) {
                    fill_eager_hdr(reinterpret_cast<rdrp_eager_hdr_t *>(at), comm, tag, seq, gated, piggy);
                },
                non_temporal);
            ep->node.tx.commit(RDRP_AM_EAGER, hlen, len);
        }
        ++*shm_sent_counter;
    } else {
        ring_send_copy(ep, comm, tag, seq, gated, piggy, data, len);  /* the credit packets took the room */
    }
    data_sent(ep);
    credit_settle_if_due();
    return true;
}

/* Send an eager message to a peer reached through UCX now, request-free:
 * header and payload packed on this stack and sent with
 * UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL, so UCX has copied the message out when
 * it returns; when it cannot (its send queue is full, or the message is
 * above the transport's short size) the packed message leaves from a heap
 * copy freed at its completion.  The send is complete
 * either way.  Only under credit gating, which bounds those copies (one
 * credit per message in flight to the peer); false, with nothing sent,
 * without it (the caller's send then waits for UCX) or without a credit.
 * Callgrind, osu_bw 8 B over UCX's tcp, the sender per message: MPI_Isend
 * and its share of MPI_Waitall 1241 instructions on the request path, 907
 * here; pml/ucx 465. */
static inline bool ucx_send_now(Endpoint *ep, ompi_communicator_t *comm, int dst, int tag, const char *data,
                                size_t len)
{
    if (len > RDRP_EAGER_PACKED_MAX || !credit_gates(ep)) return false;
    uint32_t piggy = 0;
    if (!credit_take_inline(peer_vpid(ep), &piggy, false)) return false;  /* wait for credit */
    const uint32_t seq = next_send_seq(comm, dst);
    ++stats.eager_sent;
    alignas(8) char packed[sizeof(rdrp_eager_hdr_t) + RDRP_EAGER_PACKED_MAX];
    fill_eager_hdr(reinterpret_cast<rdrp_eager_hdr_t *>(packed), comm, tag, seq, true, piggy);
    std::memcpy(packed + sizeof(rdrp_eager_hdr_t), data, len);
    const size_t plen = sizeof(rdrp_eager_hdr_t) + len;
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL;
    p.flags = UCP_AM_SEND_FLAG_EAGER;
    ucs_status_ptr_t sp = ucp_am_send_nbx(ucx_ep(ep), RDRP_AM_EAGER_PACKED, nullptr, 0, packed, plen, &p);
    if (OPAL_LIKELY(sp == nullptr)) {
        ++stats.ucx_sent;
    } else if (UCS_PTR_STATUS(sp) != UCS_ERR_NO_RESOURCE) {
        fatal_status("eager send", UCS_PTR_STATUS(sp));
    } else {
        ++stats.ucx_send_copies;
        am_send_copy(ep, RDRP_AM_EAGER_PACKED, nullptr, 0, packed, plen);
    }
    credit_settle_if_due();  /* the message is on its way */
    return true;
}

/* The request-free send of a small contiguous message, as short as it can
 * be: into a ring peer's ring, or to a UCX peer at once (ucx_send_now).
 * false with nothing sent: the request path (or send_eager_inline) takes
 * it, in order behind what waits for credit or ring room. */
static inline bool send_fast(const void *buf, size_t count, ompi_datatype_t *dt, int dst, int tag,
                             ompi_communicator_t *comm)
{
    Guard guard;
    Endpoint *ep = comm_endpoint(comm, dst);
    size_t len = dt->super.size * count;
    if (!eager_for(ep, len) || !ep->waiting.empty()) return false;
    const char *data = static_cast<const char *>(buf);
    if (len) {
        if (!ompi_datatype_is_contiguous_memory_layout(dt, count)) return false;
        data += dt->super.true_lb;
    }
    if (ep->shm) return ep->backlog.empty() && ring_send_now(ep, comm, dst, tag, data, len);
    return ucx_send_now(ep, comm, dst, tag, data, len);
}

/* An MPI_Isend that completed before it returned: every such send gets the
 * same already-complete request, which MPI_Wait finds done and
 * MPI_Request_free leaves alone (as pml/ucx does), so the fast path
 * touches no request object. */
static int completed_free(ompi_request_t **rptr)
{
    *rptr = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

static int completed_cancel(ompi_request_t *req, int complete)
{
    (void)req; (void)complete;
    return OMPI_SUCCESS;
}

static ompi_request_t *make_completed_request()
{
    static ompi_request_t r;
    OBJ_CONSTRUCT(&r, ompi_request_t);
    OMPI_REQUEST_INIT(&r, false);
    r.req_state = OMPI_REQUEST_ACTIVE;
    r.req_type = OMPI_REQUEST_PML;
    r.req_free = completed_free;
    r.req_cancel = completed_cancel;
    r.req_mpi_object.comm = &ompi_mpi_comm_world.comm;
    r.req_status.MPI_ERROR = MPI_SUCCESS;
    ompi_request_complete(&r, false);
    return &r;
}

static ompi_request_t *completed_send_request()
{
    static ompi_request_t *req = make_completed_request();  /* thread-safe first use */
    return req;
}

extern "C" int mca_pml_rdrp_isend(const void *buf, size_t count, ompi_datatype_t *dt, int dst,
                                  int tag, mca_pml_base_send_mode_t mode, ompi_communicator_t *comm,
                                  ompi_request_t **request)
{
    int rc;
    if ((mode == MCA_PML_BASE_SEND_STANDARD || mode == MCA_PML_BASE_SEND_READY) && !throttle_active &&
        send_fast(buf, count, dt, dst, tag, comm)) {
        *request = completed_send_request();
        return OMPI_SUCCESS;
    }
    Guard guard;
    Request *r = req_alloc(REQ_SEND);
    if (!r) return OMPI_ERR_OUT_OF_RESOURCE;
    init_send(r, buf, count, dt, dst, tag, mode, comm);
    r->ep = comm_endpoint(comm, dst);
    rc = start_in_mode(r);
    if (rc != OMPI_SUCCESS) {
        req_release(r);
        return rc;
    }
    *request = &r->ompi;
    return OMPI_SUCCESS;
}

/* Blocking standard send of a small contiguous message: no request object,
 * the header (and, for small payloads, a packed copy of header + payload)
 * lives on this stack frame until UCX is done with it.  Peers reached
 * through UCX only, when send_fast() could not send (no credit gating, or
 * a payload above RDRP_EAGER_PACKED_MAX): ring peers go through send_fast(). */
static bool send_eager_inline(const void *buf, size_t count, ompi_datatype_t *dt, int dst, int tag,
                              ompi_communicator_t *comm, int *rc)
{
    ucs_status_ptr_t sp;
    rdrp_eager_hdr_t h;
    alignas(8) char packed[sizeof(h) + RDRP_EAGER_PACKED_MAX];
    {
        Guard guard;
        size_t dsize;
        ompi_datatype_type_size(dt, &dsize);
        size_t len = dsize * count;
        Endpoint *ep = comm_endpoint(comm, dst);
        if (!eager_for(ep, len) ||
            (len && !ompi_datatype_is_contiguous_memory_layout(dt, count)))
            return false;
        const char *data = static_cast<const char *>(buf);
        if (len) {
            ptrdiff_t true_lb, true_extent;
            ompi_datatype_get_true_extent(dt, &true_lb, &true_extent);
            data += true_lb;
        }
        /* queue behind the sends waiting for credit; a ring peer was
         * tried by send_fast() already, and what it could not send
         * (ring backlog, no room, no credit) takes the request path, in
         * order behind the backlog */
        if (!ep->waiting.empty() || ep->shm) return false;
        uint32_t piggy = 0;
        bool gated = credit_gates(ep);
        if (gated && !credit_take_inline(peer_vpid(ep), &piggy, false)) return false;  /* wait for credit */
        uint32_t seq = next_send_seq(comm, dst);
        ++stats.eager_sent;
        fill_eager_hdr(&h, comm, tag, seq, gated, piggy);
        ucp_request_param_t p;
        p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = UCP_AM_SEND_FLAG_EAGER;
        ++stats.ucx_sent;
        if (len <= RDRP_EAGER_PACKED_MAX) {
            /* header and payload in one buffer: UCX copies it out before
             * returning (short message) or keeps using it (then we wait
             * below, so the stack frame outlives the send) */
            std::memcpy(packed, &h, sizeof(h));
            std::memcpy(packed + sizeof(h), data, len);
            sp = ucp_am_send_nbx(ucx_ep(ep), RDRP_AM_EAGER_PACKED, nullptr, 0, packed,
                                 sizeof(h) + len, &p);
        } else {
            sp = ucp_am_send_nbx(ucx_ep(ep), RDRP_AM_EAGER, &h, sizeof(h), data, len, &p);
        }
        /* the message is on its way: now there is time for credit accounting */
        credit_settle_if_due();
        if (OPAL_LIKELY(sp == nullptr)) {
            *rc = OMPI_SUCCESS;
            return true;
        }
        if (UCS_PTR_IS_ERR(sp)) {
            fatal_status("eager send", UCS_PTR_STATUS(sp));
            *rc = OMPI_ERROR;
            return true;
        }
    }
    /* back-pressure: wait (progressing everything) until UCX took the data */
    while (ucp_request_check_status(sp) == UCS_INPROGRESS) opal_progress();
    ucs_status_t st = ucp_request_check_status(sp);
    {
        Guard guard;
        ucp_request_free(sp);
    }
    if (st != UCS_OK) fatal_status("eager send", st);
    *rc = st == UCS_OK ? OMPI_SUCCESS : OMPI_ERROR;
    return true;
}

extern "C" int mca_pml_rdrp_send(const void *buf, size_t count, ompi_datatype_t *dt, int dst,
                                 int tag, mca_pml_base_send_mode_t mode, ompi_communicator_t *comm)
{
    int rc;
    /* the request-free fast path skips admission: not under throttling */
    if ((mode == MCA_PML_BASE_SEND_STANDARD || mode == MCA_PML_BASE_SEND_READY) && !throttle_active) {
        if (send_fast(buf, count, dt, dst, tag, comm)) return OMPI_SUCCESS;
        if (send_eager_inline(buf, count, dt, dst, tag, comm, &rc)) return rc;
    }
    ompi_request_t *req;
    pacing_blocking_send = true;
    rc = mca_pml_rdrp_isend(buf, count, dt, dst, tag, mode, comm, &req);
    pacing_blocking_send = false;
    if (rc != OMPI_SUCCESS) return rc;
    wait_request(req);
    rc = req->req_status.MPI_ERROR;
    ompi_request_free(&req);
    return rc;
}

/* pml_rdrp_recv.cc */
namespace rdrp { int recv_restart(Request *r); }

extern "C" int mca_pml_rdrp_start(size_t count, ompi_request_t **requests)
{
    Guard guard;
    for (size_t i = 0; i < count; ++i) {
        Request *r = reinterpret_cast<Request *>(requests[i]);
        if (!r || r->ompi.req_type != OMPI_REQUEST_PML || !r->persistent) continue;
        if (!r->pml_done) return OMPI_ERR_REQUEST;  /* still active */
        r->pml_done = false;
        r->ompi.req_state = OMPI_REQUEST_ACTIVE;
        r->ompi.req_complete = REQUEST_PENDING;
        r->ompi.req_status.MPI_ERROR = MPI_SUCCESS;
        int rc;
        if (r->kind == REQ_SEND) {
            if (!r->ep) r->ep = comm_endpoint(r->comm, r->peer);
            rc = start_in_mode(r);
        } else {
            rc = recv_restart(r);
        }
        if (rc != OMPI_SUCCESS) return rc;
    }
    return OMPI_SUCCESS;
}
