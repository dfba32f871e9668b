/*
 * Vocabulary shared by the credit engine's two sides and its callers: the
 * packet kinds the flow control knows about, the control packets it asks the
 * caller to transmit, the interfaces through which one side hands work to
 * the other, and the counters it keeps.
 */
#ifndef RDRP_CREDIT_TYPES_H
#define RDRP_CREDIT_TYPES_H

#include <cstdint>

namespace rdrp::credit {

/* What a packet is, as far as flow control is concerned.  The caller puts
 * the kind and the `credits` field of PacketHeader on the wire. */
enum class PacketKind : uint8_t {
    kData = 0,            /* application data; consumes a credit; may piggyback credits */
    kCredit = 1,          /* explicit credit packet; never consumes a credit (credit region) */
    kReturnRequest = 2,   /* compulsory credit return request; consumes a credit (§6.1) */
    kReturnResponse = 3,  /* compulsory credit return response; consumes a credit (§6.1) */
};

/* The flow-control part of a packet header.
 *   kData:           credits = piggybacked credits (0 = none)
 *   kCredit:         credits = credits granted (>= 1)
 *   kReturnRequest:  credits = 0
 *   kReturnResponse: credits = credits handed back (may be 0) */
struct PacketHeader {
    PacketKind kind = PacketKind::kData;
    uint32_t credits = 0;
};

/* A control packet the engine wants sent to `peer`.  Credits for the
 * request/response kinds have already been taken. */
struct ControlPacket {
    uint32_t peer = 0;
    PacketKind kind = PacketKind::kCredit;
    uint32_t credits = 0;
};

/* Receiver side -> the rest of the process. */
class ReceiverOutput {
public:
    virtual ~ReceiverOutput() = default;
    /* Send an explicit credit packet (no credit needed: eq. 5.1 / the
     * threshold FIFO guarantee a free credit slot at the peer). */
    virtual void send_credit_packet(uint32_t peer, uint32_t credits) = 0;
    /* Ask `peer` for its excess credits (compulsory return request).  The
     * request needs a credit of ours towards peer, so the sender side sends
     * it now or as soon as one arrives. */
    virtual void request_return(uint32_t peer) = 0;
};

/* Sender side -> the rest of the process. */
class SenderOutput {
public:
    virtual ~SenderOutput() = default;
    /* Transmit a request or response to `peer`; its credit is already taken. */
    virtual void send_control(uint32_t peer, PacketKind kind, uint32_t credits) = 0;
};

/* Counters of one process (both sides).  Monotonic. */
struct Stats {
    uint64_t data_sent = 0;            /* on_send() calls */
    uint64_t data_received = 0;        /* data packets accepted by on_packet() */
    uint64_t credit_packets = 0;       /* explicit credit packets emitted */
    uint64_t credits_explicit = 0;     /* credits they carried */
    uint64_t piggybacks = 0;           /* data packets that carried credits */
    uint64_t credits_piggybacked = 0;  /* credits they carried */
    uint64_t thresholds_regular = 0;   /* threshold reached on a freed slot (§6.6.1) */
    uint64_t thresholds_piggyback = 0; /* threshold reached while piggybacking (§6.6.1) */
    uint64_t adjust_deficit = 0;       /* §6.6.2 adjustment by deficit */
    uint64_t adjust_excess = 0;        /* §6.6.2 adjustment by excess */
    uint64_t monitoring_points = 0;
    uint64_t list_shifts = 0;          /* high->medium->low rotations */
    uint64_t steals = 0;               /* eq. 6.1 transfers with a non-zero amount */
    uint64_t credits_stolen = 0;
    uint64_t requests_sent = 0;        /* compulsory return requests transmitted */
    uint64_t responses_sent = 0;
    uint64_t credits_given_back = 0;   /* credits our responses handed back */
    uint64_t credits_taken_back = 0;   /* credits peers' responses handed back to us */
    uint64_t control_deferred = 0;     /* request/response parked for lack of a credit */
    uint64_t blocked_thresholds = 0;   /* thresholds reached by a blocked sender */
    uint64_t protocol_errors = 0;      /* a peer broke the protocol (never in a correct run) */
};

}  // namespace rdrp::credit

#endif  // RDRP_CREDIT_TYPES_H
