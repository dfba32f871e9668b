/*
 * coll/cdag engine service: the transport the cDAG executors run on, over
 * the private UCX worker (coll_cdag_service.h has the wire format).
 *
 * UCX picks eager or its own rendezvous by size: a rendezvous arrival
 * whose receive is posted is pulled straight into the destination (zero
 * copy, RTS then GET inside UCX); one that arrives first is pulled at once
 * into a buffer of ours made beforehand (reserve_for), or, when none is
 * free, held unpulled until its receive is posted (am_cb).  Small arrivals
 * that come first are copied into pre-allocated shadow buffers.
 *
 * Every send of every schedule leaves through inject(): the one place
 * where admission control (token throttling) sits.  After admission, a
 * message of at most the ring limit to a peer on this node goes through
 * that peer's shared-memory ring instead (coll_cdag_ring.cc); its arrival
 * takes the same way as a UCX eager one (deliver_eager).
 */
#include "coll_cdag_service.h"

#include <cstring>
#include <new>

namespace cdag_svc {

/* ------------------------------------------------------------ sends */
struct SendCtx {
    Comm *c;
    cdag::Executor *ex;
    cdag::VertexId v;
    uint32_t tokens;  // admission tokens held until completion
    AmHdr hdr;        // must outlive the send
};

void drain_pending();

/* Admission: the rank's limit, then the communicator's node pool. */
bool admit(Comm *c, uint64_t len, uint32_t *tokens)
{
    uint32_t none;
    *tokens = 0;
    if (G.rank_thr && !cdag_throttle_try_acquire(G.rank_thr, len, &none)) return false;
    if (c->pool && !cdag_throttle_try_acquire(c->pool, len, tokens)) {
        if (G.rank_thr) cdag_throttle_release(G.rank_thr, 0);
        return false;
    }
    return true;
}

void unadmit(Comm *c, uint32_t tokens)
{
    if (G.rank_thr) cdag_throttle_release(G.rank_thr, 0);
    if (c->pool) cdag_throttle_release(c->pool, tokens);
}

/* A send left (UCX completed it, or the ring took it; status non-zero:
 * it failed): the tokens go back and the vertex completes or fails. */
void send_complete(Comm *c, cdag::Executor *ex, cdag::VertexId v, uint32_t tokens, int status)
{
    if (G.throttling) unadmit(c, tokens);
    if (status == 0) ex->complete(v);
    else ex->fail(v, status);
    if (G.throttling && !G.pending.empty()) drain_pending();
}

void send_done(void *request, ucs_status_t status, void *user_data)
{
    auto *s = static_cast<SendCtx *>(user_data);
    if (request) ucp_request_free(request);
    Comm *c = s->c;
    cdag::Executor *ex = s->ex;
    cdag::VertexId v = s->v;
    uint32_t tokens = s->tokens;
    Recycler<SendCtx>::done(s);  // before completing: the completion may post the next send
    send_complete(c, ex, v, tokens, status == UCS_OK ? 0 : static_cast<int>(status));
}

int send_now_ucx(Comm *c, cdag::Executor &ex, cdag::VertexId v, int peer, const cdag::MsgId &id,
                 const void *buf, uint64_t len, uint32_t tokens)
{
    auto *s = Recycler<SendCtx>::make(c, &ex, v, tokens, AmHdr{c->cid, c->rank, id.sched, id.seq, id.tag, 0});
    if (!s) return -1;
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = send_done;
    p.user_data = s;
    /* Up to eager_limit, eager even past UCX's own rendezvous threshold
     * (8 KiB on shared memory): a rendezvous costs a round trip more, and
     * eager measured 2.7 vs 6.5 us at 16 KiB, 6.4 vs 8.7 us at 64 KiB (OSU
     * bcast, np 2); equal at 128 KiB.  Early eager arrivals land in the same
     * pooled buffers as early rendezvous pulls (reserve_for).  Small ones
     * keep UCX's own choice (its short/bcopy fast paths). */
    if (len > 4096 && len <= G.cfg.eager_limit) {
        p.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = UCP_AM_SEND_FLAG_EAGER;
    }
    ++cdag_glue_stats.msgs_sent;
    cdag_glue_stats.bytes_sent += len;
    ucs_status_ptr_t sp = ucp_am_send_nbx(c->eps[peer], kAmId, &s->hdr, sizeof(s->hdr), buf, len, &p);
    if (sp == nullptr) {
        send_done(nullptr, UCS_OK, s);
        return 0;
    }
    if (UCS_PTR_IS_ERR(sp)) {
        if (G.throttling) unadmit(c, tokens);
        Recycler<SendCtx>::done(s);
        return static_cast<int>(UCS_PTR_STATUS(sp));
    }
    return 0;
}

/* An admitted message leaves: through the peer's ring if it is on this
 * node (small ones as they are, large ones as a single-copy descriptor,
 * coll_cdag_cma.cc), else by UCX. */
int send_now(Comm *c, cdag::Executor &ex, cdag::VertexId v, int peer, const cdag::MsgId &id,
             const void *buf, uint64_t len, uint32_t tokens)
{
    if (RingPeer *rp = c->rings[peer]) {
        AmHdr h{c->cid, c->rank, id.sched, id.seq, id.tag, 0};
        if (single_copy_to(*rp, len)) return cma_send(c, ex, v, peer, rp, h, buf, len, tokens);
        if (len <= G.ring_limit) return ring_send(c, ex, v, rp, h, buf, len, tokens);
    }
    return send_now_ucx(c, ex, v, peer, id, buf, len, tokens);
}

/* Queued sends leave in order as admission allows. */
void drain_pending()
{
    static bool draining = false;  // send_done may complete inline and re-enter
    if (draining) return;
    draining = true;
    while (!G.pending.empty()) {
        uint32_t tokens;
        Global::Pending &q = G.pending.front();
        if (!admit(q.c, q.len, &tokens)) break;
        Global::Pending p = q;
        G.pending.pop_front();
        int rc = send_now(p.c, *p.ex, p.v, p.peer, p.id, p.buf, p.len, tokens);
        if (rc != 0) p.ex->fail(p.v, rc);
    }
    draining = false;
}

/* From progress: queued sends may go now (a peer rank freed tokens), and
 * token caches go back to their pools when somebody waits there. */
void throttle_progress()
{
    if (!G.pending.empty()) drain_pending();
    for (Comm *c : G.pooled)
        if (cdag_throttle_cached(c->pool)) cdag_throttle_poll(c->pool);
}

/* The single injection point of every schedule message: admission
 * control (token throttling) decides whether it leaves now or waits. */
int inject(Comm *c, cdag::Executor &ex, cdag::VertexId v, int peer, const cdag::MsgId &id,
           const void *buf, uint64_t len)
{
    if (peer < 0 || peer >= c->size || !c->eps[peer]) return -1;
    uint32_t tokens = 0;
    if (G.throttling && (!G.pending.empty() || !admit(c, len, &tokens))) {
        ++cdag_glue_stats.throttled;
        G.pending.push_back(Global::Pending{c, &ex, v, peer, id, buf, len});
        drain_pending();
        return 0;
    }
    return send_now(c, ex, v, peer, id, buf, len, tokens);
}

int Tr::post_send(cdag::Executor &ex, cdag::VertexId v, int peer, const cdag::MsgId &id, const void *buf,
                  uint64_t len)
{
    return inject(c_, ex, v, peer, id, buf, len);
}

/* ------------------------------------------------------------ receives */
struct RecvCtx {
    cdag::Executor *ex;
    cdag::VertexId v;
};

void rndv_done(void *request, ucs_status_t status, size_t length, void *user_data)
{
    (void)length;
    auto *r = static_cast<RecvCtx *>(user_data);
    if (request) ucp_request_free(request);
    cdag::Executor *ex = r->ex;
    cdag::VertexId v = r->v;
    Recycler<RecvCtx>::done(r);
    if (status == UCS_OK) ex->complete(v);
    else ex->fail(v, static_cast<int>(status));
}

/* Pull a rendezvous message into its destination. */
void rndv_pull(void *desc, cdag::Executor *ex, cdag::VertexId v, char *buf, uint64_t len)
{
    auto *r = Recycler<RecvCtx>::make(ex, v);
    if (!r) {
        ex->fail(v, -1);
        return;
    }
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv_am = rndv_done;
    p.user_data = r;
    ++cdag_glue_stats.rndv_msgs;
    ucs_status_ptr_t sp = ucp_am_recv_data_nbx(G.w, desc, buf, len, &p);
    if (sp == nullptr) {
        rndv_done(nullptr, UCS_OK, len, r);
    } else if (UCS_PTR_IS_ERR(sp)) {
        rndv_done(nullptr, UCS_PTR_STATUS(sp), 0, r);
    }
}

void shadow_release(const Unexp &u)
{
    if (u.cma) cma_drop(u);
    else if (u.rndv) ucp_am_data_release(G.w, u.data);
    else if (u.pooled) G.shadow_free.push_back(static_cast<char *>(u.data));
    else big_buffer_put(u.data, u.cap);
}

/* ------------------------------------------------------------ big buffers */
namespace {
/* a collective's early segments may all be in flight at once: keep up to
 * kBigKept buffers and kBigKeptBytes in all */
constexpr int kBigKept = 64;
constexpr std::size_t kBigKeptBytes = std::size_t(32) << 20;
std::size_t big_bytes = 0;
struct Big {
    void *p;
    std::size_t cap;
};
Big big_kept[kBigKept];
int big_n = 0;
}  // namespace

/* big_buffer_get's size class of len */
static std::size_t big_class(std::size_t len)
{
    std::size_t c = 4096;
    while (c < len) c *= 2;
    return c;
}

bool big_buffer_kept(std::size_t len)
{
    std::size_t want = big_class(len);
    for (int i = 0; i < big_n; ++i)
        if (big_kept[i].cap == want) return true;
    return false;
}

void *big_buffer_get(std::size_t len, std::size_t *cap)
{
    std::size_t want = big_class(len);
    for (int i = 0; i < big_n; ++i)
        if (big_kept[i].cap == want) {  // its own class only: reserve_for counts per class
            void *p = big_kept[i].p;
            *cap = big_kept[i].cap;
            big_bytes -= big_kept[i].cap;
            big_kept[i] = big_kept[--big_n];
            return p;
        }
    count_alloc(true);
    *cap = want;  // size classes, so later calls of nearby sizes fit
    return ::operator new(want, std::nothrow);
}

void big_buffer_put(void *p, std::size_t cap)
{
    if (!p) return;
    if (big_n == kBigKept || big_bytes + cap > kBigKeptBytes) {
        ::operator delete(p);
        return;
    }
    big_kept[big_n++] = Big{p, cap};
    big_bytes += cap;
}

void big_buffers_release()
{
    while (big_n) ::operator delete(big_kept[--big_n].p);
    big_bytes = 0;
}

/* An early rendezvous message is pulled at once into a buffer of ours, so
 * its sender completes without waiting for this rank's schedule (no
 * dependency between ranks' progress through send completion: required
 * for deadlock freedom under token throttling). */
struct EarlyPull {
    Key k;
};

void early_done(void *request, ucs_status_t status, size_t length, void *user_data)
{
    (void)length;
    auto *e = static_cast<EarlyPull *>(user_data);
    if (request) ucp_request_free(request);
    auto it = G.unexpected.find(e->k);
    Recycler<EarlyPull, true>::done(e);
    if (it == G.unexpected.end()) return;
    Unexp &u = it->second;
    u.pulling = false;
    if (!u.wait_ex) {
        if (status != UCS_OK) u.len = ~0ull;  // poisons the receive that comes later
        return;
    }
    Unexp done = u;
    G.unexpected.erase(it);
    if (status == UCS_OK) {
        if (done.len) std::memcpy(done.wait_buf, done.data, done.len);
        done.wait_ex->complete(done.wait_v);
    } else {
        done.wait_ex->fail(done.wait_v, static_cast<int>(status));
    }
    shadow_release(done);
}

int Tr::post_recv(cdag::Executor &ex, cdag::VertexId v, int peer, const cdag::MsgId &id, void *buf,
                  uint64_t len)
{
    Key k{c_->cid, static_cast<uint32_t>(peer), id.sched, id.seq, id.tag};
    auto it = G.unexpected.find(k);
    if (it == G.unexpected.end()) {
        G.posted.emplace(k, Posted{&ex, v, static_cast<char *>(buf), len});
        return 0;
    }
    Unexp &u = it->second;
    if (u.cma) {  // a single-copy descriptor: pulled now, straight into place
        Unexp held = u;
        G.unexpected.erase(it);
        return cma_take_held(k, held, ex, v, static_cast<char *>(buf), len);
    }
    if (u.rndv && u.len == len) {  // held: pulled now, straight into place
        void *desc = u.data;
        G.unexpected.erase(it);
        rndv_pull(desc, &ex, v, static_cast<char *>(buf), len);
        return 0;
    }
    if (u.len != len) {  // a schedule bug or a corrupted header: never overrun buf
        if (u.pulling) {
            u.wait_ex = nullptr;
            return -2;
        }
        shadow_release(u);
        G.unexpected.erase(it);
        return -2;
    }
    if (u.pulling) {  // completes when the pull does
        u.wait_ex = &ex;
        u.wait_v = v;
        u.wait_buf = static_cast<char *>(buf);
        return 0;
    }
    Unexp done = u;
    G.unexpected.erase(it);
    if (len) std::memcpy(buf, done.data, len);
    shadow_release(done);
    ex.complete(v);
    return 0;
}

/* The receive posted for k, taken out of the map into *p: Taken, or
 * Failed when its length differs (it is failed here: never overrun a
 * buffer), or None. */
enum class Match { None, Taken, Failed };
static Match take_posted(const Key &k, uint64_t len, Posted *p)
{
    auto it = G.posted.find(k);
    if (it == G.posted.end()) return Match::None;
    *p = it->second;
    G.posted.erase(it);
    if (p->len == len) return Match::Taken;
    p->ex->fail(p->v, -2);
    return Match::Failed;
}

/* An arrival before its receive: an entry for it with a buffer of ours (a
 * shadow buffer when it fits, else a big one); nullptr when out of memory
 * (the entry is then poisoned: the receive that comes for it fails its
 * length check) or when an entry for k exists already. */
static Unexp *park(const Key &k, uint64_t len)
{
    ++cdag_glue_stats.unexpected;
    Unexp u{false, nullptr, len, false, 0, false, nullptr, 0, nullptr};
    if (len <= G.cfg.eager_size && !G.shadow_free.empty()) {
        u.data = G.shadow_free.back();
        G.shadow_free.pop_back();
        u.pooled = true;
    } else {
        std::size_t cap = 0;
        u.data = big_buffer_get(len, &cap);
        u.cap = cap;
    }
    if (!u.data) u.len = ~0ull;
    auto ins = G.unexpected.emplace(k, u);
    if (!ins.second) {  // a second message with the same key (forged or corrupt): dropped unread
        if (u.data) shadow_release(u);
        ++cdag_glue_stats.dropped;
        return nullptr;
    }
    return u.data ? &ins.first->second : nullptr;
}

/* An arrival whose bytes are here now (UCX eager, or a ring entry valid
 * only during this call): into its posted receive, or copied aside until
 * the receive is posted. */
void deliver_eager(const Key &k, const void *data, uint64_t len)
{
    if (G.direct && direct_take(k, data, len, false)) return;
    Posted p;
    switch (take_posted(k, len, &p)) {
    case Match::Failed: return;
    case Match::Taken:
        if (len) std::memcpy(p.buf, data, len);
        p.ex->complete(p.v);
        return;
    case Match::None: break;
    }
    Unexp *u = park(k, len);
    if (u && len) std::memcpy(u->data, data, len);
}

ucs_status_t am_cb(void *arg, const void *header, size_t hlen, void *data, size_t len,
                   const ucp_am_recv_param_t *param)
{
    (void)arg;
    AmHdr h;
    std::memset(&h, 0, sizeof(h));
    if (hlen == sizeof(h)) std::memcpy(&h, header, sizeof(h));
    if (check_packet(hlen, h) != nullptr) {  // not ours or malformed: drop, never touch memory
        ++cdag_glue_stats.dropped;
        return UCS_OK;
    }
    Key k{h.cid, static_cast<uint32_t>(h.src), h.sched, h.seq, h.tag};
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
        deliver_eager(k, data, len);
        return UCS_OK;
    }
    if (G.direct && direct_take(k, data, len, true)) return UCS_OK;
    Posted p;
    switch (take_posted(k, len, &p)) {
    case Match::Failed: return UCS_OK;
    case Match::Taken:
        rndv_pull(data, p.ex, p.v, p.buf, p.len);
        return UCS_OK;
    case Match::None: break;
    }
    /* Early: pulled at once into a buffer of ours (EarlyPull), so the
     * sender completes, if one made beforehand is free (reserve_for: two
     * per receive of each plan).  Else held: the sender's send completes
     * when our receive is posted and pulls it straight into place.  A
     * sender that runs ahead (a root in a loop of ibcasts, whose sends
     * complete at each early pull) otherwise made this process allocate
     * a fresh buffer per message past the kept ones (an early pull of 1
     * MiB took 2.2-2.6 ms inside one ucp_worker_progress, traced at np 2:
     * the first touch of fresh memory costs 15-20 ms per MiB on this
     * guest, and the runs of the lock holder stall everything behind
     * it).  Holding is deadlock-free: validate_set() checks every schedule
     * with a message as one event of its send and its receive, what a
     * rendezvous that waits for the receive is.  Under token throttling
     * a send holds tokens until it completes, so there early arrivals are
     * always pulled (allocating if they must): a send's completion never
     * waits for the receiver's schedule. */
    if (!G.throttling && !(len <= G.cfg.eager_size && !G.shadow_free.empty()) && !big_buffer_kept(len)) {
        ++cdag_glue_stats.unexpected;
        ++cdag_glue_stats.rndv_held;
        Unexp h{true, data, len, false, 0, false, nullptr, 0, nullptr};
        if (!G.unexpected.emplace(k, h).second) {  // a second message with the same key: dropped
            ++cdag_glue_stats.dropped;
            return UCS_OK;
        }
        return UCS_INPROGRESS;
    }
    Unexp *u = park(k, len);
    if (!u) return UCS_OK;
    u->pulling = true;
    auto *e = Recycler<EarlyPull, true>::make(k);
    if (!e) {
        u->len = ~0ull;  // fails the receive that comes for it
        u->pulling = false;
        return UCS_OK;
    }
    ucp_request_param_t rp;
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rp.cb.recv_am = early_done;
    rp.user_data = e;
    ++cdag_glue_stats.rndv_msgs;
    ucs_status_ptr_t sp = ucp_am_recv_data_nbx(G.w, data, u->data, len, &rp);
    if (sp == nullptr) early_done(nullptr, UCS_OK, len, e);
    else if (UCS_PTR_IS_ERR(sp)) early_done(nullptr, UCS_PTR_STATUS(sp), 0, e);
    return UCS_OK;
}

