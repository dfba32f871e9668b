/*
 * Unit tests for the cDAG engine (coll_cdag/): builder, compile, cross-rank
 * validation, hazard checks, the triggered-operation executor, and every
 * collective generator.
 *
 *  - Engine tests pin down each rule on hand-written schedules.
 *  - The validation sweep generates every variant for communicator sizes
 *    1..64 and every root, and checks the whole set of per-rank schedules
 *    (pre-matching, deadlock freedom under rendezvous, local hazards).
 *  - Execution tests run generated schedules on MemNet (in-memory network,
 *    random completion order, random eager/rendezvous per message, seeded)
 *    and compare every byte of every receive buffer with a reference
 *    model: results where MPI defines them, untouched bytes elsewhere.
 *    Reductions use integer sum and a non-commutative associative op.
 *
 * Knob (environment): CDAG_TEST_SEED=<n> changes the base seed.  Failure
 * messages print the seed of the run.
 */
#include "coll_cdag/cdag_coll.h"
#include "coll_cdag/cdag_engine_policy.h"
#include "coll_cdag/cdag_exec.h"
#include "coll_cdag/cdag_memnet.h"
#include "coll_cdag/cdag_plan.h"
#include "coll_cdag/cdag_schedule.h"
#include "coll_cdag/cdag_validate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace cdag;

uint64_t base_seed() {
    static const uint64_t s = [] {
        const char *e = std::getenv("CDAG_TEST_SEED");
        return e ? std::strtoull(e, nullptr, 10) : 20240611ull;
    }();
    return s;
}

/* ======================================================================
 * Reduction operators
 * ==================================================================== */

struct TestOp {
    const char *name;
    uint64_t esize;
    bool commutative;
    void (*fn)(void *ctx, const void *in, void *inout, uint64_t count);
};

void sum_u32(void *, const void *in, void *inout, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) {
        uint32_t a, b;
        std::memcpy(&a, static_cast<const char *>(in) + 4 * i, 4);
        std::memcpy(&b, static_cast<char *>(inout) + 4 * i, 4);
        b += a;
        std::memcpy(static_cast<char *>(inout) + 4 * i, &b, 4);
    }
}

/* The brief's "a*31+b" is not associative, which MPI requires of every op,
 * so we use its associative generalisation: the polynomial hash of a
 * concatenation.  An element (h, w) stands for a string with hash h and
 * weight 31^length; (a . b) = (a.h * b.w + b.h, a.w * b.w).  For single
 * elements (w = 31) this is exactly a*31+b; it is associative and not
 * commutative, so any reordering or re-bracketing error shows. */
void hash_concat(void *, const void *in, void *inout, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) {
        uint32_t a[2], b[2];
        std::memcpy(a, static_cast<const char *>(in) + 8 * i, 8);
        std::memcpy(b, static_cast<char *>(inout) + 8 * i, 8);
        const uint32_t r[2] = {a[0] * b[1] + b[0], a[1] * b[1]};
        std::memcpy(static_cast<char *>(inout) + 8 * i, r, 8);
    }
}

const TestOp kSum{"sum", 4, true, sum_u32};
const TestOp kHash{"hash", 8, false, hash_concat};

uint32_t mix(uint64_t a, uint64_t b, uint64_t c) {
    uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full ^ (c + 17) * 0x165667B1;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    return static_cast<uint32_t>(x);
}

/* Element i of rank r's input in iteration it. */
void put_elem(const TestOp &op, uint8_t *dst, int r, uint64_t i, int it) {
    if (op.esize == 4) {
        const uint32_t v = mix(r, i, it) % 1000;
        std::memcpy(dst, &v, 4);
    } else {
        const uint32_t v[2] = {mix(r, i, it) % 1000, 31};
        std::memcpy(dst, v, 8);
    }
}

/* ======================================================================
 * Worlds: the per-rank specs, layouts and buffers of one collective call,
 * plus the reference result.
 * ==================================================================== */

bool is_rooted(Coll c) {
    return c == Coll::Bcast || c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter ||
           c == Coll::Gatherv || c == Coll::Scatterv;
}
bool is_reduction(Coll c) {
    return c == Coll::Reduce || c == Coll::Allreduce || c == Coll::ReduceScatterBlock ||
           c == Coll::ReduceScatter || c == Coll::Scan || c == Coll::Exscan;
}
bool has_in_place(Coll c) { return c != Coll::Barrier && c != Coll::Bcast; }

struct Buffers {
    std::vector<uint8_t> send, recv, expect, send_copy;
};

/* Random non-overlapping placement of p blocks: shuffled order, random
 * gaps (the gaps must stay untouched).  Returns the extent. */
uint64_t random_layout(const std::vector<uint64_t> &cnt, std::vector<uint64_t> *dsp, std::mt19937_64 &rng) {
    const int p = static_cast<int>(cnt.size());
    std::vector<int> order(p);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    dsp->assign(p, 0);
    uint64_t at = 0;
    for (int j : order) {
        at += rng() % 3;
        (*dsp)[j] = at;
        at += cnt[j];
    }
    return at + rng() % 3;
}

struct World {
    Coll coll;
    int p, root;
    uint64_t count;  // see cdag_coll.h; for v-variants the mean block size
    const TestOp *op;
    bool in_place;
    std::vector<CollSpec> spec;
    /* layouts (bytes, or elements for ReduceScatter) */
    std::vector<uint64_t> vcnt, vdsp;               // gatherv/scatterv root, allgatherv, reduce_scatter
    std::vector<std::vector<uint64_t>> scnt, sdsp;  // alltoallv per rank
    std::vector<std::vector<uint64_t>> rcnt, rdsp;
    uint64_t vextent = 0;
    std::vector<uint64_t> sext, rext;  // alltoallv extents per rank
    std::vector<uint64_t> send_size, recv_size;

    uint64_t es() const { return op ? op->esize : 1; }
    bool in_place_at(int r) const { return in_place && (!is_rooted(coll) || r == root); }
};

World make_world(Coll coll, int p, int root, uint64_t count, const TestOp *op, bool in_place, uint64_t seed) {
    World w;
    w.coll = coll;
    w.p = p;
    w.root = root;
    w.count = count;
    w.op = op;
    w.in_place = in_place;
    /* Only the v-variants need random layouts; seeding an mt19937_64 costs
     * more than generating a small schedule, and the sweep makes ~10^6
     * worlds. */
    const bool random = coll == Coll::Gatherv || coll == Coll::Scatterv || coll == Coll::Allgatherv ||
                        coll == Coll::ReduceScatter || coll == Coll::Alltoallv;
    std::unique_ptr<std::mt19937_64> rngp(random ? new std::mt19937_64(seed) : nullptr);
    const uint64_t es = w.es();
    auto rand_count = [&] {
        std::mt19937_64 &rng = *rngp;
        return count == 0 ? 0 : (rng() % 4 == 0 ? 0 : rng() % (2 * count + 1));
    };

    if (coll == Coll::Gatherv || coll == Coll::Scatterv || coll == Coll::Allgatherv || coll == Coll::ReduceScatter) {
        for (int j = 0; j < p; ++j) w.vcnt.push_back(rand_count());
        w.vextent = random_layout(w.vcnt, &w.vdsp, *rngp);
    }
    if (coll == Coll::Alltoallv) {
        std::vector<std::vector<uint64_t>> m(p, std::vector<uint64_t>(p));
        for (int i = 0; i < p; ++i)
            for (int j = 0; j < p; ++j) m[i][j] = (in_place && j < i) ? m[j][i] : rand_count();
        w.scnt.resize(p);
        w.sdsp.resize(p);
        w.rcnt.resize(p);
        w.rdsp.resize(p);
        w.sext.resize(p);
        w.rext.resize(p);
        for (int i = 0; i < p; ++i) {
            w.scnt[i] = m[i];
            for (int j = 0; j < p; ++j) w.rcnt[i].push_back(m[j][i]);
            w.sext[i] = random_layout(w.scnt[i], &w.sdsp[i], *rngp);
            w.rext[i] = random_layout(w.rcnt[i], &w.rdsp[i], *rngp);
        }
    }
    uint64_t rs_total = 0;
    for (uint64_t c : w.vcnt) rs_total += c;

    for (int r = 0; r < p; ++r) {
        CollSpec c;
        c.coll = coll;
        c.rank = r;
        c.size = p;
        c.root = root;
        c.count = count;
        c.elem_size = es;
        c.commutative = op ? op->commutative : true;
        c.in_place = in_place;
        uint64_t ssz = 0, rsz = 0;
        switch (coll) {
        case Coll::Barrier: break;
        case Coll::Bcast: rsz = count; break;
        case Coll::Reduce:
        case Coll::Allreduce:
        case Coll::Scan:
        case Coll::Exscan:
            ssz = rsz = count * es;
            break;
        case Coll::Gather: ssz = count, rsz = count * p; break;
        case Coll::Scatter: ssz = count * p, rsz = count; break;
        case Coll::Allgather: ssz = count, rsz = count * p; break;
        case Coll::Alltoall: ssz = rsz = count * p; break;
        case Coll::ReduceScatterBlock:
            ssz = count * p * es;
            rsz = in_place ? ssz : count * es;
            break;
        case Coll::ReduceScatter:
            c.counts = w.vcnt.data();
            ssz = rs_total * es;
            rsz = in_place ? ssz : w.vcnt[r] * es;
            break;
        case Coll::Gatherv:
            c.count = w.vcnt[r];
            if (r == root) c.counts = w.vcnt.data(), c.displs = w.vdsp.data();
            ssz = w.vcnt[r];
            rsz = w.vextent;
            break;
        case Coll::Scatterv:
            c.count = w.vcnt[r];
            if (r == root) c.counts = w.vcnt.data(), c.displs = w.vdsp.data();
            ssz = w.vextent;
            rsz = w.vcnt[r];
            break;
        case Coll::Allgatherv:
            c.counts = w.vcnt.data();
            c.displs = w.vdsp.data();
            ssz = w.vcnt[r];
            rsz = w.vextent;
            break;
        case Coll::Alltoallv:
            c.counts = w.scnt[r].data();
            c.displs = w.sdsp[r].data();
            c.rcounts = w.rcnt[r].data();
            c.rdispls = w.rdsp[r].data();
            ssz = w.sext[r];
            rsz = w.rext[r];
            break;
        }
        /* In place the input lives in Recv, except for Scatter(v), whose
         * root keeps sending from Send and receives nothing. */
        if (w.in_place_at(r) && has_in_place(coll) && coll != Coll::Scatter && coll != Coll::Scatterv) ssz = 0;
        w.send_size.push_back(ssz);
        w.recv_size.push_back(rsz);
        w.spec.push_back(c);
    }
    return w;
}

