// Wire-header validation of pml/rdrp (ompi_pml_rdrp/pml_rdrp_wire_check.h):
// forged headers are rejected, well-formed ones accepted, and for random
// headers every accepted one is safe to act on (the property the handlers
// rely on before touching memory).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

#include "btl_credit/btl_credit_wire_check.h"
#include "coll_cdag/cdag_wire.h"
#include "ompi_pml_rdrp/pml_rdrp_wire_check.h"

using namespace rdrp::wire;

namespace {

const CreditLimits kCredits{true, 8192, 4};
const CreditLimits kNoCredits{false, 0, 0};

rdrp_rts_hdr_t good_rts(uint8_t proto, uint8_t path, uint16_t rkey_len, uint64_t total,
                        uint64_t first)
{
    rdrp_rts_hdr_t h;
    std::memset(&h, 0, sizeof(h));
    h.proto = proto;
    h.path = path;
    h.rkey_len = rkey_len;
    h.total_len = total;
    h.first_len = first;
    return h;
}

}  // namespace

// Eager data and an RTS's first chunk are read as bytes: delivered by UCX
// rendezvous (a descriptor, not the payload) they are refused before
// anything of them is read, whatever their headers say.
TEST(WireCheck, PayloadMustArriveEagerly)
{
    EXPECT_EQ(check_eager_delivery(false), nullptr);
    EXPECT_NE(check_eager_delivery(true), nullptr);
}

TEST(WireCheck, EagerLengthAndCredits)
{
    rdrp_eager_hdr_t h;
    std::memset(&h, 0, sizeof(h));
    EXPECT_EQ(check_eager(sizeof(h), h, 100, kCredits), nullptr);
    EXPECT_NE(check_eager(sizeof(h) - 1, h, 100, kCredits), nullptr);
    EXPECT_NE(check_eager(sizeof(h) + 8, h, 100, kCredits), nullptr);
    h.flags = RDRP_FLAG_CREDIT;
    h.src_vpid = 3;
    EXPECT_EQ(check_eager(sizeof(h), h, 8192, kCredits), nullptr);
    EXPECT_NE(check_eager(sizeof(h), h, 8193, kCredits), nullptr) << "payload beyond a slot";
    EXPECT_NE(check_eager(sizeof(h), h, 10, kNoCredits), nullptr) << "gated, but no credits here";
    h.src_vpid = 4;
    EXPECT_NE(check_eager(sizeof(h), h, 10, kCredits), nullptr) << "unknown flow-control source";
    h.src_vpid = std::numeric_limits<uint32_t>::max();
    EXPECT_NE(check_eager(sizeof(h), h, 10, kCredits), nullptr);
}

TEST(WireCheck, PackedEagerLength)
{
    const size_t hs = sizeof(rdrp_eager_hdr_t);
    EXPECT_EQ(check_packed_length(0, hs), nullptr) << "zero-byte message";
    EXPECT_EQ(check_packed_length(0, hs + RDRP_EAGER_PACKED_MAX), nullptr);
    EXPECT_NE(check_packed_length(0, hs + RDRP_EAGER_PACKED_MAX + 1), nullptr);
    EXPECT_NE(check_packed_length(0, hs - 1), nullptr) << "shorter than its header";
    EXPECT_NE(check_packed_length(0, 0), nullptr);
    EXPECT_NE(check_packed_length(8, hs + 8), nullptr) << "unexpected AM user header";
}

