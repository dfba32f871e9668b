/*
 * pml/rdrp: explain the protocol choices (in the spirit of UCX_PROTO_INFO).
 *
 * At pml_rdrp_verbose >= RDRP_EXPLAIN_LEVEL (10), the first contact with a
 * peer prints which protocol, data path, first chunk, chunk size and
 * window a message of each size class gets to that peer:
 *
 *   pml:rdrp: [0->1 same node] size             | protocol | path | first chunk | chunk  | window
 *   pml:rdrp: [0->1 same node] 0 .. 8192        | eager    | am   | -           | -      | -
 *   pml:rdrp: [0->1 same node] 8193 .. 2097151  | rdrp     | am   | 8192        | 524288 | 4
 *   pml:rdrp: [0->1 same node] 2097152 ..       | rdrp     | rma  | 8192        | 524288 | 4
 *
 * The rows come from the send path's own selection functions (eager_for,
 * rts_first_chunk_for, data_path_for in pml_rdrp_request.h,
 * rndv_protocol_for in pml_rdrp_rma_proto.cc), asked at every power of two,
 * one byte either side of it and of every size parameter; neighbouring
 * sizes with the same answer are merged into one row.  Nothing here
 * repeats a rule.  Chunk and window are the receiver's settings (the
 * receiver pulls); they are this process's, the same everywhere unless a
 * job sets them per rank.
 */
#include "pml_rdrp_request.h"
#include "pml_rdrp_credit.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <vector>

