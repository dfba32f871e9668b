/*
 * Unit tests of coll/cdag's plan cache (coll_cdag/cdag_plan_cache.h): keys
 * of v-variant calls compared exactly (a forged hash collision never hands
 * out another call's plan), and the cache against a reference model of two
 * bounded LRU lists over random call sequences (a property test: never
 * more plans than the capacities, every hit the plan inserted for exactly
 * that call, every miss a call the model evicted or never saw).
 *
 * Knob (environment): CDAG_TEST_SEED=<n> changes the seed.
 */
#include "coll_cdag/cdag_plan_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <random>
#include <vector>

namespace {

using cdag::Plan;
using cdag::PlanCache;
using cdag::PlanKey;
using cdag::PlanKeyView;

/* a call with its arrays kept alive */
struct Call {
    PlanKeyView v;
    std::vector<uint64_t> a[4];
    void point() {
        for (int i = 0; i < 4; ++i) v.arrays[i] = a[i].empty() ? nullptr : a[i].data();
    }
};

Call fixed_call(int coll, uint64_t count)
{
    Call c;
    c.v.coll = coll;
    c.v.count = count;
    c.v.elem_size = 1;
    c.v.commutative = 1;
    return c;
}

Call v_call(int coll, uint32_t n, std::vector<uint64_t> counts, std::vector<uint64_t> displs)
{
    Call c = fixed_call(coll, 0);
    c.v.n = n;
    c.a[0] = std::move(counts);
    c.a[1] = std::move(displs);
    c.point();
    return c;
}

std::shared_ptr<const Plan> plan_of(int id)
{
    auto p = std::make_shared<Plan>();
    p->rank = id;  // identifies it
    return p;
}

unsigned seed()
{
    const char *e = std::getenv("CDAG_TEST_SEED");
    return e ? static_cast<unsigned>(std::strtoul(e, nullptr, 10)) : 1234u;
}

TEST(CdagPlanCache, KeysCompareEveryEntryNotJustTheHash)
{
    Call a = v_call(14, 3, {4, 0, 8}, {0, 4, 6});
    Call b = v_call(14, 3, {4, 0, 8}, {0, 4, 7});  // one displacement differs
    Call c = v_call(14, 3, {4, 0, 8}, {0, 4, 6});
    EXPECT_NE(a.v.hash(), b.v.hash());
    EXPECT_EQ(a.v.hash(), c.v.hash());
    PlanKey k(a.v, 42);
    EXPECT_TRUE(k.matches(c.v, 42));
    EXPECT_FALSE(k.matches(b.v, 42)) << "same (forged) hash, other displacements";
    EXPECT_FALSE(k.matches(c.v, 43)) << "other hash";

    /* the same numbers in another array are another call */
    Call d = a;
    d.a[2] = d.a[1];
    d.a[1].clear();
    d.point();
    EXPECT_FALSE(k.matches(d.v, 42));
    /* a fixed-size call never matches a v-variant key */
    Call f = fixed_call(14, 0);
    EXPECT_FALSE(k.matches(f.v, 42));
    EXPECT_FALSE(PlanKey(f.v, 42).matches(a.v, 42));
}

/* matches_fixed (the op reuse's check without a hash, coll_cdag_lifecycle.cc)
 * says what matches with the real hashes says, on random pairs of calls
 * that differ in at most one field; never for a v-variant on either side */
TEST(CdagPlanCache, FixedMatchAgreesWithHashedMatch)
{
    std::mt19937 rng(seed());
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    int agreed_true = 0;
    for (int it = 0; it < 20000; ++it) {
        Call a = fixed_call(pick(16), static_cast<uint64_t>(pick(4)) * 8);
        a.v.root = pick(3);
        a.v.elem_size = 1u << pick(3);
        a.v.commutative = pick(2);
        a.v.in_place = pick(2);
        Call b = a;
        switch (pick(8)) {  // one field changed, or none
        case 0: b.v.coll = pick(16); break;
        case 1: b.v.root = pick(3); break;
        case 2: b.v.count = static_cast<uint64_t>(pick(4)) * 8; break;
        case 3: b.v.elem_size = 1u << pick(3); break;
        case 4: b.v.commutative = pick(2) * (1 + pick(3)); break;  // any non-zero is true
        case 5: b.v.in_place = pick(2) * (1 + pick(3)); break;
        default: break;
        }
        PlanKey k(a.v, a.v.hash());
        bool hashed = k.matches(b.v, b.v.hash());
        ASSERT_EQ(k.matches_fixed(b.v), hashed) << "iteration " << it;
        agreed_true += hashed;
    }
    EXPECT_GT(agreed_true, 1000);  // the equal case came up often enough to mean something
    Call v = v_call(14, 3, {4, 0, 8}, {0, 4, 6});
    Call f = fixed_call(14, 0);
    EXPECT_FALSE(PlanKey(v.v, v.v.hash()).matches_fixed(f.v));
    EXPECT_FALSE(PlanKey(f.v, f.v.hash()).matches_fixed(v.v));
}

TEST(CdagPlanCache, ForgedCollisionsKeepPlansApart)
{
    PlanCache cache(4, 4);
    Call a = v_call(12, 2, {1, 2}, {0, 1});
    Call b = v_call(12, 2, {2, 1}, {0, 2});
    cache.insert(a.v, 7, plan_of(1));
    cache.insert(b.v, 7, plan_of(2));
    ASSERT_NE(cache.find(a.v, 7), nullptr);
    EXPECT_EQ(cache.find(a.v, 7)->rank, 1);
    EXPECT_EQ(cache.find(b.v, 7)->rank, 2);
    Call c = v_call(12, 2, {1, 1}, {0, 1});
    EXPECT_EQ(cache.find(c.v, 7), nullptr);
}

TEST(CdagPlanCache, ZeroCapacityKeepsNothingOfThatClass)
{
    PlanCache cache(2, 0);
    Call v = v_call(15, 2, {1, 2}, {0, 1});
    cache.insert(v.v, v.v.hash(), plan_of(1));
    EXPECT_EQ(cache.find(v.v, v.v.hash()), nullptr);
    Call f = fixed_call(1, 8);
    cache.insert(f.v, f.v.hash(), plan_of(2));
    EXPECT_NE(cache.find(f.v, f.v.hash()), nullptr);
    EXPECT_EQ(cache.size(), 1u);
}

TEST(CdagPlanCache, ShrinkingTheCapacityEvictsTheLeastRecentlyUsed)
{
    PlanCache cache(8, 8);
    std::vector<Call> calls;
    for (int i = 0; i < 5; ++i) calls.push_back(v_call(14, 2, {uint64_t(i), 1}, {0, 9}));
    for (int i = 0; i < 5; ++i) cache.insert(calls[i].v, calls[i].v.hash(), plan_of(i));
    cache.find(calls[0].v, calls[0].v.hash());  // 0 is now the most recent
    cache.set_capacity(8, 2);
    EXPECT_EQ(cache.v_size(), 2u);
    EXPECT_NE(cache.find(calls[0].v, calls[0].v.hash()), nullptr);
    EXPECT_NE(cache.find(calls[4].v, calls[4].v.hash()), nullptr);
    for (int i = 1; i < 4; ++i) EXPECT_EQ(cache.find(calls[i].v, calls[i].v.hash()), nullptr) << i;
}

/* Random calls (fixed-size and v-variant, a small universe so repeats are
 * frequent) against a model: two LRU lists of call ids. */
TEST(CdagPlanCache, MatchesAnLruModelOnRandomCalls)
{
    std::mt19937 rng(seed());
    for (int round = 0; round < 20; ++round) {
        size_t cap = rng() % 5, vcap = rng() % 6;
        PlanCache cache(cap, vcap);
        std::vector<Call> universe;
        for (int i = 0; i < 6; ++i) universe.push_back(fixed_call(static_cast<int>(i % 3), 8u << i));
        for (int i = 0; i < 10; ++i) {
            uint32_t n = 1 + rng() % 4;
            std::vector<uint64_t> counts(n), displs(n);
            for (auto &x : counts) x = rng() % 3;
            for (auto &x : displs) x = rng() % 3;
            universe.push_back(v_call(13, n, counts, displs));
        }
        /* duplicates in the universe are the same call: model by first index */
        auto canon = [&](size_t i) {
            for (size_t j = 0; j < i; ++j) {
                PlanKey k(universe[j].v, universe[j].v.hash());
                if (k.matches(universe[i].v, universe[i].v.hash())) return j;
            }
            return i;
        };
        std::deque<size_t> model[2];  // front: most recent
        for (int step = 0; step < 400; ++step) {
            size_t i = canon(rng() % universe.size());
            const PlanKeyView &v = universe[i].v;
            int cls = v.is_v() ? 1 : 0;
            auto &m = model[cls];
            auto it = std::find(m.begin(), m.end(), i);
            auto got = cache.find(v, v.hash());
            if (it != m.end()) {
                ASSERT_NE(got, nullptr) << "round " << round << " step " << step << " seed " << seed();
                ASSERT_EQ(got->rank, static_cast<int>(i));
                m.erase(it);
                m.push_front(i);
            } else {
                ASSERT_EQ(got, nullptr) << "round " << round << " step " << step << " seed " << seed();
                cache.insert(v, v.hash(), plan_of(static_cast<int>(i)));
                size_t c = cls ? vcap : cap;
                if (c > 0) {
                    if (m.size() == c) m.pop_back();
                    m.push_front(i);
                }
            }
            ASSERT_LE(cache.size() - cache.v_size(), cap);
            ASSERT_LE(cache.v_size(), vcap);
            ASSERT_EQ(cache.size(), model[0].size() + model[1].size());
        }
    }
}

}  // namespace
