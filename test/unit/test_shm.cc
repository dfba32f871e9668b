// Shared-memory ring and segments (common/shm): order and content of
// messages across wrap-arounds, a full ring refusing and recovering,
// random sizes against a model, two processes through a memfd segment
// mapped by /proc, and single-copy reads and writes between processes.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "common/shm/shm_ring.h"
#include "common/shm/shm_segment.h"
#include "common/shm/shm_cma_cost.h"

using namespace rdrp::shm;

namespace {

struct Msg {
    uint16_t id;
    std::string hdr, payload;
};

std::string bytes(std::mt19937 &rng, size_t n)
{
    std::string s(n, '\0');
    for (auto &c : s) c = static_cast<char>(rng());
    return s;
}

struct LocalRing {
    explicit LocalRing(size_t size) : size(size), mem(ring_bytes(size) + 64, 0)
    {
        base = mem.data() + (64 - reinterpret_cast<uintptr_t>(mem.data()) % 64) % 64;
        ring_init(base, size);
        prod.attach(base, size);
        cons.attach(base, size);
    }
    size_t size;
    std::vector<char> mem;
    char *base;
    RingProducer prod;
    RingConsumer cons;
};

}  // namespace

TEST(ShmRing, FreshRingIsEmpty)
{
    LocalRing r(4096);
    EXPECT_FALSE(r.cons.ready());
    EXPECT_EQ(r.cons.poll([](uint16_t, const void *, size_t, const void *, size_t) { FAIL(); }), 0u);
}

TEST(ShmRing, MessagesArriveInOrderWithHeaderAndPayload)
{
    LocalRing r(4096);
    ASSERT_TRUE(r.prod.push(3, "hdr", 3, "payload!", 8));
    ASSERT_TRUE(r.prod.push(4, nullptr, 0, "x", 1));
    ASSERT_TRUE(r.prod.push(5, "h", 1, nullptr, 0));
    std::vector<Msg> got;
    unsigned n = r.cons.poll([&](uint16_t id, const void *h, size_t hl, const void *p, size_t pl) {
        got.push_back({id, std::string(static_cast<const char *>(h), hl), std::string(static_cast<const char *>(p), pl)});
    });
    ASSERT_EQ(n, 3u);
    EXPECT_EQ(got[0].id, 3);
    EXPECT_EQ(got[0].hdr, "hdr");
    EXPECT_EQ(got[0].payload, "payload!");
    EXPECT_EQ(got[1].id, 4);
    EXPECT_EQ(got[1].hdr, "");
    EXPECT_EQ(got[1].payload, "x");
    EXPECT_EQ(got[2].hdr, "h");
    EXPECT_EQ(got[2].payload, "");
}

TEST(ShmRing, FullRingRefusesUntilTheConsumerReads)
{
    LocalRing r(4096);
    std::string big(1000, 'a');
    int pushed = 0;
    while (r.prod.push(1, nullptr, 0, big.data(), big.size())) ++pushed;
    /* a lap holds 4096 / entry entries, one fewer when a skip marker ends it */
    const int fit = static_cast<int>(4096 / rdrp::shm::entry_bytes(rdrp::shm::message_bytes(0, big.size())));
    EXPECT_GE(pushed, fit - 1);
    EXPECT_LE(pushed, fit);
    EXPECT_GE(pushed, 1);
    EXPECT_FALSE(r.prod.has_room(0, big.size()));
    unsigned n = r.cons.poll([](uint16_t, const void *, size_t, const void *, size_t) {}, 1);
    EXPECT_EQ(n, 1u);
    EXPECT_TRUE(r.prod.has_room(0, big.size()));
    EXPECT_TRUE(r.prod.push(1, nullptr, 0, big.data(), big.size()));
}

// The producer sees the consumer as drained exactly when it has read
// every message pushed (pml/rdrp counts a credit wait only from then):
// random pushes and partial reads across wrap-arounds and rewinds.
TEST(ShmRing, DrainedExactlyWhenTheConsumerReadEverything)
{
    LocalRing r(4096);
    EXPECT_TRUE(r.prod.drained());
    std::mt19937 rng(7);
    size_t unread = 0;
    for (int step = 0; step < 20000; ++step) {
        if (rng() % 2) {
            std::string p = bytes(rng, rng() % 700);
            if (r.prod.push(1, nullptr, 0, p.data(), p.size())) ++unread;
        } else {
            unsigned max = 1 + rng() % 4;
            unread -= r.cons.poll([](uint16_t, const void *, size_t, const void *, size_t) {}, max);
        }
        ASSERT_EQ(r.prod.drained(), unread == 0) << "step " << step << ", " << unread << " unread";
    }
}

// unread_at_least(k) (pml/rdrp's "peer busy" test) counts unread
// messages, whatever their size: one large message is one, skip markers
// none.  Property: it agrees with a model of the consumer's position under
// random traffic of random sizes (rewinds and wraps included).
TEST(ShmRing, UnreadAtLeastCountsMessagesNotBytes)
{
    LocalRing r(1 << 14);
    const unsigned K = RingProducer::kRecentPushes;
    for (unsigned k = 1; k <= K; ++k) EXPECT_FALSE(r.prod.unread_at_least(k));
    char small[8] = {}, big[3000] = {};
    ASSERT_TRUE(r.prod.push(1, small, sizeof(small), big, sizeof(big)));  // 48 lines, one message
    EXPECT_TRUE(r.prod.unread_at_least(1));
    EXPECT_FALSE(r.prod.unread_at_least(2));
    ASSERT_TRUE(r.prod.push(1, small, sizeof(small), nullptr, 0));
    ASSERT_TRUE(r.prod.push(1, small, sizeof(small), nullptr, 0));
    EXPECT_TRUE(r.prod.unread_at_least(3));
    EXPECT_FALSE(r.prod.unread_at_least(4));
    r.cons.poll([](uint16_t, const void *, size_t, const void *, size_t) {}, 1);
    EXPECT_TRUE(r.prod.unread_at_least(2));
    EXPECT_FALSE(r.prod.unread_at_least(3));
    r.cons.poll([](uint16_t, const void *, size_t, const void *, size_t) {});
    EXPECT_FALSE(r.prod.unread_at_least(1));
    std::mt19937 rng(11);
    size_t unread = 0;
    for (int step = 0; step < 20000; ++step) {
        if (rng() % 2) {
            std::string p = bytes(rng, rng() % 2 ? rng() % 100 : rng() % 3000);
            if (r.prod.push(1, nullptr, 0, p.data(), p.size())) ++unread;
        } else {
            unread -= r.cons.poll([](uint16_t, const void *, size_t, const void *, size_t) {}, 1 + rng() % 4);
        }
        for (unsigned k = 1; k <= K; ++k)
            ASSERT_EQ(r.prod.unread_at_least(k), unread >= k) << "step " << step << ", k " << k << ", " << unread;
    }
}

