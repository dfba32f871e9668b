/*
 * Triggered-operation executor (see cdag_exec.h).
 */
#include "cdag_exec.h"

#include <cstring>

namespace cdag {

Executor::Executor(std::shared_ptr<const Plan> plan, Transport &transport, uint32_t sched_id, ReduceFn reduce,
                   void *scratch)
    : plan_(std::move(plan)), tr_(transport), reduce_(reduce), sched_(sched_id) {
    const size_t n = plan_->num_vertices();
    counter_.assign(n, 0);
    state_.assign(n, kDone);
    finished_.reserve(n);
    deferred_.reserve(plan_->initial.size());  // no allocation in later runs
    if (scratch) {
        base_[static_cast<int>(Slot::Scratch)] = static_cast<char *>(scratch);
    } else if (plan_->scratch_bytes) {
        /* +63 so the scratch base can be 64-byte aligned: the schedule
         * aligns every scratch range relative to it. */
        scratch_mem_.reset(new char[plan_->scratch_bytes + 63]);
        uintptr_t a = reinterpret_cast<uintptr_t>(scratch_mem_.get());
        base_[static_cast<int>(Slot::Scratch)] = reinterpret_cast<char *>((a + 63) & ~uintptr_t(63));
    }
}

char *Executor::addr(const Buf &b) const {
    char *base = base_[static_cast<int>(b.slot)];
    return base ? base + b.off : nullptr;
}

int Executor::start(const void *sendbuf, void *recvbuf) { return start_run(sendbuf, recvbuf, false); }

int Executor::start_deferred(const void *sendbuf, void *recvbuf) { return start_run(sendbuf, recvbuf, true); }

static bool is_local(OpKind k) { return k == OpKind::Copy || k == OpKind::Reduce; }

int Executor::start_run(const void *sendbuf, void *recvbuf, bool defer_local) {
    if (running_) return kErrBusy;
    const Plan &p = *plan_;
    base_[static_cast<int>(Slot::Send)] = const_cast<char *>(static_cast<const char *>(sendbuf));
    base_[static_cast<int>(Slot::Recv)] = static_cast<char *>(recvbuf);
    seq_ = runs_++;
    error_ = 0;
    finished_.clear();
    deferred_.clear();
    std::fill(counter_.begin(), counter_.end(), 0);
    std::fill(state_.begin(), state_.end(), kWaiting);
    remaining_ = p.num_vertices();
    running_ = remaining_ != 0;
    /* Fire the initial vertices inside one drain, so inline completions
     * from the transport are propagated only after every initial vertex is
     * posted (receives are posted as early as possible). */
    draining_ = true;
    for (VertexId v : p.initial) {
        if (error_) break;
        if (defer_local && is_local(p.ops[v].kind)) {
            state_[v] = kInFlight;  // runs in run_deferred()
            deferred_.push_back(v);
            continue;
        }
        fire(v);
    }
    draining_ = false;
    drain();
    return error_;
}

size_t Executor::run_deferred() {
    size_t n = 0;
    while (!deferred_.empty() && !error_) {
        VertexId v = deferred_.back();
        deferred_.pop_back();
        state_[v] = kWaiting;  // fire() sets it in flight again
        fire(v);
        ++n;
    }
    return n;
}

void Executor::fire(VertexId v) {
    const Op &op = plan_->ops[v];
    state_[v] = kInFlight;
    if (fire_hook_) fire_hook_(fire_ctx_, *this, v);
    int rc = 0;
    switch (op.kind) {
    case OpKind::Send:
        rc = tr_.post_send(*this, v, op.peer, MsgId{sched_, seq_, op.tag}, addr(op.a), op.a.len);
        break;
    case OpKind::Recv:
        rc = tr_.post_recv(*this, v, op.peer, MsgId{sched_, seq_, op.tag}, addr(op.a), op.a.len);
        break;
    case OpKind::Reduce:
        if (!reduce_.fn) {
            rc = kErrNoReduce;
            break;
        }
        reduce_.fn(reduce_.ctx, addr(op.a), addr(op.b), op.count);
        complete(v);
        break;
    case OpKind::Copy:
        std::memcpy(addr(op.b), addr(op.a), op.a.len);
        complete(v);
        break;
    case OpKind::Nop: complete(v); break;
    }
    if (rc) {
        state_[v] = kDone;  // never started, so nothing will complete it
        fail(v, rc);
    }
}

void Executor::complete(VertexId v) {
    if (v >= state_.size() || state_[v] != kInFlight) {
        if (!error_) error_ = kErrBadCompletion;
        return;
    }
    state_[v] = kDone;
    finished_.push_back(v);
    drain();
}

/* After an error: queued local vertices never run (nothing would complete
 * them), and the run ends once nothing is in flight. */
void Executor::end_if_idle_after_error() {
    for (VertexId d : deferred_) state_[d] = kDone;
    deferred_.clear();
    bool inflight = false;
    for (uint8_t s : state_) inflight |= (s == kInFlight);
    if (!inflight) running_ = false;
}

void Executor::fail(VertexId v, int err) {
    if (v < state_.size() && state_[v] == kInFlight) state_[v] = kDone;  // it will not complete
    if (!error_) error_ = err ? err : kErrBadCompletion;
    /* Stop firing; the run ends as soon as nothing is in flight.  The
     * caller decides what to do with the error (abort the communicator). */
    finished_.clear();
    end_if_idle_after_error();
}

/* Propagate completions: bump successors' counters, fire those that hit
 * their threshold.  Re-entrant calls (a transport completing inline from
 * post_*, a local op completing inside fire) only queue. */
void Executor::drain() {
    if (draining_) return;
    draining_ = true;
    const Plan &p = *plan_;
    while (!finished_.empty() && !error_) {
        VertexId v = finished_.back();
        finished_.pop_back();
        --remaining_;
        for (uint32_t i = p.succ_begin[v]; i < p.succ_begin[v + 1] && !error_; ++i) {
            VertexId w = p.succ[i];
            if (++counter_[w] == p.threshold[w]) fire(w);
        }
    }
    draining_ = false;
    if (error_) {
        end_if_idle_after_error();
    } else if (remaining_ == 0) {
        running_ = false;
    }
}

}  // namespace cdag
