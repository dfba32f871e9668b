/*
 * coll_bsend_barrier: the attached buffer's space is free again once the
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
 * It failed with coll cdag selected, over pml rdrp (round 1-37 of 40,
 * every run) and over ob1 (round 1), and passed under coll tuned: with
 * tuned the barrier's messages travel behind the PML's own rendezvous
 * completion (ACK/FIN) that gives the sender its buffer space back; cdag's
 * barrier runs on its own channel and returned before the PML had seen
 * that message.  A blocking cdag collective now ends with one PML/Open MPI
 * progress pass (coll_cdag_run.c, run_blocking).  Runs in every ^coll_
 * configuration.
 */
#include "mpitest.h"

#define NMSG 2
#define ROUNDS 40
#define MSG (256 * 1024 + 3) /* above every eager limit: a rendezvous */

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "coll_bsend_barrier");
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
