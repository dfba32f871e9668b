/*
 * soak: random point-to-point traffic until a time or a message count is
 * reached, every message accounted for (scripts/soak.sh runs it per
 * configuration).
 *
 * Rounds: every rank draws the same plan for a round from a shared seed
 * (so every receiver knows what must arrive): 8-128 messages per rank, each
 * with a random destination (self included), tag, size (0 B .. 16 MiB,
 * skewed small: 84 % up to 256 B, 0.02 % over 1 MiB, at most 32 MiB per
 * round), communicator and send mode.  Three duplicates of MPI_COMM_WORLD
 * carry three receive styles:
 *   typed    receives posted first with the sender's datatype (contiguous,
 *            vector, indexed, struct), specific source and tag;
 *   wildcard receives posted first with MPI_ANY_SOURCE/MPI_ANY_TAG (bytes);
 *   probed   Probe/Iprobe/Mprobe with wildcards, then receive of the
 *            probed size (messages sent nonblocking only: a probe loop
 *            cannot pre-post).
 * Send modes: Send, Ssend, Bsend, Isend, Issend, Ibsend on typed/wildcard
 * (their receives are pre-posted, so blocking sends cannot deadlock).
 * Each round also cancels a receive nobody sends to.  One Allreduce per
 * round is the fence between posting receives and sending (a wildcard of
 * this round must not match the next round's message) and carries the stop
 * decision, so a round's cost is its bytes, not handshakes.
 *
 * Checks: every payload byte (pattern from seed, round, message, offset,
 * generated 8 bytes at a time); a typed receive's whole span against the
 * datatype's own map (MPI_Unpack of an all-ones element gives which bytes
 * of an extent the type covers: those carry the pattern, the gaps stay 0);
 * wildcard and probed arrivals must be the next planned message of their
 * (source, tag, communicator) - non-overtaking order - with the planned
 * size; nothing planned may be missing; counts of messages sent and
 * received agree over the job (Allreduce).  Exit 0 only with 0 errors.
 *
 *   soak [--seconds S] [--messages N] [--seed N] [--max-size BYTES] [--threads T]
 * stops after the first round that reaches S seconds (rank 0's clock) or N
 * messages over the job, whichever comes first; prints
 *   soak: rounds R messages M bytes B errors E seconds S
 *
 * --threads T > 1: MPI_THREAD_MULTIPLE (a lower level provided is an
 * error), T threads per rank, each running the rounds above on its own
 * duplicates of the four communicators (so a wildcard or a probe of one
 * thread never sees another's messages and the per-(source, tag, comm)
 * order stays checkable) with its own plan (the seed mixed with the thread
 * index), counters and errors; the datatypes are shared, read-only.  A
 * thread's fence is an Allreduce (even rounds) or Iallreduce + Wait (odd
 * rounds) on a fifth, thread-private duplicate, which also carries the thread's checked nonblocking
 * collectives of each round, started between its sends and probes and
 * completed with its receives: an Ibcast of 0 B-1 MiB (skewed small) of
 * pattern from a root that moves with the round, an Iallreduce (sum) of a
 * vector of 64-bit pattern words against the sum computed locally, and an
 * Ialltoall of pattern blocks (0 B-64 KiB each); every byte checked.  Each
 * thread stops on its own rank 0's clock or at its share (N / T) of the
 * message count, the same round on every rank.  Bsend/Ibsend stay in
 * every thread's modes: the attached buffer (one per process) is sized
 * for T rounds' budgets.  The line gets the collectives and their bytes,
 * and rounds, messages and bytes are summed over the threads:
 *   soak: rounds R messages M bytes B collectives C collective-bytes CB errors E seconds S
 */
#include <malloc.h>
#include <mpi.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { C_TYPED, C_WILD, C_PROBED, C_CANCEL, NCOMM };
enum { T_CONTIG, T_VECTOR, T_INDEXED, T_STRUCT, NTYPES };
enum { M_SEND, M_SSEND, M_BSEND, M_ISEND, M_ISSEND, M_IBSEND, NMODES };
enum { MIN_PER_RANK = 8, MAX_PER_RANK = 128 };
#define ROUND_BUDGET ((size_t)32 << 20) /* payload bytes of one round, all senders */

