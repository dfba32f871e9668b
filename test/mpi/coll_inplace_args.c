/*
 * coll_inplace_args: MPI_IN_PLACE and the arguments MPI says are ignored, in
 * every rooted collective (and the in-place forms of the others), blocking,
 * nonblocking and persistent, for every root.
 *  - ignored arguments hold garbage: a non-root's receive arguments of
 *    Gather(v) and send arguments of Scatter(v) are NULL / -1 /
 *    MPI_DATATYPE_NULL, so is a non-root's receive buffer of Reduce; with
 *    MPI_IN_PLACE the root's (everybody's, for the all- forms) other side is
 *    -1 and MPI_DATATYPE_NULL, as MPICH's coll/nonblocking passes them;
 *  - layouts differ between ranks: the root describes its side with a
 *    resized (strided) type, the others with plain MPI_DOUBLE (MPICH's
 *    coll/scatterv), and in Allgatherv/Alltoallv even ranks use the strided
 *    type, odd ranks the plain one -- the type signatures match, so the
 *    call is legal, and no rank may take a different path than the others;
 *  - counts from 1 to past the rendezvous thresholds.
 * Every received element is checked, and so are the gaps of the strided
 * buffers and the root's own block in place (left exactly as it was).
 */
#include "mpitest.h"

#include <mpi-ext.h>

static int rank, size;
static MPI_Datatype strided; /* one double every two: extent 2 doubles */
static const int counts[] = {1, 7, 1000, 9000};
#define NCOUNTS ((int)(sizeof(counts) / sizeof(counts[0])))
static const char *form_name[] = {"blocking", "nonblocking", "persistent"};
#define GAP (-777.25)

static double val(int r, long i, int salt) { return r * 100000.0 + (double)i + salt * 0.5; }

/* one call in the given form; persistent requests are started twice, REFILL
 * runs before each start (and once before the other forms) */
#define RUN_FORM(form, REFILL, B, I, P)                                           \
    do {                                                                          \
        MPI_Request rq_ = MPI_REQUEST_NULL;                                       \
        if ((form) == 0) {                                                        \
            REFILL;                                                               \
            CHECK_MPI(B);                                                         \
        } else if ((form) == 1) {                                                 \
            REFILL;                                                               \
            CHECK_MPI(I);                                                         \
            CHECK_MPI(MPI_Wait(&rq_, MPI_STATUS_IGNORE));                         \
        } else {                                                                  \
            CHECK_MPI(P);                                                         \
            for (int s_ = 0; s_ < 2; s_++) {                                      \
                REFILL;                                                           \
                CHECK_MPI(MPI_Start(&rq_));                                       \
                CHECK_MPI(MPI_Wait(&rq_, MPI_STATUS_IGNORE));                     \
            }                                                                     \
            CHECK_MPI(MPI_Request_free(&rq_));                                    \
        }                                                                         \
    } while (0)

/* element i of a buffer described by `strided` (stride 2) or MPI_DOUBLE */
static double *at(double *b, long i, int is_strided) { return b + (is_strided ? 2 * i : i); }

static void fill_gaps(double *b, long n) { for (long i = 0; i < 2 * n; i++) b[i] = GAP; }

static int check_elems(double *b, long off, long n, int is_strided, int r, long first, int salt,
                       const char *what)
{
    for (long i = 0; i < n; i++) {
        double want = val(r, first + i, salt), got = *at(b, off + i, is_strided);
        if (got != want)
            return CHECK(0, "%s: element %ld of rank %d's block is %g, expected %g", what, i, r, got, want);
        if (is_strided && b[2 * (off + i) + 1] != GAP)
            return CHECK(0, "%s: gap after element %ld of rank %d's block written", what, i, r);
    }
    return 1;
}

