/*
 * leak_rget_finalize: a receiver whose last act before MPI_Finalize is a
 * large receive must finalize with no leak report.  Under ob1 + btl/credit
 * the receiver pulls the message by RGET and answers with a FIN from inside
 * the get's completion; UCX took the FIN at once, its descriptor waited for
 * the next progress call, and the receiver went straight into MPI_Finalize:
 * btl/credit's finalize leak check reported "fragments 1" on the receiver
 * in about 1 run in 12 (MPICH pt2pt/large_message, reduced).  Run at np 2+
 * by the leak_* rule of run_mpi_tests.sh: no "leak-check" line may appear.
 * It races with whatever progress MPI_Finalize makes before the BTLs close,
 * so on the broken code it failed now and then, not every time.
 */
#include "mpitest.h"

#include <unistd.h>

#define N (1 << 20)

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "leak_rget_finalize");
    char *b = mt_malloc(N);
    if (mt_rank == 0) {
        for (int p = 1; p < mt_size; p++) {
            mt_fill(b, N, 0, 5, p);
            CHECK_MPI(MPI_Send(b, N, MPI_BYTE, p, 5, MPI_COMM_WORLD));
        }
    } else {
        MPI_Status st;
        CHECK_MPI(MPI_Recv(b, N, MPI_BYTE, 0, 5, MPI_COMM_WORLD, &st));
        CHECK_STATUS(&st, 0, 5, N, "the large message");
        CHECK_BUF(b, N, 0, 5, mt_rank, "the large message");
    }
    free(b);
    /* no mt_finalize: its MPI_Allreduce would progress the FIN out of the
     * way; every rank's own checks decide its exit code */
    mt_section("MPI_Finalize right after the large receive");
    alarm(0);
    const long mine = mt_failures;
    int rc = MPI_Finalize();
    if (rc != MPI_SUCCESS) fprintf(stderr, "[rank %d] MPI_Finalize returned %d\n", mt_rank, rc);
    if (mine == 0 && rc == MPI_SUCCESS && mt_rank == 0)
        printf("leak_rget_finalize: np=%d this rank's checks passed\n", mt_size);
    return (mine == 0 && rc == MPI_SUCCESS) ? 0 : 1;
}
