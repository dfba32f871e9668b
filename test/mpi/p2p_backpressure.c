/*
 * p2p_backpressure: a producer that outruns its consumer is paced by it,
 * with bounded memory on both sides (issue 12).  Rank 0 produces, rank 1
 * consumes; other ranks only take part in the barriers.
 *  - flood: windows of W MPI_Isend of 16 B and of 1 KiB, each window
 *    waited for, against windows of MPI_Irecv; every byte checked;
 *  - slow consumer: the consumer sleeps between windows; the producer's
 *    resident memory must stay flat while it keeps producing;
 *  - nonblocking floods hold no copies (an MPI_Isend without credit waits
 *    incomplete rather than running its producer further ahead); blocking
 *    MPI_Send floods against a sleeping consumer may complete from copies,
 *    within the budget;
 *  - a receiver that waits for a message stuck behind a mailbox full of
 *    unmatched ones (the producer sends more than the mailbox holds, then
 *    the message the consumer asks for first): must not deadlock;
 *  - a consumer away from MPI (asleep, descheduled) while the producer's
 *    sends wait for credit: under pml/rdrp with a shared-memory ring to
 *    the consumer, the waiting sends must not give up on credit and go by
 *    rendezvous (the consumer has not read what is in its ring yet, so
 *    nothing it could wait for is stuck behind its mailbox, and a
 *    rendezvous would need the absent consumer twice over): at most one
 *    in eight may, in the moments between its reading the ring and its
 *    credits arriving;
 * Under pml/rdrp (through MPI_T): the sender's early-completed copies
 * never exceed pml_rdrp_send_buffer, the mailbox never exceeds its size,
 * and sends did wait for credit.  Other PMLs (btl/credit under ob1, the
 * reference) run the data checks only.
 */
#include "mpitest.h"
#include "mpitest_mpit.h"

#include <malloc.h>

#define W 64

/* pml/rdrp: copies made for the producer's MPI_Isend windows (must stay 0) */
static pvar_t copies;
static unsigned long isend_copies;

/* Heap memory in use (KiB): unlike the resident set it goes down again
 * when memory is freed, so earlier sections do not hide growth. */
static long heap_kib(void)
{
    struct mallinfo2 mi = mallinfo2();
    return (long)((mi.uordblks + mi.hblkhd) / 1024);
}

/* Windows of W messages of size bytes from 0 to 1; the consumer sleeps
 * sleep_ms between windows.  Returns the producer's largest heap growth
 * (KiB) after the end of window `warm`. */
static long flood(int windows, int size, int sleep_ms, int warm, int tag)
{
    char *buf = mt_malloc((size_t)W * (size_t)(size ? size : 1));
    MPI_Request rq[W];
    long heap_warm = 0, growth = 0;
    unsigned long copies0 = copies.ok ? pvar_read(&copies) : 0;
    for (int k = 0; k < windows; k++) {
        if (mt_rank == 0) {
            for (int i = 0; i < W; i++) {
                mt_fill(buf + (size_t)i * size, (size_t)size, 0, tag, k * W + i);
                CHECK_MPI(MPI_Isend(buf + (size_t)i * size, size, MPI_BYTE, 1, tag, MPI_COMM_WORLD, &rq[i]));
            }
            CHECK_MPI(MPI_Waitall(W, rq, MPI_STATUSES_IGNORE));
            if (k == warm) heap_warm = heap_kib();
            if (k > warm && heap_kib() - heap_warm > growth) growth = heap_kib() - heap_warm;
        } else if (mt_rank == 1) {
            for (int i = 0; i < W; i++)
                CHECK_MPI(MPI_Irecv(buf + (size_t)i * size, size, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &rq[i]));
            MPI_Status st[W];
            CHECK_MPI(MPI_Waitall(W, rq, st));
            for (int i = 0; i < W; i++) {
                CHECK_STATUS(&st[i], 0, tag, size, "window %d message %d", k, i);
                CHECK_BUF(buf + (size_t)i * size, (size_t)size, 0, tag, k * W + i, "window %d message %d (order)", k, i);
            }
            if (sleep_ms) mt_sleep_ms(sleep_ms);
        }
    }
    /* read before the barrier: its blocking zero-byte sends may be copied */
    if (copies.ok) isend_copies += pvar_read(&copies) - copies0;
    free(buf);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    return growth;
}

