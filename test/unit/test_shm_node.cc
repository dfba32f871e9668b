// The per-process node segment of rings (common/shm/shm_node.h), shared by
// pml/rdrp and coll/cdag: ring sizing within a budget (a property test over
// random inputs), two segments talking through each other's rings (one per
// local rank, self included), identities that must be refused before
// anything is mapped, a malformed entry reported once per poll with its
// ring, and nothing ever named in /dev/shm.
#include <gtest/gtest.h>

#include <dirent.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/shm/shm_node.h"

using namespace rdrp::shm;

namespace {

constexpr uint64_t kMagicA = 0x4141414141414141ull, kMagicB = 0x4242424242424242ull;

/* names in /dev/shm that contain what (other processes of the machine
 * come and go there: only ours count) */
std::set<std::string> dev_shm(const char *what)
{
    std::set<std::string> names;
    if (DIR *d = opendir("/dev/shm")) {
        while (dirent *e = readdir(d))
            if (std::strstr(e->d_name, what)) names.insert(e->d_name);
        closedir(d);
    }
    return names;
}

/* what /proc says fd of this process is */
std::string fd_target(int fd)
{
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, buf, sizeof(buf) - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

struct Got {
    uint16_t id;
    std::string hdr, payload;
};

template <class Seg>
std::vector<Got> drain(Seg &s, std::vector<std::string> *errors = nullptr)
{
    std::vector<Got> got;
    s.poll(
        [&](uint16_t id, const void *h, size_t hl, const void *p, size_t pl) {
            got.push_back(Got{id, std::string(static_cast<const char *>(h), hl),
                              std::string(static_cast<const char *>(p), pl)});
        },
        [&](const char *why, uint32_t ring) {
            if (errors) errors->push_back(std::string(why) + " @" + std::to_string(ring));
        });
    return got;
}

}  // namespace

// Invariants of size_rings() for random node sizes, requests and budgets:
// a power of two of at least 4096 that holds four of what must always fit;
// an eager limit no larger than asked whose message (with headers) fits a
// quarter ring; within the budget unless the ring cannot shrink any more;
// never larger with more processes on the node.
TEST(ShmNodeSizing, PropertiesOverRandomInputs)
{
    std::mt19937_64 rng(14);
    for (int it = 0; it < 20000; ++it) {
        uint32_t nlocal = 1 + static_cast<uint32_t>(rng() % 512);
        size_t want_ring = (rng() % 3 == 0) ? 0 : rng() % (size_t(8) << 20);
        size_t must_fit = 64 + rng() % (size_t(1) << (rng() % 21));
        size_t want_eager = rng() % (size_t(1) << (rng() % 24));
        size_t headers = rng() % 512;
        size_t budget = size_t(1) << (12 + rng() % 16);
        RingSizing s = size_rings(nlocal, want_ring, must_fit, want_eager, headers, budget);
        SCOPED_TRACE(testing::Message() << "nlocal " << nlocal << " want_ring " << want_ring << " must_fit "
                                        << must_fit << " eager " << want_eager << " headers " << headers
                                        << " budget " << budget);
        ASSERT_GE(s.ring_size, 4096u);
        ASSERT_EQ(s.ring_size & (s.ring_size - 1), 0u);
        ASSERT_GE(s.ring_size, 4 * must_fit);
        ASSERT_LE(s.eager_limit, want_eager);
        if (s.eager_limit) ASSERT_LE(s.eager_limit + headers, s.ring_size / 4);
        bool can_shrink = s.ring_size / 2 >= 4 * must_fit && s.ring_size / 2 >= 4096;
        if (can_shrink) ASSERT_LE(nlocal * ring_bytes(s.ring_size), budget);
        RingSizing more = size_rings(nlocal + 1, want_ring, must_fit, want_eager, headers, budget);
        ASSERT_LE(more.ring_size, s.ring_size);
        ASSERT_LE(more.eager_limit, s.eager_limit);
    }
}

// pml/rdrp's defaults (1 MiB ring, 128 KiB ring eager limit) at 2 ranks:
// unchanged by the move into common/shm.
TEST(ShmNodeSizing, PmlDefaultsAtTwoRanks)
{
    RingSizing s = size_rings(2, 1 << 20, 8192 + 512, 128 * 1024, 512, 64u << 20);
    EXPECT_EQ(s.ring_size, size_t(1) << 20);
    EXPECT_EQ(s.eager_limit, 128u * 1024);
}

// Two "processes" (segments of local ranks 0 and 1 in this one) each map
// the other's segment through /proc and send through their ring there;
// each also sends to itself.  Order and content survive, the CMA probe
// works on our own pid, and the receiver's poll hands each message once.
TEST(ShmNode, TwoSegmentsTalkThroughEachOthersRings)
{
    NodeSegment a, b;
    std::string err;
    ASSERT_TRUE(a.create(kMagicA, "test-node-a", 7, 2, 0, 4096, &err)) << err;
    ASSERT_TRUE(b.create(kMagicA, "test-node-b", 7, 2, 1, 4096, &err)) << err;
    /* anonymous memory, never a name in /dev/shm: nothing can be left
     * behind by a run or an abort */
    EXPECT_EQ(fd_target(a.identity().fd).rfind("/memfd:test-node-a", 0), 0u) << fd_target(a.identity().fd);
    EXPECT_TRUE(dev_shm("test-node").empty());
    NodePeer a_to_b, b_to_a, a_to_a;
    ASSERT_TRUE(a.connect(b.identity(), false, &a_to_b, &err)) << err;
    ASSERT_TRUE(b.connect(a.identity(), false, &b_to_a, &err)) << err;
    ASSERT_TRUE(a.connect(a.identity(), true, &a_to_a, &err)) << err;
    EXPECT_TRUE(a_to_b.cma);
    for (int i = 0; i < 200; ++i) {  // several laps of a 4 KiB ring, drained as we go
        std::string h = "h" + std::to_string(i), p(static_cast<size_t>(i * 7 % 900), static_cast<char>('a' + i % 26));
        ASSERT_TRUE(a_to_b.tx.push(static_cast<uint16_t>(i), h.data(), h.size(), p.data(), p.size()));
        ASSERT_TRUE(a_to_a.tx.push(static_cast<uint16_t>(i + 1000), h.data(), h.size(), nullptr, 0));
        EXPECT_TRUE(b.ready());
        std::vector<Got> got = drain(b);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].id, i);
        EXPECT_EQ(got[0].hdr, h);
        EXPECT_EQ(got[0].payload, p);
        got = drain(a);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].id, i + 1000);
        ASSERT_TRUE(b_to_a.tx.push(7, "x", 1, nullptr, 0));
        got = drain(a);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].hdr, "x");
    }
    EXPECT_FALSE(a.ready());
    EXPECT_FALSE(b.ready());
    a.disconnect(&a_to_b);
    b.disconnect(&b_to_a);
    a.disconnect(&a_to_a);
    a.release();
    b.release();
    EXPECT_TRUE(dev_shm("test-node").empty()) << "a node segment left a name in /dev/shm";
}

