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
 *   bowtie BOWTIE (rendezvous-get-put-polling seed, section 4.1): every rank
 *         r exchanges one message with its partner r +- np/2 (= r ^ np/2 for
 *         a power-of-two np) at the same time, MPI_Irecv + MPI_Isend +
 *         MPI_Waitall per trial; MB/s summed over all ranks' sends
 *   a2a   alltoall by point-to-point (same seed, section 4.2.2): every rank
 *         MPI_Isend/MPI_Irecv to/from all np-1 others (shift d: send to r+d,
 *         receive from r-d), in groups of 4 shifts with one MPI_Waitall per
 *         group; MB/s summed over all ranks' sends
 *
 * Iteration counts: -i gives the count for small messages (<= 8 KiB); above
 * that the count is scaled down in proportion to the size (never below a
 * small floor).  With -T MS (default 100) rank 0 also shortens the run so that
 * one size takes about MS milliseconds, using the warm-up to estimate the cost
 * of one iteration; -T 0 gives fixed, reproducible counts.  --sizes replaces
 * the power-of-two sweep by an explicit list.
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
#define MAX_SIZES   64          /* entries of --sizes */
#define A2A_GROUP   4           /* a2a: shifts posted before one Waitall */

enum { T_LAT, T_BW, T_BIBW, T_MR, T_BOWTIE, T_A2A, T_COUNT };
static const char *test_names[T_COUNT] = { "lat", "bw", "bibw", "mr", "bowtie", "a2a" };
static const char *test_units[T_COUNT] = { "us", "MB/s", "MB/s", "msg/s", "MB/s", "MB/s" };

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
    size_t sizes[MAX_SIZES];    /* --sizes: explicit list (nsizes > 0) */
    int nsizes;
} opt;

static int rank, nprocs;
static unsigned char *sbuf, *rbuf;
static size_t slot_stride;      /* distance between window slots (0 = shared) */
static size_t peer_stride;      /* a2a: distance between per-source slots */
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

/*
 * The sizes one test runs: the --sizes list, or the powers of two (and 0)
 * in [lo, hi].  no_zero: streaming tests skip size 0.  Returns the count.
 */