/* ------------------------------------------------------------ gather(v) */
static void test_gather(int form, int root, int n, int v, int in_place)
{
    char what[160];
    int me = rank == root;
    int *rc = mt_malloc(sizeof(int) * size), *rd = mt_malloc(sizeof(int) * size);
    long tot = 0;
    for (int r = 0; r < size; r++) {
        rc[r] = v ? n + r : n;
        rd[r] = (int)tot + (v ? 3 : 0);
        tot = rd[r] + rc[r];
    }
    int mine = rc[rank];
    double *s = mt_malloc(sizeof(double) * (mine + 1));
    double *rb = me ? mt_malloc(sizeof(double) * 2 * (tot + 1)) : NULL;
    snprintf(what, sizeof what, "%s%s %s root %d n %d", v ? "gatherv" : "gather", in_place ? " in place" : "",
             form_name[form], root, n);
    mt_section(what);
#define GATHER_REFILL                                                                      \
    do {                                                                                   \
        for (int i = 0; i < mine; i++) s[i] = val(rank, i, 1);                             \
        if (me) {                                                                          \
            fill_gaps(rb, tot + 1);                                                        \
            if (in_place)                                                                  \
                for (int i = 0; i < mine; i++) *at(rb, rd[rank] + i, 1) = val(rank, i, 1); \
        }                                                                                  \
    } while (0)
    /* the root receives with the strided type; non-roots pass garbage there */
    const void *sb = me && in_place ? MPI_IN_PLACE : s;
    int scount = me && in_place ? -1 : mine;
    MPI_Datatype sdt = me && in_place ? MPI_DATATYPE_NULL : MPI_DOUBLE;
    if (!v) {
        RUN_FORM(form, GATHER_REFILL,
                 MPI_Gather(sb, scount, sdt, rb, me ? n : -1, me ? strided : MPI_DATATYPE_NULL, root,
                            MPI_COMM_WORLD),
                 MPI_Igather(sb, scount, sdt, rb, me ? n : -1, me ? strided : MPI_DATATYPE_NULL, root,
                             MPI_COMM_WORLD, &rq_),
                 MPIX_Gather_init(sb, scount, sdt, rb, me ? n : -1, me ? strided : MPI_DATATYPE_NULL, root,
                                  MPI_COMM_WORLD, MPI_INFO_NULL, &rq_));
    } else {
        RUN_FORM(form, GATHER_REFILL,
                 MPI_Gatherv(sb, scount, sdt, rb, me ? rc : NULL, me ? rd : NULL,
                             me ? strided : MPI_DATATYPE_NULL, root, MPI_COMM_WORLD),
                 MPI_Igatherv(sb, scount, sdt, rb, me ? rc : NULL, me ? rd : NULL,
                              me ? strided : MPI_DATATYPE_NULL, root, MPI_COMM_WORLD, &rq_),
                 MPIX_Gatherv_init(sb, scount, sdt, rb, me ? rc : NULL, me ? rd : NULL,
                                   me ? strided : MPI_DATATYPE_NULL, root, MPI_COMM_WORLD, MPI_INFO_NULL, &rq_));
    }
    if (me)
        for (int r = 0; r < size; r++)
            if (!check_elems(rb, rd[r], rc[r], 1, r, 0, 1, what)) break;
    free(s);
    free(rb);
    free(rc);
    free(rd);
}

