/*
 * coll/cdag: the generic path behind every entry point.  A call becomes an
 * engine spec (bytes for data movement, elements for reductions), buffers
 * the engine can address (the user's, or packed staging for non-contiguous
 * datatypes), and a request that completes from progress.
 */
#include "coll_cdag.h"

#include <stdlib.h>
#include <string.h>

#include "ompi/mca/coll/base/base.h"
#include "opal/datatype/opal_convertor.h"
#include "opal/runtime/opal_progress.h"
#include "ompi/proc/proc.h"
#include "ompi/mca/pml/base/pml_base_bsend.h"

static opal_list_t active_requests;
static int active_init = 0;
/* Under MPI_THREAD_MULTIPLE every thread's opal_progress comes through
 * mca_coll_cdag_progress: without this lock two threads could both collect
 * (and finish) one request, or one could unlink what another walks
 * (mt_coll_threads crashed in progress with 4 threads per rank). */
static opal_mutex_t active_lock = OPAL_MUTEX_STATIC_INIT;
/* requests on the list, changed under active_lock, read without it by the
 * progress fast path (atomically: a plain read of the list raced with
 * activate() in another thread, ThreadSanitizer, mt_coll_threads) */
static int nactive = 0;

/* Finished requests kept for the next call (no allocation per call once
 * warm); a lock, since MPI_THREAD_MULTIPLE callers may share it. */
#define CDAG_SPARE_REQUESTS 32
static mca_coll_cdag_request_t *spare_requests[CDAG_SPARE_REQUESTS];
static int nspare = 0;
static opal_mutex_t spare_lock = OPAL_MUTEX_STATIC_INIT;

static void request_reset(mca_coll_cdag_request_t *r);

/* Set while a blocking call's last opal_progress() runs: that pass is for
 * the rest of Open MPI (the PML's queue), and our own callback in it would
 * only poll the rings and the worker the wait just left (callgrind, 8 B
 * allreduce np 2: 98 of the pass's 132 instructions).  Per thread: under
 * MPI_THREAD_MULTIPLE another thread's progress keeps its callback. */
static _Thread_local int in_final_pass = 0;

/* the finalize leak check: requests made and released (live = made -
 * released - spares), counted where the spare pool grows or overflows,
 * never per call once warm; any thread, so relaxed atomics */
static long requests_made = 0, requests_released = 0;

long mca_coll_cdag_run_live_requests(void)
{
    OPAL_THREAD_LOCK(&spare_lock);
    long live = __atomic_load_n(&requests_made, __ATOMIC_RELAXED) -
                __atomic_load_n(&requests_released, __ATOMIC_RELAXED) - nspare;
    OPAL_THREAD_UNLOCK(&spare_lock);
    return live;
}

static mca_coll_cdag_request_t *request_get(void)
{
    mca_coll_cdag_request_t *r = NULL;
    OPAL_THREAD_LOCK(&spare_lock);
    if (nspare > 0) r = spare_requests[--nspare];
    OPAL_THREAD_UNLOCK(&spare_lock);
    if (r) {
        request_reset(r);
        return r;
    }
    __atomic_fetch_add(&cdag_glue_stats.allocations, 1, __ATOMIC_RELAXED);  /* any thread */
    __atomic_fetch_add(&requests_made, 1, __ATOMIC_RELAXED);
    return OBJ_NEW(mca_coll_cdag_request_t);
}

static void request_put(mca_coll_cdag_request_t *r)
{
    OPAL_THREAD_LOCK(&spare_lock);
    if (nspare < CDAG_SPARE_REQUESTS) {
        spare_requests[nspare++] = r;
        r = NULL;
    }
    OPAL_THREAD_UNLOCK(&spare_lock);
    if (r) {
        __atomic_fetch_add(&requests_released, 1, __ATOMIC_RELAXED);
        OBJ_RELEASE(r);
    }
}

/* malloc on the call path (staging of non-contiguous data, v-variant
 * arrays), counted for coll_cdag_allocations */
static void *call_malloc(size_t n)
{
    __atomic_fetch_add(&cdag_glue_stats.allocations, 1, __ATOMIC_RELAXED);  /* any thread */
    return malloc(n ? n : 1);
}

/* Staging buffers up to this size stay with their request for the next
 * call (so a repeated call with a non-contiguous datatype allocates
 * nothing); larger ones are freed after their run, which bounds what the
 * spare requests hold to 2 x this each. */
#define CDAG_STAGE_KEEP ((size_t)256 * 1024)

/* *buf with room for n bytes (capacity *cap), grown only when too small */
static void *stage_reserve(void **buf, size_t *cap, size_t n)
{
    if (*buf && *cap >= n) return *buf;
    free(*buf);
    *buf = call_malloc(n);
    *cap = *buf ? n : 0;
    return *buf;
}

/* after a run: keep a staging buffer for the next one unless it is large */
static void stage_trim(void **buf, size_t *cap)
{
    if (*cap <= CDAG_STAGE_KEEP) return;
    free(*buf);
    *buf = NULL;
    *cap = 0;
}

/* ------------------------------------------------------------ datatypes */
static size_t dt_size(ompi_datatype_t *dt)
{
    size_t s = 0;
    ompi_datatype_type_size(dt, &s);
    return s;
}

/* count elements of dt laid out as plain bytes at buf + true_lb? */
static int dt_contig(ompi_datatype_t *dt, size_t count)
{
    return count == 0 || dt_size(dt) == 0 ||
           ompi_datatype_is_contiguous_memory_layout(dt, count > 1 ? (int32_t)count : 2);
}

static char *dt_base(const void *buf, ompi_datatype_t *dt)
{
    ptrdiff_t lb, extent;
    ompi_datatype_get_true_extent(dt, &lb, &extent);
    return (char *)buf + lb;
}

static int is_reduction(int coll)
{
    return coll == CDAG_REDUCE || coll == CDAG_ALLREDUCE || coll == CDAG_REDUCE_SCATTER_BLOCK ||
           coll == CDAG_REDUCE_SCATTER || coll == CDAG_SCAN || coll == CDAG_EXSCAN;
}

static int is_vvariant(int coll)
{
    return coll == CDAG_GATHERV || coll == CDAG_SCATTERV || coll == CDAG_ALLGATHERV ||
           coll == CDAG_ALLTOALLV;
}

