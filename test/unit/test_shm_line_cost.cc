// The ring's measure of how far its consumer's cache is (common/shm
// shm_line_cost.h, RingProducer::line_ns) and of whether a message
// answers the consumer (RingProducer::spoke): what pml/rdrp's choices of
// store kind and of ring or single copy rest on.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "common/shm/shm_line_cost.h"
#include "common/shm/shm_ring.h"
#include "common/shm/shm_segment.h"

using namespace rdrp::shm;

namespace {

struct LocalRing {
    explicit LocalRing(size_t size) : mem(ring_bytes(size) + 64, 0)
    {
        char *base = mem.data() + (64 - reinterpret_cast<uintptr_t>(mem.data()) % 64) % 64;
        ring_init(base, size);
        prod.attach(base, size);
        cons.attach(base, size);
    }
    void read_all()
    {
        while (cons.poll([](uint16_t, const void *, size_t, const void *, size_t) {})) {}
    }
    std::vector<char> mem;
    RingProducer prod;
    RingConsumer cons;
};

}  // namespace

TEST(ShmLineCost, NoOpinionUntilTheWindowIsFull)
{
    LineCost c;
    for (unsigned i = 0; i + 1 < LineCost::kWindow; ++i) {
        c.add(100);
        EXPECT_EQ(c.ns(), 0u) << i;
    }
    c.add(100);
    EXPECT_EQ(c.ns(), 100u);
}

TEST(ShmLineCost, AZeroSampleIsStillAMeasurement)
{
    LineCost c;
    for (unsigned i = 0; i < LineCost::kWindow; ++i) c.add(0);
    EXPECT_EQ(c.ns(), 1u);  // 0 would read as "not measured"
}

// Property: up to kWindow/2 - 1 outliers at either end (a preempted load,
// a prefetched line) leave the result inside the range of the true
// samples; and a new level (the host moved the processes) replaces the
// old one within one window.
TEST(ShmLineCost, OutliersDoNotMoveTheMedianAndANewLevelTakesOver)
{
    std::mt19937 rng(5);
    const unsigned W = LineCost::kWindow;
    for (int trial = 0; trial < 20000; ++trial) {
        LineCost c;
        uint32_t lo = 20 + rng() % 200, hi = lo + rng() % 20;
        std::vector<uint32_t> s;
        unsigned high = rng() % (W / 2), low = rng() % (W / 2 - high + 1);
        if (high + low > W / 2 - 1) low = W / 2 - 1 - high;
        for (unsigned i = 0; i < high; ++i) s.push_back(100000 + rng() % 1000);
        for (unsigned i = 0; i < low; ++i) s.push_back(rng() % 5);
        while (s.size() < W) s.push_back(lo + rng() % (hi - lo + 1));
        std::shuffle(s.begin(), s.end(), rng);
        for (uint32_t v : s) c.add(v);
        ASSERT_GE(c.ns(), lo) << trial;
        ASSERT_LE(c.ns(), hi) << trial;
        uint32_t level = 20 + rng() % 400;
        for (unsigned i = 0; i < W; ++i) c.add(level);
        ASSERT_EQ(c.ns(), level) << trial;
    }
}

// A sample is a load of the consumer's head that found it moved: while
// the consumer reads nothing, due samples wait (a load that hits our own
// cache says nothing), and the next load of the head by any of the
// producer's paths takes it once the consumer has moved.
TEST(ShmLineCost, RingSamplesOnlyLoadsThatFindTheHeadMoved)
{
    LocalRing r(1 << 20);
    const unsigned E = RingProducer::kLineSampleEvery;
    char pay[600] = {};
    for (unsigned i = 0; i < 4 * E; ++i) {
        ASSERT_TRUE(r.prod.push(1, nullptr, 0, pay, sizeof(pay)));
        EXPECT_EQ(r.prod.line_ns(), 0u);
    }
    EXPECT_EQ(r.prod.line_cost().samples(), 0u);  // the consumer never moved
    r.read_all();
    EXPECT_TRUE(r.prod.drained());  // its load found the head moved: the due sample
    EXPECT_EQ(r.prod.line_cost().samples(), 1u);
    // one sample per kLineSampleEvery calls while the consumer keeps reading
    for (unsigned i = 0; i < LineCost::kWindow * E; ++i) {
        ASSERT_TRUE(r.prod.push(1, nullptr, 0, pay, sizeof(pay)));
        r.read_all();
        r.prod.line_ns();
    }
    EXPECT_EQ(r.prod.line_cost().samples(), 1u + LineCost::kWindow);
    EXPECT_GT(r.prod.line_ns(), 0u);
}

