/*
 * cdag_direct: coll/cdag's direct path (coll_cdag_direct.cc): a tiny
 * blocking collective whose every message goes through a shared-memory
 * ring runs with no op and no executor, with the same messages.  Checked,
 * the data every time:
 *  - tiny bcast, reduce, gather, scatter, barrier, allreduce, allgather,
 *    alltoall at every root, called three times each (the first call of a
 *    shape compiles its plan on the executor path): with
 *    MPITEST_EXPECT_DIRECT=1, coll_cdag_direct_runs moved by at least the
 *    repeated calls;
 *  - direct calls interleaved with nonblocking collectives in flight on
 *    the same communicator (started before, waited after), with
 *    MPI_IN_PLACE at the root and the arguments MPI ignores off the root
 *    (NULL buffers, other counts and types);
 *  - the lean path (no request; a loop of one call reuses the last call's
 *    spec and buffer offsets, coll_cdag_run.c run_lean): one shape with
 *    the buffers moving from call to call, MPI_IN_PLACE toggled, counts
 *    changed, a contiguous derived type, then a strided one made after
 *    that type was freed (it may get its address: it must be staged, not
 *    taken for the old layout; a memo that kept derived types fails here),
 *    the memoized call again after more shapes than the direct table
 *    holds went through it, and an 8 KiB bcast (under the default
 *    limit of 16 KiB);
 *  - a message of the direct limit + 1 does not take the path;
 *  - MPITEST_DIRECT_MIXED=1: odd ranks set coll_cdag_direct_limit 0 before
 *    MPI_Init, so every call runs direct on the even ranks against the
 *    executor on the odd ones (their messages must match both ways); the
 *    odd ranks' counter stays 0.
 * Skipped (passes) when coll/cdag's MPI_T variables are not there.
 */
#include "mpitest.h"
#include "mpitest_mpit.h"

static int rank, size;
static pvar_t direct;

/* every collective once, tiny, data checked; root varies with it */
static void tiny_round(MPI_Comm comm, int it, int root)
{
    char b[64], g[64 * 8], s[64 * 8];
    int iv[5], ov[5];
    memset(b, 0, sizeof b);
    if (rank == root) mt_fill(b, 13, root, 1, it);
    CHECK_MPI(MPI_Bcast(b, 13, MPI_BYTE, root, comm));
    CHECK_BUF(b, 13, root, 1, it, "bcast 13 B from %d, call %d", root, it);

    for (int i = 0; i < 5; i++) iv[i] = rank * 10 + i + it;
    memset(ov, 0, sizeof ov);
    CHECK_MPI(MPI_Reduce(iv, rank == root ? ov : NULL, 5, MPI_INT, MPI_SUM, root, comm));
    if (rank == root)
        for (int i = 0; i < 5; i++)
            CHECK(ov[i] == 10 * size * (size - 1) / 2 + size * (i + it), "reduce at %d: element %d is %d", root, i, ov[i]);

    mt_fill(b, 8, rank, 2, it);
    memset(g, 0, sizeof g);
    CHECK_MPI(MPI_Gather(b, 8, MPI_BYTE, rank == root ? g : NULL, rank == root ? 8 : -5,
                         rank == root ? MPI_BYTE : MPI_DOUBLE, root, comm));
    if (rank == root)
        for (int r = 0; r < size; r++) CHECK_BUF(g + 8 * r, 8, r, 2, it, "gather at %d: block of %d", root, r);

    if (rank == root)
        for (int r = 0; r < size; r++) mt_fill(s + 8 * r, 8, r, 3, it);
    memset(b, 0, sizeof b);
    CHECK_MPI(MPI_Scatter(rank == root ? s : NULL, rank == root ? 8 : -1, rank == root ? MPI_BYTE : MPI_INT, b, 8,
                          MPI_BYTE, root, comm));
    CHECK_BUF(b, 8, rank, 3, it, "scatter from %d", root);

    CHECK_MPI(MPI_Barrier(comm));

    int x = rank + it, sum = -1;
    CHECK_MPI(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, comm));
    CHECK(sum == size * (size - 1) / 2 + size * it, "allreduce %d", sum);

    mt_fill(b, 4, rank, 4, it);
    CHECK_MPI(MPI_Allgather(b, 4, MPI_BYTE, g, 4, MPI_BYTE, comm));
    for (int r = 0; r < size; r++) CHECK_BUF(g + 4 * r, 4, r, 4, it, "allgather: block of %d", r);

    for (int r = 0; r < size; r++) mt_fill(s + 4 * r, 4, rank * 100 + r, 5, it);
    CHECK_MPI(MPI_Alltoall(s, 4, MPI_BYTE, g, 4, MPI_BYTE, comm));
    for (int r = 0; r < size; r++) CHECK_BUF(g + 4 * r, 4, r * 100 + rank, 5, it, "alltoall: block from %d", r);
}

