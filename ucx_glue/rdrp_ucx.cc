/* ucx_glue: context, workers, endpoints, AM dispatch and the rkey cache. */
#include "rdrp_ucx.h"

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <strings.h>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace {

std::mutex g_ctx_lock;
ucp_context_h g_ctx = nullptr;
int g_ctx_refs = 0;
int g_ctx_amo_cpu = 0;  /* see rdrp_ucx_context_amo_cpu */
thread_local std::string g_last_error;

void set_error(const char *what, ucs_status_t st)
{
    g_last_error = std::string(what) + ": " + ucs_status_string(st);
}

struct rkey_entry {
    ucp_rkey_h rkey;
    int refs;
    uint64_t last_use;
};

}  // namespace

struct rdrp_ucx_rkey {
    std::pair<uint64_t, uint64_t> key;
    rkey_entry e;
};

struct rdrp_ucx_worker {
    ucp_worker_h worker = nullptr;
    int thread_multi = 0;
    rdrp_ucx_peer_error_fn_t on_error = nullptr;
    void *error_arg = nullptr;
    std::vector<ucp_ep_h> eps;                      /* every endpoint we created */
    std::map<ucp_ep_h, uint64_t> ep_peer;           /* for the error callback */
    std::map<ucp_ep_h, bool> ep_remote;             /* PEER error mode (closed by force) */
    std::map<std::pair<uint64_t, uint64_t>, rdrp_ucx_rkey *> rkeys;
    uint64_t rkey_clock = 0;
    /* Guards the containers above: a thread_multi worker is used by several
     * threads at once, and the error callback runs inside any progress call. */
    std::recursive_mutex lock;  /* recursive: UCX may call ep_error_cb inside a call made under it */
    static constexpr size_t rkey_cache_max = 1024;
};

