/*
 * coll_cdag_thread_handoff: with coll_cdag_progress=thread, a nonblocking
 * start hands the whole collective to the engine thread, even right after
 * the application drove earlier collectives inside MPI_Wait.
 *
 * The cells of the host-waiting overlap benchmark that stayed low with
 * the engine (ialltoall, iallgather at 64 KiB and 1 MiB; README
 * "coll/cdag measured on one node") had two causes, each checked here
 * through coll/cdag's MPI_T counters, not through time:
 *  - the start ran the own block's copy in the application's thread (the
 *    host paid it before it could leave MPI): the engine must run it
 *    (coll_cdag_thread_local_ops grows, coll_cdag_host_local_ops does not);
 *  - after a series of MPI_Wait calls the engine took the waits' progress
 *    calls for "the application is inside MPI" and napped through the
 *    next start (coll_cdag_thread_start_naps must stay 0);
 *  - the start call posted the receives and sends itself, and a receive
 *    whose data a peer had already delivered completed inside the start,
 *    with what depends on it: traced at np 2, an MPI_Iallreduce of 1 MiB
 *    reduced for 110 us before returning, and that rank fell a whole sleep
 *    behind its peer.  The start now only hands the run to the engine,
 *    which starts it (coll_cdag_thread_starts grows,
 *    coll_cdag_host_starts does not), also when the data is already here:
 *    the last section has rank 1's iallreduce message arrive while rank 0
 *    waits in MPI_Recv, before rank 0 starts its own.
 * Each cell: 20 start + MPI_Wait rounds (the application drives), then
 * every rank starts, sleeps (no MPI call) and calls MPI_Test once: the
 * collective must be complete, the data exact.
 *
 * The engine checks apply under MPITEST_EXPECT_ENGINE=1 (the engine-thread
 * configs); elsewhere only the data is checked, with a 10 ms sleep.
 */
#include "mpitest.h"
#include "mpitest_mpit.h"

static int rank, size, expect_engine;
static unsigned char *bs, *br;
static pvar_t local_eng, local_host, start_naps, starts_eng, starts_host;

static int start(int alltoall, long bytes, int iter, MPI_Request *rq)
{
    if (alltoall) {
        for (int j = 0; j < size; j++) mt_fill(bs + (size_t)j * (size_t)bytes, (size_t)bytes, rank, j, iter);
        return MPI_Ialltoall(bs, (int)bytes, MPI_BYTE, br, (int)bytes, MPI_BYTE, MPI_COMM_WORLD, rq);
    }
    mt_fill(bs, (size_t)bytes, rank, 9, iter);
    return MPI_Iallgather(bs, (int)bytes, MPI_BYTE, br, (int)bytes, MPI_BYTE, MPI_COMM_WORLD, rq);
}

/* The run was started by the engine thread, not by the application. */
static void check_engine_started(const char *name, long bytes, unsigned long se0, unsigned long sh0)
{
    unsigned long se = pvar_read(&starts_eng) - se0, sh = pvar_read(&starts_host) - sh0;
    CHECK(se >= 1 && sh == 0,
          "%s %ld B: %lu runs started by the engine, %lu by the application's progress (expected the engine: "
          "the start call should only hand the run over)", name, bytes, se, sh);
}

static int ival(int r, long i) { return (int)((r + 1) * (i % 1000 + 1)); }

/* Rank 1's iallreduce message reaches rank 0 before rank 0 starts its own
 * (rank 0 waits in MPI_Recv for a token rank 1 sends after its start and
 * a pause: rank 0's progress takes the message early); rank 0's start
 * must still leave the receive, the copy and the reduction to the engine. */
