// Token throttling (common/throttle/throttle.h): cost math, the per-rank limit,
// the node pool shared by processes (tokens conserved under concurrent
// acquire/release from forked processes), FCFS tickets, the concurrency
// limit, recovery from a rank killed while holding tokens, and a random
// property test of the limits.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>
#include <string>
#include <vector>

#include "common/throttle/throttle.h"

namespace {

std::string pool_name(const char *what)
{
    return std::string("/rdrp-test-") + what + "-" + std::to_string(getpid());
}

cdag_throttle_config_t node_cfg(uint32_t tokens, uint32_t rank_limit = 0, uint32_t cct = 0,
                                uint64_t bpt = 0, uint32_t recover = 50, uint32_t cache = 0)
{
    cdag_throttle_config_t c{};
    c.cache = cache;
    c.mode = CDAG_THROTTLE_NODE;
    c.node_tokens = tokens;
    c.rank_limit = rank_limit;
    c.concurrency = cct;
    c.bytes_per_token = bpt;
    c.recover_after = recover;
    return c;
}

struct Handles {
    std::vector<cdag_throttle_t *> h;
    ~Handles() {
        for (size_t i = h.size(); i-- > 0;) cdag_throttle_destroy(h[i]);  // creator last
    }
};

void open_handles(Handles &hs, const cdag_throttle_config_t &c, const std::string &name, int n)
{
    char err[256];
    for (int r = 0; r < n; ++r) {
        cdag_throttle_t *t = cdag_throttle_create(&c, name.c_str(), r, n, err, sizeof(err));
        ASSERT_NE(t, nullptr) << err;
        hs.h.push_back(t);
    }
}

}  // namespace

TEST(Throttle, CostMath)
{
    Handles hs;
    open_handles(hs, node_cfg(16, 0, 0, 256), pool_name("cost"), 1);
    cdag_throttle_t *t = hs.h[0];
    EXPECT_EQ(cdag_throttle_cost(t, 0), 1u) << "at least one token";
    EXPECT_EQ(cdag_throttle_cost(t, 1), 1u);
    EXPECT_EQ(cdag_throttle_cost(t, 256), 1u);
    EXPECT_EQ(cdag_throttle_cost(t, 257), 2u);
    EXPECT_EQ(cdag_throttle_cost(t, 1000), 4u);
    EXPECT_EQ(cdag_throttle_cost(t, 1ull << 40), 16u) << "never more than the pool";
    Handles h1;
    open_handles(h1, node_cfg(16), pool_name("cost1"), 1);
    EXPECT_EQ(cdag_throttle_cost(h1.h[0], 1ull << 30), 1u) << "fixed: one per message";
}

TEST(Throttle, ModeOffAdmitsEverything)
{
    cdag_throttle_config_t c{};
    c.mode = CDAG_THROTTLE_OFF;
    c.rank_limit = 1;
    char err[64];
    cdag_throttle_t *t = cdag_throttle_create(&c, nullptr, 0, 1, err, sizeof(err));
    ASSERT_NE(t, nullptr);
    uint32_t tok;
    for (int i = 0; i < 100; ++i) EXPECT_EQ(cdag_throttle_try_acquire(t, 1 << 20, &tok), 1);
    cdag_throttle_destroy(t);
}

TEST(Throttle, RankLimit)
{
    cdag_throttle_config_t c{};
    c.mode = CDAG_THROTTLE_RANK;
    c.rank_limit = 3;
    char err[64];
    cdag_throttle_t *t = cdag_throttle_create(&c, nullptr, 0, 1, err, sizeof(err));
    ASSERT_NE(t, nullptr);
    uint32_t tok;
    for (int i = 0; i < 3; ++i) EXPECT_EQ(cdag_throttle_try_acquire(t, 8, &tok), 1);
    EXPECT_EQ(cdag_throttle_try_acquire(t, 8, &tok), 0) << "a fourth in flight";
    cdag_throttle_release(t, 0);
    EXPECT_EQ(cdag_throttle_try_acquire(t, 8, &tok), 1);
    cdag_throttle_stats_t s;
    cdag_throttle_stats(t, &s);
    EXPECT_EQ(s.inflight_max, 3u);
    cdag_throttle_destroy(t);
}

