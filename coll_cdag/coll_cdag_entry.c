/*
 * coll/cdag: the blocking, nonblocking and persistent entry points of the
 * 16 collectives.
 *
 * Each collective has one describe_X() that says how its MPI arguments
 * fill a cdag_call_t (which arguments count at the root only, what
 * MPI_IN_PLACE means for it).  CDAG_ENTRY_POINTS then stamps out its three
 * entry points, which differ only in the mode handed to the generic path
 * (coll_cdag_run.c) and in the arguments passed on to the module below
 * when the generic path does not take the call.
 */
#include "coll_cdag.h"
#include "coll_cdag_entry.h"

/* ------------------------------------------------------------ describe */
static inline int at_root(ompi_communicator_t *comm, int root) { return ompi_comm_rank(comm) == root; }

static void describe_barrier(cdag_call_t *c, ompi_communicator_t *comm)
{
    (void)comm;
    c->coll = CDAG_BARRIER;
}

static void describe_bcast(cdag_call_t *c, void *buff, int count, ompi_datatype_t *dt, int root,
                           ompi_communicator_t *comm)
{
    (void)comm;
    c->coll = CDAG_BCAST;
    c->rbuf = buff;
    c->rcount = count;
    c->rdtype = dt;
    c->root = root;
}

/* reductions: one count and type for both sides; MPI_IN_PLACE as sbuf */
static void describe_reduction(cdag_call_t *c, int coll, const void *sbuf, void *rbuf, int count,
                               ompi_datatype_t *dt, ompi_op_t *op)
{
    c->coll = coll;
    c->sbuf = sbuf;
    c->rbuf = rbuf;
    c->scount = c->rcount = count;
    c->sdtype = c->rdtype = dt;
    c->op = op;
    c->in_place = sbuf == MPI_IN_PLACE;
}

static void describe_reduce(cdag_call_t *c, const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt,
                            ompi_op_t *op, int root, ompi_communicator_t *comm)
{
    /* the receive buffer is significant only at the root */
    describe_reduction(c, CDAG_REDUCE, sbuf, at_root(comm, root) ? rbuf : NULL, count, dt, op);
    c->root = root;
}

static void describe_allreduce(cdag_call_t *c, const void *sbuf, void *rbuf, int count,
                               ompi_datatype_t *dt, ompi_op_t *op, ompi_communicator_t *comm)
{
    (void)comm;
    describe_reduction(c, CDAG_ALLREDUCE, sbuf, rbuf, count, dt, op);
}

static void describe_reduce_scatter_block(cdag_call_t *c, const void *sbuf, void *rbuf, int rcount,
                                          ompi_datatype_t *dt, ompi_op_t *op, ompi_communicator_t *comm)
{
    (void)comm;
    describe_reduction(c, CDAG_REDUCE_SCATTER_BLOCK, sbuf, rbuf, rcount, dt, op);
}

/* Equal counts everywhere (the common case) make it a reduce_scatter_block
 * of that count: the same result with a schedule for equal blocks (the
 * v-form's is cached too, keyed by its counts: cdag_plan_cache.h). */
static void describe_reduce_scatter(cdag_call_t *c, const void *sbuf, void *rbuf, const int *rcounts,
                                    ompi_datatype_t *dt, ompi_op_t *op, ompi_communicator_t *comm)
{
    int n = ompi_comm_size(comm), equal = 1;
    for (int i = 1; i < n && equal; i++) equal = rcounts[i] == rcounts[0];
    if (equal) {
        describe_reduction(c, CDAG_REDUCE_SCATTER_BLOCK, sbuf, rbuf, rcounts[0], dt, op);
        c->as_block = 1;
        return;
    }
    describe_reduction(c, CDAG_REDUCE_SCATTER, sbuf, rbuf, 0, dt, op);
    c->rcount = 0;
    c->rcounts = rcounts;
}

static void describe_scan(cdag_call_t *c, const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt,
                          ompi_op_t *op, ompi_communicator_t *comm)
{
    (void)comm;
    describe_reduction(c, CDAG_SCAN, sbuf, rbuf, count, dt, op);
}

static void describe_exscan(cdag_call_t *c, const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt,
                            ompi_op_t *op, ompi_communicator_t *comm)
{
    (void)comm;
    describe_reduction(c, CDAG_EXSCAN, sbuf, rbuf, count, dt, op);
}

/* gathers: MPI_IN_PLACE as sbuf (its type is then ignored); the receive
 * side of a rooted gather counts at the root only */
