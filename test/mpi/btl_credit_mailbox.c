/*
 * btl_credit_mailbox: an unexpected-message flood through btl/credit.
 *  - every rank but 0 sends a stream of eager-sized messages (and a few
 *    large ones, which ob1 sends by rendezvous over the same BTL) to rank 0
 *    before rank 0 posts anything; rank 0 then receives them all
 *    (ANY_SOURCE, per-source order checked) and checks every byte;
 *  - then all ranks exchange in a ring with many outstanding isends each;
 *  - read through MPI_T when btl/credit is in use: the mailbox high-water
 *    mark never exceeded the mailbox size on any rank, and with a tiny
 *    mailbox (btl_credit_slots <= 64) the senders did run out of credit
 *    (stalls > 0 summed over the job) without anybody deadlocking.
 * Runs anywhere; without btl/credit only the data checks apply.
 */
#include "mpitest.h"
#include "mpitest_mpit.h"

#define PER_SENDER 400
#define RING 200

static size_t msg_size(int k)
{
    static const size_t sz[] = {0, 1, 8, 100, 1000, 4000, 64, 3000, 7000};
    if (k % 97 == 96) return 200000 + (size_t)k; /* a few rendezvous ones */
    return sz[k % (int)(sizeof(sz) / sizeof(sz[0]))];
}

int main(int argc, char **argv)
{
    int provided;
    long long slots_cvar = 0;
    pvar_t hwm, msize, stalls;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "btl_credit_mailbox");
    int rank = mt_rank, size = mt_size;
    pvar_open(&hwm, "btl_credit_mailbox_hwm");
    pvar_open(&msize, "btl_credit_mailbox_slots");
    pvar_open(&stalls, "btl_credit_stalls");
    int have = hwm.ok && msize.ok && stalls.ok && cvar_int("btl_credit_slots", &slots_cvar);
    /* the pvars exist whenever the component is loaded; it is in use only
     * if it sized a mailbox */
    int in_use = have && pvar_read(&msize) > 0;
    int any_in_use = 0;
    MPI_Allreduce(&in_use, &any_in_use, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (mt_verbose && rank == 0) printf("btl/credit in use: %d\n", any_in_use);

    mt_section("flood");
    if (rank != 0) {
        MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * PER_SENDER);
        char **b = mt_malloc(sizeof(char *) * PER_SENDER);
        for (int k = 0; k < PER_SENDER; k++) {
            b[k] = mt_malloc(msg_size(k) + 1);
            mt_fill(b[k], msg_size(k), rank, 7, k);
            CHECK_MPI(MPI_Isend(b[k], (int)msg_size(k), MPI_BYTE, 0, 7, MPI_COMM_WORLD, &rq[k]));
        }
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Waitall(PER_SENDER, rq, MPI_STATUSES_IGNORE));
        for (int k = 0; k < PER_SENDER; k++) free(b[k]);
        free(b);
        free(rq);
    } else {
        int *next = calloc((size_t)size, sizeof(int));
        char *rb = mt_malloc(300000);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        mt_sleep_ms(100); /* let the flood arrive unexpected */
        for (int m = 0; m < (size - 1) * PER_SENDER && !mt_failures; m++) {
            MPI_Status st;
            CHECK_MPI(MPI_Recv(rb, 300000, MPI_BYTE, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st));
            int s = st.MPI_SOURCE, k = next[s]++;
            CHECK_STATUS(&st, s, 7, msg_size(k), "message %d from %d (order)", k, s);
            CHECK_BUF(rb, msg_size(k), s, 7, k, "message %d from %d", k, s);
        }
        free(next);
        free(rb);
    }

    mt_section("ring with many outstanding sends");
    {
        int right = (rank + 1) % size, left = (rank + size - 1) % size;
        char *sb = mt_malloc((size_t)RING * 512), *rbuf = mt_malloc((size_t)RING * 512);
        MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * 2 * RING);
        for (int k = 0; k < RING; k++) {
            mt_fill(sb + (size_t)k * 512, 512, rank, 9, k);
            CHECK_MPI(MPI_Isend(sb + (size_t)k * 512, 512, MPI_BYTE, right, 9, MPI_COMM_WORLD, &rq[k]));
        }
        for (int k = 0; k < RING; k++)
            CHECK_MPI(MPI_Irecv(rbuf + (size_t)k * 512, 512, MPI_BYTE, left, 9, MPI_COMM_WORLD,
                                &rq[RING + k]));
        CHECK_MPI(MPI_Waitall(2 * RING, rq, MPI_STATUSES_IGNORE));
        for (int k = 0; k < RING; k++)
            CHECK_BUF(rbuf + (size_t)k * 512, 512, left, 9, k, "ring message %d", k);
        free(sb);
        free(rbuf);
        free(rq);
    }

    mt_section("mailbox bounds");
    if (any_in_use) {
        CHECK(in_use, "btl/credit is in use on some ranks but not on this one");
        unsigned long h = pvar_read(&hwm), n = pvar_read(&msize);
        CHECK(n > 0 && h <= n, "mailbox high-water mark %lu above its size %lu", h, n);
        unsigned long s = pvar_read(&stalls), total = 0;
        MPI_Allreduce(&s, &total, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (slots_cvar > 0 && slots_cvar <= 64 && size > 1)
            CHECK(total > 0, "a tiny mailbox (%lld slots) never ran out of credit", slots_cvar);
        if (mt_verbose) printf("[rank %d] mailbox hwm %lu of %lu, stalls %lu (job %lu)\n", rank, h, n, s, total);
    }
    pvar_close(&hwm);
    pvar_close(&msize);
    pvar_close(&stalls);
    MPI_T_finalize();
    return mt_finalize();
}
