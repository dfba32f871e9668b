/*
 * abort_kill_peer: failure test (expected to make mpirun fail).
 *
 * Rank 0 sends a 64 MiB message (rendezvous) to rank 1.  Rank 1 posts the
 * receive and, while it is inside MPI_Wait, a helper thread (which makes no
 * MPI calls) kills the process with SIGKILL a few milliseconds later, so the
 * transfer is typically in progress.  Rank 0 is blocked in MPI_Send (or,
 * if the transfer completed first, in a receive from rank 1 that never
 * comes); other ranks are blocked in a receive from rank 1.
 *
 * Expected: mpirun exits non-zero within 30 s with a message naming the
 * failure (run_mpi_tests.sh checks this; exit 0 or a hang is a failure).
 * If this program ever reaches its end the test is broken: it exits 0 so
 * that the runner flags it.
 */
#include "mpitest.h"

#define BIG (64 * 1048576)

static void *killer(void *p)
{
    int ms = *(int *)p;
    mt_sleep_ms(ms);
    fprintf(stderr, "abort_kill_peer: rank 1 kills itself with SIGKILL now\n");
    fflush(stderr);
    raise(SIGKILL);
    return NULL;
}

static void fail_exit(int rc, const char *what)
{
    char es[MPI_MAX_ERROR_STRING];
    fprintf(stderr, "[rank %d] abort_kill_peer: %s returned error %d (%s)\n", mt_rank, what, rc,
            mt_errstr(rc, es));
    fflush(stderr);
    exit(1); /* a detected peer failure is fine: mpirun must still fail */
}

int main(int argc, char **argv)
{
    int provided, rc, dummy = 0, delay = 5;
    char *buf;
    provided = mt_init_thread(&argc, &argv, MPI_THREAD_FUNNELED, "abort_kill_peer");
    alarm(0); /* no watchdog: the runner measures how long mpirun takes */
    (void)provided;
    if (mt_size < 2) {
        fprintf(stderr, "abort_kill_peer needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    buf = mt_malloc(BIG);
    memset(buf, mt_rank, BIG);
    MPI_Barrier(MPI_COMM_WORLD);

    if (mt_rank == 0) {
        rc = MPI_Send(buf, BIG, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS)
            fail_exit(rc, "MPI_Send to the dying rank");
        rc = MPI_Recv(&dummy, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            fail_exit(rc, "MPI_Recv from the dead rank");
    } else if (mt_rank == 1) {
        MPI_Request r;
        pthread_t th;
        rc = MPI_Irecv(buf, BIG, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &r);
        if (rc != MPI_SUCCESS)
            fail_exit(rc, "MPI_Irecv");
        if (pthread_create(&th, NULL, killer, &delay) != 0) {
            fprintf(stderr, "pthread_create failed: killing myself directly\n");
            raise(SIGKILL);
        }
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        /* transfer finished before the kill: wait inside MPI for the end */
        MPI_Recv(&dummy, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        rc = MPI_Recv(&dummy, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            fail_exit(rc, "MPI_Recv from the dead rank");
    }
    fprintf(stderr, "[rank %d] abort_kill_peer: reached the end, which must not happen\n",
            mt_rank);
    MPI_Finalize();
    return 0;
}
