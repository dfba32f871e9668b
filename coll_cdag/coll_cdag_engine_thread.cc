/*
 * coll/cdag engine service: who drives the private worker.  Either inline
 * (cdag_glue_progress() from opal_progress), or, with thread progress, an
 * engine thread that drives it while the application is outside MPI, is
 * pinned with hwloc to a core outside the process's binding when there is
 * one, and sleeps (off the CPU) when no nonblocking schedule runs.
 */
#include "coll_cdag_service.h"
#include "cdag_engine_policy.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>

#include <hwloc.h>

namespace cdag_svc {

/* ------------------------------------------------------------ engine thread */
/* Pin the engine thread to a core the application does not use, when
 * there is one: with as many cores as local ranks there is none (the
 * thread then shares its rank's binding).  Ranks are mapped by core from
 * core 0 up by default, so the free cores are taken from the top down. */
void pin_engine_thread()
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0) return;
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        return;
    }
    int ncores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    hwloc_bitmap_t bound = hwloc_bitmap_alloc();
    if (ncores > G.cfg.local_ranks && hwloc_get_cpubind(topo, bound, HWLOC_CPUBIND_PROCESS) == 0) {
        for (int i = ncores - 1; i >= G.cfg.local_ranks; --i) {
            hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, i);
            if (core && !hwloc_bitmap_intersects(core->cpuset, bound)) {
                hwloc_set_cpubind(topo, core->cpuset, HWLOC_CPUBIND_THREAD);
                break;
            }
        }
    }
    hwloc_bitmap_free(bound);
    hwloc_topology_destroy(topo);
}

/* The application's thread comes first on the core they share: under a
 * real-time policy the engine runs one priority below the thread that
 * started it, so the application preempts it the moment it wakes (its
 * sleep ends, its accelerator or I/O is done) instead of waiting for the
 * engine to yield.  At equal round-robin priority a waking thread waits
 * for the running one: traced at np 2 (ibcast 1 MiB, host in nanosleep of
 * 83 us), the receiver's sleep lasted 191 us against 133 us on the root,
 * the rest spent waiting for its engine's pull and copy to finish, and
 * its whole loop fell a period behind the root's.  Under the normal
 * policy the scheduler already favours the thread that slept. */
void yield_to_application()
{
    int policy;
    sched_param sp;
    if (pthread_getschedparam(pthread_self(), &policy, &sp) != 0) return;
    int prio = engine_rt_priority(policy, sp.sched_priority, sched_get_priority_min(policy));
    if (prio == sp.sched_priority) return;
    sp.sched_priority = prio;
    (void)pthread_setschedparam(pthread_self(), policy, &sp);
}

/* Who drives the worker while a nonblocking schedule runs.
 *
 * The engine thread shares its rank's core whenever there is no free one
 * (2 ranks on 2 cores), so two threads spinning on one worker halve each
 * other's speed: the application thread inside MPI_Wait and the engine.
 * Hence a hand-off: while the application calls progress (it is inside
 * MPI: a wait, a test loop, a blocking call), it drives the worker inline
 * and the engine thread naps, off the CPU; the moment the application
 * stops calling (it computes, sleeps, waits on an accelerator), one nap
 * later the engine thread drives alone.  Right after a nonblocking start
 * the engine drives at once: the application is about to leave MPI.  The
 * start itself is the engine's too (start_queued): the application's
 * MPI_I* call only queues the run and wakes the engine.
 * With no nonblocking schedule running it sleeps on a condition variable,
 * so an idle engine costs no CPU. */
/* The first nap after the application was seen in MPI is short (the
 * hand-back delay when it leaves right away, as after an MPI_Test); while
 * it stays in MPI (a long MPI_Wait) the naps double up to kNapMaxNs, so
 * many ranks' engines on few cores do not wake each other all the time. */
constexpr long kNapNs = 20000;
constexpr long kNapMaxNs = 1000000;

