/*
 * Alltoall and Alltoallv: exchange with partner rank+st / rank-st in step
 * st = 1..p-1, with at most `window` steps in flight (step st starts only
 * after step st-window completed).  Pairwise = window 1; Linear with
 * window 0 posts everything at once.
 *
 * Each rank only needs its own send and receive layouts (alltoallv), and
 * a pair exchanges in exactly one step, so tags are just segment numbers.
 * In place, the input blocks are first copied to scratch: a block received
 * from rank i may otherwise overwrite block i before it was sent to i.
 */
#include "cdag_gen.h"

#include <algorithm>

namespace cdag {
namespace gen {

Status gen_alltoall(const CollSpec &c, const AlgoChoice &a, Schedule &s) {
    int window;
    if (a.algo == Algo::Pairwise)
        window = 1;
    else if (a.algo == Algo::Linear)
        window = a.window;
    else
        return Status::Unsupported;
    const int p = c.size, me = c.rank;
    const bool v = c.coll == Coll::Alltoallv;
    const Layout rl = v ? Layout::from(p, c.rcounts, c.rdispls) : Layout::uniform(p, c.count);
    const Layout sl = c.in_place ? rl : v ? Layout::from(p, c.counts, c.displs) : Layout::uniform(p, c.count);
    const Buf recv{Slot::Recv, 0, 0};
    Buf src{Slot::Send, 0, 0};

    if (c.in_place) {
        uint64_t extent = 0;
        for (int j = 0; j < p; ++j)
            if (j != me && rl.len[j]) extent = std::max(extent, rl.off[j] + rl.len[j]);
        const Buf snap = s.scratch(extent);
        for (int j = 0; j < p; ++j)
            if (j != me && rl.len[j]) s.copy(recv.sub(rl.off[j], rl.len[j]), snap.sub(rl.off[j], rl.len[j]));
        src = Buf{Slot::Scratch, snap.off, 0};
    } else if (sl.len[me]) {
        s.copy(src.sub(sl.off[me], sl.len[me]), recv.sub(rl.off[me], rl.len[me]));
    }

    std::vector<VertexId> done(p, kNoVertex);  // per step: joins its vertices (windowed only)
    for (int st = 1; st < p; ++st) {
        const int to = (me + st) % p, from = (me - st + p) % p;
        const VertexId gate = (window > 0 && st > window) ? done[st - window] : kNoVertex;
        std::vector<VertexId> mine;
        uint32_t tag = 0;
        for (auto &pc : split_range(0, sl.len[to], {}, a.seg_bytes))
            mine.push_back(s.send(to, tag++, src.sub(sl.off[to] + pc.first, pc.second - pc.first), {gate}));
        tag = 0;
        for (auto &pc : split_range(0, rl.len[from], {}, a.seg_bytes))
            mine.push_back(s.recv(from, tag++, recv.sub(rl.off[from] + pc.first, pc.second - pc.first), {gate}));
        if (window > 0 && st + window < p) {
            done[st] = s.nop({gate});
            for (VertexId x : mine) s.edge(x, done[st]);
        }
    }
    return Status::Ok;
}

}  // namespace gen
}  // namespace cdag
