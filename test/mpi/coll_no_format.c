/*
 * coll_no_format: with verbosity off, repeated collectives format no
 * strings (the collective counterpart of p2p_no_format: a debug line whose
 * arguments are formatted before its level is checked costs an snprintf a
 * call).  After a warm-up in which every schedule is compiled and every
 * connection made, a counted stretch of blocking and nonblocking
 * collectives, small and 64 KiB, results checked; the snprintf family is
 * counted in every thread of the process (mpitest_format.h).  Allowed: one
 * call per 64 collectives.
 *
 * mpitest-cflags: -rdynamic
 */
#define _GNU_SOURCE
#include "mpitest.h"
#include "mpitest_format.h"

enum { ROUNDS = 100, BIGN = 16384 };

static int round_of_collectives(int r, int *big, int *out)
{
    const int n = mt_size, me = mt_rank, root = r % n;
    long v = me + r, sum = 0;
    CHECK_MPI(MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    CHECK_EQ(sum, (long)n * (n - 1) / 2 + (long)n * r, "allreduce, round %d", r);

    int b = me == root ? 1000 + r : -1;
    CHECK_MPI(MPI_Bcast(&b, 1, MPI_INT, root, MPI_COMM_WORLD));
    CHECK_EQ(b, 1000 + r, "bcast from %d, round %d", root, r);

    int mine = me * 7 + r;
    CHECK_MPI(MPI_Allgather(&mine, 1, MPI_INT, out, 1, MPI_INT, MPI_COMM_WORLD));
    for (int i = 0; i < n; ++i) CHECK_EQ(out[i], i * 7 + r, "allgather from %d, round %d", i, r);

    for (int i = 0; i < BIGN; ++i) big[i] = me + i + r;
    MPI_Request req;
    CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, big, BIGN, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req));
    CHECK_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    for (int i = 0; i < BIGN; i += 997)
        CHECK_EQ(big[i], n * (n - 1) / 2 + n * (i + r), "iallreduce of 64 KiB, element %d, round %d", i, r);

    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    return 5;
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "coll_no_format");
    mt_format_check_bound();
    int *big = mt_malloc(sizeof(int) * BIGN);
    int *out = mt_malloc(sizeof(int) * (size_t)mt_size);

    mt_section("warm-up: schedules compiled, connections made");
    for (int r = 0; r < mt_size + 2; ++r) round_of_collectives(r, big, out);

    mt_section("counted: repeated collectives");
    long ops = 0;
    mt_format_count_start();
    for (int r = 0; r < ROUNDS; ++r) ops += round_of_collectives(r, big, out);
    mt_format_check(mt_format_count_stop(), ops, "collectives");

    free(big);
    free(out);
    return mt_finalize();
}