int main(int argc, char **argv)
{
    int provided;
    long long budget = 0, slots = 0, credit_on = 0;
    pvar_t send_hwm, mbox_hwm, mbox_size, waits;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "p2p_backpressure");
    int rdrp = mt_pml_is("rdrp");
    pvar_open(&send_hwm, "pml_rdrp_send_buffered_hwm");
    pvar_open(&mbox_hwm, "pml_rdrp_mailbox_hwm");
    pvar_open(&mbox_size, "pml_rdrp_mailbox_slots");
    pvar_open(&waits, "pml_rdrp_credit_waits");
    pvar_open(&copies, "pml_rdrp_send_buffered");
    if (rdrp) {
        CHECK(cvar_int("pml_rdrp_send_buffer", &budget) && cvar_int("pml_rdrp_credit_slots", &slots) &&
                  cvar_int("pml_rdrp_credit", &credit_on),
              "pml/rdrp control variables missing");
        CHECK(send_hwm.ok && mbox_hwm.ok && mbox_size.ok && waits.ok, "pml/rdrp MPI_T variables missing");
    }

    mt_section("flood 16 B");
    flood(300, 16, 0, 0, 1);
    mt_section("flood 1 KiB");
    flood(300, 1024, 0, 0, 2);

    mt_section("slow consumer");
    /* the consumer sleeps 3 ms per window: without pacing the producer
     * would queue ~250 KiB of copies per consumer window */
    long growth = flood(120, 1024, 3, 20, 3);
    if (mt_rank == 0) {
        if (mt_verbose) printf("[rank 0] producer heap growth over 100 windows: %ld KiB\n", growth);
        CHECK(growth < 4096, "the producer's memory grew by %ld KiB while its consumer slept", growth);
    }

    if (rdrp && credit_on)
        CHECK(copies.ok && isend_copies == 0,
              "%lu MPI_Isend of the floods were copied: a nonblocking send should wait, not copy", isend_copies);

    mt_section("blocking sends against a sleeping consumer");
    {
        const int n = 40 * W, size = 1024;
        char *b = mt_malloc((size_t)W * size);
        if (mt_rank == 0) {
            for (int i = 0; i < n; i++) {
                mt_fill(b, size, 0, 30, i);
                CHECK_MPI(MPI_Send(b, size, MPI_BYTE, 1, 30, MPI_COMM_WORLD));
            }
        } else if (mt_rank == 1) {
            MPI_Request rq[W];
            for (int k = 0; k < n / W; k++) {
                mt_sleep_ms(1);
                for (int i = 0; i < W; i++)
                    CHECK_MPI(MPI_Irecv(b + (size_t)i * size, size, MPI_BYTE, 0, 30, MPI_COMM_WORLD, &rq[i]));
                CHECK_MPI(MPI_Waitall(W, rq, MPI_STATUSES_IGNORE));
                for (int i = 0; i < W; i++)
                    CHECK_BUF(b + (size_t)i * size, (size_t)size, 0, 30, k * W + i, "blocking flood message %d", k * W + i);
            }
        }
        free(b);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }

    mt_section("receiver waits for a message behind a full mailbox");
    {
        /* more messages than the whole mailbox (slots, or 256 if unknown),
         * then the one the consumer takes first */
        int n = (int)(slots > 0 ? slots : 256) + 64;
        if (rdrp && mbox_size.ok && pvar_read(&mbox_size) > 0) n = (int)pvar_read(&mbox_size) + 64;
        if (mt_rank == 0) {
            MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * (size_t)n);
            char *b = mt_malloc((size_t)n * 64);
            for (int i = 0; i < n; i++) {
                mt_fill(b + (size_t)i * 64, 64, 0, 20, i);
                CHECK_MPI(MPI_Isend(b + (size_t)i * 64, 64, MPI_BYTE, 1, 20, MPI_COMM_WORLD, &rq[i]));
            }
            char last[64];
            mt_fill(last, 64, 0, 21, 0);
            CHECK_MPI(MPI_Send(last, 64, MPI_BYTE, 1, 21, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Waitall(n, rq, MPI_STATUSES_IGNORE));
            free(b);
            free(rq);
        } else if (mt_rank == 1) {
            char rb[64];
            MPI_Status st;
            mt_sleep_ms(100);  /* let the flood fill the mailbox */
            CHECK_MPI(MPI_Recv(rb, 64, MPI_BYTE, 0, 21, MPI_COMM_WORLD, &st));
            CHECK_STATUS(&st, 0, 21, 64, "the message behind the flood");
            CHECK_BUF(rb, 64, 0, 21, 0, "the message behind the flood");
            for (int i = 0; i < n; i++) {
                CHECK_MPI(MPI_Recv(rb, 64, MPI_BYTE, 0, 20, MPI_COMM_WORLD, &st));
                CHECK_BUF(rb, 64, 0, 20, i, "flood message %d (order)", i);
            }
        }
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }

    mt_section("consumer away from MPI while sends wait for credit");
    {
        /* windows of more eager messages than the whole mailbox; the
         * consumer sleeps before it receives each one */
        pvar_t timeouts, ring;
        pvar_open(&timeouts, "pml_rdrp_credit_wait_timeouts");
        pvar_open(&ring, "pml_rdrp_shm_sent");
        if (rdrp) CHECK(timeouts.ok && ring.ok, "pml/rdrp MPI_T variables missing");
        unsigned long t0 = timeouts.ok ? pvar_read(&timeouts) : 0, r0 = ring.ok ? pvar_read(&ring) : 0;
        const int windows = 4, n = (int)(slots > 0 ? slots : 256) + 4 * W, size = 16;
        MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * (size_t)n);
        char *b = mt_malloc((size_t)n * size);
        for (int k = 0; k < windows; k++) {
            if (mt_rank == 0) {
                for (int i = 0; i < n; i++) {
                    mt_fill(b + (size_t)i * size, size, 0, 40, k * n + i);
                    CHECK_MPI(MPI_Isend(b + (size_t)i * size, size, MPI_BYTE, 1, 40, MPI_COMM_WORLD, &rq[i]));
                }
                CHECK_MPI(MPI_Waitall(n, rq, MPI_STATUSES_IGNORE));
            } else if (mt_rank == 1) {
                mt_sleep_ms(30);
                for (int i = 0; i < n; i++)
                    CHECK_MPI(MPI_Irecv(b + (size_t)i * size, size, MPI_BYTE, 0, 40, MPI_COMM_WORLD, &rq[i]));
                MPI_Status *st = mt_malloc(sizeof(MPI_Status) * (size_t)n);
                CHECK_MPI(MPI_Waitall(n, rq, st));
                for (int i = 0; i < n; i++) {
                    CHECK_STATUS(&st[i], 0, 40, size, "window %d message %d", k, i);
                    CHECK_BUF(b + (size_t)i * size, (size_t)size, 0, 40, k * n + i, "window %d message %d (order)", k, i);
                }
                free(st);
            }
        }
        unsigned long gave_up = timeouts.ok ? pvar_read(&timeouts) - t0 : 0;
        unsigned long by_ring = ring.ok ? pvar_read(&ring) - r0 : 0;
        if (mt_verbose && mt_rank == 0)
            printf("[rank 0] %d windows of %d: %lu sends gave up waiting for credit, %lu ring messages\n", windows, n,
                   gave_up, by_ring);
        /* a few may give up in the moments between the consumer's reading
         * its ring and its credits arriving, more when a loaded machine
         * takes the consumer off its core there (22 of 1088 once in a CI
         * rehearsal with 16 credit slots); before the fix every send
         * beyond the credits did (1384 of 2048): at most one in eight */
        if (rdrp && credit_on && mt_rank == 0 && by_ring > 0)
            CHECK(gave_up * 8 <= (unsigned long)(windows * n),
                  "%lu of %d sends to a consumer that had not read its ring yet gave up waiting for credit and "
                  "went by rendezvous", gave_up, windows * n);
        free(b);
        free(rq);
        pvar_close(&timeouts);
        pvar_close(&ring);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }

    if (rdrp && credit_on) {
        unsigned long sh = pvar_read(&send_hwm), mh = pvar_read(&mbox_hwm), ms = pvar_read(&mbox_size);
        unsigned long w = pvar_read(&waits);
        if (mt_verbose)
            printf("[rank %d] send_buffered_hwm %lu of %lld, mailbox_hwm %lu of %lu, credit waits %lu\n",
                   mt_rank, sh, budget, mh, ms, w);
        CHECK(sh <= (unsigned long)budget, "early-completed copies reached %lu bytes, above pml_rdrp_send_buffer %lld",
              sh, budget);
        CHECK(ms > 0 && mh <= ms, "mailbox high-water mark %lu above its size %lu", mh, ms);
        if (mt_rank == 0) CHECK(w > 0, "the producer never had to wait for credit");
    }
    pvar_close(&send_hwm);
    pvar_close(&mbox_hwm);
    pvar_close(&mbox_size);
    pvar_close(&waits);
    pvar_close(&copies);
    MPI_T_finalize();
    return mt_finalize();
}
