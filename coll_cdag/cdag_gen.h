/*
 * Internal to the generators: topologies, segmentation, block transfers,
 * running partial results, and the per-family entry points that
 * generate() dispatches to.  Not an installed interface.
 */
#ifndef CDAG_GEN_H
#define CDAG_GEN_H

#include "cdag_coll.h"

#include <utility>
#include <vector>

namespace cdag {
namespace gen {

/* ------------------------------------------------------------ topologies */

/* One node of a rooted tree over vranks 0..p-1 (vrank 0 = root).  Every
 * subtree is a contiguous vrank range [v, hi), and children are listed in
 * ascending vrank order, so combining "own, child 1, child 2, ..." keeps
 * vrank order (what non-commutative reductions need).
 *   KaryTree(k):    children split [v+1, hi) into k near-equal ranges
 *                   (pre-order layout; k = 1 is a chain, k >= p-1 is flat)
 *   KnomialTree(k): children v + j*k^i for i below v's lowest nonzero
 *                   base-k digit, j = 1..k-1 */
struct TreeNode {
    int parent = -1;                            // vrank, -1 at the root
    int hi = 0;                                 // subtree is [v, hi)
    std::vector<std::pair<int, int>> children;  // (vrank, subtree end)
};
struct TreeShape {
    Algo kind;  // KaryTree or KnomialTree (Chain / Linear normalised away)
    int radix;
};
/* Normalise a tree Algo + radix for p ranks; false if not a tree. */
bool tree_shape(Algo a, int radix, int p, TreeShape *out);
TreeNode tree_node(const TreeShape &t, int p, int v);

/* Non-power-of-two folding for butterflies: with p2 the largest power of
 * two <= p and rem = p - p2, ranks 2i and 2i+1 (i < rem) pair up and the odd
 * one stands for both, so the butterfly runs on p2 "new ranks" and new
 * rank n stands for the contiguous original ranks [first(n), first(n+1)). */
struct Fold {
    int p, p2, rem;
    explicit Fold(int size);
    bool excluded(int r) const { return r < 2 * rem && r % 2 == 0; }  // sends to r+1, gets the result back
    int newrank(int r) const { return r < 2 * rem ? r / 2 : r - rem; }
    int real(int n) const { return n < rem ? 2 * n + 1 : n + rem; }
    int first(int n) const { return n < rem ? 2 * n : n + rem; }
};

int ceil_log2(int p);

/* ------------------------------------------------------------ segmentation */

/* [lo, hi) cut at every cut point strictly inside it, then each part cut
 * into pieces of at most seg (0 = unlimited), each counted from its part's
 * start.  Both ends of a message compute the same pieces. */
std::vector<std::pair<uint64_t, uint64_t>> split_range(uint64_t lo, uint64_t hi, const std::vector<uint64_t> &cuts,
                                                       uint64_t seg);

/* Segment length for reductions: seg_bytes rounded down to whole elements
 * (at least one), or everything if seg_bytes is 0. */
uint64_t seg_elems(uint64_t seg_bytes, uint64_t elem_size, uint64_t count);

/* ------------------------------------------------------------ block layouts */

/* Blocks j = 0..n-1 of a buffer: bytes [off[j], off[j] + len[j]). */
struct Layout {
    std::vector<uint64_t> off, len;
    static Layout uniform(int n, uint64_t block);
    static Layout from(int n, const uint64_t *counts, const uint64_t *displs, uint64_t scale = 1);
};

/* One message of a block transfer: bytes [off, off+len) of the layout's
 * buffer, all inside one block if `own` (the sender's own block). */
struct Piece {
    uint64_t off, len;
    bool own;
};
/* The messages that carry `blocks` (in that order) from a sender whose own
 * block is `own` (-1: none): runs of blocks adjacent in memory merge, the
 * own block stays separate (the sender may read it from elsewhere), empty
 * blocks vanish, and runs are cut into pieces of at most seg bytes. */
std::vector<Piece> block_pieces(const Layout &l, const std::vector<int> &blocks, int own, uint64_t seg);

/* Emit the sends / recvs of a block transfer, tags tag0, tag0+1, ....
 * The sender reads the own-block pieces from own_src (+ offset inside the
 * block) and everything else from `buf` at the layout offset; the receiver
 * writes into `buf` at the layout offset.  Returns the number of pieces. */
uint32_t send_blocks(Schedule &s, int peer, uint32_t tag0, const Layout &l, const std::vector<int> &blocks, int own,
                     Buf buf, Buf own_src, uint64_t seg);
uint32_t recv_blocks(Schedule &s, int peer, uint32_t tag0, const Layout &l, const std::vector<int> &blocks, int own,
                     Buf buf, uint64_t seg);

/* ------------------------------------------------------------ reductions */

struct Red {
    uint64_t count;      // elements
    uint64_t esize;      // bytes per element
    bool commutative;
    uint64_t bytes() const { return count * esize; }
};

/* Where the running partial result of one region lives.  Send-slot (user
 * input) partials are read-only and move on the first combine. */
struct Partial {
    Buf at;
    bool writable;
};
/* acc := acc (op) incoming.  `incoming` is a received range the schedule
 * owns.  With a commutative op and a writable acc the result stays in acc;
 * otherwise it moves into incoming (pass commutative = false to force the
 * move, e.g. to avoid writing an acc that is still being sent). */
void absorb_right(Schedule &s, Partial &acc, Buf incoming, uint64_t count, bool commutative);
/* acc := incoming (op) acc.  `spare` (writable, same length) is used only if
 * acc is read-only and the op is non-commutative. */
void absorb_left(Schedule &s, Partial &acc, Buf incoming, uint64_t count, bool commutative, Buf spare);
/* Make sure the result ends in dest. */
void settle(Schedule &s, const Partial &acc, Buf dest);

/* Tree reduction of `input` (r.count elements) towards `root`, vranks
 * rotated so that root is vrank 0 (the combining order is vrank order:
 * rank order only when root == 0 or the op commutes).  The result lands in
 * `dest` at the root; dest may equal input there (in place).  Pipelined
 * by seg elements; tags tag0 .. tag0 + nseg - 1.  Returns nseg. */
uint32_t tree_reduce(Schedule &s, const TreeShape &t, int root, const Red &r, Buf input, Buf dest, uint64_t seg,
                     uint32_t tag0);
/* Tree broadcast of `data` from root, pipelined by seg bytes (seg 0 = one
 * piece); tags tag0 .. tag0 + nseg - 1.  Returns nseg. */
uint32_t tree_bcast(Schedule &s, const TreeShape &t, int root, Buf data, uint64_t seg, uint32_t tag0);

/* Spans of an input vector split in p blocks of near-equal element counts
 * (first count % p blocks one element longer); returns element offsets
 * (p+1 entries). */
std::vector<uint64_t> even_blocks(uint64_t count, int p);

/* ------------------------------------------------------------ families */

Status gen_barrier(const CollSpec &c, const AlgoChoice &a, Schedule &s);
Status gen_bcast(const CollSpec &c, const AlgoChoice &a, Schedule &s);
Status gen_reduce(const CollSpec &c, const AlgoChoice &a, Schedule &s);
Status gen_allreduce(const CollSpec &c, const AlgoChoice &a, Schedule &s);
Status gen_gather(const CollSpec &c, const AlgoChoice &a, Schedule &s);
Status gen_scatter(const CollSpec &c, const AlgoChoice &a, Schedule &s);
Status gen_gatherv(const CollSpec &c, const AlgoChoice &a, Schedule &s);
Status gen_scatterv(const CollSpec &c, const AlgoChoice &a, Schedule &s);
Status gen_allgather(const CollSpec &c, const AlgoChoice &a, Schedule &s);  // also Allgatherv
Status gen_alltoall(const CollSpec &c, const AlgoChoice &a, Schedule &s);   // also Alltoallv
Status gen_reduce_scatter(const CollSpec &c, const AlgoChoice &a, Schedule &s);  // both variants
Status gen_scan(const CollSpec &c, const AlgoChoice &a, Schedule &s);       // also Exscan

}  // namespace gen
}  // namespace cdag

#endif
