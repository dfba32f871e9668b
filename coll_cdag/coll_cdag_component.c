/*
 * coll/cdag component: MCA parameters, MPI_T variables, start-up of the
 * engine service (private UCX worker, optional engine thread) and the
 * publication of its address.  The address must be in the modex before
 * the start-up fence, so the service starts in the component's open
 * (coll's comm_query comes after the fence).
 */
#include "coll_cdag.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "common/throttle/throttle.h"
#include "common/params/param_check.h"
#include "common/tally/live_tally.h"

#include "ompi/mca/coll/base/base.h"
#include "opal/mca/base/mca_base_pvar.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/base/mca_base_var_enum.h"
#include "opal/mca/pmix/pmix.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"
#include "opal/util/show_help.h"
#include "ompi/mca/rte/rte.h"
#include "ompi/runtime/mpiruntime.h"

static int cdag_register(void);
static int cdag_open(void);
static int cdag_close(void);
void mca_coll_cdag_run_fini(void);
long mca_coll_cdag_run_live_requests(void);

mca_coll_cdag_params_t mca_coll_cdag_params;
int mca_coll_cdag_ready = 0;
static int progress_registered = 0;

mca_coll_base_component_2_0_0_t mca_coll_cdag_component = {
    .collm_version = {
        MCA_COLL_BASE_VERSION_2_0_0,
        .mca_component_name = "cdag",
        MCA_BASE_MAKE_VERSION(component, RDRP_VERSION_MAJOR, RDRP_VERSION_MINOR, RDRP_VERSION_RELEASE),
        .mca_open_component = cdag_open,
        .mca_close_component = cdag_close,
        .mca_register_component_params = cdag_register,
    },
    .collm_data = {
        MCA_BASE_METADATA_PARAM_CHECKPOINT
    },
    .collm_init_query = mca_coll_cdag_init_query,
    .collm_comm_query = mca_coll_cdag_comm_query,
};

static const char *coll_names[CDAG_NCOLL] = {
    "barrier", "bcast", "reduce", "allreduce", "gather", "scatter", "allgather", "alltoall",
    "reduce_scatter_block", "reduce_scatter", "scan", "exscan", "gatherv", "scatterv",
    "allgatherv", "alltoallv"};

static const char *algo_names[CDAG_NALGO] = {
    "auto", "linear", "chain", "kary", "knomial", "butterfly", "dissemination", "ring",
    "reduce_bcast", "reduce_then_scatter", "pairwise"};

/* the variants each collective has (the valid words of its _algorithm
 * parameter besides auto) */
static const char *algo_words[CDAG_NCOLL] = {
    "auto|dissemination|butterfly|linear",
    "auto|knomial|kary|chain|linear",
    "auto|knomial|kary|chain|linear",
    "auto|butterfly|dissemination|ring|reduce_bcast",
    "auto|knomial|kary|chain|linear",
    "auto|knomial|kary|chain|linear",
    "auto|ring|butterfly|dissemination",
    "auto|pairwise|linear",
    "auto|pairwise|ring|reduce_then_scatter|butterfly",
    "auto|pairwise|ring|reduce_then_scatter|butterfly",
    "auto|chain|butterfly",
    "auto|chain|butterfly",
    "auto|linear",
    "auto|linear",
    "auto|ring|dissemination",
    "auto|pairwise|linear"};

static char *coll_list = NULL;
static char *algo_values[CDAG_NCOLL];
static char *progress_value = NULL;
static unsigned long long seg_size = 0, eager_size = 8192, eager_limit = 65536, ring_limit = 131072,
    direct_limit = 16384;
static int ring_on = 1, cma_on = 1, cma_min = -1, far_line_ns = 90;
static mca_base_var_enum_t *progress_enum = NULL;
static char *throttle_value = NULL;
static int throttle_rank_limit, throttle_node_tokens, throttle_concurrency, throttle_recover, throttle_cache;
static int v_plan_cache;
static unsigned long long throttle_bpt;

/* Valid values of every parameter (common/params/param_check.h): checked
 * at open, before any traffic, and appended to each help string. */
#define C_INT(n, var, lo, hi) {"coll_cdag_" n, RDRP_PARAM_INT, &var, lo, hi, 0, 0, NULL}
#define C_ULL(n, var, hi) {"coll_cdag_" n, RDRP_PARAM_ULL, &var, 0, 0, 0, hi, NULL}
#define C_WORD(n, var, w) {"coll_cdag_" n, RDRP_PARAM_WORD, &var, 0, 0, 0, 0, w}
#define ANY_SIZE 0x7fffffffffffffffULL
#define COLL_WORDS "all|barrier|bcast|reduce|allreduce|gather|scatter|allgather|alltoall|" \
    "reduce_scatter_block|reduce_scatter|scan|exscan|gatherv|scatterv|allgatherv|alltoallv"
