/*
 * pml/rdrp: how a message reaches its peer (issue 13).
 *
 * Peers on this node (same job, pml_rdrp_shm on): every pml message
 * (eager data, RTS, CTS, FIN, credits, ...) goes through a ring of ours in
 * the receiver's shared segment (common/shm/shm_ring.h), polled by the
 * receiver's progress, and rendezvous data moves by one kernel copy
 * between the two address spaces (CMA, common/shm/shm_segment.h).  No UCX
 * call is on that path: a message costs a copy into the ring and a copy
 * out of it, as in Open MPI's own shared-memory BTL.
 *
 * Other peers (another node, another job, or CMA not permitted): UCX
 * active messages and UCX's RMA or AM rendezvous, as before.  A local peer
 * whose rendezvous is forced onto a UCX data path (pml_rdrp_data_path rma
 * or am, the get/put protocols) also gets a UCX endpoint, on first use.
 *
 * The send interface mirrors ucp_am_send_nbx, so every protocol sends the
 * same way whatever carries it: the header must stay valid until the send
 * completes; a send that cannot complete at once (UCX busy, or the ring
 * full: the message then waits in the endpoint's backlog, in order) calls
 * cb later, with request NULL for a ring.
 */
#ifndef PML_RDRP_TRANSPORT_H
#define PML_RDRP_TRANSPORT_H

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include <ucp/api/ucp.h>

#include "common/shm/shm_node.h"