static void describe_gather_send(cdag_call_t *c, int coll, const void *sbuf, int scount,
                                 ompi_datatype_t *sdt)
{
    c->coll = coll;
    c->sbuf = sbuf;
    c->scount = scount;
    c->in_place = sbuf == MPI_IN_PLACE;
    c->sdtype = c->in_place ? NULL : sdt;
}

static void describe_gather(cdag_call_t *c, const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf,
                            int rcount, ompi_datatype_t *rdt, int root, ompi_communicator_t *comm)
{
    int me = at_root(comm, root);
    describe_gather_send(c, CDAG_GATHER, sbuf, scount, sdt);
    c->rbuf = me ? rbuf : NULL;
    c->rcount = me ? rcount : 0;
    c->rdtype = me ? rdt : NULL;
    c->root = root;
}

static void describe_gatherv(cdag_call_t *c, const void *sbuf, int scount, ompi_datatype_t *sdt,
                             void *rbuf, const int *rcounts, const int *displs, ompi_datatype_t *rdt,
                             int root, ompi_communicator_t *comm)
{
    int me = at_root(comm, root);
    describe_gather_send(c, CDAG_GATHERV, sbuf, scount, sdt);
    c->rbuf = me ? rbuf : NULL;
    c->rcounts = me ? rcounts : NULL;
    c->rdispls = me ? displs : NULL;
    c->rdtype = me ? rdt : NULL;
    c->root = root;
}

static void describe_allgather(cdag_call_t *c, const void *sbuf, int scount, ompi_datatype_t *sdt,
                               void *rbuf, int rcount, ompi_datatype_t *rdt, ompi_communicator_t *comm)
{
    (void)comm;
    describe_gather_send(c, CDAG_ALLGATHER, sbuf, scount, sdt);
    c->rbuf = rbuf;
    c->rcount = rcount;
    c->rdtype = rdt;
}

static void describe_allgatherv(cdag_call_t *c, const void *sbuf, int scount, ompi_datatype_t *sdt,
                                void *rbuf, const int *rcounts, const int *displs, ompi_datatype_t *rdt,
                                ompi_communicator_t *comm)
{
    (void)comm;
    describe_gather_send(c, CDAG_ALLGATHERV, sbuf, scount, sdt);
    c->rbuf = rbuf;
    c->rcounts = rcounts;
    c->rdispls = displs;
    c->rdtype = rdt;
}

static void describe_alltoall(cdag_call_t *c, const void *sbuf, int scount, ompi_datatype_t *sdt,
                              void *rbuf, int rcount, ompi_datatype_t *rdt, ompi_communicator_t *comm)
{
    (void)comm;
    describe_gather_send(c, CDAG_ALLTOALL, sbuf, scount, sdt);
    c->rbuf = rbuf;
    c->rcount = rcount;
    c->rdtype = rdt;
}

static void describe_alltoallv(cdag_call_t *c, const void *sbuf, const int *scounts, const int *sdispls,
                               ompi_datatype_t *sdt, void *rbuf, const int *rcounts, const int *rdispls,
                               ompi_datatype_t *rdt, ompi_communicator_t *comm)
{
    (void)comm;
    describe_gather_send(c, CDAG_ALLTOALLV, sbuf, 0, sdt);
    c->scounts = c->in_place ? NULL : scounts;
    c->sdispls = c->in_place ? NULL : sdispls;
    c->rbuf = rbuf;
    c->rcounts = rcounts;
    c->rdispls = rdispls;
    c->rdtype = rdt;
}

/* scatters: the send side counts at the root only; MPI_IN_PLACE is the
 * root's receive buffer */
static void describe_scatter_recv(cdag_call_t *c, int coll, void *rbuf, int rcount, ompi_datatype_t *rdt,
                                  int root, int me)
{
    c->coll = coll;
    c->rbuf = rbuf == MPI_IN_PLACE ? NULL : rbuf;
    c->rcount = rcount;
    c->rdtype = rbuf == MPI_IN_PLACE ? NULL : rdt;
    c->root = root;
    c->in_place = me && rbuf == MPI_IN_PLACE;
}

static void describe_scatter(cdag_call_t *c, const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf,
                             int rcount, ompi_datatype_t *rdt, int root, ompi_communicator_t *comm)
{
    int me = at_root(comm, root);
    c->sbuf = me ? sbuf : NULL;
    c->scount = me ? scount : 0;
    c->sdtype = me ? sdt : NULL;
    describe_scatter_recv(c, CDAG_SCATTER, rbuf, rcount, rdt, root, me);
}