// The compact eager format (ring only): an 8-byte header and at most 8
// bytes; what it leaves out comes back from the ring's producer; a sender
// uses it only where that reconstruction is exact.
TEST(WireCheck, CompactEager)
{
    EXPECT_EQ(sizeof(rdrp_tiny_hdr_t), 8u);
    EXPECT_EQ(check_tiny(sizeof(rdrp_tiny_hdr_t), 0), nullptr);
    EXPECT_EQ(check_tiny(sizeof(rdrp_tiny_hdr_t), RDRP_TINY_MAX), nullptr);
    EXPECT_NE(check_tiny(sizeof(rdrp_tiny_hdr_t), RDRP_TINY_MAX + 1), nullptr);
    EXPECT_NE(check_tiny(sizeof(rdrp_tiny_hdr_t) + 1, 1), nullptr);
    EXPECT_NE(check_tiny(sizeof(rdrp_eager_hdr_t), 1), nullptr);
    EXPECT_NE(check_tiny(0, 1), nullptr);

    rdrp_tiny_hdr_t t{0xFFFE, -32768, 0xDEADBEEF};
    rdrp_eager_hdr_t h = expand_tiny(t, 77, true);
    EXPECT_EQ(h.m.cid, 0xFFFEu);
    EXPECT_EQ(h.m.src, 77);
    EXPECT_EQ(h.m.tag, -32768);
    EXPECT_EQ(h.m.seq, 0xDEADBEEFu);
    EXPECT_EQ(h.flags, RDRP_FLAG_CREDIT);
    EXPECT_EQ(h.credits, 0);
    EXPECT_EQ(h.src_vpid, 77u);
    EXPECT_EQ(expand_tiny(t, 3, false).flags, 0);

    EXPECT_TRUE(tiny_fits(8, 0xFFFF, 32767, 5, 5));
    EXPECT_TRUE(tiny_fits(0, 0, -32768, 0, 0));
    EXPECT_FALSE(tiny_fits(9, 0, 0, 0, 0)) << "payload";
    EXPECT_FALSE(tiny_fits(1, 0x10000, 0, 0, 0)) << "context id";
    EXPECT_FALSE(tiny_fits(1, 0, 32768, 0, 0)) << "tag";
    EXPECT_FALSE(tiny_fits(1, 0, -32769, 0, 0)) << "tag";
    EXPECT_FALSE(tiny_fits(1, 0, 0, 1, 2)) << "rank differs from the process index";
    // every header that fits comes back as sent, through the bytes a ring carries
    std::mt19937 rng(3);
    for (int i = 0; i < 100000; ++i) {
        uint32_t cid = rng() % 0x20000, vpid = rng() % 300;
        int tag = static_cast<int>(rng() % 80000) - 40000;
        int rank = rng() % 2 ? static_cast<int>(vpid) : static_cast<int>(rng() % 300);
        size_t len = rng() % 12;
        if (!tiny_fits(len, cid, tag, rank, vpid)) continue;
        rdrp_tiny_hdr_t w{static_cast<uint16_t>(cid), static_cast<int16_t>(tag), static_cast<uint32_t>(rng())};
        char wire[sizeof(w)];
        std::memcpy(wire, &w, sizeof(w));
        ASSERT_EQ(check_tiny(sizeof(wire), len), nullptr);
        rdrp_tiny_hdr_t r;
        std::memcpy(&r, wire, sizeof(r));
        rdrp_eager_hdr_t e = expand_tiny(r, vpid, i & 1);
        ASSERT_EQ(e.m.cid, cid);
        ASSERT_EQ(e.m.src, rank);
        ASSERT_EQ(e.m.tag, tag);
        ASSERT_EQ(e.m.seq, w.seq);
    }
}

TEST(WireCheck, RtsWellFormed)
{
    auto h = good_rts(RDRP_PROTO_RDRP, RDRP_PATH_AM, 0, 1 << 20, 8192);
    EXPECT_EQ(check_rts(h, sizeof(h), 8192, kCredits), nullptr);
    h = good_rts(RDRP_PROTO_RDRP, RDRP_PATH_RMA, 40, 1 << 20, 0);
    EXPECT_EQ(check_rts(h, sizeof(h) + 40, 0, kCredits), nullptr);
    h = good_rts(RDRP_PROTO_GET, 0, 40, 1 << 20, 0);
    EXPECT_EQ(check_rts(h, sizeof(h) + 40, 0, kCredits), nullptr);
    h = good_rts(RDRP_PROTO_PUT, 0, 0, 1 << 20, 0);
    EXPECT_EQ(check_rts(h, sizeof(h), 0, kCredits), nullptr);
    h = good_rts(RDRP_PROTO_RDRP, RDRP_PATH_AM, 0, 0, 0);  // zero-byte synchronous rendezvous
    EXPECT_EQ(check_rts(h, sizeof(h), 0, kCredits), nullptr);
}

