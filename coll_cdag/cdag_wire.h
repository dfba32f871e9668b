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

/* Single copy on the node (coll_cdag_cma.cc).  A schedule message above
 * the ring limit to a peer on this node whose memory we may read goes
 * through the ring as this descriptor (after an AmHdr, as a ring message's
 * payload): the receiver pulls len bytes at addr in process pid with one
 * process_vm_readv straight into its receive, then answers with a CmaFin
 * (the entry's header, no payload) through its ring to local rank
 * local_rank, which completes the send. */
struct CmaDesc {
    int32_t pid;          /* the sender, whose memory holds the bytes */
    uint32_t local_rank;  /* its ring on the receiver's side: where the FIN goes */
    uint64_t addr;        /* the send buffer in the sender's address space */
    uint64_t len;
    uint64_t cookie;      /* the sender's pending send (slot and generation) */
};
static_assert(sizeof(CmaDesc) == 32, "cdag single-copy descriptor");

enum : int32_t {
    kCmaDone = 0,    /* copied: the send is complete */
    kCmaRetry = 1,   /* not copied (the read was refused): send it again by UCX */
    kCmaFailed = 2,  /* not copied and never will be (length mismatch, dropped): fail the send */
};
struct CmaFin {
    uint64_t cookie;
    int32_t status;   /* kCma* */
    uint32_t pad;     /* 0 */
};
static_assert(sizeof(CmaFin) == 16, "cdag single-copy completion");

/* Shape checks of a descriptor and a completion, as check_packet: a
 * non-null result is why the entry is dropped unread.  A descriptor's
 * pid is checked against the ring it names by the caller. */
inline const char *check_cma_desc(size_t plen, const CmaDesc &d)
{
    if (plen != sizeof(CmaDesc)) return "cdag single-copy descriptor length";
    if (d.pid <= 0) return "cdag single-copy descriptor pid";
    if (d.len == 0 || d.addr == 0 || d.addr + d.len < d.addr) return "cdag single-copy descriptor extent";
    return nullptr;
}
inline const char *check_cma_fin(size_t hlen, size_t plen, const CmaFin &f)
{
    if (hlen != sizeof(CmaFin) || plen != 0) return "cdag single-copy completion length";
    if (f.pad != 0 || f.status < kCmaDone || f.status > kCmaFailed) return "cdag single-copy completion status";
    return nullptr;
}

}  // namespace cdag_svc

#endif
