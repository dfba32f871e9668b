/*
 * coll_cdag_all: every collective coll/cdag provides, checked element by
 * element.  Inputs are a deterministic function of (rank, index), so each
 * rank knows the exact expected result of every collective (the reference)
 * without trusting any collective implementation; every call runs in its
 * blocking, nonblocking and persistent (MPIX_*_init, started several
 * times with fresh inputs) form.  Covered:
 *  - counts 0, 1, 7, 1000 and 65539 bytes (large enough for rendezvous),
 *    rotating roots;
 *  - MPI_IN_PLACE wherever MPI allows it;
 *  - a derived (strided vector) datatype for the data-movement collectives;
 *  - reductions with predefined ops (sum, max) and user-defined ops, one
 *    of them non-commutative;
 *  - many concurrent nonblocking collectives on one communicator and on
 *    several (dup, split);
 * *  - v-variants with per-rank counts and gapped displacements;
 *  - MPI_Reduce_scatter with equal counts (coll/cdag runs it as
 *    reduce_scatter_block);
 *  - barriers: no rank leaves before the last one entered (entry and exit
 *    times on the machine's monotonic clock, one rank entering late).
 * Run under any coll configuration (the MPI test configs select coll/cdag
 * and force its variants); with MPITEST_VERBOSE=1 it prints the MPI_T
 * counters of coll/cdag, which must show work when it is selected.
 */
#include "mpitest.h"
#include "mpitest_mpit.h"

#include <mpi-ext.h>
#include <dirent.h>
#include <limits.h>

static int rank, size;
static const int counts[] = {0, 1, 7, 1000, 65539};
#define NCOUNTS ((int)(sizeof(counts) / sizeof(counts[0])))

static unsigned char bval(int r, long i, int salt) { return (unsigned char)(r * 31 + i * 7 + salt * 13 + 1); }
static int ival(int r, long i, int salt) { return (r + 1) * (int)(i % 13 + 1) - 3 * r + salt; }

/* form: 0 blocking, 1 nonblocking, 2 persistent */
static const char *form_name[] = {"blocking", "nonblocking", "persistent"};

/* user ops: projection on the left operand (associative, not commutative)
 * and a commutative one (integer sum of squares of nothing: plain sum) */
static void op_left(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[i] = a[i];
}
static void op_usersum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[i] += a[i];
}
static MPI_Op OP_LEFT, OP_USERSUM;

/* run one collective call in the given form; for the persistent form, the
 * request is started `starts` times with `refill` run before each start */
typedef int (*call_fn)(void *ctx, int form, MPI_Request *rq);
static void run_form(call_fn fn, void *ctx, int form, void (*refill)(void *, int), void (*check)(void *, int),
                     int starts)
{
    MPI_Request rq = MPI_REQUEST_NULL;
    if (form == 2) {
        CHECK_MPI(fn(ctx, 2, &rq));
        for (int s = 0; s < starts; s++) {
            if (refill) refill(ctx, s);
            CHECK_MPI(MPI_Start(&rq));
            CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
            if (check) check(ctx, s);
        }
        CHECK_MPI(MPI_Request_free(&rq));
        return;
    }
    if (refill) refill(ctx, 0);
    CHECK_MPI(fn(ctx, form, &rq));
    if (form == 1) CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    if (check) check(ctx, 0);
}

/* ------------------------------------------------------------ bcast */
typedef struct { MPI_Comm comm; int n, root; MPI_Datatype dt; int stride; unsigned char *buf; } bcast_t;
static int bcast_call(void *p, int form, MPI_Request *rq)
{
    bcast_t *b = p;
    if (form == 0) return MPI_Bcast(b->buf, b->n, b->dt, b->root, b->comm);
    if (form == 1) return MPI_Ibcast(b->buf, b->n, b->dt, b->root, b->comm, rq);
    return MPIX_Bcast_init(b->buf, b->n, b->dt, b->root, b->comm, MPI_INFO_NULL, rq);
}
static void bcast_refill(void *p, int salt)
{
    bcast_t *b = p;
    for (long i = 0; i < (long)b->n * b->stride; i++)
        b->buf[i] = (rank == b->root || i % b->stride) ? bval(b->root, i, salt) : 0xEE;
}
static void bcast_check(void *p, int salt)
{
    bcast_t *b = p;
    for (long i = 0; i < (long)b->n * b->stride; i++)
        if (b->buf[i] != bval(b->root, i, salt)) {
            CHECK(0, "bcast n=%d root=%d stride=%d salt=%d: byte %ld is %d, want %d", b->n, b->root,
                  b->stride, salt, i, b->buf[i], bval(b->root, i, salt));
            return;
        }
}

