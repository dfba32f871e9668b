/*
 * Unit tests for ucx_glue (rdrp_ucx.h) without MPI.
 *
 * Everything runs in one process: two workers of the same UCP context are
 * connected to each other through their worker addresses, which exercises
 * the same code paths as two processes (UCX picks shared-memory/cma/tcp
 * lanes between two workers; "self" only serves a worker's own endpoint).
 * On UCX 1.13 RMA on user memory is emulated through the target's progress,
 * so every wait below progresses both workers.
 *
 * Observing (de)registrations: the registration cache and the rkey cache
 * only expose statistics, so this file interposes ucp_mem_map/ucp_mem_unmap,
 * ucp_ep_rkey_unpack/ucp_rkey_destroy and ucp_ep_close_nbx (defined here,
 * forwarding to libucp through dlsym(RTLD_NEXT)) and counts outstanding
 * mappings and unpacked rkeys and records endpoint closes.  UCX 1.13 has
 * its own registration cache under ucp_mem_map and recycles handles, so
 * the tests count outstanding ucp_mem_map calls rather than trusting
 * handle identity.  The interposers see the glue's calls whenever the glue
 * is linked into the test executable (its objects or the libucx_glue.la
 * convenience library) or is a shared library on the link line.
 *
 * Every test brings up its own context (fixture) so the final
 * rdrp_ucx_context_release -> ucp_cleanup also checks that nothing was left
 * mapped, and TearDown checks that every mapping and rkey is gone.  The
 * registration cache counters are process-global and never reset: tests
 * compare deltas.
 *
 * Sanitizers: clean under ASan+UBSan (LSan on) and valgrind memcheck.
 * ThreadSanitizer needs UCX's memory hooks off (UCX_MEM_EVENTS=no
 * UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none), then is clean too.
 */
#include "ucx_glue/rdrp_ucx.h"

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

/* ------------------------------------------------------------ interposers */
namespace {

std::mutex g_track_lock;
/* UCX 1.13 keeps its own registration cache under ucp_mem_map: mapping the
 * same range twice can return the same memh (reference counted), and freed
 * handles are recycled, so handles are counted, not just collected. */
std::map<ucp_mem_h, int> g_memh;       /* outstanding ucp_mem_map per handle */
long g_maps;                           /* outstanding ucp_mem_map calls */
std::map<ucp_rkey_h, int> g_rkeys;     /* unpacked, not yet destroyed */
uint64_t g_unpacks;                    /* successful ucp_ep_rkey_unpack calls */
struct CloseCall {
    ucp_ep_h ep;
    uint32_t flags;
    ucs_status_t status; /* UCS_OK, UCS_INPROGRESS (request) or the error */
};
std::vector<CloseCall> g_closes;       /* every ucp_ep_close_nbx */

template <class Fn>
Fn real(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) {
        std::fprintf(stderr, "test_ucx_glue: dlsym(RTLD_NEXT, %s) failed\n", name);
        std::abort();
    }
    return reinterpret_cast<Fn>(p);
}

bool memh_live(ucp_mem_h m)
{
    std::lock_guard<std::mutex> g(g_track_lock);
    auto it = g_memh.find(m);
    return it != g_memh.end() && it->second > 0;
}

/* Outstanding ucp_mem_map calls: every live glue region holds exactly one. */
long live_maps()
{
    std::lock_guard<std::mutex> g(g_track_lock);
    return g_maps;
}

bool rkey_live(ucp_rkey_h k)
{
    std::lock_guard<std::mutex> g(g_track_lock);
    auto it = g_rkeys.find(k);
    return it != g_rkeys.end() && it->second > 0;
}

long live_rkeys()
{
    std::lock_guard<std::mutex> g(g_track_lock);
    long n = 0;
    for (auto &kv : g_rkeys) n += kv.second;
    return n;
}

uint64_t unpack_count()
{
    std::lock_guard<std::mutex> g(g_track_lock);
    return g_unpacks;
}

std::vector<CloseCall> close_calls()
{
    std::lock_guard<std::mutex> g(g_track_lock);
    return g_closes;
}

}  // namespace

extern "C" {

ucs_status_t ucp_mem_map(ucp_context_h context, const ucp_mem_map_params_t *params,
                         ucp_mem_h *memh_p)
{
    using fn_t = ucs_status_t (*)(ucp_context_h, const ucp_mem_map_params_t *, ucp_mem_h *);
    static fn_t fn = real<fn_t>("ucp_mem_map");
    ucs_status_t st = fn(context, params, memh_p);
    if (st == UCS_OK) {
        std::lock_guard<std::mutex> g(g_track_lock);
        ++g_memh[*memh_p];
        ++g_maps;
    }
    return st;
}

ucs_status_t ucp_mem_unmap(ucp_context_h context, ucp_mem_h memh)
{
    using fn_t = ucs_status_t (*)(ucp_context_h, ucp_mem_h);
    static fn_t fn = real<fn_t>("ucp_mem_unmap");
    ucs_status_t st = fn(context, memh);
    if (st == UCS_OK) {
        std::lock_guard<std::mutex> g(g_track_lock);
        auto it = g_memh.find(memh);
        if (it != g_memh.end() && --it->second == 0) g_memh.erase(it);
        --g_maps;
    }
    return st;
}

ucs_status_t ucp_ep_rkey_unpack(ucp_ep_h ep, const void *rkey_buffer, ucp_rkey_h *rkey_p)
{
    using fn_t = ucs_status_t (*)(ucp_ep_h, const void *, ucp_rkey_h *);
    static fn_t fn = real<fn_t>("ucp_ep_rkey_unpack");
    ucs_status_t st = fn(ep, rkey_buffer, rkey_p);
    if (st == UCS_OK) {
        std::lock_guard<std::mutex> g(g_track_lock);
        ++g_rkeys[*rkey_p];
        ++g_unpacks;
    }
    return st;
}

void ucp_rkey_destroy(ucp_rkey_h rkey)
{
    using fn_t = void (*)(ucp_rkey_h);
    static fn_t fn = real<fn_t>("ucp_rkey_destroy");
    {
        std::lock_guard<std::mutex> g(g_track_lock);
        auto it = g_rkeys.find(rkey);
        if (it != g_rkeys.end() && --it->second == 0) g_rkeys.erase(it);
    }
    fn(rkey);
}

ucs_status_ptr_t ucp_ep_close_nbx(ucp_ep_h ep, const ucp_request_param_t *param)
{
    using fn_t = ucs_status_ptr_t (*)(ucp_ep_h, const ucp_request_param_t *);
    static fn_t fn = real<fn_t>("ucp_ep_close_nbx");
    uint32_t flags = (param && (param->op_attr_mask & UCP_OP_ATTR_FIELD_FLAGS)) ? param->flags : 0;
    ucs_status_ptr_t r = fn(ep, param);
    std::lock_guard<std::mutex> g(g_track_lock);
    g_closes.push_back({ep, flags,
                        UCS_PTR_IS_ERR(r) ? UCS_PTR_STATUS(r) : (r ? UCS_INPROGRESS : UCS_OK)});
    return r;
}

}  // extern "C"

namespace {

/* ------------------------------------------------------------ helpers */
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0)
{
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

/* Progress every worker until pred() holds; false after timeout_sec. */
bool progress_until(std::initializer_list<rdrp_ucx_worker_t *> ws, const std::function<bool()> &pred,
                    double timeout_sec = 5.0)
{
    auto t0 = Clock::now();
    while (!pred()) {
        for (rdrp_ucx_worker_t *w : ws) rdrp_ucx_progress(rdrp_ucx_worker_handle(w));
        if (seconds_since(t0) > timeout_sec) return pred();
    }
    return true;
}

/* Wait for a UCP request (NULL = completed in place) while progressing ws. */
ucs_status_t wait_request(std::initializer_list<rdrp_ucx_worker_t *> ws, ucs_status_ptr_t r,
                          double timeout_sec = 5.0)
{
    if (r == nullptr) return UCS_OK;
    if (UCS_PTR_IS_ERR(r)) return UCS_PTR_STATUS(r);
    bool done = progress_until(
        ws, [r] { return ucp_request_check_status(r) != UCS_INPROGRESS; }, timeout_sec);
    if (!done) return UCS_ERR_TIMED_OUT; /* leave the request to the worker */
    ucs_status_t st = ucp_request_check_status(r);
    ucp_request_free(r);
    return st;
}

void fill(void *p, size_t len, uint32_t seed)
{
    auto *b = static_cast<unsigned char *>(p);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < len; ++i) {
        x = x * 1103515245u + 12345u;
        b[i] = static_cast<unsigned char>(x >> 16);
    }
}

struct Stats {
    uint64_t hits = 0, misses = 0, invalidated = 0, live = 0;
    static Stats now()
    {
        Stats s;
        rdrp_ucx_reg_stats(&s.hits, &s.misses, &s.invalidated, &s.live);
        return s;
    }
};

/* An anonymous mapping, so tests control exactly which addresses exist. */
struct Mapping {
    void *p = nullptr;
    size_t len = 0;
    explicit Mapping(size_t n, void *hint = nullptr) : len(n)
    {
        p = mmap(hint, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) p = nullptr;
    }
    ~Mapping() { reset(); }
    void reset()
    {
        if (p) munmap(p, len);
        p = nullptr;
    }
    char *c() const { return static_cast<char *>(p); }
    Mapping(const Mapping &) = delete;
    Mapping &operator=(const Mapping &) = delete;
};

/* Drives one worker from its own thread (the worker is single-threaded:
 * nothing else may touch it until stop()). */
class ProgressThread {
public:
    explicit ProgressThread(rdrp_ucx_worker_t *w) : w_(w), t_([this] {
        while (!stop_.load(std::memory_order_relaxed))
            rdrp_ucx_progress(rdrp_ucx_worker_handle(w_));
    }) {}
    ~ProgressThread() { stop(); }
    void stop()
    {
        stop_ = true;
        if (t_.joinable()) t_.join();
    }

private:
    rdrp_ucx_worker_t *w_;
    std::atomic<bool> stop_{false};
    std::thread t_;
};

/* ------------------------------------------------------------ fixtures */
/* A context reference, caching on, a clean registration cache. */
class UcxContext : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_EQ(rdrp_ucx_context(), nullptr) << "a previous test leaked a context reference";
        rdrp_ucx_context_params_t p{};
        p.want_amo = want_amo();
        ASSERT_EQ(rdrp_ucx_context_acquire(&p), 0) << rdrp_ucx_last_error();
        rdrp_ucx_reg_flush();
        rdrp_ucx_reg_set_caching(1);
        maps_base_ = live_maps();
        rkeys_base_ = live_rkeys();
    }
    void TearDown() override
    {
        rdrp_ucx_reg_flush();
        rdrp_ucx_reg_set_caching(0);
        /* everything the cache mapped for this test is unmapped again */
        EXPECT_EQ(live_maps(), maps_base_);
        EXPECT_EQ(live_rkeys(), rkeys_base_);
        rdrp_ucx_context_release();
        EXPECT_EQ(rdrp_ucx_context(), nullptr);
    }
    virtual int want_amo() const { return 0; }
    long maps_base_ = 0, rkeys_base_ = 0;
};

/* Two connected workers A and B (B is peer 1 of A, A is peer 0 of B). */
class UcxPair : public UcxContext {
protected:
    static constexpr uint64_t kPeerA = 0, kPeerB = 1;

