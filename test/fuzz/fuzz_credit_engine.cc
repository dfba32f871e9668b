/*
 * Fuzz target: the credit engine (common/credit) fed by peers that send
 * anything - data beyond their credits, credit grants from nowhere,
 * return requests and responses out of turn - which is what the PML and
 * btl/credit hand it once a frame's header passed its check.  The engine
 * must answer every packet with a slot it does not hold already, kNoSlot
 * or kProtocolError (the caller then aborts with a clear message), and
 * its count of held slots must match what was handed out and not freed.
 *
 * Input: u8 peers, u8 mode, u16 slots, u8 credit slots, then steps of
 * u8 op: packet (u8 source, u8 kind, u32 credits), free (u8 which),
 * send (u8 peer), pop a control packet.
 */
#include <set>
#include <stdexcept>
#include <vector>

#include "fuzz_input.h"
#include "common/credit/credit_endpoint.h"

using namespace rdrp::credit;
using rdrp_fuzz::FuzzInput;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FuzzInput in(data, size);
    const uint32_t npeers = 1 + in.u8() % 8;
    Config cfg = default_config(npeers, (in.u8() & 1) ? Mode::kDynamic : Mode::kStatic);
    const uint16_t slots = in.u16();
    const uint8_t cslots = in.u8();
    if (slots) cfg.slots = slots % 1024;
    if (cslots) cfg.credit_slots = cfg.static_slots = 1 + cslots % 4;
    if (!validate(cfg).empty()) return 0;
    CreditEndpoint ep(cfg);
    std::set<int32_t> held;
    std::vector<int32_t> order;
    for (int step = 0; step < 96 && in.left() > 0; ++step) {
        switch (in.u8() % 4) {
        case 0: {
            const uint32_t src = in.u8() % npeers;
            PacketHeader h;
            h.kind = static_cast<PacketKind>(in.u8() % 4);
            h.credits = in.u32();
            const int32_t slot = ep.on_packet(src, h);
            if (slot == CreditEndpoint::kProtocolError || slot == CreditEndpoint::kNoSlot) break;
            FUZZ_REQUIRE(slot >= 0 && static_cast<uint32_t>(slot) < cfg.slots);
            FUZZ_REQUIRE(held.insert(slot).second);  // never handed out twice
            order.push_back(slot);
            break;
        }
        case 1: {
            if (order.empty()) {
                FUZZ_REQUIRE(!ep.on_slot_freed(static_cast<int32_t>(in.u8())));  // none in use
                break;
            }
            const size_t i = in.u8() % order.size();
            const int32_t slot = order[i];
            order.erase(order.begin() + static_cast<long>(i));
            held.erase(slot);
            FUZZ_REQUIRE(ep.on_slot_freed(slot));
            break;
        }
        case 2: {
            const uint32_t peer = in.u8() % npeers;
            if (ep.can_send(peer)) ep.on_send(peer, in.u8() & 1);
            break;
        }
        case 3: {
            ControlPacket c;
            if (ep.pop_control(&c)) FUZZ_REQUIRE(c.peer < npeers);
            break;
        }
        }
        FUZZ_REQUIRE(ep.held_slots() == held.size());
    }
    return 0;
}
