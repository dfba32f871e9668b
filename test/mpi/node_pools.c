/*
 * node_pools: under token throttling by node (coll_cdag_throttle node or
 * pml_rdrp_throttle node) across nodes (test/cluster), each node has its own
 * token pool and every node's pool is used.
 *  - distinct: a pool is a shared-memory segment this process maps; its
 *    identity is the (device, inode) of that mapping in /proc/self/maps (the
 *    name is unlinked once every member attached).  Ranks of one node must map
 *    a common pool, ranks of different nodes none: a pool shared across nodes
 *    (one /dev/shm for all) or none per node would fail.
 *  - used: the throttle's MPI_T counter (messages that waited for a token),
 *    summed over each node's ranks, is positive on every node.
 * Traffic: a burst from each root in turn (BURST nonblocking broadcasts of
 * 1 MiB started back to back before the other ranks are told by a
 * point-to-point message to start theirs: the root's sends cannot all
 * complete at once, so with one token per node some wait on every node the
 * root's on), alltoall and allreduce rounds, and an Isend flood to every
 * peer, so both components' throttles have work.
 *
 * MPITEST_POOL_PREFIX  name prefix of the pool segments (default rdrp-cdag-)
 * MPITEST_POOL_PVAR    the counter of throttled messages (default
 *                      coll_cdag_throttled)
 * MPITEST_EXPECT_NODES see mpitest_nodes.h
 */
#include "mpitest.h"
#include "mpitest_mpit.h"
#include "mpitest_nodes.h"

#define MAXPOOLS 16
#define KEYLEN 48

/* "dev:inode" of every mapping of a pool segment, deduplicated */
static int pool_keys(const char *prefix, char keys[MAXPOOLS][KEYLEN])
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[1024];
    int n = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) {
        char dev[32], path[512] = "";
        unsigned long inode;
        if (sscanf(line, "%*s %*s %*s %31s %lu %511s", dev, &inode, path) < 3 || !strstr(path, prefix)) continue;
        char k[KEYLEN];
        snprintf(k, sizeof k, "%s:%lu", dev, inode);
        int dup = 0;
        for (int i = 0; i < n; i++) dup |= strcmp(keys[i], k) == 0;
        if (!dup && n < MAXPOOLS) strcpy(keys[n++], k);
    }
    fclose(f);
    return n;
}