TEST(Throttle, TicketsServeInOrder)
{
    Handles hs;
    open_handles(hs, node_cfg(6, 0, 0, 100), pool_name("fcfs"), 3);
    cdag_throttle_t *a = hs.h[0], *b = hs.h[1], *c = hs.h[2];
    uint32_t ta, tb, tc;
    for (uint64_t bytes : {200, 200, 100, 100}) ASSERT_EQ(cdag_throttle_try_acquire(a, bytes, &ta), 1);  // all 6
    EXPECT_EQ(cdag_throttle_try_acquire(b, 200, &tb), 0);  // b draws ticket first, needs 2
    EXPECT_EQ(cdag_throttle_try_acquire(c, 100, &tc), 0);  // c draws the next, needs 1
    cdag_throttle_release(a, 1);                            // 1 free: enough for c, not for b
    EXPECT_EQ(cdag_throttle_try_acquire(c, 100, &tc), 0) << "c overtook b";
    EXPECT_EQ(cdag_throttle_try_acquire(b, 200, &tb), 0);
    cdag_throttle_release(a, 2);                            // 3 free: b's 2 first, then c's 1
    EXPECT_EQ(cdag_throttle_try_acquire(c, 100, &tc), 1) << "c, behind b, serves b on its behalf, then itself";
    int64_t fr, held;
    int32_t inj;
    cdag_throttle_pool_state(a, &fr, &held, &inj);
    EXPECT_EQ(fr, 0) << "b's 2 tokens wait in its slot";
    EXPECT_EQ(held, 6);
    EXPECT_EQ(cdag_throttle_try_acquire(b, 200, &tb), 1) << "b's turn was served";
    EXPECT_EQ(tb, 2u);
    cdag_throttle_stats_t sb, sc;
    cdag_throttle_stats(b, &sb);
    cdag_throttle_stats(c, &sc);
    EXPECT_EQ(sb.grants_taken, 1u);
    EXPECT_EQ(sc.proxy_grants, 1u);
    cdag_throttle_pool_state(a, &fr, &held, &inj);
    EXPECT_EQ(fr + held, 6);
    EXPECT_EQ(held, 6);
}

// A proxy sizes its grant by the need the head recorded; if the head's
// waiting message changed since (a failed schedule's message was dropped),
// a smaller grant must not admit a bigger message: no token is created.
TEST(Throttle, GrantSmallerThanTheNeedCreatesNoTokens)
{
    Handles hs;
    open_handles(hs, node_cfg(8, 0, 0, 1), pool_name("regrant"), 3);
    cdag_throttle_t *a = hs.h[0], *b = hs.h[1], *c = hs.h[2];
    uint32_t tok;
    for (int i = 0; i < 4; ++i) ASSERT_EQ(cdag_throttle_try_acquire(a, 2, &tok), 1);  // all 8
    EXPECT_EQ(cdag_throttle_try_acquire(b, 1, &tok), 0);  // head, needs 1
    EXPECT_EQ(cdag_throttle_try_acquire(c, 1, &tok), 0);
    cdag_throttle_release(a, 2);
    EXPECT_EQ(cdag_throttle_try_acquire(c, 1, &tok), 1) << "c serves b's 1, then itself";
    int64_t fr, held;
    int32_t inj;
    EXPECT_EQ(cdag_throttle_try_acquire(b, 2, &tok), 0) << "a grant of 1 admitted a message of 2";
    cdag_throttle_pool_state(a, &fr, &held, &inj);
    EXPECT_EQ(fr + held, 8) << "tokens created or lost";
    cdag_throttle_release(a, 2);
    EXPECT_EQ(cdag_throttle_try_acquire(b, 2, &tok), 1) << "its 1 plus 1 from the pool";
    EXPECT_EQ(tok, 2u);
    EXPECT_EQ(cdag_throttle_cached(b), 0u);
    cdag_throttle_pool_state(a, &fr, &held, &inj);
    EXPECT_EQ(fr + held, 8);
}