static void early_data_allreduce(long bytes)
{
    char sec[96];
    snprintf(sec, sizeof sec, "iallreduce %ld B with rank 1's data here before rank 0 starts", bytes);
    mt_section(sec);
    int n = (int)(bytes / (long)sizeof(int));
    int *sb = (int *)bs, *rb = (int *)br;
    for (long i = 0; i < n; i++) sb[i] = ival(rank, i);
    memset(rb, 0, (size_t)bytes);
    MPI_Request rq;
    int token = 0, flag = 0;
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    unsigned long se0 = starts_eng.ok ? pvar_read(&starts_eng) : 0;
    unsigned long sh0 = starts_host.ok ? pvar_read(&starts_host) : 0;
    if (rank == 0 && size > 1)
        CHECK_MPI(MPI_Recv(&token, 1, MPI_INT, 1, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Iallreduce(sb, rb, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq));
    if (rank == 1) {
        mt_sleep_ms(expect_engine ? 100 : 10);  /* its engine sends; rank 0's MPI_Recv takes the message */
        CHECK_MPI(MPI_Send(&token, 1, MPI_INT, 0, 77, MPI_COMM_WORLD));
    }
    mt_sleep_ms(expect_engine ? 1000 : 10);
    CHECK_MPI(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
    if (expect_engine) {
        CHECK(flag, "iallreduce %ld B: not complete after the sleep and one MPI_Test", bytes);
        if (rank == 0) check_engine_started("iallreduce (data here first)", bytes, se0, sh0);
    }
    if (!flag) CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    for (long i = 0; i < n; i++) {
        long want = 0;
        for (int r = 0; r < size; r++) want += ival(r, i);
        if (rb[i] != (int)want) {
            CHECK(0, "iallreduce %ld B: element %ld is %d, expected %ld", bytes, i, rb[i], want);
            break;
        }
    }
}

static void verify(int alltoall, long bytes, int iter)
{
    for (int j = 0; j < size; j++)
        CHECK_BUF(br + (size_t)j * (size_t)bytes, (size_t)bytes, j, alltoall ? rank : 9, iter, "%s %ld B from %d",
                  alltoall ? "ialltoall" : "iallgather", bytes, j);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "coll_cdag_thread_handoff");
    rank = mt_rank;
    size = mt_size;
    const char *e = getenv("MPITEST_EXPECT_ENGINE");
    expect_engine = e && atoi(e) > 0;
    pvar_open(&local_eng, "coll_cdag_thread_local_ops");
    pvar_open(&local_host, "coll_cdag_host_local_ops");
    pvar_open(&start_naps, "coll_cdag_thread_start_naps");
    pvar_open(&starts_eng, "coll_cdag_thread_starts");
    pvar_open(&starts_host, "coll_cdag_host_starts");
    if (expect_engine)
        CHECK(local_eng.ok && local_host.ok && start_naps.ok && starts_eng.ok && starts_host.ok,
              "coll/cdag's engine counters (coll_cdag_thread_local_ops, _host_local_ops, _thread_start_naps, "
              "_thread_starts, _host_starts) are not there");
    const long sizes[] = {65536, 1048576};
    size_t cap = (size_t)1048576 * (size_t)size;
    bs = mt_malloc(cap);
    br = mt_malloc(cap);
    int iter = 0;
    for (int alltoall = 1; alltoall >= 0; alltoall--) {
        for (int k = 0; k < 2; k++) {
            long bytes = sizes[k];
            const char *name = alltoall ? "ialltoall" : "iallgather";
            char sec[96];
            snprintf(sec, sizeof sec, "%s %ld B after 20 waits, then a sleep", name, bytes);
            mt_section(sec);
            MPI_Request rq;
            for (int i = 0; i < 20; i++, iter++) {  /* the application drives: engine naps */
                CHECK_MPI(start(alltoall, bytes, iter, &rq));
                CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
                verify(alltoall, bytes, iter);
            }
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            unsigned long eng0 = local_eng.ok ? pvar_read(&local_eng) : 0;
            unsigned long host0 = local_host.ok ? pvar_read(&local_host) : 0;
            unsigned long naps0 = start_naps.ok ? pvar_read(&start_naps) : 0;
            unsigned long se0 = starts_eng.ok ? pvar_read(&starts_eng) : 0;
            unsigned long sh0 = starts_host.ok ? pvar_read(&starts_host) : 0;
            CHECK_MPI(start(alltoall, bytes, iter, &rq));
            mt_sleep_ms(expect_engine ? 1000 : 10);  /* outside MPI: no call; 1 s as in coll_cdag_thread_progress (300 ms was too short for ialltoall 1 MiB under ThreadSanitizer) */
            int flag = 0;
            CHECK_MPI(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
            if (expect_engine) {
                CHECK(flag, "%s %ld B: not complete after the sleep and one MPI_Test", name, bytes);
                unsigned long eng = pvar_read(&local_eng) - eng0, host = pvar_read(&local_host) - host0;
                unsigned long naps = pvar_read(&start_naps) - naps0;
                CHECK(eng >= 1 && host == 0,
                      "%s %ld B: the own block's copy ran %lu times in the engine, %lu in the application "
                      "(expected the engine only: the start should only post)", name, bytes, eng, host);
                CHECK(naps == 0, "%s %ld B: the engine napped through %lu starts after the waits", name, bytes,
                      naps);
                check_engine_started(name, bytes, se0, sh0);
            }
            if (!flag) CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
            verify(alltoall, bytes, iter);
            iter++;
        }
    }
    early_data_allreduce(65536);
    early_data_allreduce(1048576);
    free(bs);
    free(br);
    MPI_T_pvar_session_free(&starts_eng.s);
    MPI_T_pvar_session_free(&starts_host.s);
    MPI_T_pvar_session_free(&local_eng.s);
    MPI_T_pvar_session_free(&local_host.s);
    MPI_T_pvar_session_free(&start_naps.s);
    MPI_T_finalize();
    return mt_finalize();
}