extern "C" {

const char *rdrp_ucx_last_error(void) { return g_last_error.c_str(); }

int rdrp_ucx_user_set_mm_rx_grow(void)
{
    return std::getenv("UCX_SYSV_RX_BUFS_GROW") || std::getenv("UCX_POSIX_RX_BUFS_GROW") ||
           std::getenv("UCX_MM_RX_BUFS_GROW");
}

/* UCX_TLS as a list: whether it starts with '^' (rules the names out) and
 * the transport names, "posix:aux" style suffixes dropped (they name the
 * same transport). */
static std::vector<std::string> tls_names(const char *tls, bool *negate)
{
    *negate = tls[0] == '^';
    std::string list(tls + (*negate ? 1 : 0));
    std::vector<std::string> names;
    size_t pos = 0;
    while (pos <= list.size()) {
        size_t end = list.find(',', pos);
        if (end == std::string::npos) end = list.size();
        std::string name = list.substr(pos, end - pos);
        size_t colon = name.find(':');
        if (colon != std::string::npos) name.resize(colon);
        names.push_back(name);
        pos = end + 1;
    }
    return names;
}

/* Whether UCX_TLS (NULL: not set) lets UCX open a memory-map transport
 * (posix or sysv).  A cached UCP setting that no transport takes makes UCX
 * warn "invalid configuration" at worker creation, so MM_RX_BUFS_GROW is set
 * only where one of them may open.  Aliases as in UCX 1.13's ucp_context.c:
 * "sm" and "shm" stand for posix, sysv, xpmem, cma and knem; "mm" for
 * posix, sysv and xpmem. */
int rdrp_ucx_want_mm_rx_grow(const char *tls, int user_set)
{
    if (user_set) return 0;
    if (!tls || !*tls) return 1;
    bool negate, posix = false, sysv = false, all = false;
    for (const std::string &name : tls_names(tls, &negate)) {
        if (name == "all") all = true;
        if (name == "posix" || name == "sm" || name == "shm" || name == "mm") posix = true;
        if (name == "sysv" || name == "sm" || name == "shm" || name == "mm") sysv = true;
    }
    if (negate) return !(posix && sysv);
    return all || posix || sysv;
}

static const char *user_atomic_mode()
{
    const char *m = std::getenv("UCX_MPI_ATOMIC_MODE");
    return m ? m : std::getenv("UCX_ATOMIC_MODE");
}

int rdrp_ucx_set_atomic_mode_cpu(const char *user_mode) { return user_mode == nullptr; }

int rdrp_ucx_atomic_mode_is_cpu(const char *user_mode)
{
    return user_mode == nullptr || strcasecmp(user_mode, "cpu") == 0;
}

int rdrp_ucx_user_set_tcp_rx_seg(void)
{
    return std::getenv("UCX_TCP_RX_SEG_SIZE") || std::getenv("UCX_MPI_TCP_RX_SEG_SIZE");
}

/* Whether UCX_TLS and UCX_NET_DEVICES (NULL: not set) let UCX open its tcp
 * transport, so that RX_SEG_SIZE is set only where a transport takes it (see
 * rdrp_ucx_want_mm_rx_grow for why).  No UCX 1.13 alias names tcp.  Network
 * devices: tcp opens on interfaces ("eth0"), RDMA devices are "mlx5_0:1",
 * so a list of only "dev:port" names (or an empty one) leaves tcp closed. */
int rdrp_ucx_want_tcp_rx_seg(const char *tls, const char *net_devices, int user_set)
{
    if (user_set) return 0;
    if (net_devices) {
        bool negate, netdev = false;
        std::vector<std::string> names = tls_names(net_devices, &negate);
        for (const std::string &name : names)
            if (name == "all" || (!name.empty() && std::string(net_devices).find(name + ":") == std::string::npos))
                netdev = true;
        if (!negate && !netdev) return 0;
    }
    if (!tls || !*tls) return 1;
    bool negate, tcp = false, all = false;
    for (const std::string &name : tls_names(tls, &negate)) {
        if (name == "all") all = true;
        if (name == "tcp") tcp = true;
    }
    if (negate) return !tcp;
    return all || tcp;
}

int rdrp_ucx_context_acquire(const rdrp_ucx_context_params_t *params)
{
    std::lock_guard<std::mutex> g(g_ctx_lock);
    if (g_ctx) {
        ++g_ctx_refs;
        return 0;
    }
    ucp_config_t *config;
    ucs_status_t st = ucp_config_read("MPI", nullptr, &config);
    if (st != UCS_OK) {
        set_error("ucp_config_read", st);
        return -1;
    }
    /* UCX's shared-memory transports start with 512 receive buffers of
     * 8 KiB each per worker (4 MiB resident, measured), where a few dozen
     * serve our traffic: pml/rdrp talks to peers on its node through rings
     * of its own.  Grow them in small steps instead, unless the user chose
     * otherwise.  This goes through the UCP configuration, which UCX applies
     * to each transport's configuration when it opens it -- never through
     * setenv(): the PMIx and UCX threads read the environment with getenv()
     * meanwhile, and glibc's setenv() may free the array they are reading
     * (a crash in getenv in 1 run of ~1000). */
    if (rdrp_ucx_want_mm_rx_grow(std::getenv("UCX_TLS"), rdrp_ucx_user_set_mm_rx_grow())) {
        st = ucp_config_modify(config, "MM_RX_BUFS_GROW", "32");
        if (st != UCS_OK) {
            set_error("ucp_config_modify(MM_RX_BUFS_GROW)", st);
            ucp_config_release(config);
            return -1;
        }
    }
    /* UCX's tcp transport receives into segments of TCP_RX_SEG_SIZE (64 KiB)
     * and caps an active message's zero-copy send at one segment, so a 1 MiB
     * rendezvous over TCP (pml/rdrp's am path, btl/credit's puts and eager
     * packets) travels as 16 active messages, each with its own header,
     * receive call and handler.  With 256 KiB segments it takes 4: measured
     * across two nodes (issue 21, best of 5, load 25-29) pml/rdrp bw 1 MiB
     * 4831 -> 6164 MB/s, bibw 4 MiB 4122 -> 5651, latency 1 MiB 259 ->
     * 226 us; ob1 + btl/credit bw 1 MiB 4681 -> 6471; 16 KiB unchanged.  Only
     * TCP endpoints read it (peers on other nodes); UCX takes the segments
     * from a pool that grows by 8 of them (2 MiB, was 512 KiB) per worker
     * that receives over TCP.  The user's
     * UCX_TCP_RX_SEG_SIZE wins.  The key has no "TCP_" prefix: UCX matches a
     * cached key against each transport's own fields, and "TCP_RX_SEG_SIZE"
     * matched none ("invalid configuration" at worker creation); of UCX
     * 1.13's transports only tcp has a field RX_SEG_SIZE (IB's is SEG_SIZE).
     * Checked with strace: receive calls of 262149 bytes (64k: 65541). */
    if (rdrp_ucx_want_tcp_rx_seg(std::getenv("UCX_TLS"), std::getenv("UCX_NET_DEVICES"),
                                 rdrp_ucx_user_set_tcp_rx_seg())) {
        st = ucp_config_modify(config, "RX_SEG_SIZE", RDRP_UCX_TCP_RX_SEG_SIZE);
        if (st != UCS_OK) {
            set_error("ucp_config_modify(RX_SEG_SIZE)", st);
            ucp_config_release(config);
            return -1;
        }
    }
    /* Remote atomics for osc/rdma over btl/credit: osc/rdma does its own
     * rank's atomics with the CPU and its peers' through the btl, so the two
     * must be atomic with respect to each other (MCA_BTL_ATOMIC_SUPPORTS_GLOB).
     * UCX's "guess" mode would pick a device's atomics wherever one has them,
     * coherent with the CPU or not; "cpu" keeps them coherent. */
    const bool amo = params && params->want_amo;
    const char *mode = user_atomic_mode();
    if (amo && rdrp_ucx_set_atomic_mode_cpu(mode)) {
        st = ucp_config_modify(config, "ATOMIC_MODE", "cpu");
        if (st != UCS_OK) {
            set_error("ucp_config_modify(ATOMIC_MODE)", st);
            ucp_config_release(config);
            return -1;
        }
    }
    ucp_params_t p;
    std::memset(&p, 0, sizeof(p));
    p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                   UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    p.features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_TAG;
    if (amo) p.features |= UCP_FEATURE_AMO32 | UCP_FEATURE_AMO64;
    if (params && params->want_wakeup) p.features |= UCP_FEATURE_WAKEUP;
    p.mt_workers_shared = 1;  /* pml, btl and the cdag engine thread may each own a worker */
    p.estimated_num_eps = params ? params->estimated_num_eps : 0;
    st = ucp_init(&p, config, &g_ctx);
    ucp_config_release(config);
    if (st != UCS_OK) {
        set_error("ucp_init", st);
        g_ctx = nullptr;
        return -1;
    }
    g_ctx_refs = 1;
    g_ctx_amo_cpu = amo && rdrp_ucx_atomic_mode_is_cpu(mode);
    return 0;
}

int rdrp_ucx_context_amo_cpu(void)
{
    std::lock_guard<std::mutex> g(g_ctx_lock);
    return g_ctx != nullptr && g_ctx_amo_cpu;
}

void rdrp_ucx_context_release(void)
{
    std::lock_guard<std::mutex> g(g_ctx_lock);
    if (g_ctx && --g_ctx_refs == 0) {
        rdrp_ucx_reg_flush();  /* ucp_cleanup aborts while memory is still mapped */
        ucp_cleanup(g_ctx);
        g_ctx = nullptr;
    }
}

ucp_context_h rdrp_ucx_context(void) { return g_ctx; }

rdrp_ucx_worker_t *rdrp_ucx_worker_create(int thread_multi, rdrp_ucx_peer_error_fn_t on_error,
                                          void *error_arg)
{
    if (!g_ctx) {
        g_last_error = "no UCX context";
        return nullptr;
    }
    auto *w = new (std::nothrow) rdrp_ucx_worker;
    if (!w) {
        g_last_error = "out of memory";
        return nullptr;
    }
    ucp_worker_params_t wp;
    std::memset(&wp, 0, sizeof(wp));
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = thread_multi ? UCS_THREAD_MODE_MULTI : UCS_THREAD_MODE_SINGLE;
    ucs_status_t st = ucp_worker_create(g_ctx, &wp, &w->worker);
    if (st != UCS_OK) {
        set_error("ucp_worker_create", st);
        delete w;
        return nullptr;
    }
    ucp_worker_attr_t attr;
    attr.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE;
    if (ucp_worker_query(w->worker, &attr) == UCS_OK && thread_multi &&
        attr.thread_mode != UCS_THREAD_MODE_MULTI) {
        g_last_error = "UCX did not grant a thread-safe worker (UCS_THREAD_MODE_MULTI)";
        ucp_worker_destroy(w->worker);
        delete w;
        return nullptr;
    }
    w->thread_multi = thread_multi;
    w->on_error = on_error;
    w->error_arg = error_arg;
    return w;
}

ucp_worker_h rdrp_ucx_worker_handle(rdrp_ucx_worker_t *w) { return w->worker; }
int rdrp_ucx_worker_is_thread_multi(rdrp_ucx_worker_t *w) { return w->thread_multi; }

int rdrp_ucx_worker_address(rdrp_ucx_worker_t *w, int net_only, void **addr, size_t *len)
{
    ucp_worker_attr_t attr;
    std::memset(&attr, 0, sizeof(attr));
    attr.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS | UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS;
    attr.address_flags = net_only ? UCP_WORKER_ADDRESS_FLAG_NET_ONLY : 0;
    ucs_status_t st = ucp_worker_query(w->worker, &attr);
    if (st != UCS_OK) {
        set_error("ucp_worker_query(address)", st);
        return -1;
    }
    *addr = attr.address;
    *len = attr.address_length;
    return 0;
}

void rdrp_ucx_worker_address_release(rdrp_ucx_worker_t *w, void *addr)
{
    ucp_worker_release_address(w->worker, static_cast<ucp_address_t *>(addr));
}

int rdrp_ucx_set_am_handler(rdrp_ucx_worker_t *w, unsigned id, ucp_am_recv_callback_t cb, void *arg)
{
    ucp_am_handler_param_t hp;
    std::memset(&hp, 0, sizeof(hp));
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    hp.id = id;
    hp.cb = cb;
    hp.arg = arg;
    /* no UCP_AM_FLAG_PERSISTENT_DATA: it makes UCX copy every message into a
     * descriptor that could outlive the callback; we copy only unexpected ones */
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    ucs_status_t st = ucp_worker_set_am_recv_handler(w->worker, &hp);
    if (st != UCS_OK) {
        set_error("ucp_worker_set_am_recv_handler", st);
        return -1;
    }
    return 0;
}

static void ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    auto *w = static_cast<rdrp_ucx_worker_t *>(arg);
    uint64_t peer = UINT64_MAX;
    {
        std::lock_guard<std::recursive_mutex> g(w->lock);
        auto it = w->ep_peer.find(ep);
        if (it != w->ep_peer.end()) peer = it->second;
    }
    if (w->on_error) w->on_error(w->error_arg, peer, status); /* unlocked: it may call us */
}

