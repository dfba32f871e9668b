/*
 * pml/rdrp core: shared state, request and unexpected-message objects.
 * Internal to the C++ translation units of the PML.
 */
#ifndef PML_RDRP_REQUEST_H
#define PML_RDRP_REQUEST_H

#include "ompi_cxx_prelude.h"
extern "C" {
#include "ompi/communicator/communicator.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/message/message.h"
#include "ompi/mca/pml/base/pml_base_bsend.h"
#include "ompi/proc/proc.h"
#include "ompi/request/request.h"
#include "opal/datatype/opal_convertor.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"
#include "pml_rdrp.h"
}
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "pml_rdrp_wire.h"
#include "pml_rdrp_wire_check.h"
#include "pml_rdrp_transport.h"
#include "rdrp_match.h"
#include "ucx_glue/rdrp_ucx.h"

namespace rdrp {

template <class T, class M>
static inline T *container_of(M *m, M T::*member)
{
    return reinterpret_cast<T *>(reinterpret_cast<char *>(m) -
                                 reinterpret_cast<size_t>(&(static_cast<T *>(nullptr)->*member)));
}

/* One per peer process, hung on proc->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_PML]. */
struct Request;

/* comm->c_pml_comm */
struct Endpoint;
struct CommState {
    rdrp_match_queue_t  *mq;
    ompi_communicator_t *comm;
    int                  size;  /* remote group size (intra: the communicator size) */
    Endpoint           **eps;   /* endpoint per destination rank, filled on first use */
    uint32_t            *send_seq;  /* per destination rank: the sequence number of the next
                                     * message (rdrp_match.h), here so a send stamps it
                                     * without a call into the matching engine */
    bool                 tiny_ok;   /* wire::tiny_comm_fits: our small messages on it may take
                                     * the compact format (its per-message part is the send's) */
};

/* The sequence number of the next message to dst on comm (post-increment). */
static inline uint32_t next_send_seq(ompi_communicator_t *comm, int dst)
{
    return reinterpret_cast<CommState *>(comm->c_pml_comm)->send_seq[dst]++;
}

/* Handle table: wire ids are (generation << 32 | index), so a stale or
 * forged id from the network never reaches a freed object. */
class IdTable {
public:
    uint64_t add(void *p);
    void *get(uint64_t id) const;
    void remove(uint64_t id);
    size_t live() const { return slots_.size() - free_.size(); }
private:
    struct Slot { void *p; uint32_t gen; };
    std::vector<Slot> slots_;
    std::vector<uint32_t> free_;
};

enum ReqKind : uint8_t { REQ_SEND = 1, REQ_RECV = 2 };

/* Receive data that arrived before its window had room (am path). */
struct DeferredChunk { void *desc; size_t off; size_t len; };

/* Field order: what every activation touches first (the MPI request, the
 * match node, arguments, data description, and everything
 * req_reset_activation tests), the rendezvous and protocol state after it,
 * the large members last (send header union and convertor, 850 bytes).  A
 * window of 64 small receives touched about 9 lines of each 1320-byte
 * request when the owned pointers were spread among them (36 KiB, past a
 * 32 KiB L1); now the first 6 lines. */
struct Request {
    ompi_request_t   ompi;   /* must be first */
    rdrp_match_item_t match; /* posted-receive node */
    ReqKind kind;
    bool    persistent;
    bool    pml_done;        /* the PML will not touch it again until restarted */
    bool    user_freed;      /* req_free called */
    bool    internal;        /* not visible to the user (buffered-send carrier) */
    bool    polling;         /* on g.polling */
    bool    thr_held;        /* token throttling (pml_rdrp_throttle.h): holds admission tokens
                                until its injection is locally complete */
    /* arguments */
    const void          *buf;
    size_t               count;
    ompi_datatype_t     *dtype;
    ompi_communicator_t *comm;
    int                  peer;
    int                  tag;
    int                  mode;   /* mca_pml_base_send_mode_t */
    uint32_t             thr_tokens;  /* the tokens thr_held holds */
    /* data description */
    bool    contig;
    char   *data;        /* contiguous bytes: user buffer or staging */
    size_t  packed;      /* send: message size; recv: capacity */
    /* what an activation may own (req_reset_activation) */
    char   *staging;     /* owned contiguous copy (non-contiguous data) */
    bool    staging_bsend;
    bool    conv_ready;  /* conv (below) is prepared */
    uint64_t id;         /* IdTable handle while the peer may name us */
    rdrp_ucx_region_t *region;
    rdrp_ucx_rkey_t *rkey;
    std::vector<DeferredChunk> *deferred;
    size_t   buffered_len; /* early-completed copy: bytes counted in pacing_buffered (pml_rdrp_pacing.h) */
    Endpoint *ep;
    /* send side */
    int     ucx_pending;   /* our UCX operations not yet completed */
    bool    need_ack, acked;
    bool    rndv, rndv_done;
    size_t  first_len;
    size_t  next_off, want, chunk, inflight, window;
    size_t  inflight_bytes; /* receive: chunk bytes being pulled right now */
    /* receive side */
    uint64_t sreq;
    size_t   total, received;
    int      rpath;
    uint64_t raddr;
    /* get/put protocols */
    uint8_t  proto;        /* RDRP_PROTO_* of the rendezvous in progress */
    uint8_t  poll_value;   /* put receive: preset byte to see change */
    uint8_t  tail_byte;    /* put send: the copy of the last byte that is PUT */
    /* pacing (pml_rdrp_pacing.h) */
    uint32_t seq;          /* sequence number, drawn when the send is admitted */
    double   wait_since;   /* when it started waiting for credit */
    /* send side: the header of an eager message or RTS in flight */
    union {
        rdrp_eager_hdr_t eager;
        struct { rdrp_rts_hdr_t h; char rkey[RDRP_MAX_RKEY]; } rts;
    } hdr;
    opal_convertor_t conv;
};

/* An arrival that has not met its receive yet. */
#define RDRP_UNEX_INLINE_MAX 128
struct Unexpected {
    rdrp_match_item_t match; /* must be first */
    uint8_t  type;           /* RDRP_AM_EAGER or RDRP_AM_RTS */
    uint32_t flags;
    uint32_t cid;
    uint64_t sreq;
    size_t   total;          /* message size */
    size_t   data_len;       /* eager payload or RTS first chunk */
    char    *data;
    bool     owns_data;
    uint8_t  path;
    uint8_t  proto;
    uint16_t rkey_len;
    uint64_t raddr, region_id;
    int32_t  slot;           /* credit mailbox slot holding the payload, or -1 */
    bool     credit_due;     /* gated eager packet not yet accounted in the credit
                                engine (see credit_consumed) */
    uint32_t credit_src;     /* ... its sender's vpid and piggybacked credits */
    uint32_t credit_piggy;
    /* An unmatched payload of at most RDRP_UNEX_INLINE_MAX bytes waits
     * here rather than in its mailbox slot (which it still holds for its
     * credit).  The slots lie slot_size (128 KiB) apart: each small payload
     * in one touched a page and a cache set of its own, and all slots map
     * to the same sets, so a window of unexpected small messages missed
     * the caches twice per message (copy in, copy out).  Descriptors are
     * reused last in, first out and stay cached. */
    alignas(64) char small[RDRP_UNEX_INLINE_MAX];
    char     rkey[RDRP_MAX_RKEY];
};
#define RDRP_ITEM_MATCHED 0x1u  /* match.flags: matched during rdrp_match_arrive */

/* Small control send (CTS, FIN, ACK, one chunk header) whose header must
 * outlive the UCX call. */
struct Ctrl {
    union {
        rdrp_cts_hdr_t cts;
        rdrp_fin_hdr_t fin;
        rdrp_pfin_hdr_t pfin;
        rdrp_chunk_hdr_t chunk;
        struct { rdrp_rtr_hdr_t h; char rkey[RDRP_MAX_RKEY]; } rtr;
        rdrp_credit_hdr_t credit;
    } h;
    Request *req;  /* chunk sends: the send request */
    size_t   len;
};


struct State {
    rdrp_ucx_worker_t *uw = nullptr;
    ucp_worker_h       worker = nullptr;
    std::recursive_mutex lock;
    bool               threads = false;
    IdTable            ids;
    std::vector<Request *>    req_pool;
    std::vector<Unexpected *> unex_pool;
    std::vector<Ctrl *>       ctrl_pool;
    std::vector<Endpoint *>   endpoints;
    std::vector<CommState *>  comms;  /* by context id (comm_state) */
    std::map<uint32_t, std::vector<Unexpected *>> pending_cid;  /* comm not created here yet */
    std::vector<Request *>    polling;  /* put receives waiting for their last byte */
    uint64_t           rand_state = 0;  /* put protocol poll values */
    size_t             ctrl_pending = 0;
    size_t             live_requests = 0;
    /* the finalize leak check (pml_rdrp_finalize.cc): descriptors and
     * control buffers ever made (live = made - pooled: counted where the
     * pools grow, off the per-message path), unreceived messages dropped
     * with their communicator, ring messages dropped at del_procs */
    size_t             unex_made = 0, ctrl_made = 0;
    size_t             unreceived_dropped = 0, backlog_dropped = 0;
    Request           *blocking_recv = nullptr;  /* reused by MPI_Recv without threads */
    bool               blocking_busy = false;
    bool               in_progress = false;  /* polling rings or the worker: callbacks must not progress */
    unsigned           ucx_skip = 0;          /* progress passes since UCX was last polled (idle UCX) */
    uint64_t           wakeups = 0;           /* completions that hand control back to the caller (the
                                                 end of its wait, or a request nobody waits on): a
                                                 ring poll pass stops after the message that made one */
};
extern State g;

/* The MPI_T counters (pml_rdrp.h). */
static mca_pml_rdrp_counters_t &stats = mca_pml_rdrp_counters;

/* A receive has one more chunk of len bytes in flight: keep the high-water marks. */
static inline void note_inflight(size_t chunks, size_t bytes)
{
    if (chunks > stats.max_chunks_inflight) stats.max_chunks_inflight = chunks;
    if (bytes > stats.max_bytes_inflight) stats.max_bytes_inflight = bytes;
}

/* Serialises the PML when the application runs MPI_THREAD_MULTIPLE. */
struct Guard {
    Guard() : on(g.threads) { if (on) g.lock.lock(); }
    ~Guard() { if (on) g.lock.unlock(); }
    bool on;
};

/* pml_rdrp_request.cc */
int req_free_fn(ompi_request_t **rptr);           /* ompi_request_t::req_free */
int req_cancel_fn(ompi_request_t *req, int complete);  /* ompi_request_t::req_cancel */
Request *req_alloc_fresh(ReqKind kind);           /* req_alloc with an empty pool */

/* What an activation owns (staging, convertor, registrations, id, the
 * pacing budget, deferred chunks) and the datatype and communicator
 * references are already clear here: a request reaches the pool only
 * through req_release, which drops them, a fresh one is calloc'd, and the
 * reused MPI_Recv request was completed (req_complete drops the
 * activation's) and had its references cleared by mca_pml_rdrp_recv.  So
 * only the flags are set (a receive of a stream of small messages paid
 * 11 stores per request for fields that were already zero). */
static inline void req_reinit(Request *r, ReqKind kind)
{
    r->kind = kind;
    r->persistent = false;
    r->pml_done = false;
    r->user_freed = false;
    r->internal = false;
    r->ep = nullptr;
    r->polling = false;
    r->thr_held = false;
    r->thr_tokens = 0;
    OMPI_REQUEST_INIT(&r->ompi, false);
    r->ompi.req_state = OMPI_REQUEST_ACTIVE;  /* waits skip INACTIVE requests */
    r->ompi.req_type = OMPI_REQUEST_PML;
    r->ompi.req_free = req_free_fn;
    r->ompi.req_cancel = req_cancel_fn;
    r->ompi.req_start = nullptr;
}

/* A request object for a new activation: from the pool (inline: one per
 * posted receive and per send on the request path), or a fresh one. */
static inline Request *req_alloc(ReqKind kind)
{
    if (OPAL_UNLIKELY(g.req_pool.empty())) return req_alloc_fresh(kind);
    Request *r = g.req_pool.back();
    g.req_pool.pop_back();
    ++g.live_requests;
    req_reinit(r, kind);
    return r;
}
void     req_release(Request *r);
void     req_complete(Request *r);      /* PML done: mark, then complete or release */
int      req_prepare_data_slow(Request *r);
/* Contiguous pointer or convertor for buf, count, dtype.  Inline for the
 * common case, a contiguous non-empty buffer (one call per posted receive
 * and per send on the request path). */
static inline int req_prepare_data(Request *r)
{
    ompi_datatype_t *dt = r->dtype;
    if (OPAL_LIKELY(r->count != 0 && dt->super.size != 0 && ompi_datatype_is_contiguous_memory_layout(dt, r->count))) {
        r->contig = true;
        r->data = const_cast<char *>(static_cast<const char *>(r->buf)) + dt->super.true_lb;
        r->packed = dt->super.size * r->count;
        return OMPI_SUCCESS;
    }
    return req_prepare_data_slow(r);
}
void     req_unpack_convertor(Request *r, size_t offset, const void *src, size_t len);
/* Unpack len bytes of the packed stream, starting at offset, into the
 * receive buffer (inline: a small contiguous receive is a few moves). */
static inline void req_unpack(Request *r, size_t offset, const void *src, size_t len)
{
    if (OPAL_LIKELY(r->contig)) shm::copy_bytes(r->data + offset, src, len);
    else if (len) req_unpack_convertor(r, offset, src, len);
}
Unexpected *unex_alloc();
void        unex_release(Unexpected *u);
Ctrl    *ctrl_alloc();
void     ctrl_release(Ctrl *c);

/* pml_rdrp_module.cc */
int  progress_worker();                 /* our share of opal_progress */
/* One pass over our rings and (as transport_ucx_busy says) the UCX
 * worker, unless we are inside one already (a message handler or UCX
 * callback that ends up in the send path). */
unsigned progress_once();
void wait_request(ompi_request_t *req); /* blocking calls wait here */
Endpoint *get_endpoint(ompi_proc_t *proc);
Endpoint *comm_endpoint_lookup(ompi_communicator_t *comm, int rank);  /* first use of a rank */
/* The endpoint of rank in comm: a table lookup after the first use (the
 * group lookup costs more than the rest of a small send's setup). */
static inline Endpoint *comm_endpoint(ompi_communicator_t *comm, int rank)
{
    Endpoint *ep = reinterpret_cast<CommState *>(comm->c_pml_comm)->eps[rank];
    return OPAL_LIKELY(ep != nullptr) ? ep : comm_endpoint_lookup(comm, rank);
}
/* Our own cid -> state table (add_comm/del_comm keep it): an arrival finds
 * its communicator without Open MPI's (locked) communicator array. */
static inline CommState *comm_state(uint32_t cid)
{
    return cid < g.comms.size() ? g.comms[cid] : nullptr;
}
void fatal_status(const char *what, ucs_status_t st);
/* A UCX operation with peer ep failed: "peer-failed" naming the peer (the
 * peer most likely died: across nodes a send to a killed rank fails with
 * "Connection reset by remote peer", often before the endpoint's error
 * handler runs), or fatal_status when no peer is known. */
void fatal_peer_status(const Endpoint *ep, const char *what, ucs_status_t st);

/* pml_rdrp_send.cc */
int  send_start(Request *r);
/* Inject r (sequence number seq) as an eager message (gated: it took a
 * credit, piggy: credits to return) or as a rendezvous RTS. */
int  send_eager(Request *r, uint32_t seq, bool gated, uint32_t piggy);
int  send_rts(Request *r, uint32_t seq);
void send_check_complete(Request *r);
int  ctrl_send(Endpoint *ep, unsigned am_id, Ctrl *c, size_t hlen);
void send_ucx_cb(void *request, ucs_status_t status, void *user_data);  /* ucx_pending-- */
ucs_status_t am_ack_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                       const ucp_am_recv_param_t *param);

