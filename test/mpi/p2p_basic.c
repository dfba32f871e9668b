/*
 * p2p_basic: blocking / nonblocking send-recv over the size list, self-send,
 * ANY_SOURCE, ANY_TAG, tag 0 / MPI_TAG_UB, MPI_Sendrecv(_replace),
 * MPI_PROC_NULL, MPI_REQUEST_NULL; zero-count sends from/to NULL, a send
 * buffer that is read-only, overwritten and freed right after the send
 * completed, MPI_Request_free of an active send, a 32 MiB+1 ring.
 */
#include "mpitest.h"

#include <sys/mman.h>

#define GUARD 64
#define FILLC 0xA5

static int rank, size, left, right;
static char *sbuf, *rbuf;

/* blocking ring: even ranks send first, odd ranks receive first */
static void test_blocking_ring(void)
{
    mt_section("blocking ring Send/Recv");
    for (int i = 0; i < MT_NSIZES; i++) {
        int n = mt_sizes[i], tag = 100 + i;
        MPI_Status st;
        mt_fill(sbuf, n, rank, tag, 0);
        memset(rbuf, FILLC, (size_t)n + GUARD);
        if (rank % 2 == 0) {
            CHECK_MPI(MPI_Send(sbuf, n, MPI_BYTE, right, tag, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Recv(rbuf, n + 16, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st));
        } else {
            CHECK_MPI(MPI_Recv(rbuf, n + 16, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st));
            CHECK_MPI(MPI_Send(sbuf, n, MPI_BYTE, right, tag, MPI_COMM_WORLD));
        }
        CHECK_STATUS(&st, left, tag, n, "size %d", n);
        CHECK_BUF(rbuf, n, left, tag, 0, "size %d", n);
        CHECK_CONST(rbuf + n, GUARD, FILLC, "bytes after a %d-byte message (recv count %d)", n,
                    n + 16);
    }
}

/* all pairs, nonblocking; pattern depends on the destination too */
static void test_nonblocking_allpairs(void)
{
    int np = size - 1;
    char **sb = mt_malloc(sizeof(char *) * np), **rb = mt_malloc(sizeof(char *) * np);
    MPI_Request *req = mt_malloc(sizeof(MPI_Request) * 2 * np);
    MPI_Status *st = mt_malloc(sizeof(MPI_Status) * 2 * np);
    mt_section("nonblocking all-pairs Isend/Irecv");
    for (int k = 0; k < np; k++) {
        sb[k] = mt_malloc(MT_MAXSIZE);
        rb[k] = mt_malloc(MT_MAXSIZE + GUARD);
    }
    for (int i = 0; i < MT_NSIZES; i++) {
        int n = mt_sizes[i], tag = 200 + i;
        for (int k = 0; k < np; k++) {
            int dst = (rank + 1 + k) % size;
            mt_fill(sb[k], n, rank, tag, dst);
            memset(rb[k], FILLC, (size_t)n + GUARD);
        }
        /* alternate between receives-first and sends-first */
        for (int phase = 0; phase < 2; phase++) {
            int do_recv = ((i + phase) % 2 == 0);
            for (int k = 0; k < np; k++) {
                int peer = (rank + 1 + k) % size;
                int src = (rank - 1 - k + 2 * size) % size;
                if (do_recv)
                    CHECK_MPI(MPI_Irecv(rb[k], n, MPI_BYTE, src, tag, MPI_COMM_WORLD, &req[np + k]));
                else
                    CHECK_MPI(MPI_Isend(sb[k], n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req[k]));
            }
        }
        for (int k = 0; k < 2 * np; k++)
            st[k].MPI_ERROR = -77;
        CHECK_MPI(MPI_Waitall(2 * np, req, st));
        for (int k = 0; k < np; k++) {
            int src = (rank - 1 - k + 2 * size) % size;
            CHECK_STATUS(&st[np + k], src, tag, n, "size %d from %d", n, src);
            CHECK_BUF(rb[k], n, src, tag, rank, "size %d from %d", n, src);
            CHECK_CONST(rb[k] + n, GUARD, FILLC, "size %d from %d", n, src);
            CHECK(req[k] == MPI_REQUEST_NULL && req[np + k] == MPI_REQUEST_NULL,
                  "requests freed by Waitall, size %d", n);
        }
    }
    for (int k = 0; k < np; k++) {
        free(sb[k]);
        free(rb[k]);
    }
    free(sb);
    free(rb);
    free(req);
    free(st);
}

/* rank sends to itself, receive posted after and before the send */
static void test_self(void)
{
    mt_section("self send/recv");
    for (int i = 0; i < MT_NSIZES; i++) {
        int n = mt_sizes[i], tag = 300 + i;
        MPI_Request sreq, rreq;
        MPI_Status st;

        /* (a) Isend first, receive posted after (unexpected path) */
        mt_fill(sbuf, n, rank, tag, 1);
        memset(rbuf, FILLC, (size_t)n + GUARD);
        CHECK_MPI(MPI_Isend(sbuf, n, MPI_BYTE, rank, tag, MPI_COMM_WORLD, &sreq));
        CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, rank, tag, MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
        CHECK_STATUS(&st, rank, tag, n, "self Isend->Recv size %d", n);
        CHECK_BUF(rbuf, n, rank, tag, 1, "self Isend->Recv size %d", n);
        CHECK_CONST(rbuf + n, GUARD, FILLC, "self Isend->Recv size %d", n);

        /* (b) Irecv posted first, then blocking Send */
        mt_fill(sbuf, n, rank, tag, 2);
        memset(rbuf, FILLC, (size_t)n + GUARD);
        CHECK_MPI(MPI_Irecv(rbuf, n, MPI_BYTE, rank, tag, MPI_COMM_WORLD, &rreq));
        CHECK_MPI(MPI_Send(sbuf, n, MPI_BYTE, rank, tag, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Wait(&rreq, &st));
        CHECK_STATUS(&st, rank, tag, n, "self Irecv->Send size %d", n);
        CHECK_BUF(rbuf, n, rank, tag, 2, "self Irecv->Send size %d", n);
        CHECK_CONST(rbuf + n, GUARD, FILLC, "self Irecv->Send size %d", n);

        /* (c) Sendrecv with myself */
        mt_fill(sbuf, n, rank, tag, 3);
        memset(rbuf, FILLC, (size_t)n + GUARD);
        CHECK_MPI(MPI_Sendrecv(sbuf, n, MPI_BYTE, rank, tag, rbuf, n, MPI_BYTE, rank, tag,
                               MPI_COMM_WORLD, &st));
        CHECK_STATUS(&st, rank, tag, n, "self Sendrecv size %d", n);
        CHECK_BUF(rbuf, n, rank, tag, 3, "self Sendrecv size %d", n);

        /* (d) Irecv(ANY_SOURCE) matched by a self send */
        mt_fill(sbuf, n, rank, tag + 1000, 4);
        CHECK_MPI(MPI_Irecv(rbuf, n, MPI_BYTE, MPI_ANY_SOURCE, tag + 1000, MPI_COMM_WORLD, &rreq));
        CHECK_MPI(MPI_Isend(sbuf, n, MPI_BYTE, rank, tag + 1000, MPI_COMM_WORLD, &sreq));
        CHECK_MPI(MPI_Wait(&rreq, &st));
        CHECK_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
        CHECK_STATUS(&st, rank, tag + 1000, n, "self ANY_SOURCE size %d", n);
        CHECK_BUF(rbuf, n, rank, tag + 1000, 4, "self ANY_SOURCE size %d", n);
    }
}

/* every rank receives from all others with MPI_ANY_SOURCE */
static void test_any_source(void)
{
    int np = size - 1;
    MPI_Request *req = mt_malloc(sizeof(MPI_Request) * np);
    int *seen = mt_malloc(sizeof(int) * size);
    mt_section("ANY_SOURCE");
    for (int i = 0; i < MT_NSIZES; i++) {
        int n = mt_sizes[i], tag = 400 + i;
        mt_fill(sbuf, n, rank, tag, 5);
        for (int k = 0; k < np; k++)
            CHECK_MPI(MPI_Isend(sbuf, n, MPI_BYTE, (rank + 1 + k) % size, tag, MPI_COMM_WORLD,
                                &req[k]));
        memset(seen, 0, sizeof(int) * size);
        for (int k = 0; k < np; k++) {
            MPI_Status st;
            int cnt = -1;
            memset(rbuf, FILLC, (size_t)n + GUARD);
            CHECK_MPI(MPI_Recv(rbuf, n + 1, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st));
            MPI_Get_count(&st, MPI_BYTE, &cnt);
            CHECK_EQ(cnt, n, "ANY_SOURCE size %d", n);
            CHECK_EQ(st.MPI_TAG, tag, "ANY_SOURCE size %d", n);
            if (CHECK(st.MPI_SOURCE >= 0 && st.MPI_SOURCE < size && st.MPI_SOURCE != rank,
                      "ANY_SOURCE returned source %d, size %d", st.MPI_SOURCE, n)) {
                seen[st.MPI_SOURCE]++;
                CHECK_BUF(rbuf, n, st.MPI_SOURCE, tag, 5, "ANY_SOURCE from %d size %d",
                          st.MPI_SOURCE, n);
                CHECK_CONST(rbuf + n, GUARD, FILLC, "ANY_SOURCE size %d", n);
            }
        }
        for (int s = 0; s < size; s++)
            CHECK_EQ(seen[s], s == rank ? 0 : 1, "messages seen from rank %d, size %d", s, n);
        CHECK_MPI(MPI_Waitall(np, req, MPI_STATUSES_IGNORE));
    }
    free(req);
    free(seen);
}

/* ANY_TAG from a specific source sees the tags in send order; then
 * ANY_SOURCE+ANY_TAG from everybody keeps per-source order. */
#define NTAGMSG 8
static void test_any_tag(void)
{
    static const int tags[NTAGMSG] = {7, 0, 32767, 5, 5, 1, 12345, 2};
    static const int szi[NTAGMSG] = {0, 15, 2, 9, 14, 1, 12, 5}; /* indices into mt_sizes */
    int np = size - 1;
    MPI_Request req[NTAGMSG], *reqs;
    char **sb = mt_malloc(sizeof(char *) * NTAGMSG);
    int *next;

    mt_section("ANY_TAG from a specific source");
    for (int k = 0; k < NTAGMSG; k++) {
        sb[k] = mt_malloc(mt_sizes[szi[k]]);
        mt_fill(sb[k], mt_sizes[szi[k]], rank, tags[k], k);
    }
    for (int k = 0; k < NTAGMSG; k++)
        CHECK_MPI(MPI_Isend(sb[k], mt_sizes[szi[k]], MPI_BYTE, right, tags[k], MPI_COMM_WORLD,
                            &req[k]));
    for (int k = 0; k < NTAGMSG; k++) {
        MPI_Status st;
        int n = mt_sizes[szi[k]];
        CHECK_MPI(MPI_Recv(rbuf, MT_MAXSIZE, MPI_BYTE, left, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        CHECK_STATUS(&st, left, tags[k], n, "ANY_TAG message #%d", k);
        CHECK_BUF(rbuf, n, left, tags[k], k, "ANY_TAG message #%d", k);
    }
    CHECK_MPI(MPI_Waitall(NTAGMSG, req, MPI_STATUSES_IGNORE));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    mt_section("ANY_SOURCE + ANY_TAG from all peers");
    reqs = mt_malloc(sizeof(MPI_Request) * NTAGMSG * np);
    next = mt_malloc(sizeof(int) * size);
    for (int p = 0; p < np; p++)
        for (int k = 0; k < NTAGMSG; k++)
            CHECK_MPI(MPI_Isend(sb[k], mt_sizes[szi[k]], MPI_BYTE, (rank + 1 + p) % size, tags[k],
                                MPI_COMM_WORLD, &reqs[p * NTAGMSG + k]));
    memset(next, 0, sizeof(int) * size);
    for (int m = 0; m < NTAGMSG * np; m++) {
        MPI_Status st;
        int s, k, cnt = -1;
        CHECK_MPI(MPI_Recv(rbuf, MT_MAXSIZE, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
                           MPI_COMM_WORLD, &st));
        s = st.MPI_SOURCE;
        if (!CHECK(s >= 0 && s < size && s != rank, "bad source %d", s))
            continue;
        k = next[s]++;
        if (!CHECK(k < NTAGMSG, "too many messages from %d", s))
            continue;
        MPI_Get_count(&st, MPI_BYTE, &cnt);
        CHECK_STATUS(&st, s, tags[k], mt_sizes[szi[k]], "ANY/ANY message #%d from %d (order)", k,
                     s);
        if (cnt == mt_sizes[szi[k]])
            CHECK_BUF(rbuf, cnt, s, tags[k], k, "ANY/ANY message #%d from %d", k, s);
    }
    for (int s = 0; s < size; s++)
        CHECK_EQ(next[s], s == rank ? 0 : NTAGMSG, "ANY/ANY messages from %d", s);
    CHECK_MPI(MPI_Waitall(NTAGMSG * np, reqs, MPI_STATUSES_IGNORE));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (int k = 0; k < NTAGMSG; k++)
        free(sb[k]);
    free(sb);
    free(reqs);
    free(next);
}

static void test_tag_extremes(void)
{
    int *ub = NULL, flag = 0;
    mt_section("tag 0 and MPI_TAG_UB");
    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag));
    if (!CHECK(flag && ub && *ub >= 32767, "MPI_TAG_UB attribute present and >= 32767"))
        return;
    const int tags[2] = {0, *ub};
    const int sz[3] = {0, 100, 1048576 + 1};
    for (int t = 0; t < 2; t++)
        for (int j = 0; j < 3; j++) {
            int n = sz[j];
            MPI_Request r;
            MPI_Status st;
            mt_fill(sbuf, n, rank, tags[t], j);
            CHECK_MPI(MPI_Isend(sbuf, n, MPI_BYTE, right, tags[t], MPI_COMM_WORLD, &r));
            CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, left, (j == 1) ? MPI_ANY_TAG : tags[t],
                               MPI_COMM_WORLD, &st));
            CHECK_STATUS(&st, left, tags[t], n, "tag %d size %d", tags[t], n);
            CHECK_BUF(rbuf, n, left, tags[t], j, "tag %d size %d", tags[t], n);
            CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        }
}

