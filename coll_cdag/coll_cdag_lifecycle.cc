/*
 * coll/cdag engine service: life cycle of the process's UCX worker, of
 * communicators (endpoints, node token pools, compiled-schedule caches)
 * and of operations (a compiled plan plus its executor).
 */
#include "coll_cdag_service.h"
#include "common/tally/live_tally.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

cdag_glue_stats_t cdag_glue_stats;
std::atomic<long> cdag_live_comms{0}, cdag_live_ops{0};
static std::mutex live_comms_mu;
static std::vector<cdag_glue_comm *> live_comms;  /* finalize: their spare ops are their cache */

void cdag_comm_track(cdag_glue_comm *c, bool alive)
{
    std::lock_guard<std::mutex> lk(live_comms_mu);
    if (alive) {
        live_comms.push_back(c);
    } else {
        auto it = std::find(live_comms.begin(), live_comms.end(), c);
        if (it != live_comms.end()) live_comms.erase(it);
    }
    cdag_live_comms.store(static_cast<long>(live_comms.size()), std::memory_order_relaxed);
}

namespace cdag_svc {
Global G;
}  // namespace cdag_svc

using namespace cdag_svc;

/* finished ops a communicator keeps for reuse: enough for the collectives
 * of a few sizes in flight together */
static constexpr size_t kSpareOps = 16;
/* plans of fixed-size calls a communicator keeps (v-variants: the
 * coll_cdag_plan_cache_v parameter) */
static constexpr size_t kCachedPlans = 64;

