/*
 * p2p_credit_return: credits come back for messages that are matched on
 * arrival (pml/rdrp accounts those off the latency path, after the next
 * send has left or when progress is idle).
 *  - ranks pair up (r <-> r^1, an odd last rank idles) and ping-pong small
 *    eager messages, blocking and nonblocking, many more rounds than the
 *    mailbox has slots; data and status are checked every round;
 *  - one-way streams where the receiver pre-posts every receive, so every
 *    message is expected and the sender never gets a reply to piggyback on:
 *    credits must still come back by explicit credit packets;
 *  - with pml/rdrp credits on (read through MPI_T): the sender stalled on
 *    credit for only a small fraction of the messages (none expected with the
 *    default mailbox; a tiny one may stall part of the stream, but a leak of
 *    the deferred accounting would stall nearly every message), and the
 *    mailbox high-water mark stayed within its size.
 * Other PMLs run the data checks only.
 */
#include "mpitest.h"
#include "mpitest_mpit.h"

#define ROUNDS 3000
#define STREAM 2000
#define WINDOW 8

int main(int argc, char **argv)
{
    int provided;
    long long credit_on = 0, slots_cvar = 0;
    pvar_t hwm, msize, stalls;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "p2p_credit_return");
    int rank = mt_rank, size = mt_size;
    int have = mt_pml_is("rdrp") && cvar_int("pml_rdrp_credit", &credit_on) &&
               cvar_int("pml_rdrp_credit_slots", &slots_cvar);
    pvar_open(&hwm, "pml_rdrp_mailbox_hwm");
    pvar_open(&msize, "pml_rdrp_mailbox_slots");
    pvar_open(&stalls, "pml_rdrp_credit_stalls");
    if (mt_pml_is("rdrp")) CHECK(have && hwm.ok && msize.ok && stalls.ok, "rdrp MPI_T variables missing");

    int peer = rank ^ 1;
    int active = peer < size;
    unsigned long stalls0 = have ? pvar_read(&stalls) : 0;
    unsigned char sbuf[64], rbuf[64];

    mt_section("ping-pong");
    if (active) {
        for (int i = 0; i < ROUNDS; i++) {
            size_t n = (size_t)(i % 3 == 0 ? 8 : i % 3 == 1 ? 0 : 64);
            MPI_Status st;
            if ((rank & 1) == 0) {
                mt_fill(sbuf, n, rank, 3, i);
                CHECK_MPI(MPI_Send(sbuf, (int)n, MPI_BYTE, peer, 3, MPI_COMM_WORLD));
                CHECK_MPI(MPI_Recv(rbuf, 64, MPI_BYTE, peer, 4, MPI_COMM_WORLD, &st));
                CHECK_STATUS(&st, peer, 4, n, "pong %d", i);
                CHECK_BUF(rbuf, n, peer, 4, i, "pong %d", i);
            } else {
                MPI_Request rq;
                CHECK_MPI(MPI_Irecv(rbuf, 64, MPI_BYTE, peer, 3, MPI_COMM_WORLD, &rq));
                CHECK_MPI(MPI_Wait(&rq, &st));
                CHECK_STATUS(&st, peer, 3, n, "ping %d", i);
                CHECK_BUF(rbuf, n, peer, 3, i, "ping %d", i);
                mt_fill(sbuf, n, rank, 4, i);
                CHECK_MPI(MPI_Send(sbuf, (int)n, MPI_BYTE, peer, 4, MPI_COMM_WORLD));
            }
            if (mt_failures) break;
        }
    }

    mt_section("one-way, receives pre-posted");
    if (active) {
        unsigned char (*bufs)[64] = mt_malloc((size_t)WINDOW * 64);
        MPI_Request rq[WINDOW];
        for (int base = 0; base < STREAM && !mt_failures; base += WINDOW) {
            if ((rank & 1) == 1) {
                for (int k = 0; k < WINDOW; k++)
                    CHECK_MPI(MPI_Irecv(bufs[k], 64, MPI_BYTE, peer, 5, MPI_COMM_WORLD, &rq[k]));
                /* the receives are posted before the sender may start */
                CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, peer, 6, MPI_COMM_WORLD));
                for (int k = 0; k < WINDOW; k++) {
                    MPI_Status st;
                    CHECK_MPI(MPI_Wait(&rq[k], &st));
                    CHECK_STATUS(&st, peer, 5, 16, "stream message %d", base + k);
                    CHECK_BUF(bufs[k], 16, peer, 5, base + k, "stream message %d", base + k);
                }
            } else {
                CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, peer, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                for (int k = 0; k < WINDOW; k++) {
                    mt_fill(bufs[k], 16, rank, 5, base + k);
                    CHECK_MPI(MPI_Isend(bufs[k], 16, MPI_BYTE, peer, 5, MPI_COMM_WORLD, &rq[k]));
                }
                CHECK_MPI(MPI_Waitall(WINDOW, rq, MPI_STATUSES_IGNORE));
            }
        }
        free(bufs);
    }

    if (have && credit_on && active) {
        /* messages this rank sent: ping-pong (one side each round) plus the
         * stream (the even side) and its go-messages (the odd side) */
        unsigned long sent = ROUNDS + ((rank & 1) == 0 ? STREAM : STREAM / WINDOW);
        unsigned long s = pvar_read(&stalls) - stalls0;
        /* a default mailbox never runs dry here; a tiny one (a few slots per
         * peer) may stall part of the one-way stream, but a leak would stall
         * nearly every send after the first mailbox-full */
        unsigned long allowed = (slots_cvar > 0 && slots_cvar < 64) ? sent / 2 : sent / 20;
        CHECK(s <= allowed, "%lu of %lu sends found no credit (at most %lu expected): credits "
              "of matched messages did not come back", s, sent, allowed);
        unsigned long h = pvar_read(&hwm), n = pvar_read(&msize);
        CHECK(n > 0 && h <= n, "mailbox high-water mark %lu above its size %lu", h, n);
        if (mt_verbose) printf("[rank %d] %lu stalls in %lu sends, hwm %lu of %lu\n", rank, s, sent, h, n);
    }
    pvar_close(&hwm);
    pvar_close(&msize);
    pvar_close(&stalls);
    MPI_T_finalize();
    return mt_finalize();
}