typedef struct {
    int src, dst, tag, comm, type, mode;
    size_t size;  /* payload bytes (typed: count * type size) */
    int count;    /* typed: elements of the datatype */
    uint64_t id;  /* seeds the pattern */
} msg_t;

/* shared by the threads, written only before they start */
static MPI_Datatype types[NTYPES];
static int type_size[NTYPES];
static MPI_Aint type_extent[NTYPES];
static unsigned char *type_mask[NTYPES]; /* per byte of one extent: 1 if the type covers it */
static int me, np, nthreads = 1;
static size_t max_size = (size_t)16 << 20;
static double t0, seconds = 60;
static unsigned long long max_messages; /* per thread; 0: no limit */

/* one thread's rounds: everything a round changes lives here */
typedef struct {
    int tid;
    pthread_t th;
    MPI_Comm comms[NCOMM];
    MPI_Comm fence;  /* fence and collectives (MPI_COMM_WORLD with one thread) */
    uint64_t seed, rng_state;
    long errors;
    /* rounds and planned are also read by thread 0 of rank 0 for the
     * progress line: stored atomically by their owner */
    long rounds;
    unsigned long long planned, sent, received, bytes, colls, coll_bytes;
} worker_t;

static worker_t *workers;

/* one error line, written whole (threads share stderr); the first 20 per thread */
static void report(worker_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(worker_t *w, const char *fmt, ...)
{
    if (++w->errors >= 20) return;
    char line[512];
    int k = nthreads > 1 ? snprintf(line, sizeof line, "[rank %d thread %d] ", me, w->tid)
                         : snprintf(line, sizeof line, "[rank %d] ", me);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + k, sizeof line - (size_t)k - 1, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}
#define ERR(...) report(w, __VA_ARGS__)

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
static uint64_t rnd(worker_t *w) { return mix(w->rng_state++); }
static uint64_t rnd_below(worker_t *w, uint64_t n) { return n ? rnd(w) % n : 0; }

/* 84 % 0-256 B, 12 % to 4 KiB, 3.8 % to 64 KiB, 0.18 % to 1 MiB, 0.02 %
 * to 16 MiB (mean about 4.5 KiB): every protocol threshold is crossed
 * thousands of times per million messages and the 16 MiB tail stays
 * (about 200 per million, 40 % of the bytes) without being most of the
 * run's time - on a loaded machine one such message costs about a second */
static size_t draw_size(worker_t *w)
{
    uint64_t r = rnd_below(w, 100000);
    size_t s;
    if (r < 84000) s = rnd_below(w, 257);
    else if (r < 96000) s = 257 + rnd_below(w, 4096 - 256);
    else if (r < 99800) s = 4097 + rnd_below(w, 65536 - 4096);
    else if (r < 99980) s = 65537 + rnd_below(w, (1u << 20) - 65536);
    else s = (1u << 20) + 1 + rnd_below(w, (16u << 20) - (1u << 20));
    return s > max_size ? max_size : s;
}

/* the pattern of message id: 8-byte word w is mix(id ^ w) in memory
 * order (sender and receiver share the machine's byte order); written and
 * checked a word at a time, so a byte costs a fraction of a nanosecond */
static void fill(unsigned char *p, size_t n, uint64_t id)
{
    size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        uint64_t x = mix(id ^ (k >> 3));
        memcpy(p + k, &x, 8);
    }
    if (k < n) {
        uint64_t x = mix(id ^ (k >> 3));
        memcpy(p + k, &x, n - k);
    }
}

/* bytes 0..n of a contiguous payload against the pattern: the offset of
 * the first differing byte, or -1 */
static long long first_difference(const unsigned char *p, size_t n, uint64_t id)
{
    for (size_t k = 0; k < n; k += 8) {
        uint64_t x = mix(id ^ (k >> 3));
        size_t w = n - k < 8 ? n - k : 8;
        if (memcmp(p + k, &x, w) != 0) {
            size_t b = 0;
            while (p[k + b] == ((unsigned char *)&x)[b]) ++b;
            return (long long)(k + b);
        }
    }
    return -1;
}

