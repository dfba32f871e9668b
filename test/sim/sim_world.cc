/*
 * Discrete-event simulator (see sim_world.h).
 */
#include "sim_world.h"

#include <algorithm>
#include <stdexcept>

using rdrp::credit::ControlPacket;
using rdrp::credit::CreditEndpoint;
using rdrp::credit::PacketHeader;
using rdrp::credit::PacketKind;

namespace sim {

const char *protocol_name(Protocol p)
{
    switch (p) {
    case Protocol::kReference: return "reference";
    case Protocol::kStatic: return "static";
    case Protocol::kDynamic: return "dynamic";
    }
    return "?";
}

namespace {
enum : uint8_t { kIdle = 0, kReady = 1, kBlocked = 2 };
constexpr uint64_t kNever = UINT64_MAX;
constexpr size_t kMaxViolations = 20;
}  // namespace

struct World::Rank {
    std::unique_ptr<CreditEndpoint> ep;  /* null for the reference protocol */
    std::deque<Packet> mailbox;
    std::deque<Packet> outbox;           /* control packets emitted, not yet on the wire */
    bool cpu_scheduled = false;
    bool prefer_recv = false;
    /* application script */
    uint32_t step = 0;
    bool done = false;
    StepSpec spec;
    std::vector<uint32_t> left;     /* packets still to send, per destination */
    std::vector<uint8_t> state;     /* kIdle / kReady / kBlocked per destination */
    std::deque<uint32_t> ready;     /* round robin: destinations with data and credit */
    std::deque<std::pair<uint32_t, uint32_t>> fifo;  /* in order: (dest, packets) messages */
    bool head_blocked = false;      /* in order: the head message waits for credits */
    uint64_t sends_left = 0;
    std::vector<uint32_t> delivered, needed;  /* cumulative packets per source */
    uint64_t missing = 0;           /* packets the current step still waits for */
    /* flow-control stall accounting */
    uint64_t stall_since = kNever;
    uint64_t stall_ns = 0;
};

World::World(const RunConfig &cfg, const Pattern &pattern)
    : cfg_(cfg), pattern_(pattern), n_(cfg.nranks), ranks_(cfg.nranks)
{
    if (n_ < 2)
        throw std::invalid_argument("simulator: need at least 2 ranks");
    engine_cfg_.mode = cfg.protocol == Protocol::kStatic ? rdrp::credit::Mode::kStatic
                                                         : rdrp::credit::Mode::kDynamic;
    engine_cfg_.npeers = n_ - 1;
    engine_cfg_.slots = cfg.slots_per_peer * (n_ - 1);
    engine_cfg_.credit_slots = cfg.credit_slots;
    engine_cfg_.static_slots = cfg.credit_slots;
    engine_cfg_.piggyback = cfg.piggyback;
    for (Rank &rk : ranks_) {
        if (cfg.protocol != Protocol::kReference)
            rk.ep = std::make_unique<CreditEndpoint>(engine_cfg_);  // throws on a bad config
        rk.left.assign(n_, 0);
        rk.state.assign(n_, kIdle);
        rk.delivered.assign(n_, 0);
        rk.needed.assign(n_, 0);
    }
    const size_t nn = size_t(n_) * n_;
    consuming_.assign(nn, 0);
    handed_back_.assign(nn, 0);
    credits_in_transit_.assign(nn, 0);
    credit_pkts_.assign(nn, 0);
}

World::~World() = default;

uint32_t World::credits(uint32_t rank, uint32_t dest) const
{
    const Rank &rk = ranks_[rank];
    return rk.ep && rank != dest ? rk.ep->credits(peer(rank, dest)) : 0;
}

uint32_t World::granted(uint32_t rank, uint32_t src) const
{
    const Rank &rk = ranks_[rank];
    return rk.ep && rank != src ? rk.ep->receiver().outstanding(peer(rank, src)) : 0;
}

const CreditEndpoint *World::endpoint(uint32_t rank) const { return ranks_[rank].ep.get(); }

void World::violation(const std::string &msg)
{
    if (res_.violations.size() < kMaxViolations)
        res_.violations.push_back("t=" + std::to_string(now_) + "ns: " + msg);
}

/* ------------------------------------------------------------- the loop */

RunResult World::run()
{
    for (uint32_t r = 0; r < n_; ++r) {
        load_step(r);
        advance(r);
        schedule_cpu(r, 0);
    }
    while (!events_.empty()) {
        const Event ev = events_.top();
        events_.pop();
        now_ = ev.time;
        ++res_.events;
        if (ev.arrival)
            on_arrival(ev.pkt);
        else
            on_cpu(ev.rank);
        if (cfg_.check_every != 0 && res_.events % cfg_.check_every == 0)
            check_conservation("periodic");
    }
    res_.completed = true;
    for (uint32_t r = 0; r < n_; ++r) {
        const Rank &rk = ranks_[r];
        if (!rk.done) {
            res_.completed = false;
            violation("deadlock: rank " + std::to_string(r) + " stuck in step " + std::to_string(rk.step) +
                      " with " + std::to_string(rk.sends_left) + " packets to send and " +
                      std::to_string(rk.missing) + " to receive");
        }
        res_.stall_ns += rk.stall_ns;
        if (rk.ep) {
            const rdrp::credit::Stats &s = rk.ep->stats();
            res_.credit_packets += s.credit_packets;
            res_.requests += s.requests_sent;
            res_.responses += s.responses_sent;
            res_.piggybacks += s.piggybacks;
            res_.steals += s.steals;
            if (s.protocol_errors != 0)
                violation("rank " + std::to_string(r) + ": engine saw " + std::to_string(s.protocol_errors) +
                          " protocol errors");
        }
    }
    check_conservation("end");
    return res_;
}

void World::schedule_cpu(uint32_t r, uint64_t at)
{
    Rank &rk = ranks_[r];
    if (rk.cpu_scheduled)
        return;
    rk.cpu_scheduled = true;
    Event ev{};
    ev.time = at;
    ev.seq = seq_++;
    ev.rank = r;
    ev.arrival = false;
    events_.push(ev);
}

/* Oracle bookkeeping, done when the engine hands a packet over (the packet
 * counts as in flight from then on). */
void World::account(const Packet &p)
{
    switch (p.kind) {
    case PacketKind::kData:
        ++consuming_[idx(p.src, p.dst)];
        credits_in_transit_[idx(p.src, p.dst)] += p.credits;
        break;
    case PacketKind::kCredit:
        credits_in_transit_[idx(p.src, p.dst)] += p.credits;
        if (++credit_pkts_[idx(p.src, p.dst)] > cfg_.credit_slots)
            violation("credit region of rank " + std::to_string(p.dst) + " would overflow: " +
                      std::to_string(credit_pkts_[idx(p.src, p.dst)]) + " credit packets from " +
                      std::to_string(p.src));
        break;
    case PacketKind::kReturnRequest:
        ++consuming_[idx(p.src, p.dst)];
        break;
    case PacketKind::kReturnResponse:
        ++consuming_[idx(p.src, p.dst)];
        handed_back_[idx(p.src, p.dst)] += p.credits;
        break;
    }
}

void World::transmit(const Packet &p, uint64_t leave_at)
{
    Event ev{};
    ev.time = leave_at + cfg_.timing.latency_ns;
    ev.seq = seq_++;
    ev.rank = p.dst;
    ev.arrival = true;
    ev.pkt = p;
    events_.push(ev);
}

/* Move what the engine wants sent into the outbox, in its order. */
void World::collect_control(uint32_t r)
{
    Rank &rk = ranks_[r];
    ControlPacket c;
    while (rk.ep->pop_control(&c)) {
        const Packet p{r, rank_of(r, c.peer), c.kind, c.credits};
        account(p);
        rk.outbox.push_back(p);
    }
}

void World::on_arrival(const Packet &p)
{
    Rank &rk = ranks_[p.dst];
    rk.mailbox.push_back(p);
    res_.max_mailbox = std::max<uint64_t>(res_.max_mailbox, rk.mailbox.size());
    if (rk.ep && rk.mailbox.size() > engine_cfg_.slots)
        violation("mailbox of rank " + std::to_string(p.dst) + " overflows: " +
                  std::to_string(rk.mailbox.size()) + " > " + std::to_string(engine_cfg_.slots));
    schedule_cpu(p.dst, now_);
}

void World::on_cpu(uint32_t r)
{
    Rank &rk = ranks_[r];
    rk.cpu_scheduled = false;
    if (rk.stall_since != kNever) {
        rk.stall_ns += now_ - rk.stall_since;
        rk.stall_since = kNever;
    }
    const uint64_t cost = act(r);
    if (cost != 0) {
        schedule_cpu(r, now_ + cost);
    } else if (rk.sends_left != 0) {
        rk.stall_since = now_;  // idle although it has data: blocked on credits
    }
}

/* One CPU action; returns its cost (0: nothing to do, the CPU sleeps until
 * the next arrival). */
uint64_t World::act(uint32_t r)
{
    Rank &rk = ranks_[r];
    if (!rk.outbox.empty()) {  // control packets first (thesis §6.1)
        transmit(rk.outbox.front(), now_ + cfg_.timing.send_ns);
        rk.outbox.pop_front();
        return cfg_.timing.send_ns;
    }
    prune_ready(r);
    const bool can_recv = !rk.mailbox.empty();
    const bool can_send = cfg_.in_order ? !rk.fifo.empty() && !rk.head_blocked : !rk.ready.empty();
    if (can_recv && (!can_send || rk.prefer_recv)) {
        retrieve(r);
        rk.prefer_recv = false;
        advance(r);
        return cfg_.timing.recv_ns;
    }
    if (can_send) {
        send_one(r);
        rk.prefer_recv = true;
        advance(r);
        return cfg_.timing.send_ns;
    }
    return 0;
}

/* ------------------------------------------------------- packet handling */

void World::retrieve(uint32_t r)
{
    Rank &rk = ranks_[r];
    const Packet p = rk.mailbox.front();
    rk.mailbox.pop_front();
    const size_t from = idx(p.src, r);
    switch (p.kind) {
    case PacketKind::kData: credits_in_transit_[from] -= p.credits; break;
    case PacketKind::kCredit:
        credits_in_transit_[from] -= p.credits;
        --credit_pkts_[from];
        break;
    case PacketKind::kReturnRequest: --consuming_[from]; break;
    case PacketKind::kReturnResponse:
        --consuming_[from];
        handed_back_[from] -= p.credits;
        break;
    }
    if (p.kind == PacketKind::kData) {
        --consuming_[from];
        if (++rk.delivered[p.src] <= rk.needed[p.src])
            --rk.missing;
    }
    if (!rk.ep)
        return;
    const int32_t slot = rk.ep->on_packet(peer(r, p.src), PacketHeader{p.kind, p.credits});
    if (p.kind == PacketKind::kData) {
        if (slot < 0)
            violation("rank " + std::to_string(r) + " refused a data packet from " + std::to_string(p.src));
        else
            rk.ep->on_slot_freed(slot);  // copied out at once
    }
    collect_control(r);
    unblock(r, p.src);
}

void World::unblock(uint32_t r, uint32_t dest)
{
    Rank &rk = ranks_[r];
    if (cfg_.in_order)
        return;  // prune_ready() re-examines the head before every action
    if (rk.state[dest] == kBlocked && rk.ep->can_send(peer(r, dest))) {
        rk.state[dest] = kReady;
        rk.ready.push_back(dest);
    }
}

void World::prune_ready(uint32_t r)
{
    Rank &rk = ranks_[r];
    if (!rk.ep)
        return;
    if (cfg_.in_order) {
        const bool blocked = !rk.fifo.empty() && !rk.ep->can_send(peer(r, rk.fifo.front().first));
        if (blocked && !rk.head_blocked)
            ++res_.delayed;
        rk.head_blocked = blocked;
        return;
    }
    while (!rk.ready.empty() && !rk.ep->can_send(peer(r, rk.ready.front()))) {
        rk.state[rk.ready.front()] = kBlocked;
        rk.ready.pop_front();
        ++res_.delayed;
    }
}

void World::send_one(uint32_t r)
{
    Rank &rk = ranks_[r];
    if (cfg_.in_order) {
        auto &[d, left] = rk.fifo.front();
        const bool last_of_message = left == 1;
        const uint32_t pb = rk.ep ? rk.ep->on_send(peer(r, d), last_of_message) : 0;
        const Packet data{r, d, PacketKind::kData, pb};
        account(data);
        transmit(data, now_ + cfg_.timing.send_ns);
        if (rk.ep)
            collect_control(r);
        ++res_.data_packets;
        --rk.sends_left;
        if (--left == 0)
            rk.fifo.pop_front();
        return;
    }
    const uint32_t d = rk.ready.front();
    uint32_t &left = rk.left[d];
    const bool last_of_message = (left - 1) % rk.spec.msg_packets == 0;
    const uint32_t pb = rk.ep ? rk.ep->on_send(peer(r, d), last_of_message) : 0;
    const Packet data{r, d, PacketKind::kData, pb};
    account(data);
    transmit(data, now_ + cfg_.timing.send_ns);
    if (rk.ep)
        collect_control(r);
    ++res_.data_packets;
    --left;
    --rk.sends_left;
    if (left == 0) {
        rk.ready.pop_front();
        rk.state[d] = kIdle;
    } else if (rk.ep && !rk.ep->can_send(peer(r, d))) {
        rk.ready.pop_front();
        rk.state[d] = kBlocked;
        ++res_.delayed;
    } else if (last_of_message) {  // next destination's turn
        rk.ready.pop_front();
        rk.ready.push_back(d);
    }
}

/* ------------------------------------------------------------ app script */

void World::load_step(uint32_t r)
{
    Rank &rk = ranks_[r];
    rk.spec.sends.clear();
    rk.spec.recvs.clear();
    rk.spec.sample_tag = -1;
    rk.spec.msg_packets = 1;
    pattern_.step(r, rk.step, rk.spec);
    for (const auto &[d, pkts] : rk.spec.sends) {
        rk.sends_left += pkts;
        if (cfg_.in_order) {
            for (uint32_t m = 0; m < pkts; m += rk.spec.msg_packets)
                rk.fifo.emplace_back(d, std::min(rk.spec.msg_packets, pkts - m));
            continue;
        }
        rk.left[d] += pkts;
        if (rk.state[d] == kIdle) {
            if (!rk.ep || rk.ep->can_send(peer(r, d))) {
                rk.state[d] = kReady;
                rk.ready.push_back(d);
            } else {
                rk.state[d] = kBlocked;
                ++res_.delayed;
            }
        }
    }
    for (const auto &[s, pkts] : rk.spec.recvs) {
        const uint32_t before = std::max(rk.delivered[s], rk.needed[s]);
        rk.needed[s] += pkts;
        rk.missing += rk.needed[s] > before ? rk.needed[s] - before : 0;
    }
}

void World::advance(uint32_t r)
{
    Rank &rk = ranks_[r];
    while (!rk.done && rk.sends_left == 0 && rk.missing == 0) {
        if (rk.spec.sample_tag >= 0 && sampler_)
            sampler_(*this, r, rk.spec.sample_tag, now_);
        if (++rk.step == pattern_.nsteps()) {
            rk.done = true;
            res_.end_ns = std::max(res_.end_ns, now_);
            return;
        }
        load_step(r);
    }
}

/* -------------------------------------------------------------- oracle */

void World::check_conservation(const char *when)
{
    if (cfg_.protocol == Protocol::kReference)
        return;
    for (uint32_t r = 0; r < n_; ++r) {
        const CreditEndpoint &ep = *ranks_[r].ep;
        uint64_t granted_sum = 0;
        for (uint32_t s = 0; s < n_; ++s) {
            if (s == r)
                continue;
            const uint64_t model = uint64_t(ranks_[s].ep->credits(peer(s, r))) + consuming_[idx(s, r)] +
                                   handed_back_[idx(s, r)] + credits_in_transit_[idx(r, s)];
            const uint32_t got = ep.receiver().outstanding(peer(r, s));
            if (got != model) {
                violation(std::string(when) + ": receiver " + std::to_string(r) + " counts " + std::to_string(got) +
                          " credits at sender " + std::to_string(s) + ", the network holds " + std::to_string(model));
                return;
            }
            granted_sum += got;
        }
        const uint64_t total = granted_sum + ep.receiver().free_data_slots() + rdrp::credit::credit_region(engine_cfg_);
        if (total != engine_cfg_.slots) {
            violation(std::string(when) + ": rank " + std::to_string(r) + " accounts for " + std::to_string(total) +
                      " slots of " + std::to_string(engine_cfg_.slots));
            return;
        }
    }
}

}  // namespace sim
