/*
 * Communication patterns (see sim_patterns.h).  Steps are generated on
 * demand from (rank, step index), so a script for hundreds of ranks and
 * hundreds of iterations costs no memory.
 */
#include "sim_patterns.h"

namespace sim {

namespace {

uint32_t barrier_rounds(uint32_t n)
{
    uint32_t r = 0;
    while ((1u << r) < n)
        ++r;
    return r;
}

/* Dissemination barrier round `round`: send one packet to rank + 2^round,
 * wait for one from rank - 2^round. */
void barrier_step(uint32_t n, uint32_t rank, uint32_t round, StepSpec &out)
{
    const uint32_t d = 1u << round;
    out.msg_packets = 1;
    out.sends.emplace_back((rank + d) % n, 1);
    out.recvs.emplace_back((rank + n - d % n) % n, 1);
}

void alltoall_step(uint32_t group, uint32_t rank, uint32_t msg_packets, StepSpec &out)
{
    out.msg_packets = msg_packets;
    if (rank >= group)
        return;
    for (uint32_t k = 1; k < group; ++k) {
        out.sends.emplace_back((rank + k) % group, msg_packets);
        out.recvs.emplace_back((rank + group - k) % group, msg_packets);
    }
}

/* Sequence of (alltoall group, then optional barrier) blocks. */
class AlltoallPhases : public Pattern {
public:
    AlltoallPhases(std::string name, uint32_t n, std::vector<uint32_t> groups, uint32_t reps,
                   uint32_t msg_packets, bool barrier)
        : name_(std::move(name)), n_(n), groups_(std::move(groups)), reps_(reps), msg_(msg_packets),
          per_iter_(1 + (barrier ? barrier_rounds(n) : 0))
    {
    }
    std::string name() const override { return name_; }
    uint32_t nsteps() const override { return uint32_t(groups_.size()) * reps_ * per_iter_; }
    void step(uint32_t rank, uint32_t k, StepSpec &out) const override
    {
        const uint32_t iter = k / per_iter_, sub = k % per_iter_;
        if (sub == 0) {
            alltoall_step(groups_[iter / reps_], rank, msg_, out);
        } else {
            barrier_step(n_, rank, sub - 1, out);
        }
        if (sub + 1 == per_iter_)
            out.sample_tag = int32_t(iter);
    }

private:
    std::string name_;
    uint32_t n_;
    std::vector<uint32_t> groups_;
    uint32_t reps_, msg_, per_iter_;
};

class MultiPingpong : public Pattern {
public:
    MultiPingpong(uint32_t n, uint32_t reps, uint32_t msg) : n_(n), reps_(reps), msg_(msg) {}
    std::string name() const override { return "multi-pingpong"; }
    uint32_t nsteps() const override { return 2 * reps_; }
    void step(uint32_t rank, uint32_t k, StepSpec &out) const override
    {
        const uint32_t half = n_ / 2;
        out.msg_packets = msg_;
        if (rank >= 2 * half)
            return;  // odd rank count: the last rank sits out
        const bool pinger = rank < half;
        const uint32_t partner = pinger ? rank + half : rank - half;
        const bool sending = (k % 2 == 0) == pinger;
        if (sending)
            out.sends.emplace_back(partner, msg_);
        else
            out.recvs.emplace_back(partner, msg_);
        if (k % 2 == 1)  // a round trip ends: the first one is the warm-up
            out.sample_tag = int32_t(k / 2);
    }

private:
    uint32_t n_, reps_, msg_;
};

class ScattervRotating : public Pattern {
public:
    ScattervRotating(uint32_t n, uint32_t iterations, uint32_t per_root, uint32_t msg)
        : n_(n), iters_(iterations), per_root_(per_root), msg_(msg)
    {
    }
    std::string name() const override { return "scatterv-rotating-root"; }
    uint32_t nsteps() const override { return iters_; }
    void step(uint32_t rank, uint32_t k, StepSpec &out) const override
    {
        const uint32_t root = (k / per_root_) % n_;
        out.msg_packets = msg_;
        if (rank == root) {
            for (uint32_t i = 1; i < n_; ++i)
                out.sends.emplace_back((root + i) % n_, msg_);
        } else {
            out.recvs.emplace_back(root, msg_);
        }
    }

private:
    uint32_t n_, iters_, per_root_, msg_;
};

}  // namespace

std::unique_ptr<Pattern> alltoall(uint32_t n, uint32_t group, uint32_t reps, uint32_t msg_packets,
                                  bool barrier)
{
    return std::make_unique<AlltoallPhases>("alltoall " + std::to_string(group) + "/" + std::to_string(n), n,
                                            std::vector<uint32_t>{group}, reps, msg_packets, barrier);
}

std::unique_ptr<Pattern> multi_phase(uint32_t n, const std::vector<uint32_t> &groups, uint32_t reps,
                                     uint32_t msg_packets)
{
    return std::make_unique<AlltoallPhases>("multi-phase alltoall", n, groups, reps, msg_packets, true);
}

std::unique_ptr<Pattern> multi_pingpong(uint32_t n, uint32_t reps, uint32_t msg_packets)
{
    return std::make_unique<MultiPingpong>(n, reps, msg_packets);
}

std::unique_ptr<Pattern> scatterv_rotating(uint32_t n, uint32_t iterations, uint32_t per_root,
                                           uint32_t msg_packets)
{
    return std::make_unique<ScattervRotating>(n, iterations, per_root, msg_packets);
}

}  // namespace sim
