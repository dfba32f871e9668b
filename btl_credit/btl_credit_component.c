/*
 * btl/credit component: MCA tables, parameters, MPI_T performance
 * variables, the selection test, modex, show_help and the memory hooks.
 * Everything else lives in the C++ core (btl_credit_*.cc).
 */
#include "opal_config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "btl_credit.h"
#include "ucx_glue/rdrp_ucx.h"
#include "common/params/param_check.h"

#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/base/mca_base_var_enum.h"
#include "opal/mca/base/mca_base_pvar.h"
#include "opal/mca/btl/base/base.h"
#include "opal/mca/common/ucx/common_ucx.h"
#include "opal/mca/pmix/pmix.h"
#include "opal/memoryhooks/memory.h"
#include "opal/util/output.h"
#include "opal/util/show_help.h"

static int credit_register(void);
static int credit_open(void);
static int credit_close(void);
static mca_btl_base_module_t **credit_init(int *num_btls, bool enable_progress_threads,
                                           bool enable_mpi_threads);

mca_btl_credit_params_t mca_btl_credit_params;

mca_btl_base_component_3_0_0_t mca_btl_credit_component = {
    .btl_version = {
        MCA_BTL_BASE_VERSION_3_1_0,
        .mca_component_name = "credit",
        MCA_BASE_MAKE_VERSION(component, RDRP_VERSION_MAJOR, RDRP_VERSION_MINOR, RDRP_VERSION_RELEASE),
        .mca_open_component = credit_open,
        .mca_close_component = credit_close,
        .mca_register_component_params = credit_register,
    },
    .btl_data = {
        .param_field = MCA_BASE_METADATA_PARAM_CHECKPOINT,
    },
    .btl_init = credit_init,
    .btl_progress = mca_btl_credit_component_progress,
};

mca_btl_base_module_t mca_btl_credit_module = {
    .btl_component = &mca_btl_credit_component,
    .btl_add_procs = mca_btl_credit_add_procs,
    .btl_del_procs = mca_btl_credit_del_procs,
    .btl_register = NULL,
    .btl_finalize = mca_btl_credit_finalize,
    .btl_alloc = mca_btl_credit_alloc,
    .btl_free = mca_btl_credit_free,
    .btl_prepare_src = mca_btl_credit_prepare_src,
    .btl_send = mca_btl_credit_send,
    .btl_sendi = mca_btl_credit_sendi,
    .btl_put = mca_btl_credit_put,
    .btl_get = mca_btl_credit_get,
    .btl_atomic_op = mca_btl_credit_aop,
    .btl_atomic_fop = mca_btl_credit_afop,
    .btl_atomic_cswap = mca_btl_credit_acswap,
    .btl_dump = mca_btl_credit_dump,
    .btl_register_mem = mca_btl_credit_register_mem,
    .btl_deregister_mem = mca_btl_credit_deregister_mem,
    .btl_register_error = mca_btl_credit_register_error,
};

/* ------------------------------------------------------------ parameters */
static const mca_base_var_enum_value_t mode_values[] = {
    {MCA_BTL_CREDIT_MODE_STATIC, "static"}, {MCA_BTL_CREDIT_MODE_DYNAMIC, "dynamic"}, {0, NULL}};

/* Valid values of every parameter (common/params/param_check.h): ours and
 * the standard btl ones Open MPI registers for us (mca_btl_base_param_register;
 * their help strings are Open MPI's, so their ranges are documented in
 * README and help-file topic bad-value).  Checked by init, when the btl
 * list names credit, before any traffic.  The sizes of one packet are
 * bounded by the slot (set in check_params). */
#define B_INT(n, lo, hi) {"btl_credit_" #n, RDRP_PARAM_INT, &mca_btl_credit_params.n, lo, hi, 0, 0, NULL}
#define B_MOD(n, kind, lo, hi) {"btl_credit_" #n, kind, &mca_btl_credit_module.btl_##n, 0, 0, lo, hi, NULL}
/* one GET may move up to 1 TiB: no message is larger, and a bound lets a
 * nonsense value (a word, -1) be told from a meant one */
