/*
 * MemNet: an in-memory network of N ranks implementing cdag::Transport,
 * for unit tests and simulations (not part of the coll component).
 *
 * Matching is exact on (source, destination, MsgId).  Everything that can
 * happen "later" is an event in one pool, and step() delivers a randomly
 * chosen event (seeded, so a run is reproducible):
 *   transfer  - a matched pair's data is copied; then the completions of
 *               the recv and (unless already done) the send become events;
 *   complete  - Executor::complete() of one send or recv.
 * A send is eager with probability eager_prob: its bytes are copied to a
 * shadow buffer when posted and its completion is an event at once, as
 * with a buffered eager protocol; otherwise it completes only after its
 * data has been transferred, as with rendezvous.
 *
 * Protocol violations (two outstanding sends or recvs with the same
 * identity, length mismatch) are recorded in error(); after a run,
 * outstanding() > 0 means something never matched.
 */
#ifndef CDAG_MEMNET_H
#define CDAG_MEMNET_H

#include "cdag_exec.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace cdag {

class MemNet {
public:
    MemNet(int nranks, uint64_t seed, double eager_prob = 0.5);
    ~MemNet();

    Transport &port(int rank);

    /* Deliver one random pending event; false when there is none. */
    bool step();
    /* step() until no event is left; after_each runs after every event
     * (e.g. to restart finished persistent executors).  Returns the number
     * of events delivered. */
    uint64_t run(const std::function<void()> &after_each = nullptr);

    size_t outstanding() const { return sends_.size() + recvs_.size(); }
    const std::string &error() const { return error_; }
    uint64_t messages() const { return messages_; }

private:
    class Port;
    struct Key {
        int src, dst;
        MsgId id;
        bool operator<(const Key &o) const {
            return std::tie(src, dst, id.sched, id.seq, id.tag) <
                   std::tie(o.src, o.dst, o.id.sched, o.id.seq, o.id.tag);
        }
    };
    struct PendingSend {
        Executor *ex;
        VertexId v;
        const char *buf;
        uint64_t len;
        bool eager;
        std::vector<char> shadow;
    };
    struct PendingRecv {
        Executor *ex;
        VertexId v;
        char *buf;
        uint64_t len;
    };
    struct Event {
        bool transfer;
        Executor *ex;  // complete: who to tell
        VertexId v;
        PendingSend send;  // transfer: the matched pair
        PendingRecv recv;
    };

    int post_send(int src, Executor &ex, VertexId v, int peer, const MsgId &id, const void *buf, uint64_t len);
    int post_recv(int dst, Executor &ex, VertexId v, int peer, const MsgId &id, void *buf, uint64_t len);
    void matched(PendingSend &&s, PendingRecv &&r, const Key &k);
    void note(const std::string &e) {
        if (error_.empty()) error_ = e;
    }

    std::vector<std::unique_ptr<Port>> ports_;
    std::mt19937_64 rng_;
    double eager_prob_;
    std::map<Key, PendingSend> sends_;
    std::map<Key, PendingRecv> recvs_;
    std::vector<Event> events_;
    std::string error_;
    uint64_t messages_ = 0;
};

}  // namespace cdag

#endif
