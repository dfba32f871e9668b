/*
 * p2p_probe: MPI_Probe / MPI_Iprobe and matched probes.
 *  - Probe/Iprobe report source, tag and count (MPI_Get_count) before the
 *    receive, for specific and wildcard source/tag, eager and large sizes;
 *    probing twice sees the same message; Iprobe with nothing pending is
 *    false;
 *  - MPI_Mprobe/MPI_Improbe + MPI_Mrecv/MPI_Imrecv: a message taken by mprobe
 *    is no longer visible to Probe/Iprobe and cannot be received by a plain
 *    receive (which gets the next message instead); the message handle is
 *    MPI_MESSAGE_NULL after the receive; ANY_SOURCE mprobe from all peers;
 *    self messages;
 *  - MPI_PROC_NULL: Probe/Iprobe/Mprobe/Improbe return the PROC_NULL status,
 *    MPI_MESSAGE_NO_PROC, and Mrecv of MPI_MESSAGE_NO_PROC completes at once.
 */
#include "mpitest.h"

static int rank, size, left, right;
static char *sbuf, *rbuf;

static int count_of(const MPI_Status *st)
{
    int c = -1;
    MPI_Get_count(st, MPI_BYTE, &c);
    return c;
}

static void test_probe(void)
{
    mt_section("Probe / Iprobe");
    for (int i = 0; i < MT_NSIZES; i++) {
        int n = mt_sizes[i], tag = 100 + i, flag = 0;
        MPI_Request rq;
        MPI_Status st, st2;
        mt_fill(sbuf, n, rank, tag, 0);
        CHECK_MPI(MPI_Isend(sbuf, n, MPI_BYTE, right, tag, MPI_COMM_WORLD, &rq));
        switch (i % 3) {
        case 0:
            CHECK_MPI(MPI_Probe(left, tag, MPI_COMM_WORLD, &st));
            break;
        case 1:
            CHECK_MPI(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            break;
        default:
            while (!flag)
                CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &flag, &st));
        }
        CHECK_STATUS(&st, left, tag, n, "probe (variant %d) size %d", i % 3, n);
        /* a second probe sees the same message */
        flag = 0;
        CHECK_MPI(MPI_Iprobe(left, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st2));
        CHECK(flag, "second Iprobe must still see the message, size %d", n);
        if (flag)
            CHECK_STATUS(&st2, left, tag, n, "second probe size %d", n);
        /* receive exactly what the probe announced */
        {
            int cnt = count_of(&st);
            char *b = mt_malloc(cnt > 0 ? cnt : 1);
            CHECK_MPI(MPI_Recv(b, cnt, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st2));
            CHECK_STATUS(&st2, left, tag, n, "recv after probe size %d", n);
            CHECK_BUF(b, n, left, tag, 0, "recv after probe size %d", n);
            free(b);
        }
        CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        /* the ANY/ANY probe above needs a quiet network */
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }

    mt_section("Iprobe with nothing pending");
    {
        int flag = 1;
        MPI_Status st;
        for (int k = 0; k < 50; k++) {
            CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
            if (!CHECK(!flag, "Iprobe found a message (src %d tag %d) although none was sent",
                       st.MPI_SOURCE, st.MPI_TAG))
                break;
        }
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }

    mt_section("Probe ANY_SOURCE from all peers");
    {
        int np = size - 1, n = 65537;
        MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * np);
        int *seen = mt_malloc(sizeof(int) * size);
        memset(seen, 0, sizeof(int) * size);
        /* the size depends on the source so a mixup is visible */
        mt_fill(sbuf, n + rank, rank, 150, 0);
        for (int p = 0; p < np; p++)
            CHECK_MPI(MPI_Isend(sbuf, n + rank, MPI_BYTE, (rank + 1 + p) % size, 150,
                                MPI_COMM_WORLD, &rq[p]));
        for (int p = 0; p < np; p++) {
            MPI_Status st;
            int s;
            CHECK_MPI(MPI_Probe(MPI_ANY_SOURCE, 150, MPI_COMM_WORLD, &st));
            s = st.MPI_SOURCE;
            if (!CHECK(s >= 0 && s < size && s != rank, "bad source %d", s))
                continue;
            CHECK_EQ(count_of(&st), n + s, "probed count from %d", s);
            CHECK_MPI(MPI_Recv(rbuf, n + s, MPI_BYTE, s, 150, MPI_COMM_WORLD, &st));
            CHECK_STATUS(&st, s, 150, n + s, "recv after ANY_SOURCE probe");
            CHECK_BUF(rbuf, n + s, s, 150, 0, "recv after ANY_SOURCE probe");
            seen[s]++;
        }
        for (int s = 0; s < size; s++)
            CHECK_EQ(seen[s], s == rank ? 0 : 1, "messages from %d", s);
        CHECK_MPI(MPI_Waitall(np, rq, MPI_STATUSES_IGNORE));
        free(rq);
        free(seen);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
}

