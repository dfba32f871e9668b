/*
 * p2p_flood: many senders flood one receiver that posts late.
 *  - every rank but 0 sends a stream of small and medium messages (eager
 *    sizes) and a few large ones to rank 0 before rank 0 posts anything;
 *    rank 0 then receives them all (ANY_SOURCE, and per source in order) and
 *    checks every byte;
 *  - with pml/rdrp credits on (read through MPI_T): the mailbox high-water
 *    mark never exceeds the mailbox size, so unexpected eager memory stayed
 *    bounded; with a tiny mailbox the senders did run out of credit
 *    (stalls > 0) and still nobody deadlocked;
 *  - a burst to a sleeping receiver: every rank but 0 sends BURST messages
 *    of 8 KiB while rank 0 sleeps without calling MPI, so the transport's
 *    queue to rank 0 fills and sends stay incomplete;
 *  - a stream of STREAM messages per sender that rank 0 receives while
 *    they are being sent; the senders probe between sends, so earlier
 *    sends complete (and admission tokens come back) while later ones are
 *    started: no later send may overtake an earlier one that waits;
 *  - with MPITEST_EXPECT_THROTTLED=1 (pml_rdrp_throttle at tiny limits):
 *    admission control did hold sends back (MPI_T), data and order intact.
 * Other PMLs run the data checks only.
 */
#include "mpitest.h"
#include "mpitest_mpit.h"

#define PER_SENDER 300
#define BURST 512
#define BURST_SIZE 8192
#define STREAM 6000
#define STREAM_SIZE 2048

static size_t msg_size(int k)
{
    static const size_t sz[] = {0, 1, 8, 100, 1000, 4096, 8192, 64, 3000};
    if (k % 100 == 99) return 300000 + (size_t)k; /* a few rendezvous ones */
    return sz[k % (int)(sizeof(sz) / sizeof(sz[0]))];
}