extern "C" {

const char *cdag_glue_last_error(void) { return G.err.c_str(); }

int cdag_glue_init(const cdag_glue_config_t *config)
{
    G.cfg = *config;
    G.lock_on = config->thread || config->mpi_threads;
    rdrp_ucx_context_params_t cp{};
    cp.want_wakeup = 0;  // the idle engine sleeps on a condition variable, not on the worker
    if (rdrp_ucx_context_acquire(&cp) != 0) {
        G.err = rdrp_ucx_last_error();
        return -1;
    }
    G.uw = rdrp_ucx_worker_create(G.lock_on ? 1 : 0, nullptr, nullptr);
    if (!G.uw) {
        G.err = rdrp_ucx_last_error();
        rdrp_ucx_context_release();
        return -1;
    }
    G.w = rdrp_ucx_worker_handle(G.uw);
    if (rdrp_ucx_set_am_handler(G.uw, kAmId, am_cb, nullptr) != 0) {
        G.err = rdrp_ucx_last_error();
        cdag_glue_fini();
        return -1;
    }
    G.throttling = config->throttle_mode != CDAG_THROTTLE_OFF;
    if (G.throttling && config->throttle_rank_limit) {  // node pools come with their communicators
        cdag_throttle_config_t tc{};
        tc.mode = CDAG_THROTTLE_RANK;
        tc.rank_limit = config->throttle_rank_limit;
        char err[256] = "";
        G.rank_thr = cdag_throttle_create(&tc, nullptr, 0, 1, err, sizeof(err));
        if (!G.rank_thr) {
            G.err = err;
            cdag_glue_fini();
            return -1;
        }
    }
    size_t n = config->eager_buffers, sz = config->eager_size;
    if (n && sz) {
        G.shadow_mem.reset(new (std::nothrow) char[n * sz]);
        if (G.shadow_mem)
            for (size_t i = 0; i < n; ++i) G.shadow_free.push_back(G.shadow_mem.get() + i * sz);
    }
    /* rings to the other processes of this node (coll_cdag_ring.cc); without
     * a segment every message goes by UCX */
    if (config->ring && config->local_ranks > 1) {
        std::string err;
        if (!ring_setup(&err)) G.ring_limit = 0;
    }
    G.running.reserve(64);
    G.to_start.reserve(64);
    G.up = true;
    /* the engine thread starts with the first collective, once MPI_Init is
     * over: nothing to progress before, and start-up stays single-threaded */
    return 0;
}

void cdag_glue_fini(void) { cdag_glue_fini_tally(nullptr, 0); }

/* Count what finalize finds alive: after the engine thread stopped, before
 * anything is dropped (t may be NULL: no count). */
static void tally_objects(rdrp_tally_t *t, uint64_t ops_held_by_requests)
{
    size_t spare = 0, unreceived = 0, pulling = 0;
    for (auto &kv : G.unexpected) (kv.second.pulling ? pulling : unreceived) += 1;
    rdrp_tally_add(t, "communicators", static_cast<uint64_t>(cdag_live_comms.load()), RDRP_TALLY_APP);
    rdrp_tally_add(t, "collective messages never received", unreceived, RDRP_TALLY_APP);
    /* ops kept for reuse by a communicator the application kept alive are
     * its communicator's cache, not a leak of their own */
    {
        std::lock_guard<std::mutex> lk(live_comms_mu);
        for (cdag_glue_comm *c : live_comms) spare += c->spare.size();
    }
    long ops = cdag_live_ops.load() - static_cast<long>(spare) - static_cast<long>(ops_held_by_requests);
    rdrp_tally_add(t, "operations", static_cast<uint64_t>(ops > 0 ? ops : 0), RDRP_TALLY_OURS);
    rdrp_tally_add(t, "runs in flight", G.running.size(), RDRP_TALLY_OURS);
    rdrp_tally_add(t, "posted receives", G.posted.size(), RDRP_TALLY_OURS);
    rdrp_tally_add(t, "queued sends", G.pending.size() + G.ring_backlog, RDRP_TALLY_OURS);
    rdrp_tally_add(t, "rendezvous pulls", pulling, RDRP_TALLY_OURS);
    rdrp_tally_add(t, "single-copy sends waiting for their FIN", cma_pending(), RDRP_TALLY_OURS);
}

void cdag_glue_fini_tally(rdrp_tally_t *t, uint64_t ops_held_by_requests)
{
    if (G.thread_running) {
        {
            std::lock_guard<std::mutex> lk(G.idle_mu);
            G.stop = true;
            G.idle_cv.notify_one();
        }
        G.th.join();
        G.thread_running = false;
    }
    if (t) tally_objects(t, ops_held_by_requests);
    for (auto &kv : G.unexpected)
        if (!kv.second.pulling) shadow_release(kv.second);
    G.unexpected.clear();
    G.pending.clear();
    for (Comm *c : G.pooled) {  // communicators still alive at shutdown give their pools back
        cdag_throttle_destroy(c->pool);
        c->pool = nullptr;
    }
    G.pooled.clear();
    if (G.rank_thr) {
        cdag_throttle_destroy(G.rank_thr);
        G.rank_thr = nullptr;
    }
    G.throttling = false;
    G.posted.clear();
    ring_teardown();
    G.eps.clear();
    if (G.uw) {
        rdrp_ucx_leftovers_t left;
        rdrp_ucx_worker_destroy_counted(G.uw, 10.0, &left);
        if (t) {
            rdrp_tally_add(t, "UCX endpoints", left.endpoints_unclosed, RDRP_TALLY_OURS);
            rdrp_tally_add(t, "UCX requests", left.requests_unfinished, RDRP_TALLY_OURS);
        }
        G.uw = nullptr;
        G.w = nullptr;
        rdrp_ucx_context_release();
    }
    G.shadow_free.clear();
    G.shadow_mem.reset();
    big_buffers_release();
    G.up = false;
}

/* The modex blob: the ring segment's identity, the worker address's
 * length, then the address. */
struct Published {
    rdrp::shm::NodeIdentity node;
    uint64_t ucx_len;
};

int cdag_glue_worker_address(void **addr, size_t *len)
{
    void *ua = nullptr;
    size_t ul = 0;
    if (rdrp_ucx_worker_address(G.uw, 0, &ua, &ul) != 0) return -1;
    Published pub{};
    ring_identity(&pub.node);
    pub.ucx_len = ul;
    char *b = static_cast<char *>(malloc(sizeof(pub) + ul));
    if (b) {
        std::memcpy(b, &pub, sizeof(pub));
        std::memcpy(b + sizeof(pub), ua, ul);
    }
    rdrp_ucx_worker_address_release(G.uw, ua);
    if (!b) return -1;
    *addr = b;
    *len = sizeof(pub) + ul;
    return 0;
}

void cdag_glue_worker_address_release(void *addr) { free(addr); }

uint64_t cdag_glue_cma_min(void) { return G.node.on() && G.cfg.cma ? G.cma_min : 0; }

uint64_t cdag_glue_ring_limit(size_t *ring_size)
{
    if (ring_size) *ring_size = G.node.on() ? G.node.ring_size() : 0;
    return G.node.on() ? G.ring_limit : 0;
}

int cdag_glue_connected(uint64_t peer_id)
{
    Lock l;
    return G.eps.count(peer_id) != 0;
}

int cdag_glue_connect(uint64_t peer_id, const void *addr, size_t len, int remote)
{
    Lock l;
    if (G.eps.count(peer_id)) return 0;
    Published pub;
    if (len < sizeof(pub)) {
        G.err = "its coll/cdag address is malformed (another version of coll/cdag?)";
        return -1;
    }
    std::memcpy(&pub, addr, sizeof(pub));
    if (pub.ucx_len != len - sizeof(pub)) {
        G.err = "its coll/cdag address is malformed (another version of coll/cdag?)";
        return -1;
    }
    if (!remote) ring_connect(peer_id, pub.node);
    ucp_ep_h ep = rdrp_ucx_connect(G.uw, static_cast<const char *>(addr) + sizeof(pub), pub.ucx_len, remote, peer_id);
    if (!ep) {
        G.err = rdrp_ucx_last_error();
        return -1;
    }
    G.eps[peer_id] = ep;
    return 0;
}

cdag_glue_comm_t *cdag_glue_comm_create(uint32_t cid, int rank, int size, const uint64_t *peer_ids,
                                        const char *pool_name, int local_index, int local_size)
{
    Lock l;
    auto *c = new (std::nothrow) cdag_glue_comm;
    if (!c) return nullptr;
    c->cid = cid;
    c->rank = rank;
    c->size = size;
    c->eps.assign(static_cast<size_t>(size), nullptr);
    c->rings.assign(static_cast<size_t>(size), nullptr);
    c->spare.reserve(kSpareOps);
    c->cache.set_capacity(kCachedPlans, G.cfg.plan_cache_v);
    for (int r = 0; r < size; ++r) {
        auto it = G.eps.find(peer_ids[r]);
        if (it == G.eps.end()) {
            G.err = "no endpoint to a member of the communicator";
            delete c;
            return nullptr;
        }
        c->eps[r] = it->second;
        auto rit = G.ring_peers.find(peer_ids[r]);
        if (rit != G.ring_peers.end()) c->rings[r] = rit->second;
    }
    if (G.cfg.throttle_mode == CDAG_THROTTLE_NODE) {
        cdag_throttle_config_t tc{};
        tc.mode = CDAG_THROTTLE_NODE;
        tc.node_tokens = G.cfg.throttle_node_tokens;
        tc.bytes_per_token = G.cfg.throttle_bytes_per_token;
        tc.concurrency = G.cfg.throttle_concurrency;
        tc.recover_after = G.cfg.throttle_recover;
        tc.cache = G.cfg.throttle_cache < 0 ? CDAG_THROTTLE_CACHE_AUTO : static_cast<uint32_t>(G.cfg.throttle_cache);
        tc.cache_hit_counter = &cdag_glue_stats.token_cache_hits;
        char err[256] = "";
        c->pool = cdag_throttle_create(&tc, pool_name, local_index, local_size, err, sizeof(err));
        if (!c->pool) {
            G.err = err;
            delete c;
            return nullptr;
        }
        G.pooled.push_back(c);
        ++cdag_glue_stats.throttle_pools;
    }
    return c;
}

void cdag_glue_comm_destroy(cdag_glue_comm_t *c)
{
    Lock l;
    /* drop what arrived for it and was never asked for (a cid is reused
     * only after every rank freed the communicator) */
    for (auto it = G.unexpected.begin(); it != G.unexpected.end();) {
        if (it->first.cid == c->cid && !it->second.pulling) {
            shadow_release(it->second);
            it = G.unexpected.erase(it);
        } else {
            ++it;
        }
    }
    for (cdag_glue_op *op : c->spare) delete op;
    cdag_glue_stats.cached_plans -= c->cache.size();
    /* no schedule of it runs any more: every request keeps its
     * communicator (and so this state and its pool) until it is freed */
    if (c->pool) {
        G.pooled.erase(std::find(G.pooled.begin(), G.pooled.end(), c));
        cdag_throttle_destroy(c->pool);
    }
    delete c;
}

int cdag_glue_throttle_mode(void) { return G.cfg.throttle_mode; }

uint32_t cdag_glue_comm_next_sched(cdag_glue_comm_t *c)
{
    Lock l;
    return c->next_sched++;
}

/* A finished op built for the same call, rebound to this one; most
 * recently freed first.  h: the key's hash for a v-variant call; null for
 * a fixed-size call (no counts arrays), compared field by field with no
 * hashing (callgrind, 8 B bcast at np 2: hash, match and the scan were 150
 * of 1330 instructions per call). */
static cdag_glue_op_t *reuse_spare(Comm *c, const cdag::PlanKeyView &key, const uint64_t *h, uint32_t sched,
                                   const cdag::ReduceFn &rf)
{
    Lock l;
    for (size_t i = c->spare.size(); i-- > 0;) {
        cdag_glue_op *op = c->spare[i];
        if (!(h ? op->key.matches(key, *h) : op->key.matches_fixed(key))) continue;
        c->spare.erase(c->spare.begin() + static_cast<std::ptrdiff_t>(i));  // keeps the age order
        op->ex->rebind(sched, rf);
        op->compiled = false;
        ++cdag_glue_stats.cache_hits;
        return op;
    }
    return nullptr;
}

}  // extern "C"

