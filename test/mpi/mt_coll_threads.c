/*
 * mt_coll_threads: MPI_THREAD_MULTIPLE with 4 threads per rank, each on its
 * own dup'd communicator, mixing nonblocking collectives (Iallreduce,
 * Ibcast, Iallgather, Ialltoall, Ibarrier - coll/cdag in the coll
 * configurations) with point-to-point traffic (Isend/Irecv ring, Iprobe
 * and Mprobe/Mrecv) on the same communicator, all in flight at once and
 * completed together; 30 rounds per thread, every value checked.
 * MPI_THREAD_MULTIPLE not provided is a failure.
 */
#include <pthread.h>

#include "mpitest.h"

#define NT 4
#define ROUNDS 30
#define N 1000

static int rank, size;
static MPI_Comm own[NT];

static void *worker(void *p)
{
    int t = *(int *)p;
    MPI_Comm c = own[t];
    int left = (rank - 1 + size) % size, right = (rank + 1) % size;
    int *red = mt_malloc(N * sizeof(int)), *bc = mt_malloc(N * sizeof(int));
    int *ag = mt_malloc((size_t)size * sizeof(int)), *a2a_s = mt_malloc((size_t)size * sizeof(int));
    int *a2a_r = mt_malloc((size_t)size * sizeof(int));
    char *sb = mt_malloc(70000), *rb = mt_malloc(70000), *pb = mt_malloc(70000);
    for (int r = 0; r < ROUNDS; r++) {
        int root = (r + t) % size, n = (r * 7919 + t * 31) % 70000;
        MPI_Request rq[8];
        for (int i = 0; i < N; i++) red[i] = rank * 1000 + i + r + t;
        for (int i = 0; i < N; i++) bc[i] = rank == root ? i * 3 + r - t : -1;
        int mine = rank * 100 + r + t;
        for (int k = 0; k < size; k++) a2a_s[k] = rank * 10000 + k * 100 + r + t;
        mt_fill(sb, (size_t)n, rank, t, r);
        CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, red, N, MPI_INT, MPI_SUM, c, &rq[0]));
        CHECK_MPI(MPI_Ibcast(bc, N, MPI_INT, root, c, &rq[1]));
        CHECK_MPI(MPI_Irecv(rb, n, MPI_BYTE, left, r, c, &rq[2]));
        CHECK_MPI(MPI_Iallgather(&mine, 1, MPI_INT, ag, 1, MPI_INT, c, &rq[3]));
        CHECK_MPI(MPI_Isend(sb, n, MPI_BYTE, right, r, c, &rq[4]));
        CHECK_MPI(MPI_Ialltoall(a2a_s, 1, MPI_INT, a2a_r, 1, MPI_INT, c, &rq[5]));
        CHECK_MPI(MPI_Ibarrier(c, &rq[6]));
        CHECK_MPI(MPI_Isend(sb, n, MPI_BYTE, right, 1000 + r, c, &rq[7]));
        /* the second message of the round by probe, while the rest is in flight */
        MPI_Status st;
        if (r % 2) {
            int flag = 0;
            while (!flag) CHECK_MPI(MPI_Iprobe(left, 1000 + r, c, &flag, &st));
            CHECK_STATUS(&st, left, 1000 + r, n, "thread %d round %d Iprobe", t, r);
            CHECK_MPI(MPI_Recv(pb, n, MPI_BYTE, left, 1000 + r, c, &st));
        } else {
            MPI_Message m;
            CHECK_MPI(MPI_Mprobe(MPI_ANY_SOURCE, 1000 + r, c, &m, &st));
            CHECK_STATUS(&st, left, 1000 + r, n, "thread %d round %d Mprobe", t, r);
            CHECK_MPI(MPI_Mrecv(pb, n, MPI_BYTE, &m, &st));
        }
        CHECK_BUF(pb, (size_t)n, left, t, r, "thread %d round %d probed message", t, r);
        CHECK_MPI(MPI_Waitall(8, rq, MPI_STATUSES_IGNORE));
        CHECK_BUF(rb, (size_t)n, left, t, r, "thread %d round %d ring message", t, r);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            long want = 1000L * size * (size - 1) / 2 + (long)size * (i + r + t);
            bad += red[i] != want;
            bad += bc[i] != i * 3 + r - t;
        }
        for (int k = 0; k < size; k++) {
            bad += ag[k] != k * 100 + r + t;
            bad += a2a_r[k] != k * 10000 + rank * 100 + r + t;
        }
        CHECK(bad == 0, "thread %d round %d: %d wrong collective results", t, r, bad);
    }
    free(red); free(bc); free(ag); free(a2a_s); free(a2a_r); free(sb); free(rb); free(pb);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = mt_init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, "mt_coll_threads");
    CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE not provided (%d)", provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided == MPI_THREAD_MULTIPLE) {
        pthread_t th[NT];
        int ids[NT];
        for (int t = 0; t < NT; t++) CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &own[t]));
        mt_section("4 threads: nonblocking collectives and p2p on their own communicators");
        for (int t = 0; t < NT; t++) {
            ids[t] = t;
            pthread_create(&th[t], NULL, worker, &ids[t]);
        }
        for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
        for (int t = 0; t < NT; t++) MPI_Comm_free(&own[t]);
    }
    return mt_finalize();
}
