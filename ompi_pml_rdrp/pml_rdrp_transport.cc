/*
 * pml/rdrp: shared-memory rings for peers on this node, UCX for the rest.
 * See pml_rdrp_transport.h.
 *
 * Segment of a process: a header, then one ring per local rank of the job
 * (ring i carries what local rank i sends us; the ring of our own local
 * rank carries messages to ourselves).  A sender maps the receiver's
 * segment through /proc/<pid>/fd/<fd> at first contact.
 */
#include "pml_rdrp_request.h"
#include "pml_rdrp_arrival.h"
#include "pml_rdrp_transport.h"
#include "common/shm/shm_cma_cost.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/shm/shm_segment.h"

extern "C" {
#include "opal/util/proc.h"
}

namespace rdrp {

size_t transport_backlog = 0;
bool transport_ucx_busy = false;

namespace {

constexpr uint64_t kMagic = 0x314d485350524452ull;  /* "RDRPSHM1" */

/* What a process publishes in the modex: its segment (common/shm/shm_node.h),
 * followed by its worker address. */
struct Identity {
    shm::NodeIdentity node;
    uint64_t ucx_len;
};

struct Local {
    uint32_t nlocal = 0;
    uint32_t local_rank = 0;
    size_t ring_size = 0;
    shm::NodeSegment seg;               /* our rings: ring i is what local rank i sends us */
    std::vector<Endpoint *> backlogged;
};
Local L;

/* Message handlers by AM id (also registered with UCX). */
ucp_am_recv_callback_t handlers[RDRP_AM_COUNT];
ucp_am_recv_param_t ring_param;  /* what a ring message looks like to a handler: eager, no descriptor */

void dispatch(uint16_t id, const void *hdr, size_t hlen, const void *payload, size_t plen)
{
    if (id == RDRP_RING_EAGER_TINY || id == RDRP_RING_EAGER_TINY_GATED) {
        ring_tiny_arrival(id == RDRP_RING_EAGER_TINY_GATED, L.seg.polled_producer(), hdr, hlen,
                          const_cast<void *>(payload), plen);
        return;
    }
    if (id == RDRP_AM_EAGER) {
        ring_eager_arrival(hdr, hlen, const_cast<void *>(payload), plen);
        return;
    }
    if (OPAL_UNLIKELY(id >= RDRP_AM_COUNT || !handlers[id])) {
        bad_header("message of an unknown type from a local peer", id);
        return;
    }
    handlers[id](nullptr, hdr, hlen, const_cast<void *>(payload), plen, &ring_param);
}

void fatal_connect(ompi_proc_t *proc, const std::string &why)
{
    mca_pml_rdrp_fatal("connect-failed", OPAL_NAME_PRINT(proc->super.proc_name), why.c_str());
}

}  // namespace

void transport_set_handler(unsigned id, ucp_am_recv_callback_t cb) { handlers[id] = cb; }

/* Every message to a local peer must fit a ring entry, and a ring must
 * hold several of the largest (eager up to shm_eager_limit): the rings of
 * one process stay within kSegmentBudget, so with many processes on a node
 * the rings (and with them the ring eager limit) shrink.  Every process of
 * the node computes the same sizes.  Before credit_init, which sizes the
 * mailbox slots after the eager limits. */
void transport_configure()
{
    mca_pml_rdrp_params_t &p = mca_pml_rdrp_params;
    if (!p.shm) return;
    constexpr size_t kSegmentBudget = 64u << 20;
    constexpr size_t kHeaders = 64 + sizeof(rdrp_rts_hdr_t) + RDRP_MAX_RKEY;
    L.nlocal = static_cast<uint32_t>(opal_process_info.num_local_peers) + 1;
    L.local_rank = static_cast<uint32_t>(opal_process_info.my_local_rank);
    size_t floor_msg = std::max(p.eager_limit, p.rndv_first_chunk) + kHeaders;  /* what must always fit */
    shm::RingSizing rs = shm::size_rings(L.nlocal, p.shm_ring_size, floor_msg, p.shm_eager_limit, kHeaders,
                                         kSegmentBudget);
    L.ring_size = rs.ring_size;
    if (rs.eager_limit != p.shm_eager_limit) {
        RDRP_VERBOSE(1, "%u processes on this node: ring eager limit %zu instead of %zu", L.nlocal, rs.eager_limit,
                     p.shm_eager_limit);
        p.shm_eager_limit = rs.eager_limit;
    }
    /* per process, not agreed on: only a sender reads it (a receiver
     * takes either protocol), so ranks that measured differently still
     * interoperate */
    if (p.shm_cma_min < 0) {
        double ns = shm::cma_probe_4k_ns();
        /* our ring writes 8 KiB and more with non-temporal stores, which
         * beat the single copy at 8 KiB (shm_cma_cost.h) */
        p.shm_cma_min = static_cast<int>(shm::single_copy_min_for(ns, shm::kCheapCmaMinNonTemporalRing));
        RDRP_VERBOSE(2, "a 4 KiB CMA copy costs %.0f ns here: single copy to peers on this node from %d bytes "
                     "(0: none)", ns, p.shm_cma_min);
    }
}

bool transport_init(const void *ucx_addr, size_t ucx_addr_len, void **blob, size_t *blob_len)
{
    const mca_pml_rdrp_params_t &p = mca_pml_rdrp_params;
    Identity id{};
    ring_param.recv_attr = 0;
    ring_param.reply_ep = nullptr;
    if (p.shm) {
        std::string err;
        /* our rings say who writes them: the compact eager format leaves
         * the source out (wire::tiny_fits) */
        L.seg.set_producer_id(OMPI_PROC_MY_NAME->vpid);
        if (!L.seg.create(kMagic, "rdrp-pml-shm", OMPI_PROC_MY_NAME->jobid, L.nlocal, L.local_rank, L.ring_size,
                          &err, p.shm_prefault != 0))
            RDRP_VERBOSE(1, "no shared-memory transport (%s): local peers use UCX", err.c_str());
        else
            RDRP_VERBOSE(2, "shared memory: %u rings of %zu bytes (local rank %u)", L.nlocal, L.ring_size,
                         L.local_rank);
    }
    id.node = L.seg.identity();
    id.node.magic = kMagic;
    id.node.jobid = OMPI_PROC_MY_NAME->jobid;
    id.ucx_len = ucx_addr_len;
    *blob_len = sizeof(id) + ucx_addr_len;
    char *b = static_cast<char *>(malloc(*blob_len));
    if (!b) return false;
    std::memcpy(b, &id, sizeof(id));
    std::memcpy(b + sizeof(id), ucx_addr, ucx_addr_len);
    *blob = b;
    return true;
}

void transport_fini()
{
    L.backlogged.clear();
    transport_backlog = 0;
    L.seg.release();
}

int transport_peer_pid(const void *blob, size_t len)
{
    Identity id;
    if (len < sizeof(id)) return 0;
    std::memcpy(&id, blob, sizeof(id));
    return id.node.magic == kMagic ? id.node.pid : 0;
}

Endpoint *transport_connect(ompi_proc_t *proc, const void *blob, size_t len)
{
    Identity id;
    if (len < sizeof(id)) {
        fatal_connect(proc, "(its rdrp address is malformed: does that process run pml/rdrp of this version?)");
        return nullptr;
    }
    std::memcpy(&id, blob, sizeof(id));
    if (id.node.magic != kMagic || id.ucx_len != len - sizeof(id)) {
        fatal_connect(proc, "(its rdrp address is malformed: does that process run pml/rdrp of this version?)");
        return nullptr;
    }
    auto *ep = new Endpoint();
    std::memcpy(&ep->peer_id, &proc->super.proc_name, sizeof(ep->peer_id));
    ep->remote = !OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags);
    ep->proc = proc;
    ep->ep = nullptr;
    ep->pid = id.node.pid;
    ep->ucx_addr.assign(static_cast<const char *>(blob) + sizeof(id), static_cast<const char *>(blob) + len);