ucp_ep_h rdrp_ucx_connect(rdrp_ucx_worker_t *w, const void *addr, size_t len, int remote,
                          uint64_t peer_id)
{
    (void)len;
    ucp_ep_params_t ep;
    std::memset(&ep, 0, sizeof(ep));
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.address = static_cast<const ucp_address_t *>(addr);
    if (remote) {
        ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
        ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
        ep.err_handler.cb = ep_error_cb;
        ep.err_handler.arg = w;
    } else {
        ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    }
    ucp_ep_h h;
    ucs_status_t st = ucp_ep_create(w->worker, &ep, &h);
    if (st != UCS_OK) {
        set_error("ucp_ep_create", st);
        return nullptr;
    }
    std::lock_guard<std::recursive_mutex> g(w->lock);
    w->eps.push_back(h);
    w->ep_peer[h] = peer_id;
    w->ep_remote[h] = remote != 0;
    return h;
}

int rdrp_ucx_ep_native_get(ucp_ep_h ep)
{
    if (!ep) return -1;
    char *text = nullptr;
    size_t text_len = 0;
    FILE *f = open_memstream(&text, &text_len);
    if (!f) return -1;
    ucp_ep_print_info(ep, f);
    std::fclose(f);
    int native = -1;
    if (text) {
        /* "#                  get[0]: 0..<bcopy>..(inf)" for each rma lane */
        native = std::strstr(text, " get[") != nullptr ? 1 : 0;
        if (native == 0 && std::strstr(text, "lane[") == nullptr) native = -1;  /* nothing printed */
    }
    std::free(text);
    return native;
}

