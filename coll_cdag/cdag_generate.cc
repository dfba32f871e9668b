/*
 * generate(): argument checks and dispatch to the generator families.
 */
#include "cdag_gen.h"

namespace cdag {

namespace {

bool rooted(Coll c) {
    return c == Coll::Bcast || c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter ||
           c == Coll::Gatherv || c == Coll::Scatterv;
}

bool reduction(Coll c) {
    return c == Coll::Reduce || c == Coll::Allreduce || c == Coll::ReduceScatterBlock ||
           c == Coll::ReduceScatter || c == Coll::Scan || c == Coll::Exscan;
}

/* What each collective needs from the spec on this rank. */
bool args_ok(const CollSpec &c) {
    if (c.size < 1 || c.rank < 0 || c.rank >= c.size) return false;
    if (rooted(c.coll) && (c.root < 0 || c.root >= c.size)) return false;
    if (reduction(c.coll) && c.elem_size == 0) return false;
    const bool at_root = c.rank == c.root;
    switch (c.coll) {
    case Coll::ReduceScatter: return c.counts != nullptr;
    case Coll::Gatherv:
    case Coll::Scatterv: return !at_root || (c.counts && c.displs);
    case Coll::Allgatherv: return c.counts && c.displs;
    case Coll::Alltoallv: return c.rcounts && c.rdispls && (c.in_place || (c.counts && c.displs));
    default: return true;
    }
}

}  // namespace

namespace {

/* MPI_IN_PLACE means something only at the root of rooted collectives. */
CollSpec normalized(const CollSpec &spec) {
    CollSpec c = spec;
    if (rooted(c.coll) && c.rank != c.root) c.in_place = false;
    if (c.coll == Coll::Bcast) c.in_place = false;
    return c;
}

}  // namespace

AlgoChoice effective_choice(const CollSpec &spec, const AlgoChoice &choice) {
    return choice.algo == Algo::Auto ? select(normalized(spec)) : choice;
}

Status generate(const CollSpec &spec, const AlgoChoice &choice, Schedule *out) {
    *out = Schedule(spec.rank, spec.size);
    if (!args_ok(spec)) return Status::BadArgs;
    const CollSpec c = normalized(spec);
    const AlgoChoice a = effective_choice(c, choice);

    Status st = Status::Unsupported;
    switch (c.coll) {
    case Coll::Barrier: st = gen::gen_barrier(c, a, *out); break;
    case Coll::Bcast: st = gen::gen_bcast(c, a, *out); break;
    case Coll::Reduce: st = gen::gen_reduce(c, a, *out); break;
    case Coll::Allreduce: st = gen::gen_allreduce(c, a, *out); break;
    case Coll::Gather: st = gen::gen_gather(c, a, *out); break;
    case Coll::Scatter: st = gen::gen_scatter(c, a, *out); break;
    case Coll::Gatherv: st = gen::gen_gatherv(c, a, *out); break;
    case Coll::Scatterv: st = gen::gen_scatterv(c, a, *out); break;
    case Coll::Allgather:
    case Coll::Allgatherv: st = gen::gen_allgather(c, a, *out); break;
    case Coll::Alltoall:
    case Coll::Alltoallv: st = gen::gen_alltoall(c, a, *out); break;
    case Coll::ReduceScatterBlock:
    case Coll::ReduceScatter: st = gen::gen_reduce_scatter(c, a, *out); break;
    case Coll::Scan:
    case Coll::Exscan: st = gen::gen_scan(c, a, *out); break;
    }
    if (st != Status::Ok) *out = Schedule(spec.rank, spec.size);
    return st;
}

const char *coll_name(Coll c) {
    switch (c) {
    case Coll::Barrier: return "Barrier";
    case Coll::Bcast: return "Bcast";
    case Coll::Reduce: return "Reduce";
    case Coll::Allreduce: return "Allreduce";
    case Coll::Gather: return "Gather";
    case Coll::Scatter: return "Scatter";
    case Coll::Allgather: return "Allgather";
    case Coll::Alltoall: return "Alltoall";
    case Coll::ReduceScatterBlock: return "ReduceScatterBlock";
    case Coll::ReduceScatter: return "ReduceScatter";
    case Coll::Scan: return "Scan";
    case Coll::Exscan: return "Exscan";
    case Coll::Gatherv: return "Gatherv";
    case Coll::Scatterv: return "Scatterv";
    case Coll::Allgatherv: return "Allgatherv";
    case Coll::Alltoallv: return "Alltoallv";
    }
    return "?";
}

const char *algo_name(Algo a) {
    switch (a) {
    case Algo::Auto: return "Auto";
    case Algo::Linear: return "Linear";
    case Algo::Chain: return "Chain";
    case Algo::KaryTree: return "KaryTree";
    case Algo::KnomialTree: return "KnomialTree";
    case Algo::Butterfly: return "Butterfly";
    case Algo::Dissemination: return "Dissemination";
    case Algo::Ring: return "Ring";
    case Algo::ReduceBcast: return "ReduceBcast";
    case Algo::ReduceThenScatter: return "ReduceThenScatter";
    case Algo::Pairwise: return "Pairwise";
    }
    return "?";
}

}  // namespace cdag
