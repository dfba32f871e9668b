/*
 * Topologies the generators map dataflows onto: contiguous-subtree k-ary
 * and k-nomial trees, and the power-of-two fold for butterflies.
 */
#include "cdag_gen.h"

#include <algorithm>

namespace cdag {
namespace gen {

int ceil_log2(int p) {
    int l = 0;
    while ((int64_t(1) << l) < p) ++l;
    return l;
}

Fold::Fold(int size) : p(size), p2(1) {
    while (p2 * 2 <= p) p2 *= 2;
    rem = p - p2;
}

bool tree_shape(Algo a, int radix, int p, TreeShape *out) {
    switch (a) {
    case Algo::Chain: *out = {Algo::KaryTree, 1}; return true;
    case Algo::Linear: *out = {Algo::KaryTree, std::max(1, p - 1)}; return true;
    case Algo::KaryTree:
        if (radix < 1) return false;
        *out = {Algo::KaryTree, radix};
        return true;
    case Algo::KnomialTree:
        if (radix < 2) return false;
        *out = {Algo::KnomialTree, radix};
        return true;
    default: return false;
    }
}

namespace {

/* The near-equal split of m ranks into min(k, m) parts: part j starts at
 * start(j) (relative) and has size(j) ranks; the first m % parts parts are
 * one longer. */
struct Split {
    int64_t m, parts, base, extra;
    Split(int64_t m_, int64_t k) : m(m_), parts(std::min<int64_t>(k, m_)) {
        base = parts ? m / parts : 0;
        extra = parts ? m % parts : 0;
    }
    int64_t start(int64_t j) const { return j * base + std::min(j, extra); }
    int64_t size(int64_t j) const { return base + (j < extra ? 1 : 0); }
    int64_t part_of(int64_t x) const {
        const int64_t big = extra * (base + 1);
        return x < big ? x / (base + 1) : extra + (x - big) / base;
    }
};

TreeNode kary_node(int k, int p, int v) {
    TreeNode n;
    int64_t lo = 0, hi = p;
    while (lo != v) {  // descend from the root to v's range
        Split sp(hi - lo - 1, k);
        const int64_t j = sp.part_of(v - lo - 1);
        n.parent = static_cast<int>(lo);
        const int64_t first = lo + 1 + sp.start(j);
        hi = first + sp.size(j);
        lo = first;
    }
    n.hi = static_cast<int>(hi);
    Split sp(hi - v - 1, k);
    for (int64_t j = 0; j < sp.parts; ++j) {
        const int64_t c = v + 1 + sp.start(j);
        n.children.emplace_back(static_cast<int>(c), static_cast<int>(c + sp.size(j)));
    }
    return n;
}

TreeNode knomial_node(int k, int p, int v) {
    TreeNode n;
    int64_t span = 1;  // k^i0 for v's lowest nonzero digit i0
    if (v == 0) {
        while (span < p) span *= k;
        n.hi = p;
    } else {
        while ((v / span) % k == 0) span *= k;
        const int64_t digit = (v / span) % k;
        n.parent = static_cast<int>(v - digit * span);
        n.hi = static_cast<int>(std::min<int64_t>(v + span, p));
    }
    for (int64_t w = 1; w < span; w *= k)
        for (int64_t j = 1; j < k; ++j) {
            const int64_t c = v + j * w;
            if (c >= p) break;
            n.children.emplace_back(static_cast<int>(c), static_cast<int>(std::min<int64_t>(c + w, p)));
        }
    return n;
}

}  // namespace

TreeNode tree_node(const TreeShape &t, int p, int v) {
    return t.kind == Algo::KnomialTree ? knomial_node(t.radix, p, v) : kary_node(t.radix, p, v);
}

}  // namespace gen
}  // namespace cdag
