/*
 * Scan and Exscan, any op (combining in rank order):
 *   Chain      pipelined linear: rank r gets the prefix of r-1, segment by
 *              segment, folds in its own data and passes it on
 *   Butterfly  recursive doubling: in step 2^i exchange the reduction of
 *              the own aligned group with rank ^ 2^i; the result absorbs
 *              only lower groups (from the left), the group reduction
 *              grows on the side the partner is on.  Any p.
 */
#include "cdag_gen.h"

#include <algorithm>

namespace cdag {
namespace gen {

namespace {

void chain(Schedule &s, const Red &r, bool exclusive, bool in_place, uint64_t seg) {
    const int p = s.size(), me = s.rank();
    const Buf res{Slot::Recv, 0, r.bytes()};
    const Buf input = in_place ? res : Buf{Slot::Send, 0, r.bytes()};
    uint32_t tag = 0;
    for (auto &c : split_range(0, r.bytes(), {}, seg * r.esize)) {
        const uint64_t len = c.second - c.first, n = len / r.esize;
        const Buf in = input.sub(c.first, len), out = res.sub(c.first, len);
        const bool last = me + 1 == p;
        if (!exclusive) {
            if (me == 0) {
                if (!in_place) s.copy(in, out);
                if (!last) s.send(me + 1, tag, in);
            } else {
                const Buf prefix = s.scratch(len);
                s.recv(me - 1, tag, prefix);
                if (!in_place) s.copy(in, out);
                s.reduce(prefix, out, n);  // out = prefix op own
                if (!last) s.send(me + 1, tag, out);
            }
        } else {
            if (me == 0) {
                if (!last) s.send(me + 1, tag, in);  // Recv of rank 0 stays untouched
            } else {
                /* Copy the own data first: in place, the prefix lands on it. */
                const Buf mine = last ? Buf{} : s.scratch(len);
                if (!last) s.copy(in, mine);
                s.recv(me - 1, tag, out);
                if (!last) {
                    s.reduce(out, mine, n);  // mine = prefix op own
                    s.send(me + 1, tag, mine);
                }
            }
        }
        ++tag;
    }
}

void butterfly(Schedule &s, const Red &r, bool exclusive, bool in_place) {
    const int p = s.size(), me = s.rank();
    const Buf res{Slot::Recv, 0, r.bytes()};
    const Buf input = in_place ? res : Buf{Slot::Send, 0, r.bytes()};
    /* (partner, step): the tag is the step, which both partners share
     * even when a rank skips steps whose partner does not exist. */
    std::vector<std::pair<int, uint32_t>> partners;
    uint32_t step = 0;
    for (int m = 1; m < p; m <<= 1, ++step)
        if ((me ^ m) < p) partners.push_back({me ^ m, step});

    /* group: reduction of this rank's aligned group so far.  In place it
     * must not live in res, which the result overwrites. */
    Partial group{input, false};
    if (in_place && !partners.empty()) {
        const Buf g = s.scratch(r.bytes());
        s.copy(input, g);
        group = Partial{g, true};
    }
    bool have_result = !exclusive;
    if (!exclusive && !in_place) s.copy(input, res);

    for (size_t i = 0; i < partners.size(); ++i) {
        const int peer = partners[i].first;
        const uint32_t tag = partners[i].second;
        const bool more = i + 1 < partners.size();  // is the group still needed?
        s.send(peer, tag, group.at);
        if (peer < me) {
            /* First lower group of an exclusive scan lands in res. */
            const Buf b = have_result ? s.scratch(r.bytes()) : res;
            s.recv(peer, tag, b);
            if (have_result) s.reduce(b, res, r.count);  // res = lower op res
            have_result = true;
            if (more) {
                /* group = lower op group.  A read-only group may move into b
                 * only if b is not the result. */
                const bool may_move = r.commutative && b != res;
                const Buf spare = (group.writable || may_move) ? Buf{} : s.scratch(r.bytes());
                absorb_left(s, group, b, r.count, may_move, spare);
            }
        } else {
            const Buf b = s.scratch(r.bytes());
            s.recv(peer, tag, b);
            if (more) absorb_right(s, group, b, r.count, r.commutative);
        }
    }
}

}  // namespace

Status gen_scan(const CollSpec &c, const AlgoChoice &a, Schedule &s) {
    const Red r{c.count, c.elem_size, c.commutative};
    const bool exclusive = c.coll == Coll::Exscan;
    if (a.algo != Algo::Chain && a.algo != Algo::Butterfly) return Status::Unsupported;
    if (r.count == 0) return Status::Ok;
    if (a.algo == Algo::Chain)
        chain(s, r, exclusive, c.in_place, seg_elems(a.seg_bytes, r.esize, r.count));
    else
        butterfly(s, r, exclusive, c.in_place);
    return Status::Ok;
}

}  // namespace gen
}  // namespace cdag
