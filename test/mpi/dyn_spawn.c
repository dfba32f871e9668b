/*
 * dyn_spawn: processes of other jobs (MPI_Comm_spawn, twice).
 *  - the job spawns np+1 children (their process indices reach past the
 *    parents' job size, and child 0 has the same index as parent 0, so
 *    anything kept per index of one's own job must not be used for them),
 *    then a second generation of children after the first disconnected;
 *  - over the intercommunicator every parent and every child exchange
 *    messages of 0 B .. 1 MiB+3 both ways (posted and unexpected), and a
 *    burst of 300 small messages each way into a receiver that posts late
 *    (flow control of eager messages);
 *  - over Intercomm_merge of both jobs: all-pairs traffic, Allreduce,
 *    Bcast and Barrier;
 *  - MPI_Comm_disconnect on both sides.
 * The children send their failure count to the parents, whose summary line
 * covers both.  (The p2p_ tests cannot hold it: btl/credit, like Open MPI's
 * vader, reaches only the processes of its own job; its configurations add
 * tcp for the others, as ob1 over vader needs it.)
 */
#include "mpitest.h"

#define NSMALL 300
static const int sizes[] = {0, 1, 100, 4097, 65537, 1048576 + 3};
#define NS ((int)(sizeof(sizes) / sizeof(sizes[0])))

static char *sbuf, *rbuf;

/* all-pairs exchange over comm (intercommunicator: remote group; else all others) */
static void exchange(MPI_Comm comm, int inter, int gen, const char *what)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    if (inter)
        MPI_Comm_remote_size(comm, &n);
    else
        MPI_Comm_size(comm, &n);
    mt_section(what);
    for (int k = 0; k < NS; k++) {
        int len = sizes[k];
        for (int peer = 0; peer < n; peer++) {
            if (!inter && peer == me) continue;
            int tag = gen * 100 + k;
            MPI_Request rq[2];
            MPI_Status st;
            mt_fill(sbuf, len, me, tag, peer);
            CHECK_MPI(MPI_Isend(sbuf, len, MPI_BYTE, peer, tag, comm, &rq[0]));
            /* half the pairs post first, the others after the message arrived */
            if ((me + peer + k) % 2) {
                CHECK_MPI(MPI_Probe(peer, tag, comm, &st));
            }
            CHECK_MPI(MPI_Irecv(rbuf, len, MPI_BYTE, peer, tag, comm, &rq[1]));
            CHECK_MPI(MPI_Wait(&rq[1], &st));
            CHECK_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
            CHECK_STATUS(&st, peer, tag, len, "%s size %d peer %d", what, len, peer);
            CHECK_BUF(rbuf, len, peer, tag, me, "%s size %d peer %d", what, len, peer);
        }
    }
    /* small-message burst: everybody sends NSMALL messages to everybody first */
    MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * (size_t)n * NSMALL);
    char *sm = mt_malloc((size_t)n * NSMALL * 16);
    int nr = 0;
    for (int peer = 0; peer < n; peer++) {
        if (!inter && peer == me) continue;
        for (int i = 0; i < NSMALL; i++) {
            char *b = sm + ((size_t)peer * NSMALL + i) * 16;
            mt_fill(b, 16, me, 7, i * 1000 + peer);
            CHECK_MPI(MPI_Isend(b, 16, MPI_BYTE, peer, 7, comm, &rq[nr++]));
        }
    }
    mt_sleep_ms(50);
    for (int peer = 0; peer < n; peer++) {
        if (!inter && peer == me) continue;
        for (int i = 0; i < NSMALL; i++) {
            char b[16];
            MPI_Status st;
            CHECK_MPI(MPI_Recv(b, 16, MPI_BYTE, peer, 7, comm, &st));
            if (!CHECK_BUF(b, 16, peer, 7, i * 1000 + me, "%s burst message %d from %d", what, i, peer))
                break;
        }
    }
    CHECK_MPI(MPI_Waitall(nr, rq, MPI_STATUSES_IGNORE));
    free(rq);
    free(sm);
}

static void merged(MPI_Comm inter, int high, int gen)
{
    MPI_Comm m;
    int me, n;
    mt_section("Intercomm_merge");
    CHECK_MPI(MPI_Intercomm_merge(inter, high, &m));
    MPI_Comm_set_errhandler(m, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m, &me);
    MPI_Comm_size(m, &n);
    exchange(m, 0, gen + 10, "merged communicator: all pairs");
    mt_section("merged communicator: collectives");
    long v = me + 1, sum = 0;
    CHECK_MPI(MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, m));
    CHECK_EQ(sum, (long)n * (n + 1) / 2, "Allreduce over %d processes of two jobs", n);
    for (int root = 0; root < n; root++) {
        int x = me == root ? 1000 + root : -1;
        CHECK_MPI(MPI_Bcast(&x, 1, MPI_INT, root, m));
        CHECK_EQ(x, 1000 + root, "Bcast from %d", root);
    }
    CHECK_MPI(MPI_Barrier(m));
    MPI_Comm_free(&m);
}

static int child(MPI_Comm parent, int gen)
{
    exchange(parent, 1, gen, "child: intercommunicator");
    merged(parent, 1, gen);
    mt_section("child: report");
    long mine = mt_failures, total = 0;
    MPI_Reduce(&mine, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (mt_rank == 0) CHECK_MPI(MPI_Send(&total, 1, MPI_LONG, 0, 999, parent));
    CHECK_MPI(MPI_Comm_disconnect(&parent));
    alarm(0);
    MPI_Finalize();
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Comm parent, kids;
    mt_init(&argc, &argv, "dyn_spawn");
    sbuf = mt_malloc(MT_MAXSIZE);
    rbuf = mt_malloc(MT_MAXSIZE);
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
        MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
        return child(parent, argc > 1 ? atoi(argv[1]) : 0);
    }
    for (int gen = 1; gen <= 2; gen++) {
        char g[8], *args[] = {g, NULL};
        int nkids = mt_size + 1, errs[16];
        snprintf(g, sizeof g, "%d", gen);
        mt_section("MPI_Comm_spawn");
        CHECK_MPI(MPI_Comm_spawn(argv[0], args, nkids, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &kids, errs));
        MPI_Comm_set_errhandler(kids, MPI_ERRORS_RETURN);
        exchange(kids, 1, gen, "parent: intercommunicator");
        merged(kids, 0, gen);
        mt_section("parent: children's report");
        if (mt_rank == 0) {
            long theirs = 0;
            CHECK_MPI(MPI_Recv(&theirs, 1, MPI_LONG, 0, 999, kids, MPI_STATUS_IGNORE));
            CHECK_EQ(theirs, 0, "failed checks in the children of generation %d", gen);
        }
        CHECK_MPI(MPI_Comm_disconnect(&kids));
    }
    free(sbuf);
    free(rbuf);
    return mt_finalize();
}