/* Inputs and reference results of iteration `it`. */
std::vector<Buffers> fill(const World &w, int it) {
    const int p = w.p;
    const uint64_t es = w.es();
    std::vector<Buffers> b(p);
    auto byte = [&](int r, uint64_t i) { return static_cast<uint8_t>(mix(r, i, it + 1000)); };

    /* in[r]: the rank's logical input (bytes), whether it lives in Send or
     * (in place) in Recv. */
    std::vector<std::vector<uint8_t>> in(p);
    for (int r = 0; r < p; ++r) {
        b[r].recv.assign(w.recv_size[r], 0xA5);
        uint64_t n = 0;
        switch (w.coll) {
        case Coll::Bcast: n = w.recv_size[r]; break;
        case Coll::Gather:
        case Coll::Allgather: n = w.count; break;
        case Coll::Scatter: n = w.count * p; break;
        case Coll::Gatherv:
        case Coll::Allgatherv: n = w.vcnt[r]; break;
        case Coll::Scatterv: n = w.vextent; break;
        case Coll::Alltoall: n = w.count * p; break;
        case Coll::Alltoallv: n = w.in_place ? w.rext[r] : w.sext[r]; break;
        case Coll::Reduce:
        case Coll::Allreduce:
        case Coll::Scan:
        case Coll::Exscan: n = w.count * es; break;
        case Coll::ReduceScatterBlock: n = w.count * p * es; break;
        case Coll::ReduceScatter: {
            uint64_t t = 0;
            for (uint64_t c : w.vcnt) t += c;
            n = t * es;
            break;
        }
        case Coll::Barrier: break;
        }
        in[r].resize(n);
        if (w.op)
            for (uint64_t i = 0; i < n / es; ++i) put_elem(*w.op, &in[r][i * es], r, i, it);
        else
            for (uint64_t i = 0; i < n; ++i) in[r][i] = byte(r, i);
    }
    /* Place inputs where MPI says. */
    for (int r = 0; r < p; ++r) {
        const bool ip = w.in_place_at(r);
        switch (w.coll) {
        case Coll::Bcast:
            if (r == w.root) b[r].recv = in[r];
            break;
        case Coll::Gather:
            if (ip) std::copy(in[r].begin(), in[r].end(), b[r].recv.begin() + r * w.count);
            else b[r].send = in[r];
            break;
        case Coll::Allgather:
            if (ip) std::copy(in[r].begin(), in[r].end(), b[r].recv.begin() + r * w.count);
            else b[r].send = in[r];
            break;
        case Coll::Gatherv:
        case Coll::Allgatherv:
            if (ip) std::copy(in[r].begin(), in[r].end(), b[r].recv.begin() + w.vdsp[r]);
            else b[r].send = in[r];
            break;
        case Coll::Barrier: break;
        default:
            if (ip && w.coll != Coll::Scatter && w.coll != Coll::Scatterv) {
                std::copy(in[r].begin(), in[r].end(), b[r].recv.begin());
            } else {
                b[r].send = in[r];
            }
        }
        b[r].send.resize(w.send_size[r]);
        b[r].expect = b[r].recv;
        b[r].send_copy = b[r].send;
    }

    /* Reference results. */
    auto fold = [&](const std::vector<int> &ranks, uint64_t from, uint64_t n) {
        std::vector<uint8_t> acc(in[ranks[0]].begin() + from * es, in[ranks[0]].begin() + (from + n) * es);
        for (size_t k = 1; k < ranks.size(); ++k) {
            std::vector<uint8_t> x(in[ranks[k]].begin() + from * es, in[ranks[k]].begin() + (from + n) * es);
            w.op->fn(nullptr, acc.data(), x.data(), n);  // x = acc op x
            acc.swap(x);
        }
        return acc;
    };
    std::vector<int> all(p);
    std::iota(all.begin(), all.end(), 0);
    auto put = [](std::vector<uint8_t> &dst, uint64_t at, const uint8_t *src, uint64_t n) {
        if (n) std::memcpy(dst.data() + at, src, n);
    };
    switch (w.coll) {
    case Coll::Barrier: break;
    case Coll::Bcast:
        for (int r = 0; r < p; ++r) b[r].expect = in[w.root];
        break;
    case Coll::Reduce:
        if (w.count) b[w.root].expect = fold(all, 0, w.count);
        break;
    case Coll::Allreduce:
        if (w.count)
            for (int r = 0; r < p; ++r) b[r].expect = fold(all, 0, w.count);
        break;
    case Coll::Scan:
    case Coll::Exscan:
        for (int r = 0; r < p && w.count; ++r) {
            std::vector<int> upto(all.begin(), all.begin() + r + (w.coll == Coll::Scan ? 1 : 0));
            if (!upto.empty()) b[r].expect = fold(upto, 0, w.count);
        }
        break;
    case Coll::Gather:
        for (int r = 0; r < p; ++r) put(b[w.root].expect, r * w.count, in[r].data(), w.count);
        break;
    case Coll::Gatherv:
        for (int r = 0; r < p; ++r) put(b[w.root].expect, w.vdsp[r], in[r].data(), w.vcnt[r]);
        break;
    case Coll::Scatter:
        for (int r = 0; r < p; ++r)
            if (!(w.in_place_at(r)))
                put(b[r].expect, 0, in[w.root].data() + r * w.count, w.count);
        break;
    case Coll::Scatterv:
        for (int r = 0; r < p; ++r)
            if (!(w.in_place_at(r))) put(b[r].expect, 0, in[w.root].data() + w.vdsp[r], w.vcnt[r]);
        break;
    case Coll::Allgather:
        for (int r = 0; r < p; ++r)
            for (int j = 0; j < p; ++j) put(b[r].expect, j * w.count, in[j].data(), w.count);
        break;
    case Coll::Allgatherv:
        for (int r = 0; r < p; ++r)
            for (int j = 0; j < p; ++j) put(b[r].expect, w.vdsp[j], in[j].data(), w.vcnt[j]);
        break;
    case Coll::Alltoall:
        for (int r = 0; r < p; ++r)
            for (int j = 0; j < p; ++j) put(b[r].expect, j * w.count, in[j].data() + r * w.count, w.count);
        break;
    case Coll::Alltoallv:
        for (int r = 0; r < p; ++r)
            for (int j = 0; j < p; ++j) {
                const uint64_t soff = w.in_place ? w.rdsp[j][r] : w.sdsp[j][r];
                put(b[r].expect, w.rdsp[r][j], in[j].data() + soff, w.rcnt[r][j]);
            }
        break;
    case Coll::ReduceScatterBlock:
        for (int r = 0; r < p && w.count; ++r) {
            auto res = fold(all, r * w.count, w.count);
            put(b[r].expect, 0, res.data(), res.size());
        }
        break;
    case Coll::ReduceScatter: {
        uint64_t e = 0;
        for (int r = 0; r < p; ++r) {
            if (w.vcnt[r]) {
                auto res = fold(all, e, w.vcnt[r]);
                put(b[r].expect, 0, res.data(), res.size());
            }
            e += w.vcnt[r];
        }
        break;
    }
    }
    return b;
}

/* ======================================================================
 * Plans for all ranks of a world
 * ==================================================================== */

std::string describe(const World &w, const AlgoChoice &a) {
    std::ostringstream o;
    o << coll_name(w.coll) << "/" << algo_name(a.algo);
    if (a.algo == Algo::ReduceBcast || a.algo == Algo::ReduceThenScatter) o << "(" << algo_name(a.tree) << ")";
    o << " radix " << a.radix << " seg " << a.seg_bytes << " window " << a.window << " p " << w.p << " root "
      << w.root << " count " << w.count << (w.op ? std::string(" op ") + w.op->name : "")
      << (w.in_place ? " in_place" : "");
    return o.str();
}

/* Generate and compile every rank's schedule; "" or what went wrong. */
std::string build_plans(const World &w, const AlgoChoice &a, std::vector<std::shared_ptr<const Plan>> *plans,
                        bool hazards) {
    plans->clear();
    std::vector<const Plan *> raw;
    for (int r = 0; r < w.p; ++r) {
        Schedule s;
        const Status st = generate(w.spec[r], a, &s);
        if (st != Status::Ok) return "rank " + std::to_string(r) + ": generate failed";
        auto pl = std::make_shared<Plan>();
        std::string e = compile(s, pl.get());
        if (!e.empty()) return "rank " + std::to_string(r) + ": " + e;
        if (pl->send_extent > w.send_size[r] || pl->recv_extent > w.recv_size[r])
            return "rank " + std::to_string(r) + ": schedule exceeds the buffers";
        if (hazards) {
            e = check_hazards(*pl);
            if (!e.empty()) return "rank " + std::to_string(r) + ": " + e;
        }
        raw.push_back(pl.get());
        plans->push_back(pl);
    }
    return validate_set(raw);
}

/* ======================================================================
 * Execution on MemNet
 * ==================================================================== */

void count_fire(void *ctx, const Executor &, VertexId v) { ++(*static_cast<std::vector<uint32_t> *>(ctx))[v]; }

