/*
 * incast: K senders stream large messages to one receiver while a victim
 * flow crosses the receiver's switch port (issue 16, the RDRP seed's slow
 * receiver / incast).  Run across the namespace cluster (test/cluster) with
 * ranks placed round-robin over K+2 nodes (--map-by node, np = K+3):
 *   rank 0         the receiver (node1), behind the shaped port
 *   ranks 1..K     senders, one per node (node2 .. nodeK+1)
 *   rank K+1       victim client (node K+2): 8-byte ping-pongs to rank K+2
 *   rank K+2       victim server, on node1: its replies and the client's
 *                  requests share node1's port with the incast
 * For D seconds every sender keeps W messages of SIZE bytes in flight to the
 * receiver (which keeps W receives posted per sender); the victim records the
 * round-trip time of every ping-pong.  Prints one line:
 *   incast K=<K> size=<S> goodput_MBps=<..> victim_rtt_us mean=<..> p50=<..> p99=<..> max=<..> n=<..>
 * (half round trips would hide nothing: the RTT is what a request waits.)
 *
 *   incast [-d SECONDS] [-b SIZE] [-w WINDOW]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    double dur = 5;
    long size = 4 << 20;
    int win = 4, rank, np, c;
    while ((c = getopt(argc, argv, "d:b:w:")) != -1) {
        if (c == 'd') dur = atof(optarg);
        else if (c == 'b') size = atol(optarg);
        else if (c == 'w') win = atoi(optarg);
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int K = np - 3;
    if (K < 1) {
        if (rank == 0) fprintf(stderr, "incast: needs np >= 4 (K = np - 3 senders)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const int client = K + 1, server = K + 2;
    char *buf = malloc((size_t)size * (size_t)win * (size_t)(rank == 0 ? K : 1));
    memset(buf, rank, (size_t)size * (size_t)win * (size_t)(rank == 0 ? K : 1));
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    if (rank == 0) {
        /* receiver: W receives posted per sender, reposted as they complete,
         * until every slot got its stop (a zero-byte message) */
        MPI_Request *rq = malloc(sizeof(MPI_Request) * (size_t)(K * win));
        long bytes = 0;
        int live = K * win;  /* receive slots still open: each ends with a zero-byte stop */
        for (int i = 0; i < K * win; i++)
            MPI_Irecv(buf + (size_t)i * size, (int)size, MPI_BYTE, 1 + i / win, 7, MPI_COMM_WORLD, &rq[i]);
        while (live > 0) {
            int idx;
            MPI_Status st;
            MPI_Waitany(K * win, rq, &idx, &st);
            if (idx == MPI_UNDEFINED) break;
            int n;
            MPI_Get_count(&st, MPI_BYTE, &n);
            if (n == 0) { --live; continue; }  /* this slot is done */
            bytes += n;
            MPI_Irecv(buf + (size_t)idx * size, (int)size, MPI_BYTE, 1 + idx / win, 7, MPI_COMM_WORLD, &rq[idx]);
        }
        double t = MPI_Wtime() - t0;
        double gp = bytes / t / 1e6;
        MPI_Send(&gp, 1, MPI_DOUBLE, client, 9, MPI_COMM_WORLD);
        free(rq);
    } else if (rank <= K) {
        MPI_Request *rq = malloc(sizeof(MPI_Request) * (size_t)win);
        for (int i = 0; i < win; i++) MPI_Isend(buf, (int)size, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &rq[i]);
        while (MPI_Wtime() - t0 < dur) {
            int idx;
            MPI_Waitany(win, rq, &idx, MPI_STATUS_IGNORE);
            MPI_Isend(buf, (int)size, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &rq[idx]);
        }
        MPI_Waitall(win, rq, MPI_STATUSES_IGNORE);
        for (int i = 0; i < win; i++) MPI_Send(buf, 0, MPI_BYTE, 0, 7, MPI_COMM_WORLD);  /* stop, one per slot */
        free(rq);
    } else if (rank == client) {
        size_t cap = 1 << 20, n = 0;
        double *rtt = malloc(sizeof(double) * cap);
        char b[8] = {0};
        int go = 1;
        while (go) {
            double s = MPI_Wtime();
            MPI_Send(b, 8, MPI_BYTE, server, 3, MPI_COMM_WORLD);
            MPI_Recv(b, 8, MPI_BYTE, server, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            double e = MPI_Wtime();
            if (n < cap) rtt[n++] = (e - s) * 1e6;
            go = e - t0 < dur;
            usleep(1000);  /* a request every millisecond or so: a latency-sensitive flow, not a flood */
        }
        b[0] = 1;  /* stop */
        MPI_Send(b, 8, MPI_BYTE, server, 3, MPI_COMM_WORLD);
        double gp;
        MPI_Recv(&gp, 1, MPI_DOUBLE, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        double sum = 0;
        for (size_t i = 0; i < n; i++) sum += rtt[i];
        qsort(rtt, n, sizeof(double), cmp_d);
        printf("incast K=%d size=%ld goodput_MBps=%.1f victim_rtt_us mean=%.1f p50=%.1f p99=%.1f max=%.1f n=%zu\n", K,
               size, gp, sum / (double)n, rtt[n / 2], rtt[(size_t)(n * 0.99)], rtt[n - 1], n);
        fflush(stdout);
        free(rtt);
    } else if (rank == server) {
        char b[8];
        for (;;) {
            MPI_Recv(b, 8, MPI_BYTE, client, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (b[0] == 1) break;
            MPI_Send(b, 8, MPI_BYTE, client, 3, MPI_COMM_WORLD);
        }
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