    bool self = proc == ompi_proc_local_proc;
    if (L.seg.on() && !ep->remote && id.node.fd >= 0) {
        std::string err;
        if (L.seg.connect(id.node, self, &ep->node, &err)) {
            ep->shm = true;
            ep->cma = ep->node.cma;
        } else {
            RDRP_VERBOSE(1, "peer %s: no ring to it (%s): UCX instead", OPAL_NAME_PRINT(proc->super.proc_name),
                         err.c_str());
        }
    }
    const mca_pml_rdrp_params_t &p = mca_pml_rdrp_params;
    const char *why;  /* for the verbose line: why this peer got its data path */
    if (p.data_path != RDRP_PATH_AUTO) {
        ep->path = p.data_path;
        why = "pml_rdrp_data_path says so";
    } else if (ep->remote) {
        /* under auto, pull by GET only where UCX has a get protocol to this
         * peer: over TCP (UCX 1.13) GET is emulated by active messages that
         * the sender's progress must serve (measured across two namespace
         * nodes: 906 MB/s at 1 MiB against 3114 MB/s by the am path) */
        if (rdrp_ucx_ep_native_get(ucx_ep(ep)) != 1) {
            ep->path = RDRP_PATH_AM;
            why = "UCX has no native get to it (GET would be emulated by active messages)";
        } else {
            ep->path = RDRP_PATH_RMA;
            why = "UCX has a native get to it";
        }
    } else if (ep->shm && ep->cma) {
        ep->path = RDRP_PATH_CMA;
        why = "on this node with CMA";
    } else {
        ep->path = RDRP_PATH_AM;
        why = ep->shm ? "on this node without CMA" : "on this node without a ring";
    }
    if (ep->path == RDRP_PATH_CMA && !ep->cma) {
        ep->path = RDRP_PATH_AM;
        why = "CMA asked for, but not available to it";
    }
    if (!ep->shm) ucx_ep(ep);  /* every message goes through UCX */
    /* the eager limit by what a rendezvous to this peer costs: ring peers
     * copy through shared memory; a remote peer whose rendezvous data
     * moves by active messages pays round trips a copy does not */
    ep->eager_limit = ep->shm ? p.shm_eager_limit : p.eager_limit;
    const char *eager_from = ep->shm ? "pml_rdrp_shm_eager_limit" : "pml_rdrp_eager_limit";
    ep->cma_from = 0;
    if (ep->shm && ep->path == RDRP_PATH_CMA && p.shm_cma_min > 0 &&
        static_cast<size_t>(p.shm_cma_min) <= ep->eager_limit) {
        ep->cma_from = static_cast<size_t>(p.shm_cma_min);
        eager_from = "pml_rdrp_shm_eager_limit; from pml_rdrp_shm_cma_min by single copy but for a ping-pong's messages below 32 KiB and a stream's below 16 KiB";
    }
    if (!ep->shm && ep->remote && ep->path == RDRP_PATH_AM && p.am_eager_limit > ep->eager_limit) {
        ep->eager_limit = p.am_eager_limit;
        eager_from = "pml_rdrp_am_eager_limit: a remote peer on the am path";
    }
    RDRP_VERBOSE(5, "peer %s: %s, messages by %s, rendezvous data by %s because %s; eager limit %zu (%s)",
                 OPAL_NAME_PRINT(proc->super.proc_name), ep->remote ? "remote" : "on this node",
                 ep->shm ? "shared-memory ring" : "UCX active messages",
                 ep->path == RDRP_PATH_CMA ? "CMA (single copy)" : ep->path == RDRP_PATH_RMA ? "UCX RMA" : "UCX AM rendezvous",
                 why, (size_t)ep->eager_limit, eager_from);
    return ep;
}