/* One collective on a MemNet: executors for all ranks, `iters` runs each
 * (persistent), every rank restarting as soon as its previous run is
 * done, each run over its own buffers. */
class Job {
public:
    Job(World w, AlgoChoice a, int iters, uint32_t sched_id, bool deferred = false)
        : w_(std::move(w)), a_(a), iters_(iters), sched_(sched_id), deferred_(deferred) {}

    std::string prepare(MemNet &net) {
        std::string e = build_plans(w_, a_, &plans_, false);
        if (!e.empty()) return e;
        for (int it = 0; it < iters_; ++it) bufs_.push_back(fill(w_, it));
        fires_.assign(w_.p, {});
        iter_.assign(w_.p, -1);
        ReduceFn rf;
        if (w_.op) rf.fn = w_.op->fn;
        for (int r = 0; r < w_.p; ++r) {
            ex_.emplace_back(new Executor(plans_[r], net.port(r), sched_, rf));
            fires_[r].assign(plans_[r]->num_vertices(), 0);
            ex_[r]->set_fire_hook(count_fire, &fires_[r]);
        }
        return "";
    }

    /* Start every rank that is idle and has runs left; true if any did. */
    bool start_ready() {
        bool any = false;
        for (int r = 0; r < w_.p; ++r) {
            if (!ex_[r]->done() || iter_[r] + 1 >= iters_) continue;
            if (iter_[r] >= 0) check_fires(r);
            ++iter_[r];
            Buffers &b = bufs_[iter_[r]][r];
            void *rb = b.recv.empty() ? nullptr : b.recv.data();
            const void *sb = b.send.empty() ? nullptr : b.send.data();
            const int rc = deferred_ ? ex_[r]->start_deferred(sb, rb) : ex_[r]->start(sb, rb);
            if (rc) fail("start failed rc " + std::to_string(rc));
            any = true;
        }
        return any;
    }

    /* Deferred mode: run the queued local operations of some ranks (the
     * engine thread's share, at a time of its choosing); all with every.
     * True if any ran. */
    bool run_deferred(uint64_t tick, bool every) {
        bool any = false;
        for (int r = 0; r < w_.p; ++r)
            if (ex_[r]->has_deferred() && (every || (tick + r) % 3 == 0)) any |= ex_[r]->run_deferred() > 0;
        return any;
    }

    void finish() {
        for (int r = 0; r < w_.p; ++r) {
            if (!ex_[r]->done() || iter_[r] + 1 != iters_) {
                fail("rank " + std::to_string(r) + " did not finish (run " + std::to_string(iter_[r]) + ")");
                continue;
            }
            if (ex_[r]->error()) fail("rank " + std::to_string(r) + " error " + std::to_string(ex_[r]->error()));
            if (ex_[r]->runs() != uint32_t(iters_)) fail("wrong number of runs");
            check_fires(r);
        }
        for (int it = 0; it < iters_; ++it)
            for (int r = 0; r < w_.p; ++r) {
                const Buffers &b = bufs_[it][r];
                if (b.send != b.send_copy) fail("run " + std::to_string(it) + " rank " + std::to_string(r) + ": send buffer modified");
                if (b.recv != b.expect) {
                    size_t i = 0;
                    while (b.recv[i] == b.expect[i]) ++i;
                    fail("run " + std::to_string(it) + " rank " + std::to_string(r) + ": recv byte " + std::to_string(i) +
                         " of " + std::to_string(b.recv.size()) + " is " + std::to_string(b.recv[i]) + ", expected " +
                         std::to_string(b.expect[i]));
                }
            }
    }

    const std::string &error() const { return err_; }
    std::string name() const { return describe(w_, a_); }

private:
    void check_fires(int r) {
        for (size_t v = 0; v < fires_[r].size(); ++v)
            if (fires_[r][v] != 1) {
                fail("rank " + std::to_string(r) + " vertex " + std::to_string(v) + " fired " + std::to_string(fires_[r][v]) + " times");
                break;
            }
        std::fill(fires_[r].begin(), fires_[r].end(), 0);
    }
    void fail(const std::string &e) {
        if (err_.empty()) err_ = e;
    }

    World w_;
    AlgoChoice a_;
    int iters_;
    uint32_t sched_;
    bool deferred_;
    std::vector<std::shared_ptr<const Plan>> plans_;
    std::vector<std::vector<Buffers>> bufs_;  // [iteration][rank]
    std::vector<std::unique_ptr<Executor>> ex_;
    std::vector<std::vector<uint32_t>> fires_;
    std::vector<int> iter_;
    std::string err_;
};

/* Run jobs concurrently on one network until nothing moves. */
std::string run_jobs(std::vector<Job *> jobs, MemNet &net) {
    for (Job *j : jobs) {
        std::string e = j->prepare(net);
        if (!e.empty()) return j->name() + ": " + e;
    }
    for (uint64_t tick = 0;; ++tick) {
        bool started = false;
        for (Job *j : jobs) started |= j->start_ready();
        for (Job *j : jobs) started |= j->run_deferred(tick, false);
        if (net.step()) continue;
        for (Job *j : jobs) started |= j->run_deferred(tick, true);  // nothing else can move
        if (!started) break;
    }
    if (!net.error().empty()) return "network: " + net.error();
    if (net.outstanding()) return "network: " + std::to_string(net.outstanding()) + " unmatched operations";
    for (Job *j : jobs) {
        j->finish();
        if (!j->error().empty()) return j->name() + ": " + j->error();
    }
    return "";
}

std::string run_one(const World &w, const AlgoChoice &a, uint64_t seed, int iters = 1, double eager = 0.5,
                    bool deferred = false) {
    MemNet net(w.p, seed, eager);
    Job j(w, a, iters, 42, deferred);
    std::string e = run_jobs({&j}, net);
    return e.empty() ? e : e + " (seed " + std::to_string(seed) + ")";
}

/* ======================================================================
 * The variants under test
 * ==================================================================== */

AlgoChoice algo(Algo a, int radix = 2, uint64_t seg = 0, int window = 0, Algo tree = Algo::KnomialTree) {
    AlgoChoice c;
    c.algo = a;
    c.radix = radix;
    c.seg_bytes = seg;
    c.window = window;
    c.tree = tree;
    return c;
}

struct Variant {
    Coll coll;
    AlgoChoice a;
    bool any_op;  // valid for non-commutative ops too
};

std::vector<AlgoChoice> tree_algos(uint64_t seg) {
    return {algo(Algo::KnomialTree, 2, seg), algo(Algo::KnomialTree, 3, seg), algo(Algo::KaryTree, 2, seg),
            algo(Algo::KaryTree, 3, seg),    algo(Algo::Chain, 1, seg),       algo(Algo::Linear, 1, seg)};
}

/* seg = a small segment (bytes) that does not divide the test sizes. */
std::vector<Variant> all_variants(uint64_t seg) {
    std::vector<Variant> v;
    v.push_back({Coll::Barrier, algo(Algo::Dissemination), true});
    v.push_back({Coll::Barrier, algo(Algo::Butterfly), true});
    v.push_back({Coll::Barrier, algo(Algo::Linear), true});
    for (Coll c : {Coll::Bcast, Coll::Reduce, Coll::Gather, Coll::Scatter})
        for (auto &a : tree_algos(seg)) v.push_back({c, a, true});
    v.push_back({Coll::Allreduce, algo(Algo::Butterfly), true});
    v.push_back({Coll::Allreduce, algo(Algo::Dissemination), false});
    v.push_back({Coll::Allreduce, algo(Algo::Ring, 2, seg), false});
    v.push_back({Coll::Allreduce, algo(Algo::ReduceBcast, 2, 0, 0, Algo::KnomialTree), true});
    v.push_back({Coll::Allreduce, algo(Algo::ReduceBcast, 2, seg, 0, Algo::KaryTree), true});
    v.push_back({Coll::Allreduce, algo(Algo::ReduceBcast, 1, seg, 0, Algo::Chain), true});
    for (Algo a : {Algo::Ring, Algo::Butterfly, Algo::Dissemination}) {
        v.push_back({Coll::Allgather, algo(a, 2, seg), true});
        v.push_back({Coll::Allgatherv, algo(a, 2, seg), true});
    }
    for (Coll c : {Coll::Alltoall, Coll::Alltoallv}) {
        v.push_back({c, algo(Algo::Pairwise, 2, seg), true});
        v.push_back({c, algo(Algo::Linear, 2, 0, 0), true});
        v.push_back({c, algo(Algo::Linear, 2, seg, 3), true});
    }
    for (Coll c : {Coll::ReduceScatterBlock, Coll::ReduceScatter}) {
        v.push_back({c, algo(Algo::Pairwise, 2, seg), true});
        v.push_back({c, algo(Algo::Ring, 2, seg), false});
        v.push_back({c, algo(Algo::ReduceThenScatter, 2, 0, 0, Algo::KnomialTree), true});
        v.push_back({c, algo(Algo::ReduceThenScatter, 3, seg, 0, Algo::KaryTree), true});
        v.push_back({c, algo(Algo::Butterfly), false});
    }
    for (Coll c : {Coll::Scan, Coll::Exscan}) {
        v.push_back({c, algo(Algo::Chain, 1, seg), true});
        v.push_back({c, algo(Algo::Butterfly), true});
    }
    for (Coll c : {Coll::Gatherv, Coll::Scatterv}) v.push_back({c, algo(Algo::Linear, 1, seg), true});
    return v;
}

std::vector<const TestOp *> ops_for(const Variant &v) {
    if (!is_reduction(v.coll)) return {nullptr};
    if (v.any_op) return {&kSum, &kHash};
    return {&kSum};
}

std::vector<bool> in_place_options(Coll c) {
    if (has_in_place(c)) return {false, true};
    return {false};
}

/* ======================================================================
 * Engine tests
 * ==================================================================== */