    void SetUp() override
    {
        UcxContext::SetUp();
        if (HasFatalFailure()) return;
        a_ = rdrp_ucx_worker_create(0, nullptr, nullptr);
        ASSERT_NE(a_, nullptr) << rdrp_ucx_last_error();
        b_ = rdrp_ucx_worker_create(0, nullptr, nullptr);
        ASSERT_NE(b_, nullptr) << rdrp_ucx_last_error();
        void *addr_a, *addr_b;
        size_t len_a, len_b;
        ASSERT_EQ(rdrp_ucx_worker_address(a_, 0, &addr_a, &len_a), 0) << rdrp_ucx_last_error();
        ASSERT_EQ(rdrp_ucx_worker_address(b_, 0, &addr_b, &len_b), 0) << rdrp_ucx_last_error();
        ASSERT_GT(len_a, 0u);
        ASSERT_GT(len_b, 0u);
        /* a copy, as if it came through the modex */
        std::vector<char> copy_a(static_cast<char *>(addr_a), static_cast<char *>(addr_a) + len_a);
        std::vector<char> copy_b(static_cast<char *>(addr_b), static_cast<char *>(addr_b) + len_b);
        rdrp_ucx_worker_address_release(a_, addr_a);
        rdrp_ucx_worker_address_release(b_, addr_b);
        addr_b_ = copy_b;
        ep_ab_ = rdrp_ucx_connect(a_, copy_b.data(), copy_b.size(), 0, kPeerB);
        ASSERT_NE(ep_ab_, nullptr) << rdrp_ucx_last_error();
        ep_ba_ = rdrp_ucx_connect(b_, copy_a.data(), copy_a.size(), 0, kPeerA);
        ASSERT_NE(ep_ba_, nullptr) << rdrp_ucx_last_error();
    }
    void TearDown() override
    {
        /* Finalize as the PML does it (close while the peers progress): an
         * endpoint flush needs the peer's answer on this UCX (emulated RMA),
         * so B keeps progressing until A's worker is gone.  B never unpacks
         * rkeys or issues RMA in these tests, so its own flush is local. */
        if (a_) {
            double ta = 0;
            if (b_) {
                ProgressThread pb(b_);
                ta = destroy_timed(a_, 2.0);
            } else {
                ta = destroy_timed(a_, 2.0);
            }
            /* below the 2 s timeout, with room for ThreadSanitizer on a
             * loaded machine (1.03 s seen there, where 1.0 was the bound) */
            EXPECT_LT(ta, 1.8) << "A's destroy ran into its timeout";
        }
        if (b_) {
            double tb = destroy_timed(b_, 2.0);
            EXPECT_LT(tb, 1.8) << "B's destroy ran into its timeout";
        }
        a_ = b_ = nullptr;
        UcxContext::TearDown();
    }

    static double destroy_timed(rdrp_ucx_worker_t *w, double timeout)
    {
        auto t0 = Clock::now();
        rdrp_ucx_worker_destroy(w, timeout);
        return seconds_since(t0);
    }

    /* GET len bytes from B's raddr (registered: rkey k) into dst through A. */
    ucs_status_t get(void *dst, size_t len, const void *raddr, rdrp_ucx_rkey_t *k)
    {
        ucp_request_param_t p;
        std::memset(&p, 0, sizeof(p));
        ucs_status_ptr_t r = ucp_get_nbx(ep_ab_, dst, len, reinterpret_cast<uint64_t>(raddr),
                                         rdrp_ucx_rkey_handle(k), &p);
        return wait_request({a_, b_}, r);
    }

    rdrp_ucx_worker_t *a_ = nullptr, *b_ = nullptr;
    ucp_ep_h ep_ab_ = nullptr, ep_ba_ = nullptr;
    std::vector<char> addr_b_; /* B's worker address, as published */
};

/* ================================================================ context */
TEST(UcxGlueContext, AcquireReleaseRefcount)
{
    ASSERT_EQ(rdrp_ucx_context(), nullptr);
    EXPECT_EQ(rdrp_ucx_worker_create(0, nullptr, nullptr), nullptr) << "worker without a context";
    EXPECT_STRNE(rdrp_ucx_last_error(), "");

    rdrp_ucx_context_params_t p{};
    p.estimated_num_eps = 4;
    ASSERT_EQ(rdrp_ucx_context_acquire(&p), 0) << rdrp_ucx_last_error();
    ucp_context_h h = rdrp_ucx_context();
    ASSERT_NE(h, nullptr);
    ASSERT_EQ(rdrp_ucx_context_acquire(nullptr), 0) << rdrp_ucx_last_error();
    EXPECT_EQ(rdrp_ucx_context(), h) << "second acquire must share the context";

    rdrp_ucx_context_release();
    ASSERT_EQ(rdrp_ucx_context(), h) << "one reference left: the context stays";
    /* still usable: query it and run a worker on it */
    ucp_context_attr_t attr;
    attr.field_mask = UCP_ATTR_FIELD_THREAD_MODE;
    EXPECT_EQ(ucp_context_query(h, &attr), UCS_OK);
    rdrp_ucx_worker_t *w = rdrp_ucx_worker_create(0, nullptr, nullptr);
    ASSERT_NE(w, nullptr) << rdrp_ucx_last_error();
    rdrp_ucx_worker_destroy(w, 1.0);

    /* an idle cached region at the last release is flushed before ucp_cleanup */
    rdrp_ucx_reg_set_caching(1);
    std::vector<char> buf(4096);
    const long maps0 = live_maps();
    rdrp_ucx_region_t *r = rdrp_ucx_reg_acquire(buf.data(), buf.size());
    ASSERT_NE(r, nullptr);
    rdrp_ucx_reg_release(r);
    EXPECT_EQ(live_maps(), maps0 + 1);

    rdrp_ucx_context_release(); /* ucp_cleanup aborts if anything is still mapped */
    EXPECT_EQ(rdrp_ucx_context(), nullptr);
    EXPECT_EQ(live_maps(), maps0) << "the last release must flush the registration cache";
    rdrp_ucx_reg_set_caching(0);

    rdrp_ucx_context_release(); /* an extra release is harmless */
    EXPECT_EQ(rdrp_ucx_context(), nullptr);

    /* and the context can come back */
    ASSERT_EQ(rdrp_ucx_context_acquire(&p), 0) << rdrp_ucx_last_error();
    EXPECT_NE(rdrp_ucx_context(), nullptr);
    rdrp_ucx_context_release();
    EXPECT_EQ(rdrp_ucx_context(), nullptr);
}

/* The context must not write the environment: other threads (PMIx's, UCX's)
 * call getenv() meanwhile, and setenv() may free the array they read. */
static int count_ucx_env()
{
    int n = 0;
    for (char **e = environ; e && *e; e++) n += std::strncmp(*e, "UCX_", 4) == 0;
    return n;
}

TEST(UcxGlueContext, AcquireLeavesEnvironmentAlone)
{
    const int before = count_ucx_env();
    char **const env_array = environ;
    ASSERT_EQ(rdrp_ucx_context_acquire(nullptr), 0) << rdrp_ucx_last_error();
    rdrp_ucx_worker_t *w = rdrp_ucx_worker_create(0, nullptr, nullptr);
    ASSERT_NE(w, nullptr) << rdrp_ucx_last_error();
    EXPECT_EQ(count_ucx_env(), before) << "context or worker creation added UCX_* variables";
    EXPECT_EQ(environ, env_array) << "the environment array was reallocated";
    rdrp_ucx_worker_destroy(w, 1.0);
    rdrp_ucx_context_release();
}

TEST(UcxGlueContext, MmRxGrowOnlyWhereAnMmTransportMayOpen)
{
    struct Case {
        const char *tls;
        int want;
    } cases[] = {
        {nullptr, 1},        {"", 1},           {"all", 1},        {"posix", 1},
        {"sysv,self", 1},    {"sm,self", 1},    {"shm", 1},        {"mm", 1},
        {"tcp,self", 0},     {"self", 0},       {"tcp,cma", 0},    {"^posix", 1},
        {"^sysv", 1},        {"^posix,sysv", 0}, {"^sm", 0},       {"^shm,tcp", 0},
        {"^mm", 0},          {"^tcp", 1},       {"tcp,posix:aux", 1},
    };
    for (const Case &c : cases) {
        EXPECT_EQ(rdrp_ucx_want_mm_rx_grow(c.tls, 0), c.want) << "UCX_TLS=" << (c.tls ? c.tls : "(unset)");
        EXPECT_EQ(rdrp_ucx_want_mm_rx_grow(c.tls, 1), 0) << "the user's own setting wins";
    }
}

TEST(UcxGlueContext, TcpRxSegOnlyWhereTcpMayOpen)
{
    struct Case {
        const char *tls;
        int want;
    } cases[] = {
        {nullptr, 1},     {"", 1},       {"all", 1},      {"tcp", 1},          {"tcp,self", 1},
        {"sm,tcp:aux", 1}, {"self", 0},   {"sm,self", 0},  {"posix,sysv,cma", 0}, {"^tcp", 0},
        {"^sm", 1},       {"^tcp,sm", 0}, {"^posix", 1},   {"tcpx", 0},
    };
    for (const Case &c : cases) {
        EXPECT_EQ(rdrp_ucx_want_tcp_rx_seg(c.tls, nullptr, 0), c.want) << "UCX_TLS=" << (c.tls ? c.tls : "(unset)");
        EXPECT_EQ(rdrp_ucx_want_tcp_rx_seg(c.tls, nullptr, 1), 0) << "the user's own setting wins";
    }
    /* UCX_NET_DEVICES: tcp opens on interfaces, not on RDMA "dev:port" names;
     * a setting no transport takes makes UCX warn at every worker */
    Case devices[] = {
        {"eth0", 1},      {"all", 1},        {"mlx5_0:1", 0},    {"", 0},
        {"mlx5_0:1,eth0", 1}, {"mlx5_0:1,mlx5_1:1", 0}, {"^mlx5_0:1", 1}, {"ib0", 1},
    };
    for (const Case &c : devices)
        EXPECT_EQ(rdrp_ucx_want_tcp_rx_seg(nullptr, c.tls, 0), c.want) << "UCX_NET_DEVICES=" << c.tls;
    EXPECT_EQ(rdrp_ucx_want_tcp_rx_seg("^tcp", "eth0", 0), 0);
}

/* want_amo (btl/credit for osc/rdma): UCX's CPU atomic mode unless the user
 * chose a mode; only then are the atomics called CPU-coherent. */
TEST(UcxGlueContext, AtomicModeCpuUnlessUserChose)
{
    EXPECT_EQ(rdrp_ucx_set_atomic_mode_cpu(nullptr), 1);
    EXPECT_EQ(rdrp_ucx_set_atomic_mode_cpu("cpu"), 0) << "the user's own setting is left to UCX";
    EXPECT_EQ(rdrp_ucx_set_atomic_mode_cpu("device"), 0);
    EXPECT_EQ(rdrp_ucx_atomic_mode_is_cpu(nullptr), 1);
    EXPECT_EQ(rdrp_ucx_atomic_mode_is_cpu("cpu"), 1);
    EXPECT_EQ(rdrp_ucx_atomic_mode_is_cpu("CPU"), 1);
    EXPECT_EQ(rdrp_ucx_atomic_mode_is_cpu("device"), 0);
    EXPECT_EQ(rdrp_ucx_atomic_mode_is_cpu("guess"), 0);

    ASSERT_EQ(rdrp_ucx_context(), nullptr);
    EXPECT_EQ(rdrp_ucx_context_amo_cpu(), 0) << "no context";
    ASSERT_EQ(rdrp_ucx_context_acquire(nullptr), 0) << rdrp_ucx_last_error();
    EXPECT_EQ(rdrp_ucx_context_amo_cpu(), 0) << "a context made without want_amo";
    rdrp_ucx_context_params_t p{};
    p.want_amo = 1;
    ASSERT_EQ(rdrp_ucx_context_acquire(&p), 0) << rdrp_ucx_last_error();
    EXPECT_EQ(rdrp_ucx_context_amo_cpu(), 0) << "want_amo cannot change a context already made";
    rdrp_ucx_context_release();
    rdrp_ucx_context_release();
    ASSERT_EQ(rdrp_ucx_context(), nullptr);
}

