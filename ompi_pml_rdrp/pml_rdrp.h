/*
 * pml/rdrp: the C ABI between the MCA tables (pml_rdrp_component.c, C) and
 * the PML core (C++17).  The C side owns everything that must be C: the
 * component structure, MCA variable registration, the modex, show_help,
 * memory hooks and the common_ucx helpers.  The C++ side owns the module.
 */
#ifndef PML_RDRP_H
#define PML_RDRP_H

#include "ompi_config.h"
#include <stddef.h>
#include <stdint.h>
#include "ompi/mca/pml/pml.h"
#include "ompi/proc/proc.h"
#include "ompi/message/message.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/communicator/communicator.h"
#include "common/params/param_verbose.h"

BEGIN_C_DECLS

/* pml_rdrp_data_path: RDRP_PATH_* (pml_rdrp_wire.h, also a wire value) */
#include "pml_rdrp_wire.h"
/* pml_rdrp_rndv_protocol */
enum { RDRP_RNDV_AUTO = 0, RDRP_RNDV_RDRP = 1, RDRP_RNDV_GET = 2, RDRP_RNDV_PUT = 3 };

typedef struct mca_pml_rdrp_params {
    int    priority;
    int    verbose;
    size_t eager_limit;        /* payload bytes sent in one active message (UCX peers) */
    size_t shm_eager_limit;    /* ... in one ring message (peers on the node) */
    size_t am_eager_limit;     /* ... to remote peers whose rendezvous data moves by AM (0: eager_limit) */
    size_t rndv_first_chunk;   /* payload bytes carried by the RTS */
    size_t chunk_size;         /* rendezvous pull unit */
    size_t cma_chunk_size;     /* ... on the cma path: bytes of one kernel copy */
    int    max_outstanding;    /* chunks in flight per receive */
    int    rndv_protocol;      /* RDRP_RNDV_* */
    size_t get_limit;          /* auto: largest rendezvous message sent by the get protocol */
    int    put_poll_value;     /* put: -1 random per message, else this fixed byte */
    int    data_path;          /* RDRP_PATH_* for every peer (auto: per peer, transport_connect) */
    int    shm;                /* peers on this node through shared-memory rings and CMA */
    size_t shm_ring_size;      /* bytes of one ring (one per local sender) */
    int    shm_prefault;       /* allocate and map every ring page at start-up, not at first touch */
    int    shm_cma_min;        /* smallest message to a CMA peer on the node sent by single copy
                                  (-1: measured at start-up, transport_configure; 0: none) */
    int    shm_far_line_ns;    /* a local peer whose cache lines take this long (ns, measured) is far:
                                  non-temporal ring stores from kFarNonTemporalMin bytes (0: never) */
    size_t auto_rma_min;       /* auto, on-node: messages this large switch from am to rma */
    int    progress_iterations;/* iprobe misses between opal_progress calls */
    int    credit;             /* gate eager data with credits (issue 4) */
    int    credit_mode;        /* 0 static, 1 dynamic */
    int    credit_slots;       /* mailbox slots per receiver, 0 = scale with peers */
    int    credit_credit_slots;/* per-peer credit region (and static quota), 0 = default */
    int    credit_piggyback;   /* return credits on data packets */
    size_t send_buffer;        /* bytes of early-completed copies of waiting sends per process */
    double credit_wait_us;     /* a send waits this long for a credit, then goes by rendezvous */
    int    reg_cache;          /* cache registrations (needs memory hooks) */
    int    throttle;           /* token throttling of sends: 0 off, 1 rank, 2 node */
    int    throttle_rank_limit, throttle_node_tokens, throttle_token_cache, throttle_recover_polls;
    uint64_t throttle_bytes_per_token;
    double finalize_timeout;   /* seconds to wait for peers at finalize */
    int    finalize_check;     /* finalize leak check: 0 off, 1 report, 2 report and fail */
    double peer_timeout;       /* seconds a peer on the node may stay stopped while we wait (0: never) */
    int    output;             /* opal_output stream */
} mca_pml_rdrp_params_t;