static void describe_scatterv(cdag_call_t *c, const void *sbuf, const int *scounts, const int *displs,
                              ompi_datatype_t *sdt, void *rbuf, int rcount, ompi_datatype_t *rdt, int root,
                              ompi_communicator_t *comm)
{
    int me = at_root(comm, root);
    c->sbuf = me ? sbuf : NULL;
    c->scounts = me ? scounts : NULL;
    c->sdispls = me ? displs : NULL;
    c->sdtype = me ? sdt : NULL;
    describe_scatter_recv(c, CDAG_SCATTERV, rbuf, rcount, rdt, root, me);
}

/* ------------------------------------------------------------ entry points */
#define CDAG_FALLBACK 1

/* Run the call on the engine, or say CDAG_FALLBACK. */
static int go(mca_coll_base_module_t *module, ompi_communicator_t *comm, cdag_call_t *c, int mode,
              ompi_request_t **req)
{
    mca_coll_cdag_module_t *m = (mca_coll_cdag_module_t *)module;
    if (!mca_coll_cdag_takes(m, comm, c)) return CDAG_FALLBACK;
    int rc = mca_coll_cdag_run(m, comm, c, mode, req);
    return rc == OMPI_ERR_NOT_SUPPORTED ? CDAG_FALLBACK : rc;
}