TEST(WireCheck, RtsForged)
{
    auto base = good_rts(RDRP_PROTO_RDRP, RDRP_PATH_RMA, 40, 1 << 20, 100);
    const size_t hl = sizeof(base) + 40;
    ASSERT_EQ(check_rts(base, hl, 100, kCredits), nullptr);

    auto h = base;
    EXPECT_NE(check_rts(h, sizeof(h) - 1, 100, kCredits), nullptr) << "short header";
    EXPECT_NE(check_rts(h, hl + 1, 100, kCredits), nullptr) << "length disagrees with rkey_len";
    EXPECT_NE(check_rts(h, hl, 101, kCredits), nullptr) << "first_len disagrees with the data";
    h.rkey_len = RDRP_MAX_RKEY + 1;
    EXPECT_NE(check_rts(h, sizeof(h) + h.rkey_len, 100, kCredits), nullptr) << "rkey too long";
    h = base;
    h.first_len = h.total_len + 1;
    EXPECT_NE(check_rts(h, hl, h.first_len, kCredits), nullptr) << "first chunk beyond the message";
    h = base;
    h.proto = 3;
    EXPECT_NE(check_rts(h, hl, 100, kCredits), nullptr) << "unknown protocol";
    h = base;
    h.path = 0;
    EXPECT_NE(check_rts(h, hl, 100, kCredits), nullptr) << "unknown data path";
    h = base;
    h.rkey_len = 0;
    EXPECT_NE(check_rts(h, sizeof(h), 100, kCredits), nullptr) << "rma path without rkey";
    h = good_rts(RDRP_PROTO_GET, 0, 0, 1 << 20, 0);
    EXPECT_NE(check_rts(h, sizeof(h), 0, kCredits), nullptr) << "get without rkey";
    h = good_rts(RDRP_PROTO_GET, 0, 40, 1 << 20, 10);
    EXPECT_NE(check_rts(h, sizeof(h) + 40, 10, kCredits), nullptr) << "get RTS with data";
    h = good_rts(RDRP_PROTO_PUT, 0, 0, 0, 0);
    EXPECT_NE(check_rts(h, sizeof(h), 0, kCredits), nullptr) << "empty put";
    h = base;
    h.flags = RDRP_FLAG_CREDIT;
    h.src_vpid = 1;
    EXPECT_EQ(check_rts(h, hl, 100, kCredits), nullptr);
    EXPECT_NE(check_rts(h, hl, 100, kNoCredits), nullptr) << "gated RTS without credits";
    h.src_vpid = 9;
    EXPECT_NE(check_rts(h, hl, 100, kCredits), nullptr) << "gated RTS from an unknown source";
}

TEST(WireCheck, CtsAndRtr)
{
    rdrp_cts_hdr_t c;
    std::memset(&c, 0, sizeof(c));
    c.want_len = 1000;
    c.window = 4;
    c.chunk_size = 512;
    EXPECT_EQ(check_cts(c, 1000), nullptr);
    EXPECT_NE(check_cts(c, 999), nullptr);
    c.window = 0;
    EXPECT_NE(check_cts(c, 1000), nullptr);
    c.window = 4;
    c.chunk_size = 0;
    EXPECT_NE(check_cts(c, 1000), nullptr);

    rdrp_rtr_hdr_t r;
    std::memset(&r, 0, sizeof(r));
    r.want_len = 1000;
    r.rkey_len = 32;
    EXPECT_EQ(check_rtr(r, sizeof(r) + 32, 1000), nullptr);
    EXPECT_NE(check_rtr(r, sizeof(r) + 31, 1000), nullptr);
    EXPECT_NE(check_rtr(r, sizeof(r) - 1, 1000), nullptr);
    EXPECT_NE(check_rtr(r, sizeof(r) + 32, 999), nullptr);
    r.rkey_len = 0;
    EXPECT_NE(check_rtr(r, sizeof(r), 1000), nullptr) << "data to put but no rkey";
    r.want_len = 0;
    EXPECT_EQ(check_rtr(r, sizeof(r), 1000), nullptr) << "truncated to nothing: no rkey needed";
    r.rkey_len = RDRP_MAX_RKEY + 1;
    EXPECT_NE(check_rtr(r, sizeof(r) + r.rkey_len, 1000), nullptr);
}

