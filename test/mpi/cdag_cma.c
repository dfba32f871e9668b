/*
 * cdag_cma: coll/cdag's single copy of large messages on the node
 * (coll_cdag_cma: above coll_cdag_ring_limit a descriptor goes through the
 * peer's ring, the receiver pulls with process_vm_readv and answers with a
 * FIN that completes the send).  On a communicator of the ranks of my node,
 * data checked every time, return codes of every call:
 *  - bcast from every root, gather, scatter, allgather, alltoall, reduce and
 *    allreduce at ring_limit + 1 B and 1 MiB + 3 B (odd: no alignment
 *    assumed), and a bcast of a strided datatype (packed by coll/cdag);
 *  - nonblocking broadcasts posted late (the non-roots sleep 50 ms first:
 *    the descriptors wait, held, until the receives come), several in
 *    flight at once, from a root that starts them all before any wait;
 *  - the same buffer broadcast twice with different contents (a FIN that
 *    completed the first send too early would let the second call's
 *    bytes be read by the first);
 *  - coll_cdag_cma_sent moved on every rank that sent a large message
 *    (MPITEST_EXPECT_CMA=1) or not at all (MPITEST_EXPECT_CMA=0, for
 *    coll_cdag_cma 0); coll_cdag_cma_resent stays 0 here (processes of one
 *    user may read each other's memory on this machine).
 *  - every collective at 4-16 KiB twice, with MPITEST_CDAG_MIXED_CMA=1 from
 *    ranks that chose single copy from 8 KiB and ranks that did not;
 *  - 8 KiB broadcasts from every root, three times: where tiny calls take
 *    the direct path, the later ones do too, by single copy from a root
 *    that chose it (coll_cdag_direct_runs, coll_cdag_cma_sent);
 *  - an allgatherv whose receive blocks all overlap (erroneous, but it
 *    must return: MPICH coll/allgatherv4 hung at 3-4 ranks);
 *  - MPITEST_EXPECT_CMA_MIN=N: coll_cdag_cma_min resolved to N (with
 *    mpi_yield_when_idle, which mpirun sets when oversubscribed, -1
 *    resolves to 0: rings up to their limit, whose sender need not wait
 *    for its receiver to get a core).
 * Skipped (passes) when coll/cdag is not the component in use.
 */
#include "mpitest.h"
#include "mpitest_mpit.h"

enum { P_CMA, P_RESENT, P_RUNS, P_DIRECT, P_N };
static const char *const pnames[P_N] = {"coll_cdag_cma_sent", "coll_cdag_cma_resent", "coll_cdag_runs",
                                        "coll_cdag_direct_runs"};
static pvar_t pv[P_N];

static void fill_int(int *p, size_t n, int who, int k)
{
    for (size_t i = 0; i < n; i++) p[i] = who * 1000003 + (int)i * 7 + k;
}

/* y holds the sum over np ranks of fill_int(.., rank, k) */
static void check_sum(const int *y, size_t ni, int np, int k, const char *what)
{
    for (size_t i = 0; i < ni; i++) {
        long want = 0;
        for (int p = 0; p < np; p++) want += p * 1000003L + (long)i * 7 + k;
        if (y[i] != (int)want) {
            CHECK(0, "%s %zu ints: element %zu is %d, want %d", what, ni, i, y[i], (int)want);
            return;
        }
    }
}

/* every large collective once on comm at n bytes (n a multiple of 4 for
 * the reductions: they use n / 4 ints) */
