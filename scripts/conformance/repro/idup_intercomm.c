/* Open MPI 4.1.4's own deadlock behind MPICH's comm/comm_idup_isend (np 4):
 * several MPI_Comm_idup of one inter-communicator outstanding at once.
 * No component of this project is needed to see it:
 *
 *   mpicc -o idup_intercomm idup_intercomm.c
 *   for i in 1 2 3 4 5 6; do timeout 60 mpirun --oversubscribe --mca pml ob1 \
 *       --mca btl self,vader -np 4 ./idup_intercomm 4; echo "exit $?"; done
 *
 * hangs (exit 124) in some runs, every rank in the MPI_Waitall below; with
 * 1 instead of 4 it never does.  Why: for an inter-communicator Open MPI
 * agrees on the new context id with an ireduce and an ibcast on the
 * group's local communicator (comm_cid.c, ompi_comm_allreduce_inter_nb),
 * one round per outstanding idup, and issues each round from its progress
 * callback (comm_request.c) when the previous step of that idup completes.
 * Steps complete in a different order on different ranks, so the ranks
 * start these collectives in different orders on one communicator, which
 * MPI forbids; libnbc and coll/cdag both match collectives by the order
 * they were started in, and the rounds cross.  coll/cdag completes steps
 * in an order that makes the crossing happen every time; libnbc in some
 * runs.  Not run by CI (it hangs by design); a repro for the README. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int n = argc > 1 ? atoi(argv[1]) : 4;
    if (n < 1 || n > 16) n = 4;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);

    /* two groups (even and odd ranks) joined by an inter-communicator */
    MPI_Comm local, inter;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &local);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 7, &inter);
    MPI_Comm_free(&local);

    MPI_Comm dup[16];
    MPI_Request req[16];
    for (int j = 0; j < n; j++) MPI_Comm_idup(inter, &dup[j], &req[j]);
    MPI_Waitall(n, req, MPI_STATUSES_IGNORE);

    for (int j = 0; j < n; j++) MPI_Comm_free(&dup[j]);
    MPI_Comm_free(&inter);
    if (rank == 0) printf("%d idups of an inter-communicator completed\n", n);
    MPI_Finalize();
    return 0;
}