TEST(WireCheck, ChunkBoundsWithoutOverflow)
{
    EXPECT_EQ(check_chunk(100, 900, 100, 1000), nullptr);
    EXPECT_EQ(check_chunk(1000, 0, 100, 1000), nullptr);
    EXPECT_NE(check_chunk(99, 1, 100, 1000), nullptr) << "inside the first chunk";
    EXPECT_NE(check_chunk(100, 901, 100, 1000), nullptr) << "past the end";
    EXPECT_NE(check_chunk(1001, 0, 100, 1000), nullptr);
    const uint64_t big = std::numeric_limits<uint64_t>::max();
    EXPECT_NE(check_chunk(500, big, 100, 1000), nullptr) << "offset + len wraps";
    EXPECT_NE(check_chunk(big, 2, 100, 1000), nullptr);
}

TEST(WireCheck, SourceRank)
{
    EXPECT_EQ(check_source(0, 4), nullptr);
    EXPECT_EQ(check_source(3, 4), nullptr);
    EXPECT_NE(check_source(4, 4), nullptr);
    EXPECT_NE(check_source(-1, 4), nullptr);
    EXPECT_NE(check_source(std::numeric_limits<int32_t>::min(), 4), nullptr);
}

// Property: for random headers (biased towards the boundaries), whatever
// the checks accept is safe for the handlers to act on.
TEST(WireCheck, RandomHeadersAcceptedOnlyIfSafe)
{
    std::mt19937_64 rng(20261122);
    auto pick = [&](uint64_t limit) -> uint64_t {
        switch (rng() % 4) {
        case 0: return rng() % (limit + 2);
        case 1: return limit + (rng() % 3) - 1;
        case 2: return rng();
        default: return rng() % 3;
        }
    };
    int accepted_rts = 0, accepted_chunks = 0;
    for (int i = 0; i < 200000; ++i) {
        rdrp_rts_hdr_t h;
        std::memset(&h, 0, sizeof(h));
        h.proto = static_cast<uint8_t>(rng() % 5);
        h.path = static_cast<uint8_t>(rng() % 4);
        h.rkey_len = static_cast<uint16_t>(pick(RDRP_MAX_RKEY));
        h.total_len = pick(1 << 20);
        h.first_len = pick(8192);
        h.flags = static_cast<uint16_t>(rng() % 4);
        h.src_vpid = static_cast<uint32_t>(pick(4));
        size_t hlen = sizeof(h) + static_cast<size_t>(pick(RDRP_MAX_RKEY));
        size_t len = static_cast<size_t>(rng() % 2 ? h.first_len : pick(8192));
        if (check_rts(h, hlen, len, kCredits) == nullptr) {
            ++accepted_rts;
            ASSERT_LE(h.rkey_len, RDRP_MAX_RKEY);
            ASSERT_EQ(hlen, sizeof(h) + h.rkey_len);  // the rkey copy stays inside the header
            ASSERT_EQ(h.first_len, len);
            ASSERT_LE(h.first_len, h.total_len);       // first chunk fits the message
            ASSERT_LE(h.proto, RDRP_PROTO_PUT);
            if (h.flags & RDRP_FLAG_CREDIT) {
                ASSERT_LE(h.first_len, kCredits.slot_size);  // fits its mailbox slot
                ASSERT_LT(h.src_vpid, kCredits.npeers);
            }
        }
        uint64_t first = pick(8192), want = pick(1 << 20), off = pick(want), clen = pick(want);
        if (check_chunk(off, clen, first, want) == nullptr) {
            ++accepted_chunks;
            ASSERT_GE(off, first);
            ASSERT_LE(off, want);
            ASSERT_LE(clen, want - off);  // [off, off + clen) inside [first, want)
        }
    }
    // the generator reaches both sides of every check
    EXPECT_GT(accepted_rts, 100);
    EXPECT_GT(accepted_chunks, 1000);
}

