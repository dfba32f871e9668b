/*
 * pml/rdrp component: MCA tables, parameters, modex, help messages and the
 * common_ucx helpers.  Everything else lives in the C++ core.
 */
#include "ompi_config.h"

#include <stdio.h>
#include <stdlib.h>

#include "pml_rdrp.h"
#include "ucx_glue/rdrp_ucx.h"
#include "common/params/param_check.h"

#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/base/mca_base_var_enum.h"
#include "opal/mca/base/mca_base_pvar.h"
#include "opal/mca/pmix/pmix.h"
#include "opal/mca/common/ucx/common_ucx.h"
#include "opal/memoryhooks/memory.h"
#include "opal/util/output.h"
#include "opal/util/show_help.h"
#include "ompi/mca/rte/rte.h"

static int rdrp_register(void);
static int rdrp_open(void);
static int rdrp_close(void);
static void register_pvars(void);

mca_pml_rdrp_params_t mca_pml_rdrp_params;
int mca_pml_rdrp_params_invalid = 0;

mca_pml_base_component_2_0_0_t mca_pml_rdrp_component = {
    .pmlm_version = {
        MCA_PML_BASE_VERSION_2_0_0,
        .mca_component_name = "rdrp",
        MCA_BASE_MAKE_VERSION(component, RDRP_VERSION_MAJOR, RDRP_VERSION_MINOR, RDRP_VERSION_RELEASE),
        .mca_open_component = rdrp_open,
        .mca_close_component = rdrp_close,
        .mca_register_component_params = rdrp_register,
    },
    .pmlm_data = {
        .param_field = MCA_BASE_METADATA_PARAM_CHECKPOINT,
    },
    .pmlm_init = mca_pml_rdrp_init,
    .pmlm_finalize = mca_pml_rdrp_finalize,
};

/* MCA variables store sizes as unsigned long long / int */
static unsigned long long eager_limit = 8192, first_chunk = 8192, throttle_bpt = 16384;
static unsigned long long chunk_size = 512 * 1024;
/* measured (osu_latency/bw/bibw 256 KiB-4 MiB, chunks of 128 KiB-8 MiB): on
 * the cma path fewer, larger kernel copies win; chunks there only bound one
 * system call, since the receiver itself copies and so sets the pace */
static unsigned long long cma_chunk_size = 8 * 1024 * 1024;
static unsigned long long get_limit = 0;
static unsigned long long auto_rma_min = 2 * 1024 * 1024;
static unsigned long long send_buffer = 1024 * 1024;
static unsigned long long shm_ring_size = 1024 * 1024;
static unsigned long long shm_eager_limit = 128 * 1024;
/* Across two namespace hosts over TCP (UCX 1.13, --rt): eager gave 16,
 * 64 and 128 KiB latencies of 12, 31-38 and 51 us against 29, 45 and 75
 * by rendezvous (ob1/tcp: 17, 49 and 58).  128 KiB is also the ring
 * peers' limit, so the mailbox slot does not grow. */
static unsigned long long am_eager_limit = 128 * 1024;

static const mca_base_var_enum_value_t rndv_protocol_values[] = {
    {RDRP_RNDV_AUTO, "auto"}, {RDRP_RNDV_RDRP, "rdrp"}, {RDRP_RNDV_GET, "get"},
    {RDRP_RNDV_PUT, "put"}, {0, NULL}};

static const mca_base_var_enum_value_t data_path_values[] = {
    {RDRP_PATH_AUTO, "auto"}, {RDRP_PATH_RMA, "rma"}, {RDRP_PATH_AM, "am"}, {RDRP_PATH_CMA, "cma"}, {0, NULL}};

/* Valid values of every parameter (common/params/param_check.h): checked
 * at open, before any traffic, and appended to each help string.  The
 * numbers of the enumerations are those of rndv_protocol_values and
 * data_path_values above. */
_Static_assert(RDRP_RNDV_AUTO == 0 && RDRP_RNDV_RDRP == 1 && RDRP_RNDV_GET == 2 && RDRP_RNDV_PUT == 3,
               "rndv_protocol words below");
_Static_assert(RDRP_PATH_AUTO == 0 && RDRP_PATH_RMA == 1 && RDRP_PATH_AM == 2 && RDRP_PATH_CMA == 3,
               "data_path words below");