void transport_disconnect(Endpoint *ep)
{
    if (!ep->backlog.empty()) {
        transport_backlog -= ep->backlog.size();
        ep->backlog.clear();
        L.backlogged.erase(std::remove(L.backlogged.begin(), L.backlogged.end(), ep), L.backlogged.end());
    }
    if (ep->shm) L.seg.disconnect(&ep->node);
    ep->shm = false;
}

ucp_ep_h ucx_ep(Endpoint *ep)
{
    if (OPAL_LIKELY(ep->ep != nullptr)) return ep->ep;
    ep->ep = rdrp_ucx_connect(g.uw, ep->ucx_addr.data(), ep->ucx_addr.size(), ep->remote, ep->peer_id);
    if (!ep->ep) {
        /* a peer on this node that died cannot be connected to (UCX cannot
         * open its shared memory): say it died, not that it is misconfigured */
        if (!ep->remote && ep->pid > 0 && kill(ep->pid, 0) != 0 && errno == ESRCH) {
            std::string why = "its process (pid " + std::to_string(ep->pid) + ") no longer exists; " +
                              rdrp_ucx_last_error();
            mca_pml_rdrp_fatal("peer-failed", OPAL_NAME_PRINT(ep->proc->super.proc_name), why.c_str());
            return nullptr;
        }
        fatal_connect(ep->proc, rdrp_ucx_last_error());
        return nullptr;
    }
    /* from now on UCX traffic may arrive or be owed at any time */
    transport_ucx_busy = true;
    return ep->ep;
}