#define GET_LIMIT_MAX (1ULL << 40)
enum { RULE_EAGER = 9, RULE_RNDV_EAGER = 10, RULE_MAX_SEND = 11 };
static rdrp_param_rule_t param_rules[] = {
    B_INT(verbose, 0, 100),
    {"btl_credit_mode", RDRP_PARAM_ENUM, &mca_btl_credit_params.mode, 0, 0, 0, 0, "0=static|1=dynamic"},
    B_INT(slots, 0, 1 << 20),
    {"btl_credit_slot_size", RDRP_PARAM_SIZE, &mca_btl_credit_params.slot_size, 0, 0, 64, 16 << 20, NULL},
    B_INT(credit_slots, 0, 1024),
    B_INT(piggyback, 0, 1),
    B_INT(reg_cache, 0, 1),
    {"btl_credit_finalize_timeout", RDRP_PARAM_DOUBLE, &mca_btl_credit_params.finalize_timeout, 0, 86400, 0, 0,
     NULL},
    /* bits: send is required; put, get and the atomics are implemented */
    {"btl_credit_flags", RDRP_PARAM_FLAGS, &mca_btl_credit_module.btl_flags, 0, 0, MCA_BTL_FLAGS_SEND,
     MCA_BTL_FLAGS_SEND | MCA_BTL_FLAGS_PUT | MCA_BTL_FLAGS_GET | MCA_BTL_FLAGS_ATOMIC_OPS |
         MCA_BTL_FLAGS_ATOMIC_FOPS,
     "1=send|2=put|4=get|0x8000=atomics|0x10000=fetching-atomics"},
    B_MOD(eager_limit, RDRP_PARAM_SIZE, 1, 8192 - MCA_BTL_CREDIT_HDR_SIZE),
    B_MOD(rndv_eager_limit, RDRP_PARAM_SIZE, 1, 8192 - MCA_BTL_CREDIT_HDR_SIZE),
    B_MOD(max_send_size, RDRP_PARAM_SIZE, 1, 8192 - MCA_BTL_CREDIT_HDR_SIZE),
    {"btl_credit_atomic_flags", RDRP_PARAM_FLAGS, &mca_btl_credit_module.btl_atomic_flags, 0, 0, 0,
     MCA_BTL_CREDIT_ATOMIC_FLAGS,
     "0x1=add|0x200=and|0x400=or|0x800=xor|0x10000=swap|0x1000000=32-bit|0x10000000=compare-and-swap|"
     "0x20000000=global"},
    B_MOD(rdma_pipeline_send_length, RDRP_PARAM_SIZE, 0, 1ULL << 30),
    B_MOD(rdma_pipeline_frag_size, RDRP_PARAM_SIZE, 1, 1ULL << 30),
    B_MOD(min_rdma_pipeline_size, RDRP_PARAM_SIZE, 0, 0x7fffffffULL),
    B_MOD(get_limit, RDRP_PARAM_SIZE, 1, GET_LIMIT_MAX),
    B_MOD(get_alignment, RDRP_PARAM_SIZE, 0, 1 << 20),
    B_MOD(exclusivity, RDRP_PARAM_U32, 0, 0xffffffffULL),
    B_MOD(latency, RDRP_PARAM_U32, 0, 0xffffffffULL),
    B_MOD(bandwidth, RDRP_PARAM_U32, 0, 0xffffffffULL),
    B_INT(finalize_check, 0, 2),  /* after the RULE_* indices */
    {"btl_credit_put_eager_rate", RDRP_PARAM_DOUBLE, &mca_btl_credit_params.put_eager_rate, 0, 1e9, 0, 0, NULL},
    B_INT(window_cma, 0, 1),
};
#define N_RULES ((int)(sizeof(param_rules) / sizeof(param_rules[0])))

