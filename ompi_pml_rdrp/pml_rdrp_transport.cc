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
#include "pml_rdrp_transport.h"

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

/* What a process publishes in the modex, followed by its worker address. */
struct Identity {
    uint64_t magic;
    int32_t  pid;
    int32_t  fd;          /* its segment (-1: no shared-memory transport) */
    uint32_t jobid;
    uint32_t local_rank;  /* which ring of a receiver's segment it writes to */
    uint32_t nlocal;      /* rings in its segment */
    uint32_t ring_size;
    uint64_t seg_base;    /* the segment in its own address space (CMA probe) */
    uint64_t seg_len;
    uint64_t ucx_len;
};

struct SegmentHeader {
    uint64_t magic;
    uint32_t nlocal;
    uint32_t ring_size;
    char pad[48];
};
static_assert(sizeof(SegmentHeader) == 64, "cache-line header");

struct Local {
    bool on = false;
    shm::Segment seg;
    uint32_t nlocal = 0;
    uint32_t local_rank = 0;
    size_t ring_size = 0;
    std::vector<shm::RingConsumer> rx;  /* ring i: what local rank i sends us */
    std::vector<Endpoint *> tx_to;      /* i: the ring peer of local rank i (ours to it), if any */
    std::vector<Endpoint *> backlogged;
    unsigned ucx_skip = 0;
    size_t next_rx = 0;  /* ring polled first by the next pass (rotates after a pass stopped early) */
};
Local L;

/* Message handlers by AM id (also registered with UCX). */
ucp_am_recv_callback_t handlers[RDRP_AM_COUNT];
ucp_am_recv_param_t ring_param;  /* what a ring message looks like to a handler: eager, no descriptor */

void *ring_at(void *seg_base, size_t ring_size, uint32_t i)
{
    return static_cast<char *>(seg_base) + sizeof(SegmentHeader) + static_cast<size_t>(i) * shm::ring_bytes(ring_size);
}

size_t pow2_at_least(size_t n)
{
    size_t p = 4096;
    while (p < n) p <<= 1;
    return p;
}

void dispatch(uint16_t id, const void *hdr, size_t hlen, const void *payload, size_t plen)
{
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
    size_t ring = pow2_at_least(std::max(p.shm_ring_size, 4 * (std::max(floor_msg, p.shm_eager_limit + kHeaders))));
    while (ring > 4 * floor_msg && ring / 2 >= 4 * floor_msg && L.nlocal * shm::ring_bytes(ring) > kSegmentBudget)
        ring /= 2;
    L.ring_size = ring;
    if (p.shm_eager_limit + kHeaders > ring / 4) {
        size_t lim = ring / 4 > kHeaders ? ring / 4 - kHeaders : 0;
        RDRP_VERBOSE(1, "%u processes on this node: ring eager limit %zu instead of %zu", L.nlocal, lim,
                     p.shm_eager_limit);
        p.shm_eager_limit = lim;
    }
}

bool transport_init(const void *ucx_addr, size_t ucx_addr_len, void **blob, size_t *blob_len)
{
    const mca_pml_rdrp_params_t &p = mca_pml_rdrp_params;
    Identity id{};
    id.magic = kMagic;
    id.pid = static_cast<int32_t>(getpid());
    id.fd = -1;
    id.jobid = OMPI_PROC_MY_NAME->jobid;
    id.ucx_len = ucx_addr_len;
    ring_param.recv_attr = 0;
    ring_param.reply_ep = nullptr;
    if (p.shm) {
        size_t len = sizeof(SegmentHeader) + L.nlocal * shm::ring_bytes(L.ring_size);
        std::string err;
        if (L.local_rank >= L.nlocal || !shm::segment_create(len, &L.seg, &err)) {
            RDRP_VERBOSE(1, "no shared-memory transport (%s): local peers use UCX",
                         err.empty() ? "local rank out of range" : err.c_str());
        } else {
            auto *h = static_cast<SegmentHeader *>(L.seg.base);
            h->magic = kMagic;
            h->nlocal = L.nlocal;
            h->ring_size = static_cast<uint32_t>(L.ring_size);
            L.rx.resize(L.nlocal);
            L.tx_to.assign(L.nlocal, nullptr);
            for (uint32_t i = 0; i < L.nlocal; ++i) {
                void *r = ring_at(L.seg.base, L.ring_size, i);
                shm::ring_init(r, L.ring_size);
                L.rx[i].attach(r, L.ring_size);
            }
            L.on = true;
            id.fd = L.seg.fd;
            id.local_rank = L.local_rank;
            id.nlocal = L.nlocal;
            id.ring_size = static_cast<uint32_t>(L.ring_size);
            id.seg_base = reinterpret_cast<uint64_t>(L.seg.base);
            id.seg_len = len;
            RDRP_VERBOSE(2, "shared memory: %u rings of %zu bytes (local rank %u)", L.nlocal, L.ring_size,
                         L.local_rank);
        }
    }
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
    L.rx.clear();
    L.next_rx = 0;
    L.tx_to.clear();
    if (L.on) shm::segment_release(&L.seg);
    L.on = false;
}

