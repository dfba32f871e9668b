/*
 * coll/cdag engine service: single copy of large schedule messages to
 * peers on this node (issue 14).
 *
 * Above the ring limit a message went by UCX's rendezvous on coll/cdag's
 * private worker (RTS, get, ATS, each a pass through UCX's protocol
 * layers), and coll/tuned over ob1/vader moves it with one
 * process_vm_readv.  Here the sender pushes a descriptor (its pid, the
 * buffer's address and length, a cookie) through the peer's ring, in
 * order with the small messages and after the same admission; the
 * receiver matches it like any arrival and, once its receive is posted,
 * pulls the bytes with one process_vm_readv straight into place
 * (common/shm/shm_segment.h cma_read, as pml/rdrp's rendezvous does), then
 * answers with a FIN through its own ring to the sender.  The send
 * vertex completes, and its admission tokens go back, only at the FIN:
 * the sender's buffer is read while the sender waits, as in any
 * rendezvous.
 *
 * An early descriptor (before its receive) is held unread until the
 * receive is posted (no buffer of ours, no copy): a rendezvous that waits
 * for the receive, which validate_set() already treats as one event of
 * send and receive (coll_cdag_transport.cc, am_cb).  Under token throttling a send
 * holds tokens until it completes, so there an early descriptor is always
 * pulled at once and answered (a send's completion never waits for the
 * receiver's schedule).
 *
 * Permission: process_vm_readv needs what ptrace would (same user; Yama
 * ptrace_scope 0 or CAP_SYS_PTRACE).  Both sides probed it when they
 * mapped each other's segment (shm_node.cc connect: NodePeer::cma); the
 * sender uses this path only to a peer it could read, and a receiver that
 * cannot read the sender after all answers kCmaRetry: the sender sends
 * that message again by UCX and every later large one to that peer
 * (coll_cdag_cma_resent).  No Open MPI type.
 */
#include "coll_cdag_service.h"

#include <unistd.h>

#include <cstring>
#include <vector>