// A consumer that keeps up: the producer goes back to the start of the
// ring instead of walking all of it (fresh pages, cold lines), and a
// stream that outruns its consumer still uses the whole ring.
TEST(ShmRing, ConsumerThatKeepsUpUsesTheStartOfTheRing)
{
    LocalRing r(1 << 20);
    size_t max_off = 0;
    uint64_t n = 0;
    for (int i = 0; i < 100000; ++i) {
        uint64_t v = static_cast<uint64_t>(i);
        ASSERT_TRUE(r.prod.push(1, nullptr, 0, &v, sizeof(v)));
        max_off = std::max(max_off, r.prod.offset());
        r.cons.poll([&](uint16_t, const void *, size_t, const void *p, size_t pl) {
            uint64_t got;
            ASSERT_EQ(pl, sizeof(got));
            std::memcpy(&got, p, sizeof(got));
            EXPECT_EQ(got, n);
            ++n;
        });
    }
    EXPECT_EQ(n, 100000u);
    EXPECT_LE(max_off, 2 * rdrp::shm::kRewindAt) << "a drained ring was walked to offset " << max_off;

    /* outrun: 700 messages of 512 B with nobody reading fill far beyond
     * the rewind point */
    LocalRing s(1 << 20);
    std::string pl(512, 'x');
    int pushed = 0;
    while (pushed < 700 && s.prod.push(1, nullptr, 0, pl.data(), pl.size())) ++pushed;
    EXPECT_EQ(pushed, 700);
    EXPECT_GT(s.prod.offset(), 700u * 512u);
}

// A consumer that drains between bursts (osu_bw: 64 small messages, then
// the receiver's reply) must let the ring rewind too, whatever the burst
// length: a burst of exactly kRewindAt bytes once phase-locked the drain
// check to the middle of every burst, so the producer walked (and faulted
// in) the whole 1 MiB ring for the first 16384 messages of a job.
TEST(ShmRing, BurstsThatDrainBetweenThemRewind)
{
    for (size_t burst : {64u, 16u, 100u})
    for (size_t entry : {64u, 128u, 1088u})
        for (int prefix : {0, 1, 17}) {  /* earlier traffic shifts the phase */
            LocalRing r(1 << 20);
            size_t pl = entry - 16, max_off = 0, late_max = 0;
            std::string payload(pl, 'b');
            for (int i = 0; i < prefix; ++i) {
                ASSERT_TRUE(r.prod.push(1, nullptr, 0, payload.data(), 8));
                r.cons.poll([](uint16_t, const void *, size_t, const void *, size_t) {});
            }
            const int bursts = 400;
            for (int b = 0; b < bursts; ++b) {
                for (size_t i = 0; i < burst; ++i) {
                    ASSERT_TRUE(r.prod.push(1, nullptr, 0, payload.data(), payload.size()));
                    max_off = std::max(max_off, r.prod.offset());
                    if (b >= bursts / 2) late_max = std::max(late_max, r.prod.offset());
                }
                r.cons.poll([](uint16_t, const void *, size_t, const void *, size_t) {}, 1u << 20);
                r.prod.hint_drained();  /* the reply of the consumer */
            }
            /* the ring settles at its start within a bounded number of bursts */
            const size_t stride = rdrp::shm::entry_bytes(rdrp::shm::message_bytes(0, pl));
            EXPECT_LE(late_max, burst * stride + 2 * rdrp::shm::kRewindAt + stride)
                << "burst " << burst << " x " << entry << " B, prefix " << prefix
                << ": walked to offset " << late_max;
            EXPECT_LT(max_off, size_t(1) << 19) << "burst " << burst << " x " << entry << " B";
        }
}

// A rewind leaves room for only the bytes before it in the lap until the
// consumer has read the skip marker.  osu_bibw sends a window of 64
// one-line messages (plus a credit packet) while its peer is busy sending
// its own: with the rewind at 4 KiB the 65th found the ring "full" and the
// window waited in the sender's backlog (MPI_T pml_rdrp_shm_backlogged 65
// in the first windows of a run).  Whatever the drained offset, a burst of
// 128 one-line messages after a rewind fits without the consumer's help.
TEST(ShmRing, ARewindLeavesRoomForAWindowOfSmallMessages)
{
    for (size_t prefix = 1; prefix <= 2 * rdrp::shm::kRewindAt / 64 + 2; ++prefix)
        for (bool hinted : {false, true}) {
            LocalRing r(1 << 20);
            uint64_t v = 0;
            for (size_t i = 0; i < prefix; ++i) ASSERT_TRUE(r.prod.push(1, nullptr, 0, &v, sizeof(v)));
            r.cons.poll([](uint16_t, const void *, size_t, const void *, size_t) {}, 1u << 20);
            if (hinted) r.prod.hint_drained();
            for (int i = 0; i < 128; ++i)
                ASSERT_TRUE(r.prod.push(1, nullptr, 0, &v, sizeof(v)))
                    << "message " << i << " of a burst after " << prefix << " drained lines"
                    << (hinted ? " (hinted)" : "");
        }
}