/* pml_rdrp_recv.cc */
int  recv_start(Request *r);
void deliver(Unexpected *u, Request *r);
void arrival(CommState *cs, Unexpected *u);
ucs_status_t am_eager_packed_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                                const ucp_am_recv_param_t *param);
ucs_status_t am_eager_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                         const ucp_am_recv_param_t *param);
ucs_status_t am_rts_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                       const ucp_am_recv_param_t *param);

/* pml_rdrp_rndv.cc */
void rndv_recv_start(Request *r, Unexpected *u);
ucs_status_t am_cts_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                       const ucp_am_recv_param_t *param);
ucs_status_t am_chunk_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                         const ucp_am_recv_param_t *param);
ucs_status_t am_fin_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                       const ucp_am_recv_param_t *param);

/* pml_rdrp_rma_proto.cc: the get and put rendezvous protocols */
int  rndv_protocol_for(size_t len);   /* RDRP_PROTO_* of a rendezvous message */
void get_recv_start(Request *r, Unexpected *u);
void put_recv_start(Request *r, Unexpected *u);
int  poll_receives();
ucs_status_t am_rtr_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                       const ucp_am_recv_param_t *param);
ucs_status_t am_pfin_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                        const ucp_am_recv_param_t *param);
/* shared with pml_rdrp_rndv.cc */
void rndv_send_fin(Request *r);
void rndv_recv_finish(Request *r);