bool has_edge(const Schedule &s, VertexId a, VertexId b) {
    for (auto &e : s.edges())
        if (e.first == a && e.second == b) return true;
    return false;
}

TEST(CdagBuilder, InfersDataflowEdgesFromByteRanges) {
    Schedule s(0, 2);
    const Buf x{Slot::Recv, 0, 16};
    VertexId r = s.recv(1, 0, x);
    VertexId s1 = s.send(1, 1, x.sub(0, 8));   // reads what r wrote
    VertexId s2 = s.send(1, 2, x.sub(8, 8));
    VertexId s3 = s.send(1, 3, Buf{Slot::Send, 0, 8});  // independent
    VertexId w = s.copy(Buf{Slot::Send, 0, 4}, x.sub(4, 8));  // overwrites bytes s1 and s2 read
    EXPECT_TRUE(has_edge(s, r, s1));
    EXPECT_TRUE(has_edge(s, r, s2));
    EXPECT_FALSE(has_edge(s, s1, s2));  // two readers of the same data stay concurrent
    EXPECT_FALSE(has_edge(s, r, s3));
    EXPECT_TRUE(has_edge(s, s1, w));    // write after read
    EXPECT_TRUE(has_edge(s, s2, w));
    EXPECT_TRUE(has_edge(s, r, w));     // write after write
    EXPECT_FALSE(has_edge(s, s3, w));   // s3 reads Send, w reads Send: no conflict
    VertexId z = s.recv(1, 9, Buf{});   // zero bytes: no inferred edges
    for (auto &e : s.edges()) EXPECT_NE(e.second, z);
    EXPECT_EQ(s.extent(Slot::Recv), 16u);
    EXPECT_EQ(s.extent(Slot::Send), 8u);
}

TEST(CdagBuilder, ScratchIsAlignedAndAccounted) {
    Schedule s(0, 1);
    Buf a = s.scratch(3), b = s.scratch(100), c = s.scratch(0);
    EXPECT_EQ(a.off % 64, 0u);
    EXPECT_EQ(b.off % 64, 0u);
    EXPECT_GE(b.off, a.off + 3);
    EXPECT_TRUE(c.empty());
    EXPECT_EQ(s.scratch_bytes(), b.off + 100);
}

TEST(CdagCompile, BuildsThresholdsAndSuccessorsWithoutDuplicates) {
    Schedule s(0, 1);
    VertexId a = s.nop(), b = s.nop(), c = s.nop({a, b, a});
    s.edge(a, c);
    Plan p;
    ASSERT_EQ(compile(s, &p), "");
    EXPECT_EQ(p.threshold[c], 2u);
    EXPECT_EQ(p.threshold[a], 0u);
    EXPECT_EQ(p.succ_begin[a + 1] - p.succ_begin[a], 1u);
    EXPECT_EQ(p.initial, (std::vector<VertexId>{a, b}));
}

TEST(CdagCompile, RejectsMalformedSchedules) {
    Plan p;
    {
        Schedule s(0, 1);
        VertexId a = s.nop(), b = s.nop({a});
        s.edge(b, a);
        EXPECT_EQ(compile(s, &p), "dependency cycle");
    }
    {
        Schedule s(0, 2);
        s.send(0, 0, Buf{});
        EXPECT_NE(compile(s, &p), "");  // message to self
    }
    {
        Schedule s(0, 2);
        s.send(2, 0, Buf{});
        EXPECT_NE(compile(s, &p), "");  // peer out of range
    }
    {
        Schedule s(0, 2);
        s.recv(1, 0, Buf{Slot::Send, 0, 4});
        EXPECT_NE(compile(s, &p), "");  // writes the send buffer
    }
    {
        Schedule s(0, 1);
        s.copy(Buf{Slot::Recv, 0, 8}, Buf{Slot::Recv, 4, 8});
        EXPECT_NE(compile(s, &p), "");  // overlapping copy
    }
    {
        Schedule s(0, 1);
        s.reduce(Buf{Slot::Send, 0, 8}, Buf{Slot::Recv, 0, 8}, 3);
        EXPECT_NE(compile(s, &p), "");  // 8 bytes are not 3 elements
    }
}

std::string validate_pair(Schedule &a, Schedule &b) {
    Plan pa, pb;
    std::string e = compile(a, &pa);
    if (e.empty()) e = compile(b, &pb);
    if (!e.empty()) return "compile: " + e;
    return validate_set({&pa, &pb});
}

TEST(CdagValidate, AcceptsMatchedSchedules) {
    Schedule a(0, 2), b(1, 2);
    a.send(1, 5, Buf{Slot::Send, 0, 8});
    a.recv(1, 6, Buf{Slot::Recv, 0, 8});
    b.recv(0, 5, Buf{Slot::Recv, 0, 8});
    b.send(0, 6, Buf{Slot::Send, 0, 8});
    EXPECT_EQ(validate_pair(a, b), "");
}

TEST(CdagValidate, RejectsUnmatchedDuplicateAndMismatchedMessages) {
    {
        Schedule a(0, 2), b(1, 2);
        a.send(1, 5, Buf{});
        EXPECT_NE(validate_pair(a, b).find("unmatched"), std::string::npos);
    }
    {
        Schedule a(0, 2), b(1, 2);
        a.send(1, 5, Buf{});
        b.recv(0, 4, Buf{});
        EXPECT_NE(validate_pair(a, b).find("unmatched"), std::string::npos);
    }
    {
        Schedule a(0, 2), b(1, 2);
        a.send(1, 5, Buf{Slot::Send, 0, 8});
        b.recv(0, 5, Buf{Slot::Recv, 0, 4});
        EXPECT_NE(validate_pair(a, b).find("length"), std::string::npos);
    }
    {
        Schedule a(0, 2), b(1, 2);
        a.send(1, 5, Buf{});
        a.send(1, 5, Buf{});
        b.recv(0, 5, Buf{});
        b.recv(0, 5, Buf{});
        EXPECT_NE(validate_pair(a, b).find("two sends"), std::string::npos);
    }
}

TEST(CdagValidate, RejectsCrossRankDeadlock) {
    /* Each rank sends first and receives only after its send completed:
     * fine with eager buffering, a deadlock under rendezvous. */
    Schedule a(0, 2), b(1, 2);
    VertexId sa = a.send(1, 0, Buf{});
    a.recv(1, 1, Buf{}, {sa});
    VertexId sb = b.send(0, 1, Buf{});
    b.recv(0, 0, Buf{}, {sb});
    EXPECT_NE(validate_pair(a, b).find("deadlock"), std::string::npos);
}

TEST(CdagValidate, HazardCheckFindsUnorderedConflicts) {
    Schedule s(0, 2);
    s.recv(1, 0, Buf{Slot::Recv, 0, 8});
    s.send(1, 1, Buf{Slot::Recv, 4, 8});
    Plan p;
    ASSERT_EQ(compile(s, &p), "");
    EXPECT_EQ(check_hazards(p), "");
    /* Drop the inferred edge: now the send may read while the recv writes. */
    p.succ.clear();
    std::fill(p.succ_begin.begin(), p.succ_begin.end(), 0);
    std::fill(p.threshold.begin(), p.threshold.end(), 0);
    p.initial = {0, 1};
    EXPECT_NE(check_hazards(p), "");
}

/* A transport for single-rank plans that must never be asked anything. */
struct NoNet : Transport {
    int post_send(Executor &, VertexId, int, const MsgId &, const void *, uint64_t) override { return 99; }
    int post_recv(Executor &, VertexId, int, const MsgId &, void *, uint64_t) override { return 99; }
};

struct FireLog {
    std::vector<VertexId> order;
};
void log_fire(void *ctx, const Executor &, VertexId v) { static_cast<FireLog *>(ctx)->order.push_back(v); }

TEST(CdagExecutor, FiresOnlyWhenThresholdReached) {
    /* d waits for three predecessors; a chain of copies moves data. */
    Schedule s(0, 1);
    VertexId a = s.nop(), b = s.nop(), c = s.copy(Buf{Slot::Send, 0, 4}, Buf{Slot::Scratch, 0, 4});
    s.scratch(4);
    VertexId d = s.copy(Buf{Slot::Scratch, 0, 4}, Buf{Slot::Recv, 0, 4}, {a, b});
    auto plan = std::make_shared<Plan>();
    ASSERT_EQ(compile(s, plan.get()), "");
    EXPECT_EQ(plan->threshold[d], 3u);
    NoNet net;
    Executor ex(plan, net, 1);
    FireLog log;
    ex.set_fire_hook(log_fire, &log);
    const uint32_t in = 0xDEADBEEF;
    uint32_t out = 0;
    ASSERT_EQ(ex.start(&in, &out), 0);
    EXPECT_TRUE(ex.done());
    EXPECT_EQ(out, in);
    ASSERT_EQ(log.order.size(), 4u);
    EXPECT_EQ(log.order.back(), d);
    std::vector<VertexId> sorted = log.order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<VertexId>{a, b, c, d}));
    /* Reuse: a second run, fresh counters, next sequence number. */
    uint32_t out2 = 0;
    log.order.clear();
    ASSERT_EQ(ex.start(&in, &out2), 0);
    EXPECT_EQ(out2, in);
    EXPECT_EQ(log.order.size(), 4u);
    EXPECT_EQ(ex.seq(), 1u);
    EXPECT_EQ(ex.runs(), 2u);

    /* Caller-provided scratch (e.g. pooled by the coll component). */
    alignas(64) uint32_t pool[16] = {};
    Executor ex2(plan, net, 2, ReduceFn{}, pool);
    uint32_t out3 = 0;
    ASSERT_EQ(ex2.start(&in, &out3), 0);
    EXPECT_EQ(out3, in);
    EXPECT_EQ(pool[0], in);  // the staging copy went through the caller's memory
}