// Property: any sequence of random-size messages, consumed in random
// batches, arrives complete and in order, across many wrap-arounds; the
// ring accepts a message whenever the model says there is room for it.
TEST(ShmRing, RandomSizesAgainstAModel)
{
    for (unsigned seed = 1; seed <= 20; ++seed) {
        std::mt19937 rng(seed);
        LocalRing r(8192);
        std::deque<Msg> model;
        size_t sent = 0, received = 0;
        for (int step = 0; step < 5000; ++step) {
            if (rng() % 3 != 0) {
                /* one in four around and above kAlignPayloadMin: padded entries */
                size_t plen = rng() % 4 ? rng() % 1500 : kAlignPayloadMin - 8 + rng() % 1500;
                Msg m{static_cast<uint16_t>(rng() % 100), bytes(rng, rng() % 40), bytes(rng, plen)};
                if (r.prod.push(m.id, m.hdr.data(), m.hdr.size(), m.payload.data(), m.payload.size())) {
                    model.push_back(m);
                    ++sent;
                } else {
                    ASSERT_FALSE(model.empty()) << "an empty ring refused a message";
                }
            } else {
                r.cons.poll(
                    [&](uint16_t id, const void *h, size_t hl, const void *p, size_t pl) {
                        ASSERT_FALSE(model.empty());
                        const Msg &e = model.front();
                        EXPECT_EQ(id, e.id);
                        EXPECT_EQ(std::string(static_cast<const char *>(h), hl), e.hdr);
                        EXPECT_EQ(std::string(static_cast<const char *>(p), pl), e.payload);
                        if (pl >= kAlignPayloadMin) {
                            EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
                        }
                        model.pop_front();
                        ++received;
                    },
                    1 + rng() % 8);
            }
        }
        r.cons.poll([&](uint16_t, const void *, size_t, const void *, size_t) {
            model.pop_front();
            ++received;
        }, 1u << 30);
        EXPECT_TRUE(model.empty());
        EXPECT_EQ(sent, received);
        EXPECT_GT(sent, 1000u) << "seed " << seed;
    }
}

// A payload of at least kAlignPayloadMin bytes starts on a cache line
// (the ring's data area is line-aligned), whatever the header length,
// through push() and reserve()/commit(); a shorter one follows its header
// with no padding.  Header and payload arrive with their exact lengths.
TEST(ShmRing, LargePayloadsStartOnACacheLine)
{
    LocalRing r(1 << 16);
    std::mt19937 rng(5);
    for (size_t hlen = 0; hlen <= 80; ++hlen)
        for (size_t plen : {size_t(0), size_t(100), kAlignPayloadMin - 1, kAlignPayloadMin, kAlignPayloadMin + 1,
                            size_t(8192)}) {
            Msg m{7, bytes(rng, hlen), bytes(rng, plen)};
            if (hlen % 2) {
                ASSERT_TRUE(r.prod.push(m.id, m.hdr.data(), hlen, m.payload.data(), plen));
            } else {
                char *body = r.prod.reserve(hlen, plen);
                ASSERT_NE(body, nullptr);
                std::memcpy(body, m.hdr.data(), hlen);
                std::memcpy(RingProducer::payload_at(body, hlen, plen), m.payload.data(), plen);
                r.prod.commit(m.id, hlen, plen);
            }
            unsigned n = r.cons.poll([&](uint16_t id, const void *h, size_t hl, const void *p, size_t pl) {
                EXPECT_EQ(id, m.id);
                EXPECT_EQ(std::string(static_cast<const char *>(h), hl), m.hdr);
                EXPECT_EQ(std::string(static_cast<const char *>(p), pl), m.payload);
                if (plen >= kAlignPayloadMin)
                    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << "hlen " << hlen << " plen " << plen;
                else
                    EXPECT_EQ(static_cast<const char *>(p), static_cast<const char *>(h) + hl);
            });
            ASSERT_EQ(n, 1u) << "hlen " << hlen << " plen " << plen;
        }
}

// copy_bytes_nt (non-temporal stores for the payload of a stream): every
// size around the line and the 2 KiB threshold, from every source
// misalignment, to a line-aligned destination: exactly n bytes, nothing
// written past them; and through fill() with non_temporal set, the consumer
// reads what was sent.
TEST(ShmRing, NonTemporalCopyIsExactAndFillUsesIt)
{
    std::mt19937 rng(9);
    std::vector<char> dstmem(20000 + 128), srcmem(20000 + 64);
    char *dst = dstmem.data() + (64 - reinterpret_cast<uintptr_t>(dstmem.data()) % 64) % 64;
    for (size_t n : {size_t(0), size_t(1), size_t(63), size_t(64), size_t(65), size_t(2047), size_t(2048),
                     size_t(2049), size_t(4096 + 17), size_t(16384)})
        for (size_t mis : {size_t(0), size_t(1), size_t(8), size_t(33)}) {
            std::string src = bytes(rng, n);
            std::memcpy(srcmem.data() + mis, src.data(), n);
            std::memset(dst, 0x5A, n + 64);
            copy_bytes_nt(dst, srcmem.data() + mis, n);
            ASSERT_EQ(std::string(dst, n), src) << n << " " << mis;
            ASSERT_EQ(std::string(dst + n, 64), std::string(64, '\x5A')) << n << " " << mis;
        }
    LocalRing r(1 << 16);
    for (size_t plen : {size_t(100), kStreamNonTemporalMin - 1, kStreamNonTemporalMin, size_t(8191), size_t(16384)}) {
        std::string pay = bytes(rng, plen), hdr = bytes(rng, 32);
        char *body = r.prod.reserve(32, plen);
        ASSERT_NE(body, nullptr);
        RingProducer::fill(body, 32, pay.data(), plen, [&](char *at) { std::memcpy(at, hdr.data(), 32); }, true);
        r.prod.commit(5, 32, plen);
        unsigned n = r.cons.poll([&](uint16_t id, const void *h, size_t hl, const void *p, size_t pl) {
            EXPECT_EQ(id, 5);
            EXPECT_EQ(std::string(static_cast<const char *>(h), hl), hdr);
            EXPECT_EQ(std::string(static_cast<const char *>(p), pl), pay) << plen;
        });
        ASSERT_EQ(n, 1u);
    }
}