#define P_INT(n, lo, hi) {"pml_rdrp_" #n, RDRP_PARAM_INT, &mca_pml_rdrp_params.n, lo, hi, 0, 0, NULL}
#define P_DBL(n, lo, hi) {"pml_rdrp_" #n, RDRP_PARAM_DOUBLE, &mca_pml_rdrp_params.n, lo, hi, 0, 0, NULL}
#define P_ENUM(n, w) {"pml_rdrp_" #n, RDRP_PARAM_ENUM, &mca_pml_rdrp_params.n, 0, 0, 0, 0, w}
#define P_ULL(n, var, hi) {"pml_rdrp_" #n, RDRP_PARAM_ULL, &var, 0, 0, 0, hi, NULL}
#define ANY_SIZE 0x7fffffffffffffffULL
static const rdrp_param_rule_t param_rules[] = {
    P_INT(priority, 0, 100),
    P_INT(verbose, 0, 100),
    P_ULL(eager_limit, eager_limit, 4ULL << 20),
    P_ULL(rndv_threshold, eager_limit, 4ULL << 20),  /* the synonym, as the user may spell it */
    P_ULL(rndv_first_chunk, first_chunk, 64ULL << 20),
    P_ULL(chunk_size, chunk_size, 1ULL << 30),
    P_ULL(cma_chunk_size, cma_chunk_size, 1ULL << 30),
    P_INT(max_outstanding, 1, 1024),
    P_ENUM(rndv_protocol, "0=auto|1=rdrp|2=get|3=put"),
    P_ULL(get_limit, get_limit, ANY_SIZE),
    P_INT(put_poll_value, -1, 255),
    P_ENUM(data_path, "0=auto|1=rma|2=am|3=cma"),
    P_ULL(auto_rma_min, auto_rma_min, ANY_SIZE),
    P_INT(shm, 0, 1),
    P_INT(shm_prefault, 0, 1),
    P_INT(shm_cma_min, -1, 16 << 20),
    P_INT(shm_far_line_ns, 0, 1000000),
    P_ULL(shm_ring_size, shm_ring_size, 1ULL << 30),
    P_ULL(shm_eager_limit, shm_eager_limit, 16ULL << 20),
    P_ULL(am_eager_limit, am_eager_limit, 16ULL << 20),
    P_INT(progress_iterations, 1, 1000000),
    P_INT(credit, 0, 1),
    P_DBL(credit_wait_us, 0, 60e6),
    P_ULL(send_buffer, send_buffer, ANY_SIZE),
    P_ENUM(credit_mode, "0=static|1=dynamic"),
    P_INT(credit_slots, 0, 1 << 20),
    P_INT(credit_credit_slots, 0, 1024),
    P_INT(credit_piggyback, 0, 1),
    P_INT(reg_cache, 0, 1),
    P_ENUM(throttle, "0=off|1=rank|2=node"),
    P_INT(throttle_rank_limit, 0, 1 << 20),
    P_INT(throttle_node_tokens, 1, 1 << 20),
    P_ULL(throttle_bytes_per_token, throttle_bpt, ANY_SIZE),
    P_INT(throttle_token_cache, -1, 1 << 20),
    P_INT(throttle_recover_polls, 1, 0x7fffffff),
    P_DBL(finalize_timeout, 0, 86400),
    P_INT(finalize_check, 0, 2),
    P_DBL(peer_timeout, 0, 86400),
};
#define N_RULES ((int)(sizeof(param_rules) / sizeof(param_rules[0])))

/* The help string with the parameter's valid values appended. */
static const char *help_with_range(const char *name, const char *help)
{
    static char buf[2048];
    return rdrp_param_help(param_rules, N_RULES, "pml_rdrp_", name, help, buf, sizeof(buf));
}

static void reg_int_as(const char *name, const char *help, int *storage, int level, mca_base_var_flag_t flags,
                       mca_base_var_scope_t scope)
{
    (void)mca_base_component_var_register(&mca_pml_rdrp_component.pmlm_version, name,
                                          help_with_range(name, help),
                                          MCA_BASE_VAR_TYPE_INT, NULL, 0, flags, level, scope, storage);
}
static void reg_int(const char *name, const char *help, int *storage, int level)
{
    reg_int_as(name, help, storage, level, 0, MCA_BASE_VAR_SCOPE_READONLY);
}
/* ... that MPI_T_cvar_write may change while the job runs (read at
 * every use, not copied at start-up) */
static void reg_int_settable(const char *name, const char *help, int *storage, int level)
{
    reg_int_as(name, help, storage, level, MCA_BASE_VAR_FLAG_SETTABLE, MCA_BASE_VAR_SCOPE_LOCAL);
}

static void reg_size(const char *name, const char *help, unsigned long long *storage)
{
    (void)mca_base_component_var_register(&mca_pml_rdrp_component.pmlm_version, name,
                                          help_with_range(name, help),
                                          MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL, 0, 0,
                                          OPAL_INFO_LVL_4, MCA_BASE_VAR_SCOPE_READONLY, storage);
}

static void reg_double(const char *name, const char *help, double *storage, int level)
{
    (void)mca_base_component_var_register(&mca_pml_rdrp_component.pmlm_version, name,
                                          help_with_range(name, help),
                                          MCA_BASE_VAR_TYPE_DOUBLE, NULL, 0, 0, level,
                                          MCA_BASE_VAR_SCOPE_READONLY, storage);
}

/* An enumerated parameter: its values by name, stored as their numbers. */
static void reg_enum(const char *name, const mca_base_var_enum_value_t *values, const char *help,
                     int *storage, int level)
{
    char enum_name[64];
    mca_base_var_enum_t *e = NULL;
    snprintf(enum_name, sizeof(enum_name), "pml_rdrp_%s", name);
    (void)mca_base_var_enum_create(enum_name, values, &e);
    (void)mca_base_component_var_register(&mca_pml_rdrp_component.pmlm_version, name,
                                          help_with_range(name, help),
                                          MCA_BASE_VAR_TYPE_INT, e, 0, 0, level,
                                          MCA_BASE_VAR_SCOPE_READONLY, storage);
    if (e) OBJ_RELEASE(e);
}

