/* pml/rdrp: the module table, life cycle, endpoints and communicators. */
#include "pml_rdrp_request.h"
#include "pml_rdrp_credit.h"
#include "pml_rdrp_pacing.h"
#include "pml_rdrp_throttle.h"
#include "pml_rdrp_watch.h"
#include "pml_rdrp_finalize_check.h"

#include <cstdlib>
#include <cstring>
#include <string>

extern "C" {
#include "ompi/mca/pml/base/base.h"
#include "opal/util/proc.h"
}

namespace rdrp {

/* ------------------------------------------------------------ errors */
void fatal_status(const char *what, ucs_status_t st)
{
    mca_pml_rdrp_fatal("send-failed", what, ucs_status_string(st));
}

void fatal_peer_status(const Endpoint *ep, const char *what, ucs_status_t st)
{
    if (ep && ep->proc) {
        std::string why = std::string(ucs_status_string(st)) + " (" + what + ")";
        mca_pml_rdrp_fatal("peer-failed", OPAL_NAME_PRINT(ep->proc->super.proc_name), why.c_str());
        return;
    }
    fatal_status(what, st);
}

void bad_header(const char *what, uint64_t value)
{
    std::string v = "(value " + std::to_string(value) + ")";
    mca_pml_rdrp_fatal("bad-header", what, v.c_str());
}

static void peer_error(void *arg, uint64_t peer_id, ucs_status_t status)
{
    (void)arg;
    opal_process_name_t name;
    std::memcpy(&name, &peer_id, sizeof(name));
    mca_pml_rdrp_fatal("peer-failed", OPAL_NAME_PRINT(name), ucs_status_string(status));
}

/* ------------------------------------------------------------ endpoints */
Endpoint *get_endpoint(ompi_proc_t *proc)
{
    auto *ep = static_cast<Endpoint *>(proc->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_PML]);
    if (OPAL_LIKELY(ep != nullptr)) return ep;
    void *addr = nullptr;
    size_t len = 0;
    int rc = mca_pml_rdrp_modex_recv(proc, &addr, &len);
    if (rc != OMPI_SUCCESS || !addr) {
        mca_pml_rdrp_fatal("connect-failed", OPAL_NAME_PRINT(proc->super.proc_name),
                           "(no rdrp address in the modex: does that process run pml/rdrp?)");
        return nullptr;
    }
    ep = transport_connect(proc, addr, len);
    free(addr);
    if (!ep) return nullptr;
    proc->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_PML] = ep;
    g.endpoints.push_back(ep);
    explain_peer(ep);  /* pml_rdrp_verbose >= 10: the protocol table to this peer */
    return ep;
}

Endpoint *comm_endpoint_lookup(ompi_communicator_t *comm, int rank)
{
    auto *cs = reinterpret_cast<CommState *>(comm->c_pml_comm);
    Endpoint *ep = get_endpoint(ompi_comm_peer_lookup(comm, rank));
    cs->eps[rank] = ep;
    return ep;
}



/* ------------------------------------------------------------ module functions */
static int add_procs(ompi_proc_t **procs, size_t nprocs)
{
    /* every rank must run rdrp, of the same version: a mix cannot talk.
     * Ours first: it names both sides on every rank of rdrp (Open MPI's
     * compares with rank 0 only, under a full modex) */
    int rc = mca_pml_rdrp_version_check(procs, nprocs);
    if (rc != OMPI_SUCCESS) return rc;
    rc = mca_pml_base_pml_check_selected("rdrp", procs, nprocs);
    if (rc != OMPI_SUCCESS) return rc;
    watch_add_procs(procs, nprocs);
    return OMPI_SUCCESS;
}

static int del_procs(ompi_proc_t **procs, size_t nprocs)
{
    Guard guard;
    /* drain our own control messages and the early-completed sends still
     * on their way (bounded: a dead peer must not hang us) */
    double t0 = MPI_Wtime();
    while ((g.ctrl_pending > 0 || pacing_buffered > 0 || pacing_waiting_eps > 0 || transport_backlog > 0) &&
           MPI_Wtime() - t0 < mca_pml_rdrp_params.finalize_timeout) {
        progress_worker();
    }
    g.backlog_dropped += transport_backlog;  /* the disconnects below drop them */
    std::vector<mca_pml_rdrp_del_proc_t> del;
    for (size_t i = 0; i < nprocs; ++i) {
        auto *ep = static_cast<Endpoint *>(procs[i]->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_PML]);
        if (!ep) continue;
        transport_disconnect(ep);
        if (ep->ep) {
            del.push_back({ep->ep, procs[i]->super.proc_name.vpid});
            rdrp_ucx_rkey_drop_peer(g.uw, ep->peer_id);
            rdrp_ucx_ep_forget(g.uw, ep->ep);
        }
        procs[i]->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_PML] = nullptr;
        for (auto &e : g.endpoints) {
            if (e == ep) {
                e = g.endpoints.back();
                g.endpoints.pop_back();
                break;
            }
        }
        delete ep;
    }
    return mca_pml_rdrp_disconnect(del.data(), del.size(), g.worker);
}

