/*
 * p2p_comms: point-to-point across communicators.
 *  - MPI_Comm_dup: the same (source, tag) on COMM_WORLD and two dups never
 *    crosses (posted and unexpected, also with ANY_SOURCE/ANY_TAG receives);
 *  - MPI_Comm_split (reversed key order, so communicator ranks differ from
 *    world ranks) and MPI_Comm_create from a reordered group: status
 *    MPI_SOURCE is the rank in that communicator; singleton communicators
 *    (MPI_COMM_SELF and split pieces of size 1) send to themselves;
 *  - MPI_Comm_free after completed traffic, dup/free in a loop (context ids
 *    reused) with the data of each generation checked; 48 communicators alive
 *    at once, sent to in reverse creation order; 400 communicators alive
 *    (context ids beyond 8 bits) with no aliasing between ids 128/256 apart;
 *  - inter-communicator (MPI_Intercomm_create between even and odd world
 *    ranks): pt2pt to every remote rank, MPI_SOURCE is the remote rank,
 *    ANY_SOURCE, large messages, a dup of the intercommunicator, and
 *    MPI_Intercomm_merge then pt2pt on the merged communicator.
 */
#include "mpitest.h"

static int rank, size;
static char *sbuf, *rbuf;

/* ring exchange of n bytes on comm; pattern includes `gen` */
static void ring(MPI_Comm comm, int n, int tag, int gen, const char *what)
{
    int r, s, left, right;
    MPI_Request rq[2];
    MPI_Status st[2];
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &s);
    left = (r - 1 + s) % s;
    right = (r + 1) % s;
    mt_fill(sbuf, n, r, tag, gen);
    memset(rbuf, 0xA5, n);
    CHECK_MPI(MPI_Irecv(rbuf, n, MPI_BYTE, left, tag, comm, &rq[0]));
    CHECK_MPI(MPI_Isend(sbuf, n, MPI_BYTE, right, tag, comm, &rq[1]));
    CHECK_MPI(MPI_Waitall(2, rq, st));
    CHECK_STATUS(&st[0], left, tag, n, "%s: ring on a communicator of size %d", what, s);
    CHECK_BUF(rbuf, n, left, tag, gen, "%s: ring", what);
}

/* same (src, tag) on world, dup1 and dup2 */
static void test_dup_isolation(void)
{
    MPI_Comm c[3];
    static const int sz[3] = {100, 1048576, 4097};
    int left = (rank - 1 + size) % size, right = (rank + 1) % size;
    mt_section("dup: same (src,tag) on different communicators");
    c[0] = MPI_COMM_WORLD;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c[1]));
    CHECK_MPI(MPI_Comm_dup(c[1], &c[2]));
    for (int unexpected = 0; unexpected < 2; unexpected++) {
        for (int wild = 0; wild < 2; wild++) {
            MPI_Request rr[3], sr[3];
            MPI_Status st[3];
            char *rb[3], *sb[3];
            int tag = 5 + wild + 2 * unexpected;
            for (int k = 0; k < 3; k++) {
                rb[k] = mt_malloc(1048576);
                sb[k] = mt_malloc(sz[k]);
                /* size and pattern tell which communicator it came from */
                mt_fill(sb[k], sz[k], rank, tag, 10 + k);
            }
            if (!unexpected) {
                for (int k = 2; k >= 0; k--)
                    CHECK_MPI(MPI_Irecv(rb[k], 1048576, MPI_BYTE, wild ? MPI_ANY_SOURCE : left,
                                        wild ? MPI_ANY_TAG : tag, c[k], &rr[k]));
                CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            }
            for (int k = 0; k < 3; k++) /* send order world, dup1, dup2 */
                CHECK_MPI(MPI_Isend(sb[k], sz[k], MPI_BYTE, right, tag, c[k], &sr[k]));
            if (unexpected) {
                CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
                for (int k = 2; k >= 0; k--) /* receive order dup2, dup1, world */
                    CHECK_MPI(MPI_Irecv(rb[k], 1048576, MPI_BYTE, wild ? MPI_ANY_SOURCE : left,
                                        wild ? MPI_ANY_TAG : tag, c[k], &rr[k]));
            }
            CHECK_MPI(MPI_Waitall(3, rr, st));
            for (int k = 0; k < 3; k++) {
                CHECK_STATUS(&st[k], left, tag, sz[k], "communicator #%d (unexpected %d, wildcard %d)",
                             k, unexpected, wild);
                CHECK_BUF(rb[k], sz[k], left, tag, 10 + k, "communicator #%d", k);
            }
            CHECK_MPI(MPI_Waitall(3, sr, MPI_STATUSES_IGNORE));
            for (int k = 0; k < 3; k++) {
                free(rb[k]);
                free(sb[k]);
            }
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        }
    }
    /* a probe on one communicator does not see messages of another */
    {
        int flag = 1;
        MPI_Status st;
        char c1 = 1;
        CHECK_MPI(MPI_Send(&c1, 1, MPI_CHAR, right, 9, c[1]));
        CHECK_MPI(MPI_Probe(left, 9, c[1], &st));
        CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c[2], &flag, &st));
        CHECK(!flag, "Iprobe on dup2 sees a message sent on dup1");
        CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &flag, &st));
        CHECK(!flag, "Iprobe on world sees a message sent on dup1");
        CHECK_MPI(MPI_Recv(&c1, 1, MPI_CHAR, left, 9, c[1], &st));
    }
    CHECK_MPI(MPI_Comm_free(&c[2]));
    CHECK_MPI(MPI_Comm_free(&c[1]));
    CHECK(c[1] == MPI_COMM_NULL, "Comm_free sets MPI_COMM_NULL");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