/* Nap for ns, or until the application starts another nonblocking
 * collective (then it leaves MPI: true, drive now).  A nap that missed
 * starts would sleep through a whole short collective: after a long
 * MPI_Wait the naps are long, and the next start comes right after it.
 * driven: the start count the engine last acted on, so a start that came
 * before the nap began (while the engine looked at the application's
 * calls) ends it at once; a nap that slept through one is counted
 * (thread_start_naps: the engine lost the collective's whole window). */
bool nap(long ns, uint64_t driven)
{
    std::unique_lock<std::mutex> lk(G.idle_mu);
    bool pending = G.starts.load() != driven;
    G.engine_idle.store(true);
    bool started = G.idle_cv.wait_for(lk, std::chrono::nanoseconds(ns),
                                      [driven] { return G.starts.load() != driven || G.stop.load(); });
    G.engine_idle.store(false);
    if (pending && !started) ++cdag_glue_stats.thread_start_naps;
    return started;
}

/* Start the nonblocking runs the application handed over
 * (cdag_glue_op_start only queues them), in the order they were started.
 * The whole start is done here: posting the receives, the sends (a
 * message into a peer's ring is a copy: 2 us at 64 KiB), the initial
 * local operations (the own block of alltoall / allgather), and whatever
 * the receives complete at once - a peer that ran ahead left its data
 * here, and an allreduce then reduces inside its start (1 MiB: 110 us,
 * traced at np 2, in the application's MPI_Iallreduce before it could
 * leave MPI; that rank fell a whole sleep behind its peer, whose wait then
 * did the pull and the reduction).  by_engine: the engine thread (it
 * carries the run while the application is away), else the application's
 * own progress came first (a test or a wait right after the start).
 * Under the lock. */
void start_queued(bool by_engine)
{
    for (size_t i = 0; i < G.to_start.size(); ++i) {  // a start may complete runs, never queue one
        ::cdag_glue_op *op = G.to_start[i];
        op->queued = false;
        ++(by_engine ? cdag_glue_stats.thread_starts : cdag_glue_stats.host_starts);
        /* local operations after every send and receive is posted: a
         * peer waits for our messages, not for our copy */
        if (op->ex->start_deferred(op->q_sbuf, op->q_rbuf) == 0)
            (by_engine ? cdag_glue_stats.thread_local_ops : cdag_glue_stats.host_local_ops) += op->ex->run_deferred();
    }
    G.to_start.clear();
}

/* Runs that finished while the application was away leave the count, so
 * the engine can go to sleep before the application looks at them. */
void reap_finished()
{
    auto &r = G.running;
    for (size_t i = 0; i < r.size();) {
        if (!r[i]->queued && r[i]->ex->done()) {
            r[i]->counted = false;
            --G.active_runs;
            r[i] = r.back();
            r.pop_back();
        } else {
            ++i;
        }
    }
}

/* Nothing runs: sleep until a nonblocking start (cdag_glue_op_start)
 * wakes us.  Arrivals need no wake-up: a message for a schedule this rank
 * has not started waits in UCX, and the start that follows either drives
 * the worker itself (blocking calls) or wakes us.  Under token throttling
 * a rank's cached tokens must still go back to waiters on other ranks, so
 * the sleep is bounded there. */
void sleep_idle()
{
    std::unique_lock<std::mutex> lk(G.idle_mu);
    G.engine_idle.store(true);
    auto wake = [] { return G.active_runs.load() > 0 || G.stop.load(); };
    ++cdag_glue_stats.thread_sleeps;
    if (G.throttling) G.idle_cv.wait_for(lk, std::chrono::milliseconds(10), wake);
    else G.idle_cv.wait(lk, wake);
    G.engine_idle.store(false);
}

