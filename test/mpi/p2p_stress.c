/*
 * p2p_stress: random traffic among all ranks (self included), fixed seed
 * (MPITEST_SEED overrides).  Every round all ranks derive the same global
 * schedule of messages (source, destination, size, tag, send mode); each rank
 * posts its Isend/Issend and Irecv operations in a random order, part of
 * them only after some progress (so some messages are unexpected), with one
 * of four receive styles per (round, destination): specific source and tag,
 * ANY_SOURCE, ANY_TAG, ANY_SOURCE+ANY_TAG; and completes everything with one
 * of Waitall / Waitany / Waitsome / Testany / Testsome / Testall / Test.
 * Every received message is identified by (MPI_SOURCE, MPI_TAG), must be
 * expected and received exactly once with the right size and data.
 */
#include "mpitest.h"

#define ROUNDS 40
#define MAXMSG 12 /* per source per round */

static int rank, size;

static uint64_t rng_state;
static uint32_t rnd(void) /* xorshift64* */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 2685821657736338717ULL) >> 32);
}

typedef struct {
    int src, dst, n, tag, sync;
    int got; /* receiver side: received already */
} msg_t;

static int pick_size(void)
{
    uint32_t r = rnd() % 100;
    if (r < 55)
        return rnd() % 257;
    if (r < 80)
        return 257 + rnd() % 16384;
    if (r < 95)
        return 16641 + rnd() % (262144 - 16641);
    return 262144 + rnd() % (1048576 + 4096 - 262144);
}

typedef struct {
    int is_recv;
    int msg;     /* send: index in msgs; recv: -1 (identified by status) */
    char *buf;
    int cap;
    int src, tag; /* receive envelope (may be wildcards) */
} op_t;

static void check_recv(msg_t *msgs, int nmsgs, const MPI_Status *st, const op_t *op, int round)
{
    int cnt = -1, found = -1;
    MPI_Get_count(st, MPI_BYTE, &cnt);
    for (int i = 0; i < nmsgs; i++)
        if (msgs[i].dst == rank && msgs[i].src == st->MPI_SOURCE && msgs[i].tag == st->MPI_TAG) {
            found = i;
            break;
        }
    if (!CHECK(found >= 0, "round %d: received unexpected envelope (src %d, tag %d, %d bytes)",
               round, st->MPI_SOURCE, st->MPI_TAG, cnt))
        return;
    CHECK(op->src == MPI_ANY_SOURCE || op->src == st->MPI_SOURCE,
          "round %d: receive for source %d matched source %d", round, op->src, st->MPI_SOURCE);
    CHECK(op->tag == MPI_ANY_TAG || op->tag == st->MPI_TAG,
          "round %d: receive for tag %d matched tag %d", round, op->tag, st->MPI_TAG);
    CHECK_EQ(msgs[found].got, 0, "round %d: message (src %d tag %d) received twice", round,
             st->MPI_SOURCE, st->MPI_TAG);
    msgs[found].got++;
    CHECK_EQ(cnt, msgs[found].n, "round %d: size of message src %d tag %d", round,
             st->MPI_SOURCE, st->MPI_TAG);
    if (cnt == msgs[found].n)
        CHECK_BUF(op->buf, cnt, st->MPI_SOURCE, st->MPI_TAG, round,
                  "round %d: message src %d tag %d (%d bytes)", round, st->MPI_SOURCE, st->MPI_TAG,
                  cnt);
}