static void large_round(MPI_Comm comm, size_t n, int k)
{
    int r, np;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &np);
    char *buf = mt_malloc(n), *all = mt_malloc(n * (size_t)np), *all2 = mt_malloc(n * (size_t)np);
    for (int root = 0; root < np; root++) {
        if (r == root) mt_fill(buf, n, root, 21, k);
        else memset(buf, 0, n);
        CHECK_MPI(MPI_Bcast(buf, (int)n, MPI_BYTE, root, comm));
        CHECK_BUF(buf, n, root, 21, k, "bcast %zu B from %d", n, root);
    }
    /* gather to the last rank, scatter from rank 0 */
    mt_fill(buf, n, r, 22, k);
    memset(all, 0, n * (size_t)np);
    CHECK_MPI(MPI_Gather(buf, (int)n, MPI_BYTE, all, (int)n, MPI_BYTE, np - 1, comm));
    if (r == np - 1)
        for (int p = 0; p < np; p++) CHECK_BUF(all + (size_t)p * n, n, p, 22, k, "gather %zu B, block of %d", n, p);
    if (r == 0)
        for (int p = 0; p < np; p++) mt_fill(all + (size_t)p * n, n, p, 23, k);
    memset(buf, 0, n);
    CHECK_MPI(MPI_Scatter(all, (int)n, MPI_BYTE, buf, (int)n, MPI_BYTE, 0, comm));
    CHECK_BUF(buf, n, r, 23, k, "scatter %zu B to %d", n, r);
    mt_fill(buf, n, r, 24, k);
    memset(all, 0, n * (size_t)np);
    CHECK_MPI(MPI_Allgather(buf, (int)n, MPI_BYTE, all, (int)n, MPI_BYTE, comm));
    for (int p = 0; p < np; p++) CHECK_BUF(all + (size_t)p * n, n, p, 24, k, "allgather %zu B, block of %d", n, p);
    for (int p = 0; p < np; p++) mt_fill(all + (size_t)p * n, n, r * 64 + p, 25, k);
    memset(all2, 0, n * (size_t)np);
    CHECK_MPI(MPI_Alltoall(all, (int)n, MPI_BYTE, all2, (int)n, MPI_BYTE, comm));
    for (int p = 0; p < np; p++)
        CHECK_BUF(all2 + (size_t)p * n, n, p * 64 + r, 25, k, "alltoall %zu B, block from %d", n, p);
    size_t ni = n / sizeof(int);
    int *x = (int *)all, *y = (int *)all2;
    fill_int(x, ni, r, k);
    memset(y, 0, ni * sizeof(int));
    CHECK_MPI(MPI_Reduce(x, y, (int)ni, MPI_INT, MPI_SUM, 0, comm));
    if (r == 0) check_sum(y, ni, np, k, "reduce");
    memset(y, 0, ni * sizeof(int));
    CHECK_MPI(MPI_Allreduce(x, y, (int)ni, MPI_INT, MPI_SUM, comm));
    check_sum(y, ni, np, k, "allreduce");
    free(buf);
    free(all);
    free(all2);
}

