/*
 * p2p_persistent: persistent requests.
 *  - MPI_Send_init / MPI_Recv_init ring over the size list, restarted many
 *    times with MPI_Start and MPI_Startall, the send data changed every
 *    iteration (the request must not cache the data), completed with
 *    Wait/Waitall/Test/Testall loops; statuses checked every time;
 *  - MPI_Bsend_init (attached buffer), MPI_Ssend_init (does not complete
 *    before the receive is started), MPI_Rsend_init (receive started before a
 *    barrier);
 *  - Recv_init with MPI_ANY_SOURCE / MPI_ANY_TAG; self persistent pair;
 *  - Wait/Test on an inactive persistent request returns at once with an
 *    empty status; MPI_Request_free of an inactive (used or never started)
 *    persistent request sets MPI_REQUEST_NULL.
 */
#include "mpitest.h"

static int rank, size, left, right;
static char *sbuf, *rbuf;

static int iters_for(int n) { return n <= 65537 ? 12 : (n <= 1048576 ? 4 : 2); }

static void check_empty_status(const MPI_Status *st, const char *what)
{
    int cnt = -1;
    MPI_Get_count(st, MPI_BYTE, &cnt);
    CHECK_EQ(st->MPI_SOURCE, MPI_ANY_SOURCE, "%s: empty status MPI_SOURCE", what);
    CHECK_EQ(st->MPI_TAG, MPI_ANY_TAG, "%s: empty status MPI_TAG", what);
    CHECK_EQ(cnt, 0, "%s: empty status count", what);
}