enum { N_FIXED_RULES = 23 };
static rdrp_param_rule_t param_rules[N_FIXED_RULES + CDAG_NCOLL] = {
    C_INT("priority", mca_coll_cdag_params.priority, -1, 100),
    C_INT("finalize_check", mca_coll_cdag_params.finalize_check, 0, 2),
    C_INT("verbose", mca_coll_cdag_params.verbose, 0, 100),
    C_WORD("progress", progress_value, "inline|thread"),
    {"coll_cdag_collectives", RDRP_PARAM_WORDS, &coll_list, 0, 0, 0, 0, COLL_WORDS},
    C_INT("radix", mca_coll_cdag_params.radix, 2, 64),
    C_ULL("segment_size", seg_size, 1ULL << 30),
    C_INT("window", mca_coll_cdag_params.window, 0, 1 << 20),
    C_INT("shadow_buffers", mca_coll_cdag_params.eager_buffers, 0, 1 << 16),
    C_ULL("shadow_buffer_size", eager_size, 16ULL << 20),
    C_ULL("eager_limit", eager_limit, 16ULL << 20),
    C_INT("ring", ring_on, 0, 1),
    C_ULL("ring_limit", ring_limit, 4ULL << 20),
    C_INT("cma", cma_on, 0, 1),
    C_INT("cma_min", cma_min, -1, 16 << 20),
    C_INT("far_line_ns", far_line_ns, 0, 1000000),
    C_ULL("direct_limit", direct_limit, 65536),
    C_WORD("throttle", throttle_value, "off|rank|node"),
    C_INT("throttle_rank_limit", throttle_rank_limit, 0, 1 << 20),
    C_INT("throttle_node_tokens", throttle_node_tokens, 1, 1 << 20),
    C_ULL("throttle_bytes_per_token", throttle_bpt, ANY_SIZE),
    C_INT("throttle_concurrency", throttle_concurrency, 0, 1 << 20),
    C_INT("throttle_token_cache", throttle_cache, -1, 1 << 20),
    C_INT("throttle_recover_polls", throttle_recover, 1, 0x7fffffff),
    C_INT("v_plan_cache", v_plan_cache, 0, 1 << 20),
    /* the _algorithm rules follow, filled in by cdag_register */
};
#define N_RULES (N_FIXED_RULES + CDAG_NCOLL)

static const char *help_with_range(const char *name, const char *help)
{
    static char buf[2048];
    return rdrp_param_help(param_rules, N_RULES, "coll_cdag_", name, help, buf, sizeof(buf));
}

/* an integer MCA variable of coll/cdag, its help with the accepted range */
static void reg_int(const char *name, const char *help, mca_base_var_info_lvl_t level, int *storage)
{
    (void)mca_base_component_var_register(&mca_coll_cdag_component.collm_version, name, help_with_range(name, help),
                                          MCA_BASE_VAR_TYPE_INT, NULL, 0, 0, level, MCA_BASE_VAR_SCOPE_READONLY,
                                          storage);
}

static void reg_ull(const char *name, const char *help, mca_base_var_info_lvl_t level, unsigned long long *storage)
{
    (void)mca_base_component_var_register(&mca_coll_cdag_component.collm_version, name, help_with_range(name, help),
                                          MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL, 0, 0, level,
                                          MCA_BASE_VAR_SCOPE_READONLY, storage);
}

static char algo_rule_names[CDAG_NCOLL][64];