static void check_bytes(worker_t *w, const unsigned char *p, size_t n, uint64_t id, const char *what, const msg_t *m)
{
    long long at = first_difference(p, n, id);
    if (at >= 0)
        ERR("%s: byte %lld of %zu differs (src %d tag %d comm %d id %llu)", what, at, n, m->src, m->tag, m->comm,
            (unsigned long long)m->id);
}

static void make_types(void)
{
    MPI_Type_contiguous(4, MPI_INT, &types[T_CONTIG]);
    MPI_Type_vector(2, 3, 5, MPI_INT, &types[T_VECTOR]);  /* 2 blocks of 3 ints, stride 5 */
    int bl[3] = {1, 0, 2}, disp[3] = {0, 2, 5};            /* a zero-length block too */
    MPI_Type_indexed(3, bl, disp, MPI_INT, &types[T_INDEXED]);
    struct s { int i; double d; char c; };
    int sbl[3] = {1, 1, 1};
    MPI_Aint sdisp[3] = {offsetof(struct s, i), offsetof(struct s, d), offsetof(struct s, c)};
    MPI_Datatype st[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR}, raw;
    MPI_Type_create_struct(3, sbl, sdisp, st, &raw);
    MPI_Type_create_resized(raw, 0, sizeof(struct s), &types[T_STRUCT]);
    MPI_Type_free(&raw);
    for (int t = 0; t < NTYPES; ++t) {
        MPI_Type_commit(&types[t]);
        MPI_Aint lb;
        MPI_Type_size(types[t], &type_size[t]);
        MPI_Type_get_extent(types[t], &lb, &type_extent[t]);
        /* the type map by MPI's own pack/unpack: an all-ones element into
         * a zeroed one marks the bytes the type covers */
        size_t ext = (size_t)type_extent[t];
        unsigned char *ones = malloc(ext), *packed = malloc((size_t)type_size[t] + 64);
        type_mask[t] = calloc(ext, 1);
        memset(ones, 1, ext);
        int pos = 0, upos = 0;
        MPI_Pack(ones, 1, types[t], packed, type_size[t] + 64, &pos, MPI_COMM_SELF);
        MPI_Unpack(packed, pos, &upos, type_mask[t], 1, types[t], MPI_COMM_SELF);
        free(ones);
        free(packed);
    }
}

static msg_t *plan_round(worker_t *w, long round, int *nmsg)
{
    w->rng_state = mix(w->seed ^ (uint64_t)round * 0x100000001b3ull);
    int n = 0, cap = np * MAX_PER_RANK;
    msg_t *ms = calloc((size_t)cap, sizeof(msg_t));
    size_t budget = ROUND_BUDGET;  /* bytes in flight per round (Bsend buffer, memory) */
    for (int s = 0; s < np; ++s) {
        int k = MIN_PER_RANK + (int)rnd_below(w, MAX_PER_RANK - MIN_PER_RANK + 1);
        for (int i = 0; i < k; ++i) {
            msg_t *m = &ms[n];
            m->src = s;
            m->dst = (int)rnd_below(w, (uint64_t)np);
            m->tag = (int)rnd_below(w, 6);
            m->comm = (int)rnd_below(w, 3);
            m->size = draw_size(w);
            if (m->size > budget) m->size = rnd_below(w, budget < 4096 ? budget + 1 : 4097);
            m->type = (int)rnd_below(w, NTYPES);
            m->mode = (int)rnd_below(w, NMODES);
            if (m->comm == C_PROBED) m->mode = M_ISEND + (int)rnd_below(w, 3);
            if (m->comm == C_TYPED) {
                m->count = (int)(m->size / (size_t)type_size[m->type]);
                m->size = (size_t)m->count * (size_t)type_size[m->type];
            }
            budget -= m->size;
            m->id = mix(w->rng_state ^ ((uint64_t)round << 20) ^ (uint64_t)n);
            ++n;
        }
    }
    *nmsg = n;
    return ms;
}

/* ---- the nonblocking collectives of a round (more than one thread) ---- */

enum { X_BCAST, X_ALLREDUCE, X_ALLTOALL, NCOLL };

