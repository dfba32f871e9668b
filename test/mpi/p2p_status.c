/*
 * p2p_status: single-completion functions leave status.MPI_ERROR alone.
 *
 * MPI 3.1 section 3.2.5: "message-passing calls do not modify the value of
 * the error code field of status variables.  This field may be updated only
 * by the functions in Section 3.7.5 that return multiple statuses"
 * (Waitall, Waitsome, Testall, Testsome).  MPICH's pt2pt/mprobe checks it.
 * Every status below is preset to a sentinel error class and must come back
 * with that sentinel after:
 *  - Recv (message unexpected and receive posted first, truncated with
 *    MPI_ERRORS_RETURN: the error is only the return value), self Recv;
 *  - Probe, Iprobe, Mprobe, Improbe, Mrecv, Imrecv + Wait / Test;
 *  - Irecv + Wait / Test / Waitany / Testany / Request_get_status;
 *  - Recv_init + Start + Wait / Test (restarted);
 *  - Sendrecv, Sendrecv_replace; Isend/Issend/Send_init completions;
 *  - a cancelled Irecv + Wait; PROC_NULL receives and probes;
 * over sizes from empty to 4 MiB+3 (eager and every rendezvous path), with
 * source, tag, count and data checked too.  Waitall/Testall/Waitsome/Testsome
 * on the same requests set MPI_ERROR = MPI_SUCCESS (they may).
 */
#include "mpitest.h"

#define SENTINEL MPI_ERR_DIMS

static int rank, size, left, right;
static char *sbuf, *rbuf;
static MPI_Comm trunc_comm;

static const int sizes[] = {0, 1, 100, 4097, 8193, 65537, 1048576, 4 * 1048576 + 3};
#define NS ((int)(sizeof(sizes) / sizeof(sizes[0])))

static void preset(MPI_Status *st)
{
    st->MPI_SOURCE = -7;
    st->MPI_TAG = -7;
    st->MPI_ERROR = SENTINEL;
}

#define CHECK_UNTOUCHED(st, what, n)                                                                  \
    CHECK((st)->MPI_ERROR == SENTINEL, "%s, size %d: MPI_ERROR written (%d, sentinel %d)", what, n, \
          (st)->MPI_ERROR, SENTINEL)

/* send to the right and run `body` as the receive from the left */
static void start_send(int n, int tag, MPI_Request *rq, int sync)
{
    mt_fill(sbuf, n, rank, tag, 0);
    if (sync)
        CHECK_MPI(MPI_Issend(sbuf, n, MPI_BYTE, right, tag, MPI_COMM_WORLD, rq));
    else
        CHECK_MPI(MPI_Isend(sbuf, n, MPI_BYTE, right, tag, MPI_COMM_WORLD, rq));
}

static void finish_send(MPI_Request *rq, const char *what, int n)
{
    MPI_Status st;
    preset(&st);
    CHECK_MPI(MPI_Wait(rq, &st));
    CHECK_UNTOUCHED(&st, what, n);
}

static void check_recv(const MPI_Status *st, int n, int tag, const char *what)
{
    CHECK_UNTOUCHED(st, what, n);
    CHECK_STATUS(st, left, tag, n, "%s size %d", what, n);
    CHECK_BUF(rbuf, n, left, tag, 0, "%s size %d", what, n);
}

