/*
 * coll/cdag engine service: who drives the private worker.  Either inline
 * (cdag_glue_progress() from opal_progress), or an engine thread that owns
 * the worker, is pinned with hwloc to a core outside the process's binding
 * when there is one, and sleeps on the worker's event fd when idle.
 */
#include "coll_cdag_service.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>

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

/* Spin while a schedule runs (an offloading NIC does not sleep on
 * in-flight work), yielding now and then so a rank sharing the core keeps
 * computing; sleep on the worker's event fd once nothing runs. */
void engine_loop()
{
    pin_engine_thread();
    int idle = 0;
    while (!G.stop.load(std::memory_order_acquire)) {
        unsigned n;
        {
            Lock l;
            n = ucp_worker_progress(G.w);
            if (G.throttling) throttle_progress();
        }
        if (n) {
            idle = 0;
            continue;
        }
        ++idle;
        if (G.active_runs.load(std::memory_order_acquire) > 0) {
            if ((idle & 63) == 0) sched_yield();
            continue;
        }
        if (idle < 256) continue;
        idle = 0;
        ucs_status_t st;
        {
            Lock l;
            st = ucp_worker_arm(G.w);
        }
        if (st == UCS_OK) {
            ++cdag_glue_stats.thread_sleeps;
            struct pollfd pfd = {G.efd, POLLIN, 0};
            (void)poll(&pfd, 1, 100);  // ucp_worker_signal() from a new start wakes it
        }
    }
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
    if (G.thread_running) return 0;  // the engine thread owns the worker
    Lock l;
    int n = static_cast<int>(ucp_worker_progress(G.w));
    if (G.throttling) throttle_progress();
    return n;
}

int cdag_glue_thread_running(void) { return G.thread_running ? 1 : 0; }

}  // extern "C"