int main(int argc, char **argv)
{
    int provided;
    /* MPITEST_CDAG_MIXED_CMA=1: odd ranks single-copy from 8 KiB, even ones
     * only above the ring limit, as under coll_cdag_cma_min -1 when the
     * processes measured CMA differently (a rank that took the direct path
     * waited forever for a ring message its peer sent as a descriptor) */
    const char *mixed = getenv("MPITEST_CDAG_MIXED_CMA"), *wrank = getenv("OMPI_COMM_WORLD_RANK");
    if (mixed && atoi(mixed) && wrank) setenv("OMPI_MCA_coll_cdag_cma_min", atoi(wrank) % 2 ? "8192" : "0", 1);
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "cdag_cma");
    for (int i = 0; i < P_N; i++) pvar_open(&pv[i], pnames[i]);
    long long limit = 0;
    if (!pv[P_CMA].ok || !pv[P_RUNS].ok || !cvar_int("coll_cdag_ring_limit", &limit)) {
        if (mt_rank == 0) printf("cdag_cma: coll/cdag's MPI_T variables are not there: nothing to check\n");
        for (int i = 0; i < P_N; i++) pvar_close(&pv[i]);
        MPI_T_finalize();
        return mt_finalize();
    }
    const char *e = getenv("MPITEST_EXPECT_CMA");
    int expect = e ? atoi(e) : -1;  /* -1: data only */
    const char *em = getenv("MPITEST_EXPECT_CMA_MIN");
    if (em) {
        mt_section("coll_cdag_cma_min as resolved at start-up");
        long long cmin = -2;
        int found = cvar_int("coll_cdag_cma_min", &cmin);
        CHECK(found && cmin == atoll(em), "coll_cdag_cma_min resolved to %lld, expected %s%s", cmin, em,
              found ? "" : " (the variable is not there)");
    }

    MPI_Comm node;
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    int lr, ln;
    MPI_Comm_rank(node, &lr);
    MPI_Comm_size(node, &ln);
    unsigned long a[P_N], b[P_N];
    for (int i = 0; i < P_N; i++) a[i] = pvar_read(&pv[i]);

    size_t above = ((size_t)limit + 4) & ~(size_t)3;  /* the first multiple of 4 above the limit */
    mt_section("mid sizes, each twice (the second call may take the direct path)");
    {
        static const size_t mid[] = {4096, 8192, 12288, 16384};
        for (size_t i = 0; i < sizeof(mid) / sizeof(mid[0]); i++)
            if (mid[i] <= (size_t)limit)
                for (int twice = 0; twice < 2; twice++) large_round(node, mid[i], 10 + (int)i);
    }
    mt_section("8 KiB broadcasts on the direct path, by single copy where the root chose it");
    /* Where tiny blocking calls take the direct path (inline progress, no
     * throttling), an 8 KiB broadcast's later calls take it too, and a
     * root that single-copies from 8 KiB (coll_cdag_cma_min, resolved)
     * sends its messages as descriptors there; its receivers take a
     * descriptor or a ring message alike (MPITEST_CDAG_MIXED_CMA).
     * Before, a direct run took no descriptor: every 8-16 KiB call went
     * to the executor. */
    {
        const size_t n = 8192;
        long long cmin = -2, dlim = 0;
        cvar_int("coll_cdag_cma_min", &cmin);
        cvar_int("coll_cdag_direct_limit", &dlim);
        char *b = mt_malloc(n);
        unsigned long d0 = pvar_read(&pv[P_DIRECT]);
        for (int k = 0; k < 3; k++) CHECK_MPI(MPI_Bcast(b, 8, MPI_BYTE, 0, node));
        int tiny_direct = pvar_read(&pv[P_DIRECT]) - d0 >= 2;
        if (mt_verbose)
            printf("[rank %d] single copy from %lld, direct limit %lld, tiny calls %sdirect\n", mt_rank, cmin, dlim,
                   tiny_direct ? "" : "not ");
        for (int root = 0; root < ln; root++) {
            for (int k = 0; k < 3; k++) {
                unsigned long dr = pvar_read(&pv[P_DIRECT]), cs = pvar_read(&pv[P_CMA]);
                if (lr == root) mt_fill(b, n, root, 29, k);
                else memset(b, 0, n);
                CHECK_MPI(MPI_Bcast(b, (int)n, MPI_BYTE, root, node));
                CHECK_BUF(b, n, root, 29, k, "8 KiB bcast %d from %d", k, root);
                if (k == 0 || expect != 1 || !tiny_direct || dlim < (long long)n || ln < 2) continue;
                CHECK(pvar_read(&pv[P_DIRECT]) - dr == 1, "8 KiB bcast %d from %d did not take the direct path", k,
                      root);
                if (lr == root && cmin > 0 && cmin <= (long long)n)
                    CHECK(pvar_read(&pv[P_CMA]) - cs >= 1,
                          "8 KiB bcast %d: root %d (single copy from %lld) sent no descriptor", k, root, cmin);
            }
        }
        free(b);
    }
    mt_section("every large collective just above the ring limit");
    large_round(node, above, 1);
    mt_section("every large collective at 1 MiB + 4");
    large_round(node, 1048576 + 4, 2);

    mt_section("a strided datatype broadcast (packed)");
    {
        enum { BLK = 1024 };
        int count = (int)(2 * above / BLK) + 1;
        MPI_Datatype vec;
        CHECK_MPI(MPI_Type_vector(count, BLK, 2 * BLK, MPI_BYTE, &vec));
        CHECK_MPI(MPI_Type_commit(&vec));
        size_t span = (size_t)count * 2 * BLK;
        char *v = mt_malloc(span), *want = mt_malloc(span);
        mt_fill(want, span, 0, 26, 0);
        if (lr == 0) memcpy(v, want, span);
        else memset(v, 0, span);
        CHECK_MPI(MPI_Bcast(v, 1, vec, 0, node));
        for (int i = 0; i < count; i++) {
            size_t off = (size_t)i * 2 * BLK;
            CHECK(memcmp(v + off, want + off, BLK) == 0, "strided bcast: block %d differs", i);
            if (lr != 0) {
                int gap_clean = 1;
                for (size_t j = off + BLK; j < off + 2 * BLK; j++) gap_clean &= v[j] == 0;
                CHECK(gap_clean, "strided bcast: the gap after block %d was written", i);
            }
        }
        CHECK_MPI(MPI_Type_free(&vec));
        free(v);
        free(want);
    }

    mt_section("nonblocking broadcasts posted late (descriptors held)");
    {
        enum { K = 4 };
        const size_t n = 524288 + 12;
        char *bufs = mt_malloc((size_t)K * n);
        MPI_Request rq[K];
        CHECK_MPI(MPI_Barrier(node));
        if (lr != 0) mt_sleep_ms(50);
        for (int k = 0; k < K; k++) {
            char *p = bufs + (size_t)k * n;
            if (lr == 0) mt_fill(p, n, 0, 27, k);
            else memset(p, 0, n);
            CHECK_MPI(MPI_Ibcast(p, (int)n, MPI_BYTE, 0, node, &rq[k]));
        }
        MPI_Status st[K];
        CHECK_MPI(MPI_Waitall(K, rq, st));
        for (int k = 0; k < K; k++) CHECK_BUF(bufs + (size_t)k * n, n, 0, 27, k, "late ibcast %d", k);
        free(bufs);
    }

    mt_section("one buffer broadcast twice, contents changed in between");
    {
        const size_t n = 262144 + 8;
        char *p = mt_malloc(n);
        for (int k = 0; k < 2; k++) {
            if (lr == 0) mt_fill(p, n, 0, 28, k);
            else memset(p, 0, n);
            CHECK_MPI(MPI_Bcast(p, (int)n, MPI_BYTE, 0, node));
            CHECK_BUF(p, n, 0, 28, k, "bcast %d of the same buffer", k);
        }
        free(p);
    }

    mt_section("allgatherv into overlapping receive blocks (erroneous): every rank returns");
    /* MPICH coll/allgatherv4's BELL_CURVE step, reduced: every block at
     * displacement 0, each above the ring limit.  MPI calls a receive
     * layout that writes a byte twice erroneous, and the buffer's contents
     * are undefined then, but coll tuned returns; at 3 or more ranks cdag
     * hung: a rank forwards a block from its receive buffer, the next
     * receive into the same bytes waits for that send (write after read),
     * and a single-copy send completes only when its receiver, waiting the
     * same way, has posted its receive: a cycle around the ring. */
    {
        const size_t n = above + 8;
        int *rc = mt_malloc((size_t)ln * sizeof(int)), *dp = mt_malloc((size_t)ln * sizeof(int));
        for (int p = 0; p < ln; p++) {
            rc[p] = (int)(n + 4 * (size_t)p);
            dp[p] = 0;
        }
        char *s = mt_malloc(n + 4 * (size_t)ln), *rb = mt_malloc(n + 4 * (size_t)ln);
        for (int k = 0; k < 2; k++) {
            mt_fill(s, (size_t)rc[lr], lr, 30, k);
            CHECK_MPI(MPI_Allgatherv(s, rc[lr], MPI_BYTE, rb, rc, dp, MPI_BYTE, node));
        }
        free(rc);
        free(dp);
        free(s);
        free(rb);
    }
    CHECK_MPI(MPI_Barrier(node));

    for (int i = 0; i < P_N; i++) b[i] = pvar_read(&pv[i]);
    if (b[P_RUNS] != a[P_RUNS] && ln > 1 && (size_t)limit < above) {
        unsigned long cma = b[P_CMA] - a[P_CMA], resent = pv[P_RESENT].ok ? b[P_RESENT] - a[P_RESENT] : 0;
        if (mt_verbose) printf("[rank %d] %lu single-copy messages, %lu sent again by UCX\n", mt_rank, cma, resent);
        if (expect == 1) {
            CHECK(cma > 0, "no large message went by single copy (coll_cdag_cma_sent did not move)");
            CHECK(resent == 0, "%lu single-copy messages were refused by their receivers", resent);
        } else if (expect == 0) {
            CHECK(cma == 0, "%lu messages by single copy with coll_cdag_cma 0", cma);
        }
    }
    MPI_Comm_free(&node);
    for (int i = 0; i < P_N; i++) pvar_close(&pv[i]);
    MPI_T_finalize();
    return mt_finalize();
}