static void test_bcast(int form)
{
    MPI_Datatype vec; /* every other byte */
    MPI_Type_vector(1, 1, 2, MPI_BYTE, &vec);
    MPI_Datatype vec2;
    MPI_Type_create_resized(vec, 0, 2, &vec2);
    MPI_Type_commit(&vec2);
    for (int k = 0; k < NCOUNTS; k++) {
        for (int strided = 0; strided < 2; strided++) {
            bcast_t b = {MPI_COMM_WORLD, counts[k], (k + strided) % size, strided ? vec2 : MPI_BYTE,
                         strided ? 2 : 1, NULL};
            b.buf = mt_malloc((size_t)counts[k] * 2 + 1);
            run_form(bcast_call, &b, form, bcast_refill, bcast_check, 3);
            free(b.buf);
        }
    }
    MPI_Type_free(&vec);
    MPI_Type_free(&vec2);
}

/* ------------------------------------------------------------ reductions */
typedef struct { int coll; MPI_Comm comm; int n, root, inplace; MPI_Op op; int *in, *out; int *rcounts; } red_t;
/* R_RSE: MPI_Reduce_scatter with equal counts (coll/cdag runs it as the block form) */
enum { R_REDUCE, R_ALLREDUCE, R_SCAN, R_EXSCAN, R_RSB, R_RS, R_RSE };

static int red_expect(MPI_Op op, long i, int upto, int salt)
{
    /* reduce over ranks [0, upto) */
    if (op == OP_LEFT) return ival(0, i, salt);
    int v = ival(0, i, salt);
    for (int r = 1; r < upto; r++) {
        int x = ival(r, i, salt);
        if (op == MPI_MAX) v = x > v ? x : v;
        else v += x; /* MPI_SUM and OP_USERSUM */
    }
    return v;
}

static int red_call(void *p, int form, MPI_Request *rq)
{
    red_t *t = p;
    const void *sb = t->inplace ? MPI_IN_PLACE : (const void *)t->in;
    switch (t->coll) {
    case R_REDUCE:
        if (t->inplace && rank != t->root) sb = t->in; /* in place only at the root */
        if (form == 0) return MPI_Reduce(sb, t->out, t->n, MPI_INT, t->op, t->root, t->comm);
        if (form == 1) return MPI_Ireduce(sb, t->out, t->n, MPI_INT, t->op, t->root, t->comm, rq);
        return MPIX_Reduce_init(sb, t->out, t->n, MPI_INT, t->op, t->root, t->comm, MPI_INFO_NULL, rq);
    case R_ALLREDUCE:
        if (form == 0) return MPI_Allreduce(sb, t->out, t->n, MPI_INT, t->op, t->comm);
        if (form == 1) return MPI_Iallreduce(sb, t->out, t->n, MPI_INT, t->op, t->comm, rq);
        return MPIX_Allreduce_init(sb, t->out, t->n, MPI_INT, t->op, t->comm, MPI_INFO_NULL, rq);
    case R_SCAN:
        if (form == 0) return MPI_Scan(sb, t->out, t->n, MPI_INT, t->op, t->comm);
        if (form == 1) return MPI_Iscan(sb, t->out, t->n, MPI_INT, t->op, t->comm, rq);
        return MPIX_Scan_init(sb, t->out, t->n, MPI_INT, t->op, t->comm, MPI_INFO_NULL, rq);
    case R_EXSCAN:
        if (form == 0) return MPI_Exscan(sb, t->out, t->n, MPI_INT, t->op, t->comm);
        if (form == 1) return MPI_Iexscan(sb, t->out, t->n, MPI_INT, t->op, t->comm, rq);
        return MPIX_Exscan_init(sb, t->out, t->n, MPI_INT, t->op, t->comm, MPI_INFO_NULL, rq);
    case R_RSB:
        if (form == 0) return MPI_Reduce_scatter_block(sb, t->out, t->n, MPI_INT, t->op, t->comm);
        if (form == 1) return MPI_Ireduce_scatter_block(sb, t->out, t->n, MPI_INT, t->op, t->comm, rq);
        return MPIX_Reduce_scatter_block_init(sb, t->out, t->n, MPI_INT, t->op, t->comm, MPI_INFO_NULL, rq);
    default:
        if (form == 0) return MPI_Reduce_scatter(sb, t->out, t->rcounts, MPI_INT, t->op, t->comm);
        if (form == 1) return MPI_Ireduce_scatter(sb, t->out, t->rcounts, MPI_INT, t->op, t->comm, rq);
        return MPIX_Reduce_scatter_init(sb, t->out, t->rcounts, MPI_INT, t->op, t->comm, MPI_INFO_NULL, rq);
    }
}

