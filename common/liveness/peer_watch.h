/*
 * common/liveness: notice a peer process on this node that has been
 * stopped (SIGSTOP, SIGTSTP: state T in /proc/<pid>/stat) for longer than
 * a timeout, while this process waits inside MPI.
 *
 * Why the process state and not silence: MPI lets a rank compute (or
 * sleep) outside MPI for as long as it likes, and a receiver-driven
 * protocol makes no progress meanwhile, so "no message for N seconds"
 * cannot tell a stopped peer from a busy one.  The kernel can: a computing
 * process is R, a sleeping one S, a stopped one T.  A process stopped by a
 * debugger (ptrace stop, state t) is left alone.  UCX's keepalive does not
 * help here: the kernel (TCP) or UCX's own shared-memory check answer for
 * a stopped process as for a live one.  Only peers on this node have a
 * state we can read; others are not watched.
 */
#ifndef RDRP_PEER_WATCH_H
#define RDRP_PEER_WATCH_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rdrp_peer_watch rdrp_peer_watch_t;

/* The state letter of a process ('R', 'S', 'D', 'T', 't', 'Z', ...) or 0
 * when it does not exist (or /proc cannot tell). */
char rdrp_proc_state(int pid);

/* timeout: seconds a peer may stay stopped; interval: seconds between two
 * looks at the peers' states. */
rdrp_peer_watch_t *rdrp_peer_watch_create(double timeout, double interval);
void rdrp_peer_watch_destroy(rdrp_peer_watch_t *w);
/* Watch process pid, reported as id. */
void rdrp_peer_watch_add(rdrp_peer_watch_t *w, int pid, int id);
/* For tests: read states with reader(pid, arg) instead of /proc. */
void rdrp_peer_watch_set_reader(rdrp_peer_watch_t *w, char (*reader)(int pid, void *arg), void *arg);
/* Looks at the peers when interval has passed since the last look (now:
 * seconds on a monotonic clock).  Returns the id of a peer seen stopped at
 * every look for at least timeout seconds, with *pid and *stopped_for
 * set, or -1. */
int rdrp_peer_watch_poll(rdrp_peer_watch_t *w, double now, int *pid, double *stopped_for);

#ifdef __cplusplus
}
#endif
#endif