// The default cache is node_tokens / (2 x local ranks); the caller can
// count cache hits without asking for the statistics per message.
TEST(Throttle, AutoCacheAndHitCounter)
{
    uint64_t hits = 0;
    auto c = node_cfg(16);
    c.cache = CDAG_THROTTLE_CACHE_AUTO;
    c.cache_hit_counter = &hits;
    Handles hs;
    open_handles(hs, c, pool_name("autocache"), 4);
    uint32_t tok;
    ASSERT_EQ(cdag_throttle_try_acquire(hs.h[0], 8, &tok), 1);
    EXPECT_EQ(cdag_throttle_cached(hs.h[0]), 2u) << "16 / (2 x 4)";
    cdag_throttle_release(hs.h[0], tok);
    for (int i = 0; i < 5; ++i) {
        ASSERT_EQ(cdag_throttle_try_acquire(hs.h[0], 8, &tok), 1);
        cdag_throttle_release(hs.h[0], tok);
    }
    EXPECT_EQ(hits, 5u);
}

// With more ranks than cores the head of the queue is often descheduled:
// the ranks behind it must not wait for it while tokens are free.
TEST(Throttle, DescheduledHeadDoesNotStallTheQueue)
{
    Handles hs;
    open_handles(hs, node_cfg(4), pool_name("proxy"), 4);
    cdag_throttle_t *a = hs.h[0], *b = hs.h[1], *c = hs.h[2], *d = hs.h[3];
    uint32_t tok;
    for (int i = 0; i < 4; ++i) ASSERT_EQ(cdag_throttle_try_acquire(a, 8, &tok), 1);
    EXPECT_EQ(cdag_throttle_try_acquire(b, 8, &tok), 0);  // head, then "descheduled"
    EXPECT_EQ(cdag_throttle_try_acquire(c, 8, &tok), 0);
    EXPECT_EQ(cdag_throttle_try_acquire(d, 8, &tok), 0);
    for (int i = 0; i < 3; ++i) cdag_throttle_release(a, 1);
    EXPECT_EQ(cdag_throttle_try_acquire(c, 8, &tok), 1) << "c waited for the sleeping head";
    EXPECT_EQ(cdag_throttle_try_acquire(d, 8, &tok), 1);
    EXPECT_EQ(cdag_throttle_try_acquire(a, 8, &tok), 0) << "b's token is b's";
    EXPECT_EQ(cdag_throttle_try_acquire(b, 8, &tok), 1) << "the head wakes up to its token";
    int64_t fr, held;
    int32_t inj;
    cdag_throttle_pool_state(a, &fr, &held, &inj);
    EXPECT_EQ(fr, 0);
    EXPECT_EQ(held, 4);
}

// A big message costs at most one local rank's share of the pool, so every
// rank can have a message in flight.
TEST(Throttle, BigMessagesNeverSerialiseTheNode)
{
    Handles hs;
    open_handles(hs, node_cfg(16, 0, 0, 1024), pool_name("share"), 4);
    EXPECT_EQ(cdag_throttle_cost(hs.h[0], 1ull << 30), 4u) << "16 tokens / 4 ranks";
    EXPECT_EQ(cdag_throttle_cost(hs.h[0], 2048), 2u);
    uint32_t tok;
    for (int r = 0; r < 4; ++r)
        EXPECT_EQ(cdag_throttle_try_acquire(hs.h[r], 1ull << 30, &tok), 1) << "rank " << r << " starved";
    EXPECT_EQ(cdag_throttle_try_acquire(hs.h[0], 1, &tok), 0) << "the pool is full";
}

TEST(Throttle, ConcurrencyLimit)
{
    Handles hs;
    open_handles(hs, node_cfg(8, 0, 1), pool_name("cct"), 2);
    cdag_throttle_t *a = hs.h[0], *b = hs.h[1];
    uint32_t t1, t2, tb;
    ASSERT_EQ(cdag_throttle_try_acquire(a, 8, &t1), 1);
    ASSERT_EQ(cdag_throttle_try_acquire(a, 8, &t2), 1) << "a is injecting already";
    EXPECT_EQ(cdag_throttle_try_acquire(b, 8, &tb), 0) << "two ranks injecting with concurrency 1";
    cdag_throttle_release(a, t1);
    EXPECT_EQ(cdag_throttle_try_acquire(b, 8, &tb), 0) << "a still has a message in flight";
    cdag_throttle_release(a, t2);
    EXPECT_EQ(cdag_throttle_try_acquire(b, 8, &tb), 1);
    int64_t fr, held;
    int32_t inj;
    cdag_throttle_pool_state(b, &fr, &held, &inj);
    EXPECT_EQ(inj, 1);
}

