/*
 * coll/cdag: MCA component and module (C).  Collectives are compiled into
 * communication-DAG schedules and run by the engine service behind
 * coll_cdag_glue.h; this side owns everything with Open MPI types:
 * arguments, datatypes (packing), ops, requests, fallbacks.
 */
#ifndef MCA_COLL_CDAG_H
#define MCA_COLL_CDAG_H

#include "ompi_config.h"

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/mca/coll/base/coll_base_util.h"
#include "ompi/op/op.h"
#include "ompi/request/request.h"
#include "opal/class/opal_list.h"
#include "common/params/param_verbose.h"

#include "coll_cdag_glue.h"

BEGIN_C_DECLS

typedef struct mca_coll_cdag_params {
    int priority;          /* < 0: the component stays out of every job */
    int verbose;
    int progress;          /* 0 inline, 1 thread */
    char *collectives;     /* "all" or a comma list of collective names */
    unsigned enabled_mask; /* bit per CDAG_* collective, from collectives */
    int radix;
    size_t seg_size;
    int window;
    char *algo[CDAG_NCOLL]; /* per collective variant name ("auto", ...) */
    int eager_buffers;
    size_t eager_size;
    int finalize_check;    /* finalize leak check: 0 off, 1 report, 2 report and fail */
    int output;
} mca_coll_cdag_params_t;

extern mca_coll_cdag_params_t mca_coll_cdag_params;
extern int mca_coll_cdag_ready;  /* engine service up, address published */

/* One collective call, as the module's entry points describe it. */
typedef struct cdag_call {
    int coll;                       /* CDAG_* */
    const void *sbuf;
    void *rbuf;
    int scount, rcount;
    ompi_datatype_t *sdtype, *rdtype;
    const int *scounts, *sdispls, *rcounts, *rdispls;
    ompi_op_t *op;
    int root;
    int in_place;  /* MPI_IN_PLACE (as the send buffer, or scatter(v)'s receive buffer at the root) */
    int as_block;  /* an MPI_Reduce_scatter with equal counts, run as reduce_scatter_block */
} cdag_call_t;

/* The arguments of a module's last call of one collective on the lean
 * direct path and what they decided (coll_cdag_run.c run_lean): the
 * engine's spec and where the engine's buffers are relative to the user's
 * (-1: not used).  One per collective: a loop alternates calls (OSU times
 * each call between barriers; an application's step may do a bcast, an
 * allreduce and a barrier), and one memo for the module's last call was
 * never hit there. */
typedef struct cdag_lean_memo {
    int valid;
    cdag_call_t key;  /* buffers: only whether they were NULL */
    cdag_glue_spec_t spec;
    ptrdiff_t soff, roff;
    cdag_glue_direct_t *d;  /* its direct plan, while cdag_glue_direct_gen() is gen */
    unsigned gen;
} cdag_lean_memo_t;

typedef struct mca_coll_cdag_module {
    mca_coll_base_module_t super;
    cdag_glue_comm_t *gc;
    cdag_lean_memo_t lean[CDAG_NCOLL];  /* by cdag_call_t.coll */
    /* the module below ours, for what we do not take */
    mca_coll_base_comm_coll_t prev;
    mca_coll_base_module_t *prev_modules[64];
    int nprev;
} mca_coll_cdag_module_t;
OBJ_CLASS_DECLARATION(mca_coll_cdag_module_t);

/* A nonblocking or persistent collective. */
typedef struct mca_coll_cdag_request {
    /* first, and an nbc request: the MPI layer of Open MPI 4.1 casts every
     * nonblocking/persistent collective request to this type to retain the
     * call's datatypes and op in it (ompi_coll_base_retain_datatypes) */
    ompi_coll_base_nbc_request_t nbc;
    opal_list_item_t active_item;  /* on the active list while running */
    mca_coll_cdag_module_t *module;
    cdag_glue_op_t *op;
    cdag_call_t call;
    /* staging for non-contiguous data: packed send data, packed result;
     * kept with the request for the next call (up to CDAG_STAGE_KEEP) */
    void *send_stage, *recv_stage;
    size_t send_cap, recv_cap;
    size_t recv_stage_len;
    int recv_staged;  /* this run's result is in recv_stage: unpacked when done */
    /* the engine's counts and displacements of a v-variant call (bytes), 4
     * arrays of comm size, kept with the request for the next call */
    uint64_t *varr;
    size_t varr_cap;
    /* v-variants: a side whose datatype is not contiguous moves packed, its
     * blocks back to back in the stage (the layout may differ per rank) */
    int vsend_packed, vrecv_packed;
    const void *run_sbuf;  /* what the engine reads and writes */
    void *run_rbuf;
    struct cdag_red { ompi_op_t *op; ompi_datatype_t *dt; } red;  /* reduce_cb's context */
    int persistent;
    int active;
    int freed;  /* MPI_Request_free while active */
} mca_coll_cdag_request_t;
OBJ_CLASS_DECLARATION(mca_coll_cdag_request_t);

int mca_coll_cdag_init_query(bool enable_progress_threads, bool enable_mpi_threads);
mca_coll_base_module_t *mca_coll_cdag_comm_query(struct ompi_communicator_t *comm, int *priority);
int mca_coll_cdag_progress(void);

/* coll_cdag_run.c: the generic path behind every entry point.
 * mode: 0 blocking, 1 nonblocking, 2 persistent (request left inactive). */
int mca_coll_cdag_run(mca_coll_cdag_module_t *m, ompi_communicator_t *comm, const cdag_call_t *call,
                      int mode, ompi_request_t **request);
/* Would the engine take this call (else the caller falls back)? */
int mca_coll_cdag_takes(mca_coll_cdag_module_t *m, ompi_communicator_t *comm, const cdag_call_t *call);

#define CDAG_VERBOSE(lvl, ...) \
    RDRP_PARAM_VERBOSE(mca_coll_cdag_params.verbose, mca_coll_cdag_params.output, lvl, "coll:cdag: " __VA_ARGS__)
/* coll_cdag_verbose level of the "plan:" lines: the schedule (algorithm,
 * radix, segment, window) of every compiled plan, once per plan */
#define CDAG_EXPLAIN_LEVEL 10

OMPI_MODULE_DECLSPEC extern mca_coll_base_component_2_0_0_t mca_coll_cdag_component;

END_C_DECLS
#endif