static void test_split_create(void)
{
    MPI_Comm sub, cr, half;
    MPI_Group wg, rg;
    int srank, ssize, *ranks;
    mt_section("Comm_split / Comm_create: ranks are communicator ranks");
    /* two colors, key reverses the order */
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &sub));
    MPI_Comm_rank(sub, &srank);
    MPI_Comm_size(sub, &ssize);
    CHECK_EQ(ssize, (size + 1 - rank % 2) / 2, "split size");
    {
        /* members of my color in reversed world order */
        int pos = 0;
        for (int w = size - 1; w >= 0; w--)
            if (w % 2 == rank % 2) {
                if (w == rank)
                    CHECK_EQ(srank, pos, "split rank of world rank %d", rank);
                pos++;
            }
    }
    ring(sub, 65537, 3, 0, "split");
    ring(sub, 10, 4, 1, "split small");
    {
        /* everyone in sub sends its world rank to sub-rank 0 */
        if (srank == 0) {
            for (int k = 1; k < ssize; k++) {
                int v = -1;
                MPI_Status st;
                CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 6, sub, &st));
                CHECK(st.MPI_SOURCE >= 1 && st.MPI_SOURCE < ssize, "split ANY_SOURCE rank %d",
                      st.MPI_SOURCE);
                /* sub-rank q of my color has world rank: the q-th in reversed order */
                {
                    int pos = 0, want = -1;
                    for (int w = size - 1; w >= 0; w--)
                        if (w % 2 == rank % 2) {
                            if (pos == st.MPI_SOURCE)
                                want = w;
                            pos++;
                        }
                    CHECK_EQ(v, want, "MPI_SOURCE %d must be a rank in the split communicator",
                             st.MPI_SOURCE);
                }
            }
        } else {
            CHECK_MPI(MPI_Send(&rank, 1, MPI_INT, 0, 6, sub));
        }
    }
    /* MPI_UNDEFINED color */
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 1, 0, &half));
    if (rank == 0)
        CHECK(half == MPI_COMM_NULL, "MPI_UNDEFINED color gives MPI_COMM_NULL");
    else {
        ring(half, 1000, 7, 2, "split without rank 0");
        CHECK_MPI(MPI_Comm_free(&half));
    }
    /* Comm_create from the world group in reverse order */
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    ranks = mt_malloc(sizeof(int) * size);
    for (int k = 0; k < size; k++)
        ranks[k] = size - 1 - k;
    MPI_Group_incl(wg, size, ranks, &rg);
    CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, rg, &cr));
    {
        int crank = -1;
        MPI_Comm_rank(cr, &crank);
        CHECK_EQ(crank, size - 1 - rank, "rank in the reversed communicator");
        ring(cr, 262144, 8, 3, "reversed Comm_create");
    }
    MPI_Group_free(&rg);
    MPI_Group_free(&wg);
    free(ranks);
    CHECK_MPI(MPI_Comm_free(&cr));
    CHECK_MPI(MPI_Comm_free(&sub));

    mt_section("singleton communicators");
    ring(MPI_COMM_SELF, 100, 1, 4, "COMM_SELF");
    ring(MPI_COMM_SELF, 1048576, 2, 5, "COMM_SELF large");
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank, 0, &sub));
    ring(sub, 65537, 3, 6, "singleton split");
    CHECK_MPI(MPI_Comm_free(&sub));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

