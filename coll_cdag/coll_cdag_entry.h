/*
 * coll/cdag entry points (coll_cdag_entry.c): every collective the
 * component provides, in blocking, nonblocking and persistent form.
 */
#ifndef COLL_CDAG_ENTRY_H
#define COLL_CDAG_ENTRY_H

#include "coll_cdag.h"

/* X(name, CDAG_* id) for each collective (name as in coll_<name>) */
#define CDAG_FOR_EACH_COLL(X)                                                           \
    X(barrier, CDAG_BARRIER) X(bcast, CDAG_BCAST) X(reduce, CDAG_REDUCE)                \
    X(allreduce, CDAG_ALLREDUCE) X(gather, CDAG_GATHER) X(scatter, CDAG_SCATTER)        \
    X(allgather, CDAG_ALLGATHER) X(alltoall, CDAG_ALLTOALL)                             \
    X(reduce_scatter_block, CDAG_REDUCE_SCATTER_BLOCK)                                  \
    X(reduce_scatter, CDAG_REDUCE_SCATTER) X(scan, CDAG_SCAN) X(exscan, CDAG_EXSCAN)    \
    X(gatherv, CDAG_GATHERV) X(scatterv, CDAG_SCATTERV) X(allgatherv, CDAG_ALLGATHERV)  \
    X(alltoallv, CDAG_ALLTOALLV)

/* Point the module's table at the entry points of the collectives in mask
 * (bit per CDAG_* id). */
void mca_coll_cdag_install(mca_coll_cdag_module_t *m, unsigned mask);

/* Save the functions of the module below ours (from enable, while c_coll
 * still holds them) and keep those modules alive. */
void mca_coll_cdag_save_prev(mca_coll_cdag_module_t *m, ompi_communicator_t *comm);

#endif
