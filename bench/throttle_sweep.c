/*
 * throttle_sweep: the microbenchmark of the token-throttling seed (section
 * 4, Fig. 2/3) with MPI point-to-point, used to derive the admission
 * control thresholds on the machine where it runs (section 5.1).
 *
 * The ranks are split in two halves that play the seed's two nodes; rank r
 * of the first half exchanges with rank r + np/2 (bidirectional traffic).
 * For every message size S, number of active ranks per half A and messages
 * in flight per rank D: each active rank sends N messages to its partner
 * (and receives N from it) in N/D rounds of D nonblocking sends and
 * receives followed by a wait.  Reported: aggregate throughput (MB/s), the
 * seed's rate-congestion metric against sending all N at once,
 * (T(D) - T(N)) / T(N), and the best D per (S, A) = CRCT[A][S], the best A
 * with blocking communication (D = 1) = CCT[S], and NRCT[S] = the best
 * A x D.  Inactive ranks wait in a barrier.
 *
 *   mpirun -np 4 throttle_sweep [-s 64,1024,16384,262144] [-n 256] [-d 1,2,4,8,16,32]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse(const char *s, long *v, int max)
{
    int n = 0;
    char *c = strdup(s), *sv = NULL;
    for (char *t = strtok_r(c, ",", &sv); t && n < max; t = strtok_r(NULL, ",", &sv)) v[n++] = atol(t);
    free(c);
    return n;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2 || size % 2) {
        if (rank == 0) fprintf(stderr, "throttle_sweep: needs an even number of ranks\n");
        MPI_Finalize();
        return 1;
    }
    long sizes[16], ds[16];
    int ns = parse("64,1024,16384,262144", sizes, 16), nd = parse("1,2,4,8,16,32", ds, 16);
    long N = 256;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-s")) ns = parse(argv[i + 1], sizes, 16);
        else if (!strcmp(argv[i], "-d")) nd = parse(argv[i + 1], ds, 16);
        else if (!strcmp(argv[i], "-n")) N = atol(argv[i + 1]);
    }
    int half = size / 2, me = rank % half, partner = rank < half ? rank + half : rank - half;
    long maxs = 0;
    for (int i = 0; i < ns; i++) maxs = sizes[i] > maxs ? sizes[i] : maxs;
    long maxd = N;
    char *sb = malloc((size_t)maxs * (size_t)maxd), *rb = malloc((size_t)maxs * (size_t)maxd);
    memset(sb, 1, (size_t)maxs * (size_t)maxd);
    MPI_Request *rq = malloc(sizeof(MPI_Request) * 2 * (size_t)maxd);
    /* results[s][a][d] */
    double *res = calloc((size_t)ns * (size_t)half * (size_t)(nd + 1), sizeof(double));
    if (rank == 0)
        printf("# throttle_sweep: %d ranks (%d per half), %ld messages per active rank\n", size, half, N);
    for (int si = 0; si < ns; si++) {
        long S = sizes[si];
        for (int a = 1; a <= half; a++) {
            for (int di = 0; di <= nd; di++) {
                long D = di < nd ? ds[di] : N;  /* last column: all N at once */
                if (D > N) D = N;
                int active = me < a;
                double best = 1e30;
                for (int rep = 0; rep < 3; rep++) {
                    MPI_Barrier(MPI_COMM_WORLD);
                    double t0 = MPI_Wtime();
                    if (active) {
                        for (long done = 0; done < N; done += D) {
                            long k = N - done < D ? N - done : D;
                            for (long j = 0; j < k; j++) {
                                MPI_Irecv(rb + j * S, (int)S, MPI_BYTE, partner, 1, MPI_COMM_WORLD, &rq[2 * j]);
                                MPI_Isend(sb + j * S, (int)S, MPI_BYTE, partner, 1, MPI_COMM_WORLD, &rq[2 * j + 1]);
                            }
                            MPI_Waitall((int)(2 * k), rq, MPI_STATUSES_IGNORE);
                        }
                    }
                    double t = MPI_Wtime() - t0, tmax;
                    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                    if (tmax < best) best = tmax;
                }
                res[((size_t)si * half + (a - 1)) * (nd + 1) + di] = best;
            }
        }
    }
    if (rank == 0) {
        for (int si = 0; si < ns; si++) {
            long S = sizes[si];
            printf("\n== size %ld B: aggregate throughput MB/s (rate-congestion metric (T(D)-T(N))/T(N) in parentheses)\n", S);
            printf("%7s", "active");
            for (int di = 0; di < nd; di++) printf("      D=%-10ld", ds[di]);
            printf("   D=N (all)  best D\n");
            for (int a = 1; a <= half; a++) {
                double *row = &res[((size_t)si * half + (a - 1)) * (nd + 1)];
                double bytes = 2.0 * 2.0 * a * N * (double)S;  /* both halves, both directions */
                int bd = 0;
                printf("%7d", a);
                for (int di = 0; di < nd; di++) {
                    printf(" %8.0f (%+5.2f)", bytes / row[di] / 1e6, (row[di] - row[nd]) / row[nd]);
                    if (row[di] < row[bd]) bd = di;
                }
                printf(" %11.0f  %6ld\n", bytes / row[nd] / 1e6, ds[bd]);
            }
            /* thresholds of section 5.1 */
            int cct = 1, best_a = 1, best_d = 0;
            double bt = 0, bnode = 0;
            for (int a = 1; a <= half; a++) {
                double *row = &res[((size_t)si * half + (a - 1)) * (nd + 1)];
                double bytes = 4.0 * a * N * (double)S;
                if (bytes / row[0] > bt) { bt = bytes / row[0]; cct = a; }
                for (int di = 0; di < nd; di++)
                    if (bytes / row[di] > bnode) { bnode = bytes / row[di]; best_a = a; best_d = di; }
            }
            printf("   CCT[%ld] = %d active ranks (best blocking throughput), NRCT[%ld] = %ld messages in flight per half (%d ranks x D=%ld)\n",
                   S, cct, S, best_a * ds[best_d], best_a, ds[best_d]);
        }
    }
    free(sb);
    free(rb);
    free(rq);
    free(res);
    MPI_Finalize();
    return 0;
}