static void test_dup_free_loop(void)
{
    mt_section("dup/free loop");
    for (int gen = 0; gen < 60; gen++) {
        MPI_Comm c;
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
        ring(c, gen % 5 == 4 ? 70000 : 64, 0, gen, "dup/free generation");
        CHECK_MPI(MPI_Comm_free(&c));
    }

    mt_section("48 communicators alive at once");
    {
        enum { NC = 48 };
        MPI_Comm c[NC];
        MPI_Request rr[NC], sr[NC];
        MPI_Status st[NC];
        char *rb = mt_malloc(NC * 200), *sb = mt_malloc(NC * 200);
        int left = (rank - 1 + size) % size, right = (rank + 1) % size;
        for (int k = 0; k < NC; k++)
            CHECK_MPI(MPI_Comm_dup(k % 2 ? c[k - 1] : MPI_COMM_WORLD, &c[k]));
        for (int k = 0; k < NC; k++)
            CHECK_MPI(MPI_Irecv(rb + 200 * k, 200, MPI_BYTE, left, 0, c[k], &rr[k]));
        for (int k = NC - 1; k >= 0; k--) {
            mt_fill(sb + 200 * k, 100 + k, rank, 0, k);
            CHECK_MPI(MPI_Isend(sb + 200 * k, 100 + k, MPI_BYTE, right, 0, c[k], &sr[k]));
        }
        CHECK_MPI(MPI_Waitall(NC, rr, st));
        for (int k = 0; k < NC; k++) {
            CHECK_STATUS(&st[k], left, 0, 100 + k, "communicator #%d of %d", k, NC);
            CHECK_BUF(rb + 200 * k, 100 + k, left, 0, k, "communicator #%d", k);
        }
        CHECK_MPI(MPI_Waitall(NC, sr, MPI_STATUSES_IGNORE));
        for (int k = NC - 1; k >= 0; k--)
            CHECK_MPI(MPI_Comm_free(&c[k]));
        free(rb);
        free(sb);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

static void test_intercomm(void)
{
    MPI_Comm local, inter, inter2, merged;
    int color = rank % 2, lrank, lsize, rsize, remote_leader = color ? 0 : 1, flag = 0;
    static const int sz[3] = {0, 8193, 1048576 + 5};
    mt_section("intercommunicator pt2pt");
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, rank, &local));
    MPI_Comm_rank(local, &lrank);
    MPI_Comm_size(local, &lsize);
    CHECK_MPI(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, remote_leader, 77, &inter));
    MPI_Comm_test_inter(inter, &flag);
    CHECK(flag, "MPI_Comm_test_inter");
    MPI_Comm_remote_size(inter, &rsize);
    CHECK_EQ(rsize, color ? (size + 1) / 2 : size / 2, "remote size");
    for (int rep = 0; rep < 2; rep++) {
        MPI_Comm ic = inter;
        if (rep == 1)
            CHECK_MPI(MPI_Comm_dup(inter, &inter2)), ic = inter2;
        for (int i = 0; i < 3; i++) {
            int n = sz[i], tag = 20 + i;
            MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * rsize);
            char *sb = mt_malloc(n);
            mt_fill(sb, n, lrank + 1000 * color, tag, rep);
            /* send to every remote rank; receive from every remote rank with
             * ANY_SOURCE (odd i) or in order */
            for (int r = 0; r < rsize; r++)
                CHECK_MPI(MPI_Isend(sb, n, MPI_BYTE, r, tag, ic, &rq[r]));
            {
                int *got = mt_malloc(sizeof(int) * rsize);
                memset(got, 0, sizeof(int) * rsize);
                for (int r = 0; r < rsize; r++) {
                    MPI_Status st;
                    int src = (i % 2) ? MPI_ANY_SOURCE : r, s;
                    CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, src, tag, ic, &st));
                    s = st.MPI_SOURCE;
                    if (!CHECK(s >= 0 && s < rsize, "intercomm MPI_SOURCE %d (remote size %d)",
                               s, rsize))
                        continue;
                    got[s]++;
                    CHECK_STATUS(&st, (i % 2) ? s : r, tag, n, "intercomm size %d", n);
                    /* remote rank s of the other color */
                    CHECK_BUF(rbuf, n, s + 1000 * (1 - color), tag, rep,
                              "intercomm data from remote rank %d", s);
                }
                for (int r = 0; r < rsize; r++)
                    CHECK_EQ(got[r], 1, "intercomm messages from remote rank %d", r);
                free(got);
            }
            CHECK_MPI(MPI_Waitall(rsize, rq, MPI_STATUSES_IGNORE));
            free(rq);
            free(sb);
        }
        if (rep == 1)
            CHECK_MPI(MPI_Comm_free(&inter2));
    }

    mt_section("Intercomm_merge");
    CHECK_MPI(MPI_Intercomm_merge(inter, color, &merged));
    {
        int mrank, msize;
        MPI_Comm_rank(merged, &mrank);
        MPI_Comm_size(merged, &msize);
        CHECK_EQ(msize, size, "merged size");
        CHECK_EQ(mrank, color ? (size + 1) / 2 + lrank : lrank, "merged rank (low group first)");
        ring(merged, 65537, 30, 7, "merged intercommunicator");
    }
    CHECK_MPI(MPI_Comm_free(&merged));
    CHECK_MPI(MPI_Comm_free(&inter));
    CHECK_MPI(MPI_Comm_free(&local));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* enough communicators alive at once that context ids exceed 8 bits:
 * messages on communicators whose ids differ by 128 or 256 must not alias */
