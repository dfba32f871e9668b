/*
 * p2p_unexpected: messages that arrive before the matching receive is
 * posted.  All-pairs: every rank sends many messages (small and large, one
 * tag each) before the receivers post; receivers then take them in a
 * different tag order (reverse, shuffled, with ANY_SOURCE), large unexpected
 * messages (4 MiB+3), a blocking large send while the receiver is busy
 * outside MPI, a flood of 2000 small messages per peer, 1500 blocking small
 * + 150 medium sends to a receiver that is outside MPI (flow control), and a
 * mix of pre-posted and unexpected receives for the same stream.
 * Under pml/rdrp, MPI_T: small unexpected payloads (up to 128 bytes) wait
 * in their descriptors (pml_rdrp_unexpected_inline); 127, 128 and 129
 * bytes check the data on both sides of that limit.  A stream queued
 * behind a message that completes a receive stays in the ring until its
 * receives are posted (pml_rdrp_unexpected does not move).
 */
#include "mpitest_mpit.h"

static const int mix[] = {100, 1048576, 0, 65537, 8, 4097, 262144, 1, 16384, 4096,
                          8193, 1000, 65536, 4095, 4194307, 8192, 3, 20000, 131072, 7,
                          127, 128, 129};
#define NT ((int)(sizeof(mix) / sizeof(mix[0]))) /* one message per tag 0..NT-1 */

static int rank, size;
static char *rbuf;

/* make sure everything a peer sent before the handshake was at least
 * injected: everybody sends a marker to everybody and waits for all */
static void handshake(int tag)
{
    char c = 0;
    MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * 2 * size);
    int n = 0;
    for (int p = 0; p < size; p++) {
        if (p == rank)
            continue;
        CHECK_MPI(MPI_Irecv(&c, 0, MPI_CHAR, p, tag, MPI_COMM_WORLD, &rq[n++]));
        CHECK_MPI(MPI_Isend(&c, 0, MPI_CHAR, p, tag, MPI_COMM_WORLD, &rq[n++]));
    }
    CHECK_MPI(MPI_Waitall(n, rq, MPI_STATUSES_IGNORE));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    free(rq);
}

/* send message (tag t) to every peer; pattern depends on src, tag, dst */
static MPI_Request *send_all(char **sb, int iter_base)
{
    int np = size - 1;
    MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * NT * np);
    for (int t = 0; t < NT; t++) {
        mt_fill(sb[t], mix[t], rank, t, iter_base);
        for (int p = 0; p < np; p++)
            CHECK_MPI(MPI_Isend(sb[t], mix[t], MPI_BYTE, (rank + 1 + p) % size, t, MPI_COMM_WORLD,
                                &rq[t * np + p]));
    }
    return rq;
}

