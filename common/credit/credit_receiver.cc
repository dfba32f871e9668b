/*
 * Receiver side of the credit engine (see credit_receiver.h for the
 * algorithm, the exact rules R1-R5 and why they keep it safe and live).
 */
#include "credit_receiver.h"

#include <algorithm>

namespace rdrp::credit {

CreditReceiver::CreditReceiver(const Config &cfg, ReceiverOutput &out, Stats &stats)
    : mode_(cfg.mode),
      npeers_(cfg.npeers),
      credit_slots_(cfg.credit_slots),
      static_slots_(cfg.static_slots),
      max_quota_(cfg.max_quota),
      piggyback_(cfg.piggyback),
      piggyback_max_(cfg.piggyback_max),
      out_(out),
      stats_(stats)
{
    if (mode_ == Mode::kStatic) {
        quota_ = even_quota(cfg);
        static_threshold_ = return_threshold(quota_, credit_slots_);
        unassigned_ = data_region(cfg) - quota_ * npeers_;
        static_retrieved_.assign(npeers_, 0);
        return;
    }
    /* §6.3: intended = even share of the whole data region (the remainder
     * goes one slot each to the first senders, so the intended quotas sum to
     * the data region); current = static_slots; available = dynamic region. */
    available_ = dynamic_region(cfg);
    peers_.resize(npeers_);
    const uint32_t share = even_quota(cfg);
    uint32_t remainder = cfg.max_quota == 0 ? data_region(cfg) - share * npeers_ : 0;
    for (DynamicPeer &p : peers_) {
        p.intended = share + (remainder != 0 ? 1 : 0);
        remainder -= remainder != 0 ? 1 : 0;
        p.current = static_slots_;
    }
    fifo_ = ThresholdFifo(npeers_, credit_slots_ + 1, 1);
    if (static_slots_ > credit_slots_)  // R5
        for (uint32_t i = 0; i < npeers_; ++i)
            fifo_.set_at(i, credit_slots_, static_slots_ + 1 - credit_slots_);
    lists_ = ActivityLists(npeers_);
}

/* ------------------------------------------------------------ static mode */

void CreditReceiver::on_retrieved(uint32_t src)
{
    if (mode_ == Mode::kDynamic) {
        consume(src, 1);
        check_regular(src);
        return;
    }
    uint32_t &r = static_retrieved_[src];
    if (r == quota_) {  // more packets than the quota: the sender broke the protocol
        ++stats_.protocol_errors;
        return;
    }
    ++r;
    ++static_retrieved_total_;
    if (r >= static_threshold_) {
        r -= static_threshold_;
        static_retrieved_total_ -= static_threshold_;
        ++stats_.thresholds_regular;
        ++stats_.credit_packets;
        stats_.credits_explicit += static_threshold_;
        out_.send_credit_packet(src, static_threshold_);
    }
}

void CreditReceiver::on_retrieved_n(uint32_t src, uint32_t n)
{
    while (n != 0) {
        /* k packets that cannot reach a threshold or break the quota
         * before the last of them; anywhere near an edge (a round due,
         * a deferred round, a protocol error) one packet at a time */
        uint32_t k = 1;
        if (mode_ == Mode::kStatic) {
            const uint32_t r = static_retrieved_[src];
            if (r < static_threshold_ && r < quota_)
                k = std::min({n, static_threshold_ - r, quota_ - r});
            if (k > 1) {
                /* the first k - 1 only count; the last goes the full way */
                static_retrieved_[src] += k - 1;
                static_retrieved_total_ += k - 1;
            }
        } else {
            const DynamicPeer &p = peers_[src];
            const uint32_t head = fifo_.head(src);
            if (p.retrieved < head && p.current >= n)
                k = std::min(n, head - p.retrieved);
            if (k > 1)
                consume(src, k - 1);  /* below the head: check_regular would do nothing */
        }
        on_retrieved(src);
        n -= k;
    }
}

uint32_t CreditReceiver::piggyback_for(uint32_t dst)
{
    if (!piggyback_)
        return 0;
    if (mode_ == Mode::kStatic) {
        uint32_t &r = static_retrieved_[dst];
        const uint32_t give = std::min(r, piggyback_max_);
        r -= give;
        static_retrieved_total_ -= give;
        if (give != 0) {
            ++stats_.piggybacks;
            stats_.credits_piggybacked += give;
        }
        return give;
    }
    DynamicPeer &p = peers_[dst];
    if (p.blocked)  // R4: a sender being cut down gets nothing extra
        return 0;
    if (uint64_t(p.retrieved) + p.piggybacked >= fifo_.head(dst)) {
        const uint32_t g = round(dst, Way::kPiggyback);
        if (g != kDeferred) {
            if (g != 0) {
                ++stats_.piggybacks;
                stats_.credits_piggybacked += g;
            }
            return g;
        }
    }
    /* Below the threshold: hand back the slots freed since the last return,
     * as far as available_slots still has them. */
    const uint32_t give = std::min({p.retrieved, available_, piggyback_max_});
    if (give == 0)
        return 0;
    p.retrieved -= give;
    p.piggybacked += give;
    grant(p, give);
    ++stats_.piggybacks;
    stats_.credits_piggybacked += give;
    return give;
}

/* ----------------------------------------------------------- dynamic mode */

/* Slot management module (§6.5.1). */
void CreditReceiver::consume(uint32_t src, uint32_t n)
{
    DynamicPeer &p = peers_[src];
    if (p.current < n) {  // more than it was granted: the sender broke the protocol
        ++stats_.protocol_errors;
        n = p.current;
    }
    p.current -= n;
    available_ += n;
    p.retrieved += n;
}

void CreditReceiver::on_response(uint32_t src, uint32_t returned)
{
    if (mode_ == Mode::kStatic) {
        ++stats_.protocol_errors;
        return;
    }
    consume(src, 1);  // the response's own slot
    DynamicPeer &p = peers_[src];
    if (!p.blocked)
        ++stats_.protocol_errors;  // a response nobody asked for
    consume(src, returned);  // R3: handed-back credits count as consumed
    stats_.credits_taken_back += returned;
    p.blocked = false;
    check_regular(src);
}

void CreditReceiver::check_regular(uint32_t src)
{
    if (peers_[src].retrieved >= fifo_.head(src))
        round(src, Way::kRegular);
}

void CreditReceiver::grant(DynamicPeer &p, uint32_t credits)
{
    available_ -= credits;
    p.current += credits;
}

/* Activity control module (§6.5.2) once the threshold has been reached.
 * Returns the credits granted (sent in a credit packet for the regular way,
 * to be piggybacked for the piggybacking way) or kDeferred when the round
 * does not happen now. */
uint32_t CreditReceiver::round(uint32_t src, Way way)
{
    DynamicPeer &p = peers_[src];
    const uint32_t head = fifo_.head(src);
    uint32_t give = 0, push = 0, excess = 0;

    if (p.blocked) {
        /* Blocked flow: keep the sender at its minimum (R4). */
        ++stats_.blocked_thresholds;
        if (p.current >= static_slots_ || available_ == 0)
            return kDeferred;
        give = push = 1;
    } else {
        /* Every round must grant something (liveness): with nothing to give
         * the round waits for the next event. */
        if (available_ == 0 && (way == Way::kRegular || p.piggybacked == 0))
            return kDeferred;
        if (++p.rounds == credit_slots_ + 1) {
            p.rounds = 0;
            monitoring_point(src);
        }
        const uint32_t want = return_threshold(p.intended, credit_slots_);
        if (way == Way::kRegular) {
            give = push = std::min(want, available_);
        } else if (p.piggybacked <= want) {  // adjustment by deficit
            give = std::min({want - p.piggybacked, available_, piggyback_max_});
            push = p.piggybacked + give;
            ++stats_.adjust_deficit;
        } else {  // adjustment by excess
            push = want;
            excess = p.piggybacked - want;
            ++stats_.adjust_excess;
        }
    }

    /* R1: consumption past the head belongs to the next round. */
    if (way == Way::kRegular) {
        p.retrieved -= head;
        ++stats_.thresholds_regular;
    } else {
        p.retrieved = p.retrieved + p.piggybacked - head;
        ++stats_.thresholds_piggyback;
    }
    p.piggybacked = 0;
    fifo_.rotate(src, push);
    if (excess != 0)
        fifo_.set_head(src, fifo_.head(src) + excess);
    grant(p, give);
    if (way == Way::kRegular) {
        ++stats_.credit_packets;
        stats_.credits_explicit += give;
        out_.send_credit_packet(src, give);
    }
    return give;
}

/* Monitoring point (Fig. 6.2): the sender has used up what it was given
 * since the last one.  Promote it; a sender already in the high list (or in
 * the null list, which is handled like high so that it recovers quickly)
 * steals from the oldest low-activity sender. */
void CreditReceiver::monitoring_point(uint32_t src)
{
    ++stats_.monitoring_points;
    switch (lists_.level(src)) {
    case Activity::kLow:
        lists_.move_to_front(src, Activity::kMedium);
        return;
    case Activity::kMedium:
        lists_.move_to_front(src, Activity::kHigh);
        return;
    case Activity::kHigh:
    case Activity::kNull:
        break;
    }
    if (lists_.empty(Activity::kLow)) {
        lists_.shift();
        ++stats_.list_shifts;
    }
    lists_.move_to_front(src, Activity::kHigh);
    steal_for(src);
}

/* Credit stealing (Fig. 6.3, eq. 6.1).  Moves intended quota only: the
 * victim's real credits come back through its smaller thresholds or, once it
 * is down to its static slots, through a compulsory return request. */
void CreditReceiver::steal_for(uint32_t monitored)
{
    const uint32_t victim = lists_.back(Activity::kLow);
    if (victim == ActivityLists::kNone)
        return;
    DynamicPeer &mon = peers_[monitored];
    DynamicPeer &vic = peers_[victim];
    uint32_t amount = steal_amount(credit_slots_, mon.intended, vic.intended);
    amount = std::min(amount, vic.intended - static_slots_);  // never the static slots
    if (max_quota_ != 0)
        amount = std::min(amount, max_quota_ > mon.intended ? max_quota_ - mon.intended : 0);
    if (amount != 0) {
        vic.intended -= amount;
        mon.intended += amount;
        ++stats_.steals;
        stats_.credits_stolen += amount;
    }
    if (vic.intended == static_slots_) {
        if (vic.current > vic.intended && !vic.blocked) {
            vic.blocked = true;
            out_.request_return(victim);
        }
        lists_.move_to_front(victim, Activity::kNull);
    } else {
        lists_.move_to_front(victim, Activity::kMedium);
    }
}

/* ---------------------------------------------------------- introspection */

uint32_t CreditReceiver::outstanding(uint32_t peer) const
{
    return mode_ == Mode::kStatic ? quota_ - static_retrieved_[peer] : peers_[peer].current;
}

uint32_t CreditReceiver::free_data_slots() const
{
    return mode_ == Mode::kStatic ? uint32_t(static_retrieved_total_) + unassigned_ : available_;
}

uint32_t CreditReceiver::threshold(uint32_t peer) const
{
    return mode_ == Mode::kStatic ? static_threshold_ : fifo_.head(peer);
}

uint32_t CreditReceiver::retrieved(uint32_t peer) const
{
    return mode_ == Mode::kStatic ? static_retrieved_[peer] : peers_[peer].retrieved;
}

size_t CreditReceiver::bytes_per_peer(Mode mode, uint32_t credit_slots)
{
    if (mode == Mode::kStatic)
        return sizeof(uint32_t);  // retrieved_packets
    return sizeof(DynamicPeer) + ThresholdFifo::bytes_per_peer(credit_slots + 1) +
           ActivityLists::bytes_per_peer();
}

void CreditReceiver::test_set(uint32_t peer, uint32_t intended, uint32_t current, uint32_t retrieved,
                              uint32_t piggybacked)
{
    DynamicPeer &p = peers_[peer];
    available_ = available_ + p.current - current;
    p.intended = intended;
    p.current = current;
    p.retrieved = retrieved;
    p.piggybacked = piggybacked;
}

}  // namespace rdrp::credit