// The name goes away once everybody attached: an aborted job leaks nothing.
TEST(Throttle, PoolNameRemovedOnceAllAttached)
{
    std::string name = pool_name("unlink");
    std::string path = "/dev/shm" + name;
    char err[256];
    auto c = node_cfg(4);
    cdag_throttle_t *a = cdag_throttle_create(&c, name.c_str(), 0, 2, err, sizeof(err));
    ASSERT_NE(a, nullptr) << err;
    EXPECT_EQ(access(path.c_str(), F_OK), 0) << "name gone before every rank attached";
    cdag_throttle_t *b = cdag_throttle_create(&c, name.c_str(), 1, 2, err, sizeof(err));
    ASSERT_NE(b, nullptr) << err;
    EXPECT_NE(access(path.c_str(), F_OK), 0) << "name still in /dev/shm after every rank attached";
    uint32_t tok;
    ASSERT_EQ(cdag_throttle_try_acquire(a, 8, &tok), 1);
    ASSERT_EQ(cdag_throttle_try_acquire(b, 8, &tok), 1) << "the pool keeps working without its name";
    int64_t fr, held;
    int32_t inj;
    cdag_throttle_pool_state(b, &fr, &held, &inj);
    EXPECT_EQ(held, 2);
    EXPECT_EQ(fr, 2);
    cdag_throttle_destroy(b);
    cdag_throttle_destroy(a);
}

// Whoever comes first creates the pool: no rank waits for local rank 0.
TEST(Throttle, AnyRankMayCreate)
{
    std::string name = pool_name("order");
    auto c = node_cfg(3);
    char err[256];
    cdag_throttle_t *r2 = cdag_throttle_create(&c, name.c_str(), 2, 3, err, sizeof(err));
    ASSERT_NE(r2, nullptr) << err;
    uint32_t tok;
    ASSERT_EQ(cdag_throttle_try_acquire(r2, 8, &tok), 1) << "usable before the others came";
    cdag_throttle_t *r0 = cdag_throttle_create(&c, name.c_str(), 0, 3, err, sizeof(err));
    cdag_throttle_t *r1 = cdag_throttle_create(&c, name.c_str(), 1, 3, err, sizeof(err));
    ASSERT_NE(r0, nullptr) << err;
    ASSERT_NE(r1, nullptr) << err;
    ASSERT_EQ(cdag_throttle_try_acquire(r0, 8, &tok), 1);
    ASSERT_EQ(cdag_throttle_try_acquire(r1, 8, &tok), 1);
    EXPECT_EQ(cdag_throttle_try_acquire(r0, 8, &tok), 0) << "one pool: 3 tokens for the three";
    int64_t fr, held;
    int32_t inj;
    cdag_throttle_pool_state(r1, &fr, &held, &inj);
    EXPECT_EQ(fr, 0);
    EXPECT_EQ(held, 3);
    cdag_throttle_destroy(r1);
    cdag_throttle_destroy(r0);
    cdag_throttle_destroy(r2);
}

// Pools of different communicators (names) are independent.
TEST(Throttle, PoolsOfDifferentNamesAreIndependent)
{
    Handles a, b;
    open_handles(a, node_cfg(1), pool_name("commA"), 2);
    open_handles(b, node_cfg(1), pool_name("commB"), 2);
    uint32_t tok;
    ASSERT_EQ(cdag_throttle_try_acquire(a.h[0], 8, &tok), 1);
    EXPECT_EQ(cdag_throttle_try_acquire(a.h[1], 8, &tok), 0) << "A's only token is taken";
    EXPECT_EQ(cdag_throttle_try_acquire(b.h[1], 8, &tok), 1) << "B's pool is its own";
}

