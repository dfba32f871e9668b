/* Stand-in for ompi/mpi/fortran/base/fint_2_int.h (not installed by Debian).
 * ompi/op/op.h only needs the identity conversions, valid when a Fortran
 * INTEGER is a C int, which we check. */
#ifndef RDRP_COMPAT_FINT_2_INT_H
#define RDRP_COMPAT_FINT_2_INT_H
#if OMPI_SIZEOF_FORTRAN_INTEGER != SIZEOF_INT
#error "rdrp compat: Fortran INTEGER is not a C int on this Open MPI build"
#endif
#define OMPI_INT_2_FINT(a) (a)
#define OMPI_FINT_2_INT(a) (a)
#endif