static int enable(bool enable) { (void)enable; return OMPI_SUCCESS; }

unsigned progress_once()
{
    if (g.in_progress) return 0;
    g.in_progress = true;
    unsigned n = static_cast<unsigned>(transport_progress());
    /* with every peer on shared-memory rings, UCX has nothing to do: look
     * at it only now and then (a peer may still start UCX traffic) */
    if (transport_ucx_busy || (++g.ucx_skip & 63) == 0) n += ucp_worker_progress(g.worker);
    if (n == 0) watch_tick();  /* waiting: is a peer we may wait for stopped? */
    g.in_progress = false;
    return n;
}

int progress_worker()
{
    Guard guard;
    /* one pass: the caller checks its request between passes, and an idle
     * pass over every transport costs about as much as a small message */
    int n = static_cast<int>(progress_once());
    if (OPAL_UNLIKELY(!g.polling.empty())) n += poll_receives();
    if (OPAL_UNLIKELY(throttle_active)) n += throttle_progress();
    if (OPAL_UNLIKELY(pacing_waiting_eps != 0)) n += pacing_progress();
    if (n == 0) credit_settle_if_due();  /* idle: catch up on credit accounting */
    return n;
}

static int progress(void) { return progress_worker(); }

/* Blocking MPI calls: spin on our own worker and give the rest of Open MPI
 * its turn every progress_iterations rounds (a full opal_progress per round
 * costs more than the message on shared memory; oversubscribed, every
 * round: rounds_per_full_progress).  With threads, the
 * request's wait-sync machinery must be used. */
void wait_request(ompi_request_t *req)
{
    if (g.threads) {
        /* an acquire load of our own first, and Open MPI's wait only for a
         * request still pending: its inline check reads req_complete
         * plainly while another thread's progress may complete the request
         * (an atomic exchange), and the compiler merged that read with the
         * spin loop's below, so ThreadSanitizer named this function, not
         * ompi_request_wait_completion (threaded soak with the cdag engine
         * thread: 1 report a minute, MPI_Ssend in one thread completed by
         * another).  Pending requests go through Open MPI's wait-sync,
         * whose reads are its own (scripts/tsan-suppressions.txt). */
        if (__atomic_load_n(&req->req_complete, __ATOMIC_ACQUIRE) != REQUEST_COMPLETED)
            ompi_request_wait_completion(req);
        /* Open MPI orders the completion by a plain read of req_complete
         * and a read fence; the status and data our caller reads next
         * were written by the completing thread under the PML lock, before
         * its atomic exchange (ompi_request_complete).  The acquire load
         * pairs with that exchange in the C11 model, and taking the lock
         * once orders us after every completion made under it (with the
         * load alone ThreadSanitizer, which does not model fences, still
         * saw p2p_threads' MPI_Recv read a status another thread's
         * progress wrote: 4 reports in 1 of 2 runs) */
        (void)__atomic_load_n(&req->req_complete, __ATOMIC_ACQUIRE);
        Guard after_completion;
        return;
    }
    int spins = 0;
    const int every = rounds_per_full_progress();
    while (!REQUEST_COMPLETE(req)) {
        ++stats.wait_rounds;
        if (++spins >= every) {
            spins = 0;
            ++stats.wait_full_passes;
            opal_progress();
        } else {
            progress_worker();
        }
    }
}

static void replay_pending(CommState *cs, uint32_t cid)
{
    auto it = g.pending_cid.find(cid);
    if (it == g.pending_cid.end()) return;
    std::vector<Unexpected *> list;
    list.swap(it->second);
    g.pending_cid.erase(it);
    for (Unexpected *u : list) arrival(cs, u);
}

