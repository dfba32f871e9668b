/*
 * coll/cdag engine service: shared-memory rings to peers on this node.
 *
 * A small schedule message over UCX costs one shm active message per hop,
 * 0.15-0.2 us more than Open MPI's own shared-memory fast box (issue 14:
 * start ~970 instructions, ucp_am_send_nbx ~330 of them).  pml/rdrp solved
 * this for point-to-point with rings of its own; coll/cdag uses the same
 * per-process node segment (common/shm/shm_node.h), a segment of its own
 * (its own magic and memfd name: never pml/rdrp's rings): ring i of a
 * process's segment carries what local rank i sends it.
 *
 * Sending: inject() admits a message (token throttling) as for UCX, then
 * send_now() hands a message of at most ring_limit bytes to a ring peer
 * here.  The entry is the wire header (cdag_wire.h) followed by the
 * payload; a push that finds the ring full queues the message on its
 * peer's backlog, in order, and progress pushes it when the receiver has
 * made room: a full ring never blocks the sender's progress, and the
 * receiver drains its rings in every progress pass whatever its
 * schedules do (arrivals go to shadow buffers), so a full ring cannot
 * deadlock.  The send completes (tokens back, vertex done) when the ring
 * holds the message.
 *
 * Receiving: every progress pass (inline, or the engine thread) polls our
 * rings; an entry is checked (check_entry: its extent, before any of its
 * bytes is read; then check_packet on the header) and delivered like a
 * UCX eager arrival.  A ring stopped by a malformed entry ends the job
 * through cfg.ring_fatal: that peer's later messages would never arrive.
 */
#include "coll_cdag_service.h"
#include "common/shm/shm_cma_cost.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>

