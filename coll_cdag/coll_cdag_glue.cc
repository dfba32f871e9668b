/*
 * coll/cdag engine service: the transport the cDAG executors run on, over a
 * private UCX worker (ucx_glue), plus compiled-schedule caches and the
 * optional engine thread that plays the offloading NIC.
 *
 * Wire: one UCX active message per schedule message, header
 * (cid, src, sched, seq, tag).  (sched, seq, tag) is unique per message of
 * a communicator (cdag_exec.h), so the receiver matches exactly on the
 * whole key; messages of concurrent collectives never cross.  UCX picks
 * eager or its own rendezvous by size: a rendezvous arrival whose receive
 * is posted is pulled straight into the destination (zero copy, RTS then
 * GET inside UCX); one that arrives first keeps UCX's descriptor until the
 * receive is posted.  Small arrivals that come first are copied into
 * pre-allocated shadow buffers.
 *
 * Every send of every schedule leaves through inject(): the one place
 * where admission control (token throttling) sits.
 *
 * Progress: inline (cdag_glue_progress() from opal_progress), or an engine
 * thread that owns the worker, is pinned with hwloc to a core outside the
 * process's binding when there is one, and sleeps on the worker's event fd
 * when idle.  All state is behind one recursive mutex, taken only when the
 * thread runs or the application uses MPI_THREAD_MULTIPLE.
 */
#include "coll_cdag_glue.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <hwloc.h>

#include "cdag_coll.h"
#include "cdag_exec.h"
#include "cdag_plan.h"
#include "rdrp_ucx.h"
#include "throttle.h"

cdag_glue_stats_t cdag_glue_stats;

namespace {

constexpr unsigned kAmId = 20;  // our own worker: any id

struct AmHdr {
    uint32_t cid;
    int32_t src;
    uint32_t sched, seq, tag;
    uint32_t pad;
};

struct Key {
    uint32_t cid, src, sched, seq, tag;
    bool operator==(const Key &o) const {
        return cid == o.cid && src == o.src && sched == o.sched && seq == o.seq && tag == o.tag;
    }
};
struct KeyHash {
    size_t operator()(const Key &k) const {
        uint64_t h = 1469598103934665603ull;
        for (uint32_t x : {k.cid, k.src, k.sched, k.seq, k.tag}) {
            h ^= x;
            h *= 1099511628211ull;
        }
        return static_cast<size_t>(h);
    }
};

struct Posted {
    cdag::Executor *ex;
    cdag::VertexId v;
    char *buf;
    uint64_t len;
};

struct Unexp {
    bool rndv;       // UCX rendezvous descriptor not pulled yet (not used: see am_cb)
    void *data;      // our copy (or, while pulling, its destination)
    uint64_t len;
    bool pooled;     // the copy lives in a shadow buffer
    bool pulling;    // a rendezvous pull into data is still running
    cdag::Executor *wait_ex;  // a receive posted while pulling: completed with the copy
    cdag::VertexId wait_v;
    char *wait_buf;
};

class Tr final : public cdag::Transport {
public:
    explicit Tr(::cdag_glue_comm *c) : c_(c) {}
    int post_send(cdag::Executor &ex, cdag::VertexId v, int peer, const cdag::MsgId &id, const void *buf,
                  uint64_t len) override;
    int post_recv(cdag::Executor &ex, cdag::VertexId v, int peer, const cdag::MsgId &id, void *buf,
                  uint64_t len) override;

private:
    ::cdag_glue_comm *c_;
};

using PlanKey = std::tuple<int, int, uint64_t, uint64_t, int, int>;  // coll, root, count, elem, commute, in_place

}  // namespace

struct cdag_glue_comm {
    uint32_t cid;
    int rank, size;
    std::vector<ucp_ep_h> eps;
    uint32_t next_sched = 0;
    std::map<PlanKey, std::shared_ptr<const cdag::Plan>> cache;
    cdag_throttle_t *pool = nullptr;  // node token pool of this communicator (throttle node)
    Tr tr;
    cdag_glue_comm() : tr(this) {}
};

struct cdag_glue_op {
    bool counted = false;  // in Global::active_runs
    cdag_glue_comm *c;
    std::shared_ptr<const cdag::Plan> plan;
    std::unique_ptr<cdag::Executor> ex;
};

