/*
 * soak: random point-to-point traffic for a given time, every message
 * accounted for (scripts/soak.sh runs it per configuration).
 *
 * Rounds: every rank draws the same plan for a round from a shared seed
 * (so every receiver knows what must arrive): 4-24 messages per rank, each
 * with a random destination (self included), tag, size (0 B .. 16 MiB,
 * skewed small), communicator and send mode.  Three duplicates of
 * MPI_COMM_WORLD carry three receive styles:
 *   typed    receives posted first with the sender's datatype (contiguous,
 *            vector, indexed, struct), specific source and tag;
 *   wildcard receives posted first with MPI_ANY_SOURCE/MPI_ANY_TAG (bytes);
 *   probed   Probe/Iprobe/Mprobe with wildcards, then receive of the
 *            probed size (messages sent nonblocking only: a probe loop
 *            cannot pre-post).
 * Send modes: Send, Ssend, Bsend, Isend, Issend, Ibsend on typed/wildcard
 * (their receives are pre-posted, so blocking sends cannot deadlock).
 * Each round also cancels a receive nobody sends to.
 *
 * Checks: every payload byte (pattern from seed, round, message, offset),
 * for derived types against MPI_Unpack(MPI_Pack(send buffer)) over the
 * whole receive span (gaps untouched); wildcard and probed arrivals must be
 * the next planned message of their (source, tag, communicator) -
 * non-overtaking order - with the planned size; counts of messages sent
 * and received agree over the job (Allreduce).  Exit 0 only with 0 errors.
 *
 *   soak [--seconds S] [--seed N] [--max-size BYTES]
 * prints: soak: rounds R messages M bytes B errors E seconds S
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { C_TYPED, C_WILD, C_PROBED, C_CANCEL, NCOMM };
enum { T_CONTIG, T_VECTOR, T_INDEXED, T_STRUCT, NTYPES };
enum { M_SEND, M_SSEND, M_BSEND, M_ISEND, M_ISSEND, M_IBSEND, NMODES };

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
static long errors;
static int me, np;
static size_t max_size = 16u << 20;

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

static size_t draw_size(void)
{
    uint64_t r = rnd_below(100);
    size_t s;
    if (r < 70) s = rnd_below(257);
    else if (r < 90) s = rnd_below(65537);
    else if (r < 98) s = rnd_below(1u << 20);
    else s = rnd_below((16u << 20) + 1);
    return s > max_size ? max_size : s;
}

static unsigned char pattern(uint64_t id, size_t k) { return (unsigned char)(mix(id ^ (k >> 3)) >> ((k & 7) * 8)); }

static void fill(unsigned char *p, size_t n, uint64_t id)
{
    for (size_t k = 0; k < n; ++k) p[k] = pattern(id, k);
}

/* bytes 0..n of a packed (or contiguous) payload against the pattern */
static void check_bytes(const unsigned char *p, size_t n, uint64_t id, const char *what, const msg_t *m)
{
    for (size_t k = 0; k < n; ++k)
        if (p[k] != pattern(id, k)) {
            ERR("%s: byte %zu of %zu differs (src %d tag %d comm %d id %llu)", what, k, n, m->src, m->tag,
                m->comm, (unsigned long long)id);
            return;
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
    }
}

static msg_t *plan_round(uint64_t seed, long round, int *nmsg)
{
    rng_state = mix(seed ^ (uint64_t)round * 0x100000001b3ull);
    int n = 0, cap = np * 24;
    msg_t *ms = calloc((size_t)cap, sizeof(msg_t));
    size_t budget = 24u << 20;  /* bytes in flight per round */
    for (int s = 0; s < np; ++s) {
        int k = 4 + (int)rnd_below(21);
        for (int i = 0; i < k; ++i) {
            msg_t *m = &ms[n];
            m->src = s;
            m->dst = (int)rnd_below((uint64_t)np);
            m->tag = (int)rnd_below(6);
            m->comm = (int)rnd_below(3);
            m->size = draw_size();
            if (m->size > budget) m->size = rnd_below(budget < 4096 ? budget + 1 : 4097);
            budget -= m->size;
            m->type = (int)rnd_below(NTYPES);
            m->mode = (int)rnd_below(NMODES);
            if (m->comm == C_PROBED) m->mode = M_ISEND + (int)rnd_below(3);
            if (m->comm == C_TYPED) {
                m->count = (int)(m->size / (size_t)type_size[m->type]);
                m->size = (size_t)m->count * (size_t)type_size[m->type];
            }
            m->id = mix(rng_state ^ ((uint64_t)round << 20) ^ (uint64_t)n);
            ++n;
        }
    }
    *nmsg = n;
    return ms;
}