/* ================================================================ workers */
TEST_F(UcxContext, WorkerCreateAddressThreadMode)
{
    rdrp_ucx_worker_t *w = rdrp_ucx_worker_create(0, nullptr, nullptr);
    ASSERT_NE(w, nullptr) << rdrp_ucx_last_error();
    EXPECT_NE(rdrp_ucx_worker_handle(w), nullptr);
    EXPECT_EQ(rdrp_ucx_worker_is_thread_multi(w), 0);

    void *addr = nullptr;
    size_t len = 0;
    ASSERT_EQ(rdrp_ucx_worker_address(w, 0, &addr, &len), 0) << rdrp_ucx_last_error();
    EXPECT_NE(addr, nullptr);
    EXPECT_GT(len, 0u);
    rdrp_ucx_worker_address_release(w, addr);

    /* the network-only address (peers on other nodes) is no larger */
    void *naddr = nullptr;
    size_t nlen = 0;
    ASSERT_EQ(rdrp_ucx_worker_address(w, 1, &naddr, &nlen), 0) << rdrp_ucx_last_error();
    EXPECT_GT(nlen, 0u);
    EXPECT_LE(nlen, len);
    rdrp_ucx_worker_address_release(w, naddr);
    rdrp_ucx_worker_destroy(w, 1.0);

    rdrp_ucx_worker_t *mt = rdrp_ucx_worker_create(1, nullptr, nullptr);
    ASSERT_NE(mt, nullptr) << rdrp_ucx_last_error();
    EXPECT_EQ(rdrp_ucx_worker_is_thread_multi(mt), 1);
    ucp_worker_attr_t attr;
    attr.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE;
    ASSERT_EQ(ucp_worker_query(rdrp_ucx_worker_handle(mt), &attr), UCS_OK);
    EXPECT_EQ(attr.thread_mode, UCS_THREAD_MODE_MULTI);
    rdrp_ucx_worker_destroy(mt, 1.0);

    rdrp_ucx_worker_destroy(nullptr, 1.0); /* no-op */
}

/* ================================================================ active messages */
struct AmSink {
    rdrp_ucx_worker_t *worker = nullptr;
    int calls = 0;
    std::vector<char> header, data;
    uint64_t recv_attr = 0;
    size_t length = 0;
    void *rndv_desc = nullptr; /* kept for ucp_am_recv_data_nbx outside the callback */
};

ucs_status_t am_sink_cb(void *arg, const void *header, size_t header_length, void *data,
                        size_t length, const ucp_am_recv_param_t *param)
{
    auto *s = static_cast<AmSink *>(arg);
    ++s->calls;
    s->header.assign(static_cast<const char *>(header),
                     static_cast<const char *>(header) + header_length);
    s->recv_attr = param->recv_attr;
    s->length = length;
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        /* receiver-paced pull: fetch the data later, outside the callback */
        s->rndv_desc = data;
        return UCS_INPROGRESS;
    }
    s->data.assign(static_cast<const char *>(data), static_cast<const char *>(data) + length);
    return UCS_OK; /* with FLAG_DATA, OK lets UCX release the descriptor */
}

struct RecvDone {
    bool done = false;
    ucs_status_t status = UCS_INPROGRESS;
    size_t length = 0;
};

void recv_done_cb(void *request, ucs_status_t status, size_t length, void *user_data)
{
    auto *d = static_cast<RecvDone *>(user_data);
    d->done = true;
    d->status = status;
    d->length = length;
    ucp_request_free(request);
}

ucs_status_t am_count_cb(void *arg, const void *, size_t, void *, size_t,
                         const ucp_am_recv_param_t *)
{
    static_cast<std::atomic<int> *>(arg)->fetch_add(1);
    return UCS_OK;
}

struct SendCounter {
    std::atomic<int> ok{0}, failed{0};
};

void count_send_cb(void *req, ucs_status_t st, void *user)
{
    auto *c = static_cast<SendCounter *>(user);
    (st == UCS_OK ? c->ok : c->failed).fetch_add(1);
    ucp_request_free(req);
}

TEST_F(UcxPair, AmRoundTripEager)
{
    constexpr unsigned kPing = 7, kPong = 8;
    AmSink on_b, on_a;
    ASSERT_EQ(rdrp_ucx_set_am_handler(b_, kPing, am_sink_cb, &on_b), 0) << rdrp_ucx_last_error();
    ASSERT_EQ(rdrp_ucx_set_am_handler(a_, kPong, am_sink_cb, &on_a), 0) << rdrp_ucx_last_error();

    struct Hdr {
        uint64_t tag;
        uint32_t seq;
        uint32_t pad;
    } hdr{0x1122334455667788ull, 42, 0};
    std::vector<char> payload(1000);
    fill(payload.data(), payload.size(), 1);

    ucp_request_param_t p;
    std::memset(&p, 0, sizeof(p));
    ucs_status_ptr_t r =
        ucp_am_send_nbx(ep_ab_, kPing, &hdr, sizeof(hdr), payload.data(), payload.size(), &p);
    ASSERT_EQ(wait_request({a_, b_}, r), UCS_OK);
    ASSERT_TRUE(progress_until({a_, b_}, [&] { return on_b.calls > 0; }));
    EXPECT_EQ(on_b.calls, 1);
    EXPECT_FALSE(on_b.recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV);
    ASSERT_EQ(on_b.header.size(), sizeof(hdr));
    EXPECT_EQ(std::memcmp(on_b.header.data(), &hdr, sizeof(hdr)), 0);
    EXPECT_EQ(on_b.data, payload);

    /* and back: B answers on its own endpoint, header only */
    uint32_t reply = 0xCAFEF00D;
    r = ucp_am_send_nbx(ep_ba_, kPong, &reply, sizeof(reply), nullptr, 0, &p);
    ASSERT_EQ(wait_request({a_, b_}, r), UCS_OK);
    ASSERT_TRUE(progress_until({a_, b_}, [&] { return on_a.calls > 0; }));
    EXPECT_EQ(on_a.calls, 1);
    ASSERT_EQ(on_a.header.size(), sizeof(reply));
    EXPECT_EQ(std::memcmp(on_a.header.data(), &reply, sizeof(reply)), 0);
    EXPECT_EQ(on_a.length, 0u);
    EXPECT_EQ(on_b.calls, 1) << "no duplicate delivery";
}

TEST_F(UcxPair, AmRendezvousAboveEagerThreshold)
{
    constexpr unsigned kBig = 9;
    constexpr size_t kLen = 256 * 1024; /* far above the ~8 KiB eager limit */
    AmSink on_b;
    ASSERT_EQ(rdrp_ucx_set_am_handler(b_, kBig, am_sink_cb, &on_b), 0) << rdrp_ucx_last_error();

    uint64_t hdr[2] = {0xdeadbeefull, kLen};
    std::vector<char> payload(kLen);
    fill(payload.data(), payload.size(), 2);

    ucp_request_param_t sp;
    std::memset(&sp, 0, sizeof(sp));
    ucs_status_ptr_t sreq =
        ucp_am_send_nbx(ep_ab_, kBig, hdr, sizeof(hdr), payload.data(), payload.size(), &sp);
    ASSERT_FALSE(UCS_PTR_IS_ERR(sreq)) << ucs_status_string(UCS_PTR_STATUS(sreq));
    ASSERT_TRUE(progress_until({a_, b_}, [&] { return on_b.calls > 0; }));
    ASSERT_TRUE(on_b.recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) << "expected a rendezvous AM";
    EXPECT_FALSE(on_b.recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA);
    ASSERT_NE(on_b.rndv_desc, nullptr);
    EXPECT_EQ(on_b.length, kLen);
    ASSERT_EQ(on_b.header.size(), sizeof(hdr));
    EXPECT_EQ(std::memcmp(on_b.header.data(), hdr, sizeof(hdr)), 0);
    /* the sender cannot complete before the receiver pulls */
    if (sreq) {
        for (int i = 0; i < 100; ++i) {
            rdrp_ucx_progress(rdrp_ucx_worker_handle(a_));
            rdrp_ucx_progress(rdrp_ucx_worker_handle(b_));
        }
        EXPECT_EQ(ucp_request_check_status(sreq), UCS_INPROGRESS);
    }

    std::vector<char> dst(kLen, 0);
    RecvDone rd;
    ucp_request_param_t rp;
    std::memset(&rp, 0, sizeof(rp));
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rp.cb.recv_am = recv_done_cb;
    rp.user_data = &rd;
    ucs_status_ptr_t rreq =
        ucp_am_recv_data_nbx(rdrp_ucx_worker_handle(b_), on_b.rndv_desc, dst.data(), kLen, &rp);
    ASSERT_FALSE(UCS_PTR_IS_ERR(rreq)) << ucs_status_string(UCS_PTR_STATUS(rreq));
    if (rreq == nullptr) {
        rd.done = true; /* completed in place, callback not called */
        rd.status = UCS_OK;
        rd.length = kLen;
    }
    ASSERT_TRUE(progress_until({a_, b_}, [&] { return rd.done; }));
    EXPECT_EQ(rd.status, UCS_OK);
    EXPECT_EQ(rd.length, kLen);
    EXPECT_EQ(wait_request({a_, b_}, sreq), UCS_OK);
    EXPECT_TRUE(dst == payload) << "rendezvous payload differs";
    EXPECT_EQ(on_b.calls, 1);
}

/* ================================================================ registration cache */
TEST_F(UcxContext, RegAcquireCoversRangeWithPackedRkey)
{
    Mapping m(64 * 1024);
    ASSERT_NE(m.p, nullptr);
    Stats s0 = Stats::now();
    const long maps0 = live_maps();
    char *lo = m.c() + 100;
    const size_t len = 1000;
    rdrp_ucx_region_t *r = rdrp_ucx_reg_acquire(lo, len);
    ASSERT_NE(r, nullptr);
    Stats s1 = Stats::now();
    EXPECT_EQ(s1.misses, s0.misses + 1);
    EXPECT_EQ(s1.hits, s0.hits);
    EXPECT_EQ(s1.live, s0.live + 1);
    EXPECT_EQ(live_maps(), maps0 + 1);

    auto ra = reinterpret_cast<uintptr_t>(r->addr);
    EXPECT_LE(ra, reinterpret_cast<uintptr_t>(lo));
    EXPECT_GE(ra + r->len, reinterpret_cast<uintptr_t>(lo) + len);
    ASSERT_NE(r->memh, nullptr);
    EXPECT_TRUE(memh_live(r->memh));
    EXPECT_NE(r->rkey_buf, nullptr);
    EXPECT_GT(r->rkey_len, 0u);
    EXPECT_NE(r->id, 0u);

    /* UCX's own view of the registration covers the range too */
    ucp_mem_attr_t ma;
    ma.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    ASSERT_EQ(ucp_mem_query(r->memh, &ma), UCS_OK);
    auto ua = reinterpret_cast<uintptr_t>(ma.address);
    EXPECT_LE(ua, reinterpret_cast<uintptr_t>(lo));
    EXPECT_GE(ua + ma.length, reinterpret_cast<uintptr_t>(lo) + len);
    rdrp_ucx_reg_release(r);
    EXPECT_EQ(live_maps(), maps0 + 1) << "an idle region stays cached";
}

