#!/usr/bin/env bash
# Validate before you deploy: run MPICH's test/mpi suite and mpi4py's test
# suite under ob1 (the reference) and under every configuration of the rdrp
# components, one job at a time.  Prints one table of passed/failed/timeout
# per (directory, configuration), the time taken, and the tests that fail
# with our components but pass with ob1, each with a one-line repro.
#
#   scripts/conformance.sh --mpich SRC --mpi4py SRC [--quick] [--configs LIST]
#                          [--dirs LIST] [--timeout S] [--maxnp N]
#                          [--component-path DIR] [--out DIR [--resume]]
#   scripts/conformance.sh --report --out DIR      # the table of an earlier run
#
# SRC: a directory, a .tar.gz or a URL.  An MPICH test/mpi not yet configured
# is copied into the output directory (default: a new one under $TMPDIR) and
# configured there against the Open MPI in PATH; nothing is written into this
# repository.  mpi4py's tests run against the mpi4py installed for this Open
# MPI (Debian: python3-mpi4py).  --help lists every option.  A long form: not
# part of quickstart.sh test or CI.
# Exit status: 0 when nothing fails with our components that passes with ob1.
set -u
command -v python3 >/dev/null || { echo "conformance: python3 is needed" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "conformance: mpirun not in PATH (Open MPI 4.1)" >&2; exit 2; }
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the source tree
exec python3 "$(cd "$(dirname "$0")" && pwd)/conformance/main.py" "$@"
