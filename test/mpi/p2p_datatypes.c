/*
 * p2p_datatypes: derived datatypes on the send and/or receive side.
 *
 * Every case sends `scount` x `stype` to the right neighbour and receives
 * `rcount` x `rtype` from the left one (type signatures match), small and
 * large (>= 1 MiB of data, so non-contiguous rendezvous is covered), with
 * the receive posted before the send and with the message unexpected.  The
 * whole memory span of the receive buffer is compared with the oracle
 * MPI_Unpack(MPI_Pack(sender's data)), so gaps/padding of the receive type
 * must be left untouched and nothing outside the type may be written.
 *
 * Cases: vector with stride <-> contiguous, vector <-> vector of another
 * shape, indexed (irregular blocks), struct {int; double} and
 * {char; double; short} with padding, struct -> packed struct, resized type
 * with negative lb, contiguous-of-vector (plain and resized), hvector of
 * struct, MPI_PACKED receive of a derived type and derived receive of an
 * MPI_PACKED send.  Plus: MPI_Get_count vs MPI_Get_elements(_x) on full and
 * partial receives of derived types, zero-size types, and datatypes freed
 * while the request using them is pending.
 */
#include "mpitest.h"

#include <stddef.h>

static int rank, size, left, right;

typedef struct {
    int i;
    double d;
} id_t_;
typedef struct {
    char c;
    double d;
    short s;
} cds_t_;

/* memory span of count x type: [lo, hi) relative to the buffer pointer */
static void span_of(MPI_Datatype t, int count, MPI_Aint *lo, MPI_Aint *hi)
{
    MPI_Aint lb, ext, tlb, text;
    MPI_Type_get_extent(t, &lb, &ext);
    MPI_Type_get_true_extent(t, &tlb, &text);
    if (count == 0) {
        *lo = *hi = 0;
        return;
    }
    *lo = tlb;
    *hi = tlb + text + (MPI_Aint)(count - 1) * ext;
}

typedef struct {
    char *base; /* malloc'ed */
    char *ptr;  /* what is passed to MPI */
    size_t len; /* bytes of the span */
} span_buf;

static span_buf span_alloc(MPI_Datatype t, int count)
{
    span_buf b;
    MPI_Aint lo, hi;
    span_of(t, count, &lo, &hi);
    b.len = (size_t)(hi - lo);
    b.base = mt_malloc(b.len + 1);
    b.ptr = b.base - lo;
    return b;
}

typedef struct {
    const char *name;
    MPI_Datatype stype, rtype;
    int scount, rcount;
} dcase;

#define MAXCASES 40
static dcase cases[MAXCASES];
static int ncases;

static void add(const char *name, MPI_Datatype st, int sc, MPI_Datatype rt, int rc)
{
    dcase *c = &cases[ncases++];
    c->name = name;
    c->stype = st;
    c->scount = sc;
    c->rtype = rt;
    c->rcount = rc;
}

static MPI_Datatype commit(MPI_Datatype t)
{
    CHECK_MPI(MPI_Type_commit(&t));
    return t;
}

static MPI_Datatype vec(int count, int bl, int stride, MPI_Datatype base)
{
    MPI_Datatype t;
    CHECK_MPI(MPI_Type_vector(count, bl, stride, base, &t));
    return commit(t);
}

static MPI_Datatype id_type(void)
{
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {offsetof(id_t_, i), offsetof(id_t_, d)};
    MPI_Datatype ty[2] = {MPI_INT, MPI_DOUBLE}, t, r;
    CHECK_MPI(MPI_Type_create_struct(2, bl, disp, ty, &t));
    CHECK_MPI(MPI_Type_create_resized(t, 0, sizeof(id_t_), &r));
    MPI_Type_free(&t);
    return commit(r);
}

static MPI_Datatype id_packed_type(void) /* int then double, no padding */
{
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {0, sizeof(int)};
    MPI_Datatype ty[2] = {MPI_INT, MPI_DOUBLE}, t;
    CHECK_MPI(MPI_Type_create_struct(2, bl, disp, ty, &t));
    return commit(t);
}

