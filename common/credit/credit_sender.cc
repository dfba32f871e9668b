/*
 * Sender side of the credit engine (see credit_sender.h).
 */
#include "credit_sender.h"

#include <algorithm>

namespace rdrp::credit {

CreditSender::CreditSender(const Config &cfg, SenderOutput &out, Stats &stats)
    : static_slots_(cfg.mode == Mode::kDynamic ? cfg.static_slots : 0),
      out_(out),
      stats_(stats),
      credits_(cfg.npeers, cfg.mode == Mode::kDynamic ? cfg.static_slots : even_quota(cfg)),
      flags_(cfg.npeers, 0)
{
}

void CreditSender::on_credits(uint32_t peer, uint32_t credits)
{
    credits_[peer] += credits;
    flush(peer);
}

void CreditSender::on_return_request(uint32_t peer)
{
    if (flags_[peer] & kResponseFlag) {  // a receiver never asks twice while blocked
        ++stats_.protocol_errors;
        return;
    }
    flags_[peer] |= kResponseFlag;
    flush(peer);
    if (flags_[peer] & kResponseFlag)
        ++stats_.control_deferred;
}

void CreditSender::request_return(uint32_t peer)
{
    flags_[peer] |= kRequestFlag;
    flush(peer);
    if (flags_[peer] & kRequestFlag)
        ++stats_.control_deferred;
}

/* Parked control packets go before any data (they have priority, §6.1);
 * with one credit and both parked, the request goes first (§6.5.4). */
void CreditSender::flush(uint32_t peer)
{
    if ((flags_[peer] & kRequestFlag) && credits_[peer] != 0)
        send_request(peer);
    if ((flags_[peer] & kResponseFlag) && credits_[peer] != 0)
        send_response(peer);
}

void CreditSender::send_request(uint32_t peer)
{
    flags_[peer] &= uint8_t(~kRequestFlag);
    --credits_[peer];
    ++stats_.requests_sent;
    out_.send_control(peer, PacketKind::kReturnRequest, 0);
}

/* The response itself costs a credit, so a sender that had n >= static_slots
 * ends with static_slots - 1 (§6.5.4). */
void CreditSender::send_response(uint32_t peer)
{
    flags_[peer] &= uint8_t(~kResponseFlag);
    const uint32_t n = credits_[peer];
    const uint32_t give_back = n > static_slots_ ? n - static_slots_ : 0;
    credits_[peer] = n - give_back - 1;
    ++stats_.responses_sent;
    stats_.credits_given_back += give_back;
    out_.send_control(peer, PacketKind::kReturnResponse, give_back);
}

}  // namespace rdrp::credit
