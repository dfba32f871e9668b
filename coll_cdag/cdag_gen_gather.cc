/*
 * Gather / Scatter over pipelined trees (k-ary, k-nomial, chain, flat) and
 * Gatherv / Scatterv (flat: only the root knows the counts).
 *
 * Tree dataflow: in vrank space (root = vrank 0) every subtree [v, hi) owns
 * a contiguous byte range [v*blk, hi*blk).  A non-root node stages its
 * descendants' blocks, [(v+1)*blk, hi*blk), in scratch; its own block
 * travels straight from / to the user buffer.  The message between a node
 * and its parent covers the node's whole subtree and is cut
 *   - at the node's own-block boundary (different source/destination),
 *   - at the wrap of vrank order into rank order when the parent is the
 *     root (the root addresses its buffer by real rank),
 *   - into segments of seg_bytes (pipelining: a segment moves up or down as
 *     soon as the bytes it covers arrived).
 * Both ends compute the same cuts, so piece i of an edge has tag i.
 */
#include "cdag_gen.h"

#include <algorithm>

namespace cdag {
namespace gen {

namespace {

/* a root's own block of at least this many bytes is copied after its
 * receives (gen_gather) */
constexpr uint64_t kLateOwnCopy = 65536;

struct TreeGeom {
    int p, root, v;
    uint64_t blk;
    TreeNode node;
    Buf stage;  // descendants' blocks at a non-root node

