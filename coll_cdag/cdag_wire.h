/*
 * coll/cdag wire format and its validation.  One UCX active message
 * (coll_cdag_service.h: kAmId) per schedule message: this header as the AM
 * user header, the message's bytes as AM data.  The receiver matches on
 * the whole (cid, src, sched, seq, tag) key and accepts data only into a
 * receive posted for exactly that key and length (or into an early-arrival
 * buffer of its own, sized by UCX's length), so what remains to check of a
 * header is its shape: check_packet(), a pure function that am_cb calls
 * before it looks anything up and that the fuzz target
 * (test/fuzz/fuzz_cdag_wire.cc) calls with forged headers.  Free of Open
 * MPI and UCX types.
 */
#ifndef CDAG_WIRE_H
#define CDAG_WIRE_H

#include <cstddef>
#include <cstdint>

namespace cdag_svc {

struct AmHdr {
    uint32_t cid;    /* communicator context id */
    int32_t src;     /* sender's rank in the communicator */
    uint32_t sched, seq, tag;  /* the message's id in its schedule (cdag_exec.h MsgId) */
    uint32_t pad;    /* 0 */
};
static_assert(sizeof(AmHdr) == 24, "cdag wire header");

/* A non-null result is why the packet is dropped (it was not ours or is
 * malformed; am_cb never touches a buffer for it). */
inline const char *check_packet(size_t hlen, const AmHdr &h)
{
    if (hlen != sizeof(AmHdr)) return "cdag packet header length";
    if (h.src < 0) return "cdag packet from a negative rank";
    if (h.pad != 0) return "cdag packet header padding not zero";
    return nullptr;
}

}  // namespace cdag_svc

#endif
