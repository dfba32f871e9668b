/*
 * p2p_no_format: with verbosity off, the point-to-point message path
 * formats no strings.  btl/credit's debug lines on every send and control
 * packet formatted their arguments (OPAL_NAME_PRINT, an snprintf) before
 * opal_output_verbose checked the level: callgrind across two namespace
 * nodes, 256 B sends, 4665 instructions per MPI_Isend against 1412 once
 * the level is checked first (ob1/tcp: 916).
 *
 * Ranks pair up (r, r^1).  After a warm-up that makes every connection
 * and first contact (an all-to-all: a new UCX endpoint formats its lane
 * table), a counted stretch: 8 B ping-pongs,
 * bursts of 16 nonblocking 256 B sends, probes, and every tenth round a
 * 64 KiB ping-pong (rendezvous under every PML here); data checked.  The
 * snprintf family is counted in every thread of the process
 * (mpitest_format.h); allowed: one call per 64 messages (background
 * threads), where the old btl/credit made one or more per message.
 * A control checks that the counter is what the dynamic linker binds.
 *
 * mpitest-cflags: -rdynamic
 */
#define _GNU_SOURCE
#include "mpitest.h"
#include "mpitest_format.h"

enum { ROUNDS = 300, BURST = 16, SMALL = 256, BIG = 65536, TAG = 5 };

static void round_trip(int peer, int initiator, char *buf, int len, int iter)
{
    MPI_Status st;
    if (initiator) {
        mt_fill(buf, (size_t)len, mt_rank, TAG, iter);
        CHECK_MPI(MPI_Send(buf, len, MPI_BYTE, peer, TAG, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Recv(buf, len, MPI_BYTE, peer, TAG, MPI_COMM_WORLD, &st));
        CHECK_BUF(buf, (size_t)len, peer, TAG, iter, "pong of %d bytes, round %d", len, iter);
    } else {
        CHECK_MPI(MPI_Recv(buf, len, MPI_BYTE, peer, TAG, MPI_COMM_WORLD, &st));
        CHECK_BUF(buf, (size_t)len, peer, TAG, iter, "ping of %d bytes, round %d", len, iter);
        mt_fill(buf, (size_t)len, mt_rank, TAG, iter);
        CHECK_MPI(MPI_Send(buf, len, MPI_BYTE, peer, TAG, MPI_COMM_WORLD));
    }
}

static void burst(int peer, int sender, char *bufs, int iter)
{
    MPI_Request req[BURST];
    MPI_Status st[BURST];
    for (int i = 0; i < BURST; ++i) {
        char *b = bufs + (size_t)i * SMALL;
        if (sender) {
            mt_fill(b, SMALL, mt_rank, TAG + 1 + i, iter);
            CHECK_MPI(MPI_Isend(b, SMALL, MPI_BYTE, peer, TAG + 1 + i, MPI_COMM_WORLD, &req[i]));
        } else {
            CHECK_MPI(MPI_Irecv(b, SMALL, MPI_BYTE, peer, TAG + 1 + i, MPI_COMM_WORLD, &req[i]));
        }
    }
    CHECK_MPI(MPI_Waitall(BURST, req, st));
    if (sender) return;
    for (int i = 0; i < BURST; ++i) {
        CHECK_STATUS(&st[i], peer, TAG + 1 + i, SMALL, "burst %d message %d", iter, i);
        CHECK_BUF(bufs + (size_t)i * SMALL, SMALL, peer, TAG + 1 + i, iter, "burst %d message %d", iter, i);
    }
}

static void probed(int peer, int sender, char *buf, int iter)
{
    MPI_Status st;
    if (sender) {
        mt_fill(buf, 8, mt_rank, TAG, iter);
        CHECK_MPI(MPI_Send(buf, 8, MPI_BYTE, peer, TAG, MPI_COMM_WORLD));
        return;
    }
    CHECK_MPI(MPI_Probe(peer, TAG, MPI_COMM_WORLD, &st));
    CHECK_STATUS(&st, peer, TAG, 8, "probe, round %d", iter);
    CHECK_MPI(MPI_Recv(buf, 8, MPI_BYTE, peer, TAG, MPI_COMM_WORLD, &st));
    CHECK_BUF(buf, 8, peer, TAG, iter, "probed message, round %d", iter);
}

static long traffic(int peer, int first, int rounds, char *small, char *big)
{
    long msgs = 0;
    for (int r = 0; r < rounds; ++r) {
        round_trip(peer, first, small, 8, r);
        burst(peer, (r & 1) ? first : !first, small, r);
        probed(peer, first, small, r);
        msgs += 2 + BURST + 1;
        if (r % 10 == 0) {
            round_trip(peer, first, big, BIG, r);
            msgs += 2;
        }
    }
    return msgs;
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "p2p_no_format");
    mt_format_check_bound();

    const int peer = mt_rank ^ 1;
    const int active = peer < mt_size;
    const int first = mt_rank < peer;
    char *small = mt_malloc((size_t)BURST * SMALL);
    char *big = mt_malloc(BIG);

    mt_section("warm-up: connections and first contact");
    if (active) traffic(peer, first, 12, small, big);
    /* every pair both ways: the counted stretch overlaps the idle rank's
     * (odd np) first messages of the final reduction, and making a UCX
     * endpoint formats its lane table */
    char *all = mt_malloc((size_t)mt_size * 2);
    CHECK_MPI(MPI_Alltoall(all, 1, MPI_BYTE, all + mt_size, 1, MPI_BYTE, MPI_COMM_WORLD));
    free(all);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    mt_section("counted: ping-pongs, bursts, probes, rendezvous");
    long msgs = 0, calls = 0;
    if (active) {
        mt_format_count_start();
        msgs = traffic(peer, first, ROUNDS, small, big);
        calls = mt_format_count_stop();
    }
    mt_format_check(calls, msgs, "messages");

    free(small);
    free(big);
    return mt_finalize();
}
