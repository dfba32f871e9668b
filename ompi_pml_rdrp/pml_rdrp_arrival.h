/* pml/rdrp: the arrival of an eager message that meets its posted receive.
 *
 * Inline here, not in pml_rdrp_recv.cc, because it is the whole receive
 * of a small message and runs from two places: the UCX active-message
 * handlers (pml_rdrp_recv.cc) and the ring poll (pml_rdrp_transport.cc),
 * which otherwise called into the other file for every ring message
 * (through the handler table, for the full eager format).  A stream of
 * small messages between two ranks is limited by the receiver: the call,
 * its frame and argument moves were about 20 of its instructions per
 * message (callgrind, 8 B), and bwp's 64-byte stream took 55.5 instead of
 * 57.4 ns per message once the full format came here too.  Everything
 * that is not the fast path (a descriptor for an unexpected or held-back
 * message) stays out of line in pml_rdrp_recv.cc. */
#ifndef PML_RDRP_ARRIVAL_H
#define PML_RDRP_ARRIVAL_H

#include "pml_rdrp_request.h"
#include "pml_rdrp_credit.h"

namespace rdrp {

/* pml_rdrp_recv.cc */
void send_ack(CommState *cs, int src, uint64_t sreq);
void eager_unexpected(const rdrp_eager_hdr_t &h, void *data, size_t len);

/* Set the status of a matched receive; returns the bytes it will take. */
static inline size_t set_status(Request *r, int src, int tag, size_t total)
{
    r->ompi.req_status.MPI_SOURCE = src;
    r->ompi.req_status.MPI_TAG = tag;
    size_t take = total;
    if (total > r->packed) {
        take = r->packed;
        r->ompi.req_status.MPI_ERROR = MPI_ERR_TRUNCATE;
    } else {
        r->ompi.req_status.MPI_ERROR = MPI_SUCCESS;
    }
    r->ompi.req_status._ucount = take;
    return take;
}

/* Both eager forms: h is the header (its length already checked), data/len
 * the payload. */
static inline __attribute__((always_inline)) void eager_arrival(const rdrp_eager_hdr_t &h, void *data, size_t len)
{
    if (const char *why = wire::check_gated(h.flags, h.src_vpid, len, credit_limits())) {
        bad_header(why, len);
        return;
    }
    /* Fast path: the next message in order from its sender, and a posted
     * receive takes it: deliver straight from the transport's buffer, with
     * no descriptor and no mailbox slot. */
    if (CommState *cs = comm_state(h.m.cid)) {
        if (wire::check_source(h.m.src, cs->size) == nullptr) {
            if (rdrp_match_item_t *hit = rdrp_match_arrive_posted(cs->mq, h.m.src, h.m.tag, h.m.seq)) {
                Request *r = container_of(hit, &Request::match);
                size_t take = set_status(r, h.m.src, h.m.tag, len);
                req_unpack(r, 0, data, take);
                if (h.flags & RDRP_FLAG_SYNC) send_ack(cs, h.m.src, h.sreq);
                if (h.flags & RDRP_FLAG_CREDIT) credit_consumed(h.src_vpid, h.credits);
                req_complete(r);
                return;
            }
        }
    }
    eager_unexpected(h, data, len);
}

/* RDRP_RING_EAGER_TINY(_GATED), from the ring of process src_vpid (a
 * compact eager message; see rdrp_tiny_hdr_t). */
static inline __attribute__((always_inline)) void ring_tiny_arrival(bool gated, uint32_t src_vpid, const void *hdr,
                                                                    size_t hlen, void *data, size_t len)
{
    Guard guard;
    if (const char *why = wire::check_tiny(hlen, len)) {
        bad_header(why, hlen);
        return;
    }
    rdrp_tiny_hdr_t t;
    std::memcpy(&t, hdr, sizeof(t));
    ++stats.shm_compact;
    eager_arrival(wire::expand_tiny(t, src_vpid, gated), data, len);
}

/* RDRP_AM_EAGER from a ring: the header, then the payload (what
 * am_eager_cb takes from UCX; a ring message is never a rendezvous). */
static inline __attribute__((always_inline)) void ring_eager_arrival(const void *hdr, size_t hlen, void *data,
                                                                     size_t len)
{
    Guard guard;
    if (OPAL_UNLIKELY(hlen != sizeof(rdrp_eager_hdr_t))) {
        bad_header("eager header length", hlen);
        return;
    }
    rdrp_eager_hdr_t h;
    std::memcpy(&h, hdr, sizeof(h));
    eager_arrival(h, data, len);
}

}  // namespace rdrp

#endif