static void test_recv(int n, int base)
{
    MPI_Status st;
    MPI_Request rq;
    int tag = base;

    mt_section("Recv, message unexpected");
    start_send(n, tag, &rq, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    preset(&st);
    CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st));
    check_recv(&st, n, tag, "Recv unexpected");
    finish_send(&rq, "Wait(Isend)", n);

    mt_section("Recv, receive posted first");
    tag = base + 1;
    if (rank % 2) {
        mt_sleep_ms(5);
        start_send(n, tag, &rq, 0);
    }
    preset(&st);
    if (rank % 2 == 0) {
        MPI_Request rr;
        CHECK_MPI(MPI_Irecv(rbuf, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &rr));
        start_send(n, tag, &rq, 0);
        CHECK_MPI(MPI_Wait(&rr, &st));
        check_recv(&st, n, tag, "Irecv+Wait posted");
    } else {
        CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st));
        check_recv(&st, n, tag, "Recv posted");
    }
    finish_send(&rq, "Wait(Isend)", n);

    mt_section("Recv truncated (MPI_ERRORS_RETURN)");
    tag = base + 2;
    if (n > 0) {
        mt_fill(sbuf, n, rank, tag, 0);
        CHECK_MPI(MPI_Isend(sbuf, n, MPI_BYTE, right, tag, trunc_comm, &rq));
        preset(&st);
        int rc = MPI_Recv(rbuf, n - 1, MPI_BYTE, left, tag, trunc_comm, &st);
        CHECK_ERRCLASS(rc, MPI_ERR_TRUNCATE, "truncated Recv size %d", n);
        CHECK_UNTOUCHED(&st, "truncated Recv", n);
        CHECK(st.MPI_SOURCE == left && st.MPI_TAG == tag, "truncated Recv size %d: source %d tag %d", n,
              st.MPI_SOURCE, st.MPI_TAG);
        finish_send(&rq, "Wait(Isend truncated)", n);
    }
}