/* direct calls with nonblocking ones of the same communicator in flight,
 * and MPI_IN_PLACE at the root */
static void interleaved(MPI_Comm comm, int it)
{
    int root = it % size;
    char nb[32], d[32], g[32 * 8];
    long nv = rank + 1, nsum = 0;
    MPI_Request rq[3];
    memset(nb, 0, sizeof nb);
    if (rank == (root + 1) % size) mt_fill(nb, 32, root, 6, it);
    CHECK_MPI(MPI_Ibcast(nb, 32, MPI_BYTE, (root + 1) % size, comm, &rq[0]));
    CHECK_MPI(MPI_Iallreduce(&nv, &nsum, 1, MPI_LONG, MPI_SUM, comm, &rq[1]));

    /* reduce in place at the root, recvbuf ignored elsewhere */
    int v[3] = {rank, 2 * rank, it};
    CHECK_MPI(MPI_Reduce(rank == root ? MPI_IN_PLACE : v, rank == root ? v : NULL, 3, MPI_INT, MPI_MAX, root, comm));
    if (rank == root) CHECK(v[0] == size - 1 && v[1] == 2 * (size - 1) && v[2] == it, "reduce in place: %d %d %d", v[0], v[1], v[2]);

    CHECK_MPI(MPI_Ibarrier(comm, &rq[2]));

    /* gather in place at the root */
    memset(g, 0, sizeof g);
    if (rank == root) mt_fill(g + 16 * root, 16, root, 7, it);
    else mt_fill(d, 16, rank, 7, it);
    CHECK_MPI(MPI_Gather(rank == root ? MPI_IN_PLACE : d, 16, MPI_BYTE, g, 16, MPI_BYTE, root, comm));
    if (rank == root)
        for (int r = 0; r < size; r++) CHECK_BUF(g + 16 * r, 16, r, 7, it, "gather in place: block of %d", r);

    /* scatter in place at the root (its block stays) */
    if (rank == root)
        for (int r = 0; r < size; r++) mt_fill(g + 16 * r, 16, r, 8, it);
    memset(d, 0, sizeof d);
    CHECK_MPI(MPI_Scatter(g, 16, MPI_BYTE, rank == root ? MPI_IN_PLACE : d, 16, MPI_BYTE, root, comm));
    if (rank == root) CHECK_BUF(g + 16 * root, 16, root, 8, it, "scatter in place: own block");
    else CHECK_BUF(d, 16, rank, 8, it, "scatter in place from %d", root);

    mt_fill(d, 8, root, 9, it);
    if (rank != root) memset(d, 0, 8);
    CHECK_MPI(MPI_Bcast(d, 8, MPI_BYTE, root, comm));
    CHECK_BUF(d, 8, root, 9, it, "bcast among nonblocking ones");

    MPI_Status st[3];
    CHECK_MPI(MPI_Waitall(3, rq, st));
    CHECK_BUF(nb, 32, root, 6, it, "ibcast from %d", (root + 1) % size);
    CHECK(nsum == (long)size * (size + 1) / 2, "iallreduce %ld", nsum);
}

