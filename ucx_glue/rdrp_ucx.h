/*
 * ucx_glue: the UCX layer shared by pml/rdrp, btl/credit and coll/cdag.
 *
 * One UCP context per process (reference counted: each component takes a
 * reference), any number of workers, endpoints created lazily from worker
 * addresses the caller exchanged (the modex lives in the components, since
 * it needs Open MPI), an active-message dispatch table, RMA helpers, a
 * registration cache invalidated when memory is released and a per-worker
 * rkey cache.  C-callable, implemented in C++17, no Open MPI types.
 *
 * Threading: a worker is driven by one thread at a time, or created
 * thread_multi and then safe for concurrent UCX calls; the caches take
 * their own locks.
 */
#ifndef RDRP_UCX_H
#define RDRP_UCX_H

#include <stddef.h>
#include <stdint.h>
#include <ucp/api/ucp.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ context */
typedef struct rdrp_ucx_context_params {
    int    want_wakeup;        /* UCP_FEATURE_WAKEUP (event fd for sleeping engines) */
    size_t estimated_num_eps;  /* hint, 0 = unknown */
    int    want_amo;           /* UCP_FEATURE_AMO32|AMO64, coherent with the CPU's atomics
                                  (see rdrp_ucx_context_amo_cpu) */
} rdrp_ucx_context_params_t;

/* Take a reference on the process context, creating it on first use.
 * 0 on success; -1 with a message in rdrp_ucx_last_error() otherwise. */
int          rdrp_ucx_context_acquire(const rdrp_ucx_context_params_t *params);
void         rdrp_ucx_context_release(void);
ucp_context_h rdrp_ucx_context(void);
const char  *rdrp_ucx_last_error(void);
/* Whether the context does remote atomics that are atomic with respect to
 * the CPU's atomics on the target (UCX's ATOMIC_MODE cpu: a device atomic
 * only where the device is coherent with the CPU, else UCX's emulation,
 * which the target's CPU executes).  Asked for by want_amo, which sets that
 * mode unless the user chose UCX_ATOMIC_MODE; 0 when the context was
 * created without want_amo or the user chose another mode. */
int          rdrp_ucx_context_amo_cpu(void);
/* Whether to set ATOMIC_MODE cpu given the user's UCX_[MPI_]ATOMIC_MODE
 * (NULL: not set), and whether the atomics are then CPU-coherent. */
int          rdrp_ucx_set_atomic_mode_cpu(const char *user_mode);
int          rdrp_ucx_atomic_mode_is_cpu(const char *user_mode);

/* The context sets UCX's MM_RX_BUFS_GROW (shared-memory receive buffers grow
 * by 32, not 512) through its UCP configuration, never through the
 * environment.  Exposed for the unit tests: whether the user set it
 * (UCX_{SYSV,POSIX,MM}_RX_BUFS_GROW), and whether to set it given UCX_TLS
 * (NULL when unset) -- only where a posix or sysv transport may open. */
int          rdrp_ucx_user_set_mm_rx_grow(void);
int          rdrp_ucx_want_mm_rx_grow(const char *ucx_tls, int user_set);
/* TCP receive segment our UCX context asks for (UCX's default: 64k), unless
 * the user set UCX_TCP_RX_SEG_SIZE or UCX_TLS / UCX_NET_DEVICES rule tcp out */
#define RDRP_UCX_TCP_RX_SEG_SIZE "256k"
int          rdrp_ucx_user_set_tcp_rx_seg(void);
int          rdrp_ucx_want_tcp_rx_seg(const char *ucx_tls, const char *ucx_net_devices, int user_set);

/* ------------------------------------------------------------ worker */
typedef struct rdrp_ucx_worker rdrp_ucx_worker_t;

/* A peer's endpoint failed (remote peers only: see rdrp_ucx_connect). */
typedef void (*rdrp_ucx_peer_error_fn_t)(void *arg, uint64_t peer_id, ucs_status_t status);

rdrp_ucx_worker_t *rdrp_ucx_worker_create(int thread_multi,
                                          rdrp_ucx_peer_error_fn_t on_error,
                                          void *error_arg);
/* Closes every endpoint (non-blocking close, progressed here, bounded by
 * timeout_sec so a dead peer cannot hang finalize), frees cached rkeys and
 * destroys the worker. */
void         rdrp_ucx_worker_destroy(rdrp_ucx_worker_t *w, double timeout_sec);
/* What destroying a worker found still alive (the finalize leak check):
 * rkeys a rkey_get was never matched by a rkey_put for, endpoint closes and
 * flushes UCX had not finished by the deadline (their requests are released
 * unfinished).  All 0 after a clean finalize with live peers. */
typedef struct rdrp_ucx_leftovers {
    uint64_t rkeys_held;
    uint64_t endpoints_unclosed;
    uint64_t requests_unfinished;
} rdrp_ucx_leftovers_t;
/* rdrp_ucx_worker_destroy that also fills *left (if not NULL). */
void         rdrp_ucx_worker_destroy_counted(rdrp_ucx_worker_t *w, double timeout_sec,
                                             rdrp_ucx_leftovers_t *left);
ucp_worker_h rdrp_ucx_worker_handle(rdrp_ucx_worker_t *w);
int          rdrp_ucx_worker_is_thread_multi(rdrp_ucx_worker_t *w);

