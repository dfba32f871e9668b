/*
 * Variant selection.  A pure function of values all ranks share, so every
 * rank picks the same variant (a mismatch would deadlock).  n is the bytes
 * of the whole vector (reductions: count * elem_size; Gather/Scatter/
 * Allgather: size * block), blk the bytes per rank or pair, p the size.
 *
 *  collective           condition                      variant
 *  Barrier              4 <= p < 8                     Linear (fan-in to rank 0, fan-out)
 *                       otherwise                      Dissemination
 *  Bcast, Reduce        n <= 4 KiB, 4 <= p < 8         Linear (flat), whole
 *                       n <= 4 KiB or p == 2           KnomialTree k=2 (binomial), whole
 *                       n/seg(n) < 2p                  KaryTree k=2, seg(n) segments
 *                       otherwise                      Chain, seg(n) segments
 *  Allreduce            n <= 8 KiB, count < p, p == 2  Butterfly (any op)
 *                       commutative                    Ring, 512 KiB segments
 *                       non-commutative                ReduceBcast, KaryTree k=2, seg(n) segments
 *  Gather, Scatter      4 <= p < 8                     Linear
 *                       n <= 64 KiB                    KnomialTree k=2
 *                       otherwise                      Linear
 *  Allgather            n <= 32 KiB, p power of two    Butterfly
 *                       n <= 32 KiB                    Dissemination (Bruck)
 *                       otherwise                      Ring
 *  Alltoall             blk <= 1 KiB                   Linear, window 0 (p <= 32) or 32
 *                       blk <= 64 KiB or 3 <= p < 8    Linear, window 8
 *                       otherwise                      Pairwise
 *  ReduceScatter(Block) p == 2, n <= 64 KiB            Pairwise (one exchange)
 *                       commutative, n <= 512 B        Butterfly (recursive halving)
 *                       commutative, n <= 8 KiB        ReduceThenScatter, KnomialTree k=2
 *                       commutative                    Ring, 64 KiB segments
 *                       non-commutative, n <= 64 KiB   ReduceThenScatter, KnomialTree k=2
 *                       non-commutative                Pairwise
 *  Scan, Exscan         n <= 16 KiB                    Butterfly
 *                       otherwise                      Chain, 32 KiB segments
 *  Gatherv, Scatterv    always                         Linear (only the root knows the counts)
 *  Allgatherv           sum(counts) <= 32 KiB          Dissemination, else Ring
 *  Alltoallv            always                         Linear, window 8 (counts differ per rank)
 *
 * Non-commutative reductions only ever get order-preserving variants
 * (trees rooted at rank 0 or hopping through it, butterflies, pairwise
 * with a rank-ordered combine, chains).
 *
 * Segments.  Every schedule message larger than UCX's eager limit (8 KiB
 * on shared memory) is a rendezvous of its own (RTS, get, ATS): about 3 us
 * each on the development machine, against ~85 us per MiB of copying.  At
 * 2 ranks a tree is one hop, nothing pipelines, and OSU at np 2 (ob1,
 * 64 KiB - 4 MiB) measured whole messages 1.5-2x faster than the former
 * 16 / 64 KiB segments for bcast and reduce; a 2-rank allreduce is fastest
 * as one exchange and two local reductions (butterfly: 0.5-0.6x the time
 * of the ring with 64 KiB segments, 64 KiB - 4 MiB).  Deeper trees
 * pipeline with seg(n), the power of two nearest sqrt(n x 32 KiB) and at
 * least 64 KiB: the segment that balances the per-message cost o against
 * the pipeline's fill time (o x bandwidth ~ 32 KiB here).  The thresholds
 * for p > 2 follow that model; they were not measurable on a 2-core
 * machine (np 4 oversubscribed moves single runs 2-10x).
 */
#include "cdag_coll.h"