TEST_F(UcxContext, RegSameAndSubRangeAreHits)
{
    Mapping m(64 * 1024);
    ASSERT_NE(m.p, nullptr);
    const long maps0 = live_maps();
    rdrp_ucx_region_t *r1 = rdrp_ucx_reg_acquire(m.p, m.len);
    ASSERT_NE(r1, nullptr);
    Stats s0 = Stats::now();

    rdrp_ucx_region_t *r2 = rdrp_ucx_reg_acquire(m.p, m.len);
    rdrp_ucx_region_t *r3 = rdrp_ucx_reg_acquire(m.c() + 4096, 8192);
    rdrp_ucx_region_t *r4 = rdrp_ucx_reg_acquire(m.c() + m.len - 1, 1); /* last byte */
    Stats s1 = Stats::now();
    EXPECT_EQ(r2, r1);
    EXPECT_EQ(r3, r1);
    EXPECT_EQ(r4, r1);
    EXPECT_EQ(s1.hits, s0.hits + 3);
    EXPECT_EQ(s1.misses, s0.misses);
    EXPECT_EQ(s1.live, s0.live);
    EXPECT_EQ(live_maps(), maps0 + 1) << "hits do not register";

    /* idle regions stay cached */
    for (auto *r : {r1, r2, r3, r4}) rdrp_ucx_reg_release(r);
    EXPECT_EQ(live_maps(), maps0 + 1);
    rdrp_ucx_region_t *r5 = rdrp_ucx_reg_acquire(m.c() + 10, 10);
    EXPECT_EQ(r5, r1);
    EXPECT_EQ(Stats::now().hits, s1.hits + 1);

    /* a range reaching past the region is a miss with a covering region */
    rdrp_ucx_region_t *r6 = rdrp_ucx_reg_acquire(m.c() + m.len - 10, 20);
    ASSERT_NE(r6, nullptr);
    EXPECT_NE(r6, r1);
    EXPECT_NE(r6->id, r1->id);
    EXPECT_EQ(Stats::now().misses, s1.misses + 1);
    EXPECT_LE(reinterpret_cast<uintptr_t>(r6->addr), reinterpret_cast<uintptr_t>(m.c() + m.len - 10));
    EXPECT_GE(reinterpret_cast<uintptr_t>(r6->addr) + r6->len,
              reinterpret_cast<uintptr_t>(m.c() + m.len + 10));
    rdrp_ucx_reg_release(r5);
    rdrp_ucx_reg_release(r6);
}

/* rdrp_ucx_reg_covers (btl/credit's put by active message accepts data
 * only for its own live registrations): the id and the whole range must
 * match, the arithmetic must not wrap, and a deregistered id covers
 * nothing. */
TEST_F(UcxContext, RegCoversOnlyLiveRegionsInRange)
{
    Mapping m(64 * 1024);
    ASSERT_NE(m.p, nullptr);
    rdrp_ucx_reg_set_caching(0); /* release deregisters at once */
    rdrp_ucx_region_t *r = rdrp_ucx_reg_acquire(m.p, m.len);
    ASSERT_NE(r, nullptr);
    const uintptr_t a = reinterpret_cast<uintptr_t>(r->addr);
    const size_t n = r->len;
    EXPECT_TRUE(rdrp_ucx_reg_covers(r->id, a, n));
    EXPECT_TRUE(rdrp_ucx_reg_covers(r->id, a + 100, n - 100));
    EXPECT_TRUE(rdrp_ucx_reg_covers(r->id, a + n, 0)) << "an empty range at the end";
    EXPECT_FALSE(rdrp_ucx_reg_covers(r->id, a + 100, n - 99)) << "one byte past the end";
    EXPECT_FALSE(rdrp_ucx_reg_covers(r->id, a - 1, 2)) << "one byte before the start";
    EXPECT_FALSE(rdrp_ucx_reg_covers(r->id, a + 8, SIZE_MAX)) << "a length that wraps";
    EXPECT_FALSE(rdrp_ucx_reg_covers(r->id, UINTPTR_MAX, 2)) << "an address that wraps";
    EXPECT_FALSE(rdrp_ucx_reg_covers(r->id + 1000, a, 1)) << "an id never handed out";
    const uint64_t id = r->id;
    rdrp_ucx_reg_release(r);
    EXPECT_FALSE(rdrp_ucx_reg_covers(id, a, 1)) << "a deregistered region";
    rdrp_ucx_reg_set_caching(1);
}

TEST_F(UcxContext, RegIdsUniqueAndNeverReused)
{
    std::set<uint64_t> ids;
    uint64_t max_id = 0;
    auto note = [&](rdrp_ucx_region_t *r) {
        ASSERT_NE(r, nullptr);
        EXPECT_TRUE(ids.insert(r->id).second) << "id " << r->id << " handed out twice";
        EXPECT_GT(r->id, max_id) << "ids must grow (never reused)";
        max_id = std::max(max_id, r->id);
    };
    Mapping m(16 * 4096);
    ASSERT_NE(m.p, nullptr);
    for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < 16; ++i) {
            rdrp_ucx_region_t *r = rdrp_ucx_reg_acquire(m.c() + i * 4096, 4096);
            note(r);
            rdrp_ucx_reg_release(r);
        }
        /* the same addresses again after dropping everything: fresh ids */
        if (round == 0) rdrp_ucx_reg_flush();
        if (round == 1) rdrp_ucx_reg_invalidate(m.p, m.len);
    }
    /* uncached registrations draw from the same sequence */
    rdrp_ucx_reg_set_caching(0);
    for (int i = 0; i < 4; ++i) {
        rdrp_ucx_region_t *r = rdrp_ucx_reg_acquire(m.p, 4096);
        note(r);
        rdrp_ucx_reg_release(r);
    }
    EXPECT_EQ(ids.size(), 3u * 16 + 4);
}

TEST_F(UcxContext, RegCachingDisabledAlwaysMissesAndReleaseDeregisters)
{
    rdrp_ucx_reg_set_caching(0);
    Mapping m(32 * 1024);
    ASSERT_NE(m.p, nullptr);
    Stats s0 = Stats::now();
    const long maps0 = live_maps();
    rdrp_ucx_region_t *r1 = rdrp_ucx_reg_acquire(m.p, m.len);
    rdrp_ucx_region_t *r2 = rdrp_ucx_reg_acquire(m.p, m.len);
    rdrp_ucx_region_t *r3 = rdrp_ucx_reg_acquire(m.c() + 10, 10);
    ASSERT_TRUE(r1 && r2 && r3);
    Stats s1 = Stats::now();
    EXPECT_EQ(s1.misses, s0.misses + 3);
    EXPECT_EQ(s1.hits, s0.hits);
    EXPECT_EQ(s1.live, 0u) << "nothing is cached";
    EXPECT_NE(r1, r2);
    EXPECT_NE(r1->id, r2->id);
    EXPECT_NE(r2->id, r3->id);
    EXPECT_EQ(live_maps(), maps0 + 3) << "every acquire registers";
    rdrp_ucx_reg_release(r1);
    EXPECT_EQ(live_maps(), maps0 + 2) << "uncached release must deregister";
    rdrp_ucx_reg_release(r2);
    rdrp_ucx_reg_release(r3);
    EXPECT_EQ(live_maps(), maps0);

    /* switching caching off drops idle cached regions */
    rdrp_ucx_reg_set_caching(1);
    rdrp_ucx_region_t *c = rdrp_ucx_reg_acquire(m.p, m.len);
    ASSERT_NE(c, nullptr);
    rdrp_ucx_reg_release(c);
    EXPECT_EQ(live_maps(), maps0 + 1);
    rdrp_ucx_reg_set_caching(0);
    EXPECT_EQ(live_maps(), maps0);
    EXPECT_EQ(Stats::now().live, 0u);
}

TEST_F(UcxContext, RegInvalidateIdleRegion)
{
    Mapping m(64 * 1024);
    ASSERT_NE(m.p, nullptr);
    const long maps0 = live_maps();
    rdrp_ucx_region_t *r = rdrp_ucx_reg_acquire(m.p, m.len);
    ASSERT_NE(r, nullptr);
    const uint64_t old_id = r->id;
    rdrp_ucx_reg_release(r);

    /* releases of neighbouring memory do not touch the region */
    rdrp_ucx_reg_invalidate(m.c() + m.len, 4096);
    rdrp_ucx_reg_invalidate(m.c() - 4096, 4096);
    Stats s0 = Stats::now();
    rdrp_ucx_region_t *same = rdrp_ucx_reg_acquire(m.p, m.len);
    EXPECT_EQ(same, r);
    EXPECT_EQ(Stats::now().hits, s0.hits + 1);
    EXPECT_EQ(Stats::now().invalidated, s0.invalidated);
    rdrp_ucx_reg_release(same);

    /* an overlapping release (one page in the middle) invalidates it */
    rdrp_ucx_reg_invalidate(m.c() + 8192, 4096);
    EXPECT_EQ(live_maps(), maps0 + 1) << "invalidate only queues (hook-safe)";
    s0 = Stats::now();
    rdrp_ucx_region_t *n = rdrp_ucx_reg_acquire(m.p, m.len);
    ASSERT_NE(n, nullptr);
    Stats s1 = Stats::now();
    EXPECT_EQ(s1.misses, s0.misses + 1);
    EXPECT_EQ(s1.hits, s0.hits);
    EXPECT_EQ(s1.invalidated, s0.invalidated + 1);
    EXPECT_EQ(s1.live, s0.live);
    EXPECT_GT(n->id, old_id) << "a new id, never a reused one";
    EXPECT_EQ(live_maps(), maps0 + 1) << "the idle stale region is deregistered";
    const uint64_t n_id = n->id;
    rdrp_ucx_reg_release(n);

    /* the last byte of a region is enough */
    rdrp_ucx_reg_invalidate(m.c() + m.len - 1, 1);
    rdrp_ucx_region_t *n2 = rdrp_ucx_reg_acquire(m.p, m.len);
    ASSERT_NE(n2, nullptr);
    EXPECT_GT(n2->id, n_id);
    rdrp_ucx_reg_release(n2);
}

TEST_F(UcxContext, RegInvalidateZeroLengthRegion)
{
    /* acquire(addr, 0) registers (UCX needs >= 1 byte) and is cached like any
     * other region: releasing the memory at addr must drop it too */
    Mapping m(4096);
    ASSERT_NE(m.p, nullptr);
    const long maps0 = live_maps();
    rdrp_ucx_region_t *r = rdrp_ucx_reg_acquire(m.p, 0);
    ASSERT_NE(r, nullptr);
    const uint64_t id = r->id;
    rdrp_ucx_reg_release(r);
    rdrp_ucx_reg_invalidate(m.p, m.len);
    rdrp_ucx_region_t *r2 = rdrp_ucx_reg_acquire(m.p, 0);
    ASSERT_NE(r2, nullptr);
    EXPECT_NE(r2->id, id) << "a zero-length region survived the release of its memory";
    EXPECT_EQ(live_maps(), maps0 + 1);
    rdrp_ucx_reg_release(r2);
}