static int cdag_register(void)
{
    mca_coll_cdag_params_t *p = &mca_coll_cdag_params;
    const mca_base_component_t *c = &mca_coll_cdag_component.collm_version;

    p->priority = -1;
    reg_int("priority", "Priority of coll/cdag; it takes intra-communicators only when this is >= 0, and wins "
        "over coll/tuned (30) above 30.  Default -1: installed but unused until asked for, "
        "e.g. --mca coll_cdag_priority 100", OPAL_INFO_LVL_4, &p->priority);
    /* off by default, as pml/rdrp's: most of what it finds is the
     * application's (requests and communicators never freed) */
    p->finalize_check = 0;
    reg_int("finalize_check",
        "Finalize leak check, when the component closes after its own clean-up: 0 off (default); 1 one finalize-leak "
        "message per process naming every object still alive; 2 the same, and the component's close returns an "
        "error.  Requests and communicators never freed and collective messages never received are the "
        "application's; operations, runs, posted receives, queued sends, rendezvous pulls, UCX endpoints and "
        "requests left over are coll/cdag's own (a bug)", OPAL_INFO_LVL_6, &p->finalize_check);
    p->verbose = 0;
    reg_int("verbose", "Verbosity of coll/cdag (0: errors only, 2: settings at start-up, 10: communicators it takes and the schedule of every compiled plan (once per plan): algorithm, radix, segment, window)", OPAL_INFO_LVL_5, &p->verbose);
    progress_value = "inline";
    (void)mca_base_component_var_register(c, "progress", help_with_range("progress", "Who progresses collective schedules: inline (the MPI library's progress, i.e. while the "
        "application is inside MPI calls) or thread (an engine thread, pinned to a core outside "
        "the application's binding when there is one, drives started nonblocking and persistent "
        "collectives while the application is outside MPI, so they complete while it computes "
        "or sleeps; while the application is inside MPI it drives them itself, and the engine "
        "sleeps when none runs)"),
        MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_4, MCA_BASE_VAR_SCOPE_READONLY,
        &progress_value);
    coll_list = "all";
    (void)mca_base_component_var_register(c, "collectives", help_with_range("collectives", "Collectives coll/cdag provides: all, or a comma list of barrier, bcast, reduce, "
        "allreduce, gather, scatter, allgather, alltoall, reduce_scatter_block, reduce_scatter, "
        "scan, exscan, gatherv, scatterv, allgatherv, alltoallv (the others go to the module "
        "below; every entry covers the blocking, nonblocking and persistent forms)"),
        MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_4, MCA_BASE_VAR_SCOPE_READONLY, &coll_list);
    p->radix = 2;
    reg_int("radix", "Radix of the k-ary and k-nomial trees", OPAL_INFO_LVL_5, &p->radix);
    seg_size = 0;
    reg_ull("segment_size", "Pipelining segment of tree and chain schedules in bytes (0: whole messages)", OPAL_INFO_LVL_5, &seg_size);
    p->window = 0;
    reg_int("window", "Alltoall(v) linear variant: pairs in flight at once (0: all)", OPAL_INFO_LVL_5, &p->window);
    p->eager_buffers = 256;
    reg_int("shadow_buffers", "Pre-allocated shadow buffers per process for small messages that arrive before their "
        "receive is posted (more use the heap)", OPAL_INFO_LVL_6, &p->eager_buffers);
    eager_size = 8192;
    reg_ull("shadow_buffer_size", "Size of a shadow buffer in bytes", OPAL_INFO_LVL_6, &eager_size);
    eager_limit = 65536;
    reg_ull("eager_limit", "Schedule messages up to this many bytes "
        "go as UCX eager active messages (copied through shared memory), larger ones by UCX's rendezvous "
        "(RTS, get, ATS); 0: UCX's own threshold (8 KiB on shared memory).  A rendezvous costs about 3 us "
        "more, so eager wins up to some 64 KiB on one node", OPAL_INFO_LVL_5, &eager_limit);
    ring_on = 1;
    reg_int("ring", "1: schedule messages of at most "
        "coll_cdag_ring_limit bytes to a process of this job on this node go through a shared-memory ring of "
        "coll/cdag's own in the receiver's segment (no UCX call on that path); 0: every message by UCX", OPAL_INFO_LVL_5, &ring_on);
    /* 128 KiB: a 128 KiB message by UCX (rendezvous) took 1.3-1.4x the ring's
     * time in bcast/reduce/gather/scatter at np 2; at 256 KiB the ring's two
     * copies lost to UCX's single copy in alltoall and scatter (issue 14) */
    ring_limit = 131072;
    reg_ull("ring_limit", "Largest schedule "
        "message (bytes) sent through a shared-memory ring to a peer on this node; larger ones go by UCX.  "
        "The rings of a process hold four such messages each within 16 MiB, so with many processes on a node "
        "the limit used is lower (coll_cdag_verbose 2 prints it)", OPAL_INFO_LVL_5, &ring_limit);
    /* 1: at 256 KiB-4 MiB, np 2, UCX's rendezvous on our private worker
     * cost 1.1-1.35x coll/tuned over vader's single copy (issue 14) */
    cma_on = 1;
    reg_int("cma", "1: schedule messages above "
        "coll_cdag_ring_limit to a process of this job on this node go as a descriptor through its ring and "
        "the receiver copies them with one process_vm_readv (single copy, Linux CMA) straight into place, "
        "if the processes may read each other's memory (ptrace permission, probed at start-up; else by UCX); "
        "0: by UCX's rendezvous", OPAL_INFO_LVL_5, &cma_on);
    /* as pml_rdrp_shm_cma_min: which of a ring's two copies or one CMA copy
     * wins from which size depends on the machine (shm_cma_cost.h) */
    cma_min = -1;
    reg_int("cma_min", "With coll_cdag_cma 1, "
        "schedule messages from this many bytes to a peer on this node go by single copy although they fit "
        "its ring (coll_cdag_ring_limit): a ring message costs two copies that each cross between cores, a "
        "single copy one kernel copy and an answer; -1 = chosen at start-up from the measured cost of a 4 KiB "
        "CMA copy (32768 when it costs at most 2.5 us, else 0), and 0 with mpi_yield_when_idle (more ranks than "
        "cores: a single-copy sender waits until its receiver gets a core, a ring sender does not); "
        "0 = only above coll_cdag_ring_limit", OPAL_INFO_LVL_5, &cma_min);
    /* as pml_rdrp_shm_far_line_ns (common/shm shm_line_cost.h) */
    far_line_ns = 90;
    reg_int("far_line_ns", "A peer on this node whose cache lines take at least this many nanoseconds to reach "
        "this core (measured by its ring while the job runs) is far: schedule messages of 512 bytes and more "
        "to it are written into its ring with non-temporal stores, which do not wait for the lines to come back "
        "from the peer's cache; to a near peer from 32 KiB; 0 = never measured (from 8 KiB)",
        OPAL_INFO_LVL_5, &far_line_ns);
    /* 16 KiB: the executor's per-call cost showed at 2-8 KiB (issue 14,
     * np 2 over pml/rdrp: bcast, gather, scatter, reduce 1.2-1.5x tuned
     * with 1 KiB, 0.9-1.1x with 8-16 KiB).  A message the rings cannot
     * take (fewer, smaller rings with many ranks on a node) keeps its plan
     * off the direct path (fits(): runs_on_rings). */
    direct_limit = 16384;
    reg_ull("direct_limit", "Blocking "
        "collectives whose every message goes through a shared-memory ring and is at most this many bytes "
        "run on the direct path: the cached plan is walked in place and its messages pushed into the rings, "
        "with no operation object and no executor (same messages, so it mixes with the executor path); "
        "0: never (inline progress only; not under token throttling or MPI_THREAD_MULTIPLE)", OPAL_INFO_LVL_5, &direct_limit);
    throttle_value = "off";
    (void)mca_base_component_var_register(c, "throttle", help_with_range("throttle", "Token throttling of schedule messages (admission control before injection): off, rank "
        "(at most coll_cdag_throttle_rank_limit messages in flight per rank), or node (also a "
        "token pool in shared memory shared by the ranks of a node, served first-come-first-served, "
        "and at most coll_cdag_throttle_concurrency ranks injecting at once)"),
        MCA_BASE_VAR_TYPE_STRING, NULL, 0, 0, OPAL_INFO_LVL_4, MCA_BASE_VAR_SCOPE_READONLY, &throttle_value);
    throttle_rank_limit = 16;  /* bench/throttle_sweep.sh here: small messages peak at 16 in flight per rank */
    reg_int("throttle_rank_limit", "Messages in flight per rank (CRCT) under throttle rank or node; 0 = unlimited", OPAL_INFO_LVL_5, &throttle_rank_limit);
    throttle_node_tokens = 32;  /* ... 32 per node (2 ranks x 16); 256 KiB messages at 2 in flight */
    reg_int("throttle_node_tokens", "Tokens of the node pool (NRCT) under throttle node", OPAL_INFO_LVL_5, &throttle_node_tokens);
    throttle_bpt = 16384;  /* so a 256 KiB message takes 16 of the 32 tokens: 2 in flight */
    reg_ull("throttle_bytes_per_token", "Bytes one token pays for (a message takes ceil(bytes / this), at least 1, at most "
        "node_tokens / local ranks of the communicator, so every rank can have a message in "
        "flight); 0 = one token per message", OPAL_INFO_LVL_5, &throttle_bpt);
    throttle_concurrency = 0;
    reg_int("throttle_concurrency", "Ranks of a node injecting at once (CCT) under throttle node; 0 = unlimited", OPAL_INFO_LVL_5, &throttle_concurrency);
    throttle_cache = -1;
    reg_int("throttle_token_cache", "Tokens a rank may keep between messages under throttle node, so a rank alone on an idle "
        "pool touches no shared memory per message; filled only while half the pool is free and "
        "given back as soon as another rank waits. -1 = node_tokens / (2 x local ranks of the "
        "communicator), 0 = off", OPAL_INFO_LVL_6, &throttle_cache);
    throttle_recover = 1000;
    reg_int("throttle_recover_polls", "Unsuccessful admission attempts after which a waiting rank reclaims the tokens and the "
        "ticket of dead ranks of its node", OPAL_INFO_LVL_6, &throttle_recover);
    v_plan_cache = 32;
    reg_int("v_plan_cache", "Compiled schedules of "
        "v-variant calls (gatherv, scatterv, allgatherv, alltoallv, reduce_scatter with unequal counts) kept per "
        "communicator, found again by their counts and displacements, so a repeated call compiles and allocates "
        "nothing; when full the least recently used goes (MPI_T coll_cdag_cached_plans, coll_cdag_plans_evicted). "
        "0: none kept, every such call compiles its schedule", OPAL_INFO_LVL_5, &v_plan_cache);
    for (int i = 0; i < CDAG_NCOLL; ++i) {
        char name[64], help[256];
        snprintf(name, sizeof(name), "%s_algorithm", coll_names[i]);
        snprintf(help, sizeof(help), "Variant of %s (auto: the selection table)", coll_names[i]);
        algo_values[i] = "auto";
        snprintf(algo_rule_names[i], sizeof(algo_rule_names[i]), "coll_cdag_%s", name);
        param_rules[N_FIXED_RULES + i] = (rdrp_param_rule_t){algo_rule_names[i], RDRP_PARAM_WORD, &algo_values[i],
                                                              0, 0, 0, 0, algo_words[i]};
        (void)mca_base_component_var_register(c, name, help_with_range(name, help), MCA_BASE_VAR_TYPE_STRING, NULL, 0,
                                              0, OPAL_INFO_LVL_5,
                                              MCA_BASE_VAR_SCOPE_READONLY, &algo_values[i]);
    }
    (void)progress_enum;
    return OMPI_SUCCESS;
}

