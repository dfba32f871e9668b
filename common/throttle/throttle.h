/*
 * Token throttling (congestion-avoidance seed, sections 4-5, Algorithm 1):
 * admission control consulted before a schedule message is injected.
 *
 *  - CRCT, per rank: at most rank_limit messages of this process in flight.
 *  - NRCT, per node: a pool of node_tokens tokens in shared memory, shared
 *    by the ranks of the node; a message takes 1 token (bytes_per_token 0)
 *    or ceil(bytes / bytes_per_token), at least 1 and at most the share of
 *    one local rank (node_tokens / local ranks), so every rank can always
 *    have a message in flight and big messages never serialise the node.
 *    Tokens are handed out first-come-first-served by tickets: a rank that
 *    cannot be served keeps its ticket and nobody behind it overtakes, so
 *    no rank starves.
 *    A waiter that finds the head of the queue not claiming its free tokens
 *    takes them for it (they wait in the head's slot) and moves the queue
 *    on, so a descheduled head (more ranks than cores) does not stall the
 *    ranks behind it; FCFS order is kept.
 *  - CCT: at most concurrency ranks of the node inject at once (a rank is
 *    injecting while it has a message in flight).
 *
 * Never blocks: try_acquire() admits or says "wait"; the caller keeps the
 * message queued and retries from progress, and calls release() when the
 * message completed.  Modes: off (everything admitted), rank (CRCT), node
 * (CRCT + NRCT + CCT).
 *
 * One pool per communicator and node (coll/cdag names it after the job,
 * the communicator's cid and its local members).  Every local rank opens
 * it when the communicator is set up; whichever comes first creates and
 * initialises it, so nobody waits for another rank to arrive.  The last
 * one to attach removes the name, so the segment disappears with the last
 * process that maps it, also when the job aborts.  A pool of one local
 * rank lives in private memory.
 *
 * Token cache: with cache > 0 a rank keeps up to that many tokens it took
 * from the pool between messages (still counted as held), so a rank alone
 * on an idle pool touches no shared cache line per message.  It only
 * fills its cache while at least half of the pool is free, and gives the
 * cache back as soon as anybody holds a ticket (at its next acquire,
 * release or poll), so the node limit stays exact and FCFS holds.
 *
 * Dead ranks: every rank records its pid, its tokens and its ticket in its
 * slot of the segment.  A rank that has waited for more than
 * recover_after polls checks the pids of the other slots and, for a dead
 * one, returns its tokens, drops its injecting mark and skips its ticket:
 * a crashed rank holds the pool for at most that many polls of a waiter.
 *
 * C-callable; no Open MPI type.  Not thread-safe per handle (the caller
 * serialises, as coll/cdag's engine lock does); handles in different
 * processes (or threads, each with its own handle) share the pool safely.
 */
#ifndef CDAG_THROTTLE_H
#define CDAG_THROTTLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { CDAG_THROTTLE_OFF = 0, CDAG_THROTTLE_RANK = 1, CDAG_THROTTLE_NODE = 2 };

typedef struct cdag_throttle_config {
    int      mode;             /* CDAG_THROTTLE_* */
    uint32_t rank_limit;       /* CRCT: messages in flight per rank (0: unlimited) */
    uint32_t node_tokens;      /* NRCT: tokens of the node pool */
    uint64_t bytes_per_token;  /* 0: one token per message */
    uint32_t concurrency;      /* CCT: ranks injecting at once (0: unlimited) */
    uint32_t recover_after;    /* waiting polls before dead slots are reclaimed */
    uint32_t cache;            /* tokens a rank may keep between messages (0: none;
                                  CDAG_THROTTLE_CACHE_AUTO: node_tokens / (2 x local ranks)) */
    uint64_t *cache_hit_counter; /* optional: incremented for every message the cache admits */
} cdag_throttle_config_t;

#define CDAG_THROTTLE_CACHE_AUTO UINT32_MAX

typedef struct cdag_throttle cdag_throttle_t;

/* Open the node pool `name` (a POSIX shm name) as local rank `local_rank`
 * of `local_size`, creating it if this rank is the first.  A stale pool of
 * the same name (left by a crashed job: full, or with a dead member) is
 * replaced.  NULL with a message in err on failure.  Mode off/rank needs
 * no segment (name may be NULL). */
cdag_throttle_t *cdag_throttle_create(const cdag_throttle_config_t *cfg, const char *name,
                                      int local_rank, int local_size, char *err, size_t errlen);
void cdag_throttle_destroy(cdag_throttle_t *t);

/* Tokens a message of `bytes` costs (1 in mode off/rank; see NRCT above). */
uint32_t cdag_throttle_cost(const cdag_throttle_t *t, uint64_t bytes);
/* 1: admitted (the message holds *tokens until release); 0: not now. */
int  cdag_throttle_try_acquire(cdag_throttle_t *t, uint64_t bytes, uint32_t *tokens);
void cdag_throttle_release(cdag_throttle_t *t, uint32_t tokens);
/* Gives the token cache back if somebody waits; cheap (one shared load).
 * Call it from progress while cdag_throttle_cached() is not 0. */
void cdag_throttle_poll(cdag_throttle_t *t);
uint32_t cdag_throttle_cached(const cdag_throttle_t *t);

/* Introspection (tests, MPI_T). */
typedef struct cdag_throttle_stats {
    uint64_t admitted, deferred;   /* try_acquire answers */
    uint64_t recovered_tokens;     /* taken back from dead ranks */
    uint64_t skipped_tickets;      /* dead ranks' tickets passed over */
    uint64_t cache_hits;           /* admitted from the token cache */
    uint64_t proxy_grants;         /* heads of the queue this rank served on their behalf */
    uint64_t grants_taken;         /* turns a proxy served for this rank */
    uint32_t inflight, inflight_max;
} cdag_throttle_stats_t;
void cdag_throttle_stats(const cdag_throttle_t *t, cdag_throttle_stats_t *s);
/* Pool state: free tokens, tokens held by live slots (sum, caches
 * included), ranks injecting (counted only with a concurrency limit). */
void cdag_throttle_pool_state(const cdag_throttle_t *t, int64_t *free_tokens, int64_t *held,
                              int32_t *injecting);

#ifdef __cplusplus
}
#endif
#endif