TEST_F(UcxContext, RegInvalidateWhileInUse)
{
    Mapping m(64 * 1024);
    ASSERT_NE(m.p, nullptr);
    const long maps0 = live_maps();
    rdrp_ucx_region_t *held = rdrp_ucx_reg_acquire(m.p, m.len);
    rdrp_ucx_region_t *held2 = rdrp_ucx_reg_acquire(m.p, m.len); /* two references */
    ASSERT_NE(held, nullptr);
    ASSERT_EQ(held2, held);
    const uint64_t id = held->id;
    void *const addr = held->addr;
    const size_t len = held->len;
    ucp_mem_h memh = held->memh;
    std::vector<char> rkey(static_cast<char *>(held->rkey_buf),
                           static_cast<char *>(held->rkey_buf) + held->rkey_len);

    rdrp_ucx_reg_invalidate(m.p, m.len);
    Stats s0 = Stats::now();
    rdrp_ucx_region_t *fresh = rdrp_ucx_reg_acquire(m.p, m.len);
    ASSERT_NE(fresh, nullptr);
    Stats s1 = Stats::now();
    EXPECT_NE(fresh, held) << "an invalidated region must not be handed out again";
    EXPECT_NE(fresh->id, id);
    EXPECT_EQ(s1.misses, s0.misses + 1);
    EXPECT_EQ(s1.invalidated, s0.invalidated + 1);
    EXPECT_EQ(live_maps(), maps0 + 2) << "held + fresh";

    /* the holder's region is intact and still registered */
    EXPECT_EQ(held->id, id);
    EXPECT_EQ(held->addr, addr);
    EXPECT_EQ(held->len, len);
    EXPECT_EQ(held->memh, memh);
    EXPECT_TRUE(memh_live(memh));
    ucp_mem_attr_t ma;
    ma.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    EXPECT_EQ(ucp_mem_query(memh, &ma), UCS_OK);
    ASSERT_EQ(held->rkey_len, rkey.size());
    EXPECT_EQ(std::memcmp(held->rkey_buf, rkey.data(), rkey.size()), 0);

    /* later acquires see the fresh region */
    rdrp_ucx_region_t *again = rdrp_ucx_reg_acquire(m.c() + 64, 64);
    EXPECT_EQ(again, fresh);
    rdrp_ucx_reg_release(again);

    rdrp_ucx_reg_release(held);
    EXPECT_EQ(live_maps(), maps0 + 2) << "one reference is left";
    rdrp_ucx_reg_release(held2);
    EXPECT_EQ(live_maps(), maps0 + 1) << "deregistered at its last release";
    rdrp_ucx_reg_release(fresh);
    EXPECT_EQ(live_maps(), maps0 + 1) << "the fresh region is cached";

    /* invalidated while in use, released before the cache drained the
     * invalidation: dropped at the next acquire all the same */
    rdrp_ucx_region_t *h = rdrp_ucx_reg_acquire(m.p, m.len);
    ASSERT_EQ(h, fresh);
    const uint64_t fid = h->id;
    rdrp_ucx_reg_invalidate(m.p, 1);
    rdrp_ucx_reg_release(h);
    rdrp_ucx_region_t *h2 = rdrp_ucx_reg_acquire(m.p, m.len);
    ASSERT_NE(h2, nullptr);
    EXPECT_GT(h2->id, fid);
    EXPECT_EQ(live_maps(), maps0 + 1);
    rdrp_ucx_reg_release(h2);
}

TEST_F(UcxContext, RegRingOverflowDropsEverythingIdle)
{
    constexpr int kRing = 256; /* ring size in rdrp_ucx_reg.cc */
    Mapping m(8 * 4096);
    Mapping unrelated(4096); /* invalidations land here, away from the regions */
    ASSERT_NE(m.p, nullptr);
    ASSERT_NE(unrelated.p, nullptr);
    const long maps0 = live_maps();
    auto acquire_all = [&](std::vector<rdrp_ucx_region_t *> &out) {
        out.clear();
        for (int i = 0; i < 4; ++i) {
            out.push_back(rdrp_ucx_reg_acquire(m.c() + i * 4096, 4096));
            EXPECT_NE(out.back(), nullptr);
        }
    };
    std::vector<rdrp_ucx_region_t *> regs;
    acquire_all(regs);
    for (auto *r : regs) rdrp_ucx_reg_release(r);
    std::set<uint64_t> old_ids;
    for (auto *r : regs) old_ids.insert(r->id);

    /* exactly a full ring of unrelated invalidations: no overflow, all hits */
    for (int i = 0; i < kRing; ++i) rdrp_ucx_reg_invalidate(unrelated.c() + (i % 4096), 1);
    Stats s0 = Stats::now();
    std::vector<rdrp_ucx_region_t *> again;
    acquire_all(again);
    Stats s1 = Stats::now();
    EXPECT_EQ(s1.hits, s0.hits + 4);
    EXPECT_EQ(s1.invalidated, s0.invalidated);
    EXPECT_EQ(again, regs);

    /* keep region 0 in use, the others idle; then overflow the ring */
    for (size_t i = 1; i < again.size(); ++i) rdrp_ucx_reg_release(again[i]);
    rdrp_ucx_region_t *busy = again[0];
    ucp_mem_h busy_memh = busy->memh;
    EXPECT_EQ(live_maps(), maps0 + 4);
    for (int i = 0; i < kRing + 1; ++i) rdrp_ucx_reg_invalidate(unrelated.c() + (i % 4096), 1);

    Stats s2 = Stats::now();
    rdrp_ucx_region_t *n = rdrp_ucx_reg_acquire(m.c() + 4096, 4096); /* was region 1 */
    ASSERT_NE(n, nullptr);
    Stats s3 = Stats::now();
    EXPECT_EQ(s3.misses, s2.misses + 1) << "an overflow must drop the idle regions";
    EXPECT_EQ(s3.invalidated, s2.invalidated + 4) << "every cached region is dropped";
    EXPECT_EQ(s3.live, 1u) << "only the new region is cached";
    EXPECT_EQ(old_ids.count(n->id), 0u) << "a dropped region came back";
    EXPECT_EQ(live_maps(), maps0 + 2) << "the busy region and the new one";
    EXPECT_TRUE(memh_live(busy_memh)) << "the busy region stays registered for its holder";

    /* the busy one is not handed out again, and goes away at its release */
    rdrp_ucx_region_t *b2 = rdrp_ucx_reg_acquire(m.p, 4096);
    ASSERT_NE(b2, nullptr);
    EXPECT_NE(b2, busy);
    EXPECT_EQ(old_ids.count(b2->id), 0u);
    EXPECT_EQ(live_maps(), maps0 + 3);
    rdrp_ucx_reg_release(busy);
    EXPECT_EQ(live_maps(), maps0 + 2);
    rdrp_ucx_reg_release(b2);
    rdrp_ucx_reg_release(n);
}

TEST_F(UcxContext, RegFlush)
{
    Mapping m(8 * 4096);
    ASSERT_NE(m.p, nullptr);
    const long maps0 = live_maps();
    for (int i = 1; i < 4; ++i) {
        rdrp_ucx_region_t *r = rdrp_ucx_reg_acquire(m.c() + i * 4096, 4096);
        ASSERT_NE(r, nullptr);
        rdrp_ucx_reg_release(r);
    }
    rdrp_ucx_region_t *busy = rdrp_ucx_reg_acquire(m.p, 4096);
    ASSERT_NE(busy, nullptr);
    EXPECT_EQ(Stats::now().live, 4u);
    EXPECT_EQ(live_maps(), maps0 + 4);

    rdrp_ucx_reg_flush();
    EXPECT_EQ(Stats::now().live, 0u);
    EXPECT_EQ(live_maps(), maps0 + 1) << "flush must not pull memory from under a holder";
    EXPECT_TRUE(memh_live(busy->memh));

    Stats s0 = Stats::now();
    rdrp_ucx_region_t *n = rdrp_ucx_reg_acquire(m.p, 4096);
    ASSERT_NE(n, nullptr);
    EXPECT_NE(n, busy);
    EXPECT_EQ(Stats::now().misses, s0.misses + 1);
    rdrp_ucx_reg_release(busy);
    EXPECT_EQ(live_maps(), maps0 + 1);
    rdrp_ucx_reg_release(n);

    /* a flush also applies queued invalidations */
    rdrp_ucx_region_t *q = rdrp_ucx_reg_acquire(m.p, 4096);
    ASSERT_EQ(q, n);
    rdrp_ucx_reg_invalidate(m.p, 4096);
    rdrp_ucx_reg_flush();
    EXPECT_EQ(live_maps(), maps0 + 1) << "still held";
    rdrp_ucx_reg_release(q);
    EXPECT_EQ(live_maps(), maps0);
}

/* ================================================================ rkey cache + RMA */
TEST_F(UcxPair, RkeyCacheAndGet)
{
    constexpr size_t kLen = 64 * 1024;
    std::vector<char> src(kLen), dst(kLen, 0);
    fill(src.data(), kLen, 3);

    /* B registers, "sends" (addr, id, rkey) to A */
    rdrp_ucx_region_t *reg = rdrp_ucx_reg_acquire(src.data(), kLen);
    ASSERT_NE(reg, nullptr);

    uint64_t unpacks0 = unpack_count();
    rdrp_ucx_rkey_t *k = rdrp_ucx_rkey_get(a_, ep_ab_, kPeerB, reg->id, reg->rkey_buf, reg->rkey_len);
    ASSERT_NE(k, nullptr) << rdrp_ucx_last_error();
    EXPECT_EQ(unpack_count(), unpacks0 + 1);
    ucp_rkey_h h = rdrp_ucx_rkey_handle(k);
    ASSERT_NE(h, nullptr);
    EXPECT_TRUE(rkey_live(h));

    ASSERT_EQ(get(dst.data(), kLen, src.data(), k), UCS_OK);
    EXPECT_TRUE(dst == src) << "GET returned wrong bytes";
    /* a sub-range at an offset */
    std::vector<char> part(1000, 0);
    ASSERT_EQ(get(part.data(), part.size(), src.data() + 12345, k), UCS_OK);
    EXPECT_EQ(std::memcmp(part.data(), src.data() + 12345, part.size()), 0);

    /* the same (peer, region id) is served from the cache */
    rdrp_ucx_rkey_t *k2 =
        rdrp_ucx_rkey_get(a_, ep_ab_, kPeerB, reg->id, reg->rkey_buf, reg->rkey_len);
    EXPECT_EQ(k2, k);
    EXPECT_EQ(rdrp_ucx_rkey_handle(k2), h);
    EXPECT_EQ(unpack_count(), unpacks0 + 1) << "a cached rkey must not be unpacked again";

    /* another region id of the same peer is a separate entry */
    std::vector<char> src2(4096);
    fill(src2.data(), src2.size(), 4);
    rdrp_ucx_region_t *reg2 = rdrp_ucx_reg_acquire(src2.data(), src2.size());
    ASSERT_NE(reg2, nullptr);
    ASSERT_NE(reg2->id, reg->id);
    rdrp_ucx_rkey_t *k3 =
        rdrp_ucx_rkey_get(a_, ep_ab_, kPeerB, reg2->id, reg2->rkey_buf, reg2->rkey_len);
    ASSERT_NE(k3, nullptr);
    EXPECT_NE(k3, k);
    EXPECT_EQ(unpack_count(), unpacks0 + 2);
    std::vector<char> dst2(src2.size(), 0);
    ASSERT_EQ(get(dst2.data(), dst2.size(), src2.data(), k3), UCS_OK);
    EXPECT_TRUE(dst2 == src2);

    /* drop_peer: idle entries go, entries in use stay */
    rdrp_ucx_rkey_put(a_, k);
    rdrp_ucx_rkey_put(a_, k2); /* k idle now; k3 still held */
    ucp_rkey_h h3 = rdrp_ucx_rkey_handle(k3);
    rdrp_ucx_rkey_drop_peer(a_, kPeerA); /* another peer: nothing happens */
    EXPECT_TRUE(rkey_live(h));
    rdrp_ucx_rkey_drop_peer(a_, kPeerB);
    EXPECT_FALSE(rkey_live(h)) << "idle rkey of the peer must be destroyed";
    EXPECT_TRUE(rkey_live(h3)) << "an rkey in use must survive drop_peer";
    rdrp_ucx_rkey_t *k3b =
        rdrp_ucx_rkey_get(a_, ep_ab_, kPeerB, reg2->id, reg2->rkey_buf, reg2->rkey_len);
    EXPECT_EQ(k3b, k3);
    EXPECT_EQ(unpack_count(), unpacks0 + 2);
    rdrp_ucx_rkey_put(a_, k3b);

    /* after the drop the first region is unpacked afresh and still works */
    rdrp_ucx_rkey_t *k4 =
        rdrp_ucx_rkey_get(a_, ep_ab_, kPeerB, reg->id, reg->rkey_buf, reg->rkey_len);
    ASSERT_NE(k4, nullptr);
    EXPECT_EQ(unpack_count(), unpacks0 + 3);
    std::fill(dst.begin(), dst.end(), 0);
    ASSERT_EQ(get(dst.data(), kLen, src.data(), k4), UCS_OK);
    EXPECT_TRUE(dst == src);
    rdrp_ucx_rkey_put(a_, k4);
    rdrp_ucx_rkey_put(a_, k3);

    /* worker destroy frees every cached rkey (checked before TearDown's) */
    ucp_rkey_h h4 = rdrp_ucx_rkey_handle(k4);
    {
        ProgressThread pb(b_);
        EXPECT_LT(destroy_timed(a_, 2.0), 1.0);
        a_ = nullptr;
    }
    EXPECT_FALSE(rkey_live(h4));
    EXPECT_FALSE(rkey_live(h3));

    rdrp_ucx_reg_release(reg);
    rdrp_ucx_reg_release(reg2);
}

