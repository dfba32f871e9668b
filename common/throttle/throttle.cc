/*
 * Token throttling: the per-rank limit, the node token pool in POSIX
 * shared memory with FCFS tickets, the concurrency limit, and recovery of
 * a dead rank's share.  See throttle.h.
 */
#include "throttle.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

namespace {

constexpr uint32_t kReady = 0x7468726fu;  // "thro"
constexpr size_t kLine = 64;

/* Each rank's slot on a cache line of its own: the owner writes it after
 * every change of its tokens, and nobody else does while it lives. */
struct alignas(kLine) Slot {
    std::atomic<int32_t> pid;        // 0: free
    std::atomic<int32_t> injecting;  // counted in Pool::injecting
    std::atomic<int64_t> held;       // tokens of this rank: in messages + cached
    std::atomic<uint64_t> ticket;    // ticket it waits with (0: none)
    std::atomic<int64_t> need;       // tokens its waiting message needs (set before the ticket)
    std::atomic<uint64_t> grant_for; // the ticket being served (by itself or by a proxy)
    std::atomic<int64_t> granted;    // tokens a proxy took from the pool for it
};

/* The fields that change at different rates live on different lines: the
 * token count changes with every pool acquire/release; the ticket pair
 * only when somebody has to wait, so the "does anybody wait?" check a
 * rank makes per message reads a line that stays shared in every cache. */
struct Pool {
    alignas(kLine) std::atomic<uint32_t> state;
    uint32_t nslots;
    int64_t capacity;
    uint32_t cct;
    alignas(kLine) std::atomic<int64_t> tokens;
    alignas(kLine) std::atomic<uint64_t> next_ticket;
    std::atomic<uint64_t> now_serving;
    alignas(kLine) std::atomic<int32_t> injecting;
    Slot slots[1];
};

static_assert(std::atomic<int64_t>::is_always_lock_free, "shared-memory atomics must be lock-free");

size_t pool_bytes(uint32_t nslots) { return sizeof(Pool) + sizeof(Slot) * (nslots ? nslots - 1 : 0); }

bool pid_dead(int32_t pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

void nap_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, nullptr);
}

double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

struct cdag_throttle {
    cdag_throttle_config_t cfg{};
    Pool *pool = nullptr;
    size_t map_len = 0;
    int slot = 0;
    int local_size = 1;
    bool priv = false;      // private memory (a single local rank)
    bool full = false;      // every local rank attached; the name is gone
    ino_t ino = 0;          // the segment's inode, to remove only our own name
    std::string name;
    uint32_t inflight = 0;
    int64_t in_use = 0;     // tokens of this rank's messages in flight
    int64_t cache = 0;      // tokens kept between messages
    uint64_t my_ticket = 0;
    uint32_t waits = 0;
    bool marked = false;    // counted in Pool::injecting
    cdag_throttle_stats_t st{};
};

