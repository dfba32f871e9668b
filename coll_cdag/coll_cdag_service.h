/*
 * coll/cdag engine service, internal to its three parts (no Open MPI
 * types; the C ABI the component sees is coll_cdag_glue.h):
 *  - coll_cdag_transport.cc: how schedule messages travel over the private
 *    UCX worker (send with admission through the token throttle, exact
 *    matching of arrivals, shadow buffers, rendezvous pulls);
 *  - coll_cdag_ring.cc: the shared-memory rings to peers on this node
 *    (small messages; sent after the same admission, matched the same way);
 *  - coll_cdag_engine_thread.cc: who drives the worker (the engine thread
 *    that plays the offloading NIC, or inline progress);
 *  - coll_cdag_lifecycle.cc: process, communicator and operation life
 *    cycle (UCX set-up, endpoints, node token pools, compiled-schedule
 *    caches, executors).
 *
 * Wire: one UCX active message or one ring entry per schedule message,
 * header (cid, src, sched, seq, tag).  (sched, seq, tag) is unique per message of
 * a communicator (cdag_exec.h), so the receiver matches exactly on the
 * whole key; messages of concurrent collectives never cross.
 *
 * Locking: all state is behind one recursive mutex (Lock), taken only
 * when the engine thread runs or the application uses
 * MPI_THREAD_MULTIPLE.
 */
#ifndef COLL_CDAG_SERVICE_H
#define COLL_CDAG_SERVICE_H

#include "coll_cdag_glue.h"
#include "coll_cdag_recycle.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "cdag_coll.h"
#include "cdag_exec.h"
#include "cdag_plan.h"
#include "cdag_plan_cache.h"
#include "cdag_wire.h"
#include "ucx_glue/rdrp_ucx.h"
#include "common/throttle/throttle.h"
#include "common/shm/shm_node.h"

namespace cdag_svc {

inline constexpr unsigned kAmId = 20;  // our own worker: any id

struct Key {
    uint32_t cid, src, sched, seq, tag;
    bool operator==(const Key &o) const {
        return cid == o.cid && src == o.src && sched == o.sched && seq == o.seq && tag == o.tag;
    }
};
struct KeyHash {
    size_t operator()(const Key &k) const {
        uint64_t h = 1469598103934665603ull;
        for (uint32_t x : {k.cid, k.src, k.sched, k.seq, k.tag}) {
            h ^= x;
            h *= 1099511628211ull;
        }
        return static_cast<size_t>(h);
    }
};

struct Posted {
    cdag::Executor *ex;
    cdag::VertexId v;
    char *buf;
    uint64_t len;
};

struct Unexp {
    bool rndv;       // held: data is UCX's rendezvous descriptor, pulled when the receive is posted (am_cb)
    void *data;      // our copy (or, while pulling, its destination; or the held descriptor)
    uint64_t len;
    bool pooled;     // the copy lives in a shadow buffer (else in a big buffer of capacity cap)
    uint64_t cap;
    bool pulling;    // a rendezvous pull into data is still running
    cdag::Executor *wait_ex;  // a receive posted while pulling: completed with the copy
    cdag::VertexId wait_v;
    char *wait_buf;
    bool cma = false;  // held: a single-copy descriptor (cd), pulled when the receive is posted (coll_cdag_cma.cc)
    CmaDesc cd{};
};

class Tr final : public cdag::Transport {
public:
    explicit Tr(::cdag_glue_comm *c) : c_(c) {}
    int post_send(cdag::Executor &ex, cdag::VertexId v, int peer, const cdag::MsgId &id, const void *buf,
                  uint64_t len) override;
    int post_recv(cdag::Executor &ex, cdag::VertexId v, int peer, const cdag::MsgId &id, void *buf,
                  uint64_t len) override;

private:
    ::cdag_glue_comm *c_;
};

struct RingPeer;  // coll_cdag_ring.cc

/* A call shape a communicator ran on the direct path (coll_cdag_direct.cc),
 * or found unfit for it: the fields of a fixed-size call's key, its plan
 * (from the communicator's cache) and scratch for its local operations. */
struct DirectEntry {
    int coll = -1, root = 0, commutative = 0, in_place = 0;
    uint64_t count = 0, elem_size = 0;
    bool fits = false;  // ring-only, every message within the direct limit, few vertices
    std::shared_ptr<const cdag::Plan> plan;
    std::unique_ptr<char[]> scratch_mem;  // kept when the entry gets another shape: grown only
    size_t scratch_cap = 0;
    char *scratch = nullptr;  // 64-byte aligned, plan->scratch_bytes
};
inline constexpr size_t kDirectShapes = 8;        // call shapes a communicator remembers
inline constexpr size_t kDirectMaxVertices = 32;  // a direct plan's vertices at most

template <class K, class V, bool Early = false>
using RecycledMap = std::unordered_map<K, V, KeyHash, std::equal_to<K>, NodeAlloc<std::pair<const K, V>, Early>>;

}  // namespace cdag_svc