/* ------------------------------------------------------------ MPI_T */
static int stat_get(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    (void)obj;
    *(unsigned long *)value = (unsigned long)*(const uint64_t *)pvar->ctx;
    return OPAL_SUCCESS;
}

static void reg_pvar_class(const char *name, const char *help, uint64_t *counter, int cls)
{
    (void)mca_base_component_pvar_register(&mca_coll_cdag_component.collm_version, name, help,
        OPAL_INFO_LVL_4, cls, MCA_BASE_VAR_TYPE_UNSIGNED_LONG, NULL,
        MCA_BASE_VAR_BIND_NO_OBJECT, MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS,
        stat_get, NULL, NULL, counter);
}

static void reg_pvar(const char *name, const char *help, uint64_t *counter)
{
    reg_pvar_class(name, help, counter, MCA_BASE_PVAR_CLASS_COUNTER);
}

static void register_pvars(void)
{
    reg_pvar("schedules_compiled", "Collective schedules generated and compiled",
             &cdag_glue_stats.schedules_compiled);
    reg_pvar("cache_hits", "Collective calls that reused a cached compiled schedule",
             &cdag_glue_stats.cache_hits);
    reg_pvar("runs", "Schedule executions started (by an executor, or on the direct path)", &cdag_glue_stats.runs);
    reg_pvar("messages_sent", "Schedule messages injected", &cdag_glue_stats.msgs_sent);
    reg_pvar("bytes_sent", "Schedule payload bytes injected", &cdag_glue_stats.bytes_sent);
    reg_pvar("unexpected", "Messages that arrived before their receive vertex fired",
             &cdag_glue_stats.unexpected);
    reg_pvar("rendezvous", "Messages pulled by UCX rendezvous", &cdag_glue_stats.rndv_msgs);
    reg_pvar("thread_sleeps", "Times the engine thread went to sleep with no nonblocking schedule running",
             &cdag_glue_stats.thread_sleeps);
    reg_pvar("allocations", "Heap allocations coll/cdag made for collective calls (requests, schedules, "
             "executors, send and receive contexts, posted-receive entries); a repeated or persistent "
             "call makes none once warm", &cdag_glue_stats.allocations);
    reg_pvar("early_allocations", "Heap allocations coll/cdag made to hold messages that arrived before "
             "their receive (copies, entries, pulls): the pools grow to the high-water mark of how far "
             "peers run ahead and keep it", &cdag_glue_stats.early_allocations);
    reg_pvar("thread_polls", "Worker progress calls the engine thread made while the application was outside MPI",
             &cdag_glue_stats.thread_polls);
    reg_pvar("throttled", "Schedule messages that waited for admission (token throttling)",
             &cdag_glue_stats.throttled);
    reg_pvar("throttle_pools", "Node token pools opened, one per communicator (coll_cdag_throttle node)",
             &cdag_glue_stats.throttle_pools);
    reg_pvar("token_cache_hits", "Schedule messages admitted from the rank's token cache without "
             "touching the node pool (coll_cdag_throttle_token_cache)", &cdag_glue_stats.token_cache_hits);
    reg_pvar("dropped", "Arrivals dropped unread because their header was malformed (not a cdag packet)",
             &cdag_glue_stats.dropped);
    reg_pvar("thread_local_ops", "Initial local operations of nonblocking starts (the own block's copy of "
             "alltoall and allgather) that the engine thread ran (thread progress: the start only posts)",
             &cdag_glue_stats.thread_local_ops);
    reg_pvar("host_local_ops", "Initial local operations of nonblocking starts run by the application's "
             "own progress (a test or wait reached them before the engine thread)",
             &cdag_glue_stats.host_local_ops);
    reg_pvar("thread_start_naps", "Naps the engine thread began while a nonblocking start waited to be "
             "driven (it should drive a start at once: the application leaves MPI)",
             &cdag_glue_stats.thread_start_naps);
    reg_pvar_class("cached_plans", "Compiled schedules held now in the plan caches of all communicators (at most 64 "
                   "of fixed-size calls and coll_cdag_v_plan_cache of v-variant calls per communicator)",
                   &cdag_glue_stats.cached_plans, MCA_BASE_PVAR_CLASS_LEVEL);
    reg_pvar("plans_evicted", "Compiled schedules dropped from a full plan cache (the least recently used)",
             &cdag_glue_stats.plans_evicted);
    reg_pvar("ring_sent", "Schedule messages sent through a shared-memory ring to a peer on this node "
             "(coll_cdag_ring; the others went by UCX)", &cdag_glue_stats.ring_sent);
    reg_pvar("ring_backlogged", "Ring messages that found the peer's ring full and waited, in order, "
             "for room (pushed later by progress)", &cdag_glue_stats.ring_backlogged);
    reg_pvar("thread_starts", "Nonblocking runs the engine thread started (thread progress: the application's "
             "start call only hands the run over, so it leaves MPI at once)", &cdag_glue_stats.thread_starts);
    reg_pvar("host_starts", "Nonblocking runs handed to the engine thread that the application's own progress "
             "started because it came first (a test or wait right after the start)", &cdag_glue_stats.host_starts);
    reg_pvar("rndv_held", "Rendezvous messages that arrived before their receive and were left unpulled until "
             "it was posted (UCX's when no pre-made early-arrival buffer was free; every early single-copy "
             "descriptor, coll_cdag_cma): a sender that runs ahead waits "
             "instead of making this process allocate and fault in fresh memory", &cdag_glue_stats.rndv_held);
    reg_pvar("wait_turns", "Progress turns of blocking collectives' waits (each polls the rings)",
             &cdag_glue_stats.wait_turns);
    reg_pvar("wait_ucx_passes", "Turns of blocking collectives' waits that also progressed the UCX worker: "
             "every turn of a run with messages over UCX, every 16th of a run whose messages all go "
             "through rings", &cdag_glue_stats.wait_ucx_passes);
    reg_pvar("wait_other_passes", "Passes of the rest of Open MPI (opal_progress: the PML, other components) made "
             "by blocking collectives while they wait or push into a full ring: every 64th turn, or with "
             "mpi_yield_when_idle (oversubscribed: opal_progress then yields the core when it finds nothing) "
             "every turn that brought nothing", &cdag_glue_stats.wait_other_passes);
    reg_pvar("direct_runs", "Blocking collective runs of the direct path (coll_cdag_direct_limit: tiny "
             "ring-only calls, no operation object or executor); counted in runs too", &cdag_glue_stats.direct_runs);
    reg_pvar("lean_memo_hits", "Direct-path calls that reused the decisions (spec, buffer offsets, direct plan) of the "
             "communicator's last call of the same collective with the same arguments", &cdag_glue_stats.lean_hits);
    reg_pvar("cma_sent", "Schedule messages above coll_cdag_ring_limit sent to a peer on this node by single "
             "copy (a descriptor through its ring, the receiver's process_vm_readv; coll_cdag_cma)",
             &cdag_glue_stats.cma_sent);
    reg_pvar("cma_resent", "Single-copy messages sent again by UCX because the receiver could not read this "
             "process's memory (later large messages to it go by UCX)", &cdag_glue_stats.cma_resent);
}

