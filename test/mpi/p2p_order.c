/*
 * p2p_order: MPI non-overtaking rules.
 *  - many messages with the same (source, tag), small and large interleaved
 *    (eager and rendezvous mixed), arrive in send order: receives posted
 *    concurrently, before the sends, and after the sends (unexpected);
 *  - ANY_SOURCE receives see every source's messages in its send order
 *    (blocking receives and pre-posted Irecvs);
 *  - receives with ANY_SOURCE/ANY_TAG/specific tags interleaved match in post
 *    order (posted path) and messages are taken in arrival order (unexpected
 *    path), checked against a simulation of the matching rules;
 *  - 66000 messages on one pair (more than a 16-bit sequence number), with
 *    rendezvous-size messages in between, stay in order.
 */
#include "mpitest.h"

static const int mix[] = {1, 262144, 8, 65537, 0, 4097, 1048576, 100, 16384, 4096, 8193, 1000,
                          65536, 4095, 8192, 4194307, 0, 3};
#define NMIX ((int)(sizeof(mix) / sizeof(mix[0])))
#define K 36 /* messages per stream */

static int rank, size, left, right;
static char *rbuf;
static char *sb[K];

static int msize(int k) { return mix[k % NMIX]; }

static void fill_stream(int tag)
{
    for (int k = 0; k < K; k++)
        mt_fill(sb[k], msize(k), rank, tag, k);
}

static void isend_stream(int dst, int tag, MPI_Request *req)
{
    for (int k = 0; k < K; k++)
        CHECK_MPI(MPI_Isend(sb[k], msize(k), MPI_BYTE, dst, tag, MPI_COMM_WORLD, &req[k]));
}

static void check_msg(const MPI_Status *st, const void *buf, int src, int tag, int k,
                      const char *what)
{
    int cnt = -1;
    MPI_Get_count(st, MPI_BYTE, &cnt);
    CHECK_STATUS(st, src, tag, msize(k), "%s: message #%d from %d (a wrong size means "
                 "the messages were reordered)", what, k, src);
    if (cnt == msize(k))
        CHECK_BUF(buf, cnt, src, tag, k, "%s: message #%d from %d", what, k, src);
}

/* same (source, tag), receiver uses blocking receives while sends fly */
static void test_stream_concurrent(void)
{
    MPI_Request req[K];
    int tag = 10;
    mt_section("same (src,tag) stream, concurrent");
    fill_stream(tag);
    isend_stream(right, tag, req);
    for (int k = 0; k < K; k++) {
        MPI_Status st;
        CHECK_MPI(MPI_Recv(rbuf, MT_MAXSIZE, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st));
        check_msg(&st, rbuf, left, tag, k, "concurrent");
    }
    CHECK_MPI(MPI_Waitall(K, req, MPI_STATUSES_IGNORE));
}

