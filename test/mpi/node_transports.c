/*
 * node_transports: across nodes (test/cluster), pml/rdrp carries messages to
 * a peer on the same node through shared memory and to a peer on another
 * node through UCX (TCP), and a remote peer's rendezvous data takes the path
 * UCX really supports to it: under pml_rdrp_data_path auto, "am" over TCP
 * (UCX 1.13 emulates GET there), never CMA, never the emulated RMA.
 *
 * Checked per peer class with pml/rdrp's MPI_T counters: this process sends
 * only to its on-node peers (small, eager and large messages), reads the
 * counters, then only to its remote peers, and compares the deltas (credit
 * packets, which may go to either kind of peer at any time, are counted
 * apart).  Data and status are checked under every PML.
 *
 * Under ob1 with btl/credit (its counters present): a remote peer over TCP
 * has no native UCX get, so its large messages go by RPUT, which btl/credit
 * carries as an active message into the receive buffer, and never by RGET
 * (emulated GET; issue 21): the remote window counts btl_put operations
 * for every large message sent and no btl_get.
 *
 * MPITEST_EXPECT_EAGER_PUTS=1  (ob1 + btl/credit with btl_credit_put_eager_rate
 *   above any real rate) the remote exchange runs six more times (5 MiB of
 *   puts per peer each), and the puts after the first three delivered-rate
 *   samples (24 MiB per peer) go by UCX eager: btl_credit_eager_puts counts some, and the data still arrives
 *   whole (the target copies an eager put in before ob1's FIN is handled)
 * MPITEST_EXPECT_NODES=N  the job spans N nodes with distinct hostnames
 * MPITEST_EXPECT_REMOTE_PATH=am|rma  data path of a remote rdrp rendezvous
 *   (default am; "rma" when pml_rdrp_data_path rma forces it)
 * MPITEST_EXPECT_LOCAL_PATH=cma|am|rma  data path on the node (default cma)
 */
#include "mpitest.h"
#include "mpitest_mpit.h"
#include "mpitest_nodes.h"

enum { C_SHM, C_UCX, C_CMA, C_AM, C_RMA, C_RDRP, C_CPK, C_CREQ, C_N };
static const char *const cnames[C_N] = {"pml_rdrp_shm_sent",   "pml_rdrp_ucx_sent", "pml_rdrp_rndv_cma",
                                        "pml_rdrp_rndv_am",    "pml_rdrp_rndv_rma", "pml_rdrp_rndv_rdrp",
                                        "pml_rdrp_credit_packets", "pml_rdrp_credit_requests"};
static pvar_t pv[C_N];
enum { B_PUTS, B_GETS, B_N };
static const char *const bnames[B_N] = {"btl_credit_puts", "btl_credit_gets"};
static pvar_t bv[B_N];

static const size_t sizes[] = {0, 8, 1000, 8192, 70000, 1 << 20, 4 * 1048576 + 3};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define NLARGE 2 /* sizes past any eager limit: 1 MiB, 4 MiB+3 */

static void read_all(unsigned long *v)
{
    for (int i = 0; i < C_N; i++) v[i] = pvar_read(&pv[i]);
}

static void read_btl(unsigned long *v)
{
    for (int i = 0; i < B_N; i++) v[i] = bv[i].ok ? pvar_read(&bv[i]) : 0;
}

/* exchange every size with every peer whose node is (local=1) / is not
 * (local=0) mine; returns the number of messages this process sent */
static int exchange(const mt_nodes_t *n, int local, char *sb, char *rb)
{
    int sent = 0;
    for (size_t k = 0; k < NSIZES; k++) {
        for (int d = 1; d < mt_size; d++) {
            int to = (mt_rank + d) % mt_size, from = (mt_rank - d + mt_size) % mt_size;
            int to_ok = (n->node_of[to] == n->my_node) == local, from_ok = (n->node_of[from] == n->my_node) == local;
            MPI_Request rq = MPI_REQUEST_NULL;
            MPI_Status st;
            int tag = 40 + (int)k;
            if (from_ok) CHECK_MPI(MPI_Irecv(rb, (int)sizes[k], MPI_BYTE, from, tag, MPI_COMM_WORLD, &rq));
            if (to_ok) {
                mt_fill(sb, sizes[k], mt_rank, tag, d);
                CHECK_MPI(MPI_Send(sb, (int)sizes[k], MPI_BYTE, to, tag, MPI_COMM_WORLD));
                ++sent;
            }
            if (from_ok) {
                CHECK_MPI(MPI_Wait(&rq, &st));
                CHECK_STATUS(&st, from, tag, (long long)sizes[k], "size %zu from %d (%s)", sizes[k], from,
                             local ? "on my node" : "remote");
                CHECK_BUF(rb, sizes[k], from, tag, d, "size %zu from %d", sizes[k], from);
            }
        }
    }
    return sent;
}