static long red_total(red_t *t)
{
    if (t->coll == R_RSB) return (long)t->n * size;
    if (t->coll == R_RS || t->coll == R_RSE) {
        long s = 0;
        for (int r = 0; r < size; r++) s += t->rcounts[r];
        return s;
    }
    return t->n;
}

static void red_refill(void *p, int salt)
{
    red_t *t = p;
    long total = red_total(t);
    int *src = t->inplace && !(t->coll == R_REDUCE && rank != t->root) ? t->out : t->in;
    for (long i = 0; i < total; i++) src[i] = ival(rank, i, salt);
    if (!(t->inplace && src == t->out))
        for (long i = 0; i < total; i++) t->out[i] = -777;
}

static void red_check(void *p, int salt)
{
    red_t *t = p;
    long n = t->n, base = 0;
    int upto = size;
    switch (t->coll) {
    case R_REDUCE:
        if (rank != t->root) return;
        break;
    case R_SCAN: upto = rank + 1; break;
    case R_EXSCAN:
        if (rank == 0) return; /* undefined */
        upto = rank;
        break;
    case R_RSB: base = (long)rank * t->n; break;
    case R_RS:
    case R_RSE:
        for (int r = 0; r < rank; r++) base += t->rcounts[r];
        n = t->rcounts[rank];
        break;
    default: break;
    }
    for (long i = 0; i < n; i++) {
        int want = red_expect(t->op, base + i, upto, salt);
        if (t->out[i] != want) {
            CHECK(0, "reduction %d n=%d root=%d inplace=%d salt=%d: element %ld is %d, want %d", t->coll,
                  t->n, t->root, t->inplace, salt, i, t->out[i], want);
            return;
        }
    }
}

static void test_reductions(int form)
{
    MPI_Op ops[] = {MPI_SUM, MPI_MAX, OP_USERSUM, OP_LEFT};
    int *rcounts = mt_malloc(sizeof(int) * (size_t)size);
    for (int coll = R_REDUCE; coll <= R_RSE; coll++) {
        for (int k = 0; k < NCOUNTS; k++) {
            int n = counts[k] / 4 + (counts[k] > 0);
            if (counts[k] == 0) n = 0;
            for (int r = 0; r < size; r++) rcounts[r] = coll == R_RSE ? n : (n + r) % 5 + (r == 1 ? n : 0);
            for (int o = 0; o < 4; o++) {
                for (int inplace = 0; inplace < 2; inplace++) {
                    if (coll == R_EXSCAN && inplace) continue; /* rank 0's buffer: allowed but untestable */
                    red_t t = {coll, MPI_COMM_WORLD, n, (k + o) % size, inplace, ops[o], NULL, NULL, rcounts};
                    long total = red_total(&t) + 1;
                    t.in = mt_malloc(sizeof(int) * (size_t)total);
                    t.out = mt_malloc(sizeof(int) * (size_t)total);
                    run_form(red_call, &t, form, red_refill, red_check, 2);
                    free(t.in);
                    free(t.out);
                    if (mt_failures) goto out;
                }
            }
        }
    }
out:
    free(rcounts);
}

/* ------------------------------------------------------------ data movement */
typedef struct { int coll; MPI_Comm comm; int n, root, inplace, strided; MPI_Datatype dt; unsigned char *s, *r; } mv_t;
enum { M_GATHER, M_SCATTER, M_ALLGATHER, M_ALLTOALL };

/* the byte rank `from` contributes at position i of its block for `to` */
static unsigned char mv_val(int from, int to, long i, int salt) { return bval(from * 7 + to, i, salt); }

static int mv_call(void *p, int form, MPI_Request *rq)
{
    mv_t *t = p;
    const void *sb = t->inplace ? MPI_IN_PLACE : (const void *)t->s;
    int n = t->n;
    MPI_Datatype d = t->dt;
    switch (t->coll) {
    case M_GATHER:
        if (rank != t->root) sb = t->s;
        if (form == 0) return MPI_Gather(sb, n, d, t->r, n, d, t->root, t->comm);
        if (form == 1) return MPI_Igather(sb, n, d, t->r, n, d, t->root, t->comm, rq);
        return MPIX_Gather_init(sb, n, d, t->r, n, d, t->root, t->comm, MPI_INFO_NULL, rq);
    case M_SCATTER: {
        void *rb = (t->inplace && rank == t->root) ? MPI_IN_PLACE : (void *)t->r;
        if (form == 0) return MPI_Scatter(t->s, n, d, rb, n, d, t->root, t->comm);
        if (form == 1) return MPI_Iscatter(t->s, n, d, rb, n, d, t->root, t->comm, rq);
        return MPIX_Scatter_init(t->s, n, d, rb, n, d, t->root, t->comm, MPI_INFO_NULL, rq);
    }
    case M_ALLGATHER:
        if (form == 0) return MPI_Allgather(sb, n, d, t->r, n, d, t->comm);
        if (form == 1) return MPI_Iallgather(sb, n, d, t->r, n, d, t->comm, rq);
        return MPIX_Allgather_init(sb, n, d, t->r, n, d, t->comm, MPI_INFO_NULL, rq);
    default:
        if (form == 0) return MPI_Alltoall(sb, n, d, t->r, n, d, t->comm);
        if (form == 1) return MPI_Ialltoall(sb, n, d, t->r, n, d, t->comm, rq);
        return MPIX_Alltoall_init(sb, n, d, t->r, n, d, t->comm, MPI_INFO_NULL, rq);
    }
}

