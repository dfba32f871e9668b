/* Stand-in for ompi/peruse/peruse.h, which Debian's devel headers omit.
 * PERUSE is compiled out of this Open MPI (OMPI_WANT_PERUSE 0); the headers
 * only need the handle type to exist. */
#ifndef RDRP_COMPAT_PERUSE_H
#define RDRP_COMPAT_PERUSE_H
#include "mpi.h"
typedef void *peruse_event_h;
#endif