static int add_comm(ompi_communicator_t *comm)
{
    Guard guard;
    auto *cs = new (std::nothrow) CommState;
    if (!cs) return OMPI_ERR_OUT_OF_RESOURCE;
    /* sources (and destinations) are ranks of the remote group */
    cs->size = OMPI_COMM_IS_INTER(comm) ? ompi_comm_remote_size(comm) : ompi_comm_size(comm);
    cs->comm = comm;
    cs->mq = rdrp_match_create(cs->size);
    cs->eps = static_cast<Endpoint **>(calloc(cs->size > 0 ? cs->size : 1, sizeof(Endpoint *)));
    cs->send_seq = static_cast<uint32_t *>(calloc(cs->size > 0 ? cs->size : 1, sizeof(uint32_t)));
    if (!cs->mq || !cs->eps || !cs->send_seq) {
        if (cs->mq) rdrp_match_destroy(cs->mq);
        free(cs->eps);
        free(cs->send_seq);
        delete cs;
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    cs->tiny_ok = wire::tiny_comm_fits(comm->c_contextid, comm->c_my_rank, OMPI_PROC_MY_NAME->vpid);
    comm->c_pml_comm = reinterpret_cast<mca_pml_comm_t *>(cs);
    if (comm->c_contextid >= g.comms.size()) g.comms.resize(comm->c_contextid + 1, nullptr);
    g.comms[comm->c_contextid] = cs;
    replay_pending(cs, comm->c_contextid);
    return OMPI_SUCCESS;
}

static void drop_item(void *ctx, rdrp_match_item_t *item, int kind)
{
    (void)ctx;
    if (kind != RDRP_MATCH_KIND_POSTED) {
        /* messages nobody received: MPI lets them go with the communicator
         * (the finalize leak check names them: the program never received them) */
        ++g.unreceived_dropped;
        unex_release(container_of(item, &Unexpected::match));
    }
}

static int del_comm(ompi_communicator_t *comm)
{
    Guard guard;
    auto *cs = reinterpret_cast<CommState *>(comm->c_pml_comm);
    if (!cs) return OMPI_SUCCESS;
    if (comm->c_contextid < g.comms.size()) g.comms[comm->c_contextid] = nullptr;
    rdrp_match_foreach(cs->mq, drop_item, nullptr);
    rdrp_match_destroy(cs->mq);
    free(cs->eps);
    free(cs->send_seq);
    delete cs;
    comm->c_pml_comm = nullptr;
    return OMPI_SUCCESS;
}

static int dump(ompi_communicator_t *comm, int verbose)
{
    (void)verbose;
    auto *cs = reinterpret_cast<CommState *>(comm->c_pml_comm);
    if (!cs) return OMPI_SUCCESS;
    opal_output(0, "pml:rdrp: comm %s cid %u: posted %zu unexpected %zu held %zu", comm->c_name,
                comm->c_contextid, rdrp_match_posted_count(cs->mq),
                rdrp_match_unexpected_count(cs->mq), rdrp_match_held_count(cs->mq));
    return OMPI_SUCCESS;
}

}  // namespace rdrp


static mca_pml_base_module_t rdrp_module = {
    rdrp::add_procs,
    rdrp::del_procs,
    rdrp::enable,
    rdrp::progress,
    rdrp::add_comm,
    rdrp::del_comm,
    mca_pml_rdrp_irecv_init,
    mca_pml_rdrp_irecv,
    mca_pml_rdrp_recv,
    mca_pml_rdrp_isend_init,
    mca_pml_rdrp_isend,
    mca_pml_rdrp_send,
    mca_pml_rdrp_iprobe,
    mca_pml_rdrp_probe,
    mca_pml_rdrp_start,
    mca_pml_rdrp_improbe,
    mca_pml_rdrp_mprobe,
    mca_pml_rdrp_imrecv,
    mca_pml_rdrp_mrecv,
    rdrp::dump,
    nullptr,           /* ft_event */
    (1u << 30) - 1,    /* max context id: the wire carries 32 bits */
    INT32_MAX,         /* max tag: the wire carries the full int */
    0                  /* flags */
};

