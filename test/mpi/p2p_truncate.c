/*
 * p2p_truncate: receive buffer too small (MPI_ERR_TRUNCATE) with
 * MPI_ERRORS_RETURN on the communicator, eager and rendezvous sizes:
 *  - MPI_Recv (unexpected message) and MPI_Irecv + MPI_Wait (posted receive)
 *    return an error of class MPI_ERR_TRUNCATE; status MPI_SOURCE / MPI_TAG
 *    are set, MPI_Get_count <= the receive count, nothing written past the
 *    receive buffer; the sender's send completes with MPI_SUCCESS;
 *  - MPI_Test, MPI_Waitany, MPI_Testany return MPI_ERR_TRUNCATE;
 *    MPI_Waitall, MPI_Testall, MPI_Waitsome, MPI_Testsome return
 *    MPI_ERR_IN_STATUS with MPI_ERROR = MPI_ERR_TRUNCATE in the truncated
 *    request's status and MPI_SUCCESS in the others (whose data is intact);
 *  - MPI_Mrecv, MPI_Sendrecv, ANY_SOURCE receives and self messages;
 *  - after every truncation the next messages on the same pair (same tag,
 *    other tag, small and large) still arrive intact: nothing lost, no hang.
 */
#include "mpitest.h"

#define GUARD 64

static int rank, size, left, right;
static char *sbuf, *rbuf, *fbuf;
static MPI_Comm comm;

/* (message size, receive count) pairs straddling eager/rendezvous */
static const int cases[][2] = {
    {1, 0},           {100, 50},       {4096, 4095},     {4097, 4096},   {8193, 100},
    {65537, 65536},   {262144, 8},     {1048576, 1000},  {1048576, 1048575},
    {4194307, 65536}, {4194307, 4194306},
};
#define NCASES ((int)(sizeof(cases) / sizeof(cases[0])))

static void check_trunc_status(const MPI_Status *st, int src, int tag, int m, const char *what,
                               int n)
{
    int cnt = -1;
    MPI_Get_count(st, MPI_BYTE, &cnt);
    CHECK_EQ(st->MPI_SOURCE, src, "%s: MPI_SOURCE of truncated %d->%d", what, n, m);
    CHECK_EQ(st->MPI_TAG, tag, "%s: MPI_TAG of truncated %d->%d", what, n, m);
    /* the count of a truncated receive is not defined by the standard (ob1
     * and ucx report the full message size); it must be sane though */
    CHECK(cnt >= 0 && cnt <= n, "%s: MPI_Get_count %d of a %d-byte message truncated to %d",
          what, cnt, n, m);
}

/* Nothing may be written past the receive buffer.  Open MPI 4.1.4 ob1 writes
 * the whole message (above its eager limit) into the too-small buffer. */
#define OB1_OVERFLOW_BUG "truncated receive of a rendezvous-size message writes the whole " \
                         "message past the end of the receive buffer"
static void check_guard(const char *p, const char *what, int n, int m)
{
    CHECK_WAIVED(mt_verify_const(p, GUARD, 0xA5) < 0, "ob1", OB1_OVERFLOW_BUG,
                 "%s: bytes after the receive buffer modified, %d->%d", what, n, m);
}

/* Open MPI's request layer does not free a request that failed in
 * Wait/Test*; release it so the next Wait*any/some does not return it again */
static void release(MPI_Request *r)
{
    if (*r != MPI_REQUEST_NULL)
        CHECK_MPI(MPI_Request_free(r));
}

/* the pair keeps working: after each truncation every rank sends its right
 * neighbour a same-tag and an other-tag message; both must arrive intact
 * (received other tag first) */
