/*
 * PlanCache (cdag_plan_cache.h): keys of calls, hashed where they are and
 * compared exactly; two LRU lists bounded apart.
 */
#include "cdag_plan_cache.h"

namespace cdag {

namespace {
/* FNV-1a over 64-bit words, then a final mix so low bits spread (the
 * multimap buckets by them) */
struct Hasher {
    uint64_t h = 1469598103934665603ull;
    void add(uint64_t x) {
        h ^= x;
        h *= 1099511628211ull;
    }
    uint64_t done() const {
        uint64_t x = h;
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdull;
        x ^= x >> 33;
        return x;
    }
};
}  // namespace

uint64_t PlanKeyView::hash() const
{
    Hasher hs;
    hs.add(static_cast<uint64_t>(static_cast<uint32_t>(coll)) << 32 | static_cast<uint32_t>(root));
    hs.add(count);
    hs.add(elem_size);
    hs.add(static_cast<uint64_t>(commutative != 0) | static_cast<uint64_t>(in_place != 0) << 1);
    if (!is_v()) return hs.done();
    hs.add(n);
    for (int a = 0; a < 4; ++a) {
        hs.add(arrays[a] ? 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(a) : 0);
        if (arrays[a])
            for (uint32_t i = 0; i < n; ++i) hs.add(arrays[a][i]);
    }
    return hs.done();
}

PlanKey::PlanKey(const PlanKeyView &v, uint64_t h)
    : coll(v.coll), root(v.root), count(v.count), elem_size(v.elem_size), commutative(v.commutative != 0),
      in_place(v.in_place != 0), n(v.is_v() ? v.n : 0), hash(h)
{
    for (int a = 0; a < 4; ++a)
        if (v.arrays[a]) {
            present |= static_cast<uint8_t>(1u << a);
            arrays.insert(arrays.end(), v.arrays[a], v.arrays[a] + v.n);
        }
}

bool PlanKey::matches(const PlanKeyView &v, uint64_t h) const
{
    if (hash != h || coll != v.coll || root != v.root || count != v.count || elem_size != v.elem_size ||
        commutative != (v.commutative != 0) || in_place != (v.in_place != 0))
        return false;
    uint8_t vp = 0;
    for (int a = 0; a < 4; ++a)
        if (v.arrays[a]) vp |= static_cast<uint8_t>(1u << a);
    if (vp != present) return false;
    if (!present) return true;
    if (n != v.n) return false;
    const uint64_t *mine = arrays.data();
    for (int a = 0; a < 4; ++a) {
        if (!v.arrays[a]) continue;
        for (uint32_t i = 0; i < n; ++i)
            if (mine[i] != v.arrays[a][i]) return false;
        mine += n;
    }
    return true;
}

void PlanCache::set_capacity(std::size_t cap, std::size_t vcap)
{
    cap_[0] = cap;
    cap_[1] = vcap;
    for (int cls = 0; cls < 2; ++cls)
        while (lru_[cls].size() > cap_[cls]) evict_one(cls);
}

std::shared_ptr<const Plan> PlanCache::find(const PlanKeyView &v, uint64_t h)
{
    auto range = by_hash_.equal_range(h);
    for (auto it = range.first; it != range.second; ++it) {
        List::iterator e = it->second;
        if (!e->key.matches(v, h)) continue;
        List &l = lru_[e->key.is_v() ? 1 : 0];
        l.splice(l.begin(), l, e);  // most recently used; iterators stay valid
        return e->plan;
    }
    return nullptr;
}

void PlanCache::evict_one(int cls)
{
    List &l = lru_[cls];
    if (l.empty()) return;
    List::iterator last = std::prev(l.end());
    auto range = by_hash_.equal_range(last->key.hash);
    for (auto it = range.first; it != range.second; ++it)
        if (it->second == last) {
            by_hash_.erase(it);
            break;
        }
    l.erase(last);
    ++evictions_;
}

void PlanCache::insert(const PlanKeyView &v, uint64_t h, std::shared_ptr<const Plan> plan)
{
    int cls = v.is_v() ? 1 : 0;
    if (cap_[cls] == 0) return;
    while (lru_[cls].size() >= cap_[cls]) evict_one(cls);
    List &l = lru_[cls];
    l.push_front(Entry{PlanKey(v, h), std::move(plan)});
    by_hash_.emplace(h, l.begin());
}

}  // namespace cdag
