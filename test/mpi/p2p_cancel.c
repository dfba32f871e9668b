/*
 * p2p_cancel: cancelling receives.
 *  - Irecv (specific source / ANY_SOURCE / ANY_TAG) + MPI_Cancel + MPI_Wait
 *    -> MPI_Test_cancelled true, receive buffer untouched, for small and
 *    large buffers; MPI_Test loop after the cancel also completes;
 *  - a cancelled receive does not steal a later message: the message sent
 *    after the cancel is received intact by a new receive;
 *  - cancelling some of several pending receives on the same (src, tag):
 *    the remaining ones still match in post order;
 *  - cancelling a receive that already completed (MPI_Request_get_status
 *    true) -> not cancelled, data intact;
 *  - cancelling a receive matched against an already-arrived message: either
 *    outcome is allowed, but consistently (cancelled -> the message is still
 *    receivable and the buffer untouched; not cancelled -> data delivered);
 *  - cancelling a started persistent receive, then restarting it.
 */
#include "mpitest.h"

static int rank, size, left, right;
static char *sbuf, *rbuf;

static int cancelled(const MPI_Status *st)
{
    int c = -1;
    MPI_Test_cancelled(st, &c);
    return c;
}

static void test_cancel_pending(void)
{
    static const int sz[] = {0, 8, 4096, 65537, 1048576, 4194307};
    mt_section("cancel pending receives");
    for (int i = 0; i < 6; i++) {
        int n = sz[i];
        for (int variant = 0; variant < 4; variant++) {
            int src = variant == 1 ? MPI_ANY_SOURCE : left;
            int tag = variant == 2 ? MPI_ANY_TAG : 900 + i;
            MPI_Request r;
            MPI_Status st;
            memset(rbuf, 0xA5, (size_t)n + 8);
            CHECK_MPI(MPI_Irecv(rbuf, n, MPI_BYTE, src, tag, MPI_COMM_WORLD, &r));
            CHECK_MPI(MPI_Cancel(&r));
            if (variant == 3) {
                int flag = 0;
                double t0 = MPI_Wtime();
                while (!flag && MPI_Wtime() - t0 < 10)
                    CHECK_MPI(MPI_Test(&r, &flag, &st));
                if (!CHECK(flag, "MPI_Test never completed a cancelled receive (size %d)", n))
                    continue;
                CHECK(r == MPI_REQUEST_NULL, "request freed by Test");
            } else {
                CHECK_MPI(MPI_Wait(&r, &st));
            }
            CHECK(cancelled(&st), "cancel of a pending receive (size %d, variant %d) not reported "
                  "by MPI_Test_cancelled", n, variant);
            CHECK_CONST(rbuf, (size_t)n + 8, 0xA5, "buffer of a cancelled receive (size %d)", n);
        }
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* cancelled receive, then the message is sent: it must go to the new receive */
static void test_no_steal(void)
{
    static const int sz[] = {1, 4097, 1048576};
    char *cbuf = mt_malloc(1048576 + 8);
    mt_section("cancelled receive does not steal a later message");
    for (int i = 0; i < 3; i++) {
        int n = sz[i], tag = 100 + i;
        for (int wild = 0; wild < 2; wild++) {
            MPI_Request r;
            MPI_Status st;
            memset(cbuf, 0xA5, (size_t)n + 8);
            CHECK_MPI(MPI_Irecv(cbuf, n, MPI_BYTE, wild ? MPI_ANY_SOURCE : left,
                                wild ? MPI_ANY_TAG : tag, MPI_COMM_WORLD, &r));
            CHECK_MPI(MPI_Cancel(&r));
            CHECK_MPI(MPI_Wait(&r, &st));
            CHECK(cancelled(&st), "cancel (size %d, wildcard %d)", n, wild);
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            mt_fill(sbuf, n, rank, tag, wild);
            CHECK_MPI(MPI_Sendrecv(sbuf, n, MPI_BYTE, right, tag, rbuf, n, MPI_BYTE, left, tag,
                                   MPI_COMM_WORLD, &st));
            CHECK_STATUS(&st, left, tag, n, "message after a cancelled receive");
            CHECK_BUF(rbuf, n, left, tag, wild, "message after a cancelled receive");
            CHECK_CONST(cbuf, (size_t)n + 8, 0xA5, "cancelled receive buffer (size %d)", n);
        }
    }
    free(cbuf);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* post 10 receives on the same (src,tag), cancel the odd ones, then the
 * sender sends 5 messages: even receives get messages 0..4 in order */
#define NPOST 10
static void test_cancel_some(void)
{
    static const int sz[NPOST / 2] = {100, 1048576, 0, 65537, 4096};
    MPI_Request r[NPOST], s[NPOST / 2];
    MPI_Status st[NPOST];
    char *rb[NPOST], *sb[NPOST / 2];
    mt_section("cancel some of several receives on one (src,tag)");
    for (int k = 0; k < NPOST; k++) {
        rb[k] = mt_malloc(1048576 + 8);
        memset(rb[k], 0xA5, 1048576 + 8);
        CHECK_MPI(MPI_Irecv(rb[k], 1048576, MPI_BYTE, k % 4 == 1 ? MPI_ANY_SOURCE : left, 200,
                            MPI_COMM_WORLD, &r[k]));
    }
    for (int k = 1; k < NPOST; k += 2)
        CHECK_MPI(MPI_Cancel(&r[k]));
    for (int k = 1; k < NPOST; k += 2) {
        CHECK_MPI(MPI_Wait(&r[k], &st[k]));
        CHECK(cancelled(&st[k]), "receive #%d cancelled", k);
        CHECK_CONST(rb[k], 1048576 + 8, 0xA5, "buffer of cancelled receive #%d", k);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (int m = 0; m < NPOST / 2; m++) {
        sb[m] = mt_malloc(sz[m]);
        mt_fill(sb[m], sz[m], rank, 200, m);
        CHECK_MPI(MPI_Isend(sb[m], sz[m], MPI_BYTE, right, 200, MPI_COMM_WORLD, &s[m]));
    }
    for (int k = 0; k < NPOST; k += 2) {
        int m = k / 2;
        CHECK_MPI(MPI_Wait(&r[k], &st[k]));
        CHECK(!cancelled(&st[k]), "receive #%d was not cancelled", k);
        CHECK_STATUS(&st[k], left, 200, sz[m], "receive #%d gets message #%d", k, m);
        CHECK_BUF(rb[k], sz[m], left, 200, m, "receive #%d gets message #%d", k, m);
    }
    CHECK_MPI(MPI_Waitall(NPOST / 2, s, MPI_STATUSES_IGNORE));
    for (int k = 0; k < NPOST; k++)
        free(rb[k]);
    for (int m = 0; m < NPOST / 2; m++)
        free(sb[m]);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* the receive has completed (Request_get_status) before MPI_Cancel */
static void test_cancel_completed(void)
{
    static const int sz[] = {0, 8, 65537, 4194307};
    mt_section("cancel of a completed receive");
    for (int i = 0; i < 4; i++) {
        int n = sz[i], tag = 300 + i, flag = 0;
        MPI_Request r, s;
        MPI_Status st;
        CHECK_MPI(MPI_Irecv(rbuf, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &r));
        mt_fill(sbuf, n, rank, tag, 0);
        CHECK_MPI(MPI_Isend(sbuf, n, MPI_BYTE, right, tag, MPI_COMM_WORLD, &s));
        while (!flag)
            CHECK_MPI(MPI_Request_get_status(r, &flag, &st));
        CHECK(r != MPI_REQUEST_NULL, "Request_get_status must not free the request");
        CHECK_MPI(MPI_Cancel(&r));
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK(!cancelled(&st), "a completed receive (size %d) reported as cancelled", n);
        CHECK_STATUS(&st, left, tag, n, "completed then cancelled receive");
        CHECK_BUF(rbuf, n, left, tag, 0, "completed then cancelled receive");
        CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* the message has arrived (probed) before the Irecv + Cancel: either the
 * receive completes normally, or it is cancelled and the message stays */
static void test_cancel_race(void)
{
    static const int sz[] = {8, 65537, 4194307};
    mt_section("cancel right after matching an arrived message");
    for (int i = 0; i < 3; i++) {
        int n = sz[i], tag = 400 + i;
        MPI_Request r, s;
        MPI_Status st;
        mt_fill(sbuf, n, rank, tag, 0);
        CHECK_MPI(MPI_Isend(sbuf, n, MPI_BYTE, right, tag, MPI_COMM_WORLD, &s));
        CHECK_MPI(MPI_Probe(left, tag, MPI_COMM_WORLD, &st));
        memset(rbuf, 0xA5, (size_t)n + 8);
        CHECK_MPI(MPI_Irecv(rbuf, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Cancel(&r));
        CHECK_MPI(MPI_Wait(&r, &st));
        if (cancelled(&st)) {
            CHECK_CONST(rbuf, (size_t)n + 8, 0xA5, "cancelled receive buffer (size %d)", n);
            CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st));
            CHECK_STATUS(&st, left, tag, n, "message left by a cancelled receive");
            CHECK_BUF(rbuf, n, left, tag, 0, "message left by a cancelled receive");
        } else {
            CHECK_STATUS(&st, left, tag, n, "receive completed despite cancel");
            CHECK_BUF(rbuf, n, left, tag, 0, "receive completed despite cancel");
        }
        CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

static void test_cancel_persistent(void)
{
    MPI_Request r;
    MPI_Status st;
    int n = 65537;
    mt_section("cancel a started persistent receive, then restart it");
    CHECK_MPI(MPI_Recv_init(rbuf, n, MPI_BYTE, left, 500, MPI_COMM_WORLD, &r));
    memset(rbuf, 0xA5, n);
    CHECK_MPI(MPI_Start(&r));
    CHECK_MPI(MPI_Cancel(&r));
    CHECK_MPI(MPI_Wait(&r, &st));
    CHECK(cancelled(&st), "cancelled persistent receive");
    CHECK(r != MPI_REQUEST_NULL, "persistent request survives the cancel");
    CHECK_CONST(rbuf, n, 0xA5, "cancelled persistent receive buffer");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Start(&r));
    mt_fill(sbuf, n, rank, 500, 1);
    CHECK_MPI(MPI_Send(sbuf, n, MPI_BYTE, right, 500, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Wait(&r, &st));
    CHECK(!cancelled(&st), "restarted persistent receive not cancelled");
    CHECK_STATUS(&st, left, 500, n, "restarted persistent receive");
    CHECK_BUF(rbuf, n, left, 500, 1, "restarted persistent receive");
    CHECK_MPI(MPI_Request_free(&r));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "p2p_cancel");
    rank = mt_rank;
    size = mt_size;
    if (size < 2) {
        fprintf(stderr, "p2p_cancel needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    left = (rank - 1 + size) % size;
    right = (rank + 1) % size;
    sbuf = mt_malloc(MT_MAXSIZE + 64);
    rbuf = mt_malloc(MT_MAXSIZE + 64);

    test_cancel_pending();
    test_no_steal();
    test_cancel_some();
    test_cancel_completed();
    test_cancel_race();
    test_cancel_persistent();

    free(sbuf);
    free(rbuf);
    return mt_finalize();
}