/* a step that alternates collectives (bcast, allreduce, barrier, gather),
 * data checked: each keeps its own memo */
static void alternating_round(MPI_Comm comm, int it)
{
    char b[8], g[8 * 64];
    int v = rank + it, sum = 0;
    if (rank == 0) mt_fill(b, sizeof b, 0, 30, it);
    else memset(b, 0, sizeof b);
    CHECK_MPI(MPI_Bcast(b, (int)sizeof b, MPI_BYTE, 0, comm));
    CHECK_BUF(b, sizeof b, 0, 30, it, "alternating bcast %d", it);
    CHECK_MPI(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, comm));
    CHECK(sum == size * (size - 1) / 2 + size * it, "alternating allreduce %d: %d", it, sum);
    CHECK_MPI(MPI_Barrier(comm));
    mt_fill(b, 4, rank, 31, it);
    CHECK_MPI(MPI_Gather(b, 4, MPI_BYTE, g, 4, MPI_BYTE, 0, comm));
    if (rank == 0)
        for (int r = 0; r < size; r++) CHECK_BUF(g + 4 * r, 4, r, 31, it, "alternating gather %d from %d", it, r);
}

/* the lean path's memo must follow every argument but the buffers' addresses */
static void lean_round(MPI_Comm comm, int it)
{
    int root = it % size;
    long buf[4][8];
    for (int k = 0; k < 4; k++) {  /* one shape, the buffer moves */
        long *b = buf[(k + it) % 4] + (k % 2);
        for (int i = 0; i < 4; i++) b[i] = rank == root ? 1000 * root + 10 * k + i + it : -1;
        CHECK_MPI(MPI_Bcast(b, 4, MPI_LONG, root, comm));
        for (int i = 0; i < 4; i++) CHECK(b[i] == 1000 * root + 10 * k + i + it, "lean bcast %d: [%d] %ld", k, i, b[i]);
    }
    for (int k = 0; k < 4; k++) {  /* in place toggled, same counts and types */
        long v[3] = {rank, rank + k, it}, out[3] = {-1, -1, -1};
        int inplace = rank == root && k % 2;
        CHECK_MPI(MPI_Reduce(inplace ? MPI_IN_PLACE : v, rank == root ? (inplace ? v : out) : NULL, 3, MPI_LONG,
                             MPI_SUM, root, comm));
        long *r = inplace ? v : out;
        if (rank == root)
            for (int i = 0; i < 3; i++) {
                long want = i == 0 ? (long)size * (size - 1) / 2 : i == 1 ? (long)size * (size - 1) / 2 + (long)size * k : (long)size * it;
                CHECK(r[i] == want, "lean reduce %d (in place %d): [%d] %ld, want %ld", k, inplace, i, r[i], want);
            }
    }
    for (int n = 1; n <= 3; n++) {  /* counts change */
        int mine[3] = {rank, rank + 1, rank + 2}, all[3 * 8];
        memset(all, 0xff, sizeof all);
        CHECK_MPI(MPI_Gather(mine, n, MPI_INT, all, n, MPI_INT, root, comm));
        if (rank == root)
            for (int r = 0; r < size; r++)
                for (int i = 0; i < n; i++) CHECK(all[r * n + i] == r + i, "lean gather of %d: rank %d [%d] %d", n, r, i, all[r * n + i]);
    }
    /* a contiguous derived type (lean, not kept), freed; then a strided
     * one (an int with the extent of two), which malloc likely puts at
     * the freed type's address: staged, never taken for the old layout */
    for (int k = 0; k < 3; k++) {
        MPI_Datatype pair, spaced;
        int d[8];
        CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &pair));
        CHECK_MPI(MPI_Type_commit(&pair));
        for (int i = 0; i < 8; i++) d[i] = rank == root ? 100 * it + i : -1;
        CHECK_MPI(MPI_Bcast(d, 2, pair, root, comm));
        for (int i = 0; i < 4; i++) CHECK(d[i] == 100 * it + i, "lean bcast of a pair type: [%d] %d", i, d[i]);
        CHECK_MPI(MPI_Type_free(&pair));
        CHECK_MPI(MPI_Type_create_resized(MPI_INT, 0, 2 * sizeof(int), &spaced));
        CHECK_MPI(MPI_Type_commit(&spaced));
        for (int i = 0; i < 8; i++) d[i] = rank == root ? 100 * it + i : -1;
        CHECK_MPI(MPI_Bcast(d, 2, spaced, root, comm));
        for (int i = 0; i < 8; i++) {
            int want = (rank == root || i == 0 || i == 2) ? 100 * it + i : -1;
            CHECK(d[i] == want, "bcast of a spaced type: [%d] %d, want %d", i, d[i], want);
        }
        CHECK_MPI(MPI_Type_free(&spaced));
    }
    /* the memo's direct plan after its table entry got another shape:
     * a memoized bcast, then more shapes than the table holds (8) by calls
     * that are not memoized (a derived type), each twice (the first
     * compiles), then the memoized bcast again */
    long a[16];  /* 4 sent, the rest a guard: a plan of another size shows */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < 16; i++) a[i] = i >= 4 ? 1000 * rank + i : rank == root ? 50 * pass + i + it : -1;
        CHECK_MPI(MPI_Bcast(a, 4, MPI_LONG, root, comm));
        for (int i = 0; i < 16; i++)
            CHECK(a[i] == (i >= 4 ? 1000 * rank + i : 50 * pass + i + it), "memoized bcast, pass %d: [%d] %ld", pass, i, a[i]);
        if (pass) break;
        MPI_Datatype two;
        int e[2 * 20];
        CHECK_MPI(MPI_Type_contiguous(2, MPI_INT, &two));
        CHECK_MPI(MPI_Type_commit(&two));
        for (int n = 1; n <= 20; n++) {
            if (n == 4) continue;  /* 32 B: the memoized call's shape */
            for (int rep = 0; rep < 2; rep++) {
                for (int i = 0; i < 2 * n; i++) e[i] = rank == root ? 7 * n + i : -1;
                CHECK_MPI(MPI_Bcast(e, n, two, root, comm));
                for (int i = 0; i < 2 * n; i++) CHECK(e[i] == 7 * n + i, "bcast of %d pairs: [%d] %d", n, i, e[i]);
            }
        }
        CHECK_MPI(MPI_Type_free(&two));
    }
    char *big = mt_malloc(8192);
    if (rank == root) mt_fill(big, 8192, root, 11, it);
    else memset(big, 0, 8192);
    CHECK_MPI(MPI_Bcast(big, 8192, MPI_BYTE, root, comm));
    CHECK_BUF(big, 8192, root, 11, it, "bcast of 8 KiB from %d", root);
    free(big);
}

