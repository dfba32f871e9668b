/*
 * The shared-memory node transport of one component of one process: a
 * segment holding one ring per local rank of the job (ring i carries what
 * local rank i sends this process; the ring of its own local rank carries
 * messages to itself), the identity a process publishes so that its local
 * peers can map that segment, and the sizing of the rings within a
 * segment budget.  Used by pml/rdrp and coll/cdag, each with its own
 * segment (its own magic and memfd name): the two never share a ring.
 * No Open MPI or UCX type; C++17.
 *
 * A sender maps a receiver's segment through /proc/<pid>/fd/<fd> at first
 * contact (shm_segment.h) and writes to ring[its local rank] there; the
 * receiver polls its own rings.  The memory is anonymous (memfd): nothing
 * is ever named in /dev/shm, so neither a run nor an abort leaves a file.
 */
#ifndef RDRP_SHM_NODE_H
#define RDRP_SHM_NODE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "shm_ring.h"
#include "shm_segment.h"

namespace rdrp::shm {

/* What a process publishes about its segment (the modex); plain data. */
struct NodeIdentity {
    uint64_t magic;       /* the component's: a blob of another component never matches */
    int32_t  pid;
    int32_t  fd;          /* its segment (-1: no shared-memory transport) */
    uint32_t jobid;
    uint32_t local_rank;  /* which ring of a receiver's segment it writes to */
    uint32_t nlocal;      /* rings in its segment */
    uint32_t ring_size;
    uint64_t seg_base;    /* the segment in its own address space (CMA probe) */
    uint64_t seg_len;
};
static_assert(sizeof(NodeIdentity) == 48, "published identity");

/* Ring sizes for nlocal processes on a node.  Every message must fit a
 * ring entry (must_fit bytes, headers included, always do) and a ring
 * holds at least four of the largest (want_eager payload + headers): the
 * rings of one process stay within budget bytes, so with many processes
 * on a node the rings, and with them the eager limit, shrink, but never
 * below four must_fit.  Every process of the node computes the same. */
struct RingSizing {
    size_t ring_size;    /* a power of two, at least 4096 */
    size_t eager_limit;  /* largest payload through a ring (<= want_eager) */
};
RingSizing size_rings(uint32_t nlocal, size_t want_ring, size_t must_fit, size_t want_eager, size_t headers,
                      size_t budget);

/* One peer's ring of ours in its segment. */
struct NodePeer {
    bool        ok = false;   /* messages to it go through tx */
    bool        cma = false;  /* single-copy reads/writes of its memory work (a probe succeeded) */
    int         pid = 0;
    RingProducer tx;
    Segment     mapped;       /* its segment mapped here (empty for ourselves) */
};

class NodeSegment {
public:
    /* The segment of this process: nlocal rings of ring_size bytes, with
     * magic in its header.  prefault: the pages of every ring past its
     * first kPrefaultFrom bytes are allocated and mapped now, in our
     * segment and in each peer's at connect (a ring walked through fresh
     * pages pays a trap per page on first touch, on both sides: see
     * segment_populate); the head of each ring, all a consumer that keeps
     * up ever uses, is left to its first touch (ring_prefault_range says
     * why).  false with a reason in *err (then off). */
    bool create(uint64_t magic, const char *name, uint32_t jobid, uint32_t nlocal, uint32_t local_rank,
                size_t ring_size, std::string *err, bool prefault = false);
    /* What our rings in peers' segments say of their producer
     * (RingControl::producer): set before connect(). */
    void set_producer_id(uint32_t id) { producer_id_ = id; }
    /* During poll(): the producer id of the ring whose message fn has. */
    uint32_t polled_producer() const { return rx_[polled_].producer(); }
    /* During poll(): the message fn has is data of its sender's (not a
     * control message): our ring to that sender notes it
     * (RingProducer::spoke: what we send next answers it). */
    void polled_is_data()
    {
        if (RingProducer *t = tx_to_[polled_]) t->heard();
    }
    void release();
    bool on() const { return on_; }
    /* what to publish (fd -1 when off) */
    NodeIdentity identity() const;

    /* Map peer's segment and attach our ring there (self: our own
     * segment).  false with a reason in *err: the peer is not of this
     * job, has no segment, or its identity or segment is malformed. */
    bool connect(const NodeIdentity &peer, bool self, NodePeer *out, std::string *err);
    /* Unmap and forget a peer (its ring is no longer hinted). */
    void disconnect(NodePeer *p);

    /* Every ring, in order: fn(id, hdr, hlen, payload, plen) per
     * message; bad(reason, ring) for a ring stopped by a malformed entry
     * (nothing of that entry was used).  A ring whose sender talked to us
     * hints our ring to it (shm_ring.h: it may rewind).  If fn returns
     * bool, true ends the pass after that message (a caller that wants a
     * completion handled before the messages behind it): the rest wait in
     * their ring, and the next pass starts at the following ring, so a
     * busy ring cannot starve the others.  Returns messages handed out. */
    template <class Fn, class Bad>
    unsigned poll(Fn &&fn, Bad &&bad)
    {
        using R = std::invoke_result_t<Fn &, uint16_t, const char *, size_t, const char *, size_t>;
        bool stopped = false;
        auto each = [&](uint16_t id, const char *hdr, size_t hlen, const char *payload, size_t plen) {
            if constexpr (std::is_same_v<R, bool>) return stopped = fn(id, hdr, hlen, payload, plen);
            else fn(id, hdr, hlen, payload, plen);
        };
        unsigned n = 0;
        const size_t nr = rx_.size();
        for (size_t k = 0; k < nr; ++k) {
            size_t i = next_rx_ + k;
            if (i >= nr) i -= nr;
            RingConsumer &r = rx_[i];
            polled_ = i;
            unsigned got = r.poll(each);
            if (__builtin_expect(r.error() != nullptr, 0)) bad(r.error(), static_cast<uint32_t>(i));
            if (got && tx_to_[i]) tx_to_[i]->hint_drained();
            n += got;
            if (stopped) {
                next_rx_ = i + 1 < nr ? i + 1 : 0;
                break;
            }
        }
        return n;
    }
    /* A message waits in some ring (a few loads). */
    bool ready() const
    {
        for (const RingConsumer &r : rx_)
            if (r.ready()) return true;
        return false;
    }

    uint32_t nlocal() const { return nlocal_; }
    uint32_t local_rank() const { return local_rank_; }
    size_t ring_size() const { return ring_size_; }

private:
    bool on_ = false;
    bool prefault_ = false;
    uint64_t magic_ = 0;
    uint32_t jobid_ = 0, nlocal_ = 0, local_rank_ = 0;
    size_t ring_size_ = 0;
    Segment seg_;
    std::vector<RingConsumer> rx_;      /* ring i: what local rank i sends us */
    std::vector<RingProducer *> tx_to_; /* i: our ring to local rank i, if connected */
    size_t next_rx_ = 0;                /* ring polled first by the next pass */
    size_t polled_ = 0;                 /* ring poll() is in */
    uint32_t producer_id_ = 0;
};

/* Offset of ring i in a segment of rings of ring_size bytes. */
size_t node_ring_offset(size_t ring_size, uint32_t i);
/* Bytes of a segment of nlocal rings of ring_size bytes. */
size_t node_segment_bytes(uint32_t nlocal, size_t ring_size);

}  // namespace rdrp::shm

#endif
