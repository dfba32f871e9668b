/*
 * bsend_after_barrier: the attached buffer's space is free again once the
 * buffered messages have been received (MPICH's
 * threads/pt2pt/mt_bsendrecv_huge and mt_ibsendirecv_huge, reduced).
 *
 * Every rank sends to its right neighbour NMSG rendezvous-size buffered
 * messages per round into an attached buffer with room for exactly NMSG
 * (plus MPI_BSEND_OVERHEAD each); the neighbour receives them all, then
 * every rank calls MPI_Barrier.  After the barrier every message of the
 * round has been received, so the next round's Bsends must find the space
 * free.  Data and status of every message are checked.
 *
 * KNOWN FAILING, NOT REGISTERED in test/configs (the name matches no
 * config's pattern): it fails with coll cdag selected, over pml rdrp
 * (round 1-37 of 40, every run) and over ob1 (round 1; ob1 then hangs, as
 * after any Bsend error), and passes with pml rdrp or ob1 under coll
 * tuned.  With tuned the barrier's messages travel behind the PML's own
 * rendezvous completion (ACK/FIN) that gives the sender its buffer space
 * back; cdag's barrier runs on its own UCX worker and can return first.
 * Waiting in pml rdrp's MPI_Bsend while its carriers hold space did not
 * make it pass (a failure with no carrier in flight remained): not yet
 * understood.  Run it by hand:
 *   test/mpi/run_mpi_tests.sh --np 2 --only '^bsend_after_barrier$' -- \
 *       --mca pml rdrp --mca coll_cdag_priority 100
 */
#include "mpitest.h"

#define NMSG 2
#define ROUNDS 40
#define MSG (256 * 1024 + 3) /* above every eager limit: a rendezvous */

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "bsend_after_barrier");
    int right = (mt_rank + 1) % mt_size, left = (mt_rank + mt_size - 1) % mt_size;
    int total = NMSG * (MSG + MPI_BSEND_OVERHEAD), dsize;
    char *sbuf = mt_malloc(MSG), *rbuf = mt_malloc(MSG), *abuf = mt_malloc(total), *dbuf;
    MPI_Status st;

    mt_section("Bsend rounds into a buffer with room for one round");
    CHECK_MPI(MPI_Buffer_attach(abuf, total));
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < NMSG; i++) {
            int tag = i;
            mt_fill(sbuf, MSG, mt_rank, tag, r);
            int rc = MPI_Bsend(sbuf, MSG, MPI_BYTE, right, tag, MPI_COMM_WORLD);
            CHECK(rc == MPI_SUCCESS, "round %d: MPI_Bsend %d of %d (buffer for %d) failed: the space of the "
                  "previous round, received before the barrier, was not free", r, i + 1, NMSG, NMSG);
            /* the neighbour still gets its message (no hang until the watchdog) */
            if (rc != MPI_SUCCESS) CHECK_MPI(MPI_Send(sbuf, MSG, MPI_BYTE, right, tag, MPI_COMM_WORLD));
        }
        for (int i = 0; i < NMSG; i++) {
            memset(rbuf, 0, MSG);
            CHECK_MPI(MPI_Recv(rbuf, MSG, MPI_BYTE, left, i, MPI_COMM_WORLD, &st));
            CHECK_STATUS(&st, left, i, MSG, "round %d message %d", r, i);
            CHECK_BUF(rbuf, MSG, left, i, r, "round %d message %d", r, i);
        }
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    CHECK_MPI(MPI_Buffer_detach(&dbuf, &dsize));
    CHECK(dbuf == abuf && dsize == total, "MPI_Buffer_detach gave %p/%d, attached %p/%d", (void *)dbuf, dsize,
          (void *)abuf, total);
    free(abuf);
    free(sbuf);
    free(rbuf);
    return mt_finalize();
}
