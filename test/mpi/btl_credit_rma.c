/*
 * btl_credit_rma: MPI one-sided communication over ob1 + btl/credit.
 * osc/rdma takes a btl only if it offers put, get and fetching atomics;
 * Debian's Open MPI excludes osc pt2pt, so before btl/credit offered them
 * MPI_Win_create failed (MPI_ERR_WIN) under --mca btl self,credit.
 *  - windows from MPI_Win_create (user memory) and MPI_Win_allocate;
 *  - passive target, all ranks at once on rank 0's words:
 *    MPI_Fetch_and_op SUM on 64- and 32-bit integers (btl fetch-and-add),
 *    an increment by MPI_Compare_and_swap retries on 64-bit integers (btl
 *    compare-and-swap) and on 32-bit ones, which must leave the other half
 *    of their 64-bit word alone (Open MPI 4.1.4's osc/rdma looks for the
 *    btl's 32-bit atomics in btl_flags instead of btl_atomic_flags, so
 *    it never asks a btl for them: a get and put under its peer lock),
 *    MPI_Accumulate BXOR (btl atomic, no fetch) and MAX (no btl atomic:
 *    osc/rdma's get-op-put), and exclusive-lock read-modify-write
 *    (osc/rdma's lock words);
 *  - MPI_Put and MPI_Get of 1 MiB between neighbours, flushed;
 *  - through MPI_T, when btl/credit is in use: its atomics were used, and
 *    puts and gets to the windows took the path MPITEST_EXPECT_WINDOW_PATH
 *    names: "cma" (one CMA copy, btl_credit_window_cma 1) or "reply" (gets
 *    as a request the owner answers: no native UCX get on the node, as
 *    UCX 1.13 here, with btl_credit_window_cma 0).
 * Run under btl/credit (test/configs/20-btl-credit.conf).  Not under ob1 +
 * vader: Open MPI 4.1.4 segfaults there in vader's emulated compare-and-
 * swap on a window of its own rank (mca_btl_vader_emu_acswap ->
 * mca_btl_vader_send), with nothing of ours loaded.
 */
#include "mpitest.h"
#include "mpitest_mpit.h"

#define ROUNDS 40
#define BIG (1 << 20)

/* rank 0's words (windows of displacement unit 1: D() is the byte offset) */
enum { W_ADD64 = 0, W_CAS64, W_XOR64, W_MAX64, W_LOCKED64, W_ADD32 /* two int32 in one slot */, W_OR64,
       W_SWAP64, W_CAS32 /* two int32 in one slot */, W_N };
#define D(w) ((MPI_Aint)(w) * 8)

static int64_t swap_seen[64]; /* rank 0: the old values the swaps returned */

/* Add one to rank 0's word at disp (64- or 32-bit) by compare-and-swap
 * until ours wins. */
static void cas_increment(MPI_Win win, MPI_Aint disp, MPI_Datatype type)
{
    int size = 0;
    MPI_Type_size(type, &size);
    union { int64_t i64; int32_t i32; } seen = {0}, want = {0}, got = {0};
    CHECK_MPI(MPI_Fetch_and_op(NULL, &seen, type, 0, disp, MPI_NO_OP, win));
    CHECK_MPI(MPI_Win_flush(0, win));
    for (int tries = 0;; tries++) {
        if (size == 8) want.i64 = seen.i64 + 1;
        else want.i32 = seen.i32 + 1;
        got.i64 = 0;
        CHECK_MPI(MPI_Compare_and_swap(&want, &seen, &got, type, 0, disp, win));
        CHECK_MPI(MPI_Win_flush(0, win));
        if (size == 8 ? got.i64 == seen.i64 : got.i32 == seen.i32) break;
        seen = got;
        if (!CHECK(tries < 100000, "%d-bit compare-and-swap never won", size * 8)) break;
    }
}

