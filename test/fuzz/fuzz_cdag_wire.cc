/*
 * Fuzz target: coll/cdag packet headers (cdag_wire.h check_packet, what
 * am_cb runs before it looks anything up).  An accepted header becomes a
 * matching key the way am_cb builds it; the target checks the key
 * round-trips the header's fields (no sign or width loss in the source
 * rank), since a key that differed from the sender's would never match
 * and leak an early-arrival buffer.
 *
 * Input: u16 header length, header bytes.
 */
#include <vector>

#include "fuzz_input.h"
#include "coll_cdag/cdag_wire.h"

using rdrp_fuzz::FuzzInput;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FuzzInput in(data, size);
    const size_t hlen = in.u16() % 64;
    std::vector<char> hbuf(hlen);
    in.bytes(hbuf.data(), hlen);
    cdag_svc::AmHdr h{};
    if (hlen >= sizeof(h)) std::memcpy(&h, hbuf.data(), sizeof(h));
    if (cdag_svc::check_packet(hlen, h)) return 0;
    FUZZ_REQUIRE(hlen == sizeof(h) && h.pad == 0);
    const uint32_t key_src = static_cast<uint32_t>(h.src);
    FUZZ_REQUIRE(static_cast<int32_t>(key_src) == h.src && h.src >= 0);
    return 0;
}
