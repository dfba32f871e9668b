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

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

namespace {

constexpr uint32_t kReady = 0x7468726fu;  // "thro"

struct Slot {
    std::atomic<int32_t> pid;        // 0: free
    std::atomic<int64_t> held;       // tokens held by this rank
    std::atomic<uint64_t> ticket;    // ticket it waits with (0: none)
    std::atomic<int32_t> injecting;  // counted in Pool::injecting
};

struct Pool {
    std::atomic<uint32_t> state;
    uint32_t nslots;
    int64_t capacity;
    uint32_t cct;
    uint32_t pad;
    std::atomic<int64_t> tokens;
    std::atomic<uint64_t> next_ticket;
    std::atomic<uint64_t> now_serving;
    std::atomic<int32_t> injecting;
    Slot slots[1];
};

static_assert(std::atomic<int64_t>::is_always_lock_free, "shared-memory atomics must be lock-free");

size_t pool_bytes(uint32_t nslots) { return sizeof(Pool) + sizeof(Slot) * (nslots ? nslots - 1 : 0); }

bool pid_dead(int32_t pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

void nap() {
    struct timespec ts = {0, 1000000};  // 1 ms
    nanosleep(&ts, nullptr);
}

}  // namespace

struct cdag_throttle {
    cdag_throttle_config_t cfg{};
    Pool *pool = nullptr;
    size_t map_len = 0;
    int slot = 0;
    bool creator = false;
    std::string name;
    uint32_t inflight = 0;
    uint64_t my_ticket = 0;
    uint32_t waits = 0;
    bool marked = false;  // counted in Pool::injecting
    bool unlinked = false;  // creator: the name is gone, the mappings keep the pool
    cdag_throttle_stats_t st{};
};

namespace {

void set_err(char *err, size_t len, const std::string &m)
{
    if (err && len) snprintf(err, len, "%s", m.c_str());
}

/* Dead ranks give back what they held; their tickets are passed over. */
void recover(cdag_throttle *t)
{
    Pool *p = t->pool;
    uint64_t serving = p->now_serving.load();
    bool holder_found = false;
    for (uint32_t i = 0; i < p->nslots; ++i) {
        if (static_cast<int>(i) == t->slot) continue;
        Slot &s = p->slots[i];
        int32_t pid = s.pid.load();
        if (s.ticket.load() == serving && !pid_dead(pid)) holder_found = true;
        if (!pid_dead(pid)) continue;
        int64_t h = s.held.exchange(0);
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
        s.pid.store(0);
    }
    /* A ticket nobody records (its taker died between drawing and
     * recording it, a window of a few instructions): pass over it once it
     * has blocked the queue for two recovery periods. */
    if (!holder_found && serving != t->my_ticket && serving < p->next_ticket.load() &&
        t->waits >= 2 * t->cfg.recover_after) {
        bool recorded = false;
        for (uint32_t i = 0; i < p->nslots; ++i)
            if (p->slots[i].ticket.load() == serving) recorded = true;
        uint64_t e = serving;
        if (!recorded && p->now_serving.compare_exchange_strong(e, serving + 1)) ++t->st.skipped_tickets;
    }
}

/* Once every local rank has attached, the creator removes the pool's name:
 * the segment then lives exactly as long as some process maps it, so a
 * job that aborts leaves nothing behind in /dev/shm. */
void maybe_unlink(cdag_throttle *t)
{
    if (!t->creator || t->unlinked) return;
    for (uint32_t i = 0; i < t->pool->nslots; ++i)
        if (t->pool->slots[i].pid.load() == 0) return;
    shm_unlink(t->name.c_str());
    t->unlinked = true;
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
    if (!name || local_rank < 0 || local_size <= 0 || local_rank >= local_size || cfg->node_tokens == 0) {
        set_err(err, errlen, "node throttling needs a pool name, a local rank and at least one token");
        delete t;
        return nullptr;
    }
    t->name = name;
    t->slot = local_rank;
    t->map_len = pool_bytes(static_cast<uint32_t>(local_size));
    int fd = -1;
    if (local_rank == 0) {
        shm_unlink(name);  // a stale pool of a crashed job of the same name
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0 || ftruncate(fd, static_cast<off_t>(t->map_len)) != 0) {
            set_err(err, errlen, std::string("cannot create the node token pool ") + name + ": " + strerror(errno));
            if (fd >= 0) close(fd);
            delete t;
            return nullptr;
        }
        t->creator = true;
    } else {
        for (int i = 0; i < 30000 && fd < 0; ++i) {  // up to ~30 s for the creator
            fd = shm_open(name, O_RDWR, 0600);
            struct stat sb;
            if (fd >= 0 && (fstat(fd, &sb) != 0 || static_cast<size_t>(sb.st_size) < t->map_len)) {
                close(fd);
                fd = -1;
            }
            if (fd < 0) nap();
        }
        if (fd < 0) {
            set_err(err, errlen, std::string("the node token pool ") + name + " never appeared");
            delete t;
            return nullptr;
        }
    }
    void *m = mmap(nullptr, t->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        set_err(err, errlen, std::string("cannot map the node token pool: ") + strerror(errno));
        if (t->creator) shm_unlink(name);
        delete t;
        return nullptr;
    }
    t->pool = static_cast<Pool *>(m);
    Pool *p = t->pool;
    if (t->creator) {
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
        }
        p->state.store(kReady, std::memory_order_release);
    } else {
        for (int i = 0; i < 30000 && p->state.load(std::memory_order_acquire) != kReady; ++i) nap();
        if (p->state.load() != kReady || p->nslots < static_cast<uint32_t>(local_size)) {
            set_err(err, errlen, "the node token pool was not initialised in time");
            munmap(m, t->map_len);
            delete t;
            return nullptr;
        }
    }
    p->slots[local_rank].pid.store(static_cast<int32_t>(getpid()));
    return t;
}

