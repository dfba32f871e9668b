/*
 * pml/rdrp: the get and put rendezvous protocols (rendezvous-get-put-polling
 * seed, section 3).
 *
 *  get: the RTS carries the sender's rkey.  The receiver GETs the whole
 *       message and completes when UCX reports the GET complete; then FIN
 *       completes the sender.  (It used to preset its last byte and poll for
 *       the sender's, but it had to count the GET completions anyway -- the
 *       byte alone can lie when a program receives several messages into one
 *       buffer -- and the preset hung both ranks when a receive buffer was
 *       also a pending send's, as in MPICH's pt2pt/sendrecv3: each rank's
 *       preset overwrote the byte its partner was reading.)
 *  put: the receiver answers the RTS with an RTR (its rkey and a random
 *       byte preset at the end of its buffer).  The sender PUTs everything
 *       but the last byte, fences, PUTs the last byte; the receiver
 *       completes when the byte changes.  Only when the sender's last byte
 *       equals the poll value does it send an explicit FIN (after a
 *       non-blocking flush, driven by progress).  The last byte is PUT from
 *       a copy taken once, so the byte the receiver sees is the one compared
 *       with its poll value, even when the program writes the send buffer
 *       meanwhile (a receive into it, as in sendrecv3).
 *
 * A fence sits between the body and the last byte because transports may
 * write the tail first.
 */
#include "pml_rdrp_request.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>