static MPI_Datatype cds_type(void)
{
    int bl[3] = {1, 1, 1};
    MPI_Aint disp[3] = {offsetof(cds_t_, c), offsetof(cds_t_, d), offsetof(cds_t_, s)};
    MPI_Datatype ty[3] = {MPI_CHAR, MPI_DOUBLE, MPI_SHORT}, t, r;
    CHECK_MPI(MPI_Type_create_struct(3, bl, disp, ty, &t));
    CHECK_MPI(MPI_Type_create_resized(t, 0, sizeof(cds_t_), &r));
    MPI_Type_free(&t);
    return commit(r);
}

/* irregular indexed type over doubles: nblk blocks */
static MPI_Datatype idx_type(int nblk, int seed)
{
    int *bl = mt_malloc(sizeof(int) * nblk), *dp = mt_malloc(sizeof(int) * nblk), pos = 0;
    MPI_Datatype t;
    for (int k = 0; k < nblk; k++) {
        bl[k] = (k * 7 + seed) % 5;  /* 0..4, zero-length blocks included */
        dp[k] = pos + (k * 3 + seed) % 4;
        pos = dp[k] + bl[k];
    }
    CHECK_MPI(MPI_Type_indexed(nblk, bl, dp, MPI_DOUBLE, &t));
    free(bl);
    free(dp);
    return commit(t);
}

static int type_size(MPI_Datatype t)
{
    int s = 0;
    MPI_Type_size(t, &s);
    return s;
}

/* negative lb: one int at displacement -8, resized to lb -16, extent 24 */
static MPI_Datatype neg_lb_type(void)
{
    int bl = 1;
    MPI_Aint d = -8;
    MPI_Datatype t, r;
    CHECK_MPI(MPI_Type_create_hindexed(1, &bl, &d, MPI_INT, &t));
    CHECK_MPI(MPI_Type_create_resized(t, -16, 24, &r));
    MPI_Type_free(&t);
    return commit(r);
}

static void build_cases(void)
{
    int big = 1 << 18; /* x 4-byte ints = 1 MiB of data */
    MPI_Datatype v, cv, rv, id, idp, cds, ix1, ix2, neg, hv;

    /* small */
    v = vec(10, 3, 5, MPI_INT);
    add("vector(10,3,5) -> 30 ints", v, 1, MPI_INT, 30);
    add("30 ints -> vector(10,3,5)", MPI_INT, 30, v, 1);
    add("vector(10,3,5) -> vector(30,1,2)", v, 1, vec(30, 1, 2, MPI_INT), 1);
    ix1 = idx_type(20, 1);
    ix2 = idx_type(17, 3);
    /* make the element counts equal: send ix1 x k1 and receive doubles */
    add("indexed -> doubles", ix1, 3, MPI_DOUBLE, 3 * type_size(ix1) / 8);
    add("doubles -> indexed", MPI_DOUBLE, 2 * type_size(ix2) / 8, ix2, 2);
    id = id_type();
    idp = id_packed_type();
    cds = cds_type();
    add("struct{int;double} x 50 -> same", id, 50, id, 50);
    add("struct{int;double} x 50 -> packed struct", id, 50, idp, 50);
    add("struct{char;double;short} x 33 -> same", cds, 33, cds, 33);
    neg = neg_lb_type();
    add("negative-lb resized x 40 -> ints", neg, 40, MPI_INT, 40);
    add("ints -> negative-lb resized x 40", MPI_INT, 40, neg, 40);
    cv = vec(4, 2, 3, MPI_INT);
    {
        MPI_Datatype c, r, cr;
        CHECK_MPI(MPI_Type_contiguous(5, cv, &c));
        add("contiguous(5, vector(4,2,3)) -> ints", commit(c), 1, MPI_INT, 40);
        CHECK_MPI(MPI_Type_create_resized(cv, 0, 12 * sizeof(int), &r));
        CHECK_MPI(MPI_Type_contiguous(5, r, &cr));
        MPI_Type_free(&r);
        add("ints -> contiguous(5, resized vector)", MPI_INT, 40, commit(cr), 1);
        }
    CHECK_MPI(MPI_Type_create_hvector(7, 2, 5 * sizeof(id_t_), id, &hv));
    hv = commit(hv);
    add("hvector of struct -> struct", hv, 2, id, 28);

    /* large: >= 1 MiB of data */
    rv = vec(big, 1, 3, MPI_INT);
    add("LARGE vector(2^18,1,3) -> ints", rv, 1, MPI_INT, big);
    add("LARGE ints -> vector(2^18,1,3)", MPI_INT, big, rv, 1);
    add("LARGE vector(2^18,1,3) -> vector(2^16,4,5)", rv, 1, vec(big / 4, 4, 5, MPI_INT), 1);
    add("LARGE struct{int;double} x 90000 -> packed struct", id, 90000, idp, 90000);
    add("LARGE struct{char;double;short} x 100000 -> same", cds, 100000, cds, 100000);
    add("LARGE indexed x 4000 -> doubles", ix1, 4000, MPI_DOUBLE, 4000 * type_size(ix1) / 8);
    add("LARGE negative-lb x 300000 -> same", neg, 300000, neg, 300000);
    {
        MPI_Datatype c;
        CHECK_MPI(MPI_Type_contiguous(20000, cv, &c));
        add("LARGE contiguous(20000, vector(4,2,3)) -> ints", commit(c), 1, MPI_INT, 160000);
    }
    MPI_Type_free(&cv); /* only used inside other types */
}

