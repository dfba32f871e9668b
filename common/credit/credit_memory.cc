/*
 * Engine memory footprint (see credit_memory.h).
 */
#include "credit_memory.h"

#include "credit_endpoint.h"
#include "credit_receiver.h"
#include "credit_sender.h"

namespace rdrp::credit {

Footprint footprint(Mode mode, uint32_t credit_slots)
{
    Footprint f;
    f.receiver_per_peer = CreditReceiver::bytes_per_peer(mode, credit_slots);
    f.sender_per_peer = CreditSender::bytes_per_peer();
    f.slot_bytes = sizeof(uint32_t);
    f.fixed = sizeof(CreditEndpoint);
    return f;
}

uint64_t structure_bytes(Mode mode, uint32_t credit_slots, uint64_t npeers, uint64_t data_slots)
{
    const Footprint f = footprint(mode, credit_slots);
    return (f.receiver_per_peer + f.sender_per_peer) * npeers + f.slot_bytes * data_slots + f.fixed;
}

}  // namespace rdrp::credit