namespace {

/* Slots of the pool, from our own copy: the count in shared memory was
 * checked once at join and is never read again (another process, or a
 * stray write, could change it and walk us past the mapping). */
uint32_t slots_of(const cdag_throttle *t) { return static_cast<uint32_t>(t->local_size); }

void set_err(char *err, size_t len, const std::string &m)
{
    if (err && len) snprintf(err, len, "%s", m.c_str());
}

bool queue_empty(const Pool *p)
{
    return p->now_serving.load(std::memory_order_acquire) == p->next_ticket.load(std::memory_order_acquire);
}

void publish_held(cdag_throttle *t)
{
    t->pool->slots[t->slot].held.store(t->in_use + t->cache, std::memory_order_release);
}

void flush_cache(cdag_throttle *t)
{
    if (!t->cache) return;
    int64_t c = t->cache;
    t->cache = 0;
    publish_held(t);
    t->pool->tokens.fetch_add(c);
}

/* Dead ranks give back what they held; their tickets are passed over. */
void recover(cdag_throttle *t)
{
    Pool *p = t->pool;
    uint64_t serving = p->now_serving.load();
    bool holder_found = false;
    for (uint32_t i = 0; i < slots_of(t); ++i) {
        if (static_cast<int>(i) == t->slot) continue;
        Slot &s = p->slots[i];
        int32_t pid = s.pid.load();
        if (s.ticket.load() == serving && !pid_dead(pid)) holder_found = true;
        if (!pid_dead(pid)) continue;
        int64_t h = s.held.exchange(0) + s.granted.exchange(0);
        if (h) {
            p->tokens.fetch_add(h);
            t->st.recovered_tokens += static_cast<uint64_t>(h);
        }
        if (s.injecting.exchange(0)) p->injecting.fetch_sub(1);
        uint64_t tk = s.ticket.exchange(0);
        if (tk && tk == serving) {
            uint64_t e = serving;
            if (p->now_serving.compare_exchange_strong(e, serving + 1)) ++t->st.skipped_tickets;
            serving = p->now_serving.load();
        }
        s.pid.store(-1);  // dead: never reclaimed twice, never taken for a live pool
    }
    /* A ticket nobody records (its taker died between drawing and
     * recording it, a window of a few instructions): pass over it once it
     * has blocked the queue for two recovery periods. */
    if (!holder_found && serving != t->my_ticket && serving < p->next_ticket.load() &&
        t->waits >= 2 * t->cfg.recover_after) {
        bool recorded = false;
        for (uint32_t i = 0; i < slots_of(t); ++i)
            if (p->slots[i].ticket.load() == serving) recorded = true;
        uint64_t e = serving;
        if (!recorded && p->now_serving.compare_exchange_strong(e, serving + 1)) ++t->st.skipped_tickets;
    }
}

bool all_attached(const cdag_throttle *t)
{
    for (uint32_t i = 0; i < slots_of(t); ++i)
        if (t->pool->slots[i].pid.load() == 0) return false;
    return true;
}

/* Remove the pool's name if it still names our segment. */
void unlink_own_name(cdag_throttle *t)
{
    int fd = shm_open(t->name.c_str(), O_RDONLY, 0);
    if (fd < 0) return;
    struct stat sb;
    bool ours = fstat(fd, &sb) == 0 && sb.st_ino == t->ino;
    close(fd);
    if (ours) shm_unlink(t->name.c_str());
}

/* Once every local rank has attached, the name goes: the segment then
 * lives exactly as long as some process maps it, so a job that aborts
 * leaves nothing behind in /dev/shm. */
void check_full(cdag_throttle *t)
{
    if (t->full || t->priv || !all_attached(t)) return;
    t->full = true;
    unlink_own_name(t);
}

void init_pool(Pool *p, const cdag_throttle_config_t *cfg, int local_size)
{
    p->nslots = static_cast<uint32_t>(local_size);
    p->capacity = cfg->node_tokens;
    p->cct = cfg->concurrency;
    p->tokens.store(cfg->node_tokens);
    p->next_ticket.store(1);
    p->now_serving.store(1);
    p->injecting.store(0);
    for (int i = 0; i < local_size; ++i) {
        p->slots[i].pid.store(0);
        p->slots[i].held.store(0);
        p->slots[i].ticket.store(0);
        p->slots[i].injecting.store(0);
        p->slots[i].need.store(0);
        p->slots[i].grant_for.store(0);
        p->slots[i].granted.store(0);
    }
}

/* A pool somebody else created: wait (briefly: its creator is between
 * creating and initialising, waiting for nobody) until it is ready, and
 * take our slot.  false: stale (full, of another shape, a dead member). */
bool join_pool(Pool *p, int local_rank, int local_size)
{
    double until = now_s() + 5.0;
    while (p->state.load(std::memory_order_acquire) != kReady) {
        if (now_s() > until) return false;
        nap_us(50);
    }
    if (p->nslots != static_cast<uint32_t>(local_size)) return false;
    for (uint32_t i = 0; i < static_cast<uint32_t>(local_size); ++i) {
        int32_t pid = p->slots[i].pid.load();
        if (pid < 0 || pid_dead(pid)) return false;
    }
    int32_t expect = 0;
    return p->slots[local_rank].pid.compare_exchange_strong(expect, static_cast<int32_t>(getpid()));
}

/* Open or create the shared pool; see throttle.h. */
bool open_shared(cdag_throttle *t, int local_rank, int local_size, char *err, size_t errlen)
{
    const char *name = t->name.c_str();
    for (int attempt = 0; attempt < 100; ++attempt) {
        bool created = false;
        int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd >= 0) {
            created = true;
            if (ftruncate(fd, static_cast<off_t>(t->map_len)) != 0) {
                set_err(err, errlen, std::string("cannot size the node token pool ") + name + ": " + strerror(errno));
                close(fd);
                shm_unlink(name);
                return false;
            }
        } else if (errno == EEXIST) {
            fd = shm_open(name, O_RDWR, 0600);
            if (fd < 0) continue;  // removed in between: try to create it again
        } else {
            set_err(err, errlen, std::string("cannot create the node token pool ") + name + ": " + strerror(errno));
            return false;
        }
        struct stat sb;
        if (fstat(fd, &sb) != 0) {
            close(fd);
            continue;
        }
        t->ino = sb.st_ino;
        if (!created && static_cast<size_t>(sb.st_size) < t->map_len) {
            /* its creator is sizing it, or it is a stale pool of another shape */
            close(fd);
            if (attempt > 20) unlink_own_name(t);
            nap_us(100);
            continue;
        }
        void *m = mmap(nullptr, t->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (m == MAP_FAILED) {
            set_err(err, errlen, std::string("cannot map the node token pool: ") + strerror(errno));
            if (created) shm_unlink(name);
            return false;
        }
        Pool *p = static_cast<Pool *>(m);
        if (created) {
            init_pool(p, &t->cfg, local_size);
            p->slots[local_rank].pid.store(static_cast<int32_t>(getpid()));
            p->state.store(kReady, std::memory_order_release);
        } else if (!join_pool(p, local_rank, local_size)) {
            munmap(m, t->map_len);
            unlink_own_name(t);  // stale: replace it
            continue;
        }
        t->pool = p;
        return true;
    }
    set_err(err, errlen, std::string("cannot open the node token pool ") + name + " (stale pools keep appearing)");
    return false;
}

}  // namespace