static int rdrp_register(void)
{
    mca_pml_rdrp_params_t *p = &mca_pml_rdrp_params;

    p->priority = 5;
    reg_int("priority", "Priority of pml/rdrp (it is only ever used when selected by name: --mca pml rdrp)",
            &p->priority, OPAL_INFO_LVL_3);
    p->verbose = 0;
    reg_int("verbose", "Verbosity of pml/rdrp (0: errors only, 2: settings at start-up, 10: at the first contact with each peer, the protocol, data path, first chunk, chunk size and window a message of each size gets)",
            &p->verbose, OPAL_INFO_LVL_5);
    int eager_idx = mca_base_component_var_register(
        &mca_pml_rdrp_component.pmlm_version, "eager_limit",
        help_with_range("eager_limit",
                        "Largest message (in bytes of packed payload) sent eagerly in one active message; larger "
                        "ones use rendezvous (synonym: pml_rdrp_rndv_threshold)"),
        MCA_BASE_VAR_TYPE_UNSIGNED_LONG_LONG, NULL, 0, 0, OPAL_INFO_LVL_4,
        MCA_BASE_VAR_SCOPE_READONLY, &eager_limit);
    /* the rendezvous threshold is the eager limit: one setting, two names */
    if (eager_idx >= 0)
        (void)mca_base_var_register_synonym(eager_idx, "ompi", "pml", "rdrp", "rndv_threshold", 0);
    reg_size("rndv_first_chunk",
             "Payload bytes carried by the rendezvous RTS (the first chunk), delivered without waiting for the pull",
             &first_chunk);
    reg_size("chunk_size",
             "Rendezvous pull unit: the receiver fetches the message in pieces of this many bytes",
             &chunk_size);
    reg_size("cma_chunk_size",
             "Bytes one kernel copy (process_vm_readv) moves on the cma data path; the receiver copies, so this only bounds one system call",
             &cma_chunk_size);
    p->max_outstanding = 4;  /* sweep (bench/rndv_sweep.sh): w4 at 512K is the best am setting at 1 MiB and within 3% of the best rma one at 4-16 MiB */
    reg_int("max_outstanding",
            "Most rendezvous chunks one receive has in flight at once (the receiver's window: a slow receiver sets the pace)",
            &p->max_outstanding, OPAL_INFO_LVL_4);
    p->rndv_protocol = RDRP_RNDV_AUTO;
    reg_enum("rndv_protocol", rndv_protocol_values,
             "Rendezvous protocol for messages above the eager limit: rdrp (chunked receiver-driven pull "
             "with a bounded window), get (one GET of the whole message, completed by UCX's GET completion), put (receiver-initiated PUT with a randomised poll byte), auto (get up to "
             "pml_rdrp_get_limit bytes, rdrp above)",
             &p->rndv_protocol, OPAL_INFO_LVL_4);
    reg_size("get_limit",
             "With pml_rdrp_rndv_protocol=auto: rendezvous messages up to this size use the get protocol, larger ones rdrp (0: always rdrp)",
             &get_limit);
    p->put_poll_value = -1;
    reg_int("put_poll_value",
            "Put protocol: byte preset at the end of the receive buffer (-1: a random value per message, "
            "as the protocol prescribes; 0..255 fixes it, which makes explicit FINs frequent)",
            &p->put_poll_value, OPAL_INFO_LVL_6);
    p->data_path = RDRP_PATH_AUTO;
    reg_enum("data_path", data_path_values,
             "How rendezvous chunks move: rma (ucp_get_nbx from the sender's registered buffer), "
             "am (UCX active-message rendezvous accepted by the receiver with ucp_am_recv_data_nbx), "
             "cma (peers on the node: the receiver reads the sender's buffer with one kernel copy, "
             "process_vm_readv), auto (cma on the node when the shared-memory transport and CMA work, "
             "else am; rma off-node)",
             &p->data_path, OPAL_INFO_LVL_4);
    reg_size("auto_rma_min",
             "With pml_rdrp_data_path=auto, on-node messages of at least this size use the rma path "
             "(measured on UCX 1.13 shared memory: am has lower latency up to 1 MiB, rma moves large "
             "messages ~1.4x faster because both processes copy); 0 = always am on-node",
             &auto_rma_min);
    p->shm = 1;
    reg_int("shm", "Peers on this node: every message through a shared-memory ring of ours in the peer's segment "
            "and rendezvous data by one kernel copy (CMA), with no UCX call (0: UCX for every peer)",
            &p->shm, OPAL_INFO_LVL_4);
    p->shm_prefault = 1;
    reg_int("shm_prefault", "Allocate and map the pages of the shared-memory rings past their first 32 KiB when "
            "they are made (ours at start-up, a peer's at first contact) instead of at their first touch: on a VM "
            "guest a first-touch fault costs tens of microseconds, and a stream that walks fresh ring pages paid "
            "one every 64 messages (osu_bibw 1 B at a third of its later rate).  The heads, all that a consumer "
            "that keeps up uses, are left to their first use: pre-touched at start-up they stayed slower for "
            "the whole job (ping-pong at 4 KiB 1.19 against 0.99 us).  Costs the pages of every ring at once",
            &p->shm_prefault, OPAL_INFO_LVL_5);
    p->shm_cma_min = -1;
    reg_int("shm_cma_min", "Smallest message (bytes of packed payload) to a peer on this node that goes by "
            "single-copy rendezvous (CMA: the receiver copies straight from the sender's buffer) although it "
            "fits one ring message (pml_rdrp_shm_eager_limit); only for peers CMA reaches.  A ring message "
            "costs two copies that each cross between cores, a single copy one kernel copy plus a rendezvous "
            "round trip, and which wins from which size depends on the machine: -1 = chosen at start-up from "
            "the measured cost of a 4 KiB CMA copy (16384 when it costs at most 2.5 us, else 0); 0 = never "
            "(every message up to pml_rdrp_shm_eager_limit through the ring)",
            &p->shm_cma_min, OPAL_INFO_LVL_5);
    p->shm_far_line_ns = 90;
    reg_int_settable("shm_far_line_ns",
                     "A peer on this node whose cache lines take at least this many nanoseconds to reach this "
                     "core is far: eager ring messages of 512 bytes and more to it are written with non-temporal "
                     "stores, which do not wait for the lines to come back from the peer's cache; to a near peer "
                     "only streams of 4 KiB and more and a ping-pong's messages of 32 KiB and more.  The time is measured while the job runs (every 64th "
                     "ring send of 512 bytes or more times loads of a line the peer wrote; the median of the "
                     "last 8): the placement of two processes (one core complex or two; a hypervisor that moves "
                     "them) can change.  On a 2-vCPU EPYC guest 40-60 ns in one host placement, 120-180 in the "
                     "other.  0 = never measured (non-temporal stores for streams of 2 KiB and more and for "
                     "messages of 8 KiB and more, as while a peer is not yet measured).  Settable through "
                     "MPI_T while the job runs",
                     &p->shm_far_line_ns, OPAL_INFO_LVL_5);
    reg_size("shm_ring_size", "Bytes of the ring each local peer writes into (rounded up to a power of two, "
             "at least four of the largest messages)", &shm_ring_size);
    reg_size("shm_eager_limit", "Largest message (bytes of packed payload) sent eagerly, in one ring message, to a "
             "peer on this node; larger ones use rendezvous (for peers reached through UCX: pml_rdrp_eager_limit)",
             &shm_eager_limit);
    reg_size("am_eager_limit", "Largest message (bytes of packed payload) sent eagerly to a peer on another node "
             "whose rendezvous moves its data by active messages (UCX has no native get to it, e.g. over TCP, or "
             "pml_rdrp_data_path am): there a rendezvous costs round trips a copy does not; 0 = pml_rdrp_eager_limit "
             "for those peers too",
             &am_eager_limit);
    p->progress_iterations = 100;
    reg_int("progress_iterations", "Rounds of pml/rdrp's own progress (in blocking calls and unsuccessful iprobes) between two calls of the full opal_progress (every round with mpi_yield_when_idle, which mpirun sets when oversubscribed: opal_progress then yields the core)",
            &p->progress_iterations, OPAL_INFO_LVL_6);
    p->credit = 1;
    reg_int("credit", "Gate eager data with end-to-end credits so unexpected eager memory is bounded by "
            "the receiver's mailbox (a send without credit waits for one on its peer's queue, at most "
            "pml_rdrp_credit_wait_us, then goes by rendezvous, whose RTS needs no credit)",
            &p->credit, OPAL_INFO_LVL_4);
    p->credit_wait_us = 1000.0;
    reg_double("credit_wait_us",
               "Microseconds a send without credit waits for one before it goes by rendezvous (whose RTS needs "
               "no credit: a receiver waiting for a message stuck behind a full mailbox of unmatched ones "
               "always gets its envelope); to an on-node peer counted from when it has read every message "
               "in its ring",
               &p->credit_wait_us, OPAL_INFO_LVL_5);
    reg_size("send_buffer",
             "Bytes per process of early-completed copies: a standard send that waits for credit completes at "
             "once from a copy while the copies fit in this budget (each also counts one request object); "
             "beyond it the send completes when its message has left, so a producer that outruns its "
             "consumer is paced by it and its memory stays bounded",
             &send_buffer);
    p->credit_mode = 1;
    {
        static const mca_base_var_enum_value_t mode_values[] = {{0, "static"}, {1, "dynamic"}, {0, NULL}};
        reg_enum("credit_mode", mode_values,
                 "Credit flow control: static (equal fixed quotas) or dynamic (quotas follow sender activity)",
                 &p->credit_mode, OPAL_INFO_LVL_4);
    }
    p->credit_slots = 0;
    reg_int("credit_slots", "Mailbox slots (of max(eager_limit, rndv_first_chunk) bytes) per receiver; "
            "0 scales with the number of processes (16 per peer dynamic, 57 static, at least 256)",
            &p->credit_slots, OPAL_INFO_LVL_4);
    p->credit_credit_slots = 0;
    reg_int("credit_credit_slots", "Per-peer credit-region slots (also the static quota in dynamic mode); 0 = 2",
            &p->credit_credit_slots, OPAL_INFO_LVL_5);
    p->credit_piggyback = 1;
    reg_int("credit_piggyback", "Return credits piggybacked on data packets", &p->credit_piggyback,
            OPAL_INFO_LVL_5);
    p->reg_cache = 1;
    reg_int("reg_cache", "Cache memory registrations (only effective when Open MPI's memory-release hooks are available, so freed memory is never reused stale)",
            &p->reg_cache, OPAL_INFO_LVL_6);
    p->throttle = 0;
    {
        static const mca_base_var_enum_value_t thr_values[] = {{0, "off"}, {1, "rank"}, {2, "node"}, {0, NULL}};
        reg_enum("throttle", thr_values,
                 "Token throttling of point-to-point sends (coll/cdag's admission control): off; rank "
                 "(at most pml_rdrp_throttle_rank_limit eager messages or RTS per process not yet locally "
                 "complete); node (also a token pool shared by the job's processes on a node, "
                 "pml_rdrp_throttle_node_tokens, FCFS).  Refused sends wait in order.  Measured "
                 "(bench/throttle_sweep.sh part 4): floods of small isends at 4-8 processes per node move "
                 "1.3-4x faster in rank or node mode; neutral at 2 processes",
                 &p->throttle, OPAL_INFO_LVL_4);
    }
    p->throttle_rank_limit = 16;
    reg_int("throttle_rank_limit", "Sends per process being injected at once under pml_rdrp_throttle rank or node (0: unlimited)",
            &p->throttle_rank_limit, OPAL_INFO_LVL_5);
    p->throttle_node_tokens = 32;
    reg_int("throttle_node_tokens", "Tokens of the node pool under pml_rdrp_throttle node", &p->throttle_node_tokens,
            OPAL_INFO_LVL_5);
    reg_size("throttle_bytes_per_token",
             "Under pml_rdrp_throttle node a send costs ceil(bytes injected / this) tokens (at least 1, at most node_tokens / local processes); 0: one per send",
             &throttle_bpt);
    p->throttle_token_cache = -1;
    reg_int("throttle_token_cache", "Tokens a process keeps between sends under pml_rdrp_throttle node (given back when "
            "another process waits); -1: node_tokens / (2 x local processes), 0: none",
            &p->throttle_token_cache, OPAL_INFO_LVL_6);
    p->throttle_recover_polls = 1000;
    reg_int("throttle_recover_polls", "Admission attempts a waiting process makes before it reclaims the tokens of dead "
            "processes of the node", &p->throttle_recover_polls, OPAL_INFO_LVL_6);
    p->finalize_timeout = 30.0;
    reg_double("finalize_timeout", "Seconds finalize waits for outstanding control messages before giving up",
               &p->finalize_timeout, OPAL_INFO_LVL_6);
    /* off by default, like Open MPI's mpi_show_handle_leaks: most of what
     * it can find is the application's, and a program that finalizes with
     * a persistent request it never freed should not get a message on
     * every run; scripts/sanitize.sh leaks and the leak_* tests set it */
    p->finalize_check = 0;
    reg_int("finalize_check",
            "Finalize leak check, after pml/rdrp's own clean-up: 0 off (default); 1 one finalize-leak message per rank naming "
            "every object still alive; 2 the same, and pml/rdrp's finalize returns an error.  Requests never freed "
            "and messages never received are the application's (MPI makes finalizing with them erroneous or leaves "
            "them to the program); unexpected-message descriptors, control messages, buffered send copies, ring "
            "backlog, registrations, rkeys and UCX endpoints/requests left over are pml/rdrp's own (a bug)",
            &p->finalize_check, OPAL_INFO_LVL_6);
    /* generous by default: a stop (SIGSTOP, Ctrl-Z) is rarely meant to
     * last, but nothing is lost by waiting; a debugger's stop is never
     * counted (common/liveness/peer_watch.h) */
    p->peer_timeout = 300.0;
    reg_double("peer_timeout",
               "Seconds a peer process on this node may stay stopped (SIGSTOP, state T) while this process "
               "waits inside MPI before the job is aborted with a message naming it (0: never).  A peer that "
               "computes or sleeps outside MPI, however long, is never taken for stopped",
               &p->peer_timeout, OPAL_INFO_LVL_4);
    register_pvars();
    return OMPI_SUCCESS;
}

