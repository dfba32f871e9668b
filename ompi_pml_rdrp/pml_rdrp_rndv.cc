/*
 * pml/rdrp: chunked receiver-driven rendezvous.
 *
 * The RTS brought the envelope, the size and the first chunk.  After the
 * match the receiver takes the rest in chunk_size pieces, never more than
 * max_outstanding at once, over one of two data paths:
 *  - rma: ucp_get_nbx from the sender's registered buffer, then FIN;
 *  - am:  a CTS tells the sender to stream chunks as UCX active-message
 *         rendezvous; each is accepted with ucp_am_recv_data_nbx only while
 *         the window has room, so the receiver sets the pace.
 * A receive buffer smaller than the message takes only what fits (the CTS
 * and the pull say so), reports MPI_ERR_TRUNCATE and still completes the
 * sender.
 */
#include "pml_rdrp_request.h"
#include "pml_rdrp_transport.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "common/shm/shm_segment.h"

namespace rdrp {

/* Where received bytes land: the user buffer, or staging for non-contiguous. */
static inline char *recv_dst(Request *r) { return r->contig ? r->data : r->staging; }

void rndv_recv_finish(Request *r)
{
    if (!r->contig && r->staging) req_unpack(r, r->first_len, r->staging + r->first_len,
                                            r->want - r->first_len);
    req_complete(r);
}

void rndv_send_fin(Request *r)
{
    Ctrl *c = ctrl_alloc();
    c->h.fin.sreq = r->sreq;
    ctrl_send(r->ep, RDRP_AM_FIN, c, sizeof(rdrp_fin_hdr_t));
}

/* ------------------------------------------------------------ rma path */
static void rma_pump(Request *r);

static void get_done_cb(void *request, ucs_status_t status, void *user_data)
{
    Ctrl *c = static_cast<Ctrl *>(user_data);
    Request *r = c->req;
    ucp_request_free(request);
    if (status != UCS_OK) fatal_peer_status(r->ep, "rendezvous GET", status);
    r->received += c->len;
    r->inflight_bytes -= c->len;
    --r->inflight;
    ctrl_release(c);
    rma_pump(r);
}

static void rma_pump(Request *r)
{
    while (r->inflight < r->window && r->next_off < r->want) {
        size_t len = std::min(r->chunk, r->want - r->next_off);
        Ctrl *c = ctrl_alloc();
        c->req = r;
        c->len = len;
        ucp_request_param_t p;
        p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        p.cb.send = get_done_cb;
        p.user_data = c;
        ucs_status_ptr_t sp = ucp_get_nbx(ucx_ep(r->ep), recv_dst(r) + r->next_off, len,
                                          r->raddr + r->next_off, rdrp_ucx_rkey_handle(r->rkey), &p);
        r->next_off += len;
        ++stats.chunks;
        note_inflight(r->inflight + 1, r->inflight_bytes + len);
        if (sp == nullptr) {
            r->received += len;
            ctrl_release(c);
            continue;
        }
        if (UCS_PTR_IS_ERR(sp)) {
            fatal_status("rendezvous GET", UCS_PTR_STATUS(sp));
            return;
        }
        ++r->inflight;
        r->inflight_bytes += len;
    }
    if (r->received == r->want && r->inflight == 0) {
        rndv_send_fin(r);
        rndv_recv_finish(r);
    }
}

/* ------------------------------------------------------------ am path */
static void chunk_recv_done(void *request, ucs_status_t status, size_t length, void *user_data);

/* A chunk could not be pulled: its sender is gone (UCX reports the lost
 * connection here, often before the endpoint's error handler runs), so the
 * message names that peer (scripts/faults.sh kill rdrp-rndv-am printed
 * only "rendezvous chunk receive Input/output error"). */
static void chunk_failed(const Request *r, ucs_status_t status)
{
    fatal_peer_status(r->ep, "rendezvous chunk receive", status);
}

/* Accept one chunk now: pull it with UCX's zero-copy rendezvous. */
static void am_accept(Request *r, void *desc, size_t off, size_t len)
{
    Ctrl *c = ctrl_alloc();
    c->req = r;
    c->len = len;
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FIELD_DATATYPE;
    p.cb.recv_am = chunk_recv_done;
    p.user_data = c;
    p.datatype = ucp_dt_make_contig(1);
    ++r->inflight;
    r->inflight_bytes += len;
    ++stats.chunks;
    note_inflight(r->inflight, r->inflight_bytes);
    ucs_status_ptr_t sp = ucp_am_recv_data_nbx(g.worker, desc, recv_dst(r) + off, len, &p);
    if (sp == nullptr) {
        chunk_recv_done(nullptr, UCS_OK, len, c);
    } else if (UCS_PTR_IS_ERR(sp)) {
        chunk_failed(r, UCS_PTR_STATUS(sp));
    }
}

static void chunk_recv_done(void *request, ucs_status_t status, size_t length, void *user_data)
{
    (void)length;
    Ctrl *c = static_cast<Ctrl *>(user_data);
    Request *r = c->req;
    if (request) ucp_request_free(request);
    if (status != UCS_OK) chunk_failed(r, status);
    r->received += c->len;
    r->inflight_bytes -= c->len;
    --r->inflight;
    ctrl_release(c);
    /* the window has room again: take a chunk that had to wait */
    if (r->deferred && !r->deferred->empty()) {
        DeferredChunk d = r->deferred->back();
        r->deferred->pop_back();
        am_accept(r, d.desc, d.off, d.len);
        return;
    }
    if (r->received == r->want && r->inflight == 0) rndv_recv_finish(r);
}

/* ------------------------------------------------------------ match of an RTS */
void rndv_recv_start(Request *r, Unexpected *u)
{
    r->sreq = u->sreq;
    r->total = u->total;
    r->want = static_cast<size_t>(r->ompi.req_status._ucount);  /* min(total, capacity) */
    r->first_len = std::min(u->data_len, r->want);
    r->rpath = u->path;
    r->received = r->first_len;
    r->next_off = r->first_len;
    r->inflight = 0;
    r->inflight_bytes = 0;
    r->proto = RDRP_PROTO_RDRP;
    r->chunk = mca_pml_rdrp_params.chunk_size;
    r->window = static_cast<size_t>(mca_pml_rdrp_params.max_outstanding);
    r->ep = comm_endpoint(r->comm, u->match.src);
    if (!r->contig && r->want > 0) {
        r->staging = static_cast<char *>(malloc(r->want));
        if (!r->staging) mca_pml_rdrp_fatal("send-failed", "out of memory (rendezvous staging)", "");
    }
    /* first chunk: straight to its place */
    req_unpack(r, 0, u->data, r->first_len);

    if (r->rpath == RDRP_PATH_CMA) {
        /* one kernel copy straight from the sender's buffer, chunk by
         * chunk, now that this receive wants it: the receiver sets the pace
         * and the sender takes no part until the FIN */
        uint64_t raddr = u->raddr;
        int pid = r->ep->pid;
        unex_release(u);
        char *dst = recv_dst(r);
        r->chunk = mca_pml_rdrp_params.cma_chunk_size;
        while (r->received < r->want) {
            size_t len = std::min(r->chunk, r->want - r->received);
            note_inflight(1, len);
            ++stats.chunks;
            int rc = shm::cma_read(pid, dst + r->received, raddr + r->received, len);
            if (rc != 0) {
                mca_pml_rdrp_fatal("send-failed", "rendezvous single-copy read from the sender failed",
                                   strerror(-rc));
                return;
            }
            r->received += len;
        }
        rndv_send_fin(r);
        rndv_recv_finish(r);
        return;
    }
    if (r->rpath == RDRP_PATH_RMA) {
        if (r->want > r->first_len) {
            r->rkey = rdrp_ucx_rkey_get(g.uw, ucx_ep(r->ep), r->ep->peer_id, u->region_id, u->rkey,
                                        u->rkey_len);
            if (!r->rkey) mca_pml_rdrp_fatal("send-failed", "rkey unpack failed", rdrp_ucx_last_error());
            r->raddr = u->raddr;
        }
        unex_release(u);
        rma_pump(r);  /* sends FIN and completes when everything is in */
        return;
    }
    /* am path: the CTS both acknowledges the match and opens the window;
     * the chunks come as UCX active messages, which our progress must see */
    transport_ucx_busy = true;
    unex_release(u);
    Ctrl *c = ctrl_alloc();
    c->h.cts.sreq = r->sreq;
    c->h.cts.want_len = r->want;
    c->h.cts.window = static_cast<uint32_t>(r->window);
    c->h.cts.pad = 0;
    c->h.cts.chunk_size = r->chunk;
    if (r->want > r->first_len) {
        r->id = g.ids.add(r);
        c->h.cts.rreq = r->id;
        ctrl_send(r->ep, RDRP_AM_CTS, c, sizeof(rdrp_cts_hdr_t));
        return;
    }
    c->h.cts.rreq = 0;
    ctrl_send(r->ep, RDRP_AM_CTS, c, sizeof(rdrp_cts_hdr_t));
    rndv_recv_finish(r);
}

/* ------------------------------------------------------------ sender: CTS, chunks, FIN */
static void chunk_sent_cb(void *request, ucs_status_t status, void *user_data);

static void stream_chunks(Request *r)
{
    while (r->inflight < r->window && r->next_off < r->want) {
        size_t len = std::min(r->chunk, r->want - r->next_off);
        Ctrl *c = ctrl_alloc();
        c->req = r;
        c->len = len;
        c->h.chunk.rreq = r->sreq;   /* on the sender, sreq holds the receiver's id */
        c->h.chunk.sreq = r->id;
        c->h.chunk.offset = r->next_off;
        /* a chunk the size of an eager message is copied on arrival (and
         * fits a ring): UCX's own rendezvous handshake would cost more */
        uint32_t flags = eager_for(r->ep, len) ? UCP_AM_SEND_FLAG_EAGER : UCP_AM_SEND_FLAG_RNDV;
        int st = am_send(r->ep, RDRP_AM_CHUNK, &c->h.chunk, sizeof(rdrp_chunk_hdr_t), r->data + r->next_off,
                         len, flags, chunk_sent_cb, c);
        r->next_off += len;
        if (st == TX_DONE) {
            ctrl_release(c);
            continue;
        }
        ++r->inflight;
    }
    if (r->inflight == 0 && r->next_off >= r->want) {
        r->rndv_done = true;
        send_check_complete(r);
    }
}

static void chunk_sent_cb(void *request, ucs_status_t status, void *user_data)
{
    Ctrl *c = static_cast<Ctrl *>(user_data);
    Request *r = c->req;
    if (request) ucp_request_free(request);
    if (status != UCS_OK) fatal_peer_status(r->ep, "rendezvous chunk send", status);
    ctrl_release(c);
    --r->inflight;
    stream_chunks(r);
}

static Request *sender_of(uint64_t sreq, const char *what)
{
    Request *r = static_cast<Request *>(g.ids.get(sreq));
    if (!r || r->kind != REQ_SEND || !r->rndv || r->rndv_done) {
        bad_header(what, sreq);
        return nullptr;
    }
    return r;
}

ucs_status_t am_cts_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                       const ucp_am_recv_param_t *param)
{
    (void)arg; (void)data; (void)len; (void)param;
    Guard guard;
    if (hlen != sizeof(rdrp_cts_hdr_t)) {
        bad_header("CTS header length", hlen);
        return UCS_OK;
    }
    rdrp_cts_hdr_t h;
    std::memcpy(&h, hdr, sizeof(h));
    Request *r = sender_of(h.sreq, "CTS for an unknown send");
    if (!r) return UCS_OK;
    if (const char *why = wire::check_cts(h, r->packed)) {
        bad_header(why, h.want_len);
        return UCS_OK;
    }
    r->want = h.want_len;
    r->window = h.window;
    r->chunk = h.chunk_size;
    r->next_off = r->first_len;
    r->inflight = 0;
    r->sreq = h.rreq;
    stream_chunks(r);
    return UCS_OK;
}