/* Rounds of our own progress per full opal_progress in blocking waits and
 * unsuccessful probes: progress_iterations, or every round with
 * mpi_yield_when_idle (more ranks than cores: opal_progress then yields
 * the core when it finds nothing, and a waiter that spins 100 rounds
 * first keeps the core from the rank it waits for; coll/tuned's barrier
 * over pml/rdrp at np 4 on 2 cores took 8.2 us against 5.2 over ob1) */
static inline int rounds_per_full_progress()
{
    return opal_progress_yield_when_idle ? 1 : mca_pml_rdrp_params.progress_iterations;
}

/* The send path's size rules (pml_rdrp_send.cc uses them; the protocol
 * table of pml_rdrp_explain.cc asks them too, so it cannot drift). */
static inline size_t eager_limit_of(const Endpoint *ep) { return ep->eager_limit; }
/* Eager (one message) when it has a credit, else rendezvous.  To a CMA
 * peer from ep->cma_from on single copy (a rendezvous) wins in general;
 * eager_past_cma says where the ring still wins, from what the send path
 * knows at that moment:
 *  - answers: the message answers one of the peer's (answers_peer: a
 *    ping-pong, whose reader waits for it) and is below kRingAnswerBelow;
 *  - busy: the peer is still busy with what we sent it (peer_ring_busy:
 *    a stream) and the message is below kRingStreamBelow.
 * A stream through the ring overlaps its two copies where a rendezvous
 * round trip and system call per message would pace it.  OSU over
 * pml/rdrp, best of 5, single copy / ring for streams: osu_bw 8 KiB 10.0
 * / 12.2 GB/s, osu_bibw 8 KiB 8.5-9.3 / 12.6; from 16 KiB single copy
 * wins streams too (bibw 16 / 32 / 64 KiB 13.6-14.9 / 17.6-18.8 /
 * 21.6-22.4 against the ring's 12.5 / 12.3 / 12.9: two copies per message
 * on both cores; Intel guest).  On the EPYC guest, with non-temporal ring
 * stores (shm_ring.h), 16 KiB streams through the ring won in its fast
 * host mode (osu_bw 13.1-14.6 GB/s against 5.8-6.1) and lost in its slow
 * one (3.3-3.4 against 4.4-5.6, bibw 4.4-5.6 against 9.7-10.0: a window
 * of 64 no longer fits the 1 MiB ring), so streams stay below 16 KiB,
 * where pml/rdrp's single copy starts there anyway (shm_cma_cost.h
 * kCheapCmaMinNonTemporalRing).  A ping-pong is another matter: there the
 * rendezvous round trip is all latency.  EPYC guest, osu_latency, single
 * copy / ring (the ring's store kind by shm_ring.h's rules): fast mode
 * 16 KiB 3.09-3.16 / 2.20-2.27 us (pml ucx 2.13-2.27), 32 KiB 4.21-4.30 /
 * 3.88-4.09 (ucx 3.94-4.13), 64 KiB 6.33-6.78 / 6.34-6.80; slow mode 16 KiB
 * 3.48-3.87 / 2.44-2.53, 32 KiB 4.66-5.11 / 3.96-4.09, 64 KiB 6.7-7.3 /
 * 6.8-7.0.  But an exchange (MPI_Sendrecv: both sides answer at once,
 * both rings full of lines in flight) loses from 32 KiB: us per exchange,
 * single copy / ring, 16 KiB 3.06-4.37 / 2.42-3.53, 32 KiB 3.98-5.29 /
 * 4.05-6.62, 48 KiB 4.97-7.56 / 5.46-7.86 (both modes); so the ring takes
 * answers below 32 KiB.  Either way the receiver matches it in order
 * (eager and RTS share the sequence).
 * Streams below 128 KiB (thirteenth session, EPYC guest): the slow mode's
 * loss above was not the ring but its backlog, whose messages were
 * written with ordinary stores (a window that overflows the ring then
 * moves every line by an ownership transfer: 16-64 KiB 2.5-3.6 GB/s);
 * with the backlog written as a direct send would be (ring_non_temporal,
 * transport_progress), single copy / ring, GB/s: slow mode osu_bw 16 / 32
 * / 64 KiB 5.98 / 8.40 / 10.64 against 15.25 / 15.40 / 15.86, osu_mbw_mr
 * 5.96 / 8.50 / 10.87 against 15.23 / 15.32 / 15.85, osu_bibw 9.7 / 14.6
 * / 18.1 against 16.5 / 18.0 / 19.0 (ob1 8.2 / 12.6 / 16.9); fast mode
 * osu_bw 6.03 / 8.50 / 10.99 against 14.36 / 13.27 / 15.22.  At 128 KiB
 * the ring lost bibw (18.4 against 20.6, slow mode): from there single
 * copy. */