mca_pml_rdrp_counters_t mca_pml_rdrp_counters;

static int counter_get(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    (void)obj;
    *(unsigned long *)value = (unsigned long)*(const uint64_t *)pvar->ctx;
    return OMPI_SUCCESS;
}

static void reg_pvar(const char *name, const char *help, int var_class, uint64_t *counter)
{
    (void)mca_base_component_pvar_register(&mca_pml_rdrp_component.pmlm_version, name, help,
                                           OPAL_INFO_LVL_4, var_class, MCA_BASE_VAR_TYPE_UNSIGNED_LONG,
                                           NULL, MCA_BASE_VAR_BIND_NO_OBJECT,
                                           MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS,
                                           counter_get, NULL, NULL, counter);
}

static int credit_min_get(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    uint64_t lo, hi;
    (void)pvar; (void)obj;
    mca_pml_rdrp_credit_range(&lo, &hi);
    *(unsigned long *)value = (unsigned long)lo;
    return OMPI_SUCCESS;
}

static int credit_max_get(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    uint64_t lo, hi;
    (void)pvar; (void)obj;
    mca_pml_rdrp_credit_range(&lo, &hi);
    *(unsigned long *)value = (unsigned long)hi;
    return OMPI_SUCCESS;
}

static void register_pvars(void)
{
    mca_pml_rdrp_counters_t *k = &mca_pml_rdrp_counters;
    reg_pvar("eager_sent", "Messages sent with the eager protocol", MCA_BASE_PVAR_CLASS_COUNTER, &k->eager_sent);
    reg_pvar("rndv_sent", "Messages sent with a rendezvous protocol", MCA_BASE_PVAR_CLASS_COUNTER, &k->rndv_sent);
    reg_pvar("rndv_am", "Rendezvous messages sent over the am data path", MCA_BASE_PVAR_CLASS_COUNTER, &k->rndv_am);
    reg_pvar("rndv_rma", "Rendezvous messages sent over the rma data path", MCA_BASE_PVAR_CLASS_COUNTER, &k->rndv_rma);
    reg_pvar("rndv_cma", "Rendezvous messages sent over the cma data path (one kernel copy on the node)",
             MCA_BASE_PVAR_CLASS_COUNTER, &k->rndv_cma);
    reg_pvar("unexpected", "Arrivals that found no matching posted receive", MCA_BASE_PVAR_CLASS_COUNTER, &k->unexpected);
    reg_pvar("unexpected_inline", "Unexpected payloads small enough to wait in their descriptor (not in a mailbox slot "
             "or a heap copy)", MCA_BASE_PVAR_CLASS_COUNTER, &k->unexpected_inline);
    reg_pvar("rndv_rdrp", "Rendezvous messages sent with the rdrp (chunked pull) protocol", MCA_BASE_PVAR_CLASS_COUNTER, &k->rndv_rdrp);
    reg_pvar("rndv_get", "Rendezvous messages sent with the get protocol", MCA_BASE_PVAR_CLASS_COUNTER, &k->rndv_get);
    reg_pvar("rndv_put", "Rendezvous messages sent with the put protocol", MCA_BASE_PVAR_CLASS_COUNTER, &k->rndv_put);
    reg_pvar("put_fin_needed", "Put-protocol messages that needed an explicit FIN (last byte equal to the poll value)",
             MCA_BASE_PVAR_CLASS_COUNTER, &k->put_fin_needed);
    reg_pvar("credit_stalls", "Eager-size sends that found no credit when they were started", MCA_BASE_PVAR_CLASS_COUNTER, &k->credit_stalls);
    reg_pvar("credit_waits", "Sends that waited on their peer's queue (for a credit, or behind a send that did)",
             MCA_BASE_PVAR_CLASS_COUNTER, &k->credit_waits);
    reg_pvar("credit_wait_timeouts", "Waiting sends that went by rendezvous after pml_rdrp_credit_wait_us",
             MCA_BASE_PVAR_CLASS_COUNTER, &k->credit_wait_timeouts);
    reg_pvar("send_buffered", "Waiting standard sends whose request completed at once from a copy",
             MCA_BASE_PVAR_CLASS_COUNTER, &k->send_buffered);
    reg_pvar("send_buffered_hwm", "Most bytes held at once in early-completed copies of waiting sends "
             "(never above pml_rdrp_send_buffer): the sender-side memory bound",
             MCA_BASE_PVAR_CLASS_HIGHWATERMARK, &k->send_buffered_hwm);
    reg_pvar("credit_packets", "Explicit credit packets sent", MCA_BASE_PVAR_CLASS_COUNTER, &k->credit_packets);
    reg_pvar("credit_requests", "Compulsory credit return requests sent", MCA_BASE_PVAR_CLASS_COUNTER, &k->credit_requests);
    reg_pvar("credit_piggybacks", "Data packets that carried returned credits", MCA_BASE_PVAR_CLASS_COUNTER, &k->credit_piggybacks);
    reg_pvar("credits_piggybacked", "Credits returned on data packets", MCA_BASE_PVAR_CLASS_COUNTER, &k->credits_piggybacked);
    reg_pvar("mailbox_hwm", "Most mailbox slots held at once by unmatched eager data (never above pml_rdrp_mailbox_slots)",
             MCA_BASE_PVAR_CLASS_HIGHWATERMARK, &k->mailbox_hwm);
    reg_pvar("mailbox_slots", "Size of this process's eager mailbox in slots", MCA_BASE_PVAR_CLASS_SIZE, &k->mailbox_slots);
    reg_pvar("shm_compact", "Eager messages received in the compact format (up to 8 bytes, half a cache line of ring: "
             "a sender whose communicator rank is its process index, a tag and context id of 16 bits, no credits to return)",
             MCA_BASE_PVAR_CLASS_COUNTER, &k->shm_compact);
    reg_pvar("shm_far_nt", "Ring messages written with non-temporal stores because their peer's cache lines "
             "were measured far (pml_rdrp_shm_far_line_ns)", MCA_BASE_PVAR_CLASS_COUNTER, &k->shm_far_nt);
    reg_pvar("shm_sent", "Messages sent through a shared-memory ring (peers on this node)", MCA_BASE_PVAR_CLASS_COUNTER,
             &k->shm_sent);
    reg_pvar("shm_backlogged", "Ring messages that had to wait for room in the peer's ring", MCA_BASE_PVAR_CLASS_COUNTER,
             &k->shm_backlogged);
    reg_pvar("shm_passes", "Poll passes that took messages from the shared-memory rings (a pass ends after the "
             "message whose completion ends the caller's wait)", MCA_BASE_PVAR_CLASS_COUNTER, &k->shm_passes);
    reg_pvar("ucx_sent", "Messages sent as UCX active messages", MCA_BASE_PVAR_CLASS_COUNTER, &k->ucx_sent);
    reg_pvar("ucx_send_copies", "Request-free sends of small messages to peers reached through UCX that UCX could "
             "not send at once (its queue full, or the message above the transport's short-message size): they "
             "left from a heap copy, freed when sent (at most one per credit in flight)",
             MCA_BASE_PVAR_CLASS_COUNTER, &k->ucx_send_copies);
    reg_pvar("wait_rounds", "Rounds of blocking waits (each polls pml/rdrp's own rings and worker)",
             MCA_BASE_PVAR_CLASS_COUNTER, &k->wait_rounds);
    reg_pvar("wait_full_passes", "Rounds of blocking waits that passed the whole of Open MPI (opal_progress): "
             "every pml_rdrp_progress_iterations-th, every one with mpi_yield_when_idle (oversubscribed: "
             "opal_progress then yields the core when it finds nothing)", MCA_BASE_PVAR_CLASS_COUNTER,
             &k->wait_full_passes);
    reg_pvar("throttled", "Sends that waited for admission (pml_rdrp_throttle)", MCA_BASE_PVAR_CLASS_COUNTER,
             &k->throttled);
    reg_pvar("throttle_cache_hits", "Sends admitted from the process's token cache (pml_rdrp_throttle node)",
             MCA_BASE_PVAR_CLASS_COUNTER, &k->throttle_cache_hits);
    (void)mca_base_component_pvar_register(&mca_pml_rdrp_component.pmlm_version, "credits_min",
            "Fewest credits this process holds towards any receiver", OPAL_INFO_LVL_4,
            MCA_BASE_PVAR_CLASS_LEVEL, MCA_BASE_VAR_TYPE_UNSIGNED_LONG, NULL, MCA_BASE_VAR_BIND_NO_OBJECT,
            MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS, credit_min_get, NULL, NULL, NULL);
    (void)mca_base_component_pvar_register(&mca_pml_rdrp_component.pmlm_version, "credits_max",
            "Most credits this process holds towards any receiver", OPAL_INFO_LVL_4,
            MCA_BASE_PVAR_CLASS_LEVEL, MCA_BASE_VAR_TYPE_UNSIGNED_LONG, NULL, MCA_BASE_VAR_BIND_NO_OBJECT,
            MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS, credit_max_get, NULL, NULL, NULL);
    reg_pvar("chunks", "Rendezvous chunks pulled by this process as a receiver", MCA_BASE_PVAR_CLASS_COUNTER, &k->chunks);
    reg_pvar("max_chunks_inflight", "Most rendezvous chunks one receive had in flight at once (never above pml_rdrp_max_outstanding)",
             MCA_BASE_PVAR_CLASS_HIGHWATERMARK, &k->max_chunks_inflight);
    reg_pvar("max_bytes_inflight", "Most rendezvous chunk bytes one receive had in flight at once (never above max_outstanding x chunk_size)",
             MCA_BASE_PVAR_CLASS_HIGHWATERMARK, &k->max_bytes_inflight);
}