/* Rendezvous per peer on my node under pml/rdrp: the sizes past the
 * ring's eager limit and, on the cma path, those from
 * pml_rdrp_shm_cma_min on (single copy although they fit the ring;
 * resolved at start-up, 16384 on a machine where CMA is cheap). */
static int local_rndv_per_peer(int cma_path)
{
    long long shm_eager = 131072, cma_min = 0;
    (void)cvar_int("pml_rdrp_shm_eager_limit", &shm_eager);
    if (cma_path) (void)cvar_int("pml_rdrp_shm_cma_min", &cma_min);
    int n = 0;
    for (size_t k = 0; k < NSIZES; k++)
        if ((long long)sizes[k] > shm_eager || (cma_min > 0 && (long long)sizes[k] >= cma_min)) ++n;
    return n;
}

static int path_index(const char *p)
{
    return strcmp(p, "cma") == 0 ? C_CMA : strcmp(p, "rma") == 0 ? C_RMA : C_AM;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "node_transports");
    mt_nodes_t n;
    mt_section("node layout");
    mt_nodes_init(&n);
    int nlocal = 0, nremote = 0;
    for (int r = 0; r < mt_size; r++)
        if (r != mt_rank) (n.node_of[r] == n.my_node ? ++nlocal : ++nremote);

    int rdrp = mt_pml_is("rdrp");
    for (int i = 0; i < C_N; i++) {
        pvar_open(&pv[i], cnames[i]);
        if (rdrp) CHECK(pv[i].ok, "pml/rdrp counter %s missing", cnames[i]);
    }
    for (int i = 0; i < B_N; i++) pvar_open(&bv[i], bnames[i]);
    const int credit = mt_pml_is("ob1") && bv[B_PUTS].ok && bv[B_GETS].ok;
    const char *rp = getenv("MPITEST_EXPECT_REMOTE_PATH"), *lp = getenv("MPITEST_EXPECT_LOCAL_PATH");
    int remote_path = path_index(rp ? rp : "am"), local_path = path_index(lp ? lp : "cma");

    char *sb = mt_malloc(MT_MAXSIZE), *rb = mt_malloc(MT_MAXSIZE);
    unsigned long a[C_N], b[C_N], c[C_N];
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    mt_section("peers on my node");
    unsigned long bl0[B_N], bl1[B_N];
    read_all(a);
    read_btl(bl0);
    int sent_local = exchange(&n, 1, sb, rb);
    read_all(b);
    read_btl(bl1);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    mt_section("peers on other nodes");
    read_all(c);  /* (the barrier's own messages are not in either window) */
    unsigned long c0[C_N], bt0[B_N], bt1[B_N];
    memcpy(c0, c, sizeof c);
    read_btl(bt0);
    int sent_remote = exchange(&n, 0, sb, rb);
    read_all(c);
    read_btl(bt1);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    if (rdrp) {
        unsigned long d1[C_N], d2[C_N];
        for (int i = 0; i < C_N; i++) {
            d1[i] = b[i] - a[i];
            d2[i] = c[i] - c0[i];
        }
        unsigned long cred1 = d1[C_CPK] + d1[C_CREQ], cred2 = d2[C_CPK] + d2[C_CREQ];
        if (mt_verbose)
            printf("[rank %d] on node: ring %lu ucx %lu cma %lu am %lu rma %lu (credit %lu); remote: ring %lu ucx %lu "
                   "cma %lu am %lu rma %lu (credit %lu)\n",
                   mt_rank, d1[C_SHM], d1[C_UCX], d1[C_CMA], d1[C_AM], d1[C_RMA], cred1, d2[C_SHM], d2[C_UCX],
                   d2[C_CMA], d2[C_AM], d2[C_RMA], cred2);
        if (sent_local > 0) {
            const int nrndv = local_rndv_per_peer(local_path == C_CMA);
            CHECK(d1[C_SHM] >= (unsigned long)sent_local - (unsigned long)(nrndv * nlocal),
                  "%d messages to peers on my node, only %lu through the shared-memory ring", sent_local, d1[C_SHM]);
            /* (the am data path moves rendezvous data by UCX's own
             * active-message rendezvous, on the node too) */
            if (local_path != C_AM)
                CHECK(d1[C_UCX] <= cred1, "%lu UCX messages (%lu of them credit packets) while sending only to peers "
                      "on my node", d1[C_UCX], cred1);
            CHECK(d1[local_path] == (unsigned long)(nrndv * nlocal),
                  "on the node: %lu rendezvous by the expected data path (%s), %d rendezvous-size messages sent",
                  d1[local_path], lp ? lp : "cma", nrndv * nlocal);
        }
        if (sent_remote > 0) {
            CHECK(d2[C_UCX] >= (unsigned long)sent_remote, "%d messages to remote peers, only %lu through UCX",
                  sent_remote, d2[C_UCX]);
            CHECK(d2[C_SHM] <= cred2, "%lu ring messages (%lu credit packets) while sending only to remote peers",
                  d2[C_SHM], cred2);
            CHECK(d2[C_CMA] == 0, "%lu rendezvous to remote peers went by CMA", d2[C_CMA]);
            if (d2[C_RDRP] > 0)  /* the rdrp protocol (not get/put) chose a data path */
                CHECK(d2[remote_path] == d2[C_RDRP], "remote rendezvous: %lu by the expected data path (%s) of %lu "
                      "(am %lu, rma %lu)", d2[remote_path], rp ? rp : "am", d2[C_RDRP], d2[C_AM], d2[C_RMA]);
        }
    }
    if (getenv("MPITEST_EXPECT_EAGER_PUTS") && credit) {
        mt_section("remote puts by UCX eager below btl_credit_put_eager_rate");
        pvar_t ev;
        pvar_open(&ev, "btl_credit_eager_puts");
        CHECK(ev.ok, "btl/credit counter btl_credit_eager_puts missing");
        unsigned long e0 = ev.ok ? pvar_read(&ev) : 0;
        int sent = 0;
        for (int round = 0; round < 6; round++) sent += exchange(&n, 0, sb, rb);
        unsigned long e1 = ev.ok ? pvar_read(&ev) : 0;
        if (mt_verbose) printf("[rank %d] %d more messages to remote peers: %lu eager puts\n", mt_rank, sent, e1 - e0);
        if (sent > 0) CHECK(e1 > e0, "no put went by UCX eager though every measured rate is below the threshold");
        pvar_close(&ev);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    if (credit && sent_local > 0) {
        /* ob1 keeps the RDMA flags it copied per endpoint when the peer was
         * added: a peer on the node (native get by CMA) keeps RGET even
         * once the module offers remote TCP peers PUT instead */
        unsigned long gets = bl1[B_GETS] - bl0[B_GETS];
        if (mt_verbose) printf("[rank %d] btl/credit to peers on my node: %lu gets\n", mt_rank, gets);
        CHECK(gets >= (unsigned long)(NLARGE * nlocal), "btl/credit: %lu gets for %d large messages to peers on my "
              "node (RGET over CMA expected)", gets, NLARGE * nlocal);
    }
    if (credit && sent_remote > 0) {
        unsigned long puts = bt1[B_PUTS] - bt0[B_PUTS], gets = bt1[B_GETS] - bt0[B_GETS];
        if (mt_verbose) printf("[rank %d] btl/credit to remote peers: %lu puts, %lu gets\n", mt_rank, puts, gets);
        CHECK(puts >= (unsigned long)(NLARGE * nremote), "btl/credit: %lu puts for %d large messages to remote peers "
              "(RPUT by active message expected where UCX has no native get)", puts, NLARGE * nremote);
        CHECK(gets == 0, "btl/credit: %lu gets (RGET over emulated GET) for messages to remote peers", gets);
    }
    free(sb);
    free(rb);
    for (int i = 0; i < C_N; i++) pvar_close(&pv[i]);
    for (int i = 0; i < B_N; i++) pvar_close(&bv[i]);
    mt_nodes_free(&n);
    MPI_T_finalize();
    return mt_finalize();
}