void rdrp_ucx_ep_forget(rdrp_ucx_worker_t *w, ucp_ep_h ep)
{
    std::lock_guard<std::recursive_mutex> g(w->lock);
    for (size_t i = 0; i < w->eps.size(); ++i) {
        if (w->eps[i] == ep) {
            w->eps[i] = w->eps.back();
            w->eps.pop_back();
            break;
        }
    }
    w->ep_peer.erase(ep);
    w->ep_remote.erase(ep);
}

/* Progress w until every request in reqs completed (and free them) or the
 * deadline passed; whatever is left stays in reqs. */
static void wait_requests(rdrp_ucx_worker_t *w, std::vector<void *> &reqs,
                          std::chrono::steady_clock::time_point deadline)
{
    while (!reqs.empty()) {
        ucp_worker_progress(w->worker);
        for (size_t i = 0; i < reqs.size();) {
            if (ucp_request_check_status(reqs[i]) != UCS_INPROGRESS) {
                ucp_request_free(reqs[i]);
                reqs[i] = reqs.back();
                reqs.pop_back();
            } else {
                ++i;
            }
        }
        if (std::chrono::steady_clock::now() > deadline) break;
    }
}

void rdrp_ucx_worker_destroy(rdrp_ucx_worker_t *w, double timeout_sec)
{
    rdrp_ucx_worker_destroy_counted(w, timeout_sec, nullptr);
}