namespace cdag_svc {

namespace {

constexpr uint64_t kRingMagic = 0x314d485347414443ull;  /* "CDAGSHM1" */
/* per entry beyond the payload: the wire header and the payload's
 * cache-line padding (shm_ring.h line_pad) */
constexpr size_t kRingHeaders = sizeof(AmHdr) + 64;
/* shared memory of our rings: with many processes on a node the rings
 * shrink, and with them the ring limit (common/shm/shm_node.h) */
constexpr size_t kSegmentBudget = 16u << 20;
/* what every ring must hold however small the rings get: a message above
 * the ring limit goes by UCX, so this only bounds the shrinking */
constexpr size_t kMustFit = 1024;

/* true ends the pass: a direct run (coll_cdag_direct.cc) has every
 * message it waits for, and what is behind (the peer's next call, often)
 * stays in its ring for that call to take straight from there, instead of
 * being parked in a shadow buffer now and looked up again (callgrind, 8 B
 * bcast loop at np 2: park and take were 300 of the receiver's ~1300
 * instructions per call) */
bool dispatch(uint16_t id, const void *hdr, size_t hlen, const void *payload, size_t plen)
{
    if (id == kRingFin) {
        cma_fin(hdr, hlen, plen);
        return G.direct && direct_satisfied();
    }
    AmHdr h;
    std::memset(&h, 0, sizeof(h));
    if (hlen == sizeof(h)) std::memcpy(&h, hdr, sizeof(h));
    if ((id != kRingMsg && id != kRingCma) || check_packet(hlen, h) != nullptr) {  // never touch memory for it
        ++cdag_glue_stats.dropped;
        return false;
    }
    Key k{h.cid, static_cast<uint32_t>(h.src), h.sched, h.seq, h.tag};
    if (id == kRingCma) cma_arrival(k, payload, plen);
    else deliver_eager(k, payload, plen);
    return G.direct && direct_satisfied();
}

void ring_bad(const char *why, uint32_t ring)
{
    static bool told = false;  // the ring stays stopped: report once
    if (told) return;
    told = true;
    if (G.cfg.ring_fatal) G.cfg.ring_fatal(why, static_cast<int>(ring));
}

/* Push what waits for room, in order per peer. */
unsigned drain_backlogs()
{
    unsigned n = 0;
    for (size_t i = 0; i < G.backlogged.size();) {
        RingPeer *rp = G.backlogged[i];
        while (!rp->backlog.empty()) {
            RingPending m = rp->backlog.front();
            bool pushed = m.id == kRingMsg  ? rp->np.tx.push(kRingMsg, &m.hdr, sizeof(m.hdr), m.buf, m.len)
                          : m.id == kRingCma ? rp->np.tx.push(kRingCma, &m.hdr, sizeof(m.hdr), &m.cd, sizeof(m.cd))
                                             : rp->np.tx.push(kRingFin, &m.fin, sizeof(m.fin), nullptr, 0);
            if (!pushed) break;
            rp->backlog.pop_front();
            --G.ring_backlog;
            ++n;
            if (m.id != kRingMsg) continue;  // a descriptor completes at its FIN; a FIN is all done
            ++cdag_glue_stats.ring_sent;
            send_complete(m.c, m.ex, m.v, m.tokens);  // may send more (onto this backlog: it is not empty)
        }
        if (rp->backlog.empty()) {
            rp->listed = false;
            G.backlogged[i] = G.backlogged.back();
            G.backlogged.pop_back();
        } else {
            ++i;
        }
    }
    return n;
}

}  // namespace

bool ring_setup(std::string *err)
{
    uint32_t nlocal = static_cast<uint32_t>(G.cfg.local_ranks > 0 ? G.cfg.local_ranks : 1);
    rdrp::shm::RingSizing rs = rdrp::shm::size_rings(nlocal, 0, kMustFit, G.cfg.ring_limit, kRingHeaders,
                                                     kSegmentBudget);
    if (!G.node.create(kRingMagic, "rdrp-cdag-shm", G.cfg.jobid, nlocal, static_cast<uint32_t>(G.cfg.local_rank),
                       rs.ring_size, err))
        return false;
    G.ring_limit = rs.eager_limit;
    /* per process, not agreed on: only a sender decides, a receiver takes
     * a ring message or a descriptor alike.  Oversubscribed, a ring up to
     * its limit: a single-copy send is done only when its receiver has run
     * and answered, which with more ranks than cores costs a context
     * switch, while a ring send is done once copied in (np 4 on 2 cores,
     * OSU best of 3, single copy from 8 KiB against rings to 128 KiB:
     * bcast 8 KiB 6.7 against 3.9 us, gather 10.9 / 5.3, reduce 8.5 / 3.4,
     * reduce 128 KiB 36.8 / 20.6) */
    double ns = -1;
    if (G.cfg.cma && G.cfg.cma_min < 0 && !G.cfg.oversubscribed) ns = rdrp::shm::cma_probe_4k_ns();
    G.cma_min = !G.cfg.cma              ? 0
                : G.cfg.cma_min >= 0    ? static_cast<uint64_t>(G.cfg.cma_min)
                : G.cfg.oversubscribed  ? 0
                                        : rdrp::shm::single_copy_min_for(ns, rdrp::shm::kCheapCmaMinMeasuredRing);
    return true;
}

void ring_teardown()
{
    for (auto &kv : G.ring_peers) {
        G.node.disconnect(&kv.second->np);
        delete kv.second;
    }
    G.ring_peers.clear();
    G.ring_by_local.clear();
    G.backlogged.clear();
    G.ring_backlog = 0;
    G.node.release();
    G.ring_limit = 0;
}

void ring_identity(rdrp::shm::NodeIdentity *id)
{
    *id = G.node.identity();
    id->magic = kRingMagic;
    id->jobid = G.cfg.jobid;
}

void ring_connect(uint64_t peer_id, const rdrp::shm::NodeIdentity &id)
{
    if (!G.node.on() || id.fd < 0 || G.ring_peers.count(peer_id)) return;
    auto *rp = new (std::nothrow) RingPeer;
    if (!rp) return;
    std::string err;
    if (!G.node.connect(id, id.pid == static_cast<int32_t>(getpid()), &rp->np, &err)) {
        delete rp;  // UCX carries everything to this peer
        return;
    }
    G.ring_peers[peer_id] = rp;
    if (id.local_rank >= G.ring_by_local.size()) G.ring_by_local.resize(id.local_rank + 1, nullptr);
    G.ring_by_local[id.local_rank] = rp;
}

bool ring_push_now(RingPeer *rp, const AmHdr &h, const void *buf, uint64_t len)
{
    if (!rp->backlog.empty()) return false;
    /* push() in its two steps with the header's size a constant: the
     * header goes by three moves, not a memcpy call (callgrind, 8 B gather
     * leaf over pml/rdrp: push and its memcpy were ~115 of 787
     * instructions per call) */
    char *body = rp->np.tx.reserve(sizeof(h), len);
    if (!body) return false;
    /* the store kind by the measured distance of the peer's cache; a
     * schedule message is a step some vertex of the peer's waits for (an
     * answer, in the ring's terms) */
    const bool nt = rdrp::shm::non_temporal_for(rp->np.tx, len, static_cast<uint32_t>(G.cfg.far_line_ns), true,
                                                [] { return false; });
    rdrp::shm::RingProducer::fill(
        body, sizeof(h), buf, len, [&h](char *at) { std::memcpy(at, &h, sizeof(h)); }, nt);
    rp->np.tx.commit(kRingMsg, sizeof(h), len);
    ++cdag_glue_stats.msgs_sent;
    cdag_glue_stats.bytes_sent += len;
    ++cdag_glue_stats.ring_sent;
    return true;
}

int ring_send(Comm *c, cdag::Executor &ex, cdag::VertexId v, RingPeer *rp, const AmHdr &h, const void *buf,
              uint64_t len, uint32_t tokens)
{
    if (ring_push_now(rp, h, buf, len)) {
        send_complete(c, &ex, v, tokens);
        return 0;
    }
    ++cdag_glue_stats.msgs_sent;  // counted once, now; ring_sent when it leaves the backlog
    cdag_glue_stats.bytes_sent += len;
    if (!rp->listed) {
        rp->listed = true;
        G.backlogged.push_back(rp);
    }
    rp->backlog.push_back(RingPending{c, &ex, v, tokens, h, buf, len});
    ++G.ring_backlog;
    ++cdag_glue_stats.ring_backlogged;
    return 0;
}

void ring_push_ctl(RingPeer *rp, const RingPending &m)
{
    if (rp->backlog.empty()) {
        bool pushed = m.id == kRingCma ? rp->np.tx.push(kRingCma, &m.hdr, sizeof(m.hdr), &m.cd, sizeof(m.cd))
                                       : rp->np.tx.push(kRingFin, &m.fin, sizeof(m.fin), nullptr, 0);
        if (pushed) return;
    }
    if (!rp->listed) {
        rp->listed = true;
        G.backlogged.push_back(rp);
    }
    rp->backlog.push_back(m);
    ++G.ring_backlog;
    ++cdag_glue_stats.ring_backlogged;
}

void ring_forget(const cdag::Executor *ex)
{
    for (size_t i = 0; i < G.backlogged.size();) {
        RingPeer *rp = G.backlogged[i];
        auto &q = rp->backlog;
        size_t before = q.size();
        q.erase(std::remove_if(q.begin(), q.end(), [ex](const RingPending &m) { return m.ex == ex; }), q.end());
        G.ring_backlog -= before - q.size();
        if (q.empty()) {
            rp->listed = false;
            G.backlogged[i] = G.backlogged.back();
            G.backlogged.pop_back();
        } else {
            ++i;
        }
    }
}

unsigned ring_progress()
{
    unsigned n = 0;
    if (__builtin_expect(G.ring_backlog != 0, 0)) n += drain_backlogs();
    /* most passes find nothing: one load per ring first (callgrind, 8 B
     * allreduce at np 2: 63 instructions per empty poll of two rings
     * without this look) */
    if (G.node.on() && G.node.ready()) n += G.node.poll(dispatch, ring_bad);
    return n;
}

}  // namespace cdag_svc