// ---- checks added with the fuzz targets (test/fuzz): credit packets,
// btl/credit frames, coll/cdag packets.
TEST(WireCheck, CreditPacket)
{
    rdrp::wire::CreditLimits on{true, 4096, 4};
    rdrp_credit_hdr_t h{};
    h.src_vpid = 3;
    h.kind = 1;
    h.credits = 7;
    EXPECT_EQ(rdrp::wire::check_credit(sizeof(h), h, on), nullptr);
    EXPECT_NE(rdrp::wire::check_credit(sizeof(h) - 1, h, on), nullptr);
    EXPECT_NE(rdrp::wire::check_credit(sizeof(h), h, rdrp::wire::CreditLimits{false, 0, 0}), nullptr);
    h.kind = 0;  // data never travels as a credit packet
    EXPECT_NE(rdrp::wire::check_credit(sizeof(h), h, on), nullptr);
    h.kind = 4;
    EXPECT_NE(rdrp::wire::check_credit(sizeof(h), h, on), nullptr);
    h.kind = 3;
    h.src_vpid = 4;
    EXPECT_NE(rdrp::wire::check_credit(sizeof(h), h, on), nullptr);
}

TEST(WireCheck, BtlCreditFrame)
{
    btlcredit::FrameLimits l{4, 0, 4080, 0x40};
    btl_credit_hdr_t h{};
    h.tag = 0x41;
    h.kind = RDRP_CREDIT_PKT_DATA;
    h.version = BTL_CREDIT_WIRE_VERSION;
    h.src = 2;
    EXPECT_EQ(btlcredit::check_frame(true, sizeof(h), h, 4080, l), nullptr);
    EXPECT_NE(btlcredit::check_frame(true, sizeof(h), h, 4081, l), nullptr) << "larger than a slot";
    EXPECT_NE(btlcredit::check_frame(true, sizeof(h) + 1, h, 10, l), nullptr);
    EXPECT_NE(btlcredit::check_frame(false, sizeof(h), h, 0, l), nullptr) << "data kind on the control id";
    h.src = 0;
    EXPECT_NE(btlcredit::check_frame(true, sizeof(h), h, 10, l), nullptr) << "from ourselves";
    h.src = 4;
    EXPECT_NE(btlcredit::check_frame(true, sizeof(h), h, 10, l), nullptr) << "past the job";
    h.src = 1;
    h.version = BTL_CREDIT_WIRE_VERSION + 1;
    EXPECT_NE(btlcredit::check_frame(true, sizeof(h), h, 10, l), nullptr);
    h.version = BTL_CREDIT_WIRE_VERSION;
    h.tag = 0x3f;
    EXPECT_NE(btlcredit::check_frame(true, sizeof(h), h, 10, l), nullptr);
    h.kind = RDRP_CREDIT_PKT_RESPONSE;
    EXPECT_EQ(btlcredit::check_frame(false, sizeof(h), h, 0, l), nullptr);
    EXPECT_NE(btlcredit::check_frame(false, sizeof(h), h, 1, l), nullptr) << "control with payload";
    h.kind = RDRP_CREDIT_PKT_RESPONSE + 1;
    EXPECT_NE(btlcredit::check_frame(false, sizeof(h), h, 0, l), nullptr);
}

