// btl/credit's per-peer put protocol choice (btl_credit/btl_credit_put_rate.h):
// eager exactly when the last sample's delivered rate (rendezvous bytes over
// busy time) is below the threshold; queued puts are not mistaken for a slow
// link; eager puts are never timed, and a rendezvous probe follows
// `probe` eager bytes, then twice as many after each probe that finds the
// link still slow (up to kProbeGrowth times), `probe` again once it is fast.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "btl_credit/btl_credit_put_rate.h"

using btlcredit::PutRate;

namespace {

constexpr uint64_t MiB = 1u << 20;
constexpr uint64_t kUs = 1000;  // ns

constexpr uint64_t kNoProbe = ~0ull;

// n puts of `bytes` back to back, one at a time, each taking bytes / rate,
// by the protocol the chooser gives; returns how many went eagerly.
int serial(PutRate &r, uint64_t &t, int n, uint64_t bytes, double mb_s)
{
    int eager = 0;
    for (int i = 0; i < n; ++i) {
        const bool e = r.next_eager();
        eager += e;
        r.started(t, bytes, e);
        t += static_cast<uint64_t>(bytes * 1e3 / mb_s);
        r.completed(t, bytes, e);
    }
    return eager;
}

}  // namespace

TEST(BtlCreditPutRate, StartsByRendezvousAndChoosesByRate)
{
    PutRate r(1000.0, 8 * MiB, kNoProbe);
    uint64_t t = 0;
    EXPECT_FALSE(r.eager());
    serial(r, t, 7, MiB, 200.0);  // short of one sample: no decision yet
    EXPECT_FALSE(r.eager());
    EXPECT_EQ(r.samples(), 0u);
    serial(r, t, 1, MiB, 200.0);
    EXPECT_FALSE(r.eager());      // one slow sample is not enough
    EXPECT_NEAR(r.last_rate_mb_s(), 200.0, 1.0);
    serial(r, t, 16, MiB, 200.0);
    EXPECT_TRUE(r.eager());       // three: a 2 Gbit/s-class link
    EXPECT_EQ(r.samples(), 3u);
    EXPECT_EQ(serial(r, t, 8, MiB, 3000.0), 8);  // eager: never timed, no new verdict
    EXPECT_TRUE(r.eager());
    EXPECT_EQ(r.samples(), 3u);
    EXPECT_NEAR(r.last_rate_mb_s(), 200.0, 1.0);
}

TEST(BtlCreditPutRate, ZeroThresholdNeverEager)
{
    PutRate r(0.0, MiB, kNoProbe);
    uint64_t t = 0;
    serial(r, t, 16, MiB, 10.0);
    EXPECT_FALSE(r.eager());
    EXPECT_EQ(r.samples(), 16u);
}

TEST(BtlCreditPutRate, IdleTimeBetweenPutsIsNotCounted)
{
    // Fast puts with long pauses between them (a ping-pong): still fast.
    PutRate r(1000.0, 4 * MiB, kNoProbe);
    uint64_t t = 0;
    for (int i = 0; i < 8; ++i) {
        serial(r, t, 1, MiB, 3000.0);
        t += 10000 * kUs;
    }
    EXPECT_FALSE(r.eager());
    EXPECT_NEAR(r.last_rate_mb_s(), 3000.0, 5.0);
}

TEST(BtlCreditPutRate, AWindowOfQueuedPutsIsMeasuredAsTheLinkRate)
{
    // 16 puts posted at once on a 3 GB/s link finish one after another: the
    // last waited 16 transfer times, but the rate is the link's.
    PutRate r(1000.0, 8 * MiB, kNoProbe);
    uint64_t t = 0;
    for (int i = 0; i < 16; ++i) r.started(t, MiB, false);
    const uint64_t each = static_cast<uint64_t>(MiB * 1e3 / 3000.0);
    for (int i = 0; i < 16; ++i) r.completed(t += each, MiB, false);
    EXPECT_FALSE(r.eager());
    EXPECT_NEAR(r.last_rate_mb_s(), 3000.0, 5.0);
}

TEST(BtlCreditPutRate, OneFastSampleAmongSlowOnesKeepsRendezvous)
{
    // Samples read low when the peer is slow to progress, never above the
    // link: one fast sample in the last three says the link is fast.
    PutRate r(250.0, 8 * MiB, 64 * MiB);
    uint64_t t = 0;
    serial(r, t, 8, MiB, 100.0);
    serial(r, t, 8, MiB, 2000.0);
    serial(r, t, 8, MiB, 100.0);
    EXPECT_FALSE(r.eager());
    serial(r, t, 8, MiB, 100.0);
    EXPECT_FALSE(r.eager());  // the fast one is still among the last three
    serial(r, t, 8, MiB, 100.0);
    EXPECT_TRUE(r.eager());
}

TEST(BtlCreditPutRate, UnmatchedCompletionIsIgnored)
{
    PutRate r(1000.0, MiB, kNoProbe);
    r.completed(5, 64 * MiB, false);
    EXPECT_EQ(r.samples(), 0u);
    EXPECT_FALSE(r.eager());
}