/* two messages with the same (src, tag): m0 mprobed, then m1 must be what
 * Iprobe and a plain Recv see; Mrecv then delivers m0 */
static void test_mprobe(void)
{
    mt_section("Mprobe/Mrecv hides the message from probe and recv");
    for (int i = 0; i < MT_NSIZES; i++) {
        int n0 = mt_sizes[i], n1 = mt_sizes[(i + 5) % MT_NSIZES], tag = 200 + i, flag = 0;
        char *s1 = mt_malloc(n1), *r1 = mt_malloc(n1);
        MPI_Request rq[2];
        MPI_Message msg = MPI_MESSAGE_NULL;
        MPI_Status st;
        mt_fill(sbuf, n0, rank, tag, 0);
        mt_fill(s1, n1, rank, tag, 1);
        CHECK_MPI(MPI_Isend(sbuf, n0, MPI_BYTE, right, tag, MPI_COMM_WORLD, &rq[0]));
        CHECK_MPI(MPI_Isend(s1, n1, MPI_BYTE, right, tag, MPI_COMM_WORLD, &rq[1]));

        if (i % 2 == 0) {
            CHECK_MPI(MPI_Mprobe(left, tag, MPI_COMM_WORLD, &msg, &st));
        } else {
            while (!flag)
                CHECK_MPI(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &msg,
                                      &st));
        }
        CHECK(msg != MPI_MESSAGE_NULL && msg != MPI_MESSAGE_NO_PROC, "mprobe returned a handle");
        CHECK_STATUS(&st, left, tag, n0, "mprobe sees the first message, size %d", n0);

        /* probe now sees the second message only */
        CHECK_MPI(MPI_Probe(left, tag, MPI_COMM_WORLD, &st));
        CHECK_STATUS(&st, left, tag, n1, "Probe after Mprobe must see the 2nd message (size %d)",
                     n1);
        /* and a plain receive gets the second message */
        memset(r1, 0, n1);
        CHECK_MPI(MPI_Recv(r1, n1, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st));
        CHECK_STATUS(&st, left, tag, n1, "Recv after Mprobe must get the 2nd message");
        CHECK_BUF(r1, n1, left, tag, 1, "Recv after Mprobe must get the 2nd message");

        /* nothing else pending from left with this tag */
        flag = 1;
        CHECK_MPI(MPI_Iprobe(left, tag, MPI_COMM_WORLD, &flag, &st));
        CHECK(!flag, "Iprobe must not see the mprobed message, size %d", n0);

        memset(rbuf, 0xA5, (size_t)n0 + 8);
        if (i % 2 == 0) {
            CHECK_MPI(MPI_Mrecv(rbuf, n0, MPI_BYTE, &msg, &st));
        } else {
            MPI_Request r;
            CHECK_MPI(MPI_Imrecv(rbuf, n0, MPI_BYTE, &msg, &r));
            CHECK(msg == MPI_MESSAGE_NULL, "Imrecv sets the message handle to MPI_MESSAGE_NULL");
            CHECK_MPI(MPI_Wait(&r, &st));
        }
        CHECK(msg == MPI_MESSAGE_NULL, "message handle is MPI_MESSAGE_NULL after the receive");
        CHECK_STATUS(&st, left, tag, n0, "Mrecv size %d", n0);
        CHECK_BUF(rbuf, n0, left, tag, 0, "Mrecv size %d", n0);
        CHECK_CONST(rbuf + n0, 8, 0xA5, "Mrecv size %d", n0);
        CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        free(s1);
        free(r1);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* Improbe uses ANY/ANY */
    }

    mt_section("Mprobe several messages first, Mrecv them in reverse order");
    {
        enum { M = 6 };
        static const int sz[M] = {4194307, 0, 65536, 8, 1048576, 4097};
        MPI_Message msg[M];
        MPI_Request rq[M], rr[M];
        MPI_Status st[M];
        char *sb[M], *rb[M];
        for (int k = 0; k < M; k++) {
            sb[k] = mt_malloc(sz[k]);
            rb[k] = mt_malloc(sz[k]);
            mt_fill(sb[k], sz[k], rank, 250, k);
            CHECK_MPI(MPI_Isend(sb[k], sz[k], MPI_BYTE, right, 250, MPI_COMM_WORLD, &rq[k]));
        }
        for (int k = 0; k < M; k++) {
            CHECK_MPI(MPI_Mprobe(left, 250, MPI_COMM_WORLD, &msg[k], &st[k]));
            CHECK_STATUS(&st[k], left, 250, sz[k], "Mprobe #%d (order)", k);
        }
        for (int k = M - 1; k >= 0; k--)
            CHECK_MPI(MPI_Imrecv(rb[k], sz[k], MPI_BYTE, &msg[k], &rr[k]));
        CHECK_MPI(MPI_Waitall(M, rr, st));
        for (int k = 0; k < M; k++) {
            CHECK_STATUS(&st[k], left, 250, sz[k], "Imrecv #%d", k);
            CHECK_BUF(rb[k], sz[k], left, 250, k, "Imrecv #%d", k);
        }
        CHECK_MPI(MPI_Waitall(M, rq, MPI_STATUSES_IGNORE));
        for (int k = 0; k < M; k++) {
            free(sb[k]);
            free(rb[k]);
        }
    }

    mt_section("Mprobe ANY_SOURCE from all peers");
    {
        int np = size - 1, n = 262144;
        MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * np);
        int *seen = mt_malloc(sizeof(int) * size);
        memset(seen, 0, sizeof(int) * size);
        mt_fill(sbuf, n + rank, rank, 260, 0);
        for (int p = 0; p < np; p++)
            CHECK_MPI(MPI_Isend(sbuf, n + rank, MPI_BYTE, (rank + 1 + p) % size, 260,
                                MPI_COMM_WORLD, &rq[p]));
        for (int p = 0; p < np; p++) {
            MPI_Message m;
            MPI_Status st;
            int s;
            CHECK_MPI(MPI_Mprobe(MPI_ANY_SOURCE, 260, MPI_COMM_WORLD, &m, &st));
            s = st.MPI_SOURCE;
            if (!CHECK(s >= 0 && s < size && s != rank, "bad source %d", s))
                continue;
            CHECK_EQ(count_of(&st), n + s, "mprobed count from %d", s);
            CHECK_MPI(MPI_Mrecv(rbuf, n + s, MPI_BYTE, &m, &st));
            CHECK_STATUS(&st, s, 260, n + s, "Mrecv after ANY_SOURCE Mprobe");
            CHECK_BUF(rbuf, n + s, s, 260, 0, "Mrecv after ANY_SOURCE Mprobe");
            seen[s]++;
        }
        for (int s = 0; s < size; s++)
            CHECK_EQ(seen[s], s == rank ? 0 : 1, "messages from %d", s);
        CHECK_MPI(MPI_Waitall(np, rq, MPI_STATUSES_IGNORE));
        free(rq);
        free(seen);
    }

    mt_section("Mprobe of self messages");
    {
        static const int sz[3] = {0, 100, 1048576 + 7};
        for (int k = 0; k < 3; k++) {
            MPI_Request rq;
            MPI_Message m;
            MPI_Status st;
            int flag = 0;
            mt_fill(sbuf, sz[k], rank, 270, k);
            CHECK_MPI(MPI_Isend(sbuf, sz[k], MPI_BYTE, rank, 270, MPI_COMM_WORLD, &rq));
            while (!flag)
                CHECK_MPI(MPI_Improbe(rank, 270, MPI_COMM_WORLD, &flag, &m, &st));
            CHECK_STATUS(&st, rank, 270, sz[k], "self Improbe");
            CHECK_MPI(MPI_Mrecv(rbuf, sz[k], MPI_BYTE, &m, &st));
            CHECK_STATUS(&st, rank, 270, sz[k], "self Mrecv");
            CHECK_BUF(rbuf, sz[k], rank, 270, k, "self Mrecv");
            CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        }
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

static void check_null_status(const MPI_Status *st, const char *what)
{
    CHECK_EQ(st->MPI_SOURCE, MPI_PROC_NULL, "%s: MPI_SOURCE", what);
    CHECK_EQ(st->MPI_TAG, MPI_ANY_TAG, "%s: MPI_TAG", what);
    CHECK_EQ(count_of(st), 0, "%s: count", what);
}

static void test_proc_null(void)
{
    MPI_Status st;
    MPI_Message m = MPI_MESSAGE_NULL;
    MPI_Request r;
    int flag = 0;
    mt_section("probes with MPI_PROC_NULL");
    CHECK_MPI(MPI_Probe(MPI_PROC_NULL, 5, MPI_COMM_WORLD, &st));
    check_null_status(&st, "Probe(PROC_NULL)");
    CHECK_MPI(MPI_Iprobe(MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
    CHECK_EQ(flag, 1, "Iprobe(PROC_NULL) flag");
    check_null_status(&st, "Iprobe(PROC_NULL)");

    CHECK_MPI(MPI_Mprobe(MPI_PROC_NULL, 5, MPI_COMM_WORLD, &m, &st));
    CHECK(m == MPI_MESSAGE_NO_PROC, "Mprobe(PROC_NULL) returns MPI_MESSAGE_NO_PROC");
    check_null_status(&st, "Mprobe(PROC_NULL)");
    memset(rbuf, 0xA5, 100);
    CHECK_MPI(MPI_Mrecv(rbuf, 100, MPI_BYTE, &m, &st));
    check_null_status(&st, "Mrecv(MPI_MESSAGE_NO_PROC)");
    CHECK(m == MPI_MESSAGE_NULL, "Mrecv(MPI_MESSAGE_NO_PROC) sets MPI_MESSAGE_NULL");
    CHECK_CONST(rbuf, 100, 0xA5, "Mrecv(NO_PROC) does not touch the buffer");

    flag = 0;
    m = MPI_MESSAGE_NULL;
    CHECK_MPI(MPI_Improbe(MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m, &st));
    CHECK_EQ(flag, 1, "Improbe(PROC_NULL) flag");
    CHECK(m == MPI_MESSAGE_NO_PROC, "Improbe(PROC_NULL) returns MPI_MESSAGE_NO_PROC");
    check_null_status(&st, "Improbe(PROC_NULL)");
    CHECK_MPI(MPI_Imrecv(rbuf, 100, MPI_BYTE, &m, &r));
    CHECK_MPI(MPI_Wait(&r, &st));
    check_null_status(&st, "Imrecv(MPI_MESSAGE_NO_PROC)");
    CHECK_CONST(rbuf, 100, 0xA5, "Imrecv(NO_PROC) does not touch the buffer");
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "p2p_probe");
    rank = mt_rank;
    size = mt_size;
    if (size < 2) {
        fprintf(stderr, "p2p_probe needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    left = (rank - 1 + size) % size;
    right = (rank + 1) % size;
    sbuf = mt_malloc(MT_MAXSIZE + 64);
    rbuf = mt_malloc(MT_MAXSIZE + 64);

    test_probe();
    test_mprobe();
    test_proc_null();

    free(sbuf);
    free(rbuf);
    return mt_finalize();
}
