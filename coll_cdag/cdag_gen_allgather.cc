/*
 * Allgather and Allgatherv: ring, butterfly (recursive doubling with the
 * power-of-two fold) and dissemination (Bruck, without the final
 * rotation: blocks go straight to their place in the receive buffer).
 *
 * Everything is a block transfer over the shared receive layout (every
 * rank knows all counts and displacements): messages carry lists of
 * blocks, merged where they are adjacent in memory and cut into segments.
 * The sender's own block is read from the send buffer, so the first step
 * never waits for the local copy.
 */
#include "cdag_gen.h"

#include <algorithm>

namespace cdag {
namespace gen {

namespace {

struct Blocks {
    Layout l;
    Buf rbuf{Slot::Recv, 0, 0};
    Buf own_src;
    uint64_t seg;
    uint32_t per_msg;  // tag stride: no message has more pieces

    std::vector<int> range(int lo, int n, int p) const {  // blocks lo, lo+1, ... (mod p), n of them
        std::vector<int> b;
        for (int i = 0; i < n; ++i) b.push_back((lo + i) % p);
        return b;
    }
};

void ring(Schedule &s, const Blocks &b) {
    const int p = s.size(), me = s.rank();
    const int right = (me + 1) % p, left = (me - 1 + p) % p;
    for (int st = 0; st + 1 < p; ++st) {
        const uint32_t tag = st * b.per_msg;
        send_blocks(s, right, tag, b.l, {(me - st + p) % p}, me, b.rbuf, b.own_src, b.seg);
        recv_blocks(s, left, tag, b.l, {(me - st - 1 + p) % p}, left, b.rbuf, b.seg);
    }
}

/* Step i (d = 2^i): rank r holds blocks r .. r+d-1; it sends the first
 * min(d, p-d) of them to r-d and gets as many from r+d. */
void bruck(Schedule &s, const Blocks &b) {
    const int p = s.size(), me = s.rank();
    for (int i = 0, d = 1; d < p; ++i, d *= 2) {
        const int n = std::min(d, p - d);
        const int to = (me - d + p) % p, from = (me + d) % p;
        send_blocks(s, to, i * b.per_msg, b.l, b.range(me, n, p), me, b.rbuf, b.own_src, b.seg);
        recv_blocks(s, from, i * b.per_msg, b.l, b.range(from, n, p), from, b.rbuf, b.seg);
    }
}

void butterfly(Schedule &s, const Blocks &b) {
    const int p = s.size(), me = s.rank();
    const Fold f(p);
    const int steps = ceil_log2(f.p2);
    const uint32_t post_tag = (steps + 1) * b.per_msg;
    std::vector<int> all_but;
    auto everyone_but = [&](int x) {
        all_but.clear();
        for (int j = 0; j < p; ++j)
            if (j != x) all_but.push_back(j);
        return all_but;
    };
    if (f.excluded(me)) {
        send_blocks(s, me + 1, 0, b.l, {me}, me, b.rbuf, b.own_src, b.seg);
        recv_blocks(s, me + 1, post_tag, b.l, everyone_but(me), me + 1, b.rbuf, b.seg);
        return;
    }
    if (me < 2 * f.rem) recv_blocks(s, me - 1, 0, b.l, {me - 1}, me - 1, b.rbuf, b.seg);
    const int n = f.newrank(me);
    for (int i = 0; i < steps; ++i) {
        const int m = 1 << i;
        const int pn = n ^ m, peer = f.real(pn);
        /* Aligned groups of m new ranks are contiguous original ranks. */
        const int mine = n & ~(m - 1), theirs = pn & ~(m - 1);
        const int mlo = f.first(mine), mhi = f.first(mine + m);
        const int tlo = f.first(theirs), thi = f.first(theirs + m);
        send_blocks(s, peer, (1 + i) * b.per_msg, b.l, b.range(mlo, mhi - mlo, p), me, b.rbuf, b.own_src, b.seg);
        recv_blocks(s, peer, (1 + i) * b.per_msg, b.l, b.range(tlo, thi - tlo, p), peer, b.rbuf, b.seg);
    }
    if (me < 2 * f.rem) send_blocks(s, me - 1, post_tag, b.l, everyone_but(me - 1), me, b.rbuf, b.own_src, b.seg);
}

}  // namespace

Status gen_allgather(const CollSpec &c, const AlgoChoice &a, Schedule &s) {
    const int p = c.size, me = c.rank;
    Blocks b;
    b.l = c.coll == Coll::Allgatherv ? Layout::from(p, c.counts, c.displs) : Layout::uniform(p, c.count);
    b.seg = a.seg_bytes;
    const uint64_t own_len = b.l.len[me];
    b.own_src = c.in_place ? Buf{Slot::Recv, b.l.off[me], own_len} : Buf{Slot::Send, 0, own_len};
    /* Tags: no message carries more pieces than all blocks cut separately. */
    uint64_t per = 1;
    for (int j = 0; j < p; ++j) per += b.seg ? (b.l.len[j] + b.seg - 1) / b.seg : 1;
    b.per_msg = static_cast<uint32_t>(per);

    if (a.algo != Algo::Ring && a.algo != Algo::Dissemination && a.algo != Algo::Butterfly)
        return Status::Unsupported;
    if (!c.in_place && own_len) s.copy(b.own_src, b.rbuf.sub(b.l.off[me], own_len));
    if (p == 1) return Status::Ok;
    if (a.algo == Algo::Ring)
        ring(s, b);
    else if (a.algo == Algo::Dissemination)
        bruck(s, b);
    else
        butterfly(s, b);
    return Status::Ok;
}

}  // namespace gen
}  // namespace cdag