typedef struct {
    uint64_t id;
    int root;
    size_t bcast_size, a2a_block;
    int red_n;
    unsigned char *bc, *a2a_s, *a2a_r;
    uint64_t *red;
    MPI_Request req[NCOLL];
} colls_t;

/* 70 % 0-256 B, 25 % to 64 KiB, 5 % to max */
static size_t draw_coll_size(worker_t *w, size_t max)
{
    uint64_t r = rnd_below(w, 100);
    if (r < 70) return rnd_below(w, 257);
    if (r < 95 || max <= 65536) return 257 + rnd_below(w, (max < 65536 ? max : 65536) - 256);
    return 65537 + rnd_below(w, max - 65536);
}

/* drawn after the round's messages from the same plan, so equal on every rank */
static void plan_colls(worker_t *w, long round, colls_t *c)
{
    memset(c, 0, sizeof *c);
    c->id = mix(w->rng_state ^ ((uint64_t)round << 32) ^ 0xc011ull);
    c->root = (int)((round + (long)rnd_below(w, (uint64_t)np)) % np);
    c->bcast_size = draw_coll_size(w, (size_t)1 << 20);
    c->a2a_block = draw_coll_size(w, 65536);
    c->red_n = 1 + (int)rnd_below(w, 4096);
    for (int x = 0; x < NCOLL; ++x) c->req[x] = MPI_REQUEST_NULL;
}

static uint64_t red_word(const colls_t *c, int rank, int i) { return mix(c->id ^ ((uint64_t)rank << 40) ^ (uint64_t)i); }
static uint64_t a2a_id(const colls_t *c, int src, int dst) { return mix(c->id + (uint64_t)src * 4099 + (uint64_t)dst); }

static void start_coll(worker_t *w, colls_t *c, int x)
{
    switch (x) {
    case X_BCAST:
        c->bc = malloc(c->bcast_size ? c->bcast_size : 1);
        if (me == c->root) fill(c->bc, c->bcast_size, c->id);
        else memset(c->bc, 0xa5, c->bcast_size);
        MPI_Ibcast(c->bc, (int)c->bcast_size, MPI_BYTE, c->root, w->fence, &c->req[x]);
        break;
    case X_ALLREDUCE:
        c->red = malloc((size_t)c->red_n * sizeof(uint64_t));
        for (int i = 0; i < c->red_n; ++i) c->red[i] = red_word(c, me, i);
        MPI_Iallreduce(MPI_IN_PLACE, c->red, c->red_n, MPI_UINT64_T, MPI_SUM, w->fence, &c->req[x]);
        break;
    case X_ALLTOALL: {
        size_t b = c->a2a_block, all = (size_t)np * b;
        c->a2a_s = malloc(all ? all : 1);
        c->a2a_r = calloc(all ? all : 1, 1);
        for (int d = 0; d < np; ++d) fill(c->a2a_s + (size_t)d * b, b, a2a_id(c, me, d));
        MPI_Ialltoall(c->a2a_s, (int)b, MPI_BYTE, c->a2a_r, (int)b, MPI_BYTE, w->fence, &c->req[x]);
        break;
    }
    }
}

/* wait for all three, check every byte, count */
static void finish_colls(worker_t *w, colls_t *c, long round)
{
    MPI_Waitall(NCOLL, c->req, MPI_STATUSES_IGNORE);
    long long at;
    if (me != c->root && (at = first_difference(c->bc, c->bcast_size, c->id)) >= 0)
        ERR("Ibcast round %ld root %d: byte %lld of %zu differs", round, c->root, at, c->bcast_size);
    for (int i = 0; i < c->red_n; ++i) {
        uint64_t want = 0;
        for (int r = 0; r < np; ++r) want += red_word(c, r, i);
        if (c->red[i] != want) {
            ERR("Iallreduce round %ld: element %d of %d is %llx, expected %llx", round, i, c->red_n,
                (unsigned long long)c->red[i], (unsigned long long)want);
            break;
        }
    }
    for (int s = 0; s < np; ++s)
        if ((at = first_difference(c->a2a_r + (size_t)s * c->a2a_block, c->a2a_block, a2a_id(c, s, me))) >= 0)
            ERR("Ialltoall round %ld: block from %d byte %lld of %zu differs", round, s, at, c->a2a_block);
    w->colls += NCOLL;
    w->coll_bytes += (me != c->root ? c->bcast_size : 0) + (size_t)c->red_n * sizeof(uint64_t) +
                     (size_t)np * c->a2a_block;
    free(c->bc);
    free(c->red);
    free(c->a2a_s);
    free(c->a2a_r);
}

