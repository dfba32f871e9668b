/*
 * One process's credit engine: its receiver side (what it owes its
 * senders), its sender side (what its receivers granted it), its mailbox
 * slot bookkeeping and the queue of control packets it wants transmitted.
 * The BTL, pml/rdrp and the simulator drive this class; it never does I/O.
 *
 * Caller contract
 *  - Peers are indices 0 .. npeers-1, the same numbering on every call.
 *  - After EVERY call below, drain pop_control() and transmit what it
 *    returns, in that order, before any further data packet to that peer.
 *  - Between one pair of processes, packets (data, credit, request,
 *    response) must be delivered in the order they were transmitted: the
 *    credit-region guarantee counts on a peer seeing a credit packet no
 *    later than the packets sent after it.  UCX active messages on one
 *    endpoint (and the simulator's channels) keep that order.
 *  - Feed on_packet() every packet of the flow-control protocol, in the
 *    order it takes them out of the mailbox / network.
 *
 * Sending a data packet to peer p:
 *     if (ep.can_send(p)) { uint32_t c = ep.on_send(p, room); put c in the header; send; }
 *   room = the packet has space for a credit count (thesis §5.4: the last,
 *   not-full packet of a message).  A sender that cannot send waits for
 *   on_packet() to bring credits; it never has to wait for anything else.
 * Receiving:
 *     int32_t slot = ep.on_packet(src, hdr);
 *       slot >= 0          a data packet: keep it in that data-region slot
 *                          until the upper layer is done, then
 *                          ep.on_slot_freed(slot);
 *       kNoSlot            a control packet, fully handled; nothing to keep;
 *       kProtocolError     src broke the protocol (the data region is full or
 *                          the header is invalid); the packet was not
 *                          accepted.  Never happens between correct peers.
 */
#ifndef RDRP_CREDIT_ENDPOINT_H
#define RDRP_CREDIT_ENDPOINT_H

#include <cstddef>
#include <cstdint>
#include <deque>

#include "credit_config.h"
#include "credit_receiver.h"
#include "credit_sender.h"
#include "credit_slot_table.h"
#include "credit_types.h"

namespace rdrp::credit {

class CreditEndpoint final : private ReceiverOutput, private SenderOutput {
public:
    static constexpr int32_t kNoSlot = -1;
    static constexpr int32_t kProtocolError = -2;

    /* Throws std::invalid_argument with validate(cfg)'s message if cfg
     * cannot work. */
    explicit CreditEndpoint(const Config &cfg);
    CreditEndpoint(const CreditEndpoint &) = delete;
    CreditEndpoint &operator=(const CreditEndpoint &) = delete;

    const Config &config() const { return cfg_; }

    /* ---- sending ---- */
    bool can_send(uint32_t peer) const { return sender_.can_send(peer); }
    uint32_t credits(uint32_t peer) const { return sender_.credits(peer); }
    /* A data packet to peer goes out now: takes its credit and returns the
     * credits to piggyback on it (always 0 unless room_for_credits and
     * piggybacking is on).  Precondition: can_send(peer). */
    uint32_t on_send(uint32_t peer, bool room_for_credits)
    {
        sender_.on_data_sent(peer);
        return room_for_credits && receiver_.may_piggyback(peer) ? receiver_.piggyback_for(peer) : 0;
    }

    /* ---- receiving ---- */
    int32_t on_packet(uint32_t src, const PacketHeader &hdr);
    /* The data packet in `slot` has been consumed; its credit may go back.
     * Returns false (and does nothing) if slot is not a slot in use. */
    bool on_slot_freed(int32_t slot);
    /* A data packet from src carrying `credits` piggybacked credits that
     * was consumed on arrival (it never needed its mailbox slot): exactly
     * on_packet(src, {kData, credits}) followed at once by on_slot_freed()
     * of the slot it returned (the slot table ends as it was), without
     * the slot-table traffic.  Returns kNoSlot, or kProtocolError as
     * on_packet() would. */
    int32_t on_data_consumed(uint32_t src, uint32_t credits);
    /* n (>= 1) such packets from src together, carrying `credits`
     * piggybacked credits between them: exactly on_data_consumed(src,
     * credits) followed by n - 1 on_data_consumed(src, 0) (the credits
     * are read first, which the stream order allows: they were granted
     * before any of the n packets was accounted), at the cost of about
     * one.  pml/rdrp settles its deferred packets per sender this way. */
    int32_t on_data_consumed_batch(uint32_t src, uint32_t n, uint32_t credits);

    /* ---- control packets to transmit ---- */
    bool pop_control(ControlPacket *out);
    size_t control_pending() const { return control_.size(); }

    /* ---- introspection ---- */
    const Stats &stats() const { return stats_; }
    const CreditSender &sender() const { return sender_; }
    const CreditReceiver &receiver() const { return receiver_; }
    uint32_t held_slots() const { return slots_.used(); }

private:
    void send_credit_packet(uint32_t peer, uint32_t credits) override;
    void request_return(uint32_t peer) override;
    void send_control(uint32_t peer, PacketKind kind, uint32_t credits) override;

    Config cfg_;
    Stats stats_;
    std::deque<ControlPacket> control_;
    CreditSender sender_;
    CreditReceiver receiver_;
    SlotTable slots_;
};

}  // namespace rdrp::credit

#endif  // RDRP_CREDIT_ENDPOINT_H