static const char *help_with_range(const char *name, const char *help)
{
    static char buf[2048];
    return rdrp_param_help(param_rules, N_RULES, "btl_credit_", name, help, buf, sizeof(buf));
}

/* A help message rendered here and written to our own stderr at once, for
 * a message right before the process ends: the daemon reads stderr from a
 * pipe whatever happens next, while a show_help forwarded to mpirun is sent
 * after the call returns and is lost or cut when the process ends at once
 * (test/cluster fault linkdown-ob1-credit: mpirun printed "ORTE_ERROR_LOG:
 * Out of resource in show_help.c" and only ob1's "btl/credit" line
 * remained).  detail is printed instead if the help text is missing. */
static void help_to_stderr(const char *topic, const char *detail, ...)
{
    va_list ap;
    va_start(ap, detail);
    char *text = opal_show_help_vstring("btl_credit_help.txt", topic, true, ap);
    va_end(ap);
    if (text) fputs(text, stderr);
    else fprintf(stderr, "btl/credit on %s: %s: %s\n", opal_process_info.nodename, topic, detail);
    fflush(stderr);
    free(text);
}

/* Every value in its range?  If not: one message naming the parameter,
 * written to our own stderr (help_to_stderr), and the end of the job. */
static void check_params(void)
{
    size_t packet = mca_btl_credit_params.slot_size > MCA_BTL_CREDIT_HDR_SIZE
                        ? mca_btl_credit_params.slot_size - MCA_BTL_CREDIT_HDR_SIZE : 1;
    param_rules[RULE_EAGER].uhi = param_rules[RULE_RNDV_EAGER].uhi = param_rules[RULE_MAX_SEND].uhi = packet;
    rdrp_param_error_t err;
    if (rdrp_param_check(param_rules, N_RULES, "OMPI_MCA_", &err) < 0) return;
    char detail[512];
    snprintf(detail, sizeof(detail), "%s = %s (valid: %s)", err.name, err.value, err.valid);
    help_to_stderr("bad-value", detail, opal_process_info.nodename, err.name, err.value, err.valid);
    /* the btl list names credit: running on without it (or over another
     * btl) is not what was asked for */
    if (opal_pmix.abort) (void)opal_pmix.abort(1, "btl/credit: MCA parameter out of range", NULL);
    _exit(1);
}

static void reg_var(const char *name, const char *help, mca_base_var_type_t type,
                    mca_base_var_enum_t *enumerator, int level, void *storage)
{
    (void)mca_base_component_var_register(&mca_btl_credit_component.btl_version, name,
                                          help_with_range(name, help), type,
                                          enumerator, 0, 0, level, MCA_BASE_VAR_SCOPE_READONLY,
                                          storage);
}

static void register_pvars(void);