TEST(WireCheck, BtlCreditPut)
{
    btlcredit::FrameLimits l{4, 0, 4080, 0x40};
    btl_credit_put_hdr_t h{};
    h.version = BTL_CREDIT_WIRE_VERSION;
    h.src = 2;
    h.region_id = 7;
    h.addr = 0x10000;
    EXPECT_EQ(btlcredit::check_put(sizeof(h), h, 1 << 20, l), nullptr) << "larger than a slot is fine: no slot";
    EXPECT_NE(btlcredit::check_put(sizeof(h) - 1, h, 10, l), nullptr);
    EXPECT_NE(btlcredit::check_put(sizeof(btl_credit_hdr_t), h, 10, l), nullptr) << "a data header";
    h.addr = UINT64_MAX - 9;
    EXPECT_EQ(btlcredit::check_put(sizeof(h), h, 9, l), nullptr);
    EXPECT_NE(btlcredit::check_put(sizeof(h), h, 11, l), nullptr) << "wraps";
    h.addr = 0x10000;
    h.region_id = 0;
    EXPECT_NE(btlcredit::check_put(sizeof(h), h, 10, l), nullptr) << "no registration";
    h.region_id = 7;
    h.src = 0;
    EXPECT_NE(btlcredit::check_put(sizeof(h), h, 10, l), nullptr) << "from ourselves";
    h.src = 4;
    EXPECT_NE(btlcredit::check_put(sizeof(h), h, 10, l), nullptr) << "past the job";
    h.src = 1;
    h.version = BTL_CREDIT_WIRE_VERSION + 1;
    EXPECT_NE(btlcredit::check_put(sizeof(h), h, 10, l), nullptr);
}

TEST(WireCheck, BtlCreditWindowGet)
{
    btlcredit::FrameLimits l{4, 0, 4080, 0x40};
    btl_credit_get_req_t q{};
    q.version = BTL_CREDIT_WIRE_VERSION;
    q.src = 3;
    q.region_id = 5;
    q.addr = 0x20000;
    q.len = 4 << 20;
    q.token = 1;
    EXPECT_EQ(btlcredit::check_get_req(sizeof(q), q, 0, l), nullptr) << "larger than a slot is fine";
    EXPECT_NE(btlcredit::check_get_req(sizeof(q), q, 8, l), nullptr) << "a request carries no payload";
    EXPECT_NE(btlcredit::check_get_req(sizeof(q) - 1, q, 0, l), nullptr);
    EXPECT_NE(btlcredit::check_get_req(sizeof(btl_credit_put_hdr_t), q, 0, l), nullptr) << "a put header";
    q.addr = UINT64_MAX - 9;
    q.len = 9;
    EXPECT_EQ(btlcredit::check_get_req(sizeof(q), q, 0, l), nullptr);
    q.len = 11;
    EXPECT_NE(btlcredit::check_get_req(sizeof(q), q, 0, l), nullptr) << "wraps";
    q.addr = 0x20000;
    q.region_id = 0;
    EXPECT_NE(btlcredit::check_get_req(sizeof(q), q, 0, l), nullptr) << "no registration";
    q.region_id = 5;
    q.src = 0;
    EXPECT_NE(btlcredit::check_get_req(sizeof(q), q, 0, l), nullptr) << "from ourselves";
    q.src = 4;
    EXPECT_NE(btlcredit::check_get_req(sizeof(q), q, 0, l), nullptr) << "past the job";
    q.src = 1;
    q.version = BTL_CREDIT_WIRE_VERSION + 1;
    EXPECT_NE(btlcredit::check_get_req(sizeof(q), q, 0, l), nullptr);

    btl_credit_get_rep_t r{};
    r.version = BTL_CREDIT_WIRE_VERSION;
    r.src = 2;
    r.token = 99;
    EXPECT_EQ(btlcredit::check_get_rep(sizeof(r), r, l), nullptr);
    EXPECT_NE(btlcredit::check_get_rep(sizeof(r) + 1, r, l), nullptr);
    r.src = 0;
    EXPECT_NE(btlcredit::check_get_rep(sizeof(r), r, l), nullptr) << "from ourselves";
    r.src = 2;
    r.version = 0;
    EXPECT_NE(btlcredit::check_get_rep(sizeof(r), r, l), nullptr);
}

