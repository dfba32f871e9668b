/*
 * credit_sim: deterministic simulation of the rdrp credit engine with
 * hundreds of virtual ranks, reproducing the experiments of the thesis
 * (chapters 5-7) with the real engine classes, and printing the results as
 * markdown tables.
 *
 *   credit_sim                  full report (under ~2 minutes)
 *   credit_sim --quick          small CI smoke run (< 10 s), same checks
 *   credit_sim --only NAME      one experiment: sweep, partial, multiphase,
 *                               scatterv, memory
 *
 * Exit status: 0 if every run finished and the oracle (sim_world.h) found
 * no violated invariant; 1 otherwise (the violations are printed).
 */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "common/credit/credit_engine.h"
#include "sim_patterns.h"
#include "sim_table.h"
#include "sim_world.h"

using namespace sim;

namespace {

/* Sizes of every experiment; --quick shrinks them. */
struct Scale {
    uint32_t sweep_ranks, sweep_reps, pingpong_reps, msg_packets;
    std::vector<uint32_t> sweep_spp;
    uint32_t partial_ranks, partial_reps;
    std::vector<uint32_t> partial_spp;
    uint32_t phase_ranks, phase_reps, phase_spp, phase_msg, phase_print_every;
    uint32_t scat_ranks, scat_iters, scat_spp;
    std::vector<uint32_t> scat_per_root;
    uint64_t check_every;
};

Scale full_scale()
{
    return Scale{128, 6, 200, 8, {4, 6, 8, 12, 16, 24, 32},
                 128, 5, {4, 6, 8, 12, 16},
                 256, 8, 10, 10, 4,
                 64, 200, 6, {1, 2, 5, 10, 25, 50},
                 0};
}

Scale quick_scale()
{
    return Scale{32, 3, 40, 8, {5, 16},  /* 5: quota 3, the Table 5.1 edge case */
                 32, 3, {6},
                 64, 2, 10, 10, 2,
                 16, 32, 6, {1, 8},
                 500};
}

int g_failures = 0;

RunResult run(Protocol proto, const Pattern &pat, uint32_t ranks, uint32_t spp, const Scale &sc,
              World::Sampler sampler = nullptr)
{
    RunConfig cfg;
    cfg.protocol = proto;
    cfg.nranks = ranks;
    cfg.slots_per_peer = spp;
    cfg.check_every = sc.check_every;
    World w(cfg, pat);
    if (sampler)
        w.set_sampler(std::move(sampler));
    RunResult r = w.run();
    if (!r.completed || !r.violations.empty()) {
        ++g_failures;
        std::fprintf(stderr, "FAIL %s / %s / %u ranks / %u slots per peer:\n", pat.name().c_str(),
                     protocol_name(proto), ranks, spp);
        for (const std::string &v : r.violations)
            std::fprintf(stderr, "  %s\n", v.c_str());
    }
    return r;
}

double overhead_pct(const RunResult &r, const RunResult &ref)
{
    return 100.0 * (double(r.end_ns) - double(ref.end_ns)) / double(ref.end_ns);
}

/* A run split at the end of rank 0's first sampled step (the first
 * iteration, barrier-synchronised): warm-up vs steady state, as benchmarks
 * (IMB) discard a warm-up iteration. */
struct Timed {
    RunResult res;
    uint64_t warm_ns = 0;
    double steady_ns() const { return double(res.end_ns - warm_ns); }
};

Timed run_timed(Protocol proto, const Pattern &pat, uint32_t ranks, uint32_t spp, const Scale &sc)
{
    Timed t;
    t.res = run(proto, pat, ranks, spp, sc, [&t](const World &, uint32_t rank, int32_t, uint64_t now) {
        if (rank == 0 && t.warm_ns == 0)
            t.warm_ns = now;
    });
    return t;
}

double steady_pct(const Timed &r, const Timed &ref) { return 100.0 * (r.steady_ns() / ref.steady_ns() - 1.0); }
double warm_pct(const Timed &r, const Timed &ref) { return 100.0 * (double(r.warm_ns) / double(ref.warm_ns) - 1.0); }

double per100(uint64_t a, uint64_t b) { return b == 0 ? 0.0 : 100.0 * double(a) / double(b); }

double stall_pct(const RunResult &r, uint32_t ranks)
{
    return r.end_ns == 0 ? 0.0 : 100.0 * double(r.stall_ns) / (double(r.end_ns) * ranks);
}

/* ----------------------------------------------- Fig. 7.1 / 7.2 analogue */

void sweep_pattern(const char *title, const Pattern &pat, uint32_t ranks, const Scale &sc)
{
    const Timed ref = run_timed(Protocol::kReference, pat, ranks, 1, sc);
    std::printf("#### %s (%u ranks; reference: first iteration %.1f us, the rest %.1f us, %llu data packets)\n\n",
                title, ranks, ref.warm_ns / 1e3, ref.steady_ns() / 1e3, (unsigned long long)ref.res.data_packets);
    Table t({"slots/peer", "overhead static", "overhead dynamic", "stalled static", "stalled dynamic",
             "delayed sends static", "delayed sends dynamic", "control pkts/100 data static",
             "control pkts/100 data dynamic", "compulsory requests", "1st iteration static / dynamic"});
    for (uint32_t spp : sc.sweep_spp) {
        const Timed s = run_timed(Protocol::kStatic, pat, ranks, spp, sc);
        const Timed d = run_timed(Protocol::kDynamic, pat, ranks, spp, sc);
        t.row({std::to_string(spp), fmt("%.1f %%", steady_pct(s, ref)), fmt("%.1f %%", steady_pct(d, ref)),
               fmt("%.1f %%", stall_pct(s.res, ranks)), fmt("%.1f %%", stall_pct(d.res, ranks)),
               fmt("%.1f", per100(s.res.delayed, s.res.data_packets)),
               fmt("%.1f", per100(d.res.delayed, d.res.data_packets)),
               fmt("%.1f", per100(s.res.control_packets(), s.res.data_packets)),
               fmt("%.1f", per100(d.res.control_packets(), d.res.data_packets)), std::to_string(d.res.requests),
               fmt("%.0f %%", warm_pct(s, ref)) + " / " + fmt("%.0f %%", warm_pct(d, ref))});
    }
    t.print();
}

void experiment_sweep(const Scale &sc)
{
    std::printf("### Balanced alltoall vs multi-pingpong (thesis Fig. 7.1 / 7.2)\n\n"
                "Messages of %u packets; mailbox = slots/peer x (ranks - 1), credit_slots = static_slots = 2.\n"
                "overhead = time of iterations 2..%u vs the reference run (unlimited mailbox, no flow control);\n"
                "the last column is the first (warm-up) iteration's overhead: dynamic mode starts every sender at\n"
                "static_slots credits (thesis §6.3).  stalled = share of rank-time idle with data blocked on credits\n"
                "(whole run); delayed sends = times a send found no credit, per 100 data packets.\n\n",
                sc.msg_packets, sc.sweep_reps);
    const auto a2a = alltoall(sc.sweep_ranks, sc.sweep_ranks, sc.sweep_reps, sc.msg_packets, true);
    sweep_pattern("alltoall", *a2a, sc.sweep_ranks, sc);
    const auto mpp = multi_pingpong(sc.sweep_ranks, sc.pingpong_reps, 2 * sc.msg_packets);
    sweep_pattern(("multi-pingpong, " + std::to_string(sc.sweep_ranks / 2) + " pairs, " +
                   std::to_string(2 * sc.msg_packets) + "-packet messages").c_str(),
                  *mpp, sc.sweep_ranks, sc);
}

/* --------------------------------------------------- Fig. 5.9 / 6.5 analogue */

void experiment_partial(const Scale &sc)
{
    const uint32_t n = sc.partial_ranks;
    std::printf("### Alltoall among part of the job, the rest in a barrier (thesis Fig. 5.9 / 6.5)\n\n"
                "%u ranks; each iteration an alltoall among ranks [0, group) then a barrier of all; %u "
                "iterations, %u-packet messages.  Overhead of iterations 2.. vs the reference run, "
                "static / dynamic.\n\n",
                n, sc.partial_reps, sc.msg_packets);
    std::vector<uint32_t> groups;
    for (uint32_t g = n; g >= std::max<uint32_t>(4, n / 8); g /= 2)
        groups.push_back(g);
    std::vector<std::string> header{"slots/peer"};
    for (uint32_t g : groups)
        header.push_back(std::to_string(g) + "/" + std::to_string(n) + " static / dynamic");
    Table t(header);
    std::vector<Timed> refs;
    std::vector<std::unique_ptr<Pattern>> pats;
    for (uint32_t g : groups) {
        pats.push_back(alltoall(n, g, sc.partial_reps, sc.msg_packets, true));
        refs.push_back(run_timed(Protocol::kReference, *pats.back(), n, 1, sc));
    }
    for (uint32_t spp : sc.partial_spp) {
        std::vector<std::string> cells{std::to_string(spp)};
        for (size_t i = 0; i < groups.size(); ++i) {
            const Timed s = run_timed(Protocol::kStatic, *pats[i], n, spp, sc);
            const Timed d = run_timed(Protocol::kDynamic, *pats[i], n, spp, sc);
            cells.push_back(fmt("%.0f %%", steady_pct(s, refs[i])) + " / " + fmt("%.0f %%", steady_pct(d, refs[i])));
        }
        t.row(cells);
    }
    t.print();
}

/* ----------------------------------------------------- §7.3, Fig. 7.4 */

struct CreditSamples {
    /* per iteration: end time (rank 0) and rank 0's credits towards each rank */
    std::vector<uint64_t> end_ns;
    std::vector<std::vector<uint32_t>> credits;
};

World::Sampler sample_rank0(CreditSamples &out)
{
    return [&out](const World &w, uint32_t rank, int32_t tag, uint64_t now) {
        if (rank != 0)
            return;
        if (out.end_ns.size() <= size_t(tag)) {
            out.end_ns.resize(size_t(tag) + 1);
            out.credits.resize(size_t(tag) + 1);
        }
        out.end_ns[size_t(tag)] = now;
        std::vector<uint32_t> c(w.nranks());
        for (uint32_t d = 1; d < w.nranks(); ++d)
            c[d] = w.credits(0, d);
        out.credits[size_t(tag)] = std::move(c);
    };
}

std::string min_med_max(const std::vector<uint32_t> &c, uint32_t lo, uint32_t hi)
{
    std::vector<uint32_t> v(c.begin() + lo, c.begin() + hi);
    std::sort(v.begin(), v.end());
    return std::to_string(v.front()) + " / " + std::to_string(v[v.size() / 2]) + " / " + std::to_string(v.back());
}

void experiment_multiphase(const Scale &sc)
{
    const uint32_t n = sc.phase_ranks;
    const std::vector<uint32_t> groups{n, n / 4, n / 2, n, n / 2, n / 4, n};
    const auto pat = multi_phase(n, groups, sc.phase_reps, sc.phase_msg);
    std::printf("### Credit reallocation in a multi-phase application (thesis §7.3, Fig. 7.4)\n\n"
                "%u ranks (the thesis' 1024 scaled by 1/%u); phases of %u alltoalls among ranks [0, group), "
                "groups %u -> %u -> %u -> %u -> %u -> %u -> %u, each alltoall followed by a barrier of all ranks; "
                "%u-packet messages, %u slots per peer (data region %u/peer, %.0f %% of a message; thesis: 30 "
                "slots for 37-packet messages).\n\n",
                n, 1024 / n, sc.phase_reps, groups[0], groups[1], groups[2], groups[3], groups[4], groups[5],
                groups[6], sc.phase_msg, sc.phase_spp, sc.phase_spp - 2,
                100.0 * (sc.phase_spp - 2) / sc.phase_msg);
    CreditSamples ref_s, st_s, dy_s;
    const RunResult ref = run(Protocol::kReference, *pat, n, 1, sc, sample_rank0(ref_s));
    const RunResult st = run(Protocol::kStatic, *pat, n, sc.phase_spp, sc, sample_rank0(st_s));
    const RunResult dy = run(Protocol::kDynamic, *pat, n, sc.phase_spp, sc, sample_rank0(dy_s));
    if (ref_s.end_ns.size() != groups.size() * sc.phase_reps || st_s.end_ns.size() != ref_s.end_ns.size() ||
        dy_s.end_ns.size() != ref_s.end_ns.size()) {
        std::fprintf(stderr, "FAIL multi-phase: missing samples\n");
        ++g_failures;
        return;
    }
    Table phases({"phase", "group", "reference (us)", "static (us)", "dynamic (us)", "static overhead",
                  "dynamic overhead"});
    auto phase_time = [&](const CreditSamples &s, size_t p) {
        const size_t first = p * sc.phase_reps, last = first + sc.phase_reps - 1;
        const uint64_t start = first == 0 ? 0 : s.end_ns[first - 1];
        return double(s.end_ns[last] - start);
    };
    for (size_t p = 0; p < groups.size(); ++p) {
        const double r = phase_time(ref_s, p), s = phase_time(st_s, p), d = phase_time(dy_s, p);
        phases.row({std::to_string(p + 1), std::to_string(groups[p]), fmt("%.0f", r / 1e3), fmt("%.0f", s / 1e3),
                    fmt("%.0f", d / 1e3), fmt("%.0f %%", 100 * (s - r) / r), fmt("%.0f %%", 100 * (d - r) / r)});
    }
    phases.row({"all", "", fmt("%.0f", ref.end_ns / 1e3), fmt("%.0f", st.end_ns / 1e3), fmt("%.0f", dy.end_ns / 1e3),
                fmt("%.0f %%", overhead_pct(st, ref)), fmt("%.0f %%", overhead_pct(dy, ref))});
    phases.print();
    std::printf("Control packets per 100 data packets: static %.1f, dynamic %.1f (compulsory requests %llu, "
                "steals %llu).\n\n",
                per100(st.control_packets(), st.data_packets), per100(dy.control_packets(), dy.data_packets),
                (unsigned long long)dy.requests, (unsigned long long)dy.steals);

    const uint32_t a = n / 4, b = n / 2;
    std::printf("Credits rank 0 holds towards the ranks of each group after alltoall 1 and every %uth one, dynamic mode, "
                "min / median / max (static mode holds %u towards everybody at most):\n\n",
                sc.phase_print_every, sc.phase_spp - 2);
    Table ev({"alltoall #", "phase group", "ranks (0," + std::to_string(a) + ")",
              "ranks [" + std::to_string(a) + "," + std::to_string(b) + ")",
              "ranks [" + std::to_string(b) + "," + std::to_string(n) + ")"});
    for (size_t i = 0; i < dy_s.credits.size(); ++i) {
        if ((i + 1) % sc.phase_print_every != 0 && i != 0)
            continue;
        const auto &c = dy_s.credits[i];
        ev.row({std::to_string(i + 1), std::to_string(groups[i / sc.phase_reps]), min_med_max(c, 1, a),
                min_med_max(c, a, b), min_med_max(c, b, n)});
    }
    ev.print();
}

/* ------------------------------------------------------ Fig. 7.9 / 7.10 */

void experiment_scatterv(const Scale &sc)
{
    const uint32_t n = sc.scat_ranks;
    std::printf("### Scatterv with a rotating root (thesis Fig. 7.9 / 7.10)\n\n"
                "%u ranks, %u scatters of %u-packet messages, %u slots per peer; the root changes after "
                "`repetitions` scatters (IMB: after every one).  Time per scatter.\n\n",
                n, sc.scat_iters, sc.msg_packets, sc.scat_spp);
    Table t({"repetitions per root", "reference (us)", "static (us)", "dynamic (us)", "static overhead",
             "dynamic overhead", "compulsory requests"});
    for (uint32_t per_root : sc.scat_per_root) {
        const auto pat = scatterv_rotating(n, sc.scat_iters, per_root, sc.msg_packets);
        const RunResult r = run(Protocol::kReference, *pat, n, 1, sc);
        const RunResult s = run(Protocol::kStatic, *pat, n, sc.scat_spp, sc);
        const RunResult d = run(Protocol::kDynamic, *pat, n, sc.scat_spp, sc);
        const double k = 1e3 * sc.scat_iters;
        t.row({std::to_string(per_root), fmt("%.2f", r.end_ns / k), fmt("%.2f", s.end_ns / k),
               fmt("%.2f", d.end_ns / k), fmt("%.0f %%", overhead_pct(s, r)), fmt("%.0f %%", overhead_pct(d, r)),
               std::to_string(d.requests)});
    }
    t.print();
}

/* ----------------------------------------------------------- Table 7.1 */

void experiment_memory()
{
    namespace rc = rdrp::credit;
    const rc::Footprint fs = rc::footprint(rc::Mode::kStatic, 2), fd = rc::footprint(rc::Mode::kDynamic, 2);
    std::printf("### Memory per receiver (thesis eq. 7.1 / 7.2, Table 7.1)\n\n"
                "From sizeof of the engine's structures (credit_slots = 2): per peer, static %zu B receiver + %zu B "
                "sender, dynamic %zu B receiver (counters %zu + threshold FIFO %zu + list links %zu) + %zu B sender; "
                "slot table %zu B per data slot; endpoint object %zu B.  Thesis: static 4n + 2 B, dynamic 150n B.\n"
                "Totals add 64-byte slots as in eq. 7.2: 64 slots/peer static, 16 slots/peer dynamic "
                "(the sizes giving ~3 %% IMB overhead in Fig. 7.12).  MB = 2^20 bytes.\n\n",
                fs.receiver_per_peer, fs.sender_per_peer, fd.receiver_per_peer,
                fd.receiver_per_peer - rc::ThresholdFifo::bytes_per_peer(3) - rc::ActivityLists::bytes_per_peer(),
                rc::ThresholdFifo::bytes_per_peer(3), rc::ActivityLists::bytes_per_peer(), fd.sender_per_peer,
                fs.slot_bytes, fs.fixed);
    Table t({"# processes", "thesis static (MB)", "ours static (MB)", "thesis dynamic (MB)", "ours dynamic (MB)",
             "ours: engine state static / dynamic (MB)"});
    const double mb = 1024.0 * 1024.0;
    for (uint64_t n : {1024ull, 4096ull, 16384ull, 65536ull, 262144ull}) {
        const double th_s = double(4 * n + 2 + 4096 * n) / mb, th_d = double(150 * n + 1024 * n) / mb;
        const uint64_t st_struct = rc::structure_bytes(rc::Mode::kStatic, 2, n, 62 * n);
        const uint64_t dy_struct = rc::structure_bytes(rc::Mode::kDynamic, 2, n, 14 * n);
        t.row({std::to_string(n / 1024) + "K", fmt("%.1f", th_s), fmt("%.1f", (st_struct + 4096.0 * n) / mb),
               fmt("%.2f", th_d), fmt("%.2f", (dy_struct + 1024.0 * n) / mb),
               fmt("%.2f", st_struct / mb) + " / " + fmt("%.2f", dy_struct / mb)});
    }
    t.print();
}

void usage()
{
    std::puts("usage: credit_sim [--quick] [--only sweep|partial|multiphase|scatterv|memory]");
}

}  // namespace