// A pool left behind by a crashed job (a dead member, never full) is
// replaced, not joined.
TEST(Throttle, StalePoolIsReplaced)
{
    std::string name = pool_name("stale");
    auto c = node_cfg(4);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        char e[256];
        cdag_throttle_t *t = cdag_throttle_create(&c, name.c_str(), 0, 2, e, sizeof(e));
        uint32_t tok;
        if (!t || !cdag_throttle_try_acquire(t, 8, &tok)) _exit(3);
        raise(SIGKILL);  // dies attached, holding a token; the name stays
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ASSERT_TRUE(WIFSIGNALED(st));
    ASSERT_EQ(access(("/dev/shm" + name).c_str(), F_OK), 0) << "the crashed job's pool should be there";
    char err[256];
    cdag_throttle_t *b = cdag_throttle_create(&c, name.c_str(), 1, 2, err, sizeof(err));
    ASSERT_NE(b, nullptr) << err;
    int64_t fr, held;
    int32_t inj;
    cdag_throttle_pool_state(b, &fr, &held, &inj);
    EXPECT_EQ(fr, 4) << "joined the stale pool instead of a fresh one";
    EXPECT_EQ(held, 0);
    cdag_throttle_t *a = cdag_throttle_create(&c, name.c_str(), 0, 2, err, sizeof(err));
    ASSERT_NE(a, nullptr) << err;
    uint32_t tok;
    ASSERT_EQ(cdag_throttle_try_acquire(a, 8, &tok), 1);
    cdag_throttle_pool_state(b, &fr, &held, &inj);
    EXPECT_EQ(fr, 3) << "a and b are on different pools";
    EXPECT_NE(access(("/dev/shm" + name).c_str(), F_OK), 0);
    cdag_throttle_destroy(a);
    cdag_throttle_destroy(b);
}

// The token cache: a rank alone keeps tokens between messages without
// touching the pool, and gives them back as soon as somebody waits.
TEST(Throttle, TokenCacheServesLocallyAndYieldsToWaiters)
{
    Handles hs;
    open_handles(hs, node_cfg(8, 0, 0, 1, 50, 2), pool_name("cache"), 2);
    cdag_throttle_t *a = hs.h[0], *b = hs.h[1];
    int64_t fr, held;
    int32_t inj;
    uint32_t ta, tb;
    ASSERT_EQ(cdag_throttle_try_acquire(a, 1, &ta), 1);
    EXPECT_EQ(ta, 1u);
    cdag_throttle_pool_state(a, &fr, &held, &inj);
    EXPECT_EQ(fr, 5) << "1 for the message and a cache of 2";
    EXPECT_EQ(cdag_throttle_cached(a), 2u);
    cdag_throttle_release(a, ta);
    cdag_throttle_pool_state(a, &fr, &held, &inj);
    EXPECT_EQ(fr, 6) << "the cache holds at most 2";
    EXPECT_EQ(held, 2);
    for (int i = 0; i < 10; ++i) {
        ASSERT_EQ(cdag_throttle_try_acquire(a, 1, &ta), 1);
        cdag_throttle_release(a, ta);
    }
    cdag_throttle_stats_t s;
    cdag_throttle_stats(a, &s);
    EXPECT_EQ(s.cache_hits, 10u);
    cdag_throttle_pool_state(a, &fr, &held, &inj);
    EXPECT_EQ(fr, 6) << "cache hits must not touch the pool";
    ASSERT_EQ(cdag_throttle_try_acquire(b, 4, &tb), 1);     // 4 of the 6 free
    EXPECT_EQ(cdag_throttle_try_acquire(b, 4, &tb), 0) << "4 more while a caches 2";
    cdag_throttle_poll(a);
    EXPECT_EQ(cdag_throttle_cached(a), 0u) << "a waiter must empty the cache";
    ASSERT_EQ(cdag_throttle_try_acquire(b, 4, &tb), 1);
    EXPECT_EQ(cdag_throttle_try_acquire(a, 1, &ta), 0) << "the pool is empty";
    EXPECT_EQ(cdag_throttle_cached(a), 0u);
    cdag_throttle_pool_state(a, &fr, &held, &inj);
    EXPECT_EQ(fr, 0);
    EXPECT_EQ(held, 8);
}

