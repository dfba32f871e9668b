/* Include first in every C++ translation unit that uses Open MPI headers.
 * Two macros in the 4.1 headers rely on C's implicit void* conversions,
 * which C++ rejects; re-define them with explicit casts. */
#ifndef RDRP_OMPI_CXX_PRELUDE_H
#define RDRP_OMPI_CXX_PRELUDE_H
#include "ompi_config.h"
#include <stddef.h>
#include "opal/threads/thread_usage.h"
#include "ompi/datatype/ompi_datatype.h"

#undef OPAL_THREAD_COMPARE_EXCHANGE_STRONG_PTR
#define OPAL_THREAD_COMPARE_EXCHANGE_STRONG_PTR(x, y, z) \
    opal_thread_compare_exchange_strong_ptr((volatile intptr_t *)(x), (void **)(y), (void *)(z))

#define ompi_datatype_copy_content_same_ddt(t, c, d, s) \
    ompi_datatype_copy_content_same_ddt((t), (c), (char *)(d), (char *)(s))
#endif
