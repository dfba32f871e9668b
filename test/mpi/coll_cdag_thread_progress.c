/*
 * coll_cdag_thread_progress: with coll_cdag_progress=thread, a started
 * nonblocking collective completes while the application makes no MPI
 * call at all, and the engine thread costs no CPU when nothing runs.
 *
 * For iallreduce, ibcast, ialltoall and iallgather at 64 KiB and 1 MiB:
 * every rank starts the collective, sleeps in nanosleep (far longer than
 * the collective takes), then calls MPI_Test exactly once; the collective
 * must be complete by then (one MPI_Test cannot carry a rendezvous
 * collective through its rounds on its own), and the data must be exact.
 * Then the engine thread (named "cdag-engine") must use (almost) no CPU
 * while the process sleeps with no collective running: its utime + stime
 * from /proc/self/task/<tid>/stat over a 500 ms sleep.
 *
 * The progress checks apply only under MPITEST_EXPECT_ENGINE=1 (set by the
 * engine-thread configs); elsewhere the data checks still run, with a
 * 10 ms sleep.  No tight timing: the sleep is 1 s per collective, and the
 * idle CPU bound is 20 %.
 */
#include "mpitest.h"

#include <dirent.h>

static int rank, size, expect_engine;

enum { IALLREDUCE, IBCAST, IALLTOALL, IALLGATHER, NCOLL };
static const char *coll_name[] = {"iallreduce", "ibcast", "ialltoall", "iallgather"};

static int ival(int r, long i) { return (int)((r + 1) * (i % 1000 + 1)); }

static int start(int coll, long bytes, int *sb, int *rb, unsigned char *bs, unsigned char *br, MPI_Request *rq)
{
    int n = (int)(bytes / (long)sizeof(int));
    switch (coll) {
    case IALLREDUCE:
        for (long i = 0; i < n; i++) sb[i] = ival(rank, i);
        return MPI_Iallreduce(sb, rb, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, rq);
    case IBCAST:
        if (rank == 0) mt_fill(br, (size_t)bytes, 0, 1, 0);
        else memset(br, 0, (size_t)bytes);
        return MPI_Ibcast(br, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD, rq);
    case IALLTOALL:
        for (int j = 0; j < size; j++) mt_fill(bs + (size_t)j * (size_t)bytes, (size_t)bytes, rank, j, 2);
        return MPI_Ialltoall(bs, (int)bytes, MPI_BYTE, br, (int)bytes, MPI_BYTE, MPI_COMM_WORLD, rq);
    default:
        mt_fill(bs, (size_t)bytes, rank, 3, 3);
        return MPI_Iallgather(bs, (int)bytes, MPI_BYTE, br, (int)bytes, MPI_BYTE, MPI_COMM_WORLD, rq);
    }
}

static void verify(int coll, long bytes, const int *rb, const unsigned char *br)
{
    int n = (int)(bytes / (long)sizeof(int));
    switch (coll) {
    case IALLREDUCE:
        for (long i = 0; i < n; i++) {
            long want = 0;
            for (int r = 0; r < size; r++) want += ival(r, i);
            if (rb[i] != (int)want) {
                CHECK(0, "iallreduce %ld B: element %ld is %d, expected %ld", bytes, i, rb[i], want);
                return;
            }
        }
        return;
    case IBCAST:
        CHECK_BUF(br, (size_t)bytes, 0, 1, 0, "ibcast %ld B", bytes);
        return;
    case IALLTOALL:
        for (int j = 0; j < size; j++)
            CHECK_BUF(br + (size_t)j * (size_t)bytes, (size_t)bytes, j, rank, 2, "ialltoall %ld B from %d", bytes, j);
        return;
    default:
        for (int j = 0; j < size; j++)
            CHECK_BUF(br + (size_t)j * (size_t)bytes, (size_t)bytes, j, 3, 3, "iallgather %ld B from %d", bytes, j);
    }
}

/* CPU time (clock ticks) of this process's thread named name, or -1 */
static long thread_ticks(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    long ticks = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && ticks < 0) {
        if (e->d_name[0] == '.') continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (!fgets(comm, sizeof comm, f)) comm[0] = 0;
        fclose(f);
        comm[strcspn(comm, "\n")] = 0;
        if (strcmp(comm, name) != 0) continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        f = fopen(path, "r");
        if (!f) continue;
        char line[1024];
        if (fgets(line, sizeof line, f)) {
            /* fields after "(comm)": state is field 3, utime 14, stime 15 */
            char *p = strrchr(line, ')');
            unsigned long ut = 0, st = 0;
            if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2)
                ticks = (long)(ut + st);
        }
        fclose(f);
    }
    closedir(d);
    return ticks;
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "coll_cdag_thread_progress");
    rank = mt_rank;
    size = mt_size;
    const char *e = getenv("MPITEST_EXPECT_ENGINE");
    expect_engine = e && atoi(e) > 0;
    const long sizes[] = {65536, 1048576};
    size_t cap = (size_t)1048576 * (size_t)size;
    int *sb = mt_malloc(1048576), *rb = mt_malloc(1048576);
    unsigned char *bs = mt_malloc(cap), *br = mt_malloc(cap);

    for (int c = 0; c < NCOLL; c++) {
        for (int k = 0; k < 2; k++) {
            long bytes = sizes[k];
            char sec[96];
            snprintf(sec, sizeof sec, "%s %ld B while every rank sleeps", coll_name[c], bytes);
            mt_section(sec);
            MPI_Request rq;
            /* once with MPI_Wait (first use: endpoints, plan), then the real one */
            for (int pass = 0; pass < 2; pass++) {
                CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
                CHECK_MPI(start(c, bytes, sb, rb, bs, br, &rq));
                if (pass == 0) {
                    CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
                    verify(c, bytes, rb, br);
                    continue;
                }
                /* outside MPI: no call, no CPU.  Without the engine the
                 * sleep proves nothing, so keep it short there: the test
                 * runs in every coll config (CI time) */
                mt_sleep_ms(expect_engine ? 1000 : 10);
                int flag = 0;
                CHECK_MPI(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
                if (expect_engine)
                    CHECK(flag, "%s %ld B: not complete after 1 s of sleep and one MPI_Test: "
                          "the engine thread did not progress it", coll_name[c], bytes);
                if (!flag) CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
                verify(c, bytes, rb, br);
            }
        }
    }

    if (expect_engine) {
        mt_section("engine thread idle CPU");
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        mt_sleep_ms(100);  /* the engine notices nothing runs */
        long t0 = thread_ticks("cdag-engine");
        CHECK(t0 >= 0, "no thread named cdag-engine in this process");
        mt_sleep_ms(500);
        long t1 = thread_ticks("cdag-engine");
        long hz = sysconf(_SC_CLK_TCK);
        if (t0 >= 0 && t1 >= 0)
            CHECK(t1 - t0 <= hz / 10, "idle engine thread used %ld ticks (%ld per second) over a 500 ms sleep",
                  t1 - t0, hz);
        if (mt_verbose) printf("[rank %d] idle engine thread: %ld ticks in 500 ms\n", rank, t1 - t0);
    }
    free(sb);
    free(rb);
    free(bs);
    free(br);
    return mt_finalize();
}