int transport_peer_pid(const void *blob, size_t len)
{
    Identity id;
    if (len < sizeof(id)) return 0;
    std::memcpy(&id, blob, sizeof(id));
    return id.magic == kMagic ? id.pid : 0;
}

Endpoint *transport_connect(ompi_proc_t *proc, const void *blob, size_t len)
{
    Identity id;
    if (len < sizeof(id)) {
        fatal_connect(proc, "(its rdrp address is malformed: does that process run pml/rdrp of this version?)");
        return nullptr;
    }
    std::memcpy(&id, blob, sizeof(id));
    if (id.magic != kMagic || id.ucx_len != len - sizeof(id)) {
        fatal_connect(proc, "(its rdrp address is malformed: does that process run pml/rdrp of this version?)");
        return nullptr;
    }
    auto *ep = new Endpoint();
    std::memcpy(&ep->peer_id, &proc->super.proc_name, sizeof(ep->peer_id));
    ep->remote = !OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags);
    ep->proc = proc;
    ep->ep = nullptr;
    ep->pid = id.pid;
    ep->ucx_addr.assign(static_cast<const char *>(blob) + sizeof(id), static_cast<const char *>(blob) + len);

    bool self = proc == ompi_proc_local_proc;
    if (L.on && !ep->remote && id.fd >= 0 && id.jobid == OMPI_PROC_MY_NAME->jobid &&
        L.local_rank < id.nlocal) {
        void *base = nullptr;
        if (self) {
            base = L.seg.base;
        } else {
            shm::Segment s;
            std::string err;
            if (shm::segment_attach(id.pid, id.fd, id.seg_len, &s, &err)) {
                base = s.base;
                ep->seg_base = s.base;
                ep->seg_len = s.len;
            } else {
                RDRP_VERBOSE(1, "peer %s: cannot map its segment (%s): UCX instead",
                             OPAL_NAME_PRINT(proc->super.proc_name), err.c_str());
            }
        }
        if (base && static_cast<SegmentHeader *>(base)->magic == kMagic) {
            ep->tx.attach(ring_at(base, id.ring_size, L.local_rank), id.ring_size);
            ep->shm = true;
            if (id.local_rank < L.tx_to.size()) L.tx_to[id.local_rank] = ep;
            /* single copy needs ptrace-like permission: try it on the header */
            uint64_t magic = 0;
            ep->cma = shm::cma_read(id.pid, &magic, id.seg_base, sizeof(magic)) == 0 && magic == kMagic;
        }
    }
    const mca_pml_rdrp_params_t &p = mca_pml_rdrp_params;
    if (ep->remote) {
        ep->path = p.data_path_remote;
        /* under auto, pull by GET only where UCX has a get protocol to this
         * peer: over TCP (UCX 1.13) GET is emulated by active messages that
         * the sender's progress must serve (measured across two namespace
         * nodes: 906 MB/s at 1 MiB against 3114 MB/s by the am path) */
        if (p.data_path == RDRP_PATH_AUTO && p.data_path_remote == RDRP_PATH_RMA &&
            rdrp_ucx_ep_native_get(ucx_ep(ep)) != 1)
            ep->path = RDRP_PATH_AM;
    } else if (p.data_path != RDRP_PATH_AUTO) ep->path = p.data_path;
    else ep->path = ep->shm && ep->cma ? RDRP_PATH_CMA : RDRP_PATH_AM;
    if (ep->path == RDRP_PATH_CMA && !ep->cma) ep->path = RDRP_PATH_AM;
    if (!ep->shm) ucx_ep(ep);  /* every message goes through UCX */
    /* the eager limit by what a rendezvous to this peer costs: ring peers
     * copy through shared memory; a remote peer whose rendezvous data
     * moves by active messages pays round trips a copy does not */
    ep->eager_limit = ep->shm ? p.shm_eager_limit : p.eager_limit;
    if (!ep->shm && ep->remote && ep->path == RDRP_PATH_AM && p.am_eager_limit > ep->eager_limit)
        ep->eager_limit = p.am_eager_limit;
    RDRP_VERBOSE(5, "peer %s: %s, messages by %s, rendezvous data by %s",
                 OPAL_NAME_PRINT(proc->super.proc_name), ep->remote ? "remote" : "on this node",
                 ep->shm ? "shared-memory ring" : "UCX active messages",
                 ep->path == RDRP_PATH_CMA ? "CMA (single copy)" : ep->path == RDRP_PATH_RMA ? "UCX RMA" : "UCX AM rendezvous");
    return ep;
}

