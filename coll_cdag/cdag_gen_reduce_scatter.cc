/*
 * Reduce_scatter and Reduce_scatter_block (block j of the input vector,
 * counts[j] elements, is reduced over all ranks into rank j's Recv):
 *   Pairwise          every rank sends block j straight to rank j, which
 *                     combines the p contributions in rank order (any op)
 *   Ring              p-1 steps around a ring, partial sums travel and
 *                     grow (commutative)
 *   ReduceThenScatter in-order tree reduction of the whole vector to rank
 *                     0, then a flat scatter of the blocks (any op)
 *   Butterfly         recursive halving: log2 steps, each an exchange of
 *                     half the remaining vector with one partner
 *                     (commutative; non-powers of two fold first)
 */
#include "cdag_gen.h"

#include <algorithm>

namespace cdag {
namespace gen {

namespace {

struct RsGeom {
    int p, me;
    uint64_t es;
    bool commutative;
    std::vector<uint64_t> cnt, e;  // elements per block, element offsets
    Buf input;                     // base of the input vector (slot + offset)
    uint64_t seg;                  // elements

    Buf block(Buf base, int j) const { return base.sub(e[j] * es, cnt[j] * es); }
    std::vector<std::pair<uint64_t, uint64_t>> chunks(int j) const {  // byte ranges inside block j
        return split_range(0, cnt[j] * es, {}, seg * es);
    }
};

void pairwise(Schedule &s, const RsGeom &g) {
    const int p = g.p, me = g.me;
    const Buf res{Slot::Recv, 0, g.cnt[me] * g.es};
    std::vector<Buf> land(p);
    for (int st = 1; st < p; ++st) {
        const int to = (me + st) % p;
        uint32_t tag = 0;
        for (auto &c : g.chunks(to)) s.send(to, tag++, g.block(g.input, to).sub(c.first, c.second - c.first));
    }
    for (int st = 1; st < p; ++st) {
        const int from = (me - st + p) % p;
        land[from] = s.scratch(res.len);
        uint32_t tag = 0;
        for (auto &c : g.chunks(me)) s.recv(from, tag++, land[from].sub(c.first, c.second - c.first));
    }
    /* x0 op x1 op ... op x(p-1), chunk by chunk as contributions arrive. */
    for (auto &c : g.chunks(me)) {
        const uint64_t len = c.second - c.first, n = len / g.es;
        auto x = [&](int j) { return j == me ? g.block(g.input, me).sub(c.first, len) : land[j].sub(c.first, len); };
        Partial acc{x(0), me != 0};
        for (int j = 1; j < p; ++j) {
            if (j != me) {
                absorb_right(s, acc, x(j), n, g.commutative);
            } else if (g.commutative && acc.writable) {
                s.reduce(x(j), acc.at, n);
            } else {  // own input is read-only: combine into a copy
                const Buf spare = s.scratch(len);
                s.copy(x(j), spare);
                absorb_right(s, acc, spare, n, g.commutative);
            }
        }
        settle(s, acc, res.sub(c.first, len));
    }
}

/* Step st: send the partial of block me-st-1 right, receive the partial of
 * block me-st-2 from the left and add our contribution; the last step
 * delivers block me, complete. */
void ring(Schedule &s, const RsGeom &g) {
    const int p = g.p, me = g.me;
    const int right = (me + 1) % p, left = (me - 1 + p) % p;
    uint64_t maxch = 1;
    for (int j = 0; j < p; ++j) maxch = std::max<uint64_t>(maxch, g.chunks(j).size());
    std::vector<Buf> land(p);
    for (int j = 0; j < p; ++j)
        land[j] = j == me ? Buf{Slot::Recv, 0, g.cnt[me] * g.es} : s.scratch(g.cnt[j] * g.es);
    for (int st = 0; st + 1 < p; ++st) {
        const int sb = (me - st - 1 + 2 * p) % p, rb = (me - st - 2 + 2 * p) % p;
        const Buf src = st == 0 ? g.block(g.input, sb) : land[sb];
        uint32_t tag = static_cast<uint32_t>(st * maxch);
        for (auto &c : g.chunks(sb)) s.send(right, tag++, src.sub(c.first, c.second - c.first));
        tag = static_cast<uint32_t>(st * maxch);
        for (auto &c : g.chunks(rb)) {
            const uint64_t len = c.second - c.first;
            const Buf in = land[rb].sub(c.first, len);
            s.recv(left, tag++, in);
            s.reduce(g.block(g.input, rb).sub(c.first, len), in, len / g.es);  // commutative
        }
    }
}

/* Recursive halving on the p2 ranks left after folding (Fold: the even
 * rank of each of the first rem pairs hands its whole vector to its odd
 * partner and gets its block back at the end).  New rank n stands for the
 * original ranks [first(n), first(n+1)), whose blocks are contiguous, so
 * the window of new ranks a rank still reduces for is one range of the
 * vector.  Step d = p2/2, ..., 1: keep the half of the window that holds
 * n, send the other half to n ^ d, add what n ^ d sends of ours.  The
 * combining order differs between ranks: commutative ops only.  Lengths
 * are the same on both ends of every message, so an empty one is skipped
 * on both. */
void halving(Schedule &s, const RsGeom &g) {
    const int me = g.me;
    const Fold f(g.p);
    const int steps = ceil_log2(f.p2);
    const uint32_t post_tag = 1 + steps;
    const uint64_t es = g.es;
    const Buf res{Slot::Recv, 0, g.cnt[me] * es};
    const Buf all = g.input.sub(0, g.e[g.p] * es);
    auto el = [&](int n) { return g.e[f.first(n)]; };  // first element of new rank n's range

    if (f.excluded(me)) {
        s.send(me + 1, 0, all);
        if (res.len) s.recv(me + 1, post_tag, res);
        return;
    }
    /* The input is never written (in place it is the receive buffer, whose
     * other blocks MPI leaves alone): the first combine moves the partial
     * into scratch. */
    Partial acc{all, false};
    if (me < 2 * f.rem) {
        const Buf b = s.scratch(all.len);
        s.recv(me - 1, 0, b);
        absorb_right(s, acc, b, g.e[g.p], true);
    }
    const int n = f.newrank(me);
    int wlo = 0;  // window of new ranks [wlo, wlo + 2d)
    for (int i = steps - 1; i >= 0; --i) {
        const int d = 1 << i, partner = n ^ d;
        const int keep = (n & d) ? wlo + d : wlo, give = (n & d) ? wlo : wlo + d;
        const uint32_t tag = static_cast<uint32_t>(steps - i);
        const Buf out = acc.at.sub((el(give) - el(wlo)) * es, (el(give + d) - el(give)) * es);
        const Buf kept = acc.at.sub((el(keep) - el(wlo)) * es, (el(keep + d) - el(keep)) * es);
        if (out.len) s.send(f.real(partner), tag, out);
        Partial half{kept, acc.writable};
        if (kept.len) {
            const Buf b = s.scratch(kept.len);
            s.recv(f.real(partner), tag, b);
            absorb_right(s, half, b, kept.len / es, true);
        }
        acc = half;
        wlo = keep;
    }
    /* acc: the reduced blocks of first(n) .. first(n+1)-1 */
    if (me < 2 * f.rem) {
        const uint64_t lower = g.cnt[me - 1] * es;
        if (lower) s.send(me - 1, post_tag, acc.at.sub(0, lower));
        if (res.len) settle(s, Partial{acc.at.sub(lower, res.len), acc.writable}, res);
    } else if (res.len) {
        settle(s, acc, res);
    }
}

Status reduce_then_scatter(Schedule &s, const RsGeom &g, const AlgoChoice &a) {
    TreeShape t;
    if (!tree_shape(a.tree, a.radix, g.p, &t)) return Status::Unsupported;
    const Red r{g.e[g.p], g.es, g.commutative};
    const Buf all = g.me == 0 ? s.scratch(r.bytes()) : Buf{};
    /* Rooted at rank 0: rank order for any op. */
    const uint32_t n = tree_reduce(s, t, 0, r, g.input.sub(0, r.bytes()), all, g.seg, 0);
    const Buf res{Slot::Recv, 0, g.cnt[g.me] * g.es};
    if (g.me == 0) {
        for (int j = 1; j < g.p; ++j) {
            uint32_t tag = n;
            for (auto &c : g.chunks(j)) s.send(j, tag++, g.block(all, j).sub(c.first, c.second - c.first));
        }
        if (res.len) s.copy(g.block(all, 0), res);
    } else {
        uint32_t tag = n;
        for (auto &c : g.chunks(g.me)) s.recv(0, tag++, res.sub(c.first, c.second - c.first));
    }
    return Status::Ok;
}

}  // namespace

Status gen_reduce_scatter(const CollSpec &c, const AlgoChoice &a, Schedule &s) {
    if (a.algo != Algo::Pairwise && a.algo != Algo::Ring && a.algo != Algo::ReduceThenScatter &&
        a.algo != Algo::Butterfly)
        return Status::Unsupported;
    if ((a.algo == Algo::Ring || a.algo == Algo::Butterfly) && !c.commutative) return Status::Unsupported;
    RsGeom g;
    g.p = c.size;
    g.me = c.rank;
    g.es = c.elem_size;
    g.commutative = c.commutative;
    g.cnt.assign(c.size, c.count);
    if (c.coll == Coll::ReduceScatter) g.cnt.assign(c.counts, c.counts + c.size);
    g.e.assign(c.size + 1, 0);
    for (int j = 0; j < c.size; ++j) g.e[j + 1] = g.e[j] + g.cnt[j];
    const uint64_t total = g.e[c.size];
    uint64_t biggest = 1;
    for (uint64_t x : g.cnt) biggest = std::max(biggest, x);
    g.seg = seg_elems(a.seg_bytes, g.es, biggest);
    if (total == 0) return Status::Ok;

    const Buf recv{Slot::Recv, 0, 0};
    g.input = c.in_place ? recv : Buf{Slot::Send, 0, 0};
    if (c.size == 1) {
        if (!c.in_place) s.copy(g.block(g.input, 0), g.block(recv, 0));
        return Status::Ok;
    }
    if (a.algo == Algo::ReduceThenScatter) return reduce_then_scatter(s, g, a);
    if (a.algo == Algo::Butterfly) {
        halving(s, g);
        return Status::Ok;
    }
    /* Pairwise and ring write Recv[0..) while input blocks are still
     * needed: in place, work from a snapshot of the input. */
    if (c.in_place) {
        const Buf snap = s.scratch(total * g.es);
        for (int j = 0; j < c.size; ++j)
            if (g.cnt[j]) s.copy(g.block(recv, j), g.block(snap, j));
        g.input = Buf{Slot::Scratch, snap.off, 0};
    }
    if (a.algo == Algo::Pairwise)
        pairwise(s, g);
    else
        ring(s, g);
    return Status::Ok;
}

}  // namespace gen
}  // namespace cdag
