/*
 * coll_cdag_eager: coll/cdag sends schedule messages up to
 * coll_cdag_eager_limit bytes as UCX eager active messages (past UCX's own
 * rendezvous threshold, about 8 KiB on shared memory), larger ones by
 * rendezvous.  Broadcasts and allreduces at sizes around both thresholds
 * (4 KiB, 8 KiB+1, 16 KiB, limit-1, limit, limit+1, 4 x limit+3), each
 * with every rank as the root, the data checked; the MPI_T counter
 * coll_cdag_rendezvous (receives pulled by rendezvous) must not move on
 * any rank for a broadcast whose size is at most the limit, and at 2 ranks
 * (one whole message, no segments) it must move for a size above both the
 * limit and 8256 B (and, with coll/cdag's rings on, above
 * coll_cdag_ring_limit: smaller ones to a peer on the node take the ring).
 * With coll_cdag_eager_limit 0 (UCX decides) the second check holds from
 * 16 KiB.
 *
 * Skipped (passes) when coll/cdag is not the component in use.
 */
#include "mpitest.h"
#include "mpitest_mpit.h"

static int rank, size;
static pvar_t rndv, runs, cma;
/* messages up to this size to a peer on the node go through coll/cdag's
 * rings, not UCX (0: rings off) */
static long long ring_limit = 0;

/* UCX 1.13's rendezvous threshold on shared memory (ucx-1.13 notes) */
#define UCX_SHM_RNDV 8256L

/* messages above the ring limit to a peer on the node go by single copy
 * (coll_cdag_cma) rather than UCX's rendezvous */
static unsigned long total_cma(void)
{
    unsigned long mine = pvar_read(&cma), all = 0;
    CHECK_MPI(MPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD));
    return all;
}

static unsigned long total_rndv(void)
{
    unsigned long mine = pvar_read(&rndv), all = 0;
    CHECK_MPI(MPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD));
    return all;
}

static void one_size(long n, long limit, unsigned char *buf, long *iv, long *ov)
{
    char sec[96];
    snprintf(sec, sizeof sec, "bcast/allreduce %ld B, eager limit %ld", n, limit);
    mt_section(sec);
    unsigned long r0 = total_rndv(), c0 = pvar_read(&runs), cma0 = total_cma();
    for (int root = 0; root < size; root++) {
        if (rank == root) mt_fill(buf, (size_t)n, root, 7, (int)n);
        else memset(buf, 0, (size_t)n);
        CHECK_MPI(MPI_Bcast(buf, (int)n, MPI_BYTE, root, MPI_COMM_WORLD));
        CHECK_BUF(buf, (size_t)n, root, 7, (int)n, "%s, root %d", sec, root);
    }
    unsigned long r1 = total_rndv(), c1 = pvar_read(&runs);
    if (c1 == c0) return; /* not run by coll/cdag (fallback or another component) */
    if (limit > 0 && n <= limit)
        CHECK(r1 == r0, "%s: %lu rendezvous receives for messages within the eager limit", sec, r1 - r0);
    if (size == 2 && n > limit && n > UCX_SHM_RNDV && n > ring_limit)
        CHECK(r1 > r0 || total_cma() > cma0, "%s: no rendezvous (nor single copy) for a message above the eager limit",
              sec);

    long cnt = n / (long)sizeof(long);
    for (long i = 0; i < cnt; i++) iv[i] = (long)(rank + 1) * (i % 1000 + 1) + n;
    CHECK_MPI(MPI_Allreduce(iv, ov, (int)cnt, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    for (long i = 0; i < cnt; i++) {
        long want = (long)size * (size + 1) / 2 * (i % 1000 + 1) + (long)size * n;
        if (ov[i] != want) {
            CHECK(0, "%s: allreduce element %ld is %ld, want %ld", sec, i, ov[i], want);
            break;
        }
    }
}

int main(int argc, char **argv)
{
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "coll_cdag_eager");
    rank = mt_rank;
    size = mt_size;
    long long limit = -1;
    pvar_open(&rndv, "coll_cdag_rendezvous");
    pvar_open(&runs, "coll_cdag_runs");
    pvar_open(&cma, "coll_cdag_cma_sent");
    long long ring_on = 0;
    if (cvar_int("coll_cdag_ring", &ring_on) && ring_on) (void)cvar_int("coll_cdag_ring_limit", &ring_limit);
    if (cvar_int("coll_cdag_eager_limit", &limit) && rndv.ok && runs.ok) {
        long sizes[] = {4096, 8193, 16384, (long)limit - 1, (long)limit, (long)limit + 1, 4 * (long)limit + 3};
        long max = 4 * (long)limit + 3 > 16384 ? 4 * (long)limit + 3 : 16384;
        unsigned char *buf = mt_malloc((size_t)max);
        long *iv = mt_malloc((size_t)max + sizeof(long)), *ov = mt_malloc((size_t)max + sizeof(long));
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
            if (sizes[k] > 0) one_size(sizes[k], (long)limit, buf, iv, ov);
        free(buf);
        free(iv);
        free(ov);
    } else if (rank == 0) {
        printf("coll_cdag_eager: coll/cdag's MPI_T variables are not there: nothing to check\n");
    }
    MPI_T_pvar_session_free(&rndv.s);
    MPI_T_pvar_session_free(&runs.s);
    MPI_T_finalize();
    return mt_finalize();
}