TEST(WireCheck, CdagPacket)
{
    cdag_svc::AmHdr h{5, 1, 2, 3, 4, 0};
    EXPECT_EQ(cdag_svc::check_packet(sizeof(h), h), nullptr);
    EXPECT_NE(cdag_svc::check_packet(sizeof(h) - 4, h), nullptr);
    h.src = -1;
    EXPECT_NE(cdag_svc::check_packet(sizeof(h), h), nullptr);
    h.src = 1;
    h.pad = 9;
    EXPECT_NE(cdag_svc::check_packet(sizeof(h), h), nullptr);
}

// coll/cdag single copy (coll_cdag_cma.cc): a descriptor names a non-empty
// extent that does not wrap, in a real process; a FIN carries a known
// status and nothing else.
TEST(WireCheck, CdagCmaDescriptorAndFin)
{
    cdag_svc::CmaDesc d{1234, 1, 0x7f0000001000ull, 1 << 20, 7};
    EXPECT_EQ(cdag_svc::check_cma_desc(sizeof(d), d), nullptr);
    EXPECT_NE(cdag_svc::check_cma_desc(sizeof(d) - 1, d), nullptr);
    EXPECT_NE(cdag_svc::check_cma_desc(0, d), nullptr);
    auto bad = d;
    bad.pid = 0;
    EXPECT_NE(cdag_svc::check_cma_desc(sizeof(d), bad), nullptr);
    bad = d;
    bad.len = 0;
    EXPECT_NE(cdag_svc::check_cma_desc(sizeof(d), bad), nullptr);
    bad = d;
    bad.addr = ~0ull - 10;  // wraps
    EXPECT_NE(cdag_svc::check_cma_desc(sizeof(d), bad), nullptr);

    cdag_svc::CmaFin f{7, cdag_svc::kCmaDone, 0};
    EXPECT_EQ(cdag_svc::check_cma_fin(sizeof(f), 0, f), nullptr);
    f.status = cdag_svc::kCmaRetry;
    EXPECT_EQ(cdag_svc::check_cma_fin(sizeof(f), 0, f), nullptr);
    EXPECT_NE(cdag_svc::check_cma_fin(sizeof(f), 1, f), nullptr);  // a FIN has no payload
    EXPECT_NE(cdag_svc::check_cma_fin(sizeof(f) + 8, 0, f), nullptr);
    f.status = 3;
    EXPECT_NE(cdag_svc::check_cma_fin(sizeof(f), 0, f), nullptr);
    f.status = -1;
    EXPECT_NE(cdag_svc::check_cma_fin(sizeof(f), 0, f), nullptr);
    f.status = cdag_svc::kCmaFailed;
    f.pad = 1;
    EXPECT_NE(cdag_svc::check_cma_fin(sizeof(f), 0, f), nullptr);
}

TEST(WireCheck, CdagCmaRandomDescriptorsAcceptedOnlyIfSafe)
{
    std::mt19937_64 rng(20261128);
    auto pick = [&]() -> uint64_t {
        switch (rng() % 4) {
        case 0: return rng();
        case 1: return ~0ull - rng() % 4096;
        case 2: return rng() % 3;
        default: return rng() % (1ull << 47);
        }
    };
    int accepted = 0;
    for (int i = 0; i < 100000; ++i) {
        cdag_svc::CmaDesc d{static_cast<int32_t>(rng() % 4 ? rng() % 100000 : rng()), static_cast<uint32_t>(rng() % 8),
                            pick(), pick(), rng()};
        size_t plen = rng() % 8 ? sizeof(d) : rng() % 64;
        if (cdag_svc::check_cma_desc(plen, d) != nullptr) continue;
        ++accepted;
        ASSERT_EQ(plen, sizeof(d));
        ASSERT_GT(d.pid, 0);
        ASSERT_GT(d.len, 0u);
        ASSERT_NE(d.addr, 0u);
        ASSERT_GE(d.addr + d.len, d.addr);  // [addr, addr + len) does not wrap
    }
    EXPECT_GT(accepted, 1000);
}