// Each ring says who writes it: during a poll, polled_producer() is the
// id its producer's segment was given (pml/rdrp's compact messages take
// their source from it), for every ring of a pass, ourselves included.
TEST(ShmNode, PollNamesTheProducerOfEachRing)
{
    NodeSegment a, b;
    std::string err;
    a.set_producer_id(41);
    b.set_producer_id(42);
    ASSERT_TRUE(a.create(kMagicA, "test-node-a", 7, 2, 0, 4096, &err)) << err;
    ASSERT_TRUE(b.create(kMagicA, "test-node-b", 7, 2, 1, 4096, &err)) << err;
    NodePeer b_to_a, a_to_a;
    ASSERT_TRUE(b.connect(a.identity(), false, &b_to_a, &err)) << err;
    ASSERT_TRUE(a.connect(a.identity(), true, &a_to_a, &err)) << err;
    for (int i = 0; i < 50; ++i) {
        ASSERT_TRUE(b_to_a.tx.push(2, "b", 1, nullptr, 0));
        ASSERT_TRUE(a_to_a.tx.push(1, "a", 1, nullptr, 0));
        unsigned n = a.poll(
            [&](uint16_t id, const void *, size_t, const void *, size_t) {
                EXPECT_EQ(a.polled_producer(), id == 1 ? 41u : 42u) << id;
            },
            [](const char *, uint32_t) { FAIL(); });
        ASSERT_EQ(n, 2u);
    }
    b.disconnect(&b_to_a);
    a.disconnect(&a_to_a);
    a.release();
    b.release();
}

// Identities that must not lead to a mapping or a ring: another
// component's (magic), another job's, no segment, a local rank the peer
// has no ring for, and sizes that do not describe the segment.
TEST(ShmNode, MalformedOrForeignIdentitiesAreRefused)
{
    NodeSegment a, b, other;
    std::string err;
    ASSERT_TRUE(a.create(kMagicA, "test-node-a", 7, 2, 1, 4096, &err)) << err;
    ASSERT_TRUE(b.create(kMagicA, "test-node-b", 7, 2, 0, 4096, &err)) << err;
    ASSERT_TRUE(other.create(kMagicB, "test-node-o", 7, 2, 0, 4096, &err)) << err;
    NodeIdentity good = b.identity();
    auto refused = [&](NodeIdentity id, const char *what) {
        NodePeer p;
        std::string e;
        EXPECT_FALSE(a.connect(id, false, &p, &e)) << what;
        EXPECT_FALSE(p.ok) << what;
        EXPECT_EQ(p.mapped.base, nullptr) << what << ": something stayed mapped";
        EXPECT_FALSE(e.empty()) << what;
    };
    refused(other.identity(), "another component's segment");
    NodeIdentity id = good;
    id.jobid = 8;
    refused(id, "another job");
    id = good;
    id.fd = -1;
    refused(id, "no segment");
    id = good;
    id.nlocal = 1;  // our local rank 1 has no ring there
    refused(id, "no ring for our local rank");
    id = good;
    id.ring_size = 5000;
    refused(id, "ring size not a power of two");
    id = good;
    id.seg_len = good.seg_len * 4;
    refused(id, "segment length that is not nlocal rings");
    id = good;
    id.ring_size = 8192;
    id.seg_len = node_segment_bytes(2, 8192);  // consistent, but not what the segment's header says
    refused(id, "identity that does not match the segment header");
    NodePeer p;
    EXPECT_TRUE(a.connect(good, false, &p, &err)) << err;
    a.disconnect(&p);
}