// push() with non-temporal stores (a backlog's messages, written as a
// direct send would be) delivers the same bytes: line-aligned payloads of
// several sizes with a tail past the last 16 bytes, through laps.
TEST(ShmRing, NonTemporalPushDeliversTheBytes)
{
    LocalRing r(1 << 16);
    std::mt19937 rng(11);
    for (int i = 0; i < 300; ++i) {
        const size_t plen = std::uniform_int_distribution<size_t>(128, 12000)(rng);
        std::string payload(plen, '\0');
        for (auto &c : payload) c = static_cast<char>(rng());
        const char hdr[32] = {static_cast<char>(i)};
        ASSERT_TRUE(r.prod.push(7, hdr, sizeof(hdr), payload.data(), plen, true));
        unsigned n = r.cons.poll([&](uint16_t id, const void *h, size_t hlen, const void *pl, size_t got) {
            EXPECT_EQ(id, 7);
            ASSERT_EQ(hlen, sizeof(hdr));
            EXPECT_EQ(static_cast<const char *>(h)[0], static_cast<char>(i));
            ASSERT_EQ(got, plen);
            EXPECT_EQ(std::memcmp(pl, payload.data(), plen), 0) << "message " << i << " of " << plen << " B";
        });
        ASSERT_EQ(n, 1u);
    }
    EXPECT_EQ(r.cons.error(), nullptr);
}

// Entries of kTrailGapMin..kTrailGapBelow message bytes are followed by
// kTrailGap bytes nobody writes (what a consumer's prefetcher may read
// ahead into while the producer writes the next entry): the sizes around
// the bounds, and one lap of random sizes with a consumer that lags
// behind by a random amount (never draining, so the ring does not rewind
// and every byte is written at most once): every gap still holds what the
// ring was filled with when its entry is read.
TEST(ShmRing, TrailingGapIsLeftUnwritten)
{
    using rdrp::shm::kTrailGap;
    using rdrp::shm::kTrailGapBelow;
    using rdrp::shm::kTrailGapMin;
    using rdrp::shm::message_bytes;
    EXPECT_EQ(entry_bytes(kTrailGapMin - 1), (16 + kTrailGapMin - 1 + 63) / 64 * 64);
    EXPECT_EQ(entry_bytes(kTrailGapMin), (16 + kTrailGapMin + 63) / 64 * 64 + kTrailGap);
    EXPECT_EQ(entry_bytes(kTrailGapBelow - 1), (16 + kTrailGapBelow - 1 + 63) / 64 * 64 + kTrailGap);
    EXPECT_EQ(entry_bytes(kTrailGapBelow), (16 + kTrailGapBelow + 63) / 64 * 64);

    const size_t size = 1 << 20;
    LocalRing r(size);
    char *data = r.base + rdrp::shm::kRingOverhead;
    std::memset(data, 0x5a, size);
    std::mt19937 rng(7);
    size_t sent = 0, got = 0, gaps = 0, bytes = 0;
    std::string payload(kTrailGapBelow, 'p');
    std::vector<size_t> lens;  /* payload bytes of every message, in order */
    auto take = [&](size_t max) {
        r.cons.poll([&](uint16_t id, const void *, size_t hlen, const void *pl, size_t plen) {
            const size_t i = got++;
            EXPECT_EQ(id, 1);
            EXPECT_EQ(hlen, 0u);
            EXPECT_EQ(plen, lens[i]);
            const size_t len = message_bytes(0, plen);
            if (len < kTrailGapMin || len >= kTrailGapBelow) return;
            /* the entry's lines end on a line; its gap follows them */
            const size_t end = static_cast<size_t>(static_cast<const char *>(pl) + plen - data);
            const char *gap = data + ((end + 63) & ~size_t(63));
            size_t written = 0;
            for (size_t k = 0; k < kTrailGap; ++k) written += gap[k] != 0x5a;
            EXPECT_EQ(written, 0u) << "message " << i << " of " << plen << " B";
            ++gaps;
        }, static_cast<unsigned>(max));
    };
    while (bytes < size / 2) {
        size_t plen = std::uniform_int_distribution<size_t>(kTrailGapMin - 100, kTrailGapBelow - 48)(rng);
        ASSERT_TRUE(r.prod.push(1, nullptr, 0, payload.data(), plen));
        lens.push_back(plen);
        ++sent;
        bytes += entry_bytes(message_bytes(0, plen));
        if (sent - got > 1 && rng() % 2) take(std::uniform_int_distribution<size_t>(0, sent - got - 1)(rng));
    }
    take(sent);
    EXPECT_EQ(got, sent);
    EXPECT_GT(gaps, sent / 2);
    EXPECT_EQ(r.cons.error(), nullptr);
}