static void run_round(int round, uint64_t seed)
{
    static const char *methods[] = {"Waitall", "Waitany", "Waitsome", "Testany",
                                    "Testsome", "Testall", "Test"};
    msg_t *msgs = mt_malloc(sizeof(msg_t) * size * MAXMSG);
    int nmsgs = 0, method, *rstyle = mt_malloc(sizeof(int) * size);
    op_t *ops;
    MPI_Request *req;
    MPI_Status *sts;
    int nops = 0, *order, posted_first, nrecv_expected = 0;
    char sec[64];

    /* global schedule, identical on all ranks */
    rng_state = seed * 0x9E3779B97F4A7C15ULL + (uint64_t)round * 7919 + 1;
    for (int s = 0; s < size; s++) {
        int k = 2 + rnd() % (MAXMSG - 1);
        for (int j = 0; j < k; j++) {
            msg_t *m = &msgs[nmsgs++];
            m->src = s;
            m->dst = rnd() % size;
            m->n = pick_size();
            m->tag = round * 1000 + s * 50 + j; /* unique (src, tag) */
            m->sync = (rnd() % 6 == 0);
            m->got = 0;
        }
    }
    for (int d = 0; d < size; d++)
        rstyle[d] = rnd() % 4;
    method = rnd() % 7;
    snprintf(sec, sizeof sec, "round %d (%s, recv style %d)", round, methods[method],
             rstyle[rank]);
    mt_section(sec);

    /* my operations */
    ops = mt_malloc(sizeof(op_t) * 2 * nmsgs);
    for (int i = 0; i < nmsgs; i++) {
        if (msgs[i].src == rank) {
            op_t *o = &ops[nops++];
            o->is_recv = 0;
            o->msg = i;
            o->cap = msgs[i].n;
            o->buf = mt_malloc(o->cap);
            mt_fill(o->buf, o->cap, rank, msgs[i].tag, round);
        }
    }
    {
        /* receives: one per message to me; the envelope depends on the style */
        int maxn = 0;
        for (int i = 0; i < nmsgs; i++)
            if (msgs[i].dst == rank && msgs[i].n > maxn)
                maxn = msgs[i].n;
        for (int i = 0; i < nmsgs; i++) {
            op_t *o;
            if (msgs[i].dst != rank)
                continue;
            o = &ops[nops++];
            nrecv_expected++;
            o->is_recv = 1;
            o->msg = -1;
            switch (rstyle[rank]) {
            case 0: o->src = msgs[i].src; o->tag = msgs[i].tag; o->cap = msgs[i].n; break;
            case 1: o->src = MPI_ANY_SOURCE; o->tag = msgs[i].tag; o->cap = msgs[i].n; break;
            case 2: { /* ANY_TAG from the source: any of its messages may land here */
                int mx = 0;
                for (int j = 0; j < nmsgs; j++)
                    if (msgs[j].dst == rank && msgs[j].src == msgs[i].src && msgs[j].n > mx)
                        mx = msgs[j].n;
                o->src = msgs[i].src; o->tag = MPI_ANY_TAG; o->cap = mx;
                break;
            }
            default: o->src = MPI_ANY_SOURCE; o->tag = MPI_ANY_TAG; o->cap = maxn; break;
            }
            o->buf = mt_malloc(o->cap);
        }
    }

    /* local posting order: a per-rank random permutation */
    rng_state = seed * 31 + (uint64_t)round * 1000003 + (uint64_t)rank * 7 + 5;
    order = mt_malloc(sizeof(int) * nops);
    for (int i = 0; i < nops; i++)
        order[i] = i;
    for (int i = nops - 1; i > 0; i--) {
        int j = rnd() % (i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    posted_first = nops / 2;

    req = mt_malloc(sizeof(MPI_Request) * (nops + 1));
    sts = mt_malloc(sizeof(MPI_Status) * (nops + 1));
    for (int i = 0; i < nops; i++)
        req[i] = MPI_REQUEST_NULL;
    for (int p = 0; p < nops; p++) {
        int i = order[p];
        op_t *o = &ops[i];
        if (p == posted_first) {
            /* some progress before posting the rest: makes messages unexpected */
            int flag;
            for (int k = 0; k < 5; k++)
                CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag,
                                     MPI_STATUS_IGNORE));
        }
        if (o->is_recv)
            CHECK_MPI(MPI_Irecv(o->buf, o->cap, MPI_BYTE, o->src, o->tag, MPI_COMM_WORLD, &req[i]));
        else if (msgs[o->msg].sync)
            CHECK_MPI(MPI_Issend(o->buf, o->cap, MPI_BYTE, msgs[o->msg].dst, msgs[o->msg].tag,
                                 MPI_COMM_WORLD, &req[i]));
        else
            CHECK_MPI(MPI_Isend(o->buf, o->cap, MPI_BYTE, msgs[o->msg].dst, msgs[o->msg].tag,
                                MPI_COMM_WORLD, &req[i]));
    }

    /* completion */
    {
        int done = 0, *fin = mt_malloc(sizeof(int) * (nops + 1));
        double t0 = MPI_Wtime();
        memset(fin, 0, sizeof(int) * (nops + 1));
#define COMPLETE(i, st)                                                  \
    do {                                                                 \
        if (CHECK(!fin[i], "round %d: request %d completed twice", round, i)) { \
            fin[i] = 1;                                                  \
            done++;                                                      \
            if (ops[i].is_recv)                                          \
                check_recv(msgs, nmsgs, (st), &ops[i], round);           \
        }                                                                \
    } while (0)
        switch (method) {
        case 0:
            CHECK_MPI(MPI_Waitall(nops, req, sts));
            for (int i = 0; i < nops; i++)
                COMPLETE(i, &sts[i]);
            break;
        case 1:
        case 3:
            while (done < nops && MPI_Wtime() - t0 < 60) {
                int idx = -1, flag = 1;
                MPI_Status st;
                if (method == 1)
                    CHECK_MPI(MPI_Waitany(nops, req, &idx, &st));
                else
                    CHECK_MPI(MPI_Testany(nops, req, &idx, &flag, &st));
                if (!flag)
                    continue;
                if (!CHECK(idx >= 0 && idx < nops, "%s returned index %d with %d pending",
                           methods[method], idx, nops - done))
                    break;
                COMPLETE(idx, &st);
            }
            break;
        case 2:
        case 4:
            while (done < nops && MPI_Wtime() - t0 < 60) {
                int outc = 0;
                int *idx = mt_malloc(sizeof(int) * nops);
                if (method == 2)
                    CHECK_MPI(MPI_Waitsome(nops, req, &outc, idx, sts));
                else
                    CHECK_MPI(MPI_Testsome(nops, req, &outc, idx, sts));
                if (!CHECK(outc != MPI_UNDEFINED, "%s: MPI_UNDEFINED with %d pending",
                           methods[method], nops - done)) {
                    free(idx);
                    break;
                }
                for (int j = 0; j < outc; j++)
                    COMPLETE(idx[j], &sts[j]);
                free(idx);
            }
            break;
        case 5: {
            int flag = 0;
            while (!flag && MPI_Wtime() - t0 < 60)
                CHECK_MPI(MPI_Testall(nops, req, &flag, sts));
            if (flag)
                for (int i = 0; i < nops; i++)
                    COMPLETE(i, &sts[i]);
            break;
        }
        default:
            while (done < nops && MPI_Wtime() - t0 < 60)
                for (int i = 0; i < nops; i++) {
                    int flag = 0;
                    MPI_Status st;
                    if (fin[i])
                        continue;
                    CHECK_MPI(MPI_Test(&req[i], &flag, &st));
                    if (flag)
                        COMPLETE(i, &st);
                }
        }
#undef COMPLETE
        if (!CHECK_EQ(done, nops, "round %d: completed operations (%s)", round, methods[method])) {
            /* requests may still be active: do not free their buffers */
            free(fin);
            return;
        }
        free(fin);
    }
    for (int i = 0; i < nops; i++)
        CHECK(req[i] == MPI_REQUEST_NULL, "round %d: request %d not freed", round, i);
    for (int i = 0; i < nmsgs; i++)
        if (msgs[i].dst == rank)
            CHECK_EQ(msgs[i].got, 1, "round %d: message src %d tag %d received", round,
                     msgs[i].src, msgs[i].tag);
    for (int i = 0; i < nops; i++)
        free(ops[i].buf);
    free(ops);
    free(order);
    free(req);
    free(sts);
    free(msgs);
    free(rstyle);
    /* wildcard receives of the next round must not see this round's traffic
     * (all of it is received by now); the barrier separates the rounds */
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    uint64_t seed = 20240611;
    const char *e;
    mt_init(&argc, &argv, "p2p_stress");
    rank = mt_rank;
    size = mt_size;
    e = getenv("MPITEST_SEED");
    if (e)
        seed = strtoull(e, NULL, 10);
    if (rank == 0 && mt_verbose)
        printf("p2p_stress: seed %llu (set MPITEST_SEED to change)\n", (unsigned long long)seed);
    for (int r = 0; r < ROUNDS; r++)
        run_round(r, seed);
    return mt_finalize();
}