// A malformed entry stops its ring: the poll reports it with the ring's
// index and hands out nothing of it; the other rings keep working.
TEST(ShmNode, MalformedEntryIsReportedWithItsRing)
{
    NodeSegment a, b, c;
    std::string err;
    ASSERT_TRUE(a.create(kMagicA, "test-node-a", 7, 3, 0, 4096, &err)) << err;
    ASSERT_TRUE(b.create(kMagicA, "test-node-b", 7, 3, 1, 4096, &err)) << err;
    ASSERT_TRUE(c.create(kMagicA, "test-node-c", 7, 3, 2, 4096, &err)) << err;
    NodePeer b_to_a, c_to_a;
    ASSERT_TRUE(b.connect(a.identity(), false, &b_to_a, &err)) << err;
    ASSERT_TRUE(c.connect(a.identity(), false, &c_to_a, &err)) << err;
    /* forge, in b's ring of a's segment, an entry longer than the ring */
    char *ring = static_cast<char *>(b_to_a.mapped.base) + node_ring_offset(4096, 1);
    auto *e = reinterpret_cast<EntryHeader *>(ring + kRingOverhead);
    e->len = 1u << 30;
    e->id = 1;
    e->hlen = 0;
    e->pos.store(4096, std::memory_order_release);  // a fresh ring's first position
    ASSERT_TRUE(c_to_a.tx.push(3, "c", 1, nullptr, 0));
    std::vector<std::string> errors;
    std::vector<Got> got = drain(a, &errors);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].hdr, "c");
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find("@1"), std::string::npos) << errors[0];
    b.disconnect(&b_to_a);
    c.disconnect(&c_to_a);
}

// A pass that stops (the caller's completion) ends after that ring's batch
// and the next pass starts at the following ring: ring 0, busy all the
// time, does not starve rings 1 and 2.
TEST(ShmNode, StoppedPassResumesAtTheNextRing)
{
    NodeSegment a, b, c;
    std::string err;
    ASSERT_TRUE(a.create(kMagicA, "test-node-a", 7, 3, 0, 4096, &err)) << err;
    ASSERT_TRUE(b.create(kMagicA, "test-node-b", 7, 3, 1, 4096, &err)) << err;
    ASSERT_TRUE(c.create(kMagicA, "test-node-c", 7, 3, 2, 4096, &err)) << err;
    NodePeer a_to_a, b_to_a, c_to_a;
    ASSERT_TRUE(a.connect(a.identity(), true, &a_to_a, &err)) << err;
    ASSERT_TRUE(b.connect(a.identity(), false, &b_to_a, &err)) << err;
    ASSERT_TRUE(c.connect(a.identity(), false, &c_to_a, &err)) << err;
    std::string order;
    auto fn = [&](uint16_t, const void *h, size_t hl, const void *, size_t) {
        order.append(static_cast<const char *>(h), hl);
    };
    auto fn_stop = [&](uint16_t id, const void *h, size_t hl, const void *p, size_t pl) {
        fn(id, h, hl, p, pl);
        return true;  // every message completes something
    };
    auto bad = [](const char *, uint32_t) { ADD_FAILURE(); };
    ASSERT_TRUE(b_to_a.tx.push(1, "b", 1, nullptr, 0));
    ASSERT_TRUE(c_to_a.tx.push(1, "c", 1, nullptr, 0));
    for (int pass = 0; pass < 3; ++pass) {
        ASSERT_TRUE(a_to_a.tx.push(1, "a", 1, nullptr, 0));  // ring 0 always has something
        a.poll(fn_stop, bad);
    }
    EXPECT_EQ(order, "abc") << "a pass that stopped must resume at the next ring";
    a.poll(fn, bad);
    EXPECT_EQ(order, "abcaa");
    b.disconnect(&b_to_a);
    c.disconnect(&c_to_a);
    a.disconnect(&a_to_a);
}
