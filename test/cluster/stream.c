/*
 * stream: the workload of the cluster's fault tests (run.sh).  Ranks pair up
 * (0-1, 2-3, ...; placed round-robin, so each pair spans two nodes) and
 * exchange 1 MiB messages until killed.  Rank 0 prints "streaming" once data
 * flows, so the fault is injected mid-transfer.  Never ends by itself.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int n = 1 << 20;
    char *sb = malloc(n), *rb = malloc(n);
    memset(sb, rank, n);
    int peer = rank ^ 1;
    for (long it = 0;; it++) {
        if (peer < size)
            MPI_Sendrecv(sb, n, MPI_BYTE, peer, 1, rb, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (it == 20) MPI_Barrier(MPI_COMM_WORLD);
        if (it == 20 && rank == 0) {
            printf("streaming\n");
            fflush(stdout);
        }
    }
    MPI_Finalize();
    return 0;
}
