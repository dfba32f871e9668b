/* The per-process node segment of rings (see shm_node.h). */
#include "shm_node.h"

#include <unistd.h>

#include <algorithm>

namespace rdrp::shm {

namespace {

struct SegmentHeader {
    uint64_t magic;
    uint32_t nlocal;
    uint32_t ring_size;
    char pad[48];
};
static_assert(sizeof(SegmentHeader) == 64, "cache-line header");

size_t pow2_at_least(size_t n)
{
    size_t p = 4096;
    while (p < n) p <<= 1;
    return p;
}

/* a ring size a peer may publish: what size_rings() can return */
bool plausible_ring(uint64_t size)
{
    return size >= 4096 && size <= (size_t(1) << 31) && (size & (size - 1)) == 0;
}

}  // namespace

size_t node_ring_offset(size_t ring_size, uint32_t i)
{
    return sizeof(SegmentHeader) + static_cast<size_t>(i) * ring_bytes(ring_size);
}

size_t node_segment_bytes(uint32_t nlocal, size_t ring_size) { return node_ring_offset(ring_size, nlocal); }

namespace {

/* Pre-fault the part of the ring at r (ring_size bytes of data) that only
 * a stream outrunning its consumer walks into.  Not its head: the first
 * kPrefaultFrom bytes, where a consumer that keeps up rewinds (kRewindAt),
 * stay to be faulted by their first real use.  Measured (osu_latency,
 * 20000 iterations, RT, quiet): with the head pre-faulted at start-up,
 * with MAP_POPULATE or by writing it, ping-pong at 2 and 4 KiB took 0.91
 * and 1.19 us against 0.74 and 0.99 with the head faulted by its first
 * message, and stayed so for the whole job (a stream that walked the
 * whole ring first changed nothing); osu_bw at 4 KiB fell from 10.4 to
 * 7.2 GB/s.  Why pages touched at start-up stay slower on this guest is
 * not known (their placement is the guess). */
constexpr size_t kPrefaultFrom = 2 * kRewindAt;

void ring_prefault_range(void *r, size_t ring_size)
{
    if (ring_size <= kPrefaultFrom) return;
    segment_populate(static_cast<char *>(r) + kRingOverhead + kPrefaultFrom, ring_size - kPrefaultFrom);
}

}  // namespace

RingSizing size_rings(uint32_t nlocal, size_t want_ring, size_t must_fit, size_t want_eager, size_t headers,
                      size_t budget)
{
    size_t ring = pow2_at_least(std::max(want_ring, 4 * std::max(must_fit, want_eager + headers)));
    while (ring > 4 * must_fit && ring / 2 >= 4 * must_fit && ring / 2 >= 4096 &&
           static_cast<size_t>(nlocal) * ring_bytes(ring) > budget)
        ring /= 2;
    RingSizing s{ring, want_eager};
    if (want_eager + headers > ring / 4) s.eager_limit = ring / 4 > headers ? ring / 4 - headers : 0;
    return s;
}

bool NodeSegment::create(uint64_t magic, const char *name, uint32_t jobid, uint32_t nlocal, uint32_t local_rank,
                         size_t ring_size, std::string *err, bool prefault)
{
    release();
    if (local_rank >= nlocal) {
        *err = "local rank out of range";
        return false;
    }
    size_t len = node_segment_bytes(nlocal, ring_size);
    if (!segment_create(len, &seg_, err, name)) return false;
    prefault_ = prefault;
    auto *h = static_cast<SegmentHeader *>(seg_.base);
    h->magic = magic;
    h->nlocal = nlocal;
    h->ring_size = static_cast<uint32_t>(ring_size);
    magic_ = magic;
    jobid_ = jobid;
    nlocal_ = nlocal;
    local_rank_ = local_rank;
    ring_size_ = ring_size;
    rx_.resize(nlocal);
    tx_to_.assign(nlocal, nullptr);
    for (uint32_t i = 0; i < nlocal; ++i) {
        void *r = static_cast<char *>(seg_.base) + node_ring_offset(ring_size, i);
        ring_init(r, ring_size);
        if (prefault) ring_prefault_range(r, ring_size);
        rx_[i].attach(r, ring_size);
    }
    on_ = true;
    return true;
}

void NodeSegment::release()
{
    rx_.clear();
    tx_to_.clear();
    next_rx_ = 0;
    polled_ = 0;
    if (on_) segment_release(&seg_);
    on_ = false;
}

NodeIdentity NodeSegment::identity() const
{
    NodeIdentity id{};
    id.magic = magic_;
    id.pid = static_cast<int32_t>(getpid());
    id.fd = -1;
    id.jobid = jobid_;
    if (!on_) return id;
    id.fd = seg_.fd;
    id.local_rank = local_rank_;
    id.nlocal = nlocal_;
    id.ring_size = static_cast<uint32_t>(ring_size_);
    id.seg_base = reinterpret_cast<uint64_t>(seg_.base);
    id.seg_len = seg_.len;
    return id;
}

bool NodeSegment::connect(const NodeIdentity &peer, bool self, NodePeer *out, std::string *err)
{
    if (!on_) {
        *err = "no segment of our own";
        return false;
    }
    if (peer.magic != magic_ || peer.fd < 0) {
        *err = "the peer has no shared-memory segment";
        return false;
    }
    if (peer.jobid != jobid_) {
        *err = "the peer is of another job";
        return false;
    }
    /* checked before anything is mapped or touched: a malformed identity
     * never makes us write outside the peer's segment */
    if (local_rank_ >= peer.nlocal || !plausible_ring(peer.ring_size) ||
        peer.seg_len != node_segment_bytes(peer.nlocal, peer.ring_size)) {
        *err = "the peer's segment identity is malformed";
        return false;
    }
    void *base = nullptr;
    if (self) {
        base = seg_.base;
    } else {
        if (!segment_attach(peer.pid, peer.fd, peer.seg_len, &out->mapped, err)) return false;
        base = out->mapped.base;
    }
    const auto *h = static_cast<const SegmentHeader *>(base);
    if (h->magic != magic_ || h->nlocal != peer.nlocal || h->ring_size != peer.ring_size) {
        segment_release(&out->mapped);
        *err = "the peer's segment does not match its identity";
        return false;
    }
    void *ring = static_cast<char *>(base) + node_ring_offset(peer.ring_size, local_rank_);
    if (prefault_ && !self) ring_prefault_range(ring, peer.ring_size);
    out->tx.attach(ring, peer.ring_size, producer_id_);
    out->pid = peer.pid;
    out->ok = true;
    if (peer.local_rank < tx_to_.size()) tx_to_[peer.local_rank] = &out->tx;
    /* single copy needs ptrace-like permission: try it on the header */
    out->cma = cma_check(peer.pid, peer.seg_base, magic_);
    return true;
}

void NodeSegment::disconnect(NodePeer *p)
{
    segment_release(&p->mapped);
    std::replace(tx_to_.begin(), tx_to_.end(), &p->tx, static_cast<RingProducer *>(nullptr));
    p->ok = false;
}

}  // namespace rdrp::shm