/* ------------------------------------------------------------ scatter(v) */
static void test_scatter(int form, int root, int n, int v, int in_place)
{
    char what[160];
    int me = rank == root;
    int *sc = mt_malloc(sizeof(int) * size), *sd = mt_malloc(sizeof(int) * size);
    long tot = 0;
    for (int r = 0; r < size; r++) {
        sc[r] = v ? n + 2 * r : n;
        sd[r] = (int)tot + (v ? 5 : 0);
        tot = sd[r] + sc[r];
    }
    int mine = sc[rank];
    double *sb = me ? mt_malloc(sizeof(double) * 2 * (tot + 1)) : NULL;
    double *rb = mt_malloc(sizeof(double) * (mine + 1));
    snprintf(what, sizeof what, "%s%s %s root %d n %d", v ? "scatterv" : "scatter", in_place ? " in place" : "",
             form_name[form], root, n);
    mt_section(what);
#define SCATTER_REFILL                                                                            \
    do {                                                                                          \
        for (int i = 0; i <= mine; i++) rb[i] = GAP;                                              \
        if (me) {                                                                                 \
            fill_gaps(sb, tot + 1);                                                               \
            for (int r = 0; r < size; r++)                                                        \
                for (int i = 0; i < sc[r]; i++) *at(sb, sd[r] + i, 1) = val(r, i, 2);             \
        }                                                                                         \
    } while (0)
    void *rbuf = me && in_place ? MPI_IN_PLACE : rb;
    int rcount = me && in_place ? -1 : mine;
    MPI_Datatype rdt = me && in_place ? MPI_DATATYPE_NULL : MPI_DOUBLE;
    if (!v) {
        RUN_FORM(form, SCATTER_REFILL,
                 MPI_Scatter(sb, me ? n : -1, me ? strided : MPI_DATATYPE_NULL, rbuf, rcount, rdt, root,
                             MPI_COMM_WORLD),
                 MPI_Iscatter(sb, me ? n : -1, me ? strided : MPI_DATATYPE_NULL, rbuf, rcount, rdt, root,
                              MPI_COMM_WORLD, &rq_),
                 MPIX_Scatter_init(sb, me ? n : -1, me ? strided : MPI_DATATYPE_NULL, rbuf, rcount, rdt, root,
                                   MPI_COMM_WORLD, MPI_INFO_NULL, &rq_));
    } else {
        RUN_FORM(form, SCATTER_REFILL,
                 MPI_Scatterv(sb, me ? sc : NULL, me ? sd : NULL, me ? strided : MPI_DATATYPE_NULL, rbuf, rcount,
                              rdt, root, MPI_COMM_WORLD),
                 MPI_Iscatterv(sb, me ? sc : NULL, me ? sd : NULL, me ? strided : MPI_DATATYPE_NULL, rbuf,
                               rcount, rdt, root, MPI_COMM_WORLD, &rq_),
                 MPIX_Scatterv_init(sb, me ? sc : NULL, me ? sd : NULL, me ? strided : MPI_DATATYPE_NULL, rbuf,
                                    rcount, rdt, root, MPI_COMM_WORLD, MPI_INFO_NULL, &rq_));
    }
    if (me && in_place) {
        /* the root's send buffer is untouched, its own block included */
        for (int r = 0; r < size; r++)
            if (!check_elems(sb, sd[r], sc[r], 1, r, 0, 2, what)) break;
        CHECK(rb[0] == GAP, "%s: the root's unused receive buffer was written", what);
    } else {
        check_elems(rb, 0, mine, 0, rank, 0, 2, what);
        CHECK(rb[mine] == GAP, "%s: written past the received block", what);
    }
    free(sb);
    free(rb);
    free(sc);
    free(sd);
}

/* ------------------------------------------------------------ reduce */
static void test_reduce(int form, int root, int n, int in_place)
{
    char what[160];
    int me = rank == root;
    double *s = mt_malloc(sizeof(double) * n), *rb = me ? mt_malloc(sizeof(double) * (n + 1)) : NULL;
    snprintf(what, sizeof what, "reduce%s %s root %d n %d", in_place ? " in place" : "", form_name[form], root, n);
    mt_section(what);
#define REDUCE_REFILL                                                   \
    do {                                                                \
        for (int i = 0; i < n; i++) s[i] = val(rank, i, 3);             \
        if (me) {                                                       \
            for (int i = 0; i <= n; i++) rb[i] = GAP;                   \
            if (in_place)                                               \
                for (int i = 0; i < n; i++) rb[i] = val(rank, i, 3);    \
        }                                                               \
    } while (0)
    const void *sb = me && in_place ? MPI_IN_PLACE : s;
    RUN_FORM(form, REDUCE_REFILL, MPI_Reduce(sb, rb, n, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD),
             MPI_Ireduce(sb, rb, n, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD, &rq_),
             MPIX_Reduce_init(sb, rb, n, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD, MPI_INFO_NULL, &rq_));
    if (me) {
        for (int i = 0; i < n; i++) {
            double want = 0;
            for (int r = 0; r < size; r++) want += val(r, i, 3);
            if (rb[i] != want) {
                CHECK(0, "%s: element %d is %g, expected %g", what, i, rb[i], want);
                break;
            }
        }
        CHECK(rb[n] == GAP, "%s: written past the result", what);
    }
    free(s);
    free(rb);
}