/* ------------------------------------------------------------ pools */
/* Whatever a run of plan may need per message, made before its first run
 * (that call allocates anyway: it compiled the plan), so the later runs of
 * this plan find everything in the pools however their messages race:
 * send and receive contexts, hash-map nodes and buckets for every receive
 * posted or arriving early, and a buffer for every early arrival larger
 * than a shadow buffer while the kept buffers stay within their budget.
 * Receive-side needs count twice: a peer that finished a run may start the
 * next one (of this or another plan) and its messages arrive early while
 * this rank's early arrivals of the current run still wait. */
void reserve_for(const cdag::Plan &plan)
{
    PlanReserve for_the_call;  // what the pools grow by here is the call's
    std::size_t sends = 0, recvs = 0, big_need = 0, large_sends = 0;
    std::size_t need_by_class[48] = {};
    for (const cdag::Op &op : plan.ops) {
        if (op.kind == cdag::OpKind::Send) {
            ++sends;
            if (single_copy_size(op.a.len)) ++large_sends;
        }
        if (op.kind != cdag::OpKind::Recv) continue;
        ++recvs;
        if (op.a.len > G.cfg.eager_size) {
            std::size_t c = big_class(op.a.len);
            ++need_by_class[__builtin_ctzll(c)];
            big_need += c;
        }
    }
    recvs *= 2;
    for (std::size_t &n : need_by_class) n *= 2;
    big_need *= 2;
    Recycler<SendCtx>::reserve(sends);
    if (G.cfg.cma && G.ring_limit) cma_reserve(large_sends);
    Recycler<RecvCtx>::reserve(recvs);
    Recycler<EarlyPull, true>::reserve(recvs);
    /* map nodes: insert and erase as many placeholder keys as the plan
     * has receives (cid ~0 is never a communicator's) */
    for (auto *m : {&G.posted}) {
        if (m->bucket_count() < recvs * 2) m->reserve(recvs * 2);
        for (std::size_t i = 0; i < recvs; ++i) m->emplace(Key{~0u, 0, 0, 0, static_cast<uint32_t>(i)}, Posted{});
        for (std::size_t i = 0; i < recvs; ++i) m->erase(Key{~0u, 0, 0, 0, static_cast<uint32_t>(i)});
    }
    if (G.unexpected.bucket_count() < recvs * 2) G.unexpected.reserve(recvs * 2);
    for (std::size_t i = 0; i < recvs; ++i) G.unexpected.emplace(Key{~0u, 0, 0, 0, static_cast<uint32_t>(i)}, Unexp{});
    for (std::size_t i = 0; i < recvs; ++i) G.unexpected.erase(Key{~0u, 0, 0, 0, static_cast<uint32_t>(i)});
    if (big_need == 0 || big_need > kBigKeptBytes) return;
    for (int k = 0; k < 48; ++k) {
        std::size_t have = 0;
        for (int i = 0; i < big_n; ++i)
            if (big_kept[i].cap == (std::size_t(1) << k)) ++have;
        while (have < need_by_class[k] && big_n < kBigKept && big_bytes + (std::size_t(1) << k) <= kBigKeptBytes) {
            std::size_t cap = 0;
            void *p = big_buffer_get(std::size_t(1) << k, &cap);
            if (!p) return;
            /* touched now, while the call compiles its plan anyway: the
             * first touch of fresh memory is the expensive part on a
             * virtual machine (15-20 ms per MiB measured here), and an
             * early pull into it would pay that inside the progress of a
             * collective, holding the lock */
            std::memset(p, 0, cap);
            big_kept[big_n++] = Big{p, cap};  // big_buffer_get took nothing from the kept ones here
            big_bytes += cap;
            ++have;
        }
    }
}

}  // namespace cdag_svc