namespace {

using Comm = cdag_glue_comm;

struct Global {
    std::recursive_mutex mu;
    bool lock_on = false;
    bool up = false;
    cdag_glue_config_t cfg{};
    rdrp_ucx_worker_t *uw = nullptr;
    ucp_worker_h w = nullptr;
    std::unordered_map<uint64_t, ucp_ep_h> eps;
    std::unordered_map<Key, Posted, KeyHash> posted;
    std::unordered_map<Key, Unexp, KeyHash> unexpected;
    std::vector<char *> shadow_free;
    std::unique_ptr<char[]> shadow_mem;
    std::thread th;
    std::atomic<bool> stop{false};
    std::atomic<bool> thread_running{false};
    std::atomic<int> active_runs{0};  // started and not yet seen done: the engine thread stays hot
    bool throttling = false;              // coll_cdag_throttle rank or node
    cdag_throttle_t *rank_thr = nullptr;  // CRCT, for every communicator of the process
    std::vector<::cdag_glue_comm *> pooled;  // communicators with a node pool (cache polling)
    struct Pending {
        ::cdag_glue_comm *c;
        cdag::Executor *ex;
        cdag::VertexId v;
        int peer;
        cdag::MsgId id;
        const void *buf;
        uint64_t len;
    };
    std::deque<Pending> pending;  // sends waiting for admission, in order
    int efd = -1;
    std::string err;
};
Global G;

struct Lock {
    Lock() : on(G.lock_on) { if (on) G.mu.lock(); }
    ~Lock() { if (on) G.mu.unlock(); }
    bool on;
};

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

void send_done(void *request, ucs_status_t status, void *user_data)
{
    auto *s = static_cast<SendCtx *>(user_data);
    if (request) ucp_request_free(request);
    Comm *c = s->c;
    if (G.throttling) unadmit(c, s->tokens);
    if (status == UCS_OK) s->ex->complete(s->v);
    else s->ex->fail(s->v, static_cast<int>(status));
    delete s;
    if (G.throttling && !G.pending.empty()) drain_pending();
}

int send_now(Comm *c, cdag::Executor &ex, cdag::VertexId v, int peer, const cdag::MsgId &id,
             const void *buf, uint64_t len, uint32_t tokens)
{
    auto *s = new (std::nothrow) SendCtx{c, &ex, v, tokens, AmHdr{c->cid, c->rank, id.sched, id.seq, id.tag, 0}};
    if (!s) return -1;
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = send_done;
    p.user_data = s;
    ++cdag_glue_stats.msgs_sent;
    cdag_glue_stats.bytes_sent += len;
    ucs_status_ptr_t sp = ucp_am_send_nbx(c->eps[peer], kAmId, &s->hdr, sizeof(s->hdr), buf, len, &p);
    if (sp == nullptr) {
        send_done(nullptr, UCS_OK, s);
        return 0;
    }
    if (UCS_PTR_IS_ERR(sp)) {
        if (G.throttling) unadmit(c, tokens);
        delete s;
        return static_cast<int>(UCS_PTR_STATUS(sp));
    }
    return 0;
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
    if (status == UCS_OK) r->ex->complete(r->v);
    else r->ex->fail(r->v, static_cast<int>(status));
    delete r;
}

/* Pull a rendezvous message into its destination. */
void rndv_pull(void *desc, cdag::Executor *ex, cdag::VertexId v, char *buf, uint64_t len)
{
    auto *r = new RecvCtx{ex, v};
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
    if (u.pooled) G.shadow_free.push_back(static_cast<char *>(u.data));
    else ::operator delete(u.data);
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
    delete e;
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

ucs_status_t am_cb(void *arg, const void *header, size_t hlen, void *data, size_t len,
                   const ucp_am_recv_param_t *param)
{
    (void)arg;
    if (hlen != sizeof(AmHdr)) return UCS_OK;  // not ours: drop, never touch memory
    AmHdr h;
    std::memcpy(&h, header, sizeof(h));
    Key k{h.cid, static_cast<uint32_t>(h.src), h.sched, h.seq, h.tag};
    bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    auto it = G.posted.find(k);
    if (it != G.posted.end()) {
        Posted p = it->second;
        G.posted.erase(it);
        if (p.len != len) {
            p.ex->fail(p.v, -2);
            return UCS_OK;
        }
        if (rndv) {
            rndv_pull(data, p.ex, p.v, p.buf, p.len);
        } else {
            if (len) std::memcpy(p.buf, data, len);
            p.ex->complete(p.v);
        }
        return UCS_OK;
    }
    ++cdag_glue_stats.unexpected;
    Unexp u{false, nullptr, len, false, false, nullptr, 0, nullptr};
    if (len <= G.cfg.eager_size && !G.shadow_free.empty()) {
        u.data = G.shadow_free.back();
        G.shadow_free.pop_back();
        u.pooled = true;
    } else {
        u.data = ::operator new(len ? len : 1);
    }
    if (rndv) {
        u.pulling = true;
        G.unexpected.emplace(k, u);
        auto *e = new EarlyPull{k};
        ucp_request_param_t p;
        p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        p.cb.recv_am = early_done;
        p.user_data = e;
        ++cdag_glue_stats.rndv_msgs;
        ucs_status_ptr_t sp = ucp_am_recv_data_nbx(G.w, data, u.data, len, &p);
        if (sp == nullptr) early_done(nullptr, UCS_OK, len, e);
        else if (UCS_PTR_IS_ERR(sp)) early_done(nullptr, UCS_PTR_STATUS(sp), 0, e);
        return UCS_OK;
    }
    if (len) std::memcpy(u.data, data, len);
    G.unexpected.emplace(k, u);
    return UCS_OK;
}

/* ------------------------------------------------------------ engine thread */
/* Pin the engine thread to a core the application does not use, when
 * there is one: with as many cores as local ranks there is none (the
 * thread then shares its rank's binding).  Ranks are mapped by core from
 * core 0 up by default, so the free cores are taken from the top down. */
void pin_engine_thread()
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0) return;
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        return;
    }
    int ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    hwloc_bitmap_t bound = hwloc_bitmap_alloc();
    if (ncores > G.cfg.local_ranks && hwloc_get_cpubind(topo, bound, HWLOC_CPUBIND_PROCESS) == 0) {
        for (int i = ncores - 1; i >= G.cfg.local_ranks; --i) {
            hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, i);
            if (core && !hwloc_bitmap_intersects(core->cpuset, bound)) {
                hwloc_set_cpubind(topo, core->cpuset, HWLOC_CPUBIND_THREAD);
                break;
            }
        }
    }
    hwloc_bitmap_free(bound);
    hwloc_topology_destroy(topo);
}

