/*
 * Allreduce: butterfly (recursive doubling, any op), dissemination
 * (commutative), ring reduce-scatter + allgather (commutative, large
 * vectors), and reduce + broadcast over a pipelined tree (any op).
 */
#include "cdag_gen.h"

#include <algorithm>

namespace cdag {
namespace gen {

namespace {

/* Recursive doubling / dissemination on the p2 ranks left after folding.
 * Each new rank stands for a contiguous run of original ranks, and the
 * butterfly combines aligned groups lower-first, so the result is in rank
 * order.  Dissemination combines windows that wrap around: commutative
 * only. */
void doubling(Schedule &s, const Red &r, bool in_place, bool dissemination) {
    const int p = s.size(), me = s.rank();
    const Fold f(p);
    const int steps = ceil_log2(f.p2);
    const Buf res{Slot::Recv, 0, r.bytes()};
    const Buf input = in_place ? res : Buf{Slot::Send, 0, r.bytes()};
    const uint32_t post_tag = 1 + steps;

    if (f.excluded(me)) {  // hand the data to the partner, get the result back
        s.send(me + 1, 0, input);
        s.recv(me + 1, post_tag, res);
        return;
    }
    Partial acc{input, in_place};
    if (me < 2 * f.rem) {  // partner me-1 is lower: acc = x[me-1] op x[me]
        const Buf b = s.scratch(r.bytes());
        s.recv(me - 1, 0, b);
        absorb_left(s, acc, b, r.count, r.commutative, res);
    }
    const int n = f.newrank(me);
    for (int i = 0; i < steps; ++i) {
        const int d = 1 << i;
        const int to = f.real(dissemination ? (n + d) % f.p2 : n ^ d);
        const int from = f.real(dissemination ? (n - d + f.p2) % f.p2 : n ^ d);
        /* Only a non-commutative op needs the lower partner's data on the
         * left; everything else moves the partial into the landing buffer,
         * which never waits for the send of acc to complete. */
        const bool lower = !dissemination && !r.commutative && (n ^ d) < n;
        s.send(to, 1 + i, acc.at);
        /* Land the last step in the result buffer when it is free. */
        const bool last = i + 1 == steps;
        const Buf b = (last && acc.at.slot != Slot::Recv && !lower) ? res : s.scratch(r.bytes());
        s.recv(from, 1 + i, b);
        if (lower)
            absorb_left(s, acc, b, r.count, r.commutative, res);
        else
            absorb_right(s, acc, b, r.count, false);  // move: never wait for the send of acc
    }
    settle(s, acc, res);
    if (me < 2 * f.rem) s.send(me - 1, post_tag, res);
}

/* Ring: p-1 reduce-scatter steps leave rank r with the sum of block r,
 * then p-1 allgather steps circulate the blocks.  Blocks are pipelined in
 * segments of seg elements. */
void ring(Schedule &s, const Red &r, bool in_place, uint64_t seg) {
    const int p = s.size(), me = s.rank();
    const Buf res{Slot::Recv, 0, r.bytes()};
    const Buf input = in_place ? res : Buf{Slot::Send, 0, r.bytes()};
    const std::vector<uint64_t> e = even_blocks(r.count, p);
    const int right = (me + 1) % p, left = (me - 1 + p) % p;
    uint64_t maxch = 1;
    for (int j = 0; j < p; ++j) maxch = std::max(maxch, (e[j + 1] - e[j] + seg - 1) / seg);

    auto block = [&](Buf b, int j) { return b.sub(e[j] * r.esize, (e[j + 1] - e[j]) * r.esize); };
    auto chunks = [&](int j) { return split_range(0, (e[j + 1] - e[j]) * r.esize, {}, seg * r.esize); };
    /* In place the incoming partial cannot land on our own input. */
    const Buf landing = in_place ? s.scratch(r.bytes()) : res;

    for (int st = 0; st + 1 < p; ++st) {
        const int sb = (me - st - 1 + 2 * p) % p, rb = (me - st - 2 + 2 * p) % p;
        const Buf src = st == 0 ? block(input, sb) : block(res, sb);
        uint32_t tag = static_cast<uint32_t>(st * maxch);
        for (auto &c : chunks(sb)) s.send(right, tag++, src.sub(c.first, c.second - c.first));
        tag = static_cast<uint32_t>(st * maxch);
        for (auto &c : chunks(rb)) {
            const uint64_t len = c.second - c.first;
            const Buf in = block(landing, rb).sub(c.first, len);
            s.recv(left, tag++, in);
            const Buf mine = block(in_place ? res : input, rb).sub(c.first, len);
            if (in_place)
                s.reduce(in, mine, len / r.esize);  // res = partial op own  (commutative)
            else
                s.reduce(mine, in, len / r.esize);  // res = own op partial
        }
    }
    const uint32_t base = static_cast<uint32_t>((p - 1) * maxch);
    for (int st = 0; st + 1 < p; ++st) {
        const int sb = (me - st + p) % p, rb = (me - st - 1 + p) % p;
        uint32_t tag = static_cast<uint32_t>(base + st * maxch);
        for (auto &c : chunks(sb)) s.send(right, tag++, block(res, sb).sub(c.first, c.second - c.first));
        tag = static_cast<uint32_t>(base + st * maxch);
        for (auto &c : chunks(rb)) s.recv(left, tag++, block(res, rb).sub(c.first, c.second - c.first));
    }
}

}  // namespace

Status gen_allreduce(const CollSpec &c, const AlgoChoice &a, Schedule &s) {
    const Red r{c.count, c.elem_size, c.commutative};
    if (!r.commutative && (a.algo == Algo::Dissemination || a.algo == Algo::Ring)) return Status::Unsupported;
    if (r.count == 0) return Status::Ok;
    const Buf res{Slot::Recv, 0, r.bytes()};
    if (c.size == 1) {
        if (!c.in_place) s.copy(Buf{Slot::Send, 0, r.bytes()}, res);
        return Status::Ok;
    }
    switch (a.algo) {
    case Algo::Butterfly: doubling(s, r, c.in_place, false); return Status::Ok;
    case Algo::Dissemination: doubling(s, r, c.in_place, true); return Status::Ok;
    case Algo::Ring: ring(s, r, c.in_place, seg_elems(a.seg_bytes, r.esize, r.count)); return Status::Ok;
    case Algo::ReduceBcast: {
        TreeShape t;
        if (!tree_shape(a.tree, a.radix, c.size, &t)) return Status::Unsupported;
        const uint64_t seg = seg_elems(a.seg_bytes, r.esize, r.count);
        const Buf input = c.in_place ? res : Buf{Slot::Send, 0, r.bytes()};
        /* Rooted at rank 0, so vrank order is rank order for any op. */
        const uint32_t n = tree_reduce(s, t, 0, r, input, res, seg, 0);
        tree_bcast(s, t, 0, res, seg * r.esize, n);
        return Status::Ok;
    }
    default: return Status::Unsupported;
    }
}

}  // namespace gen
}  // namespace cdag