static void followups(int tag, int n, const char *what)
{
    int f = n > 65536 ? 65537 : n + 3;
    char small[5];
    MPI_Request rq[2];
    MPI_Status st;
    mt_fill(fbuf, f, rank, tag, 77);
    mt_fill(small, 5, rank, tag + 1, 78);
    CHECK_MPI(MPI_Isend(fbuf, f, MPI_BYTE, right, tag, comm, &rq[0]));
    CHECK_MPI(MPI_Isend(small, 5, MPI_BYTE, right, tag + 1, comm, &rq[1]));
    CHECK_MPI(MPI_Recv(rbuf, 5, MPI_BYTE, left, tag + 1, comm, &st));
    CHECK_STATUS(&st, left, tag + 1, 5, "%s: other-tag follow-up after truncating %d", what, n);
    CHECK_BUF(rbuf, 5, left, tag + 1, 78, "%s: other-tag follow-up", what);
    CHECK_MPI(MPI_Recv(rbuf, f, MPI_BYTE, left, tag, comm, &st));
    CHECK_STATUS(&st, left, tag, f, "%s: same-tag follow-up after truncating %d", what, n);
    CHECK_BUF(rbuf, f, left, tag, 77, "%s: same-tag follow-up", what);
    CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
}

/* blocking Recv of an unexpected message / Irecv+Wait of a posted one */
static void test_recv_wait(void)
{
    for (int posted = 0; posted < 2; posted++) {
        mt_section(posted ? "Irecv+Wait truncation (posted receive)"
                          : "Recv truncation (unexpected message)");
        for (int c = 0; c < NCASES; c++) {
            int n = cases[c][0], m = cases[c][1], tag = 100 + 10 * c + posted * 200, rc;
            MPI_Request sr, rr = MPI_REQUEST_NULL;
            MPI_Status st;
            memset(rbuf, 0xA5, (size_t)n + GUARD);
            if (posted)
                CHECK_MPI(MPI_Irecv(rbuf, m, MPI_BYTE, left, tag, comm, &rr));
            CHECK_MPI(MPI_Barrier(comm));
            mt_fill(sbuf, n, rank, tag, 0);
            CHECK_MPI(MPI_Isend(sbuf, n, MPI_BYTE, right, tag, comm, &sr));
            if (posted) {
                rc = MPI_Wait(&rr, &st);
            } else {
                CHECK_MPI(MPI_Probe(left, tag, comm, &st)); /* make sure it is unexpected */
                rc = MPI_Recv(rbuf, m, MPI_BYTE, left, tag, comm, &st);
            }
            CHECK_ERRCLASS(rc, MPI_ERR_TRUNCATE, "%s of %d bytes into %d", posted ? "Wait" : "Recv",
                           n, m);
            check_trunc_status(&st, left, tag, m, posted ? "Wait" : "Recv", n);
            check_guard(rbuf + m, posted ? "Wait" : "Recv", n, m);
            CHECK_MPI(MPI_Wait(&sr, &st)); /* the sender sees no error */
            if (posted)
                release(&rr);
            followups(tag, n, posted ? "Wait" : "Recv");
        }
    }
    CHECK_MPI(MPI_Barrier(comm));
}

/* three receives, the middle one truncates; completed with every
 * multi-completion call (and MPI_Test) */
