/*
 * leak_finalize: the finalize leak check must name exactly what the
 * application left behind (README "Reliability checks").  Run at np 2 by
 * the leak_* rule of run_mpi_tests.sh: every "EXPECT-LEAK" line this
 * program prints must appear as the component's "leak-check" line in the
 * job's output, and no other "leak-check" line may appear.
 *
 * What is left, on purpose (MPI makes finalizing like this erroneous):
 *  - rank 0: an MPI_Recv_init never freed (it keeps MPI_COMM_WORLD alive,
 *    so the message below stays queued on it), one message from rank 1 on
 *    MPI_COMM_WORLD never received, and one on a duplicate it freed with
 *    the message still unreceived (dropped with the communicator);
 *  - every rank (when MPITEST_LEAK_COMPONENTS names coll/cdag): a
 *    persistent MPIX_Allreduce_init request never freed (its operation is
 *    the request's, not a leak of coll/cdag; MPI_COMM_WORLD's coll state
 *    goes at finalize whatever holds it, so no communicator is counted).
 * MPITEST_LEAK_COMPONENTS lists the components whose check is active
 * ("pml/rdrp", "coll/cdag"); the expectations follow from it.
 */
#include "mpitest.h"

#include <mpi-ext.h>
#include <string.h>

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "leak_finalize");
    const char *comps = getenv("MPITEST_LEAK_COMPONENTS");
    if (!comps) comps = "";
    const int pml = strstr(comps, "pml/rdrp") != NULL, coll = strstr(comps, "coll/cdag") != NULL;
    CHECK(mt_size >= 2, "needs 2 ranks, got %d", mt_size);
    MPI_Comm dup;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    char buf[8] = {0};
    MPI_Request leaked_recv = MPI_REQUEST_NULL, leaked_coll = MPI_REQUEST_NULL;

    mt_section("unreceived messages");
    if (mt_rank == 1) {
        CHECK_MPI(MPI_Send(buf, 8, MPI_BYTE, 0, 7, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Send(buf, 8, MPI_BYTE, 0, 8, dup));
    } else if (mt_rank == 0) {
        /* both arrived (probing receives nothing) */
        int flag = 0;
        MPI_Status st;
        while (!flag) CHECK_MPI(MPI_Iprobe(1, 7, MPI_COMM_WORLD, &flag, &st));
        flag = 0;
        while (!flag) CHECK_MPI(MPI_Iprobe(1, 8, dup, &flag, &st));
        CHECK_MPI(MPI_Recv_init(buf, 8, MPI_BYTE, 1, 99, MPI_COMM_WORLD, &leaked_recv));
    }
    CHECK_MPI(MPI_Comm_free(&dup));

    mt_section("persistent collective");
    int in = mt_rank, out = -1;
    if (coll) {
        CHECK_MPI(MPIX_Allreduce_init(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &leaked_coll));
        CHECK_MPI(MPI_Start(&leaked_coll));
        CHECK_MPI(MPI_Wait(&leaked_coll, MPI_STATUS_IGNORE));
        CHECK_EQ(out, mt_size * (mt_size - 1) / 2, "allreduce result");
    }

    /* what each component's check must report (test/mpi/run_mpi_tests.sh) */
    if (pml && mt_rank == 0)
        printf("EXPECT-LEAK pml/rdrp rank 0: application: requests 1, unreceived messages 2; pml/rdrp: none\n");
    if (coll)
        printf("EXPECT-LEAK coll/cdag rank %d: application: requests 1; coll/cdag: none\n", mt_rank);
    fflush(stdout);
    (void)leaked_recv;
    return mt_finalize();
}