/* A ring of ours was stopped by a malformed entry (cfg.ring_fatal): the
 * peer's later messages would never arrive, so the job ends here. */
static void ring_fatal(const char *why, int local_rank)
{
    char what[256];
    snprintf(what, sizeof(what), "%s (ring of local rank %d)", why, local_rank);
    opal_show_help("help-coll-cdag.txt", "ring-corrupt", true, opal_process_info.nodename, what);
    ompi_rte_abort(1, NULL);
}

/* ------------------------------------------------------------ open / close */
static int parse_algo(const char *s)
{
    if (!s) return CDAG_ALGO_AUTO;
    for (int a = 0; a < CDAG_NALGO; ++a)
        if (strcmp(s, algo_names[a]) == 0) return a;
    return -1;
}

static int parse_collectives(const char *list, unsigned *mask)
{
    *mask = 0;
    if (!list || strcmp(list, "all") == 0 || !*list) {
        *mask = (1u << CDAG_NCOLL) - 1;
        return 0;
    }
    char *copy = strdup(list), *save = NULL;
    int rc = 0;
    for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        int found = -1;
        for (int i = 0; i < CDAG_NCOLL; ++i)
            if (strcmp(t, coll_names[i]) == 0) found = i;
        if (found < 0) {
            opal_show_help("help-coll-cdag.txt", "bad-param", true, "coll_cdag_collectives", t);
            rc = -1;
            break;
        }
        *mask |= 1u << found;
    }
    free(copy);
    return rc;
}