namespace rdrp {

namespace {

struct Choice {
    bool   eager = false;
    int    proto = RDRP_PROTO_RDRP;
    int    path = RDRP_PATH_AM;
    bool   whole_in_rts = false;  /* rdrp: everything rides in the RTS, nothing to pull */
    size_t first = 0;             /* rdrp: bytes in the RTS */
    bool operator==(const Choice &o) const
    {
        return eager == o.eager && proto == o.proto && path == o.path &&
               whole_in_rts == o.whole_in_rts && first == o.first;
    }
};

Choice choice_for(const Endpoint *ep, size_t len)
{
    Choice c;
    if (eager_in_ping_pong(ep, len)) {
        c.eager = true;
        return c;
    }
    c.proto = rndv_protocol_for(len);
    if (c.proto == RDRP_PROTO_RDRP) {
        c.first = rts_first_chunk_for(ep, len);
        c.whole_in_rts = c.first >= len;
        c.path = c.whole_in_rts ? RDRP_PATH_AM : data_path_for(ep, len);
        if (c.whole_in_rts) c.first = 0;
    } else {
        c.path = RDRP_PATH_RMA;  /* get and put move the data with one RMA operation */
    }
    return c;
}

const char *path_name(int path)
{
    switch (path) {
    case RDRP_PATH_RMA: return "rma";
    case RDRP_PATH_CMA: return "cma";
    default: return "am";
    }
}

const char *proto_name(const Choice &c)
{
    if (c.eager) return "eager";
    switch (c.proto) {
    case RDRP_PROTO_GET: return "get";
    case RDRP_PROTO_PUT: return "put";
    default: return "rdrp";
    }
}

}  // namespace

void explain_peer(const Endpoint *ep)
{
    const mca_pml_rdrp_params_t &p = mca_pml_rdrp_params;
    if (p.verbose < RDRP_EXPLAIN_LEVEL) return;

    /* probe sizes: 0, every power of two and one byte either side, and the
     * size parameters the rules are written in, one byte either side */
    const size_t top = size_t(1) << 40;
    std::set<size_t> probe{0};
    auto around = [&](size_t v) {
        if (v > top) return;
        if (v > 0) probe.insert(v - 1);
        probe.insert(v);
        probe.insert(v + 1);
    };
    for (size_t v = 1; v <= top; v <<= 1) around(v);
    around(p.eager_limit);
    around(p.shm_eager_limit);
    around(p.am_eager_limit);
    around(p.rndv_first_chunk);
    around(p.get_limit);
    around(p.auto_rma_min);
    around(p.chunk_size);
    around(p.cma_chunk_size);
    std::vector<size_t> sizes(probe.begin(), probe.end());

    struct Row { size_t lo, hi; Choice c; };
    std::vector<Row> rows;
    for (size_t i = 0; i < sizes.size(); ++i) {
        Choice c = choice_for(ep, sizes[i]);
        if (!rows.empty() && rows.back().c == c) {
            rows.back().hi = sizes[i];
        } else {
            if (!rows.empty()) rows.back().hi = sizes[i] - 1;
            rows.push_back({sizes[i], sizes[i], c});
        }
    }

    char who[64];
    snprintf(who, sizeof(who), "[%u->%u %s]", static_cast<unsigned>(ompi_proc_local()->super.proc_name.vpid),
             static_cast<unsigned>(ep->proc->super.proc_name.vpid), ep->remote ? "remote" : "same node");
    RDRP_VERBOSE(RDRP_EXPLAIN_LEVEL, "%s messages by %s%s; protocols by message size (bytes; eager needs a credit%s)",
                 who, ep->shm ? "shared-memory ring" : "UCX active messages",
                 ep->shm ? (ep->cma ? ", CMA between the address spaces" : ", no CMA (not permitted)") : "",
                 credit_enabled() ? ", else it waits for one, then goes by rendezvous" : ": credits off");
    RDRP_VERBOSE(RDRP_EXPLAIN_LEVEL, "%s %-24s | %-8s | %-4s | %-11s | %-8s | %s", who, "size", "protocol",
                 "path", "first chunk", "chunk", "window");
    for (size_t i = 0; i < rows.size(); ++i) {
        const Row &r = rows[i];
        char range[64], first[32], chunk[32], window[32];
        if (i + 1 == rows.size())
            snprintf(range, sizeof(range), "%zu ..", r.lo);
        else
            snprintf(range, sizeof(range), "%zu .. %zu", r.lo, r.hi);
        bool pulled = !r.c.eager && r.c.proto == RDRP_PROTO_RDRP && !r.c.whole_in_rts;
        snprintf(first, sizeof(first), "%s", "-");
        if (!r.c.eager && r.c.proto == RDRP_PROTO_RDRP)
            snprintf(first, sizeof(first), r.c.whole_in_rts ? "all" : "%zu", r.c.first);
        snprintf(chunk, sizeof(chunk), "%s", "-");
        snprintf(window, sizeof(window), "%s", "-");
        if (pulled) {
            snprintf(chunk, sizeof(chunk), "%zu", r.c.path == RDRP_PATH_CMA ? p.cma_chunk_size : p.chunk_size);
            snprintf(window, sizeof(window), "%d", p.max_outstanding);
        } else if (!r.c.eager && r.c.proto != RDRP_PROTO_RDRP) {
            snprintf(chunk, sizeof(chunk), "%s", "whole");
            snprintf(window, sizeof(window), "%d", 1);
        }
        RDRP_VERBOSE(RDRP_EXPLAIN_LEVEL, "%s %-24s | %-8s | %-4s | %-11s | %-8s | %s", who, range,
                     proto_name(r.c), path_name(r.c.path), first, chunk, window);
    }
    if (ep->cma_from && ep->cma_from < kRingAnswerBelow) {
        /* the table is a ping-pong's (eager_in_ping_pong); say what else eager_for does */
        char busy[160] = "";
        if (ep->cma_from < kRingStreamBelow)
            snprintf(busy, sizeof(busy), " (below %zu through the ring while the peer has %u or more of our messages "
                     "unread)", kRingStreamBelow, kRingBusyUnread);
        RDRP_VERBOSE(RDRP_EXPLAIN_LEVEL, "%s (the table for a message that answers one of the peer's, a ping-pong; a "
                     "message that follows our own goes by single copy from %zu%s)", who, ep->cma_from, busy);
    }
}

}  // namespace rdrp