TEST(CdagExecutor, ReportsErrorsAndBadCompletions) {
    Schedule s(0, 2);
    s.send(1, 0, Buf{});
    auto plan = std::make_shared<Plan>();
    ASSERT_EQ(compile(s, plan.get()), "");
    NoNet net;  // refuses every post
    Executor ex(plan, net, 1);
    EXPECT_EQ(ex.start(nullptr, nullptr), 99);
    EXPECT_TRUE(ex.done());

    Schedule r(0, 1);
    r.reduce(Buf{Slot::Send, 0, 4}, Buf{Slot::Recv, 0, 4}, 1);
    auto rp = std::make_shared<Plan>();
    ASSERT_EQ(compile(r, rp.get()), "");
    Executor noop(rp, net, 2);  // no reduce function given
    uint32_t x = 1, y = 2;
    EXPECT_EQ(noop.start(&x, &y), Executor::kErrNoReduce);

    MemNet mn(2, 1, 0.0);
    Executor e2(plan, mn.port(0), 3);
    EXPECT_EQ(e2.start(nullptr, nullptr), 0);
    EXPECT_EQ(e2.start(nullptr, nullptr), Executor::kErrBusy);
    e2.complete(0);
    e2.complete(0);  // twice
    EXPECT_EQ(e2.error(), Executor::kErrBadCompletion);

    /* The transport fails an operation it had accepted: the run ends with
     * that error once nothing else is in flight. */
    MemNet mn2(2, 1, 0.0);
    Executor e3(plan, mn2.port(0), 4);
    EXPECT_EQ(e3.start(nullptr, nullptr), 0);
    EXPECT_FALSE(e3.done());
    e3.fail(0, 7);
    EXPECT_TRUE(e3.done());
    EXPECT_EQ(e3.error(), 7);
}

/* A transport that completes both sides inline the moment a message
 * matches: completions re-enter the executor from inside post_*. */
class InlineNet {
public:
    explicit InlineNet(int p) {
        for (int r = 0; r < p; ++r) ports_.emplace_back(new Port(this, r));
    }
    Transport &port(int r) { return *ports_[r]; }

private:
    struct Op {
        int src, dst;
        MsgId id;
        Executor *ex;
        VertexId v;
        char *buf;
        uint64_t len;
        bool send;
    };
    class Port : public Transport {
    public:
        Port(InlineNet *n, int r) : n_(n), r_(r) {}
        int post_send(Executor &ex, VertexId v, int peer, const MsgId &id, const void *buf, uint64_t len) override {
            return n_->post({r_, peer, id, &ex, v, const_cast<char *>(static_cast<const char *>(buf)), len, true});
        }
        int post_recv(Executor &ex, VertexId v, int peer, const MsgId &id, void *buf, uint64_t len) override {
            return n_->post({peer, r_, id, &ex, v, static_cast<char *>(buf), len, false});
        }

    private:
        InlineNet *n_;
        int r_;
    };
    int post(const Op &o) {
        for (size_t i = 0; i < pending_.size(); ++i) {
            Op q = pending_[i];
            if (q.send != o.send && q.src == o.src && q.dst == o.dst && q.id == o.id) {
                pending_.erase(pending_.begin() + i);
                const Op &s = o.send ? o : q, &r = o.send ? q : o;
                if (s.len) std::memcpy(r.buf, s.buf, s.len);
                s.ex->complete(s.v);
                r.ex->complete(r.v);
                return 0;
            }
        }
        pending_.push_back(o);
        return 0;
    }
    std::vector<std::unique_ptr<Port>> ports_;
    std::vector<Op> pending_;
};

TEST(CdagExecutor, SurvivesInlineCompletions) {
    for (int p : {2, 3, 5, 8}) {
        World w = make_world(Coll::Allreduce, p, 0, 9, &kHash, false, 1);
        for (const AlgoChoice &a : {algo(Algo::Butterfly), algo(Algo::ReduceBcast, 2, 8, 0, Algo::KaryTree)}) {
            std::vector<std::shared_ptr<const Plan>> plans;
            ASSERT_EQ(build_plans(w, a, &plans, true), "");
            std::vector<Buffers> b = fill(w, 0);
            InlineNet net(p);
            std::vector<std::unique_ptr<Executor>> ex;
            ReduceFn rf{kHash.fn, nullptr};
            for (int r = 0; r < p; ++r) ex.emplace_back(new Executor(plans[r], net.port(r), 5, rf));
            for (int r = 0; r < p; ++r) ASSERT_EQ(ex[r]->start(b[r].send.data(), b[r].recv.data()), 0);
            for (int r = 0; r < p; ++r) {
                EXPECT_TRUE(ex[r]->done()) << describe(w, a);
                EXPECT_EQ(b[r].recv, b[r].expect) << describe(w, a) << " rank " << r;
            }
        }
    }
}

TEST(CdagMemNet, MatchesOnlyIdenticalIdentities) {
    /* Same tags, different schedule ids or sequence numbers never match. */
    Schedule s0(0, 2), s1(1, 2);
    s0.send(1, 0, Buf{Slot::Send, 0, 4});
    s1.recv(0, 0, Buf{Slot::Recv, 0, 4});
    auto p0 = std::make_shared<Plan>(), p1 = std::make_shared<Plan>();
    ASSERT_EQ(compile(s0, p0.get()), "");
    ASSERT_EQ(compile(s1, p1.get()), "");
    MemNet net(2, 3, 0.0);
    Executor a(p0, net.port(0), 1), b(p1, net.port(1), 2);  // ids differ
    uint32_t x = 7, y = 0;
    a.start(&x, nullptr);
    b.start(nullptr, &y);
    net.run();
    EXPECT_FALSE(a.done());
    EXPECT_FALSE(b.done());
    EXPECT_EQ(net.outstanding(), 2u);
}

/* ======================================================================
 * Topology / validation sweep: sizes 1..64, every root
 * ==================================================================== */

/* Every variant, with every op kind and in-place setting it accepts, every
 * size 1..pmax, every root: the set of per-rank schedules must be
 * pre-matched and deadlock free.  Hazards (O(V^2) per rank) are checked on
 * sizes up to 24 for roots 0 and p-1. */
void sweep(const Variant &v, uint64_t count, int pmax) {
    for (const TestOp *op : ops_for(v))
        for (bool ip : in_place_options(v.coll))
            for (int p = 1; p <= pmax; ++p)
                for (int root = 0; root < (is_rooted(v.coll) ? p : 1); ++root) {
                    World w = make_world(v.coll, p, root, count, op, ip, p * 1000 + root);
                    /* Reductions segment in whole elements: 4 per segment,
                     * so `count` (7) still leaves a short one. */
                    AlgoChoice a = v.a;
                    if (op && a.seg_bytes) a.seg_bytes = 4 * op->esize;
                    std::vector<std::shared_ptr<const Plan>> plans;
                    const std::string e = build_plans(w, a, &plans, p <= 24 && (root == 0 || root == p - 1));
                    ASSERT_EQ(e, "") << describe(w, a);
                }
}

class CdagSweep : public ::testing::TestWithParam<Coll> {};

/* Largest communicator of the sweep: 64, or RDRP_CDAG_SWEEP_RANKS.  The
 * sweep is pure computation, but up to 4 min per collective under ASan on
 * a loaded machine and far longer under valgrind; scripts/sanitize.sh runs it to 16 ranks under the
 * sanitizers and valgrind, which still crosses every power-of-two and radix
 * boundary the variants have, and the ordinary run goes to 64. */
int sweep_ranks() {
    const char *e = std::getenv("RDRP_CDAG_SWEEP_RANKS");
    const int n = e && *e ? std::atoi(e) : 64;
    return n >= 1 && n <= 64 ? n : 64;
}

TEST_P(CdagSweep, EveryVariantValidatesForSizes1To64AndAllRoots) {
    for (const Variant &v : all_variants(11)) {
        if (v.coll != GetParam()) continue;
        /* Blocks of 7 bytes / elements; 11-byte segments cut messages of
         * several blocks inside a block.  (Execution tests cut finer.) */
        sweep(v, 7, sweep_ranks());
        if (HasFatalFailure()) return;
    }
}

INSTANTIATE_TEST_SUITE_P(AllCollectives, CdagSweep,
                         ::testing::Values(Coll::Barrier, Coll::Bcast, Coll::Reduce, Coll::Allreduce, Coll::Gather,
                                           Coll::Scatter, Coll::Allgather, Coll::Alltoall, Coll::ReduceScatterBlock,
                                           Coll::ReduceScatter, Coll::Scan, Coll::Exscan, Coll::Gatherv,
                                           Coll::Scatterv, Coll::Allgatherv, Coll::Alltoallv),
                         [](const ::testing::TestParamInfo<Coll> &i) { return std::string(coll_name(i.param)); });

