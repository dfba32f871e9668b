/*
 * p2p_modes: buffered, synchronous and ready send modes.
 *  - MPI_Bsend over the size list with MPI_Buffer_attach, the user buffer
 *    overwritten right after each Bsend, receives posted only later;
 *    MPI_Buffer_detach returns the attached buffer/size and blocks until the
 *    buffered messages are gone (the buffer is trashed right after detach);
 *    MPI_Ibsend completes locally; Bsend with too little / no buffer space
 *    returns an error;
 *  - MPI_Issend does NOT complete while the receiver has not posted (tested
 *    many times with progress), not even after the receiver probed it, and
 *    completes once received; MPI_Ssend blocks until the late receiver posts;
 *  - MPI_Rsend / MPI_Irsend with the receive posted before (barrier);
 *  - all modes mixed on one (source, tag) stream keep the send order.
 */
#include "mpitest.h"

static int rank, size, left, right;
static char *sbuf, *rbuf;

static int bsend_bytes(int n)
{
    int ps = 0;
    MPI_Pack_size(n, MPI_BYTE, MPI_COMM_WORLD, &ps);
    return ps + MPI_BSEND_OVERHEAD;
}

static void test_bsend(void)
{
    int total = 0, dsize = -1;
    char *abuf, *dbuf = NULL;
    mt_section("Bsend over the size list");
    for (int i = 0; i < MT_NSIZES; i++)
        total += bsend_bytes(mt_sizes[i]);
    abuf = mt_malloc(total);
    CHECK_MPI(MPI_Buffer_attach(abuf, total));
    for (int i = 0; i < MT_NSIZES; i++) {
        int n = mt_sizes[i];
        mt_fill(sbuf, n, rank, 100 + i, 0);
        CHECK_MPI(MPI_Bsend(sbuf, n, MPI_BYTE, right, 100 + i, MPI_COMM_WORLD));
        memset(sbuf, 0x5A, n); /* Bsend copied the data: we may scribble */
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = MT_NSIZES - 1; i >= 0; i--) {
        int n = mt_sizes[i];
        MPI_Status st;
        CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, left, 100 + i, MPI_COMM_WORLD, &st));
        CHECK_STATUS(&st, left, 100 + i, n, "Bsend size %d", n);
        CHECK_BUF(rbuf, n, left, 100 + i, 0, "Bsend size %d", n);
    }
    CHECK_MPI(MPI_Buffer_detach(&dbuf, &dsize));
    CHECK(dbuf == abuf, "Buffer_detach returns the attached address");
    CHECK_EQ(dsize, total, "Buffer_detach returns the attached size");
    free(abuf);

    mt_section("Ibsend completes locally");
    total = 2 * bsend_bytes(1048576) + 2 * bsend_bytes(100);
    abuf = mt_malloc(total);
    CHECK_MPI(MPI_Buffer_attach(abuf, total));
    {
        static const int sz[4] = {100, 1048576, 1048576, 100};
        MPI_Request rq[4];
        char *b[4];
        for (int k = 0; k < 4; k++) {
            int flag = 0;
            double t0 = MPI_Wtime();
            b[k] = mt_malloc(sz[k]);
            mt_fill(b[k], sz[k], rank, 150, k);
            CHECK_MPI(MPI_Ibsend(b[k], sz[k], MPI_BYTE, right, 150, MPI_COMM_WORLD, &rq[k]));
            while (!flag && MPI_Wtime() - t0 < 10.0)
                CHECK_MPI(MPI_Test(&rq[k], &flag, MPI_STATUS_IGNORE));
            CHECK(flag, "Ibsend #%d of %d bytes did not complete locally (receiver not posted)",
                  k, sz[k]);
            if (!flag)
                CHECK_MPI(MPI_Wait(&rq[k], MPI_STATUS_IGNORE));
            memset(b[k], 0x5A, sz[k]);
        }
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (int k = 0; k < 4; k++) {
            MPI_Status st;
            CHECK_MPI(MPI_Recv(rbuf, sz[k], MPI_BYTE, left, 150, MPI_COMM_WORLD, &st));
            CHECK_STATUS(&st, left, 150, sz[k], "Ibsend #%d", k);
            CHECK_BUF(rbuf, sz[k], left, 150, k, "Ibsend #%d", k);
            free(b[k]);
        }
    }
    CHECK_MPI(MPI_Buffer_detach(&dbuf, &dsize));
    free(abuf);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* detach must wait for the pending buffered sends; afterwards the attach
 * buffer may be reused without corrupting the messages */
