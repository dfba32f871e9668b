/*
 * p2p_far: pml/rdrp's choice of store kind by the measured distance of a
 * peer's cache (pml_rdrp_shm_far_line_ns, common/shm shm_line_cost.h).
 * A ring message of 512 bytes or more to a peer measured far is written
 * with non-temporal stores; the threshold is a control variable that
 * MPI_T may change while the job runs.
 *
 * Rank 0 ping-pongs with every other rank and sends it windows of
 * messages of 512 B - 8 KiB (every one checked: data, source, tag,
 * count), in three phases set through MPI_T_cvar_write: threshold 1 ns
 * (every measured peer is far), 1 s (none is), 0 (never measured).  Under
 * pml/rdrp with rings (MPITEST_EXPECT_SHM unset or 1; not throttled,
 * whose sends take the request path; a ring eager limit of 512 bytes or
 * more) the MPI_T counter
 * pml_rdrp_shm_far_nt must grow in the first phase on every rank that
 * sent (a ping-pong's replies measure the ring back to rank 0 too) and
 * not at all in the other two.  Elsewhere (other PMLs, no rings) the
 * messages are checked all the same.
 */
#include "mpitest.h"
#include "mpitest_mpit.h"

enum { ROUNDS = 640, WINDOW = 32, MAXLEN = 8192 };

static const int sizes[] = {512, 1000, 4096, 8192};
enum { NSIZES = sizeof sizes / sizeof sizes[0] };

static unsigned char pat(int phase, int src, int i, size_t k)
{
    return (unsigned char)(phase * 31 + src * 7 + i * 13 + k * 3 + (k >> 8));
}

static void fill(unsigned char *b, size_t n, int phase, int src, int i)
{
    for (size_t k = 0; k < n; k++) b[k] = pat(phase, src, i, k);
}

static void check(const unsigned char *b, size_t n, int phase, int src, int i, const MPI_Status *st, int tag)
{
    int count = -1;
    MPI_Get_count(st, MPI_BYTE, &count);
    CHECK(st->MPI_SOURCE == src && st->MPI_TAG == tag && count == (int)n,
          "phase %d msg %d: source %d tag %d count %d, expected %d %d %zu", phase, i, st->MPI_SOURCE,
          st->MPI_TAG, count, src, tag, n);
    for (size_t k = 0; k < n; k++)
        if (b[k] != pat(phase, src, i, k)) {
            CHECK(0, "phase %d msg %d from %d: byte %zu is %u, expected %u", phase, i, src, k, b[k],
                  pat(phase, src, i, k));
            return;
        }
}

/* Rank 0 with peer p: ROUNDS ping-pongs, then a window of WINDOW sends. */
static void exchange(int phase, int rank, int p)
{
    static unsigned char sb[MAXLEN], rb[MAXLEN], wb[WINDOW][MAXLEN];
    const int other = rank == 0 ? p : 0;
    MPI_Status st;
    for (int i = 0; i < ROUNDS; i++) {
        size_t n = (size_t)sizes[i % NSIZES];
        if (rank == 0) {
            fill(sb, n, phase, rank, i);
            CHECK_MPI(MPI_Send(sb, (int)n, MPI_BYTE, other, 1, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Recv(rb, MAXLEN, MPI_BYTE, other, 2, MPI_COMM_WORLD, &st));
            check(rb, n, phase, other, i, &st, 2);
        } else {
            CHECK_MPI(MPI_Recv(rb, MAXLEN, MPI_BYTE, other, 1, MPI_COMM_WORLD, &st));
            check(rb, n, phase, other, i, &st, 1);
            fill(sb, n, phase, rank, i);
            CHECK_MPI(MPI_Send(sb, (int)n, MPI_BYTE, other, 2, MPI_COMM_WORLD));
        }
    }
    MPI_Request rq[WINDOW];
    for (int w = 0; w < WINDOW; w++) {
        size_t n = (size_t)sizes[(w * 3) % NSIZES];
        if (rank == 0) {
            fill(wb[w], n, phase, rank, ROUNDS + w);
            CHECK_MPI(MPI_Isend(wb[w], (int)n, MPI_BYTE, other, 3, MPI_COMM_WORLD, &rq[w]));
        } else {
            CHECK_MPI(MPI_Irecv(wb[w], MAXLEN, MPI_BYTE, other, 3, MPI_COMM_WORLD, &rq[w]));
        }
    }
    MPI_Status sts[WINDOW];
    CHECK_MPI(MPI_Waitall(WINDOW, rq, sts));
    if (rank != 0)
        for (int w = 0; w < WINDOW; w++)
            check(wb[w], (size_t)sizes[(w * 3) % NSIZES], phase, 0, ROUNDS + w, &sts[w], 3);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "p2p_far");
    const int rank = mt_rank;
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *es = getenv("MPITEST_EXPECT_SHM");
    const char *et = getenv("MPITEST_EXPECT_THROTTLED");
    /* ring messages of 512 bytes at least (not under rdrp-tiny's limits) */
    long long shm_eager = 0;
    const int ring_512 = cvar_int("pml_rdrp_shm_eager_limit", &shm_eager) && shm_eager >= 512;
    const int expect = mt_pml_is("rdrp") && ring_512 && !(es && atoi(es) == 0) && !(et && atoi(et) > 0);
    pvar_t far;
    pvar_open(&far, "pml_rdrp_shm_far_nt");
    if (mt_pml_is("rdrp")) CHECK(far.ok, "no MPI_T variable pml_rdrp_shm_far_nt");

    static const struct {
        int ns;
        const char *what;
    } phases[] = {{1, "threshold 1 ns: every measured peer far"},
                  {1000000000, "threshold 1 s: no peer far"},
                  {0, "threshold 0: never measured"}};
    for (int ph = 0; ph < 3; ph++) {
        mt_section(phases[ph].what);
        int w = cvar_write_int("pml_rdrp_shm_far_line_ns", phases[ph].ns);
        if (mt_pml_is("rdrp")) CHECK(w == 1, "MPI_T_cvar_write of pml_rdrp_shm_far_line_ns: %d", w);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        unsigned long before = pvar_read(&far);
        for (int p = 1; p < size; p++)
            if (rank == 0 || rank == p) exchange(ph, rank, p);
        unsigned long grew = pvar_read(&far) - before;
        if (expect) {
            if (ph == 0) CHECK(grew > 0, "rank %d: no message written non-temporally to a far peer", rank);
            else CHECK_EQ(grew, 0, "rank %d: messages counted far with threshold %d", rank, phases[ph].ns);
        }
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    pvar_close(&far);
    MPI_T_finalize();
    return mt_finalize();
}