ucs_status_t am_chunk_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                         const ucp_am_recv_param_t *param)
{
    (void)arg;
    Guard guard;
    if (hlen != sizeof(rdrp_chunk_hdr_t)) {
        bad_header("chunk header length", hlen);
        return UCS_OK;
    }
    rdrp_chunk_hdr_t h;
    std::memcpy(&h, hdr, sizeof(h));
    Request *r = static_cast<Request *>(g.ids.get(h.rreq));
    if (!r || r->kind != REQ_RECV || r->pml_done || r->sreq != h.sreq ||
        wire::check_chunk(h.offset, len, r->first_len, r->want)) {
        bad_header("chunk outside any pending receive", h.offset);
        return UCS_OK;
    }
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        /* small chunk delivered eagerly by UCX: copy it now */
        std::memcpy(recv_dst(r) + h.offset, data, len);
        r->received += len;
        if (r->received == r->want && r->inflight == 0) rndv_recv_finish(r);
        return UCS_OK;
    }
    if (r->inflight >= r->window) {
        if (!r->deferred) r->deferred = new std::vector<DeferredChunk>();
        r->deferred->push_back({data, static_cast<size_t>(h.offset), len});
        return UCS_INPROGRESS;
    }
    am_accept(r, data, h.offset, len);
    return UCS_INPROGRESS;
}

ucs_status_t am_fin_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                       const ucp_am_recv_param_t *param)
{
    (void)arg; (void)data; (void)len; (void)param;
    Guard guard;
    if (hlen != sizeof(rdrp_fin_hdr_t)) {
        bad_header("FIN header length", hlen);
        return UCS_OK;
    }
    rdrp_fin_hdr_t h;
    std::memcpy(&h, hdr, sizeof(h));
    Request *r = sender_of(h.sreq, "FIN for an unknown send");
    if (!r) return UCS_OK;
    r->rndv_done = true;
    send_check_complete(r);
    return UCS_OK;
}

}  // namespace rdrp
