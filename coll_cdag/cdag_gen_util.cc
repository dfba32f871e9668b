/*
 * Generator building blocks: range splitting, block layouts and block
 * transfers, running partial results of reductions.
 */
#include "cdag_gen.h"

#include <algorithm>

namespace cdag {
namespace gen {

std::vector<std::pair<uint64_t, uint64_t>> split_range(uint64_t lo, uint64_t hi, const std::vector<uint64_t> &cuts,
                                                       uint64_t seg) {
    std::vector<uint64_t> at;
    at.push_back(lo);
    for (uint64_t c : cuts)
        if (c > lo && c < hi) at.push_back(c);
    std::sort(at.begin(), at.end());
    at.erase(std::unique(at.begin(), at.end()), at.end());
    at.push_back(hi);
    std::vector<std::pair<uint64_t, uint64_t>> out;
    for (size_t i = 0; i + 1 < at.size(); ++i)
        for (uint64_t a = at[i]; a < at[i + 1];) {
            const uint64_t b = seg ? std::min(at[i + 1], a + seg) : at[i + 1];
            out.emplace_back(a, b);
            a = b;
        }
    return out;
}

uint64_t seg_elems(uint64_t seg_bytes, uint64_t elem_size, uint64_t count) {
    if (seg_bytes == 0 || count == 0) return std::max<uint64_t>(count, 1);
    return std::min(count, std::max<uint64_t>(1, seg_bytes / elem_size));
}

std::vector<uint64_t> even_blocks(uint64_t count, int p) {
    std::vector<uint64_t> e(p + 1, 0);
    for (int j = 0; j < p; ++j) e[j + 1] = e[j] + count / p + (uint64_t(j) < count % p ? 1 : 0);
    return e;
}

Layout Layout::uniform(int n, uint64_t block) {
    Layout l;
    for (int j = 0; j < n; ++j) {
        l.off.push_back(j * block);
        l.len.push_back(block);
    }
    return l;
}

Layout Layout::from(int n, const uint64_t *counts, const uint64_t *displs, uint64_t scale) {
    Layout l;
    for (int j = 0; j < n; ++j) {
        l.off.push_back(displs[j] * scale);
        l.len.push_back(counts[j] * scale);
    }
    return l;
}

std::vector<Piece> block_pieces(const Layout &l, const std::vector<int> &blocks, int own, uint64_t seg) {
    std::vector<Piece> out;
    uint64_t run_lo = 0, run_hi = 0;
    auto flush = [&](bool is_own) {
        for (auto &r : split_range(run_lo, run_hi, {}, seg)) out.push_back({r.first, r.second - r.first, is_own});
        run_lo = run_hi = 0;
    };
    for (int j : blocks) {
        const uint64_t lo = l.off[j], len = l.len[j];
        if (len == 0) continue;
        if (j == own) {
            flush(false);
            run_lo = lo;
            run_hi = lo + len;
            flush(true);
        } else if (run_hi != run_lo && run_hi == lo) {
            run_hi += len;
        } else {
            flush(false);
            run_lo = lo;
            run_hi = lo + len;
        }
    }
    flush(false);
    return out;
}

uint32_t send_blocks(Schedule &s, int peer, uint32_t tag0, const Layout &l, const std::vector<int> &blocks, int own,
                     Buf buf, Buf own_src, uint64_t seg) {
    uint32_t i = 0;
    for (const Piece &pc : block_pieces(l, blocks, own, seg)) {
        Buf src = pc.own ? own_src.sub(pc.off - l.off[own], pc.len) : buf.sub(pc.off, pc.len);
        s.send(peer, tag0 + i++, src);
    }
    return i;
}

uint32_t recv_blocks(Schedule &s, int peer, uint32_t tag0, const Layout &l, const std::vector<int> &blocks, int own,
                     Buf buf, uint64_t seg) {
    uint32_t i = 0;
    for (const Piece &pc : block_pieces(l, blocks, own, seg)) s.recv(peer, tag0 + i++, buf.sub(pc.off, pc.len));
    return i;
}

void absorb_right(Schedule &s, Partial &acc, Buf incoming, uint64_t count, bool commutative) {
    if (commutative && acc.writable) {
        s.reduce(incoming, acc.at, count);  // acc = incoming op acc = acc op incoming
        return;
    }
    s.reduce(acc.at, incoming, count);  // incoming = acc op incoming
    acc = Partial{incoming, true};
}

void absorb_left(Schedule &s, Partial &acc, Buf incoming, uint64_t count, bool commutative, Buf spare) {
    if (acc.writable) {
        s.reduce(incoming, acc.at, count);
        return;
    }
    if (commutative) {
        s.reduce(acc.at, incoming, count);
        acc = Partial{incoming, true};
        return;
    }
    s.copy(acc.at, spare);
    s.reduce(incoming, spare, count);
    acc = Partial{spare, true};
}

void settle(Schedule &s, const Partial &acc, Buf dest) {
    if (acc.at != dest) s.copy(acc.at, dest);
}

}  // namespace gen
}  // namespace cdag