void rdrp_ucx_worker_destroy_counted(rdrp_ucx_worker_t *w, double timeout_sec,
                                     rdrp_ucx_leftovers_t *left)
{
    rdrp_ucx_leftovers_t dummy;
    if (!left) left = &dummy;
    std::memset(left, 0, sizeof(*left));
    if (!w) return;
    /* A flush waits for the peer's progress on this UCX (emulated RMA,
     * rendezvous), so progress here and give up at the deadline: a dead or
     * stuck peer must not hang finalize. */
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(timeout_sec > 0 ? timeout_sec : 0));
    std::vector<void *> pending;
    ucp_request_param_t p;

    /* 1. Flush the on-node endpoints' outstanding operations: UCX wants an
     * rkey destroyed after the operations using it are flushed and before
     * its endpoint goes away.  (Remote endpoints are closed by force below,
     * which cancels their operations.) */
    for (ucp_ep_h ep : w->eps) {
        if (w->ep_remote[ep]) continue;
        std::memset(&p, 0, sizeof(p));
        void *r = ucp_ep_flush_nbx(ep, &p);
        if (UCS_PTR_IS_PTR(r)) pending.push_back(r);
    }
    wait_requests(w, pending, deadline);
    bool clean = pending.empty();
    left->requests_unfinished = pending.size();

    /* 2. The cached rkeys (always before ucp_worker_destroy: they may live
     * in the worker's memory pool). */
    {
        std::lock_guard<std::recursive_mutex> g(w->lock);
        for (auto &kv : w->rkeys) {
            if (kv.second->e.refs > 0) ++left->rkeys_held;  /* a get without its put */
            ucp_rkey_destroy(kv.second->e.rkey);
            delete kv.second;
        }
        w->rkeys.clear();
    }

    /* 3. Close every endpoint.  UCP_EP_CLOSE_FLAG_FORCE is only valid for
     * endpoints in UCP_ERR_HANDLING_MODE_PEER (UCX returns
     * UCS_ERR_INVALID_PARAM otherwise and the endpoint stays open): on-node
     * endpoints (mode NONE) are closed by flushing. */
    size_t flushes_left = pending.size();
    for (ucp_ep_h ep : w->eps) {
        std::memset(&p, 0, sizeof(p));
        p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = w->ep_remote[ep] ? UCP_EP_CLOSE_FLAG_FORCE : 0;
        void *r = ucp_ep_close_nbx(ep, &p);
        if (UCS_PTR_IS_PTR(r)) pending.push_back(r);
    }
    if (clean) wait_requests(w, pending, deadline);
    left->endpoints_unclosed = pending.size() - (clean ? 0 : flushes_left);
    w->eps.clear();
    w->ep_peer.clear();
    w->ep_remote.clear();
    /* Out of time (the peer is dead or stuck): give up on what it has not
     * acknowledged.  ucp_worker_destroy asserts that every request is
     * released, so release the pending ones first; it does not wait for
     * the peer.  (Leaking the worker instead would leave it alive after
     * ucp_cleanup.) */
    for (void *r : pending) ucp_request_free(r);
    ucp_worker_destroy(w->worker);
    delete w;
}