int main(int argc, char **argv)
{
    bool quick = false;
    std::string only;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--quick")) {
            quick = true;
        } else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
        } else {
            usage();
            return !std::strcmp(argv[i], "--help") ? 0 : 2;
        }
    }
    const Scale sc = quick ? quick_scale() : full_scale();
    const auto t0 = std::chrono::steady_clock::now();
    std::printf("<!-- generated by credit_sim%s -->\n\n", quick ? " --quick" : "");
    std::printf("Timing model: latency %llu ns, %llu ns per packet sent, %llu ns per packet retrieved.\n\n",
                (unsigned long long)Timing{}.latency_ns, (unsigned long long)Timing{}.send_ns,
                (unsigned long long)Timing{}.recv_ns);
    const std::map<std::string, void (*)(const Scale &)> exps{{"sweep", experiment_sweep},
                                                               {"partial", experiment_partial},
                                                               {"multiphase", experiment_multiphase},
                                                               {"scatterv", experiment_scatterv}};
    if (!only.empty() && only != "memory" && !exps.count(only)) {
        usage();
        return 2;
    }
    for (const char *name : {"sweep", "partial", "multiphase", "scatterv"})
        if (only.empty() || only == name) {
            exps.at(name)(sc);
            std::fflush(stdout);
        }
    if (only.empty() || only == "memory")
        experiment_memory();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "credit_sim: %s in %.1f s\n", g_failures == 0 ? "all invariants held" : "FAILURES", secs);
    if (g_failures != 0)
        std::fprintf(stderr, "credit_sim: %d run(s) failed\n", g_failures);
    return g_failures == 0 ? 0 : 1;
}