static void counters(MPI_Win win, int rank, int size)
{
    for (int i = 0; i < ROUNDS; i++) {
        int64_t one = 1, old = 0;
        CHECK_MPI(MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, D(W_ADD64), MPI_SUM, win));
        int32_t one32 = 1, old32 = 0;
        CHECK_MPI(MPI_Fetch_and_op(&one32, &old32, MPI_INT32_T, 0, D(W_ADD32), MPI_SUM, win));
        cas_increment(win, D(W_CAS64), MPI_INT64_T);
        cas_increment(win, D(W_CAS32), MPI_INT32_T);
        int64_t bit = (int64_t)1 << ((rank * ROUNDS + i) % 63);
        CHECK_MPI(MPI_Accumulate(&bit, 1, MPI_INT64_T, 0, D(W_XOR64), 1, MPI_INT64_T, MPI_BXOR, win));
        int64_t v = (int64_t)rank * 1000 + i;
        CHECK_MPI(MPI_Accumulate(&v, 1, MPI_INT64_T, 0, D(W_MAX64), 1, MPI_INT64_T, MPI_MAX, win));
    }
    /* OR (btl atomic, no fetch) and REPLACE by fetch-and-op (btl swap) */
    int64_t mybit = (int64_t)1 << (rank % 63), mine = rank + 1, old = -7;
    CHECK_MPI(MPI_Accumulate(&mybit, 1, MPI_INT64_T, 0, D(W_OR64), 1, MPI_INT64_T, MPI_BOR, win));
    CHECK_MPI(MPI_Fetch_and_op(&mine, &old, MPI_INT64_T, 0, D(W_SWAP64), MPI_REPLACE, win));
    CHECK_MPI(MPI_Win_flush_all(win));
    /* the swaps form one chain: the old values returned, with the word's
     * final value, are 0 and every rank's value once each */
    int64_t *olds = rank == 0 ? mt_malloc(sizeof(int64_t) * (size_t)size) : NULL;
    CHECK_MPI(MPI_Gather(&old, 1, MPI_INT64_T, olds, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
    if (rank == 0) {
        for (int r = 0; r < size; r++) swap_seen[r] = olds[r];
        free(olds);
    }
}

static void check_counters(const int64_t *w, int size)
{
    int64_t x = 0;
    for (int r = 0; r < size; r++)
        for (int i = 0; i < ROUNDS; i++) x ^= (int64_t)1 << ((r * ROUNDS + i) % 63);
    CHECK_EQ(w[W_ADD64], (long long)size * ROUNDS, "64-bit fetch-and-add total");
    CHECK_EQ(((const int32_t *)w)[W_ADD32 * 2], (long long)size * ROUNDS, "32-bit fetch-and-add total");
    CHECK_EQ(((const int32_t *)w)[W_ADD32 * 2 + 1], 0, "the 32-bit neighbour word");
    CHECK_EQ(w[W_CAS64], (long long)size * ROUNDS, "compare-and-swap increments");
    CHECK_EQ(((const int32_t *)w)[W_CAS32 * 2], (long long)size * ROUNDS, "32-bit compare-and-swap increments");
    CHECK_EQ(((const int32_t *)w)[W_CAS32 * 2 + 1], 0, "the 32-bit compare-and-swap's neighbour word");
    CHECK_EQ(w[W_XOR64], (long long)x, "BXOR accumulate");
    CHECK_EQ(w[W_MAX64], (long long)(size - 1) * 1000 + ROUNDS - 1, "MAX accumulate");
    int64_t ors = 0;
    for (int r = 0; r < size; r++) ors |= (int64_t)1 << (r % 63);
    CHECK_EQ(w[W_OR64], (long long)ors, "BOR accumulate");
    int seen[65] = {0};
    seen[w[W_SWAP64] >= 0 && w[W_SWAP64] <= size ? w[W_SWAP64] : 64]++;
    for (int r = 0; r < size; r++) seen[swap_seen[r] >= 0 && swap_seen[r] <= size ? swap_seen[r] : 64]++;
    for (int v = 0; v <= size; v++) CHECK_EQ(seen[v], 1, "value %d in the MPI_REPLACE chain", v);
}

static void one_window(MPI_Win win, int64_t *w, char *big, int rank, int size)
{
    mt_section("passive target atomics on rank 0");
    if (rank == 0) {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        memset(w, 0, sizeof(int64_t) * W_N);
        CHECK_MPI(MPI_Win_unlock(0, win));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_lock_all(0, win));
    counters(win, rank, size);
    CHECK_MPI(MPI_Win_unlock_all(win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        check_counters(w, size);
        CHECK_MPI(MPI_Win_unlock(0, win));
    }

    mt_section("exclusive locks");
    for (int i = 0; i < ROUNDS / 4; i++) {
        int64_t v = 0;
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        CHECK_MPI(MPI_Get(&v, 1, MPI_INT64_T, 0, D(W_LOCKED64), 1, MPI_INT64_T, win));
        CHECK_MPI(MPI_Win_flush(0, win));
        v += 1;
        CHECK_MPI(MPI_Put(&v, 1, MPI_INT64_T, 0, D(W_LOCKED64), 1, MPI_INT64_T, win));
        CHECK_MPI(MPI_Win_unlock(0, win));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        CHECK_EQ(w[W_LOCKED64], (long long)size * (ROUNDS / 4), "increments under exclusive locks");
        CHECK_MPI(MPI_Win_unlock(0, win));
    }

    mt_section("put and get of 1 MiB, flushed");
    {
        int right = (rank + 1) % size, left = (rank + size - 1) % size;
        char *src = mt_malloc(BIG), *back = mt_malloc(BIG);
        mt_fill(src, BIG, rank, 3, 0);
        MPI_Aint off = (MPI_Aint)(sizeof(int64_t) * W_N);
        CHECK_MPI(MPI_Win_lock_all(0, win));
        CHECK_MPI(MPI_Put(src, BIG, MPI_BYTE, right, off, BIG, MPI_BYTE, win));
        CHECK_MPI(MPI_Win_flush(right, win));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));  /* every put is at its target now */
        CHECK_MPI(MPI_Get(back, BIG, MPI_BYTE, right, off, BIG, MPI_BYTE, win));
        CHECK_MPI(MPI_Win_flush(right, win));
        CHECK_MPI(MPI_Win_unlock_all(win));
        CHECK_BUF(back, BIG, rank, 3, 0, "our own put read back from %d", right);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
        CHECK_BUF(big, BIG, left, 3, 0, "the put from %d in our window", left);
        CHECK_MPI(MPI_Win_unlock(rank, win));
        free(src);
        free(back);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    int provided;
    pvar_t atomics, msize, wgets, wcma;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "btl_credit_rma");
    int rank = mt_rank, size = mt_size;
    pvar_open(&atomics, "btl_credit_atomics");
    pvar_open(&msize, "btl_credit_mailbox_slots");
    pvar_open(&wgets, "btl_credit_window_gets");
    pvar_open(&wcma, "btl_credit_window_cma");
    const size_t bytes = sizeof(int64_t) * W_N + BIG;

    mt_section("MPI_Win_create on user memory");
    {
        char *mem = mt_malloc(bytes);
        memset(mem, 0, bytes);
        MPI_Win win;
        if (CHECK_MPI(MPI_Win_create(mem, (MPI_Aint)bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win)) == MPI_SUCCESS) {
            one_window(win, (int64_t *)mem, mem + sizeof(int64_t) * W_N, rank, size);
            CHECK_MPI(MPI_Win_free(&win));
        }
        free(mem);
    }
    mt_section("MPI_Win_allocate");
    {
        char *mem = NULL;
        MPI_Win win;
        if (CHECK_MPI(MPI_Win_allocate((MPI_Aint)bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win)) == MPI_SUCCESS) {
            one_window(win, (int64_t *)mem, mem + sizeof(int64_t) * W_N, rank, size);
            CHECK_MPI(MPI_Win_free(&win));
        }
    }

    mt_section("btl/credit atomics used");
    if (atomics.ok && msize.ok && pvar_read(&msize) > 0) {
        unsigned long n = pvar_read(&atomics), total = 0;
        MPI_Allreduce(&n, &total, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (size > 1) CHECK(total > 0, "osc/rdma did no atomic through btl/credit");
        unsigned long mine[2] = {wgets.ok ? pvar_read(&wgets) : 0, wcma.ok ? pvar_read(&wcma) : 0};
        unsigned long job[2] = {0, 0};
        MPI_Allreduce(mine, job, 2, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD);
        const char *want = getenv("MPITEST_EXPECT_WINDOW_PATH");
        if (size > 1 && want && strcmp(want, "cma") == 0) {
            CHECK(job[1] > 0, "no put or get to a window went by CMA");
            CHECK_EQ(job[0], 0, "gets from windows went by request although CMA works");
        }
        if (size > 1 && want && strcmp(want, "reply") == 0) {
            CHECK(job[0] > 0, "no get from a window went by request and answer");
            CHECK_EQ(job[1], 0, "CMA used with btl_credit_window_cma 0");
        }
        if (mt_verbose)
            printf("[rank %d] btl/credit atomics %lu (job %lu), window gets by request %lu, by CMA %lu (job %lu, %lu)\n",
                   rank, n, total, mine[0], mine[1], job[0], job[1]);
    }
    pvar_close(&atomics);
    pvar_close(&msize);
    pvar_close(&wgets);
    pvar_close(&wcma);
    MPI_T_finalize();
    return mt_finalize();
}
