// pml/rdrp's watch over stopped peers (pml_rdrp_watch.h).
#include "pml_rdrp_request.h"
#include "pml_rdrp_transport.h"
#include "pml_rdrp_watch.h"

#include <time.h>

#include <string>
#include <vector>

#include "common/liveness/peer_watch.h"

namespace rdrp {

namespace {

rdrp_peer_watch_t *watch = nullptr;
std::vector<opal_process_name_t> names;  // by watch id
unsigned ticks = 0;

double now_seconds()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

void watch_add_procs(ompi_proc_t **procs, size_t nprocs)
{
    if (mca_pml_rdrp_params.peer_timeout <= 0) return;
    for (size_t i = 0; i < nprocs; ++i) {
        ompi_proc_t *proc = procs[i];
        if (proc == ompi_proc_local_proc || !OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags)) continue;
        void *blob = nullptr;
        size_t len = 0;
        if (mca_pml_rdrp_modex_recv(proc, &blob, &len) != OMPI_SUCCESS || !blob) continue;
        int pid = transport_peer_pid(blob, len);
        free(blob);
        if (pid <= 0) continue;
        if (!watch) watch = rdrp_peer_watch_create(mca_pml_rdrp_params.peer_timeout, 1.0);
        rdrp_peer_watch_add(watch, pid, static_cast<int>(names.size()));
        names.push_back(proc->super.proc_name);
    }
}

void watch_tick()
{
    if (!watch || (++ticks & 63) != 0) return;
    int pid = 0;
    double stopped = 0;
    int id = rdrp_peer_watch_poll(watch, now_seconds(), &pid, &stopped);
    if (id < 0) return;
    std::string why = "rank " + std::to_string(names[id].vpid) + " (pid " + std::to_string(pid) +
                      ") has been stopped (SIGSTOP) for " + std::to_string(static_cast<int>(stopped)) +
                      " s while this process waited for it (pml_rdrp_peer_timeout " +
                      std::to_string(static_cast<int>(mca_pml_rdrp_params.peer_timeout)) + " s)";
    mca_pml_rdrp_fatal("peer-stopped", OPAL_NAME_PRINT(names[id]), why.c_str());
}

void watch_fini()
{
    if (watch) rdrp_peer_watch_destroy(watch);
    watch = nullptr;
    names.clear();
}

}  // namespace rdrp
