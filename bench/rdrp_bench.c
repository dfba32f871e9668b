/*
 * rdrp_bench -- point-to-point microbenchmarks for comparing PMLs.
 *
 * Written for the rdrp project (MPI API only, no Open MPI internals), so the
 * same binary runs unchanged over pml rdrp, ucx or ob1.
 *
 * Sub-benchmarks (-t, comma separated, default "all"):
 *   lat   ping-pong between ranks 0 and 1, reports half round-trip time [us]
 *   bw    rank 0 streams windows of W MPI_Isend to rank 1, which answers each
 *         window with one small ack; MB/s, MB = 10^6 bytes
 *   bibw  ranks 0 and 1 stream windows at each other at the same time; MB/s
 *         counting both directions
 *   mr    np/2 sender/receiver pairs (rank i -> rank i+np/2), windows of
 *         small sends + ack, aggregate messages/s over all pairs
 *
 * Iteration counts: -i gives the count for small messages (<= 8 KiB); above
 * that the count is scaled down in proportion to the size (never below a
 * small floor).  With -T MS (default 100) rank 0 also shortens the run so that
 * one size takes about MS milliseconds, using the warm-up to estimate the cost
 * of one iteration; -T 0 gives fixed, reproducible counts.
 *
 * Buffers are page aligned and touched once at start-up.  Before each timed
 * loop the receiver poisons a few check positions in its receive buffer and
 * the sender writes size/rank-dependent pattern bytes at the same positions;
 * after the loop the receiver checks them (--full-check: every byte), so a
 * PML that drops or truncates data cannot look fast.  A failed check aborts
 * the job with exit code 3.
 *
 * Timing: the timed loop is split in -K chunks (default: ~2 ms each, at
 * least 10).  The value is
 * the average over all iterations (--stat avg, default, OSU style) or the
 * best chunk (--stat best, robust on a shared machine).
 *
 * Output: a human readable table per test, or with --csv machine readable
 * lines "test,np,size,value,unit,iters,avg" (one header line; avg is the
 * plain average whatever --stat says).  Informational lines start with '#'.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LARGE_MSG   8192u       /* above this the iteration count is scaled */
#define ACK_TAG     999
#define DATA_TAG    1
#define NCHECK      16          /* sampled check positions per message */
#define MAX_CHUNKS  256
#define CHUNK_MS    2.0         /* auto chunking: about this long each */

enum { T_LAT, T_BW, T_BIBW, T_MR, T_COUNT };
static const char *test_names[T_COUNT] = { "lat", "bw", "bibw", "mr" };
static const char *test_units[T_COUNT] = { "us", "MB/s", "MB/s", "msg/s" };

static struct {
    size_t min_size, max_size;  /* user range; (size_t)-1 = test default */
    size_t mr_max;              /* default upper size for mr */
    long iters_lat, iters_win;  /* small-message counts (0 = default) */
    long warmup;                /* -1 = automatic */
    int window;
    double target_ms;           /* per-size time target, 0 = fixed counts */
    int csv;
    int distinct;               /* separate buffer slot per window entry */
    int full_check;
    int chunks;                 /* timed loop split in this many chunks */
    int stat_best;              /* report best chunk instead of average */
    int tests[T_COUNT];
} opt;

static int rank, nprocs;
static unsigned char *sbuf, *rbuf;
static size_t slot_stride;      /* distance between window slots (0 = shared) */
static long n_checks;

/* ------------------------------------------------------------------ helpers */

static void die(const char *msg)
{
    fprintf(stderr, "rdrp_bench[%d]: %s\n", rank, msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static size_t parse_size(const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) {
        fprintf(stderr, "bad size '%s'\n", s);
        exit(1);
    }
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    }
    if (*end == 'i' || *end == 'B' || *end == 'b')
        end++;
    if (*end == 'B')
        end++;
    if (*end) {
        fprintf(stderr, "bad size '%s'\n", s);
        exit(1);
    }
    return (size_t)v;
}

/* next size in the sweep 0, 1, 2, 4, ... */
static size_t next_size(size_t s)
{
    return s == 0 ? 1 : s * 2;
}

