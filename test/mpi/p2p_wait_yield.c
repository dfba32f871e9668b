/*
 * p2p_wait_yield: with mpi_yield_when_idle (mpirun sets it when it puts
 * more ranks on a node than it has cores), every round of pml/rdrp's
 * blocking wait is a full opal_progress pass, which yields the core when
 * it finds nothing.  Before, the wait ran pml_rdrp_progress_iterations
 * (100) rounds of its own progress between two passes, so a rank waiting
 * for a peer that had no core kept the core from it: coll/tuned's barrier
 * over pml/rdrp at np 4 on 2 cores took 8.2 us against 5.2 over ob1
 * (5.4 after).
 *
 * Rank 1 receives 8 B that rank 0 sends 50 ms late (and the reverse, by
 * rank 0, for a rendezvous size): the waiting rank's
 * pml_rdrp_wait_full_passes must equal its pml_rdrp_wait_rounds over the
 * wait (it was about one in 100).  Data and status checked.  The variable
 * is set here before MPI starts unless the environment sets it; the check
 * is skipped where pml/rdrp is not the PML or its wait took no round (a
 * threaded wait goes through Open MPI's wait-sync).
 */
#include "mpitest.h"
#include "mpitest_mpit.h"

static const int sizes[] = {8, 1048576 + 3};

int main(int argc, char **argv)
{
    if (!getenv("OMPI_MCA_mpi_yield_when_idle")) setenv("OMPI_MCA_mpi_yield_when_idle", "1", 1);
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "p2p_wait_yield");
    int rank = mt_rank;
    pvar_t rounds, passes;
    pvar_open(&rounds, "pml_rdrp_wait_rounds");
    pvar_open(&passes, "pml_rdrp_wait_full_passes");
    if (!(rounds.ok && passes.ok) && mt_verbose && rank == 0) printf("pml/rdrp's counters are not there: data only\n");

    for (int i = 0; i < 2; i++) {
        const int n = sizes[i], sender = i == 0 ? 0 : 1, receiver = 1 - sender;
        mt_section(i == 0 ? "a receive of 8 B sent 50 ms late" : "a receive of 1 MiB + 3 B sent 50 ms late");
        unsigned char *buf = mt_malloc((size_t)n);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == sender) {
            mt_sleep_ms(50);
            mt_fill(buf, (size_t)n, sender, 7, i);
            CHECK_MPI(MPI_Send(buf, n, MPI_BYTE, receiver, 7, MPI_COMM_WORLD));
        } else if (rank == receiver) {
            memset(buf, 0, (size_t)n);
            unsigned long r0 = pvar_read(&rounds), p0 = pvar_read(&passes);
            MPI_Status st;
            CHECK_MPI(MPI_Recv(buf, n, MPI_BYTE, sender, 7, MPI_COMM_WORLD, &st));
            unsigned long r = pvar_read(&rounds) - r0, p = pvar_read(&passes) - p0;
            int cnt = -1;
            MPI_Get_count(&st, MPI_BYTE, &cnt);
            CHECK(st.MPI_SOURCE == sender && st.MPI_TAG == 7 && cnt == n, "status: source %d tag %d count %d",
                  st.MPI_SOURCE, st.MPI_TAG, cnt);
            CHECK_BUF(buf, (size_t)n, sender, 7, i, "%d B received", n);
            if (rounds.ok && passes.ok && r > 0)
                CHECK(p == r, "%d B: %lu of the wait's %lu rounds passed opal_progress (expected every one "
                      "with mpi_yield_when_idle)", n, p, r);
            if (mt_verbose) printf("[rank %d] %d B: %lu rounds, %lu full passes\n", rank, n, r, p);
        }
        free(buf);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    pvar_close(&rounds);
    pvar_close(&passes);
    MPI_T_finalize();
    return mt_finalize();
}