extern mca_pml_rdrp_params_t mca_pml_rdrp_params;

/* Counters, exported as MPI_T performance variables (pml_rdrp_component.c). */
typedef struct mca_pml_rdrp_counters {
    uint64_t eager_sent;       /* messages sent by the eager protocol */
    uint64_t rndv_sent;        /* messages sent by rendezvous */
    uint64_t rndv_am;          /* ... of which over the am data path */
    uint64_t rndv_cma;         /* ... of which over the cma data path (one kernel copy on the node) */
    uint64_t rndv_rma;         /* ... of which over the rma data path */
    uint64_t unexpected;       /* arrivals that found no posted receive */
    uint64_t chunks;           /* rendezvous chunks pulled by this receiver */
    uint64_t rndv_rdrp;        /* rendezvous messages sent with the rdrp protocol */
    uint64_t rndv_get;         /* ... with the get protocol */
    uint64_t rndv_put;         /* ... with the put protocol */
    uint64_t put_fin_needed;   /* put messages whose last byte equalled the poll value */
    uint64_t max_chunks_inflight;  /* high-water mark of chunks in flight for one receive */
    uint64_t max_bytes_inflight;   /* high-water mark of chunk bytes in flight for one receive */
    uint64_t credit_stalls;        /* eager sends that found no credit when started */
    uint64_t credit_waits;         /* sends that joined a peer's wait queue (pml_rdrp_pacing.h) */
    uint64_t credit_wait_timeouts; /* waiting sends that went by rendezvous after credit_wait_us */
    uint64_t send_buffered;        /* waiting sends whose user request completed from a copy */
    uint64_t send_buffered_hwm;    /* most bytes held in such copies at once (bounded by send_buffer) */
    uint64_t credit_packets;       /* explicit credit packets sent */
    uint64_t credit_requests;      /* compulsory credit return requests sent */
    uint64_t credit_piggybacks;    /* data packets that carried returned credits */
    uint64_t credits_piggybacked;  /* credits they carried */
    uint64_t mailbox_hwm;          /* most mailbox slots held at once */
    uint64_t mailbox_slots;        /* the mailbox size */
    uint64_t shm_sent;             /* messages sent through shared-memory rings (pml_rdrp_transport.h) */
    uint64_t shm_backlogged;       /* ... of which waited for room in the ring */
    uint64_t shm_passes;           /* ring poll passes that took messages (pml_rdrp_transport.cc) */
    uint64_t shm_compact;          /* compact eager messages received (rdrp_tiny_hdr_t) */
    uint64_t shm_far_nt;           /* ring messages written non-temporally because their peer is far */
    uint64_t ucx_sent;             /* messages sent as UCX active messages */
    uint64_t throttled;            /* sends that waited for admission (pml_rdrp_throttle) */
    uint64_t throttle_cache_hits;  /* sends admitted from the rank's token cache */
    uint64_t unexpected_inline;    /* unexpected payloads kept in their descriptor (pml_rdrp_request.h) */
    uint64_t ucx_send_copies;      /* request-free sends to UCX peers UCX could not take at once (queue full, above short): from a heap copy */
    uint64_t wait_rounds;          /* rounds of blocking waits (pml_rdrp_module.cc wait_request) */
    uint64_t wait_full_passes;     /* ... of which passed the whole of Open MPI (opal_progress) */
} mca_pml_rdrp_counters_t;
extern mca_pml_rdrp_counters_t mca_pml_rdrp_counters;
OMPI_MODULE_DECLSPEC extern mca_pml_base_component_2_0_0_t mca_pml_rdrp_component;

/* ---------------- implemented in C (pml_rdrp_component.c) */
int  mca_pml_rdrp_modex_send(const void *addr, size_t len);
int  mca_pml_rdrp_modex_recv(ompi_proc_t *proc, void **addr, size_t *len);
/* Publish this process's pml/rdrp version; compare every peer's with it
 * (a mismatch, or a peer without one, is reported: OMPI_ERR_UNREACH). */
