/*
 * throttle_isend: many outstanding MPI_Isend per rank, with every send
 * admitted by coll/cdag's token-throttling engine (common/throttle/throttle.h)
 * in mode off, rank or node -- the seed's "rate congestion" pattern with
 * the admission control in front of MPI point-to-point.
 *
 * Ranks pair up (r <-> r + np/2); every rank pre-posts N receives from its
 * partner and then sends N messages of S bytes, each only once the
 * throttle admits it (otherwise it completes earlier sends with
 * MPI_Testsome and retries).  Output: "isend <mode> <S> <MB/s>" (aggregate
 * over all ranks, best of the repetitions).  All ranks are on one node
 * (the node pool is shared by all of them).
 *
 *   mpirun -np 4 throttle_isend MODE [-s SIZES] [-n N] [-l RANK_LIMIT] [-t NODE_TOKENS] [-b BYTES_PER_TOKEN]
 *                                    [-c TOKEN_CACHE (-1: tokens / (2 x ranks), as coll/cdag)]
 *
 * With MODE off and --mca pml rdrp --mca pml_rdrp_throttle rank|node the
 * same pattern measures pml/rdrp's own admission control instead.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/throttle/throttle.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2 || size % 2) {
        if (rank == 0) fprintf(stderr, "usage: throttle_isend off|rank|node [...] (even rank count)\n");
        MPI_Finalize();
        return 1;
    }
    cdag_throttle_config_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.mode = !strcmp(argv[1], "node") ? CDAG_THROTTLE_NODE : !strcmp(argv[1], "rank") ? CDAG_THROTTLE_RANK : CDAG_THROTTLE_OFF;
    cfg.rank_limit = 16;
    cfg.node_tokens = 32;
    cfg.bytes_per_token = 16384;
    cfg.recover_after = 100000;
    long cache = -1;
    const char *sizes = "64,1024,16384,262144";
    long N = 512;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-s")) sizes = argv[i + 1];
        else if (!strcmp(argv[i], "-n")) N = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-l")) cfg.rank_limit = (uint32_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-t")) cfg.node_tokens = (uint32_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "-b")) cfg.bytes_per_token = (uint64_t)atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "-c")) cache = atol(argv[i + 1]);
    }
    cfg.cache = cache >= 0 ? (uint32_t)cache : CDAG_THROTTLE_CACHE_AUTO;
    int pid = (int)getpid();
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    char name[64], err[256];
    snprintf(name, sizeof(name), "/rdrp-isend-%d", pid);
    cdag_throttle_t *t = NULL;
    for (int r = 0; r < size; r++) {  /* rank 0 creates the pool before the others attach */
        if (r == rank) t = cdag_throttle_create(&cfg, name, rank, size, err, sizeof(err));
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (!t) {
        fprintf(stderr, "rank %d: %s\n", rank, err);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int partner = (rank + size / 2) % size;
    long maxs = 0;
    {
        char *c = strdup(sizes), *sv = NULL;
        for (char *tk = strtok_r(c, ",", &sv); tk; tk = strtok_r(NULL, ",", &sv))
            if (atol(tk) > maxs) maxs = atol(tk);
        free(c);
    }
    char *sb = malloc((size_t)maxs), *rb = malloc((size_t)maxs * (size_t)N);
    memset(sb, 3, (size_t)maxs);
    MPI_Request *rr = malloc(sizeof(MPI_Request) * (size_t)N), *sr = malloc(sizeof(MPI_Request) * (size_t)N);
    uint32_t *tok = malloc(sizeof(uint32_t) * (size_t)N);
    int *idx = malloc(sizeof(int) * (size_t)N);
    char *c = strdup(sizes), *sv = NULL;
    for (char *tk = strtok_r(c, ",", &sv); tk; tk = strtok_r(NULL, ",", &sv)) {
        long S = atol(tk);
        double best = 1e30;
        for (int rep = 0; rep < 5; rep++) {
            for (long i = 0; i < N; i++)
                MPI_Irecv(rb + i * S, (int)S, MPI_BYTE, partner, 9, MPI_COMM_WORLD, &rr[i]);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (long i = 0; i < N; i++) {
                while (!cdag_throttle_try_acquire(t, (uint64_t)S, &tok[i])) {
                    /* complete earlier sends; the probe keeps MPI progressing
                     * even with none outstanding (our receives serve the
                     * partner, whose sends hold the node's tokens) */
                    int outc = 0, flag;
                    MPI_Iprobe(MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
                    MPI_Testsome((int)i, sr, &outc, idx, MPI_STATUSES_IGNORE);
                    for (int k = 0; k < outc; k++) cdag_throttle_release(t, tok[idx[k]]);
                }
                MPI_Isend(sb, (int)S, MPI_BYTE, partner, 9, MPI_COMM_WORLD, &sr[i]);
            }
            /* completion releases what is still held */
            for (long i = 0; i < N; i++) {
                if (sr[i] != MPI_REQUEST_NULL) {
                    MPI_Wait(&sr[i], MPI_STATUS_IGNORE);
                    cdag_throttle_release(t, tok[i]);
                }
            }
            MPI_Waitall((int)N, rr, MPI_STATUSES_IGNORE);
            double dt = MPI_Wtime() - t0, dmax;
            MPI_Allreduce(&dt, &dmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            if (dmax < best) best = dmax;
        }
        if (rank == 0) printf("isend %s %ld %.1f\n", argv[1], S, (double)size * N * S / best / 1e6);
        fflush(stdout);
    }
    free(c);
    cdag_throttle_destroy(t);
    free(sb); free(rb); free(rr); free(sr); free(tok); free(idx);
    MPI_Finalize();
    return 0;
}