static void test_reverse_order(char **sb)
{
    MPI_Request *rq;
    pvar_t unex, inl, stalls, waits;
    mt_section("unexpected, received in reverse tag order");
    pvar_open(&unex, "pml_rdrp_unexpected");
    pvar_open(&inl, "pml_rdrp_unexpected_inline");
    pvar_open(&stalls, "pml_rdrp_credit_stalls");
    pvar_open(&waits, "pml_rdrp_credit_waits");
    if (mt_pml_is("rdrp")) CHECK(unex.ok && inl.ok && stalls.ok && waits.ok, "rdrp MPI_T variables missing");
    unsigned long unex0 = pvar_read(&unex), inl0 = pvar_read(&inl), stalls0 = pvar_read(&stalls);
    unsigned long waits0 = pvar_read(&waits);
    /* the counters are read before this barrier: a peer sends only after
     * it, so every arrival of this section counts.  Read after the
     * previous section's barrier they missed the messages a peer sent as
     * soon as it left that barrier while this rank was still in it ("only
     * 17 unexpected arrivals", about 1 run in 50 at load 5-18) */
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    rq = send_all(sb, 1);
    handshake(1000);
    if (mt_pml_is("rdrp")) {
        /* every message was sent before the handshake, so each arrived
         * unexpected, except those that waited for a credit (they may go
         * later, by rendezvous).  Small payloads were kept in their
         * descriptors: at least one (which ones depends on the credits
         * each sender had), and never the empty message.  With few
         * credits (pml_rdrp_credit_slots 16 at np 4, under load) every
         * small message to a rank may have found its sender out of credits
         * (1 run in 10 at load 20): then none need be inline. */
        unsigned long nu = pvar_read(&unex) - unex0, ni = pvar_read(&inl) - inl0;
        unsigned long mine[2] = {pvar_read(&stalls) - stalls0, pvar_read(&waits) - waits0}, all[2] = {0, 0};
        CHECK_MPI(MPI_Allreduce(mine, all, 2, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD));
        unsigned long all_stalls = all[0], all_waits = all[1];
        CHECK(nu + all_waits >= (unsigned long)NT, "only %lu unexpected arrivals (%lu sends waited for a credit)", nu,
              all_waits);
        CHECK((ni >= 1 || all_stalls > 0) && ni < nu, "%lu unexpected payloads kept inline (%lu arrivals, %lu sends "
              "found no credit)", ni, nu, all_stalls);
    }
    pvar_close(&unex);
    pvar_close(&inl);
    pvar_close(&stalls);
    pvar_close(&waits);
    for (int p = 0; p < size - 1; p++) {
        int src = (rank - 1 - p + 2 * size) % size;
        for (int t = NT - 1; t >= 0; t--) {
            MPI_Status st;
            memset(rbuf, 0xA5, (size_t)mix[t] + 16);
            CHECK_MPI(MPI_Recv(rbuf, MT_MAXSIZE, MPI_BYTE, src, t, MPI_COMM_WORLD, &st));
            CHECK_STATUS(&st, src, t, mix[t], "reverse order, tag %d from %d", t, src);
            CHECK_BUF(rbuf, mix[t], src, t, 1, "reverse order, tag %d from %d", t, src);
            CHECK_CONST(rbuf + mix[t], 16, 0xA5, "reverse order, tag %d from %d", t, src);
        }
    }
    CHECK_MPI(MPI_Waitall(NT * (size - 1), rq, MPI_STATUSES_IGNORE));
    free(rq);
}

static void test_shuffled_any_source(char **sb)
{
    int np = size - 1;
    MPI_Request *rq, *rr = mt_malloc(sizeof(MPI_Request) * NT * np);
    MPI_Status *st = mt_malloc(sizeof(MPI_Status) * NT * np);
    char **rb = mt_malloc(sizeof(char *) * NT * np);
    int *seen = mt_malloc(sizeof(int) * NT * size);
    int order[NT];
    mt_section("unexpected, shuffled tag order, ANY_SOURCE Irecvs");
    for (int t = 0; t < NT; t++)
        order[t] = (t * 7 + 3) % NT; /* NT=20, 7 coprime: a permutation */
    rq = send_all(sb, 2);
    handshake(1001);
    for (int k = 0; k < NT; k++) {
        int t = order[k];
        for (int p = 0; p < np; p++) {
            int m = k * np + p;
            rb[m] = mt_malloc(mix[t] + 1);
            CHECK_MPI(MPI_Irecv(rb[m], mix[t] + 1, MPI_BYTE, MPI_ANY_SOURCE, t, MPI_COMM_WORLD,
                                &rr[m]));
        }
    }
    CHECK_MPI(MPI_Waitall(NT * np, rr, st));
    memset(seen, 0, sizeof(int) * NT * size);
    for (int k = 0; k < NT; k++) {
        int t = order[k];
        for (int p = 0; p < np; p++) {
            int m = k * np + p, s = st[m].MPI_SOURCE;
            if (CHECK(s >= 0 && s < size && s != rank, "bad source %d for tag %d", s, t)) {
                seen[t * size + s]++;
                CHECK_STATUS(&st[m], s, t, mix[t], "shuffled, tag %d", t);
                CHECK_BUF(rb[m], mix[t], s, t, 2, "shuffled, tag %d from %d", t, s);
            }
            free(rb[m]);
        }
    }
    for (int t = 0; t < NT; t++)
        for (int s = 0; s < size; s++)
            CHECK_EQ(seen[t * size + s], s == rank ? 0 : 1, "tag %d from %d received once", t, s);
    CHECK_MPI(MPI_Waitall(NT * np, rq, MPI_STATUSES_IGNORE));
    free(rq);
    free(rr);
    free(st);
    free(rb);
    free(seen);
}

