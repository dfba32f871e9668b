/*
 * cdag_direct_yield: how a blocking collective on coll/cdag's direct path
 * (coll_cdag_direct.cc) passes the rest of Open MPI while it waits, with
 * mpi_yield_when_idle set (as mpirun sets it when the node is
 * oversubscribed).  opal_progress() then gives the core away whenever it
 * finds nothing of its own, so a pass is a possible context switch.
 *  - A turn of the wait that brought the run a message goes straight on:
 *    no pass (and no yield) with work in hand.  Before, every turn passed,
 *    the arrival's too: at np 4 on 2 cores a barrier took 11.9 context
 *    switches and 8.8-10.1 us, against 3.8 and 4.4 us on the executor path
 *    and 5.3 and 5.1 us under coll/tuned.  Rank 1 waits for an 8 B
 *    broadcast that rank 0 sends 50 ms late: its passes
 *    (coll_cdag_wait_other_passes) must be fewer than its turns
 *    (coll_cdag_wait_turns); they were equal.
 *  - A push into a full ring passes too.  Before, it spun on the rings
 *    alone: when the receiver was off its core the sender spun out its
 *    whole time slice (allgather of 16 KiB through the rings at np 4 on 2
 *    cores: 1.6-1.8 ms a call instead of 18-36 us).  Rank 1 sleeps outside
 *    MPI while rank 0 broadcasts 16 KiB (single copy off, so the bytes go
 *    through the ring) until its ring to rank 1 is full; rank 0, which as
 *    the root of a broadcast never waits for a message, must have passed
 *    at least once (it made no pass before).
 * Both variables are set here before MPI starts (mpi_yield_when_idle 1,
 * coll_cdag_cma 0) unless the environment sets them.  Data checked every
 * call.  Skipped (passes) when coll/cdag is not selected or its direct
 * path is off.
 */
#include "mpitest.h"
#include "mpitest_mpit.h"

enum { kSmall = 8, kBig = 16384, kMaxBig = 4096 };

int main(int argc, char **argv)
{
    if (!getenv("OMPI_MCA_mpi_yield_when_idle")) setenv("OMPI_MCA_mpi_yield_when_idle", "1", 1);
    if (!getenv("OMPI_MCA_coll_cdag_cma")) setenv("OMPI_MCA_coll_cdag_cma", "0", 1);
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "cdag_direct_yield");
    int rank = mt_rank;
    pvar_t turns, passes, direct;
    pvar_open(&turns, "coll_cdag_wait_turns");
    pvar_open(&passes, "coll_cdag_wait_other_passes");
    pvar_open(&direct, "coll_cdag_direct_runs");
    unsigned char *buf = mt_malloc(kBig);

    /* warm-up: the first call of a shape compiles its plan on the executor
     * path; later ones may run direct */
    for (int i = 0; i < 3; i++) {
        CHECK_MPI(MPI_Bcast(buf, kSmall, MPI_BYTE, 0, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Bcast(buf, kBig, MPI_BYTE, 0, MPI_COMM_WORLD));
    }
    unsigned long d0 = pvar_read(&direct);
    CHECK_MPI(MPI_Bcast(buf, kSmall, MPI_BYTE, 0, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Bcast(buf, kBig, MPI_BYTE, 0, MPI_COMM_WORLD));
    int on = turns.ok && passes.ok && direct.ok && pvar_read(&direct) - d0 == 2, all_on;
    CHECK_MPI(MPI_Allreduce(&on, &all_on, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (!all_on && mt_verbose && rank == 0) printf("coll/cdag's direct path not taken here: data checked only\n");

    mt_section("the turn that brings the message does not pass (no yield with work in hand)");
    /* The message can also be found by the pass itself (opal_progress
     * runs coll/cdag's own progress, which polls the rings and hands it
     * to this run): then every turn passed and none brought it, which is
     * no pass with work in hand either.  That happens now and then when
     * ranks outnumber cores (1 CI rehearsal in 9 at np 3), so one round
     * in three must show the arrival turn going straight on; the old
     * behaviour, a pass on every turn, fails all three. */
    int rounds_straight = 0;
    for (int round = 0; round < 3; round++) {
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        unsigned long t0 = pvar_read(&turns), p0 = pvar_read(&passes);
        if (rank == 0) {
            mt_sleep_ms(50);
            mt_fill(buf, kSmall, 0, 1, round);
        } else {
            memset(buf, 0, kSmall);
        }
        CHECK_MPI(MPI_Bcast(buf, kSmall, MPI_BYTE, 0, MPI_COMM_WORLD));
        unsigned long t = pvar_read(&turns) - t0, p = pvar_read(&passes) - p0;
        CHECK_BUF(buf, kSmall, 0, 1, round, "8 B bcast, round %d", round);
        if (all_on && rank == 1) {
            CHECK(t > 0, "round %d: rank 1 did not wait for a broadcast sent 50 ms late", round);
            CHECK(p <= t, "round %d: rank 1 passed %lu times in %lu wait turns", round, p, t);
            if (p < t) ++rounds_straight;
            else if (mt_verbose)
                printf("[rank 1] round %d: all %lu turns passed (the message came in a pass)\n", round, t);
        }
    }
    if (all_on && rank == 1)
        CHECK(rounds_straight > 0, "rank 1 passed the rest of Open MPI on every wait turn of all 3 rounds "
              "(expected not on the turn that brought the message)");

    mt_section("a push into a full ring passes the rest of Open MPI");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    unsigned long p0 = pvar_read(&passes);
    int calls = 0, more;
    if (rank == 1) mt_sleep_ms(300);  /* outside MPI: its ring from rank 0 fills */
    do {
        if (rank == 0) {
            mt_fill(buf + 1, kBig - 1, 0, 2, calls);
            /* the last call once a push has passed (the ring was full), or
             * at the cap; the flag travels in the message's first byte */
            more = calls + 1 < kMaxBig && !(all_on && pvar_read(&passes) > p0);
            buf[0] = (unsigned char)more;
        } else {
            memset(buf, 0, kBig);
        }
        CHECK_MPI(MPI_Bcast(buf, kBig, MPI_BYTE, 0, MPI_COMM_WORLD));
        more = buf[0];
        CHECK_BUF(buf + 1, kBig - 1, 0, 2, calls, "16 KiB bcast %d", calls);
        calls++;
    } while (more);
    if (all_on && rank == 0)
        CHECK(pvar_read(&passes) > p0, "rank 0 pushed %d broadcasts of 16 KiB while rank 1 slept outside MPI "
              "without ever passing the rest of Open MPI (its ring to rank 1 full, it spun on the rings alone)",
              calls);
    if (mt_verbose && rank == 0) printf("[rank 0] %d broadcasts of 16 KiB until a push passed\n", calls);

    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    free(buf);
    pvar_close(&turns);
    pvar_close(&passes);
    pvar_close(&direct);
    MPI_T_finalize();
    return mt_finalize();
}
