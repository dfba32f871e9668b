/*
 * btl/credit: the C ABI between the MCA tables (btl_credit_component.c, C)
 * and the BTL core (C++17, btl_credit_*.cc).
 *
 * The C side owns what must be C: the component structure and the module
 * template (so mca_btl_base_param_register can store the standard btl
 * limits in it), MCA variable and MPI_T pvar registration, the selection
 * test, the modex, show_help and the common_ucx / memory-hook set-up.
 * The C++ side owns the module functions, the credit engine, the mailbox
 * and everything that talks to UCX.
 */
#ifndef MCA_BTL_CREDIT_H
#define MCA_BTL_CREDIT_H

#include "opal_config.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "opal/mca/btl/btl.h"
#include "opal/util/proc.h"
#include "common/params/param_verbose.h"

BEGIN_C_DECLS

/* btl_credit_mode */
enum { MCA_BTL_CREDIT_MODE_STATIC = 0, MCA_BTL_CREDIT_MODE_DYNAMIC = 1 };

/* Wire header size (btl_credit_wire.h); a mailbox slot holds it plus the
 * packet, so eager_limit = slot_size - MCA_BTL_CREDIT_HDR_SIZE. */
#define MCA_BTL_CREDIT_HDR_SIZE 16

typedef struct mca_btl_credit_params {
    int    verbose;
    int    mode;               /* MCA_BTL_CREDIT_MODE_* */
    int    slots;              /* mailbox slots per receiver; 0 = engine default for the job size */
    size_t slot_size;          /* bytes per mailbox slot (header + packet) */
    int    credit_slots;       /* per-peer credit region (and dynamic static quota); 0 = auto */
    int    piggyback;          /* return credits on data packets */
    int    reg_cache;          /* cache memory registrations (needs memory-release hooks) */
    double finalize_timeout;   /* seconds finalize waits for endpoints to close */
    double put_eager_rate;     /* MB/s: puts to a TCP peer go by UCX eager below this delivered rate; 0 = never */
    int    window_cma;         /* puts and gets to windows on the node by CMA (process_vm_readv/writev) */
    int    finalize_check;     /* finalize leak check: 0 off, 1 report, 2 report and fail */
    int    output;             /* opal_output stream */
} mca_btl_credit_params_t;

extern mca_btl_credit_params_t mca_btl_credit_params;

OPAL_MODULE_DECLSPEC extern mca_btl_base_component_3_0_0_t mca_btl_credit_component;
/* The module.  Its limits are the registered btl_credit_* variables. */
extern mca_btl_base_module_t mca_btl_credit_module;

/* The atomics btl/credit does through UCX (btl_credit_atomic.cc): the
 * operations UCP has, 32 and 64 bits, coherent with the CPU's atomics
 * (global; rdrp_ucx_context_amo_cpu).  No MIN/MAX/logical or float
 * operations: osc/rdma does those by get-op-put. */
#define MCA_BTL_CREDIT_ATOMIC_FLAGS                                                     \
    (MCA_BTL_ATOMIC_SUPPORTS_ADD | MCA_BTL_ATOMIC_SUPPORTS_AND | MCA_BTL_ATOMIC_SUPPORTS_OR | \
     MCA_BTL_ATOMIC_SUPPORTS_XOR | MCA_BTL_ATOMIC_SUPPORTS_SWAP | MCA_BTL_ATOMIC_SUPPORTS_CSWAP | \
     MCA_BTL_ATOMIC_SUPPORTS_32BIT | MCA_BTL_ATOMIC_SUPPORTS_GLOB)

/* Counters exported as MPI_T performance variables. */
enum {
    MCA_BTL_CREDIT_STAT_DATA_SENT = 0,      /* data packets sent */
    MCA_BTL_CREDIT_STAT_DATA_RECEIVED,      /* data packets received */
    MCA_BTL_CREDIT_STAT_STALLS,             /* sends that found no credit (queued or sendi refused) */
    MCA_BTL_CREDIT_STAT_QUEUED_MAX,         /* most descriptors queued for credits at once */
    MCA_BTL_CREDIT_STAT_CREDIT_PACKETS,     /* explicit credit packets sent */
    MCA_BTL_CREDIT_STAT_CREDITS_EXPLICIT,   /* credits they carried */
    MCA_BTL_CREDIT_STAT_REQUESTS,           /* compulsory credit return requests sent */
    MCA_BTL_CREDIT_STAT_RESPONSES,          /* compulsory credit return responses sent */
    MCA_BTL_CREDIT_STAT_PIGGYBACKS,         /* data packets that carried credits */
    MCA_BTL_CREDIT_STAT_CREDITS_PIGGYBACKED,/* credits they carried */
    MCA_BTL_CREDIT_STAT_STEALS,             /* dynamic mode: credit steals (eq. 6.1) */
    MCA_BTL_CREDIT_STAT_MAILBOX_HWM,        /* most data slots held at once */
    MCA_BTL_CREDIT_STAT_MAILBOX_SLOTS,      /* mailbox size in slots */
    MCA_BTL_CREDIT_STAT_CREDITS_MIN,        /* fewest credits held towards any peer */
    MCA_BTL_CREDIT_STAT_CREDITS_MAX,        /* most credits held towards any peer */
    MCA_BTL_CREDIT_STAT_GETS,               /* btl_get operations */
    MCA_BTL_CREDIT_STAT_PUTS,               /* btl_put operations */
    MCA_BTL_CREDIT_STAT_EAGER_PUTS,         /* of them, sent by UCX eager (put_eager_rate) */
    MCA_BTL_CREDIT_STAT_ATOMICS,            /* btl_atomic_op/fop/cswap operations (osc/rdma) */
    MCA_BTL_CREDIT_STAT_WINDOW_GETS,        /* of the gets, from windows by request and answer */
    MCA_BTL_CREDIT_STAT_WINDOW_CMA,         /* puts and gets to windows on the node done by CMA */
    MCA_BTL_CREDIT_NSTATS
};

