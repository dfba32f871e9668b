/* pml/rdrp: the finalize leak check (pml_rdrp_finalize_check). */
#ifndef PML_RDRP_FINALIZE_CHECK_H
#define PML_RDRP_FINALIZE_CHECK_H

#include "common/tally/live_tally.h"
#include "ucx_glue/rdrp_ucx.h"

namespace rdrp {

struct FinalizeTally {
    rdrp_tally_t t;
};

/* Count what is still alive after finalize released the endpoints and the
 * messages of communicators never created here, before the pools are
 * freed: requests, unreceived messages (also those of communicators the
 * application kept alive), descriptors, control buffers, send copies and
 * sends waiting for credit, ring messages dropped at del_procs. */
void finalize_tally_objects(FinalizeTally *ft);
/* Add the UCX objects the worker's destruction found and the
 * registrations still held, then report (one finalize-leak message) as
 * pml_rdrp_finalize_check asks.  Returns pml/rdrp finalize's result. */
int finalize_tally_report(FinalizeTally *ft, const rdrp_ucx_leftovers_t *ucx);

}  // namespace rdrp
#endif