/* ------------------------------------------------------------ bcast */
static void test_bcast(int form, int root, int n)
{
    char what[160];
    int st = rank == root || rank % 2; /* root and odd ranks strided, the rest plain */
    double *b = mt_malloc(sizeof(double) * 2 * (n + 1));
    snprintf(what, sizeof what, "bcast, layouts differing per rank, %s root %d n %d", form_name[form], root, n);
    mt_section(what);
#define BCAST_REFILL                                                                 \
    do {                                                                             \
        fill_gaps(b, n + 1);                                                         \
        if (rank == root)                                                            \
            for (int i = 0; i < n; i++) *at(b, i, st) = val(root, i, 4);             \
    } while (0)
    MPI_Datatype dt = st ? strided : MPI_DOUBLE;
    RUN_FORM(form, BCAST_REFILL, MPI_Bcast(b, n, dt, root, MPI_COMM_WORLD),
             MPI_Ibcast(b, n, dt, root, MPI_COMM_WORLD, &rq_),
             MPIX_Bcast_init(b, n, dt, root, MPI_COMM_WORLD, MPI_INFO_NULL, &rq_));
    check_elems(b, 0, n, st, root, 0, 4, what);
    free(b);
}

/* ------------------------------------------ in place all-to-all family */
static void test_all_in_place(int form, int n)
{
    char what[160];
    int st = rank % 2; /* odd ranks strided */
    MPI_Datatype dt = st ? strided : MPI_DOUBLE;
    int *c = mt_malloc(sizeof(int) * size), *d = mt_malloc(sizeof(int) * size);
    long tot = 0;
    for (int r = 0; r < size; r++) {
        c[r] = n + r;
        d[r] = (int)tot + 2;
        tot = d[r] + c[r];
    }
    /* room for the largest layout below (alltoallv: n + r + rank + 1 per block) */
    double *b = mt_malloc(sizeof(double) * 2 * ((long)size * (n + 2 * size + 2) + 1));

    snprintf(what, sizeof what, "allgather in place, layouts per rank, %s n %d", form_name[form], n);
    mt_section(what);
#define AG_REFILL                                                                   \
    do {                                                                            \
        fill_gaps(b, (long)size * n + 1);                                           \
        for (int i = 0; i < n; i++) *at(b, (long)rank * n + i, st) = val(rank, i, 5); \
    } while (0)
    RUN_FORM(form, AG_REFILL, MPI_Allgather(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, b, n, dt, MPI_COMM_WORLD),
             MPI_Iallgather(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, b, n, dt, MPI_COMM_WORLD, &rq_),
             MPIX_Allgather_init(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, b, n, dt, MPI_COMM_WORLD, MPI_INFO_NULL,
                                 &rq_));
    for (int r = 0; r < size; r++)
        if (!check_elems(b, (long)r * n, n, st, r, 0, 5, what)) break;

    snprintf(what, sizeof what, "allgatherv in place, layouts per rank, %s n %d", form_name[form], n);
    mt_section(what);
#define AGV_REFILL                                                            \
    do {                                                                      \
        fill_gaps(b, tot + 1);                                                \
        for (int i = 0; i < c[rank]; i++) *at(b, d[rank] + i, st) = val(rank, i, 6); \
    } while (0)
    RUN_FORM(form, AGV_REFILL, MPI_Allgatherv(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, b, c, d, dt, MPI_COMM_WORLD),
             MPI_Iallgatherv(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, b, c, d, dt, MPI_COMM_WORLD, &rq_),
             MPIX_Allgatherv_init(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, b, c, d, dt, MPI_COMM_WORLD,
                                  MPI_INFO_NULL, &rq_));
    for (int r = 0; r < size; r++)
        if (!check_elems(b, d[r], c[r], st, r, 0, 6, what)) break;

    /* alltoall(v) in place: block for rank r holds val(me*1000 + r) going
     * out and must hold val(r*1000 + me) afterwards (same counts both ways) */
    snprintf(what, sizeof what, "alltoall in place, layouts per rank, %s n %d", form_name[form], n);
    mt_section(what);
#define A2A_REFILL                                                                         \
    do {                                                                                   \
        fill_gaps(b, (long)size * n + 1);                                                  \
        for (int r = 0; r < size; r++)                                                     \
            for (int i = 0; i < n; i++) *at(b, (long)r * n + i, st) = val(rank * 1000 + r, i, 7); \
    } while (0)
    RUN_FORM(form, A2A_REFILL, MPI_Alltoall(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, b, n, dt, MPI_COMM_WORLD),
             MPI_Ialltoall(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, b, n, dt, MPI_COMM_WORLD, &rq_),
             MPIX_Alltoall_init(MPI_IN_PLACE, -1, MPI_DATATYPE_NULL, b, n, dt, MPI_COMM_WORLD, MPI_INFO_NULL,
                                &rq_));
    for (int r = 0; r < size; r++)
        if (!check_elems(b, (long)r * n, n, st, r * 1000 + rank, 0, 7, what)) break;

    snprintf(what, sizeof what, "alltoallv in place, layouts per rank, %s n %d", form_name[form], n);
    mt_section(what);
    /* rank a and b exchange n + a + b elements */
    tot = 0;
    for (int r = 0; r < size; r++) {
        c[r] = n + r + rank;
        d[r] = (int)tot + 1;
        tot = d[r] + c[r];
    }
#define A2AV_REFILL                                                                     \
    do {                                                                                \
        fill_gaps(b, tot + 1);                                                          \
        for (int r = 0; r < size; r++)                                                  \
            for (int i = 0; i < c[r]; i++) *at(b, d[r] + i, st) = val(rank * 1000 + r, i, 8); \
    } while (0)
    RUN_FORM(form, A2AV_REFILL,
             MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, b, c, d, dt, MPI_COMM_WORLD),
             MPI_Ialltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, b, c, d, dt, MPI_COMM_WORLD, &rq_),
             MPIX_Alltoallv_init(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, b, c, d, dt, MPI_COMM_WORLD,
                                 MPI_INFO_NULL, &rq_));
    for (int r = 0; r < size; r++)
        if (!check_elems(b, d[r], c[r], st, r * 1000 + rank, 0, 8, what)) break;
    free(b);
    free(c);
    free(d);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "coll_inplace_args");
    rank = mt_rank;
    size = mt_size;
    MPI_Type_create_resized(MPI_DOUBLE, 0, 2 * sizeof(double), &strided);
    MPI_Type_commit(&strided);

    for (int form = 0; form < 3 && !mt_failures; form++)
        for (int k = 0; k < NCOUNTS && !mt_failures; k++) {
            int n = counts[k];
            for (int root = 0; root < size; root++) {
                for (int v = 0; v < 2; v++)
                    for (int ip = 0; ip < 2; ip++) {
                        test_gather(form, root, n, v, ip);
                        test_scatter(form, root, n, v, ip);
                    }
                test_reduce(form, root, n, 0);
                test_reduce(form, root, n, 1);
                test_bcast(form, root, n);
            }
            test_all_in_place(form, n);
        }

    MPI_Type_free(&strided);
    return mt_finalize();
}