int  mca_pml_rdrp_version_publish(void);
int  mca_pml_rdrp_version_check(ompi_proc_t **procs, size_t nprocs);
/* Set by open when a parameter is out of its range (already reported):
 * init then declines, which fails MPI_Init under --mca pml rdrp. */
extern int mca_pml_rdrp_params_invalid;
/* Print the help topic with one string argument and abort the job. */
void mca_pml_rdrp_fatal(const char *topic, const char *arg1, const char *arg2);
/* Print a help topic (no abort). */
void mca_pml_rdrp_show_help(const char *topic, const char *arg1, const char *arg2);
/* Close the endpoints of a set of procs without hanging on dead peers
 * (common_ucx del_procs: batched close plus a fence while progressing). */
typedef struct { void *ep; size_t vpid; } mca_pml_rdrp_del_proc_t;
int  mca_pml_rdrp_disconnect(mca_pml_rdrp_del_proc_t *procs, size_t n, void *worker);

/* ---------------- implemented in C++ (pml_rdrp_module.cc) */
mca_pml_base_module_t *mca_pml_rdrp_init(int *priority, bool enable_progress_threads,
                                         bool enable_mpi_threads);
int  mca_pml_rdrp_finalize(void);
/* MPI_T: credits held towards receivers, minimum and maximum over peers */
void mca_pml_rdrp_credit_range(uint64_t *min, uint64_t *max);
/* memory-release hook target */
void mca_pml_rdrp_mem_release(void *buf, size_t length);

/* ---------------- the PML entry points (pml_rdrp_send.cc, pml_rdrp_recv.cc) */
int mca_pml_rdrp_isend_init(const void *, size_t, ompi_datatype_t *, int, int,
                            mca_pml_base_send_mode_t, ompi_communicator_t *, ompi_request_t **);
int mca_pml_rdrp_isend(const void *, size_t, ompi_datatype_t *, int, int,
                       mca_pml_base_send_mode_t, ompi_communicator_t *, ompi_request_t **);
int mca_pml_rdrp_send(const void *, size_t, ompi_datatype_t *, int, int,
                      mca_pml_base_send_mode_t, ompi_communicator_t *);
int mca_pml_rdrp_irecv_init(void *, size_t, ompi_datatype_t *, int, int, ompi_communicator_t *,
                            ompi_request_t **);
int mca_pml_rdrp_irecv(void *, size_t, ompi_datatype_t *, int, int, ompi_communicator_t *,
                       ompi_request_t **);
int mca_pml_rdrp_recv(void *, size_t, ompi_datatype_t *, int, int, ompi_communicator_t *,
                      ompi_status_public_t *);
int mca_pml_rdrp_iprobe(int, int, ompi_communicator_t *, int *, ompi_status_public_t *);
int mca_pml_rdrp_probe(int, int, ompi_communicator_t *, ompi_status_public_t *);
int mca_pml_rdrp_improbe(int, int, ompi_communicator_t *, int *, ompi_message_t **,
                         ompi_status_public_t *);
int mca_pml_rdrp_mprobe(int, int, ompi_communicator_t *, ompi_message_t **, ompi_status_public_t *);
int mca_pml_rdrp_imrecv(void *, size_t, ompi_datatype_t *, ompi_message_t **, ompi_request_t **);
int mca_pml_rdrp_mrecv(void *, size_t, ompi_datatype_t *, ompi_message_t **, ompi_status_public_t *);
int mca_pml_rdrp_start(size_t, ompi_request_t **);

#define RDRP_VERBOSE(lvl, ...) \
    RDRP_PARAM_VERBOSE(mca_pml_rdrp_params.verbose, mca_pml_rdrp_params.output, lvl, "pml:rdrp: " __VA_ARGS__)

END_C_DECLS
#endif
