/*
 * coll_cdag_alloc: repeated and persistent collectives allocate nothing
 * once warm.  coll/cdag counts every heap allocation it makes for a call
 * (requests, schedules, executors, per-message contexts, map nodes,
 * buffers for early arrivals, staging) in the MPI_T variable
 * coll_cdag_allocations; after a few warm-up calls of each kind, 50 more
 * calls of the same kind must not move it.  Kinds: blocking allreduce
 * (8 B, 64 KiB), bcast (1 KiB, 1 MiB), allgather, alltoall, barrier,
 * reduce_scatter with equal counts;
 * reduce, gather, scatter, scan, exscan, reduce_scatter_block;
 * nonblocking iallreduce, ibcast, ialltoall, iallgather (under the
 * engine thread their own-block copy runs there); persistent allreduce,
 * bcast, alltoall and allgather (MPIX_*_init) started repeatedly.
 * Results are checked too.
 *
 * Messages that arrive before their receive are held in pools that grow
 * to the high-water mark of how far peers run ahead (a timing matter,
 * counted apart in coll_cdag_early_allocations, printed with
 * MPITEST_VERBOSE=1).
 *
 * Skipped (passes) when coll/cdag is not the component in use (the
 * variable does not exist, or no collective ran through it).
 */
#include "mpitest.h"
#include "mpitest_mpit.h"

#include <mpi-ext.h>

static int rank, size;
static int *sb, *rb;
static unsigned char *bb, *ba;
static pvar_t allocs, runs, early;

typedef void (*call_fn)(long bytes, int iter);

static void check_sum(long n, int iter, const char *what)
{
    for (long i = 0; i < n; i++) {
        long want = 0;
        for (int r = 0; r < size; r++) want += (r + 1) * (i % 17 + 1) + iter;
        if (rb[i] != (int)want) {
            CHECK(0, "%s: element %ld is %d, expected %ld", what, i, rb[i], want);
            return;
        }
    }
}

static void fill_sum(long n, int iter)
{
    for (long i = 0; i < n; i++) sb[i] = (rank + 1) * (int)(i % 17 + 1) + iter;
}

