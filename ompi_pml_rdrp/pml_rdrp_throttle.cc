/*
 * pml/rdrp token throttling: admission of sends through coll/cdag's
 * throttle engine, the FIFO of refused sends, token release at local
 * completion.  See pml_rdrp_throttle.h.
 */
#include "pml_rdrp_request.h"  /* first: it carries the C++ prelude for Open MPI's headers */
#include "pml_rdrp_throttle.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <deque>

#include "common/throttle/throttle.h"

namespace rdrp {

bool throttle_active = false;

namespace {

cdag_throttle_t *thr = nullptr;
std::deque<Request *> queue;  // refused sends, in the order they were started
bool draining = false;

/* What the tokens pay for: the eager message, or the RTS with its first chunk. */
uint64_t injected_bytes(const Request *r)
{
    const auto &p = mca_pml_rdrp_params;
    return eager_for(r->ep, r->packed) ? r->packed : std::min(r->packed, p.rndv_first_chunk);
}

bool try_take(Request *r)
{
    uint32_t tokens;
    if (!cdag_throttle_try_acquire(thr, injected_bytes(r), &tokens)) return false;
    r->thr_tokens = tokens;
    r->thr_held = true;
    return true;
}

}  // namespace

bool throttle_init()
{
    const auto &p = mca_pml_rdrp_params;
    if (p.throttle == RDRP_THROTTLE_OFF) return true;
    cdag_throttle_config_t c{};
    c.mode = p.throttle == RDRP_THROTTLE_NODE ? CDAG_THROTTLE_NODE : CDAG_THROTTLE_RANK;
    c.rank_limit = static_cast<uint32_t>(std::max(p.throttle_rank_limit, 0));
    c.node_tokens = static_cast<uint32_t>(std::max(p.throttle_node_tokens, 1));
    c.bytes_per_token = p.throttle_bytes_per_token;
    c.recover_after = static_cast<uint32_t>(std::max(p.throttle_recover_polls, 1));
    int local_size = static_cast<int>(opal_process_info.num_local_peers) + 1;
    int local_rank = static_cast<int>(opal_process_info.my_local_rank);
    c.cache = p.throttle_token_cache < 0 ? CDAG_THROTTLE_CACHE_AUTO : static_cast<uint32_t>(p.throttle_token_cache);
    c.cache_hit_counter = &stats.throttle_cache_hits;
    /* one pool per job and node: the job id is unique among the node's jobs */
    char name[96], err[256] = "";
    snprintf(name, sizeof(name), "/rdrp-pml-%u-%u", static_cast<unsigned>(OMPI_PROC_MY_NAME->jobid),
             static_cast<unsigned>(getuid()));
    thr = cdag_throttle_create(&c, name, local_rank, local_size, err, sizeof(err));
    if (!thr) {
        mca_pml_rdrp_show_help("init-failed", "token throttling (pml_rdrp_throttle):", err);
        return false;
    }
    throttle_active = true;
    RDRP_VERBOSE(2, "throttle %s: rank limit %u, node tokens %u, %llu bytes per token, cache %d",
                 p.throttle == RDRP_THROTTLE_NODE ? "node" : "rank", c.rank_limit, c.node_tokens,
                 static_cast<unsigned long long>(c.bytes_per_token), p.throttle_token_cache);
    return true;
}

void throttle_fini()
{
    if (!queue.empty()) RDRP_VERBOSE(1, "finalize: %zu sends still wait for admission", queue.size());
    queue.clear();
    cdag_throttle_destroy(thr);
    thr = nullptr;
    throttle_active = false;
}

bool throttle_admit(Request *r)
{
    r->thr_held = false;
    if (queue.empty() && try_take(r)) return true;
    queue.push_back(r);  // behind everything already waiting: non-overtaking holds
    ++stats.throttled;
    return false;
}

void throttle_release(Request *r)
{
    if (!r->thr_held) return;
    r->thr_held = false;
    cdag_throttle_release(thr, r->thr_tokens);
}

int throttle_progress()
{
    if (cdag_throttle_cached(thr)) cdag_throttle_poll(thr);
    if (queue.empty() || draining) return 0;
    draining = true;
    int n = 0;
    while (!queue.empty() && try_take(queue.front())) {
        Request *r = queue.front();
        queue.pop_front();
        ++n;
        int rc = send_admitted(r);
        if (rc != OMPI_SUCCESS) {
            r->ompi.req_status.MPI_ERROR = MPI_ERR_INTERN;
            req_complete(r);
        }
    }
    draining = false;
    return n;
}

}  // namespace rdrp