typedef struct {
    void *buf;
    size_t bytes;
    MPI_Request req;
} slot_t;

/* the next planned message of (src, tag) on comm to me at or after *cursor */
static msg_t *next_planned(msg_t *ms, int n, char *taken, int comm, int src, int tag)
{
    for (int i = 0; i < n; ++i)
        if (!taken[i] && ms[i].dst == me && ms[i].comm == comm && ms[i].src == src && ms[i].tag == tag)
            return &ms[i];
    return NULL;
}

static void check_typed(const msg_t *m, const unsigned char *rbuf)
{
    /* oracle: the send buffer packed, unpacked into a zeroed span */
    size_t span = (size_t)m->count * (size_t)type_extent[m->type];
    unsigned char *sbuf = malloc(span ? span : 1), *want = calloc(span ? span : 1, 1);
    fill(sbuf, span, m->id);
    int psize = 0, pos = 0;
    MPI_Pack_size(m->count, types[m->type], MPI_COMM_SELF, &psize);
    unsigned char *packed = malloc(psize ? (size_t)psize : 1);
    MPI_Pack(sbuf, m->count, types[m->type], packed, psize, &pos, MPI_COMM_SELF);
    int upos = 0;
    MPI_Unpack(packed, pos, &upos, want, m->count, types[m->type], MPI_COMM_SELF);
    if (span && memcmp(want, rbuf, span) != 0) ERR("typed message (type %d, %d elements) differs from the oracle", m->type, m->count);
    free(sbuf);
    free(want);
    free(packed);
}

int main(int argc, char **argv)
{
    double seconds = 60;
    uint64_t seed = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed")) seed = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--max-size")) max_size = strtoull(argv[i + 1], NULL, 0);
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    for (int c = 0; c < NCOMM; ++c) MPI_Comm_dup(MPI_COMM_WORLD, &comms[c]);
    make_types();
    int bsize = (64 << 20) + np * 24 * MPI_BSEND_OVERHEAD;  /* a round's bytes fit (24 MiB budget) */
    void *battach = malloc((size_t)bsize);
    MPI_Buffer_attach(battach, bsize);

    double t0 = MPI_Wtime();
    long rounds = 0;
    unsigned long long sent = 0, received = 0, bytes = 0;
    int go = 1;
    while (go) {
        int n;
        msg_t *ms = plan_round(seed, rounds, &n);
        char *taken = calloc((size_t)n, 1);
        slot_t *rx = calloc((size_t)n, sizeof(slot_t)), *tx = calloc((size_t)n, sizeof(slot_t));
        int nrx = 0, ntx = 0, nprobed = 0, nwild = 0;
        msg_t **rx_msg = calloc((size_t)n, sizeof(msg_t *));
        size_t wild_max = 0;
        for (int i = 0; i < n; ++i)
            if (ms[i].dst == me && ms[i].comm == C_WILD && ms[i].size > wild_max) wild_max = ms[i].size;
        /* pre-post typed and wildcard receives (wildcards all of the largest size) */
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
                rx[nrx].bytes = wild_max;
                rx_msg[nrx] = NULL;  /* identified on arrival */
                MPI_Irecv(rx[nrx].buf, (int)wild_max, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, comms[C_WILD], &rx[nrx].req);
                ++nrx;
                ++nwild;
            } else {
                ++nprobed;
            }
        }
        /* a receive nobody sends to, cancelled */
        MPI_Request cr;
        int cbuf = 0, cancelled = 0;
        MPI_Irecv(&cbuf, 1, MPI_INT, MPI_ANY_SOURCE, 99, comms[C_CANCEL], &cr);
        MPI_Barrier(MPI_COMM_WORLD);  /* everything pre-posted before anybody sends */
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
        if (me == 0) go = MPI_Wtime() - t0 < seconds;
        MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
    unsigned long long tot[3] = {sent, received, bytes}, all[3];
    long all_err;
    MPI_Allreduce(tot, all, 3, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&errors, &all_err, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (all[0] != all[1]) all_err += 1;
    if (me == 0) {
        if (all[0] != all[1]) fprintf(stderr, "sent %llu messages, received %llu\n", all[0], all[1]);
        printf("soak: rounds %ld messages %llu bytes %llu errors %ld seconds %.0f\n", rounds, all[0], all[2],
               all_err, MPI_Wtime() - t0);
    }
    void *b;
    int bs;
    MPI_Buffer_detach(&b, &bs);
    free(battach);
    for (int t = 0; t < NTYPES; ++t) MPI_Type_free(&types[t]);
    for (int c = 0; c < NCOMM; ++c) MPI_Comm_free(&comms[c]);
    MPI_Finalize();
    return all_err ? 1 : 0;
}
