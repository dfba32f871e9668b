/*
 * pml/rdrp token throttling (pml_rdrp_throttle, issue 6's optional part):
 * coll/cdag's admission control (common/throttle/throttle.h: per-rank limit,
 * node token pool with FCFS tickets, token cache) in front of every
 * point-to-point message pml/rdrp injects.
 *
 * What a token covers: the injection of an eager message or of a
 * rendezvous RTS, until UCX reports it locally complete.  Not the
 * rendezvous data: that moves when the receiver pulls it (a window of
 * GETs already paces it), and holding tokens until a receiver matches
 * would deadlock legal programs (an Isend waiting for its receive while a
 * later Send, which the peer receives first, waits for the token).  So
 * the throttle bounds what the seed calls rate congestion: the messages a
 * rank (or a node) has pushed into the network and not yet seen leave.
 *
 * Refused sends wait in one FIFO (so MPI's non-overtaking order holds:
 * once anything waits, every later send waits behind it) and leave from
 * progress as tokens come back.
 */
#ifndef PML_RDRP_THROTTLE_H
#define PML_RDRP_THROTTLE_H

#include <cstdint>

namespace rdrp {

struct Request;

enum { RDRP_THROTTLE_OFF = 0, RDRP_THROTTLE_RANK = 1, RDRP_THROTTLE_NODE = 2 };

/* Set up from mca_pml_rdrp_params (node mode: the job's node pool).
 * false after a show_help when the pool cannot be opened. */
bool throttle_init();
void throttle_fini();
extern bool throttle_active;  /* pml_rdrp_throttle is rank or node */

/* true: r may inject now (it holds its tokens); false: r was queued and
 * throttle_progress() will hand it to send_admitted() later. */
bool throttle_admit(Request *r);
/* The injection r's tokens paid for is locally complete. */
void throttle_release(Request *r);
/* Queued sends that can go now go; the token cache yields to waiters. */
int throttle_progress();

/* pml_rdrp_send.cc: inject a send request that holds its admission. */
int send_admitted(Request *r);

}  // namespace rdrp

#endif