void cdag_throttle_destroy(cdag_throttle_t *t)
{
    if (!t) return;
    if (t->pool) {
        Slot &s = t->pool->slots[t->slot];
        int64_t h = s.held.exchange(0);
        if (h) t->pool->tokens.fetch_add(h);
        if (s.injecting.exchange(0)) t->pool->injecting.fetch_sub(1);
        s.ticket.store(0);
        s.pid.store(0);
        munmap(t->pool, t->map_len);
        if (t->creator && !t->unlinked) shm_unlink(t->name.c_str());
    }
    delete t;
}

uint32_t cdag_throttle_cost(const cdag_throttle_t *t, uint64_t bytes)
{
    if (t->cfg.mode != CDAG_THROTTLE_NODE || t->cfg.bytes_per_token == 0) return 1;
    uint64_t c = (bytes + t->cfg.bytes_per_token - 1) / t->cfg.bytes_per_token;
    if (c < 1) c = 1;
    if (c > t->cfg.node_tokens) c = t->cfg.node_tokens;  // a big message must not wait forever
    return static_cast<uint32_t>(c);
}

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
        Pool *p = t->pool;
        Slot &me = p->slots[t->slot];
        if (t->creator && !t->unlinked) maybe_unlink(t);
        /* Nobody queued: take the tokens without a ticket (two shared
         * atomics fewer per message).  A waiter's ticket disables this. */
        bool fast = t->my_ticket == 0 && p->now_serving.load() == p->next_ticket.load();
        if (!fast && t->my_ticket == 0) {
            t->my_ticket = p->next_ticket.fetch_add(1);
            me.ticket.store(t->my_ticket);
        }
        bool ok = false;
        if (fast || p->now_serving.load() == t->my_ticket) {
            uint32_t need = cdag_throttle_cost(t, bytes);
            int64_t have = p->tokens.load();
            while (have >= need && !p->tokens.compare_exchange_weak(have, have - need)) {}
            if (have >= need) {
                bool mark = t->inflight == 0 && !t->marked;
                bool cct_ok = true;
                if (mark && p->cct) {
                    int32_t inj = p->injecting.load();
                    while (inj < static_cast<int32_t>(p->cct) &&
                           !p->injecting.compare_exchange_weak(inj, inj + 1)) {}
                    cct_ok = inj < static_cast<int32_t>(p->cct);
                } else if (mark) {
                    p->injecting.fetch_add(1);
                }
                if (!cct_ok) {
                    p->tokens.fetch_add(need);  // keep the turn, give the tokens back
                } else {
                    if (mark) {
                        t->marked = true;
                        me.injecting.store(1);
                    }
                    me.held.fetch_add(need);
                    *tokens = need;
                    if (!fast) {
                        me.ticket.store(0);
                        p->now_serving.store(t->my_ticket + 1);
                        t->my_ticket = 0;
                    }
                    ok = true;
                }
            }
        }
        if (!ok) {
            if (fast) {  // queue up: from now on FCFS applies to us
                t->my_ticket = p->next_ticket.fetch_add(1);
                me.ticket.store(t->my_ticket);
            }
            ++t->st.deferred;
            if (++t->waits >= t->cfg.recover_after) {
                recover(t);
                if (t->waits >= 3 * t->cfg.recover_after) t->waits = 0;
            }
            return 0;
        }
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
    Slot &me = p->slots[t->slot];
    if (tokens) {
        me.held.fetch_sub(tokens);
        p->tokens.fetch_add(tokens);
    }
    if (t->inflight == 0 && t->marked) {
        t->marked = false;
        me.injecting.store(0);
        p->injecting.fetch_sub(1);
    }
}

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
    for (uint32_t i = 0; i < t->pool->nslots; ++i) *held += t->pool->slots[i].held.load();
    *injecting = t->pool->injecting.load();
}

}  // extern "C"