/* One message naming the parameter, its value and the valid ones, written
 * to our own stderr (a forwarded show_help is lost about half the time
 * when the process ends right after it), then the end of the job: an MPI
 * process aborts; ompi_info, which opens components too, only reports. */
static void bad_value(const rdrp_param_error_t *err)
{
    char *msg = opal_show_help_string("help-coll-cdag.txt", "bad-value", true, opal_process_info.nodename,
                                      err->name, err->value, err->valid);
    if (msg) {
        fprintf(stderr, "%s", msg);
        free(msg);
    } else {
        fprintf(stderr, "coll/cdag on %s: %s = %s (valid: %s)\n", opal_process_info.nodename, err->name,
                err->value, err->valid);
    }
    fflush(stderr);
    if (ompi_mpi_state >= OMPI_MPI_STATE_INIT_STARTED) ompi_rte_abort(1, NULL);
}

/* mpi_yield_when_idle, which mpirun sets when it puts more ranks on a node
 * than it has cores (a user sets it for the same reason).  MPI_Init hands
 * it to opal_progress only after the collectives are set up, so the
 * variable itself is read here. */
static int yield_when_idle(void)
{
    const bool *v = NULL;
    int idx = mca_base_var_find("ompi", "mpi", NULL, "yield_when_idle");
    if (idx < 0 || mca_base_var_get_value(idx, &v, NULL, NULL) != OPAL_SUCCESS || v == NULL) return 0;
    return *v ? 1 : 0;
}