/* byte offset of element i of a block (strided: every other byte) */
static long off(mv_t *t, long i) { return t->strided ? 2 * i : i; }

static void mv_refill(void *p, int salt)
{
    mv_t *t = p;
    long n = t->n, blk = off(t, n);
    memset(t->s, 0xAB, (size_t)(blk * size + 2));
    memset(t->r, 0xCD, (size_t)(blk * size + 2));
    for (int to = 0; to < size; to++)
        for (long i = 0; i < n; i++) {
            /* send layout: gather/allgather one block for everybody, scatter/alltoall one per rank */
            if (t->coll == M_GATHER || t->coll == M_ALLGATHER) {
                if (to == 0) t->s[off(t, i)] = mv_val(rank, 0, i, salt);
            } else {
                t->s[to * blk + off(t, i)] = mv_val(rank, to, i, salt);
            }
        }
    if (t->inplace) {
        /* the input is already in the receive buffer */
        if (t->coll == M_GATHER && rank == t->root)
            for (long i = 0; i < n; i++) t->r[rank * blk + off(t, i)] = mv_val(rank, 0, i, salt);
        if (t->coll == M_ALLGATHER)
            for (long i = 0; i < n; i++) t->r[rank * blk + off(t, i)] = mv_val(rank, 0, i, salt);
        if (t->coll == M_ALLTOALL)
            for (int to = 0; to < size; to++)
                for (long i = 0; i < n; i++) t->r[to * blk + off(t, i)] = mv_val(rank, to, i, salt);
    }
}

static void mv_check(void *p, int salt)
{
    mv_t *t = p;
    long n = t->n, blk = off(t, n);
    for (int from = 0; from < size; from++) {
        for (long i = 0; i < n; i++) {
            long at;
            unsigned char want;
            switch (t->coll) {
            case M_GATHER:
                if (rank != t->root) return;
                at = from * blk + off(t, i);
                want = mv_val(from, 0, i, salt);
                break;
            case M_SCATTER:
                if (from != t->root) continue;
                if (t->inplace && rank == t->root) {
                    at = rank * blk + off(t, i); /* the root's own block stays in the send buffer */
                    if (t->s[at] != mv_val(t->root, rank, i, salt)) {
                        CHECK(0, "scatter in place: root's block changed");
                        return;
                    }
                    continue;
                }
                at = off(t, i);
                want = mv_val(t->root, rank, i, salt);
                break;
            case M_ALLGATHER:
                at = from * blk + off(t, i);
                want = mv_val(from, 0, i, salt);
                break;
            default:
                at = from * blk + off(t, i);
                want = mv_val(from, rank, i, salt);
                break;
            }
            if (t->r[at] != want) {
                CHECK(0, "coll %d n=%d root=%d inplace=%d strided=%d salt=%d: from %d byte %ld is %d, want %d",
                      t->coll, t->n, t->root, t->inplace, t->strided, salt, from, i, t->r[at], want);
                return;
            }
        }
    }
}

static void test_movement(int form)
{
    MPI_Datatype vec, vec2;
    MPI_Type_vector(1, 1, 2, MPI_BYTE, &vec);
    MPI_Type_create_resized(vec, 0, 2, &vec2);
    MPI_Type_commit(&vec2);
    for (int coll = M_GATHER; coll <= M_ALLTOALL; coll++)
        for (int k = 0; k < NCOUNTS; k++) {
            int n = coll == M_ALLTOALL ? counts[k] / 2 : counts[k];
            for (int inplace = 0; inplace < 2; inplace++)
                for (int strided = 0; strided < 2; strided++) {
                    mv_t t = {coll, MPI_COMM_WORLD, n, (k + coll) % size, inplace, strided,
                              strided ? vec2 : MPI_BYTE, NULL, NULL};
                    size_t bytes = (size_t)(strided ? 2 : 1) * (size_t)n * (size_t)size + 2;
                    t.s = mt_malloc(bytes);
                    t.r = mt_malloc(bytes);
                    run_form(mv_call, &t, form, mv_refill, mv_check, 2);
                    free(t.s);
                    free(t.r);
                    if (mt_failures) goto out;
                }
        }
out:
    MPI_Type_free(&vec);
    MPI_Type_free(&vec2);
}

