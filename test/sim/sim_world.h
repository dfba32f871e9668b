/*
 * Deterministic discrete-event simulator of many MPI-like ranks exchanging
 * small packets through one credit engine each (rdrp::credit::CreditEndpoint,
 * the very class the BTL uses).
 *
 * Model
 *  - Virtual clock in nanoseconds.  Every rank is one CPU doing one action
 *    at a time: transmit a control packet (priority), take one packet out of
 *    its mailbox, or inject one data packet; alternating receive and send
 *    when both are possible.  Costs: send_ns per injected packet, recv_ns
 *    per retrieved packet.  Sends leave in posting order (see in_order).
 *  - Network: every packet arrives latency_ns after its injection ends;
 *    constant latency keeps each (src, dst) pair in order.  No contention.
 *  - Control packets the engine emits go to the rank's outbox at once and
 *    leave one per CPU action, before any further data packet.
 *  - Mailbox: arrived packets queue in arrival order; a data packet's slot is
 *    freed as soon as it is retrieved (the upper layer copies it out).
 *  - Protocol kReference: unlimited mailbox, no flow control (the thesis'
 *    reference runs); kStatic / kDynamic: the engine in that mode.
 *
 * Independent oracle (never trusts the engine): mailbox occupancy <= slots
 * on every arrival; <= credit_slots unprocessed credit packets per pair on
 * every credit packet sent; every `check_every` events and at the end, for
 * every pair, receiver's outstanding credits == sender's credits + its
 * credit-consuming packets in flight or queued + credits travelling back;
 * no deadlock (every rank finishes its script).
 */
#ifndef RDRP_SIM_WORLD_H
#define RDRP_SIM_WORLD_H

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <vector>

#include "common/credit/credit_engine.h"
#include "sim_patterns.h"

namespace sim {

enum class Protocol { kReference, kStatic, kDynamic };
const char *protocol_name(Protocol p);

struct Timing {
    uint64_t latency_ns = 1000;
    uint64_t send_ns = 60;
    uint64_t recv_ns = 60;
};

struct RunConfig {
    Protocol protocol = Protocol::kDynamic;
    uint32_t nranks = 0;
    uint32_t slots_per_peer = 16;  /* mailbox = slots_per_peer * (nranks - 1) */
    uint32_t credit_slots = 2;
    bool piggyback = true;
    /* true: a rank's packets leave in posting order, so a message without
     * credits holds back the messages behind it (the thesis' VELO library;
     * this is what makes Fig. 5.5 drop once a whole message fits the quota).
     * false: blocked destinations are skipped round-robin. */
    bool in_order = true;
    Timing timing;
    uint64_t check_every = 0;      /* full conservation check every N events (0: end only) */
};

struct RunResult {
    bool completed = false;
    uint64_t end_ns = 0;          /* last rank done */
    uint64_t data_packets = 0;
    uint64_t credit_packets = 0;
    uint64_t requests = 0, responses = 0;
    uint64_t piggybacks = 0;
    uint64_t steals = 0;
    uint64_t delayed = 0;         /* times a destination with data waiting had no credit */
    uint64_t stall_ns = 0;        /* summed over ranks: idle with data blocked on credits */
    uint64_t max_mailbox = 0;
    uint64_t events = 0;
    std::vector<std::string> violations;
    uint64_t control_packets() const { return credit_packets + requests + responses; }
};

class World {
public:
    /* Called when `rank` finishes a step carrying sample_tag >= 0. */
    using Sampler = std::function<void(const World &, uint32_t rank, int32_t tag, uint64_t now)>;

    World(const RunConfig &cfg, const Pattern &pattern);
    ~World();
    void set_sampler(Sampler s) { sampler_ = std::move(s); }
    RunResult run();

    uint32_t nranks() const { return n_; }
    /* Credits `rank` holds towards `dest` (sender side; 0 for reference). */
    uint32_t credits(uint32_t rank, uint32_t dest) const;
    /* Credits receiver `rank` counts as outstanding at `src` (what it has
     * granted); 0 for reference. */
    uint32_t granted(uint32_t rank, uint32_t src) const;
    /* The engine of `rank` (null for reference), for samplers. */
    const rdrp::credit::CreditEndpoint *endpoint(uint32_t rank) const;

private:
    struct Packet {
        uint32_t src, dst;
        rdrp::credit::PacketKind kind;
        uint32_t credits;
    };
    struct Event {
        uint64_t time, seq;
        uint32_t rank;
        bool arrival;
        Packet pkt;
        bool operator>(const Event &o) const { return time != o.time ? time > o.time : seq > o.seq; }
    };
    struct Rank;

    uint32_t peer(uint32_t me, uint32_t other) const { return other < me ? other : other - 1; }
    uint32_t rank_of(uint32_t me, uint32_t p) const { return p < me ? p : p + 1; }
    size_t idx(uint32_t a, uint32_t b) const { return size_t(a) * n_ + b; }

    void schedule_cpu(uint32_t r, uint64_t at);
    void on_arrival(const Packet &p);
    void on_cpu(uint32_t r);
    uint64_t act(uint32_t r);
    void account(const Packet &p);
    void transmit(const Packet &p, uint64_t leave_at);
    void collect_control(uint32_t r);
    void retrieve(uint32_t r);
    void send_one(uint32_t r);
    void prune_ready(uint32_t r);
    void unblock(uint32_t r, uint32_t dest);
    void load_step(uint32_t r);
    void advance(uint32_t r);
    void check_conservation(const char *when);
    void violation(const std::string &msg);

    RunConfig cfg_;
    const Pattern &pattern_;
    uint32_t n_;
    rdrp::credit::Config engine_cfg_;
    std::vector<Rank> ranks_;
    std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
    uint64_t seq_ = 0, now_ = 0;
    Sampler sampler_;
    RunResult res_;
    /* oracle bookkeeping per ordered pair (from, to) */
    std::vector<uint32_t> consuming_, handed_back_, credits_in_transit_, credit_pkts_;
};

}  // namespace sim

#endif  // RDRP_SIM_WORLD_H