// Messages whose entry fits in half a line share lines: two of pml/rdrp's
// compact eager messages (8-byte header, up to 8 bytes of payload) per
// line; a larger message behind one in a line's first half starts on the
// next line (a skip marker fills the gap), with its payload still
// line-aligned; everything arrives in order, intact, through laps, wraps
// and rewinds, with a consumer that lags behind by a random amount.
TEST(ShmRing, HalfLineEntriesShareLinesAndLargerOnesStayOnLines)
{
    EXPECT_EQ(entry_bytes(16), 32u);
    EXPECT_EQ(entry_bytes(17), 64u);
    EXPECT_EQ(entry_bytes(0), 32u);
    {
        LocalRing r(4096);
        const size_t before = r.prod.offset();
        ASSERT_TRUE(r.prod.push(1, "12345678", 8, "abcdefgh", 8));
        EXPECT_EQ(r.prod.offset(), before + 32) << "a 16-byte message takes half a line";
        ASSERT_TRUE(r.prod.push(1, "12345678", 8, "abcdefgh", 8));
        EXPECT_EQ(r.prod.offset(), before + 64) << "two of them one line";
        ASSERT_TRUE(r.prod.push(2, "12345678", 8, "x", 1));
        ASSERT_TRUE(r.prod.push(3, "hdr", 3, "a longer payload", 16));
        EXPECT_EQ(r.prod.offset(), before + 192) << "filler, then a line of its own";
        EXPECT_EQ(r.cons.poll([](uint16_t, const void *, size_t, const void *, size_t) {}), 4u);
        EXPECT_EQ(r.cons.error(), nullptr);
    }
    LocalRing r(8192);
    std::mt19937 rng(11);
    std::deque<Msg> sent;
    uint64_t pushed = 0, got = 0;
    while (got < 20000) {
        for (unsigned k = rng() % 40; k > 0; --k) {
            unsigned kind = rng() % 8;
            size_t hlen = kind < 5 ? 8 : rng() % 40;
            size_t plen = kind < 5 ? rng() % 9 : (kind == 5 ? 130 + rng() % 300 : rng() % 100);
            Msg m{static_cast<uint16_t>(1 + rng() % 100), bytes(rng, hlen), bytes(rng, plen)};
            if (!r.prod.push(m.id, m.hdr.data(), hlen, m.payload.data(), plen)) break;
            sent.push_back(m);
            ++pushed;
        }
        if (rng() % 3 == 0) r.prod.hint_drained();
        unsigned max = 1 + rng() % 64;
        r.cons.poll(
            [&](uint16_t id, const void *h, size_t hl, const void *p, size_t pl) {
                ASSERT_FALSE(sent.empty());
                const Msg &m = sent.front();
                EXPECT_EQ(id, m.id);
                EXPECT_EQ(std::string(static_cast<const char *>(h), hl), m.hdr);
                EXPECT_EQ(std::string(static_cast<const char *>(p), pl), m.payload);
                if (pl >= kAlignPayloadMin) EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
                if (sizeof(EntryHeader) + hl + pl > kHalfLine)
                    EXPECT_EQ((reinterpret_cast<uintptr_t>(h) - sizeof(EntryHeader)) % 64, 0u) << hl << " " << pl;
                sent.pop_front();
                ++got;
            },
            max);
        ASSERT_EQ(r.cons.error(), nullptr);
    }
    EXPECT_GT(pushed, 20000u);
}

// pml/rdrp's eager messages (a 32-byte match header) of 128 B and more
// have their payload on a line: an unpadded one started 48 bytes into the
// entry's first line and every copy out of the ring straddled lines (OSU
// over pml/rdrp: latency 256 B 0.19 against 0.15 us padded, mbw_mr 512 B
// 0.91 against 1.45 GB/s).  For power-of-two payloads the padding costs no
// line: header and padding fill the first line the header needed anyway.
TEST(ShmRing, PayloadsFrom128BytesBehindA32ByteHeaderStartOnALine)
{
    EXPECT_LE(kAlignPayloadMin, 128u);
    for (size_t plen = 128; plen <= 65536; plen *= 2) {
        EXPECT_EQ((sizeof(EntryHeader) + 32 + payload_pad(32, plen)) % 64, 0u) << plen;
        EXPECT_EQ(entry_bytes(message_bytes(32, plen)), entry_bytes(32 + plen)) << plen;
    }
}

// fill() writes the entry's first line last: when the header is written,
// the payload past that line is already in place and the payload's bytes
// in that line are not yet (the consumer polls the first line; each write
// to it after a read moves the line between the cores again).
TEST(ShmRing, FillWritesTheFirstLineLast)
{
    LocalRing r(1 << 16);
    for (size_t hlen : {size_t(0), size_t(8), size_t(24), size_t(32), size_t(47)})
        for (size_t plen : {size_t(1), size_t(16), size_t(100), size_t(127), size_t(128), size_t(1000)}) {
            std::string pay(plen, '\0');
            for (size_t i = 0; i < plen; ++i) pay[i] = static_cast<char>(1 + i % 250);
            char *body = r.prod.reserve(hlen, plen);
            ASSERT_NE(body, nullptr);
            char *pl = RingProducer::payload_at(body, hlen, plen);
            std::memset(pl, 0, plen);
            const char *line_end = body - sizeof(EntryHeader) + 64;
            size_t head = pl < line_end ? std::min(plen, size_t(line_end - pl)) : 0;
            bool called = false;
            RingProducer::fill(body, hlen, pay.data(), plen, [&](char *at) {
                called = true;
                EXPECT_EQ(at, body);
                EXPECT_EQ(std::string(pl + head, plen - head), pay.substr(head)) << hlen << " " << plen;
                EXPECT_EQ(std::string(pl, head), std::string(head, '\0')) << hlen << " " << plen;
            });
            EXPECT_TRUE(called);
            EXPECT_EQ(std::string(pl, plen), pay);
            r.prod.commit(1, hlen, plen);
            r.cons.poll([](uint16_t, const void *, size_t, const void *, size_t) {});
        }
}

// The consumer's padding of an entry is the producer's, for every header
// and payload length around the threshold (the entry records neither).
TEST(ShmRing, PaddingIsRecoveredFromTheEntryLength)
{
    for (size_t hlen = 0; hlen < 200; ++hlen)
        for (size_t plen = 0; plen < 3 * kAlignPayloadMin; plen += (plen + 100 < kAlignPayloadMin ? 97 : 1)) {
            size_t len = message_bytes(hlen, plen);
            ASSERT_EQ(pad_of_entry(hlen, len), payload_pad(hlen, plen)) << hlen << " " << plen;
            ASSERT_EQ(len - hlen - pad_of_entry(hlen, len), plen);
        }
}

