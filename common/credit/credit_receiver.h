/*
 * Receiver side of the credit engine: decides when and how many credits go
 * back to each sender.  No I/O: credit packets and compulsory return
 * requests leave through ReceiverOutput.
 *
 * Static mode (thesis chapter 5): every sender owns `quota` slots; after
 * `threshold` = eq. 5.1(quota) freed slots the receiver returns exactly that
 * many credits in a credit packet; a data packet going back to the sender
 * may piggyback the freed slots counted so far instead.
 *
 * Dynamic mode (thesis chapter 6), per sender: FIFO of credit_slots + 1
 * thresholds, intended quota, current_credits, retrieved_packets,
 * piggybacked_credits, blocked flag, activity list; one available_slots
 * counter (§6.2).  Modules of §6.5:
 *   slot management   consume(): available_slots++, current_credits--,
 *                     retrieved_packets++ for every credit-consuming packet;
 *   activity control  round(): threshold reached -> blocked flow (0 or 1
 *                     credit) or unblocked flow (monitoring point every
 *                     credit_slots + 1 thresholds: promote in the activity
 *                     lists, shift them, steal by eq. 6.1 from the oldest
 *                     low-activity sender, never below static_slots, and send
 *                     a compulsory request to a victim left with only static
 *                     slots but holding more); then a new threshold by eq. 5.1
 *                     of the intended quota, granted as far as
 *                     available_slots allows;
 *   piggybacking      piggyback_for(): the threshold may be reached the
 *                     "piggybacking way" (retrieved + piggybacked >= head),
 *                     with adjustment by deficit or by excess (§6.6).
 *
 * Exact rules where the thesis leaves room (each keeps the two properties
 * below; the unit tests check them on random traffic):
 *   R1 A threshold is "reached" in the regular way when retrieved_packets,
 *      which piggybacking decrements by what it returned, reaches the head;
 *      in the piggybacking way when retrieved + piggybacked reaches it.
 *      Consumption beyond the head is carried into the next round, not lost.
 *   R2 The value pushed into the FIFO is what the round actually granted
 *      (eq. 5.1 capped by available_slots; deficit: piggybacked + the rest),
 *      so a later threshold never asks for more packets than the sender was
 *      given.  Excess: push eq. 5.1's value and raise the new head by the
 *      excess, as in the thesis.
 *   R3 Credits handed back by a compulsory response count as consumed
 *      (retrieved_packets += n) and the threshold is re-checked after the
 *      blocked flag is cleared; otherwise a sender cut down to static_slots-1
 *      could never reach an old, large threshold.
 *   R4 A blocked sender that reaches its threshold while it still holds
 *      static_slots or more gets nothing and the round is not consumed; it is
 *      taken again once the response arrives.  A blocked sender is not
 *      piggybacked to.
 *   R5 Initial FIFO: all ones (thesis §6.3); if static_slots > credit_slots
 *      the last entry is raised so that the entries sum to static_slots + 1.
 *
 * Properties (for a caller that honours the CreditEndpoint contract):
 *   Safety:   at most credit_slots explicit credit packets from this receiver
 *             are ever unprocessed at a sender (the credit region cannot
 *             overflow), and available_slots + sum(current_credits) = data
 *             region, so the data region cannot overflow either.
 *   Liveness: every round grants >= 1 credit, which makes the head reachable
 *             whenever the sender has consumed everything it was given: a
 *             sender with pending data always gets credits back.
 */
#ifndef RDRP_CREDIT_RECEIVER_H
#define RDRP_CREDIT_RECEIVER_H

#include <cstddef>
#include <cstdint>
#include <vector>

#include "credit_activity.h"
#include "credit_config.h"
#include "credit_threshold_fifo.h"
#include "credit_types.h"

namespace rdrp::credit {

class CreditReceiver {
public:
    /* cfg must be valid (validate(cfg).empty()). */
    CreditReceiver(const Config &cfg, ReceiverOutput &out, Stats &stats);