static void test_send_recv_init(void)
{
    mt_section("Send_init/Recv_init ring, Start/Startall");
    for (int i = 0; i < MT_NSIZES; i++) {
        int n = mt_sizes[i], tag = 100 + i, iters = iters_for(n);
        MPI_Request rq[2]; /* [0] recv, [1] send */
        MPI_Status st[2];
        CHECK_MPI(MPI_Recv_init(rbuf, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &rq[0]));
        CHECK_MPI(MPI_Send_init(sbuf, n, MPI_BYTE, right, tag, MPI_COMM_WORLD, &rq[1]));
        for (int it = 0; it < iters; it++) {
            int how = (it + i) % 4;
            mt_fill(sbuf, n, rank, tag, it);
            memset(rbuf, 0xA5, (size_t)n + 8);
            if (how == 0) {
                CHECK_MPI(MPI_Start(&rq[0]));
                CHECK_MPI(MPI_Start(&rq[1]));
                CHECK_MPI(MPI_Wait(&rq[1], &st[1]));
                CHECK_MPI(MPI_Wait(&rq[0], &st[0]));
            } else if (how == 1) {
                CHECK_MPI(MPI_Startall(2, rq));
                CHECK_MPI(MPI_Waitall(2, rq, st));
            } else if (how == 2) {
                int flag = 0;
                CHECK_MPI(MPI_Startall(2, rq));
                while (!flag)
                    CHECK_MPI(MPI_Testall(2, rq, &flag, st));
            } else {
                int f0 = 0, f1 = 0;
                CHECK_MPI(MPI_Start(&rq[1]));
                CHECK_MPI(MPI_Start(&rq[0]));
                while (!f0 || !f1) {
                    if (!f0)
                        CHECK_MPI(MPI_Test(&rq[0], &f0, &st[0]));
                    if (!f1)
                        CHECK_MPI(MPI_Test(&rq[1], &f1, &st[1]));
                }
            }
            CHECK(rq[0] != MPI_REQUEST_NULL && rq[1] != MPI_REQUEST_NULL,
                  "persistent requests stay allocated after completion (size %d)", n);
            CHECK_STATUS(&st[0], left, tag, n, "persistent size %d iter %d (method %d)", n, it, how);
            CHECK_BUF(rbuf, n, left, tag, it, "persistent size %d iter %d (method %d)", n, it,
                      how);
            CHECK_CONST(rbuf + n, 8, 0xA5, "persistent size %d iter %d", n, it);
        }
        /* inactive persistent requests: Wait/Test return at once, empty status */
        {
            MPI_Status es;
            int flag = 0;
            CHECK_MPI(MPI_Wait(&rq[0], &es));
            check_empty_status(&es, "Wait on an inactive persistent recv");
            CHECK_MPI(MPI_Test(&rq[1], &flag, &es));
            CHECK_EQ(flag, 1, "Test on an inactive persistent send");
            check_empty_status(&es, "Test on an inactive persistent send");
        }
        CHECK_MPI(MPI_Request_free(&rq[0]));
        CHECK_MPI(MPI_Request_free(&rq[1]));
        CHECK(rq[0] == MPI_REQUEST_NULL && rq[1] == MPI_REQUEST_NULL,
              "Request_free sets MPI_REQUEST_NULL");
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* one Recv_init per peer, all started together; a wildcard variant */
static void test_allpairs_wildcards(void)
{
    int np = size - 1, n = 70000, iters = 6;
    MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * 2 * np);
    MPI_Status *st = mt_malloc(sizeof(MPI_Status) * 2 * np);
    char **rb = mt_malloc(sizeof(char *) * np);
    int *seen = mt_malloc(sizeof(int) * size);
    mt_section("persistent all-pairs with ANY_SOURCE/ANY_TAG Recv_init");
    for (int p = 0; p < np; p++) {
        rb[p] = mt_malloc(n + rank + size);
        /* sends: one request per peer, same buffer (read-only) */
        CHECK_MPI(MPI_Send_init(sbuf, n + rank, MPI_BYTE, (rank + 1 + p) % size, 300 + rank,
                                MPI_COMM_WORLD, &rq[np + p]));
        CHECK_MPI(MPI_Recv_init(rb[p], n + size, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
                                MPI_COMM_WORLD, &rq[p]));
    }
    for (int it = 0; it < iters; it++) {
        mt_fill(sbuf, n + rank, rank, 300 + rank, it);
        CHECK_MPI(MPI_Startall(2 * np, rq));
        CHECK_MPI(MPI_Waitall(2 * np, rq, st));
        memset(seen, 0, sizeof(int) * size);
        for (int p = 0; p < np; p++) {
            int s = st[p].MPI_SOURCE;
            if (!CHECK(s >= 0 && s < size && s != rank, "bad source %d", s))
                continue;
            seen[s]++;
            CHECK_STATUS(&st[p], s, 300 + s, n + s, "wildcard persistent iter %d", it);
            CHECK_BUF(rb[p], n + s, s, 300 + s, it, "wildcard persistent iter %d", it);
        }
        for (int s = 0; s < size; s++)
            CHECK_EQ(seen[s], s == rank ? 0 : 1, "iter %d: messages from %d", it, s);
        /* wildcard receives need the next iteration's messages to stay out */
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    for (int p = 0; p < 2 * np; p++)
        CHECK_MPI(MPI_Request_free(&rq[p]));
    for (int p = 0; p < np; p++)
        free(rb[p]);
    free(rb);
    free(rq);
    free(st);
    free(seen);
}

static void test_modes_init(void)
{
    static const int sz[] = {0, 8, 4097, 65537, 1048576, 4194307};
    mt_section("Bsend_init / Ssend_init / Rsend_init");
    for (int i = 0; i < 6; i++) {
        int n = sz[i], tag = 400 + i, iters = iters_for(n) / 2 + 1;
        int bsize = 0, ps = 0, dsize;
        char *abuf, *dbuf;
        MPI_Request rb, rs, rr, rrecv[3];
        MPI_Status st[3];
        char *r2 = mt_malloc(n), *r3 = mt_malloc(n), *s2 = mt_malloc(n), *s3 = mt_malloc(n);

        MPI_Pack_size(n, MPI_BYTE, MPI_COMM_WORLD, &ps);
        /* room for every iteration: buffer space is released asynchronously */
        bsize = iters * (ps + MPI_BSEND_OVERHEAD);
        abuf = mt_malloc(bsize);
        CHECK_MPI(MPI_Buffer_attach(abuf, bsize));
        CHECK_MPI(MPI_Bsend_init(sbuf, n, MPI_BYTE, right, tag, MPI_COMM_WORLD, &rb));
        CHECK_MPI(MPI_Ssend_init(s2, n, MPI_BYTE, right, tag + 10, MPI_COMM_WORLD, &rs));
        CHECK_MPI(MPI_Rsend_init(s3, n, MPI_BYTE, right, tag + 20, MPI_COMM_WORLD, &rr));
        CHECK_MPI(MPI_Recv_init(rbuf, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &rrecv[0]));
        CHECK_MPI(MPI_Recv_init(r2, n, MPI_BYTE, left, tag + 10, MPI_COMM_WORLD, &rrecv[1]));
        CHECK_MPI(MPI_Recv_init(r3, n, MPI_BYTE, left, tag + 20, MPI_COMM_WORLD, &rrecv[2]));
        for (int it = 0; it < iters; it++) {
            int flag = 0;
            mt_fill(sbuf, n, rank, tag, it);
            mt_fill(s2, n, rank, tag + 10, it);
            mt_fill(s3, n, rank, tag + 20, it);
            /* buffered: completes locally before any receive is started */
            CHECK_MPI(MPI_Start(&rb));
            CHECK_MPI(MPI_Wait(&rb, MPI_STATUS_IGNORE));
            memset(sbuf, 0x5A, n);
            /* synchronous: must not complete while the receive is not started */
            CHECK_MPI(MPI_Start(&rs));
            for (int k = 0; k < 20 && !flag; k++)
                CHECK_MPI(MPI_Test(&rs, &flag, MPI_STATUS_IGNORE));
            CHECK(!flag, "persistent Ssend of %d bytes completed before the receive started", n);
            /* ready: receive started before the barrier */
            CHECK_MPI(MPI_Start(&rrecv[2]));
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            CHECK_MPI(MPI_Start(&rr));
            CHECK_MPI(MPI_Startall(2, rrecv));
            CHECK_MPI(MPI_Waitall(3, rrecv, st));
            if (!flag)
                CHECK_MPI(MPI_Wait(&rs, MPI_STATUS_IGNORE));
            CHECK_MPI(MPI_Wait(&rr, MPI_STATUS_IGNORE));
            CHECK_STATUS(&st[0], left, tag, n, "Bsend_init size %d iter %d", n, it);
            /* Open MPI 4.1.4 ob1: a persistent buffered send restarted after
             * the previous transfer fully completed reuses the freed attach
             * buffer segment instead of re-packing the user buffer (above
             * the eager limit), so iterations >= 1 deliver stale data */
            CHECK_WAIVED(mt_verify(rbuf, n, left, tag, it) < 0, "ob1",
                         "restarted MPI_Bsend_init request sends stale data from the "
                         "attach buffer (pml_ob1_start/start_buffered reuse req_send.req_addr)",
                         "Bsend_init size %d iter %d: data mismatch", n, it);
            CHECK_STATUS(&st[1], left, tag + 10, n, "Ssend_init size %d iter %d", n, it);
            CHECK_BUF(r2, n, left, tag + 10, it, "Ssend_init size %d iter %d", n, it);
            CHECK_STATUS(&st[2], left, tag + 20, n, "Rsend_init size %d iter %d", n, it);
            CHECK_BUF(r3, n, left, tag + 20, it, "Rsend_init size %d iter %d", n, it);
            /* nobody may start the next ready send before our receive is started */
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        }
        CHECK_MPI(MPI_Request_free(&rb));
        CHECK_MPI(MPI_Request_free(&rs));
        CHECK_MPI(MPI_Request_free(&rr));
        for (int k = 0; k < 3; k++)
            CHECK_MPI(MPI_Request_free(&rrecv[k]));
        CHECK_MPI(MPI_Buffer_detach(&dbuf, &dsize));
        free(abuf);
        free(r2);
        free(r3);
        free(s2);
        free(s3);
    }
}

static void test_self_and_free(void)
{
    mt_section("persistent self pair, Request_free of never-started requests");
    for (int i = 0; i < MT_NSIZES; i += 3) {
        int n = mt_sizes[i], tag = 500 + i;
        MPI_Request rq[2];
        MPI_Status st[2];
        CHECK_MPI(MPI_Send_init(sbuf, n, MPI_BYTE, rank, tag, MPI_COMM_WORLD, &rq[0]));
        CHECK_MPI(MPI_Recv_init(rbuf, n, MPI_BYTE, rank, tag, MPI_COMM_WORLD, &rq[1]));
        for (int it = 0; it < 3; it++) {
            mt_fill(sbuf, n, rank, tag, it);
            CHECK_MPI(MPI_Startall(2, rq));
            CHECK_MPI(MPI_Waitall(2, rq, st));
            CHECK_STATUS(&st[1], rank, tag, n, "self persistent size %d iter %d", n, it);
            CHECK_BUF(rbuf, n, rank, tag, it, "self persistent size %d iter %d", n, it);
        }
        CHECK_MPI(MPI_Request_free(&rq[0]));
        CHECK_MPI(MPI_Request_free(&rq[1]));
    }
    /* never started */
    for (int k = 0; k < 50; k++) {
        MPI_Request r1, r2;
        CHECK_MPI(MPI_Send_init(sbuf, 1000, MPI_BYTE, right, 600, MPI_COMM_WORLD, &r1));
        CHECK_MPI(MPI_Recv_init(rbuf, 1048576, MPI_BYTE, MPI_ANY_SOURCE, 600, MPI_COMM_WORLD, &r2));
        CHECK_MPI(MPI_Request_free(&r1));
        CHECK_MPI(MPI_Request_free(&r2));
        CHECK(r1 == MPI_REQUEST_NULL && r2 == MPI_REQUEST_NULL, "Request_free -> REQUEST_NULL");
    }
    /* nothing may have been sent by the freed requests */
    {
        int flag = 1;
        MPI_Status st;
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, 600, MPI_COMM_WORLD, &flag, &st));
        CHECK(!flag, "a never-started persistent send delivered a message");
    }
    /* a persistent recv created but not started does not catch messages */
    {
        MPI_Request pr;
        MPI_Status st;
        CHECK_MPI(MPI_Recv_init(rbuf, 100, MPI_BYTE, left, 700, MPI_COMM_WORLD, &pr));
        mt_fill(sbuf, 100, rank, 700, 0);
        CHECK_MPI(MPI_Sendrecv(sbuf, 100, MPI_BYTE, right, 700, rbuf + 200, 100, MPI_BYTE, left,
                               700, MPI_COMM_WORLD, &st));
        CHECK_STATUS(&st, left, 700, 100, "plain recv next to an inactive Recv_init");
        CHECK_BUF(rbuf + 200, 100, left, 700, 0, "plain recv next to an inactive Recv_init");
        CHECK_MPI(MPI_Request_free(&pr));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "p2p_persistent");
    rank = mt_rank;
    size = mt_size;
    if (size < 2) {
        fprintf(stderr, "p2p_persistent needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    left = (rank - 1 + size) % size;
    right = (rank + 1) % size;
    sbuf = mt_malloc(MT_MAXSIZE + 64);
    rbuf = mt_malloc(MT_MAXSIZE + 64);

    test_send_recv_init();
    test_allpairs_wildcards();
    test_modes_init();
    test_self_and_free();

    free(sbuf);
    free(rbuf);
    return mt_finalize();
}