static int credit_register(void)
{
    mca_btl_credit_params_t *p = &mca_btl_credit_params;
    mca_base_var_enum_t *mode_enum = NULL;

    (void)mca_base_var_group_component_register(&mca_btl_credit_component.btl_version,
            "BTL over UCX active messages with credit-based end-to-end flow control");

    p->verbose = 0;
    reg_var("verbose", "Verbosity of btl/credit (0: errors only, 2: set-up and statistics at "
            "finalize, 10: every credit decision, 50: every packet)",
            MCA_BASE_VAR_TYPE_INT, NULL, OPAL_INFO_LVL_5, &p->verbose);
    p->mode = MCA_BTL_CREDIT_MODE_DYNAMIC;
    (void)mca_base_var_enum_create("btl_credit_mode", mode_values, &mode_enum);
    reg_var("mode", "Credit flow control: static (every sender owns an equal, fixed share of the "
            "receiver's mailbox; thesis ch. 5) or dynamic (a static minimum per sender plus a "
            "dynamic region redistributed to active senders by credit stealing and compulsory "
            "credit return; thesis ch. 6)",
            MCA_BASE_VAR_TYPE_INT, mode_enum, OPAL_INFO_LVL_4, &p->mode);
    OBJ_RELEASE(mode_enum);
    p->slots = 0;
    reg_var("slots", "Mailbox slots per receiver (credit region + data region); every arriving "
            "packet waits in a data slot until it is handed to the PML.  0 = scale with the "
            "number of peers (dynamic: 16 per peer, static: 57 per peer, at least 64)",
            MCA_BASE_VAR_TYPE_INT, NULL, OPAL_INFO_LVL_4, &p->slots);
    /* Large slots cost nothing until a packet fills them: the mailbox is
     * untouched memory except where packets landed, and the free list
     * reuses the most recently freed slot first.  Eager packets stay small
     * (btl_credit_eager_limit); the slot size is the fragment size of
     * ob1's send pipeline, which carries large messages to peers without
     * RGET (over TCP).  Across two hosts over TCP: 8 KiB fragments moved
     * 540-600 MB/s at 1-16 MiB, 128 KiB ones 1700-1900 (ob1/tcp 1800-2700,
     * its max_send_size is 128 KiB too). */
    p->slot_size = 131072;
    reg_var("slot_size", "Bytes per mailbox slot: one packet with its 16-byte credit header.  "
            "Sets the maximum send size (slot_size - 16: ob1's pipeline fragments where it "
            "does not use RGET, e.g. to peers over TCP); eager packets use at most "
            "btl_credit_eager_limit of a slot, and slot memory no packet touched costs nothing",
            MCA_BASE_VAR_TYPE_SIZE_T, NULL, OPAL_INFO_LVL_4, &p->slot_size);
    p->credit_slots = 0;
    reg_var("credit_slots", "Credit-region slots per peer: how many explicit credit packets "
            "from one receiver may be unprocessed at a sender (thesis eq. 5.2); in dynamic mode "
            "also every sender's static quota.  0 = 2, or 1 when the mailbox is too small for 2",
            MCA_BASE_VAR_TYPE_INT, NULL, OPAL_INFO_LVL_5, &p->credit_slots);
    p->piggyback = 1;
    reg_var("piggyback", "Return credits piggybacked on data packets going back to the sender "
            "(0: only explicit credit packets)",
            MCA_BASE_VAR_TYPE_INT, NULL, OPAL_INFO_LVL_5, &p->piggyback);
    p->reg_cache = 1;
    reg_var("reg_cache", "Cache memory registrations for put/get (only effective when Open MPI's "
            "memory-release hooks are available, so freed memory is never reused stale)",
            MCA_BASE_VAR_TYPE_INT, NULL, OPAL_INFO_LVL_6, &p->reg_cache);
    p->window_cma = 1;
    reg_var("window_cma", "Puts and gets to MPI windows (memory osc/rdma registered for atomics) of "
            "processes on this node by one CMA copy (process_vm_writev/readv), which needs no help "
            "from the window's owner; checked per peer on first use and left for UCX when the kernel "
            "refuses (ptrace scope) or the peer is not who its handle says.  0: always through UCX "
            "(its rendezvous puts and requested gets wait for the owner's progress)",
            MCA_BASE_VAR_TYPE_INT, NULL, OPAL_INFO_LVL_5, &p->window_cma);
    p->finalize_timeout = 10.0;
    reg_var("finalize_timeout", "Seconds finalize waits for UCX endpoints to flush and close "
            "before giving up (a dead peer must not hang MPI_Finalize)",
            MCA_BASE_VAR_TYPE_DOUBLE, NULL, OPAL_INFO_LVL_6, &p->finalize_timeout);
    /* Eager costs the receiver a copy at memory speed (about 5 GB/s here),
     * about 12 % of the wire time at 600 MB/s, less below; the saved
     * reverse-direction trips win there.  Across the namespace cluster
     * rendezvous samples read 17-307 MB/s with ports shaped to 2 Gbit/s
     * (eager 1.5-1.9x rendezvous in bibw at 1 MiB), and unshaped the best
     * of three consecutive samples read 1100-3600 (single ones down to 81
     * in bibw at load 19; rendezvous 1.3-1.9x eager there).
     * btl_credit_put_rate.h says why. */
    p->put_eager_rate = 600.0;
    reg_var("put_eager_rate", "To a remote peer without a native UCX get (TCP), a put goes by UCX's "
            "eager protocol while the rate this process's puts to that peer were last delivered at "
            "is below this many MB/s, else by UCX's rendezvous (zero-copy, but three control "
            "messages in the reverse direction, which wait behind a slow link's queue).  Measured "
            "per peer over 8 MiB of rendezvous puts, again after 64 MiB sent eagerly (then after twice as "
            "much each time the link is still slow, up to 1 GiB); 0 = always "
            "rendezvous",
            MCA_BASE_VAR_TYPE_DOUBLE, NULL, OPAL_INFO_LVL_5, &p->put_eager_rate);
    p->finalize_check = 1;
    reg_var("finalize_check", "Finalize leak check, after the BTL's own clean-up: 0 off; 1 (default) one "
            "finalize-leak message per process naming every object still alive; 2 the same, and the BTL's finalize returns an "
            "error.  Every object counted (fragments, control packets, RDMA operations, arrivals, registrations, "
            "rkeys, UCX endpoints and requests) is the BTL's own: the application's requests and messages are "
            "the PML's (ob1), so a report is a bug",
            MCA_BASE_VAR_TYPE_INT, NULL, OPAL_INFO_LVL_6, &p->finalize_check);

    /* The standard btl variables (btl_credit_eager_limit, _flags, ...).
     * A slot holds the credit header and the packet, so the fragment size
     * follows the slot size unless set explicitly; the eager limit stays
     * at 8 KiB (less a header) unless the slot is smaller: above it, on
     * the node, ob1's RGET (one copy) beats copying through the mailbox. */
    mca_btl_base_module_t *m = &mca_btl_credit_module;
    size_t payload = p->slot_size > MCA_BTL_CREDIT_HDR_SIZE ? p->slot_size - MCA_BTL_CREDIT_HDR_SIZE : 1;
    const size_t eager = 8192 - MCA_BTL_CREDIT_HDR_SIZE;
    m->btl_eager_limit = payload < eager ? payload : eager;
    m->btl_rndv_eager_limit = m->btl_eager_limit;
    m->btl_max_send_size = payload;
    m->btl_rdma_pipeline_send_length = payload;
    m->btl_rdma_pipeline_frag_size = 512 * 1024;
    m->btl_min_rdma_pipeline_size = INT_MAX;
    /* above vader's and self's (MCA_BTL_EXCLUSIVITY_HIGH): named in the btl
     * list, credit carries all on-node traffic; it never claims the
     * process itself, which stays with btl/self */
    m->btl_exclusivity = MCA_BTL_EXCLUSIVITY_HIGH + 1024;
    m->btl_latency = 2;          /* us, measured 8 B half round trip ~1-2 us */
    m->btl_bandwidth = 10000;    /* Mbps; only the relative weight matters */
    /* RGET over ucp_get_nbx: measured faster than the send pipeline from
     * 32 KiB up on this UCX (emulated RMA served by the sender's progress,
     * which ob1's sender provides while it waits for FIN).  PUT and the
     * atomics are offered for osc/rdma, which takes a btl only with both
     * RDMA flags and fetching atomics (MPI windows under ob1 + btl/credit:
     * Debian's Open MPI excludes osc pt2pt, so without them no window can
     * be created).  ob1 still pulls by RGET whenever GET is offered; PUT
     * only serves its rendezvous fallback (a sender that cannot RGET). */
    m->btl_flags = MCA_BTL_FLAGS_SEND | MCA_BTL_FLAGS_GET | MCA_BTL_FLAGS_PUT |
                   MCA_BTL_FLAGS_ATOMIC_OPS | MCA_BTL_FLAGS_ATOMIC_FOPS;
    m->btl_atomic_flags = MCA_BTL_CREDIT_ATOMIC_FLAGS;
    m->btl_get_limit = GET_LIMIT_MAX;
    m->btl_put_limit = SIZE_MAX;
    m->btl_get_alignment = 0;
    m->btl_put_alignment = 0;
    m->btl_get_local_registration_threshold = 0;
    m->btl_put_local_registration_threshold = 0;
    m->btl_registration_handle_size = 0;  /* set by init from the rkey size */
    (void)mca_btl_base_param_register(&mca_btl_credit_component.btl_version, m);

    register_pvars();
    return OPAL_SUCCESS;
}