static void test_many_cids(void)
{
    enum { NC = 400 };
    static const int pairs[][2] = {{0, 256}, {10, 266}, {100, 228}, {143, 399}, {255, 256},
                                   {3, 131}, {200, 328}};
    MPI_Comm *c = mt_malloc(sizeof(MPI_Comm) * NC);
    int left = (rank - 1 + size) % size, right = (rank + 1) % size;
    mt_section("400 communicators alive: no aliasing of context ids");
    for (int k = 0; k < NC; k++)
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c[k]));
    for (int p = 0; p < (int)(sizeof(pairs) / sizeof(pairs[0])); p++) {
        int a = pairs[p][0], b = pairs[p][1];
        int na = 64 + p, nb = (p % 2) ? 100000 + p : 300 + p; /* sizes identify the comm */
        char *ra = mt_malloc(na), *rb = mt_malloc(nb), *sa = mt_malloc(na), *sb = mt_malloc(nb);
        MPI_Request rq[4];
        MPI_Status st[4];
        mt_fill(sa, na, rank, a, 1);
        mt_fill(sb, nb, rank, b, 2);
        /* unexpected on b, posted on a */
        CHECK_MPI(MPI_Irecv(ra, na, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, c[a], &rq[0]));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Isend(sb, nb, MPI_BYTE, right, 0, c[b], &rq[2]));
        CHECK_MPI(MPI_Isend(sa, na, MPI_BYTE, right, 0, c[a], &rq[3]));
        CHECK_MPI(MPI_Wait(&rq[0], &st[0]));
        CHECK_MPI(MPI_Recv(rb, nb, MPI_BYTE, left, 0, c[b], &st[1]));
        CHECK_STATUS(&st[0], left, 0, na, "communicator #%d (vs #%d)", a, b);
        CHECK_BUF(ra, na, left, a, 1, "communicator #%d (vs #%d)", a, b);
        CHECK_STATUS(&st[1], left, 0, nb, "communicator #%d (vs #%d)", b, a);
        CHECK_BUF(rb, nb, left, b, 2, "communicator #%d (vs #%d)", b, a);
        CHECK_MPI(MPI_Waitall(2, &rq[2], MPI_STATUSES_IGNORE));
        free(ra);
        free(rb);
        free(sa);
        free(sb);
    }
    for (int k = 0; k < NC; k += 57)
        ring(c[k], 65537, 1, k, "one of 400 communicators");
    for (int k = 0; k < NC; k++)
        CHECK_MPI(MPI_Comm_free(&c[k]));
    free(c);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "p2p_comms");
    rank = mt_rank;
    size = mt_size;
    if (size < 2) {
        fprintf(stderr, "p2p_comms needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    sbuf = mt_malloc(MT_MAXSIZE);
    rbuf = mt_malloc(MT_MAXSIZE);

    test_dup_isolation();
    test_split_create();
    test_dup_free_loop();
    test_many_cids();
    test_intercomm();

    free(sbuf);
    free(rbuf);
    return mt_finalize();
}
