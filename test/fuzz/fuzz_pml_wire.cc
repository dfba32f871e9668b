/*
 * Fuzz target: pml/rdrp wire headers (pml_rdrp_wire_check.h), the checks
 * every AM handler runs before it touches memory.  The input picks a
 * message type, the receiver's credit limits, a header (any bytes, any
 * header length) and a data length.  When a check accepts, the target does
 * what the handler then does with the same bounds - copies the payload
 * into a mailbox slot, the rkey out of the header, a chunk into the
 * receive buffer - on heap buffers of exactly the size the handler's would
 * have, so AddressSanitizer reports any access the check let through.
 *
 * Input: u8 type, u8 credits on, u16 slot size, u8 peers, then per type
 * (see make_seeds.cc, which writes real headers in this layout).
 */
#include <cstring>
#include <vector>

#include "fuzz_input.h"
#include "ompi_pml_rdrp/pml_rdrp_wire_check.h"

using namespace rdrp::wire;
using rdrp_fuzz::FuzzInput;

namespace {

/* The handler's copy: len bytes from a source of len bytes into dst at off. */
void copy_into(std::vector<char> &dst, uint64_t off, uint64_t len)
{
    std::vector<char> src(len ? len : 1, 'x');
    if (len) std::memcpy(dst.data() + off, src.data(), len);
}

/* A header of hlen bytes as the AM delivers it (only hlen bytes exist). */
template <class H> bool read_header(const std::vector<char> &hbuf, H *h)
{
    if (hbuf.size() < sizeof(H)) return false;
    std::memcpy(h, hbuf.data(), sizeof(H));
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FuzzInput in(data, size);
    const uint8_t type = in.u8() % 9;
    CreditLimits c;
    c.enabled = in.u8() & 1;
    c.slot_size = in.u16();
    c.npeers = in.u8();
    const size_t hlen = in.u16() % 1024;
    std::vector<char> hbuf(hlen);
    in.bytes(hbuf.data(), hlen);
    const uint64_t len = in.u32() % (1u << 16);

    switch (type) {
    case 0: {  // RDRP_AM_EAGER
        rdrp_eager_hdr_t h{};
        read_header(hbuf, &h);
        if (check_eager(hlen, h, len, c)) break;
        FUZZ_REQUIRE(hlen == sizeof(h));
        if (h.flags & RDRP_FLAG_CREDIT) {  // payload lands in a mailbox slot
            std::vector<char> slot(c.slot_size ? c.slot_size : 1);
            copy_into(slot, 0, len);
            FUZZ_REQUIRE(h.src_vpid < c.npeers);
        }
        break;
    }
    case 1: {  // RDRP_AM_EAGER_PACKED: the header is inside the data
        if (check_packed_length(hlen, len)) break;
        std::vector<char> d(len, 0);
        rdrp_eager_hdr_t h;
        std::memcpy(&h, d.data(), sizeof(h));
        std::vector<char> payload(RDRP_EAGER_PACKED_MAX);
        std::memcpy(payload.data(), d.data() + sizeof(h), len - sizeof(h));
        break;
    }
    case 2: {  // RDRP_AM_RTS
        rdrp_rts_hdr_t h{};
        if (!read_header(hbuf, &h)) {
            FUZZ_REQUIRE(check_rts(h, hlen, len, c) != nullptr);
            break;
        }
        if (check_rts(h, hlen, len, c)) break;
        std::vector<char> rkey(h.rkey_len ? h.rkey_len : 1);  // unpacked from the header
        std::memcpy(rkey.data(), hbuf.data() + sizeof(h), h.rkey_len);
        FUZZ_REQUIRE(h.first_len == len && h.first_len <= h.total_len);
        if (h.total_len <= (1u << 16)) {  // first chunk into the receive buffer
            std::vector<char> recv(h.total_len ? h.total_len : 1);
            copy_into(recv, 0, h.first_len);
        }
        if (h.flags & RDRP_FLAG_CREDIT) FUZZ_REQUIRE(h.first_len <= c.slot_size);
        break;
    }
    case 3: {  // RDRP_AM_CTS at a sender of `packed` bytes
        rdrp_cts_hdr_t h{};
        read_header(hbuf, &h);
        const uint64_t packed = in.u64();
        if (check_cts(h, packed)) break;
        FUZZ_REQUIRE(h.window > 0 && h.chunk_size > 0 && h.want_len <= packed);
        /* the sender streams want_len bytes in chunks: the loop ends */
        uint64_t chunks = h.want_len / h.chunk_size + (h.want_len % h.chunk_size != 0);
        FUZZ_REQUIRE(chunks <= h.want_len);
        break;
    }
    case 4: {  // RDRP_AM_CHUNK into a receive of want bytes, first_len taken by the RTS
        const uint64_t offset = in.u64(), clen = in.u64();
        const uint64_t want = in.u32() % (1u << 16), first = in.u32() % (1u << 17);
        if (check_chunk(offset, clen, first, want)) break;
        std::vector<char> recv(want ? want : 1);
        copy_into(recv, offset, clen);
        break;
    }
    case 5: {  // RDRP_AM_RTR at a put sender of `packed` bytes
        rdrp_rtr_hdr_t h{};
        const uint64_t packed = in.u64();
        if (!read_header(hbuf, &h)) {
            FUZZ_REQUIRE(check_rtr(h, hlen, packed) != nullptr);
            break;
        }
        if (check_rtr(h, hlen, packed)) break;
        std::vector<char> rkey(h.rkey_len ? h.rkey_len : 1);
        std::memcpy(rkey.data(), hbuf.data() + sizeof(h), h.rkey_len);
        FUZZ_REQUIRE(h.want_len <= packed);
        break;
    }
    case 6: {  // RDRP_AM_CREDIT
        rdrp_credit_hdr_t h{};
        read_header(hbuf, &h);
        if (check_credit(hlen, h, c)) break;
        std::vector<uint32_t> per_peer(c.npeers);  // the engine's per-source state
        per_peer.at(h.src_vpid) += h.credits;
        FUZZ_REQUIRE(h.kind >= 1 && h.kind <= 3);
        break;
    }
    case 8: {  // RDRP_RING_EAGER_TINY (even len) or _GATED (odd) from the ring of process vpid
        const uint32_t vpid = in.u8();
        if (check_tiny(hbuf.size(), len)) break;
        FUZZ_REQUIRE(hbuf.size() == sizeof(rdrp_tiny_hdr_t) && len <= RDRP_TINY_MAX);
        rdrp_tiny_hdr_t t;
        std::memcpy(&t, hbuf.data(), sizeof(t));
        rdrp_eager_hdr_t h = expand_tiny(t, vpid, len & 1);
        FUZZ_REQUIRE(h.m.src == static_cast<int32_t>(vpid) && h.src_vpid == vpid && h.credits == 0 &&
                     !(h.flags & RDRP_FLAG_SYNC));
        if (check_gated(h.flags, h.src_vpid, len, c)) break;
        std::vector<char> slot(c.slot_size ? c.slot_size : 1);
        if (h.flags & RDRP_FLAG_CREDIT) copy_into(slot, 0, len);
        break;
    }
    case 7: {  // a match header's source against the communicator size
        const int32_t src = static_cast<int32_t>(in.u32());
        const int comm_size = static_cast<int>(in.u16());
        if (check_source(src, comm_size)) break;
        std::vector<int> procs(comm_size);
        procs.at(static_cast<size_t>(src)) = 1;
        break;
    }
    }
    return 0;
}