void engine_loop()
{
    pin_engine_thread();
    yield_to_application();
    (void)pthread_setname_np(pthread_self(), "cdag-engine");
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);  // naps of kNapNs, not of the 50 us default slack
    uint64_t seen = G.app_calls.load(std::memory_order_relaxed);
    uint64_t driven = G.starts.load();  // starts acted on
    int idle = 0;
    long nap_ns = kNapNs;
    while (!G.stop.load(std::memory_order_acquire)) {
        if (G.active_runs.load(std::memory_order_acquire) == 0) {
            if (G.throttling) {
                Lock l;  // queued sends, token caches
                ucp_worker_progress(G.w);
                ring_progress();
                throttle_progress();
            }
            sleep_idle();
            idle = 0;
            nap_ns = kNapNs;
            continue;  // a start woke us: acted on below
        }
        /* A start since we last looked: the application leaves MPI now,
         * so drive, whatever it called before the start.  Judging by its
         * calls alone, the engine napped right after a start that followed
         * an MPI_Wait (the calls of that wait looked like the application
         * inside MPI): traced at np 2, a 20 us nap that ended 100-130 us
         * later, after the whole sleep of the host, so the wait after it
         * did the collective (the host-waiting overlap of ialltoall and
         * iallgather at 64 KiB was 0-50 %).  starts before app_calls: the
         * calls made before a start are then all seen. */
        uint64_t st = G.starts.load();
        if (st != driven) {
            driven = st;
            seen = G.app_calls.load(std::memory_order_relaxed);
            nap_ns = kNapNs;
        }
        uint64_t now = G.app_calls.load(std::memory_order_relaxed);
        if (now != seen) {  // the application is inside MPI and drives
            if (!nap(nap_ns, driven)) {
                seen = now;
                nap_ns = std::min(nap_ns * 2, kNapMaxNs);
            }  // else a start: acted on at the top
            continue;
        }
        nap_ns = kNapNs;
        unsigned n;
        {
            Lock l;
            if (!G.to_start.empty()) start_queued(true);
            n = ring_progress();
            n += ucp_worker_progress(G.w);
            if (G.throttling) throttle_progress();
            if (!n) reap_finished();
        }
        ++cdag_glue_stats.thread_polls;
        if (n) idle = 0;
        else if ((++idle & 63) == 0) sched_yield();  // a rank sharing the core keeps computing
    }
}

/* A nonblocking start (active_runs already counted): wake a sleeping or
 * napping engine.  Either the engine sees the count (or the start count)
 * in its wait predicate, or we see it idle here (both sides use
 * sequentially consistent atomics). */
void wake_engine()
{
    ++G.starts;
    if (!G.engine_idle.load()) return;
    std::lock_guard<std::mutex> lk(G.idle_mu);
    G.idle_cv.notify_one();
}

/* Start the engine thread on first use (configured thread progress). */
int ensure_engine_thread()
{
    if (!G.cfg.thread || G.thread_running.load(std::memory_order_acquire)) return 0;
    Lock l;
    if (G.thread_running) return 0;
    G.stop = false;
    try {
        G.th = std::thread(engine_loop);
    } catch (...) {
        G.err = "cannot start the engine thread";
        return -1;
    }
    G.thread_running = true;
    return 0;
}


}  // namespace cdag_svc

using namespace cdag_svc;

extern "C" {

int cdag_glue_progress(void)
{
    if (!G.up) return 0;
    /* the engine thread sees the application inside MPI and leaves the
     * worker to it (engine_loop) */
    if (G.thread_running) G.app_calls.fetch_add(1, std::memory_order_relaxed);
    Lock l;
    /* runs handed to the engine that it has not started yet: any progress
     * of the application starts them (a test or wait right after the
     * start, or another MPI call that waits: the progress rule) */
    if (!G.to_start.empty()) start_queued(false);
    int n = static_cast<int>(ring_progress());
    n += static_cast<int>(ucp_worker_progress(G.w));
    if (G.throttling) throttle_progress();
    return n;
}

int cdag_glue_thread_running(void) { return G.thread_running ? 1 : 0; }

}  // extern "C"