static void rdrp_mem_release_cb(void *buf, size_t length, void *cbdata, bool from_alloc)
{
    (void)cbdata;
    (void)from_alloc;
    mca_pml_rdrp_mem_release(buf, length);
}

static int rdrp_open(void)
{
    mca_pml_rdrp_params_t *p = &mca_pml_rdrp_params;
    p->eager_limit = (size_t)eager_limit;
    p->rndv_first_chunk = (size_t)first_chunk;
    p->chunk_size = chunk_size ? (size_t)chunk_size : 512 * 1024;  /* 0: the default (help) */
    p->cma_chunk_size = cma_chunk_size ? (size_t)cma_chunk_size : p->chunk_size;
    p->get_limit = (size_t)get_limit;
    p->auto_rma_min = (size_t)auto_rma_min;
    p->send_buffer = (size_t)send_buffer;
    p->shm_ring_size = (size_t)shm_ring_size;
    p->shm_eager_limit = (size_t)shm_eager_limit;
    p->am_eager_limit = (size_t)am_eager_limit;
    p->throttle_bytes_per_token = (uint64_t)throttle_bpt;
    if (p->rndv_first_chunk > p->chunk_size) p->rndv_first_chunk = p->chunk_size;
    /* measured on shared memory with UCX 1.13: UCX's AM rendezvous is true
     * zero-copy (cma), while ucp_get_nbx on user memory is emulated through
     * the sender's progress; off-node, GET is real RDMA on IB/RoCE. */

    p->output = opal_output_open(NULL);
    opal_output_set_verbosity(p->output, p->verbose);
    /* the source tree first: a stale installed copy must not shadow the
     * topics of the build being run (a missing directory is skipped) */
#ifdef RDRP_SRC_HELP_DIR  /* not in packaged builds (configure --disable-source-help) */
    opal_show_help_add_dir(RDRP_SRC_HELP_DIR);
#endif
    opal_show_help_add_dir(RDRP_HELP_DIR);

    /* a value out of its range fails the job here, before any traffic:
     * init then declines, and with --mca pml rdrp nothing else is tried */
    rdrp_param_error_t err;
    if (rdrp_param_check(param_rules, N_RULES, "OMPI_MCA_", &err) >= 0) {
        char what[256];
        snprintf(what, sizeof(what), "%s = %s", err.name, err.value);
        mca_pml_rdrp_show_help("bad-value", what, err.valid);
        mca_pml_rdrp_params_invalid = 1;
    }

    /* UCX must hear about memory released by the application too */
    opal_common_ucx_mca_register();
    if (p->reg_cache &&
        (opal_mem_hooks_support_level() & (OPAL_MEMORY_FREE_SUPPORT | OPAL_MEMORY_MUNMAP_SUPPORT)) ==
            (OPAL_MEMORY_FREE_SUPPORT | OPAL_MEMORY_MUNMAP_SUPPORT)) {
        opal_mem_hooks_register_release(rdrp_mem_release_cb, NULL);
        rdrp_ucx_reg_set_caching(1);
    } else {
        rdrp_ucx_reg_set_caching(0);
    }
    return OMPI_SUCCESS;
}