namespace cdag {

namespace {

constexpr uint64_t KiB = 1024;

AlgoChoice make(Algo a, int radix = 2, uint64_t seg = 0, int window = 0, Algo tree = Algo::KnomialTree) {
    AlgoChoice c;
    c.algo = a;
    c.radix = radix;
    c.seg_bytes = seg;
    c.window = window;
    c.tree = tree;
    return c;
}

AlgoChoice rooted_tree(uint64_t n, int p) {
    /* Small messages at 4-7 ranks: one hop from or to the root, as gather
     * and scatter.  np 4 on 2 cores, OSU 1 B - 4 KiB, best of 7, flat /
     * binomial: reduce 1.37-2.03 / 1.85-2.75 us over ob1 (tuned 1.53-10.2),
     * 1.33-2.02 / 1.85-2.92 over pml/rdrp (tuned 1.87-3.81); bcast 1-256 B
     * 0.35-0.48 / 0.40-0.50 over ob1, 0.30-0.41 / 0.66-0.84 over rdrp,
     * 512 B - 2 KiB within 0.1 us either way, 4 KiB 0.84-0.87 / 1.00-1.32 */
    if (n <= 4 * KiB && p >= 4 && p < 8) return make(Algo::Linear);
    if (n <= 4 * KiB || p == 2) return make(Algo::KnomialTree, 2);
    const uint64_t seg = pipeline_segment(n);
    if (n / seg < uint64_t(2 * p)) return make(Algo::KaryTree, 2, seg);
    return make(Algo::Chain, 1, seg);
}

uint64_t sum(const uint64_t *v, int p) {
    uint64_t t = 0;
    for (int i = 0; v && i < p; ++i) t += v[i];
    return t;
}

}  // namespace

uint64_t pipeline_segment(uint64_t n) {
    uint64_t seg = 64 * KiB;
    /* nearest power of two to sqrt(n * 32 KiB): seg^2 within [n*16K, n*64K) */
    while (seg * seg < n * 16 * KiB) seg *= 2;
    return seg;
}

AlgoChoice select(const CollSpec &c) {
    const int p = c.size;
    const uint64_t red_bytes = c.count * c.elem_size;
    switch (c.coll) {
    case Coll::Barrier:
        /* coll/tuned's choice at 4-7 ranks too.  np 4 on 2 cores (mpirun
         * oversubscribed, OSU over ob1, best of 3): a loop of barriers 2.60
         * us against dissemination's 3.89 and tuned's 3.06; OSU's nine
         * collectives, cells of 179 over 1.1x tuned in interleaved runs,
         * linear against dissemination: over ob1 32 / 58 and 39 / 43, over
         * pml/rdrp 26 / 73, since rank 0 now leaves first (as under tuned)
         * and the rooted calls OSU times after each barrier find their root
         * ahead */
        return make(p >= 4 && p < 8 ? Algo::Linear : Algo::Dissemination);
    case Coll::Bcast: return rooted_tree(c.count, p);
    case Coll::Reduce: return rooted_tree(red_bytes, p);
    case Coll::Allreduce:
        if (red_bytes <= 8 * KiB || c.count < uint64_t(p) || p == 2) return make(Algo::Butterfly);
        if (c.commutative) return make(Algo::Ring, 2, 512 * KiB);
        return make(Algo::ReduceBcast, 2, pipeline_segment(red_bytes), 0, Algo::KaryTree);
    case Coll::Gather:
    case Coll::Scatter:
        /* One hop from or to the root instead of two for a quarter of the
         * ranks: np 4 on 2 cores, OSU 1 B - 4 KiB, three interleaved runs
         * (best of 5-7), linear / binomial: scatter 0.35-0.73 / 0.61-1.61
         * us over ob1 (tuned 0.35-6.4), 0.28-0.91 / 0.32-1.24 over pml/rdrp
         * (tuned 0.44-5.3); gather 1.31-1.73 / 1.88-2.86 over ob1 (tuned
         * 1.76-7.2), 1.43-1.95 / 1.36-2.75 over rdrp (tuned 1.02-1.77).
         * The root's p-1 sends are ring pushes at these sizes; at np 3 the
         * binomial tree is already flat. */
        if (p >= 4 && p < 8) return make(Algo::Linear);
        return c.count * p <= 64 * KiB ? make(Algo::KnomialTree, 2) : make(Algo::Linear);
    case Coll::Allgather:
        if (c.count * p <= 32 * KiB) return make((p & (p - 1)) == 0 ? Algo::Butterfly : Algo::Dissemination);
        return make(Algo::Ring);
    case Coll::Alltoall:
        if (c.count <= 1 * KiB) return make(Algo::Linear, 2, 0, p <= 32 ? 0 : 32);
        /* Few ranks: every pair at once (coll/tuned's linear too).  OSU,
         * 128 KiB - 2 MiB per pair, best of 5, two runs, linear / pairwise:
         * np 4 110-2072 / 129-2204 us, np 3 68-1333 / 88-1371 (over ob1
         * and pml/rdrp; 4 MiB within the noise either way) */
        if (c.count <= 64 * KiB || (p >= 3 && p < 8)) return make(Algo::Linear, 2, 0, 8);
        return make(Algo::Pairwise);
    case Coll::ReduceScatterBlock:
    case Coll::ReduceScatter: {
        const uint64_t n =
            (c.coll == Coll::ReduceScatter ? sum(c.counts, p) : c.count * uint64_t(p)) * c.elem_size;
        if (p == 2 && n <= 64 * KiB) return make(Algo::Pairwise);  // one exchange, not two hops
        /* log2(p) exchanges instead of a tree there and back (2 log2(p)
         * hops).  OSU over ob1, interleaved, best of 7, 16-512 B: np 3
         * 3.5-4.0 us against 5.2-6.1, np 4 5.9-7.8 against 5.9-6.8 (noisy
         * at 4 ranks on 2 cores); from 1 KiB the fold's whole-vector hop
         * costs more than it saves (np 3: 5.0-5.7 against 5.0-5.4) */
        if (c.commutative && n <= 512) return make(Algo::Butterfly);
        if (n <= (c.commutative ? 8 : 64) * KiB) return make(Algo::ReduceThenScatter, 2, 0, 0, Algo::KnomialTree);
        return c.commutative ? make(Algo::Ring, 2, 64 * KiB) : make(Algo::Pairwise);
    }
    case Coll::Scan:
    case Coll::Exscan: return red_bytes <= 16 * KiB ? make(Algo::Butterfly) : make(Algo::Chain, 1, 32 * KiB);
    case Coll::Gatherv:
    case Coll::Scatterv: return make(Algo::Linear);
    case Coll::Allgatherv: return make(sum(c.counts, p) <= 32 * KiB ? Algo::Dissemination : Algo::Ring);
    case Coll::Alltoallv: return make(Algo::Linear, 2, 0, 8);
    }
    return make(Algo::Auto);
}

}  // namespace cdag
