/*
 * btl/credit: the C++ core's shared state and internal interfaces.
 *
 * One module per process over one UCX worker.  Data path:
 *   send/sendi  -> credit taken from the engine -> UCX AM (header + packet)
 *               or, without credit, the descriptor waits on its endpoint's
 *               queue (sendi refuses instead, so ob1 falls back to send);
 *   AM arrives  -> the engine assigns a data slot -> payload copied into the
 *               mailbox -> slot number queued in arrival order;
 *   progress    -> UCX progress, then each ready slot is handed to the PML's
 *               receive callback, freed, and the engine's credit packets go
 *               out as control AMs; queued descriptors leave as credits come.
 *
 * Locking: one recursive mutex (only taken under MPI_THREAD_MULTIPLE)
 * around all state and every UCX call; it is never held while calling up
 * into the PML (receive upcalls, send and RDMA completions), so the PML can
 * call back into the BTL from its callbacks without lock-order trouble.
 */
#ifndef MCA_BTL_CREDIT_INTERNAL_H
#define MCA_BTL_CREDIT_INTERNAL_H

#include "ompi_cxx_prelude.h"

extern "C" {
#include "btl_credit.h"
#include "btl_credit_wire.h"
#include "opal/class/opal_bitmap.h"
#include "opal/datatype/opal_convertor.h"
#include "opal/mca/btl/base/base.h"
#include "opal/util/output.h"
}

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "btl_credit/btl_credit_put_rate.h"
#include "common/credit/credit_endpoint.h"
#include "common/tally/live_tally.h"
#include "ucx_glue/rdrp_ucx.h"

namespace btlcredit {
struct Frag;
/* bytes of puts per delivered-rate measurement: 8 puts of 1 MiB, two of
 * ob1's 4 MiB chunks; long enough to span a socket buffer's worth */
constexpr uint64_t kPutRateSample = 8u << 20;
/* eager bytes before the first rendezvous measurement while eager (it
 * doubles with every probe that finds the link still slow) */
constexpr uint64_t kPutRateProbe = 64u << 20;
}

/* The BTL endpoint of one peer (opaque to Open MPI). */
struct mca_btl_base_endpoint_t {
    opal_proc_t *proc = nullptr;
    opal_process_name_t name{};
    uint64_t peer_id = 0;        /* name as 64 bits: keys the rkey cache */
    uint32_t index = 0;          /* the credit engine's peer number */
    bool remote = false;         /* on another node */
    bool native_get = false;     /* UCX has a native (one-sided) get to it (set on connect) */
    int64_t cma_pid = 0;         /* windows by CMA: the checked owner pid; 0 untried, -1 refused */
    ucp_ep_h ep = nullptr;       /* connected on first use */
    void *addr = nullptr;        /* the peer's worker address until connected */
    size_t addr_len = 0;
    uint32_t tx_seq = 0;         /* next packet number towards the peer */
    std::deque<btlcredit::Frag *> pending;  /* descriptors waiting for credits */
    bool waiting = false;        /* on State::waiting */
    /* how puts to an emulated_rma peer travel (btl_credit_put_rate.h) */
    btlcredit::PutRate put_rate{mca_btl_credit_params.put_eager_rate, btlcredit::kPutRateSample,
                                 btlcredit::kPutRateProbe};
    /* remote, and UCX emulates RMA to it (no native get) */
    bool emulated_rma() const { return remote && !native_get; }
};

/* A registration handle; ob1 copies btl_registration_handle_size bytes of
 * it into its headers, so everything a peer needs is inline. */
struct mca_btl_base_registration_handle_t {
    uint64_t region_id;          /* the owner's region id (0: local-only handle) */
    uint32_t rkey_len;
    uint32_t access;             /* the MCA_BTL_REG_FLAG_* it was registered with */
    uint64_t local;              /* owner only: its rdrp_ucx_region_t * */
    uint64_t owner_pid;          /* the owner's pid and where its CMA cookie lives, */
    uint64_t cookie_addr;        /* so a peer on the node can check it is the owner */
    uint64_t cookie;             /* before it copies by CMA (btl_credit_window_cma.cc) */
    uint8_t rkey[1];             /* rkey_len packed rkey bytes (sized at init) */
};