TEST(CdagSweepBarrier, EveryRankWaitsForEveryOtherRank) {
    /* Barrier semantics on the graph: for all ranks q, r some vertex of r
     * (transitively, through dependency and matching edges) waits for a
     * vertex of q, so r cannot complete before q started. */
    for (Algo alg : {Algo::Dissemination, Algo::Butterfly, Algo::Linear})
        for (int p = 1; p <= 40; ++p) {
            World w = make_world(Coll::Barrier, p, 0, 0, nullptr, false, 1);
            std::vector<std::shared_ptr<const Plan>> plans;
            ASSERT_EQ(build_plans(w, algo(alg), &plans, true), "");
            /* Global graph: node = (rank, vertex); edges = deps + send->recv. */
            std::vector<size_t> base(p + 1, 0);
            for (int r = 0; r < p; ++r) base[r + 1] = base[r] + plans[r]->num_vertices();
            std::vector<std::vector<size_t>> out(base[p]);
            std::vector<std::pair<std::vector<int>, size_t>> sends;
            for (int r = 0; r < p; ++r) {
                const Plan &pl = *plans[r];
                for (VertexId v = 0; v < pl.num_vertices(); ++v) {
                    for (uint32_t i = pl.succ_begin[v]; i < pl.succ_begin[v + 1]; ++i)
                        out[base[r] + v].push_back(base[r] + pl.succ[i]);
                    const Op &op = pl.ops[v];
                    if (op.kind == OpKind::Send) sends.push_back({{r, op.peer, int(op.tag)}, base[r] + v});
                }
            }
            for (int r = 0; r < p; ++r) {
                const Plan &pl = *plans[r];
                for (VertexId v = 0; v < pl.num_vertices(); ++v) {
                    const Op &op = pl.ops[v];
                    if (op.kind != OpKind::Recv) continue;
                    for (auto &s : sends)
                        if (s.first == std::vector<int>{op.peer, r, int(op.tag)}) out[s.second].push_back(base[r] + v);
                }
            }
            for (int q = 0; q < p; ++q) {
                std::vector<char> seen(base[p], 0);
                std::vector<size_t> st;
                for (size_t i = base[q]; i < base[q + 1]; ++i) st.push_back(i), seen[i] = 1;
                while (!st.empty()) {
                    size_t x = st.back();
                    st.pop_back();
                    for (size_t y : out[x])
                        if (!seen[y]) seen[y] = 1, st.push_back(y);
                }
                for (int r = 0; r < p; ++r) {
                    if (r == q) continue;
                    bool reached = false;
                    for (size_t i = base[r]; i < base[r + 1]; ++i) reached |= seen[i] != 0;
                    EXPECT_TRUE(reached) << algo_name(alg) << " p " << p << ": rank " << r << " does not wait for " << q;
                }
            }
        }
}

/* ======================================================================
 * Execution with data checking
 * ==================================================================== */

/* Sizes: all small ones, then a sparse sample up to 64. */
const std::vector<int> kExecSizes = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 24, 31, 33, 64};

class CdagExec : public ::testing::TestWithParam<Coll> {};

TEST_P(CdagExec, EveryVariantComputesTheReferenceResult) {
    uint64_t seed = base_seed() + static_cast<uint64_t>(GetParam()) * 1000003;
    for (const Variant &v : all_variants(12)) {
        if (v.coll != GetParam()) continue;
        for (const TestOp *op : ops_for(v))
            for (bool ip : in_place_options(v.coll))
                for (int p : kExecSizes) {
                    if (p > 33 && (ip || op == &kHash)) continue;  // the largest size once per variant
                    /* Counts: 0, 1 and one that no segment size divides. */
                    for (uint64_t count : {uint64_t(0), uint64_t(1), uint64_t(p > 17 ? 5 : 23)}) {
                        if (v.coll == Coll::Barrier && count) continue;
                        const std::vector<int> roots = is_rooted(v.coll) ? std::vector<int>{0, p - 1, p / 3}
                                                                         : std::vector<int>{0};
                        for (int root : roots) {
                            World w = make_world(v.coll, p, root, count, op, ip, ++seed);
                            const std::string e = run_one(w, v.a, ++seed);
                            ASSERT_EQ(e, "") << describe(w, v.a);
                            if (!is_rooted(v.coll) || p == 1) break;
                        }
                    }
                }
    }
}

INSTANTIATE_TEST_SUITE_P(AllCollectives, CdagExec,
                         ::testing::Values(Coll::Barrier, Coll::Bcast, Coll::Reduce, Coll::Allreduce, Coll::Gather,
                                           Coll::Scatter, Coll::Allgather, Coll::Alltoall, Coll::ReduceScatterBlock,
                                           Coll::ReduceScatter, Coll::Scan, Coll::Exscan, Coll::Gatherv,
                                           Coll::Scatterv, Coll::Allgatherv, Coll::Alltoallv),
                         [](const ::testing::TestParamInfo<Coll> &i) { return std::string(coll_name(i.param)); });

TEST(CdagExecOrder, ResultsDoNotDependOnCompletionOrderOrProtocol) {
    /* One schedule, many seeds, all-eager and all-rendezvous. */
    const Variant cases[] = {
        {Coll::Allreduce, algo(Algo::Ring, 2, 8), false},
        {Coll::Allreduce, algo(Algo::Butterfly), true},
        {Coll::Reduce, algo(Algo::KnomialTree, 2, 8), true},
        {Coll::Scan, algo(Algo::Butterfly), true},
        {Coll::Allgather, algo(Algo::Dissemination, 2, 3), true},
    };
    for (const Variant &v : cases)
        for (double eager : {0.0, 1.0, 0.5})
            for (int i = 0; i < 8; ++i) {
                const TestOp *op = is_reduction(v.coll) ? (v.any_op ? &kHash : &kSum) : nullptr;
                World w = make_world(v.coll, 11, 4, 19, op, false, 7);
                ASSERT_EQ(run_one(w, v.a, base_seed() + i * 7919, 1, eager), "") << describe(w, v.a) << " eager " << eager;
            }
}

TEST(CdagExecPersistent, RerunsGiveFreshResultsWhileRanksDrift) {
    /* Four runs per executor, each over new inputs and buffers; a rank
     * restarts as soon as its run is done, so neighbours can be a run
     * apart and only the sequence number keeps their messages apart. */
    uint64_t seed = base_seed() + 99;
    for (const Variant &v : all_variants(12)) {
        const TestOp *op = is_reduction(v.coll) ? (v.any_op ? &kHash : &kSum) : nullptr;
        for (int p : {3, 8}) {
            World w = make_world(v.coll, p, p - 1, 10, op, false, ++seed);
            ASSERT_EQ(run_one(w, v.a, ++seed, 4), "") << describe(w, v.a);
        }
    }
}

TEST(CdagExecDeferred, LocalOpsQueuedByTheStartGiveTheSameResults) {
    /* start_deferred (an engine thread runs the initial copies later):
     * every variant, persistent runs while ranks drift, the queued local
     * operations run at arbitrary points between network events. */
    uint64_t seed = base_seed() + 4242;
    for (const Variant &v : all_variants(12)) {
        const TestOp *op = is_reduction(v.coll) ? (v.any_op ? &kHash : &kSum) : nullptr;
        for (int p : {2, 5})
            for (bool in_place : in_place_options(v.coll)) {
                World w = make_world(v.coll, p, p - 1, 10, op, in_place, ++seed);
                ASSERT_EQ(run_one(w, v.a, ++seed, 3, 0.5, true), "") << describe(w, v.a) << " deferred";
            }
    }
}

TEST(CdagExecDeferred, TheStartPostsMessagesAndLeavesTheOwnBlockCopyQueued) {
    /* alltoall at 2 ranks: the own block is a copy with no incoming edge.
     * start_deferred posts the send and the receive, copies nothing, and
     * the run is not done before run_deferred() however the network went. */
    World w = make_world(Coll::Alltoall, 2, 0, 16, nullptr, false, base_seed() + 5);
    std::vector<std::shared_ptr<const Plan>> plans;
    ASSERT_EQ(build_plans(w, algo(Algo::Pairwise), &plans, false), "");
    MemNet net(2, base_seed() + 6, 1.0);
    std::vector<std::unique_ptr<Executor>> ex;
    std::vector<Buffers> b = fill(w, 0);
    for (int r = 0; r < 2; ++r) ex.emplace_back(new Executor(plans[r], net.port(r), 7));
    for (int r = 0; r < 2; ++r) {
        std::vector<uint8_t> before = b[r].recv;
        ASSERT_EQ(ex[r]->start_deferred(b[r].send.data(), b[r].recv.data()), 0);
        EXPECT_TRUE(ex[r]->has_deferred());
        EXPECT_EQ(b[r].recv, before) << "rank " << r << ": the start copied";
    }
    net.run();
    EXPECT_EQ(net.outstanding(), 0u) << "the start did not post every message";
    for (int r = 0; r < 2; ++r) {
        EXPECT_FALSE(ex[r]->done()) << "rank " << r << " done with its copy still queued";
        EXPECT_EQ(ex[r]->run_deferred(), 1u);
        EXPECT_FALSE(ex[r]->has_deferred());
        EXPECT_TRUE(ex[r]->done());
        EXPECT_EQ(ex[r]->error(), 0);
        EXPECT_EQ(b[r].recv, b[r].expect) << "rank " << r;
        EXPECT_EQ(ex[r]->run_deferred(), 0u);
    }
}

TEST(CdagExecConcurrent, InterleavedSchedulesNeverCross) {
    /* Several collectives on one communicator in flight at once, including
     * two instances of the same plan and identical tags throughout; only
     * the schedule id keeps them apart.  Two runs each. */
    for (int p : {4, 7, 16}) {
        for (uint64_t round = 0; round < 3; ++round) {
            const uint64_t seed = base_seed() + p * 31 + round;
            MemNet net(p, seed, 0.5);
            std::vector<std::unique_ptr<Job>> jobs;
            uint32_t id = 100;
            auto add = [&](Coll c, AlgoChoice a, const TestOp *op, uint64_t count) {
                const uint32_t my_id = id++;
                jobs.emplace_back(new Job(make_world(c, p, p / 2, count, op, false, seed + my_id), a, 2, my_id));
            };
            add(Coll::Allreduce, algo(Algo::Ring, 2, 8), &kSum, 21);
            add(Coll::Allreduce, algo(Algo::Ring, 2, 8), &kSum, 21);  // same plan shape, other data
            add(Coll::Allreduce, algo(Algo::Butterfly), &kHash, 5);
            add(Coll::Bcast, algo(Algo::Chain, 1, 4), nullptr, 29);
            add(Coll::Reduce, algo(Algo::KnomialTree, 2, 8), &kHash, 9);
            add(Coll::Alltoall, algo(Algo::Linear, 2, 3, 2), nullptr, 7);
            add(Coll::Allgather, algo(Algo::Dissemination), nullptr, 6);
            add(Coll::ReduceScatterBlock, algo(Algo::Pairwise), &kHash, 3);
            add(Coll::Scan, algo(Algo::Chain, 1, 8), &kHash, 7);
            add(Coll::Barrier, algo(Algo::Dissemination), nullptr, 0);
            add(Coll::Alltoallv, algo(Algo::Pairwise), nullptr, 5);
            std::vector<Job *> raw;
            for (auto &j : jobs) raw.push_back(j.get());
            ASSERT_EQ(run_jobs(raw, net), "") << "p " << p << " seed " << seed;
        }
    }
}

