/*
 * Schedule builder and its dataflow tracker (see cdag_schedule.h).
 */
#include "cdag_schedule.h"

#include <algorithm>
#include <iterator>

namespace cdag {

Schedule::Schedule(int rank, int size) : rank_(rank), size_(size) {}

void Schedule::edge(VertexId from, VertexId to) {
    if (from == kNoVertex || to == kNoVertex || from == to) return;
    edges_.emplace_back(from, to);
}

void Schedule::note_extent(const Buf &b) {
    if (b.slot == Slot::None || b.len == 0) return;
    uint64_t &e = extent_[static_cast<int>(b.slot)];
    e = std::max(e, b.off + b.len);
}

Buf Schedule::scratch(uint64_t bytes) {
    uint64_t &e = extent_[static_cast<int>(Slot::Scratch)];
    if (bytes == 0) return Buf{Slot::Scratch, e, 0};
    const uint64_t off = (e + 63) & ~uint64_t(63);
    e = off + bytes;
    return Buf{Slot::Scratch, off, bytes};
}

/* Record that v reads or writes b and add the edges program order implies:
 * every access depends on the last writer; a write also depends on every
 * reader since that write, and then becomes the only thing remembered. */
void Schedule::track(VertexId v, const Buf &b, bool write) {
    /* Nothing ever writes the Send slot (compile() rejects it), so reads of
     * it can neither depend on nor delay anything: no need to remember. */
    if (b.slot == Slot::None || b.slot == Slot::Send || b.len == 0) return;
    std::vector<Span> &sp = spans_[static_cast<int>(b.slot)];
    const uint64_t lo = b.off, hi = b.off + b.len;

    /* [first, last): the spans overlapping [lo, hi), after splitting the
     * ones that stick out on either side. */
    size_t first = std::lower_bound(sp.begin(), sp.end(), lo,
                                    [](const Span &x, uint64_t at) { return x.hi <= at; }) -
                   sp.begin();
    if (first < sp.size() && sp[first].lo < lo && sp[first].hi > lo) {
        Span right = sp[first];
        right.lo = lo;
        sp[first].hi = lo;
        sp.insert(sp.begin() + ++first, right);
    }
    size_t last = first;
    while (last < sp.size() && sp[last].lo < hi) ++last;
    if (last > first && sp[last - 1].hi > hi) {
        Span right = sp[last - 1];
        right.lo = hi;
        sp[last - 1].hi = hi;
        sp.insert(sp.begin() + last, right);
    }

    for (size_t i = first; i < last; ++i) {
        edge(sp[i].writer, v);
        if (write)
            for (uint32_t r = sp[i].readers; r != kNil; r = reader_pool_[r].next) edge(reader_pool_[r].v, v);
    }
    if (write) {
        sp.erase(sp.begin() + first, sp.begin() + last);
        sp.insert(sp.begin() + first, Span{lo, hi, v, kNil});
        return;
    }
    /* A read joins the reader list of every covered span and opens spans
     * (no writer) for the gaps, so that a later write sees it. */
    auto with_v = [&](uint32_t list) {
        if (list != kNil && reader_pool_[list].v == v) return list;
        reader_pool_.push_back(ReaderNode{v, list});
        return static_cast<uint32_t>(reader_pool_.size() - 1);
    };
    std::vector<Span> merged;
    merged.reserve(2 * (last - first) + 1);
    uint64_t at = lo;
    for (size_t i = first; i < last; ++i) {
        if (sp[i].lo > at) merged.push_back(Span{at, sp[i].lo, kNoVertex, with_v(kNil)});
        merged.push_back(Span{sp[i].lo, sp[i].hi, sp[i].writer, with_v(sp[i].readers)});
        at = sp[i].hi;
    }
    if (at < hi) merged.push_back(Span{at, hi, kNoVertex, with_v(kNil)});
    if (merged.size() == last - first) {
        std::copy(merged.begin(), merged.end(), sp.begin() + first);
    } else {
        sp.erase(sp.begin() + first, sp.begin() + last);
        sp.insert(sp.begin() + first, merged.begin(), merged.end());
    }
}

VertexId Schedule::add(const Op &op, std::initializer_list<VertexId> deps) {
    const VertexId v = static_cast<VertexId>(ops_.size());
    ops_.push_back(op);
    for (VertexId d : deps) edge(d, v);
    note_extent(op.a);
    note_extent(op.b);
    /* Reads before writes, so an operation never waits for itself. */
    switch (op.kind) {
    case OpKind::Send: track(v, op.a, false); break;
    case OpKind::Recv: track(v, op.a, true); break;
    case OpKind::Reduce:
        track(v, op.a, false);
        track(v, op.b, true);
        break;
    case OpKind::Copy:
        track(v, op.a, false);
        track(v, op.b, true);
        break;
    case OpKind::Nop: break;
    }
    return v;
}

VertexId Schedule::send(int peer, uint32_t tag, Buf src, std::initializer_list<VertexId> deps) {
    Op op;
    op.kind = OpKind::Send;
    op.peer = peer;
    op.tag = tag;
    op.a = src;
    return add(op, deps);
}

VertexId Schedule::recv(int peer, uint32_t tag, Buf dst, std::initializer_list<VertexId> deps) {
    Op op;
    op.kind = OpKind::Recv;
    op.peer = peer;
    op.tag = tag;
    op.a = dst;
    return add(op, deps);
}

VertexId Schedule::reduce(Buf in, Buf inout, uint64_t count, std::initializer_list<VertexId> deps) {
    Op op;
    op.kind = OpKind::Reduce;
    op.a = in;
    op.b = inout;
    op.count = count;
    return add(op, deps);
}

VertexId Schedule::copy(Buf src, Buf dst, std::initializer_list<VertexId> deps) {
    Op op;
    op.kind = OpKind::Copy;
    op.a = src;
    op.b = dst;
    return add(op, deps);
}

VertexId Schedule::nop(std::initializer_list<VertexId> deps) {
    Op op;
    op.kind = OpKind::Nop;
    return add(op, deps);
}

}  // namespace cdag
