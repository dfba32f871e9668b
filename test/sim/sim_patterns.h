/*
 * Communication patterns of the thesis, as per-rank scripts of steps.  A
 * step is a set of messages to send and a set of messages to wait for; a
 * rank starts its next step when both are done (MPI-like: isend/irecv all,
 * then waitall).  Ranks outside a collective's group get an empty step and
 * fall straight through to the next one (usually a barrier).
 */
#ifndef RDRP_SIM_PATTERNS_H
#define RDRP_SIM_PATTERNS_H

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sim {

struct StepSpec {
    std::vector<std::pair<uint32_t, uint32_t>> sends;  /* (dest rank, packets) */
    std::vector<std::pair<uint32_t, uint32_t>> recvs;  /* (src rank, packets) */
    uint32_t msg_packets = 1;  /* packets per message; every message's last packet has room for credits */
    int32_t sample_tag = -1;   /* >= 0: the world reports this step's end to the experiment */
};

class Pattern {
public:
    virtual ~Pattern() = default;
    virtual std::string name() const = 0;
    virtual uint32_t nsteps() const = 0;
    /* Fill `out` (cleared by the caller) with rank's step k. */
    virtual void step(uint32_t rank, uint32_t k, StepSpec &out) const = 0;
};

/* Alltoall among ranks [0, group) of an n-rank job, `reps` times, each
 * followed (if barrier) by a dissemination barrier over all n ranks, as in
 * the thesis' experiments where the other ranks wait in a barrier.  Rank i
 * sends to i+1, i+2, ... (mod group) so no receiver is a hot spot. */
std::unique_ptr<Pattern> alltoall(uint32_t n, uint32_t group, uint32_t reps, uint32_t msg_packets,
                                  bool barrier);
/* The multi-phase application of §7.3: for each group size, `reps`
 * alltoalls among ranks [0, group) each followed by a barrier of all ranks.
 * Steps ending an alltoall carry sample_tag = its global iteration index. */
std::unique_ptr<Pattern> multi_phase(uint32_t n, const std::vector<uint32_t> &groups, uint32_t reps,
                                     uint32_t msg_packets);
/* Multi-pingpong (IMB): rank i and i + n/2 ping-pong `reps` messages. */
std::unique_ptr<Pattern> multi_pingpong(uint32_t n, uint32_t reps, uint32_t msg_packets);
/* IMB Scatterv with a rotating root: iteration j has root (j / per_root) % n,
 * which sends one message to every other rank; no barrier, so consecutive
 * scatters overlap as in IMB. */
std::unique_ptr<Pattern> scatterv_rotating(uint32_t n, uint32_t iterations, uint32_t per_root,
                                           uint32_t msg_packets);

}  // namespace sim

#endif  // RDRP_SIM_PATTERNS_H