/* Spin while a schedule runs (an offloading NIC does not sleep on
 * in-flight work), yielding now and then so a rank sharing the core keeps
 * computing; sleep on the worker's event fd once nothing runs. */
void engine_loop()
{
    pin_engine_thread();
    int idle = 0;
    while (!G.stop.load(std::memory_order_acquire)) {
        unsigned n;
        {
            Lock l;
            n = ucp_worker_progress(G.w);
            if (G.throttling) throttle_progress();
        }
        if (n) {
            idle = 0;
            continue;
        }
        ++idle;
        if (G.active_runs.load(std::memory_order_acquire) > 0) {
            if ((idle & 63) == 0) sched_yield();
            continue;
        }
        if (idle < 256) continue;
        idle = 0;
        ucs_status_t st;
        {
            Lock l;
            st = ucp_worker_arm(G.w);
        }
        if (st == UCS_OK) {
            ++cdag_glue_stats.thread_sleeps;
            struct pollfd pfd = {G.efd, POLLIN, 0};
            (void)poll(&pfd, 1, 100);  // ucp_worker_signal() from a new start wakes it
        }
    }
}

}  // namespace

extern "C" {

const char *cdag_glue_last_error(void) { return G.err.c_str(); }

int cdag_glue_init(const cdag_glue_config_t *config)
{
    G.cfg = *config;
    G.lock_on = config->thread || config->mpi_threads;
    rdrp_ucx_context_params_t cp{};
    cp.want_wakeup = config->thread ? 1 : 0;
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
    G.up = true;
    if (config->thread && ucp_worker_get_efd(G.w, &G.efd) != UCS_OK) {
        G.err = "the UCX context has no wakeup support (ucp_worker_get_efd failed)";
        cdag_glue_fini();
        return -1;
    }
    /* the engine thread starts with the first collective, once MPI_Init is
     * over: nothing to progress before, and start-up stays single-threaded */
    return 0;
}

void cdag_glue_fini(void)
{
    if (G.thread_running) {
        G.stop = true;
        if (G.w) ucp_worker_signal(G.w);
        G.th.join();
        G.thread_running = false;
    }
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
    G.eps.clear();
    if (G.uw) {
        rdrp_ucx_worker_destroy(G.uw, 10.0);
        G.uw = nullptr;
        G.w = nullptr;
        rdrp_ucx_context_release();
    }
    G.shadow_free.clear();
    G.shadow_mem.reset();
    G.up = false;
}

int cdag_glue_worker_address(void **addr, size_t *len)
{
    return rdrp_ucx_worker_address(G.uw, 0, addr, len);
}

void cdag_glue_worker_address_release(void *addr) { rdrp_ucx_worker_address_release(G.uw, addr); }

int cdag_glue_connected(uint64_t peer_id)
{
    Lock l;
    return G.eps.count(peer_id) != 0;
}

int cdag_glue_connect(uint64_t peer_id, const void *addr, size_t len, int remote)
{
    Lock l;
    if (G.eps.count(peer_id)) return 0;
    ucp_ep_h ep = rdrp_ucx_connect(G.uw, addr, len, remote, peer_id);
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
    for (int r = 0; r < size; ++r) {
        auto it = G.eps.find(peer_ids[r]);
        if (it == G.eps.end()) {
            G.err = "no endpoint to a member of the communicator";
            delete c;
            return nullptr;
        }
        c->eps[r] = it->second;
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

    bool vvar = s->coll >= CDAG_GATHERV || s->coll == CDAG_REDUCE_SCATTER;
    PlanKey key{s->coll, s->root, s->count, spec.elem_size, s->commutative, s->in_place};
    std::shared_ptr<const cdag::Plan> plan;
    {
        Lock l;
        if (!vvar) {
            auto it = c->cache.find(key);
            if (it != c->cache.end()) {
                plan = it->second;
                ++cdag_glue_stats.cache_hits;
            }
        }
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
        Lock l;
        ++cdag_glue_stats.schedules_compiled;
        if (!vvar) {
            if (c->cache.size() >= 64) c->cache.erase(c->cache.begin());
            c->cache.emplace(key, plan);
        }
    }
    auto *op = new (std::nothrow) cdag_glue_op;
    if (!op) {
        *err = 3;
        return nullptr;
    }
    op->c = c;
    op->plan = plan;
    cdag::ReduceFn rf;
    rf.fn = fn;
    rf.ctx = fn_ctx;
    op->ex.reset(new (std::nothrow) cdag::Executor(plan, c->tr, sched, rf));
    if (!op->ex) {
        delete op;
        *err = 3;
        return nullptr;
    }
    return op;
}

/* Start the engine thread on first use (configured thread progress). */
static int ensure_engine_thread()
{
    if (!G.cfg.thread || G.thread_running.load(std::memory_order_acquire)) return 0;
    Lock l;
    if (G.thread_running) return 0;
    G.stop = false;
    try {
        G.th = std::thread(engine_loop);
    } catch (...) {
        G.err = "cannot start the engine thread";
        return -1;
    }
    G.thread_running = true;
    return 0;
}

int cdag_glue_op_start(cdag_glue_op_t *op, const void *sendbuf, void *recvbuf)
{
    if (ensure_engine_thread() != 0) return -1;
    int rc;
    {
        Lock l;
        ++cdag_glue_stats.runs;
        rc = op->ex->start(sendbuf, recvbuf);
        if (rc == 0 && !op->ex->done()) {
            op->counted = true;
            ++G.active_runs;
        }
    }
    if (G.thread_running) ucp_worker_signal(G.w);  // the engine thread may be asleep
    return rc;
}

int cdag_glue_op_test(cdag_glue_op_t *op)
{
    Lock l;
    if (!op->ex->done()) return 0;
    if (op->counted) {
        op->counted = false;
        --G.active_runs;
    }
    return op->ex->error() ? (op->ex->error() < 0 ? op->ex->error() : -op->ex->error()) : 1;
}

void cdag_glue_op_free(cdag_glue_op_t *op)
{
    Lock l;
    if (op->counted) --G.active_runs;
    /* a failed run may leave receives posted: they must not outlive it */
    for (auto it = G.posted.begin(); it != G.posted.end();) {
        if (it->second.ex == op->ex.get()) it = G.posted.erase(it);
        else ++it;
    }
    for (auto it = G.pending.begin(); it != G.pending.end();) {
        if (it->ex == op->ex.get()) it = G.pending.erase(it);
        else ++it;
    }
    delete op;
}

int cdag_glue_progress(void)
{
    if (!G.up) return 0;
    if (G.thread_running) return 0;  // the engine thread owns the worker
    Lock l;
    int n = static_cast<int>(ucp_worker_progress(G.w));
    if (G.throttling) throttle_progress();
    return n;
}

int cdag_glue_thread_running(void) { return G.thread_running ? 1 : 0; }

}  // extern "C"
