/*
 * coll/cdag: the C ABI between the MCA component (C, Open MPI types) and
 * the engine service (C++17, coll_cdag_glue.cc): a private UCX worker, the
 * transport the cDAG executors run on, compiled-schedule caches, the
 * optional engine thread.  No Open MPI type crosses this interface.
 */
#ifndef COLL_CDAG_GLUE_H
#define COLL_CDAG_GLUE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* collectives (same order as cdag::Coll) */
enum {
    CDAG_BARRIER, CDAG_BCAST, CDAG_REDUCE, CDAG_ALLREDUCE, CDAG_GATHER, CDAG_SCATTER,
    CDAG_ALLGATHER, CDAG_ALLTOALL, CDAG_REDUCE_SCATTER_BLOCK, CDAG_REDUCE_SCATTER,
    CDAG_SCAN, CDAG_EXSCAN, CDAG_GATHERV, CDAG_SCATTERV, CDAG_ALLGATHERV, CDAG_ALLTOALLV,
    CDAG_NCOLL
};

/* variants (same order as cdag::Algo) */
enum {
    CDAG_ALGO_AUTO, CDAG_ALGO_LINEAR, CDAG_ALGO_CHAIN, CDAG_ALGO_KARY, CDAG_ALGO_KNOMIAL,
    CDAG_ALGO_BUTTERFLY, CDAG_ALGO_DISSEMINATION, CDAG_ALGO_RING, CDAG_ALGO_REDUCE_BCAST,
    CDAG_ALGO_REDUCE_THEN_SCATTER, CDAG_ALGO_PAIRWISE, CDAG_NALGO
};

typedef struct cdag_glue_algo {
    int      algo;       /* CDAG_ALGO_* */
    int      tree;       /* tree of reduce_bcast / reduce_then_scatter (KNOMIAL or KARY) */
    int      radix;
    uint64_t seg_bytes;  /* pipelining segment, 0 = whole messages */
    int      window;     /* alltoall(v) linear: pairs in flight, 0 = all */
} cdag_glue_algo_t;

typedef struct cdag_glue_config {
    int    thread;            /* 1: engine thread owns progress; 0: inline (opal_progress) */
    int    mpi_threads;       /* MPI_THREAD_MULTIPLE: lock everything */
    int    local_ranks;       /* processes of this job on this node (engine thread pinning) */
    int    local_rank;        /* this process among them */
    /* token throttling (common/throttle/throttle.h): mode CDAG_THROTTLE_* */
    int      throttle_mode;
    uint32_t throttle_rank_limit, throttle_node_tokens, throttle_concurrency, throttle_recover;
    uint64_t throttle_bytes_per_token;
    int      throttle_cache;      /* tokens a rank keeps between messages; < 0: node_tokens / (2 x local ranks) */
    size_t eager_buffers;     /* pre-allocated shadow buffers for unexpected small messages */
    size_t eager_size;        /* their size */
    uint64_t eager_limit;     /* messages up to this size are sent eager (0: UCX decides) */
    size_t plan_cache_v;      /* compiled plans of v-variant calls kept per communicator (LRU; 0: none) */
    /* shared-memory rings to peers on this node (common/shm/shm_node.h) */
    int      ring;            /* 1: messages up to ring_limit to a local peer go through its ring */
    uint64_t ring_limit;      /* largest payload through a ring (shrinks with many local ranks) */
    int      cma;             /* 1: larger messages to a ring peer by single copy (process_vm_readv), if permitted */
    int      cma_min;         /* ... and from this size even within ring_limit (-1: measured at start-up,
                               * common/shm/shm_cma_cost.h, or 0 when oversubscribed; 0: only above ring_limit) */
    int      far_line_ns;     /* a ring peer whose lines take this long (ns, measured) is far: its ring
                               * messages by non-temporal stores (common/shm non_temporal_for; 0: never) */
    int      oversubscribed;  /* more ranks than cores here (mpi_yield_when_idle): ranks take turns on a core */
    uint32_t jobid;           /* a ring only to peers of this job */
    uint64_t direct_limit;    /* blocking calls whose messages all go by rings and are at most this
                               * big skip op and executor (coll_cdag_direct.cc); 0: never */
    /* a ring was stopped by a malformed entry (nothing of it was used):
     * the component reports it and ends the job */
    void   (*ring_fatal)(const char *why, int local_rank);
    cdag_glue_algo_t algo[CDAG_NCOLL];
} cdag_glue_config_t;