/* ---------------- implemented in C (btl_credit_component.c) */
/* True if this job asked for btl/credit by name (an include list naming
 * "credit" in the btl or btl_base_include variable). */
bool mca_btl_credit_selected(void);
int  mca_btl_credit_modex_send(const void *addr, size_t len);
/* addr is malloc'ed: free() it. */
int  mca_btl_credit_modex_recv(const opal_process_name_t *name, void **addr, size_t *len);
/* Was btl_credit_<name> set by the user (command line, environment,
 * file), rather than left at its default? */
bool mca_btl_credit_param_set_by_user(const char *name);
/* Number of processes in this job (PMIx job size). */
int  mca_btl_credit_job_size(uint32_t *n);
void mca_btl_credit_show_help(const char *topic, const char *arg1, const char *arg2);
/* The same, written to this process's stderr at once: for a message right before an abort. */
void mca_btl_credit_show_help_fatal(const char *topic, const char *arg1, const char *arg2);
/* Memory hooks and common_ucx: set up only by a selected component. */
void mca_btl_credit_hooks_install(void);

/* ---------------- implemented in C++ */
mca_btl_base_module_t **mca_btl_credit_init_modules(int *num_btls, bool enable_progress_threads,
                                                    bool enable_mpi_threads);
int      mca_btl_credit_component_progress(void);
uint64_t mca_btl_credit_stat(int which);
void     mca_btl_credit_mem_release(void *buf, size_t length);

/* module functions (btl_credit_module.cc, _send.cc, _frag.cc, _rdma.cc) */
int mca_btl_credit_add_procs(mca_btl_base_module_t *btl, size_t nprocs, opal_proc_t **procs,
                             struct mca_btl_base_endpoint_t **peers, opal_bitmap_t *reachable);
int mca_btl_credit_del_procs(mca_btl_base_module_t *btl, size_t nprocs, opal_proc_t **procs,
                             struct mca_btl_base_endpoint_t **peers);
int mca_btl_credit_finalize(mca_btl_base_module_t *btl);
mca_btl_base_descriptor_t *mca_btl_credit_alloc(mca_btl_base_module_t *btl,
                                                struct mca_btl_base_endpoint_t *ep, uint8_t order,
                                                size_t size, uint32_t flags);
int mca_btl_credit_free(mca_btl_base_module_t *btl, mca_btl_base_descriptor_t *des);
mca_btl_base_descriptor_t *mca_btl_credit_prepare_src(mca_btl_base_module_t *btl,
                                                      struct mca_btl_base_endpoint_t *ep,
                                                      struct opal_convertor_t *conv, uint8_t order,
                                                      size_t reserve, size_t *size, uint32_t flags);
int mca_btl_credit_send(mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                        mca_btl_base_descriptor_t *des, mca_btl_base_tag_t tag);
int mca_btl_credit_sendi(mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                         struct opal_convertor_t *conv, void *header, size_t header_size,
                         size_t payload_size, uint8_t order, uint32_t flags, mca_btl_base_tag_t tag,
                         mca_btl_base_descriptor_t **des);
int mca_btl_credit_put(mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                       void *local_address, uint64_t remote_address,
                       struct mca_btl_base_registration_handle_t *local_handle,
                       struct mca_btl_base_registration_handle_t *remote_handle, size_t size,
                       int flags, int order, mca_btl_base_rdma_completion_fn_t cbfunc,
                       void *cbcontext, void *cbdata);
int mca_btl_credit_get(mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                       void *local_address, uint64_t remote_address,
                       struct mca_btl_base_registration_handle_t *local_handle,
                       struct mca_btl_base_registration_handle_t *remote_handle, size_t size,
                       int flags, int order, mca_btl_base_rdma_completion_fn_t cbfunc,
                       void *cbcontext, void *cbdata);
int mca_btl_credit_aop(mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                       uint64_t remote_address,
                       struct mca_btl_base_registration_handle_t *remote_handle,
                       mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
                       mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata);
int mca_btl_credit_afop(mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                        void *local_address, uint64_t remote_address,
                        struct mca_btl_base_registration_handle_t *local_handle,
                        struct mca_btl_base_registration_handle_t *remote_handle,
                        mca_btl_base_atomic_op_t op, uint64_t operand, int flags, int order,
                        mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata);
int mca_btl_credit_acswap(mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                          void *local_address, uint64_t remote_address,
                          struct mca_btl_base_registration_handle_t *local_handle,
                          struct mca_btl_base_registration_handle_t *remote_handle,
                          uint64_t compare, uint64_t value, int flags, int order,
                          mca_btl_base_rdma_completion_fn_t cbfunc, void *cbcontext, void *cbdata);
struct mca_btl_base_registration_handle_t *
    mca_btl_credit_register_mem(mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                                void *base, size_t size, uint32_t flags);
int  mca_btl_credit_deregister_mem(mca_btl_base_module_t *btl,
                                   struct mca_btl_base_registration_handle_t *handle);
int  mca_btl_credit_register_error(mca_btl_base_module_t *btl,
                                   mca_btl_base_module_error_cb_fn_t cbfunc);
void mca_btl_credit_dump(mca_btl_base_module_t *btl, struct mca_btl_base_endpoint_t *ep,
                         int verbose);

#define BTL_CREDIT_VERBOSE(lvl, ...) \
    RDRP_PARAM_VERBOSE(mca_btl_credit_params.verbose, mca_btl_credit_params.output, lvl, "btl:credit: " __VA_ARGS__)

END_C_DECLS
#endif /* MCA_BTL_CREDIT_H */