// Several processes hammer one pool; tokens are conserved and never negative.
static void hammer_pool(uint32_t cache, uint32_t cct)
{
    const int nproc = 4;
    const uint32_t cap = 5;
    std::string name = pool_name(("procs" + std::to_string(cache) + "-" + std::to_string(cct)).c_str());
    auto cfg = node_cfg(cap, 3, cct, 64, 50, cache);
    char err[256];
    cdag_throttle_t *leader = cdag_throttle_create(&cfg, name.c_str(), 0, nproc + 1, err, sizeof(err));
    ASSERT_NE(leader, nullptr) << err;
    std::vector<pid_t> kids;
    for (int k = 1; k <= nproc; ++k) {
        pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            cdag_throttle_t *t = cdag_throttle_create(&cfg, name.c_str(), k, nproc + 1, err, sizeof(err));
            if (!t) _exit(3);
            std::mt19937 rng(k);
            std::vector<uint32_t> held;
            int bad = 0;
            for (int i = 0; i < 20000; ++i) {
                uint32_t tok;
                if (rng() % 5 == 0) cdag_throttle_poll(t);
                if (held.size() < 3 && rng() % 2 && cdag_throttle_try_acquire(t, rng() % 300, &tok)) {
                    held.push_back(tok);
                } else if (!held.empty()) {
                    cdag_throttle_release(t, held.back());
                    held.pop_back();
                }
                int64_t fr, h;
                int32_t inj;
                cdag_throttle_pool_state(t, &fr, &h, &inj);
                if (fr < 0 || fr > cap || inj < 0 || inj > 3) bad = 1;
            }
            while (!held.empty()) {
                cdag_throttle_release(t, held.back());
                held.pop_back();
            }
            cdag_throttle_destroy(t);
            _exit(bad ? 4 : 0);
        }
        kids.push_back(pid);
    }
    for (pid_t p : kids) {
        int st = 0;
        waitpid(p, &st, 0);
        EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
    }
    int64_t fr, held;
    int32_t inj;
    cdag_throttle_pool_state(leader, &fr, &held, &inj);
    EXPECT_EQ(fr, static_cast<int64_t>(cap)) << "tokens lost or created";
    EXPECT_EQ(held, 0);
    EXPECT_EQ(inj, 0);
    cdag_throttle_destroy(leader);
}

TEST(Throttle, TokensConservedAcrossProcesses) { hammer_pool(0, 3); }
TEST(Throttle, TokensConservedAcrossProcessesWithCache) { hammer_pool(2, 3); }
// without a concurrency limit waiters also serve the head of the queue
TEST(Throttle, TokensConservedAcrossProcessesWithProxies) { hammer_pool(0, 0); }
TEST(Throttle, TokensConservedAcrossProcessesWithProxiesAndCache) { hammer_pool(2, 0); }

// A rank killed while holding tokens (and a ticket) does not block the pool.
TEST(Throttle, DeadRankIsRecovered)
{
    std::string name = pool_name("dead");
    auto cfg = node_cfg(4, 0, 1, 0, 20);
    char err[256];
    cdag_throttle_t *leader = cdag_throttle_create(&cfg, name.c_str(), 0, 3, err, sizeof(err));
    ASSERT_NE(leader, nullptr) << err;
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        cdag_throttle_t *t = cdag_throttle_create(&cfg, name.c_str(), 1, 3, err, sizeof(err));
        uint32_t tok;
        for (int i = 0; i < 3; ++i)
            if (!t || !cdag_throttle_try_acquire(t, 8, &tok)) _exit(3);
        raise(SIGKILL);  // dies holding 3 tokens and the injecting mark
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ASSERT_TRUE(WIFSIGNALED(st));
    uint32_t tok;
    int tries = 0;
    while (!cdag_throttle_try_acquire(leader, 8, &tok) && tries < 1000) ++tries;
    EXPECT_LT(tries, 1000) << "the dead rank's tokens were never recovered";
    EXPECT_GE(tries, 19) << "admitted before the recovery period";
    cdag_throttle_stats_t s;
    cdag_throttle_stats(leader, &s);
    EXPECT_EQ(s.recovered_tokens, 3u);
    cdag_throttle_release(leader, tok);
    int64_t fr, held;
    int32_t inj;
    cdag_throttle_pool_state(leader, &fr, &held, &inj);
    EXPECT_EQ(fr, 4);
    EXPECT_EQ(inj, 0);
    cdag_throttle_destroy(leader);
}

