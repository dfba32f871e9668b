/*
 * p2p_send_fast: pml/rdrp's request-free sends (pml_rdrp_send.cc
 * send_fast).  A standard or ready send of a small contiguous message that
 * can leave at once (into a ring peer's ring, or to a peer reached through
 * UCX under credit gating) completes before MPI_Isend returns: every such
 * send hands back the same completed request.  To a UCX peer the message
 * is packed on the stack and UCX must take it at once
 * (UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL); when it cannot (queue full, or above
 * the transport's short size) the message leaves from a heap copy
 * (pml_rdrp_ucx_send_copies).  Before, sends to UCX peers always took the
 * request path (callgrind, osu_bw 8 B over tcp: 1241 instructions a
 * message against 907).
 *
 * Rank 1 stays out of MPI for 100 ms while rank 0 sends it bursts (every
 * size from 0 to 600 B across the fast path's 512 B limit, standard and
 * synchronous modes, contiguous and strided types); then rank 1
 * receives them all in order: data, status and count checked (standard
 * mode: a ready send before its receive is posted would be erroneous).  Checked
 * on rank 0 under pml/rdrp with credit gating (MPITEST_EXPECT_FAST=1):
 * two back-to-back 8 B MPI_Isends return the same completed request, and
 * a synchronous send is not complete before its receive is posted; to a
 * UCX peer (MPITEST_EXPECT_SHM=0) some of the burst left from heap copies.
 */
#include "mpitest.h"
#include "mpitest_mpit.h"

enum { NBURST = 24, MAXLEN = 600, TAG = 11 };

static int burst_len(int i) { return i == 0 ? 0 : (i * 29) % (MAXLEN + 1); }

int main(int argc, char **argv)
{
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "p2p_send_fast");
    const int rank = mt_rank;
    const char *e = getenv("MPITEST_EXPECT_FAST");
    const int expect_fast = e && atoi(e) > 0 && mt_pml_is("rdrp");
    /* to a UCX peer (pml_rdrp_shm 0: MPITEST_EXPECT_SHM=0) the burst's
     * messages above UCX's short size (about 90 B over its shared memory)
     * must leave from heap copies: that path, in order, is checked too */
    const char *es = getenv("MPITEST_EXPECT_SHM");
    const int expect_copies = expect_fast && es && atoi(es) == 0;
    pvar_t copies;
    pvar_open(&copies, "pml_rdrp_ucx_send_copies");
    unsigned long copies0 = pvar_read(&copies);
    unsigned char *buf = mt_malloc((size_t)NBURST * MAXLEN * 2);
    MPI_Datatype strided;
    CHECK_MPI(MPI_Type_vector(8, 1, 2, MPI_BYTE, &strided));
    CHECK_MPI(MPI_Type_commit(&strided));

    mt_section("a burst of small sends to a rank outside MPI, every size and mode");
    MPI_Request rq[NBURST + 2];
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        /* first (the credits are all there), two 8 B sends back to back:
         * request-free, one shared request */
        unsigned char *b = buf + (size_t)NBURST * MAXLEN;
        mt_fill(b, 16, 0, TAG + 1, 0);
        CHECK_MPI(MPI_Isend(b, 8, MPI_BYTE, 1, TAG + 1, MPI_COMM_WORLD, &rq[NBURST]));
        CHECK_MPI(MPI_Isend(b + 8, 8, MPI_BYTE, 1, TAG + 1, MPI_COMM_WORLD, &rq[NBURST + 1]));
        if (expect_fast)
            CHECK(rq[NBURST] == rq[NBURST + 1], "two 8 B MPI_Isends to rank 1 returned two requests "
                  "(expected the request-free path's one completed request)");
        /* then more than the credits may cover: the rest waits on the
         * request path, behind in order */
        for (int i = 0; i < NBURST; i++) {
            unsigned char *bi = buf + (size_t)i * MAXLEN;
            int n = burst_len(i);
            mt_fill(bi, (size_t)n, 0, TAG, i);
            CHECK_MPI(MPI_Isend(bi, n, MPI_BYTE, 1, TAG, MPI_COMM_WORLD, &rq[i]));
        }
        /* a strided send and a synchronous one: never request-free */
        MPI_Request s[2];
        mt_fill(b + 16, 16, 0, TAG + 2, 0);
        CHECK_MPI(MPI_Isend(b + 16, 1, strided, 1, TAG + 2, MPI_COMM_WORLD, &s[0]));
        CHECK_MPI(MPI_Issend(b + 48, 8, MPI_BYTE, 1, TAG + 3, MPI_COMM_WORLD, &s[1]));
        int flag = 1;
        CHECK_MPI(MPI_Test(&s[1], &flag, MPI_STATUS_IGNORE));
        if (expect_fast) CHECK(!flag, "MPI_Issend complete while rank 1 had not posted its receive");
        if (expect_copies)
            CHECK(copies.ok && pvar_read(&copies) > copies0, "no send to the UCX peer left from a heap copy "
                  "(pml_rdrp_ucx_send_copies did not move)");
        CHECK_MPI(MPI_Waitall(NBURST + 2, rq, MPI_STATUSES_IGNORE));
        CHECK_MPI(MPI_Waitall(2, s, MPI_STATUSES_IGNORE));
    } else if (rank == 1) {
        mt_sleep_ms(100);
        unsigned char *r = buf + (size_t)NBURST * MAXLEN;
        unsigned char w[16];
        CHECK_MPI(MPI_Recv(w, 8, MPI_BYTE, 0, TAG + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Recv(w + 8, 8, MPI_BYTE, 0, TAG + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_BUF(w, 16, 0, TAG + 1, 0, "the two 8 B sends, in order");
        for (int i = 0; i < NBURST; i++) {
            int n = burst_len(i);
            MPI_Status st;
            memset(r, 0, MAXLEN);
            CHECK_MPI(MPI_Recv(r, MAXLEN, MPI_BYTE, 0, TAG, MPI_COMM_WORLD, &st));
            CHECK_STATUS(&st, 0, TAG, n, "burst message %d", i);
            CHECK_BUF(r, (size_t)n, 0, TAG, i, "burst message %d (%d B), in order", i, n);
        }
        unsigned char v[16] = {0}, x[8];
        CHECK_MPI(MPI_Recv(v, 1, strided, 0, TAG + 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        unsigned char want[16];
        mt_fill(want, 16, 0, TAG + 2, 0);
        for (int k = 0; k < 8; k++) CHECK(v[2 * k] == want[2 * k], "strided byte %d", 2 * k);
        CHECK_MPI(MPI_Recv(x, 8, MPI_BYTE, 0, TAG + 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Type_free(&strided));
    free(buf);
    pvar_close(&copies);
    MPI_T_finalize();
    return mt_finalize();
}