/* ------------------------------------------------------------ MPI_T */
static int stat_get(const struct mca_base_pvar_t *pvar, void *value, void *obj)
{
    (void)obj;
    *(unsigned long *)value = (unsigned long)mca_btl_credit_stat((int)(intptr_t)pvar->ctx);
    return OPAL_SUCCESS;
}

static void reg_pvar(const char *name, const char *help, int var_class, int which)
{
    (void)mca_base_component_pvar_register(&mca_btl_credit_component.btl_version, name, help,
                                           OPAL_INFO_LVL_4, var_class,
                                           MCA_BASE_VAR_TYPE_UNSIGNED_LONG, NULL,
                                           MCA_BASE_VAR_BIND_NO_OBJECT,
                                           MCA_BASE_PVAR_FLAG_READONLY | MCA_BASE_PVAR_FLAG_CONTINUOUS,
                                           stat_get, NULL, NULL, (void *)(intptr_t)which);
}

static void register_pvars(void)
{
    reg_pvar("data_sent", "Data packets sent (each took one credit)",
             MCA_BASE_PVAR_CLASS_COUNTER, MCA_BTL_CREDIT_STAT_DATA_SENT);
    reg_pvar("data_received", "Data packets received into the mailbox",
             MCA_BASE_PVAR_CLASS_COUNTER, MCA_BTL_CREDIT_STAT_DATA_RECEIVED);
    reg_pvar("stalls", "Sends that found no credit towards their receiver (descriptor queued, or "
             "sendi refused so the PML fell back)",
             MCA_BASE_PVAR_CLASS_COUNTER, MCA_BTL_CREDIT_STAT_STALLS);
    reg_pvar("queued_max", "Most descriptors waiting for credits at once",
             MCA_BASE_PVAR_CLASS_HIGHWATERMARK, MCA_BTL_CREDIT_STAT_QUEUED_MAX);
    reg_pvar("credit_packets", "Explicit credit packets sent",
             MCA_BASE_PVAR_CLASS_COUNTER, MCA_BTL_CREDIT_STAT_CREDIT_PACKETS);
    reg_pvar("credits_explicit", "Credits returned in explicit credit packets",
             MCA_BASE_PVAR_CLASS_COUNTER, MCA_BTL_CREDIT_STAT_CREDITS_EXPLICIT);
    reg_pvar("compulsory_requests", "Compulsory credit return requests sent (dynamic mode)",
             MCA_BASE_PVAR_CLASS_COUNTER, MCA_BTL_CREDIT_STAT_REQUESTS);
    reg_pvar("compulsory_responses", "Compulsory credit return responses sent (dynamic mode)",
             MCA_BASE_PVAR_CLASS_COUNTER, MCA_BTL_CREDIT_STAT_RESPONSES);
    reg_pvar("piggybacks", "Data packets that carried returned credits",
             MCA_BASE_PVAR_CLASS_COUNTER, MCA_BTL_CREDIT_STAT_PIGGYBACKS);
    reg_pvar("credits_piggybacked", "Credits returned piggybacked on data packets",
             MCA_BASE_PVAR_CLASS_COUNTER, MCA_BTL_CREDIT_STAT_CREDITS_PIGGYBACKED);
    reg_pvar("steals", "Credit steals from low-activity senders (dynamic mode, eq. 6.1)",
             MCA_BASE_PVAR_CLASS_COUNTER, MCA_BTL_CREDIT_STAT_STEALS);
    reg_pvar("mailbox_hwm", "Most mailbox data slots held at once (never above the data region)",
             MCA_BASE_PVAR_CLASS_HIGHWATERMARK, MCA_BTL_CREDIT_STAT_MAILBOX_HWM);
    reg_pvar("mailbox_slots", "Size of this process's mailbox in slots",
             MCA_BASE_PVAR_CLASS_SIZE, MCA_BTL_CREDIT_STAT_MAILBOX_SLOTS);
    reg_pvar("credits_min", "Fewest credits this process holds towards any receiver",
             MCA_BASE_PVAR_CLASS_LEVEL, MCA_BTL_CREDIT_STAT_CREDITS_MIN);
    reg_pvar("credits_max", "Most credits this process holds towards any receiver",
             MCA_BASE_PVAR_CLASS_LEVEL, MCA_BTL_CREDIT_STAT_CREDITS_MAX);
    reg_pvar("gets", "btl_get operations (ob1 RGET) issued", MCA_BASE_PVAR_CLASS_COUNTER,
             MCA_BTL_CREDIT_STAT_GETS);
    reg_pvar("eager_puts", "btl_put operations sent by UCX eager because the peer's puts were delivered "
             "below btl_credit_put_eager_rate", MCA_BASE_PVAR_CLASS_COUNTER, MCA_BTL_CREDIT_STAT_EAGER_PUTS);
    reg_pvar("atomics", "btl_atomic_op/fop/cswap operations (osc/rdma's locks and accumulates) issued",
             MCA_BASE_PVAR_CLASS_COUNTER, MCA_BTL_CREDIT_STAT_ATOMICS);
    reg_pvar("window_gets", "btl_get operations from memory registered for atomics (osc/rdma windows) "
             "sent as a request the target answers with one rendezvous send (no native get)",
             MCA_BASE_PVAR_CLASS_COUNTER, MCA_BTL_CREDIT_STAT_WINDOW_GETS);
    reg_pvar("window_cma", "btl_put/btl_get operations to windows on this node done by one CMA copy "
             "(btl_credit_window_cma)", MCA_BASE_PVAR_CLASS_COUNTER, MCA_BTL_CREDIT_STAT_WINDOW_CMA);
    reg_pvar("puts", "btl_put operations (ob1 RPUT) issued", MCA_BASE_PVAR_CLASS_COUNTER,
             MCA_BTL_CREDIT_STAT_PUTS);
}