static int rdrp_close(void)
{
    opal_mem_hooks_unregister_release(rdrp_mem_release_cb);
    opal_common_ucx_mca_deregister();
    opal_output_close(mca_pml_rdrp_params.output);
    return OMPI_SUCCESS;
}

int mca_pml_rdrp_modex_send(const void *addr, size_t len)
{
    int rc;
    OPAL_MODEX_SEND(rc, OPAL_PMIX_GLOBAL, &mca_pml_rdrp_component.pmlm_version, (void *)addr, len);
    return rc;
}

int mca_pml_rdrp_modex_recv(ompi_proc_t *proc, void **addr, size_t *len)
{
    int rc;
    OPAL_MODEX_RECV(rc, &mca_pml_rdrp_component.pmlm_version, &proc->super.proc_name, addr, len);
    return rc;
}

/* ------------------------------------------------------------ versions
 * Every rank publishes the version of its pml/rdrp ("MAJOR.MINOR.RELEASE";
 * the modex key of OPAL_MODEX_SEND above carries only major.minor) and
 * add_procs compares it with every peer's before any traffic, so ranks
 * that disagree (another PML, another build) stop with one message naming
 * both sides.  RDRP_TEST_FAKE_VERSION replaces the published version: it
 * exists only so that scripts/faults.sh mismatch can start a job whose
 * ranks disagree without building a second copy. */
