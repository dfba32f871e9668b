/*
 * fault_victim: traffic for scripts/faults.sh to kill a rank in the middle
 * of.  Every rank writes "<pid> <jobid>" to DIR/rank.<r> once it is inside
 * MPI, then loops until killed (or for 120 s, then fails: the kill never
 * came):
 *   eager  all-to-all floods of small messages (eager, credit-gated)
 *   rndv   a ring of 8 MiB messages (mid-rendezvous most of the time)
 *   coll   Allreduce / Bcast / Alltoall of 1 MiB and Iallreduce
 *   quiet  barriers with sleeps (the peer dies while nobody sends)
 * and two modes that end by themselves (exit 0, nobody is to be killed):
 *   timed    300 rounds of a barrier and 50 ms of sleep (15 s), for a
 *            peer stopped for less than the timeout and then continued
 *   sleeper  the last rank sleeps 8 s outside MPI, twice, while the others
 *            wait for it in a receive (a busy rank must never be taken for
 *            a stopped one)
 *   fault_victim MODE DIR
 */
#define _DEFAULT_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 3) return 2;
    const char *mode = argv[1];
    MPI_Init(&argc, &argv);
    int me, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    char path[4096];
    snprintf(path, sizeof(path), "%s/rank.%d", argv[2], me);
    FILE *f = fopen(path, "w");
    const char *job = getenv("OMPI_MCA_ess_base_jobid");
    if (f) {
        fprintf(f, "%d %s\n", (int)getpid(), job ? job : "0");
        fclose(f);
    }
    size_t big = 8u << 20, mid = 1u << 20;
    char *a = calloc(big, 1), *b = calloc(big, 1);
    if (!strcmp(mode, "timed") || !strcmp(mode, "sleeper")) {
        int sleeper = !strcmp(mode, "sleeper");
        for (int round = 0; round < (sleeper ? 2 : 300); ++round) {
            if (sleeper && me == np - 1) sleep(8);
            if (sleeper) {  /* everyone waits in MPI for the last rank */
                int x = me;
                MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
                MPI_Sendrecv(a, (int)mid, MPI_BYTE, (me + 1) % np, 2, b, (int)mid, MPI_BYTE,
                             (me - 1 + np) % np, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Barrier(MPI_COMM_WORLD);
                usleep(50000);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        free(a);
        free(b);
        MPI_Finalize();
        return 0;
    }
    double t0 = MPI_Wtime();
    while (MPI_Wtime() - t0 < 120) {
        if (!strcmp(mode, "eager")) {
            MPI_Request rq[2 * 64];
            int n = 0;
            for (int k = 0; k < 32; ++k) {
                int peer = (me + 1 + k % (np - 1)) % np;
                int from = (me - 1 - k % (np - 1) + np) % np;
                MPI_Irecv(b + 64 * k, 64, MPI_BYTE, from, k, MPI_COMM_WORLD, &rq[n++]);
                MPI_Isend(a + 64 * k, 64, MPI_BYTE, peer, k, MPI_COMM_WORLD, &rq[n++]);
            }
            MPI_Waitall(n, rq, MPI_STATUSES_IGNORE);
        } else if (!strcmp(mode, "rndv")) {
            MPI_Sendrecv(a, (int)big, MPI_BYTE, (me + 1) % np, 1, b, (int)big, MPI_BYTE, (me - 1 + np) % np, 1,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (!strcmp(mode, "coll")) {
            MPI_Allreduce(MPI_IN_PLACE, a, (int)(mid / sizeof(int)), MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            MPI_Bcast(b, (int)mid, MPI_BYTE, 0, MPI_COMM_WORLD);
            MPI_Alltoall(a, (int)(mid / (size_t)np), MPI_BYTE, b, (int)(mid / (size_t)np), MPI_BYTE, MPI_COMM_WORLD);
            MPI_Request r;
            MPI_Iallreduce(MPI_IN_PLACE, b, 1024, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        } else {
            MPI_Barrier(MPI_COMM_WORLD);
            usleep(20000);
        }
    }
    fprintf(stderr, "[rank %d] fault_victim: nobody was killed within 120 s\n", me);
    MPI_Finalize();
    return 1;
}