/* ---- one round of point-to-point traffic ---- */

typedef struct {
    void *buf;
    MPI_Request req;
} slot_t;

/* the first planned, not yet received message of (src, tag) on comm to me:
 * an arrival that is not this one overtook it */
static msg_t *next_planned(msg_t *ms, int n, char *taken, int comm, int src, int tag)
{
    for (int i = 0; i < n; ++i)
        if (!taken[i] && ms[i].dst == me && ms[i].comm == comm && ms[i].src == src && ms[i].tag == tag)
            return &ms[i];
    return NULL;
}

/* a typed receive's whole span: covered bytes carry the pattern of the
 * sender's buffer at the same offset, gaps are still 0 */
static void check_typed(worker_t *w, const msg_t *m, const unsigned char *rbuf)
{
    size_t ext = (size_t)type_extent[m->type], span = (size_t)m->count * ext;
    if (!span) return;
    unsigned char *want = malloc(span);
    const unsigned char *mask = type_mask[m->type];
    fill(want, span, m->id);
    for (size_t k = 0, j = 0; k < span; ++k, j = j + 1 == ext ? 0 : j + 1)
        if (!mask[j]) want[k] = 0;
    if (memcmp(want, rbuf, span) != 0) {
        size_t k = 0;
        while (want[k] == rbuf[k]) ++k;
        ERR("typed message (type %d, %d elements, src %d tag %d) differs from its type map at byte %zu of %zu",
            m->type, m->count, m->src, m->tag, k, span);
    }
    free(want);
}

/* rank 0, thread 0: a line a minute, so a long run stopped at its limit
 * shows whether it was slow or stuck, and where (summed over the threads) */
static void progress_line(double *next_progress)
{
    if (me != 0 || MPI_Wtime() - t0 < *next_progress) return;
    long rounds = 0;
    unsigned long long planned = 0;
    for (int t = 0; t < nthreads; ++t) {
        rounds += __atomic_load_n(&workers[t].rounds, __ATOMIC_RELAXED);
        planned += __atomic_load_n(&workers[t].planned, __ATOMIC_RELAXED);
    }
    printf("soak: progress rounds %ld planned %llu seconds %.0f\n", rounds, planned, MPI_Wtime() - t0);
    fflush(stdout);
    *next_progress += 60;
}