/* Counters, exported as MPI_T performance variables. */
typedef struct cdag_glue_stats {
    uint64_t schedules_compiled;
    uint64_t cache_hits;
    uint64_t runs;             /* executor runs started */
    uint64_t msgs_sent;
    uint64_t bytes_sent;
    uint64_t unexpected;       /* messages that arrived before their receive was posted */
    uint64_t rndv_msgs;        /* messages that went by UCX rendezvous */
    uint64_t thread_sleeps;    /* engine thread: times it went to sleep with nothing to run */
    uint64_t allocations;      /* heap allocations made for collective calls (0 per repeated call once warm) */
    uint64_t early_allocations; /* heap allocations for messages that arrived before their receive (pools grow to the high-water mark) */
    uint64_t thread_polls;     /* engine thread: worker progress calls it made (the application was outside MPI) */
    uint64_t throttled;        /* sends that had to wait for admission (token throttling) */
    uint64_t throttle_pools;   /* node token pools opened (one per communicator, throttle node) */
    uint64_t token_cache_hits; /* sends admitted from the rank's token cache, no shared memory touched */
    uint64_t dropped;          /* arrivals whose header failed check_packet (cdag_wire.h) */
    uint64_t thread_local_ops; /* engine thread: initial copies/reductions of nonblocking starts it ran */
    uint64_t host_local_ops;   /* the same, run by the application inside MPI (a test or wait came first) */
    uint64_t thread_start_naps; /* engine thread: naps begun with a start it had not driven yet (0: a start is driven at once) */
    uint64_t cached_plans;     /* compiled plans held in communicators' caches now (a level, not a count) */
    uint64_t plans_evicted;    /* plans dropped from a full cache (least recently used first) */
    uint64_t ring_sent;        /* schedule messages that went through a shared-memory ring (peers on this node) */
    uint64_t ring_backlogged;  /* ring messages that waited for room in a full ring (sent later from progress) */
    uint64_t thread_starts;    /* engine thread: nonblocking runs it started (the application's start only queued them) */
    uint64_t host_starts;      /* queued nonblocking runs the application's progress started (it came first) */
    uint64_t rndv_held;        /* rendezvous arrivals held unpulled until their receive was posted (no early buffer free; single-copy descriptors) */
    uint64_t wait_turns;       /* progress turns of blocking calls' waits (cdag_glue_op_wait_turn) */
    uint64_t wait_ucx_passes;  /* of those, turns that passed the UCX worker too (ring-only runs: every 16th) */
    uint64_t wait_other_passes; /* passes of the rest of Open MPI (opal_progress) from blocking waits and full-ring pushes */
    uint64_t direct_runs;      /* blocking runs of the direct path (no op, no executor; counted in runs too) */
    uint64_t lean_hits;        /* of those, calls that found their decisions in the module's memo (run_lean) */
    uint64_t cma_sent;         /* messages above the ring limit sent to a peer on this node by single copy (process_vm_readv) */
    uint64_t cma_resent;       /* of those, sent again by UCX: the receiver could not read our memory */
} cdag_glue_stats_t;
extern cdag_glue_stats_t cdag_glue_stats;

/* Process set-up: UCX worker (with an engine thread if config->thread).
 * 0, or -1 with a message in cdag_glue_last_error(). */
int  cdag_glue_init(const cdag_glue_config_t *config);
void cdag_glue_fini(void);
/* cdag_glue_fini that also fills t (common/tally/live_tally.h) with what
 * was still alive, for the finalize leak check: the application's
 * communicators (a communicator or a request it never freed keeps ours)
 * and collective messages it never received; the engine's own operations
 * not freed, runs still in flight, posted receives, queued sends,
 * rendezvous pulls, UCX endpoints and requests.  Operations held by the
 * application's live requests (ops_held_by_requests: one at most each) or
 * kept for reuse by its live communicators are not counted as ours. */
struct rdrp_tally;
void cdag_glue_fini_tally(struct rdrp_tally *t, uint64_t ops_held_by_requests);
const char *cdag_glue_last_error(void);
/* What this process publishes in the modex: its ring segment's identity
 * (common/shm/shm_node.h) and its worker address. */
int  cdag_glue_worker_address(void **addr, size_t *len);
void cdag_glue_worker_address_release(void *addr);
/* Endpoint to a process (peer_id: its 64-bit name) from what it published;
 * a ring too when it is on this node (remote 0), of this job, and its
 * segment maps.  The ring size of this node (cdag_glue_ring_limit): after
 * cdag_glue_init. */
int  cdag_glue_connect(uint64_t peer_id, const void *addr, size_t len, int remote);
int  cdag_glue_connected(uint64_t peer_id);
/* The ring eager limit in use (0: no rings) and the ring size. */
uint64_t cdag_glue_ring_limit(size_t *ring_size);
/* Single copy to peers on this node from this many bytes (0: only above
 * the ring limit), as chosen at start-up (coll_cdag_cma_min). */
uint64_t cdag_glue_cma_min(void);