    /* A credit-consuming packet from src (data packet or compulsory return
     * request) has left the mailbox: its slot is free.  May emit a credit
     * packet to src and, at a monitoring point, a return request to a victim. */
    void on_retrieved(uint32_t src);
    /* n such packets from src at once: exactly n on_retrieved(src) calls
     * (the same rounds, credit packets, requests and counters), but the
     * stretches where no threshold can be reached cost one step each
     * instead of one per packet. */
    void on_retrieved_n(uint32_t src, uint32_t n);
    /* A compulsory return response from src, handing back `returned`
     * credits, has left the mailbox (its own slot is free too).  Clears the
     * blocked flag; may emit a credit packet to src.  Dynamic mode only. */
    void on_response(uint32_t src, uint32_t returned);
    /* A data packet with room for credits is about to go to dst: returns the
     * credits to attach (0 = none), already accounted as granted.  Call only
     * for a packet that will really be sent, after every control packet
     * emitted before it. */
    uint32_t piggyback_for(uint32_t dst);
    /* false only when piggyback_for(dst) would return 0 and change
     * nothing: the common case of a flow with nothing to return, tested
     * inline before the call. */
    bool may_piggyback(uint32_t dst) const
    {
        if (!piggyback_) return false;
        if (mode_ == Mode::kStatic) return static_retrieved_[dst] != 0;
        const DynamicPeer &p = peers_[dst];
        if (p.blocked) return false;
        return uint64_t(p.retrieved) + p.piggybacked >= fifo_.head(dst) ||
               (p.retrieved != 0 && available_ != 0);
    }

    /* ---- introspection (tests, simulator, counters) ---- */
    Mode mode() const { return mode_; }
    /* Credits of ours peer holds, has in flight as credit-consuming packets
     * or has yet to learn about (credit packets and piggybacks in transit). */
    uint32_t outstanding(uint32_t peer) const;
    /* Data-region slots not promised to any sender (dynamic: available_slots;
     * static: freed slots not yet returned plus the rounding remainder). */
    uint32_t free_data_slots() const;
    uint32_t threshold(uint32_t peer) const;  /* current_threshold */
    uint32_t retrieved(uint32_t peer) const;
    /* Dynamic mode only below. */
    uint32_t intended(uint32_t peer) const { return peers_[peer].intended; }
    uint32_t piggybacked(uint32_t peer) const { return peers_[peer].piggybacked; }
    bool blocked(uint32_t peer) const { return peers_[peer].blocked; }
    Activity activity(uint32_t peer) const { return lists_.level(peer); }
    const ThresholdFifo &fifo() const { return fifo_; }
    const ActivityLists &lists() const { return lists_; }

    /* Bytes of per-peer state in each mode, for the memory table (§7.5). */
    static size_t bytes_per_peer(Mode mode, uint32_t credit_slots);
    /* Test hook: overwrite one sender's dynamic counters (keeps
     * available_slots consistent with current_credits). */
    void test_set(uint32_t peer, uint32_t intended, uint32_t current, uint32_t retrieved,
                  uint32_t piggybacked);

private:
    /* Per-sender counters of §6.2 (the FIFO and list links live in fifo_ and
     * lists_ so each structure stays one flat array). */
    struct DynamicPeer {
        uint32_t intended = 0;     /* intended credit quota */
        uint32_t current = 0;      /* current_credits */
        uint32_t retrieved = 0;    /* retrieved_packets, net of piggybacked returns (R1) */
        uint32_t piggybacked = 0;  /* piggybacked_credits of this round */
        uint8_t rounds = 0;        /* thresholds reached since the last monitoring point */
        bool blocked = false;
    };
    enum class Way : uint8_t { kRegular, kPiggyback };
    static constexpr uint32_t kDeferred = UINT32_MAX;

    void consume(uint32_t src, uint32_t n);
    void check_regular(uint32_t src);
    uint32_t round(uint32_t src, Way way);
    void monitoring_point(uint32_t src);
    void steal_for(uint32_t monitored);
    void grant(DynamicPeer &p, uint32_t credits);

    Mode mode_;
    uint32_t npeers_;
    uint32_t credit_slots_;
    uint32_t static_slots_;
    uint32_t max_quota_;
    bool piggyback_;
    uint32_t piggyback_max_;
    ReceiverOutput &out_;
    Stats &stats_;

    /* static mode */
    uint32_t quota_ = 0;
    uint32_t static_threshold_ = 0;
    uint32_t unassigned_ = 0;              /* data region beyond npeers * quota */
    uint64_t static_retrieved_total_ = 0;
    std::vector<uint32_t> static_retrieved_;

    /* dynamic mode */
    uint32_t available_ = 0;               /* available_slots */
    std::vector<DynamicPeer> peers_;
    ThresholdFifo fifo_;
    ActivityLists lists_;
};

}  // namespace rdrp::credit

#endif  // RDRP_CREDIT_RECEIVER_H