static void test_multi(void)
{
    static const char *names[] = {"Waitall", "Testall", "Waitsome", "Testsome", "Waitany",
                                  "Testany", "Test"};
    for (int c = 0; c < NCASES; c += 2) {
        int n = cases[c][0], m = cases[c][1];
        for (int how = 0; how < 7; how++) {
            int tag = 1000 + 100 * how + c, ok = 700, rc = MPI_SUCCESS;
            MPI_Request rr[3];
            MPI_Status st[3];
            char *rb[3];
            int cnt[3] = {ok, m, ok}, len[3] = {ok, n, ok}, rcs[3], fin[3] = {0, 0, 0};
            double t0;
            mt_section(names[how]);
            for (int k = 0; k < 3; k++) {
                rb[k] = mt_malloc(len[k] + GUARD);
                memset(rb[k], 0xA5, len[k] + GUARD);
                CHECK_MPI(MPI_Irecv(rb[k], cnt[k], MPI_BYTE, left, tag + 10 * k, comm, &rr[k]));
                st[k].MPI_ERROR = -77;
                rcs[k] = -77;
            }
            CHECK_MPI(MPI_Barrier(comm));
            for (int k = 0; k < 3; k++) { /* receives are posted: blocking sends are safe */
                char *b = mt_malloc(len[k]);
                mt_fill(b, len[k], rank, tag + 10 * k, k);
                CHECK_MPI(MPI_Send(b, len[k], MPI_BYTE, right, tag + 10 * k, comm));
                free(b);
            }
            t0 = MPI_Wtime();
            switch (how) {
            case 0:
            case 1: {
                int flag = 0;
                if (how == 0) {
                    rc = MPI_Waitall(3, rr, st);
                    flag = 1;
                } else {
                    while (!flag && MPI_Wtime() - t0 < 30)
                        rc = MPI_Testall(3, rr, &flag, st);
                }
                if (!CHECK(flag, "Testall never completed"))
                    break;
                CHECK_ERRCLASS(rc, MPI_ERR_IN_STATUS, "%s with a truncated request, %d->%d",
                               names[how], n, m);
                for (int k = 0; k < 3; k++) {
                    rcs[k] = rc == MPI_ERR_IN_STATUS ? st[k].MPI_ERROR : rc;
                    if (rc == MPI_ERR_IN_STATUS && st[k].MPI_ERROR == MPI_ERR_PENDING)
                        /* allowed: neither failed nor completed yet */
                        rcs[k] = MPI_Wait(&rr[k], &st[k]);
                    release(&rr[k]);
                    fin[k] = 1;
                }
                break;
            }
            case 2:
            case 3: {
                int nfin = 0, seen_err = 0;
                while (nfin < 3 && MPI_Wtime() - t0 < 30) {
                    int outc = 0, idx[3];
                    MPI_Status sst[3];
                    if (how == 2)
                        rc = MPI_Waitsome(3, rr, &outc, idx, sst);
                    else
                        rc = MPI_Testsome(3, rr, &outc, idx, sst);
                    if (!CHECK(outc != MPI_UNDEFINED, "%s: no active request left", names[how]))
                        break;
                    if (rc != MPI_SUCCESS) {
                        seen_err = 1;
                        CHECK_ERRCLASS(rc, MPI_ERR_IN_STATUS, "%s return value", names[how]);
                    }
                    for (int j = 0; j < outc; j++) {
                        int k = idx[j];
                        if (!CHECK(k >= 0 && k < 3 && !fin[k], "%s returned index %d twice",
                                   names[how], k))
                            continue;
                        st[k] = sst[j];
                        /* with MPI_SUCCESS the MPI_ERROR fields are not set */
                        rcs[k] = (rc == MPI_ERR_IN_STATUS) ? sst[j].MPI_ERROR : MPI_SUCCESS;
                        fin[k] = 1;
                        nfin++;
                        release(&rr[k]);
                    }
                }
                CHECK(seen_err, "%s never reported MPI_ERR_IN_STATUS", names[how]);
                break;
            }
            case 4:
            case 5:
                for (int j = 0; j < 3; j++) {
                    int idx = MPI_UNDEFINED, flag = 0;
                    MPI_Status s1;
                    if (how == 4) {
                        rc = MPI_Waitany(3, rr, &idx, &s1);
                    } else {
                        while (!flag && MPI_Wtime() - t0 < 30)
                            rc = MPI_Testany(3, rr, &idx, &flag, &s1);
                    }
                    if (!CHECK(idx >= 0 && idx < 3 && !fin[idx], "%s index %d", names[how], idx))
                        break;
                    st[idx] = s1;
                    rcs[idx] = rc;
                    fin[idx] = 1;
                    release(&rr[idx]);
                }
                break;
            case 6:
                for (int k = 0; k < 3; k++) {
                    int flag = 0;
                    while (!flag && MPI_Wtime() - t0 < 30)
                        rcs[k] = MPI_Test(&rr[k], &flag, &st[k]);
                    fin[k] = flag;
                    release(&rr[k]);
                }
                break;
            }
            if (!CHECK(fin[0] && fin[1] && fin[2], "%s did not complete all requests (rc %d)",
                       names[how], rc)) {
                /* leak the buffers: a request may still write into them */
                continue;
            }
            for (int k = 0; k < 3; k++) {
                if (k == 1) {
                    CHECK_ERRCLASS(rcs[k], MPI_ERR_TRUNCATE, "%s: truncated request %d->%d",
                                   names[how], n, m);
                    check_trunc_status(&st[k], left, tag + 10, m, names[how], n);
                    check_guard(rb[k] + cnt[k], names[how], n, m);
                } else {
                    CHECK_ERRCLASS(rcs[k], MPI_SUCCESS, "%s: intact request #%d", names[how], k);
                    CHECK_STATUS(&st[k], left, tag + 10 * k, ok, "%s: intact request #%d",
                                 names[how], k);
                    CHECK_BUF(rb[k], ok, left, tag + 10 * k, k, "%s: intact request #%d",
                              names[how], k);
                    CHECK_CONST(rb[k] + ok, GUARD, 0xA5, "%s: after intact request #%d",
                                names[how], k);
                }
                free(rb[k]);
            }
            followups(tag + 10, n, names[how]);
        }
    }
    CHECK_MPI(MPI_Barrier(comm));
}

