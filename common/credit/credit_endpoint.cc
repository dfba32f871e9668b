/*
 * One process's credit engine (see credit_endpoint.h): routes each packet
 * to the side it concerns, in the order of Fig. 6.1 (slot management and
 * activity control for the packet's sender, then the control-packet module).
 */
#include "credit_endpoint.h"

#include <stdexcept>

namespace rdrp::credit {

namespace {

const Config &checked(const Config &cfg)
{
    const std::string err = validate(cfg);
    if (!err.empty())
        throw std::invalid_argument("credit engine: " + err);
    return cfg;
}

}  // namespace

CreditEndpoint::CreditEndpoint(const Config &cfg)
    : cfg_(checked(cfg)),
      sender_(cfg_, *this, stats_),
      receiver_(cfg_, *this, stats_),
      slots_(data_region(cfg_))
{
}

int32_t CreditEndpoint::on_packet(uint32_t src, const PacketHeader &hdr)
{
    if (src >= cfg_.npeers) {
        ++stats_.protocol_errors;
        return kProtocolError;
    }
    switch (hdr.kind) {
    case PacketKind::kCredit:
        sender_.on_credits(src, hdr.credits);
        return kNoSlot;
    case PacketKind::kData: {
        if (slots_.full()) {
            ++stats_.protocol_errors;
            return kProtocolError;
        }
        /* Piggybacked credits are read on arrival, in stream order. */
        if (hdr.credits != 0)
            sender_.on_credits(src, hdr.credits);
        ++stats_.data_received;
        return int32_t(slots_.take(src));
    }
    case PacketKind::kReturnRequest:
        if (cfg_.mode != Mode::kDynamic)
            break;
        receiver_.on_retrieved(src);
        sender_.on_return_request(src);
        return kNoSlot;
    case PacketKind::kReturnResponse:
        if (cfg_.mode != Mode::kDynamic)
            break;
        receiver_.on_response(src, hdr.credits);
        return kNoSlot;
    }
    ++stats_.protocol_errors;
    return kProtocolError;
}

bool CreditEndpoint::on_slot_freed(int32_t slot)
{
    if (!slots_.in_use(slot))
        return false;
    const uint32_t src = slots_.owner(uint32_t(slot));
    slots_.release(uint32_t(slot));
    receiver_.on_retrieved(src);
    return true;
}

int32_t CreditEndpoint::on_data_consumed(uint32_t src, uint32_t credits)
{
    if (src >= cfg_.npeers || slots_.full()) {
        ++stats_.protocol_errors;
        return kProtocolError;
    }
    if (credits != 0)
        sender_.on_credits(src, credits);
    ++stats_.data_received;
    /* take() then release() of the first free slot leaves the table as it was */
    receiver_.on_retrieved(src);
    return kNoSlot;
}

int32_t CreditEndpoint::on_data_consumed_batch(uint32_t src, uint32_t n, uint32_t credits)
{
    if (src >= cfg_.npeers || slots_.full()) {
        stats_.protocol_errors += n;  /* each of the n calls would have refused */
        return kProtocolError;
    }
    if (credits != 0)
        sender_.on_credits(src, credits);
    stats_.data_received += n;
    receiver_.on_retrieved_n(src, n);
    return kNoSlot;
}

bool CreditEndpoint::pop_control(ControlPacket *out)
{
    if (control_.empty())
        return false;
    *out = control_.front();
    control_.pop_front();
    return true;
}

void CreditEndpoint::send_credit_packet(uint32_t peer, uint32_t credits)
{
    control_.push_back(ControlPacket{peer, PacketKind::kCredit, credits});
}

void CreditEndpoint::request_return(uint32_t peer) { sender_.request_return(peer); }

void CreditEndpoint::send_control(uint32_t peer, PacketKind kind, uint32_t credits)
{
    control_.push_back(ControlPacket{peer, kind, credits});
}

}  // namespace rdrp::credit