/* receives posted before any send: the k-th posted receive gets message k */
static void test_stream_preposted(void)
{
    MPI_Request sreq[K], rreq[K];
    MPI_Status st[K];
    char **rb = mt_malloc(sizeof(char *) * K);
    int tag = 11;
    mt_section("same (src,tag) stream, receives pre-posted");
    fill_stream(tag);
    for (int k = 0; k < K; k++) {
        rb[k] = mt_malloc(MT_MAXSIZE);
        CHECK_MPI(MPI_Irecv(rb[k], MT_MAXSIZE, MPI_BYTE, left, tag, MPI_COMM_WORLD, &rreq[k]));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    isend_stream(right, tag, sreq);
    CHECK_MPI(MPI_Waitall(K, rreq, st));
    for (int k = 0; k < K; k++) {
        check_msg(&st[k], rb[k], left, tag, k, "pre-posted");
        free(rb[k]);
    }
    CHECK_MPI(MPI_Waitall(K, sreq, MPI_STATUSES_IGNORE));
    free(rb);
}

/* all sends issued (and announced by a marker) before the receives */
static void test_stream_unexpected(void)
{
    MPI_Request sreq[K];
    int tag = 12, marker = 13;
    char c = 'm';
    mt_section("same (src,tag) stream, unexpected");
    fill_stream(tag);
    isend_stream(right, tag, sreq);
    CHECK_MPI(MPI_Send(&c, 1, MPI_CHAR, right, marker, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Recv(&c, 1, MPI_CHAR, left, marker, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (int k = 0; k < K; k++) {
        MPI_Status st;
        if (k % 3 == 2) { /* sometimes Irecv + Wait instead of Recv */
            MPI_Request r;
            CHECK_MPI(MPI_Irecv(rbuf, MT_MAXSIZE, MPI_BYTE, left, tag, MPI_COMM_WORLD, &r));
            CHECK_MPI(MPI_Wait(&r, &st));
        } else {
            CHECK_MPI(MPI_Recv(rbuf, MT_MAXSIZE, MPI_BYTE, left, tag, MPI_COMM_WORLD, &st));
        }
        check_msg(&st, rbuf, left, tag, k, "unexpected");
    }
    CHECK_MPI(MPI_Waitall(K, sreq, MPI_STATUSES_IGNORE));
}

/* everybody sends a stream to everybody; blocking ANY_SOURCE receives must
 * see each source's stream in order */
static void test_any_source_blocking(void)
{
    int np = size - 1, tag = 20;
    MPI_Request *req = mt_malloc(sizeof(MPI_Request) * K * np);
    int *next = mt_malloc(sizeof(int) * size);
    mt_section("ANY_SOURCE, per-source order (blocking receives)");
    fill_stream(tag);
    for (int p = 0; p < np; p++)
        isend_stream((rank + 1 + p) % size, tag, &req[p * K]);
    memset(next, 0, sizeof(int) * size);
    for (int m = 0; m < K * np; m++) {
        MPI_Status st;
        int s;
        CHECK_MPI(MPI_Recv(rbuf, MT_MAXSIZE, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st));
        s = st.MPI_SOURCE;
        if (!CHECK(s >= 0 && s < size && s != rank, "bad MPI_SOURCE %d", s))
            continue;
        if (!CHECK(next[s] < K, "too many messages from %d", s))
            continue;
        check_msg(&st, rbuf, s, tag, next[s]++, "ANY_SOURCE blocking");
    }
    CHECK_MPI(MPI_Waitall(K * np, req, MPI_STATUSES_IGNORE));
    free(req);
    free(next);
}

/* ANY_SOURCE Irecvs pre-posted: for every source the receives it matched
 * (in post order) carry its messages in send order */
static void test_any_source_preposted(void)
{
    int np = size - 1, tag = 21, n = K * np;
    MPI_Request *sreq = mt_malloc(sizeof(MPI_Request) * n);
    MPI_Request *rreq = mt_malloc(sizeof(MPI_Request) * n);
    MPI_Status *st = mt_malloc(sizeof(MPI_Status) * n);
    char **rb = mt_malloc(sizeof(char *) * n);
    int *next = mt_malloc(sizeof(int) * size);
    mt_section("ANY_SOURCE, per-source order (pre-posted Irecvs)");
    fill_stream(tag);
    for (int m = 0; m < n; m++) {
        rb[m] = mt_malloc(1048576 * 4 + 3);
        CHECK_MPI(MPI_Irecv(rb[m], MT_MAXSIZE, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD,
                            &rreq[m]));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (int p = 0; p < np; p++)
        isend_stream((rank + 1 + p) % size, tag, &sreq[p * K]);
    CHECK_MPI(MPI_Waitall(n, rreq, st));
    memset(next, 0, sizeof(int) * size);
    for (int m = 0; m < n; m++) {
        int s = st[m].MPI_SOURCE;
        if (CHECK(s >= 0 && s < size && s != rank, "bad MPI_SOURCE %d", s) &&
            CHECK(next[s] < K, "too many messages from %d", s))
            check_msg(&st[m], rb[m], s, tag, next[s]++, "ANY_SOURCE pre-posted");
        free(rb[m]);
    }
    CHECK_MPI(MPI_Waitall(n, sreq, MPI_STATUSES_IGNORE));
    free(sreq);
    free(rreq);
    free(st);
    free(rb);
    free(next);
}

/* ------------------------------------------------ interleaved wildcards */
#define NI 16
#define TA 11
#define TB 22
#define TC 33
#define SPEC (-1) /* specific source (the left neighbour) */
/* (source spec, tag spec) of the receives, in post order */
static const int rsrc[NI] = {MPI_ANY_SOURCE, MPI_ANY_SOURCE, MPI_ANY_SOURCE, SPEC,
                             MPI_ANY_SOURCE, MPI_ANY_SOURCE, MPI_ANY_SOURCE, MPI_ANY_SOURCE,
                             MPI_ANY_SOURCE, SPEC, MPI_ANY_SOURCE, SPEC,
                             SPEC, SPEC, SPEC, SPEC};
static const int rtag[NI] = {MPI_ANY_TAG, MPI_ANY_TAG, MPI_ANY_TAG, TC, TA, TA, MPI_ANY_TAG,
                             MPI_ANY_TAG, TB, MPI_ANY_TAG, TC, MPI_ANY_TAG, TA, TC, TA, TC};
/* tags of the messages, in send order */
static const int mtag[NI] = {TC, TB, TA, TB, TC, TB, TA, TA, TA, TA, TC, TC, TA, TC, TA, TB};

static int tag_matches(int spec, int tag) { return spec == MPI_ANY_TAG || spec == tag; }

/* expected message index for each receive: posted-queue semantics (every
 * message takes the first posted matching receive) and unexpected-queue
 * semantics (every receive takes the first arrived matching message) must
 * agree for a single sender; returns 0 if the tables are inconsistent */
static int simulate(int *exp_msg)
{
    int used_r[NI] = {0}, used_m[NI] = {0}, alt[NI];
    for (int i = 0; i < NI; i++) {
        int j;
        for (j = 0; j < NI; j++)
            if (!used_r[j] && tag_matches(rtag[j], mtag[i]))
                break;
        if (j == NI)
            return 0;
        used_r[j] = 1;
        exp_msg[j] = i;
    }
    for (int j = 0; j < NI; j++) {
        int i;
        for (i = 0; i < NI; i++)
            if (!used_m[i] && tag_matches(rtag[j], mtag[i]))
                break;
        if (i == NI)
            return 0;
        used_m[i] = 1;
        alt[j] = i;
    }
    for (int j = 0; j < NI; j++)
        if (alt[j] != exp_msg[j])
            return 0;
    return 1;
}

static void test_interleaved(int unexpected)
{
    MPI_Request sreq[NI], rreq[NI];
    MPI_Status st[NI];
    char *mb[NI], *rb[NI];
    int exp_msg[NI];
    char c = 'm';
    mt_section(unexpected ? "interleaved wildcard receives, unexpected messages"
                          : "interleaved wildcard receives, posted receives");
    if (!simulate(exp_msg)) {
        fprintf(stderr, "p2p_order: internal error in the matching tables\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* only the left neighbour sends to us in this phase, so ANY_SOURCE is
     * deterministic; sizes mix eager and rendezvous */
    for (int i = 0; i < NI; i++) {
        mb[i] = mt_malloc(msize(i * 5));
        rb[i] = mt_malloc(MT_MAXSIZE);
        mt_fill(mb[i], msize(i * 5), rank, mtag[i], 100 + i);
    }
    if (!unexpected) {
        for (int j = 0; j < NI; j++)
            CHECK_MPI(MPI_Irecv(rb[j], MT_MAXSIZE, MPI_BYTE, rsrc[j] == SPEC ? left : rsrc[j],
                                rtag[j], MPI_COMM_WORLD, &rreq[j]));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (int i = 0; i < NI; i++)
            CHECK_MPI(MPI_Isend(mb[i], msize(i * 5), MPI_BYTE, right, mtag[i], MPI_COMM_WORLD,
                                &sreq[i]));
    } else {
        for (int i = 0; i < NI; i++)
            CHECK_MPI(MPI_Isend(mb[i], msize(i * 5), MPI_BYTE, right, mtag[i], MPI_COMM_WORLD,
                                &sreq[i]));
        CHECK_MPI(MPI_Send(&c, 1, MPI_CHAR, right, 99, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Recv(&c, 1, MPI_CHAR, left, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int j = 0; j < NI; j++)
            CHECK_MPI(MPI_Irecv(rb[j], MT_MAXSIZE, MPI_BYTE, rsrc[j] == SPEC ? left : rsrc[j],
                                rtag[j], MPI_COMM_WORLD, &rreq[j]));
    }
    CHECK_MPI(MPI_Waitall(NI, rreq, st));
    for (int j = 0; j < NI; j++) {
        int i = exp_msg[j], cnt = -1;
        MPI_Get_count(&st[j], MPI_BYTE, &cnt);
        CHECK_STATUS(&st[j], left, mtag[i], msize(i * 5),
                     "receive #%d (src %s, tag %d) should get message #%d", j,
                     rsrc[j] == SPEC ? "left" : "ANY", rtag[j], i);
        if (cnt == msize(i * 5))
            CHECK_BUF(rb[j], cnt, left, mtag[i], 100 + i, "receive #%d <- message #%d", j, i);
    }
    CHECK_MPI(MPI_Waitall(NI, sreq, MPI_STATUSES_IGNORE));
    for (int i = 0; i < NI; i++) {
        free(mb[i]);
        free(rb[i]);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* more messages on one pair than a 16-bit sequence number can count, in
 * batches, with a rendezvous-size message every 4096: order and content */
#define NWRAP 66000
#define WBATCH 2000
static void test_sequence_wrap(void)
{
    int tag = 30, big = 65537;
    int *sv = mt_malloc(sizeof(int) * WBATCH), *rv = mt_malloc(sizeof(int) * WBATCH);
    char *bs = mt_malloc(big), *br = mt_malloc(big);
    MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * 2 * WBATCH);
    mt_section("66000 messages on one pair (sequence number wrap)");
    for (int base = 0; base < NWRAP; base += WBATCH) {
        int nb = NWRAP - base < WBATCH ? NWRAP - base : WBATCH, bigk = -1;
        for (int j = 0; j < nb; j++) {
            int k = base + j;
            if (k % 4096 == 4095) { /* one large message per batch at most */
                bigk = j;
                CHECK_MPI(MPI_Irecv(br, big, MPI_BYTE, left, tag, MPI_COMM_WORLD, &rq[j]));
            } else {
                rv[j] = -1;
                CHECK_MPI(MPI_Irecv(&rv[j], 1, MPI_INT, left, tag, MPI_COMM_WORLD, &rq[j]));
            }
        }
        for (int j = 0; j < nb; j++) {
            int k = base + j;
            if (j == bigk) {
                mt_fill(bs, big, rank, tag, k);
                CHECK_MPI(MPI_Isend(bs, big, MPI_BYTE, right, tag, MPI_COMM_WORLD, &rq[nb + j]));
            } else {
                sv[j] = k;
                CHECK_MPI(MPI_Isend(&sv[j], 1, MPI_INT, right, tag, MPI_COMM_WORLD, &rq[nb + j]));
            }
        }
        CHECK_MPI(MPI_Waitall(2 * nb, rq, MPI_STATUSES_IGNORE));
        for (int j = 0; j < nb; j++) {
            int k = base + j;
            if (j == bigk) {
                CHECK_BUF(br, big, left, tag, k, "large message #%d of the stream", k);
            } else if (!CHECK_EQ(rv[j], k, "message #%d of the stream (order)", k)) {
                break;
            }
        }
    }
    free(sv);
    free(rv);
    free(bs);
    free(br);
    free(rq);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "p2p_order");
    rank = mt_rank;
    size = mt_size;
    if (size < 2) {
        fprintf(stderr, "p2p_order needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    left = (rank - 1 + size) % size;
    right = (rank + 1) % size;
    rbuf = mt_malloc(MT_MAXSIZE);
    for (int k = 0; k < K; k++)
        sb[k] = mt_malloc(msize(k));

    test_stream_concurrent();
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    test_stream_preposted();
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    test_stream_unexpected();
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    test_any_source_blocking();
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    test_any_source_preposted();
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    test_interleaved(0);
    test_interleaved(1);
    test_sequence_wrap();

    for (int k = 0; k < K; k++)
        free(sb[k]);
    free(rbuf);
    return mt_finalize();
}