/* The call's key, its counts and displacements where the caller has
 * them: a repeated call (v-variants too) is found without allocating. */
static cdag::PlanKeyView key_of(const Comm *c, const cdag_glue_spec_t *s)
{
    cdag::PlanKeyView key;
    key.coll = s->coll;
    key.root = s->root;
    key.count = s->count;
    key.elem_size = s->elem_size ? s->elem_size : 1;
    key.commutative = s->commutative;
    key.in_place = s->in_place;
    key.arrays[0] = s->counts;
    key.arrays[1] = s->displs;
    key.arrays[2] = s->rcounts;
    key.arrays[3] = s->rdispls;
    key.n = static_cast<uint32_t>(c->size);
    return key;
}

namespace cdag_svc {
std::shared_ptr<const cdag::Plan> cached_plan(Comm *c, const cdag_glue_spec_t *s)
{
    const cdag::PlanKeyView key = key_of(c, s);
    std::shared_ptr<const cdag::Plan> plan = c->cache.find(key, key.hash());
    if (plan) ++cdag_glue_stats.cache_hits;
    return plan;
}
}  // namespace cdag_svc

/* Does every message of plan go through a ring (a peer on this node, at
 * most the ring limit)?  Then a blocking wait for it polls the rings only
 * and the UCX worker now and then (cdag_glue_op_wait_turn).  The peer's
 * ring to us is assumed alike (same job, same ring limit); if it is not,
 * that message still arrives, on the occasional UCX pass. */