/* ------------------------------------------------------------ open / close */
static bool hooks_installed = false;

static int credit_open(void)
{
    mca_btl_credit_params.output = opal_output_open(NULL);
    opal_output_set_verbosity(mca_btl_credit_params.output, mca_btl_credit_params.verbose);
    return OPAL_SUCCESS;
}

static void mem_release_cb(void *buf, size_t length, void *cbdata, bool from_alloc)
{
    (void)cbdata;
    (void)from_alloc;
    mca_btl_credit_mem_release(buf, length);
}

void mca_btl_credit_hooks_install(void)
{
    const int both = OPAL_MEMORY_FREE_SUPPORT | OPAL_MEMORY_MUNMAP_SUPPORT;
    /* UCX must hear about memory the application releases */
    opal_common_ucx_mca_register();
    if (mca_btl_credit_params.reg_cache && (opal_mem_hooks_support_level() & both) == both) {
        opal_mem_hooks_register_release(mem_release_cb, NULL);
        rdrp_ucx_reg_set_caching(1);
    } else {
        rdrp_ucx_reg_set_caching(0);
    }
    hooks_installed = true;
}

static int credit_close(void)
{
    if (hooks_installed) {
        opal_mem_hooks_unregister_release(mem_release_cb);
        opal_common_ucx_mca_deregister();
        hooks_installed = false;
    }
    opal_output_close(mca_btl_credit_params.output);
    return OPAL_SUCCESS;
}

