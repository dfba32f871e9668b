/* ucx_glue: registration cache keyed by address range.
 *
 * Memory-release hooks may fire inside free()/munmap() from any thread,
 * including while this cache itself allocates, so the hook only appends
 * the range to a fixed-size ring under a spin lock; the ring is drained at
 * the start of every acquire.  An overflowing ring drops every idle region. */
#include "rdrp_ucx.h"

#include <atomic>
#include <cstring>
#include <map>
#include <unordered_map>
#include <mutex>
#include <new>

namespace {

struct region_node {
    rdrp_ucx_region_t r;
    int refs;
    bool stale;  /* memory released while in use: deregister at last release */
};

std::recursive_mutex g_lock;
std::map<uintptr_t, region_node *> g_regions;  /* by start address */
bool g_caching = false;
uint64_t g_next_id = 1, g_hits, g_misses, g_invalidated;
uint64_t g_mapped;  /* regions registered and not yet deregistered (cached or held) */
/* every mapped region by id, cached or not (rdrp_ucx_reg_covers) */
std::unordered_map<uint64_t, region_node *> g_by_id;

/* pending invalidations from the memory hooks */
constexpr int kRing = 256;
std::atomic_flag g_ring_lock = ATOMIC_FLAG_INIT;
struct { uintptr_t lo, hi; } g_ring[kRing];
int g_ring_n;
bool g_ring_overflow;

void deregister(region_node *n)
{
    ucp_rkey_buffer_release(n->r.rkey_buf);
    ucp_mem_unmap(rdrp_ucx_context(), n->r.memh);
    g_by_id.erase(n->r.id);
    --g_mapped;
    delete n;
}

/* Drop idle regions overlapping [lo, hi); mark busy ones stale. */
void drop_range(uintptr_t lo, uintptr_t hi)
{
    for (auto it = g_regions.begin(); it != g_regions.end();) {
        region_node *n = it->second;
        /* a zero-length region still registers (and is found at) one byte */
        uintptr_t a = it->first, b = a + (n->r.len ? n->r.len : 1);
        if (a < hi && lo < b) {
            ++g_invalidated;
            it = g_regions.erase(it);
            if (n->refs == 0) deregister(n);
            else n->stale = true;
        } else {
            ++it;
        }
    }
}

void drain_ring()
{
    while (g_ring_lock.test_and_set(std::memory_order_acquire)) {}
    int n = g_ring_n;
    bool overflow = g_ring_overflow;
    decltype(g_ring) copy;
    std::memcpy(copy, g_ring, sizeof(copy[0]) * n);
    g_ring_n = 0;
    g_ring_overflow = false;
    g_ring_lock.clear(std::memory_order_release);
    if (overflow) drop_range(0, UINTPTR_MAX);
    for (int i = 0; i < n; ++i) drop_range(copy[i].lo, copy[i].hi);
}

region_node *map_new(void *addr, size_t len)
{
    ucp_mem_map_params_t mp;
    std::memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = addr;
    mp.length = len ? len : 1;
    ucp_mem_h memh;
    if (ucp_mem_map(rdrp_ucx_context(), &mp, &memh) != UCS_OK) return nullptr;
    void *rb;
    size_t rl;
    if (ucp_rkey_pack(rdrp_ucx_context(), memh, &rb, &rl) != UCS_OK) {
        ucp_mem_unmap(rdrp_ucx_context(), memh);
        return nullptr;
    }
    auto *n = new (std::nothrow) region_node;
    if (!n) {
        ucp_rkey_buffer_release(rb);
        ucp_mem_unmap(rdrp_ucx_context(), memh);
        return nullptr;
    }
    n->r.addr = addr;
    n->r.len = len;
    n->r.memh = memh;
    n->r.rkey_buf = rb;
    n->r.rkey_len = rl;
    n->r.id = g_next_id++;
    n->refs = 1;
    n->stale = false;
    ++g_mapped;
    g_by_id[n->r.id] = n;
    return n;
}

}  // namespace

extern "C" {

rdrp_ucx_region_t *rdrp_ucx_reg_acquire(void *addr, size_t len)
{
    std::lock_guard<std::recursive_mutex> g(g_lock);
    drain_ring();
    uintptr_t a = reinterpret_cast<uintptr_t>(addr);
    if (g_caching) {
        /* the region starting at or below addr that covers [a, a+len) */
        auto it = g_regions.upper_bound(a);
        if (it != g_regions.begin()) {
            --it;
            region_node *n = it->second;
            if (it->first <= a && a + len <= it->first + n->r.len) {
                ++g_hits;
                ++n->refs;
                return &n->r;
            }
        }
    }
    ++g_misses;
    region_node *n = map_new(addr, len);
    if (!n) return nullptr;
    if (g_caching) {
        /* keep one region per start address: an idle smaller one is replaced */
        auto old = g_regions.find(a);
        if (old != g_regions.end()) {
            if (old->second->refs == 0) deregister(old->second);
            else old->second->stale = true;
            g_regions.erase(old);
        }
        g_regions[a] = n;
    } else {
        n->stale = true;  /* uncached: deregister at release */
    }
    return &n->r;
}

void rdrp_ucx_reg_release(rdrp_ucx_region_t *r)
{
    std::lock_guard<std::recursive_mutex> g(g_lock);
    auto *n = reinterpret_cast<region_node *>(r);  /* r is the first member */
    if (--n->refs == 0 && n->stale) deregister(n);
}

void rdrp_ucx_reg_invalidate(void *addr, size_t len)
{
    uintptr_t lo = reinterpret_cast<uintptr_t>(addr);
    while (g_ring_lock.test_and_set(std::memory_order_acquire)) {}
    if (g_ring_n < kRing) {
        g_ring[g_ring_n].lo = lo;
        g_ring[g_ring_n].hi = lo + len;
        ++g_ring_n;
    } else {
        g_ring_overflow = true;
    }
    g_ring_lock.clear(std::memory_order_release);
}

int rdrp_ucx_reg_covers(uint64_t id, uintptr_t addr, size_t len)
{
    std::lock_guard<std::recursive_mutex> g(g_lock);
    auto it = g_by_id.find(id);
    if (it == g_by_id.end()) return 0;
    const uintptr_t lo = reinterpret_cast<uintptr_t>(it->second->r.addr);
    /* no overflow: addr >= lo and both lengths are within the region */
    return addr >= lo && addr - lo <= it->second->r.len && len <= it->second->r.len - (addr - lo);
}

void rdrp_ucx_reg_set_caching(int enabled)
{
    std::lock_guard<std::recursive_mutex> g(g_lock);
    g_caching = enabled != 0;
    if (!g_caching) drop_range(0, UINTPTR_MAX);
}

void rdrp_ucx_reg_stats(uint64_t *hits, uint64_t *misses, uint64_t *invalidated, uint64_t *live)
{
    std::lock_guard<std::recursive_mutex> g(g_lock);
    if (hits) *hits = g_hits;
    if (misses) *misses = g_misses;
    if (invalidated) *invalidated = g_invalidated;
    if (live) *live = g_regions.size();
}

uint64_t rdrp_ucx_reg_held(void)
{
    std::lock_guard<std::recursive_mutex> g(g_lock);
    uint64_t idle = 0;  /* cached and unreferenced: the cache's own, flushed at the end */
    for (auto &kv : g_regions)
        if (kv.second->refs == 0) ++idle;
    return g_mapped - idle;
}

void rdrp_ucx_reg_flush(void)
{
    std::lock_guard<std::recursive_mutex> g(g_lock);
    drain_ring();
    drop_range(0, UINTPTR_MAX);
}

}  // extern "C"