void transport_disconnect(Endpoint *ep)
{
    if (!ep->backlog.empty()) {
        transport_backlog -= ep->backlog.size();
        ep->backlog.clear();
        L.backlogged.erase(std::remove(L.backlogged.begin(), L.backlogged.end(), ep), L.backlogged.end());
    }
    if (ep->seg_base) {
        shm::Segment s;
        s.base = ep->seg_base;
        s.len = ep->seg_len;
        shm::segment_release(&s);
        ep->seg_base = nullptr;
    }
    std::replace(L.tx_to.begin(), L.tx_to.end(), ep, static_cast<Endpoint *>(nullptr));
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
                if (!ep->tx.push(static_cast<uint16_t>(m.id), m.hdr, m.hlen, m.payload, m.plen)) break;
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
    /* A pass ends after the message that completed a request: the caller
     * gets its completion at once, and the messages behind it wait in the
     * ring until the caller has posted what it does next.  A sender that
     * streams right after a barrier or an ack (osu_mbw_mr: a window of 64
     * sends after each MPI_Barrier) otherwise had all 64 taken as
     * unexpected inside the barrier's last poll, each paying a descriptor,
     * a mailbox credit and a second match; left in the ring they meet
     * their posted receives (the fast path in eager_arrival).  The next
     * pass starts at the following ring, so a busy ring cannot starve the
     * others. */
    const size_t nr = L.rx.size();
    const uint64_t done = g.completions;
    for (size_t k = 0; k < nr; ++k) {
        size_t i = L.next_rx + k;
        if (i >= nr) i -= nr;
        shm::RingConsumer &r = L.rx[i];
        unsigned got = r.poll([done](uint16_t id, const void *hdr, size_t hlen, const void *payload, size_t plen) {
            dispatch(id, hdr, hlen, payload, plen);
            return g.completions != done;
        });
        if (OPAL_UNLIKELY(r.error() != nullptr))  /* a malformed entry: nothing of it was used */
            bad_header(r.error(), static_cast<uint64_t>(i));
        /* the peer just talked to us, so it is progressing: it has likely
         * taken all we sent, and our ring to it may rewind (shm_ring.h) */
        if (got && L.tx_to[i]) L.tx_to[i]->tx.hint_drained();
        n += static_cast<int>(got);
        if (g.completions != done) {
            L.next_rx = i + 1 < nr ? i + 1 : 0;
            break;
        }
    }
    return n;
}

}  // namespace rdrp
