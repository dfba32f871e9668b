/*
 * Cross-rank matching / deadlock validation and local hazard checking.
 */
#include "cdag_validate.h"

#include <algorithm>
#include <tuple>

namespace cdag {

namespace {

struct Msg {
    int src, dst;
    uint32_t tag;
    uint64_t len;
    int rank;  // rank owning the vertex
    VertexId v;
    bool operator<(const Msg &o) const { return std::tie(src, dst, tag) < std::tie(o.src, o.dst, o.tag); }
    bool same_key(const Msg &o) const { return src == o.src && dst == o.dst && tag == o.tag; }
};

std::string describe(const Msg &m) {
    return std::to_string(m.src) + "->" + std::to_string(m.dst) + " tag " + std::to_string(m.tag);
}

}  // namespace

std::string validate_set(const std::vector<const Plan *> &plans) {
    const int p = static_cast<int>(plans.size());
    std::vector<uint64_t> base(p + 1, 0);
    std::vector<Msg> sends, recvs;
    for (int r = 0; r < p; ++r) {
        const Plan &pl = *plans[r];
        if (pl.rank != r || pl.size != p) return "plan " + std::to_string(r) + " has the wrong rank/size";
        base[r + 1] = base[r] + pl.num_vertices();
        for (VertexId v = 0; v < pl.num_vertices(); ++v) {
            const Op &op = pl.ops[v];
            if (op.kind == OpKind::Send) sends.push_back({r, op.peer, op.tag, op.a.len, r, v});
            if (op.kind == OpKind::Recv) recvs.push_back({op.peer, r, op.tag, op.a.len, r, v});
        }
    }
    std::sort(sends.begin(), sends.end());
    std::sort(recvs.begin(), recvs.end());
    for (size_t i = 1; i < sends.size(); ++i)
        if (sends[i].same_key(sends[i - 1])) return "two sends " + describe(sends[i]);
    for (size_t i = 1; i < recvs.size(); ++i)
        if (recvs[i].same_key(recvs[i - 1])) return "two recvs " + describe(recvs[i]);

    /* Merge the sorted lists; a matched recv is represented by its send in
     * the global node numbering base[rank] + vertex. */
    std::vector<uint64_t> rep(base[p]);
    for (uint64_t i = 0; i < rep.size(); ++i) rep[i] = i;
    size_t si = 0, ri = 0;
    while (si < sends.size() || ri < recvs.size()) {
        if (ri == recvs.size() || (si < sends.size() && sends[si] < recvs[ri]))
            return "unmatched send " + describe(sends[si]);
        if (si == sends.size() || recvs[ri] < sends[si]) return "unmatched recv " + describe(recvs[ri]);
        const Msg &s = sends[si++], &q = recvs[ri++];
        if (s.len != q.len)
            return "length mismatch " + describe(s) + ": " + std::to_string(s.len) + " vs " + std::to_string(q.len);
        rep[base[q.rank] + q.v] = base[s.rank] + s.v;
    }

    /* Kahn over the contracted union graph (CSR). */
    const uint64_t n = base[p];
    std::vector<uint32_t> indeg(n, 0);
    std::vector<uint64_t> first(n + 1, 0), next;
    for (int r = 0; r < p; ++r) {
        const Plan &pl = *plans[r];
        for (VertexId v = 0; v < pl.num_vertices(); ++v)
            for (uint32_t k = pl.succ_begin[v]; k < pl.succ_begin[v + 1]; ++k) {
                ++first[rep[base[r] + v] + 1];
                ++indeg[rep[base[r] + pl.succ[k]]];
            }
    }
    for (uint64_t a = 0; a < n; ++a) first[a + 1] += first[a];
    next.resize(first[n]);
    {
        std::vector<uint64_t> fill(first.begin(), first.end() - 1);
        for (int r = 0; r < p; ++r) {
            const Plan &pl = *plans[r];
            for (VertexId v = 0; v < pl.num_vertices(); ++v)
                for (uint32_t k = pl.succ_begin[v]; k < pl.succ_begin[v + 1]; ++k)
                    next[fill[rep[base[r] + v]]++] = rep[base[r] + pl.succ[k]];
        }
    }
    std::vector<uint64_t> stack;
    uint64_t live = 0, released = 0;
    for (uint64_t i = 0; i < n; ++i) {
        if (rep[i] != i) continue;
        ++live;
        if (indeg[i] == 0) stack.push_back(i);
    }
    while (!stack.empty()) {
        uint64_t a = stack.back();
        stack.pop_back();
        ++released;
        for (uint64_t k = first[a]; k < first[a + 1]; ++k)
            if (--indeg[next[k]] == 0) stack.push_back(next[k]);
    }
    if (released != live) {
        for (int r = 0; r < p; ++r)
            for (uint64_t i = base[r]; i < base[r + 1]; ++i)
                if (indeg[rep[i]] != 0)
                    return "possible deadlock: rank " + std::to_string(r) + " vertex " +
                           std::to_string(i - base[r]) + " waits on a cross-rank dependency cycle";
        return "possible deadlock";
    }
    return "";
}

std::string check_hazards(const Plan &p) {
    const size_t n = p.num_vertices();
    const size_t words = (n + 63) / 64;
    /* reach[v] = descendants of v (bit set), filled in reverse topological
     * order; Kahn gives us a topological order first. */
    std::vector<VertexId> order;
    order.reserve(n);
    std::vector<uint32_t> left(p.threshold);
    for (VertexId v : p.initial) order.push_back(v);
    for (size_t i = 0; i < order.size(); ++i) {
        VertexId v = order[i];
        for (uint32_t k = p.succ_begin[v]; k < p.succ_begin[v + 1]; ++k)
            if (--left[p.succ[k]] == 0) order.push_back(p.succ[k]);
    }
    if (order.size() != n) return "dependency cycle";
    std::vector<uint64_t> reach(n * words, 0);
    for (size_t i = n; i-- > 0;) {
        VertexId v = order[i];
        uint64_t *rv = &reach[size_t(v) * words];
        for (uint32_t k = p.succ_begin[v]; k < p.succ_begin[v + 1]; ++k) {
            VertexId w = p.succ[k];
            const uint64_t *rw = &reach[size_t(w) * words];
            for (size_t j = 0; j < words; ++j) rv[j] |= rw[j];
            rv[w / 64] |= uint64_t(1) << (w % 64);
        }
    }
    auto ordered = [&](VertexId a, VertexId b) {
        return (reach[size_t(a) * words + b / 64] >> (b % 64) & 1) ||
               (reach[size_t(b) * words + a / 64] >> (a % 64) & 1);
    };

    struct Access {
        Slot slot;
        uint64_t lo, hi;
        VertexId v;
        bool write;
    };
    std::vector<Access> acc;
    for (VertexId v = 0; v < n; ++v) {
        const Op &op = p.ops[v];
        auto add = [&](const Buf &b, bool w) {
            if (b.len && b.slot != Slot::None) acc.push_back({b.slot, b.off, b.off + b.len, v, w});
        };
        switch (op.kind) {
        case OpKind::Send: add(op.a, false); break;
        case OpKind::Recv: add(op.a, true); break;
        case OpKind::Reduce:
        case OpKind::Copy:
            add(op.a, false);
            add(op.b, true);
            break;
        case OpKind::Nop: break;
        }
    }
    std::sort(acc.begin(), acc.end(), [](const Access &a, const Access &b) {
        return std::tie(a.slot, a.lo) < std::tie(b.slot, b.lo);
    });
    for (size_t i = 0; i < acc.size(); ++i)
        for (size_t j = i + 1; j < acc.size() && acc[j].slot == acc[i].slot && acc[j].lo < acc[i].hi; ++j) {
            const Access &a = acc[i], &b = acc[j];
            if ((a.write || b.write) && a.v != b.v && !ordered(a.v, b.v))
                return "unordered access to slot " + std::to_string(int(a.slot)) + " bytes [" +
                       std::to_string(b.lo) + "," + std::to_string(std::min(a.hi, b.hi)) + ") by vertices " +
                       std::to_string(a.v) + " and " + std::to_string(b.v);
        }
    return "";
}

}  // namespace cdag