/* ------------------------------------------------------------ selection */
/* Does a comma-separated include list name "credit"?  An exclude list
 * ("^a,b", Debian's default) never selects us: it opens every installed
 * BTL, and a job that did not ask for credit must not pay for it. */
static bool list_names_credit(const char *list)
{
    if (list == NULL) return false;
    while (*list == ' ' || *list == '\t') ++list;
    if (*list == '\0' || *list == '^') return false;
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',') ++p;
        const char *start = p;
        while (*p && *p != ',') ++p;
        const char *end = p;
        while (end > start && (end[-1] == ' ' || end[-1] == '\t')) --end;
        if ((size_t)(end - start) == strlen("credit") && strncmp(start, "credit", 6) == 0)
            return true;
    }
    return false;
}

bool mca_btl_credit_selected(void)
{
    return list_names_credit(opal_btl_base_framework.framework_selection) ||
           list_names_credit(mca_btl_base_include);
}

static mca_btl_base_module_t **credit_init(int *num_btls, bool enable_progress_threads,
                                           bool enable_mpi_threads)
{
    *num_btls = 0;
    if (!mca_btl_credit_selected()) {
        /* quiet: the default btl list opens every installed BTL */
        BTL_CREDIT_VERBOSE(10, "not named in the btl list (\"%s\"): declining",
                           opal_btl_base_framework.framework_selection
                               ? opal_btl_base_framework.framework_selection : "");
        return NULL;
    }
    /* the source tree first: a stale installed copy must not shadow the
     * topics of the build being run (a missing directory is skipped) */
#ifdef BTL_CREDIT_SRC_HELP_DIR
    opal_show_help_add_dir(BTL_CREDIT_SRC_HELP_DIR);
#endif
#ifdef RDRP_HELP_DIR
    opal_show_help_add_dir(RDRP_HELP_DIR);
#endif
    check_params();
    mca_btl_credit_hooks_install();
    return mca_btl_credit_init_modules(num_btls, enable_progress_threads, enable_mpi_threads);
}

