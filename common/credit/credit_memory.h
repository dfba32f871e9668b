/*
 * How much memory the engine's own structures take, computed from the
 * sizes of the real structures (sizeof), so the thesis' Table 7.1 can be
 * recomputed for this implementation.
 */
#ifndef RDRP_CREDIT_MEMORY_H
#define RDRP_CREDIT_MEMORY_H

#include <cstddef>
#include <cstdint>

#include "credit_config.h"

namespace rdrp::credit {

struct Footprint {
    size_t receiver_per_peer;  /* receiver side, per sender */
    size_t sender_per_peer;    /* sender side, per receiver */
    size_t slot_bytes;         /* slot table, per data-region slot */
    size_t fixed;              /* the endpoint object itself */
};

Footprint footprint(Mode mode, uint32_t credit_slots);
/* Bytes of engine structures for one process with npeers peers and a data
 * region of data_slots slots (the mailbox payload itself not included). */
uint64_t structure_bytes(Mode mode, uint32_t credit_slots, uint64_t npeers, uint64_t data_slots);

}  // namespace rdrp::credit

#endif  // RDRP_CREDIT_MEMORY_H
