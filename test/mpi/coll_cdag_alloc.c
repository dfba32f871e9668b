/*
 * coll_cdag_alloc: repeated and persistent collectives allocate nothing
 * once warm.  coll/cdag counts every heap allocation it makes for a call
 * (requests, schedules, executors, per-message contexts, map nodes,
 * buffers for early arrivals, staging, v-variant arrays) in the MPI_T
 * variable coll_cdag_allocations; after a few warm-up calls of each kind,
 * 20 more calls of the same kind must not move it.
 *
 * Kinds: every collective coll/cdag provides (barrier, bcast, reduce,
 * allreduce, gather(v), scatter(v), allgather(v), alltoall(v),
 * reduce_scatter (equal and unequal counts), reduce_scatter_block, scan,
 * exscan), each blocking, nonblocking (started and waited) and persistent
 * (MPIX_*_init, started repeatedly), with MPI_IN_PLACE wherever MPI allows
 * it, at a non-zero root; v-variants with unequal counts (one of them 0)
 * and gapped displacements in reverse rank order, the same at every call;
 * a strided datatype (allgatherv, bcast: staged through packing); and
 * larger sizes (64 KiB blocks, 1 MiB bcast and iallgather: rendezvous).
 * Every result is checked against values computed from the inputs.
 *
 * Messages that arrive before their receive are held in pools that grow
 * to the high-water mark of how far peers run ahead (a timing matter,
 * counted apart in coll_cdag_early_allocations, printed with
 * MPITEST_VERBOSE=1).
 *
 * Skipped (passes) when coll/cdag is not the component in use (the
 * variable does not exist, or no collective ran through it).
 */
#include "mpitest.h"
#include "mpitest_mpit.h"

#include <mpi-ext.h>

enum { F_BLOCK, F_NB, F_PERS };
static const char *form_name[] = {"blocking", "nonblocking", "persistent"};

static int rank, size, root;
static int *S, *R;        /* send and receive buffers (ints) */
static size_t cap_ints;   /* their size */
static pvar_t allocs, runs, early;
static MPI_Datatype strided;  /* one int every other int */

/* one kind of call: n elements per block; ip: MPI_IN_PLACE */
typedef struct kind {
    const char *name;
    void (*fill)(const struct kind *k, int iter);
    int (*call)(const struct kind *k, int form, MPI_Request *rq);
    void (*check)(const struct kind *k, int iter);
    int n, ip;
} kind_t;

/* The blocking, nonblocking or persistent form of one collective: B and
 * NB its names (MPI_B, MPI_INB, MPIX_B_init), the rest its arguments. */
