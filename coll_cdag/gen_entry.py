# generates coll_cdag_entry.c (the 48 entry points); kept in the repo as coll_cdag/gen_entry.py
colls = [
 # name, CDAG id, params (C decl list), call-struct init, args passed to prev (names)
 ("barrier", "CDAG_BARRIER", "ompi_communicator_t *comm", "", "comm"),
 ("bcast", "CDAG_BCAST", "void *buff, int count, ompi_datatype_t *dt, int root, ompi_communicator_t *comm",
  "c.rbuf = buff; c.rcount = count; c.rdtype = dt; c.root = root;", "buff, count, dt, root, comm"),
 ("reduce", "CDAG_REDUCE", "const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt, ompi_op_t *op, int root, ompi_communicator_t *comm",
  "c.sbuf = sbuf; c.rbuf = ompi_comm_rank(comm) == root ? rbuf : NULL; c.scount = c.rcount = count; c.sdtype = c.rdtype = dt; c.op = op; c.root = root;",
  "sbuf, rbuf, count, dt, op, root, comm"),
 ("allreduce", "CDAG_ALLREDUCE", "const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt, ompi_op_t *op, ompi_communicator_t *comm",
  "c.sbuf = sbuf; c.rbuf = rbuf; c.scount = c.rcount = count; c.sdtype = c.rdtype = dt; c.op = op;",
  "sbuf, rbuf, count, dt, op, comm"),
 ("gather", "CDAG_GATHER", "const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, int rcount, ompi_datatype_t *rdt, int root, ompi_communicator_t *comm",
  "int me = ompi_comm_rank(comm) == root; c.sbuf = sbuf; c.scount = scount; c.sdtype = sbuf == MPI_IN_PLACE ? NULL : sdt; c.rbuf = me ? rbuf : NULL; c.rcount = me ? rcount : 0; c.rdtype = me ? rdt : NULL; c.root = root;",
  "sbuf, scount, sdt, rbuf, rcount, rdt, root, comm"),
 ("scatter", "CDAG_SCATTER", "const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, int rcount, ompi_datatype_t *rdt, int root, ompi_communicator_t *comm",
  "int me = ompi_comm_rank(comm) == root; c.sbuf = me ? sbuf : NULL; c.scount = me ? scount : 0; c.sdtype = me ? sdt : NULL; c.rbuf = rbuf == MPI_IN_PLACE ? NULL : rbuf; c.rcount = rcount; c.rdtype = rbuf == MPI_IN_PLACE ? NULL : rdt; c.root = root; c.in_place = me && rbuf == MPI_IN_PLACE;",
  "sbuf, scount, sdt, rbuf, rcount, rdt, root, comm"),
 ("allgather", "CDAG_ALLGATHER", "const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, int rcount, ompi_datatype_t *rdt, ompi_communicator_t *comm",
  "c.sbuf = sbuf; c.scount = scount; c.sdtype = sbuf == MPI_IN_PLACE ? NULL : sdt; c.rbuf = rbuf; c.rcount = rcount; c.rdtype = rdt;",
  "sbuf, scount, sdt, rbuf, rcount, rdt, comm"),
 ("alltoall", "CDAG_ALLTOALL", "const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, int rcount, ompi_datatype_t *rdt, ompi_communicator_t *comm",
  "c.sbuf = sbuf; c.scount = scount; c.sdtype = sbuf == MPI_IN_PLACE ? NULL : sdt; c.rbuf = rbuf; c.rcount = rcount; c.rdtype = rdt;",
  "sbuf, scount, sdt, rbuf, rcount, rdt, comm"),
 ("reduce_scatter_block", "CDAG_REDUCE_SCATTER_BLOCK", "const void *sbuf, void *rbuf, int rcount, ompi_datatype_t *dt, ompi_op_t *op, ompi_communicator_t *comm",
  "c.sbuf = sbuf; c.rbuf = rbuf; c.scount = c.rcount = rcount; c.sdtype = c.rdtype = dt; c.op = op;",
  "sbuf, rbuf, rcount, dt, op, comm"),
 ("reduce_scatter", "CDAG_REDUCE_SCATTER", "const void *sbuf, void *rbuf, const int *rcounts, ompi_datatype_t *dt, ompi_op_t *op, ompi_communicator_t *comm",
  "c.sbuf = sbuf; c.rbuf = rbuf; c.rcounts = rcounts; c.scount = 0; c.sdtype = c.rdtype = dt; c.op = op;",
  "sbuf, rbuf, rcounts, dt, op, comm"),
 ("scan", "CDAG_SCAN", "const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt, ompi_op_t *op, ompi_communicator_t *comm",
  "c.sbuf = sbuf; c.rbuf = rbuf; c.scount = c.rcount = count; c.sdtype = c.rdtype = dt; c.op = op;",
  "sbuf, rbuf, count, dt, op, comm"),
 ("exscan", "CDAG_EXSCAN", "const void *sbuf, void *rbuf, int count, ompi_datatype_t *dt, ompi_op_t *op, ompi_communicator_t *comm",
  "c.sbuf = sbuf; c.rbuf = rbuf; c.scount = c.rcount = count; c.sdtype = c.rdtype = dt; c.op = op;",
  "sbuf, rbuf, count, dt, op, comm"),
 ("gatherv", "CDAG_GATHERV", "const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, const int *rcounts, const int *displs, ompi_datatype_t *rdt, int root, ompi_communicator_t *comm",
  "int me = ompi_comm_rank(comm) == root; c.sbuf = sbuf; c.scount = scount; c.sdtype = sbuf == MPI_IN_PLACE ? NULL : sdt; c.rbuf = me ? rbuf : NULL; c.rcounts = me ? rcounts : NULL; c.rdispls = me ? displs : NULL; c.rdtype = me ? rdt : NULL; c.root = root;",
  "sbuf, scount, sdt, rbuf, rcounts, displs, rdt, root, comm"),
 ("scatterv", "CDAG_SCATTERV", "const void *sbuf, const int *scounts, const int *displs, ompi_datatype_t *sdt, void *rbuf, int rcount, ompi_datatype_t *rdt, int root, ompi_communicator_t *comm",
  "int me = ompi_comm_rank(comm) == root; c.sbuf = me ? sbuf : NULL; c.scounts = me ? scounts : NULL; c.sdispls = me ? displs : NULL; c.sdtype = me ? sdt : NULL; c.rbuf = rbuf == MPI_IN_PLACE ? NULL : rbuf; c.rcount = rcount; c.rdtype = rbuf == MPI_IN_PLACE ? NULL : rdt; c.root = root; c.in_place = me && rbuf == MPI_IN_PLACE;",
  "sbuf, scounts, displs, sdt, rbuf, rcount, rdt, root, comm"),
 ("allgatherv", "CDAG_ALLGATHERV", "const void *sbuf, int scount, ompi_datatype_t *sdt, void *rbuf, const int *rcounts, const int *displs, ompi_datatype_t *rdt, ompi_communicator_t *comm",
  "c.sbuf = sbuf; c.scount = scount; c.sdtype = sbuf == MPI_IN_PLACE ? NULL : sdt; c.rbuf = rbuf; c.rcounts = rcounts; c.rdispls = displs; c.rdtype = rdt;",
  "sbuf, scount, sdt, rbuf, rcounts, displs, rdt, comm"),
 ("alltoallv", "CDAG_ALLTOALLV", "const void *sbuf, const int *scounts, const int *sdispls, ompi_datatype_t *sdt, void *rbuf, const int *rcounts, const int *rdispls, ompi_datatype_t *rdt, ompi_communicator_t *comm",
  "c.sbuf = sbuf; c.scounts = sbuf == MPI_IN_PLACE ? NULL : scounts; c.sdispls = sbuf == MPI_IN_PLACE ? NULL : sdispls; c.sdtype = sbuf == MPI_IN_PLACE ? NULL : sdt; c.rbuf = rbuf; c.rcounts = rcounts; c.rdispls = rdispls; c.rdtype = rdt;",
  "sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt, comm"),
]
out = []
out.append('''/*
 * coll/cdag: the blocking, nonblocking and persistent entry points.
 * GENERATED by coll_cdag/gen_entry.py -- edit that script, not this file.
 * Each one describes its call (cdag_call_t), lets the generic path take
 * it, and otherwise hands it to the module below (saved at enable).
 */
#include "coll_cdag.h"
#include "coll_cdag_entry.h"

#define CDAG_FALLBACK 1

static int go(mca_coll_base_module_t *module, ompi_communicator_t *comm, cdag_call_t *c, int mode,
              ompi_request_t **req)
{
    mca_coll_cdag_module_t *m = (mca_coll_cdag_module_t *)module;
    if (!mca_coll_cdag_takes(m, comm, c)) return CDAG_FALLBACK;
    int rc = mca_coll_cdag_run(m, comm, c, mode, req);
    return rc == OMPI_ERR_NOT_SUPPORTED ? CDAG_FALLBACK : rc;
}
''')
for (name, cid, params, init, args) in colls:
    P = lambda s: (params + (", " if params else "") + s)
    for mode, prefix, extra_decl, extra_args in [
        (0, "", "mca_coll_base_module_t *module", ""),
        (1, "i", "ompi_request_t **request, mca_coll_base_module_t *module", "request, "),
        (2, "", "struct ompi_info_t *info, ompi_request_t **request, mca_coll_base_module_t *module", "info, request, "),
    ]:
        fname = ("mca_coll_cdag_" + prefix + name + ("_init" if mode == 2 else ""))
        prevf = ("coll_" + prefix + name + ("_init" if mode == 2 else ""))
        req = "NULL" if mode == 0 else "request"
        out.append(f'''
int {fname}({P(extra_decl)})
{{
    cdag_call_t c = {{0}};
    c.coll = {cid};
    {init}
    if (c.coll != CDAG_SCATTER && c.coll != CDAG_SCATTERV && c.coll != CDAG_BARRIER &&
        c.coll != CDAG_BCAST)
        c.in_place = c.sbuf == MPI_IN_PLACE;
    int rc = go(module, comm, &c, {mode}, {req});
    if (rc != CDAG_FALLBACK) return rc;
    mca_coll_cdag_module_t *m = (mca_coll_cdag_module_t *)module;
    if (!m->prev.{prevf}) return OMPI_ERR_NOT_SUPPORTED;
    return m->prev.{prevf}({args}, {extra_args}m->prev.{prevf}_module);
}}
''')
open('/work/main/coll_cdag/coll_cdag_entry.c','w').write(''.join(out))
# header + install function
h = ['''/* coll/cdag entry points; GENERATED by coll_cdag/gen_entry.py */
#ifndef COLL_CDAG_ENTRY_H
#define COLL_CDAG_ENTRY_H
#include "coll_cdag.h"
''']
inst = ['''
/* Point the module's table at the entry points of the collectives in mask,
 * and save (from c_coll) the module below for each of them. */
static inline void mca_coll_cdag_install(mca_coll_cdag_module_t *m, unsigned mask)
{
    mca_coll_base_module_t *s = &m->super;
    (void)s;
''']
for (name, cid, params, init, args) in colls:
    P = lambda s: (params + (", " if params else "") + s)
    h.append(f"int mca_coll_cdag_{name}({P('mca_coll_base_module_t *module')});\n")
    h.append(f"int mca_coll_cdag_i{name}({P('ompi_request_t **request, mca_coll_base_module_t *module')});\n")
    h.append(f"int mca_coll_cdag_{name}_init({P('struct ompi_info_t *info, ompi_request_t **request, mca_coll_base_module_t *module')});\n")
    inst.append(f'''    if (mask & (1u << {cid})) {{
        s->coll_{name} = mca_coll_cdag_{name};
        s->coll_i{name} = mca_coll_cdag_i{name};
        s->coll_{name}_init = mca_coll_cdag_{name}_init;
    }}
''')
inst.append("}\n")
saves = ['''
/* Save the functions of the module below ours (called from enable, when
 * c_coll still holds them) and keep those modules alive. */
static inline void mca_coll_cdag_save_prev(mca_coll_cdag_module_t *m, ompi_communicator_t *comm)
{
    m->nprev = 0;
#define CDAG_SAVE(f)                                                              \\
    do {                                                                          \\
        m->prev.f = comm->c_coll->f;                                              \\
        m->prev.f##_module = comm->c_coll->f##_module;                            \\
        if (m->prev.f##_module) {                                                 \\
            OBJ_RETAIN(m->prev.f##_module);                                       \\
            m->prev_modules[m->nprev++] = m->prev.f##_module;                     \\
        }                                                                         \\
    } while (0)
''']
for (name, cid, params, init, args) in colls:
    saves.append(f"    CDAG_SAVE(coll_{name});\n    CDAG_SAVE(coll_i{name});\n    CDAG_SAVE(coll_{name}_init);\n")
saves.append("#undef CDAG_SAVE\n}\n")
h += inst + saves
h.append("#endif\n")
open('/work/main/coll_cdag/coll_cdag_entry.h','w').write(''.join(h))
