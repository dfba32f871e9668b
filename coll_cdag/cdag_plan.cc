/*
 * compile(): Schedule (builder form) -> Plan (flat executable form).
 */
#include "cdag_plan.h"

#include <algorithm>

namespace cdag {

namespace {

bool overlaps(const Buf &x, const Buf &y) {
    return x.slot == y.slot && x.slot != Slot::None && x.len && y.len && x.off < y.off + y.len &&
           y.off < x.off + x.len;
}

std::string vertex_name(VertexId v) { return "vertex " + std::to_string(v); }

/* Structural checks of one vertex. */
std::string check_op(const Schedule &s, VertexId v, const Op &op) {
    auto writable = [](const Buf &b) { return b.len == 0 || b.slot == Slot::Recv || b.slot == Slot::Scratch; };
    auto addressed = [](const Buf &b) { return b.len == 0 || b.slot != Slot::None; };
    switch (op.kind) {
    case OpKind::Send:
    case OpKind::Recv:
        if (op.peer < 0 || op.peer >= s.size() || op.peer == s.rank())
            return vertex_name(v) + ": bad peer " + std::to_string(op.peer);
        if (!addressed(op.a)) return vertex_name(v) + ": message range has no slot";
        if (op.kind == OpKind::Recv && !writable(op.a)) return vertex_name(v) + ": recv into the send buffer";
        return "";
    case OpKind::Reduce:
        if (op.a.len != op.b.len) return vertex_name(v) + ": reduce operands differ in length";
        if (op.count == 0 || op.a.len == 0 || op.a.len % op.count)
            return vertex_name(v) + ": reduce count does not divide its length";
        [[fallthrough]];
    case OpKind::Copy:
        if (op.a.len != op.b.len) return vertex_name(v) + ": copy lengths differ";
        if (!addressed(op.a) || !addressed(op.b)) return vertex_name(v) + ": operand has no slot";
        if (!writable(op.b)) return vertex_name(v) + ": writes the send buffer";
        if (overlaps(op.a, op.b)) return vertex_name(v) + ": operands overlap";
        return "";
    case OpKind::Nop: return "";
    }
    return vertex_name(v) + ": unknown kind";
}

}  // namespace

std::string compile(const Schedule &s, Plan *out) {
    Plan p;
    const size_t n = s.num_vertices();
    p.rank = s.rank();
    p.size = s.size();
    p.ops = s.ops();
    if (s.size() < 1 || s.rank() < 0 || s.rank() >= s.size()) return "bad rank/size";
    for (VertexId v = 0; v < n; ++v) {
        std::string e = check_op(s, v, p.ops[v]);
        if (!e.empty()) return e;
        const Op &op = p.ops[v];
        if (op.kind == OpKind::Send) ++p.num_sends;
        if (op.kind == OpKind::Recv) ++p.num_recvs;
        if (op.kind == OpKind::Send || op.kind == OpKind::Recv) p.max_tag = std::max(p.max_tag, op.tag);
    }

    /* CSR successor lists without duplicate edges. */
    std::vector<std::pair<VertexId, VertexId>> e = s.edges();
    for (auto &x : e)
        if (x.first >= n || x.second >= n) return "edge to a vertex that does not exist";
    std::sort(e.begin(), e.end());
    e.erase(std::unique(e.begin(), e.end()), e.end());
    p.succ_begin.assign(n + 1, 0);
    p.threshold.assign(n, 0);
    for (auto &x : e) {
        ++p.succ_begin[x.first + 1];
        ++p.threshold[x.second];
    }
    for (size_t v = 0; v < n; ++v) p.succ_begin[v + 1] += p.succ_begin[v];
    p.succ.resize(e.size());
    for (size_t i = 0; i < e.size(); ++i) p.succ[i] = e[i].second;  // sorted by source already

    /* Kahn: acyclic iff every vertex gets released. */
    std::vector<uint32_t> left(p.threshold);
    std::vector<VertexId> stack;
    for (VertexId v = 0; v < n; ++v)
        if (left[v] == 0) {
            p.initial.push_back(v);
            stack.push_back(v);
        }
    size_t released = 0;
    while (!stack.empty()) {
        VertexId v = stack.back();
        stack.pop_back();
        ++released;
        for (uint32_t i = p.succ_begin[v]; i < p.succ_begin[v + 1]; ++i)
            if (--left[p.succ[i]] == 0) stack.push_back(p.succ[i]);
    }
    if (released != n) return "dependency cycle";

    p.send_extent = s.extent(Slot::Send);
    p.recv_extent = s.extent(Slot::Recv);
    p.scratch_bytes = s.scratch_bytes();
    *out = std::move(p);
    return "";
}

}  // namespace cdag