static void test_probes(int n, int base)
{
    MPI_Status st, pst;
    MPI_Request rq, rr;
    MPI_Message msg;
    int flag, tag;

    mt_section("Probe + Recv");
    tag = base;
    start_send(n, tag, &rq, 0);
    preset(&pst);
    CHECK_MPI(MPI_Probe(left, tag, MPI_COMM_WORLD, &pst));
    CHECK_UNTOUCHED(&pst, "Probe", n);
    CHECK_STATUS(&pst, left, tag, n, "Probe size %d", n);
    preset(&st);
    CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st));
    check_recv(&st, n, tag, "Recv after Probe");
    finish_send(&rq, "Wait(Isend)", n);

    mt_section("Iprobe + Recv");
    tag = base + 1;
    start_send(n, tag, &rq, 0);
    flag = 0;
    while (!flag) {
        preset(&pst);
        CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &pst));
    }
    CHECK_UNTOUCHED(&pst, "Iprobe", n);
    CHECK_STATUS(&pst, left, tag, n, "Iprobe size %d", n);
    preset(&st);
    CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st));
    check_recv(&st, n, tag, "Recv after Iprobe");
    finish_send(&rq, "Wait(Isend)", n);

    mt_section("Mprobe + Mrecv");
    tag = base + 2;
    start_send(n, tag, &rq, 0);
    preset(&pst);
    CHECK_MPI(MPI_Mprobe(left, tag, MPI_COMM_WORLD, &msg, &pst));
    CHECK_UNTOUCHED(&pst, "Mprobe", n);
    CHECK_STATUS(&pst, left, tag, n, "Mprobe size %d", n);
    preset(&st);
    st.MPI_ERROR = SENTINEL;
    CHECK_MPI(MPI_Mrecv(rbuf, n, MPI_BYTE, &msg, &st));
    check_recv(&st, n, tag, "Mrecv");
    finish_send(&rq, "Wait(Isend)", n);

    mt_section("Improbe + Mrecv");
    tag = base + 3;
    start_send(n, tag, &rq, 1);
    flag = 0;
    while (!flag) {
        preset(&pst);
        CHECK_MPI(MPI_Improbe(left, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &msg, &pst));
    }
    CHECK_UNTOUCHED(&pst, "Improbe", n);
    CHECK_STATUS(&pst, left, tag, n, "Improbe size %d", n);
    preset(&st);
    CHECK_MPI(MPI_Mrecv(rbuf, n, MPI_BYTE, &msg, &st));
    check_recv(&st, n, tag, "Mrecv after Improbe");
    finish_send(&rq, "Wait(Issend)", n);

    mt_section("Mprobe + Imrecv + Wait");
    tag = base + 4;
    start_send(n, tag, &rq, 0);
    CHECK_MPI(MPI_Mprobe(left, tag, MPI_COMM_WORLD, &msg, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Imrecv(rbuf, n, MPI_BYTE, &msg, &rr));
    preset(&st);
    CHECK_MPI(MPI_Wait(&rr, &st));
    check_recv(&st, n, tag, "Imrecv+Wait");
    finish_send(&rq, "Wait(Isend)", n);

    mt_section("Mprobe + Imrecv + Test");
    tag = base + 5;
    start_send(n, tag, &rq, 0);
    CHECK_MPI(MPI_Mprobe(left, tag, MPI_COMM_WORLD, &msg, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Imrecv(rbuf, n, MPI_BYTE, &msg, &rr));
    flag = 0;
    while (!flag) {
        preset(&st);
        CHECK_MPI(MPI_Test(&rr, &flag, &st));
    }
    check_recv(&st, n, tag, "Imrecv+Test");
    finish_send(&rq, "Wait(Isend)", n);
}

static void test_nonblocking(int n, int base)
{
    MPI_Status st;
    MPI_Request rq, rr;
    int flag, idx, tag;

    mt_section("Irecv + Test");
    tag = base;
    CHECK_MPI(MPI_Irecv(rbuf, n, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &rr));
    start_send(n, tag, &rq, 0);
    flag = 0;
    while (!flag) {
        preset(&st);
        CHECK_MPI(MPI_Test(&rr, &flag, &st));
    }
    check_recv(&st, n, tag, "Irecv+Test");
    preset(&st);
    flag = 0;
    while (!flag)
        CHECK_MPI(MPI_Test(&rq, &flag, &st));
    CHECK_UNTOUCHED(&st, "Test(Isend)", n);

    mt_section("Irecv + Waitany");
    tag = base + 1;
    CHECK_MPI(MPI_Irecv(rbuf, n, MPI_BYTE, left, MPI_ANY_TAG, MPI_COMM_WORLD, &rr));
    start_send(n, tag, &rq, 1);
    preset(&st);
    CHECK_MPI(MPI_Waitany(1, &rr, &idx, &st));
    CHECK_EQ(idx, 0, "Waitany index size %d", n);
    check_recv(&st, n, tag, "Irecv+Waitany");
    preset(&st);
    CHECK_MPI(MPI_Waitany(1, &rq, &idx, &st));
    CHECK_UNTOUCHED(&st, "Waitany(Issend)", n);

    mt_section("Irecv + Testany");
    tag = base + 2;
    CHECK_MPI(MPI_Irecv(rbuf, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &rr));
    start_send(n, tag, &rq, 0);
    flag = 0;
    while (!flag) {
        preset(&st);
        CHECK_MPI(MPI_Testany(1, &rr, &idx, &flag, &st));
    }
    check_recv(&st, n, tag, "Irecv+Testany");
    finish_send(&rq, "Wait(Isend)", n);

    mt_section("Irecv + Request_get_status");
    tag = base + 3;
    CHECK_MPI(MPI_Irecv(rbuf, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &rr));
    start_send(n, tag, &rq, 0);
    flag = 0;
    while (!flag) {
        preset(&st);
        CHECK_MPI(MPI_Request_get_status(rr, &flag, &st));
    }
    check_recv(&st, n, tag, "Irecv+Request_get_status");
    preset(&st);
    CHECK_MPI(MPI_Wait(&rr, &st));
    CHECK_UNTOUCHED(&st, "Wait after Request_get_status", n);
    finish_send(&rq, "Wait(Isend)", n);

    mt_section("Sendrecv, Sendrecv_replace");
    tag = base + 4;
    mt_fill(sbuf, n, rank, tag, 0);
    preset(&st);
    CHECK_MPI(MPI_Sendrecv(sbuf, n, MPI_BYTE, right, tag, rbuf, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st));
    check_recv(&st, n, tag, "Sendrecv");
    tag = base + 5;
    mt_fill(rbuf, n, rank, tag, 0);
    preset(&st);
    CHECK_MPI(MPI_Sendrecv_replace(rbuf, n, MPI_BYTE, right, tag, left, tag, MPI_COMM_WORLD, &st));
    check_recv(&st, n, tag, "Sendrecv_replace");
}

static void test_persistent(int n, int base)
{
    MPI_Status st;
    MPI_Request rr, rs;
    int flag;

    mt_section("Recv_init/Send_init + Start + Wait/Test");
    CHECK_MPI(MPI_Recv_init(rbuf, n, MPI_BYTE, left, base, MPI_COMM_WORLD, &rr));
    CHECK_MPI(MPI_Send_init(sbuf, n, MPI_BYTE, right, base, MPI_COMM_WORLD, &rs));
    mt_fill(sbuf, n, rank, base, 0);
    for (int it = 0; it < 3; it++) {
        CHECK_MPI(MPI_Start(&rr));
        CHECK_MPI(MPI_Start(&rs));
        preset(&st);
        if (it == 1) {
            flag = 0;
            while (!flag) {
                preset(&st);
                CHECK_MPI(MPI_Test(&rr, &flag, &st));
            }
        } else {
            CHECK_MPI(MPI_Wait(&rr, &st));
        }
        check_recv(&st, n, base, it == 1 ? "Recv_init+Test" : "Recv_init+Wait");
        preset(&st);
        CHECK_MPI(MPI_Wait(&rs, &st));
        CHECK_UNTOUCHED(&st, "Send_init+Wait", n);
    }
    MPI_Request_free(&rr);
    MPI_Request_free(&rs);
}

static void test_multiple(int n, int base)
{
    MPI_Status st[2];
    MPI_Request rq[2];
    int outcount = 0, idx[2], flag = 0;

    mt_section("Waitall / Testall / Waitsome / Testsome may set MPI_ERROR");
    for (int v = 0; v < 4; v++) {
        int tag = base + v;
        CHECK_MPI(MPI_Irecv(rbuf, n, MPI_BYTE, left, tag, MPI_COMM_WORLD, &rq[0]));
        start_send(n, tag, &rq[1], 0);
        preset(&st[0]);
        preset(&st[1]);
        switch (v) {
        case 0:
            CHECK_MPI(MPI_Waitall(2, rq, st));
            break;
        case 1:
            while (!flag)
                CHECK_MPI(MPI_Testall(2, rq, &flag, st));
            flag = 0;
            break;
        default:
            for (int done = 0; done < 2; done += outcount) {
                MPI_Status s2[2];
                preset(&s2[0]);
                preset(&s2[1]);
                if (v == 2)
                    CHECK_MPI(MPI_Waitsome(2, rq, &outcount, idx, s2));
                else
                    CHECK_MPI(MPI_Testsome(2, rq, &outcount, idx, s2));
                for (int k = 0; k < outcount; k++)
                    st[idx[k]] = s2[k];
            }
        }
        CHECK(st[0].MPI_ERROR == MPI_SUCCESS || st[0].MPI_ERROR == SENTINEL,
              "multiple completion %d size %d: MPI_ERROR %d", v, n, st[0].MPI_ERROR);
        CHECK_STATUS(&st[0], left, tag, n, "multiple completion %d size %d", v, n);
        CHECK_BUF(rbuf, n, left, tag, 0, "multiple completion %d size %d", v, n);
    }
}

static void test_self_and_null(void)
{
    MPI_Status st;
    MPI_Request rq;
    MPI_Message msg;
    int flag = 0;

    mt_section("self messages");
    for (int i = 0; i < NS; i++) {
        int n = sizes[i], tag = 9000 + i;
        mt_fill(sbuf, n, rank, tag, 0);
        CHECK_MPI(MPI_Isend(sbuf, n, MPI_BYTE, rank, tag, MPI_COMM_WORLD, &rq));
        preset(&st);
        CHECK_MPI(MPI_Probe(rank, tag, MPI_COMM_WORLD, &st));
        CHECK_UNTOUCHED(&st, "self Probe", n);
        preset(&st);
        CHECK_MPI(MPI_Mprobe(rank, tag, MPI_COMM_WORLD, &msg, &st));
        CHECK_UNTOUCHED(&st, "self Mprobe", n);
        preset(&st);
        CHECK_MPI(MPI_Mrecv(rbuf, n, MPI_BYTE, &msg, &st));
        CHECK_UNTOUCHED(&st, "self Mrecv", n);
        CHECK_STATUS(&st, rank, tag, n, "self Mrecv size %d", n);
        CHECK_BUF(rbuf, n, rank, tag, 0, "self Mrecv size %d", n);
        finish_send(&rq, "Wait(self Isend)", n);
        CHECK_MPI(MPI_Isend(sbuf, n, MPI_BYTE, rank, tag, MPI_COMM_WORLD, &rq));
        preset(&st);
        CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, rank, tag, MPI_COMM_WORLD, &st));
        CHECK_UNTOUCHED(&st, "self Recv", n);
        CHECK_STATUS(&st, rank, tag, n, "self Recv size %d", n);
        finish_send(&rq, "Wait(self Isend)", n);
    }

    mt_section("cancelled Irecv + Wait");
    CHECK_MPI(MPI_Irecv(rbuf, 8, MPI_BYTE, left, 31000, MPI_COMM_WORLD, &rq));
    CHECK_MPI(MPI_Cancel(&rq));
    preset(&st);
    CHECK_MPI(MPI_Wait(&rq, &st));
    CHECK_UNTOUCHED(&st, "Wait(cancelled Irecv)", 8);
    CHECK_MPI(MPI_Test_cancelled(&st, &flag));
    CHECK(flag, "the Irecv with no matching send must be cancelled");

    mt_section("PROC_NULL");
    preset(&st);
    CHECK_MPI(MPI_Recv(rbuf, 8, MPI_BYTE, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st));
    CHECK_UNTOUCHED(&st, "Recv(PROC_NULL)", 0);
    preset(&st);
    CHECK_MPI(MPI_Probe(MPI_PROC_NULL, 1, MPI_COMM_WORLD, &st));
    CHECK_UNTOUCHED(&st, "Probe(PROC_NULL)", 0);
    preset(&st);
    CHECK_MPI(MPI_Mprobe(MPI_PROC_NULL, 1, MPI_COMM_WORLD, &msg, &st));
    CHECK_UNTOUCHED(&st, "Mprobe(PROC_NULL)", 0);
    preset(&st);
    CHECK_MPI(MPI_Mrecv(rbuf, 8, MPI_BYTE, &msg, &st));
    CHECK_UNTOUCHED(&st, "Mrecv(MESSAGE_NO_PROC)", 0);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "p2p_status");
    rank = mt_rank;
    size = mt_size;
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    sbuf = mt_malloc(MT_MAXSIZE);
    rbuf = mt_malloc(MT_MAXSIZE);
    MPI_Comm_dup(MPI_COMM_WORLD, &trunc_comm);
    MPI_Comm_set_errhandler(trunc_comm, MPI_ERRORS_RETURN);

    for (int i = 0; i < NS; i++) {
        int n = sizes[i], base = 100 * (i + 1);
        test_recv(n, base);
        test_probes(n, base + 10);
        test_nonblocking(n, base + 20);
        test_persistent(n, base + 30);
        test_multiple(n, base + 40);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    test_self_and_null();

    MPI_Comm_free(&trunc_comm);
    free(sbuf);
    free(rbuf);
    return mt_finalize();
}