// Two processes: the producer measures lines its consumer, another
// process, wrote.  Only that a measure exists and is sane is checked
// (its size is the machine's).
TEST(ShmLineCost, ProducerMeasuresAConsumerInAnotherProcess)
{
    const size_t size = 1 << 16;
    Segment seg;
    std::string err;
    ASSERT_TRUE(segment_create(ring_bytes(size), &seg, &err)) << err;
    ring_init(seg.base, size);
    RingConsumer cons;
    cons.attach(seg.base, size);
    int ppid = getpid(), fd = seg.fd;
    const int count = 20000;
    int pipefd[2];
    ASSERT_EQ(pipe(pipefd), 0);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        Segment mine;
        std::string e;
        if (!segment_attach(ppid, fd, ring_bytes(size), &mine, &e)) _exit(2);
        RingProducer prod;
        prod.attach(mine.base, size);
        char pay[1024] = {};
        for (int i = 0; i < count; ++i) {
            while (!prod.push(9, nullptr, 0, pay, sizeof(pay))) prod.line_ns();
            prod.line_ns();
        }
        uint32_t ns = prod.line_ns();
        uint64_t n = prod.line_cost().samples();
        if (write(pipefd[1], &ns, sizeof(ns)) != sizeof(ns) || write(pipefd[1], &n, sizeof(n)) != sizeof(n)) _exit(3);
        _exit(0);
    }
    close(pipefd[1]);
    int got = 0;
    while (got < count) got += cons.poll([](uint16_t, const void *, size_t, const void *, size_t) {});
    uint32_t ns = 0;
    uint64_t n = 0;
    ASSERT_EQ(read(pipefd[0], &ns, sizeof(ns)), static_cast<ssize_t>(sizeof(ns)));
    ASSERT_EQ(read(pipefd[0], &n, sizeof(n)), static_cast<ssize_t>(sizeof(n)));
    close(pipefd[0]);
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_GE(n, LineCost::kWindow);
    EXPECT_GT(ns, 0u);
    EXPECT_LT(ns, 10000000u);  // under 10 ms: a clock that works
    segment_release(&seg);
}

// spoke(): whether the consumer sent us data (the owner's heard()) since
// the owner last said quiet() (pml/rdrp: when it sent its own data), so a
// message written now answers it (ping-pong) rather than following our
// own (stream).  Pushes (control messages) and rewind hints leave it.
TEST(ShmRing, SpokeSaysWhetherTheConsumerSpokeSinceWeLastSentData)
{
    LocalRing r(1 << 14);
    char pay[16] = {};
    EXPECT_FALSE(r.prod.spoke());
    r.prod.hint_drained();
    EXPECT_FALSE(r.prod.spoke());
    r.prod.heard();
    EXPECT_TRUE(r.prod.spoke());
    ASSERT_TRUE(r.prod.push(1, nullptr, 0, pay, sizeof(pay)));  // a control message
    EXPECT_TRUE(r.prod.spoke());
    r.prod.quiet();
    EXPECT_FALSE(r.prod.spoke());
    std::mt19937 rng(3);
    bool model = false;
    for (int i = 0; i < 10000; ++i) {
        switch (rng() % 4) {
        case 0: r.prod.heard(); model = true; break;
        case 1: r.prod.hint_drained(); break;
        case 2: r.prod.quiet(); model = false; break;
        default:
            if (!r.prod.push(1, nullptr, 0, pay, sizeof(pay))) r.read_all();
        }
        ASSERT_EQ(r.prod.spoke(), model) << i;
    }
}

// The store-kind rule (non_temporal_by), against its table: far from 512
// bytes; near from 32 KiB, or from 4 KiB for a message that does not
// answer or a consumer behind; unmeasured from 8 KiB, or from 2 KiB to a
// consumer behind.  Every case, and busy() asked only where it decides.
TEST(ShmLineCost, StoreKindFollowsTheMeasuredDistance)
{
    const uint32_t far_ns = 90;
    for (size_t len : {size_t(0), size_t(511), size_t(512), size_t(1024), size_t(2047), size_t(2048), size_t(4095),
                       size_t(4096), size_t(8191), size_t(8192), size_t(32767), size_t(32768), size_t(65536)})
        for (uint32_t ns : {0u, 1u, 45u, 89u, 90u, 150u})
            for (uint32_t fns : {0u, far_ns})
                for (bool answers : {false, true})
                    for (bool behind : {false, true}) {
                        int asked = 0;
                        bool far = false;
                        bool got = non_temporal_by(len, ns, fns, answers, [&] { ++asked; return behind; }, &far);
                        bool want;
                        bool want_far = false;
                        if (len < 512) want = false;
                        else if (fns == 0 || ns == 0) want = len >= 8192 || (len >= 2048 && behind);
                        else if (ns >= fns) want = want_far = true;
                        else want = len >= 32768 || (len >= 4096 && (!answers || behind));
                        ASSERT_EQ(got, want) << len << " " << ns << " " << fns << " " << answers << " " << behind;
                        ASSERT_EQ(far, want_far);
                        ASSERT_LE(asked, 1);
                    }
}