// Random operations on several handles: the limits hold at every step and
// every token comes back.
TEST(Throttle, RandomPropertyLimitsHold)
{
    uint64_t proxied = 0;
    for (int seed = 1; seed <= 20; ++seed) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        const int n = 4;
        const uint32_t cap = 1 + seed % 6, rank_limit = 1 + seed % 3, cct = seed % 3;
        Handles hs;
        const uint32_t cache = seed % 4;
        open_handles(hs, node_cfg(cap, rank_limit, cct, seed % 2 ? 128 : 0, 50, cache),
                     pool_name(("prop" + std::to_string(seed)).c_str()), n);
        std::mt19937 rng(seed);
        std::vector<std::vector<uint32_t>> held(n);
        for (int step = 0; step < 3000; ++step) {
            int r = static_cast<int>(rng() % n);
            uint32_t tok;
            if (rng() % 7 == 0) cdag_throttle_poll(hs.h[r]);
            if (rng() % 2 && cdag_throttle_try_acquire(hs.h[r], rng() % 1000, &tok)) {
                held[r].push_back(tok);
            } else if (!held[r].empty()) {
                cdag_throttle_release(hs.h[r], held[r].back());
                held[r].pop_back();
            }
            int64_t fr, hsum;
            int32_t inj;
            cdag_throttle_pool_state(hs.h[0], &fr, &hsum, &inj);
            ASSERT_GE(fr, 0);
            ASSERT_EQ(fr + hsum, static_cast<int64_t>(cap)) << "step " << step;
            ASSERT_LE(held[r].size(), rank_limit);
            int injecting = 0;
            int64_t in_messages = 0;
            for (auto &v : held) {
                injecting += !v.empty();
                for (uint32_t x : v) in_messages += x;
            }
            ASSERT_LE(in_messages, static_cast<int64_t>(cap)) << "more tokens in messages than the pool has";
            if (cct) {
                ASSERT_EQ(inj, injecting);
                ASSERT_LE(inj, static_cast<int32_t>(cct));
            }
        }
        for (int r = 0; r < n; ++r)
            for (uint32_t t : held[r]) cdag_throttle_release(hs.h[r], t);
        int64_t fr, hsum;
        int32_t inj;
        cdag_throttle_pool_state(hs.h[0], &fr, &hsum, &inj);
        int64_t cached = 0;
        for (int r = 0; r < n; ++r) cached += cdag_throttle_cached(hs.h[r]);
        EXPECT_EQ(fr + hsum, static_cast<int64_t>(cap)) << "tokens lost or created";
        EXPECT_GE(hsum, cached) << "caches plus grants not yet taken";
        EXPECT_EQ(inj, 0);
        for (int r = 0; r < n; ++r) {
            cdag_throttle_stats_t st;
            cdag_throttle_stats(hs.h[r], &st);
            proxied += st.proxy_grants;
        }
    }
    EXPECT_GT(proxied, 0u) << "the random walk never served a head by proxy";
}

// The pool's slot count lives in shared memory: a process that walked it
// (dead-rank recovery, the head's proxy, pool_state) after another process
// or a stray write changed it read past its mapping.  The count checked at
// join is the only one used.
TEST(ThrottleHostile, SlotCountChangedInSharedMemoryIsNotFollowed)
{
    std::string name = pool_name("nslots");
    char err[256];
    auto c = node_cfg(4);
    cdag_throttle_t *a = cdag_throttle_create(&c, name.c_str(), 0, 2, err, sizeof(err));
    ASSERT_NE(a, nullptr) << err;
    int fd = shm_open(name.c_str(), O_RDWR, 0);
    ASSERT_GE(fd, 0);
    void *m = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    ASSERT_NE(m, MAP_FAILED);
    cdag_throttle_t *b = cdag_throttle_create(&c, name.c_str(), 1, 2, err, sizeof(err));
    ASSERT_NE(b, nullptr) << err;
    uint32_t *nslots = reinterpret_cast<uint32_t *>(static_cast<char *>(m) + sizeof(uint32_t));
    ASSERT_EQ(*nslots, 2u) << "layout: the slot count follows the state word";
    *nslots = 1u << 30;  // far past the mapping
    int64_t fr, held;
    int32_t inj;
    cdag_throttle_pool_state(a, &fr, &held, &inj);
    EXPECT_EQ(held, 0);
    EXPECT_EQ(fr, 4);
    uint32_t tok;
    EXPECT_EQ(cdag_throttle_try_acquire(b, 8, &tok), 1);
    cdag_throttle_release(b, tok);
    munmap(m, 4096);
    cdag_throttle_destroy(b);
    cdag_throttle_destroy(a);
}