static int size_list(size_t lo, size_t hi, int no_zero, size_t *out)
{
    int n = 0;
    if (opt.nsizes > 0) {
        for (int i = 0; i < opt.nsizes; i++)
            if (!(no_zero && opt.sizes[i] == 0))
                out[n++] = opt.sizes[i];
        return n;
    }
    size_t s = first_size(lo);
    if (no_zero && s == 0)
        s = 1;          /* streaming 0 bytes measures nothing useful */
    for (; s <= hi && n < MAX_SIZES; s = next_size(s))
        out[n++] = s;
    return n;
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
static void poison_buf(unsigned char *b, size_t size, int from)
{
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

static void poison_recv(size_t size, int from, int nslots)
{
    if (size == 0)
        return;
    for (int s = 0; s < nslots; s++)
        poison_buf(rbuf + (size_t)s * slot_stride, size, from);
}

static void check_buf(const char *test, const unsigned char *b, size_t size,
                      int from, int slot)
{
    size_t n = opt.full_check ? size : NCHECK;
    for (size_t i = 0; i < n; i++) {
        size_t p = opt.full_check ? i : check_pos(size, (int)i);
        n_checks++;
        if (b[p] != pattern(size, from, p)) {
            fprintf(stderr,
                    "rdrp_bench[%d]: VALIDATION FAILED test=%s size=%zu "
                    "slot=%d offset=%zu: got 0x%02x expected 0x%02x "
                    "(from rank %d)\n",
                    rank, test, size, slot, p, b[p], pattern(size, from, p),
                    from);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
    }
}

static void check_recv(const char *test, size_t size, int from, int nslots)
{
    if (size == 0)
        return;
    for (int s = 0; s < nslots; s++)
        check_buf(test, rbuf + (size_t)s * slot_stride, size, from, s);
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
    printf("# rdrp_bench %s, np=%d%s%s%s%s\n", test_names[t], nprocs,
           t == T_LAT ? ", half round-trip time" : "",
           t == T_MR ? ", aggregate over all pairs" : "",
           t == T_BOWTIE ? ", pairs r <-> r+-np/2 exchange one message each"
                           " way per trial, MB/s summed over all ranks" : "",
           t == T_A2A ? ", every rank sends to all others per trial,"
                        " MB/s summed over all ranks" : "");
    if (t == T_BW || t == T_BIBW || t == T_MR)
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

    size_t sizes[MAX_SIZES];
    int nsz = size_list(lo, hi, 0, sizes);

    header(T_LAT);
    for (int si = 0; si < nsz; si++) {
        size_t size = sizes[si];
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

    size_t sizes[MAX_SIZES];
    int nsz = size_list(lo, hi, 1, sizes);

    header(t);
    for (int si = 0; si < nsz; si++) {
        size_t size = sizes[si];
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

    size_t sizes[MAX_SIZES];
    int nsz = size_list(lo, hi, 1, sizes);

    header(T_BIBW);
    for (int si = 0; si < nsz; si++) {
        size_t size = sizes[si];
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

/* ------------------------------------------ seed patterns: bowtie and a2a */

/*
 * BOWTIE (rendezvous-get-put-polling seed, section 4.1): rank r and its
 * partner send one message to each other at the same time and wait for
 * both.  The partner is r +- np/2, which is the seed's (np >> 1) ^ r for a
 * power-of-two np (the same pairs as mr); with an odd np the last rank idles.
 */
static int bowtie_peer(void)
{
    int half = nprocs / 2;
    if (rank >= 2 * half)
        return -1;
    return rank < half ? rank + half : rank - half;
}

static double bowtie(size_t size, long n, int peer)
{
    MPI_Request req[2];
    double t0 = MPI_Wtime();
    for (long i = 0; i < n; i++) {
        MPI_Irecv(rbuf, (int)size, MPI_BYTE, peer, DATA_TAG, MPI_COMM_WORLD,
                  &req[0]);
        MPI_Isend(sbuf, (int)size, MPI_BYTE, peer, DATA_TAG, MPI_COMM_WORLD,
                  &req[1]);
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    }
    return MPI_Wtime() - t0;
}

/*
 * Alltoall by point-to-point (same seed, section 4.2.2): shifts d = 1 ..
 * np-1 in groups of A2A_GROUP; per shift an MPI_Isend to r+d, then an
 * MPI_Irecv from r-d (the seed's order: sends first, so rendezvous requests
 * often arrive unexpected), one MPI_Waitall per group.  The message from r-d
 * lands in its own slot d-1, so no two receives share a buffer; all sends
 * read the same buffer.  The seed's loop also has the shift 0 (a message to
 * itself); it is left out here, only messages between processes count.
 */
static int a2a_src(int d) { return (rank - d + nprocs) % nprocs; }
static unsigned char *a2a_slot(int d) { return rbuf + (size_t)(d - 1) * peer_stride; }

static double a2a(size_t size, long n, MPI_Request *req)
{
    double t0 = MPI_Wtime();
    for (long i = 0; i < n; i++) {
        for (int d0 = 1; d0 < nprocs; d0 += A2A_GROUP) {
            int k = 0;
            for (int d = d0; d < nprocs && d < d0 + A2A_GROUP; d++) {
                MPI_Isend(sbuf, (int)size, MPI_BYTE, (rank + d) % nprocs,
                          DATA_TAG, MPI_COMM_WORLD, &req[k++]);
                MPI_Irecv(a2a_slot(d), (int)size, MPI_BYTE, a2a_src(d),
                          DATA_TAG, MPI_COMM_WORLD, &req[k++]);
            }
            MPI_Waitall(k, req, MPI_STATUSES_IGNORE);
        }
    }
    return MPI_Wtime() - t0;
}

static double pattern_trials(int t, size_t size, long n, int peer,
                             MPI_Request *req)
{
    return t == T_A2A ? a2a(size, n, req) : bowtie(size, n, peer);
}

/* bowtie and a2a: every active rank times its own trials, the slowest
 * rank's chunk counts (reduce_timing); value = bytes sent by all ranks per
 * trial / time per trial */
static void run_pattern(int t, size_t lo, size_t hi)
{
    long base = opt.iters_lat ? opt.iters_lat : 10000;
    int peer = bowtie_peer();
    int active = t == T_A2A || peer >= 0;
    double msgs = t == T_A2A ? (double)nprocs * (nprocs - 1)   /* per trial */
                             : (double)(nprocs / 2 * 2);
    MPI_Request req[2 * A2A_GROUP];
    size_t sizes[MAX_SIZES];
    int nsz = size_list(lo, hi, 1, sizes);

    if (t == T_BOWTIE && nprocs % 2 && rank == 0)
        fprintf(stderr, "# bowtie: odd np, rank %d idles\n", nprocs - 1);
    header(t);
    for (int si = 0; si < nsz; si++) {
        size_t size = sizes[si];
        long nmax = scaled_iters(base, size, 10);
        long nwarm = warmup_count(nmax, 3);
        double tw = 0;
        timing_t tm = { 0 };

        if (active)
            fill_send(size, 1);
        MPI_Barrier(MPI_COMM_WORLD);
        if (active)
            tw = pattern_trials(t, size, nwarm, peer, req);
        long n = agree_iters(nmax, 3, nwarm, tw);
        if (t == T_A2A) {
            for (int d = 1; d < nprocs && size > 0; d++)
                poison_buf(a2a_slot(d), size, a2a_src(d));
        } else if (active) {
            poison_recv(size, peer, 1);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        long done = 0;
        tm.nchunk = chunk_count(n);
        for (int k = 0; k < tm.nchunk; k++) {
            long m = n * (k + 1) / tm.nchunk - done;
            tm.cn[k] = m;
            tm.ct[k] = active ? pattern_trials(t, size, m, peer, req) : 0;
            tm.total += tm.ct[k];
            done += m;
        }
        if (t == T_A2A) {
            for (int d = 1; d < nprocs && size > 0; d++)
                check_buf("a2a", a2a_slot(d), size, a2a_src(d), d - 1);
        } else if (active) {
            check_recv("bowtie", size, peer, 1);
        }
        reduce_timing(&tm);
        double per_it = msgs * (double)size / 1e6;
        double avg = per_it / per_iter_avg(&tm, n);
        double best = per_it / per_iter_best(&tm);
        report(t, size, opt.stat_best ? best : avg, n, avg);
    }
}

/* ------------------------------------------------------------------ main */

static void usage(const char *prog)
{
    printf(
"usage: mpirun -np N %s [options]\n"
"  -t, --test LIST      lat,bw,bibw,mr,bowtie,a2a or all (default all)\n"
"  -m, --min SIZE       smallest size (default 0 for lat, 1 otherwise)\n"
"  -M, --max SIZE       largest size (default 4M; mr: --mr-max)\n"
"  -z, --sizes LIST     explicit sizes instead of the powers of two between\n"
"                       --min and --max, e.g. 1M,4M,16M,64M (max %d)\n"
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
"bibw ranks 0 and 1, bw/mr/bowtie pairs (i, i+np/2), a2a all ranks.\n",
           prog, MAX_SIZES, MAX_CHUNKS, NCHECK);
}

static void parse_sizes(const char *s)
{
    char *dup = strdup(s), *save = NULL;
    opt.nsizes = 0;
    for (char *tok = strtok_r(dup, ", ", &save); tok;
         tok = strtok_r(NULL, ", ", &save)) {
        if (opt.nsizes == MAX_SIZES) {
            fprintf(stderr, "--sizes: at most %d sizes\n", MAX_SIZES);
            exit(1);
        }
        opt.sizes[opt.nsizes++] = parse_size(tok);
    }
    free(dup);
    if (opt.nsizes == 0) {
        fprintf(stderr, "--sizes: empty list\n");
        exit(1);
    }
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
        { "sizes", required_argument, 0, 'z' },
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
    while ((c = getopt_long(argc, argv, "t:m:M:z:i:w:W:T:K:S:cDFh", lo, NULL)) != -1) {
        switch (c) {
        case 't': parse_tests(optarg); break;
        case 'm': opt.min_size = parse_size(optarg); break;
        case 'M': opt.max_size = parse_size(optarg); break;
        case 'z': parse_sizes(optarg); break;
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
    if (opt.nsizes > 0) {
        hi_all = 0;
        for (int i = 0; i < opt.nsizes; i++)
            if (opt.sizes[i] > hi_all)
                hi_all = opt.sizes[i];
    }
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
    /* a2a: one receive slot per source */
    size_t rbytes = bytes;
    if (opt.tests[T_A2A]) {
        peer_stride = (hi_all + (size_t)page - 1) / (size_t)page * (size_t)page;
        if (peer_stride * (size_t)(nprocs - 1) > rbytes)
            rbytes = peer_stride * (size_t)(nprocs - 1);
    }
    if (posix_memalign((void **)&sbuf, (size_t)page, bytes) ||
        posix_memalign((void **)&rbuf, (size_t)page, rbytes))
        die("cannot allocate buffers");
    memset(sbuf, 'a', bytes);
    memset(rbuf, 'b', rbytes);

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
    if (opt.tests[T_BOWTIE])
        run_pattern(T_BOWTIE, lo_def, hi_def);
    if (opt.tests[T_A2A])
        run_pattern(T_A2A, lo_def, hi_def);

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