/* pack count x dt from buf to out (count x its size bytes: the local
 * convertor packs without any header or conversion) */
static void pack_into(void *out, const void *buf, size_t count, ompi_datatype_t *dt)
{
    size_t n = count * dt_size(dt);
    if (n == 0) return;
    opal_convertor_t conv;
    OBJ_CONSTRUCT(&conv, opal_convertor_t);
    opal_convertor_copy_and_prepare_for_send(ompi_proc_local()->super.proc_convertor, &dt->super,
                                             count, buf, 0, &conv);
    struct iovec iov = {out, n};
    uint32_t iovc = 1;
    size_t max = n;
    opal_convertor_pack(&conv, &iov, &iovc, &max);
    OBJ_DESTRUCT(&conv);
}

/* pack count x dt from buf into the staging buffer (*stage, capacity
 * *cap), which holds *len bytes then */
static void *pack_stage(void **stage, size_t *cap, const void *buf, size_t count, ompi_datatype_t *dt,
                        size_t *len)
{
    *len = count * dt_size(dt);
    if (!stage_reserve(stage, cap, *len)) return NULL;
    pack_into(*stage, buf, count, dt);
    return *stage;
}

static void unpack_into(void *buf, size_t count, ompi_datatype_t *dt, const void *src, size_t len)
{
    if (len == 0) return;
    opal_convertor_t conv;
    OBJ_CONSTRUCT(&conv, opal_convertor_t);
    opal_convertor_copy_and_prepare_for_recv(ompi_proc_local()->super.proc_convertor, &dt->super,
                                             count, buf, 0, &conv);
    struct iovec iov = {(void *)src, len};
    uint32_t iovc = 1;
    size_t max = len;
    opal_convertor_unpack(&conv, &iov, &iovc, &max);
    OBJ_DESTRUCT(&conv);
}

/* One side of a v-variant on this rank: n blocks of counts[i] elements of
 * dt at buf + displs[i] extents (a single block for the one-buffer sides). */
typedef struct {
    const void *buf;
    ompi_datatype_t *dt;
    const int *counts, *displs;
    int n;
} vside_t;

static const int zero_displ = 0;

static int vsend_side(const cdag_call_t *c, int rank, int size, vside_t *v)
{
    memset(v, 0, sizeof(*v));
    switch (c->coll) {
    case CDAG_GATHERV: case CDAG_ALLGATHERV:
        if (c->in_place) return 0;
        *v = (vside_t){c->sbuf, c->sdtype, &c->scount, &zero_displ, 1};
        return 1;
    case CDAG_SCATTERV:
        if (rank != c->root) return 0;
        *v = (vside_t){c->sbuf, c->sdtype, c->scounts, c->sdispls, size};
        return 1;
    case CDAG_ALLTOALLV:
        if (c->in_place) return 0;
        *v = (vside_t){c->sbuf, c->sdtype, c->scounts, c->sdispls, size};
        return 1;
    }
    return 0;
}

static int vrecv_side(const cdag_call_t *c, int rank, int size, vside_t *v)
{
    memset(v, 0, sizeof(*v));
    switch (c->coll) {
    case CDAG_GATHERV:
        if (rank != c->root) return 0;
        /* fall through */
    case CDAG_ALLGATHERV: case CDAG_ALLTOALLV:
        *v = (vside_t){c->rbuf, c->rdtype, c->rcounts, c->rdispls, size};
        return 1;
    case CDAG_SCATTERV:
        if (rank == c->root && c->in_place) return 0;
        *v = (vside_t){c->rbuf, c->rdtype, &c->rcount, &zero_displ, 1};
        return 1;
    }
    return 0;
}

/* pack every block of a side back to back into the staging buffer
 * (*stage, capacity *cap), which holds *len bytes then */
static void *vside_pack(const vside_t *v, void **stage, size_t *cap, size_t *len)
{
    size_t esize = dt_size(v->dt), total = 0;
    ptrdiff_t lb, extent;
    ompi_datatype_get_extent(v->dt, &lb, &extent);
    for (int i = 0; i < v->n; ++i) total += (size_t)(v->counts[i] > 0 ? v->counts[i] : 0) * esize;
    char *out = stage_reserve(stage, cap, total);
    if (!out) return NULL;
    size_t at = 0;
    for (int i = 0; i < v->n; ++i) {
        if (v->counts[i] <= 0) continue;
        pack_into(out + at, (const char *)v->buf + (ptrdiff_t)v->displs[i] * extent, (size_t)v->counts[i], v->dt);
        at += (size_t)v->counts[i] * esize;
    }
    *len = total;
    return out;
}

static void vside_unpack(const vside_t *v, const char *stage)
{
    size_t esize = dt_size(v->dt), at = 0;
    ptrdiff_t lb, extent;
    ompi_datatype_get_extent(v->dt, &lb, &extent);
    for (int i = 0; i < v->n; ++i) {
        if (v->counts[i] <= 0) continue;
        size_t n = (size_t)v->counts[i] * esize;
        unpack_into((char *)v->buf + (ptrdiff_t)v->displs[i] * extent, (size_t)v->counts[i], v->dt,
                    stage + at, n);
        at += n;
    }
}

/* Whether two blocks of a contiguous side share an element: a receive
 * layout MPI calls erroneous (MPICH's coll/allgatherv4 puts every block at
 * displacement 0), whose contents are undefined but whose call must
 * return.  The schedule orders a write after every earlier read of the
 * same bytes, so a rank that forwards a block from its receive buffer
 * posts the next receive into those bytes only when that send completed,
 * and a single-copy send completes when its receiver has posted the
 * receive: around a ring each rank waits for the next (hung at 3-4 ranks
 * above the ring limit).  Such a side is received packed back to back
 * instead (nothing overlaps there) and unpacked in block order. */
typedef struct {
    long long lo, hi;
} vspan_t;

static int vspan_cmp(const void *a, const void *b)
{
    long long x = ((const vspan_t *)a)->lo, y = ((const vspan_t *)b)->lo;
    return x < y ? -1 : x > y;
}

