/*
 * pml/rdrp: validation of wire headers, as pure functions of the header and
 * of the local facts it is checked against.  Every handler runs its check
 * before it reads or writes any memory the header names; a non-null result
 * is the reason for rejecting the message (the handler then aborts the job
 * with it).  Kept free of Open MPI and UCX types so that the unit tests
 * (test/unit/test_wire.cc) can feed them forged and random headers.
 */
#ifndef PML_RDRP_WIRE_CHECK_H
#define PML_RDRP_WIRE_CHECK_H

#include <cstddef>
#include <cstdint>

#include "pml_rdrp_wire.h"

namespace rdrp {
namespace wire {

/* What the receiving process can hold in one credit mailbox slot. */
struct CreditLimits {
    bool     enabled;    /* credits on in this process */
    size_t   slot_size;  /* payload bytes one mailbox slot holds */
    uint32_t npeers;     /* valid flow-control source indices: [0, npeers) */
};

/* Payload of a gated packet must fit one slot, from a known sender. */
inline const char *check_gated(uint16_t flags, uint32_t src_vpid, uint64_t payload,
                               const CreditLimits &c)
{
    if (!(flags & RDRP_FLAG_CREDIT)) return nullptr;
    if (!c.enabled) return "credit-gated message to a process without credits";
    if (payload > c.slot_size) return "credit-gated payload larger than a mailbox slot";
    if (src_vpid >= c.npeers) return "flow-control source out of range";
    return nullptr;
}

/* The AM data of an eager message (RDRP_AM_EAGER, RDRP_AM_EAGER_PACKED) and
 * of an RTS (its first chunk) is read as len bytes of payload, so UCX must
 * have delivered it eagerly.  Data UCX delivers by rendezvous
 * (UCP_AM_RECV_ATTR_FLAG_RNDV, which a sender asks for with
 * UCP_AM_SEND_FLAG_RNDV or gets from UCX's own threshold) is a descriptor
 * to receive from, not the payload: read as payload it would be len bytes
 * past a small UCX object.  pml/rdrp sends these with
 * UCP_AM_SEND_FLAG_EAGER; only a broken or forged peer gets here.
 * Call first, before anything of the message is read. */
inline const char *check_eager_delivery(bool by_rendezvous)
{
    return by_rendezvous ? "eager data or first chunk delivered by UCX rendezvous" : nullptr;
}

/* RDRP_AM_EAGER: header as AM user header, payload as AM data. */
inline const char *check_eager(size_t hlen, const rdrp_eager_hdr_t &h, size_t len,
                               const CreditLimits &c)
{
    if (hlen != sizeof(rdrp_eager_hdr_t)) return "eager header length";
    return check_gated(h.flags, h.src_vpid, len, c);
}

/* RDRP_AM_EAGER_PACKED: no AM user header; the data starts with the header.
 * Call before reading the header out of the data. */
inline const char *check_packed_length(size_t hlen, size_t len)
{
    if (hlen != 0 || len < sizeof(rdrp_eager_hdr_t)) return "packed eager message length";
    if (len - sizeof(rdrp_eager_hdr_t) > RDRP_EAGER_PACKED_MAX)
        return "packed eager payload above its limit";
    return nullptr;
}

/* RDRP_RING_EAGER_TINY(_GATED): the compact header and a payload of at
 * most RDRP_TINY_MAX bytes. */
inline const char *check_tiny(size_t hlen, size_t len)
{
    if (hlen != sizeof(rdrp_tiny_hdr_t)) return "compact eager header length";
    if (len > RDRP_TINY_MAX) return "compact eager payload above its limit";
    return nullptr;
}

/* The full eager header a compact one stands for, from a ring whose
 * producer is process src_vpid (check_tiny first). */
inline rdrp_eager_hdr_t expand_tiny(const rdrp_tiny_hdr_t &t, uint32_t src_vpid, bool gated)
{
    rdrp_eager_hdr_t h;
    h.m.cid = t.cid;
    h.m.src = static_cast<int32_t>(src_vpid);
    h.m.tag = t.tag;
    h.m.seq = t.seq;
    h.flags = gated ? RDRP_FLAG_CREDIT : 0;
    h.credits = 0;
    h.src_vpid = src_vpid;
    h.sreq = 0;
    return h;
}

/* The sender's side: a message (not synchronous, no piggybacked credit)
 * of len bytes on communicator context cid, with tag, from a sender whose
 * rank there is my_rank and whose process index is my_vpid, fits the
 * compact format.  In two parts: what holds for every message on the
 * communicator (pml/rdrp keeps it per communicator: CommState::tiny_ok)
 * and what each message must meet. */
inline bool tiny_comm_fits(uint32_t cid, int my_rank, uint32_t my_vpid)
{
    return cid <= 0xFFFF && my_rank >= 0 && static_cast<uint32_t>(my_rank) == my_vpid;
}
inline bool tiny_msg_fits(size_t len, int tag) { return len <= RDRP_TINY_MAX && tag >= INT16_MIN && tag <= INT16_MAX; }
inline bool tiny_fits(size_t len, uint32_t cid, int tag, int my_rank, uint32_t my_vpid)
{
    return tiny_msg_fits(len, tag) && tiny_comm_fits(cid, my_rank, my_vpid);
}

/* RDRP_AM_RTS: header + rkey_len bytes of rkey as AM user header, the first
 * chunk as AM data of len bytes.  Call with hlen >= sizeof(rdrp_rts_hdr_t). */
inline const char *check_rts(const rdrp_rts_hdr_t &h, size_t hlen, size_t len,
                             const CreditLimits &c)
{
    if (hlen < sizeof(rdrp_rts_hdr_t)) return "RTS header length";
    if (h.rkey_len > RDRP_MAX_RKEY) return "RTS rkey too long";
    if (hlen != sizeof(rdrp_rts_hdr_t) + h.rkey_len) return "RTS length differs from its rkey length";
    if (h.proto > RDRP_PROTO_PUT) return "RTS names an unknown protocol";
    if (h.first_len != len) return "RTS first chunk length differs from its data";
    if (h.first_len > h.total_len) return "RTS first chunk larger than the message";
    if (h.proto == RDRP_PROTO_RDRP) {
        if (h.path != RDRP_PATH_RMA && h.path != RDRP_PATH_AM && h.path != RDRP_PATH_CMA)
            return "RTS names an unknown data path";
    } else {
        if (h.first_len != 0) return "get/put RTS carries data";
        if (h.total_len == 0) return "empty get/put rendezvous";
    }
    bool needs_rkey = h.proto == RDRP_PROTO_GET ||
                      (h.proto == RDRP_PROTO_RDRP && h.path == RDRP_PATH_RMA);
    if (needs_rkey && h.rkey_len == 0) return "RTS without the rkey its protocol needs";
    return check_gated(h.flags, h.src_vpid, h.first_len, c);
}

/* RDRP_AM_CTS at the sender of a message of `packed` bytes. */
inline const char *check_cts(const rdrp_cts_hdr_t &h, uint64_t packed)
{
    if (h.want_len > packed) return "CTS asks for more than the message";
    if (h.window == 0 || h.chunk_size == 0) return "CTS with an empty window or chunk";
    return nullptr;
}

/* RDRP_AM_CHUNK at a receive that takes bytes [first_len, want): the chunk
 * [offset, offset + len) must lie inside (written without overflow for any
 * 64-bit values). */
inline const char *check_chunk(uint64_t offset, uint64_t len, uint64_t first_len, uint64_t want)
{
    if (offset < first_len || offset > want || len > want - offset)
        return "chunk outside any pending receive";
    return nullptr;
}

/* RDRP_AM_RTR at the sender of a put-protocol message of `packed` bytes.
 * Call with hlen >= sizeof(rdrp_rtr_hdr_t). */
inline const char *check_rtr(const rdrp_rtr_hdr_t &h, size_t hlen, uint64_t packed)
{
    if (hlen < sizeof(rdrp_rtr_hdr_t)) return "RTR header length";
    if (h.rkey_len > RDRP_MAX_RKEY || hlen != sizeof(rdrp_rtr_hdr_t) + h.rkey_len)
        return "RTR length differs from its rkey length";
    if (h.want_len > packed) return "RTR asks for more than the message";
    if (h.want_len > 0 && h.rkey_len == 0) return "RTR without an rkey";
    return nullptr;
}

/* RDRP_AM_CREDIT: a control packet of the credit engine (credit grant,
 * compulsory return request or response; kind 0 = data never travels
 * here).  Whether it keeps the protocol is the engine's to say
 * (on_packet's kProtocolError); this is what must hold before it is
 * asked at all. */
inline const char *check_credit(size_t hlen, const rdrp_credit_hdr_t &h, const CreditLimits &c)
{
    if (hlen != sizeof(rdrp_credit_hdr_t)) return "credit packet header length";
    if (!c.enabled) return "credit packet to a process without credits";
    if (h.kind == 0 || h.kind > 3) return "malformed credit packet";
    if (h.src_vpid >= c.npeers) return "flow-control source out of range";
    return nullptr;
}

/* A match header's source rank against the communicator's (remote) size. */
inline const char *check_source(int32_t src, int size)
{
    return (src < 0 || src >= size) ? "source rank out of range" : nullptr;
}

}  // namespace wire
}  // namespace rdrp
#endif
