/*
 * rdrp matching engine: MPI point-to-point matching for one communicator.
 *
 * Pure C++17, no Open MPI types, no allocation on the per-message path:
 * every queue is an intrusive doubly linked list of rdrp_match_item_t nodes
 * embedded by the caller in its own receive requests and unexpected-message
 * descriptors (the PML gets back to its object with container_of).
 *
 * MPI rules implemented here:
 *  - non-overtaking: messages from one source are matched in the order the
 *    source sent them.  Senders stamp every message with a per-(comm, dest)
 *    sequence number, 0, 1, 2, ... wrapping at 2^32 (the sender keeps that
 *    counter: pml/rdrp in its per-communicator state); arrivals carrying a sequence number
 *    other than the expected one are held back until the gap is filled, so
 *    the transport may reorder freely.
 *  - receives are matched in the order they were posted, whether they name a
 *    source or use RDRP_ANY_SOURCE (one global post counter decides between
 *    the per-source queue and the wildcard queue).
 *  - RDRP_ANY_TAG matches every tag >= 0 and never a negative (internal,
 *    collective) tag.
 *  - probe / mprobe see unexpected messages in match order; for
 *    RDRP_ANY_SOURCE the earliest arrival (in matching order) wins.
 *
 * Not thread-safe: the caller serialises access (the PML holds its lock).
 */
#ifndef RDRP_MATCH_H
#define RDRP_MATCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RDRP_ANY_SOURCE (-1)
#define RDRP_ANY_TAG    (-1)

/* Intrusive node.  The caller fills src/tag (and seq for arrivals); the
 * engine owns prev/next/order while the item is queued. */
typedef struct rdrp_match_item {
    struct rdrp_match_item *prev, *next;
    int32_t  src;    /* receive: source rank or RDRP_ANY_SOURCE; arrival: sender rank */
    int32_t  tag;    /* receive: tag or RDRP_ANY_TAG; arrival: the message tag */
    uint32_t seq;    /* arrival only: sender's per-(comm, dest) sequence number */
    uint32_t flags;  /* free for the caller; the engine never touches it */
    uint64_t order;  /* engine-assigned: post order (receives) or match order (arrivals) */
} rdrp_match_item_t;

typedef struct rdrp_match_queue rdrp_match_queue_t;

/* Called once for every (arrival, receive) pair the engine matches inside
 * rdrp_match_arrive(): one arrival can release held-back successors, so one
 * call may report several matches, always in sequence order. */
typedef void (*rdrp_match_cb_t)(void *ctx, rdrp_match_item_t *arrival,
                                rdrp_match_item_t *recv);

/* Create the queue of a communicator with comm_size possible sources
 * (remote group size for an inter-communicator).  NULL on allocation
 * failure. */
rdrp_match_queue_t *rdrp_match_create(int comm_size);
/* Destroy; queued items are simply forgotten (the caller owns them). */
void rdrp_match_destroy(rdrp_match_queue_t *q);

/* Post a receive.  If an unexpected arrival matches, it is removed from the
 * unexpected queue and returned (the receive is NOT queued); otherwise the
 * receive is queued and NULL is returned. */
rdrp_match_item_t *rdrp_match_post(rdrp_match_queue_t *q, rdrp_match_item_t *recv);

/* A message arrived from arrival->src with arrival->seq and arrival->tag.
 * In order: matched against posted receives (cb reports the pair) or
 * appended to the unexpected queue; then every held-back successor that is
 * now in order goes the same way.  Out of order: held back.  Returns the
 * number of matches reported through cb. */
int rdrp_match_arrive(rdrp_match_queue_t *q, rdrp_match_item_t *arrival,
                      rdrp_match_cb_t cb, void *ctx);

/* Fast path for an arrival that may need no descriptor: if the message
 * (src, tag, seq) is the next in order from src, nothing from src is held
 * back, and a posted receive takes it, that receive is unlinked and
 * returned and the message counts as matched (exactly what
 * rdrp_match_arrive would have reported).  Otherwise NULL and nothing
 * changed: hand the message to rdrp_match_arrive. */
rdrp_match_item_t *rdrp_match_arrive_posted(rdrp_match_queue_t *q, int32_t src, int32_t tag,
                                            uint32_t seq);

/* Probe the unexpected queue for (src, tag) with wildcards.  remove != 0
 * unlinks the item (mprobe); 0 leaves it in place (probe).  NULL if none. */
rdrp_match_item_t *rdrp_match_probe(rdrp_match_queue_t *q, int src, int tag, int remove);

/* Cancel a posted receive: 1 if it was still queued (now removed), 0 if it
 * is not queued (already matched). */
int rdrp_match_cancel(rdrp_match_queue_t *q, rdrp_match_item_t *recv);

/* Introspection, for tests, finalize checks and MPI_T counters. */
size_t rdrp_match_posted_count(const rdrp_match_queue_t *q);
size_t rdrp_match_unexpected_count(const rdrp_match_queue_t *q);
size_t rdrp_match_held_count(const rdrp_match_queue_t *q);   /* out-of-order arrivals */

/* Visit every queued item (posted receives first, then unexpected arrivals,
 * then held-back ones); used to release everything at communicator free. */
void rdrp_match_foreach(rdrp_match_queue_t *q,
                        void (*fn)(void *ctx, rdrp_match_item_t *item, int kind),
                        void *ctx);
#define RDRP_MATCH_KIND_POSTED     0
#define RDRP_MATCH_KIND_UNEXPECTED 1
#define RDRP_MATCH_KIND_HELD       2

#ifdef __cplusplus
}
#endif
#endif /* RDRP_MATCH_H */