/* one round of thread w; returns 1 if it was the last */
static int run_round(worker_t *w, double *next_progress)
{
    long round = w->rounds;
    int n;
    msg_t *ms = plan_round(w, round, &n);
    colls_t co;
    int with_colls = nthreads > 1;
    if (with_colls) plan_colls(w, round, &co);
    __atomic_store_n(&w->planned, w->planned + (unsigned long long)n, __ATOMIC_RELAXED);
    char *taken = calloc((size_t)n, 1);
    slot_t *rx = calloc((size_t)n, sizeof(slot_t)), *tx = calloc((size_t)n, sizeof(slot_t));
    int nrx = 0, ntx = 0, nprobed = 0, nsend = 0;
    msg_t **rx_msg = calloc((size_t)n, sizeof(msg_t *));
    size_t wild_max = 0;
    for (int i = 0; i < n; ++i) {
        if (ms[i].dst == me && ms[i].comm == C_WILD && ms[i].size > wild_max) wild_max = ms[i].size;
        if (ms[i].src == me) ++nsend;
    }
    /* pre-post typed and wildcard receives (wildcards all of the largest
     * size: any of them may get the largest message) */
    for (int i = 0; i < n; ++i) {
        msg_t *m = &ms[i];
        if (m->dst != me) continue;
        if (m->comm == C_TYPED) {
            size_t span = (size_t)m->count * (size_t)type_extent[m->type];
            rx[nrx].buf = calloc(span ? span : 1, 1);
            rx_msg[nrx] = m;
            MPI_Irecv(rx[nrx].buf, m->count, types[m->type], m->src, m->tag, w->comms[C_TYPED], &rx[nrx].req);
            taken[i] = 1;
            ++nrx;
        } else if (m->comm == C_WILD) {
            rx[nrx].buf = malloc(wild_max ? wild_max : 1);
            rx_msg[nrx] = NULL;  /* identified on arrival */
            MPI_Irecv(rx[nrx].buf, (int)wild_max, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, w->comms[C_WILD], &rx[nrx].req);
            ++nrx;
        } else {
            ++nprobed;
        }
    }
    /* a receive nobody sends to, cancelled */
    MPI_Request cr;
    int cbuf = 0, cancelled = 0;
    MPI_Irecv(&cbuf, 1, MPI_INT, MPI_ANY_SOURCE, 99, w->comms[C_CANCEL], &cr);
    /* the fence: everything pre-posted before anybody sends; rank 0's
     * clock or the message count makes this round the last */
    int stop = (me == 0 && MPI_Wtime() - t0 >= seconds) || (max_messages && w->planned >= max_messages);
    if (nthreads == 1 || round % 2 == 0) {
        /* blocking on even rounds, nonblocking + wait on odd ones (both
         * collective paths, each from 4 threads at once) */
        MPI_Allreduce(MPI_IN_PLACE, &stop, 1, MPI_INT, MPI_MAX, w->fence);
    } else {
        MPI_Request fr;
        MPI_Iallreduce(MPI_IN_PLACE, &stop, 1, MPI_INT, MPI_MAX, w->fence, &fr);
        MPI_Wait(&fr, MPI_STATUS_IGNORE);
    }
    if (w->tid == 0) progress_line(next_progress);
    /* sends; with threads the collectives start before the first, half way
     * and after the last, and are tested every 16 sends */
    if (with_colls) start_coll(w, &co, X_BCAST);
    for (int i = 0; i < n; ++i) {
        msg_t *m = &ms[i];
        if (m->src != me) continue;
        size_t span = m->comm == C_TYPED ? (size_t)m->count * (size_t)type_extent[m->type] : m->size;
        void *b = malloc(span ? span : 1);
        fill(b, span, m->id);
        MPI_Datatype dt = m->comm == C_TYPED ? types[m->type] : MPI_BYTE;
        int cnt = m->comm == C_TYPED ? m->count : (int)m->size;
        MPI_Comm c = w->comms[m->comm];
        tx[ntx].buf = b;
        tx[ntx].req = MPI_REQUEST_NULL;
        switch (m->mode) {
        case M_SEND: MPI_Send(b, cnt, dt, m->dst, m->tag, c); break;
        case M_SSEND: MPI_Ssend(b, cnt, dt, m->dst, m->tag, c); break;
        case M_BSEND: MPI_Bsend(b, cnt, dt, m->dst, m->tag, c); break;
        case M_ISEND: MPI_Isend(b, cnt, dt, m->dst, m->tag, c, &tx[ntx].req); break;
        case M_ISSEND: MPI_Issend(b, cnt, dt, m->dst, m->tag, c, &tx[ntx].req); break;
        case M_IBSEND: MPI_Ibsend(b, cnt, dt, m->dst, m->tag, c, &tx[ntx].req); break;
        }
        ++ntx;
        ++w->sent;
        w->bytes += m->size;
        if (with_colls) {
            if (ntx == nsend / 2) start_coll(w, &co, X_ALLREDUCE);
            if (ntx % 16 == 0) {
                int flag;
                MPI_Testall(NCOLL, co.req, &flag, MPI_STATUSES_IGNORE);
            }
        }
    }
    if (with_colls) {
        if (co.red == NULL) start_coll(w, &co, X_ALLREDUCE);  /* fewer than 2 sends */
        start_coll(w, &co, X_ALLTOALL);
    }
    /* probed messages: probe any, receive what was probed */
    for (int k = 0; k < nprobed; ++k) {
        MPI_Status st;
        MPI_Message mh = MPI_MESSAGE_NULL;
        MPI_Comm pc = w->comms[C_PROBED];
        int style = (int)((round + k) % 3), flag = 0;
        if (style == 0) MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, pc, &st);
        else if (style == 1) while (!flag) MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, pc, &flag, &st);
        else MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, pc, &mh, &st);
        int cnt;
        MPI_Get_count(&st, MPI_BYTE, &cnt);
        unsigned char *b = malloc(cnt ? (size_t)cnt : 1);
        if (style == 2) MPI_Mrecv(b, cnt, MPI_BYTE, &mh, MPI_STATUS_IGNORE);
        else MPI_Recv(b, cnt, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, pc, MPI_STATUS_IGNORE);
        msg_t *m = next_planned(ms, n, taken, C_PROBED, st.MPI_SOURCE, st.MPI_TAG);
        if (!m) ERR("probed message from %d tag %d was never sent", st.MPI_SOURCE, st.MPI_TAG);
        else {
            taken[m - ms] = 1;
            if ((size_t)cnt != m->size) ERR("probed message size %d, expected %zu (order lost?)", cnt, m->size);
            else check_bytes(w, b, m->size, m->id, "probed", m);
        }
        ++w->received;
        free(b);
    }
    /* complete receives in posting order: wildcard arrivals identified
     * as the next planned message of their (source, tag) */
    for (int r = 0; r < nrx; ++r) {
        MPI_Status st;
        MPI_Wait(&rx[r].req, &st);
        ++w->received;
        if (rx_msg[r]) {
            check_typed(w, rx_msg[r], rx[r].buf);
            if (st.MPI_SOURCE != rx_msg[r]->src || st.MPI_TAG != rx_msg[r]->tag) ERR("typed status source/tag");
        } else {
            int cnt;
            MPI_Get_count(&st, MPI_BYTE, &cnt);
            msg_t *m = next_planned(ms, n, taken, C_WILD, st.MPI_SOURCE, st.MPI_TAG);
            if (!m) ERR("wildcard message from %d tag %d was never sent", st.MPI_SOURCE, st.MPI_TAG);
            else {
                taken[m - ms] = 1;
                if ((size_t)cnt != m->size) ERR("wildcard message size %d, expected %zu (order lost?)", cnt, m->size);
                else check_bytes(w, rx[r].buf, m->size, m->id, "wildcard", m);
            }
        }
        free(rx[r].buf);
    }
    if (with_colls) finish_colls(w, &co, round);
    for (int t = 0; t < ntx; ++t) {
        MPI_Wait(&tx[t].req, MPI_STATUS_IGNORE);
        free(tx[t].buf);
    }
    MPI_Cancel(&cr);
    MPI_Status cst;
    MPI_Wait(&cr, &cst);
    MPI_Test_cancelled(&cst, &cancelled);
    if (!cancelled) ERR("a receive nobody sent to was not cancelled");
    for (int i = 0; i < n; ++i)
        if (ms[i].dst == me && !taken[i])
            ERR("planned message %d from %d tag %d comm %d never arrived", i, ms[i].src, ms[i].tag, ms[i].comm);
    free(ms); free(taken); free(rx); free(tx); free(rx_msg);
    __atomic_store_n(&w->rounds, w->rounds + 1, __ATOMIC_RELAXED);
    return stop;
}