/* free every derived type used by the cases, once */
static void free_case_types(void)
{
    MPI_Datatype done[2 * MAXCASES];
    int ndone = 0;
    for (int ci = 0; ci < ncases; ci++) {
        MPI_Datatype t2[2] = {cases[ci].stype, cases[ci].rtype};
        for (int j = 0; j < 2; j++) {
            int ni, na, nd, comb, seen = 0;
            MPI_Type_get_envelope(t2[j], &ni, &na, &nd, &comb);
            if (comb == MPI_COMBINER_NAMED)
                continue;
            for (int k = 0; k < ndone; k++)
                seen |= (done[k] == t2[j]);
            if (!seen) {
                done[ndone++] = t2[j];
                CHECK_MPI(MPI_Type_free(&t2[j]));
            }
        }
    }
}

/* oracle: what the receive span must look like */
static void expected_span(const dcase *c, int src, int tag, int iter, span_buf *exp)
{
    span_buf s = span_alloc(c->stype, c->scount);
    int psize = 0, pos = 0;
    char *packed;
    mt_fill(s.base, s.len, src, tag, iter);
    MPI_Pack_size(c->scount, c->stype, MPI_COMM_WORLD, &psize);
    packed = mt_malloc(psize);
    CHECK_MPI(MPI_Pack(s.ptr, c->scount, c->stype, packed, psize, &pos, MPI_COMM_WORLD));
    memset(exp->base, 0xA5, exp->len);
    {
        int upos = 0;
        CHECK_MPI(MPI_Unpack(packed, pos, &upos, exp->ptr, c->rcount, c->rtype, MPI_COMM_WORLD));
    }
    free(packed);
    free(s.base);
}