static void test_detach_blocks(void)
{
    static const int sz[3] = {8, 65537, 4194307};
    mt_section("Buffer_detach completes pending buffered sends");
    for (int i = 0; i < 3; i++) {
        int n = sz[i], tag = 200 + i;
        /* t0 is taken before the barrier: the receiver leaves the barrier
         * after we entered it and then sleeps 0.2 s before receiving, so a
         * detach that waits for the transfer cannot return before t0+0.2 */
        double t0 = MPI_Wtime();
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (rank % 2 == 0 && rank + 1 < size) {
            int total = bsend_bytes(n) + bsend_bytes(1), dsize;
            char *abuf = mt_malloc(total), *dbuf;
            char one = 1;
            CHECK_MPI(MPI_Buffer_attach(abuf, total));
            mt_fill(sbuf, n, rank, tag, 1);
            CHECK_MPI(MPI_Bsend(sbuf, n, MPI_BYTE, rank + 1, tag, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Bsend(&one, 1, MPI_BYTE, rank + 1, tag + 10, MPI_COMM_WORLD));
            memset(sbuf, 0x5A, n);
            CHECK_MPI(MPI_Buffer_detach(&dbuf, &dsize));
            t0 = MPI_Wtime() - t0;
            CHECK(dbuf == abuf && dsize == total, "detach returns the attached buffer");
            memset(abuf, 0xEE, total); /* must not affect the messages */
            free(abuf);
            if (n > 1048576)
                CHECK(t0 > 0.15, "Buffer_detach returned after %.3f s although a %d-byte "
                      "buffered message could not have been received yet (receiver sleeps 0.2 s)",
                      t0, n);
        } else if (rank % 2 == 1) {
            MPI_Status st;
            char one = 0;
            mt_sleep_ms(200);
            CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, rank - 1, tag, MPI_COMM_WORLD, &st));
            CHECK_STATUS(&st, rank - 1, tag, n, "Bsend+detach size %d", n);
            CHECK_BUF(rbuf, n, rank - 1, tag, 1, "Bsend+detach size %d", n);
            CHECK_MPI(MPI_Recv(&one, 1, MPI_BYTE, rank - 1, tag + 10, MPI_COMM_WORLD, &st));
            CHECK_EQ(one, 1, "second buffered message");
        }
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* A Bsend that needs more buffer space than attached is an error (MPI 4.0
 * sec. 3.4: "An error will occur if there is insufficient buffer space").
 * 1 MiB is above any eager limit, so it really needs buffering.  A small
 * Bsend with no buffer may legally be sent eagerly, so it is not tested.
 * After an error the MPI state is undefined (sec. 9.3), so this runs on a
 * private communicator that is never used again (ob1 loses a sequence
 * number here and the pair is dead afterwards). */
static void test_bsend_errors(void)
{
    int total = bsend_bytes(1000), rc, dsize, cls;
    char *abuf = mt_malloc(total), *dbuf;
    MPI_Comm comm;
    mt_section("Bsend without enough buffer space fails");
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    CHECK_MPI(MPI_Buffer_attach(abuf, total));
    rc = MPI_Bsend(sbuf, 1048576, MPI_BYTE, right, 250, comm);
    cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    if (mt_verbose && rank == 0)
        printf("Bsend with too small a buffer: error class %d\n", cls);
    CHECK(rc != MPI_SUCCESS, "Bsend of 1 MiB with a %d-byte attached buffer returned "
          "MPI_SUCCESS", total);
    CHECK_MPI(MPI_Buffer_detach(&dbuf, &dsize));
    free(abuf);

    rc = MPI_Bsend(sbuf, 1048576, MPI_BYTE, right, 251, comm);
    CHECK(rc != MPI_SUCCESS, "Bsend of 1 MiB with no attached buffer returned MPI_SUCCESS");
    /* comm is left alone: no receive for those messages is ever posted */
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* Issend must not complete before the receiver posts */
static void test_issend(void)
{
    mt_section("Issend incomplete until the receive is posted");
    for (int i = 0; i < MT_NSIZES; i++) {
        int n = mt_sizes[i], tag = 300 + i, flag = 0, early = 0;
        MPI_Request rq;
        MPI_Status st;
        mt_fill(sbuf, n, rank, tag, 0);
        CHECK_MPI(MPI_Issend(sbuf, n, MPI_BYTE, right, tag, MPI_COMM_WORLD, &rq));
        for (int k = 0; k < 40 && !flag; k++) {
            CHECK_MPI(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
            if (k % 4 == 3)
                mt_sleep_ms(1);
        }
        early = flag;
        CHECK(!early, "Issend of %d bytes completed before the receiver posted a receive", n);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st));
        CHECK_STATUS(&st, left, tag, n, "Issend size %d", n);
        CHECK_BUF(rbuf, n, left, tag, 0, "Issend size %d", n);
        if (!early)
            CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    }

    mt_section("Issend incomplete after the receiver only probed it");
    {
        static const int sz[4] = {0, 8, 4097, 1048576};
        for (int i = 0; i < 4; i++) {
            int n = sz[i], tag = 350 + i, flag = 0;
            char note = 0;
            MPI_Request rq;
            MPI_Status st;
            mt_fill(sbuf, n, rank, tag, 1);
            CHECK_MPI(MPI_Issend(sbuf, n, MPI_BYTE, right, tag, MPI_COMM_WORLD, &rq));
            CHECK_MPI(MPI_Probe(left, tag, MPI_COMM_WORLD, &st));
            CHECK_STATUS(&st, left, tag, n, "probe of an Issend message");
            /* tell the sender we probed; the sender checks it is still pending */
            CHECK_MPI(MPI_Sendrecv(&note, 1, MPI_CHAR, left, 399, &note, 1, MPI_CHAR, right, 399,
                                   MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            for (int k = 0; k < 20 && !flag; k++)
                CHECK_MPI(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
            CHECK(!flag, "Issend of %d bytes completed after the receiver only probed it", n);
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st));
            CHECK_STATUS(&st, left, tag, n, "Issend after probe size %d", n);
            CHECK_BUF(rbuf, n, left, tag, 1, "Issend after probe size %d", n);
            if (!flag)
                CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        }
    }
}

/* blocking Ssend lasts at least until the (late) receiver posts */
static void test_ssend_blocks(void)
{
    static const int sz[4] = {0, 8, 65537, 1048576};
    mt_section("Ssend blocks until the late receiver posts");
    for (int i = 0; i < 4; i++) {
        int n = sz[i], tag = 400 + i;
        if (rank % 2 == 0 && rank + 1 < size) {
            /* t0 before the barrier: see test_detach_blocks */
            double t0 = MPI_Wtime();
            mt_fill(sbuf, n, rank, tag, 0);
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            CHECK_MPI(MPI_Ssend(sbuf, n, MPI_BYTE, rank + 1, tag, MPI_COMM_WORLD));
            t0 = MPI_Wtime() - t0;
            CHECK(t0 > 0.14, "Ssend of %d bytes returned after %.3f s, before the receiver "
                  "(sleeping 0.15 s) posted", n, t0);
        } else if (rank % 2 == 1) {
            MPI_Status st;
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            mt_sleep_ms(150);
            CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, rank - 1, tag, MPI_COMM_WORLD, &st));
            CHECK_STATUS(&st, rank - 1, tag, n, "Ssend size %d", n);
            CHECK_BUF(rbuf, n, rank - 1, tag, 0, "Ssend size %d", n);
        } else {
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        }
    }
    /* blocking Ssend in a ring with receives pre-posted */
    for (int i = 0; i < MT_NSIZES; i++) {
        int n = mt_sizes[i], tag = 450 + i;
        MPI_Request rq;
        MPI_Status st;
        CHECK_MPI(MPI_Irecv(rbuf, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &rq));
        mt_fill(sbuf, n, rank, tag, 2);
        CHECK_MPI(MPI_Ssend(sbuf, n, MPI_BYTE, right, tag, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Wait(&rq, &st));
        CHECK_STATUS(&st, left, tag, n, "Ssend ring size %d", n);
        CHECK_BUF(rbuf, n, left, tag, 2, "Ssend ring size %d", n);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

static void test_rsend(void)
{
    MPI_Request rq[MT_NSIZES];
    MPI_Status st[MT_NSIZES];
    char **rb = mt_malloc(sizeof(char *) * MT_NSIZES);
    mt_section("Rsend / Irsend with pre-posted receives");
    for (int i = 0; i < MT_NSIZES; i++) {
        rb[i] = mt_malloc(mt_sizes[i]);
        CHECK_MPI(MPI_Irecv(rb[i], mt_sizes[i], MPI_BYTE, left, 500 + i, MPI_COMM_WORLD, &rq[i]));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < MT_NSIZES; i++) {
        int n = mt_sizes[i];
        mt_fill(sbuf, n, rank, 500 + i, 0);
        if (i % 2 == 0) {
            CHECK_MPI(MPI_Rsend(sbuf, n, MPI_BYTE, right, 500 + i, MPI_COMM_WORLD));
        } else {
            MPI_Request r;
            CHECK_MPI(MPI_Irsend(sbuf, n, MPI_BYTE, right, 500 + i, MPI_COMM_WORLD, &r));
            CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        }
    }
    CHECK_MPI(MPI_Waitall(MT_NSIZES, rq, st));
    for (int i = 0; i < MT_NSIZES; i++) {
        CHECK_STATUS(&st[i], left, 500 + i, mt_sizes[i], "Rsend size %d", mt_sizes[i]);
        CHECK_BUF(rb[i], mt_sizes[i], left, 500 + i, 0, "Rsend size %d", mt_sizes[i]);
        free(rb[i]);
    }
    free(rb);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* all send modes on one (source, tag) stream: order kept */
#define NMODE 8
static void test_mixed_modes_order(void)
{
    static const int sz[NMODE] = {8, 1048576, 100, 4194307, 0, 65537, 4097, 1};
    /* 0 Isend, 1 Ibsend, 2 Issend */
    static const int mode[NMODE] = {0, 1, 2, 0, 1, 2, 2, 0};
    MPI_Request rq[NMODE];
    char *b[NMODE], *abuf, *dbuf;
    int total = 0, dsize;
    mt_section("mixed send modes keep order");
    for (int k = 0; k < NMODE; k++)
        total += bsend_bytes(sz[k]);
    abuf = mt_malloc(total);
    CHECK_MPI(MPI_Buffer_attach(abuf, total));
    for (int k = 0; k < NMODE; k++) {
        b[k] = mt_malloc(sz[k]);
        mt_fill(b[k], sz[k], rank, 600, k);
        if (mode[k] == 0)
            CHECK_MPI(MPI_Isend(b[k], sz[k], MPI_BYTE, right, 600, MPI_COMM_WORLD, &rq[k]));
        else if (mode[k] == 1)
            CHECK_MPI(MPI_Ibsend(b[k], sz[k], MPI_BYTE, right, 600, MPI_COMM_WORLD, &rq[k]));
        else
            CHECK_MPI(MPI_Issend(b[k], sz[k], MPI_BYTE, right, 600, MPI_COMM_WORLD, &rq[k]));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (int k = 0; k < NMODE; k++) {
        MPI_Status st;
        int cnt = -1;
        CHECK_MPI(MPI_Recv(rbuf, MT_MAXSIZE, MPI_BYTE, left, 600, MPI_COMM_WORLD, &st));
        MPI_Get_count(&st, MPI_BYTE, &cnt);
        CHECK_STATUS(&st, left, 600, sz[k], "mixed modes message #%d (mode %d)", k, mode[k]);
        if (cnt == sz[k])
            CHECK_BUF(rbuf, cnt, left, 600, k, "mixed modes message #%d", k);
    }
    CHECK_MPI(MPI_Waitall(NMODE, rq, MPI_STATUSES_IGNORE));
    CHECK_MPI(MPI_Buffer_detach(&dbuf, &dsize));
    for (int k = 0; k < NMODE; k++)
        free(b[k]);
    free(abuf);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "p2p_modes");
    rank = mt_rank;
    size = mt_size;
    if (size < 2) {
        fprintf(stderr, "p2p_modes needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    left = (rank - 1 + size) % size;
    right = (rank + 1) % size;
    sbuf = mt_malloc(MT_MAXSIZE);
    rbuf = mt_malloc(MT_MAXSIZE);

    test_bsend();
    test_detach_blocks();
    test_bsend_errors();
    test_issend();
    test_ssend_blocks();
    test_rsend();
    test_mixed_modes_order();

    free(sbuf);
    free(rbuf);
    return mt_finalize();
}