/* Hand the call to the module below ours (f: its function in prev). */
#define CDAG_FALL_BACK_TO(f, ...)                                      \
    do {                                                               \
        mca_coll_cdag_module_t *m_ = (mca_coll_cdag_module_t *)module; \
        if (!m_->prev.f) return OMPI_ERR_NOT_SUPPORTED;                \
        return m_->prev.f(__VA_ARGS__, m_->prev.f##_module);           \
    } while (0)

#define CDAG_LIST(...) __VA_ARGS__

/* The three entry points of collective `name`: params is its MPI parameter
 * list and args the same names as arguments, both in parentheses. */
#define CDAG_ENTRY_POINTS(name, params, args)                                                     \
    static int cdag_##name(CDAG_LIST params, mca_coll_base_module_t *module)                      \
    {                                                                                             \
        cdag_call_t c = {0};                                                                      \
        describe_##name(&c, CDAG_LIST args);                                                      \
        int rc = go(module, comm, &c, 0, NULL);                                                   \
        if (rc != CDAG_FALLBACK) return rc;                                                       \
        CDAG_FALL_BACK_TO(coll_##name, CDAG_LIST args);                                           \
    }                                                                                             \
    static int cdag_i##name(CDAG_LIST params, ompi_request_t **request,                           \
                            mca_coll_base_module_t *module)                                       \
    {                                                                                             \
        cdag_call_t c = {0};                                                                      \
        describe_##name(&c, CDAG_LIST args);                                                      \
        int rc = go(module, comm, &c, 1, request);                                                \
        if (rc != CDAG_FALLBACK) return rc;                                                       \
        CDAG_FALL_BACK_TO(coll_i##name, CDAG_LIST args, request);                                 \
    }                                                                                             \
    static int cdag_##name##_init(CDAG_LIST params, struct ompi_info_t *info,                     \
                                  ompi_request_t **request, mca_coll_base_module_t *module)       \
    {                                                                                             \
        cdag_call_t c = {0};                                                                      \
        describe_##name(&c, CDAG_LIST args);                                                      \
        int rc = go(module, comm, &c, 2, request);                                                \
        if (rc != CDAG_FALLBACK) return rc;                                                       \
        CDAG_FALL_BACK_TO(coll_##name##_init, CDAG_LIST args, info, request);                     \
    }

#define SBUF const void *sbuf
#define RBUF void *rbuf
#define COMM ompi_communicator_t *comm

CDAG_ENTRY_POINTS(barrier, (COMM), (comm))
CDAG_ENTRY_POINTS(bcast, (void *buff, int count, ompi_datatype_t *dt, int root, COMM),
                  (buff, count, dt, root, comm))
CDAG_ENTRY_POINTS(reduce, (SBUF, RBUF, int count, ompi_datatype_t *dt, ompi_op_t *op, int root, COMM),
                  (sbuf, rbuf, count, dt, op, root, comm))
CDAG_ENTRY_POINTS(allreduce, (SBUF, RBUF, int count, ompi_datatype_t *dt, ompi_op_t *op, COMM),
                  (sbuf, rbuf, count, dt, op, comm))
CDAG_ENTRY_POINTS(gather, (SBUF, int scount, ompi_datatype_t *sdt, RBUF, int rcount, ompi_datatype_t *rdt,
                           int root, COMM),
                  (sbuf, scount, sdt, rbuf, rcount, rdt, root, comm))
CDAG_ENTRY_POINTS(scatter, (SBUF, int scount, ompi_datatype_t *sdt, RBUF, int rcount, ompi_datatype_t *rdt,
                            int root, COMM),
                  (sbuf, scount, sdt, rbuf, rcount, rdt, root, comm))
CDAG_ENTRY_POINTS(allgather, (SBUF, int scount, ompi_datatype_t *sdt, RBUF, int rcount,
                              ompi_datatype_t *rdt, COMM),
                  (sbuf, scount, sdt, rbuf, rcount, rdt, comm))
CDAG_ENTRY_POINTS(alltoall, (SBUF, int scount, ompi_datatype_t *sdt, RBUF, int rcount,
                             ompi_datatype_t *rdt, COMM),
                  (sbuf, scount, sdt, rbuf, rcount, rdt, comm))
CDAG_ENTRY_POINTS(reduce_scatter_block, (SBUF, RBUF, int rcount, ompi_datatype_t *dt, ompi_op_t *op, COMM),
                  (sbuf, rbuf, rcount, dt, op, comm))
CDAG_ENTRY_POINTS(reduce_scatter, (SBUF, RBUF, const int *rcounts, ompi_datatype_t *dt, ompi_op_t *op,
                                   COMM),
                  (sbuf, rbuf, rcounts, dt, op, comm))
CDAG_ENTRY_POINTS(scan, (SBUF, RBUF, int count, ompi_datatype_t *dt, ompi_op_t *op, COMM),
                  (sbuf, rbuf, count, dt, op, comm))
CDAG_ENTRY_POINTS(exscan, (SBUF, RBUF, int count, ompi_datatype_t *dt, ompi_op_t *op, COMM),
                  (sbuf, rbuf, count, dt, op, comm))
CDAG_ENTRY_POINTS(gatherv, (SBUF, int scount, ompi_datatype_t *sdt, RBUF, const int *rcounts,
                            const int *displs, ompi_datatype_t *rdt, int root, COMM),
                  (sbuf, scount, sdt, rbuf, rcounts, displs, rdt, root, comm))
CDAG_ENTRY_POINTS(scatterv, (SBUF, const int *scounts, const int *displs, ompi_datatype_t *sdt, RBUF,
                             int rcount, ompi_datatype_t *rdt, int root, COMM),
                  (sbuf, scounts, displs, sdt, rbuf, rcount, rdt, root, comm))
CDAG_ENTRY_POINTS(allgatherv, (SBUF, int scount, ompi_datatype_t *sdt, RBUF, const int *rcounts,
                               const int *displs, ompi_datatype_t *rdt, COMM),
                  (sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm))
CDAG_ENTRY_POINTS(alltoallv, (SBUF, const int *scounts, const int *sdispls, ompi_datatype_t *sdt, RBUF,
                              const int *rcounts, const int *rdispls, ompi_datatype_t *rdt, COMM),
                  (sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt, comm))

/* ------------------------------------------------------------ module table */
void mca_coll_cdag_install(mca_coll_cdag_module_t *m, unsigned mask)
{
    mca_coll_base_module_t *s = &m->super;
#define CDAG_INSTALL(name, id)                       \
    if (mask & (1u << (id))) {                       \
        s->coll_##name = cdag_##name;                \
        s->coll_i##name = cdag_i##name;              \
        s->coll_##name##_init = cdag_##name##_init;  \
    }
    CDAG_FOR_EACH_COLL(CDAG_INSTALL)
#undef CDAG_INSTALL
}

void mca_coll_cdag_save_prev(mca_coll_cdag_module_t *m, ompi_communicator_t *comm)
{
    m->nprev = 0;
#define CDAG_SAVE(f)                                          \
    do {                                                      \
        m->prev.f = comm->c_coll->f;                          \
        m->prev.f##_module = comm->c_coll->f##_module;        \
        if (m->prev.f##_module) {                             \
            OBJ_RETAIN(m->prev.f##_module);                   \
            m->prev_modules[m->nprev++] = m->prev.f##_module; \
        }                                                     \
    } while (0);
#define CDAG_SAVE_ALL(name, id) \
    CDAG_SAVE(coll_##name) CDAG_SAVE(coll_i##name) CDAG_SAVE(coll_##name##_init)
    CDAG_FOR_EACH_COLL(CDAG_SAVE_ALL)
#undef CDAG_SAVE_ALL
#undef CDAG_SAVE
}