// Two processes: the parent creates a segment with a ring, the child maps
// it through /proc and streams 5000 messages of random size; the parent
// checks each one (sequence number and a checksum of the payload).
TEST(ShmSegment, TwoProcessesThroughARing)
{
    const size_t size = 16384;
    Segment seg;
    std::string err;
    ASSERT_TRUE(segment_create(ring_bytes(size), &seg, &err)) << err;
    ring_init(seg.base, size);
    RingConsumer cons;
    cons.attach(seg.base, size);
    int ppid = getpid(), fd = seg.fd;
    const int count = 5000;
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        Segment mine;
        std::string e;
        if (!segment_attach(ppid, fd, ring_bytes(size), &mine, &e)) _exit(2);
        RingProducer prod;
        prod.attach(mine.base, size);
        std::mt19937 rng(7);
        for (int i = 0; i < count; ++i) {
            std::string p = bytes(rng, rng() % 3000);
            uint32_t sum = 0;
            for (unsigned char c : p) sum = sum * 31 + c;
            uint32_t hdr[2] = {static_cast<uint32_t>(i), sum};
            while (!prod.push(9, hdr, sizeof(hdr), p.data(), p.size())) {}
        }
        _exit(0);
    }
    int got = 0, bad = 0;
    while (got < count) {
        cons.poll([&](uint16_t id, const void *h, size_t hl, const void *p, size_t pl) {
            uint32_t hdr[2];
            if (id != 9 || hl != sizeof(hdr)) {
                ++bad;
                return;
            }
            std::memcpy(hdr, h, sizeof(hdr));
            uint32_t sum = 0;
            for (size_t i = 0; i < pl; ++i) sum = sum * 31 + static_cast<const unsigned char *>(p)[i];
            if (hdr[0] != static_cast<uint32_t>(got) || hdr[1] != sum) ++bad;
            ++got;
        });
    }
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_EQ(bad, 0);
    segment_release(&seg);
}

TEST(ShmSegment, SingleCopyReadAndWriteOfAnotherProcess)
{
    // the child's buffer lives at the same virtual address as ours (fork)
    std::vector<char> buf(1 << 20);
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<char>(i * 7);
    int go[2], done[2];
    ASSERT_EQ(pipe(go), 0);
    ASSERT_EQ(pipe(done), 0);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        char c;
        for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<char>(i * 13);
        if (write(done[1], "r", 1) != 1) _exit(3);
        if (read(go[0], &c, 1) != 1) _exit(3);  // the parent has written into us
        for (size_t i = 0; i < 4096; ++i)
            if (buf[i] != 'w') _exit(4);
        _exit(0);
    }
    char c;
    ASSERT_EQ(read(done[0], &c, 1), 1);
    std::vector<char> got(buf.size());
    ASSERT_EQ(cma_read(child, got.data(), reinterpret_cast<uint64_t>(buf.data()), got.size()), 0);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], static_cast<char>(i * 13)) << i;
    std::string w(4096, 'w');
    ASSERT_EQ(cma_write(child, reinterpret_cast<uint64_t>(buf.data()), w.data(), w.size()), 0);
    ASSERT_EQ(write(go[1], "g", 1), 1);
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    // a bad address is an error, not a crash
    EXPECT_NE(cma_read(getpid(), got.data(), 16, 64), 0);
}

// cma_check: a peer is who it says only if the word it names reads as it
// says (btl/credit writes into windows by CMA only after it).
TEST(ShmSegment, CmaCheckNeedsTheExpectedWordAtThatPid)
{
    static volatile uint64_t word = 0x5eed5eed12345678ull;
    const uint64_t addr = reinterpret_cast<uintptr_t>(&word);
    EXPECT_TRUE(cma_check(getpid(), addr, word));
    EXPECT_FALSE(cma_check(getpid(), addr, word + 1)) << "another value there: another process";
    EXPECT_FALSE(cma_check(getpid(), 16, word)) << "an unmapped address";
    EXPECT_FALSE(cma_check(0, addr, word));
    EXPECT_FALSE(cma_check(-1, addr, word));
}

// The consumer reads entry headers another process wrote.  It used their
// length and header length as they were: a forged length handed out bytes
// past the ring (and a skip marker of any length moved the head anywhere).
// Now every entry passes check_entry first; a bad one stops the ring.
namespace {
void forge(LocalRing &r, uint32_t len, uint16_t id, uint16_t hlen)
{
    auto *e = reinterpret_cast<EntryHeader *>(r.base + kRingOverhead + (r.cons.position() & (r.size - 1)));
    e->len = len;
    e->id = id;
    e->hlen = hlen;
    e->pos.store(r.cons.position(), std::memory_order_release);
}
unsigned poll_count(LocalRing &r)
{
    return r.cons.poll([](uint16_t, const void *, size_t, const void *, size_t) {});
}
}  // namespace

TEST(ShmRingHostile, EntryLongerThanTheRingIsRejected)
{
    LocalRing r(4096);
    forge(r, 1u << 30, 1, 0);
    EXPECT_EQ(poll_count(r), 0u);
    ASSERT_NE(r.cons.error(), nullptr);
    EXPECT_FALSE(r.cons.ready()) << "a stopped ring offers nothing more";
}

TEST(ShmRingHostile, HeaderLongerThanTheEntryIsRejected)
{
    LocalRing r(4096);
    forge(r, 8, 1, 100);
    EXPECT_EQ(poll_count(r), 0u);
    EXPECT_NE(r.cons.error(), nullptr);
}

TEST(ShmRingHostile, SkipMarkerMustEndAtTheEndOfTheRing)
{
    LocalRing r(4096);
    forge(r, 100, kSkip, 0);
    EXPECT_EQ(poll_count(r), 0u);
    EXPECT_NE(r.cons.error(), nullptr);
}