uint64_t *shm_sent_counter = &mca_pml_rdrp_counters.shm_sent;

/* Everything but a ring message that fits at once (am_send, inline). */
int am_send_slow(Endpoint *ep, unsigned id, const void *hdr, size_t hlen, const void *payload, size_t plen,
                 uint32_t flags, tx_cb_t cb, void *user_data)
{
    if (ep->shm && !(flags & UCP_AM_SEND_FLAG_RNDV)) {
        ++stats.shm_sent;
        if (ep->backlog.empty()) L.backlogged.push_back(ep);
        ep->backlog.push_back(TxPending{id, hdr, hlen, payload, plen, cb, user_data});
        ++transport_backlog;
        ++stats.shm_backlogged;
        return TX_PENDING;
    }
    ++stats.ucx_sent;
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = flags;
    if (cb) {
        p.op_attr_mask |= UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        p.cb.send = cb;
        p.user_data = user_data;
    }
    ucs_status_ptr_t sp = ucp_am_send_nbx(ucx_ep(ep), id, hdr, hlen, payload, plen, &p);
    if (OPAL_LIKELY(sp == nullptr)) return TX_DONE;
    if (UCS_PTR_IS_ERR(sp)) {
        fatal_status("send", UCS_PTR_STATUS(sp));
        return TX_DONE;
    }
    if (!cb) {  /* nobody to tell: wait here (control sends always pass a callback) */
        while (ucp_request_check_status(sp) == UCS_INPROGRESS) progress_once();
        ucp_request_free(sp);
        return TX_DONE;
    }
    return TX_PENDING;
}

int transport_progress()
{
    int n = 0;
    if (OPAL_UNLIKELY(transport_backlog != 0)) {
        for (size_t i = 0; i < L.backlogged.size();) {
            Endpoint *ep = L.backlogged[i];
            while (!ep->backlog.empty()) {
                TxPending m = ep->backlog.front();
                /* the store kind of a direct send: a backlog is a stream
                 * into a ring that was full, where ordinary stores to a
                 * far peer's lines cost a transfer each (16-64 KiB
                 * streams, slow host mode: 2.3-3.9 GB/s).  Asked only
                 * once there is room: it counts (shm_far_nt, the line
                 * samples) what is written */
                if (!ep->node.tx.has_room(m.hlen, m.plen)) break;
                if (!ep->node.tx.push(static_cast<uint16_t>(m.id), m.hdr, m.hlen, m.payload, m.plen,
                                      ring_non_temporal(ep, m.plen)))
                    break;  /* (one producer: has_room() holds until this push) */
                ep->backlog.pop_front();
                --transport_backlog;
                ++n;
                if (m.cb) m.cb(nullptr, UCS_OK, m.user_data);
            }
            if (ep->backlog.empty()) {
                L.backlogged[i] = L.backlogged.back();
                L.backlogged.pop_back();
            } else {
                ++i;
            }
        }
    }
    /* A pass ends after the message whose completion ends the caller's
     * wait (req_complete: ends_a_wait): the caller gets it at once, and
     * the messages behind it wait in the ring until the caller has posted
     * what it does next.  A sender that
     * streams right after a barrier or an ack (osu_mbw_mr: a window of 64
     * sends after each MPI_Barrier) otherwise had all 64 taken as
     * unexpected inside the barrier's last poll, each paying a descriptor,
     * a mailbox credit and a second match; left in the ring they meet
     * their posted receives (the fast path in eager_arrival).  The next
     * pass starts at the following ring (shm_node.h), so a busy ring
     * cannot starve the others. */
    const uint64_t done = g.wakeups;
    unsigned got = L.seg.poll(
        [done](uint16_t id, const void *hdr, size_t hlen, const void *payload, size_t plen) {
            /* the peer's data (what our next message may answer: answers_peer) */
            if (rdrp_id_carries_data(id)) L.seg.polled_is_data();
            dispatch(id, hdr, hlen, payload, plen);
            return g.wakeups != done;
        },
        [](const char *why, uint32_t ring) {
            bad_header(why, static_cast<uint64_t>(ring));  /* a malformed entry: nothing of it was used */
        });
    if (got) ++stats.shm_passes;
    return n + static_cast<int>(got);
}

}  // namespace rdrp