bool cdag_svc::runs_on_rings(const Comm *c, const cdag::Plan &plan)
{
    if (!G.ring_limit) return false;
    for (const cdag::Op &o : plan.ops) {
        if (o.kind != cdag::OpKind::Send && o.kind != cdag::OpKind::Recv) continue;
        if (o.peer < 0 || o.peer >= c->size) return false;
        const RingPeer *rp = c->rings[static_cast<size_t>(o.peer)];
        /* above the ring limit: a single-copy descriptor through the ring
         * (coll_cdag_cma.cc), unless that peer refused one */
        if (!rp || (o.a.len > G.ring_limit && !single_copy_to(*rp, o.a.len))) return false;
    }
    return true;
}

extern "C" {

/* Keep a new plan in c's cache; the gauge follows what the cache holds. */
static void cache_insert(Comm *c, const cdag::PlanKeyView &key, uint64_t h, std::shared_ptr<const cdag::Plan> plan)
{
    size_t before = c->cache.size(), evicted = c->cache.evictions();
    c->cache.insert(key, h, std::move(plan));
    cdag_glue_stats.cached_plans += c->cache.size() - before;  // 1, or 0 (evicted one, or capacity 0)
    cdag_glue_stats.plans_evicted += c->cache.evictions() - evicted;
}

cdag_glue_op_t *cdag_glue_op_create(cdag_glue_comm_t *c, const cdag_glue_spec_t *s, uint32_t sched,
                                    cdag_glue_reduce_fn_t fn, void *fn_ctx, int *err)
{
    *err = 0;
    cdag::CollSpec spec;
    spec.coll = static_cast<cdag::Coll>(s->coll);
    spec.rank = c->rank;
    spec.size = c->size;
    spec.root = s->root;
    spec.count = s->count;
    spec.elem_size = s->elem_size ? s->elem_size : 1;
    spec.commutative = s->commutative != 0;
    spec.in_place = s->in_place != 0;
    spec.counts = s->counts;
    spec.displs = s->displs;
    spec.rcounts = s->rcounts;
    spec.rdispls = s->rdispls;
    const cdag_glue_algo_t &a = G.cfg.algo[s->coll];
    cdag::AlgoChoice ch;
    ch.algo = static_cast<cdag::Algo>(a.algo);
    ch.tree = static_cast<cdag::Algo>(a.tree ? a.tree : CDAG_ALGO_KNOMIAL);
    ch.radix = a.radix > 0 ? a.radix : 2;
    ch.seg_bytes = a.seg_bytes;
    ch.window = a.window;

    const cdag::PlanKeyView key = key_of(c, s);
    cdag::ReduceFn rf;
    rf.fn = fn;
    rf.ctx = fn_ctx;
    const bool v = key.is_v();
    if (!v)
        if (cdag_glue_op_t *op = reuse_spare(c, key, nullptr, sched, rf)) return op;
    const uint64_t h = key.hash();
    if (v)
        if (cdag_glue_op_t *op = reuse_spare(c, key, &h, sched, rf)) return op;
    std::shared_ptr<const cdag::Plan> plan;
    bool compiled = false;
    {
        Lock l;
        plan = c->cache.find(key, h);
        if (plan) ++cdag_glue_stats.cache_hits;
    }
    if (!plan) {
        cdag::Schedule sch;
        cdag::Status st = cdag::generate(spec, ch, &sch);
        if (st != cdag::Status::Ok && ch.algo != cdag::Algo::Auto) {
            /* the forced variant does not apply here (e.g. a non-commutative
             * op): the selection table's choice always does */
            ch.algo = cdag::Algo::Auto;
            st = cdag::generate(spec, ch, &sch);
        }
        if (st != cdag::Status::Ok) {
            *err = 1;
            return nullptr;
        }
        auto p = std::make_shared<cdag::Plan>();
        if (!cdag::compile(sch, p.get()).empty()) {
            *err = 2;
            return nullptr;
        }
        plan = p;
        compiled = true;
        Lock l;
        ++cdag_glue_stats.schedules_compiled;
        count_alloc();
        cache_insert(c, key, h, plan);
    }
    auto *op = new (std::nothrow) cdag_glue_op;
    if (!op) {
        *err = 3;
        return nullptr;
    }
    count_alloc();  // the op, its executor and its key
    op->reusable = true;
    op->key = cdag::PlanKey(key, h);
    op->c = c;
    op->plan = plan;
    op->compiled = compiled;
    op->spec = spec;
    op->spec.counts = op->spec.displs = op->spec.rcounts = op->spec.rdispls = nullptr;
    op->choice = cdag::effective_choice(spec, ch);
    op->ring_only = runs_on_rings(c, *plan);
    {
        Lock l;
        reserve_for(*plan);
    }
    op->ex.reset(new (std::nothrow) cdag::Executor(plan, c->tr, sched, rf));
    if (!op->ex) {
        delete op;
        *err = 3;
        return nullptr;
    }
    return op;
}

int cdag_glue_op_explain(const cdag_glue_op_t *op, char *buf, size_t len)
{
    if (!op || !op->compiled || len == 0) return 0;
    const cdag::CollSpec &s = op->spec;
    const cdag::AlgoChoice &a = op->choice;
    char what[96];
    switch (s.coll) {
    case cdag::Coll::Reduce:
    case cdag::Coll::Allreduce:
    case cdag::Coll::ReduceScatterBlock:
    case cdag::Coll::ReduceScatter:
    case cdag::Coll::Scan:
    case cdag::Coll::Exscan:
        snprintf(what, sizeof(what), "%llu elements x %llu B, %s", (unsigned long long)s.count,
                 (unsigned long long)s.elem_size, s.commutative ? "commutative" : "non-commutative");
        break;
    case cdag::Coll::Barrier: snprintf(what, sizeof(what), "-"); break;
    default: snprintf(what, sizeof(what), "%llu B", (unsigned long long)s.count); break;
    }
    char tree[48] = "";
    if (a.algo == cdag::Algo::ReduceBcast || a.algo == cdag::Algo::ReduceThenScatter)
        snprintf(tree, sizeof(tree), " over %s", cdag::algo_name(a.tree));
    char seg[32], win[32];
    if (a.seg_bytes) snprintf(seg, sizeof(seg), "%llu B", (unsigned long long)a.seg_bytes);
    else snprintf(seg, sizeof(seg), "whole");
    if (a.window) snprintf(win, sizeof(win), "%d", a.window);
    else snprintf(win, sizeof(win), "all");
    snprintf(buf, len, "%s %s, root %d, %d ranks: algorithm %s%s, radix %d, segment %s, window %s; %zu vertices",
             cdag::coll_name(s.coll), what, s.root, s.size, cdag::algo_name(a.algo), tree, a.radix, seg, win,
             op->plan->num_vertices());
    return 1;
}

/* A run leaves the engine's count (done, seen by the application, or freed). */
static void uncount(cdag_glue_op_t *op)
{
    if (!op->counted) return;
    op->counted = false;
    --G.active_runs;
    auto &r = G.running;
    auto it = std::find(r.begin(), r.end(), op);
    if (it != r.end()) {
        *it = r.back();
        r.pop_back();
    }
    if (op->queued) {  // freed before anybody started it
        op->queued = false;
        G.to_start.erase(std::find(G.to_start.begin(), G.to_start.end(), op));
    }
}

int cdag_glue_op_start(cdag_glue_op_t *op, const void *sendbuf, void *recvbuf, int nonblocking)
{
    /* a blocking call drives its run itself, inline: the engine thread
     * only carries runs the application leaves MPI with */
    bool engine = nonblocking && G.cfg.thread;
    if (engine && ensure_engine_thread() != 0) return -1;
    if (engine) {
        /* handed over whole: the engine (or the application's next
         * progress) starts it (start_queued), so the application leaves
         * MPI at once */
        {
            Lock l;
            if (!op->ex->done() || op->queued) return -1;  // still running: the caller's state machine broke
            ++cdag_glue_stats.runs;
            op->queued = true;
            op->q_sbuf = sendbuf;
            op->q_rbuf = recvbuf;
            G.to_start.push_back(op);
            op->counted = true;
            G.running.push_back(op);
            ++G.active_runs;
        }
        /* not op->counted here: once the lock is dropped the engine thread may
         * reap the run and clear it (a data race ThreadSanitizer reported in
         * mt_coll_threads with the engine thread) */
        wake_engine();
        return 0;
    }
    Lock l;
    ++cdag_glue_stats.runs;
    return op->ex->start(sendbuf, recvbuf);
}

/* cdag_glue_op_test under the lock */
static int test_locked(cdag_glue_op_t *op)
{
    if (op->queued) start_queued(false);  // the application is in MPI before the engine started it
    if (!op->ex->done()) return 0;
    uncount(op);
    return op->ex->error() ? (op->ex->error() < 0 ? op->ex->error() : -op->ex->error()) : 1;
}

int cdag_glue_op_test(cdag_glue_op_t *op)
{
    Lock l;
    return test_locked(op);
}

/* every this many turns a ring-only wait passes the UCX worker too */
static constexpr unsigned kUcxEvery = 16;

int cdag_glue_op_wait_turn(cdag_glue_op_t *op, unsigned turn)
{
    if (G.thread_running) {  // the engine thread's hand-off counts the application's passes
        cdag_glue_progress();
        return cdag_glue_op_test(op);
    }
    Lock l;
    ++cdag_glue_stats.wait_turns;
    ring_progress();
    /* a ring-only run waits for nothing UCX carries: an empty worker pass
     * is 80-120 instructions, more than the rest of the turn (callgrind,
     * 8 B allreduce np 2); other runs' and early UCX arrivals are taken
     * on every kUcxEvery-th turn and in opal_progress */
    if (!op->ring_only || turn % kUcxEvery == kUcxEvery - 1) {
        ++cdag_glue_stats.wait_ucx_passes;
        ucp_worker_progress(G.w);
    }
    if (G.throttling) throttle_progress();
    return test_locked(op);
}

/* drop what an ended run may still have posted or queued */
static void forget_run(const cdag::Executor *ex)
{
    for (auto it = G.posted.begin(); it != G.posted.end();) {
        if (it->second.ex == ex) it = G.posted.erase(it);
        else ++it;
    }
    for (auto it = G.pending.begin(); it != G.pending.end();) {
        if (it->ex == ex) it = G.pending.erase(it);
        else ++it;
    }
    if (G.ring_backlog) ring_forget(ex);
    cma_forget(ex);
}

void cdag_glue_op_free(cdag_glue_op_t *op)
{
    Lock l;
    uncount(op);
    /* a failed (or unfinished) run may leave receives posted, sends
     * queued: they must not outlive it; a finished one left none */
    if (!op->ex->done() || op->ex->error()) forget_run(op->ex.get());
    Comm *c = op->c;
    if (op->reusable && op->ex->done() && !op->ex->error()) {
        if (c->spare.size() == kSpareOps) {  // the least recently used goes
            delete c->spare.front();
            c->spare.erase(c->spare.begin());
        }
        c->spare.push_back(op);  // the next call of this plan runs it again
        return;
    }
    delete op;
}

}  // extern "C"