static void run_case(int ci, int unexpected)
{
    const dcase *c = &cases[ci];
    int tag = 100 + ci, iter = unexpected;
    span_buf s = span_alloc(c->stype, c->scount);
    span_buf r = span_alloc(c->rtype, c->rcount);
    span_buf e = span_alloc(c->rtype, c->rcount);
    MPI_Request sr, rr = MPI_REQUEST_NULL;
    MPI_Status st;
    int cnt = -1, ssize = type_size(c->stype) * c->scount;
    char sec[200];

    snprintf(sec, sizeof sec, "%s (%s)", c->name, unexpected ? "unexpected" : "posted");
    mt_section(sec);
    mt_fill(s.base, s.len, rank, tag, iter);
    memset(r.base, 0xA5, r.len);
    if (!unexpected) {
        CHECK_MPI(MPI_Irecv(r.ptr, c->rcount, c->rtype, left, tag, MPI_COMM_WORLD, &rr));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Isend(s.ptr, c->scount, c->stype, right, tag, MPI_COMM_WORLD, &sr));
        CHECK_MPI(MPI_Wait(&rr, &st));
    } else {
        CHECK_MPI(MPI_Isend(s.ptr, c->scount, c->stype, right, tag, MPI_COMM_WORLD, &sr));
        CHECK_MPI(MPI_Probe(left, tag, MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Recv(r.ptr, c->rcount, c->rtype, left, tag, MPI_COMM_WORLD, &st));
    }
    CHECK_MPI(MPI_Wait(&sr, MPI_STATUS_IGNORE));
    CHECK_STATUS(&st, left, tag, ssize, "%s", sec);
    MPI_Get_count(&st, c->rtype, &cnt);
    CHECK_EQ(cnt, c->rcount, "%s: MPI_Get_count with the receive type", sec);
    expected_span(c, left, tag, iter, &e);
    if (memcmp(r.base, e.base, r.len) != 0) {
        size_t k = 0;
        while (k < r.len && r.base[k] == e.base[k])
            k++;
        CHECK(0, "%s: receive span differs at byte %zu of %zu: got 0x%02x expected 0x%02x%s", sec,
              k, r.len, (unsigned char)r.base[k], (unsigned char)e.base[k],
              (unsigned char)e.base[k] == 0xA5 ? " (a gap that must stay untouched)" : "");
    }
    free(s.base);
    free(r.base);
    free(e.base);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* derived type <-> MPI_PACKED */
static void test_packed(void)
{
    MPI_Datatype id = id_type();
    int n = 1000, psize = 0, pos = 0, cnt = -1;
    id_t_ *sa = mt_malloc(sizeof(id_t_) * n), *ra = mt_malloc(sizeof(id_t_) * n);
    id_t_ *ea = mt_malloc(sizeof(id_t_) * n);
    char *pk, *rpk;
    MPI_Request sr;
    MPI_Status st;
    mt_section("derived type received as MPI_PACKED and vice versa");
    MPI_Pack_size(n, id, MPI_COMM_WORLD, &psize);
    pk = mt_malloc(psize);
    rpk = mt_malloc(psize);
    for (int k = 0; k < n; k++) {
        sa[k].i = rank * 100000 + k;
        sa[k].d = rank + k * 0.5;
    }
    /* struct -> MPI_PACKED */
    CHECK_MPI(MPI_Isend(sa, n, id, right, 700, MPI_COMM_WORLD, &sr));
    CHECK_MPI(MPI_Recv(rpk, psize, MPI_PACKED, left, 700, MPI_COMM_WORLD, &st));
    CHECK_MPI(MPI_Wait(&sr, MPI_STATUS_IGNORE));
    MPI_Get_count(&st, MPI_PACKED, &cnt);
    CHECK(cnt > 0 && cnt <= psize, "MPI_PACKED count %d (pack size %d)", cnt, psize);
    memset(ea, 0, sizeof(id_t_) * n);
    pos = 0;
    CHECK_MPI(MPI_Unpack(rpk, cnt, &pos, ea, n, id, MPI_COMM_WORLD));
    for (int k = 0; k < n; k++)
        if (!CHECK(ea[k].i == left * 100000 + k && ea[k].d == left + k * 0.5,
                   "struct received as MPI_PACKED, element %d", k))
            break;
    /* MPI_PACKED -> struct */
    pos = 0;
    CHECK_MPI(MPI_Pack(sa, n, id, pk, psize, &pos, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Isend(pk, pos, MPI_PACKED, right, 701, MPI_COMM_WORLD, &sr));
    memset(ra, 0, sizeof(id_t_) * n);
    CHECK_MPI(MPI_Recv(ra, n, id, left, 701, MPI_COMM_WORLD, &st));
    CHECK_MPI(MPI_Wait(&sr, MPI_STATUS_IGNORE));
    MPI_Get_count(&st, id, &cnt);
    CHECK_EQ(cnt, n, "MPI_PACKED received as struct: count");
    for (int k = 0; k < n; k++)
        if (!CHECK(ra[k].i == left * 100000 + k && ra[k].d == left + k * 0.5,
                   "MPI_PACKED received as struct, element %d", k))
            break;
    MPI_Type_free(&id);
    free(sa);
    free(ra);
    free(ea);
    free(pk);
    free(rpk);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* MPI_Get_count vs MPI_Get_elements on full and partial receives */
static void test_get_elements(void)
{
    MPI_Datatype id = id_type(), v = vec(2, 3, 4, MPI_INT), s5, z;
    MPI_Status st;
    int cnt, el;
    MPI_Count elx;
    mt_section("MPI_Get_count vs MPI_Get_elements");
    {
        /* send (int,double,int,double,int) = 2.5 struct elements */
        int bl[5] = {1, 1, 1, 1, 1};
        MPI_Aint d[5] = {0, 8, 16, 24, 32};
        MPI_Datatype ty[5] = {MPI_INT, MPI_DOUBLE, MPI_INT, MPI_DOUBLE, MPI_INT};
        char sb[40];
        id_t_ ra[5];
        memset(sb, 0, sizeof sb);
        for (int k = 0; k < 3; k++) {
            int iv = rank * 10 + k;
            memcpy(sb + 16 * k, &iv, sizeof(int));
            if (k < 2) {
                double dv = rank + k + 0.25;
                memcpy(sb + 16 * k + 8, &dv, sizeof(double));
            }
        }
        CHECK_MPI(MPI_Type_create_struct(5, bl, d, ty, &s5));
        s5 = commit(s5);
        memset(ra, 0x5A, sizeof ra);
        CHECK_MPI(MPI_Sendrecv(sb, 1, s5, right, 800, ra, 5, id, left, 800, MPI_COMM_WORLD, &st));
        MPI_Get_count(&st, id, &cnt);
        MPI_Get_elements(&st, id, &el);
        MPI_Get_elements_x(&st, id, &elx);
        CHECK_EQ(cnt, MPI_UNDEFINED, "Get_count of 2.5 struct elements");
        CHECK_EQ(el, 5, "Get_elements of 2.5 struct elements (basic elements)");
        CHECK_EQ(elx, 5, "Get_elements_x of 2.5 struct elements");
        CHECK_EQ(st.MPI_SOURCE, left, "partial struct: source");
        for (int k = 0; k < 3; k++) {
            CHECK_EQ(ra[k].i, left * 10 + k, "partial struct element %d int", k);
            if (k < 2)
                CHECK(ra[k].d == left + k + 0.25, "partial struct element %d double", k);
        }
        {
            unsigned char u[sizeof(double)];
            memcpy(u, &ra[2].d, sizeof u);
            CHECK_CONST(u, sizeof u, 0x5A, "double of the missing half element untouched");
        }
        MPI_Type_free(&s5);
    }
    {
        /* full: 3 structs -> count 3, elements 6 */
        id_t_ sa[3], ra[3];
        for (int k = 0; k < 3; k++) {
            sa[k].i = k;
            sa[k].d = k;
        }
        CHECK_MPI(MPI_Sendrecv(sa, 3, id, right, 801, ra, 3, id, left, 801, MPI_COMM_WORLD, &st));
        MPI_Get_count(&st, id, &cnt);
        MPI_Get_elements(&st, id, &el);
        CHECK_EQ(cnt, 3, "Get_count of 3 structs");
        CHECK_EQ(el, 6, "Get_elements of 3 structs");
    }
    {
        /* 15 ints into vector(2,3,4) x 4 (6 ints each): 2.5 elements */
        int sa[15], ra[4 * 14];
        for (int k = 0; k < 15; k++)
            sa[k] = rank * 1000 + k;
        memset(ra, 0x5A, sizeof ra);
        CHECK_MPI(MPI_Sendrecv(sa, 15, MPI_INT, right, 802, ra, 4, v, left, 802, MPI_COMM_WORLD,
                               &st));
        MPI_Get_count(&st, v, &cnt);
        MPI_Get_elements(&st, v, &el);
        CHECK_EQ(cnt, MPI_UNDEFINED, "Get_count of 15 ints as vector(2,3,4)");
        CHECK_EQ(el, 15, "Get_elements of 15 ints as vector(2,3,4)");
        /* layout: element e starts at int 7*e (extent (2-1)*4+3 = 7 ints) */
        {
            int got = 0;
            for (int e = 0; e < 3 && got < 15; e++)
                for (int b = 0; b < 2 && got < 15; b++)
                    for (int j = 0; j < 3 && got < 15; j++, got++)
                        CHECK_EQ(ra[e * 7 + b * 4 + j], left * 1000 + got,
                                 "partial vector: int %d", got);
        }
        MPI_Get_count(&st, MPI_BYTE, &cnt); /* byte count, independent of the type */
        CHECK_EQ(cnt, 60, "partial vector: byte count");
    }
    {
        /* zero-size type and zero count */
        char dummy = 7;
        CHECK_MPI(MPI_Type_contiguous(0, MPI_INT, &z));
        z = commit(z);
        CHECK_MPI(MPI_Sendrecv(&dummy, 5, z, right, 803, &dummy, 5, z, left, 803, MPI_COMM_WORLD,
                               &st));
        MPI_Get_elements(&st, z, &el);
        CHECK_EQ(el, 0, "Get_elements of a zero-size type");
        CHECK_EQ(dummy, 7, "zero-size receive does not touch memory");
        CHECK_MPI(MPI_Sendrecv(&dummy, 0, id, right, 804, &dummy, 0, id, left, 804,
                               MPI_COMM_WORLD, &st));
        MPI_Get_count(&st, id, &cnt);
        MPI_Get_elements(&st, id, &el);
        CHECK_EQ(cnt, 0, "Get_count of 0 structs");
        CHECK_EQ(el, 0, "Get_elements of 0 structs");
        MPI_Type_free(&z);
    }
    MPI_Type_free(&id);
    MPI_Type_free(&v);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

/* a datatype may be freed while a communication using it is pending */
static void test_free_pending(void)
{
    int n = 1 << 17;
    int *sa = mt_malloc(sizeof(int) * 3 * n), *ra = mt_malloc(sizeof(int) * 3 * n);
    MPI_Datatype ts = vec(n, 1, 3, MPI_INT), tr = vec(n, 1, 2, MPI_INT);
    MPI_Request rq[2];
    MPI_Status st[2];
    mt_section("datatypes freed while the requests are pending");
    for (int k = 0; k < 3 * n; k++) {
        sa[k] = (k % 3 == 0) ? rank * 7 + k : -1;
        ra[k] = -2;
    }
    CHECK_MPI(MPI_Irecv(ra, 1, tr, left, 900, MPI_COMM_WORLD, &rq[0]));
    CHECK_MPI(MPI_Type_free(&tr));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Isend(sa, 1, ts, right, 900, MPI_COMM_WORLD, &rq[1]));
    CHECK_MPI(MPI_Type_free(&ts));
    CHECK(ts == MPI_DATATYPE_NULL && tr == MPI_DATATYPE_NULL, "Type_free sets DATATYPE_NULL");
    CHECK_MPI(MPI_Waitall(2, rq, st));
    CHECK_EQ(st[0].MPI_SOURCE, left, "source");
    for (int k = 0; k < 2 * n; k++) {
        int want = (k % 2 == 0) ? left * 7 + (k / 2) * 3 : -2;
        if (!CHECK_EQ(ra[k], want, "vector data received with a freed type, int %d", k))
            break;
    }
    free(sa);
    free(ra);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "p2p_datatypes");
    rank = mt_rank;
    size = mt_size;
    if (size < 2) {
        fprintf(stderr, "p2p_datatypes needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    left = (rank - 1 + size) % size;
    right = (rank + 1) % size;

    build_cases();
    for (int ci = 0; ci < ncases; ci++) {
        /* the two sides must carry the same amount of data */
        int ss = type_size(cases[ci].stype) * cases[ci].scount;
        int rs = type_size(cases[ci].rtype) * cases[ci].rcount;
        if (ss != rs) {
            fprintf(stderr, "p2p_datatypes: internal error: case '%s' sends %d, receives %d\n",
                    cases[ci].name, ss, rs);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        run_case(ci, 0);
        run_case(ci, 1);
    }
    test_packed();
    test_get_elements();
    test_free_pending();

    free_case_types();
    return mt_finalize();
}
