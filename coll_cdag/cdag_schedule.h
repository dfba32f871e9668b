/*
 * cDAG schedule builder: the per-rank communication DAG of one collective.
 *
 * A schedule is a set of vertices (send, recv, local reduce, local copy,
 * nop) and dependency edges.  An edge (u, v) means "v must not start before
 * u has completed" (cdag seed, section II.A).
 *
 * Buffers are byte ranges in one of three slots rather than pointers, so a
 * schedule can be built once and executed many times over different user
 * buffers (persistent collectives, schedule caches):
 *   Send    - the caller's send buffer (read only: the executor never writes it)
 *   Recv    - the caller's receive buffer
 *   Scratch - memory the executor allocates per instance (scratch_bytes())
 *
 * Edges come from two places:
 *  - explicit: edge(), or the `deps` argument of every add function;
 *  - inferred: the builder tracks, per slot byte, the last writer and the
 *    readers since that write, and adds the read-after-write,
 *    write-after-read and write-after-write edges implied by program order.
 *    Generators therefore write a collective as straight-line code over
 *    byte ranges and get the minimal data dependencies, including the
 *    per-segment ones that make pipelining work.  Zero-length ranges carry
 *    no data and get no inferred edges (barriers use explicit edges).
 *
 * Messages are pre-matched: a send (peer, tag) at rank r matches exactly
 * one recv (r, tag) at rank peer (validate_set() checks this over the whole
 * communicator).  Tags are local to the schedule; the executor adds the
 * schedule id and the execution sequence number to every message identity.
 *
 * No Open MPI types: datatypes are the caller's business (contiguous bytes),
 * reductions name an element count and go through a callback at execution.
 */
#ifndef CDAG_SCHEDULE_H
#define CDAG_SCHEDULE_H

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace cdag {

using VertexId = uint32_t;
constexpr VertexId kNoVertex = UINT32_MAX;  // ignored wherever a dependency is expected

enum class Slot : uint8_t { None = 0, Send = 1, Recv = 2, Scratch = 3 };
constexpr int kNumSlots = 4;

/* A byte range [off, off + len) of one slot. */
struct Buf {
    Slot slot = Slot::None;
    uint64_t off = 0;
    uint64_t len = 0;

    /* The sub-range [off + from, off + from + n). */
    Buf sub(uint64_t from, uint64_t n) const { return Buf{slot, off + from, n}; }
    bool empty() const { return len == 0; }
};
inline bool operator==(const Buf &a, const Buf &b) {
    return a.slot == b.slot && a.off == b.off && a.len == b.len;
}
inline bool operator!=(const Buf &a, const Buf &b) { return !(a == b); }

enum class OpKind : uint8_t { Send, Recv, Reduce, Copy, Nop };

/* One vertex.  Field use per kind:
 *   Send:   peer, tag, a = source range
 *   Recv:   peer, tag, a = destination range
 *   Reduce: a = "in" (left operand), b = "inout" (right operand and result),
 *           count = elements;  b := a (op) b, the MPI_Op convention
 *   Copy:   a = source, b = destination (same length, no overlap)
 *   Nop:    nothing; joins or forks dependencies */
struct Op {
    OpKind kind = OpKind::Nop;
    int32_t peer = -1;
    uint32_t tag = 0;
    Buf a, b;
    uint64_t count = 0;
};

class Schedule {
public:
    explicit Schedule(int rank = 0, int size = 1);

    int rank() const { return rank_; }
    int size() const { return size_; }

    /* Add a vertex.  `deps` are explicit predecessors (kNoVertex entries are
     * skipped); inferred data dependencies are added on top. */
    VertexId send(int peer, uint32_t tag, Buf src, std::initializer_list<VertexId> deps = {});
    VertexId recv(int peer, uint32_t tag, Buf dst, std::initializer_list<VertexId> deps = {});
    VertexId reduce(Buf in, Buf inout, uint64_t count, std::initializer_list<VertexId> deps = {});
    VertexId copy(Buf src, Buf dst, std::initializer_list<VertexId> deps = {});
    VertexId nop(std::initializer_list<VertexId> deps = {});

    /* Explicit dependency: `to` starts only after `from` completed. */
    void edge(VertexId from, VertexId to);

    /* A fresh scratch range (64-byte aligned, so reductions on any element
     * type see aligned memory).  Zero bytes gives an empty range. */
    Buf scratch(uint64_t bytes);

    /* Bytes of the Send / Recv slot the schedule touches (the caller's
     * buffers must be at least this large) and of the Scratch slot. */
    uint64_t extent(Slot s) const { return extent_[static_cast<int>(s)]; }
    uint64_t scratch_bytes() const { return extent_[static_cast<int>(Slot::Scratch)]; }

    size_t num_vertices() const { return ops_.size(); }
    const std::vector<Op> &ops() const { return ops_; }
    /* Edges as (from, to) pairs in insertion order; may contain duplicates. */
    const std::vector<std::pair<VertexId, VertexId>> &edges() const { return edges_; }

private:
    /* Bytes [lo, hi) of one slot since their last write: who wrote, who
     * read.  Readers are an immutable cons list in reader_pool_ (index
     * kNil = empty), so splitting a span shares its list for free. */
    static constexpr uint32_t kNil = UINT32_MAX;
    struct Span {
        uint64_t lo, hi;
        VertexId writer;
        uint32_t readers;
    };
    struct ReaderNode {
        VertexId v;
        uint32_t next;
    };

    VertexId add(const Op &op, std::initializer_list<VertexId> deps);
    void note_extent(const Buf &b);
    void track(VertexId v, const Buf &b, bool write);

    int rank_, size_;
    std::vector<Op> ops_;
    std::vector<std::pair<VertexId, VertexId>> edges_;
    uint64_t extent_[kNumSlots] = {0, 0, 0, 0};
    std::vector<Span> spans_[kNumSlots];  // sorted, disjoint (gaps = never touched)
    std::vector<ReaderNode> reader_pool_;
};

}  // namespace cdag

#endif