/* One communicator.  Under node throttling, pool_name names the
 * communicator's node token pool (common/throttle/throttle.h), which this rank
 * opens as local_index of the local_size members on its node; NULL
 * otherwise. */
typedef struct cdag_glue_comm cdag_glue_comm_t;
cdag_glue_comm_t *cdag_glue_comm_create(uint32_t cid, int rank, int size, const uint64_t *peer_ids,
                                        const char *pool_name, int local_index, int local_size);
int cdag_glue_throttle_mode(void);
void cdag_glue_comm_destroy(cdag_glue_comm_t *c);
/* The next schedule id: every rank calls its collectives in the same
 * order, so the same call gets the same id everywhere. */
uint32_t cdag_glue_comm_next_sched(cdag_glue_comm_t *c);

/* One collective call (what the engine's CollSpec holds). */
typedef struct cdag_glue_spec {
    int coll;            /* CDAG_* */
    int root;
    uint64_t count;      /* see coll_cdag/cdag_coll.h: bytes, or elements for reductions */
    uint64_t elem_size;
    int commutative;
    int in_place;
    const uint64_t *counts, *displs, *rcounts, *rdispls;  /* bytes; v-variants */
} cdag_glue_spec_t;

typedef void (*cdag_glue_reduce_fn_t)(void *ctx, const void *in, void *inout, uint64_t count);

/* An executable collective instance: reusable (persistent collectives),
 * runs one at a time.  NULL with *err set when the engine cannot build
 * it (the caller falls back). */
typedef struct cdag_glue_op cdag_glue_op_t;
cdag_glue_op_t *cdag_glue_op_create(cdag_glue_comm_t *c, const cdag_glue_spec_t *spec,
                                    uint32_t sched, cdag_glue_reduce_fn_t fn, void *fn_ctx,
                                    int *err);
/* When this op compiled a new plan (not one from the cache): 1, and its
 * schedule in words into buf ("Allreduce 4096 elements x 4 B, commutative:
 * Ring, radix 2, segment 65536 B, window all; 23 vertices"); else 0. */
int  cdag_glue_op_explain(const cdag_glue_op_t *op, char *buf, size_t len);
/* nonblocking: the application may leave MPI while it runs (nonblocking
 * and persistent starts), so under thread progress the engine thread
 * carries it: the call only queues the run, the engine (or the
 * application's next progress, whichever comes first) starts it, and an
 * error of that start is the run's (cdag_glue_op_test); a blocking call
 * drives its run itself. */
int  cdag_glue_op_start(cdag_glue_op_t *op, const void *sendbuf, void *recvbuf, int nonblocking);
/* 1 done, 0 running, < 0 failed */
int  cdag_glue_op_test(cdag_glue_op_t *op);
/* One turn of a blocking call's wait (turn: 0, 1, ...): a progress pass,
 * then cdag_glue_op_test.  The pass polls the rings; the UCX worker too
 * when op has messages over UCX, else on every 16th turn. */
int  cdag_glue_op_wait_turn(cdag_glue_op_t *op, unsigned turn);
void cdag_glue_op_free(cdag_glue_op_t *op);

/* The direct path of a tiny blocking call (coll_cdag_direct.cc): its
 * plan walked in place, sends pushed into the peers' rings, no op and no
 * executor, the same messages as the executor's.  cdag_glue_direct_find:
 * the call shape's entry if this call can take it (a plan in c's cache
 * whose every message goes by a ring and is at most the direct limit; no
 * lock, no throttling), else NULL (the op path).  cdag_glue_direct_run:
 * the whole blocking run with schedule id sched (the communicator's next,
 * as for an op), other_progress called every other_every-th turn of its wait;
 * *waited 1 if it waited at all.  1 done, < 0 failed. */
typedef struct cdag_glue_direct cdag_glue_direct_t;
cdag_glue_direct_t *cdag_glue_direct_find(cdag_glue_comm_t *c, const cdag_glue_spec_t *spec);
/* Changes whenever an entry of c's direct table gets another shape: a
 * handle cdag_glue_direct_find gave while it had this value still names
 * the same plan (lock and throttling are fixed for the job). */
unsigned cdag_glue_direct_gen(const cdag_glue_comm_t *c);
int cdag_glue_direct_run(cdag_glue_comm_t *c, cdag_glue_direct_t *d, uint32_t sched, cdag_glue_reduce_fn_t fn,
                         void *fn_ctx, const void *sendbuf, void *recvbuf, void (*other_progress)(void),
                         unsigned other_every, int *waited);

/* Inline progress (also safe to call with the engine thread running). */
int cdag_glue_progress(void);
int cdag_glue_thread_running(void);

#ifdef __cplusplus
}
#endif
#endif