/* ------------------------------------------------------------ v-variants */
static int vcount(int r, int k) { return (r * 3 + k) % 7 + (r == 1 ? 500 * k : 0); }

static void test_vvariants(int form)
{
    int *sc = mt_malloc(sizeof(int) * (size_t)size), *sd = mt_malloc(sizeof(int) * (size_t)size);
    int *rc = mt_malloc(sizeof(int) * (size_t)size), *rd = mt_malloc(sizeof(int) * (size_t)size);
    for (int k = 0; k < 4 && !mt_failures; k++) {
        int root = k % size;
        /* gatherv / allgatherv: rank r contributes vcount(r) bytes; blocks at gapped displacements */
        long tot = 0;
        for (int r = 0; r < size; r++) {
            rc[r] = vcount(r, k);
            rd[r] = (int)tot + 3;
            tot += rc[r] + 3;
        }
        unsigned char *s = mt_malloc((size_t)tot + 8), *rb = mt_malloc((size_t)tot + 8);
        for (int pass = 0; pass < 2; pass++) { /* 0 gatherv, 1 allgatherv */
            for (int i = 0; i < rc[rank]; i++) s[i] = bval(rank, i, k);
            memset(rb, 0x5A, (size_t)tot + 8);
            MPI_Request rq = MPI_REQUEST_NULL;
            if (pass == 0) {
                if (form == 0) CHECK_MPI(MPI_Gatherv(s, rc[rank], MPI_BYTE, rb, rc, rd, MPI_BYTE, root, MPI_COMM_WORLD));
                else if (form == 1) CHECK_MPI(MPI_Igatherv(s, rc[rank], MPI_BYTE, rb, rc, rd, MPI_BYTE, root, MPI_COMM_WORLD, &rq));
                else { CHECK_MPI(MPIX_Gatherv_init(s, rc[rank], MPI_BYTE, rb, rc, rd, MPI_BYTE, root, MPI_COMM_WORLD, MPI_INFO_NULL, &rq)); CHECK_MPI(MPI_Start(&rq)); }
            } else {
                if (form == 0) CHECK_MPI(MPI_Allgatherv(s, rc[rank], MPI_BYTE, rb, rc, rd, MPI_BYTE, MPI_COMM_WORLD));
                else if (form == 1) CHECK_MPI(MPI_Iallgatherv(s, rc[rank], MPI_BYTE, rb, rc, rd, MPI_BYTE, MPI_COMM_WORLD, &rq));
                else { CHECK_MPI(MPIX_Allgatherv_init(s, rc[rank], MPI_BYTE, rb, rc, rd, MPI_BYTE, MPI_COMM_WORLD, MPI_INFO_NULL, &rq)); CHECK_MPI(MPI_Start(&rq)); }
            }
            if (rq != MPI_REQUEST_NULL) CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
            if (rq != MPI_REQUEST_NULL) CHECK_MPI(MPI_Request_free(&rq));
            if (pass == 1 || rank == root) {
                for (int r = 0; r < size; r++) {
                    for (int i = 0; i < rc[r]; i++)
                        if (rb[rd[r] + i] != bval(r, i, k)) {
                            CHECK(0, "%s k=%d: block of %d byte %d wrong", pass ? "allgatherv" : "gatherv", k, r, i);
                            goto next;
                        }
                    if (rb[rd[r] - 1] != 0x5A) { CHECK(0, "%s wrote into a gap", pass ? "allgatherv" : "gatherv"); goto next; }
                }
            }
        next:;
        }
        /* scatterv: root sends vcount(r) bytes to r from gapped displacements */
        for (int i = 0; i < tot; i++) s[i] = bval(root, i, k);
        memset(rb, 0x5A, (size_t)tot + 8);
        {
            MPI_Request rq = MPI_REQUEST_NULL;
            if (form == 0) CHECK_MPI(MPI_Scatterv(s, rc, rd, MPI_BYTE, rb, rc[rank], MPI_BYTE, root, MPI_COMM_WORLD));
            else if (form == 1) CHECK_MPI(MPI_Iscatterv(s, rc, rd, MPI_BYTE, rb, rc[rank], MPI_BYTE, root, MPI_COMM_WORLD, &rq));
            else { CHECK_MPI(MPIX_Scatterv_init(s, rc, rd, MPI_BYTE, rb, rc[rank], MPI_BYTE, root, MPI_COMM_WORLD, MPI_INFO_NULL, &rq)); CHECK_MPI(MPI_Start(&rq)); }
            if (rq != MPI_REQUEST_NULL) CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
            if (rq != MPI_REQUEST_NULL) CHECK_MPI(MPI_Request_free(&rq));
            for (int i = 0; i < rc[rank]; i++)
                if (rb[i] != bval(root, rd[rank] + i, k)) { CHECK(0, "scatterv k=%d byte %d wrong", k, i); break; }
        }
        free(s);
        free(rb);
        /* alltoallv: rank a sends (a + b + k) % 5 * 11 bytes to b */
        long stot = 0, rtot = 0;
        for (int r = 0; r < size; r++) {
            sc[r] = (rank + r + k) % 5 * 11;
            sd[r] = (int)stot + 1;
            stot += sc[r] + 1;
            rc[r] = (r + rank + k) % 5 * 11;
            rd[r] = (int)rtot + 2;
            rtot += rc[r] + 2;
        }
        unsigned char *as = mt_malloc((size_t)stot + 4), *ar = mt_malloc((size_t)rtot + 4);
        for (int r = 0; r < size; r++)
            for (int i = 0; i < sc[r]; i++) as[sd[r] + i] = mv_val(rank, r, i, k);
        memset(ar, 0x5A, (size_t)rtot + 4);
        {
            MPI_Request rq = MPI_REQUEST_NULL;
            if (form == 0) CHECK_MPI(MPI_Alltoallv(as, sc, sd, MPI_BYTE, ar, rc, rd, MPI_BYTE, MPI_COMM_WORLD));
            else if (form == 1) CHECK_MPI(MPI_Ialltoallv(as, sc, sd, MPI_BYTE, ar, rc, rd, MPI_BYTE, MPI_COMM_WORLD, &rq));
            else { CHECK_MPI(MPIX_Alltoallv_init(as, sc, sd, MPI_BYTE, ar, rc, rd, MPI_BYTE, MPI_COMM_WORLD, MPI_INFO_NULL, &rq)); CHECK_MPI(MPI_Start(&rq)); }
            if (rq != MPI_REQUEST_NULL) CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
            if (rq != MPI_REQUEST_NULL) CHECK_MPI(MPI_Request_free(&rq));
            for (int r = 0; r < size; r++)
                for (int i = 0; i < rc[r]; i++)
                    if (ar[rd[r] + i] != mv_val(r, rank, i, k)) { CHECK(0, "alltoallv k=%d from %d byte %d wrong", k, r, i); r = size; break; }
        }
        free(as);
        free(ar);
    }
    free(sc); free(sd); free(rc); free(rd);
}