#define FORMS(form, rq, B, NB, ...)                                                   \
    ((form) == F_BLOCK ? MPI_##B(__VA_ARGS__)                                         \
     : (form) == F_NB  ? MPI_I##NB(__VA_ARGS__, rq)                                   \
                       : MPIX_##B##_init(__VA_ARGS__, MPI_INFO_NULL, rq))

/* ------------------------------------------------------------ values */
/* element i of the data that rank r contributes (block b of it) */
static int dv(int r, int b, long i, int iter) { return r * 100003 + b * 1009 + (int)i * 3 + iter * 7 + 1; }
/* element i of rank r's reduction input */
static int rv(int r, long i, int iter) { return (r + 1) * (int)(i % 17 + 1) + iter; }
static long rsum(int upto, long i, int iter)
{
    long s = 0;
    for (int r = 0; r <= upto; r++) s += rv(r, i, iter);
    return s;
}

static void check_ints(const int *buf, long n, int (*want)(long i, const void *ctx), const void *ctx,
                       const char *what)
{
    for (long i = 0; i < n; i++)
        if (buf[i] != want(i, ctx)) {
            CHECK(0, "%s: element %ld is %d, expected %d", what, i, buf[i], want(i, ctx));
            return;
        }
}

/* ------------------------------------------------------------ v layouts */
/* counts with a 0 (rank 1) and displacements in reverse rank order with a
 * gap of 2 elements after every block: the same at every call */
static int vc[64], vd[64], vspan;
static void v_layout(int n)
{
    for (int j = 0; j < size; j++) vc[j] = j == 1 ? 0 : n / 2 + 3 * j + 1;
    int at = 0;
    for (int j = size - 1; j >= 0; j--) {
        vd[j] = at;
        at += vc[j] + 2;
    }
    vspan = at;
}
/* alltoallv: what a sends to b, symmetric (in place needs it) */
static int a2av(int a, int b, int n) { return ((a + b) % 3 == 0 && a != b) ? 0 : n / 4 + (a * b) % 5 + (a + b); }
static int a_sc[64], a_sd[64], a_rc[64], a_rd[64], a_sspan, a_rspan;
static void a2av_layout(int n)
{
    int s = 0, r = 0;
    for (int j = size - 1; j >= 0; j--) {
        a_sc[j] = a2av(rank, j, n);
        a_sd[j] = s;
        s += a_sc[j] + 1;
        a_rc[j] = a2av(j, rank, n);
        a_rd[j] = r;
        r += a_rc[j] + 3;
    }
    a_sspan = s;
    a_rspan = r;
}

/* ------------------------------------------------------------ barrier, bcast */
static void f_none(const kind_t *k, int iter) { (void)k; (void)iter; }
static void k_none(const kind_t *k, int iter) { (void)k; (void)iter; }
static int c_barrier(const kind_t *k, int form, MPI_Request *rq)
{
    (void)k;
    return FORMS(form, rq, Barrier, barrier, MPI_COMM_WORLD);
}

static void f_bcast(const kind_t *k, int iter)
{
    for (long i = 0; i < k->n; i++) R[i] = rank == root ? dv(root, 0, i, iter) : -1;
}
static int c_bcast(const kind_t *k, int form, MPI_Request *rq)
{
    return FORMS(form, rq, Bcast, bcast, R, k->n, MPI_INT, root, MPI_COMM_WORLD);
}
static int w_iter;
static int w_bcast(long i, const void *ctx) { (void)ctx; return dv(root, 0, i, w_iter); }
static void k_bcast(const kind_t *k, int iter)
{
    w_iter = iter;
    check_ints(R, k->n, w_bcast, NULL, "bcast");
}

/* bcast of a strided type: n ints every other int (packed and staged) */
static void f_bcast_strided(const kind_t *k, int iter)
{
    for (long i = 0; i < 2L * k->n; i++) R[i] = (i % 2) ? -7 : (rank == root ? dv(root, 0, i / 2, iter) : -1);
}
static int c_bcast_strided(const kind_t *k, int form, MPI_Request *rq)
{
    return FORMS(form, rq, Bcast, bcast, R, k->n, strided, root, MPI_COMM_WORLD);
}
static void k_bcast_strided(const kind_t *k, int iter)
{
    for (long i = 0; i < 2L * k->n; i++) {
        int want = (i % 2) ? -7 : dv(root, 0, i / 2, iter);
        if (R[i] != want) {
            CHECK(0, "strided bcast: element %ld is %d, expected %d", i, R[i], want);
            return;
        }
    }
}

/* ------------------------------------------------------------ reductions */
static void fill_red(int *buf, long n, int iter)
{
    for (long i = 0; i < n; i++) buf[i] = rv(rank, i, iter);
}
static const void *red_in(const kind_t *k, int at_root)
{
    return k->ip && at_root ? MPI_IN_PLACE : (const void *)S;
}
static void check_red(const int *buf, long n, long off, int upto, int iter, const char *what)
{
    for (long i = 0; i < n; i++)
        if (buf[i] != (int)rsum(upto, off + i, iter)) {
            CHECK(0, "%s: element %ld is %d, expected %ld", what, i, buf[i], rsum(upto, off + i, iter));
            return;
        }
}

static void f_reduce(const kind_t *k, int iter) { fill_red(k->ip && rank == root ? R : S, k->n, iter); }
static int c_reduce(const kind_t *k, int form, MPI_Request *rq)
{
    return FORMS(form, rq, Reduce, reduce, red_in(k, rank == root), R, k->n, MPI_INT, MPI_SUM, root,
                 MPI_COMM_WORLD);
}
static void k_reduce(const kind_t *k, int iter)
{
    if (rank == root) check_red(R, k->n, 0, size - 1, iter, "reduce");
}

static void f_allreduce(const kind_t *k, int iter) { fill_red(k->ip ? R : S, k->n, iter); }
static int c_allreduce(const kind_t *k, int form, MPI_Request *rq)
{
    return FORMS(form, rq, Allreduce, allreduce, red_in(k, 1), R, k->n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
}
static void k_allreduce(const kind_t *k, int iter) { check_red(R, k->n, 0, size - 1, iter, "allreduce"); }

static int c_scan(const kind_t *k, int form, MPI_Request *rq)
{
    return FORMS(form, rq, Scan, scan, red_in(k, 1), R, k->n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
}
static void k_scan(const kind_t *k, int iter) { check_red(R, k->n, 0, rank, iter, "scan"); }
static int c_exscan(const kind_t *k, int form, MPI_Request *rq)
{
    return FORMS(form, rq, Exscan, exscan, red_in(k, 1), R, k->n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
}
static void k_exscan(const kind_t *k, int iter)
{
    if (rank > 0) check_red(R, k->n, 0, rank - 1, iter, "exscan");  /* undefined at rank 0 */
}

static void f_rsb(const kind_t *k, int iter) { fill_red(k->ip ? R : S, (long)k->n * size, iter); }
static int c_rsb(const kind_t *k, int form, MPI_Request *rq)
{
    return FORMS(form, rq, Reduce_scatter_block, reduce_scatter_block, red_in(k, 1), R, k->n, MPI_INT,
                 MPI_SUM, MPI_COMM_WORLD);
}
static void k_rsb(const kind_t *k, int iter)
{
    check_red(R, k->n, (long)rank * k->n, size - 1, iter, "reduce_scatter_block");
}

/* reduce_scatter: counts vc (one of them 0) or all n (equal: name "eq") */
static int rs_counts[64], rs_off[64], rs_total;
static void rs_layout(const kind_t *k)
{
    int eq = strstr(k->name, "equal") != NULL;
    rs_total = 0;
    for (int j = 0; j < size; j++) {
        rs_counts[j] = eq ? k->n : vc[j];
        rs_off[j] = rs_total;
        rs_total += rs_counts[j];
    }
}
static void f_rs(const kind_t *k, int iter)
{
    rs_layout(k);
    fill_red(k->ip ? R : S, rs_total, iter);
}
static int c_rs(const kind_t *k, int form, MPI_Request *rq)
{
    rs_layout(k);
    return FORMS(form, rq, Reduce_scatter, reduce_scatter, red_in(k, 1), R, rs_counts, MPI_INT, MPI_SUM,
                 MPI_COMM_WORLD);
}
static void k_rs(const kind_t *k, int iter)
{
    rs_layout(k);
    check_red(R, rs_counts[rank], rs_off[rank], size - 1, iter, k->name);
}

/* ------------------------------------------------------------ gathers */
static void check_block(const int *buf, long n, int from, int b, int iter, const char *what)
{
    for (long i = 0; i < n; i++)
        if (buf[i] != dv(from, b, i, iter)) {
            CHECK(0, "%s: block of rank %d, element %ld is %d, expected %d", what, from, i, buf[i],
                  dv(from, b, i, iter));
            return;
        }
}
static void fill_block(int *buf, long n, int from, int b, int iter)
{
    for (long i = 0; i < n; i++) buf[i] = dv(from, b, i, iter);
}

static void f_gather(const kind_t *k, int iter)
{
    if (k->ip && rank == root) fill_block(R + (long)root * k->n, k->n, rank, 0, iter);
    else fill_block(S, k->n, rank, 0, iter);
}
static int c_gather(const kind_t *k, int form, MPI_Request *rq)
{
    return FORMS(form, rq, Gather, gather, red_in(k, rank == root), k->n, MPI_INT, R, k->n, MPI_INT, root,
                 MPI_COMM_WORLD);
}
static void k_gather(const kind_t *k, int iter)
{
    if (rank == root)
        for (int j = 0; j < size; j++) check_block(R + (long)j * k->n, k->n, j, 0, iter, "gather");
}

static void f_allgather(const kind_t *k, int iter)
{
    if (k->ip) fill_block(R + (long)rank * k->n, k->n, rank, 0, iter);
    else fill_block(S, k->n, rank, 0, iter);
}
static int c_allgather(const kind_t *k, int form, MPI_Request *rq)
{
    return FORMS(form, rq, Allgather, allgather, red_in(k, 1), k->n, MPI_INT, R, k->n, MPI_INT,
                 MPI_COMM_WORLD);
}
static void k_allgather(const kind_t *k, int iter)
{
    for (int j = 0; j < size; j++) check_block(R + (long)j * k->n, k->n, j, 0, iter, "allgather");
}

static void f_scatter(const kind_t *k, int iter)
{
    if (rank == root)
        for (int j = 0; j < size; j++) fill_block(S + (long)j * k->n, k->n, j, 1, iter);
}
static int c_scatter(const kind_t *k, int form, MPI_Request *rq)
{
    void *rb = k->ip && rank == root ? MPI_IN_PLACE : (void *)R;
    return FORMS(form, rq, Scatter, scatter, S, k->n, MPI_INT, rb, k->n, MPI_INT, root, MPI_COMM_WORLD);
}
static void k_scatter(const kind_t *k, int iter)
{
    /* in place the root's block stays where it is */
    if (k->ip && rank == root) check_block(S + (long)root * k->n, k->n, root, 1, iter, "scatter (root, in place)");
    else check_block(R, k->n, rank, 1, iter, "scatter");
}

static void f_alltoall(const kind_t *k, int iter)
{
    int *in = k->ip ? R : S;
    for (int j = 0; j < size; j++) fill_block(in + (long)j * k->n, k->n, rank, j, iter);
}
static int c_alltoall(const kind_t *k, int form, MPI_Request *rq)
{
    return FORMS(form, rq, Alltoall, alltoall, red_in(k, 1), k->n, MPI_INT, R, k->n, MPI_INT, MPI_COMM_WORLD);
}
static void k_alltoall(const kind_t *k, int iter)
{
    for (int j = 0; j < size; j++) check_block(R + (long)j * k->n, k->n, j, rank, iter, "alltoall");
}

/* ------------------------------------------------------------ v-variants */
static void f_gatherv(const kind_t *k, int iter)
{
    v_layout(k->n);
    if (k->ip && rank == root) fill_block(R + vd[root], vc[root], rank, 0, iter);
    else fill_block(S, vc[rank], rank, 0, iter);
}
static int c_gatherv(const kind_t *k, int form, MPI_Request *rq)
{
    v_layout(k->n);
    return FORMS(form, rq, Gatherv, gatherv, red_in(k, rank == root), vc[rank], MPI_INT, R, vc, vd, MPI_INT,
                 root, MPI_COMM_WORLD);
}
static void k_gatherv(const kind_t *k, int iter)
{
    v_layout(k->n);
    if (rank == root)
        for (int j = 0; j < size; j++) check_block(R + vd[j], vc[j], j, 0, iter, "gatherv");
}

static void f_scatterv(const kind_t *k, int iter)
{
    v_layout(k->n);
    if (rank == root)
        for (int j = 0; j < size; j++) fill_block(S + vd[j], vc[j], j, 2, iter);
}
static int c_scatterv(const kind_t *k, int form, MPI_Request *rq)
{
    v_layout(k->n);
    void *rb = k->ip && rank == root ? MPI_IN_PLACE : (void *)R;
    return FORMS(form, rq, Scatterv, scatterv, S, vc, vd, MPI_INT, rb, vc[rank], MPI_INT, root, MPI_COMM_WORLD);
}
static void k_scatterv(const kind_t *k, int iter)
{
    v_layout(k->n);
    if (k->ip && rank == root) check_block(S + vd[root], vc[root], root, 2, iter, "scatterv (root, in place)");
    else check_block(R, vc[rank], rank, 2, iter, "scatterv");
}

static void f_allgatherv(const kind_t *k, int iter)
{
    v_layout(k->n);
    if (k->ip) fill_block(R + vd[rank], vc[rank], rank, 3, iter);
    else fill_block(S, vc[rank], rank, 3, iter);
}
static int c_allgatherv(const kind_t *k, int form, MPI_Request *rq)
{
    v_layout(k->n);
    return FORMS(form, rq, Allgatherv, allgatherv, red_in(k, 1), vc[rank], MPI_INT, R, vc, vd, MPI_INT,
                 MPI_COMM_WORLD);
}
static void k_allgatherv(const kind_t *k, int iter)
{
    v_layout(k->n);
    for (int j = 0; j < size; j++) check_block(R + vd[j], vc[j], j, 3, iter, "allgatherv");
}

/* allgatherv into a strided receive type (staged through packing) */
static void f_allgatherv_strided(const kind_t *k, int iter)
{
    v_layout(k->n);
    for (long i = 0; i < 2L * vspan; i++) R[i] = -7;
    fill_block(S, vc[rank], rank, 4, iter);
}
static int c_allgatherv_strided(const kind_t *k, int form, MPI_Request *rq)
{
    v_layout(k->n);
    return FORMS(form, rq, Allgatherv, allgatherv, S, vc[rank], MPI_INT, R, vc, vd, strided, MPI_COMM_WORLD);
}
static void k_allgatherv_strided(const kind_t *k, int iter)
{
    v_layout(k->n);
    /* strided's extent is 2 ints: element i of block j is int 2 (vd[j] + i) */
    for (int j = 0; j < size; j++)
        for (long i = 0; i < vc[j]; i++) {
            long at = 2L * (vd[j] + i);
            if (R[at] != dv(j, 4, i, iter) || R[at + 1] != -7) {
                CHECK(0, "strided allgatherv: block of rank %d, element %ld is %d/%d, expected %d/-7", j, i, R[at],
                      R[at + 1], dv(j, 4, i, iter));
                return;
            }
        }
}

static void f_alltoallv(const kind_t *k, int iter)
{
    a2av_layout(k->n);
    if (k->ip)
        for (int j = 0; j < size; j++) fill_block(R + a_rd[j], a_rc[j], rank, j, iter);
    else
        for (int j = 0; j < size; j++) fill_block(S + a_sd[j], a_sc[j], rank, j, iter);
}
static int c_alltoallv(const kind_t *k, int form, MPI_Request *rq)
{
    a2av_layout(k->n);
    return FORMS(form, rq, Alltoallv, alltoallv, red_in(k, 1), a_sc, a_sd, MPI_INT, R, a_rc, a_rd, MPI_INT,
                 MPI_COMM_WORLD);
}
static void k_alltoallv(const kind_t *k, int iter)
{
    a2av_layout(k->n);
    for (int j = 0; j < size; j++) check_block(R + a_rd[j], a_rc[j], j, rank, iter, "alltoallv");
}

/* ------------------------------------------------------------ the loop */
enum { WARM = 4, REPS = 20 };

/* warm up, then REPS calls: the allocation counter must stay */
static void steady(const kind_t *k, int form)
{
    static char sec[128];  /* static: the watchdog prints it */
    snprintf(sec, sizeof sec, "%s%s %s, %d elements", form_name[form], k->ip ? " in-place" : "", k->name, k->n);
    mt_section(sec);
    MPI_Request rq = MPI_REQUEST_NULL;
    if (form == F_PERS) CHECK_MPI(k->call(k, F_PERS, &rq));
    unsigned long a0 = 0, r0 = 0;
    for (int i = 0; i < WARM + REPS; i++) {
        if (i == WARM) {
            a0 = pvar_read(&allocs);
            r0 = pvar_read(&runs);
        }
        k->fill(k, i);
        if (form == F_BLOCK) {
            CHECK_MPI(k->call(k, F_BLOCK, NULL));
        } else {
            if (form == F_PERS) CHECK_MPI(MPI_Start(&rq));
            else CHECK_MPI(k->call(k, F_NB, &rq));
            CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        }
        k->check(k, i);
    }
    unsigned long a1 = pvar_read(&allocs), r1 = pvar_read(&runs);
    if (form == F_PERS) CHECK_MPI(MPI_Request_free(&rq));
    if (r1 == r0) return;  /* not run by coll/cdag here (fallback) */
    CHECK(a1 == a0, "%s: %lu allocations in %d repeated calls after warm-up", sec, a1 - a0, REPS);
    if (mt_verbose) printf("[rank %d] %s: early-arrival allocations so far %lu\n", rank, sec, pvar_read(&early));
}

#define KIND(name, f, c, k) {name, f, c, k, 0, 0}
static const kind_t kinds[] = {
    KIND("barrier", f_none, c_barrier, k_none),
    KIND("bcast", f_bcast, c_bcast, k_bcast),
    KIND("strided bcast", f_bcast_strided, c_bcast_strided, k_bcast_strided),
    KIND("reduce", f_reduce, c_reduce, k_reduce),
    KIND("allreduce", f_allreduce, c_allreduce, k_allreduce),
    KIND("scan", f_allreduce, c_scan, k_scan),
    KIND("exscan", f_allreduce, c_exscan, k_exscan),
    KIND("reduce_scatter_block", f_rsb, c_rsb, k_rsb),
    KIND("reduce_scatter", f_rs, c_rs, k_rs),
    KIND("reduce_scatter equal counts", f_rs, c_rs, k_rs),
    KIND("gather", f_gather, c_gather, k_gather),
    KIND("scatter", f_scatter, c_scatter, k_scatter),
    KIND("allgather", f_allgather, c_allgather, k_allgather),
    KIND("alltoall", f_alltoall, c_alltoall, k_alltoall),
    KIND("gatherv", f_gatherv, c_gatherv, k_gatherv),
    KIND("scatterv", f_scatterv, c_scatterv, k_scatterv),
    KIND("allgatherv", f_allgatherv, c_allgatherv, k_allgatherv),
    KIND("strided allgatherv", f_allgatherv_strided, c_allgatherv_strided, k_allgatherv_strided),
    KIND("alltoallv", f_alltoallv, c_alltoallv, k_alltoallv),
};
#define NKINDS ((int)(sizeof(kinds) / sizeof(kinds[0])))

/* MPI_IN_PLACE exists for every kind but barrier, bcast and the strided ones */
static int has_in_place(const kind_t *k)
{
    return strcmp(k->name, "barrier") != 0 && strcmp(k->name, "bcast") != 0 && !strstr(k->name, "strided");
}

/* every kind, every form, plain and in place, n elements per block */
static void all_kinds(int n, int (*pick)(const kind_t *))
{
    for (int i = 0; i < NKINDS; i++) {
        kind_t k = kinds[i];
        if (pick && !pick(&k)) continue;
        k.n = n;
        for (int ip = 0; ip <= has_in_place(&k); ip++) {
            k.ip = ip;
            for (int form = F_BLOCK; form <= F_PERS; form++) steady(&k, form);
        }
    }
}

/* the larger sizes: the collectives whose messages then go by rendezvous */
static int large_kind(const kind_t *k)
{
    static const char *names[] = {"bcast", "allreduce", "allgather", "alltoall", "allgatherv", "alltoallv",
                                  "reduce_scatter_block"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(k->name, names[i]) == 0) return 1;
    return 0;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "coll_cdag_alloc");
    rank = mt_rank;
    size = mt_size;
    root = size - 1;
    pvar_open(&allocs, "coll_cdag_allocations");
    pvar_open(&runs, "coll_cdag_runs");
    pvar_open(&early, "coll_cdag_early_allocations");
    if (allocs.ok && runs.ok && size <= 64) {
        /* every layout above fits in 3 x (block + 8) x ranks ints: the
         * strided ones take twice their span */
        long big = 16384;
        cap_ints = (size_t)(3 * (big + 8 * size) * size);
        if (cap_ints < (size_t)(1 << 18)) cap_ints = (size_t)1 << 18;  /* 1 MiB bcast */
        S = mt_malloc(cap_ints * sizeof(int));
        R = mt_malloc(cap_ints * sizeof(int));
        MPI_Datatype vec;
        CHECK_MPI(MPI_Type_vector(1, 1, 2, MPI_INT, &vec));
        CHECK_MPI(MPI_Type_create_resized(vec, 0, 2 * (MPI_Aint)sizeof(int), &strided));
        CHECK_MPI(MPI_Type_commit(&strided));
        MPI_Type_free(&vec);

        all_kinds(100, NULL);
        if (size <= 4) all_kinds((int)big, large_kind);  /* 8 ranks on 2 cores: too slow */
        {
            kind_t k = {"bcast", f_bcast, c_bcast, k_bcast, 1 << 18, 0};  /* 1 MiB */
            steady(&k, F_BLOCK);
            steady(&k, F_NB);
            kind_t g = {"allgather", f_allgather, c_allgather, k_allgather, (1 << 18) / size, 0};  /* 1 MiB */
            steady(&g, F_NB);
        }
        MPI_Type_free(&strided);
        free(S);
        free(R);
    } else if (rank == 0) {
        printf("coll_cdag_alloc: coll/cdag's MPI_T variables are not there: nothing to check\n");
    }
    pvar_close(&allocs);
    pvar_close(&runs);
    pvar_close(&early);
    MPI_T_finalize();
    return mt_finalize();
}
