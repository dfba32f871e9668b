/*
 * Collective generators: one rank's cDAG schedule for an MPI collective.
 *
 * Each collective is a dataflow (which bytes go from where to where, which
 * are combined) mapped onto a topology (tree, chain, ring, butterfly,
 * dissemination, pairwise exchange), as in Table I of the cdag seed.  A
 * generator runs on one rank with only what that rank knows under MPI
 * (e.g. gatherv's counts only at the root) and emits that rank's schedule;
 * the schedules of all ranks match each other by construction.
 *
 * Buffers (slots of cdag_schedule.h).  Data-movement collectives count in
 * bytes; reductions count elements of elem_size bytes, combined by the
 * executor's ReduceFn.  Data is contiguous: the caller packs derived
 * datatypes into a contiguous staging buffer and unpacks after completion.
 *
 *  coll               count                 Send slot            Recv slot
 *  Barrier            -                     -                    -
 *  Bcast              bytes                 -                    the buffer (all ranks)
 *  Reduce             elements              input                result (root only)
 *  Allreduce          elements              input                result
 *  Gather             bytes per rank        count bytes          size*count (root)
 *  Scatter            bytes per rank        size*count (root)    count bytes
 *  Allgather          bytes per rank        count bytes          size*count
 *  Alltoall           bytes per pair        size*count           size*count
 *  ReduceScatterBlock elements per rank     size*count elements  count elements
 *  ReduceScatter      counts[] elements     sum(counts) elements counts[rank] elements
 *  Scan, Exscan       elements              input                result (Exscan: rank 0 untouched)
 *  Gatherv            bytes this rank sends count bytes          counts[]/displs[] bytes (root)
 *  Scatterv           bytes this rank gets  counts[]/displs[] (root)  count bytes
 *  Allgatherv         -                     counts[rank] bytes   counts[]/displs[] bytes
 *  Alltoallv          -                     counts[]/displs[]    rcounts[]/rdispls[]
 *
 * in_place (MPI_IN_PLACE, the caller passes the buffer as the Recv slot and
 * nothing as Send):
 *  Reduce (root), Allreduce, Scan, Exscan: input is in Recv.
 *  Gather(v) (root): the root's block is already in its place in Recv.
 *  Scatter(v) (root): the root's block stays in Send; Recv is not touched.
 *  Allgather(v): own block already in its place in Recv.
 *  Alltoall(v): input in Recv (recv layout); Send counts are ignored.
 *  ReduceScatter(Block): input (whole vector) in Recv; result at Recv[0..).
 * No schedule ever writes Recv bytes outside the MPI-defined output.
 *
 * Non-commutative reductions combine in rank order (x0 op x1 op ... ):
 * only order-preserving variants accept commutative == false
 * (Status::Unsupported otherwise), and select() only picks those.
 *
 * Tags: a schedule uses tags 0..Plan::max_tag, O(steps x segments).
 */
#ifndef CDAG_COLL_H
#define CDAG_COLL_H

#include "cdag_schedule.h"

#include <cstdint>

namespace cdag {

enum class Coll : uint8_t {
    Barrier,
    Bcast,
    Reduce,
    Allreduce,
    Gather,
    Scatter,
    Allgather,
    Alltoall,
    ReduceScatterBlock,
    ReduceScatter,
    Scan,
    Exscan,
    Gatherv,
    Scatterv,
    Allgatherv,
    Alltoallv,
};

struct CollSpec {
    Coll coll = Coll::Barrier;
    int rank = 0;
    int size = 1;
    int root = 0;                   // rooted collectives
    uint64_t count = 0;             // see the table above
    uint64_t elem_size = 1;         // reductions: bytes per element
    bool commutative = true;        // reductions
    bool in_place = false;
    const uint64_t *counts = nullptr;   // v-variants / ReduceScatter, size entries
    const uint64_t *displs = nullptr;
    const uint64_t *rcounts = nullptr;  // Alltoallv receive layout
    const uint64_t *rdispls = nullptr;
};

/* Variants.  Which apply to which collective:
 *  Barrier             Dissemination, Butterfly, Linear
 *  Bcast, Reduce,
 *  Gather, Scatter     KnomialTree(radix>=2), KaryTree(radix>=1), Chain, Linear
 *                      (all pipelined by seg_bytes)
 *  Allreduce           Butterfly (recursive doubling, any op), Dissemination
 *                      (commutative), Ring (reduce-scatter + allgather,
 *                      commutative), ReduceBcast (tree + radix + seg)
 *  Allgather           Ring, Butterfly (recursive doubling), Dissemination (Bruck)
 *  Alltoall            Pairwise, Linear (window = pairs in flight, 0 = all)
 *  ReduceScatter(Block) Pairwise (any op), Ring (commutative),
 *                      ReduceThenScatter (tree + radix + seg),
 *                      Butterfly (recursive halving, commutative)
 *  Scan, Exscan        Chain (pipelined), Butterfly (recursive doubling)
 *  Gatherv, Scatterv   Linear
 *  Allgatherv          Ring, Dissemination
 *  Alltoallv           Pairwise, Linear (window)
 * Chain = KaryTree with radix 1; Linear (trees) = one level, root to all. */
enum class Algo : uint8_t {
    Auto,
    Linear,
    Chain,
    KaryTree,
    KnomialTree,
    Butterfly,
    Dissemination,
    Ring,
    ReduceBcast,
    ReduceThenScatter,
    Pairwise,
};

struct AlgoChoice {
    Algo algo = Algo::Auto;
    Algo tree = Algo::KnomialTree;  // tree of ReduceBcast / ReduceThenScatter
    int radix = 2;
    uint64_t seg_bytes = 0;  // pipelining segment; 0 = whole messages
    int window = 0;          // Alltoall(v) Linear: pairs in flight (0 = all)
};

enum class Status : uint8_t { Ok, BadArgs, Unsupported };

/* The variant select() would use for this spec: a pure function of the
 * values every rank agrees on (collective, size, count / elem_size or the
 * shared counts[], commutativity), so all ranks choose the same. */
AlgoChoice select(const CollSpec &spec);

/* The pipelining segment select() gives deep trees for a message of n
 * bytes: the power of two nearest sqrt(n x 32 KiB), at least 64 KiB (see
 * cdag_select.cc). */
uint64_t pipeline_segment(uint64_t n);

/* The variant generate() builds for (spec, choice): choice itself, or
 * select()'s answer when choice.algo is Auto.  generate() calls it, and so
 * does coll/cdag's verbose output: one rule, never a copy. */
AlgoChoice effective_choice(const CollSpec &spec, const AlgoChoice &choice);

/* Build spec.rank's schedule into *out (replacing it).  Algo::Auto means
 * select(spec). */
Status generate(const CollSpec &spec, const AlgoChoice &choice, Schedule *out);

const char *coll_name(Coll c);
const char *algo_name(Algo a);

}  // namespace cdag

#endif