TEST_F(UcxPair, RkeyCacheEvictsLeastRecentlyUsedIdleEntry)
{
    constexpr uint64_t kMax = 1024; /* rdrp_ucx_worker::rkey_cache_max */
    std::vector<char> src(4096);
    rdrp_ucx_region_t *reg = rdrp_ucx_reg_acquire(src.data(), src.size());
    ASSERT_NE(reg, nullptr);
    /* the cache key is opaque: many ids may share one packed rkey.  UCX
     * recycles rkey handles, so "cached" is observed as "no unpack". */
    auto get = [&](uint64_t id) {
        rdrp_ucx_rkey_t *k = rdrp_ucx_rkey_get(a_, ep_ab_, kPeerB, id, reg->rkey_buf, reg->rkey_len);
        EXPECT_NE(k, nullptr);
        return k;
    };
    auto cached = [&](uint64_t id) {
        uint64_t u = unpack_count();
        rdrp_ucx_rkey_put(a_, get(id));
        return unpack_count() == u;
    };
    for (uint64_t id = 1; id <= kMax; ++id) rdrp_ucx_rkey_put(a_, get(id));
    EXPECT_EQ(live_rkeys(), static_cast<long>(kMax));
    rdrp_ucx_rkey_put(a_, get(1));  /* id 1 becomes the most recent */
    rdrp_ucx_rkey_t *k2 = get(2);   /* id 2 is held */
    const uint64_t unpacks0 = unpack_count();

    rdrp_ucx_rkey_t *k_new = get(kMax + 1); /* full: evicts the LRU idle entry, id 3 */
    EXPECT_EQ(unpack_count(), unpacks0 + 1);
    EXPECT_EQ(live_rkeys(), static_cast<long>(kMax)) << "the cache must stay bounded";
    rdrp_ucx_rkey_put(a_, k_new);
    rdrp_ucx_rkey_put(a_, k2);
    EXPECT_TRUE(cached(1)) << "a recently used rkey was evicted";
    EXPECT_TRUE(cached(2)) << "an rkey in use was evicted";
    EXPECT_TRUE(cached(4));
    EXPECT_TRUE(cached(kMax + 1));
    EXPECT_FALSE(cached(3)) << "the least recently used idle rkey was not evicted";
    rdrp_ucx_rkey_drop_peer(a_, kPeerB);
    EXPECT_EQ(live_rkeys(), 0);
    rdrp_ucx_reg_release(reg);
}

/* A thread_multi worker is shared by threads; the header promises that the
 * caches take their own locks.  Two threads hammer the rkey cache of one
 * worker (hits, misses, drop_peer); afterwards every reference was returned,
 * so drop_peer empties the cache. */
TEST_F(UcxPair, RkeyCacheThreadMultiWorker)
{
    rdrp_ucx_worker_t *m = rdrp_ucx_worker_create(1, nullptr, nullptr);
    ASSERT_NE(m, nullptr) << rdrp_ucx_last_error();
    ucp_ep_h ep = rdrp_ucx_connect(m, addr_b_.data(), addr_b_.size(), 0, kPeerB);
    ASSERT_NE(ep, nullptr) << rdrp_ucx_last_error();
    std::vector<char> src(4096);
    rdrp_ucx_region_t *reg = rdrp_ucx_reg_acquire(src.data(), src.size());
    ASSERT_NE(reg, nullptr);
    const long rkeys0 = live_rkeys();

    constexpr int kIters = 100000;
    std::atomic<int> bad{0};
    auto body = [&](int t) {
        for (int i = 0; i < kIters; ++i) {
            uint64_t id = 1000 + (i + t) % 8;
            rdrp_ucx_rkey_t *k = rdrp_ucx_rkey_get(m, ep, kPeerB, id, reg->rkey_buf, reg->rkey_len);
            if (!k || !rdrp_ucx_rkey_handle(k)) {
                bad.fetch_add(1);
                continue;
            }
            rdrp_ucx_rkey_put(m, k);
            if (i % 997 == 0) rdrp_ucx_rkey_drop_peer(m, kPeerB);
        }
    };
    std::thread t1(body, 0), t2(body, 1);
    t1.join();
    t2.join();
    EXPECT_EQ(bad.load(), 0);
    rdrp_ucx_rkey_drop_peer(m, kPeerB);
    EXPECT_EQ(live_rkeys(), rkeys0) << "references were lost: the rkey cache is not thread-safe";
    ProgressThread pb(b_);
    EXPECT_LT(destroy_timed(m, 2.0), 1.0);
    pb.stop();
    rdrp_ucx_reg_release(reg);
}

/* A remote (PEER error mode) endpoint reports its peer's failure through
 * the worker's on_error callback with the peer id given at connect. */
struct PeerErrors {
    std::atomic<int> calls{0};
    uint64_t peer = 0;
    ucs_status_t status = UCS_OK;
};

void on_peer_error(void *arg, uint64_t peer_id, ucs_status_t status)
{
    auto *e = static_cast<PeerErrors *>(arg);
    e->peer = peer_id;
    e->status = status;
    e->calls.fetch_add(1);
}

/* A remote (PEER-mode) endpoint runs over TCP here, where UCX 1.13 emulates
 * GET by active messages: pml/rdrp must not pull by ucp_get_nbx from such a
 * peer under data_path auto (issue 21).  An on-node endpoint has rma lanes
 * (sysv/posix), so the probe can say yes too. */
TEST_F(UcxContext, EndpointNativeGetProbe)
{
    rdrp_ucx_worker_t *a = rdrp_ucx_worker_create(0, nullptr, nullptr);
    rdrp_ucx_worker_t *b = rdrp_ucx_worker_create(0, nullptr, nullptr);
    ASSERT_TRUE(a && b) << rdrp_ucx_last_error();
    void *addr, *net;
    size_t len, net_len;
    ASSERT_EQ(rdrp_ucx_worker_address(b, 0, &addr, &len), 0);
    ASSERT_EQ(rdrp_ucx_worker_address(b, 1, &net, &net_len), 0);
    ucp_ep_h local = rdrp_ucx_connect(a, addr, len, 0, 1);
    ucp_ep_h remote = rdrp_ucx_connect(a, net, net_len, 1, 2);
    rdrp_ucx_worker_address_release(b, addr);
    rdrp_ucx_worker_address_release(b, net);
    ASSERT_NE(local, nullptr) << rdrp_ucx_last_error();
    EXPECT_EQ(rdrp_ucx_ep_native_get(nullptr), -1);
    const char *tls = getenv("UCX_TLS");
    if (!tls) EXPECT_EQ(rdrp_ucx_ep_native_get(local), 1) << "on-node endpoint without get lanes";
    if (remote) {
        /* with only network transports, and no RDMA device on this kind of
         * machine, a PEER-mode endpoint is TCP: emulated GET */
        bool rdma = access("/sys/class/infiniband", F_OK) == 0;
        if (!rdma) EXPECT_EQ(rdrp_ucx_ep_native_get(remote), 0) << "TCP endpoint reported a native get";
    }
    rdrp_ucx_worker_destroy(a, 1.0);
    rdrp_ucx_worker_destroy(b, 1.0);
}

TEST_F(UcxContext, RemoteEndpointReportsPeerFailure)
{
    constexpr uint64_t kPeer = 42;
    PeerErrors errs;
    rdrp_ucx_worker_t *a = rdrp_ucx_worker_create(0, on_peer_error, &errs);
    rdrp_ucx_worker_t *b = rdrp_ucx_worker_create(0, nullptr, nullptr);
    ASSERT_TRUE(a && b) << rdrp_ucx_last_error();
    void *addr;
    size_t len;
    ASSERT_EQ(rdrp_ucx_worker_address(b, 1, &addr, &len), 0);
    ucp_ep_h ep = rdrp_ucx_connect(a, addr, len, 1, kPeer);
    rdrp_ucx_worker_address_release(b, addr);
    if (!ep) {
        std::string why = rdrp_ucx_last_error();
        rdrp_ucx_worker_destroy(a, 1.0);
        rdrp_ucx_worker_destroy(b, 1.0);
        GTEST_SKIP() << "no network transport for a PEER-mode endpoint (UCX_TLS?): " << why;
    }

    /* one message through, so the connection exists on both sides */
    std::atomic<int> got{0};
    ASSERT_EQ(rdrp_ucx_set_am_handler(b, 3, am_count_cb, &got), 0);
    uint32_t hdr = 9;
    ucp_request_param_t p;
    std::memset(&p, 0, sizeof(p));
    ASSERT_EQ(wait_request({a, b}, ucp_am_send_nbx(ep, 3, &hdr, sizeof(hdr), nullptr, 0, &p)), UCS_OK);
    ASSERT_TRUE(progress_until({a, b}, [&] { return got.load() == 1; }));
    EXPECT_EQ(errs.calls.load(), 0);

    /* the peer goes away; keep sending until A notices */
    rdrp_ucx_worker_destroy(b, 1.0);
    auto t0 = Clock::now();
    while (errs.calls.load() == 0 && seconds_since(t0) < 3.0) {
        ucs_status_ptr_t r = ucp_am_send_nbx(ep, 3, &hdr, sizeof(hdr), nullptr, 0, &p);
        if (UCS_PTR_IS_PTR(r)) {
            wait_request({a}, r, 0.05); /* an error completes it; else leave it */
        }
        rdrp_ucx_progress(rdrp_ucx_worker_handle(a));
    }
    EXPECT_GE(errs.calls.load(), 1) << "no error reported for a dead remote peer";
    EXPECT_EQ(errs.peer, kPeer);
    EXPECT_NE(errs.status, UCS_OK);
    rdrp_ucx_worker_destroy(a, 1.0);
}