/* ======================================================================
 * Selection
 * ==================================================================== */

TEST(CdagSelect, PicksValidOrderPreservingVariants) {
    const Coll colls[] = {Coll::Barrier, Coll::Bcast, Coll::Reduce, Coll::Allreduce, Coll::Gather, Coll::Scatter,
                          Coll::Allgather, Coll::Alltoall, Coll::ReduceScatterBlock, Coll::ReduceScatter, Coll::Scan,
                          Coll::Exscan, Coll::Gatherv, Coll::Scatterv, Coll::Allgatherv, Coll::Alltoallv};
    for (Coll c : colls)
        for (const TestOp *op : is_reduction(c) ? std::vector<const TestOp *>{&kSum, &kHash}
                                                : std::vector<const TestOp *>{nullptr})
            for (int p : {1, 2, 3, 5, 8, 13, 32, 64})
                for (uint64_t count : {uint64_t(0), uint64_t(1), uint64_t(100), uint64_t(3000), uint64_t(40000)}) {
                    World w = make_world(c, p, p / 2, count, op, false, p + count);
                    const AlgoChoice a = select(w.spec[0]);
                    for (int r = 1; r < p; ++r) {
                        const AlgoChoice b = select(w.spec[r]);
                        ASSERT_TRUE(b.algo == a.algo && b.radix == a.radix && b.seg_bytes == a.seg_bytes &&
                                    b.window == a.window)
                            << "ranks disagree: " << describe(w, a);
                    }
                    if (op && !op->commutative) {
                        EXPECT_TRUE(a.algo != Algo::Ring && a.algo != Algo::Dissemination) << describe(w, a);
                    }
                    std::vector<std::shared_ptr<const Plan>> plans;
                    ASSERT_EQ(build_plans(w, algo(Algo::Auto), &plans, false), "") << describe(w, a);
                }
}

TEST(CdagSelect, AutoVariantsRunCorrectlyOnLargerMessages) {
    uint64_t seed = base_seed() + 7777;
    struct C {
        Coll c;
        const TestOp *op;
        uint64_t count;
    };
    const C cases[] = {{Coll::Allreduce, &kSum, 40000}, {Coll::Allreduce, &kHash, 20000},
                       {Coll::Bcast, nullptr, 300000},  {Coll::Reduce, &kSum, 90000},
                       {Coll::Reduce, &kHash, 3000},    {Coll::Allgather, nullptr, 9000},
                       {Coll::Alltoall, nullptr, 2000}, {Coll::ReduceScatterBlock, &kSum, 9000},
                       {Coll::ReduceScatter, &kHash, 3000}, {Coll::Scan, &kHash, 5000},
                       {Coll::Exscan, &kSum, 9000},     {Coll::Gather, nullptr, 20000}};
    for (const C &x : cases)
        for (int p : {3, 6}) {
            World w = make_world(x.c, p, 1, x.count, x.op, false, ++seed);
            ASSERT_EQ(run_one(w, algo(Algo::Auto), ++seed), "") << describe(w, select(w.spec[0]));
        }
}

/* Barrier: fan-in to rank 0 and fan-out at 4-7 ranks (coll/tuned's
 * choice there), dissemination below and above; every rank selects alike. */
TEST(CdagSelect, BarrierLinearAtFourToSevenRanks) {
    for (int p = 1; p <= 20; ++p) {
        World w = make_world(Coll::Barrier, p, 0, 0, nullptr, false, 1);
        for (int r = 0; r < p; ++r)
            EXPECT_EQ(select(w.spec[r]).algo, p >= 4 && p < 8 ? Algo::Linear : Algo::Dissemination) << "p " << p;
    }
}

/* Bcast and Reduce of up to 4 KiB: flat at 4-7 ranks, binomial below and
 * above (non-commutative reductions too: both trees combine in vrank
 * order); every rank alike, and the plans run. */
TEST(CdagSelect, SmallRootedCallsFlatAtFourToSevenRanks) {
    for (Coll c : {Coll::Bcast, Coll::Reduce})
        for (int p = 2; p <= 12; ++p)
            for (uint64_t count : {uint64_t(1), uint64_t(64), uint64_t(9000)})
                for (const TestOp *op : c == Coll::Reduce ? std::vector<const TestOp *>{&kSum, &kHash}
                                                          : std::vector<const TestOp *>{nullptr}) {
                    World w = make_world(c, p, p / 2, count, op, false, 1);
                    const uint64_t n = count * (op ? w.spec[0].elem_size : 1);
                    for (int r = 0; r < p; ++r) {
                        const Algo a = select(w.spec[r]).algo;
                        if (n <= 4096 && p >= 4 && p < 8)
                            EXPECT_EQ(a, Algo::Linear) << coll_name(c) << " p " << p << " n " << n;
                        else if (n <= 4096)
                            EXPECT_EQ(a, Algo::KnomialTree) << coll_name(c) << " p " << p << " n " << n;
                        else
                            EXPECT_NE(a, Algo::Linear) << coll_name(c) << " p " << p << " n " << n;
                    }
                    if (n <= 4096) ASSERT_EQ(run_one(w, algo(Algo::Auto), 300 + p + count), "") << describe(w, select(w.spec[0]));
                }
}

/* Alltoall of large blocks: every pair at once below 8 ranks (from 3),
 * pairwise from 8 and at 2; small blocks linear everywhere. */
TEST(CdagSelect, AlltoallLinearBelowEightRanks) {
    for (int p = 2; p <= 12; ++p)
        for (uint64_t blk : {uint64_t(512), uint64_t(65536), uint64_t(65537), uint64_t(1) << 20}) {
            World w = make_world(Coll::Alltoall, p, 0, blk, nullptr, false, 1);
            const Algo want = blk <= 65536 || (p >= 3 && p < 8) ? Algo::Linear : Algo::Pairwise;
            for (int r = 0; r < p; ++r) EXPECT_EQ(select(w.spec[r]).algo, want) << "p " << p << " blk " << blk;
        }
}

/* Gather and Scatter: flat (one hop to or from the root) at 4-7 ranks,
 * binomial below and above up to 64 KiB, flat beyond; every rank alike. */
TEST(CdagSelect, GatherScatterFlatAtFourToSevenRanks) {
    for (Coll c : {Coll::Gather, Coll::Scatter})
        for (int p = 2; p <= 12; ++p)
            for (uint64_t count : {uint64_t(1), uint64_t(512), uint64_t(40000)}) {
                World w = make_world(c, p, p - 1, count, nullptr, false, 1);
                const Algo want = (p >= 4 && p < 8) || count * p > 65536 ? Algo::Linear : Algo::KnomialTree;
                for (int r = 0; r < p; ++r)
                    EXPECT_EQ(select(w.spec[r]).algo, want) << coll_name(c) << " p " << p << " count " << count;
            }
}

/* Reduce_scatter of small vectors with a commutative op: recursive
 * halving (log2 p exchanges) from 3 ranks; non-commutative ops and
 * larger vectors keep the order-preserving tree, 2 ranks one exchange. */
TEST(CdagSelect, ReduceScatterHalvesSmallCommutativeVectors) {
    for (int p = 2; p <= 9; ++p)
        for (uint64_t count : {uint64_t(1), uint64_t(16), uint64_t(64), uint64_t(128)})
            for (const TestOp *op : {&kSum, &kHash}) {
                World w = make_world(Coll::ReduceScatterBlock, p, 0, count, op, false, 1);
                const uint64_t n = count * uint64_t(p) * w.spec[0].elem_size;
                const Algo want = p == 2 ? Algo::Pairwise
                                  : op->commutative && n <= 512 ? Algo::Butterfly
                                                                : Algo::ReduceThenScatter;
                for (int r = 0; r < p; ++r) EXPECT_EQ(select(w.spec[r]).algo, want) << "p " << p << " n " << n;
                ASSERT_EQ(run_one(w, algo(Algo::Auto), 100 + p + count), "") << describe(w, select(w.spec[0]));
            }
}

/* At 2 ranks a rooted tree is one hop: nothing pipelines, and every extra
 * segment is one more rendezvous.  Bcast and Reduce go as one message at
 * every size, Allreduce as one exchange (any op). */
TEST(CdagSelect, TwoRanksMoveWholeMessages) {
    for (uint64_t count : {uint64_t(1), uint64_t(4097), uint64_t(65536), uint64_t(300000), uint64_t(4u << 20)}) {
        for (Coll c : {Coll::Bcast, Coll::Reduce})
            for (const TestOp *op : c == Coll::Reduce ? std::vector<const TestOp *>{&kSum, &kHash}
                                                      : std::vector<const TestOp *>{nullptr}) {
                /* (a non-commutative reduce to root 1 combines at rank 0 and
                 * forwards: two messages, by design) */
                World w = make_world(c, 2, op == &kHash ? 0 : 1, count, op, false, count);
                for (int r = 0; r < 2; ++r) {
                    const AlgoChoice a = select(w.spec[r]);
                    EXPECT_EQ(a.seg_bytes, 0u) << describe(w, a);
                    Schedule s;
                    ASSERT_EQ(generate(w.spec[r], algo(Algo::Auto), &s), Status::Ok) << describe(w, a);
                    size_t msgs = 0;
                    for (const auto &o : s.ops()) msgs += o.kind == OpKind::Send || o.kind == OpKind::Recv;
                    EXPECT_EQ(msgs, 1u) << "rank " << r << ": " << describe(w, a);
                }
            }
        for (const TestOp *op : {&kSum, &kHash}) {
            World w = make_world(Coll::Allreduce, 2, 0, count, op, false, count);
            EXPECT_EQ(select(w.spec[0]).algo, Algo::Butterfly) << describe(w, select(w.spec[0]));
            /* small reduce_scatter: one exchange, not a reduce and a scatter */
            World rs = make_world(Coll::ReduceScatterBlock, 2, 0, count, op, false, count);
            if (count * 2 * rs.spec[0].elem_size <= 65536) {
                EXPECT_EQ(select(rs.spec[0]).algo, Algo::Pairwise) << describe(rs, select(rs.spec[0]));
            }
        }
    }
}