extern "C" mca_pml_base_module_t *mca_pml_rdrp_init(int *priority, bool enable_progress_threads,
                                                    bool enable_mpi_threads)
{
    (void)enable_progress_threads;
    using namespace rdrp;
    if (mca_pml_rdrp_params_invalid) return nullptr;  /* reported by open */
    rdrp_ucx_context_params_t cp{};
    cp.estimated_num_eps = ompi_process_info.num_procs;
    if (rdrp_ucx_context_acquire(&cp) != 0) {
        mca_pml_rdrp_show_help("init-failed", "UCX context:", rdrp_ucx_last_error());
        return nullptr;
    }
    g.uw = rdrp_ucx_worker_create(enable_mpi_threads, peer_error, nullptr);
    if (!g.uw) {
        mca_pml_rdrp_show_help("init-failed", "UCX worker:", rdrp_ucx_last_error());
        rdrp_ucx_context_release();
        return nullptr;
    }
    g.worker = rdrp_ucx_worker_handle(g.uw);
    g.threads = enable_mpi_threads;
    struct { unsigned id; ucp_am_recv_callback_t cb; } handlers[] = {
        {RDRP_AM_EAGER, am_eager_cb}, {RDRP_AM_EAGER_PACKED, am_eager_packed_cb}, {RDRP_AM_RTS, am_rts_cb}, {RDRP_AM_CTS, am_cts_cb},
        {RDRP_AM_CHUNK, am_chunk_cb}, {RDRP_AM_FIN, am_fin_cb}, {RDRP_AM_ACK, am_ack_cb},
        {RDRP_AM_RTR, am_rtr_cb}, {RDRP_AM_PFIN, am_pfin_cb}, {RDRP_AM_CREDIT, am_credit_cb}};
    for (auto &h : handlers) {
        if (rdrp_ucx_set_am_handler(g.uw, h.id, h.cb, nullptr) != 0) {
            mca_pml_rdrp_show_help("init-failed", "AM handler:", rdrp_ucx_last_error());
            return nullptr;
        }
        transport_set_handler(h.id, h.cb);
    }
    transport_configure();
    if (!credit_init(ompi_process_info.num_procs, OMPI_PROC_MY_NAME->vpid)) return nullptr;
    if (!throttle_init()) return nullptr;
    void *addr, *blob = nullptr;
    size_t len, blob_len = 0;
    if (rdrp_ucx_worker_address(g.uw, 0, &addr, &len) != 0) {
        mca_pml_rdrp_show_help("init-failed", "worker address:", rdrp_ucx_last_error());
        return nullptr;
    }
    bool ok = transport_init(addr, len, &blob, &blob_len);
    rdrp_ucx_worker_address_release(g.uw, addr);
    if (!ok) {
        mca_pml_rdrp_show_help("init-failed", "shared-memory transport set-up failed", "");
        return nullptr;
    }
    int rc = mca_pml_rdrp_modex_send(blob, blob_len);
    free(blob);
    if (rc == OMPI_SUCCESS) rc = mca_pml_rdrp_version_publish();
    if (rc != OMPI_SUCCESS) {
        mca_pml_rdrp_show_help("init-failed", "modex send failed", "");
        return nullptr;
    }
    *priority = mca_pml_rdrp_params.priority;
    /* under auto each peer's data path is chosen when it connects
     * (transport_connect, verbose 5 says which and why) */
    static const char *const path_names[] = {"auto (per peer)", "rma", "am", "cma"};
    const int dp = mca_pml_rdrp_params.data_path;
    RDRP_VERBOSE(2, "init: eager_limit %zu chunk %zu window %d data path %s", mca_pml_rdrp_params.eager_limit,
                 mca_pml_rdrp_params.chunk_size, mca_pml_rdrp_params.max_outstanding,
                 dp >= 0 && dp <= 3 ? path_names[dp] : "?");
    return &rdrp_module;
}

extern "C" int mca_pml_rdrp_finalize(void)
{
    using namespace rdrp;
    watch_fini();
    for (Endpoint *ep : g.endpoints) {
        ep->proc->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_PML] = nullptr;
        transport_disconnect(ep);
        delete ep;
    }
    g.endpoints.clear();
    for (auto &kv : g.pending_cid)
        for (Unexpected *u : kv.second) {
            ++g.unreceived_dropped;
            unex_release(u);
        }
    g.pending_cid.clear();
    FinalizeTally leaks;
    finalize_tally_objects(&leaks);
    if (g.blocking_recv) g.req_pool.push_back(g.blocking_recv);
    g.blocking_recv = nullptr;
    for (Request *r : g.req_pool) {
        OBJ_DESTRUCT(&r->conv);
        OBJ_DESTRUCT(&r->ompi);
        free(r);
    }
    g.req_pool.clear();
    for (Unexpected *u : g.unex_pool) free(u);
    g.unex_pool.clear();
    for (Ctrl *c : g.ctrl_pool) free(c);
    g.ctrl_pool.clear();
    pacing_fini();
    transport_fini();
    credit_fini();
    throttle_fini();
    rdrp_ucx_leftovers_t ucx_left;
    rdrp_ucx_worker_destroy_counted(g.uw, mca_pml_rdrp_params.finalize_timeout, &ucx_left);
    g.uw = nullptr;
    g.worker = nullptr;
    int rc = finalize_tally_report(&leaks, &ucx_left);  /* before the context flushes registrations */
    rdrp_ucx_context_release();
    return rc;
}

extern "C" void mca_pml_rdrp_mem_release(void *buf, size_t length)
{
    rdrp_ucx_reg_invalidate(buf, length);
}