/* The property the invalidation exists for: a buffer freed and allocated
 * again (same address) never moves data through the old registration.
 * Over this UCX the GET is emulated through the target's progress and reads
 * the virtual address, so the bytes alone cannot tell a stale registration
 * from a fresh one (on InfiniBand they could): the test therefore also
 * requires a new region id, a fresh rkey unpack on the reader and the old
 * registration to be gone. */
TEST_F(UcxPair, StaleDataAfterFreeAndReuse)
{
    struct Case {
        size_t len;
        bool use_mmap;
        bool invalidate_after_realloc; /* hook order vs. a late hook */
    };
    const Case cases[] = {
        {4096, true, false},    {64 * 1024, true, false}, {1 << 20, true, true},
        {3000, false, false},   {64 * 1024, false, true}, {256 * 1024, false, false},
    };
    int same_address = 0;
    uint32_t seed = 100;
    for (const Case &c : cases) {
        SCOPED_TRACE(::testing::Message() << "len=" << c.len << " mmap=" << c.use_mmap
                                          << " late-invalidate=" << c.invalidate_after_realloc);
        auto alloc = [&](void *hint) -> char * {
            if (!c.use_mmap) return static_cast<char *>(std::malloc(c.len));
            void *p = mmap(hint, c.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            return p == MAP_FAILED ? nullptr : static_cast<char *>(p);
        };
        auto release_mem = [&](char *p) {
            if (c.use_mmap) munmap(p, c.len);
            else std::free(p);
        };

        /* round 1: old buffer, registered and read by the peer */
        char *old_buf = alloc(nullptr);
        ASSERT_NE(old_buf, nullptr);
        fill(old_buf, c.len, ++seed);
        std::vector<char> old_copy(old_buf, old_buf + c.len);
        rdrp_ucx_region_t *r1 = rdrp_ucx_reg_acquire(old_buf, c.len);
        ASSERT_NE(r1, nullptr);
        rdrp_ucx_rkey_t *k1 =
            rdrp_ucx_rkey_get(a_, ep_ab_, kPeerB, r1->id, r1->rkey_buf, r1->rkey_len);
        ASSERT_NE(k1, nullptr);
        std::vector<char> dst(c.len, 0);
        ASSERT_EQ(get(dst.data(), c.len, old_buf, k1), UCS_OK);
        ASSERT_TRUE(dst == old_copy);
        rdrp_ucx_rkey_put(a_, k1);
        const uint64_t old_id = r1->id;
        rdrp_ucx_reg_release(r1); /* idle, cached */
        const long maps_cached = live_maps();

        /* the buffer is freed (hooks fire) and allocated again */
        release_mem(old_buf);
        if (!c.invalidate_after_realloc) rdrp_ucx_reg_invalidate(old_buf, c.len);
        char *new_buf = alloc(old_buf);
        ASSERT_NE(new_buf, nullptr);
        if (new_buf == old_buf) ++same_address;
        if (c.invalidate_after_realloc) rdrp_ucx_reg_invalidate(old_buf, c.len);
        fill(new_buf, c.len, ++seed);
        std::vector<char> new_copy(new_buf, new_buf + c.len);
        ASSERT_FALSE(new_copy == old_copy);

        /* round 2: acquire + get must see the new data through a new registration */
        Stats s0 = Stats::now();
        uint64_t unpacks0 = unpack_count();
        rdrp_ucx_region_t *r2 = rdrp_ucx_reg_acquire(new_buf, c.len);
        ASSERT_NE(r2, nullptr);
        EXPECT_EQ(Stats::now().misses, s0.misses + 1);
        EXPECT_NE(r2->id, old_id) << "a reused buffer got the stale registration";
        EXPECT_EQ(live_maps(), maps_cached) << "the stale registration is still mapped";
        rdrp_ucx_rkey_t *k2 =
            rdrp_ucx_rkey_get(a_, ep_ab_, kPeerB, r2->id, r2->rkey_buf, r2->rkey_len);
        ASSERT_NE(k2, nullptr);
        EXPECT_NE(k2, k1);
        EXPECT_EQ(unpack_count(), unpacks0 + 1) << "the reader must unpack the new rkey";
        std::fill(dst.begin(), dst.end(), 0);
        ASSERT_EQ(get(dst.data(), c.len, new_buf, k2), UCS_OK);
        EXPECT_TRUE(dst == new_copy) << "GET returned stale data";
        rdrp_ucx_rkey_put(a_, k2);
        rdrp_ucx_reg_release(r2);

        /* control: without the hook the cache would hand out the old region,
         * so the checks above do depend on the invalidation */
        if (new_buf == old_buf) {
            rdrp_ucx_region_t *r3 = rdrp_ucx_reg_acquire(new_buf, c.len);
            EXPECT_EQ(r3, r2);
            rdrp_ucx_reg_release(r3);
        }
        rdrp_ucx_reg_invalidate(new_buf, c.len);
        release_mem(new_buf);
        rdrp_ucx_rkey_drop_peer(a_, kPeerB);
    }
    /* mmap with the old address as hint returns it when it is free */
    EXPECT_GE(same_address, 3) << "addresses were not reused: the property was not exercised";
    rdrp_ucx_reg_flush();
}

/* ================================================================ finalize */
TEST_F(UcxPair, WorkerDestroyBoundedWhenPeerNeverProgresses)
{
    /* wire up both directions and leave work outstanding towards B:
     * a rendezvous AM B never pulls, and a GET only B's progress can serve */
    constexpr unsigned kId = 11;
    AmSink on_b;
    ASSERT_EQ(rdrp_ucx_set_am_handler(b_, kId, am_sink_cb, &on_b), 0);
    uint32_t hdr = 1;
    std::vector<char> small(64, 'x');
    ucp_request_param_t p;
    std::memset(&p, 0, sizeof(p));
    ASSERT_EQ(wait_request({a_, b_}, ucp_am_send_nbx(ep_ab_, kId, &hdr, sizeof(hdr), small.data(),
                                                     small.size(), &p)),
              UCS_OK);
    ASSERT_TRUE(progress_until({a_, b_}, [&] { return on_b.calls == 1; }));

    static std::vector<char> big(512 * 1024, 'y'); /* must outlive a leaked request */
    static std::vector<char> src(64 * 1024, 'z'), dst(64 * 1024);
    rdrp_ucx_region_t *reg = rdrp_ucx_reg_acquire(src.data(), src.size());
    ASSERT_NE(reg, nullptr);
    rdrp_ucx_rkey_t *k = rdrp_ucx_rkey_get(a_, ep_ab_, kPeerB, reg->id, reg->rkey_buf,
                                           reg->rkey_len);
    ASSERT_NE(k, nullptr);

    static uint64_t hdr2 = 2;
    ucs_status_ptr_t am = ucp_am_send_nbx(ep_ab_, kId, &hdr2, sizeof(hdr2), big.data(),
                                          big.size(), &p);
    ASSERT_FALSE(UCS_PTR_IS_ERR(am));
    ucs_status_ptr_t g = ucp_get_nbx(ep_ab_, dst.data(), dst.size(),
                                     reinterpret_cast<uint64_t>(src.data()),
                                     rdrp_ucx_rkey_handle(k), &p);
    ASSERT_FALSE(UCS_PTR_IS_ERR(g));
    for (int i = 0; i < 100; ++i) rdrp_ucx_progress(rdrp_ucx_worker_handle(a_));
    rdrp_ucx_rkey_put(a_, k);
    /* the application gives up on them (UCX keeps them until they finish) */
    if (UCS_PTR_IS_PTR(am)) ucp_request_free(am);
    if (UCS_PTR_IS_PTR(g)) ucp_request_free(g);

    auto t0 = Clock::now();
    rdrp_ucx_worker_destroy(a_, 1.0);
    a_ = nullptr;
    double el = seconds_since(t0);
    EXPECT_LT(el, 2.0) << "worker destroy must be bounded by its timeout";
    /* (it did wait: the GET's flush needs B, which never answers) */
    EXPECT_GE(el, 0.5) << "nothing was outstanding: the timeout path was not exercised";

    /* B (which never progressed meanwhile) still shuts down promptly */
    t0 = Clock::now();
    rdrp_ucx_worker_destroy(b_, 1.0);
    b_ = nullptr;
    EXPECT_LT(seconds_since(t0), 2.0);
    rdrp_ucx_reg_release(reg);
}

/* rdrp_ucx_worker_destroy must really close its endpoints: a forced close
 * for remote (PEER-mode) endpoints, a flushing close for on-node ones (UCX
 * refuses UCP_EP_CLOSE_FLAG_FORCE on UCP_ERR_HANDLING_MODE_NONE endpoints
 * with UCS_ERR_INVALID_PARAM). */
TEST_F(UcxPair, WorkerDestroyClosesEveryEndpoint)
{
    constexpr uint64_t kRemotePeer = 2;
    ucp_ep_h remote = rdrp_ucx_connect(a_, addr_b_.data(), addr_b_.size(), 1, kRemotePeer);
    if (!remote) GTEST_SKIP() << "no transport for a PEER-mode endpoint: " << rdrp_ucx_last_error();
    const size_t n0 = close_calls().size();
    rdrp_ucx_worker_destroy(a_, 1.0);
    a_ = nullptr;
    std::vector<CloseCall> calls = close_calls();
    ASSERT_EQ(calls.size(), n0 + 2) << "one close per endpoint";
    std::map<ucp_ep_h, CloseCall> by_ep;
    for (size_t i = n0; i < calls.size(); ++i) by_ep[calls[i].ep] = calls[i];
    ASSERT_EQ(by_ep.count(ep_ab_), 1u);
    ASSERT_EQ(by_ep.count(remote), 1u);
    EXPECT_TRUE(by_ep[ep_ab_].status == UCS_OK || by_ep[ep_ab_].status == UCS_INPROGRESS)
        << "on-node endpoint not closed: " << ucs_status_string(by_ep[ep_ab_].status);
    EXPECT_FALSE(by_ep[ep_ab_].flags & UCP_EP_CLOSE_FLAG_FORCE);
    EXPECT_TRUE(by_ep[remote].status == UCS_OK || by_ep[remote].status == UCS_INPROGRESS)
        << "remote endpoint not closed: " << ucs_status_string(by_ep[remote].status);
    EXPECT_TRUE(by_ep[remote].flags & UCP_EP_CLOSE_FLAG_FORCE);
}

/* Closing an on-node endpoint flushes it: eager sends queued behind
 * back-pressure (B's shared-memory FIFO is full because B was not
 * progressing) are delivered once B progresses, not cancelled. */
TEST_F(UcxPair, WorkerDestroyDeliversQueuedSends)
{
    constexpr unsigned kId = 13;
    constexpr int kMsgs = 300;
    std::atomic<int> received{0};
    ASSERT_EQ(rdrp_ucx_set_am_handler(b_, kId, am_count_cb, &received), 0);
    static const uint32_t hdr = 5;
    static std::vector<char> payload(2048, 'p');

    SendCounter sc;
    ucp_request_param_t sp;
    std::memset(&sp, 0, sizeof(sp));
    sp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                      UCP_OP_ATTR_FIELD_FLAGS;
    sp.flags = UCP_AM_SEND_FLAG_EAGER;
    sp.cb.send = count_send_cb;
    sp.user_data = &sc;
    int pending = 0;
    for (int i = 0; i < kMsgs; ++i) {
        ucs_status_ptr_t r =
            ucp_am_send_nbx(ep_ab_, kId, &hdr, sizeof(hdr), payload.data(), payload.size(), &sp);
        ASSERT_FALSE(UCS_PTR_IS_ERR(r)) << ucs_status_string(UCS_PTR_STATUS(r));
        if (r == nullptr) sc.ok.fetch_add(1);
        else ++pending;
        rdrp_ucx_progress(rdrp_ucx_worker_handle(a_));
    }
    ASSERT_GT(pending, 0) << "no back-pressure: the scenario was not exercised";

    ProgressThread tb(b_);
    auto t0 = Clock::now();
    rdrp_ucx_worker_destroy(a_, 5.0);
    a_ = nullptr;
    const double el = seconds_since(t0);
    const int ok_at_destroy = sc.ok.load(), failed_at_destroy = sc.failed.load();
    auto t1 = Clock::now();
    while (received.load() < kMsgs && seconds_since(t1) < 2.0) std::this_thread::yield();
    tb.stop();

    EXPECT_EQ(failed_at_destroy, 0) << "destroy cancelled queued sends";
    EXPECT_EQ(ok_at_destroy, kMsgs) << "destroy returned before the queued sends went out";
    EXPECT_EQ(received.load(), kMsgs) << "messages lost at worker destroy";
    EXPECT_LT(el, 4.0) << "a flush with a progressing peer must not need the timeout";
}

/* An RMA operation in flight at worker destroy completes before its cached
 * rkey is destroyed (UCX: an rkey is destroyed after the operations using
 * it are flushed). */
struct GetDone {
    std::atomic<bool> done{false};
    ucs_status_t status = UCS_INPROGRESS;
    bool rkey_alive_at_completion = false;
    ucp_rkey_h rkey = nullptr;
};

void get_done_cb(void *req, ucs_status_t st, void *user)
{
    auto *d = static_cast<GetDone *>(user);
    d->status = st;
    d->rkey_alive_at_completion = rkey_live(d->rkey);
    d->done = true;
    ucp_request_free(req);
}

TEST_F(UcxPair, WorkerDestroyFlushesRmaBeforeRkeyDestroy)
{
    constexpr size_t kLen = 256 * 1024;
    std::vector<char> src(kLen), dst(kLen, 0);
    fill(src.data(), kLen, 6);
    rdrp_ucx_region_t *reg = rdrp_ucx_reg_acquire(src.data(), kLen);
    ASSERT_NE(reg, nullptr);
    rdrp_ucx_rkey_t *k = rdrp_ucx_rkey_get(a_, ep_ab_, kPeerB, reg->id, reg->rkey_buf,
                                           reg->rkey_len);
    ASSERT_NE(k, nullptr);
    GetDone gd;
    gd.rkey = rdrp_ucx_rkey_handle(k);
    ucp_request_param_t p;
    std::memset(&p, 0, sizeof(p));
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = get_done_cb;
    p.user_data = &gd;
    /* B does not progress yet: the emulated GET cannot complete */
    ucs_status_ptr_t r = ucp_get_nbx(ep_ab_, dst.data(), kLen, reinterpret_cast<uint64_t>(src.data()),
                                     gd.rkey, &p);
    ASSERT_FALSE(UCS_PTR_IS_ERR(r));
    ASSERT_NE(r, nullptr) << "GET completed in place: the scenario was not exercised";
    rdrp_ucx_rkey_put(a_, k);

    {
        ProgressThread tb(b_);
        rdrp_ucx_worker_destroy(a_, 5.0);
        a_ = nullptr;
        tb.stop();
    }
    EXPECT_FALSE(rkey_live(gd.rkey)) << "destroy must free the cached rkey";
    ASSERT_TRUE(gd.done.load()) << "the GET in flight was neither flushed nor completed";
    EXPECT_EQ(gd.status, UCS_OK);
    EXPECT_TRUE(gd.rkey_alive_at_completion) << "rkey destroyed while an operation used it";
    EXPECT_TRUE(dst == src);
    rdrp_ucx_reg_release(reg);
}

TEST_F(UcxPair, EpForgetSkipsEndpointAtDestroy)
{
    /* the caller closes B's endpoint itself, then forgets it */
    ucp_request_param_t p;
    std::memset(&p, 0, sizeof(p));
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = 0; /* flush: FORCE needs UCP_ERR_HANDLING_MODE_PEER */
    ASSERT_EQ(wait_request({a_, b_}, ucp_ep_close_nbx(ep_ba_, &p)), UCS_OK);
    rdrp_ucx_ep_forget(b_, ep_ba_);
    ep_ba_ = nullptr;
    rdrp_ucx_ep_forget(b_, reinterpret_cast<ucp_ep_h>(0x1)); /* unknown: ignored */
    const size_t n0 = close_calls().size();
    rdrp_ucx_worker_destroy(b_, 1.0);
    b_ = nullptr;
    EXPECT_EQ(close_calls().size(), n0) << "a forgotten endpoint was closed again";
}

}  // namespace

