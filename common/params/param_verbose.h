/*
 * common/params: a component's debug lines at the level its _verbose
 * parameter asks for, shared by pml/rdrp, btl/credit and coll/cdag (each
 * wraps it with its own parameters and prefix: RDRP_VERBOSE,
 * BTL_CREDIT_VERBOSE, CDAG_VERBOSE).  For component code only: it calls
 * Open MPI's opal_output_verbose.
 *
 * The level is checked before the arguments are evaluated.
 * opal_output_verbose is a function and checks it inside, after its
 * arguments were formatted: btl/credit's line on every packet ran an
 * snprintf (OPAL_NAME_PRINT) per message with verbosity 0, 3250 of its
 * 4665 instructions per MPI_Isend (test/mpi/p2p_no_format.c).
 */
#ifndef RDRP_PARAM_VERBOSE_H
#define RDRP_PARAM_VERBOSE_H

#include "opal/util/output.h"

/* verbose: the component's _verbose value; output: its opal_output stream */
#define RDRP_PARAM_VERBOSE(verbose, output, lvl, ...)          \
    do {                                                       \
        if (OPAL_UNLIKELY((verbose) >= (lvl)))                 \
            opal_output_verbose((lvl), (output), __VA_ARGS__); \
    } while (0)

#endif