static void test_sendrecv(void)
{
    mt_section("MPI_Sendrecv");
    for (int i = 0; i < MT_NSIZES; i++) {
        /* send size i to the right, the left neighbour sends us size i too,
         * while the reverse direction uses another size */
        int n = mt_sizes[i], n2 = mt_sizes[MT_NSIZES - 1 - i], tag = 500 + i;
        MPI_Status st;
        mt_fill(sbuf, n, rank, tag, 6);
        memset(rbuf, FILLC, (size_t)n + GUARD);
        CHECK_MPI(MPI_Sendrecv(sbuf, n, MPI_BYTE, right, tag, rbuf, n + GUARD / 2, MPI_BYTE, left,
                               tag, MPI_COMM_WORLD, &st));
        CHECK_STATUS(&st, left, tag, n, "Sendrecv to right size %d", n);
        CHECK_BUF(rbuf, n, left, tag, 6, "Sendrecv to right size %d", n);
        CHECK_CONST(rbuf + n, GUARD, FILLC, "Sendrecv size %d", n);

        /* reverse direction, receive with a wildcard that can only match
         * the right neighbour's message: (ANY_SOURCE, unique tag) or
         * (right, ANY_TAG) -- right sends nothing else to us before it */
        mt_fill(sbuf, n2, rank, tag + 50, 7);
        CHECK_MPI(MPI_Sendrecv(sbuf, n2, MPI_BYTE, left, tag + 50, rbuf, MT_MAXSIZE, MPI_BYTE,
                               (i % 2) ? right : MPI_ANY_SOURCE, (i % 2) ? MPI_ANY_TAG : tag + 50,
                               MPI_COMM_WORLD, &st));
        CHECK_STATUS(&st, right, tag + 50, n2, "Sendrecv to left, wildcard recv, size %d", n2);
        CHECK_BUF(rbuf, n2, right, tag + 50, 7, "Sendrecv to left size %d", n2);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

static void test_sendrecv_replace(void)
{
    mt_section("MPI_Sendrecv_replace");
    for (int i = 0; i < MT_NSIZES; i++) {
        int n = mt_sizes[i], tag = 600 + i;
        MPI_Status st;
        mt_fill(rbuf, n, rank, tag, 8);
        memset(rbuf + n, FILLC, GUARD);
        CHECK_MPI(MPI_Sendrecv_replace(rbuf, n, MPI_BYTE, right, tag, left, tag, MPI_COMM_WORLD,
                                       &st));
        CHECK_STATUS(&st, left, tag, n, "Sendrecv_replace size %d", n);
        CHECK_BUF(rbuf, n, left, tag, 8, "Sendrecv_replace size %d", n);
        CHECK_CONST(rbuf + n, GUARD, FILLC, "Sendrecv_replace size %d", n);
    }
    /* with MPI_INT elements, replace using ANY_SOURCE */
    {
        int cnt = 1000, tag = 650, got = -1;
        int *ib = (int *)rbuf;
        MPI_Status st;
        for (int j = 0; j < cnt; j++)
            ib[j] = rank * 100000 + j;
        CHECK_MPI(MPI_Sendrecv_replace(ib, cnt, MPI_INT, right, tag, MPI_ANY_SOURCE, tag,
                                       MPI_COMM_WORLD, &st));
        MPI_Get_count(&st, MPI_INT, &got);
        CHECK_EQ(got, cnt, "Sendrecv_replace MPI_INT count");
        CHECK_EQ(st.MPI_SOURCE, left, "Sendrecv_replace ANY_SOURCE");
        for (int j = 0; j < cnt; j++)
            if (!CHECK_EQ(ib[j], left * 100000 + j, "Sendrecv_replace int %d", j))
                break;
    }
}

static void check_null_status(const MPI_Status *st, const char *what)
{
    int cnt = -1;
    MPI_Get_count(st, MPI_BYTE, &cnt);
    CHECK_EQ(st->MPI_SOURCE, MPI_PROC_NULL, "%s: MPI_SOURCE", what);
    CHECK_EQ(st->MPI_TAG, MPI_ANY_TAG, "%s: MPI_TAG", what);
    CHECK_EQ(cnt, 0, "%s: count", what);
}

static void test_proc_null(void)
{
    MPI_Status st, sts[4];
    MPI_Request rq[4];
    mt_section("MPI_PROC_NULL");
    mt_fill(sbuf, 1000, rank, 1, 1);
    memset(rbuf, FILLC, 1000);
    CHECK_MPI(MPI_Send(sbuf, 1000, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Send(sbuf, 1048576, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Ssend(sbuf, 10, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Rsend(sbuf, 10, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
    st.MPI_SOURCE = 1234;
    CHECK_MPI(MPI_Recv(rbuf, 1000, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st));
    check_null_status(&st, "Recv from PROC_NULL");
    CHECK_CONST(rbuf, 1000, FILLC, "Recv from PROC_NULL must not touch the buffer");

    CHECK_MPI(MPI_Isend(sbuf, 1000, MPI_BYTE, MPI_PROC_NULL, 2, MPI_COMM_WORLD, &rq[0]));
    CHECK_MPI(MPI_Irecv(rbuf, 1000, MPI_BYTE, MPI_PROC_NULL, 2, MPI_COMM_WORLD, &rq[1]));
    CHECK_MPI(MPI_Issend(sbuf, 1000, MPI_BYTE, MPI_PROC_NULL, 2, MPI_COMM_WORLD, &rq[2]));
    CHECK_MPI(MPI_Irecv(rbuf, 4 * 1048576, MPI_BYTE, MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD,
                        &rq[3]));
    CHECK_MPI(MPI_Waitall(4, rq, sts));
    check_null_status(&sts[1], "Irecv from PROC_NULL");
    check_null_status(&sts[3], "Irecv(ANY_TAG) from PROC_NULL");
    CHECK_CONST(rbuf, 1000, FILLC, "Irecv from PROC_NULL must not touch the buffer");

    /* non-periodic shift: first rank receives from PROC_NULL, last sends to it */
    {
        int dst = rank == size - 1 ? MPI_PROC_NULL : rank + 1;
        int src = rank == 0 ? MPI_PROC_NULL : rank - 1;
        int n = 65537;
        mt_fill(sbuf, n, rank, 3, 0);
        memset(rbuf, FILLC, n);
        CHECK_MPI(MPI_Sendrecv(sbuf, n, MPI_BYTE, dst, 3, rbuf, n, MPI_BYTE, src, 3,
                               MPI_COMM_WORLD, &st));
        if (src == MPI_PROC_NULL) {
            check_null_status(&st, "Sendrecv from PROC_NULL");
            CHECK_CONST(rbuf, n, FILLC, "Sendrecv from PROC_NULL");
        } else {
            CHECK_STATUS(&st, src, 3, n, "Sendrecv shift");
            CHECK_BUF(rbuf, n, src, 3, 0, "Sendrecv shift");
        }
        mt_fill(rbuf, n, rank, 4, 0);
        CHECK_MPI(MPI_Sendrecv_replace(rbuf, n, MPI_BYTE, MPI_PROC_NULL, 4, MPI_PROC_NULL, 4,
                                       MPI_COMM_WORLD, &st));
        check_null_status(&st, "Sendrecv_replace PROC_NULL");
        CHECK_BUF(rbuf, n, rank, 4, 0, "Sendrecv_replace PROC_NULL keeps the buffer");
    }

    /* MPI_Wait on MPI_REQUEST_NULL returns an empty status */
    {
        MPI_Request r = MPI_REQUEST_NULL;
        int cnt = -1, flag = 0;
        st.MPI_SOURCE = 77;
        st.MPI_TAG = 77;
        CHECK_MPI(MPI_Wait(&r, &st));
        MPI_Get_count(&st, MPI_BYTE, &cnt);
        CHECK_EQ(st.MPI_SOURCE, MPI_ANY_SOURCE, "Wait(MPI_REQUEST_NULL) empty status");
        CHECK_EQ(st.MPI_TAG, MPI_ANY_TAG, "Wait(MPI_REQUEST_NULL) empty status");
        CHECK_EQ(cnt, 0, "Wait(MPI_REQUEST_NULL) empty status");
        CHECK_MPI(MPI_Test(&r, &flag, &st));
        CHECK_EQ(flag, 1, "Test(MPI_REQUEST_NULL) flag");
    }
}

/* buffers a PML might mishandle */
static void test_special_buffers(void)
{
    MPI_Request rq[2];
    MPI_Status st[2];

    mt_section("zero-count messages with NULL buffers");
    CHECK_MPI(MPI_Irecv(NULL, 0, MPI_BYTE, left, 700, MPI_COMM_WORLD, &rq[0]));
    CHECK_MPI(MPI_Isend(NULL, 0, MPI_BYTE, right, 700, MPI_COMM_WORLD, &rq[1]));
    CHECK_MPI(MPI_Waitall(2, rq, st));
    CHECK_STATUS(&st[0], left, 700, 0, "NULL zero-count Isend/Irecv");
    CHECK_MPI(MPI_Sendrecv(NULL, 0, MPI_INT, right, 701, NULL, 0, MPI_INT, left, 701,
                           MPI_COMM_WORLD, &st[0]));
    CHECK_STATUS(&st[0], left, 701, 0, "NULL zero-count Sendrecv");
    CHECK_MPI(MPI_Isend(NULL, 0, MPI_BYTE, rank, 702, MPI_COMM_WORLD, &rq[1]));
    CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, rank, 702, MPI_COMM_WORLD, &st[0]));
    CHECK_MPI(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
    CHECK_STATUS(&st[0], rank, 702, 0, "NULL zero-count self");

    mt_section("send from read-only memory");
    {
        static const int sz[3] = {100, 65537, 4 * 1048576 + 3};
        long pg = sysconf(_SC_PAGESIZE);
        size_t len = ((size_t)MT_MAXSIZE + pg - 1) / pg * pg;
        void *ro = NULL;
        if (!CHECK(posix_memalign(&ro, (size_t)pg, len) == 0, "posix_memalign"))
            return;
        for (int i = 0; i < 3; i++) {
            int n = sz[i], tag = 710 + i;
            mt_fill(ro, n, rank, tag, 0);
            CHECK(mprotect(ro, len, PROT_READ) == 0, "mprotect(PROT_READ)");
            memset(rbuf, FILLC, n);
            CHECK_MPI(MPI_Irecv(rbuf, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &rq[0]));
            if (i == 1)
                CHECK_MPI(MPI_Issend(ro, n, MPI_BYTE, right, tag, MPI_COMM_WORLD, &rq[1]));
            else
                CHECK_MPI(MPI_Isend(ro, n, MPI_BYTE, right, tag, MPI_COMM_WORLD, &rq[1]));
            CHECK_MPI(MPI_Waitall(2, rq, st));
            CHECK(mprotect(ro, len, PROT_READ | PROT_WRITE) == 0, "mprotect(PROT_READ|WRITE)");
            CHECK_STATUS(&st[0], left, tag, n, "read-only send buffer, size %d", n);
            CHECK_BUF(rbuf, n, left, tag, 0, "read-only send buffer, size %d", n);
        }
        free(ro);
    }

    mt_section("send buffer overwritten and freed right after completion");
    for (int i = 0; i < MT_NSIZES; i++) {
        int n = mt_sizes[i], tag = 720 + i;
        char *b = mt_malloc(n);
        mt_fill(b, n, rank, tag, 1);
        memset(rbuf, FILLC, n);
        CHECK_MPI(MPI_Isend(b, n, MPI_BYTE, right, tag, MPI_COMM_WORLD, &rq[1]));
        if (n >= 65536)
            mt_sleep_ms(1); /* let the receiver be late */
        CHECK_MPI(MPI_Irecv(rbuf, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &rq[0]));
        CHECK_MPI(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
        memset(b, 0xEE, n); /* the data must be gone (or copied) by now */
        free(b);
        CHECK_MPI(MPI_Wait(&rq[0], &st[0]));
        CHECK_STATUS(&st[0], left, tag, n, "buffer reused after send completion, size %d", n);
        CHECK_BUF(rbuf, n, left, tag, 1, "buffer reused after send completion, size %d", n);
    }

    mt_section("MPI_Request_free of an active Isend");
    {
        static const int sz[3] = {8, 65537, 1048576};
        for (int i = 0; i < 3; i++) {
            int n = sz[i], tag = 740 + i;
            char ack = 1, *b = mt_malloc(n);
            MPI_Request r;
            mt_fill(b, n, rank, tag, 2);
            CHECK_MPI(MPI_Isend(b, n, MPI_BYTE, right, tag, MPI_COMM_WORLD, &r));
            CHECK_MPI(MPI_Request_free(&r));
            CHECK(r == MPI_REQUEST_NULL, "Request_free sets MPI_REQUEST_NULL");
            CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st[0]));
            CHECK_STATUS(&st[0], left, tag, n, "freed active Isend, size %d", n);
            CHECK_BUF(rbuf, n, left, tag, 2, "freed active Isend, size %d", n);
            /* once the receiver acknowledges, the send buffer may be freed */
            CHECK_MPI(MPI_Sendrecv(&ack, 1, MPI_CHAR, left, tag + 100, &ack, 1, MPI_CHAR, right,
                                   tag + 100, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            free(b);
        }
    }

    mt_section("32 MiB+1 ring");
    {
        int n = 32 * 1048576 + 1, tag = 750;
        char *b = mt_malloc(n), *r = mt_malloc(n);
        mt_fill(b, n, rank, tag, 3);
        CHECK_MPI(MPI_Irecv(r, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &rq[0]));
        CHECK_MPI(MPI_Isend(b, n, MPI_BYTE, right, tag, MPI_COMM_WORLD, &rq[1]));
        CHECK_MPI(MPI_Waitall(2, rq, st));
        CHECK_STATUS(&st[0], left, tag, n, "32 MiB+1 ring");
        CHECK_BUF(r, n, left, tag, 3, "32 MiB+1 ring");
        free(b);
        free(r);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "p2p_basic");
    rank = mt_rank;
    size = mt_size;
    if (size < 2) {
        fprintf(stderr, "p2p_basic needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    left = (rank - 1 + size) % size;
    right = (rank + 1) % size;
    sbuf = mt_malloc(MT_MAXSIZE + GUARD);
    rbuf = mt_malloc(MT_MAXSIZE + GUARD);

    test_blocking_ring();
    test_nonblocking_allpairs();
    test_self();
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    test_any_source();
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    test_any_tag();
    test_tag_extremes();
    test_sendrecv();
    test_sendrecv_replace();
    test_proc_null();
    test_special_buffers();

    free(sbuf);
    free(rbuf);
    return mt_finalize();
}