/* ================================================================ finalize leak check */
/* What the finalize leak check learns from the glue: a registration held
 * (acquire without release) and an rkey held (get without put) are
 * counted; the cache's idle regions and a clean destroy count nothing. */
TEST_F(UcxPair, LeftoversCountHeldRegistrationsAndRkeys)
{
    constexpr size_t kLen = 16 * 1024;
    std::vector<char> held(kLen), idle(kLen);
    EXPECT_EQ(rdrp_ucx_reg_held(), 0u);
    rdrp_ucx_region_t *r_idle = rdrp_ucx_reg_acquire(idle.data(), kLen);
    ASSERT_NE(r_idle, nullptr);
    rdrp_ucx_reg_release(r_idle);  /* cached, unreferenced: the cache's own */
    EXPECT_EQ(rdrp_ucx_reg_held(), 0u);
    rdrp_ucx_region_t *reg = rdrp_ucx_reg_acquire(held.data(), kLen);
    ASSERT_NE(reg, nullptr);
    EXPECT_EQ(rdrp_ucx_reg_held(), 1u);
    rdrp_ucx_rkey_t *k = rdrp_ucx_rkey_get(a_, ep_ab_, kPeerB, reg->id, reg->rkey_buf, reg->rkey_len);
    ASSERT_NE(k, nullptr) << rdrp_ucx_last_error();
    /* a second reference to the same cached rkey, put back: one stays held */
    rdrp_ucx_rkey_t *k2 = rdrp_ucx_rkey_get(a_, ep_ab_, kPeerB, reg->id, reg->rkey_buf, reg->rkey_len);
    ASSERT_EQ(k2, k);
    rdrp_ucx_rkey_put(a_, k2);

    rdrp_ucx_leftovers_t left;
    {
        ProgressThread pb(b_);
        rdrp_ucx_worker_destroy_counted(a_, 2.0, &left);
    }
    a_ = nullptr;
    EXPECT_EQ(left.rkeys_held, 1u);
    EXPECT_EQ(left.endpoints_unclosed, 0u);
    EXPECT_EQ(left.requests_unfinished, 0u);
    rdrp_ucx_leftovers_t clean;
    rdrp_ucx_worker_destroy_counted(b_, 2.0, &clean);
    b_ = nullptr;
    EXPECT_EQ(clean.rkeys_held, 0u);
    EXPECT_EQ(clean.endpoints_unclosed, 0u);
    EXPECT_EQ(clean.requests_unfinished, 0u);
    rdrp_ucx_reg_release(reg);
    EXPECT_EQ(rdrp_ucx_reg_held(), 0u);
    /* a stale region still referenced (its memory released) is held too */
    reg = rdrp_ucx_reg_acquire(held.data(), kLen);
    ASSERT_NE(reg, nullptr);
    rdrp_ucx_reg_flush();  /* drops it from the cache: stale, still mapped */
    EXPECT_EQ(rdrp_ucx_reg_held(), 1u);
    rdrp_ucx_reg_release(reg);
    EXPECT_EQ(rdrp_ucx_reg_held(), 0u);
}

/* Remote atomics as btl/credit does them for osc/rdma: fetching, 64 and 32
 * bits, while the owner updates the same word with CPU atomics. */
class UcxAmoPair : public UcxPair {
protected:
    int want_amo() const override { return 1; }
};

TEST_F(UcxAmoPair, FetchingAtomicsCoherentWithOwnersCpu)
{
    if (std::getenv("UCX_ATOMIC_MODE") || std::getenv("UCX_MPI_ATOMIC_MODE"))
        GTEST_SKIP() << "the user chose UCX's atomic mode";
    ASSERT_EQ(rdrp_ucx_context_amo_cpu(), 1);
    alignas(8) static uint64_t word[2];
    word[0] = word[1] = 0;
    rdrp_ucx_region_t *reg = rdrp_ucx_reg_acquire(word, sizeof(word));
    ASSERT_NE(reg, nullptr);
    rdrp_ucx_rkey_t *k = rdrp_ucx_rkey_get(a_, ep_ab_, kPeerB, reg->id, reg->rkey_buf, reg->rkey_len);
    ASSERT_NE(k, nullptr) << rdrp_ucx_last_error();
    auto amo = [&](ucp_atomic_op_t op, size_t width, void *operand, void *reply, uint64_t raddr) {
        ucp_request_param_t p;
        std::memset(&p, 0, sizeof(p));
        p.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER;
        p.datatype = ucp_dt_make_contig(width);
        p.reply_buffer = reply;
        return wait_request({a_, b_}, ucp_atomic_op_nbx(ep_ab_, op, operand, 1, raddr,
                                                        rdrp_ucx_rkey_handle(k), &p));
    };
    const int kRounds = 200;
    for (int i = 0; i < kRounds; ++i) {
        uint64_t one = 1, old = ~0ull;
        ASSERT_EQ(amo(UCP_ATOMIC_OP_ADD, 8, &one, &old, reinterpret_cast<uint64_t>(&word[0])), UCS_OK);
        EXPECT_EQ(old, 2ull * i) << "fetch-and-add returned a stale value";
        __atomic_fetch_add(&word[0], 1, __ATOMIC_SEQ_CST); /* the owner's own CPU atomic */
    }
    EXPECT_EQ(word[0], 2ull * kRounds);
    /* 32-bit compare-and-swap on the upper half of word[1]: the swap value
     * goes in the reply buffer, the old value comes back there */
    uint32_t *halves = reinterpret_cast<uint32_t *>(&word[1]);
    halves[1] = 7;
    uint32_t compare = 7, reply = 9;
    ASSERT_EQ(amo(UCP_ATOMIC_OP_CSWAP, 4, &compare, &reply, reinterpret_cast<uint64_t>(&halves[1])), UCS_OK);
    EXPECT_EQ(reply, 7u);
    EXPECT_EQ(halves[1], 9u);
    EXPECT_EQ(halves[0], 0u) << "a 32-bit atomic touched its neighbour";
    compare = 7, reply = 11;
    ASSERT_EQ(amo(UCP_ATOMIC_OP_CSWAP, 4, &compare, &reply, reinterpret_cast<uint64_t>(&halves[1])), UCS_OK);
    EXPECT_EQ(reply, 9u) << "a failed compare returns the current value";
    EXPECT_EQ(halves[1], 9u);
    rdrp_ucx_rkey_put(a_, k);
    rdrp_ucx_reg_release(reg);
}