/* objects alive (the finalize leak check): changed only where one is
 * made or deleted, never per call of a cached plan */
extern std::atomic<long> cdag_live_comms, cdag_live_ops;
void cdag_comm_track(cdag_glue_comm *c, bool alive);  /* the set of live communicators */

struct cdag_glue_comm {
    uint32_t cid;
    int rank, size;
    std::vector<ucp_ep_h> eps;
    std::vector<cdag_svc::RingPeer *> rings;  // rank r's ring, if on this node (else null)
    uint32_t next_sched = 0;
    cdag::PlanCache cache;              // compiled plans by call (v-variants: with their counts)
    std::vector<cdag_glue_op *> spare;  // finished ops, reused by later calls of the same key
    cdag_svc::DirectEntry direct[cdag_svc::kDirectShapes];  // call shapes of the direct path
    size_t direct_next = 0;                                  // the entry replaced next
    size_t direct_last = 0;                                  // the entry the last call found (tried first)
    unsigned direct_gen = 0;  // bumped when an entry gets another shape (cdag_glue_direct_gen)
    cdag_throttle_t *pool = nullptr;  // node token pool of this communicator (throttle node)
    cdag_svc::Tr tr;
    cdag_glue_comm() : tr(this) { cdag_comm_track(this, true); }
    ~cdag_glue_comm() { cdag_comm_track(this, false); }
};

struct cdag_glue_op {
    bool counted = false;  // in Global::active_runs
    bool queued = false;   // in Global::to_start: handed to the engine, not started yet
    const void *q_sbuf = nullptr;  // the queued run's buffers
    void *q_rbuf = nullptr;
    bool reusable = false; // goes to its communicator's spares when freed
    cdag::PlanKey key;     // the call it was built for (v-variants: with counts and displacements)
    cdag_glue_comm *c;
    std::shared_ptr<const cdag::Plan> plan;
    bool compiled = false;     // this op compiled its plan (not from the cache)
    bool ring_only = false;    // every message of its plan goes by a ring: a blocking wait needs no UCX pass
    cdag::CollSpec spec;       // what it was built for (counts arrays not kept)
    cdag::AlgoChoice choice;   // the variant its schedule was generated with
    std::unique_ptr<cdag::Executor> ex;
    cdag_glue_op() { cdag_live_ops.fetch_add(1, std::memory_order_relaxed); }
    ~cdag_glue_op() { cdag_live_ops.fetch_sub(1, std::memory_order_relaxed); }
};