namespace rdrp {

int rndv_protocol_for(size_t len)
{
    switch (mca_pml_rdrp_params.rndv_protocol) {
    case RDRP_RNDV_GET: return RDRP_PROTO_GET;
    case RDRP_RNDV_PUT: return RDRP_PROTO_PUT;
    case RDRP_RNDV_RDRP: return RDRP_PROTO_RDRP;
    default:
        return len <= mca_pml_rdrp_params.get_limit ? RDRP_PROTO_GET : RDRP_PROTO_RDRP;
    }
}

static uint8_t random_byte()
{
    if (g.rand_state == 0) {
        g.rand_state = (static_cast<uint64_t>(getpid()) << 32) ^
                       static_cast<uint64_t>(time(nullptr)) ^ 0x9e3779b97f4a7c15ull;
    }
    /* xorshift64 */
    g.rand_state ^= g.rand_state << 13;
    g.rand_state ^= g.rand_state >> 7;
    g.rand_state ^= g.rand_state << 17;
    return static_cast<uint8_t>(g.rand_state >> 24);
}

static inline char *dst_of(Request *r) { return r->contig ? r->data : r->staging; }

static inline volatile uint8_t *poll_slot(Request *r)
{
    return reinterpret_cast<volatile uint8_t *>(dst_of(r) + r->want - 1);
}

static void prepare_dst(Request *r, Unexpected *u)
{
    r->sreq = u->sreq;
    r->total = u->total;
    r->want = static_cast<size_t>(r->ompi.req_status._ucount);  /* min(total, capacity) */
    r->first_len = 0;
    r->received = 0;
    r->next_off = 0;
    r->inflight = 0;
    r->inflight_bytes = 0;
    r->proto = u->proto;
    r->polling = false;
    r->ep = comm_endpoint(r->comm, u->match.src);
    if (!r->contig && r->want > 0) {
        r->staging = static_cast<char *>(malloc(r->want));
        if (!r->staging) mca_pml_rdrp_fatal("send-failed", "out of memory (rendezvous staging)", "");
    }
}

static void start_polling(Request *r)
{
    r->polling = true;
    g.polling.push_back(r);
}

/* ------------------------------------------------------------ get: receiver */
static void get_done(void *request, ucs_status_t status, void *user_data)
{
    Request *r = static_cast<Request *>(user_data);
    if (request) ucp_request_free(request);
    if (status != UCS_OK) fatal_peer_status(r->ep, "rendezvous GET", status);
    r->received = r->want;
    rndv_send_fin(r);
    rndv_recv_finish(r);
}

void get_recv_start(Request *r, Unexpected *u)
{
    prepare_dst(r, u);
    if (r->want == 0) {  /* a zero-byte buffer: nothing to pull */
        unex_release(u);
        rndv_send_fin(r);
        rndv_recv_finish(r);
        return;
    }
    r->rkey = rdrp_ucx_rkey_get(g.uw, ucx_ep(r->ep), r->ep->peer_id, u->region_id, u->rkey, u->rkey_len);
    if (!r->rkey) mca_pml_rdrp_fatal("send-failed", "rkey unpack failed", rdrp_ucx_last_error());
    r->raddr = u->raddr;
    unex_release(u);
    ++stats.chunks;
    note_inflight(1, r->want);
    /* UCX reports the GET complete only once the data is here: that, not a
     * byte of the buffer, completes the receive (the buffer's bytes may
     * belong to the program's own pending send too) */
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = get_done;
    p.user_data = r;
    ucs_status_ptr_t sp = ucp_get_nbx(ucx_ep(r->ep), dst_of(r), r->want, r->raddr,
                                      rdrp_ucx_rkey_handle(r->rkey), &p);
    if (sp == nullptr) {
        get_done(nullptr, UCS_OK, r);
    } else if (UCS_PTR_IS_ERR(sp)) {
        fatal_status("rendezvous GET", UCS_PTR_STATUS(sp));
    }
}

/* ------------------------------------------------------------ put: receiver */
void put_recv_start(Request *r, Unexpected *u)
{
    prepare_dst(r, u);
    unex_release(u);
    Ctrl *c = ctrl_alloc();
    rdrp_rtr_hdr_t *h = &c->h.rtr.h;
    std::memset(h, 0, sizeof(*h));
    h->sreq = r->sreq;
    h->want_len = r->want;
    size_t hlen = sizeof(*h);
    if (r->want > 0) {
        char *dst = dst_of(r);
        transport_ucx_busy = true;  /* UCX serves the sender's PUTs through our progress */
        r->region = rdrp_ucx_reg_acquire(dst, r->want);
        if (!r->region || r->region->rkey_len > RDRP_MAX_RKEY)
            mca_pml_rdrp_fatal("send-failed", "memory registration for rendezvous failed",
                               rdrp_ucx_last_error());
        int fixed = mca_pml_rdrp_params.put_poll_value;
        r->poll_value = fixed >= 0 ? static_cast<uint8_t>(fixed) : random_byte();
        *poll_slot(r) = r->poll_value;
        r->id = g.ids.add(r);
        h->rreq = r->id;
        h->raddr = reinterpret_cast<uint64_t>(dst);
        h->region_id = r->region->id;
        h->poll = r->poll_value;
        h->rkey_len = static_cast<uint16_t>(r->region->rkey_len);
        std::memcpy(c->h.rtr.rkey, r->region->rkey_buf, r->region->rkey_len);
        hlen += r->region->rkey_len;
        ++stats.chunks;
        note_inflight(1, r->want);
        start_polling(r);  /* before the RTR leaves: the data can only follow it */
        ctrl_send(r->ep, RDRP_AM_RTR, c, hlen);
        return;
    }
    ctrl_send(r->ep, RDRP_AM_RTR, c, hlen);  /* want 0: the sender completes at once */
    rndv_recv_finish(r);
}

static void stop_polling(Request *r)
{
    auto it = std::find(g.polling.begin(), g.polling.end(), r);
    if (it != g.polling.end()) {
        *it = g.polling.back();
        g.polling.pop_back();
    }
    r->polling = false;
}

/* Called from progress while some put receive waits for its last byte. */
int poll_receives()
{
    int done = 0;
    for (size_t i = 0; i < g.polling.size();) {
        Request *r = g.polling[i];
        if (*poll_slot(r) == r->poll_value) {
            ++i;
            continue;
        }
        g.polling[i] = g.polling.back();
        g.polling.pop_back();
        r->polling = false;
        r->received = r->want;
        rndv_recv_finish(r);
        ++done;
    }
    return done;
}

ucs_status_t am_pfin_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                        const ucp_am_recv_param_t *param)
{
    (void)arg; (void)data; (void)len; (void)param;
    Guard guard;
    if (hlen != sizeof(rdrp_pfin_hdr_t)) {
        bad_header("put FIN header length", hlen);
        return UCS_OK;
    }
    rdrp_pfin_hdr_t h;
    std::memcpy(&h, hdr, sizeof(h));
    Request *r = static_cast<Request *>(g.ids.get(h.rreq));
    if (!r) {
        /* the receive already completed: a program that receives several
         * messages into one buffer (erroneous, but OSU-style benchmarks do
         * it) can change the poll byte of another message early */
        return UCS_OK;
    }
    if (r->kind != REQ_RECV || !r->polling || r->proto != RDRP_PROTO_PUT) {
        bad_header("put FIN for a request that is not a put receive", h.rreq);
        return UCS_OK;
    }
    stop_polling(r);
    r->received = r->want;
    rndv_recv_finish(r);
    return UCS_OK;
}