static int cdag_open(void)
{
    mca_coll_cdag_params_t *p = &mca_coll_cdag_params;
    p->output = opal_output_open(NULL);
    opal_output_set_verbosity(p->output, p->verbose);
#ifdef COLL_CDAG_SRC_HELP_DIR  /* not in packaged builds (configure --disable-source-help) */
    opal_show_help_add_dir(COLL_CDAG_SRC_HELP_DIR);
#endif
    opal_show_help_add_dir(RDRP_HELP_DIR);
    register_pvars();
    /* every value in its range, before anything starts: a refused one ends
     * the job here (any setting of ours means the user wants coll/cdag) */
    rdrp_param_error_t err;
    if (rdrp_param_check(param_rules, N_RULES, "OMPI_MCA_", &err) >= 0) {
        bad_value(&err);
        return OMPI_ERROR;
    }
    if (p->priority < 0) return OMPI_SUCCESS;  /* not asked for: no worker, nothing published */

    if (parse_collectives(coll_list, &p->enabled_mask) != 0) return OMPI_SUCCESS;
    p->progress = strcmp(progress_value, "thread") == 0;
    cdag_glue_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.thread = p->progress;
    /* MPI_Init sets the thread level before it opens the coll framework
     * (ompi_mpi_init: ompi_mpi_thread_level, then the framework opens), so
     * it is known here.  Below MPI_THREAD_MULTIPLE and without the engine
     * thread, one thread at a time calls us: no lock, and a single-threaded
     * UCX worker (the locks cost about 160 instructions per poll) */
    cfg.mpi_threads = ompi_mpi_thread_multiple ? 1 : 0;
    cfg.local_ranks = (int)opal_process_info.num_local_peers + 1;
    cfg.local_rank = (int)opal_process_info.my_local_rank;
    if (strcmp(throttle_value, "rank") == 0) cfg.throttle_mode = CDAG_THROTTLE_RANK;
    else if (strcmp(throttle_value, "node") == 0) cfg.throttle_mode = CDAG_THROTTLE_NODE;
    else cfg.throttle_mode = CDAG_THROTTLE_OFF;
    cfg.throttle_rank_limit = (uint32_t)throttle_rank_limit;
    cfg.throttle_node_tokens = (uint32_t)throttle_node_tokens;
    cfg.throttle_concurrency = (uint32_t)throttle_concurrency;
    cfg.throttle_bytes_per_token = throttle_bpt;
    cfg.throttle_recover = (uint32_t)throttle_recover;
    cfg.throttle_cache = throttle_cache;
    cfg.eager_buffers = (size_t)(p->eager_buffers > 0 ? p->eager_buffers : 0);
    cfg.eager_size = (size_t)eager_size;
    cfg.eager_limit = (uint64_t)eager_limit;
    cfg.plan_cache_v = (size_t)v_plan_cache;
    cfg.ring = ring_on;
    cfg.ring_limit = (uint64_t)ring_limit;
    cfg.cma = cma_on;
    cfg.cma_min = cma_min;
    cfg.far_line_ns = far_line_ns;
    cfg.oversubscribed = yield_when_idle();
    cfg.direct_limit = (uint64_t)direct_limit;
    cfg.jobid = OMPI_PROC_MY_NAME->jobid;
    cfg.ring_fatal = ring_fatal;
    for (int i = 0; i < CDAG_NCOLL; ++i) {
        int a = parse_algo(algo_values[i]);
        if (a < 0) {
            char name[64];
            snprintf(name, sizeof(name), "coll_cdag_%s_algorithm", coll_names[i]);
            opal_show_help("help-coll-cdag.txt", "bad-param", true, name, algo_values[i]);
            return OMPI_SUCCESS;
        }
        cfg.algo[i].algo = a;
        cfg.algo[i].tree = CDAG_ALGO_KNOMIAL;
        cfg.algo[i].radix = p->radix;
        cfg.algo[i].seg_bytes = seg_size;
        cfg.algo[i].window = p->window;
    }
    if (cdag_glue_init(&cfg) != 0) {
        opal_show_help("help-coll-cdag.txt", "init-failed", true, opal_process_info.nodename,
                       cdag_glue_last_error());
        return OMPI_SUCCESS;  /* the job runs on without cdag */
    }
    void *addr;
    size_t len;
    if (cdag_glue_worker_address(&addr, &len) != 0) {
        cdag_glue_fini();
        return OMPI_SUCCESS;
    }
    int rc;
    OPAL_MODEX_SEND(rc, OPAL_PMIX_GLOBAL, &mca_coll_cdag_component.collm_version, addr, len);
    cdag_glue_worker_address_release(addr);
    if (rc != OPAL_SUCCESS) {
        cdag_glue_fini();
        return OMPI_SUCCESS;
    }
    opal_progress_register(mca_coll_cdag_progress);
    progress_registered = 1;
    mca_coll_cdag_ready = 1;
    CDAG_VERBOSE(2, "engine service up (%s progress, throttle mode %d, rank limit %u, node tokens %u)",
                 p->progress ? "thread" : "inline", cfg.throttle_mode, cfg.throttle_rank_limit,
                 cfg.throttle_node_tokens);
    size_t ring_size = 0;
    uint64_t limit = cdag_glue_ring_limit(&ring_size);
    /* -1 resolved, as pml_rdrp_shm_cma_min: MPI_T and ompi_info show what
     * this process chose */
    if (cma_min < 0) cma_min = (int)cdag_glue_cma_min();
    if (limit) CDAG_VERBOSE(2, "shared-memory rings of %zu bytes to %d local ranks, ring limit %llu; single copy "
                            "from %llu bytes (0: above the ring limit only)", ring_size, cfg.local_ranks,
                            (unsigned long long)limit, (unsigned long long)cdag_glue_cma_min());
    else CDAG_VERBOSE(2, "no shared-memory rings (coll_cdag_ring %d, %d local ranks): UCX only", ring_on,
                      cfg.local_ranks);
    return OMPI_SUCCESS;
}