int main(int argc, char **argv)
{
    int provided, rank, size;
    long long slots_cvar = 0, credit_on = 0;
    pvar_t hwm, msize, stalls, throttled;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "p2p_flood");
    rank = mt_rank;
    size = mt_size;
    int have = mt_pml_is("rdrp") && cvar_int("pml_rdrp_credit", &credit_on) &&
               cvar_int("pml_rdrp_credit_slots", &slots_cvar);
    pvar_open(&hwm, "pml_rdrp_mailbox_hwm");
    pvar_open(&msize, "pml_rdrp_mailbox_slots");
    pvar_open(&stalls, "pml_rdrp_credit_stalls");
    pvar_open(&throttled, "pml_rdrp_throttled");
    if (mt_pml_is("rdrp")) CHECK(have && hwm.ok && msize.ok && stalls.ok, "rdrp MPI_T variables missing");

    mt_section("flood");
    if (rank != 0) {
        MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * PER_SENDER);
        char **b = mt_malloc(sizeof(char *) * PER_SENDER);
        for (int k = 0; k < PER_SENDER; k++) {
            b[k] = mt_malloc(msg_size(k) + 1);
            mt_fill(b[k], msg_size(k), rank, 7, k);
            CHECK_MPI(MPI_Isend(b[k], (int)msg_size(k), MPI_BYTE, 0, 7, MPI_COMM_WORLD, &rq[k]));
        }
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* everything is in flight or queued */
        CHECK_MPI(MPI_Waitall(PER_SENDER, rq, MPI_STATUSES_IGNORE));
        for (int k = 0; k < PER_SENDER; k++) free(b[k]);
        free(b);
        free(rq);
        if (have && credit_on && slots_cvar > 0 && slots_cvar <= 4 * size)
            CHECK(pvar_read(&stalls) > 0, "a tiny mailbox never ran out of credit");
    } else {
        int *next = calloc((size_t)size, sizeof(int));
        char *rb = mt_malloc(400000);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        mt_sleep_ms(100); /* let the flood arrive unexpected */
        for (int m = 0; m < (size - 1) * PER_SENDER; m++) {
            MPI_Status st;
            CHECK_MPI(MPI_Recv(rb, 400000, MPI_BYTE, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st));
            int s = st.MPI_SOURCE, k = next[s]++;
            CHECK_STATUS(&st, s, 7, msg_size(k), "message %d from %d (order)", k, s);
            CHECK_BUF(rb, msg_size(k), s, 7, k, "message %d from %d", k, s);
        }
        free(next);
        free(rb);
        if (have && credit_on) {
            unsigned long h = pvar_read(&hwm), n = pvar_read(&msize);
            CHECK(n > 0 && h <= n, "mailbox high-water mark %lu above its size %lu", h, n);
            if (mt_verbose) printf("[rank 0] mailbox hwm %lu of %lu slots\n", h, n);
        }
    }
    mt_section("burst to a sleeping receiver");
    if (rank != 0) {
        MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * BURST);
        char *b = mt_malloc((size_t)BURST * BURST_SIZE);
        for (int k = 0; k < BURST; k++) mt_fill(b + (size_t)k * BURST_SIZE, BURST_SIZE, rank, 8, k);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (int k = 0; k < BURST; k++)
            CHECK_MPI(MPI_Isend(b + (size_t)k * BURST_SIZE, BURST_SIZE, MPI_BYTE, 0, 8, MPI_COMM_WORLD, &rq[k]));
        CHECK_MPI(MPI_Waitall(BURST, rq, MPI_STATUSES_IGNORE));
        free(b);
        free(rq);
    } else {
        char *rb = mt_malloc(BURST_SIZE);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        mt_sleep_ms(300); /* no MPI call: nothing drains the queues to this rank */
        int *next = calloc((size_t)size, sizeof(int));
        for (int m = 0; m < (size - 1) * BURST; m++) {
            MPI_Status st;
            CHECK_MPI(MPI_Recv(rb, BURST_SIZE, MPI_BYTE, MPI_ANY_SOURCE, 8, MPI_COMM_WORLD, &st));
            int s = st.MPI_SOURCE, k = next[s]++;
            CHECK_STATUS(&st, s, 8, BURST_SIZE, "burst message %d from %d", k, s);
            CHECK_BUF(rb, BURST_SIZE, s, 8, k, "burst message %d from %d", k, s);
        }
        free(next);
        free(rb);
    }
    mt_section("stream to a busy receiver, senders probing between sends");
    if (rank != 0) {
        MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * STREAM);
        char *b = mt_malloc((size_t)STREAM * STREAM_SIZE);
        for (int k = 0; k < STREAM; k++) {
            mt_fill(b + (size_t)k * STREAM_SIZE, STREAM_SIZE, rank, 9, k);
            CHECK_MPI(MPI_Isend(b + (size_t)k * STREAM_SIZE, STREAM_SIZE, MPI_BYTE, 0, 9, MPI_COMM_WORLD, &rq[k]));
            int flag;
            CHECK_MPI(MPI_Iprobe(0, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
        }
        CHECK_MPI(MPI_Waitall(STREAM, rq, MPI_STATUSES_IGNORE));
        free(b);
        free(rq);
    } else {
        char *rb = mt_malloc(STREAM_SIZE);
        int *next = calloc((size_t)size, sizeof(int));
        for (int m = 0; m < (size - 1) * STREAM && !mt_failures; m++) {
            MPI_Status st;
            CHECK_MPI(MPI_Recv(rb, STREAM_SIZE, MPI_BYTE, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &st));
            int s = st.MPI_SOURCE, k = next[s]++;
            CHECK_STATUS(&st, s, 9, STREAM_SIZE, "stream message %d from %d", k, s);
            CHECK_BUF(rb, STREAM_SIZE, s, 9, k, "stream message %d from %d (order)", k, s);
        }
        free(next);
        free(rb);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (getenv("MPITEST_EXPECT_THROTTLED") && atoi(getenv("MPITEST_EXPECT_THROTTLED"))) {
        unsigned long mine = throttled.ok ? pvar_read(&throttled) : 0, all = 0;
        MPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD);
        CHECK(throttled.ok && all > 0, "pml_rdrp_throttle configured but no send ever waited for admission");
        if (mt_verbose && rank == 0) printf("[rank 0] sends that waited for admission: %lu\n", all);
    }
    pvar_close(&throttled);
    pvar_close(&hwm);
    pvar_close(&msize);
    pvar_close(&stalls);
    MPI_T_finalize();
    return mt_finalize();
}