static size_t first_size(size_t min)
{
    if (min == 0)
        return 0;
    size_t s = 1;
    while (s < min)
        s *= 2;
    return s;
}

static inline unsigned char pattern(size_t size, int from, size_t pos)
{
    return (unsigned char)(pos * 13u + size * 7u + (size_t)from * 101u + 1u);
}

/* sampled positions: spread over the message, first and last byte included */
static size_t check_pos(size_t size, int k)
{
    if (k == NCHECK - 1)
        return size - 1;
    size_t span = size / NCHECK;
    return (size_t)k * span + (span ? ((size_t)k * 131u) % span : 0);
}

/* sender side: write the pattern for this size into every used slot */
static void fill_send(size_t size, int nslots)
{
    if (size == 0)
        return;
    for (int s = 0; s < nslots; s++) {
        unsigned char *b = sbuf + (size_t)s * slot_stride;
        if (opt.full_check) {
            for (size_t p = 0; p < size; p++)
                b[p] = pattern(size, rank, p);
        } else {
            for (int k = 0; k < NCHECK; k++) {
                size_t p = check_pos(size, k);
                b[p] = pattern(size, rank, p);
            }
        }
    }
}

/* receiver side: make sure stale data cannot pass the check */
static void poison_recv(size_t size, int from, int nslots)
{
    if (size == 0)
        return;
    for (int s = 0; s < nslots; s++) {
        unsigned char *b = rbuf + (size_t)s * slot_stride;
        if (opt.full_check) {
            for (size_t p = 0; p < size; p++)
                b[p] = (unsigned char)~pattern(size, from, p);
        } else {
            for (int k = 0; k < NCHECK; k++) {
                size_t p = check_pos(size, k);
                b[p] = (unsigned char)~pattern(size, from, p);
            }
        }
    }
}