/* every rank's node total of the throttled-message counter, into sums[rank] */
static void node_sums(pvar_t *thr, const mt_nodes_t *n, unsigned long *sums)
{
    unsigned long mine = pvar_read(thr), node_sum = 0;
    CHECK_MPI(MPI_Allreduce(&mine, &node_sum, 1, MPI_UNSIGNED_LONG, MPI_SUM, n->node));
    CHECK_MPI(MPI_Allgather(&node_sum, 1, MPI_UNSIGNED_LONG, sums, 1, MPI_UNSIGNED_LONG, MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "node_pools");
    const char *prefix = getenv("MPITEST_POOL_PREFIX"), *pvname = getenv("MPITEST_POOL_PVAR");
    if (!prefix) prefix = "rdrp-cdag-";
    if (!pvname) pvname = "coll_cdag_throttled";
    mt_nodes_t n;
    mt_section("node layout");
    mt_nodes_init(&n);
    pvar_t thr;
    pvar_open(&thr, pvname);
    CHECK(thr.ok, "MPI_T counter %s missing", pvname);

    mt_section("collective and point-to-point traffic");
    enum { COUNT = 4096, ROUNDS = 20, FLOOD = 64, MAXREPS = 10, BURST = 4, BIG = 1 << 20 };
    int *sb = mt_malloc(sizeof(int) * COUNT * (size_t)mt_size), *rb = mt_malloc(sizeof(int) * COUNT * (size_t)mt_size);
    unsigned long *sums = mt_malloc(sizeof(unsigned long) * (size_t)mt_size);
    char *big = mt_malloc((size_t)BURST * BIG);
    /* Whether a message waits for a token depends on how sends overlap in
     * time.  Messages that complete as they are handed over (coll/cdag's
     * 16 KiB alltoall messages go through the ring on the node and as one
     * UCX active message across) overlap only by chance: at 2 CI
     * rehearsals a whole run passed node 0 without a wait.  The bursts do
     * not rely on chance: a 1 MiB send completes only once its receiver
     * pulled the data, which takes far longer than the root takes to reach
     * its next send.  The block still repeats until every node's counter
     * moved (at most MAXREPS times), for a root preempted between its
     * sends; a pool that is never used still fails. */
    for (int rep = 0; rep < MAXREPS; rep++) {
        for (int root = 0; root < mt_size; root++) {
            MPI_Request brq[BURST];
            if (mt_rank == root)
                for (int b = 0; b < BURST; b++) mt_fill(big + (size_t)b * BIG, BIG, root, b, rep);
            else
                CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, root, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            for (int b = 0; b < BURST; b++)
                CHECK_MPI(MPI_Ibcast(big + (size_t)b * BIG, BIG, MPI_BYTE, root, MPI_COMM_WORLD, &brq[b]));
            if (mt_rank == root)  /* only now may the others start theirs */
                for (int p = 0; p < mt_size; p++)
                    if (p != root) CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, p, 7, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Waitall(BURST, brq, MPI_STATUSES_IGNORE));
            for (int b = 0; b < BURST; b++)
                CHECK_BUF(big + (size_t)b * BIG, BIG, root, b, rep, "burst from root %d, broadcast %d", root, b);
        }
        for (int round = 0; round < ROUNDS; round++) {
            for (int i = 0; i < COUNT * mt_size; i++) sb[i] = mt_rank * 1000003 + i + round;
            CHECK_MPI(MPI_Alltoall(sb, COUNT, MPI_INT, rb, COUNT, MPI_INT, MPI_COMM_WORLD));
            for (int p = 0; p < mt_size; p++)
                CHECK(rb[p * COUNT + 7] == p * 1000003 + mt_rank * COUNT + 7 + round, "alltoall round %d: wrong data "
                      "from %d", round, p);
            long v = mt_rank + round, s = 0;
            CHECK_MPI(MPI_Allreduce(&v, &s, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
            CHECK(s == (long)mt_size * (mt_size - 1) / 2 + (long)mt_size * round, "allreduce round %d: %ld", round, s);
        }
        MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * 2 * FLOOD * (size_t)mt_size);
        int nrq = 0;
        for (int p = 0; p < mt_size; p++)
            for (int i = 0; i < FLOOD; i++)
                CHECK_MPI(MPI_Irecv(rb + (p * FLOOD + i) % (COUNT * mt_size), 1, MPI_INT, p, 5, MPI_COMM_WORLD,
                                    &rq[nrq++]));
        for (int p = 0; p < mt_size; p++)
            for (int i = 0; i < FLOOD; i++) CHECK_MPI(MPI_Isend(sb, 1, MPI_INT, p, 5, MPI_COMM_WORLD, &rq[nrq++]));
        CHECK_MPI(MPI_Waitall(nrq, rq, MPI_STATUSES_IGNORE));
        free(rq);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        node_sums(&thr, &n, sums);
        int all_used = 1;
        for (int r = 0; r < mt_size; r++) all_used &= sums[r] > 0;
        if (all_used) break;
        if (mt_verbose && mt_rank == 0) printf("[rank 0] traffic block %d left a node's pool unused: again\n", rep);
    }

    mt_section("one pool per node, used on every node");
    char keys[MAXPOOLS][KEYLEN];
    memset(keys, 0, sizeof keys);
    int nk = pool_keys(prefix, keys);
    CHECK(nk > 0, "no token pool segment (%s*) mapped by this process", prefix);
    char *all = mt_malloc((size_t)mt_size * sizeof keys);
    CHECK_MPI(MPI_Allgather(keys, (int)sizeof keys, MPI_CHAR, all, (int)sizeof keys, MPI_CHAR, MPI_COMM_WORLD));
    for (int r = 0; r < mt_size; r++) {
        char (*theirs)[KEYLEN] = (char (*)[KEYLEN])(all + (size_t)r * sizeof keys);
        int common = 0;
        for (int i = 0; i < nk; i++)
            for (int j = 0; j < MAXPOOLS && theirs[j][0]; j++) common |= strcmp(keys[i], theirs[j]) == 0;
        if (n.node_of[r] == n.my_node)
            CHECK(common, "rank %d is on my node but maps none of my pools (mine: %s)", r, keys[0]);
        else
            CHECK(!common, "rank %d is on another node but maps one of my pools (%s...)", r, keys[0]);
    }
    free(all);
    node_sums(&thr, &n, sums);
    for (int r = 0; r < mt_size; r++)
        CHECK(sums[r] > 0, "node %d (of rank %d): no message waited for a token (%s = 0): its pool was not used",
              n.node_of[r], r, pvname);
    if (mt_verbose) printf("[rank %d] node %d: %d pool(s), first %s, %s node sum %lu\n", mt_rank, n.my_node, nk,
                           keys[0], pvname, sums[mt_rank]);
    free(sums);
    free(big);
    free(sb);
    free(rb);
    pvar_close(&thr);
    mt_nodes_free(&n);
    MPI_T_finalize();
    return mt_finalize();
}