/* The finalize leak check (coll_cdag_finalize_check): the engine's
 * clean-up counts what it found alive, the requests are counted here; one
 * message, written to our own stderr as bad_value's. */
static int finalize_check(rdrp_tally_t *t, long live)
{
    rdrp_tally_add(t, "requests", live > 0 ? (uint64_t)live : 0, RDRP_TALLY_APP);
    int level = mca_coll_cdag_params.finalize_check;
    int verdict = rdrp_tally_verdict(t, level);
    if (verdict == 0) return OMPI_SUCCESS;
    char line[1024], lv[16];
    rdrp_tally_report_line(t, "coll/cdag", (int)OPAL_PROC_MY_NAME.vpid, line, sizeof(line));
    snprintf(lv, sizeof(lv), "%d", level);
    char *msg = opal_show_help_string("help-coll-cdag.txt", "finalize-leak", true, opal_process_info.nodename,
                                      lv, line);
    fprintf(stderr, "%s", msg ? msg : line);
    if (!msg) fprintf(stderr, "\n");
    free(msg);
    fflush(stderr);
    return verdict == 2 ? OMPI_ERROR : OMPI_SUCCESS;
}

static int cdag_close(void)
{
    int rc = OMPI_SUCCESS;
    if (progress_registered) {
        opal_progress_unregister(mca_coll_cdag_progress);
        progress_registered = 0;
    }
    if (mca_coll_cdag_ready) {
        rdrp_tally_t t;
        rdrp_tally_init(&t);
        long live = mca_coll_cdag_run_live_requests();
        cdag_glue_fini_tally(&t, live > 0 ? (uint64_t)live : 0);
        mca_coll_cdag_ready = 0;
        rc = finalize_check(&t, live);
    }
    mca_coll_cdag_run_fini();
    opal_output_close(mca_coll_cdag_params.output);
    return rc;
}

int mca_coll_cdag_init_query(bool enable_progress_threads, bool enable_mpi_threads)
{
    (void)enable_progress_threads;
    (void)enable_mpi_threads;
    return OMPI_SUCCESS;
}