constexpr size_t kRingStreamBelow = 131072;
constexpr size_t kRingAnswerBelow = 32768;
static inline bool eager_past_cma(size_t len, bool answers, bool busy)
{
    return answers ? len < kRingAnswerBelow : busy && len < kRingStreamBelow;
}
/* The choice at the moment of sending (the facts looked up only past
 * cma_from: one or two loads of ring state). */
static inline bool eager_for(Endpoint *ep, size_t len)
{
    if (len > eager_limit_of(ep)) return false;
    if (ep->cma_from == 0 || len < ep->cma_from) return true;
    const bool answers = answers_peer(ep);
    return eager_past_cma(len, answers, !answers && len < kRingStreamBelow && peer_ring_busy(ep));
}
/* Write a ring message of len payload bytes to ep with non-temporal
 * stores?  The ring's rule (shm::non_temporal_for) with what the pml
 * knows: whether the message answers one of the peer's, whether the peer
 * is behind.  For every data message into a ring: sent at once
 * (ring_send_now) or from the backlog (transport_progress). */
static inline bool ring_non_temporal(Endpoint *ep, size_t len)
{
    bool far = false;
    const bool nt = shm::non_temporal_for(ep->node.tx, len, static_cast<uint32_t>(mca_pml_rdrp_params.shm_far_line_ns),
                                          answers_peer(ep), [ep] { return peer_ring_busy(ep); }, &far);
    if (far) ++stats.shm_far_nt;
    return nt;
}
/* ... for the message of a ping-pong (what the protocol table shows) */
static inline bool eager_in_ping_pong(const Endpoint *ep, size_t len)
{
    if (len > eager_limit_of(ep)) return false;
    return ep->cma_from == 0 || len < ep->cma_from || eager_past_cma(len, true, false);
}
/* The rdrp protocol's data path to ep for a message of len bytes: the
 * peer's, except that under auto a large message to an on-node peer that
 * has no CMA (so uses am) goes by rma (see pml_rdrp_auto_rma_min). */
