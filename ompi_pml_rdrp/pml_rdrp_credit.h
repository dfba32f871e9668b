/*
 * pml/rdrp: credit-gated eager data (issue 4).  Every eager payload and
 * every rendezvous first chunk that may sit at an unmatched receiver takes
 * a credit of the receiver's mailbox (btl_credit's engine, thesis ch. 5-7);
 * at the receiver it occupies a mailbox slot until it is matched and
 * copied.  A sender without credit never waits: the message goes by
 * rendezvous without a first chunk, whose header is not gated.  So
 * unexpected eager memory is bounded by the mailbox and no legal program
 * can deadlock on credits.
 */
#ifndef PML_RDRP_CREDIT_H
#define PML_RDRP_CREDIT_H

#include <cstddef>
#include <cstdint>

#include "pml_rdrp_wire_check.h"

namespace rdrp {

bool credit_enabled();
/* Set up for npeers processes (peer index = vpid); false with a message shown. */
bool credit_init(uint32_t npeers, uint32_t self);
void credit_fini();
uint32_t credit_self();

/* Sender: take a credit towards peer for one data packet.  false: none
 * (counted as a stall if count_stall).  *piggy: credits to attach to the
 * packet. */
bool credit_take(uint32_t peer, uint32_t *piggy, bool count_stall = true);

/* Receiver: a gated data packet arrived from src carrying piggy credits;
 * returns its mailbox slot (aborts on a protocol violation).  Settles the
 * deferred packets first. */
int32_t credit_arrive(uint32_t src, uint32_t piggy);
char *credit_slot_mem(int32_t slot);
size_t credit_slot_size();
void credit_slot_free(int32_t slot);

/* A credit-protocol control packet arrived (AM RDRP_AM_CREDIT). */
void credit_control(uint32_t src, uint8_t kind, uint32_t credits);

/* What a gated packet may claim here (wire::check_gated). */
const wire::CreditLimits &credit_limits();

/* Deferred accounting.  A gated eager packet that meets its receive on
 * arrival never needs mailbox memory: its engine work (take a slot, read
 * the piggybacked credits, free the slot, maybe return credits) is queued
 * by credit_consumed() and done by credit_settle() off the latency path:
 * after the next send has left, when the next receive is posted, when a
 * progress pass finds nothing to do, before any other credit event, and
 * when a send finds no credit.  The
 * engine sees every packet exactly once, in arrival order among deferred
 * packets; until then the packet counts as in flight, so conservation
 * (held + in flight + free = mailbox) holds throughout. */
void credit_consumed(uint32_t src, uint32_t piggy);
void credit_settle();
extern unsigned credit_deferred_count;
static inline void credit_settle_if_due()
{
    if (__builtin_expect(credit_deferred_count != 0, 0)) credit_settle();
}

}  // namespace rdrp
#endif