TEST(BtlCreditPutRate, EagerPutsAreProbedByRendezvousAndAFastLinkIsFound)
{
    PutRate r(1000.0, 8 * MiB, 64 * MiB);
    uint64_t t = 0;
    EXPECT_EQ(serial(r, t, 24, MiB, 200.0), 0);  // the first three samples, by rendezvous
    ASSERT_TRUE(r.eager());
    EXPECT_EQ(serial(r, t, 64, MiB, 200.0), 64); // 64 MiB eagerly (instant "completions" ignored)
    EXPECT_FALSE(r.next_eager());                // then a probe
    EXPECT_EQ(serial(r, t, 8, MiB, 200.0), 0);   // still slow: eager again, twice as long
    EXPECT_TRUE(r.next_eager());
    EXPECT_EQ(serial(r, t, 128, MiB, 200.0), 128);
    EXPECT_EQ(serial(r, t, 8, MiB, 3000.0), 0);  // the link became fast: rendezvous from now on
    EXPECT_FALSE(r.eager());
    EXPECT_EQ(serial(r, t, 100, MiB, 3000.0), 0);
    EXPECT_EQ(r.samples(), 17u);
}

// Each probe that finds the link slow doubles the eager stretch, up to
// kProbeGrowth x probe; a fast sample resets it, and the next slow verdict
// starts again from `probe`.
TEST(BtlCreditPutRate, ProbesBackOffWhileTheLinkStaysSlow)
{
    PutRate r(1000.0, 8 * MiB, 64 * MiB);
    uint64_t t = 0;
    EXPECT_EQ(serial(r, t, 24, MiB, 200.0), 0);
    ASSERT_TRUE(r.eager());
    uint64_t want = 64;
    for (int probe = 0; probe < 8; ++probe) {
        EXPECT_EQ(r.eager_stretch(), want * MiB) << "probe " << probe;
        EXPECT_EQ(serial(r, t, static_cast<int>(want), MiB, 200.0), static_cast<int>(want));
        EXPECT_FALSE(r.next_eager()) << "probe " << probe << " due after " << want << " MiB";
        EXPECT_EQ(serial(r, t, 8, MiB, 200.0), 0);
        want = want * 2 > 64 * PutRate::kProbeGrowth ? 64 * PutRate::kProbeGrowth : want * 2;
    }
    EXPECT_EQ(r.eager_stretch(), 64 * PutRate::kProbeGrowth * MiB);
    const int longest = static_cast<int>(64 * PutRate::kProbeGrowth);
    EXPECT_EQ(serial(r, t, longest, MiB, 3000.0), longest);  // the link turns fast during a stretch
    EXPECT_EQ(serial(r, t, 8, MiB, 3000.0), 0);  // the probe finds it: rendezvous, stretch back to `probe`
    EXPECT_FALSE(r.eager());
    EXPECT_EQ(r.eager_stretch(), 64 * MiB);
    EXPECT_EQ(serial(r, t, 24, MiB, 3000.0), 0);  // the fast sample ages out of the last three...
    EXPECT_EQ(serial(r, t, 24, MiB, 200.0), 0);   // ...then three slow ones: eager again
    ASSERT_TRUE(r.eager());
    EXPECT_EQ(serial(r, t, 64, MiB, 200.0), 64);  // from the first stretch
    EXPECT_FALSE(r.next_eager());
}

// Property: for random overlapping put streams on a link of a fixed rate
// (each put needs bytes/rate of the link, FIFO), every sample's rate equals
// the link's and the choice is rate < threshold.
TEST(BtlCreditPutRate, RandomOverlappingStreamsMeasureTheLink)
{
    std::mt19937_64 rng(21);
    for (int trial = 0; trial < 200; ++trial) {
        const double link = std::uniform_real_distribution<double>(50.0, 5000.0)(rng);
        const double threshold = std::uniform_real_distribution<double>(0.0, 6000.0)(rng);
        PutRate r(threshold, 4 * MiB, kNoProbe);
        uint64_t t = 0, link_free = 0;
        std::vector<std::pair<uint64_t, uint64_t>> inflight;  // (finish time, bytes), FIFO
        for (int step = 0; step < 400; ++step) {
            const bool post = inflight.empty() || (inflight.size() < 16 && (rng() & 1));
            if (post) {
                const uint64_t bytes = (1 + rng() % 8) * 128 * 1024;
                if (inflight.empty() && (rng() % 4 == 0)) t += rng() % (1000 * kUs);  // idle gap
                r.started(t, bytes, false);
                const uint64_t begin = link_free > t ? link_free : t;
                link_free = begin + static_cast<uint64_t>(bytes * 1e3 / link);
                inflight.emplace_back(link_free, bytes);
            } else {
                auto [done, bytes] = inflight.front();
                inflight.erase(inflight.begin());
                t = done;
                const uint64_t before = r.samples();
                r.completed(t, bytes, false);
                if (r.samples() != before) {
                    ASSERT_NEAR(r.last_rate_mb_s(), link, link * 0.01 + 1.0) << "trial " << trial;
                    ASSERT_EQ(r.eager(), threshold > 0 && r.samples() >= PutRate::kKeep &&
                                             r.last_rate_mb_s() < threshold);
                }
            }
        }
    }
}
