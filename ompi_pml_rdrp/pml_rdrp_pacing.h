/*
 * pml/rdrp: how a sender is paced by its receiver (issue 12).
 *
 * An eager message needs a credit of the receiver's mailbox (credits
 * bound what an unmatched receiver holds).  A send that finds none joins
 * its peer's wait queue, in send order (every later send to that peer
 * queues behind it, so nothing overtakes), and leaves from progress:
 *  - eagerly, as soon as a credit comes back (the common case: a receiver
 *    that keeps up returns credits within microseconds);
 *  - by rendezvous, whose RTS needs no credit, once it has waited
 *    pml_rdrp_credit_wait_us: so a receiver that waits for a message stuck
 *    behind a full mailbox of unmatched ones always gets its envelope, and
 *    no legal program can deadlock on credits.  To a ring peer the wait
 *    counts only while the receiver has read everything in its ring: one
 *    that has not is away (asleep, descheduled: two threads per rank
 *    streaming 1-byte MPI_Sends on 2 cores, a third spinning, gave up on
 *    credit for 1395 of 2000 messages and paid a rendezvous for each),
 *    not stuck, and an RTS would wait for it as the credits do.
 * While a blocking standard send (MPI_Send) waits, its data is copied and
 * the call returns at once (as an eager send would), but only within
 * pml_rdrp_send_buffer bytes of such copies per process; beyond that the
 * call waits until its message has left (or, by rendezvous, been
 * received).  A nonblocking send is never copied: its request simply stays
 * incomplete until the message leaves, which MPI allows and which costs no
 * memory, where a copy would only let the caller run further ahead of its
 * consumer.  So a producer that outruns its consumer is slowed down to the
 * consumer's pace and its memory stays bounded.
 *
 * Every stalled send also progresses the worker once, so credits and
 * rendezvous handshakes a producer owes are served even by a producer that
 * never waits.
 */
#ifndef PML_RDRP_PACING_H
#define PML_RDRP_PACING_H

#include <cstddef>
#include <cstdint>

namespace rdrp {

struct Request;
struct Endpoint;

/* r (its sequence number drawn) cannot leave now: queue it on its
 * endpoint, completing the user's request from a copy if the budget
 * allows.  Returns OMPI_SUCCESS or an error for r's caller. */
int pacing_enqueue(Request *r);
/* Sends whose credits came back, or whose wait is over, leave.  From
 * progress; returns how many left. */
int pacing_progress();
/* Endpoints with waiting sends (progress checks this before calling). */
extern size_t pacing_waiting_eps;
/* Bytes held in early-completed copies (MPI_T high-water mark). */
extern size_t pacing_buffered;
/* Set by MPI_Send around its isend: only a blocking send may complete
 * from a copy (see above). */
extern thread_local bool pacing_blocking_send;
/* Drop the queues (finalize). */
void pacing_fini();

}  // namespace rdrp

#endif