namespace cdag_svc {

using Comm = cdag_glue_comm;

struct Global {
    std::recursive_mutex mu;
    bool lock_on = false;
    bool up = false;
    cdag_glue_config_t cfg{};
    rdrp_ucx_worker_t *uw = nullptr;
    ucp_worker_h w = nullptr;
    std::unordered_map<uint64_t, ucp_ep_h> eps;
    RecycledMap<Key, Posted> posted;
    RecycledMap<Key, Unexp, true> unexpected;  // early arrivals: early_allocations
    std::vector<char *> shadow_free;
    std::unique_ptr<char[]> shadow_mem;
    std::thread th;
    std::atomic<bool> stop{false};
    std::atomic<bool> thread_running{false};
    std::atomic<int> active_runs{0};  // nonblocking runs started and not yet seen done: the engine drives
    std::vector<::cdag_glue_op *> running;  // those runs (the engine reaps the finished ones)
    std::vector<::cdag_glue_op *> to_start; // of those, the ones not started yet, in start order
    std::atomic<uint64_t> app_calls{0};     // application progress calls: it is inside MPI and drives
    std::mutex idle_mu;                     // the engine's sleep while nothing runs
    std::condition_variable idle_cv;
    std::atomic<bool> engine_idle{false};  // asleep or napping on idle_cv
    std::atomic<uint64_t> starts{0};        // nonblocking starts: end a nap
    bool throttling = false;              // coll_cdag_throttle rank or node
    cdag_throttle_t *rank_thr = nullptr;  // CRCT, for every communicator of the process
    std::vector<::cdag_glue_comm *> pooled;  // communicators with a node pool (cache polling)
    struct Pending {
        ::cdag_glue_comm *c;
        cdag::Executor *ex;
        cdag::VertexId v;
        int peer;
        cdag::MsgId id;
        const void *buf;
        uint64_t len;
    };
    std::deque<Pending> pending;  // sends waiting for admission, in order
    /* shared-memory rings (coll_cdag_ring.cc) */
    rdrp::shm::NodeSegment node;                      // ours: what local peers send us
    uint64_t ring_limit = 0;                           // largest payload through a ring (0: none)
    uint64_t cma_min = 0;                              // single copy from here, within the ring limit too (0: above it only)
    std::unordered_map<uint64_t, RingPeer *> ring_peers;  // by peer id
    std::vector<RingPeer *> ring_by_local;             // by local rank: where a single copy's FIN goes
    std::vector<RingPeer *> backlogged;                // peers with messages waiting for ring room
    size_t ring_backlog = 0;                           // those messages
    struct DirectRun *direct = nullptr;  // the blocking direct run waiting now (coll_cdag_direct.cc)
    std::string err;
};
extern Global G;

/* Does a message of len bytes to a ring peer that CMA reaches leave as a
 * single-copy descriptor (coll_cdag_cma.cc) rather than in the ring? */
inline bool single_copy_size(uint64_t len) { return len > G.ring_limit || (G.cma_min && len >= G.cma_min); }

struct Lock {
    Lock() : on(G.lock_on) { if (on) G.mu.lock(); }
    ~Lock() { if (on) G.mu.unlock(); }
    bool on;
};

/* coll_cdag_transport.cc */
void deliver_eager(const Key &k, const void *data, uint64_t len);  /* an arrival's bytes, at once */
void send_complete(Comm *c, cdag::Executor *ex, cdag::VertexId v, uint32_t tokens, int status = 0);  /* a send left */
ucs_status_t am_cb(void *arg, const void *header, size_t hlen, void *data, size_t len,
                   const ucp_am_recv_param_t *param);
void throttle_progress();              /* queued sends, token caches */
void shadow_release(const Unexp &u);   /* an early arrival's copy goes back (a held one's descriptor to UCX) */

/* coll_cdag_lifecycle.cc: the compiled plan of a fixed-size call shape
 * if c's cache holds it (no compiling), null otherwise */
std::shared_ptr<const cdag::Plan> cached_plan(Comm *c, const cdag_glue_spec_t *s);
bool runs_on_rings(const Comm *c, const cdag::Plan &plan);

/* coll_cdag_direct.cc: an arrival for the direct run waiting now (G.direct
 * non-null): taken (copied into place) and true, else false.  rndv: data is
 * UCX's rendezvous descriptor (pulled into place). */
bool direct_take(const Key &k, const void *data, uint64_t len, bool rndv);
/* a single-copy descriptor d for the direct run waiting now: pulled into
 * its receive (or refused, answered) and true; false if no receive of the
 * run waits for k */
bool direct_take_cma(const Key &k, const CmaDesc &d);
/* the direct run waiting now waits for no message it has posted and no
 * FIN of a descriptor it sent */
bool direct_satisfied();

/* coll_cdag_ring.cc */
struct RingPending {
    Comm *c;
    cdag::Executor *ex;
    cdag::VertexId v;
    uint32_t tokens;
    AmHdr hdr;
    const void *buf;
    uint64_t len;
    uint16_t id = 1;  // kRingMsg: the payload at buf; kRingCma: cd; kRingFin: fin (ex null)
    CmaDesc cd{};
    CmaFin fin{};
};
struct RingPeer {
    rdrp::shm::NodePeer np;
    std::deque<RingPending> backlog;  // messages waiting for room, in order
    bool listed = false;              // in G.backlogged (a completion during the drain may queue more)
    bool cma_refused = false;         // it could not read our memory once: large messages to it by UCX
};
/* Does a message of len bytes to rp go as a single-copy descriptor?  Our
 * own rule (single_copy_size), to a peer that may read us and never
 * refused one; the executor, the direct path and runs_on_rings ask alike. */
inline bool single_copy_to(const RingPeer &rp, uint64_t len)
{
    return G.cfg.cma && rp.np.cma && !rp.cma_refused && single_copy_size(len);
}
/* ring entry ids */
inline constexpr uint16_t kRingMsg = 1;  // a schedule message: AmHdr, payload
inline constexpr uint16_t kRingCma = 2;  // a schedule message by single copy: AmHdr, CmaDesc
inline constexpr uint16_t kRingFin = 3;  // the receiver copied it: CmaFin, no payload
bool ring_setup(std::string *err);      /* our segment, at init (cfg.ring, more than one local rank) */
void ring_teardown();                   /* fini: every peer and our segment */
void ring_identity(rdrp::shm::NodeIdentity *id);
void ring_connect(uint64_t peer_id, const rdrp::shm::NodeIdentity &id);  /* a local peer: its ring, if it maps */
/* send through rp's ring (admitted: tokens held); 0 */
int ring_send(Comm *c, cdag::Executor &ex, cdag::VertexId v, RingPeer *rp, const AmHdr &h, const void *buf,
              uint64_t len, uint32_t tokens);
unsigned ring_progress();               /* backlogs, then our rings */
/* the direct path's send: into rp's ring now if nothing waits before it
 * and there is room (counted as a ring message); false otherwise */
bool ring_push_now(RingPeer *rp, const AmHdr &h, const void *buf, uint64_t len);
void ring_forget(const cdag::Executor *ex);  /* a freed run's messages still waiting for room */
/* an entry for rp's ring (id kRingCma or kRingFin, RingPending's cd or
 * fin filled): pushed now if nothing waits before it and there is room,
 * else queued on rp's backlog */
void ring_push_ctl(RingPeer *rp, const RingPending &m);

/* coll_cdag_cma.cc: single copy of large messages to peers on this node */
/* send len bytes at buf as a descriptor through rp's ring (admitted:
 * tokens held until the receiver's FIN); 0 */
int cma_send(Comm *c, cdag::Executor &ex, cdag::VertexId v, int peer, RingPeer *rp, const AmHdr &h,
             const void *buf, uint64_t len, uint32_t tokens);
/* a descriptor arrived through a ring (the header passed check_packet) */
void cma_arrival(const Key &k, const void *payload, size_t plen);
/* a FIN arrived through a ring */
void cma_fin(const void *hdr, size_t hlen, size_t plen);
/* a receive (k, ex, v, buf, len) was posted for a held descriptor u
 * (taken out of unexpected): pulled into buf now (or posted again if the
 * sender must send it by UCX after all); 0, or -2 when the lengths differ
 * (the sender fails too) */
int cma_take_held(const Key &k, const Unexp &u, cdag::Executor &ex, cdag::VertexId v, char *buf, uint64_t len);
/* a held descriptor is dropped unread: its sender fails the send */
void cma_drop(const Unexp &u);
void cma_forget(const cdag::Executor *ex);  /* a freed run's sends waiting for their FIN */
/* the direct path's single copy (a blocking run that waits in place):
 * send len bytes at buf as a descriptor through rp's ring, fin(ctx,
 * status) at the receiver's FIN (kCmaDone; kCmaRetry: the receiver may
 * not read us, send the bytes again; kCmaFailed) */
void cma_send_direct(Comm *c, RingPeer *rp, const AmHdr &h, const void *buf, uint64_t len,
                     void (*fin)(void *ctx, int32_t status), void *ctx);
/* a descriptor (just arrived, or held in unexpected) for a direct receive
 * of len bytes at buf, answered: 1 pulled; 0 refused (kCmaRetry: the bytes
 * come again through the ring or UCX); -2 lengths differ or no ring to
 * answer through (the sender fails too) */
int cma_pull_direct(const CmaDesc &d, char *buf, uint64_t len);
void cma_forget_direct(const void *ctx);    /* a failed direct run's sends waiting for their FIN */
void cma_reserve(std::size_t sends);        /* slots for that many sends in flight */
size_t cma_pending();                       /* sends waiting for their FIN (finalize tally) */

/* coll_cdag_engine_thread.cc */
int ensure_engine_thread();            /* configured thread progress: start on first use */
void start_queued(bool by_engine);     /* start the runs in to_start, in order (under the lock) */
void wake_engine();                    /* a nonblocking run was counted in active_runs */

}  // namespace cdag_svc

#endif