namespace btlcredit {

enum FragKind : uint8_t { kFragSend = 0, kFragSendi = 1 };

/* A send descriptor with its packet buffer (cap bytes) behind it. */
struct Frag {
    mca_btl_base_descriptor_t des;  /* first: ob1 sees &des */
    mca_btl_base_segment_t seg;
    mca_btl_base_endpoint_t *ep;
    btl_credit_hdr_t hdr;           /* the AM header: must live until the send completes */
    uint8_t tag;
    FragKind kind;
    size_t cap;
    char *buf;
};

/* A control packet in flight (its header must outlive the send). */
struct Ctrl {
    btl_credit_hdr_t hdr;
};

/* An outstanding put, get or atomic. */
struct RdmaOp {
    mca_btl_base_endpoint_t *ep;
    void *local;
    mca_btl_base_registration_handle_t *local_handle;
    mca_btl_base_rdma_completion_fn_t cb;
    void *ctx;
    void *data;
    rdrp_ucx_rkey_t *rkey;          /* get and atomics (a put carries no rkey) */
    int status;
    btl_credit_put_hdr_t put_hdr;   /* a put's AM header: lives until the send completes */
    size_t put_bytes;               /* a put's size, for its peer's PutRate (0: a get) */
    bool put_eager;                 /* sent by UCX eager (untimed) */
    uint64_t amo_operand = 0;       /* an atomic's operand (CSWAP: the compare value) */
    uint64_t amo_reply = 0;         /* the old value of an atomic that returns none */
    size_t get_len = 0;             /* a window get's size (btl_credit_get_reply.cc) */
};

/* What a mailbox data slot holds. */
struct SlotMeta {
    uint32_t len = 0;   /* packet bytes after the header */
    uint8_t tag = 0;
    bool ready = false; /* payload in place (a UCX rendezvous may still be landing) */
};

struct State {
    bool up = false;
    bool threads = false;
    std::recursive_mutex mtx;

    rdrp_ucx_worker_t *uw = nullptr;
    ucp_worker_h worker = nullptr;

    std::unique_ptr<rdrp::credit::CreditEndpoint> engine;
    uint32_t me = 0, nprocs = 0, npeers = 0;
    opal_jobid_t jobid = 0;

    /* mailbox: slots x slot_size bytes; data slot i at mailbox + i * slot_size */
    char *mailbox = nullptr;
    size_t slot_size = 0;
    size_t payload_cap = 0;         /* slot_size - header: largest packet */
    uint32_t slots = 0;
    std::vector<SlotMeta> slot_meta;
    std::deque<int32_t> arrivals;   /* data slots in arrival order */
    bool delivering = false;

    std::vector<mca_btl_base_endpoint_t *> peers;   /* by engine index */
    std::vector<uint32_t> rx_seq;                   /* by engine index */
    std::deque<rdrp::credit::ControlPacket> ctrl_q; /* engine output not yet sent */
    std::vector<mca_btl_base_endpoint_t *> waiting; /* endpoints with queued descriptors */
    size_t queued = 0;

    std::vector<Frag *> frag_pool;      /* buffers of min(kSmallFrag, payload_cap) bytes */
    std::vector<Frag *> big_frag_pool;  /* buffers of payload_cap bytes */
    std::vector<Ctrl *> ctrl_pool;
    std::vector<RdmaOp *> op_pool;
    std::vector<Frag *> completed;  /* send completions for the PML */
    std::vector<RdmaOp *> rdma_done;/* RDMA completions for the PML */
    size_t outstanding = 0;         /* UCX operations in flight */

    /* the finalize leak check: descriptors, control buffers and RDMA
     * operations ever made (live = made - pooled; counted where a pool
     * grows, never per message) */
    size_t frags_made = 0, ctrls_made = 0, ops_made = 0;