#define RDRP_VERSION_KEY "pml.rdrp.version"
#define STR2(x) #x
#define STR(x) STR2(x)
static const char *my_version(void)
{
    const char *fake = getenv("RDRP_TEST_FAKE_VERSION");
    return fake && *fake ? fake : STR(RDRP_VERSION_MAJOR) "." STR(RDRP_VERSION_MINOR) "." STR(RDRP_VERSION_RELEASE);
}

int mca_pml_rdrp_version_publish(void)
{
    int rc;
    OPAL_MODEX_SEND_VALUE(rc, OPAL_PMIX_GLOBAL, RDRP_VERSION_KEY, (char *)my_version(), OPAL_STRING);
    return rc;
}

int mca_pml_rdrp_version_check(ompi_proc_t **procs, size_t nprocs)
{
    const char *mine = my_version();
    for (size_t i = 0; i < nprocs; ++i) {
        ompi_proc_t *proc = procs[i];
        if (proc == ompi_proc_local_proc) continue;
        char *theirs = NULL, *host = NULL, *pml = NULL;
        int rc;
        OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, RDRP_VERSION_KEY, &proc->super.proc_name, &theirs, OPAL_STRING);
        if (rc == OPAL_SUCCESS && theirs && strcmp(theirs, mine) == 0) {
            free(theirs);
            continue;
        }
        OPAL_MODEX_RECV_VALUE_OPTIONAL(rc, OPAL_PMIX_HOSTNAME, &proc->super.proc_name, &host, OPAL_STRING);
        char peer[256], what[512];
        snprintf(peer, sizeof(peer), "rank %u %s on %s", proc->super.proc_name.vpid,
                 OMPI_NAME_PRINT(&proc->super.proc_name), host ? host : "an unknown host");
        if (theirs) {
            snprintf(what, sizeof(what), "%s runs pml/rdrp %s, this process pml/rdrp %s", peer, theirs, mine);
            mca_pml_rdrp_show_help("version-mismatch", what, "");
        } else {
            /* the PML it selected, as Open MPI's own check reads it */
            size_t len = 0;
            OPAL_MODEX_RECV_STRING(rc, "pml.base.2.0", &proc->super.proc_name, (void **)&pml, &len);
            snprintf(what, sizeof(what), "%s selected pml %s, this process pml rdrp %s", peer,
                     (rc == OPAL_SUCCESS && pml) ? pml : "(another: it published no pml/rdrp version)", mine);
            mca_pml_rdrp_show_help("pml-mismatch", what, "");
        }
        free(theirs);
        free(host);
        free(pml);
        return OMPI_ERR_UNREACH;
    }
    return OMPI_SUCCESS;
}

