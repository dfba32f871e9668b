/*
 * Plan: a compiled cDAG schedule, the executable form.
 *
 * Flat arrays only, so instantiating an executor is a couple of allocations
 * and a run is a reset of one counter array:
 *   ops[v]                 what vertex v does
 *   threshold[v]           in-degree of v (duplicate edges removed); v fires
 *                          when its counter reaches it (triggered operations)
 *   succ[succ_begin[v] ..
 *        succ_begin[v+1])  the vertices whose counters v's completion bumps
 *   initial                vertices with threshold 0, fired at start
 *
 * compile() also checks everything one rank can check alone: acyclic,
 * peers in range and never the rank itself, lengths consistent, reduce and
 * copy operands not overlapping.  Cross-rank checks are in cdag_validate.h.
 */
#ifndef CDAG_PLAN_H
#define CDAG_PLAN_H

#include "cdag_schedule.h"

#include <string>
#include <vector>

namespace cdag {

struct Plan {
    int rank = 0;
    int size = 1;
    std::vector<Op> ops;
    std::vector<uint32_t> threshold;
    std::vector<uint32_t> succ_begin;  // ops.size() + 1 entries
    std::vector<VertexId> succ;
    std::vector<VertexId> initial;
    uint64_t send_extent = 0;    // bytes of the Send slot touched
    uint64_t recv_extent = 0;    // bytes of the Recv slot touched
    uint64_t scratch_bytes = 0;  // per executor instance
    uint32_t max_tag = 0;        // largest tag used (transports check it fits)
    uint32_t num_sends = 0, num_recvs = 0;

    size_t num_vertices() const { return ops.size(); }
};

/* Compile s into *out.  Returns "" on success, else what is wrong. */
std::string compile(const Schedule &s, Plan *out);

}  // namespace cdag

#endif
