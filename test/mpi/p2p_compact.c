/*
 * p2p_compact: pml/rdrp's compact eager format (pml_rdrp_wire.h
 * rdrp_tiny_hdr_t).  A message of up to 8 bytes to a peer on this node
 * goes through the ring with an 8-byte header, in half a cache line, where
 * the header can say everything: the sender's rank in the communicator is
 * its process index (the receiver takes the source from the ring's
 * producer), the tag and context id fit 16 bits, no credits ride along.
 * Everything else takes the full format, on the same ring, in the same
 * order.
 *
 * Rank 0 sends every other rank streams of 0-16 B messages whose tags
 * alternate between ones that fit (0, 7, 32767) and ones that do not
 * (32768, MPI_TAG_UB), on MPI_COMM_WORLD, on a duplicate, and on a
 * communicator whose ranks are reversed (where no message may be
 * compact: the source would come out wrong).  Half the receives are
 * posted before the sends, half after (the unexpected path).  Each is
 * received with MPI_ANY_TAG, so non-overtaking across the two formats
 * shows: data, source, tag and count are checked per message.  Under
 * pml/rdrp with rings (MPITEST_EXPECT_SHM unset or 1) the MPI_T counter
 * pml_rdrp_shm_compact must count some of the world and duplicate
 * streams' fitting messages (at least 8 at the default credits,
 * MPITEST_EXPECT_FAST=1: a message that carries piggybacked credits, or
 * that waited for credit, takes the full format) and nothing of the
 * reversed communicator's.
 */
#include "mpitest.h"
#include "mpitest_mpit.h"

enum { N = 96 };

static int msg_len(int i) { return (i * 7) % 17; }  /* 0..16 */

static int msg_tag(int i, int tag_ub)
{
    switch (i % 5) {
    case 0: return 0;
    case 1: return 7;
    case 2: return 32767;
    case 3: return 32768;
    default: return tag_ub;
    }
}

static int fits(int i, int tag_ub) { return msg_len(i) <= 8 && msg_tag(i, tag_ub) <= 32767; }

/* World rank 0 (rank root of comm) streams N messages to every other rank
 * of comm; each of those returns how many compact messages it received
 * meanwhile.  No collective runs in between (its messages would count):
 * a receiver says it is ready with a tag that is never compact. */
static unsigned long stream(MPI_Comm comm, int root, int iter, int tag_ub, pvar_t *compact)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    static unsigned char bufs[N][16];
    MPI_Request rq[N];
    char ready = 0;
    if (crank == root) {
        for (int dst = 0; dst < csize; dst++) {
            if (dst == root) continue;
            CHECK_MPI(MPI_Recv(&ready, 1, MPI_CHAR, dst, tag_ub, comm, MPI_STATUS_IGNORE));
            for (int i = 0; i < N; i++) {
                mt_fill(bufs[i], (size_t)msg_len(i), dst, msg_tag(i, tag_ub), iter * N + i);
                CHECK_MPI(MPI_Isend(bufs[i], msg_len(i), MPI_BYTE, dst, msg_tag(i, tag_ub), comm, &rq[i]));
            }
            CHECK_MPI(MPI_Waitall(N, rq, MPI_STATUSES_IGNORE));
        }
        return 0;
    }
    unsigned long c0 = pvar_read(compact);
    /* the first half posted before the sender starts */
    for (int i = 0; i < N / 2; i++) {
        memset(bufs[i], 0xEE, 16);
        CHECK_MPI(MPI_Irecv(bufs[i], 16, MPI_BYTE, root, MPI_ANY_TAG, comm, &rq[i]));
    }
    CHECK_MPI(MPI_Send(&ready, 1, MPI_CHAR, root, tag_ub, comm));
    mt_sleep_ms(20);  /* the rest arrive unexpected */
    for (int i = N / 2; i < N; i++) {
        memset(bufs[i], 0xEE, 16);
        CHECK_MPI(MPI_Irecv(bufs[i], 16, MPI_BYTE, root, MPI_ANY_TAG, comm, &rq[i]));
    }
    MPI_Status st[N];
    CHECK_MPI(MPI_Waitall(N, rq, st));
    unsigned long got = pvar_read(compact) - c0;
    for (int i = 0; i < N; i++) {
        CHECK_STATUS(&st[i], root, msg_tag(i, tag_ub), msg_len(i), "message %d of the stream (in order)", i);
        CHECK_BUF(bufs[i], (size_t)msg_len(i), crank, msg_tag(i, tag_ub), iter * N + i, "message %d", i);
        CHECK_CONST(bufs[i] + msg_len(i), (size_t)(16 - msg_len(i)), 0xEE, "past message %d", i);
    }
    return got;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "p2p_compact");
    const int rank = mt_rank;
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int *ub, flag;
    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag));
    const int tag_ub = *ub;
    CHECK(tag_ub > 32768, "MPI_TAG_UB %d", tag_ub);
    const char *es = getenv("MPITEST_EXPECT_SHM");
    /* throttled sends (MPITEST_EXPECT_THROTTLED) all take the request
     * path, whose ring messages keep the full format */
    const char *et = getenv("MPITEST_EXPECT_THROTTLED");
    const int expect = mt_pml_is("rdrp") && !(es && atoi(es) == 0) && !(et && atoi(et) > 0);
    const char *ef = getenv("MPITEST_EXPECT_FAST");
    const int expect_fast = ef && atoi(ef) > 0;
    pvar_t compact;
    pvar_open(&compact, "pml_rdrp_shm_compact");
    if (expect) CHECK(compact.ok, "no MPI_T variable pml_rdrp_shm_compact");

    int fitting = 0;
    for (int i = 0; i < N; i++) fitting += fits(i, tag_ub);

    MPI_Comm dup, rev;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &rev));

    mt_section("MPI_COMM_WORLD and a duplicate: fitting messages compact, in order with the rest");
    unsigned long got = stream(MPI_COMM_WORLD, 0, 0, tag_ub, &compact);
    got += stream(dup, 0, 1, tag_ub, &compact);
    /* a send that waits for credit leaves later by the request path, in
     * the full format: with few credit slots most do (rdrp-credit-tiny),
     * and at the default credits a sender starts with a quarter of its
     * share of the mailbox (at np 4, 28 of the 64 fitting messages were
     * compact); a stream's first messages always find credit there */
    const unsigned long least = expect_fast ? 8 : 1;
    if (expect && rank != 0)
        CHECK(got >= least && got <= (unsigned long)(2 * fitting),
              "rank %d received %lu compact messages of %d that fit", rank, got, 2 * fitting);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    mt_section("reversed ranks: nothing compact, sources right");
    got = stream(rev, size - 1, 2, tag_ub, &compact);  /* world rank 0 is rev's last */
    if (expect && rank != 0) CHECK_EQ(got, 0, "compact messages on a communicator whose ranks are not process indices");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    CHECK_MPI(MPI_Comm_free(&dup));
    CHECK_MPI(MPI_Comm_free(&rev));
    pvar_close(&compact);
    MPI_T_finalize();
    return mt_finalize();
}