    int real(int u) const { return (u + root) % p; }
    /* Byte x of vrank space -> byte of the root's buffer (real rank order). */
    uint64_t root_off(uint64_t x) const { return uint64_t(real(static_cast<int>(x / blk))) * blk + x % blk; }
    /* Pieces of the message carrying subtree [u, hi) to / from parent `par`. */
    std::vector<std::pair<uint64_t, uint64_t>> pieces(int u, int hi, int par, uint64_t seg) const {
        std::vector<uint64_t> cuts{uint64_t(u + 1) * blk};
        if (par == 0) cuts.push_back(uint64_t(p - root) % p * blk);
        return split_range(uint64_t(u) * blk, uint64_t(hi) * blk, cuts, seg);
    }
    /* This node's buffer for vrank bytes [x, x+len), not its own block. */
    Buf staged(uint64_t x, uint64_t len) const {
        return v == 0 ? Buf{Slot::Recv, root_off(x), len} : stage.sub(x - uint64_t(v + 1) * blk, len);
    }
};

bool make_geom(const CollSpec &c, const AlgoChoice &a, Schedule &s, TreeGeom *g) {
    TreeShape t;
    if (!tree_shape(a.algo, a.radix, c.size, &t)) return false;
    g->p = c.size;
    g->root = c.root;
    g->v = (c.rank - c.root + c.size) % c.size;
    g->blk = c.count;
    g->node = tree_node(t, c.size, g->v);
    const uint64_t below = uint64_t(g->node.hi - g->v - 1) * g->blk;
    g->stage = (g->v != 0 && below) ? s.scratch(below) : Buf{};
    return true;
}

}  // namespace

Status gen_gather(const CollSpec &c, const AlgoChoice &a, Schedule &s) {
    TreeGeom g;
    if (!make_geom(c, a, s, &g)) return Status::Unsupported;
    const uint64_t blk = g.blk;
    if (blk == 0) return Status::Ok;
    const Buf own{Slot::Send, 0, blk};
    const Buf own_at_root{Slot::Recv, uint64_t(c.root) * blk, blk};
    /* The root's own block: copied first when small; when large, after
     * every receive, so that its children's messages are taken (and their
     * sends complete) before the root spends a memcpy of the block: at np
     * 2, 4 MiB, the non-root's call lasted the root's copy plus its pull
     * (858 us) against coll/tuned's 523 us (linear_sync copies last too). */
    const bool copy_last = blk >= kLateOwnCopy;
    if (g.v == 0 && !c.in_place && !copy_last) s.copy(own, own_at_root);
    std::vector<VertexId> recvs;
    for (auto &ch : g.node.children) {
        uint32_t tag = 0;
        for (auto &pc : g.pieces(ch.first, ch.second, g.v, a.seg_bytes))
            recvs.push_back(s.recv(g.real(ch.first), tag++, g.staged(pc.first, pc.second - pc.first)));
    }
    if (g.v == 0 && !c.in_place && copy_last) {
        VertexId cp = s.copy(own, own_at_root);
        for (VertexId r : recvs) s.edge(r, cp);
    }
    if (g.v != 0) {
        uint32_t tag = 0;
        const uint64_t mine = uint64_t(g.v) * blk;
        for (auto &pc : g.pieces(g.v, g.node.hi, g.node.parent, a.seg_bytes)) {
            const uint64_t len = pc.second - pc.first;
            const Buf src = pc.first < mine + blk ? own.sub(pc.first - mine, len) : g.staged(pc.first, len);
            s.send(g.real(g.node.parent), tag++, src);
        }
    }
    return Status::Ok;
}

Status gen_scatter(const CollSpec &c, const AlgoChoice &a, Schedule &s) {
    TreeGeom g;
    if (!make_geom(c, a, s, &g)) return Status::Unsupported;
    const uint64_t blk = g.blk;
    if (blk == 0) return Status::Ok;
    const Buf own{Slot::Recv, 0, blk};
    /* a large own block at the root is copied after the sends are out, so
     * the children take their data while the root copies (gen_gather) */
    const bool copy_last = blk >= kLateOwnCopy;
    if (g.v == 0) {
        if (!c.in_place && !copy_last) s.copy(Buf{Slot::Send, uint64_t(c.root) * blk, blk}, own);
    } else {
        uint32_t tag = 0;
        const uint64_t mine = uint64_t(g.v) * blk;
        for (auto &pc : g.pieces(g.v, g.node.hi, g.node.parent, a.seg_bytes)) {
            const uint64_t len = pc.second - pc.first;
            const Buf dst = pc.first < mine + blk ? own.sub(pc.first - mine, len) : g.staged(pc.first, len);
            s.recv(g.real(g.node.parent), tag++, dst);
        }
    }
    /* Largest subtree first: its data has the longest way to go. */
    std::vector<std::pair<int, int>> kids = g.node.children;
    std::stable_sort(kids.begin(), kids.end(), [](const std::pair<int, int> &x, const std::pair<int, int> &y) {
        return x.second - x.first > y.second - y.first;
    });
    for (auto &ch : kids) {
        uint32_t tag = 0;
        for (auto &pc : g.pieces(ch.first, ch.second, g.v, a.seg_bytes)) {
            const uint64_t len = pc.second - pc.first;
            const Buf src = g.v == 0 ? Buf{Slot::Send, g.root_off(pc.first), len} : g.staged(pc.first, len);
            s.send(g.real(ch.first), tag++, src);
        }
    }
    if (g.v == 0 && !c.in_place && copy_last) s.copy(Buf{Slot::Send, uint64_t(c.root) * blk, blk}, own);
    return Status::Ok;
}

Status gen_gatherv(const CollSpec &c, const AlgoChoice &a, Schedule &s) {
    if (a.algo != Algo::Linear) return Status::Unsupported;
    if (c.rank != c.root) {
        uint32_t tag = 0;
        for (auto &pc : split_range(0, c.count, {}, a.seg_bytes))
            s.send(c.root, tag++, Buf{Slot::Send, pc.first, pc.second - pc.first});
        return Status::Ok;
    }
    for (int r = 0; r < c.size; ++r) {
        if (r == c.root) continue;
        uint32_t tag = 0;
        for (auto &pc : split_range(0, c.counts[r], {}, a.seg_bytes))
            s.recv(r, tag++, Buf{Slot::Recv, c.displs[r] + pc.first, pc.second - pc.first});
    }
    if (!c.in_place && c.count)
        s.copy(Buf{Slot::Send, 0, c.count}, Buf{Slot::Recv, c.displs[c.root], c.count});
    return Status::Ok;
}

Status gen_scatterv(const CollSpec &c, const AlgoChoice &a, Schedule &s) {
    if (a.algo != Algo::Linear) return Status::Unsupported;
    if (c.rank != c.root) {
        uint32_t tag = 0;
        for (auto &pc : split_range(0, c.count, {}, a.seg_bytes))
            s.recv(c.root, tag++, Buf{Slot::Recv, pc.first, pc.second - pc.first});
        return Status::Ok;
    }
    for (int r = 0; r < c.size; ++r) {
        if (r == c.root) continue;
        uint32_t tag = 0;
        for (auto &pc : split_range(0, c.counts[r], {}, a.seg_bytes))
            s.send(r, tag++, Buf{Slot::Send, c.displs[r] + pc.first, pc.second - pc.first});
    }
    if (!c.in_place && c.count)
        s.copy(Buf{Slot::Send, c.displs[c.root], c.count}, Buf{Slot::Recv, 0, c.count});
    return Status::Ok;
}

}  // namespace gen
}  // namespace cdag
