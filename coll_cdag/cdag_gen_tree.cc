/*
 * Tree dataflows: pipelined broadcast and reduction over k-ary / k-nomial
 * trees and chains, and the Bcast / Reduce generators built on them.
 */
#include "cdag_gen.h"

#include <algorithm>

namespace cdag {
namespace gen {

namespace {

int to_real(int v, int root, int p) { return (v + root) % p; }

/* Children ordered largest subtree first: in a broadcast the deepest
 * subtree is the one that should get its data earliest. */
std::vector<std::pair<int, int>> largest_first(const TreeNode &n) {
    std::vector<std::pair<int, int>> c = n.children;
    std::stable_sort(c.begin(), c.end(), [](const std::pair<int, int> &a, const std::pair<int, int> &b) {
        return a.second - a.first > b.second - b.first;
    });
    return c;
}

}  // namespace

uint32_t tree_bcast(Schedule &s, const TreeShape &t, int root, Buf data, uint64_t seg, uint32_t tag0) {
    const int p = s.size();
    const int v = (s.rank() - root + p) % p;
    if (data.len == 0 || p == 1) return 0;
    const TreeNode node = tree_node(t, p, v);
    const auto kids = largest_first(node);
    const auto pieces = split_range(0, data.len, {}, seg);
    /* Per segment: receive it, then forward it to every child.  The
     * tracker makes each forward wait only for its own segment. */
    for (uint32_t i = 0; i < pieces.size(); ++i) {
        const Buf b = data.sub(pieces[i].first, pieces[i].second - pieces[i].first);
        if (v != 0) s.recv(to_real(node.parent, root, p), tag0 + i, b);
        for (auto &c : kids) s.send(to_real(c.first, root, p), tag0 + i, b);
    }
    return static_cast<uint32_t>(pieces.size());
}

uint32_t tree_reduce(Schedule &s, const TreeShape &t, int root, const Red &r, Buf input, Buf dest, uint64_t seg,
                     uint32_t tag0) {
    const int p = s.size();
    const int v = (s.rank() - root + p) % p;
    if (r.count == 0) return 0;
    const TreeNode node = tree_node(t, p, v);
    const bool is_root = v == 0;
    const size_t k = node.children.size();

    /* One landing area per child.  At the root (not in place) the last
     * child lands directly in dest: the last combine then moves the
     * partial result there and no final copy is needed. */
    const bool last_in_dest = is_root && k > 0 && input != dest;
    std::vector<Buf> land(k);
    for (size_t i = 0; i < k; ++i) land[i] = (last_in_dest && i + 1 == k) ? dest : s.scratch(r.bytes());

    const uint64_t nseg = (r.count + seg - 1) / seg;
    for (uint64_t i = 0; i < nseg; ++i) {
        const uint64_t e0 = i * seg, n = std::min(seg, r.count - e0);
        const uint64_t off = e0 * r.esize, len = n * r.esize;
        /* own data (op) child 1 (op) child 2 ...: vrank order. */
        Partial acc{input.sub(off, len), is_root && input == dest};
        for (size_t c = 0; c < k; ++c) {
            const Buf b = land[c].sub(off, len);
            s.recv(to_real(node.children[c].first, root, p), tag0 + static_cast<uint32_t>(i), b);
            const bool must_move = last_in_dest && c + 1 == k;
            absorb_right(s, acc, b, n, r.commutative && !must_move);
        }
        if (!is_root)
            s.send(to_real(node.parent, root, p), tag0 + static_cast<uint32_t>(i), acc.at);
        else
            settle(s, acc, dest.sub(off, len));
    }
    return static_cast<uint32_t>(nseg);
}

Status gen_bcast(const CollSpec &c, const AlgoChoice &a, Schedule &s) {
    TreeShape t;
    if (!tree_shape(a.algo, a.radix, c.size, &t)) return Status::Unsupported;
    tree_bcast(s, t, c.root, Buf{Slot::Recv, 0, c.count}, a.seg_bytes, 0);
    return Status::Ok;
}

Status gen_reduce(const CollSpec &c, const AlgoChoice &a, Schedule &s) {
    TreeShape t;
    if (!tree_shape(a.algo, a.radix, c.size, &t)) return Status::Unsupported;
    const Red r{c.count, c.elem_size, c.commutative};
    if (r.count == 0) return Status::Ok;
    const bool me_root = c.rank == c.root;
    const Buf res{Slot::Recv, 0, r.bytes()};
    const Buf input = (c.in_place && me_root) ? res : Buf{Slot::Send, 0, r.bytes()};
    const uint64_t seg = seg_elems(a.seg_bytes, r.esize, r.count);

    if (r.commutative || c.root == 0) {
        tree_reduce(s, t, c.root, r, input, res, seg, 0);
        return Status::Ok;
    }
    /* Non-commutative, root != 0: vrank order would be a rotation of rank
     * order, so reduce in rank order to rank 0 and forward the result. */
    const Buf at0 = c.rank == 0 ? s.scratch(r.bytes()) : Buf{};
    const uint32_t nseg = tree_reduce(s, t, 0, r, input, at0, seg, 0);
    for (auto &pc : split_range(0, r.bytes(), {}, seg * r.esize)) {
        const uint32_t tag = nseg + static_cast<uint32_t>(pc.first / (seg * r.esize));
        const uint64_t len = pc.second - pc.first;
        if (c.rank == 0) s.send(c.root, tag, at0.sub(pc.first, len));
        if (me_root) s.recv(0, tag, res.sub(pc.first, len));
    }
    return Status::Ok;
}

}  // namespace gen
}  // namespace cdag
