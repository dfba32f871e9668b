/*
 * Barrier: zero-byte messages, so every ordering is an explicit edge.
 * A rank sends in round i only after it heard in round i-1 and after its
 * round i-1 send (which itself waited for round i-2, and so on): the
 * message of round i must vouch for everything this rank heard before.
 */
#include "cdag_gen.h"

namespace cdag {
namespace gen {

namespace {

/* Round i: signal rank + 2^i, hear from rank - 2^i; any p, ceil(log2 p)
 * rounds. */
void dissemination(Schedule &s) {
    const int p = s.size(), me = s.rank();
    VertexId heard = kNoVertex, said = kNoVertex;
    for (int i = 0, d = 1; d < p; ++i, d *= 2) {
        said = s.send((me + d) % p, i, Buf{}, {heard, said});
        heard = s.recv((me - d + p) % p, i, Buf{});
    }
}

/* Pairwise exchanges with rank ^ 2^i on the folded power of two; the
 * ranks folded away check in with their partner first and are released
 * by it last. */
void butterfly(Schedule &s) {
    const int p = s.size(), me = s.rank();
    const Fold f(p);
    const int steps = ceil_log2(f.p2);
    if (f.excluded(me)) {
        s.send(me + 1, 0, Buf{});
        s.recv(me + 1, 1 + steps, Buf{});
        return;
    }
    VertexId heard = kNoVertex, said = kNoVertex;
    if (me < 2 * f.rem) heard = s.recv(me - 1, 0, Buf{});
    const int n = f.newrank(me);
    for (int i = 0; i < steps; ++i) {
        const int peer = f.real(n ^ (1 << i));
        said = s.send(peer, 1 + i, Buf{}, {heard, said});
        heard = s.recv(peer, 1 + i, Buf{});
    }
    if (me < 2 * f.rem) s.send(me - 1, 1 + steps, Buf{}, {heard, said});
}

/* Fan-in to rank 0, fan-out from it (coll/tuned's choice for 4-7 ranks):
 * rank 0 releases everybody once it heard from all, and so is the first
 * to leave.  With more ranks than cores every round of dissemination or
 * butterfly needs each rank to get the core again; here only rank 0 waits
 * for more than one message. */
void linear(Schedule &s) {
    const int p = s.size(), me = s.rank();
    if (me != 0) {
        const VertexId said = s.send(0, 0, Buf{});
        s.recv(0, 1, Buf{}, {said});
        return;
    }
    const VertexId all = s.nop();
    for (int r = 1; r < p; ++r) s.edge(s.recv(r, 0, Buf{}), all);
    for (int r = 1; r < p; ++r) s.send(r, 1, Buf{}, {all});
}

}  // namespace

Status gen_barrier(const CollSpec &c, const AlgoChoice &a, Schedule &s) {
    if (c.size == 1) return Status::Ok;
    switch (a.algo) {
    case Algo::Dissemination: dissemination(s); return Status::Ok;
    case Algo::Butterfly: butterfly(s); return Status::Ok;
    case Algo::Linear: linear(s); return Status::Ok;
    default: return Status::Unsupported;
    }
}

}  // namespace gen
}  // namespace cdag
