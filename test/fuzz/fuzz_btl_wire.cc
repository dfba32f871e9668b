/*
 * Fuzz target: btl/credit frames (btl_credit_wire_check.h), the check both
 * AM handlers run before the credit engine or the mailbox is touched.
 * When it accepts, the target does what am_data does next with the same
 * bounds: copies the header and payload into one mailbox slot (a heap
 * buffer of exactly slot size) and indexes the per-sender state.
 *
 * Input: u8 data/control, u32 nprocs, u32 me, u16 payload cap, u16 header
 * length, header bytes, u32 payload length.
 */
#include <vector>

#include "fuzz_input.h"
#include "btl_credit/btl_credit_wire_check.h"

using rdrp_fuzz::FuzzInput;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FuzzInput in(data, size);
    const bool is_data = in.u8() & 1;
    btlcredit::FrameLimits l;
    l.nprocs = in.u32() % 4096;
    l.me = in.u32() % 4096;
    l.payload_cap = in.u16();
    l.min_data_tag = 0x40;  // MCA_BTL_TAG_PML in Open MPI 4.1
    const size_t hlen = in.u16() % 64;
    std::vector<char> hbuf(hlen);
    in.bytes(hbuf.data(), hlen);
    const size_t len = in.u32() % (1u << 18);

    btl_credit_hdr_t h{};
    if (hlen >= sizeof(h)) std::memcpy(&h, hbuf.data(), sizeof(h));
    if (btlcredit::check_frame(is_data, hlen, h, len, l)) return 0;
    FUZZ_REQUIRE(hlen == sizeof(h) && h.version == BTL_CREDIT_WIRE_VERSION);
    std::vector<uint32_t> rx_seq(l.nprocs);
    rx_seq.at(h.src) = h.seq;
    FUZZ_REQUIRE(h.src != l.me);
    if (is_data) {
        std::vector<char> slot(sizeof(h) + l.payload_cap);
        std::vector<char> payload(len ? len : 1, 'p');
        std::memcpy(slot.data(), &h, sizeof(h));
        if (len) std::memcpy(slot.data() + sizeof(h), payload.data(), len);
        FUZZ_REQUIRE(h.tag >= l.min_data_tag);
    } else {
        FUZZ_REQUIRE(len == 0 && h.kind >= RDRP_CREDIT_PKT_CREDIT && h.kind <= RDRP_CREDIT_PKT_RESPONSE);
    }
    return 0;
}