static inline int data_path_for(const Endpoint *ep, size_t len)
{
    const mca_pml_rdrp_params_t &p = mca_pml_rdrp_params;
    if (p.data_path == RDRP_PATH_AUTO && !ep->remote && ep->path == RDRP_PATH_AM && p.auto_rma_min > 0 &&
        len >= p.auto_rma_min)
        return RDRP_PATH_RMA;
    return ep->path;
}
/* payload bytes an rdrp-protocol RTS to ep carries (credit permitting):
 * none for an eager-size message (it only goes by RTS when it waited for
 * a credit in vain) or on the cma path (the receiver reads it all) */
static inline size_t rts_first_chunk_for(const Endpoint *ep, size_t len)
{
    if (len <= eager_limit_of(ep) || data_path_for(ep, len) == RDRP_PATH_CMA) return 0;
    return len < mca_pml_rdrp_params.rndv_first_chunk ? len : mca_pml_rdrp_params.rndv_first_chunk;
}

/* pml_rdrp_explain.cc: at pml_rdrp_verbose >= RDRP_EXPLAIN_LEVEL, print
 * once per peer (at first contact) the protocol table over message sizes */
#define RDRP_EXPLAIN_LEVEL 10
void explain_peer(const Endpoint *ep);

/* pml_rdrp_credit.cc */
ucs_status_t am_credit_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                          const ucp_am_recv_param_t *param);

/* Reject a malformed header: message, then abort (nothing was touched). */
void bad_header(const char *what, uint64_t value);

}  // namespace rdrp

#endif
