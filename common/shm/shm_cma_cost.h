/*
 * What a single-copy (CMA) transfer costs on this machine, and from that
 * the smallest message to a peer on the node worth moving that way rather
 * than through a ring (two copies through shared memory).  No Open MPI or
 * UCX type.
 *
 * Why it is measured and not fixed: the crossover moves by more than an
 * order of magnitude between machines.  On an Intel Xeon KVM guest
 * (kernel 6.18) a CMA copy of 4 KiB costs about 0.45 us and a ring copy
 * crosses cores twice, so from 8 KiB a single copy wins (osu_latency,
 * pml/rdrp: 8 KiB 2.14 us by the ring, 1.29 by CMA; 64 KiB 10.8 against
 * 3.9).  On the AMD EPYC KVM guest this project was first tuned on, Open
 * MPI's own single copy cost about 3 us more than its copy-in path at
 * 4 KiB (ob1/vader 3.86 against 0.83 us at 2 KiB), and the ring won at
 * every size up to 128 KiB.
 */
#ifndef RDRP_SHM_CMA_COST_H
#define RDRP_SHM_CMA_COST_H

#include <cstddef>

namespace rdrp::shm {

/* Nanoseconds of the fastest of reps process_vm_readv calls copying bytes
 * within this process (after two untimed calls that fault the buffers
 * in); negative (-errno) when CMA is not permitted here. */
double cma_self_copy_ns(size_t bytes, int reps);

/* The start-up probe: the fastest 4 KiB self copy over three rounds of 16
 * (cma_self_copy_ns(4096, 16) three times; a round is cut short by a
 * failure).  One round at MPI_Init read over 1 us in 7 processes of 12 on the
 * Intel guest (two ranks, each probing while the other and the launch
 * threads ran), where the copy costs 0.7 us alone. */
double cma_probe_4k_ns();

/* The smallest message worth a single copy, from what a 4 KiB CMA copy
 * costs (cma_probe_4k_ns()): kCheapCmaMin when it is cheap, else 0 (none:
 * the ring up to its eager limit).  Where it is cheap: inside an MPI
 * process on the Intel guest the probe reads 0.7-1.9 us (more than the
 * 0.7 us of a bare process), and single copy still wins there from 8 KiB
 * (osu_latency over pml/rdrp, best of 5: 8 KiB 1.81 against the ring's
 * 2.61 us, 16 KiB 2.29 / 4.05, 64 KiB 4.94 / 11.28); at 1 us the probe
 * turned it off in over half of the runs. */
constexpr double kCheapCmaNs = 2500.0;
constexpr size_t kCheapCmaMin = 8192;
/* ... for a ring whose payloads of 8 KiB are written with non-temporal
 * stores where ordinary ones cost more (pml/rdrp; shm_ring.h
 * kNonTemporalAlwaysMin and kNearNonTemporalMin say when):
 * such a ring message beats the single copy at 8 KiB in both host modes
 * of the EPYC guest (osu_latency over pml/rdrp, ring / single copy: fast
 * mode 1.49-1.51 / 2.41 us, slow mode 1.77-1.79 / 2.85-3.07), so single
 * copy starts at 16 KiB there.  (At 16 KiB the ring won ping-pongs too,
 * 2.23-2.27 / 3.09-3.17 and 2.42-2.74 / 3.49-3.60; streams through the
 * ring win to 64 KiB: pml_rdrp_request.h kRingStreamBelow.)  Not measured on
 * the Intel guest, where the ordinary ring lost to the single copy from
 * 8 KiB (above). */
constexpr size_t kCheapCmaMinNonTemporalRing = 16384;
/* ... for latency-bound messages through a ring whose store kind follows
 * the measured distance of the consumer's cache (non_temporal_for in
 * shm_ring.h): coll/cdag's schedule steps (pml/rdrp's ping-pong answers
 * follow the same bound, pml_rdrp_request.h kRingAnswerBelow).  OSU over
 * pml/rdrp on the EPYC guest, fast mode, coll/cdag single copy from 8 KiB
 * / from 64 KiB (coll/tuned; with pml/rdrp's answers through its ring
 * below 64 KiB then): bcast 8 KiB 2.50-2.61 / 0.76-0.81 (0.81-0.85)
 * us, 16 KiB 3.14-3.28 / 1.90-1.91 (1.78-1.84), 32 KiB 4.40-4.65 /
 * 2.83-2.87 (2.75-2.86); reduce 16 KiB 3.32-3.35 / 1.84-1.93; allreduce
 * 16 KiB 3.57-3.58 / 2.76-2.77 (3.08-3.12), 32 KiB 5.06-5.11 / 5.69-5.81
 * (5.76-5.78), where the ring lost: both directions at once, as in
 * pml/rdrp's exchanges from 32 KiB (pml_rdrp_request.h kRingAnswerBelow),
 * so the ring stops below 32 KiB here too; 64 KiB alike. */
constexpr size_t kCheapCmaMinMeasuredRing = 32768;
inline size_t single_copy_min_for(double cost_4k_ns, size_t cheap_min = kCheapCmaMin)
{
    return cost_4k_ns >= 0 && cost_4k_ns <= kCheapCmaNs ? cheap_min : 0;
}

}  // namespace rdrp::shm

#endif