    size_t rkey_cap = 0;            /* rkey bytes a registration handle holds */
    mca_btl_base_module_error_cb_fn_t error_cb = nullptr;
    uint64_t stats[MCA_BTL_CREDIT_NSTATS] = {};
};

extern State g;

/* The big lock (a no-op unless MPI_THREAD_MULTIPLE). */
class Lock {
public:
    Lock() { lock(); }
    ~Lock() { if (held_) unlock(); }
    void lock() { if (g.threads) g.mtx.lock(); held_ = true; }
    void unlock() { if (g.threads) g.mtx.unlock(); held_ = false; }
    Lock(const Lock &) = delete;
    Lock &operator=(const Lock &) = delete;
private:
    bool held_ = false;
};

/* ---- btl_credit_module.cc */
/* Report a fatal error (help topic + two strings) and abort through the
 * PML's error callback. */
[[noreturn]] void fatal(const char *topic, const char *what, const char *detail);
void fatal_status(const char *what, ucs_status_t st);

/* ---- btl_credit_finalize_check.cc (btl_credit_finalize_check) */
/* Count the objects still alive after finalize's draining (lock held,
 * before the pools are freed). */
void finalize_tally_objects(rdrp_tally_t *t);
/* Add the UCX leftovers and held registrations, report as the parameter
 * asks; returns the BTL finalize's result. */
int finalize_tally_report(rdrp_tally_t *t, const rdrp_ucx_leftovers_t *ucx);

/* ---- btl_credit_flow.cc (engine glue; lock held) */
bool flow_init(std::string *why);
void flow_fini();
/* Pop every control packet the engine produced into ctrl_q. */
void collect_controls();
void note_mailbox();

/* ---- btl_credit_endpoint.cc (lock held) */
uint32_t peer_index(uint32_t vpid);
uint32_t peer_vpid(uint32_t index);
/* The endpoint of engine peer `index`, created on first use. */
mca_btl_base_endpoint_t *endpoint_for_index(uint32_t index);
/* Connect ep if it is not yet (aborts on failure). */
void endpoint_connect(mca_btl_base_endpoint_t *ep);
void endpoints_fini();

/* The RPUT chunk ob1 is offered once a remote peer has no native get
 * (btl_credit_endpoint.cc, offer_for_emulated_rma). */
constexpr size_t kRemotePutChunk = 4u << 20;

/* ---- btl_credit_frag.cc */
/* Small send buffers: eager packets and control fragments (the largest
 * eager packet by default, btl_credit_eager_limit 8176, plus headers). */
constexpr size_t kSmallFrag = 8192;
Frag *frag_get(size_t need); /* a descriptor whose buffer holds need bytes; lock held or not */
void frag_put(Frag *f);
void frag_recycle(Frag *f);  /* lock held */
void frags_fini();

/* ---- btl_credit_send.cc (lock held) */
void send_now(Frag *f);
void flush_ctrl();
void drain_waiting();
int complete_sends();      /* lock NOT held: calls up */
void settle_completed_sends();  /* finalize, lock held */
void sends_fini();

/* ---- btl_credit_recv.cc */
bool recv_init();          /* AM handlers; lock held */
int deliver();             /* lock NOT held: calls up */

/* ---- btl_credit_rdma.cc */
bool rdma_init();          /* sizes registration handles, sets the put handler; lock held */
int complete_rdma();       /* lock NOT held: calls up */
void rdma_fini();
/* For the other RDMA files (lock held): a pooled op; one filled in and
 * holding the peer's rkey for h (connects ep; nullptr with *rc set: the rkey
 * did not unpack, or no memory); the request parameters that complete into
 * rdma_done; the bookkeeping of a started operation (done at once, failed,
 * or in flight). */
RdmaOp *rdma_op_get();
RdmaOp *rdma_op_for(mca_btl_base_endpoint_t *ep, mca_btl_base_registration_handle_t *h, void *local,
                    mca_btl_base_registration_handle_t *local_handle,
                    mca_btl_base_rdma_completion_fn_t cb, void *ctx, void *data, int *rc);
void rdma_op_param(ucp_request_param_t *p, RdmaOp *op);
int rdma_started(const char *what, mca_btl_base_endpoint_t *ep, ucs_status_ptr_t sp, RdmaOp *op);

/* ---- btl_credit_window_cma.cc (lock held) */
void window_cma_init();    /* this process's cookie */
/* Fill the owner's fields of a handle being registered. */
void window_cma_stamp(mca_btl_base_registration_handle_t *h);
/* Put (write) or get (!write) size bytes at remote in h's owner by CMA if
 * window_cma allows it for ep and h: OPAL_SUCCESS (done, callback queued),
 * or OPAL_ERR_NOT_AVAILABLE to go through UCX. */
int window_cma(bool write, mca_btl_base_endpoint_t *ep, void *local, uint64_t remote,
               mca_btl_base_registration_handle_t *local_handle,
               mca_btl_base_registration_handle_t *remote_handle, size_t size,
               mca_btl_base_rdma_completion_fn_t cb, void *ctx, void *data);

/* ---- btl_credit_get_reply.cc (lock held) */
bool get_reply_init();     /* the two AM handlers */
void get_reply_fini();
/* Whether a get from h at ep goes by request and answer (a window, on the
 * node or with no native get to ep; ep connected). */
bool get_by_reply(const mca_btl_base_endpoint_t *ep, const mca_btl_base_registration_handle_t *h);
int get_reply_start(mca_btl_base_endpoint_t *ep, void *local, uint64_t remote,
                    mca_btl_base_registration_handle_t *local_handle,
                    mca_btl_base_registration_handle_t *remote_handle, size_t size,
                    mca_btl_base_rdma_completion_fn_t cb, void *ctx, void *data);

}  // namespace btlcredit

#endif /* MCA_BTL_CREDIT_INTERNAL_H */
