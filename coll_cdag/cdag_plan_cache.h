/*
 * PlanCache: a communicator's compiled plans, found again by what
 * identifies a call, so a repeated call compiles nothing.
 *
 * A call's key is its scalar part (collective, root, count, element size,
 * commutativity, in place) and, for the v-variants, its counts and
 * displacement arrays: two gatherv calls with other counts need other
 * schedules.  A lookup hashes the call's arrays where they are
 * (PlanKeyView: nothing copied, nothing allocated) and compares a stored
 * key with the same hash entry by entry, so a hash collision can never
 * hand out a wrong plan.  A key is stored (its arrays copied once) only
 * when its plan is.
 *
 * Bounded: at most `cap` plans of fixed-size calls and `vcap` plans of
 * v-variant calls, each class evicting its least recently used plan, so an
 * application that calls alltoallv with ever new counts holds at most vcap
 * plans (capacity 0: nothing of that class is kept, every call compiles).
 * Plans are shared: one evicted while an executor runs it stays alive
 * with that executor.
 *
 * Not thread-safe: the service uses it under its lock.
 */
#ifndef CDAG_PLAN_CACHE_H
#define CDAG_PLAN_CACHE_H

#include "cdag_plan.h"

#include <cstddef>
#include <iterator>
#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

namespace cdag {

/* One call's key, pointing at the caller's arrays (bytes; elements for
 * reduce_scatter's counts).  arrays: counts, displs, rcounts, rdispls,
 * each absent (nullptr) or n entries. */
struct PlanKeyView {
    int coll = 0, root = 0;
    uint64_t count = 0, elem_size = 0;
    int commutative = 0, in_place = 0;
    const uint64_t *arrays[4] = {nullptr, nullptr, nullptr, nullptr};
    uint32_t n = 0;

    bool is_v() const { return arrays[0] || arrays[1] || arrays[2] || arrays[3]; }
    uint64_t hash() const;
};

/* A key kept with its plan (or with an executor kept for reuse). */
struct PlanKey {
    int coll = -1, root = 0;
    uint64_t count = 0, elem_size = 0;
    int commutative = 0, in_place = 0;
    uint8_t present = 0;           // bit i: arrays[i] of the view was there
    uint32_t n = 0;
    std::vector<uint64_t> arrays;  // the present arrays, n entries each, in order
    uint64_t hash = 0;

    PlanKey() = default;
    PlanKey(const PlanKeyView &v, uint64_t h);
    bool is_v() const { return present != 0; }
    /* the same call as v (h: v.hash()) */
    bool matches(const PlanKeyView &v, uint64_t h) const;
    /* the same fixed-size call as v (no arrays on either side), without
     * v's hash: a repeated call checks its last op this way first */
    bool matches_fixed(const PlanKeyView &v) const {
        return present == 0 && !v.is_v() && coll == v.coll && root == v.root && count == v.count &&
               elem_size == v.elem_size && commutative == (v.commutative != 0) && in_place == (v.in_place != 0);
    }
};

class PlanCache {
public:
    PlanCache(std::size_t cap = 64, std::size_t vcap = 32) : cap_{cap, vcap} {}
    void set_capacity(std::size_t cap, std::size_t vcap);

    /* The plan of this call, now the most recently used of its class; or
     * nullptr. */
    std::shared_ptr<const Plan> find(const PlanKeyView &v, uint64_t h);
    /* Keep plan for this call (not there yet), evicting the least recently
     * used of its class when full. */
    void insert(const PlanKeyView &v, uint64_t h, std::shared_ptr<const Plan> plan);

    std::size_t size() const { return lru_[0].size() + lru_[1].size(); }
    std::size_t v_size() const { return lru_[1].size(); }
    std::size_t evictions() const { return evictions_; }

private:
    struct Entry {
        PlanKey key;
        std::shared_ptr<const Plan> plan;
    };
    using List = std::list<Entry>;
    void evict_one(int cls);

    std::size_t cap_[2];
    List lru_[2];  // [0] fixed-size calls, [1] v-variants; front: most recently used
    std::unordered_multimap<uint64_t, List::iterator> by_hash_;
    std::size_t evictions_ = 0;
};

}  // namespace cdag

#endif