static int vside_overlaps(const vside_t *v)
{
    long long end = 0;
    int started = 0, sorted = 1;
    for (int i = 0; i < v->n && sorted; ++i) {  /* the usual case: ascending displacements */
        if (v->counts[i] <= 0) continue;
        if (started && v->displs[i] < end) sorted = 0;
        end = (long long)v->displs[i] + v->counts[i];
        started = 1;
    }
    if (sorted) return 0;
    vspan_t *s = malloc((size_t)v->n * sizeof(*s));
    if (!s) return 1;  /* packed is right for any layout */
    int m = 0;
    for (int i = 0; i < v->n; ++i)
        if (v->counts[i] > 0) s[m++] = (vspan_t){v->displs[i], (long long)v->displs[i] + v->counts[i]};
    qsort(s, (size_t)m, sizeof(*s), vspan_cmp);
    int overlap = 0;
    for (int i = 1; i < m && !overlap; ++i) overlap = s[i].lo < s[i - 1].hi;
    free(s);
    return overlap;
}

/* ------------------------------------------------------------ selection */
int mca_coll_cdag_takes(mca_coll_cdag_module_t *m, ompi_communicator_t *comm, const cdag_call_t *c)
{
    (void)comm;
    /* coll_cdag_collectives names what the application called */
    const int called = c->as_block ? CDAG_REDUCE_SCATTER : c->coll;
    if (!m->gc || !(mca_coll_cdag_params.enabled_mask & (1u << called))) return 0;
    if (is_reduction(c->coll)) {
        /* the engine combines contiguous elements with ompi_op_reduce */
        ompi_datatype_t *dt = c->sdtype;
        if (!ompi_datatype_is_predefined(dt) && ompi_op_is_intrinsic(c->op)) return 0;
        if (!dt_contig(dt, 2)) return 0;
        return 1;
    }
    /* Nothing that may differ between ranks decides: the data movement
     * collectives take any datatype (non-contiguous sides move packed),
     * since a rank that fell back alone would leave the others waiting
     * (a root's strided send type, per-rank layouts of one signature). */
    return 1;
}

/* ------------------------------------------------------------ requests */
/* ctx: the call's struct cdag_red (a request's, or the lean path's on the stack) */
static void reduce_cb(void *ctx, const void *in, void *inout, uint64_t count)
{
    const struct cdag_red *red = (const struct cdag_red *)ctx;
    ompi_op_reduce(red->op, (void *)in, inout, (int)count, red->dt);
}

/* Drop the call's datatypes and op: released if the call retained them
 * (nonblocking and persistent calls: they may outlive the user's handles);
 * a blocking call's live as long as its run and were not retained. */
static void drop_args(mca_coll_cdag_request_t *r, int retained)
{
    if (retained) {
        if (r->call.sdtype) OBJ_RELEASE(r->call.sdtype);
        if (r->call.rdtype) OBJ_RELEASE(r->call.rdtype);
        if (r->call.op) OBJ_RELEASE(r->call.op);
    }
    r->call.sdtype = r->call.rdtype = NULL;
    r->call.op = NULL;
}

/* Free a run's engine op (kept by its communicator for the next call of
 * the same key); staging stays with the request unless it is large. */
static void drop_run(mca_coll_cdag_request_t *r)
{
    if (r->op) cdag_glue_op_free(r->op);
    r->op = NULL;
    stage_trim(&r->send_stage, &r->send_cap);
    stage_trim(&r->recv_stage, &r->recv_cap);
    r->recv_staged = 0;
}

static void request_destroy(mca_coll_cdag_request_t *r)
{
    ompi_communicator_t *comm = r->nbc.super.req_mpi_object.comm;
    drop_run(r);
    drop_args(r, 1);
    OMPI_REQUEST_FINI(&r->nbc.super);
    request_put(r);
    /* last: this may free a communicator the user freed while the request
     * lived, and with it our module, engine state and token pool */
    OBJ_RELEASE(comm);
}