TEST(ShmRingHostile, EntryRunningPastTheEndIsRejected)
{
    LocalRing r(4096);
    std::string p(400, 'x');  // 448 message bytes: 512-byte entries, no trailing gap
    ASSERT_EQ(rdrp::shm::entry_bytes(rdrp::shm::message_bytes(0, p.size())), 512u);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(r.prod.push(1, nullptr, 0, p.data(), p.size()));
    EXPECT_EQ(poll_count(r), 5u);  // the head is now 2.5 KiB into the lap
    forge(r, 1600, 1, 0);          // fits max_message(), not the rest of the lap
    EXPECT_EQ(poll_count(r), 0u);
    EXPECT_NE(r.cons.error(), nullptr);
}

// The poll checks only an entry's fields (check_entry_fields): where it
// reads comes from its own head, which attach() checks once because it is
// shared memory too.  A head off the 32-byte grid (an entry read there
// would straddle two) stops the ring before anything is handed out.
TEST(ShmRingHostile, HeadOffTheGridAtAttachIsRejected)
{
    LocalRing r(4096);
    for (uint64_t bad : {uint64_t(4096 + 8), uint64_t(4096 + 48), uint64_t(4096 + 31)}) {
        reinterpret_cast<RingControl *>(r.base)->head.store(bad);
        RingConsumer c;
        c.attach(r.base, r.size);
        EXPECT_NE(c.error(), nullptr) << bad;
        EXPECT_EQ(c.poll([](uint16_t, const void *, size_t, const void *, size_t) {}), 0u) << bad;
    }
    reinterpret_cast<RingControl *>(r.base)->head.store(4096 + 96);
    RingConsumer ok;
    ok.attach(r.base, r.size);
    EXPECT_EQ(ok.error(), nullptr) << "the grid is 32 bytes: a half-line entry may start in a line's second half";
    for (size_t size : {size_t(64), size_t(4096 + 64), size_t(0)}) EXPECT_NE(check_ring_place(0, size), nullptr) << size;
}

// Half-line entries: a skip marker may fill the second half of a line
// (and only that), an entry of a line or more must start on a line.
TEST(ShmRingHostile, HalfLineRulesAreChecked)
{
    const size_t size = 4096;
    EXPECT_EQ(check_entry(96, size, 16, kSkip, 0), nullptr);
    EXPECT_NE(check_entry(64, size, 16, kSkip, 0), nullptr) << "a filler of a line's first half";
    EXPECT_NE(check_entry(96, size, 48, kSkip, 0), nullptr) << "a filler past its line";
    EXPECT_NE(check_entry(96, size, 0, kSkip, 0), nullptr);
    EXPECT_EQ(check_entry(96, size, 16, 1, 8), nullptr) << "a half-line entry in a line's second half";
    EXPECT_NE(check_entry(96, size, 17, 1, 8), nullptr) << "a full entry in a line's second half";
    EXPECT_NE(check_entry(80, size, 8, 1, 8), nullptr) << "off the 32-byte grid";
    LocalRing r(size);
    forge(r, 48, kSkip, 0);  // at offset 0: neither the rest of the lap nor of a half line
    EXPECT_EQ(poll_count(r), 0u);
    EXPECT_NE(r.cons.error(), nullptr);
}

TEST(ShmRingHostile, CheckAcceptsEverythingAProducerWrites)
{
    for (size_t size : {size_t(128), size_t(4096), size_t(1) << 20})
        for (size_t off = 0; off < size; off += 32) {
            EXPECT_EQ(check_entry(off, size, static_cast<uint32_t>(size - off - 16), kSkip, 0), nullptr);
            if (off % 64) EXPECT_EQ(check_entry(off, size, 16, kSkip, 0), nullptr) << off;
            for (size_t len : {size_t(0), size_t(1), size_t(16), size_t(17), size_t(48), size / 2 - 64})
                if (off + entry_bytes(len) <= size && len <= size / 2 - 64 && align_gap(off, entry_bytes(len)) == 0) {
                    EXPECT_EQ(check_entry(off, size, static_cast<uint32_t>(len), 1,
                                          static_cast<uint16_t>(len < 40 ? len : 40)), nullptr)
                        << size << " " << off << " " << len;
                }
            if (size > 4096) off += 4096;  // sampled
        }
}

// copy_bytes (the inline copy of small messages): every size 0..80 at
// every source and destination misalignment 0..7 copies exactly n bytes,
// reads nothing outside the source and writes nothing outside [dst, dst+n)
// (guard bytes on both sides stay untouched).
TEST(ShmRing, CopyBytesCopiesExactlyNBytesAtEverySizeAndAlignment)
{
    std::mt19937 rng(7);
    for (size_t n = 0; n <= 80; ++n) {
        for (size_t sa = 0; sa < 8; ++sa) {
            for (size_t da = 0; da < 8; ++da) {
                std::string src = bytes(rng, n + 16);
                std::vector<char> dst(n + 32, '\x5a');
                copy_bytes(dst.data() + 8 + da, src.data() + sa, n);
                for (size_t i = 0; i < dst.size(); ++i) {
                    if (i >= 8 + da && i < 8 + da + n)
                        ASSERT_EQ(dst[i], src[sa + i - 8 - da]) << "n=" << n << " i=" << i;
                    else
                        ASSERT_EQ(dst[i], '\x5a') << "n=" << n << " wrote outside at " << i;
                }
            }
        }
    }
}

