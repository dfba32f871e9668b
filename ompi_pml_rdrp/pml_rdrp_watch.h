/* pml/rdrp: the job ends when a peer on this node stays stopped (SIGSTOP)
 * for pml_rdrp_peer_timeout seconds while this process waits inside MPI
 * (common/liveness/peer_watch.h says why the process state, not silence). */
#ifndef PML_RDRP_WATCH_H
#define PML_RDRP_WATCH_H

#include <cstddef>

struct ompi_proc_t;

namespace rdrp {

/* Watch the peers among procs that run on this node (pids from the modex). */
void watch_add_procs(ompi_proc_t **procs, size_t nprocs);
/* From the progress loop: every 64th pass looks at the clock, and at the
 * peers once a second; a peer stopped too long aborts the job. */
void watch_tick();
void watch_fini();

}  // namespace rdrp
#endif