/* ------------------------------------------------------------ concurrency */
static void test_concurrent(void)
{
    MPI_Comm dup, half;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
    int hr, hs;
    MPI_Comm_rank(half, &hr);
    MPI_Comm_size(half, &hs);
    enum { K = 6 };
    MPI_Request rq[4 * K];
    int in[K][64], out[K][64], hout[K][64], bc[K][300];
    long big = 70000;
    unsigned char *bb[K];
    int nr = 0;
    for (int j = 0; j < K; j++) {
        for (int i = 0; i < 64; i++) in[j][i] = ival(rank, i, j);
        for (int i = 0; i < 300; i++) bc[j][i] = rank == j % size ? ival(j, i, 9) : -1;
        bb[j] = mt_malloc((size_t)big);
        for (long i = 0; i < big; i++) bb[j][i] = rank == (j + 1) % size ? bval(j, i, 3) : 0;
        CHECK_MPI(MPI_Iallreduce(in[j], out[j], 64, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[nr++]));
        CHECK_MPI(MPI_Ibcast(bc[j], 300, MPI_INT, j % size, dup, &rq[nr++]));
        CHECK_MPI(MPI_Iallreduce(in[j], hout[j], 64, MPI_INT, MPI_MAX, half, &rq[nr++]));
        CHECK_MPI(MPI_Ibcast(bb[j], (int)big, MPI_BYTE, (j + 1) % size, MPI_COMM_WORLD, &rq[nr++]));
    }
    CHECK_MPI(MPI_Waitall(nr, rq, MPI_STATUSES_IGNORE));
    for (int j = 0; j < K; j++) {
        for (int i = 0; i < 64; i++) {
            CHECK_EQ(out[j][i], red_expect(MPI_SUM, i, size, j), "concurrent allreduce %d elem %d", j, i);
            int want = INT_MIN;
            for (int r = rank % 2; r < size; r += 2) want = ival(r, i, j) > want ? ival(r, i, j) : want;
            CHECK_EQ(hout[j][i], want, "concurrent allreduce on split %d elem %d", j, i);
        }
        for (int i = 0; i < 300; i++) CHECK_EQ(bc[j][i], ival(j, i, 9), "concurrent bcast on dup %d elem %d", j, i);
        for (long i = 0; i < big; i++)
            if (bb[j][i] != bval(j, i, 3)) { CHECK(0, "concurrent large bcast %d byte %ld", j, i); break; }
        free(bb[j]);
        if (mt_failures) break;
    }
    (void)hr; (void)hs;
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
}