// reserve()/commit(): a message written in place arrives like push()'s; a
// reservation that is dropped (never committed) publishes nothing, even
// when it wrote a skip marker at the end of a lap; a full ring refuses.
TEST(ShmRing, ReserveCommitWritesInPlaceAndDroppedReservationsVanish)
{
    LocalRing r(4096);
    std::mt19937 rng(11);
    std::deque<Msg> model;
    uint64_t received = 0;
    for (int round = 0; round < 2000; ++round) {
        size_t hlen = rng() % 40, plen = rng() % 300;
        Msg m{static_cast<uint16_t>(rng() % 100), bytes(rng, hlen), bytes(rng, plen)};
        char *body = r.prod.reserve(hlen, plen);
        bool drop = rng() % 4 == 0;
        if (body && !drop) {
            std::memcpy(body, m.hdr.data(), hlen);
            copy_bytes(RingProducer::payload_at(body, hlen, plen), m.payload.data(), plen);
            r.prod.commit(m.id, hlen, plen);
            model.push_back(m);
        }
        if (!body || rng() % 3 == 0) {
            r.cons.poll([&](uint16_t id, const void *h, size_t hl, const void *p, size_t pl) {
                ASSERT_FALSE(model.empty());
                const Msg &want = model.front();
                EXPECT_EQ(id, want.id);
                EXPECT_EQ(std::string(static_cast<const char *>(h), hl), want.hdr);
                EXPECT_EQ(std::string(static_cast<const char *>(p), pl), want.payload);
                model.pop_front();
                ++received;
            });
            ASSERT_EQ(r.cons.error(), nullptr);
        }
    }
    r.cons.poll([&](uint16_t, const void *, size_t, const void *, size_t) { model.pop_front(); ++received; });
    EXPECT_TRUE(model.empty());
    EXPECT_GT(received, 1000u);
    // full: nothing more fits until the consumer reads
    LocalRing f(4096);
    size_t fitted = 0;
    while (f.prod.reserve(0, 1000)) {
        f.prod.commit(1, 0, 1000);
        ++fitted;
    }
    EXPECT_GT(fitted, 0u);
    EXPECT_EQ(f.prod.reserve(0, 1000), nullptr);
    EXPECT_EQ(f.cons.poll([](uint16_t, const void *, size_t, const void *, size_t) {}), fitted);
    EXPECT_NE(f.prod.reserve(0, 1000), nullptr);
}

// A handler that returns true ends the batch after that message; whatever
// the stop pattern, every message arrives exactly once and in order, and
// the head the producer sees covers only what was taken.
TEST(ShmRing, HandlerCanEndTheBatchAndNothingIsLostOrRepeated)
{
    std::mt19937 rng(7);
    for (int round = 0; round < 50; ++round) {
        LocalRing r(8192);
        std::vector<uint32_t> sent, got;
        uint32_t next = 0;
        for (int step = 0; step < 400; ++step) {
            int burst = static_cast<int>(rng() % 20);
            for (int k = 0; k < burst; ++k) {
                uint32_t v = next;
                if (!r.prod.push(1, &v, sizeof(v), nullptr, 0)) break;
                sent.push_back(v);
                ++next;
            }
            unsigned stop_after = 1 + rng() % 5;
            unsigned seen = 0;
            unsigned n = r.cons.poll([&](uint16_t id, const void *hdr, size_t hlen, const void *, size_t plen) {
                EXPECT_EQ(id, 1);
                EXPECT_EQ(hlen, sizeof(uint32_t));
                EXPECT_EQ(plen, 0u);
                uint32_t v;
                std::memcpy(&v, hdr, sizeof(v));
                got.push_back(v);
                return ++seen == stop_after;
            });
            EXPECT_EQ(n, seen);
            EXPECT_LE(n, stop_after);
        }
        while (r.cons.poll([&](uint16_t, const void *hdr, size_t, const void *, size_t) {
            uint32_t v;
            std::memcpy(&v, hdr, sizeof(v));
            got.push_back(v);
        })) {}
        ASSERT_EQ(got, sent);
        EXPECT_FALSE(r.cons.ready());
    }
}

// The start-up probe of pml_rdrp_shm_cma_min: a real measurement (a time,
// or -errno where CMA is not permitted), and the rule that turns it into
// the smallest single-copy message: 8 KiB where a 4 KiB copy costs at
// most 2.5 us, otherwise none; a failed probe never turns single copy on.
TEST(ShmCmaCost, ProbeMeasuresASelfCopyOrSaysWhyNot)
{
    double ns = cma_self_copy_ns(4096, 4);
    EXPECT_NE(ns, 0.0);
    if (ns > 0) EXPECT_LT(ns, 1e9) << "one 4 KiB copy took over a second";
    EXPECT_LT(cma_self_copy_ns(0, 4), 0.0);
    EXPECT_LT(cma_self_copy_ns(4096, 0), 0.0);
    double probe = cma_probe_4k_ns();
    EXPECT_NE(probe, 0.0);
    EXPECT_EQ(probe < 0, ns < 0) << "the probe and one round disagree on whether CMA is permitted";
}

TEST(ShmCmaCost, RuleTurnsSingleCopyOnOnlyWhenCheap)
{
    EXPECT_EQ(single_copy_min_for(-EPERM), 0u);
    EXPECT_EQ(single_copy_min_for(0.0), kCheapCmaMin);
    EXPECT_EQ(single_copy_min_for(450.0), kCheapCmaMin);
    EXPECT_EQ(single_copy_min_for(1900.0), kCheapCmaMin);  // an MPI process on the Intel guest: still cheap
    EXPECT_EQ(single_copy_min_for(kCheapCmaNs), kCheapCmaMin);
    EXPECT_EQ(single_copy_min_for(kCheapCmaNs + 1), 0u);
    EXPECT_EQ(single_copy_min_for(3000.0), 0u);
    // pml/rdrp's ring (non-temporal stores from 8 KiB) moves the threshold, not the cost rule
    EXPECT_EQ(single_copy_min_for(450.0, kCheapCmaMinNonTemporalRing), kCheapCmaMinNonTemporalRing);
    EXPECT_EQ(single_copy_min_for(kCheapCmaNs + 1, kCheapCmaMinNonTemporalRing), 0u);
    EXPECT_EQ(single_copy_min_for(-EPERM, kCheapCmaMinNonTemporalRing), 0u);
    for (double ns = 0; ns < 8000; ns += 37.5)  // monotone: dearer never means more single copy
        EXPECT_LE(single_copy_min_for(ns + 37.5) == 0 ? 0u : 1u, single_copy_min_for(ns) == 0 ? 0u : 1u);
}