/* every peer sends two 4 MiB+3 messages before we post anything; we take
 * the second one first */
static void test_large_unexpected(void)
{
    int np = size - 1, n = 4 * 1048576 + 3;
    char *sbig[2];
    MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * np * 2);
    mt_section("large unexpected messages");
    for (int r = 0; r < 2; r++) {
        sbig[r] = mt_malloc(n);
        mt_fill(sbig[r], n, rank, 500 + r, 0);
        for (int p = 0; p < np; p++)
            CHECK_MPI(MPI_Isend(sbig[r], n, MPI_BYTE, (rank + 1 + p) % size, 500 + r,
                                MPI_COMM_WORLD, &rq[r * np + p]));
    }
    handshake(1002);
    for (int p = 0; p < np; p++) {
        int src = (rank + 1 + p) % size;
        for (int r = 1; r >= 0; r--) {
            MPI_Status st;
            CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, src, 500 + r, MPI_COMM_WORLD, &st));
            CHECK_STATUS(&st, src, 500 + r, n, "large unexpected from %d", src);
            CHECK_BUF(rbuf, n, src, 500 + r, 0, "large unexpected from %d", src);
        }
    }
    CHECK_MPI(MPI_Waitall(2 * np, rq, MPI_STATUSES_IGNORE));
    free(rq);
    free(sbig[0]);
    free(sbig[1]);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* blocking large send while the receiver is outside MPI for a while */
static void test_blocking_send_late_receiver(void)
{
    static const int sz[] = {8, 65537, 1048576, 4194307};
    mt_section("blocking send, receiver busy outside MPI");
    for (int i = 0; i < 4; i++) {
        int n = sz[i], tag = 600 + i;
        /* pairs (0,1), (2,3): even sends, odd receives late; a lone last
         * rank (odd size) sits out */
        if (rank % 2 == 0 && rank + 1 < size) {
            mt_fill(rbuf, n, rank, tag, 0);
            CHECK_MPI(MPI_Send(rbuf, n, MPI_BYTE, rank + 1, tag, MPI_COMM_WORLD));
        } else if (rank % 2 == 1) {
            MPI_Status st;
            mt_sleep_ms(60);
            CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, rank - 1, tag, MPI_COMM_WORLD, &st));
            CHECK_STATUS(&st, rank - 1, tag, n, "late receiver size %d", n);
            CHECK_BUF(rbuf, n, rank - 1, tag, 0, "late receiver size %d", n);
        }
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* many small unexpected messages with the same tag from every peer */
#define FLOOD 2000
static void test_flood(void)
{
    int np = size - 1;
    MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * FLOOD * np);
    int (*sv)[2] = mt_malloc(sizeof(int) * 2 * FLOOD);
    int *next = mt_malloc(sizeof(int) * size);
    mt_section("flood of small unexpected messages");
    for (int k = 0; k < FLOOD; k++) {
        sv[k][0] = rank;
        sv[k][1] = k;
    }
    for (int p = 0; p < np; p++)
        for (int k = 0; k < FLOOD; k++)
            CHECK_MPI(MPI_Isend(sv[k], (k % 5 == 4) ? 0 : 2, MPI_INT, (rank + 1 + p) % size, 700,
                                MPI_COMM_WORLD, &rq[p * FLOOD + k]));
    handshake(1003);
    memset(next, 0, sizeof(int) * size);
    for (int m = 0; m < FLOOD * np; m++) {
        int v[2] = {-1, -1}, cnt = -1, s, k;
        MPI_Status st;
        CHECK_MPI(MPI_Recv(v, 2, MPI_INT, MPI_ANY_SOURCE, 700, MPI_COMM_WORLD, &st));
        s = st.MPI_SOURCE;
        if (!CHECK(s >= 0 && s < size && s != rank, "bad source %d", s))
            continue;
        k = next[s]++;
        MPI_Get_count(&st, MPI_INT, &cnt);
        CHECK_EQ(cnt, (k % 5 == 4) ? 0 : 2, "flood message %d from %d: count", k, s);
        if (k % 5 != 4) {
            CHECK_EQ(v[0], s, "flood message %d from %d: payload source", k, s);
            CHECK_EQ(v[1], k, "flood message %d from %d: payload sequence (order)", k, s);
        }
    }
    for (int s = 0; s < size; s++)
        CHECK_EQ(next[s], s == rank ? 0 : FLOOD, "flood messages from %d", s);
    CHECK_MPI(MPI_Waitall(FLOOD * np, rq, MPI_STATUSES_IGNORE));
    free(rq);
    free(sv);
    free(next);
}