/* ------------------------------------------------------------ put: sender */
static void put_flushed(void *request, ucs_status_t status, void *user_data)
{
    Request *r = static_cast<Request *>(user_data);
    if (request) ucp_request_free(request);
    if (status != UCS_OK) fatal_status("put protocol flush", status);
    /* the data is remote now: the explicit FIN may overtake nothing */
    Ctrl *c = ctrl_alloc();
    c->h.pfin.rreq = r->sreq;
    ctrl_send(r->ep, RDRP_AM_PFIN, c, sizeof(rdrp_pfin_hdr_t));
    --r->ucx_pending;
    r->rndv_done = true;
    send_check_complete(r);
}

static void put_op(Request *r, const void *src, size_t off, size_t len, ucp_rkey_h rk)
{
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = send_ucx_cb;
    p.user_data = r;
    ucs_status_ptr_t sp = ucp_put_nbx(ucx_ep(r->ep), src, len, r->raddr + off, rk, &p);
    if (sp == nullptr) return;
    if (UCS_PTR_IS_ERR(sp)) {
        fatal_status("rendezvous PUT", UCS_PTR_STATUS(sp));
        return;
    }
    ++r->ucx_pending;
}

ucs_status_t am_rtr_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                       const ucp_am_recv_param_t *param)
{
    (void)arg; (void)data; (void)len; (void)param;
    Guard guard;
    if (hlen < sizeof(rdrp_rtr_hdr_t)) {
        bad_header("RTR header length", hlen);
        return UCS_OK;
    }
    rdrp_rtr_hdr_t h;
    std::memcpy(&h, hdr, sizeof(h));
    Request *r = static_cast<Request *>(g.ids.get(h.sreq));
    if (!r || r->kind != REQ_SEND || !r->rndv || r->rndv_done || r->proto != RDRP_PROTO_PUT) {
        bad_header("RTR for an unknown send", h.sreq);
        return UCS_OK;
    }
    if (const char *why = wire::check_rtr(h, hlen, r->packed)) {
        bad_header(why, h.want_len);
        return UCS_OK;
    }
    r->want = h.want_len;
    if (r->want == 0) {
        r->rndv_done = true;
        send_check_complete(r);
        return UCS_OK;
    }
    r->sreq = h.rreq;  /* on the sender, sreq now names the receiver's request */
    r->raddr = h.raddr;
    r->rkey = rdrp_ucx_rkey_get(g.uw, ucx_ep(r->ep), r->ep->peer_id, h.region_id,
                                static_cast<const char *>(hdr) + sizeof(h), h.rkey_len);
    if (!r->rkey) mca_pml_rdrp_fatal("send-failed", "rkey unpack failed", rdrp_ucx_last_error());
    ucp_rkey_h rk = rdrp_ucx_rkey_handle(r->rkey);
    if (r->want > 1) {
        put_op(r, r->data, 0, r->want - 1, rk);
        ucp_worker_fence(g.worker);
    }
    /* the byte sent is the byte compared: UCX may read its source later,
     * and the program may write the buffer meanwhile (erroneously: a receive
     * into a pending send's buffer); a byte that reached the receiver equal
     * to its poll value without a FIN would hang it */
    r->tail_byte = static_cast<uint8_t>(r->data[r->want - 1]);
    put_op(r, &r->tail_byte, r->want - 1, 1, rk);
    if (r->tail_byte != h.poll) {
        r->rndv_done = true;  /* the receiver sees its poll byte change */
        send_check_complete(r);
        return UCS_OK;
    }
    /* same value: the receiver cannot tell, so say it, after the data */
    ++stats.put_fin_needed;
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = put_flushed;
    p.user_data = r;
    ++r->ucx_pending;
    ucs_status_ptr_t sp = ucp_ep_flush_nbx(ucx_ep(r->ep), &p);
    if (sp == nullptr) {
        put_flushed(nullptr, UCS_OK, r);
    } else if (UCS_PTR_IS_ERR(sp)) {
        fatal_status("put protocol flush", UCS_PTR_STATUS(sp));
    }
    return UCS_OK;
}

}  // namespace rdrp
