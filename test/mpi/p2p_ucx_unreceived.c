/*
 * p2p_ucx_unreceived: on pml/rdrp's ucx data path (pml_rdrp_data_path ucx;
 * under auto, a peer on another node without a native get) the RTS of a
 * rendezvous message holds UCX's rendezvous descriptor until a receive
 * matches it, and the data stays at the sender.  A message nobody receives
 * goes with its communicator (MPI_Comm_free lets unreceived messages go);
 * pml/rdrp must then give the descriptor back to UCX, which completes the
 * sender, rather than leave the send pending for ever or touch the freed
 * descriptor.
 *  - rank 1 Isends 1 MiB + 3 on a duplicate; rank 0 sees it arrive
 *    (Iprobe: size and envelope), never receives it and frees the
 *    duplicate; rank 1's MPI_Wait then completes;
 *  - afterwards messages of the same size on MPI_COMM_WORLD arrive whole,
 *    with their status, both ways.
 * Under other data paths (and other PMLs) a rendezvous send nobody receives
 * need not complete, so there only the second part runs.
 */
#include "mpitest.h"
#include "mpitest_mpit.h"

#define N (1048576 + 3)

int main(int argc, char **argv)
{
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "p2p_ucx_unreceived");
    long long path = -1;
    const int ucx_path = mt_pml_is("rdrp") && cvar_int("pml_rdrp_data_path", &path) && path == 4;
    char *sbuf = mt_malloc(N), *rbuf = mt_malloc(N);

    if (ucx_path && mt_size >= 2 && mt_rank <= 1) {
        mt_section("rendezvous message dropped with its communicator");
        MPI_Comm dup;
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));  /* (collective over every rank) */
        if (mt_rank == 1) {
            MPI_Request rq;
            mt_fill(sbuf, N, 1, 5, 0);
            CHECK_MPI(MPI_Isend(sbuf, N, MPI_BYTE, 0, 5, dup, &rq));
            CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));  /* hangs if the release is lost */
        } else {
            int flag = 0, count = -1;
            MPI_Status st;
            while (!flag) CHECK_MPI(MPI_Iprobe(1, 5, dup, &flag, &st));
            CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
            CHECK(st.MPI_SOURCE == 1 && st.MPI_TAG == 5 && count == N, "probe: source %d tag %d count %d",
                  st.MPI_SOURCE, st.MPI_TAG, count);
        }
        CHECK_MPI(MPI_Comm_free(&dup));
    } else if (ucx_path) {
        MPI_Comm dup;
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
        CHECK_MPI(MPI_Comm_free(&dup));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    mt_section("rendezvous messages received afterwards");
    if (mt_size >= 2 && mt_rank <= 1) {
        int peer = 1 - mt_rank;
        MPI_Request rq[2];
        MPI_Status st[2];
        int count = -1;
        mt_fill(sbuf, N, mt_rank, 6, 0);
        memset(rbuf, 0, N);
        CHECK_MPI(MPI_Irecv(rbuf, N, MPI_BYTE, peer, 6, MPI_COMM_WORLD, &rq[0]));
        CHECK_MPI(MPI_Isend(sbuf, N, MPI_BYTE, peer, 6, MPI_COMM_WORLD, &rq[1]));
        CHECK_MPI(MPI_Waitall(2, rq, st));
        CHECK_MPI(MPI_Get_count(&st[0], MPI_BYTE, &count));
        CHECK(st[0].MPI_SOURCE == peer && st[0].MPI_TAG == 6 && count == N, "status: source %d tag %d count %d",
              st[0].MPI_SOURCE, st[0].MPI_TAG, count);
        CHECK_BUF(rbuf, N, peer, 6, 0, "from rank %d", peer);
    }
    free(sbuf);
    free(rbuf);
    MPI_T_finalize();
    return mt_finalize();
}