static void test_misc(void)
{
    mt_section("Mrecv / Sendrecv / ANY_SOURCE / self truncation");
    const char *leakcheck = getenv("MPITEST_FAIL_ON_LEAK");
    const int sendrecv_leaks_skipped = leakcheck && atoi(leakcheck) == 1;
    if (sendrecv_leaks_skipped && rank == 0)
        printf("NOTE: Sendrecv truncation skipped under the finalize leak check (Open MPI 4.1.4's MPI_Sendrecv "
               "leaves its failed receive request)\n");
    for (int c = 0; c < NCASES; c++) {
        int n = cases[c][0], m = cases[c][1], tag = 3000 + 10 * c, rc;
        MPI_Message msg;
        MPI_Status st;
        MPI_Request sr;

        /* Mrecv */
        mt_fill(sbuf, n, rank, tag, 1);
        CHECK_MPI(MPI_Isend(sbuf, n, MPI_BYTE, right, tag, comm, &sr));
        CHECK_MPI(MPI_Mprobe(left, tag, comm, &msg, &st));
        memset(rbuf, 0xA5, (size_t)n + GUARD);
        rc = MPI_Mrecv(rbuf, m, MPI_BYTE, &msg, &st);
        CHECK_ERRCLASS(rc, MPI_ERR_TRUNCATE, "Mrecv %d into %d", n, m);
        check_trunc_status(&st, left, tag, m, "Mrecv", n);
        check_guard(rbuf + m, "Mrecv", n, m);
        CHECK_MPI(MPI_Wait(&sr, MPI_STATUS_IGNORE));
        followups(tag, n, "Mrecv");

        /* Sendrecv.  Open MPI 4.1.4's MPI_Sendrecv loses the receive
         * request when it fails (ompi_request_wait does not free a failed
         * request and Sendrecv drops the handle): one request per call is
         * left at finalize whatever the PML, so the finalize leak check
         * (scripts/sanitize.sh leaks, which sets MPITEST_FAIL_ON_LEAK)
         * would report it; skipped there. */
        if (!sendrecv_leaks_skipped) {
            memset(rbuf, 0xA5, (size_t)n + GUARD);
            mt_fill(sbuf, n, rank, tag + 2, 2);
            rc = MPI_Sendrecv(sbuf, n, MPI_BYTE, right, tag + 2, rbuf, m, MPI_BYTE, left, tag + 2,
                              comm, &st);
            CHECK_ERRCLASS(rc, MPI_ERR_TRUNCATE, "Sendrecv %d into %d", n, m);
            check_trunc_status(&st, left, tag + 2, m, "Sendrecv", n);
            check_guard(rbuf + m, "Sendrecv", n, m);
            followups(tag + 2, n, "Sendrecv");
        }

        /* ANY_SOURCE, posted */
        {
            MPI_Request rr;
            memset(rbuf, 0xA5, (size_t)n + GUARD);
            CHECK_MPI(MPI_Irecv(rbuf, m, MPI_BYTE, MPI_ANY_SOURCE, tag + 4, comm, &rr));
            CHECK_MPI(MPI_Barrier(comm));
            mt_fill(sbuf, n, rank, tag + 4, 3);
            CHECK_MPI(MPI_Isend(sbuf, n, MPI_BYTE, right, tag + 4, comm, &sr));
            rc = MPI_Wait(&rr, &st);
            CHECK_ERRCLASS(rc, MPI_ERR_TRUNCATE, "ANY_SOURCE %d into %d", n, m);
            check_trunc_status(&st, left, tag + 4, m, "ANY_SOURCE", n);
            check_guard(rbuf + m, "ANY_SOURCE", n, m);
            release(&rr);
            CHECK_MPI(MPI_Wait(&sr, MPI_STATUS_IGNORE));
            followups(tag + 4, n, "ANY_SOURCE");
        }

        /* self */
        memset(rbuf, 0xA5, (size_t)n + GUARD);
        mt_fill(sbuf, n, rank, tag + 6, 4);
        CHECK_MPI(MPI_Isend(sbuf, n, MPI_BYTE, rank, tag + 6, comm, &sr));
        rc = MPI_Recv(rbuf, m, MPI_BYTE, rank, tag + 6, comm, &st);
        CHECK_ERRCLASS(rc, MPI_ERR_TRUNCATE, "self %d into %d", n, m);
        check_trunc_status(&st, rank, tag + 6, m, "self", n);
        check_guard(rbuf + m, "self", n, m);
        CHECK_MPI(MPI_Wait(&sr, MPI_STATUS_IGNORE));
        {
            MPI_Request a, b;
            int f = n > 65536 ? 65537 : n + 3;
            char *t = mt_malloc(f);
            mt_fill(t, f, rank, tag + 6, 77);
            CHECK_MPI(MPI_Isend(t, f, MPI_BYTE, rank, tag + 6, comm, &a));
            CHECK_MPI(MPI_Irecv(rbuf, f, MPI_BYTE, rank, tag + 6, comm, &b));
            CHECK_MPI(MPI_Wait(&b, &st));
            CHECK_MPI(MPI_Wait(&a, MPI_STATUS_IGNORE));
            CHECK_STATUS(&st, rank, tag + 6, f, "self follow-up");
            CHECK_BUF(rbuf, f, rank, tag + 6, 77, "self follow-up");
            free(t);
        }
        CHECK_MPI(MPI_Barrier(comm));
    }
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "p2p_truncate");
    rank = mt_rank;
    size = mt_size;
    if (size < 2) {
        fprintf(stderr, "p2p_truncate needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    left = (rank - 1 + size) % size;
    right = (rank + 1) % size;
    sbuf = mt_malloc(MT_MAXSIZE + GUARD);
    rbuf = mt_malloc(MT_MAXSIZE + GUARD);
    fbuf = mt_malloc(MT_MAXSIZE + GUARD);
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    CHECK_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));

    test_recv_wait();
    test_multi();
    test_misc();

    CHECK_MPI(MPI_Comm_free(&comm));
    free(sbuf);
    free(rbuf);
    free(fbuf);
    return mt_finalize();
}