/* Worker address to publish.  net_only: only the network part (for peers
 * on other nodes).  Release with rdrp_ucx_worker_address_release. */
int  rdrp_ucx_worker_address(rdrp_ucx_worker_t *w, int net_only, void **addr, size_t *len);
void rdrp_ucx_worker_address_release(rdrp_ucx_worker_t *w, void *addr);

/* Register an active-message handler (UCP AM id). */
int rdrp_ucx_set_am_handler(rdrp_ucx_worker_t *w, unsigned id,
                            ucp_am_recv_callback_t cb, void *arg);

/* Endpoint to a peer from its worker address.  remote != 0 (peer on another
 * node) selects UCP_ERR_HANDLING_MODE_PEER so a dead peer raises on_error;
 * on-node peers use mode NONE, because PEER mode strips the shared-memory
 * transports in UCX 1.13 (the runtime notices a dead local process).
 * NULL on failure (rdrp_ucx_last_error()). */
ucp_ep_h rdrp_ucx_connect(rdrp_ucx_worker_t *w, const void *addr, size_t len,
                          int remote, uint64_t peer_id);

/* 1 if UCX moves ucp_get_nbx on ep with a get protocol of a transport
 * (ucp_ep_print_info lists "get[N]" lanes: InfiniBand/RoCE, shared
 * memory), 0 if GET is emulated by active messages served by the peer's
 * progress (UCX 1.13 over TCP: no rma lane, only am), -1 if unknown.
 * UCX 1.13 has no ucp_ep_query for the transports, so the endpoint's
 * printed configuration is the only public source. */
int rdrp_ucx_ep_native_get(ucp_ep_h ep);

/* The caller closed ep itself (e.g. with common_ucx's fenced disconnect):
 * forget it so rdrp_ucx_worker_destroy does not close it again. */
void rdrp_ucx_ep_forget(rdrp_ucx_worker_t *w, ucp_ep_h ep);

/* Progress the worker; returns the number of events. */
static inline unsigned rdrp_ucx_progress(ucp_worker_h w) { return ucp_worker_progress(w); }

/* ------------------------------------------------------------ registration cache */
/* A registered memory range with its packed rkey.  Regions are cached by
 * address range and reference counted; a region whose memory is released
 * (rdrp_ucx_reg_invalidate, wired to the memory-release hooks) is never
 * handed out again, so a reused buffer never moves stale data. */
typedef struct rdrp_ucx_region {
    void      *addr;
    size_t     len;
    ucp_mem_h  memh;
    void      *rkey_buf;
    size_t     rkey_len;
    uint64_t   id;       /* process-unique, never reused: keys the peers' rkey caches */
} rdrp_ucx_region_t;

rdrp_ucx_region_t *rdrp_ucx_reg_acquire(void *addr, size_t len);
void               rdrp_ucx_reg_release(rdrp_ucx_region_t *r);
/* Memory [addr, addr+len) is being released.  Async-signal-light: records
 * the range; the cache drops overlapping regions before its next lookup. */
void               rdrp_ucx_reg_invalidate(void *addr, size_t len);
/* Does a region with this id, registered by this process and not yet
 * deregistered, cover [addr, addr+len)?  For a target that accepts data
 * for its own registered memory (btl/credit's put by active message): a
 * forged or stale address is refused, never written. */
int                rdrp_ucx_reg_covers(uint64_t id, uintptr_t addr, size_t len);
/* Enable caching (only when the release hooks are installed; otherwise
 * every acquire registers afresh and every release deregisters). */
void               rdrp_ucx_reg_set_caching(int enabled);
/* Statistics for tests and MPI_T: hits, misses, invalidated regions, live regions. */
void               rdrp_ucx_reg_stats(uint64_t *hits, uint64_t *misses,
                                      uint64_t *invalidated, uint64_t *live);
/* Deregister everything (before the context goes away). */
void               rdrp_ucx_reg_flush(void);
/* Regions still mapped because someone holds a reference (an acquire
 * without its release): process-wide, for the finalize leak check. */
uint64_t           rdrp_ucx_reg_held(void);

/* ------------------------------------------------------------ rkey cache */
/* Unpacked rkey of (peer, remote region id), cached per worker.  Unpacking
 * attaches segments and page-faults on first touch, so reuse pays.  Take a
 * reference for the duration of the RMA operations that use it. */
typedef struct rdrp_ucx_rkey rdrp_ucx_rkey_t;
rdrp_ucx_rkey_t *rdrp_ucx_rkey_get(rdrp_ucx_worker_t *w, ucp_ep_h ep, uint64_t peer_id,
                                   uint64_t region_id, const void *rkey_buf, size_t rkey_len);
ucp_rkey_h       rdrp_ucx_rkey_handle(rdrp_ucx_rkey_t *k);
void             rdrp_ucx_rkey_put(rdrp_ucx_worker_t *w, rdrp_ucx_rkey_t *k);
/* Forget every cached rkey of one peer (its endpoint is going away). */
void             rdrp_ucx_rkey_drop_peer(rdrp_ucx_worker_t *w, uint64_t peer_id);

#ifdef __cplusplus
}
#endif
#endif /* RDRP_UCX_H */
