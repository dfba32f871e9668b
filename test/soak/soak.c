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
 *   soak [--seconds S] [--messages N] [--seed N] [--max-size BYTES]
 * stops after the first round that reaches S seconds (rank 0's clock) or N
 * messages over the job, whichever comes first; prints
 *   soak: rounds R messages M bytes B errors E seconds S
 */
#include <malloc.h>
#include <mpi.h>
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

static MPI_Comm comms[NCOMM];
static MPI_Datatype types[NTYPES];
static int type_size[NTYPES];
static MPI_Aint type_extent[NTYPES];
static unsigned char *type_mask[NTYPES]; /* per byte of one extent: 1 if the type covers it */
static long errors;
static int me, np;
static size_t max_size = (size_t)16 << 20;

#define ERR(...) do { ++errors; if (errors < 20) { fprintf(stderr, "[rank %d] ", me); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
static uint64_t rng_state;
static uint64_t rnd(void) { return mix(rng_state++); }
static uint64_t rnd_below(uint64_t n) { return n ? rnd() % n : 0; }

/* 84 % 0-256 B, 12 % to 4 KiB, 3.8 % to 64 KiB, 0.18 % to 1 MiB, 0.02 %
 * to 16 MiB (mean about 4.5 KiB): every protocol threshold is crossed
 * thousands of times per million messages and the 16 MiB tail stays
 * (about 200 per million, 40 % of the bytes) without being most of the
 * run's time - on a loaded machine one such message costs about a second */
static size_t draw_size(void)
{
    uint64_t r = rnd_below(100000);
    size_t s;
    if (r < 84000) s = rnd_below(257);
    else if (r < 96000) s = 257 + rnd_below(4096 - 256);
    else if (r < 99800) s = 4097 + rnd_below(65536 - 4096);
    else if (r < 99980) s = 65537 + rnd_below((1u << 20) - 65536);
    else s = (1u << 20) + 1 + rnd_below((16u << 20) - (1u << 20));
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

/* bytes 0..n of a contiguous payload against the pattern */
static void check_bytes(const unsigned char *p, size_t n, uint64_t id, const char *what, const msg_t *m)
{
    for (size_t k = 0; k < n; k += 8) {
        uint64_t x = mix(id ^ (k >> 3));
        size_t w = n - k < 8 ? n - k : 8;
        if (memcmp(p + k, &x, w) != 0) {
            size_t b = 0;
            while (p[k + b] == ((unsigned char *)&x)[b]) ++b;
            ERR("%s: byte %zu of %zu differs (src %d tag %d comm %d id %llu)", what, k + b, n, m->src, m->tag,
                m->comm, (unsigned long long)m->id);
            return;
        }
    }
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

static msg_t *plan_round(uint64_t seed, long round, int *nmsg)
{
    rng_state = mix(seed ^ (uint64_t)round * 0x100000001b3ull);
    int n = 0, cap = np * MAX_PER_RANK;
    msg_t *ms = calloc((size_t)cap, sizeof(msg_t));
    size_t budget = ROUND_BUDGET;  /* bytes in flight per round (Bsend buffer, memory) */
    for (int s = 0; s < np; ++s) {
        int k = MIN_PER_RANK + (int)rnd_below(MAX_PER_RANK - MIN_PER_RANK + 1);
        for (int i = 0; i < k; ++i) {
            msg_t *m = &ms[n];
            m->src = s;
            m->dst = (int)rnd_below((uint64_t)np);
            m->tag = (int)rnd_below(6);
            m->comm = (int)rnd_below(3);
            m->size = draw_size();
            if (m->size > budget) m->size = rnd_below(budget < 4096 ? budget + 1 : 4097);
            m->type = (int)rnd_below(NTYPES);
            m->mode = (int)rnd_below(NMODES);
            if (m->comm == C_PROBED) m->mode = M_ISEND + (int)rnd_below(3);
            if (m->comm == C_TYPED) {
                m->count = (int)(m->size / (size_t)type_size[m->type]);
                m->size = (size_t)m->count * (size_t)type_size[m->type];
            }
            budget -= m->size;
            m->id = mix(rng_state ^ ((uint64_t)round << 20) ^ (uint64_t)n);
            ++n;
        }
    }
    *nmsg = n;
    return ms;
}

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
static void check_typed(const msg_t *m, const unsigned char *rbuf)
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

int main(int argc, char **argv)
{
    double seconds = 60;
    unsigned long long max_messages = 0; /* 0: no limit */
    uint64_t seed = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--messages")) max_messages = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--seed")) seed = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--max-size")) max_size = strtoull(argv[i + 1], NULL, 0);
    }
    /* buffers up to 2 MiB come from a heap that is never trimmed: freed
     * and reused each round, their pages stay mapped instead of being
     * faulted in again (page faults were a tenth of the run's CPU); the
     * rare larger ones, and wildcard receives sized for them, are fresh
     * mappings only touched where data lands */
    mallopt(M_MMAP_THRESHOLD, 2 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    for (int c = 0; c < NCOMM; ++c) MPI_Comm_dup(MPI_COMM_WORLD, &comms[c]);
    make_types();
    /* a round's Bsend/Ibsend bytes fit: at most the round budget */
    int bsize = (int)ROUND_BUDGET + (int)(ROUND_BUDGET >> 2) + np * MAX_PER_RANK * MPI_BSEND_OVERHEAD;
    void *battach = malloc((size_t)bsize);
    MPI_Buffer_attach(battach, bsize);

    double t0 = MPI_Wtime(), next_progress = 60;
    long rounds = 0;
    unsigned long long sent = 0, received = 0, bytes = 0, planned = 0;
    int last = 0;
    while (!last) {
        int n;
        msg_t *ms = plan_round(seed, rounds, &n);
        planned += (unsigned long long)n;
        char *taken = calloc((size_t)n, 1);
        slot_t *rx = calloc((size_t)n, sizeof(slot_t)), *tx = calloc((size_t)n, sizeof(slot_t));
        int nrx = 0, ntx = 0, nprobed = 0;
        msg_t **rx_msg = calloc((size_t)n, sizeof(msg_t *));
        size_t wild_max = 0;
        for (int i = 0; i < n; ++i)
            if (ms[i].dst == me && ms[i].comm == C_WILD && ms[i].size > wild_max) wild_max = ms[i].size;
        /* pre-post typed and wildcard receives (wildcards all of the largest
         * size: any of them may get the largest message) */
        for (int i = 0; i < n; ++i) {
            msg_t *m = &ms[i];
            if (m->dst != me) continue;
            if (m->comm == C_TYPED) {
                size_t span = (size_t)m->count * (size_t)type_extent[m->type];
                rx[nrx].buf = calloc(span ? span : 1, 1);
                rx_msg[nrx] = m;
                MPI_Irecv(rx[nrx].buf, m->count, types[m->type], m->src, m->tag, comms[C_TYPED], &rx[nrx].req);
                taken[i] = 1;
                ++nrx;
            } else if (m->comm == C_WILD) {
                rx[nrx].buf = malloc(wild_max ? wild_max : 1);
                rx_msg[nrx] = NULL;  /* identified on arrival */
                MPI_Irecv(rx[nrx].buf, (int)wild_max, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, comms[C_WILD], &rx[nrx].req);
                ++nrx;
            } else {
                ++nprobed;
            }
        }
        /* a receive nobody sends to, cancelled */
        MPI_Request cr;
        int cbuf = 0, cancelled = 0;
        MPI_Irecv(&cbuf, 1, MPI_INT, MPI_ANY_SOURCE, 99, comms[C_CANCEL], &cr);
        /* the fence: everything pre-posted before anybody sends; rank 0's
         * clock or the message count makes this round the last */
        int stop = (me == 0 && MPI_Wtime() - t0 >= seconds) || (max_messages && planned >= max_messages);
        MPI_Allreduce(MPI_IN_PLACE, &stop, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        last = stop;
        /* a line a minute, so a long run stopped at its limit shows whether
         * it was slow or stuck, and where */
        if (me == 0 && MPI_Wtime() - t0 >= next_progress) {
            printf("soak: progress rounds %ld planned %llu seconds %.0f\n", rounds, planned, MPI_Wtime() - t0);
            fflush(stdout);
            next_progress += 60;
        }
        /* sends */
        for (int i = 0; i < n; ++i) {
            msg_t *m = &ms[i];
            if (m->src != me) continue;
            size_t span = m->comm == C_TYPED ? (size_t)m->count * (size_t)type_extent[m->type] : m->size;
            void *b = malloc(span ? span : 1);
            fill(b, span, m->id);
            MPI_Datatype dt = m->comm == C_TYPED ? types[m->type] : MPI_BYTE;
            int cnt = m->comm == C_TYPED ? m->count : (int)m->size;
            MPI_Comm c = comms[m->comm];
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
            ++sent;
            bytes += m->size;
        }
        /* probed messages: probe any, receive what was probed */
        for (int k = 0; k < nprobed; ++k) {
            MPI_Status st;
            MPI_Message mh = MPI_MESSAGE_NULL;
            int style = (int)((rounds + k) % 3), flag = 0;
            if (style == 0) MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, comms[C_PROBED], &st);
            else if (style == 1) while (!flag) MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comms[C_PROBED], &flag, &st);
            else MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comms[C_PROBED], &mh, &st);
            int cnt;
            MPI_Get_count(&st, MPI_BYTE, &cnt);
            unsigned char *b = malloc(cnt ? (size_t)cnt : 1);
            if (style == 2) MPI_Mrecv(b, cnt, MPI_BYTE, &mh, MPI_STATUS_IGNORE);
            else MPI_Recv(b, cnt, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, comms[C_PROBED], MPI_STATUS_IGNORE);
            msg_t *m = next_planned(ms, n, taken, C_PROBED, st.MPI_SOURCE, st.MPI_TAG);
            if (!m) ERR("probed message from %d tag %d was never sent", st.MPI_SOURCE, st.MPI_TAG);
            else {
                taken[m - ms] = 1;
                if ((size_t)cnt != m->size) ERR("probed message size %d, expected %zu (order lost?)", cnt, m->size);
                else check_bytes(b, m->size, m->id, "probed", m);
            }
            ++received;
            free(b);
        }
        /* complete receives in posting order: wildcard arrivals identified
         * as the next planned message of their (source, tag) */
        for (int r = 0; r < nrx; ++r) {
            MPI_Status st;
            MPI_Wait(&rx[r].req, &st);
            ++received;
            if (rx_msg[r]) {
                check_typed(rx_msg[r], rx[r].buf);
                if (st.MPI_SOURCE != rx_msg[r]->src || st.MPI_TAG != rx_msg[r]->tag) ERR("typed status source/tag");
            } else {
                int cnt;
                MPI_Get_count(&st, MPI_BYTE, &cnt);
                msg_t *m = next_planned(ms, n, taken, C_WILD, st.MPI_SOURCE, st.MPI_TAG);
                if (!m) ERR("wildcard message from %d tag %d was never sent", st.MPI_SOURCE, st.MPI_TAG);
                else {
                    taken[m - ms] = 1;
                    if ((size_t)cnt != m->size) ERR("wildcard message size %d, expected %zu (order lost?)", cnt, m->size);
                    else check_bytes(rx[r].buf, m->size, m->id, "wildcard", m);
                }
            }
            free(rx[r].buf);
        }
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
            if (ms[i].dst == me && !taken[i]) ERR("planned message %d from %d tag %d comm %d never arrived", i, ms[i].src, ms[i].tag, ms[i].comm);
        free(ms); free(taken); free(rx); free(tx); free(rx_msg);
        ++rounds;
    }
    unsigned long long tot[3] = {sent, received, bytes}, all[3];
    long all_err;
    MPI_Allreduce(tot, all, 3, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&errors, &all_err, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (all[0] != all[1] || all[0] != planned) {
        all_err += 1;
        if (me == 0) fprintf(stderr, "planned %llu messages, sent %llu, received %llu\n", planned, all[0], all[1]);
    }
    if (me == 0)
        printf("soak: rounds %ld messages %llu bytes %llu errors %ld seconds %.0f\n", rounds, all[0], all[2],
               all_err, MPI_Wtime() - t0);
    void *b;
    int bs;
    MPI_Buffer_detach(&b, &bs);
    free(battach);
    for (int t = 0; t < NTYPES; ++t) {
        MPI_Type_free(&types[t]);
        free(type_mask[t]);
    }
    for (int c = 0; c < NCOMM; ++c) MPI_Comm_free(&comms[c]);
    MPI_Finalize();
    return all_err ? 1 : 0;
}
