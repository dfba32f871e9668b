/*
 * Sender side of the credit engine: one credit counter per receiver plus
 * the two flags of thesis §6.2 (compulsory request flag, compulsory response
 * flag) that park a control packet which could not go out for lack of a
 * credit.  No I/O: control packets leave through SenderOutput.
 *
 * Contract for every peer index: 0 <= peer < npeers.
 */
#ifndef RDRP_CREDIT_SENDER_H
#define RDRP_CREDIT_SENDER_H

#include <cstddef>
#include <cstdint>
#include <vector>

#include "credit_config.h"
#include "credit_types.h"

namespace rdrp::credit {

class CreditSender {
public:
    /* cfg must be valid (validate(cfg).empty()).  Initial credits: the even
     * quota in static mode, static_slots in dynamic mode (§6.3). */
    CreditSender(const Config &cfg, SenderOutput &out, Stats &stats);

    uint32_t credits(uint32_t peer) const { return credits_[peer]; }
    /* A data packet may go to peer now.  Parked control packets hold every
     * credit they can get, so a parked flag implies 0 credits and false. */
    bool can_send(uint32_t peer) const { return credits_[peer] != 0; }
    /* A data packet to peer is being sent: takes one credit.  Precondition:
     * can_send(peer).  Inline: it is on every eager message's path. */
    void on_data_sent(uint32_t peer)
    {
        if (credits_[peer] == 0) {  // caller ignored can_send(): count it, never wrap
            ++stats_.protocol_errors;
            return;
        }
        --credits_[peer];
        ++stats_.data_sent;
    }
    /* Credits arrived from peer (credit packet or piggyback), in the order
     * peer emitted them.  Flushes parked control packets first (request
     * before response, §6.5.4). */
    void on_credits(uint32_t peer, uint32_t credits);
    /* peer asked for our excess credits: respond with max(n - static_slots, 0)
     * of our n credits, now or when a credit arrives. */
    void on_return_request(uint32_t peer);
    /* Our receiver side wants peer to return its excess: send the request
     * now or when a credit arrives. */
    void request_return(uint32_t peer);

    bool request_parked(uint32_t peer) const { return flags_[peer] & kRequestFlag; }
    bool response_parked(uint32_t peer) const { return flags_[peer] & kResponseFlag; }

    static size_t bytes_per_peer() { return sizeof(uint32_t) + sizeof(uint8_t); }

private:
    static constexpr uint8_t kRequestFlag = 1;
    static constexpr uint8_t kResponseFlag = 2;

    void flush(uint32_t peer);
    void send_request(uint32_t peer);
    void send_response(uint32_t peer);

    uint32_t static_slots_;
    SenderOutput &out_;
    Stats &stats_;
    std::vector<uint32_t> credits_;
    std::vector<uint8_t> flags_;
};

}  // namespace rdrp::credit

#endif  // RDRP_CREDIT_SENDER_H
