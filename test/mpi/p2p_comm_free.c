/*
 * p2p_comm_free: a communicator freed while requests on it are pending.
 *
 * MPI 3.1 section 6.4.3: MPI_Comm_free "marks the communicator object for
 * deallocation ... Any pending operations that use this communicator will
 * complete normally; the object is actually deallocated only if there are
 * no other active references to it."  MPICH's comm/cmfree checks this (it
 * hung under pml rdrp: the communicator went away with the posted receive,
 * and its context id was given to a new communicator).
 *  - rank 0 posts an Irecv from the last rank on a dup and frees the dup;
 *    every rank creates and frees 40 communicators (context ids get
 *    reused); only then does the last rank send on its (still live) dup:
 *    the receive completes with the right data and status;
 *  - the last rank Isends on a dup and frees it before rank 0 has posted
 *    the receive; the send and the receive complete with the right data;
 * over eager and rendezvous sizes.
 */
#include "mpitest.h"

#define NCOMM 40

static const int sizes[] = {0, 4096, 1048576 + 3};
#define NS ((int)(sizeof(sizes) / sizeof(sizes[0])))

static void churn(void)
{
    static MPI_Comm c[NCOMM];
    for (int i = 0; i < NCOMM; i++) CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, -mt_rank, &c[i]));
    for (int i = 0; i < NCOMM; i++) CHECK_MPI(MPI_Comm_free(&c[i]));
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "p2p_comm_free");
    int last = mt_size - 1;
    char *sbuf = mt_malloc(1048576 + 3), *rbuf = mt_malloc(1048576 + 3);

    for (int i = 0; i < NS; i++) {
        int n = sizes[i], tag = 10 + i;
        MPI_Comm comm;
        MPI_Request rq;
        MPI_Status st;

        mt_section("Irecv pending on a freed communicator");
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
        if (mt_rank == 0) {
            memset(rbuf, 0, n);
            CHECK_MPI(MPI_Irecv(rbuf, n, MPI_BYTE, last, tag, comm, &rq));
            CHECK_MPI(MPI_Comm_free(&comm));
            CHECK(comm == MPI_COMM_NULL, "freed communicator not set to MPI_COMM_NULL");
        }
        churn();
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (mt_rank == last) {
            mt_fill(sbuf, n, last, tag, 0);
            CHECK_MPI(MPI_Send(sbuf, n, MPI_BYTE, 0, tag, comm));
        }
        if (mt_rank == 0) {
            CHECK_MPI(MPI_Wait(&rq, &st));
            CHECK_STATUS(&st, last, tag, n, "Irecv on a freed communicator, size %d", n);
            CHECK_BUF(rbuf, n, last, tag, 0, "Irecv on a freed communicator, size %d", n);
        } else {
            CHECK_MPI(MPI_Comm_free(&comm));
        }

        mt_section("Isend pending on a freed communicator");
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
        if (mt_rank == last) {
            mt_fill(sbuf, n, last, tag + 100, 1);
            CHECK_MPI(MPI_Isend(sbuf, n, MPI_BYTE, 0, tag + 100, comm, &rq));
            CHECK_MPI(MPI_Comm_free(&comm));
        }
        churn();
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (mt_rank == 0) {
            memset(rbuf, 0, n);
            CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, last, tag + 100, comm, &st));
            CHECK_STATUS(&st, last, tag + 100, n, "Isend on a freed communicator, size %d", n);
            CHECK_BUF(rbuf, n, last, tag + 100, 1, "Isend on a freed communicator, size %d", n);
        }
        if (mt_rank == last) CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        else CHECK_MPI(MPI_Comm_free(&comm));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    free(sbuf);
    free(rbuf);
    return mt_finalize();
}