static void c_allreduce(long bytes, int iter)
{
    long n = bytes / (long)sizeof(int);
    fill_sum(n, iter);
    CHECK_MPI(MPI_Allreduce(sb, rb, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    check_sum(n, iter, "allreduce");
}

static void c_iallreduce(long bytes, int iter)
{
    long n = bytes / (long)sizeof(int);
    MPI_Request rq;
    fill_sum(n, iter);
    CHECK_MPI(MPI_Iallreduce(sb, rb, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq));
    CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    check_sum(n, iter, "iallreduce");
}

static void c_bcast(long bytes, int iter)
{
    if (rank == iter % size) mt_fill(bb, (size_t)bytes, 0, 1, iter);
    CHECK_MPI(MPI_Bcast(bb, (int)bytes, MPI_BYTE, iter % size, MPI_COMM_WORLD));
    CHECK_BUF(bb, (size_t)bytes, 0, 1, iter, "bcast %ld B", bytes);
}

static void c_ibcast(long bytes, int iter)
{
    MPI_Request rq;
    if (rank == 0) mt_fill(bb, (size_t)bytes, 0, 2, iter);
    CHECK_MPI(MPI_Ibcast(bb, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD, &rq));
    CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK_BUF(bb, (size_t)bytes, 0, 2, iter, "ibcast %ld B", bytes);
}

static void c_allgather(long bytes, int iter)
{
    mt_fill(bb, (size_t)bytes, rank, 3, iter);
    CHECK_MPI(MPI_Allgather(bb, (int)bytes, MPI_BYTE, ba, (int)bytes, MPI_BYTE, MPI_COMM_WORLD));
    for (int j = 0; j < size; j++)
        CHECK_BUF(ba + (size_t)j * (size_t)bytes, (size_t)bytes, j, 3, iter, "allgather from %d", j);
}

static void c_alltoall(long bytes, int iter)
{
    for (int j = 0; j < size; j++) mt_fill(bb + (size_t)j * (size_t)bytes, (size_t)bytes, rank, j, iter);
    CHECK_MPI(MPI_Alltoall(bb, (int)bytes, MPI_BYTE, ba, (int)bytes, MPI_BYTE, MPI_COMM_WORLD));
    for (int j = 0; j < size; j++)
        CHECK_BUF(ba + (size_t)j * (size_t)bytes, (size_t)bytes, j, rank, iter, "alltoall from %d", j);
}

static void c_ialltoall(long bytes, int iter)
{
    MPI_Request rq;
    for (int j = 0; j < size; j++) mt_fill(bb + (size_t)j * (size_t)bytes, (size_t)bytes, rank, j, iter);
    CHECK_MPI(MPI_Ialltoall(bb, (int)bytes, MPI_BYTE, ba, (int)bytes, MPI_BYTE, MPI_COMM_WORLD, &rq));
    CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    for (int j = 0; j < size; j++)
        CHECK_BUF(ba + (size_t)j * (size_t)bytes, (size_t)bytes, j, rank, iter, "ialltoall from %d", j);
}

static void c_iallgather(long bytes, int iter)
{
    MPI_Request rq;
    mt_fill(bb, (size_t)bytes, rank, 4, iter);
    CHECK_MPI(MPI_Iallgather(bb, (int)bytes, MPI_BYTE, ba, (int)bytes, MPI_BYTE, MPI_COMM_WORLD, &rq));
    CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    for (int j = 0; j < size; j++)
        CHECK_BUF(ba + (size_t)j * (size_t)bytes, (size_t)bytes, j, 4, iter, "iallgather from %d", j);
}

static void c_reduce(long bytes, int iter)
{
    long n = bytes / (long)sizeof(int);
    fill_sum(n, iter);
    CHECK_MPI(MPI_Reduce(sb, rb, (int)n, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD));
    if (rank == 0) check_sum(n, iter, "reduce");
}

static void c_gather(long bytes, int iter)
{
    mt_fill(bb, (size_t)bytes, rank, 5, iter);
    CHECK_MPI(MPI_Gather(bb, (int)bytes, MPI_BYTE, ba, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD));
    if (rank == 0)
        for (int j = 0; j < size; j++)
            CHECK_BUF(ba + (size_t)j * (size_t)bytes, (size_t)bytes, j, 5, iter, "gather from %d", j);
}

static void c_scatter(long bytes, int iter)
{
    if (rank == 0)
        for (int j = 0; j < size; j++) mt_fill(bb + (size_t)j * (size_t)bytes, (size_t)bytes, 0, j, iter);
    CHECK_MPI(MPI_Scatter(bb, (int)bytes, MPI_BYTE, ba, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD));
    CHECK_BUF(ba, (size_t)bytes, 0, rank, iter, "scatter");
}

/* scan (exclusive: exscan) of fill_sum's values over ranks 0..rank */
static void c_scan_or_exscan(long bytes, int iter, int exclusive)
{
    long n = bytes / (long)sizeof(int);
    fill_sum(n, iter);
    if (exclusive) CHECK_MPI(MPI_Exscan(sb, rb, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    else CHECK_MPI(MPI_Scan(sb, rb, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    if (exclusive && rank == 0) return;  /* undefined there */
    int upto = exclusive ? rank - 1 : rank;
    for (long i = 0; i < n; i++) {
        long want = 0;
        for (int r = 0; r <= upto; r++) want += (r + 1) * (i % 17 + 1) + iter;
        if (rb[i] != (int)want) {
            CHECK(0, "%s: element %ld is %d, expected %ld", exclusive ? "exscan" : "scan", i, rb[i], want);
            return;
        }
    }
}

static void c_scan(long bytes, int iter) { c_scan_or_exscan(bytes, iter, 0); }
static void c_exscan(long bytes, int iter) { c_scan_or_exscan(bytes, iter, 1); }

static void c_reduce_scatter_block(long bytes, int iter)
{
    long n = bytes / (long)sizeof(int);
    fill_sum(n * size, iter);
    CHECK_MPI(MPI_Reduce_scatter_block(sb, rb, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    for (long i = 0; i < n; i++) {
        long g = (long)rank * n + i, want = 0;
        for (int r = 0; r < size; r++) want += (r + 1) * (g % 17 + 1) + iter;
        if (rb[i] != (int)want) {
            CHECK(0, "reduce_scatter_block: element %ld is %d, expected %ld", i, rb[i], want);
            return;
        }
    }
}

/* One persistent request started 54 times: the last 50 starts allocate
 * nothing.  init makes the request; start_fill refills its input. */
typedef void (*fill_fn)(long bytes, int iter);
typedef void (*check_fn)(long bytes, int iter);

static void p_fill_allreduce(long bytes, int iter) { fill_sum(bytes / (long)sizeof(int), iter); }
static void p_check_allreduce(long bytes, int iter) { check_sum(bytes / (long)sizeof(int), iter, "persistent allreduce"); }
static void p_fill_bcast(long bytes, int iter) { if (rank == 0) mt_fill(bb, (size_t)bytes, 0, 6, iter); }
static void p_check_bcast(long bytes, int iter) { CHECK_BUF(bb, (size_t)bytes, 0, 6, iter, "persistent bcast"); }
static void p_fill_alltoall(long bytes, int iter)
{
    for (int j = 0; j < size; j++) mt_fill(bb + (size_t)j * (size_t)bytes, (size_t)bytes, rank, j, iter);
}
static void p_check_alltoall(long bytes, int iter)
{
    for (int j = 0; j < size; j++)
        CHECK_BUF(ba + (size_t)j * (size_t)bytes, (size_t)bytes, j, rank, iter, "persistent alltoall from %d", j);
}
static void p_fill_allgather(long bytes, int iter) { mt_fill(bb, (size_t)bytes, rank, 7, iter); }
static void p_check_allgather(long bytes, int iter)
{
    for (int j = 0; j < size; j++)
        CHECK_BUF(ba + (size_t)j * (size_t)bytes, (size_t)bytes, j, 7, iter, "persistent allgather from %d", j);
}

static void persistent(const char *what, MPI_Request *rq, long bytes, fill_fn fill, check_fn check)
{
    char sec[96];
    snprintf(sec, sizeof sec, "persistent %s %ld B", what, bytes);
    mt_section(sec);
    unsigned long a0 = 0, r0 = 0;
    for (int i = 0; i < 54; i++) {
        if (i == 4) {
            a0 = pvar_read(&allocs);
            r0 = pvar_read(&runs);
        }
        fill(bytes, i);
        CHECK_MPI(MPI_Start(rq));
        CHECK_MPI(MPI_Wait(rq, MPI_STATUS_IGNORE));
        check(bytes, i);
    }
    if (pvar_read(&runs) != r0)
        CHECK(pvar_read(&allocs) == a0, "%s: %lu allocations in 50 starts", sec, pvar_read(&allocs) - a0);
    CHECK_MPI(MPI_Request_free(rq));
}

/* equal counts: coll/cdag runs it as reduce_scatter_block, whose plan is
 * cached (a v-form call would compile its schedule every time) */
static void c_reduce_scatter(long bytes, int iter)
{
    long n = bytes / (long)sizeof(int);
    int counts[64];
    for (int j = 0; j < size; j++) counts[j] = (int)n;
    fill_sum(n * size, iter);
    CHECK_MPI(MPI_Reduce_scatter(sb, rb, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    for (long i = 0; i < n; i++) {
        long g = (long)rank * n + i, want = 0;
        for (int r = 0; r < size; r++) want += (r + 1) * (g % 17 + 1) + iter;
        if (rb[i] != (int)want) {
            CHECK(0, "reduce_scatter: element %ld is %d, expected %ld", i, rb[i], want);
            return;
        }
    }
}

static void c_barrier(long bytes, int iter)
{
    (void)bytes;
    (void)iter;
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* warm up, then 50 calls: the allocation counter must stay */
static void steady(const char *what, call_fn fn, long bytes)
{
    char sec[96];
    snprintf(sec, sizeof sec, "%s %ld B", what, bytes);
    mt_section(sec);
    int warm = 2 * size > 4 ? 2 * size : 4;  /* every root (bcast rotates it) twice */
    for (int i = 0; i < warm; i++) fn(bytes, i);
    unsigned long a0 = pvar_read(&allocs), r0 = pvar_read(&runs);
    for (int i = warm; i < warm + 50; i++) fn(bytes, i);
    unsigned long a1 = pvar_read(&allocs), r1 = pvar_read(&runs);
    if (r1 == r0) return;  /* not run by coll/cdag here (fallback) */
    CHECK(a1 == a0, "%s: %lu allocations in 50 repeated calls after warm-up", sec, a1 - a0);
    if (mt_verbose) printf("[rank %d] %s: early-arrival allocations so far %lu\n", rank, sec, pvar_read(&early));
}

int main(int argc, char **argv)
{
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "coll_cdag_alloc");
    rank = mt_rank;
    size = mt_size;
    pvar_open(&allocs, "coll_cdag_allocations");
    pvar_open(&runs, "coll_cdag_runs");
    pvar_open(&early, "coll_cdag_early_allocations");
    if (allocs.ok && runs.ok) {
        size_t cap = (size_t)1048576 * (size_t)size;
        sb = mt_malloc(65536);
        rb = mt_malloc(65536);
        bb = mt_malloc(cap);
        ba = mt_malloc(cap);
        steady("allreduce", c_allreduce, 8);
        steady("allreduce", c_allreduce, 65536);
        steady("bcast", c_bcast, 1024);
        steady("bcast", c_bcast, 1048576);
        steady("allgather", c_allgather, 64);
        steady("alltoall", c_alltoall, 65536);
        steady("barrier", c_barrier, 0);
        if (size <= 64) {
            steady("reduce_scatter", c_reduce_scatter, 16);
            steady("reduce_scatter", c_reduce_scatter, 65536 / size / 4 * 4);
        }
        steady("reduce", c_reduce, 4096);
        steady("gather", c_gather, 1024);
        steady("scatter", c_scatter, 1024);
        steady("scan", c_scan, 4096);
        steady("exscan", c_exscan, 4096);
        if (size <= 64) steady("reduce_scatter_block", c_reduce_scatter_block, 65536 / size / 4 * 4);
        steady("iallreduce", c_iallreduce, 4096);
        steady("ibcast", c_ibcast, 65536);
        steady("ialltoall", c_ialltoall, 65536);
        steady("iallgather", c_iallgather, 65536);
        steady("iallgather", c_iallgather, 1048576);
        {
            MPI_Request prq;
            long pb = 65536;
            CHECK_MPI(MPIX_Bcast_init(bb, (int)pb, MPI_BYTE, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &prq));
            persistent("bcast", &prq, pb, p_fill_bcast, p_check_bcast);
            CHECK_MPI(MPIX_Alltoall_init(bb, (int)pb, MPI_BYTE, ba, (int)pb, MPI_BYTE, MPI_COMM_WORLD,
                                         MPI_INFO_NULL, &prq));
            persistent("alltoall", &prq, pb, p_fill_alltoall, p_check_alltoall);
            CHECK_MPI(MPIX_Allgather_init(bb, (int)pb, MPI_BYTE, ba, (int)pb, MPI_BYTE, MPI_COMM_WORLD,
                                          MPI_INFO_NULL, &prq));
            persistent("allgather", &prq, pb, p_fill_allgather, p_check_allgather);
        }

        {
            MPI_Request prq;
            long pb = 4096;
            CHECK_MPI(MPIX_Allreduce_init(sb, rb, (int)(pb / (long)sizeof(int)), MPI_INT, MPI_SUM, MPI_COMM_WORLD,
                                          MPI_INFO_NULL, &prq));
            persistent("allreduce", &prq, pb, p_fill_allreduce, p_check_allreduce);
        }
        free(sb);
        free(rb);
        free(bb);
        free(ba);
    } else if (rank == 0) {
        printf("coll_cdag_alloc: coll/cdag's MPI_T variables are not there: nothing to check\n");
    }
    MPI_T_pvar_session_free(&allocs.s);
    MPI_T_pvar_session_free(&runs.s);
    MPI_T_pvar_session_free(&early.s);
    MPI_T_finalize();
    return mt_finalize();
}