/* half of the stream pre-posted, the other half unexpected */
static void test_half_posted(char **sb)
{
    int np = size - 1, half = NT / 2;
    MPI_Request *rq, *rr = mt_malloc(sizeof(MPI_Request) * NT * np);
    MPI_Status *st = mt_malloc(sizeof(MPI_Status) * NT * np);
    char **rb = mt_malloc(sizeof(char *) * NT * np);
    mt_section("half pre-posted, half unexpected");
    for (int t = half; t < NT; t++)
        for (int p = 0; p < np; p++) {
            int m = t * np + p, src = (rank - 1 - p + 2 * size) % size;
            rb[m] = mt_malloc(mix[t]);
            CHECK_MPI(MPI_Irecv(rb[m], mix[t], MPI_BYTE, src, t, MPI_COMM_WORLD, &rr[m]));
        }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    rq = send_all(sb, 3);
    handshake(1004);
    for (int t = half - 1; t >= 0; t--)
        for (int p = 0; p < np; p++) {
            int m = t * np + p, src = (rank - 1 - p + 2 * size) % size;
            rb[m] = mt_malloc(mix[t]);
            CHECK_MPI(MPI_Irecv(rb[m], mix[t], MPI_BYTE, src, t, MPI_COMM_WORLD, &rr[m]));
        }
    CHECK_MPI(MPI_Waitall(NT * np, rr, st));
    for (int t = 0; t < NT; t++)
        for (int p = 0; p < np; p++) {
            int m = t * np + p, src = (rank - 1 - p + 2 * size) % size;
            CHECK_STATUS(&st[m], src, t, mix[t], "half posted, tag %d from %d", t, src);
            CHECK_BUF(rb[m], mix[t], src, t, 3, "half posted, tag %d from %d", t, src);
            free(rb[m]);
        }
    CHECK_MPI(MPI_Waitall(NT * np, rq, MPI_STATUSES_IGNORE));
    free(rq);
    free(rr);
    free(st);
    free(rb);
}

/* flow control: a pair where the sender fires 1500 small and 150 medium
 * messages (blocking sends, then nonblocking) while the receiver stays
 * outside MPI for a while; everything must arrive, in order */