namespace cdag_svc {

/* coll_cdag_transport.cc */
int send_now_ucx(Comm *c, cdag::Executor &ex, cdag::VertexId v, int peer, const cdag::MsgId &id, const void *buf,
                 uint64_t len, uint32_t tokens);
void unadmit(Comm *c, uint32_t tokens);

namespace {

/* A send whose descriptor left and whose FIN has not come: a slot of a
 * table that only grows (to the high-water mark of such sends in flight),
 * named by (index, generation) in the cookie so a stale or forged FIN
 * finds nothing. */
struct Slot {
    Comm *c = nullptr;          // null: free
    cdag::Executor *ex = nullptr;
    cdag::VertexId v = 0;
    uint32_t tokens = 0;
    uint32_t gen = 0;
    int peer = 0;
    RingPeer *rp = nullptr;
    AmHdr hdr{};
    const void *buf = nullptr;
    uint64_t len = 0;
    uint32_t next_free = 0;     // index + 1 of the next free slot (0: none)
    /* a direct run's send (ex null): its FIN is handed to fin(ctx) */
    void (*direct_fin)(void *ctx, int32_t status) = nullptr;
    void *direct_ctx = nullptr;
};
std::vector<Slot> slots;
uint32_t free_head = 0;  // index + 1
size_t in_flight = 0;

uint32_t slot_get()
{
    if (free_head == 0) {
        if (slots.size() == slots.capacity()) count_alloc();
        slots.emplace_back();
        return static_cast<uint32_t>(slots.size() - 1);
    }
    uint32_t i = free_head - 1;
    free_head = slots[i].next_free;
    return i;
}

void slot_put(uint32_t i)
{
    slots[i].c = nullptr;
    slots[i].ex = nullptr;
    slots[i].direct_fin = nullptr;
    slots[i].direct_ctx = nullptr;
    ++slots[i].gen;
    slots[i].next_free = free_head;
    free_head = i + 1;
    --in_flight;
}

uint64_t cookie_of(uint32_t i) { return (static_cast<uint64_t>(slots[i].gen) << 32) | i; }

/* The sender's ring as seen from here (where its FIN goes), if d names
 * one whose process is the descriptor's. */
RingPeer *sender_ring(const CmaDesc &d)
{
    if (d.local_rank >= G.ring_by_local.size()) return nullptr;
    RingPeer *rp = G.ring_by_local[d.local_rank];
    return rp && rp->np.pid == d.pid ? rp : nullptr;
}

void send_fin(RingPeer *rp, uint64_t cookie, int32_t status)
{
    RingPending m{};
    m.id = kRingFin;
    m.fin = CmaFin{cookie, status, 0};
    ring_push_ctl(rp, m);
}

/* One kernel copy of the sender's bytes into dst, answered.  false: not
 * copied (we may not read the sender: it was told to send the message
 * again by UCX, and the receive waits for that). */
bool pull(RingPeer *back, const CmaDesc &d, char *dst)
{
    int rc = back->np.cma ? rdrp::shm::cma_read(d.pid, dst, d.addr, d.len) : -1;
    send_fin(back, d.cookie, rc == 0 ? kCmaDone : kCmaRetry);
    return rc == 0;
}

/* slot i (its owner's fields set) names a send of len bytes at buf to
 * rp: its descriptor leaves now, in m, through rp's ring (or its backlog) */
void push_descriptor(uint32_t i, RingPeer *rp, const AmHdr &h, const void *buf, uint64_t len, RingPending m)
{
    Slot &s = slots[i];
    s.rp = rp;
    s.hdr = h;
    s.buf = buf;
    s.len = len;
    ++in_flight;
    ++cdag_glue_stats.msgs_sent;
    cdag_glue_stats.bytes_sent += len;
    ++cdag_glue_stats.cma_sent;
    m.id = kRingCma;
    m.cd = CmaDesc{static_cast<int32_t>(getpid()), G.node.local_rank(), reinterpret_cast<uint64_t>(buf), len,
                   cookie_of(i)};
    ring_push_ctl(rp, m);
}

}  // namespace

int cma_send(Comm *c, cdag::Executor &ex, cdag::VertexId v, int peer, RingPeer *rp, const AmHdr &h,
             const void *buf, uint64_t len, uint32_t tokens)
{
    uint32_t i = slot_get();
    Slot &s = slots[i];
    s.c = c;
    s.ex = &ex;
    s.v = v;
    s.tokens = tokens;
    s.peer = peer;
    push_descriptor(i, rp, h, buf, len, RingPending{c, &ex, v, tokens, h, buf, len});
    return 0;
}

void cma_fin(const void *hdr, size_t hlen, size_t plen)
{
    CmaFin f{};
    if (hlen == sizeof(f)) std::memcpy(&f, hdr, sizeof(f));
    if (check_cma_fin(hlen, plen, f) != nullptr) {
        ++cdag_glue_stats.dropped;
        return;
    }
    uint32_t i = static_cast<uint32_t>(f.cookie);
    if (i >= slots.size() || !slots[i].c || slots[i].gen != static_cast<uint32_t>(f.cookie >> 32)) return;  // forgotten
    Slot s = slots[i];
    slot_put(i);
    if (f.status == kCmaRetry) {  // the receiver may not read us: no descriptor to it any more
        s.rp->cma_refused = true;
        ++cdag_glue_stats.cma_resent;
    }
    if (s.direct_fin) {  // a direct run waits in place: it sends again (through the ring) or fails
        s.direct_fin(s.direct_ctx, f.status);
        return;
    }
    if (f.status == kCmaRetry) {  // sent again by UCX
        cdag::MsgId id{s.hdr.sched, s.hdr.seq, s.hdr.tag};
        int rc = send_now_ucx(s.c, *s.ex, s.v, s.peer, id, s.buf, s.len, s.tokens);
        if (rc != 0) s.ex->fail(s.v, rc);
        return;
    }
    send_complete(s.c, s.ex, s.v, s.tokens, f.status == kCmaDone ? 0 : -2);
}

void cma_arrival(const Key &k, const void *payload, size_t plen)
{
    CmaDesc d{};
    if (plen == sizeof(d)) std::memcpy(&d, payload, sizeof(d));
    if (check_cma_desc(plen, d) != nullptr || d.local_rank >= static_cast<uint32_t>(G.cfg.local_ranks)) {
        ++cdag_glue_stats.dropped;  // malformed: never read, never answered
        return;
    }
    /* No ring back to the sender: a peer that connected to us before we
     * connected to it (its communicator came up first) and sent at once.
     * Dropped, its send waited forever for the FIN (coll_cdag_thread_handoff
     * np 4 under load hung 5 times in 62 runs: a rank polled its rings
     * inside MPI_Init, before its own connects, and dropped its peers'
     * first ialltoall descriptors).  So it is held unread like any early
     * one: its receive is posted once our communicator is up, and so
     * connected, and pulls and answers it then. */
    RingPeer *back = sender_ring(d);
    if (back) {
        if (G.direct && direct_take_cma(k, d)) return;
        auto it = G.posted.find(k);
        if (it != G.posted.end()) {
            Posted p = it->second;
            if (p.len != d.len) {  // never overrun a buffer: both ends fail
                G.posted.erase(it);
                send_fin(back, d.cookie, kCmaFailed);
                p.ex->fail(p.v, -2);
                return;
            }
            if (!pull(back, d, p.buf)) return;  // it comes again by UCX, to this receive
            G.posted.erase(it);
            p.ex->complete(p.v);
            return;
        }
    }
    ++cdag_glue_stats.unexpected;
    Unexp u{false, nullptr, d.len, false, 0, false, nullptr, 0, nullptr};
    /* Early: held unread until the receive is posted (single copy).
     * Pulling it at once into a pre-made buffer when one is free, as UCX's
     * early rendezvous does, measured the same in OSU at np 2 (0.97-1.03x)
     * and made cdag_rndv_runahead's receiver allocate a map node.  Under
     * token throttling pulled at once (the sender's tokens must not wait
     * for our schedule). */
    if (G.throttling && back) {
        std::size_t cap = 0;
        u.data = big_buffer_get(d.len, &cap);
        u.cap = cap;
        if (!u.data || !pull(back, d, static_cast<char *>(u.data))) {
            if (!u.data) send_fin(back, d.cookie, kCmaRetry);
            big_buffer_put(u.data, cap);
            return;  // by UCX again (or nothing if it was dropped), to the receive posted later
        }
    } else {  // held unread, a rendezvous that waits for its receive (counted with UCX's held ones)
        u.cma = true;
        u.cd = d;
        ++cdag_glue_stats.rndv_held;
    }
    if (!G.unexpected.emplace(k, u).second) {  // a second message with the same key: dropped
        ++cdag_glue_stats.dropped;
        if (!u.cma) big_buffer_put(u.data, u.cap);
        else if (back) send_fin(back, d.cookie, kCmaFailed);
    }
}

int cma_take_held(const Key &k, const Unexp &u, cdag::Executor &ex, cdag::VertexId v, char *buf, uint64_t len)
{
    RingPeer *back = sender_ring(u.cd);  // found at its arrival
    if (!back) return -2;
    if (u.cd.len != len) {
        send_fin(back, u.cd.cookie, kCmaFailed);
        return -2;
    }
    if (pull(back, u.cd, buf)) ex.complete(v);
    else G.posted.emplace(k, Posted{&ex, v, buf, len});  // it comes again by UCX
    return 0;
}

void cma_drop(const Unexp &u)
{
    if (RingPeer *back = sender_ring(u.cd)) send_fin(back, u.cd.cookie, kCmaFailed);
}

void cma_forget(const cdag::Executor *ex)
{
    if (!in_flight) return;
    for (uint32_t i = 0; i < slots.size(); ++i)
        if (slots[i].c && slots[i].ex == ex) {
            if (G.throttling) unadmit(slots[i].c, slots[i].tokens);
            slot_put(i);
        }
}

void cma_send_direct(Comm *c, RingPeer *rp, const AmHdr &h, const void *buf, uint64_t len,
                     void (*fin)(void *ctx, int32_t status), void *ctx)
{
    uint32_t i = slot_get();
    Slot &s = slots[i];
    s.c = c;
    s.ex = nullptr;
    s.direct_fin = fin;
    s.direct_ctx = ctx;
    RingPending m{};
    m.hdr = h;
    push_descriptor(i, rp, h, buf, len, m);
}

int cma_pull_direct(const CmaDesc &d, char *buf, uint64_t len)
{
    RingPeer *back = sender_ring(d);
    if (!back) return -2;
    if (d.len != len) {  // never overrun a buffer: both ends fail
        send_fin(back, d.cookie, kCmaFailed);
        return -2;
    }
    return pull(back, d, buf) ? 1 : 0;
}

void cma_forget_direct(const void *ctx)
{
    if (!in_flight) return;
    for (uint32_t i = 0; i < slots.size(); ++i)
        if (slots[i].c && slots[i].direct_ctx == ctx) slot_put(i);
}

void cma_reserve(std::size_t sends)
{
    if (slots.capacity() >= sends) return;
    count_alloc();
    slots.reserve(sends);
}

size_t cma_pending() { return in_flight; }

}  // namespace cdag_svc