extern "C" {

cdag_throttle_t *cdag_throttle_create(const cdag_throttle_config_t *cfg, const char *name, int local_rank,
                                      int local_size, char *err, size_t errlen)
{
    auto *t = new (std::nothrow) cdag_throttle;
    if (!t) {
        set_err(err, errlen, "out of memory");
        return nullptr;
    }
    t->cfg = *cfg;
    if (t->cfg.recover_after == 0) t->cfg.recover_after = 1000;
    if (cfg->mode != CDAG_THROTTLE_NODE) return t;
    if (local_rank < 0 || local_size <= 0 || local_rank >= local_size || cfg->node_tokens == 0 ||
        (local_size > 1 && !name)) {
        set_err(err, errlen, "node throttling needs a pool name, a local rank and at least one token");
        delete t;
        return nullptr;
    }
    t->slot = local_rank;
    t->local_size = local_size;
    if (t->cfg.cache == CDAG_THROTTLE_CACHE_AUTO) t->cfg.cache = cfg->node_tokens / (2u * static_cast<uint32_t>(local_size));
    t->map_len = pool_bytes(static_cast<uint32_t>(local_size));
    if (local_size == 1) {  // nobody to share with: private memory, no name
        void *m = aligned_alloc(kLine, (t->map_len + kLine - 1) / kLine * kLine);
        if (!m) {
            set_err(err, errlen, "out of memory");
            delete t;
            return nullptr;
        }
        memset(m, 0, t->map_len);
        t->pool = static_cast<Pool *>(m);
        t->priv = t->full = true;
        init_pool(t->pool, &t->cfg, 1);
        t->pool->slots[0].pid.store(static_cast<int32_t>(getpid()));
        t->pool->state.store(kReady);
        return t;
    }
    t->name = name;
    if (!open_shared(t, local_rank, local_size, err, errlen)) {
        delete t;
        return nullptr;
    }
    check_full(t);
    return t;
}

void cdag_throttle_destroy(cdag_throttle_t *t)
{
    if (!t) return;
    if (t->pool) {
        Slot &s = t->pool->slots[t->slot];
        /* gone first: a proxy that grants to us after this takes its grant back */
        s.pid.store(-1);
        int64_t h = s.held.exchange(0) + s.granted.exchange(0);
        if (h) t->pool->tokens.fetch_add(h);
        if (s.injecting.exchange(0)) t->pool->injecting.fetch_sub(1);
        if (t->my_ticket) {
            /* leave the queue without a hole: our turn needs nothing now, so
             * whoever reaches it serves it at once */
            s.need.store(0);
            uint64_t e = t->my_ticket;
            if (t->pool->now_serving.compare_exchange_strong(e, e + 1)) s.ticket.store(0);
        }
        if (t->priv) {
            free(t->pool);
        } else {
            if (!t->full && !all_attached(t)) unlink_own_name(t);  // a member never came
            munmap(t->pool, t->map_len);
        }
    }
    delete t;
}

uint32_t cdag_throttle_cost(const cdag_throttle_t *t, uint64_t bytes)
{
    if (t->cfg.mode != CDAG_THROTTLE_NODE || t->cfg.bytes_per_token == 0) return 1;
    uint64_t c = (bytes + t->cfg.bytes_per_token - 1) / t->cfg.bytes_per_token;
    if (c < 1) c = 1;
    /* At most the pool's share of one local rank: every rank of the node
     * can always have a message in flight, so big messages never serialise
     * the node (measured: with a 1 MiB message taking the whole pool,
     * alltoall at 2 ranks ran 1.6-1.8x slower). */
    uint64_t cap = t->cfg.node_tokens / static_cast<uint64_t>(t->local_size);
    if (cap < 1) cap = 1;
    if (c > cap) c = cap;
    return static_cast<uint32_t>(c);
}

namespace {

/* CCT: count this rank as injecting when its first message goes out. */
bool take_mark(cdag_throttle *t)
{
    Pool *p = t->pool;
    if (!p->cct || t->marked) return true;
    int32_t inj = p->injecting.load();
    while (inj < static_cast<int32_t>(p->cct) && !p->injecting.compare_exchange_weak(inj, inj + 1)) {}
    if (inj >= static_cast<int32_t>(p->cct)) return false;
    t->marked = true;
    p->slots[t->slot].injecting.store(1);
    return true;
}

void draw_ticket(cdag_throttle *t, uint32_t need)
{
    Slot &me = t->pool->slots[t->slot];
    me.need.store(need);  // before the ticket: a proxy reads it once it sees the ticket
    t->my_ticket = t->pool->next_ticket.fetch_add(1);
    me.ticket.store(t->my_ticket);
}

/* Our turn is over: the queue moves on (a proxy may have moved it). */
void end_turn(cdag_throttle *t)
{
    Slot &me = t->pool->slots[t->slot];
    me.ticket.store(0);
    me.grant_for.store(0);
    uint64_t e = t->my_ticket;
    t->pool->now_serving.compare_exchange_strong(e, e + 1);
    t->my_ticket = 0;
}

/* A proxy served our ticket: its tokens are ours (0: not delivered yet).
 * They were sized by the need the proxy read, so they go through the cache:
 * enough admits the message, too few wait there for the next attempt. */
int take_grant(cdag_throttle *t, uint32_t need)
{
    Slot &me = t->pool->slots[t->slot];
    int64_t g = me.granted.load(std::memory_order_acquire);
    if (g == 0) return 0;
    me.granted.store(0);
    t->cache += g;
    end_turn(t);
    ++t->st.grants_taken;
    if (t->cache < need) {
        publish_held(t);
        return 0;
    }
    t->cache -= need;
    t->in_use += need;
    publish_held(t);
    return 1;
}

/* Serve the head of the queue on its behalf when its tokens are free:
 * with more ranks than cores the head is often descheduled, and strict
 * FCFS would make every rank behind it wait for the scheduler.  The head
 * keeps its place (the tokens wait in its slot); the queue moves on.  Not
 * with a concurrency limit (a proxy cannot count the head as injecting). */
void help_head(cdag_throttle *t)
{
    Pool *p = t->pool;
    if (p->cct) return;
    uint64_t serving = p->now_serving.load();
    if (serving == t->my_ticket) return;
    Slot *h = nullptr;
    for (uint32_t i = 0; i < slots_of(t) && !h; ++i)
        if (p->slots[i].ticket.load() == serving) h = &p->slots[i];
    if (!h) return;
    if (h->grant_for.load() == serving) {  // served already: only the queue's move is missing
        uint64_t e = serving;
        p->now_serving.compare_exchange_strong(e, serving + 1);
        return;
    }
    int64_t n = h->need.load();
    int64_t have = p->tokens.load();
    while (have >= n && !p->tokens.compare_exchange_weak(have, have - n)) {}
    if (have < n) return;
    uint64_t zero = 0;
    if (!h->grant_for.compare_exchange_strong(zero, serving)) {  // it serves itself, or another proxy
        p->tokens.fetch_add(n);
        return;
    }
    if (h->ticket.load() != serving) {  // it was served and moved on before our claim: undo
        h->grant_for.store(0);
        p->tokens.fetch_add(n);
        return;
    }
    h->granted.store(n, std::memory_order_release);
    if (h->pid.load() < 0) {  // its owner left meanwhile: the tokens come back (once: exchange)
        p->tokens.fetch_add(h->granted.exchange(0));
    }
    ++t->st.proxy_grants;
    uint64_t e = serving;
    p->now_serving.compare_exchange_strong(e, serving + 1);
}

/* 1: admitted, the message holds `need` tokens; 0: wait. */
int node_acquire(cdag_throttle *t, uint32_t need)
{
    Pool *p = t->pool;
    Slot &me = p->slots[t->slot];
    if (!t->full) check_full(t);
    bool nobody_waits = queue_empty(p);  // a ticket of ours counts too
    /* The token cache: nobody waits, so serving ourselves keeps FCFS. */
    if (t->my_ticket == 0 && nobody_waits && t->cache >= need && take_mark(t)) {
        t->cache -= need;  // held (in use + cache) is unchanged: nothing to publish
        t->in_use += need;
        ++t->st.cache_hits;
        if (t->cfg.cache_hit_counter) ++*t->cfg.cache_hit_counter;
        return 1;
    }
    if (!nobody_waits) flush_cache(t);
    /* Nobody queued: take the tokens without a ticket (two shared
     * atomics fewer per message).  A waiter's ticket disables this. */
    bool fast = t->my_ticket == 0 && nobody_waits;
    if (!fast) {
        if (t->my_ticket == 0) draw_ticket(t, need);
        else me.need.store(need);  // the waiting message may have changed (a failed schedule's was dropped)
        if (me.grant_for.load() == t->my_ticket) return take_grant(t, need);
        if (p->now_serving.load() != t->my_ticket) {
            help_head(t);
            if (me.grant_for.load() == t->my_ticket) return take_grant(t, need);
            if (p->now_serving.load() != t->my_ticket) return 0;
        }
    }
    int64_t from_cache = std::min<int64_t>(t->cache, need);  // only when fast: else flushed
    int64_t want = need - from_cache, have = p->tokens.load(), extra = 0;
    bool got = false;
    while (have >= want) {
        /* fill the cache only while at least half of the pool stays free */
        extra = fast ? std::min<int64_t>(t->cfg.cache - (t->cache - from_cache), have - want - p->capacity / 2) : 0;
        if (extra < 0) extra = 0;
        if ((got = p->tokens.compare_exchange_weak(have, have - want - extra))) break;
    }
    if (got && !take_mark(t)) {
        p->tokens.fetch_add(want + extra);  // keep the turn, give the tokens back
        got = false;
    }
    if (got && !fast) {  // claim our own turn: a proxy may have claimed it first
        uint64_t zero = 0;
        if (!me.grant_for.compare_exchange_strong(zero, t->my_ticket)) {
            /* (never with a concurrency limit: no proxies then, so no mark to undo) */
            p->tokens.fetch_add(want + extra);
            return me.grant_for.load() == t->my_ticket ? take_grant(t, need) : 0;
        }
    }
    if (!got) {
        if (fast) {  // queue up: from now on FCFS applies to us
            flush_cache(t);
            draw_ticket(t, need);
        }
        return 0;
    }
    t->cache += extra - from_cache;
    t->in_use += need;
    publish_held(t);
    if (t->my_ticket) end_turn(t);
    return 1;
}

}  // namespace

int cdag_throttle_try_acquire(cdag_throttle_t *t, uint64_t bytes, uint32_t *tokens)
{
    *tokens = 0;
    if (t->cfg.mode == CDAG_THROTTLE_OFF) {
        ++t->st.admitted;
        return 1;
    }
    if (t->cfg.rank_limit && t->inflight >= t->cfg.rank_limit) {
        ++t->st.deferred;
        return 0;
    }
    if (t->cfg.mode == CDAG_THROTTLE_NODE) {
        uint32_t need = cdag_throttle_cost(t, bytes);
        if (!node_acquire(t, need)) {
            ++t->st.deferred;
            if (++t->waits >= t->cfg.recover_after) {
                recover(t);
                if (t->waits >= 3 * t->cfg.recover_after) t->waits = 0;
            }
            return 0;
        }
        *tokens = need;
        t->waits = 0;
    }
    ++t->inflight;
    if (t->inflight > t->st.inflight_max) t->st.inflight_max = t->inflight;
    ++t->st.admitted;
    return 1;
}

void cdag_throttle_release(cdag_throttle_t *t, uint32_t tokens)
{
    if (t->cfg.mode == CDAG_THROTTLE_OFF) return;
    if (t->inflight) --t->inflight;
    if (t->cfg.mode != CDAG_THROTTLE_NODE) return;
    Pool *p = t->pool;
    t->in_use -= tokens;
    int64_t give = tokens;
    if (queue_empty(p)) {  // keep what fits in the cache
        int64_t keep = std::min<int64_t>(static_cast<int64_t>(t->cfg.cache) - t->cache, give);
        if (keep > 0) {
            t->cache += keep;
            give -= keep;
        }
    } else {  // somebody waits: everything goes back
        give += t->cache;
        t->cache = 0;
    }
    publish_held(t);
    if (give) p->tokens.fetch_add(give);
    if (t->inflight == 0 && t->marked) {
        t->marked = false;
        p->slots[t->slot].injecting.store(0);
        p->injecting.fetch_sub(1);
    }
}

void cdag_throttle_poll(cdag_throttle_t *t)
{
    if (t->cache && !queue_empty(t->pool)) flush_cache(t);
}

uint32_t cdag_throttle_cached(const cdag_throttle_t *t) { return static_cast<uint32_t>(t->cache); }

void cdag_throttle_stats(const cdag_throttle_t *t, cdag_throttle_stats_t *s)
{
    *s = t->st;
    s->inflight = t->inflight;
}

void cdag_throttle_pool_state(const cdag_throttle_t *t, int64_t *free_tokens, int64_t *held, int32_t *injecting)
{
    *free_tokens = *held = 0;
    *injecting = 0;
    if (!t->pool) return;
    *free_tokens = t->pool->tokens.load();
    for (uint32_t i = 0; i < slots_of(t); ++i)
        *held += t->pool->slots[i].held.load() + t->pool->slots[i].granted.load();
    *injecting = t->pool->injecting.load();
}

}  // extern "C"