namespace rdrp {

enum { TX_DONE = 0, TX_PENDING = 1 };
typedef void (*tx_cb_t)(void *request, ucs_status_t status, void *user_data);

struct Request;

/* A message waiting for room in a peer's ring (pml_rdrp_transport.h). */
struct TxPending {
    unsigned    id;
    const void *hdr;
    size_t      hlen;
    const void *payload;
    size_t      plen;
    tx_cb_t     cb;
    void       *user_data;
};

struct Endpoint {
    ucp_ep_h     ep;       /* UCX endpoint: at once for peers reached through UCX, on first
                              use (ucx_ep()) for shared-memory peers on a UCX data path */
    uint64_t     peer_id;  /* jobid/vpid: keys the rkey cache */
    int          remote;   /* on another node */
    int          path;     /* RDRP_PATH_* for rendezvous to this peer */
    size_t       eager_limit = 0;  /* largest eager payload to this peer (transport_connect) */
    size_t       cma_from = 0;     /* single copy from here up to eager_limit (below
                                      kRingStreamBelow only while the peer keeps up:
                                      eager_for); 0: never */
    ompi_proc_t *proc;
    std::deque<Request *> waiting;  /* sends waiting for credit, in send order (pml_rdrp_pacing.h) */
    /* shared-memory transport (pml_rdrp_transport.h) */
    bool         shm = false;  /* messages go through our ring in the peer's segment */
    bool         cma = false;  /* single-copy reads/writes of the peer's memory work */
    int          pid = 0;
    shm::NodePeer node;               /* our ring in the peer's segment (common/shm/shm_node.h) */
    std::deque<TxPending> backlog;    /* messages waiting for ring room, in order */
    std::vector<char> ucx_addr;       /* the peer's worker address, for a late UCX connect */
};



/* Send message `id` to ep.  flags: UCP_AM_SEND_FLAG_EAGER, or
 * UCP_AM_SEND_FLAG_RNDV (UCX only: the am data path).  Returns TX_DONE
 * (buffers reusable, cb not called) or TX_PENDING (cb called later); a
 * transport error aborts the job with a message. */
int am_send_slow(Endpoint *ep, unsigned id, const void *hdr, size_t hlen, const void *payload,
                 size_t plen, uint32_t flags, tx_cb_t cb, void *user_data);
extern uint64_t *shm_sent_counter;  /* MPI_T pml_rdrp_shm_sent */
inline int am_send(Endpoint *ep, unsigned id, const void *hdr, size_t hlen, const void *payload,
                   size_t plen, uint32_t flags, tx_cb_t cb, void *user_data)
{
    /* the common case, inline: a ring peer with room */
    if (__builtin_expect(ep->shm && !(flags & UCP_AM_SEND_FLAG_RNDV) && ep->backlog.empty(), 1) &&
        ep->node.tx.push(static_cast<uint16_t>(id), hdr, hlen, payload, plen)) {
        ++*shm_sent_counter;
        return TX_DONE;
    }
    return am_send_slow(ep, id, hdr, hlen, payload, plen, flags, cb, user_data);
}

/* ep is a ring peer and a message of hlen header and plen payload bytes
 * would go out at once: then am_send() returns TX_DONE for it, so a
 * caller may keep its header on its stack (the blocking-send path). */
inline bool am_can_send_now(Endpoint *ep, size_t hlen, size_t plen)
{
    return ep->shm && ep->backlog.empty() && ep->node.tx.has_room(hlen, plen);
}

/* ep has not yet read everything we sent it: a ring peer with messages
 * still in its ring or in our backlog.  false for a peer reached through
 * UCX, whose reading we cannot see. */
inline bool peer_has_unread(Endpoint *ep)
{
    return ep->shm && (!ep->backlog.empty() || !ep->node.tx.drained());
}

/* ep is a ring peer still busy with what we sent it: four or more of our
 * messages unread (eager data, or a run of RTS), or a backlog.  Counted in
 * messages: the FIN or credit packet of the last exchange, or one earlier
 * message of any size, still unread is a peer that keeps up (in a
 * ping-pong the peer is still reading the FIN of our last receive when we
 * send again), not a stream. */
constexpr unsigned kRingBusyUnread = 4;
static_assert(kRingBusyUnread <= shm::RingProducer::kRecentPushes, "the ring remembers that many pushes");
inline bool peer_ring_busy(Endpoint *ep)
{
    return ep->shm && (!ep->backlog.empty() || ep->node.tx.unread_at_least(kRingBusyUnread));
}

/* A message to ep now answers one of ep's (a ping-pong: ep's eager
 * message or RTS came through its ring since our last one to it) rather
 * than following our own (a stream).  false for a peer reached through
 * UCX.  Control messages (credits, FIN, CTS) either way do not count. */
inline bool answers_peer(const Endpoint *ep) { return ep->shm && ep->node.tx.spoke(); }
/* A data message (eager or RTS) to ep has left. */
inline void data_sent(Endpoint *ep)
{
    if (ep->shm) ep->node.tx.quiet();
}

/* The handler of message `id` when it comes through a ring (the same
 * functions UCX calls for its active messages). */
void transport_set_handler(unsigned id, ucp_am_recv_callback_t cb);

/* Ring and eager sizes for this node (first, before the credit engine). */
void transport_configure();

/* Process set-up, after the UCX worker exists: the shared segment and its
 * rings.  Fills the modex blob (this process's shm identity + the worker
 * address).  false after a show_help. */
bool transport_init(const void *ucx_addr, size_t ucx_addr_len, void **blob, size_t *blob_len);
void transport_fini();

/* The process id in a peer's modex blob (0: malformed). */
int transport_peer_pid(const void *blob, size_t len);
/* Make an endpoint from a peer's modex blob; NULL after a fatal message. */
Endpoint *transport_connect(ompi_proc_t *proc, const void *blob, size_t len);
/* Forget an endpoint's transport state (del_procs); its UCX endpoint,
 * if any, is closed by the caller. */
void transport_disconnect(Endpoint *ep);

/* The UCX endpoint of ep, connected on first use. */
ucp_ep_h ucx_ep(Endpoint *ep);

/* Our rings and the backlogs; from progress.  Returns events handled. */
int transport_progress();
/* Messages still waiting for ring room (finalize drains them). */
extern size_t transport_backlog;
/* Poll the UCX worker on every progress pass (remote peers, or a UCX data
 * path in use); otherwise only now and then. */
extern bool transport_ucx_busy;

}  // namespace rdrp

#endif