static int request_free(ompi_request_t **req)
{
    mca_coll_cdag_request_t *r = (mca_coll_cdag_request_t *)*req;
    /* acquire: pairs with request_finish's release of active, so what the
     * finishing thread wrote and read before it is ordered before our
     * reads and the reuse that follows.  Open MPI's completion alone does
     * not order them: when the waiter installed a wait-sync,
     * ompi_request_complete publishes with a relaxed exchange and the
     * waiter checks the sync's count without its lock (ThreadSanitizer
     * reported request_free/destroy/reset against request_finish in
     * another thread, mt_coll_threads) */
    if (__atomic_load_n(&r->active, __ATOMIC_ACQUIRE)) {
        r->freed = 1;  /* completes on its own; released then */
    } else {
        request_destroy(r);
    }
    *req = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

static int request_cancel(ompi_request_t *req, int flag)
{
    (void)req;
    (void)flag;
    return OMPI_SUCCESS;  /* collectives cannot be cancelled: they just complete */
}

/* Unpack a staged result into the user's buffer. */
static void unpack_result(mca_coll_cdag_request_t *r, ompi_communicator_t *comm)
{
    const cdag_call_t *c = &r->call;
    if (r->recv_staged) {
        int size = ompi_comm_size(comm);
        size_t count = 0;
        ompi_datatype_t *dt = c->rdtype;
        switch (c->coll) {
        case CDAG_BCAST: count = (size_t)c->rcount; break;
        case CDAG_GATHER: count = (size_t)c->rcount * (size_t)size; break;
        case CDAG_SCATTER: count = (size_t)c->rcount; break;
        case CDAG_ALLGATHER: case CDAG_ALLTOALL: count = (size_t)c->rcount * (size_t)size; break;
        default: break;
        }
        vside_t v;
        if (is_vvariant(c->coll)) {
            if (vrecv_side(c, ompi_comm_rank(comm), size, &v)) vside_unpack(&v, r->recv_stage);
        } else {
            unpack_into(c->rbuf, count, dt, r->recv_stage, r->recv_stage_len);
        }
    }
}

/* Unpack staged results and hand the request to MPI. */
static void request_finish(mca_coll_cdag_request_t *r, int rc)
{
    if (rc == 1) unpack_result(r, r->nbc.super.req_mpi_object.comm);
    r->nbc.super.req_status.MPI_ERROR = rc == 1 ? MPI_SUCCESS : MPI_ERR_INTERN;
    r->nbc.super.req_status._ucount = 0;
    if (r->freed) {
        __atomic_store_n(&r->active, 0, __ATOMIC_RELAXED);
        request_destroy(r);
        return;
    }
    /* release: everything above (and the read of freed) before anyone who
     * sees the request inactive (request_free, request_start) */
    __atomic_store_n(&r->active, 0, __ATOMIC_RELEASE);
    ompi_request_complete(&r->nbc.super, true);  /* last touch: a callback may free it */
}

static void activate(mca_coll_cdag_request_t *r)
{
    OPAL_THREAD_LOCK(&active_lock);
    if (!active_init) {
        OBJ_CONSTRUCT(&active_requests, opal_list_t);
        active_init = 1;
    }
    __atomic_store_n(&r->active, 1, __ATOMIC_RELAXED);
    opal_list_append(&active_requests, &r->active_item);
    __atomic_store_n(&nactive, nactive + 1, __ATOMIC_RELEASE);
    OPAL_THREAD_UNLOCK(&active_lock);
}

int mca_coll_cdag_progress(void)
{
    if (in_final_pass) return 0;
    int n = cdag_glue_progress();
    if (__atomic_load_n(&nactive, __ATOMIC_ACQUIRE) == 0) return n;
    /* collect first: completing may start or free other requests */
    mca_coll_cdag_request_t *done[64];
    int rcs[64], nd = 0;
    OPAL_THREAD_LOCK(&active_lock);
    opal_list_item_t *it = opal_list_get_first(&active_requests);
    while (it != opal_list_get_end(&active_requests) && nd < 64) {
        opal_list_item_t *next = opal_list_get_next(it);
        mca_coll_cdag_request_t *r =
            (mca_coll_cdag_request_t *)((char *)it - offsetof(mca_coll_cdag_request_t, active_item));
        int rc = cdag_glue_op_test(r->op);
        if (rc != 0) {
            opal_list_remove_item(&active_requests, it);
            __atomic_store_n(&nactive, nactive - 1, __ATOMIC_RELEASE);
            done[nd] = r;
            rcs[nd++] = rc;
        }
        it = next;
    }
    OPAL_THREAD_UNLOCK(&active_lock);
    /* finish outside the lock: a completion callback may start another */
    for (int i = 0; i < nd; ++i) request_finish(done[i], rcs[i]);
    return n + nd;
}

/* What a gather, scatter, allgather or alltoall moves on this rank: the
 * elements of each side, and whether this rank reads (*send_used) and
 * writes (*recv_used) its buffers at all. */
static void plain_sides(const cdag_call_t *c, int rank, int size, size_t *scount, size_t *rcount,
                        int *send_used, int *recv_used)
{
    *scount = *rcount = 0;
    switch (c->coll) {
    case CDAG_GATHER: *scount = (size_t)c->scount; *rcount = (size_t)c->rcount * (size_t)size; break;
    case CDAG_SCATTER: *scount = (size_t)c->scount * (size_t)size; *rcount = (size_t)c->rcount; break;
    case CDAG_ALLGATHER: *scount = (size_t)c->scount; *rcount = (size_t)c->rcount * (size_t)size; break;
    case CDAG_ALLTOALL: *scount = (size_t)c->scount * (size_t)size; *rcount = (size_t)c->rcount * (size_t)size; break;
    }
    int root_side_recv = c->coll != CDAG_GATHER || rank == c->root;
    int root_side_send = c->coll != CDAG_SCATTER || rank == c->root;
    /* scatter's root sends its buffer even in place (its own block stays) */
    *send_used = (!c->in_place || c->coll == CDAG_SCATTER) && root_side_send && c->sbuf;
    *recv_used = root_side_recv && !(c->coll == CDAG_SCATTER && c->in_place) && c->rbuf;
}

/* The engine's buffers when nothing needs staging (every side used is
 * contiguous; not a v-variant): 1 with *sb and *rb set (the user's
 * buffers), 0 when a side would be packed (stage_buffers does it). */
static int plain_buffers(const cdag_call_t *c, int rank, int size, const void **sb, void **rb)
{
    *sb = NULL;
    *rb = NULL;
    switch (c->coll) {
    case CDAG_BARRIER:
        return 1;
    case CDAG_BCAST:
        if (!dt_contig(c->rdtype, (size_t)c->rcount)) return 0;
        *rb = dt_base(c->rbuf, c->rdtype);
        return 1;
    case CDAG_GATHER: case CDAG_SCATTER: case CDAG_ALLGATHER: case CDAG_ALLTOALL: {
        size_t sn, rn;
        int su, ru;
        plain_sides(c, rank, size, &sn, &rn, &su, &ru);
        if ((su && !dt_contig(c->sdtype, sn)) || (ru && !dt_contig(c->rdtype, rn))) return 0;
        if (su) *sb = dt_base(c->sbuf, c->sdtype);
        if (ru) *rb = dt_base(c->rbuf, c->rdtype);
        return 1;
    }
    default:
        if (!is_reduction(c->coll)) return 0;
        /* contiguous (mca_coll_cdag_takes) */
        *sb = c->in_place ? NULL : (c->sbuf ? dt_base(c->sbuf, c->sdtype) : NULL);
        *rb = c->rbuf ? dt_base(c->rbuf, c->rdtype ? c->rdtype : c->sdtype) : NULL;
        return 1;
    }
}

/* Pack what the engine reads (and, in place, the data already in the
 * receive buffer) into the request's staging buffers, reused from call
 * to call: sets run_sbuf and run_rbuf. */
static int stage_buffers(mca_coll_cdag_request_t *r, ompi_communicator_t *comm)
{
    const cdag_call_t *c = &r->call;
    int size = ompi_comm_size(comm), rank = ompi_comm_rank(comm);
    size_t len;

    r->recv_staged = 0;
    if (!is_vvariant(c->coll) && plain_buffers(c, rank, size, &r->run_sbuf, &r->run_rbuf)) return OMPI_SUCCESS;
    r->run_sbuf = NULL;
    r->run_rbuf = NULL;
    if (c->coll == CDAG_BCAST) {
        size_t n = (size_t)c->rcount;
        len = n * dt_size(c->rdtype);
        if (!stage_reserve(&r->recv_stage, &r->recv_cap, len)) return OMPI_ERR_OUT_OF_RESOURCE;
        if (rank == c->root) pack_into(r->recv_stage, c->rbuf, n, c->rdtype);
        r->recv_stage_len = len;
        r->recv_staged = 1;
        r->run_rbuf = r->recv_stage;
        return OMPI_SUCCESS;
    }
    if (is_vvariant(c->coll)) {
        /* the engine's Send slot: scatterv's root sends from its buffer
         * in place too (only its own block stays) */
        vside_t v;
        if (vsend_side(c, rank, size, &v) && v.buf) {
            if (!r->vsend_packed) {
                r->run_sbuf = dt_base(v.buf, v.dt);
            } else {
                if (!vside_pack(&v, &r->send_stage, &r->send_cap, &len)) return OMPI_ERR_OUT_OF_RESOURCE;
                r->run_sbuf = r->send_stage;
            }
        }
        if (vrecv_side(c, rank, size, &v) && v.buf) {
            if (!r->vrecv_packed) {
                r->run_rbuf = dt_base(v.buf, v.dt);
            } else {
                /* in place, the receive buffer already holds input
                 * (the own block; alltoallv: everything sent) */
                if (!vside_pack(&v, &r->recv_stage, &r->recv_cap, &len)) return OMPI_ERR_OUT_OF_RESOURCE;
                r->recv_stage_len = len;
                r->recv_staged = 1;
                r->run_rbuf = r->recv_stage;
            }
        }
        return OMPI_SUCCESS;
    }
    /* gather, scatter, allgather, alltoall: stage what is not contiguous */
    size_t scount, rcount;
    int send_used, recv_used;
    plain_sides(c, rank, size, &scount, &rcount, &send_used, &recv_used);
    if (send_used) {
        if (dt_contig(c->sdtype, scount)) {
            r->run_sbuf = dt_base(c->sbuf, c->sdtype);
        } else {
            if (!pack_stage(&r->send_stage, &r->send_cap, c->sbuf, scount, c->sdtype, &len))
                return OMPI_ERR_OUT_OF_RESOURCE;
            r->run_sbuf = r->send_stage;
        }
    }
    if (recv_used) {
        if (dt_contig(c->rdtype, rcount)) {
            r->run_rbuf = dt_base(c->rbuf, c->rdtype);
        } else {
            len = rcount * dt_size(c->rdtype);
            if (!stage_reserve(&r->recv_stage, &r->recv_cap, len)) return OMPI_ERR_OUT_OF_RESOURCE;
            /* in place, the receive buffer already holds input */
            if (c->in_place) pack_into(r->recv_stage, c->rbuf, rcount, c->rdtype);
            r->recv_stage_len = len;
            r->recv_staged = 1;
            r->run_rbuf = r->recv_stage;
        }
    }
    return OMPI_SUCCESS;
}

/* Stage, then start the run and list the request for progress. */
static int request_start_one(mca_coll_cdag_request_t *r, int nonblocking)
{
    int rc = stage_buffers(r, r->nbc.super.req_mpi_object.comm);
    if (rc != OMPI_SUCCESS) return rc;
    r->nbc.super.req_state = OMPI_REQUEST_ACTIVE;
    r->nbc.super.req_complete = REQUEST_PENDING;
    r->nbc.super.req_status.MPI_ERROR = MPI_SUCCESS;
    /* listed only once started: another thread's progress must never test
     * an op that still holds its previous run's (finished) state */
    rc = cdag_glue_op_start(r->op, r->run_sbuf, r->run_rbuf, nonblocking);
    if (rc != 0) {
        __atomic_store_n(&r->active, 0, __ATOMIC_RELAXED);
        return OMPI_ERROR;
    }
    activate(r);
    return OMPI_SUCCESS;
}

static int request_start(size_t count, ompi_request_t **reqs)
{
    for (size_t i = 0; i < count; ++i) {
        mca_coll_cdag_request_t *r = (mca_coll_cdag_request_t *)reqs[i];
        if (__atomic_load_n(&r->active, __ATOMIC_ACQUIRE)) return OMPI_ERR_REQUEST;
        int rc = request_start_one(r, 1);
        if (rc != OMPI_SUCCESS) return rc;
    }
    return OMPI_SUCCESS;
}

/* ------------------------------------------------------------ blocking */
/* The end-of-call pass (run_blocking says why) only matters to buffered
 * sends: with no buffer attached (MPI_Buffer_attach) no Bsend can wait for
 * the space it gives back, and the pass is skipped (callgrind, 8 B bcast
 * at np 2: pml/rdrp's progress in it was about 190 instructions, vader's
 * about 40, of a call of some 1280). */
static void final_pass(void)
{
    if (mca_pml_bsend_addr == NULL) return;
    in_final_pass = 1;
    opal_progress();
    in_final_pass = 0;
}

/* A blocking wait passes the rest of Open MPI every 64th turn; with
 * mpi_yield_when_idle (more ranks than cores: mpirun sets it when
 * oversubscribed) every turn, so that opal_progress() yields the core to
 * the rank being waited for instead of spinning out a time slice. */
static int other_progress_every(void) { return opal_progress_yield_when_idle ? 1 : 64; }

/* The end of a blocking call on either path: rc an OMPI_* error from
 * before it ran, else done is the run's (1 done, else failed); the
 * end-of-call pass if it waited, the result unpacked, the request back to
 * the pool. */
static int end_blocking(mca_coll_cdag_request_t *r, ompi_communicator_t *comm, int rc, int done, int waited)
{
    if (waited) final_pass();
    if (rc == OMPI_SUCCESS && done == 1) unpack_result(r, comm);
    else if (rc == OMPI_SUCCESS) rc = OMPI_ERROR;
    drop_run(r);
    drop_args(r, 0);
    request_put(r);
    return rc;
}

/* A blocking call: nothing of it outlives the call, so it needs no MPI
 * request (no communicator retain, no request init or completion) and no
 * place on the active list (no list lock, no walk of the other runs):
 * this thread stages, starts and drives its own run.  The engine thread
 * never carries it (cdag_glue_op_start with nonblocking 0).  Under
 * MPI_THREAD_MULTIPLE other threads' progress only moves the worker; the
 * run is tested and finished here alone. */
static int run_blocking(mca_coll_cdag_request_t *r, ompi_communicator_t *comm)
{
    int rc = stage_buffers(r, comm);
    if (rc == OMPI_SUCCESS && cdag_glue_op_start(r->op, r->run_sbuf, r->run_rbuf, 0) != 0) rc = OMPI_ERROR;
    if (rc == OMPI_SUCCESS) {
        /* our rings every turn (the UCX worker when the run needs it:
         * cdag_glue_op_wait_turn); the rest of Open MPI (the PML's
         * progress, other components) every 64th, as before */
        int done = cdag_glue_op_test(r->op), spins = 0;  /* done in its start: no pass at all */
        const int every = other_progress_every();
        unsigned turn = 0;
        while (done == 0) {
            if (++spins == every) {
                spins = 0;
                ++cdag_glue_stats.wait_other_passes;
                opal_progress();
            }
            done = cdag_glue_op_wait_turn(r->op, turn++);
        }
        /* and once more at the end if it waited at all.  The
         * collective's messages travel apart from the PML's: a peer that
         * finished a rendezvous (its FIN/ACK gives us back a buffered
         * send's space) before it joined this barrier has that message
         * in our PML's queue, not yet seen.  Over coll/tuned the barrier's
         * own messages come behind it on the same channel; here one
         * pass hands it to the PML before the program's next call
         * (test bsend_after_barrier, MPICH threads/pt2pt/mt_bsendrecv_huge:
         * MPI_ERR_BUFFER in the Bsend after the barrier). */
        return end_blocking(r, comm, rc, done, turn > 0);
    }
    return end_blocking(r, comm, rc, 0, 0);
}

static void other_progress(void)
{
    ++cdag_glue_stats.wait_other_passes;
    opal_progress();
}

/* A blocking call on the direct path (coll_cdag_direct.cc: a tiny
 * ring-only plan walked in place, no op, no executor): staged like any
 * blocking call, with the same end-of-call pass when it waited. */
static int run_direct(mca_coll_cdag_request_t *r, ompi_communicator_t *comm, cdag_glue_direct_t *d, uint32_t sched)
{
    int rc = stage_buffers(r, comm);
    if (rc != OMPI_SUCCESS) return end_blocking(r, comm, rc, 0, 0);
    int waited = 0;
    int done = cdag_glue_direct_run(r->module->gc, d, sched, is_reduction(r->call.coll) ? reduce_cb : NULL, &r->red,
                                    r->run_sbuf, r->run_rbuf, other_progress, (unsigned)other_progress_every(),
                                    &waited);
    return end_blocking(r, comm, rc, done, waited);
}

/* ------------------------------------------------------------ the run */
/* room for the 4 arrays of comm size a v-variant call hands the engine,
 * kept with the request: a repeated call (the engine finds its plan by
 * these arrays) allocates nothing */
static uint64_t *v_arrays(mca_coll_cdag_request_t *r, int size)
{
    size_t n = 4 * (size_t)(size > 0 ? size : 1);
    if (r->varr_cap < n) {
        free(r->varr);
        r->varr = call_malloc(n * sizeof(uint64_t));
        r->varr_cap = r->varr ? n : 0;
    }
    return r->varr;
}

/* v[i] x unit into out (NULL without v) */
static uint64_t *bytes_array(const int *v, int n, size_t unit, uint64_t *out)
{
    if (!v) return NULL;
    for (int i = 0; i < n; ++i) out[i] = (uint64_t)v[i] * unit;
    return out;
}

static size_t dt_extent(ompi_datatype_t *dt)
{
    ptrdiff_t lb, extent;
    ompi_datatype_get_extent(dt, &lb, &extent);
    return (size_t)extent;
}

/* byte offset of every block in the engine's buffer, into out: packed
 * back to back, or where the contiguous type puts it */
static uint64_t *vside_offsets(const vside_t *v, int packed, uint64_t *a)
{
    if (!packed) return bytes_array(v->displs, v->n, dt_extent(v->dt), a);
    uint64_t at = 0;
    for (int i = 0; i < v->n; ++i) {
        a[i] = at;
        at += (uint64_t)(v->counts[i] > 0 ? v->counts[i] : 0) * dt_size(v->dt);
    }
    return a;
}

/* The engine's spec of a call that needs no count arrays (not a
 * v-variant; reduce_scatter's counts the caller adds): 0 for those. */
static int plain_spec(const cdag_call_t *c, int rank, cdag_glue_spec_t *spec)
{
    memset(spec, 0, sizeof(*spec));
    spec->coll = c->coll;
    spec->root = c->root;
    spec->in_place = c->in_place;
    spec->commutative = 1;
    switch (c->coll) {
    case CDAG_BARRIER:
        return 1;
    case CDAG_BCAST:
        spec->count = (uint64_t)c->rcount * dt_size(c->rdtype);
        spec->in_place = 0;
        return 1;
    case CDAG_GATHER: case CDAG_ALLGATHER:
        /* bytes per rank; in place the root's (everybody's) block is the recv type's */
        spec->count = spec->in_place ? (uint64_t)c->rcount * dt_size(c->rdtype)
                                     : (uint64_t)c->scount * dt_size(c->sdtype);
        if (c->coll == CDAG_GATHER && rank != c->root) spec->in_place = 0;
        return 1;
    case CDAG_SCATTER:
        spec->count = (spec->in_place || !c->rdtype) ? (uint64_t)c->scount * dt_size(c->sdtype)
                                                     : (uint64_t)c->rcount * dt_size(c->rdtype);
        if (rank != c->root) spec->in_place = 0;
        return 1;
    case CDAG_ALLTOALL:
        spec->count = spec->in_place ? (uint64_t)c->rcount * dt_size(c->rdtype)
                                     : (uint64_t)c->scount * dt_size(c->sdtype);
        return 1;
    case CDAG_REDUCE: case CDAG_ALLREDUCE: case CDAG_SCAN: case CDAG_EXSCAN:
    case CDAG_REDUCE_SCATTER_BLOCK: case CDAG_REDUCE_SCATTER:
        spec->count = (uint64_t)c->scount;
        spec->elem_size = dt_size(c->sdtype);
        spec->commutative = ompi_op_is_commute(c->op);
        if (c->coll == CDAG_REDUCE && rank != c->root) spec->in_place = 0;
        return c->coll != CDAG_REDUCE_SCATTER;
    }
    return 0;
}

/* May a call's decisions be kept for the next one with the same
 * arguments?  Only with predefined datatypes and op: a freed user type or
 * op may come back at the same address with another layout. */
static int lean_memoizable(const cdag_call_t *c)
{
    return (!c->sdtype || ompi_datatype_is_predefined(c->sdtype)) &&
           (!c->rdtype || ompi_datatype_is_predefined(c->rdtype)) && (!c->op || ompi_op_is_intrinsic(c->op));
}

/* c has the memo's arguments (its buffers aside, but for being NULL) */
static int lean_same(const cdag_call_t *k, const cdag_call_t *c)
{
    return k->coll == c->coll && k->root == c->root && k->scount == c->scount && k->rcount == c->rcount &&
           k->sdtype == c->sdtype && k->rdtype == c->rdtype && k->op == c->op && k->in_place == c->in_place &&
           !k->sbuf == !c->sbuf && !k->rbuf == !c->rbuf && k->as_block == c->as_block;
}

/* A blocking call on the direct path with nothing to stage: no request
 * (pool lock, reset, staging, unpack, put back), the user's buffers and
 * the reduction's op and type from the stack, and a loop of one call
 * finds its spec, buffer offsets and direct plan in the module's memo
 * (cdag_lean_memo_t).  Issue 14: over
 * pml/rdrp an 8 B bcast root ran 815 instructions here against
 * coll/tuned's 693 (callgrind), some 300 of them in that bookkeeping.
 * 1 when it ran the call (*rc its result), 0 for the general path
 * (staging, v-variants, no direct plan). */
static int run_lean(mca_coll_cdag_module_t *m, ompi_communicator_t *comm, const cdag_call_t *c, int *rc)
{
    cdag_lean_memo_t *lm = &m->lean[c->coll];
    cdag_glue_spec_t spec;
    const cdag_glue_spec_t *sp = &lm->spec;
    const void *sb;
    void *rb;
    int fresh = !(lm->valid && lean_same(&lm->key, c));
    if (fresh) {
        int rank = ompi_comm_rank(comm);
        if (!plain_spec(c, rank, &spec) || !plain_buffers(c, rank, ompi_comm_size(comm), &sb, &rb)) return 0;
        sp = &spec;
    } else {
        sb = lm->soff < 0 ? NULL : (const char *)c->sbuf + lm->soff;
        rb = lm->roff < 0 ? NULL : (char *)c->rbuf + lm->roff;
    }
    /* the memo's direct handle while no entry got another shape since */
    int kept = !fresh && cdag_glue_direct_gen(m->gc) == lm->gen;
    cdag_glue_direct_t *d = kept ? lm->d : cdag_glue_direct_find(m->gc, sp);
    if (!d) return 0;
    if (fresh && lean_memoizable(c)) {
        lm->key = *c;
        lm->spec = spec;
        lm->soff = sb ? (const char *)sb - (const char *)c->sbuf : -1;
        lm->roff = rb ? (char *)rb - (char *)c->rbuf : -1;
        lm->valid = 1;
    }
    if (!kept && (!fresh || (lm->valid && lean_same(&lm->key, c)))) {  /* this call's handle is the memo's */
        lm->d = d;
        lm->gen = cdag_glue_direct_gen(m->gc);  /* after the find, which may have filled an entry */
    }
    if (!fresh) ++cdag_glue_stats.lean_hits;
    struct cdag_red red = {c->op, c->sdtype};
    int waited = 0;
    int done = cdag_glue_direct_run(m->gc, d, cdag_glue_comm_next_sched(m->gc), is_reduction(c->coll) ? reduce_cb : NULL,
                                    &red, sb, rb, other_progress, (unsigned)other_progress_every(), &waited);
    if (waited) final_pass();
    *rc = done == 1 ? OMPI_SUCCESS : OMPI_ERROR;
    return 1;
}

int mca_coll_cdag_run(mca_coll_cdag_module_t *m, ompi_communicator_t *comm, const cdag_call_t *call,
                      int mode, ompi_request_t **request)
{
    if (mode == 0) {  /* tiny, ring-only and nothing to stage: no request at all */
        int rc;
        if (run_lean(m, comm, call, &rc)) return rc;
    }
    int size = ompi_comm_size(comm), rank = ompi_comm_rank(comm);
    cdag_glue_spec_t spec;
    memset(&spec, 0, sizeof(spec));
    spec.coll = call->coll;
    spec.root = call->root;
    spec.in_place = call->in_place;
    spec.commutative = 1;
    uint64_t *a1 = NULL, *a2 = NULL, *a3 = NULL, *a4 = NULL, *va = NULL;

    mca_coll_cdag_request_t *r = request_get();
    if (!r) return OMPI_ERR_OUT_OF_RESOURCE;
    if (is_vvariant(call->coll) || call->coll == CDAG_REDUCE_SCATTER) {
        va = v_arrays(r, size);
        if (!va) {
            request_put(r);
            return OMPI_ERR_OUT_OF_RESOURCE;
        }
    }
    r->module = m;
    r->call = *call;
    if (mode != 0) {  /* a blocking call's arguments live as long as its run */
        if (call->sdtype) OBJ_RETAIN(call->sdtype);
        if (call->rdtype) OBJ_RETAIN(call->rdtype);
        if (call->op) OBJ_RETAIN(call->op);
    }

    const cdag_call_t *c = &r->call;
    vside_t sv = {0}, rv = {0};
    if (is_vvariant(c->coll)) {
        r->vsend_packed = vsend_side(c, rank, size, &sv) && !dt_contig(sv.dt, 2);
        r->vrecv_packed = vrecv_side(c, rank, size, &rv) && (!dt_contig(rv.dt, 2) || vside_overlaps(&rv));
    }
    if (is_reduction(c->coll)) {
        r->red.op = c->op;
        r->red.dt = c->sdtype;
    }
    switch (c->coll) {
    case CDAG_REDUCE_SCATTER:
        plain_spec(c, rank, &spec);
        a1 = bytes_array(c->rcounts, size, 1, va);  /* elements */
        if (!a1) goto oom;
        spec.counts = a1;
        break;
    case CDAG_GATHERV: {
        spec.count = spec.in_place ? 0 : (uint64_t)c->scount * dt_size(c->sdtype);
        if (rank == c->root) {
            a1 = bytes_array(c->rcounts, size, dt_size(c->rdtype), va);
            a2 = vside_offsets(&rv, r->vrecv_packed, va + size);
            if (!a1 || !a2) goto oom;
            spec.counts = a1;
            spec.displs = a2;
            if (spec.in_place) spec.count = a1[rank];
        } else {
            spec.in_place = 0;
        }
        break;
    }
    case CDAG_SCATTERV: {
        spec.count = (spec.in_place || rank != c->root || !c->rdtype)
                         ? 0 : (uint64_t)c->rcount * dt_size(c->rdtype);
        if (rank == c->root) {
            a1 = bytes_array(c->scounts, size, dt_size(c->sdtype), va);
            a2 = vside_offsets(&sv, r->vsend_packed, va + size);
            if (!a1 || !a2) goto oom;
            spec.counts = a1;
            spec.displs = a2;
            spec.count = a1[rank];
        } else {
            spec.count = (uint64_t)c->rcount * dt_size(c->rdtype);
            spec.in_place = 0;
        }
        break;
    }
    case CDAG_ALLGATHERV:
        a1 = bytes_array(c->rcounts, size, dt_size(c->rdtype), va);
        a2 = vside_offsets(&rv, r->vrecv_packed, va + size);
        if (!a1 || !a2) goto oom;
        spec.counts = a1;
        spec.displs = a2;
        break;
    case CDAG_ALLTOALLV: {
        /* in place the input has the receive layout */
        const vside_t *in = spec.in_place ? &rv : &sv;
        a1 = bytes_array(in->counts, size, dt_size(in->dt), va);
        a2 = vside_offsets(in, spec.in_place ? r->vrecv_packed : r->vsend_packed, va + size);
        a3 = bytes_array(c->rcounts, size, dt_size(c->rdtype), va + 2 * size);
        a4 = vside_offsets(&rv, r->vrecv_packed, va + 3 * size);
        if (!a1 || !a2 || !a3 || !a4) goto oom;
        spec.counts = a1;
        spec.displs = a2;
        spec.rcounts = a3;
        spec.rdispls = a4;
        break;
    }
    default:
        plain_spec(c, rank, &spec);
        break;
    }

    int err = 0;
    uint32_t sched = cdag_glue_comm_next_sched(m->gc);
    if (mode == 0) {  /* tiny and ring-only: no op, no executor */
        cdag_glue_direct_t *d = cdag_glue_direct_find(m->gc, &spec);
        if (d) return run_direct(r, comm, d, sched);
    }
    r->op = cdag_glue_op_create(m->gc, &spec, sched, is_reduction(c->coll) ? reduce_cb : NULL, &r->red, &err);
    if (!r->op) {
        CDAG_VERBOSE(1, "cannot build a schedule for collective %d (error %d)", c->coll, err);
        drop_args(r, mode != 0);
        request_put(r);
        return OMPI_ERR_NOT_SUPPORTED;
    }
    if (mca_coll_cdag_params.verbose >= CDAG_EXPLAIN_LEVEL) {
        /* once per compiled plan: the schedule this call gets */
        char what[256];
        if (cdag_glue_op_explain(r->op, what, sizeof(what)))
            CDAG_VERBOSE(CDAG_EXPLAIN_LEVEL, "plan: %s (cid %u) rank %d: %s", comm->c_name,
                         comm->c_contextid, rank, what);
    }

    if (mode == 0) return run_blocking(r, comm);

    OMPI_REQUEST_INIT(&r->nbc.super, mode == 2);
    r->nbc.super.req_type = OMPI_REQUEST_COLL;
    /* MPI_Comm_free does not wait for pending operations: they complete
     * normally, so the request keeps the communicator alive */
    OBJ_RETAIN(comm);
    r->nbc.super.req_mpi_object.comm = comm;
    r->nbc.super.req_free = request_free;
    r->nbc.super.req_cancel = request_cancel;
    r->nbc.super.req_start = request_start;
    r->persistent = mode == 2;

    if (mode == 2) {
        r->nbc.super.req_state = OMPI_REQUEST_INACTIVE;
        r->nbc.super.req_complete = REQUEST_COMPLETED;
        *request = &r->nbc.super;
        return OMPI_SUCCESS;
    }
    int rc = request_start_one(r, mode == 1);
    if (rc != OMPI_SUCCESS) {
        request_destroy(r);
        return rc;
    }
    if (mode == 1) {
        *request = &r->nbc.super;
        return OMPI_SUCCESS;
    }
    return OMPI_SUCCESS;

oom:
    drop_args(r, mode != 0);
    request_put(r);
    return OMPI_ERR_OUT_OF_RESOURCE;
}

static void request_construct(mca_coll_cdag_request_t *r)
{
    OBJ_CONSTRUCT(&r->active_item, opal_list_item_t);
    /* kept across reuse (request_reset leaves them) */
    r->send_stage = r->recv_stage = NULL;
    r->send_cap = r->recv_cap = 0;
    r->varr = NULL;
    r->varr_cap = 0;
    request_reset(r);
}

/* every field a call sets, as a new request has them */
static void request_reset(mca_coll_cdag_request_t *r)
{
    /* what ompi_coll_base_retain_* of the last call hooked in */
    r->nbc.cb.req_complete_cb = NULL;
    r->nbc.req_complete_cb_data = NULL;
    r->nbc.data.objs.objs[0] = r->nbc.data.objs.objs[1] = NULL;
    r->module = NULL;
    r->op = NULL;
    memset(&r->call, 0, sizeof(r->call));
    r->recv_stage_len = 0;
    r->recv_staged = 0;
    r->vsend_packed = r->vrecv_packed = 0;
    r->run_sbuf = NULL;
    r->run_rbuf = NULL;
    r->red.op = NULL;
    r->red.dt = NULL;
    r->persistent = r->freed = 0;
    __atomic_store_n(&r->active, 0, __ATOMIC_RELAXED);
}

static void request_destruct(mca_coll_cdag_request_t *r)
{
    free(r->send_stage);
    free(r->recv_stage);
    free(r->varr);
    OBJ_DESTRUCT(&r->active_item);
}

OBJ_CLASS_INSTANCE(mca_coll_cdag_request_t, ompi_coll_base_nbc_request_t, request_construct, request_destruct);

void mca_coll_cdag_run_fini(void)
{
    while (nspare > 0) {
        mca_coll_cdag_request_t *r = spare_requests[--nspare];
        OBJ_RELEASE(r);  /* a macro: evaluates its argument more than once */
    }
    if (active_init) {
        OBJ_DESTRUCT(&active_requests);
        active_init = 0;
        __atomic_store_n(&nactive, 0, __ATOMIC_RELEASE);
    }
}