/* ------------------------------------------------------------ modex, job, help */
int mca_btl_credit_modex_send(const void *addr, size_t len)
{
    int rc;
    OPAL_MODEX_SEND(rc, OPAL_PMIX_GLOBAL, &mca_btl_credit_component.btl_version, (void *)addr, len);
    return rc;
}

int mca_btl_credit_modex_recv(const opal_process_name_t *name, void **addr, size_t *len)
{
    int rc;
    uint8_t *data = NULL;
    OPAL_MODEX_RECV(rc, &mca_btl_credit_component.btl_version, name, &data, len);
    *addr = data;
    return rc;
}

int mca_btl_credit_job_size(uint32_t *n)
{
    int rc;
    uint32_t size = 0, *ptr = &size;
    opal_process_name_t wildcard;
    wildcard.jobid = OPAL_PROC_MY_NAME.jobid;
    wildcard.vpid = OPAL_VPID_WILDCARD;
    OPAL_MODEX_RECV_VALUE(rc, OPAL_PMIX_JOB_SIZE, &wildcard, &ptr, OPAL_UINT32);
    *n = size;
    return rc;
}

bool mca_btl_credit_param_set_by_user(const char *name)
{
    int idx = mca_base_var_find("opal", "btl", "credit", name);
    const mca_base_var_t *var = NULL;
    if (idx < 0 || mca_base_var_get(idx, &var) != OPAL_SUCCESS || var == NULL) return false;
    return var->mbv_source != MCA_BASE_VAR_SOURCE_DEFAULT;
}

void mca_btl_credit_show_help(const char *topic, const char *arg1, const char *arg2)
{
    opal_show_help("btl_credit_help.txt", topic, true, opal_process_info.nodename,
                   arg1 ? arg1 : "", arg2 ? arg2 : "");
}

void mca_btl_credit_show_help_fatal(const char *topic, const char *arg1, const char *arg2)
{
    char detail[512];
    snprintf(detail, sizeof(detail), "%s %s", arg1 ? arg1 : "", arg2 ? arg2 : "");
    help_to_stderr(topic, detail, opal_process_info.nodename, arg1 ? arg1 : "", arg2 ? arg2 : "");
}