/* Rendered here and written to our own stderr, which mpirun forwards
 * reliably: Open MPI 4.1.4 loses a forwarded show_help message about half
 * the time when the process ends soon after it ("Data unpack would read
 * past end of buffer" in show_help.c), and our messages are errors that
 * usually end the job: they must never be silent. */
void mca_pml_rdrp_show_help(const char *topic, const char *arg1, const char *arg2)
{
    char *msg = opal_show_help_string("help-pml-rdrp.txt", topic, true, ompi_process_info.nodename,
                                      arg1 ? arg1 : "", arg2 ? arg2 : "");
    if (msg) {
        fprintf(stderr, "%s", msg);
        free(msg);
    } else {
        fprintf(stderr, "pml/rdrp on %s: %s: %s %s\n", ompi_process_info.nodename, topic, arg1 ? arg1 : "",
                arg2 ? arg2 : "");
    }
    fflush(stderr);
}

void mca_pml_rdrp_fatal(const char *topic, const char *arg1, const char *arg2)
{
    mca_pml_rdrp_show_help(topic, arg1, arg2);
    ompi_rte_abort(1, NULL);
}

int mca_pml_rdrp_disconnect(mca_pml_rdrp_del_proc_t *procs, size_t n, void *worker)
{
    /* same layout as opal_common_ucx_del_proc_t */
    return opal_common_ucx_del_procs((opal_common_ucx_del_proc_t *)procs, n,
                                     OMPI_PROC_MY_NAME->vpid, 32, (ucp_worker_h)worker);
}