static void *run_worker(void *arg)
{
    worker_t *w = arg;
    double next_progress = 60;
    while (!run_round(w, &next_progress)) {
    }
    return NULL;
}

int main(int argc, char **argv)
{
    uint64_t seed = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--messages")) max_messages = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--seed")) seed = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--max-size")) max_size = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--threads")) nthreads = atoi(argv[i + 1]);
    }
    /* the Bsend buffer (an int's worth) holds 16 threads' rounds */
    if (nthreads < 1 || nthreads > 16) {
        fprintf(stderr, "soak: --threads must be 1..16\n");
        return 2;
    }
    /* each thread stops at its share of the message count */
    max_messages = (max_messages + (unsigned long long)nthreads - 1) / (unsigned long long)nthreads;
    /* buffers up to 2 MiB come from a heap that is never trimmed: freed
     * and reused each round, their pages stay mapped instead of being
     * faulted in again (page faults were a tenth of the run's CPU); the
     * rare larger ones, and wildcard receives sized for them, are fresh
     * mappings only touched where data lands */
    mallopt(M_MMAP_THRESHOLD, 2 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    if (nthreads == 1) {
        MPI_Init(&argc, &argv);
    } else {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        if (provided < MPI_THREAD_MULTIPLE) {
            fprintf(stderr, "soak: --threads %d needs MPI_THREAD_MULTIPLE, the library provided level %d\n",
                    nthreads, provided);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    /* every thread's communicators, created here in one order on every rank */
    workers = calloc((size_t)nthreads, sizeof(worker_t));
    for (int t = 0; t < nthreads; ++t) {
        worker_t *w = &workers[t];
        w->tid = t;
        w->seed = t ? mix(seed ^ ((uint64_t)t << 48)) : seed;
        for (int c = 0; c < NCOMM; ++c) MPI_Comm_dup(MPI_COMM_WORLD, &w->comms[c]);
        if (nthreads > 1) MPI_Comm_dup(MPI_COMM_WORLD, &w->fence);
        else w->fence = MPI_COMM_WORLD;
    }
    make_types();
    /* a round's Bsend/Ibsend bytes fit: at most the round budget, per thread */
    int bsize = nthreads * ((int)ROUND_BUDGET + (int)(ROUND_BUDGET >> 2) + np * MAX_PER_RANK * MPI_BSEND_OVERHEAD);
    void *battach = malloc((size_t)bsize);
    MPI_Buffer_attach(battach, bsize);

    t0 = MPI_Wtime();
    if (nthreads == 1) {
        run_worker(&workers[0]);
    } else {
        for (int t = 0; t < nthreads; ++t)
            if (pthread_create(&workers[t].th, NULL, run_worker, &workers[t]) != 0) {
                fprintf(stderr, "soak: pthread_create failed\n");
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
        for (int t = 0; t < nthreads; ++t) pthread_join(workers[t].th, NULL);
    }
    /* sums over the threads, then over the job */
    long rounds = 0, errors = 0, all_err;
    unsigned long long planned = 0, tot[5] = {0, 0, 0, 0, 0}, all[5], colls_min;
    for (int t = 0; t < nthreads; ++t) {
        worker_t *w = &workers[t];
        rounds += w->rounds;
        errors += w->errors;
        planned += w->planned;
        tot[0] += w->sent;
        tot[1] += w->received;
        tot[2] += w->bytes;
        tot[3] += w->colls;
        tot[4] += w->coll_bytes;
    }
    MPI_Allreduce(tot, all, 5, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&tot[3], &colls_min, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&errors, &all_err, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (all[0] != all[1] || all[0] != planned) {
        all_err += 1;
        if (me == 0) fprintf(stderr, "planned %llu messages, sent %llu, received %llu\n", planned, all[0], all[1]);
    }
    /* every rank took part in every collective of every thread */
    if (colls_min * (unsigned long long)np != all[3]) {
        all_err += 1;
        if (me == 0) fprintf(stderr, "collectives completed differ between ranks (min %llu, sum %llu)\n", colls_min, all[3]);
    }
    if (me == 0 && nthreads == 1)
        printf("soak: rounds %ld messages %llu bytes %llu errors %ld seconds %.0f\n", rounds, all[0], all[2],
               all_err, MPI_Wtime() - t0);
    else if (me == 0)
        printf("soak: rounds %ld messages %llu bytes %llu collectives %llu collective-bytes %llu errors %ld seconds %.0f\n",
               rounds, all[0], all[2], colls_min, all[4], all_err, MPI_Wtime() - t0);
    void *b;
    int bs;
    MPI_Buffer_detach(&b, &bs);
    free(battach);
    for (int t = 0; t < NTYPES; ++t) {
        MPI_Type_free(&types[t]);
        free(type_mask[t]);
    }
    for (int t = 0; t < nthreads; ++t) {
        for (int c = 0; c < NCOMM; ++c) MPI_Comm_free(&workers[t].comms[c]);
        if (nthreads > 1) MPI_Comm_free(&workers[t].fence);
    }
    free(workers);
    MPI_Finalize();
    return all_err ? 1 : 0;
}
