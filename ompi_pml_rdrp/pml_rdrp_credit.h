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
#include "common/credit/credit_endpoint.h"

namespace rdrp {

bool credit_enabled();
/* Set up for npeers processes (peer index = vpid); false with a message shown. */
bool credit_init(uint32_t npeers, uint32_t self);
void credit_fini();
/* This process's index in the credit engine (its vpid). */
extern uint32_t credit_self_vpid;
static inline uint32_t credit_self() { return credit_self_vpid; }

/* Sender: take a credit towards peer for one data packet.  false: none
 * (counted as a stall if count_stall).  *piggy: credits to attach to the
 * packet. */
bool credit_take(uint32_t peer, uint32_t *piggy, bool count_stall = true);

/* The engine and its peer count (null / 0 with credits off), for the
 * inline fast path below; owned by pml_rdrp_credit.cc. */
extern credit::CreditEndpoint *credit_engine;
extern uint32_t credit_npeers;

/* credit_take() for the common case, inline (it is on every small
 * message's path): a credit is there and nothing is due to piggyback, so
 * the engine only counts the credit down and no control packet can
 * result.  false: not that case, nothing changed; then credit_take()
 * decides (and may transmit credit packets, so a caller holding a ring
 * reservation must make it again). */
static inline bool credit_take_fast(uint32_t peer, uint32_t *piggy)
{
    credit::CreditEndpoint *e = credit_engine;
    if (__builtin_expect(peer < credit_npeers && e->can_send(peer) &&
                         !e->receiver().may_piggyback(peer), 1)) {
        *piggy = e->on_send(peer, false);  /* 0: no room asked for credits */
        return true;
    }
    return false;
}

static inline bool credit_take_inline(uint32_t peer, uint32_t *piggy, bool count_stall = true)
{
    return credit_take_fast(peer, piggy) || credit_take(peer, piggy, count_stall);
}

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
extern wire::CreditLimits credit_limits_now;  /* set by credit_init/credit_fini only */
static inline const wire::CreditLimits &credit_limits() { return credit_limits_now; }  /* every arrival checks it */

/* Deferred accounting.  A gated eager packet that meets its receive on
 * arrival never needs mailbox memory: its engine work (take a slot, read
 * the piggybacked credits, free the slot, maybe return credits) is queued
 * by credit_consumed() and done by credit_settle() off the latency path:
 * after the next send has left, when the next receive is posted, when a
 * progress pass finds nothing to do, before any other credit event, and
 * when a send finds no credit.  The queue is a count and a credit sum per
 * sender (and the list of senders with something queued): credit_settle()
 * hands each sender's packets to the engine in one call
 * (on_data_consumed_batch, equal to one call per packet with the
 * piggybacked credits read first), so a stream of small messages costs the
 * engine one call per settle, not one per message.  The engine sees every
 * packet exactly once, each sender's in arrival order; until then the
 * packet counts as in flight, so conservation (held + in flight + free =
 * mailbox) holds throughout. */
void credit_settle();
extern unsigned credit_deferred_count;       /* packets queued, all senders */
constexpr unsigned kCreditMaxDeferred = 64;  /* settle at the latest after this many */
struct CreditDeferred { uint32_t n, piggy; };
extern CreditDeferred *credit_deferred;      /* per sender (vpid), credit_npeers entries */
extern uint32_t *credit_deferred_peers;      /* senders with n != 0, in first-arrival order */
extern unsigned credit_deferred_npeers;
/* inline: once per small message that meets its receive */
static inline void credit_consumed(uint32_t src, uint32_t piggy)
{
    if (__builtin_expect(credit_deferred_count == kCreditMaxDeferred, 0)) credit_settle();
    ++credit_deferred_count;
    CreditDeferred &d = credit_deferred[src];
    if (d.n++ == 0) credit_deferred_peers[credit_deferred_npeers++] = src;
    d.piggy += piggy;
}
static inline void credit_settle_if_due()
{
    if (__builtin_expect(credit_deferred_count != 0, 0)) credit_settle();
}

}  // namespace rdrp
#endif
