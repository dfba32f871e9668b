/*
 * In-memory transport with randomised completion order (see cdag_memnet.h).
 */
#include "cdag_memnet.h"

#include <cstring>

namespace cdag {

class MemNet::Port : public Transport {
public:
    Port(MemNet *net, int rank) : net_(net), rank_(rank) {}
    int post_send(Executor &ex, VertexId v, int peer, const MsgId &id, const void *buf, uint64_t len) override {
        return net_->post_send(rank_, ex, v, peer, id, buf, len);
    }
    int post_recv(Executor &ex, VertexId v, int peer, const MsgId &id, void *buf, uint64_t len) override {
        return net_->post_recv(rank_, ex, v, peer, id, buf, len);
    }

private:
    MemNet *net_;
    int rank_;
};

MemNet::MemNet(int nranks, uint64_t seed, double eager_prob) : rng_(seed), eager_prob_(eager_prob) {
    for (int r = 0; r < nranks; ++r) ports_.emplace_back(new Port(this, r));
}

MemNet::~MemNet() = default;

Transport &MemNet::port(int rank) { return *ports_.at(rank); }

static std::string key_str(int src, int dst, const MsgId &id) {
    return std::to_string(src) + "->" + std::to_string(dst) + " sched " + std::to_string(id.sched) + " seq " +
           std::to_string(id.seq) + " tag " + std::to_string(id.tag);
}

int MemNet::post_send(int src, Executor &ex, VertexId v, int peer, const MsgId &id, const void *buf,
                      uint64_t len) {
    Key k{src, peer, id};
    if (sends_.count(k)) note("two outstanding sends " + key_str(src, peer, id));
    PendingSend s{&ex, v, static_cast<const char *>(buf), len, false, {}};
    if (std::bernoulli_distribution(eager_prob_)(rng_)) {
        s.eager = true;
        if (len) s.shadow.assign(s.buf, s.buf + len);
        events_.push_back(Event{false, &ex, v, {}, {}});
    }
    auto r = recvs_.find(k);
    if (r != recvs_.end()) {
        PendingRecv rv = r->second;
        recvs_.erase(r);
        matched(std::move(s), std::move(rv), k);
    } else {
        sends_[k] = std::move(s);
    }
    return 0;
}

int MemNet::post_recv(int dst, Executor &ex, VertexId v, int peer, const MsgId &id, void *buf, uint64_t len) {
    Key k{peer, dst, id};
    if (recvs_.count(k)) note("two outstanding recvs " + key_str(peer, dst, id));
    PendingRecv rv{&ex, v, static_cast<char *>(buf), len};
    auto s = sends_.find(k);
    if (s != sends_.end()) {
        PendingSend sd = std::move(s->second);
        sends_.erase(s);
        matched(std::move(sd), std::move(rv), k);
    } else {
        recvs_[k] = rv;
    }
    return 0;
}

void MemNet::matched(PendingSend &&s, PendingRecv &&r, const Key &k) {
    if (s.len != r.len) note("length mismatch " + key_str(k.src, k.dst, k.id));
    ++messages_;
    events_.push_back(Event{true, nullptr, 0, std::move(s), r});
}

bool MemNet::step() {
    if (events_.empty()) return false;
    size_t i = std::uniform_int_distribution<size_t>(0, events_.size() - 1)(rng_);
    Event e = std::move(events_[i]);
    events_[i] = std::move(events_.back());
    events_.pop_back();
    if (!e.transfer) {
        e.ex->complete(e.v);
        return true;
    }
    const uint64_t n = std::min(e.send.len, e.recv.len);
    if (n) std::memcpy(e.recv.buf, e.send.eager ? e.send.shadow.data() : e.send.buf, n);
    events_.push_back(Event{false, e.recv.ex, e.recv.v, {}, {}});
    if (!e.send.eager) events_.push_back(Event{false, e.send.ex, e.send.v, {}, {}});
    return true;
}

uint64_t MemNet::run(const std::function<void()> &after_each) {
    uint64_t n = 0;
    while (step()) {
        ++n;
        if (after_each) after_each();
    }
    return n;
}

}  // namespace cdag