/* MPI_Comm_free with a nonblocking collective still running on the
 * communicator: the operation completes normally (MPI 4.0, 6.4.3). */
static void test_free_while_pending(void)
{
    enum { N = 1 << 18 };
    for (int round = 0; round < 4 && !mt_failures; round++) {
        MPI_Comm dup;
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
        unsigned char *s = mt_malloc((size_t)N * size), *r = mt_malloc((size_t)N * size);
        for (int to = 0; to < size; to++)
            for (long i = 0; i < N; i += 1021) s[(size_t)to * N + i] = mv_val(rank, to, i, 11 + round);
        MPI_Request rq;
        CHECK_MPI(MPI_Ialltoall(s, N, MPI_BYTE, r, N, MPI_BYTE, dup, &rq));
        CHECK_MPI(MPI_Comm_free(&dup));
        CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        for (int from = 0; from < size; from++)
            for (long i = 0; i < N; i += 1021)
                if (r[(size_t)from * N + i] != mv_val(from, rank, i, 11 + round)) {
                    CHECK(0, "alltoall on a freed communicator: from %d byte %ld wrong", from, i);
                    from = size;
                    break;
                }
        free(s);
        free(r);
    }
}

/* One barrier in the given form (persistent: started and waited once on
 * the request made by the caller). */
static void barrier_once(int form, MPI_Request *persistent)
{
    MPI_Request rq;
    if (form == 0) {
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    } else if (form == 1) {
        CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &rq));
        CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    } else {
        CHECK_MPI(MPI_Start(persistent));
        CHECK_MPI(MPI_Wait(persistent, MPI_STATUS_IGNORE));
    }
}

/* No rank leaves a barrier before the last one entered it: one rank (a
 * different one each round) enters 2 ms late, and every rank's exit time
 * must be at or after that rank's entry time (CLOCK_MONOTONIC is one clock
 * for all processes of a machine, the namespace nodes of test/cluster
 * included).  The algorithms differ in who waits for whom (dissemination,
 * butterfly, and the linear fan-in to rank 0 of 4-7 ranks); a release
 * sent before every rank was heard from fails here. */