/* Deeper trees pipeline with the power of two nearest sqrt(n x 32 KiB),
 * never below 64 KiB (a smaller segment costs more in rendezvous than the
 * pipeline gains). */
TEST(CdagSelect, PipelineSegmentIsNearestPowerOfTwoOfTheBalance) {
    uint64_t prev = 0;
    for (uint64_t n = 1; n < (uint64_t(1) << 34); n = n * 3 / 2 + 1) {
        const uint64_t seg = pipeline_segment(n);
        ASSERT_EQ(seg & (seg - 1), 0u) << n;
        ASSERT_GE(seg, 65536u) << n;
        ASSERT_GE(seg, prev) << n;  // monotone in n
        prev = seg;
        const double ideal = std::sqrt(double(n) * 32768.0);
        if (seg > 65536) ASSERT_LE(double(seg), ideal * std::sqrt(2.0) + 1) << n;
        ASSERT_GE(double(seg), ideal / std::sqrt(2.0) - 1) << n;
    }
    for (int p : {3, 4, 8, 64})
        for (uint64_t count : {uint64_t(4097), uint64_t(65536), uint64_t(300000), uint64_t(4u << 20), uint64_t(64u << 20)}) {
            World w = make_world(Coll::Bcast, p, 0, count, nullptr, false, count);
            const AlgoChoice a = select(w.spec[0]);
            EXPECT_EQ(a.seg_bytes, pipeline_segment(count)) << describe(w, a);
        }
}

/* The 2-rank choices on data: non-commutative ops, roots 0 and 1, in place. */
TEST(CdagSelect, TwoRankAutoVariantsRunCorrectly) {
    uint64_t seed = base_seed() + 8888;
    struct C {
        Coll c;
        const TestOp *op;
        uint64_t count;
    };
    const C cases[] = {{Coll::Bcast, nullptr, 300000}, {Coll::Reduce, &kSum, 90000}, {Coll::Reduce, &kHash, 40000},
                       {Coll::Allreduce, &kSum, 40000}, {Coll::Allreduce, &kHash, 20000},
                       {Coll::ReduceScatterBlock, &kSum, 1000}, {Coll::ReduceScatterBlock, &kHash, 3000},
                       {Coll::ReduceScatter, &kHash, 3000}};
    for (const C &x : cases)
        for (int root : {0, 1})
            for (bool in_place : {false, true}) {
                if (in_place && x.c == Coll::Bcast) continue;
                World w = make_world(x.c, 2, root, x.count, x.op, in_place, ++seed);
                ASSERT_EQ(run_one(w, algo(Algo::Auto), ++seed), "") << describe(w, select(w.spec[0]));
            }
}

/* A large own block at a gather's or scatter's root (at least 64 KiB) is
 * copied last: after the root's receives complete (gather: the children's
 * sends complete before the root spends its memcpy) or after its sends
 * are posted (scatter: the children take their data while the root
 * copies).  Every tree variant, segmented or not, every root, 2 to 5 ranks:
 * the schedules validate, run to the reference result under random
 * completion orders, and order the copy that way. */
TEST(CdagGenOrder, LargeOwnBlockIsCopiedLastAtTheRoot) {
    uint64_t seed = base_seed() + 9191;
    for (Coll c : {Coll::Gather, Coll::Scatter})
        for (uint64_t count : {uint64_t(65535), uint64_t(65536), uint64_t(70001)})
            for (int p = 2; p <= 5; ++p)
                for (int root = 0; root < p; root += (p > 3 ? 2 : 1))
                    for (const AlgoChoice &a : tree_algos(count % 2 ? 40000 : 0)) {
                        World w = make_world(c, p, root, count, nullptr, false, ++seed);
                        std::vector<std::shared_ptr<const Plan>> plans;
                        ASSERT_EQ(build_plans(w, a, &plans, true), "") << describe(w, a);
                        const Plan &pl = *plans[root];
                        VertexId cp = kNoVertex;
                        uint32_t recvs = 0, sends = 0;
                        for (VertexId v = 0; v < pl.num_vertices(); ++v) {
                            if (pl.ops[v].kind == OpKind::Copy) cp = v;
                            if (pl.ops[v].kind == OpKind::Recv) ++recvs;
                            if (pl.ops[v].kind == OpKind::Send) {
                                ++sends;
                                if (count >= 65536) ASSERT_LT(v, cp) << describe(w, a) << ": a send after the copy";
                                else ASSERT_GT(v, cp) << describe(w, a) << ": small own block not copied first";
                            }
                        }
                        ASSERT_NE(cp, kNoVertex) << describe(w, a);
                        if (c == Coll::Gather && count >= 65536)
                            EXPECT_EQ(pl.threshold[cp], recvs) << describe(w, a) << ": copy not after every receive";
                        if (c == Coll::Gather) EXPECT_EQ(sends, 0u);
                        ASSERT_EQ(run_one(w, a, ++seed), "") << describe(w, a);
                    }
}

TEST(CdagGenerate, RejectsBadArgumentsAndUnsupportedCombinations) {
    Schedule s;
    CollSpec c;
    c.coll = Coll::Allreduce;
    c.size = 4;
    c.rank = 4;
    EXPECT_EQ(generate(c, algo(Algo::Butterfly), &s), Status::BadArgs);
    c.rank = 1;
    c.count = 8;
    c.elem_size = 4;
    c.commutative = false;
    EXPECT_EQ(generate(c, algo(Algo::Ring), &s), Status::Unsupported);
    EXPECT_EQ(generate(c, algo(Algo::Dissemination), &s), Status::Unsupported);
    EXPECT_EQ(s.num_vertices(), 0u);
    EXPECT_EQ(generate(c, algo(Algo::Butterfly), &s), Status::Ok);
    c.coll = Coll::Bcast;
    c.root = 9;
    EXPECT_EQ(generate(c, algo(Algo::Chain), &s), Status::BadArgs);
    c.root = 0;
    EXPECT_EQ(generate(c, algo(Algo::KnomialTree, 1), &s), Status::Unsupported);
    c.coll = Coll::Allgatherv;  // needs counts and displs
    EXPECT_EQ(generate(c, algo(Algo::Ring), &s), Status::BadArgs);
}

/* coll_cdag_verbose explains a plan with effective_choice(): it must be the
 * variant generate() really builds -- select()'s under Auto (same schedule
 * as generating with that choice spelled out), the forced one otherwise. */
TEST(CdagSelect, EffectiveChoiceIsWhatGenerateBuilds) {
    const Coll colls[] = {Coll::Barrier, Coll::Bcast, Coll::Reduce, Coll::Allreduce, Coll::Allgather,
                          Coll::Alltoall, Coll::ReduceScatterBlock, Coll::Scan};
    for (Coll c : colls)
        for (int p : {2, 3, 8})
            for (uint64_t count : {uint64_t(1), uint64_t(3000), uint64_t(100000)}) {
                World w = make_world(c, p, 0, count, is_reduction(c) ? &kSum : nullptr, false, p + count);
                for (int r = 0; r < p; ++r) {
                    const CollSpec &s = w.spec[r];
                    const AlgoChoice e = effective_choice(s, algo(Algo::Auto));
                    const AlgoChoice sel = select(s);
                    ASSERT_TRUE(e.algo == sel.algo && e.radix == sel.radix && e.seg_bytes == sel.seg_bytes &&
                                e.window == sel.window && e.tree == sel.tree)
                        << describe(w, e);
                    Schedule a, b;
                    ASSERT_EQ(generate(s, algo(Algo::Auto), &a), Status::Ok) << describe(w, e);
                    ASSERT_EQ(generate(s, e, &b), Status::Ok) << describe(w, e);
                    EXPECT_EQ(a.ops().size(), b.ops().size()) << describe(w, e);
                    const AlgoChoice forced = algo(Algo::Linear);
                    EXPECT_EQ(effective_choice(s, forced).algo, Algo::Linear);
                }
            }
}

}  // namespace

/* The engine thread's real-time priority (coll_cdag/cdag_engine_policy.h):
 * one below the application's thread, so the application preempts its
 * engine on the core they share; never below the policy's lowest (it must
 * not fall to the normal policy, where any process would preempt it);
 * unchanged under a non-real-time policy. */
namespace {
TEST(CdagEnginePolicy, EngineRunsBelowTheApplication)
{
    for (int policy : {SCHED_RR, SCHED_FIFO}) {
        const int lo = sched_get_priority_min(policy), hi = sched_get_priority_max(policy);
        for (int prio = lo; prio <= hi; ++prio) {
            const int e = cdag_svc::engine_rt_priority(policy, prio, lo);
            EXPECT_GE(e, lo) << policy << " " << prio;
            EXPECT_LE(e, prio) << policy << " " << prio;
            EXPECT_EQ(e, prio > lo ? prio - 1 : prio) << policy << " " << prio;
        }
    }
    EXPECT_EQ(cdag_svc::engine_rt_priority(SCHED_RR, 10, 1), 9);  // chrt -r 10: the engine at 9
    EXPECT_EQ(cdag_svc::engine_rt_priority(SCHED_OTHER, 0, 0), 0);
    EXPECT_EQ(cdag_svc::engine_rt_priority(SCHED_BATCH, 0, 0), 0);
}
}  // namespace