/* ------------------------------------------------------------ rkey cache */
rdrp_ucx_rkey_t *rdrp_ucx_rkey_get(rdrp_ucx_worker_t *w, ucp_ep_h ep, uint64_t peer_id,
                                   uint64_t region_id, const void *rkey_buf, size_t rkey_len)
{
    (void)rkey_len;
    auto key = std::make_pair(peer_id, region_id);
    std::lock_guard<std::recursive_mutex> g(w->lock);
    auto it = w->rkeys.find(key);
    if (it != w->rkeys.end()) {
        it->second->e.refs++;
        it->second->e.last_use = ++w->rkey_clock;
        return it->second;
    }
    if (w->rkeys.size() >= rdrp_ucx_worker::rkey_cache_max) {
        /* evict the least recently used idle entry */
        auto victim = w->rkeys.end();
        for (auto i = w->rkeys.begin(); i != w->rkeys.end(); ++i) {
            if (i->second->e.refs == 0 &&
                (victim == w->rkeys.end() || i->second->e.last_use < victim->second->e.last_use))
                victim = i;
        }
        if (victim != w->rkeys.end()) {
            ucp_rkey_destroy(victim->second->e.rkey);
            delete victim->second;
            w->rkeys.erase(victim);
        }
    }
    ucp_rkey_h rk;
    ucs_status_t st = ucp_ep_rkey_unpack(ep, rkey_buf, &rk);
    if (st != UCS_OK) {
        set_error("ucp_ep_rkey_unpack", st);
        return nullptr;
    }
    auto *k = new (std::nothrow) rdrp_ucx_rkey;
    if (!k) {
        ucp_rkey_destroy(rk);
        return nullptr;
    }
    k->key = key;
    k->e.rkey = rk;
    k->e.refs = 1;
    k->e.last_use = ++w->rkey_clock;
    w->rkeys[key] = k;
    return k;
}

ucp_rkey_h rdrp_ucx_rkey_handle(rdrp_ucx_rkey_t *k) { return k->e.rkey; }

void rdrp_ucx_rkey_put(rdrp_ucx_worker_t *w, rdrp_ucx_rkey_t *k)
{
    std::lock_guard<std::recursive_mutex> g(w->lock);
    k->e.refs--;
}

void rdrp_ucx_rkey_drop_peer(rdrp_ucx_worker_t *w, uint64_t peer_id)
{
    std::lock_guard<std::recursive_mutex> g(w->lock);
    for (auto it = w->rkeys.begin(); it != w->rkeys.end();) {
        if (it->first.first == peer_id && it->second->e.refs == 0) {
            ucp_rkey_destroy(it->second->e.rkey);
            delete it->second;
            it = w->rkeys.erase(it);
        } else {
            ++it;
        }
    }
}

}  // extern "C"