static void check_recv(const char *test, size_t size, int from, int nslots)
{
    if (size == 0)
        return;
    for (int s = 0; s < nslots; s++) {
        const unsigned char *b = rbuf + (size_t)s * slot_stride;
        size_t n = opt.full_check ? size : NCHECK;
        for (size_t i = 0; i < n; i++) {
            size_t p = opt.full_check ? i : check_pos(size, (int)i);
            n_checks++;
            if (b[p] != pattern(size, from, p)) {
                fprintf(stderr,
                        "rdrp_bench[%d]: VALIDATION FAILED test=%s size=%zu "
                        "slot=%d offset=%zu: got 0x%02x expected 0x%02x "
                        "(from rank %d)\n",
                        rank, test, size, s, p, b[p], pattern(size, from, p),
                        from);
                fflush(stderr);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
        }
    }
}

static inline void *rslot(int i) { return rbuf + (size_t)i * slot_stride; }
static inline void *sslot(int i) { return sbuf + (size_t)i * slot_stride; }

/* maximum iteration count for a size: base count, scaled for large sizes */
static long scaled_iters(long base, size_t size, long floor)
{
    if (size <= LARGE_MSG)
        return base;
    long n = (long)((double)base * LARGE_MSG / (double)size);
    return n < floor ? floor : n;
}

static int g_chunks = 10;       /* chunks of the current timed loop */

/*
 * Rank 0 turns the warm-up timing into the iteration count for the timed
 * loop and into the number of chunks (-K, or automatic: chunks of about
 * CHUNK_MS, at least 10, at most MAX_CHUNKS, at least one iteration each),
 * and tells everybody.  The collective is outside any timed region.
 */
static long agree_iters(long nmax, long nmin, long nwarm, double twarm)
{
    long v[2] = { nmax, opt.chunks ? opt.chunks : 10 };
    if (rank == 0 && nwarm > 0 && twarm > 0) {
        double per_iter = twarm / (double)nwarm;
        if (opt.target_ms > 0) {
            double want = opt.target_ms * 1e-3 / per_iter;
            if (want < (double)v[0])
                v[0] = want < (double)nmin ? nmin : (long)want;
        }
        if (!opt.chunks) {
            double k = (double)v[0] * per_iter * 1e3 / CHUNK_MS;
            v[1] = k < 10 ? 10 : k > MAX_CHUNKS ? MAX_CHUNKS : (long)k;
        }
    }
    MPI_Bcast(v, 2, MPI_LONG, 0, MPI_COMM_WORLD);
    g_chunks = (int)v[1];
    return v[0];
}

static long warmup_count(long nmax, long floor)
{
    if (opt.warmup >= 0)
        return opt.warmup;
    long w = nmax / 10;
    return w < floor ? floor : w;
}

/*
 * The timed loop of every size runs in up to opt.chunks chunks, each timed
 * by itself.  "avg" is the plain average over the whole loop (what OSU-style
 * suites report); "best" is the best chunk, which on a shared, noisy machine
 * is much more reproducible because a preemption only spoils one chunk.
 */
typedef struct {
    double total;               /* seconds for the whole loop */
    int nchunk;
    long cn[MAX_CHUNKS];        /* iterations per chunk */
    double ct[MAX_CHUNKS];      /* seconds per chunk */
} timing_t;

/* short chunks are what makes "best" robust: a competing process gets time
 * slices of a few ms, so some ~2 ms chunks run undisturbed */
static int chunk_count(long n)
{
    return n < g_chunks ? (int)n : g_chunks;
}

/* combine the timings of all ranks (max per chunk: the slowest pair sets the
 * pace), result valid on rank 0 */
static void reduce_timing(timing_t *t)
{
    double in[MAX_CHUNKS + 1], out[MAX_CHUNKS + 1];
    for (int k = 0; k < t->nchunk; k++)
        in[k] = t->ct[k];
    in[t->nchunk] = t->total;
    MPI_Reduce(in, out, t->nchunk + 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        for (int k = 0; k < t->nchunk; k++)
            t->ct[k] = out[k];
        t->total = out[t->nchunk];
    }
}

/* seconds per iteration: whole loop, and best chunk */
static double per_iter_avg(const timing_t *t, long n)
{
    return t->total / (double)n;
}

static double per_iter_best(const timing_t *t)
{
    double best = -1;
    for (int k = 0; k < t->nchunk; k++) {
        if (t->cn[k] <= 0 || t->ct[k] <= 0)
            continue;
        double v = t->ct[k] / (double)t->cn[k];
        if (best < 0 || v < best)
            best = v;
    }
    return best;
}

static void header(int t)
{
    if (rank != 0)
        return;
    if (opt.csv)
        return;
    printf("# rdrp_bench %s, np=%d%s%s\n", test_names[t], nprocs,
           t == T_LAT ? ", half round-trip time" : "",
           t == T_MR ? ", aggregate over all pairs" : "");
    if (t != T_LAT)
        printf("# window %d%s\n", opt.window,
               opt.distinct ? ", distinct buffer per window slot" : "");
    printf("# value: %s\n", opt.stat_best ? "best of the timed chunks" : "average over all iterations");
    printf("%-12s %16s %10s %16s\n", "# size[B]", test_units[t], "iters", "average");
}

/* value: per --stat; avg: plain average (same unit) */
static void report(int t, size_t size, double value, long iters, double avg)
{
    if (rank != 0)
        return;
    if (opt.csv)
        printf("%s,%d,%zu,%.4f,%s,%ld,%.4f\n", test_names[t], nprocs, size,
               value, test_units[t], iters, avg);
    else
        printf("%-12zu %16.2f %10ld %16.2f\n", size, value, iters, avg);
    fflush(stdout);
}

/* --------------------------------------------------------------- latency */

static double pingpong(size_t size, long n, int peer)
{
    double t0 = MPI_Wtime();
    if (rank == 0) {
        for (long i = 0; i < n; i++) {
            MPI_Send(sbuf, (int)size, MPI_BYTE, peer, DATA_TAG, MPI_COMM_WORLD);
            MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, DATA_TAG, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        }
    } else {
        for (long i = 0; i < n; i++) {
            MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, DATA_TAG, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            MPI_Send(sbuf, (int)size, MPI_BYTE, peer, DATA_TAG, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - t0;
}

static void pingpong_timed(size_t size, long n, int peer, timing_t *tm)
{
    long done = 0;
    tm->nchunk = chunk_count(n);
    tm->total = 0;
    for (int k = 0; k < tm->nchunk; k++) {
        long m = n * (k + 1) / tm->nchunk - done;
        tm->cn[k] = m;
        tm->ct[k] = pingpong(size, m, peer);
        tm->total += tm->ct[k];
        done += m;
    }
}

static void run_lat(size_t lo, size_t hi)
{
    long base = opt.iters_lat ? opt.iters_lat : 10000;
    int active = rank < 2;
    int peer = 1 - rank;

    header(T_LAT);
    for (size_t size = first_size(lo); size <= hi; size = next_size(size)) {
        long nmax = scaled_iters(base, size, 50);
        long nwarm = warmup_count(nmax, 10);
        double tw = 0;
        timing_t tm = { 0 };

        if (active) {
            fill_send(size, 1);
            tw = pingpong(size, nwarm, peer);
        }
        long n = agree_iters(nmax, 20, nwarm, tw);
        if (active)
            poison_recv(size, peer, 1);
        MPI_Barrier(MPI_COMM_WORLD);
        if (active) {
            pingpong_timed(size, n, peer, &tm);
            check_recv("lat", size, peer, 1);
        }
        /* rank 0 timed the round trips; half of it is the latency */
        double avg = per_iter_avg(&tm, n) * 1e6 / 2.0;
        double best = per_iter_best(&tm) * 1e6 / 2.0;
        report(T_LAT, size, opt.stat_best ? best : avg, n, avg);
    }
}

/* ------------------------------------------------------------- bandwidth */

/* one window from sender to receiver, ack back; used by bw and mr */
static void window_send(size_t size, int peer, MPI_Request *req)
{
    for (int w = 0; w < opt.window; w++)
        MPI_Isend(sslot(w), (int)size, MPI_BYTE, peer, DATA_TAG,
                  MPI_COMM_WORLD, &req[w]);
    MPI_Waitall(opt.window, req, MPI_STATUSES_IGNORE);
    MPI_Recv(rbuf, 4, MPI_BYTE, peer, ACK_TAG, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
}

static void window_recv(size_t size, int peer, MPI_Request *req)
{
    for (int w = 0; w < opt.window; w++)
        MPI_Irecv(rslot(w), (int)size, MPI_BYTE, peer, DATA_TAG,
                  MPI_COMM_WORLD, &req[w]);
    MPI_Waitall(opt.window, req, MPI_STATUSES_IGNORE);
    MPI_Send(sbuf, 4, MPI_BYTE, peer, ACK_TAG, MPI_COMM_WORLD);
}

/*
 * Unidirectional streaming between the pairs (i, i + npairs).  Returns the
 * time of the calling rank (senders only are used by the callers).
 */
static double stream(size_t size, long n, int npairs, MPI_Request *req)
{
    double t0 = MPI_Wtime();
    if (rank < npairs) {
        for (long i = 0; i < n; i++)
            window_send(size, rank + npairs, req);
    } else if (rank < 2 * npairs) {
        for (long i = 0; i < n; i++)
            window_recv(size, rank - npairs, req);
    }
    return MPI_Wtime() - t0;
}

/* chunked; only the senders' clocks count (receivers report 0) */
static void stream_timed(size_t size, long n, int npairs, MPI_Request *req,
                         timing_t *tm)
{
    long done = 0;
    int sender = rank < npairs;
    tm->nchunk = chunk_count(n);
    tm->total = 0;
    for (int k = 0; k < tm->nchunk; k++) {
        long m = n * (k + 1) / tm->nchunk - done;
        double t = stream(size, m, npairs, req);
        tm->cn[k] = m;
        tm->ct[k] = sender ? t : 0;
        tm->total += tm->ct[k];
        done += m;
    }
    reduce_timing(tm);
}

static int nslots(void)
{
    return slot_stride ? opt.window : 1;
}

/* the ack overwrites the first bytes of rbuf: keep it out of slot 0's check */
static void stream_check(const char *name, size_t size, int npairs)
{
    if (rank >= npairs && rank < 2 * npairs)
        check_recv(name, size, rank - npairs, nslots());
}

static void run_stream(int t, size_t lo, size_t hi, int npairs)
{
    long base = opt.iters_win ? opt.iters_win : (t == T_MR ? 500 : 100);
    MPI_Request *req = malloc(sizeof(*req) * (size_t)opt.window);
    if (!req)
        die("out of memory");

    header(t);
    size_t start = first_size(lo);
    if (start == 0)
        start = 1;      /* streaming 0 bytes measures nothing useful */
    for (size_t size = start; size <= hi; size = next_size(size)) {
        long nmax = scaled_iters(base, size, 5);
        long nwarm = warmup_count(nmax, 2);
        int sender = rank < npairs;
        int receiver = rank >= npairs && rank < 2 * npairs;

        if (sender)
            fill_send(size, nslots());
        MPI_Barrier(MPI_COMM_WORLD);
        double tw = stream(size, nwarm, npairs, req);
        long n = agree_iters(nmax, 3, nwarm, tw);
        if (receiver)
            poison_recv(size, rank - npairs, nslots());
        MPI_Barrier(MPI_COMM_WORLD);
        timing_t tm = { 0 };
        stream_timed(size, n, npairs, req, &tm);
        /* the ack receive in window_send reuses rbuf on the sender side only,
         * receivers' rbuf holds data of the last window */
        stream_check(test_names[t], size, npairs);

        /* per window iteration: npairs * window messages */
        double per_it = (double)npairs * (double)opt.window *
                        (t == T_MR ? 1.0 : (double)size / 1e6);
        double avg = per_it / per_iter_avg(&tm, n);
        double best = per_it / per_iter_best(&tm);
        report(t, size, opt.stat_best ? best : avg, n, avg);
    }
    free(req);
}

static double exchange(size_t size, long n, int peer, MPI_Request *req)
{
    int W = opt.window;
    double t0 = MPI_Wtime();
    for (long i = 0; i < n; i++) {
        for (int w = 0; w < W; w++)
            MPI_Irecv(rslot(w), (int)size, MPI_BYTE, peer, DATA_TAG,
                      MPI_COMM_WORLD, &req[w]);
        for (int w = 0; w < W; w++)
            MPI_Isend(sslot(w), (int)size, MPI_BYTE, peer, DATA_TAG,
                      MPI_COMM_WORLD, &req[W + w]);
        MPI_Waitall(2 * W, req, MPI_STATUSES_IGNORE);
    }
    return MPI_Wtime() - t0;
}

static void run_bibw(size_t lo, size_t hi)
{
    long base = opt.iters_win ? opt.iters_win : 100;
    MPI_Request *req = malloc(sizeof(*req) * 2 * (size_t)opt.window);
    int active = rank < 2;
    int peer = 1 - rank;
    if (!req)
        die("out of memory");

    header(T_BIBW);
    size_t start = first_size(lo);
    if (start == 0)
        start = 1;
    for (size_t size = start; size <= hi; size = next_size(size)) {
        long nmax = scaled_iters(base, size, 5);
        long nwarm = warmup_count(nmax, 2);
        double tw = 0;
        timing_t tm = { 0 };

        if (active)
            fill_send(size, nslots());
        MPI_Barrier(MPI_COMM_WORLD);
        if (active)
            tw = exchange(size, nwarm, peer, req);
        long n = agree_iters(nmax, 3, nwarm, tw);
        if (active)
            poison_recv(size, peer, nslots());
        MPI_Barrier(MPI_COMM_WORLD);
        long done = 0;
        tm.nchunk = chunk_count(n);
        for (int k = 0; k < tm.nchunk; k++) {
            long m = n * (k + 1) / tm.nchunk - done;
            tm.cn[k] = m;
            tm.ct[k] = active ? exchange(size, m, peer, req) : 0;
            tm.total += tm.ct[k];
            done += m;
        }
        if (active)
            check_recv("bibw", size, peer, nslots());
        reduce_timing(&tm);
        double per_it = 2.0 * (double)opt.window * (double)size / 1e6;
        double avg = per_it / per_iter_avg(&tm, n);
        double best = per_it / per_iter_best(&tm);
        report(T_BIBW, size, opt.stat_best ? best : avg, n, avg);
    }
    free(req);
}

/* ------------------------------------------------------------------ main */

static void usage(const char *prog)
{
    printf(
"usage: mpirun -np N %s [options]\n"
"  -t, --test LIST      lat,bw,bibw,mr or all (default all)\n"
"  -m, --min SIZE       smallest size (default 0 for lat, 1 otherwise)\n"
"  -M, --max SIZE       largest size (default 4M; mr: --mr-max)\n"
"      --mr-max SIZE    default largest size for mr (default 8K)\n"
"  -i, --iters N        iterations for sizes <= 8K (lat 10000, bw/bibw 100,\n"
"                       mr 500); scaled down in proportion above 8K\n"
"  -w, --warmup N       warm-up iterations (default 10%% of iters, min 10/2)\n"
"  -W, --window N       messages per window for bw/bibw/mr (default 64)\n"
"  -T, --target-ms MS   shorten each size to ~MS ms (default 100; 0 = fixed\n"
"                       iteration counts)\n"
"  -K, --chunks N       time the loop in N chunks (max %d; default 0 = auto:\n"
"                       chunks of ~2 ms, at least 10)\n"
"  -S, --stat avg|best  value = average over all iterations (default) or\n"
"                       the best chunk (robust against preemption)\n"
"  -c, --csv            machine readable: test,np,size,value,unit,iters,avg\n"
"  -D, --distinct       one buffer slot per window entry (default: all\n"
"                       entries share one buffer, as in common OSU-style runs)\n"
"  -F, --full-check     validate every received byte (default: %d samples)\n"
"  -h, --help\n"
"sizes accept K/M/G suffixes (powers of 1024).  lat uses ranks 0 and 1,\n"
"bibw ranks 0 and 1, bw/mr pairs (i, i+np/2).\n", prog, MAX_CHUNKS, NCHECK);
}

static void parse_tests(const char *s)
{
    char *dup = strdup(s), *save = NULL;
    memset(opt.tests, 0, sizeof(opt.tests));
    for (char *tok = strtok_r(dup, ", ", &save); tok;
         tok = strtok_r(NULL, ", ", &save)) {
        int found = 0;
        if (!strcmp(tok, "all")) {
            for (int t = 0; t < T_COUNT; t++)
                opt.tests[t] = 1;
            found = 1;
        }
        for (int t = 0; t < T_COUNT; t++)
            if (!strcmp(tok, test_names[t]))
                opt.tests[t] = found = 1;
        if (!found) {
            fprintf(stderr, "unknown test '%s'\n", tok);
            exit(1);
        }
    }
    free(dup);
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        { "test", required_argument, 0, 't' },
        { "min", required_argument, 0, 'm' },
        { "max", required_argument, 0, 'M' },
        { "mr-max", required_argument, 0, 'R' },
        { "iters", required_argument, 0, 'i' },
        { "warmup", required_argument, 0, 'w' },
        { "window", required_argument, 0, 'W' },
        { "target-ms", required_argument, 0, 'T' },
        { "csv", no_argument, 0, 'c' },
        { "chunks", required_argument, 0, 'K' },
        { "stat", required_argument, 0, 'S' },
        { "distinct", no_argument, 0, 'D' },
        { "full-check", no_argument, 0, 'F' },
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 }
    };
    int c, help = 0;
    long iters = 0;

    opt.min_size = (size_t)-1;
    opt.max_size = (size_t)-1;
    opt.mr_max = 8192;
    opt.warmup = -1;
    opt.window = 64;
    opt.target_ms = 100;
    opt.chunks = 0;
    parse_tests("all");

    /* parse before MPI_Init so that --help works without a launcher */
    while ((c = getopt_long(argc, argv, "t:m:M:i:w:W:T:K:S:cDFh", lo, NULL)) != -1) {
        switch (c) {
        case 't': parse_tests(optarg); break;
        case 'm': opt.min_size = parse_size(optarg); break;
        case 'M': opt.max_size = parse_size(optarg); break;
        case 'R': opt.mr_max = parse_size(optarg); break;
        case 'i': iters = atol(optarg); break;
        case 'w': opt.warmup = atol(optarg); break;
        case 'W': opt.window = atoi(optarg); break;
        case 'T': opt.target_ms = atof(optarg); break;
        case 'c': opt.csv = 1; break;
        case 'K': opt.chunks = atoi(optarg); break;
        case 'S':
            if (!strcmp(optarg, "best"))
                opt.stat_best = 1;
            else if (!strcmp(optarg, "avg"))
                opt.stat_best = 0;
            else {
                fprintf(stderr, "--stat must be avg or best\n");
                return 1;
            }
            break;
        case 'D': opt.distinct = 1; break;
        case 'F': opt.full_check = 1; break;
        case 'h': help = 1; break;
        default: usage(argv[0]); return 1;
        }
    }
    if (help) {
        usage(argv[0]);
        return 0;
    }
    if (iters < 0 || opt.window < 1 || opt.target_ms < 0 || opt.chunks < 0 ||
        opt.chunks > MAX_CHUNKS) {
        fprintf(stderr, "bad option value\n");
        return 1;
    }
    if (iters > 0)
        opt.iters_lat = opt.iters_win = iters;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (nprocs < 2)
        die("needs at least 2 ranks");

    size_t hi_all = opt.max_size != (size_t)-1 ? opt.max_size : (4u << 20);
    if (opt.tests[T_MR] && opt.max_size == (size_t)-1 && opt.mr_max > hi_all)
        hi_all = opt.mr_max;
    if (hi_all > (size_t)0x7fffffff)
        die("max size must fit an int count");
    if (hi_all < 4)
        hi_all = 4;     /* room for the ack */

    /* page aligned, touched once here, never re-initialised in timed code */
    long page = sysconf(_SC_PAGESIZE);
    size_t nslot = opt.distinct ? (size_t)opt.window : 1;
    slot_stride = opt.distinct ? (hi_all + (size_t)page - 1) / (size_t)page * (size_t)page : 0;
    size_t bytes = (opt.distinct ? slot_stride * nslot : hi_all);
    bytes = (bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
    if (posix_memalign((void **)&sbuf, (size_t)page, bytes) ||
        posix_memalign((void **)&rbuf, (size_t)page, bytes))
        die("cannot allocate buffers");
    memset(sbuf, 'a', bytes);
    memset(rbuf, 'b', bytes);

    if (rank == 0) {
        if (opt.csv)
            printf("test,np,size,value,unit,iters,avg\n");
        else
            printf("# rdrp_bench: np=%d window=%d target=%gms chunks=%d%s stat=%s%s%s\n",
                   nprocs, opt.window, opt.target_ms, opt.chunks,
                   opt.chunks ? "" : "(auto, ~2ms each)",
                   opt.stat_best ? "best" : "avg",
                   opt.distinct ? " distinct-buffers" : "",
                   opt.full_check ? " full-check" : "");
        fflush(stdout);
    }

    size_t lo_def = opt.min_size != (size_t)-1 ? opt.min_size : 0;
    size_t hi_def = opt.max_size != (size_t)-1 ? opt.max_size : (4u << 20);
    size_t hi_mr = opt.max_size != (size_t)-1 ? opt.max_size : opt.mr_max;

    if (opt.tests[T_LAT])
        run_lat(lo_def, hi_def);
    if (opt.tests[T_BW])
        run_stream(T_BW, lo_def, hi_def, 1);
    if (opt.tests[T_BIBW])
        run_bibw(lo_def, hi_def);
    if (opt.tests[T_MR]) {
        if (nprocs % 2 && rank == 0)
            fprintf(stderr, "# mr: odd np, rank %d idles\n", nprocs - 1);
        run_stream(T_MR, lo_def, hi_mr, nprocs / 2);
    }

    long total = 0;
    MPI_Reduce(&n_checks, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("# validation: OK (%ld byte checks)\n", total);
        fflush(stdout);
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
