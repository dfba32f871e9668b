/* How far a peer's cache is from ours: the time one cache line the peer
 * wrote takes to reach this core, measured while the ring runs.
 *
 * Two processes on one node may share a cache (one L3, a core complex) or
 * not (another complex, another socket; on a VM guest, whatever the
 * hypervisor chose, which it changes while the job runs: the 2-vCPU EPYC
 * guest this was built on moves between a line round trip of 80-95 ns and
 * one of 300-350 ns every few tens of seconds).  Which of a ring's store
 * kinds is cheaper depends on it (shm_ring.h, kFarNonTemporalMin), and
 * neither hwloc nor a measurement at start-up can say it for the rest of
 * the job.  So the producer keeps measuring: now and then it times its
 * load of the consumer's head word; a load that finds the head moved
 * found the line in the consumer's cache (the consumer's store took it
 * from ours), which is one line transfer. */
#ifndef RDRP_SHM_LINE_COST_H
#define RDRP_SHM_LINE_COST_H

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace rdrp::shm {

/* The last kWindow samples and their median: a preempted or interrupted
 * load only adds to a sample, and a line that reached us early (a
 * prefetch) only takes from one, so neither end of the window is
 * trusted.  0 until the window has filled once: no opinion yet. */
class LineCost {
public:
    static constexpr unsigned kWindow = 8;

    void add(uint32_t ns)
    {
        samples_[n_++ % kWindow] = ns ? ns : 1;  /* 0 is "not measured" */
        if (n_ < kWindow) return;
        uint32_t s[kWindow];
        std::copy(samples_, samples_ + kWindow, s);
        std::nth_element(s, s + kWindow / 2, s + kWindow);
        median_ = s[kWindow / 2];
    }
    uint32_t ns() const { return median_; }
    uint64_t samples() const { return n_; }

private:
    uint32_t samples_[kWindow] = {};
    uint64_t n_ = 0;
    uint32_t median_ = 0;
};

/* A monotonic clock in ns (the vDSO's clock_gettime: ~24 ns a call on the
 * EPYC guest; taken once per sample, not per message). */
inline uint64_t line_clock_ns()
{
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

}  // namespace rdrp::shm

#endif