static void test_flood_late_receiver(void)
{
    enum { NSMALL = 1500, NMED = 150, MED = 4097 };
    mt_section("flood with the receiver outside MPI");
    if (rank % 2 == 0 && rank + 1 < size) {
        char *m = mt_malloc(MED);
        MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * NMED);
        for (int k = 0; k < NSMALL; k++)
            CHECK_MPI(MPI_Send(&k, 1, MPI_INT, rank + 1, 800, MPI_COMM_WORLD));
        for (int k = 0; k < NMED; k++) {
            char *b = m; /* same buffer, same content: pattern by (src, tag) */
            if (k == 0)
                mt_fill(b, MED, rank, 801, 0);
            CHECK_MPI(MPI_Isend(b, MED, MPI_BYTE, rank + 1, 801, MPI_COMM_WORLD, &rq[k]));
        }
        CHECK_MPI(MPI_Waitall(NMED, rq, MPI_STATUSES_IGNORE));
        free(rq);
        free(m);
    } else if (rank % 2 == 1) {
        char *m = mt_malloc(MED);
        mt_sleep_ms(100);
        for (int k = 0; k < NSMALL; k++) {
            int v = -1;
            MPI_Status st;
            CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, rank - 1, 800, MPI_COMM_WORLD, &st));
            if (!CHECK_EQ(v, k, "small flood message order"))
                break;
        }
        for (int k = 0; k < NMED; k++) {
            MPI_Status st;
            memset(m, 0, MED);
            CHECK_MPI(MPI_Recv(m, MED, MPI_BYTE, rank - 1, 801, MPI_COMM_WORLD, &st));
            CHECK_STATUS(&st, rank - 1, 801, MED, "medium flood message %d", k);
            if (!CHECK_BUF(m, MED, rank - 1, 801, 0, "medium flood message %d", k))
                break;
        }
        free(m);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* Under pml/rdrp on the shared-memory ring: a progress pass ends after the
 * message that completed a receive, so a stream queued behind it waits in
 * the ring and meets the receives the program posts next instead of being
 * taken as unexpected (osu_mbw_mr's window right after its barrier).
 * Rank 0 queues a marker and W messages while rank 1 sleeps; rank 1
 * receives the marker, then posts the W receives: none may have arrived
 * unexpected.  Other PMLs and UCX paths: data and status only. */
static void test_stream_behind_completion(void)
{
    enum { W = 16, TAG_RING = 4999, TAG_MARK = 5000, TAG_DATA = 5001 };
    char sbuf[W], rb[W], c = 0;
    MPI_Request rq[W];
    mt_section("a stream behind a completed receive meets its posted receives");
    if (rank == 0) {
        CHECK_MPI(MPI_Recv(&c, 0, MPI_BYTE, 1, TAG_RING, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int k = 0; k < W; k++)
            sbuf[k] = (char)(k * 3 + 1);
        CHECK_MPI(MPI_Send(&c, 1, MPI_BYTE, 1, TAG_MARK, MPI_COMM_WORLD));
        for (int k = 0; k < W; k++)
            CHECK_MPI(MPI_Isend(&sbuf[k], 1, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD, &rq[k]));
        CHECK_MPI(MPI_Waitall(W, rq, MPI_STATUSES_IGNORE));
    } else if (rank == 1) {
        pvar_t unex, ring;
        pvar_open(&unex, "pml_rdrp_unexpected");
        pvar_open(&ring, "pml_rdrp_shm_sent");
        /* is rank 0 reached through our ring?  (same node, pml_rdrp_shm on) */
        unsigned long r0 = pvar_read(&ring);
        CHECK_MPI(MPI_Send(&c, 0, MPI_BYTE, 0, TAG_RING, MPI_COMM_WORLD));
        int by_ring = mt_pml_is("rdrp") && unex.ok && pvar_read(&ring) > r0;
        mt_sleep_ms(200); /* rank 0 queues the marker and the stream */
        unsigned long u0 = pvar_read(&unex);
        MPI_Status st;
        CHECK_MPI(MPI_Recv(&c, 1, MPI_BYTE, 0, TAG_MARK, MPI_COMM_WORLD, &st));
        CHECK_STATUS(&st, 0, TAG_MARK, 1, "marker");
        memset(rb, 0, sizeof(rb));
        for (int k = 0; k < W; k++)
            CHECK_MPI(MPI_Irecv(&rb[k], 1, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, &rq[k]));
        CHECK_MPI(MPI_Waitall(W, rq, MPI_STATUSES_IGNORE));
        for (int k = 0; k < W; k++)
            CHECK_EQ(rb[k], (char)(k * 3 + 1), "stream message %d", k);
        if (by_ring) {
            unsigned long nu = pvar_read(&unex) - u0;
            CHECK(nu == 0, "%lu of %d messages behind the marker were taken as unexpected", nu, W);
        }
        pvar_close(&unex);
        pvar_close(&ring);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    char *sb[NT];
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "p2p_unexpected");
    rank = mt_rank;
    size = mt_size;
    if (size < 2) {
        fprintf(stderr, "p2p_unexpected needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    rbuf = mt_malloc(MT_MAXSIZE + 16);
    for (int t = 0; t < NT; t++)
        sb[t] = mt_malloc(mix[t]);

    test_reverse_order(sb);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    test_shuffled_any_source(sb);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    test_large_unexpected();
    test_blocking_send_late_receiver();
    test_flood();
    test_flood_late_receiver();
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    test_half_posted(sb);
    test_stream_behind_completion();

    for (int t = 0; t < NT; t++)
        free(sb[t]);
    free(rbuf);
    MPI_T_finalize();
    return mt_finalize();
}
