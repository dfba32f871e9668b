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

/* The smallest message worth a single copy, from what a 4 KiB CMA copy
 * costs (cma_self_copy_ns(4096, ...)): kCheapCma8k when it is cheap, else
 * 0 (none: the ring up to its eager limit). */
constexpr double kCheapCmaNs = 1000.0;
constexpr size_t kCheapCmaMin = 8192;
inline size_t single_copy_min_for(double cost_4k_ns)
{
    return cost_4k_ns >= 0 && cost_4k_ns <= kCheapCmaNs ? kCheapCmaMin : 0;
}

}  // namespace rdrp::shm

#endif