int main(int argc, char **argv)
{
    const char *wr = getenv("OMPI_COMM_WORLD_RANK");
    int mixed = getenv("MPITEST_DIRECT_MIXED") && atoi(getenv("MPITEST_DIRECT_MIXED"));
    if (mixed && wr && atoi(wr) % 2 == 1) setenv("OMPI_MCA_coll_cdag_direct_limit", "0", 1);
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "cdag_direct");
    rank = mt_rank;
    size = mt_size;
    pvar_t runs;
    pvar_open(&runs, "coll_cdag_runs");
    if (!runs.ok) {
        if (rank == 0) printf("cdag_direct: coll/cdag's MPI_T variables are not there: nothing to check\n");
        MPI_T_finalize();
        return mt_finalize();
    }
    pvar_close(&runs);
    pvar_open(&direct, "coll_cdag_direct_runs");
    CHECK(direct.ok, "coll/cdag without its MPI_T variable coll_cdag_direct_runs");
    int expect = getenv("MPITEST_EXPECT_DIRECT") && atoi(getenv("MPITEST_EXPECT_DIRECT"));
    long long limit = 0;
    (void)cvar_int("coll_cdag_direct_limit", &limit);

    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    mt_section("tiny collectives, three calls of each shape");
    unsigned long before = pvar_read(&direct);
    for (int it = 0; it < 3; it++)
        for (int root = 0; root < size; root++) tiny_round(comm, it, root);
    unsigned long moved = pvar_read(&direct) - before;
    /* per root: bcast, reduce, gather, scatter; per round: barrier,
     * allreduce, allgather, alltoall; the first round compiles */
    unsigned long repeated = 2ul * (4ul * (unsigned long)size + 4ul);
    if (mixed && rank % 2 == 1) CHECK(moved == 0, "odd rank (direct limit 0) ran %lu direct", moved);
    else if (expect) CHECK(moved >= repeated, "direct runs moved by %lu, want >= %lu", moved, repeated);

    mt_section("direct calls among nonblocking ones, in place");
    before = pvar_read(&direct);
    for (int it = 0; it < 4 * size; it++) interleaved(comm, it);
    moved = pvar_read(&direct) - before;
    if (expect && !(mixed && rank % 2 == 1)) CHECK(moved > 0, "no direct run among nonblocking collectives");

    mt_section("lean path: one shape, the other arguments change");
    before = pvar_read(&direct);
    for (int it = 0; it < 2 * size; it++) lean_round(comm, it);
    moved = pvar_read(&direct) - before;
    if (expect && !(mixed && rank % 2 == 1)) CHECK(moved > 0, "no direct run in the lean rounds");

    mt_section("lean path: alternating collectives keep their memos");
    /* one memo per collective: after the first rounds every call of the
     * loop finds its decisions (a single memo for the module's last call
     * was never hit by a loop of different collectives) */
    {
        pvar_t hits;
        pvar_open(&hits, "coll_cdag_lean_memo_hits");
        CHECK(hits.ok, "coll/cdag without its MPI_T variable coll_cdag_lean_memo_hits");
        enum { ROUNDS = 12 };
        for (int it = 0; it < 2; it++) alternating_round(comm, it);
        unsigned long h0 = hits.ok ? pvar_read(&hits) : 0, d0 = pvar_read(&direct);
        for (int it = 2; it < ROUNDS; it++) alternating_round(comm, it);
        unsigned long dh = hits.ok ? pvar_read(&hits) - h0 : 0, dd = pvar_read(&direct) - d0;
        if (expect && !(mixed && rank % 2 == 1))
            CHECK(dd >= 4ul * (ROUNDS - 2) && dh >= 4ul * (ROUNDS - 2),
                  "alternating bcast/allreduce/barrier/gather: %lu direct runs, %lu memo hits in %d rounds "
                  "(want 4 per round)", dd, dh, ROUNDS - 2);
        if (hits.ok) pvar_close(&hits);
    }

    mt_section("above the direct limit");
    /* every rank calls it, at the largest limit of any rank: under
     * MPITEST_DIRECT_MIXED the odd ranks' own limit is 0, and skipping the
     * section there left the others' broadcast without its receivers (it
     * only passed while the sends completed into the rings unreceived) */
    long long any_limit = limit;
    CHECK_MPI(MPI_Allreduce(&limit, &any_limit, 1, MPI_LONG_LONG, MPI_MAX, comm));
    limit = any_limit;
    if (limit > 0 && limit < 1 << 20) {
        char *big = mt_malloc((size_t)limit + 1);
        for (int it = 0; it < 3; it++) {
            if (rank == 0) mt_fill(big, (size_t)limit + 1, 0, 10, it);
            else memset(big, 0, (size_t)limit + 1);
            before = pvar_read(&direct);
            CHECK_MPI(MPI_Bcast(big, (int)limit + 1, MPI_BYTE, 0, comm));
            CHECK(pvar_read(&direct) == before, "a bcast of the limit + 1 (%lld B) ran direct", limit + 1);
            CHECK_BUF(big, (size_t)limit + 1, 0, 10, it, "bcast of the limit + 1");
        }
        free(big);
    }
    MPI_Comm_free(&comm);
    pvar_close(&direct);
    MPI_T_finalize();
    return mt_finalize();
}
