/*
 * Executor: runs one compiled schedule (Plan) with triggered-operation
 * semantics (cdag seed, section III/IV).
 *
 * Every vertex has a counter and a threshold (its in-degree).  start()
 * zeroes the counters and fires the vertices whose threshold is 0; each
 * completion increments the counters of the vertex's successors, and a
 * vertex fires the moment its counter reaches its threshold.  Sends and
 * receives are handed to a Transport, which reports their completion back
 * through Executor::complete() - later, or inline from inside post_*().
 * Local reduce / copy / nop vertices run inside the executor and complete
 * at once.  No recursion: completions go through an explicit work stack,
 * so inline-completing transports and long local chains are safe.
 *
 * Message identity: MsgId = (schedule id, sequence number, tag).  The
 * schedule id is chosen by the caller and must be the same on all ranks
 * for one collective instance and differ between instances that can be in
 * flight at the same time (e.g. a per-communicator counter of collective
 * calls, or one id per persistent request).  The sequence number counts
 * start() calls of this executor, so consecutive runs of a persistent
 * collective never match each other's messages even when ranks drift a
 * whole run apart.  The transport maps (peer, MsgId) onto its own tag
 * space (a UCX tag, Portals match bits, ...) and must match exactly.
 *
 * An executor is reusable: start() again once done().  It is cheap to
 * create from a shared Plan (counter/state arrays plus the scratch area).
 * Not thread-safe: the caller serialises start(), complete() and fail().
 */
#ifndef CDAG_EXEC_H
#define CDAG_EXEC_H

#include "cdag_plan.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace cdag {

struct MsgId {
    uint32_t sched;  // schedule (collective instance) id
    uint32_t seq;    // execution number of that schedule
    uint32_t tag;    // message tag inside the schedule
};
inline bool operator==(const MsgId &a, const MsgId &b) {
    return a.sched == b.sched && a.seq == b.seq && a.tag == b.tag;
}

class Executor;

/* The point-to-point layer underneath.  post_* start an operation and
 * return 0, or a nonzero error code (the executor then fails the run).
 * Completion is reported with ex.complete(vertex) (or ex.fail(vertex,
 * err)), at any later time or inline.  A send completes when its buffer
 * may be reused; a recv when buf holds the message.  len may be 0, and buf
 * is then possibly null. */
class Transport {
public:
    virtual ~Transport() = default;
    virtual int post_send(Executor &ex, VertexId v, int peer, const MsgId &id, const void *buf, uint64_t len) = 0;
    virtual int post_recv(Executor &ex, VertexId v, int peer, const MsgId &id, void *buf, uint64_t len) = 0;
};

/* A reduction: inout[i] = in[i] (op) inout[i] for i < count (the MPI_Op
 * calling convention; `in` is the left operand).  The element size is
 * already folded into the schedule's byte ranges. */
struct ReduceFn {
    void (*fn)(void *ctx, const void *in, void *inout, uint64_t count) = nullptr;
    void *ctx = nullptr;
};

class Executor {
public:
    enum : int { kErrBusy = -1, kErrNoReduce = -2, kErrBadCompletion = -3 };

    /* scratch: caller-owned memory of at least plan->scratch_bytes bytes,
     * 64-byte aligned, that outlives the executor (e.g. from a pool), or
     * null to have the executor allocate its own. */
    Executor(std::shared_ptr<const Plan> plan, Transport &transport, uint32_t sched_id, ReduceFn reduce = {},
             void *scratch = nullptr);
    Executor(const Executor &) = delete;
    Executor &operator=(const Executor &) = delete;

    /* Begin a run over the caller's buffers (sendbuf is never written).
     * Returns 0, kErrBusy if a run is still going, or the first error of
     * the run (then error() tells the same).  An empty schedule is done()
     * immediately. */
    int start(const void *sendbuf, void *recvbuf);

    /* start(), but the run's initial local operations (copies, reductions
     * with no incoming edge: the own block of alltoall / allgather) are
     * only queued, after every initial send and receive is posted; the
     * caller runs them later with run_deferred() - from another thread,
     * under the same serialisation as complete().  An engine thread uses
     * this so that the application's start call costs only the posts and
     * the copy happens while the application is away. */
    int start_deferred(const void *sendbuf, void *recvbuf);

    /* Run the local operations start_deferred() queued (none: no-op).
     * Returns how many ran. */
    size_t run_deferred();
    bool has_deferred() const { return !deferred_.empty(); }

    /* Reuse for another collective instance of the same plan (a cached
     * executor): a new schedule id and reduction context, and the run
     * count back to zero, so its messages carry the ids a fresh executor
     * would (peers may run fresh ones).  Only while !running. */
    void rebind(uint32_t sched_id, ReduceFn reduce) {
        sched_ = sched_id;
        reduce_ = reduce;
        seq_ = runs_ = 0;
    }

    /* Transport callbacks. */
    void complete(VertexId v);
    void fail(VertexId v, int err);

    bool done() const { return running_ == false; }
    int error() const { return error_; }
    uint32_t sched_id() const { return sched_; }
    uint32_t seq() const { return seq_; }        // sequence number of the current (or last) run
    uint32_t runs() const { return runs_; }      // start() calls so far
    const Plan &plan() const { return *plan_; }

    /* Test / tracing hook: called once per vertex fired, before its
     * operation starts. */
    void set_fire_hook(void (*hook)(void *ctx, const Executor &ex, VertexId v), void *ctx) {
        fire_hook_ = hook;
        fire_ctx_ = ctx;
    }

private:
    enum : uint8_t { kWaiting = 0, kInFlight = 1, kDone = 2 };
    int start_run(const void *sendbuf, void *recvbuf, bool defer_local);
    void fire(VertexId v);
    void drain();
    void end_if_idle_after_error();
    char *addr(const Buf &b) const;

    std::shared_ptr<const Plan> plan_;
    Transport &tr_;
    ReduceFn reduce_;
    uint32_t sched_;
    uint32_t seq_ = 0, runs_ = 0;
    std::vector<uint32_t> counter_;
    std::vector<uint8_t> state_;
    std::vector<VertexId> finished_;  // completed, successors not yet bumped
    std::vector<VertexId> deferred_;  // initial local vertices queued by start_deferred (in flight)
    std::unique_ptr<char[]> scratch_mem_;
    char *base_[kNumSlots] = {nullptr, nullptr, nullptr, nullptr};
    size_t remaining_ = 0;
    bool running_ = false, draining_ = false;
    int error_ = 0;
    void (*fire_hook_)(void *, const Executor &, VertexId) = nullptr;
    void *fire_ctx_ = nullptr;
};

}  // namespace cdag

#endif