static void test_barrier(int form)
{
    MPI_Request persistent = MPI_REQUEST_NULL;
    if (form == 2) CHECK_MPI(MPIX_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &persistent));
    for (int i = 0; i < 2 * size + 3; i++) {
        if (rank == i % size) mt_sleep_ms(2);
        double t[2] = {mt_now(), 0};
        barrier_once(form, &persistent);
        t[1] = -mt_now();
        double m[2];  /* latest entry, -(earliest exit) */
        CHECK_MPI(MPI_Allreduce(t, m, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
        CHECK(-m[1] >= m[0], "%s barrier, round %d (rank %d late): a rank left %.1f us before the last one entered",
              form_name[form], i, i % size, (m[0] + m[1]) * 1e6);
    }
    if (form == 2) CHECK_MPI(MPI_Request_free(&persistent));
}

int main(int argc, char **argv)
{
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "coll_cdag_all");
    rank = mt_rank;
    size = mt_size;
    pvar_t runs, compiled, throttled, pools, cache_hits;
    pvar_open(&runs, "coll_cdag_runs");
    pvar_open(&pools, "coll_cdag_throttle_pools");
    pvar_open(&cache_hits, "coll_cdag_token_cache_hits");
    pvar_open(&throttled, "coll_cdag_throttled"); /* counters count from the handle's creation */
    pvar_open(&compiled, "coll_cdag_schedules_compiled");
    MPI_Op_create(op_left, 0, &OP_LEFT);
    MPI_Op_create(op_usersum, 1, &OP_USERSUM);

    for (int form = 0; form < 3 && !mt_failures; form++) {
        char sec[64];
        snprintf(sec, sizeof(sec), "barrier (%s)", form_name[form]);
        mt_section(sec);
        test_barrier(form);
        snprintf(sec, sizeof(sec), "bcast (%s)", form_name[form]);
        mt_section(sec);
        test_bcast(form);
        snprintf(sec, sizeof(sec), "reductions (%s)", form_name[form]);
        mt_section(sec);
        test_reductions(form);
        snprintf(sec, sizeof(sec), "gather/scatter/allgather/alltoall (%s)", form_name[form]);
        mt_section(sec);
        test_movement(form);
        snprintf(sec, sizeof(sec), "v-variants (%s)", form_name[form]);
        mt_section(sec);
        test_vvariants(form);
    }
    mt_section("concurrent nonblocking collectives");
    if (!mt_failures) test_concurrent();
    mt_section("communicator freed while a nonblocking collective runs on it");
    if (!mt_failures) test_free_while_pending();
    mt_section("large alltoall (rendezvous messages in flight)");
    if (!mt_failures) {
        /* messages big enough to stay in flight until the receiver pulls
         * them: admission control (throttling) has something to hold back */
        int n = 1 << 20;
        unsigned char *s = mt_malloc((size_t)n * size), *r = mt_malloc((size_t)n * size);
        for (int to = 0; to < size; to++)
            for (long i = 0; i < n; i += 4093) s[(size_t)to * n + i] = mv_val(rank, to, i, 5);
        MPI_Request rq[2];
        unsigned char *r2 = mt_malloc((size_t)n * size);
        CHECK_MPI(MPI_Ialltoall(s, n, MPI_BYTE, r, n, MPI_BYTE, MPI_COMM_WORLD, &rq[0]));
        CHECK_MPI(MPI_Ialltoall(s, n, MPI_BYTE, r2, n, MPI_BYTE, MPI_COMM_WORLD, &rq[1]));
        CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        for (int from = 0; from < size; from++)
            for (long i = 0; i < n; i += 4093) {
                unsigned char w = mv_val(from, rank, i, 5);
                if (r[(size_t)from * n + i] != w || r2[(size_t)from * n + i] != w) {
                    CHECK(0, "large alltoall: from %d byte %ld wrong", from, i);
                    from = size;
                    break;
                }
            }
        free(s);
        free(r);
        free(r2);
    }

    if (mt_verbose && runs.ok)
        printf("[rank %d] coll_cdag runs %lu, schedules compiled %lu\n", rank, pvar_read(&runs),
               compiled.ok ? pvar_read(&compiled) : 0UL);
    if (getenv("MPITEST_EXPECT_THROTTLED") && atoi(getenv("MPITEST_EXPECT_THROTTLED"))) {
        /* tiny token limits: admission control must have held messages back */
        unsigned long mine = throttled.ok ? pvar_read(&throttled) : 0, all = 0;
        MPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD);
        CHECK(throttled.ok && all > 0, "throttling configured but no message ever waited for admission");
        if (mt_verbose) printf("[rank %d] throttled %lu (job %lu)\n", rank, mine, all);
    }
    pvar_close(&throttled);
    if (getenv("MPITEST_EXPECT_POOLS") && atoi(getenv("MPITEST_EXPECT_POOLS"))) {
        /* throttle node: one node token pool per communicator (WORLD, the
         * dup and the split of the concurrency test), opened at set-up;
         * their names are gone from /dev/shm once every member attached */
        int want = atoi(getenv("MPITEST_EXPECT_POOLS"));
        MPI_Comm d;
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &d));
        unsigned long before = pools.ok ? pvar_read(&pools) : 0;
        MPI_Comm d2;
        CHECK_MPI(MPI_Comm_dup(d, &d2));
        CHECK_MPI(MPI_Barrier(d2));
        CHECK(pools.ok && pvar_read(&pools) == before + 1, "a new communicator opened %lu node pools, not 1",
              pools.ok ? pvar_read(&pools) - before : 0UL);
        CHECK(pools.ok && pvar_read(&pools) >= (unsigned long)want, "%lu node pools opened, expected at least %d",
              pools.ok ? pvar_read(&pools) : 0UL, want);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        int left = 0;
        DIR *dir = opendir("/dev/shm");
        for (struct dirent *e; dir && (e = readdir(dir));)
            if (strncmp(e->d_name, "rdrp-cdag-", 10) == 0) ++left;
        if (dir) closedir(dir);
        CHECK(left == 0, "%d node pool names still in /dev/shm after every rank attached", left);
        MPI_Comm_free(&d2);
        MPI_Comm_free(&d);
    }
    if (getenv("MPITEST_EXPECT_CACHE_HITS") && atoi(getenv("MPITEST_EXPECT_CACHE_HITS"))) {
        unsigned long mine = cache_hits.ok ? pvar_read(&cache_hits) : 0, all = 0;
        MPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG, MPI_SUM, MPI_COMM_WORLD);
        CHECK(cache_hits.ok && all > 0, "token cache configured but never used");
    }
    pvar_close(&pools);
    pvar_close(&cache_hits);
    long long prio = -1;
    if (runs.ok && cvar_int("coll_cdag_priority", &prio) && prio > 30)
        CHECK(pvar_read(&runs) > 0, "coll/cdag selected (priority %lld) but ran no schedule", prio);
    pvar_close(&runs);
    pvar_close(&compiled);
    MPI_Op_free(&OP_LEFT);
    MPI_Op_free(&OP_USERSUM);
    MPI_T_finalize();
    return mt_finalize();
}
