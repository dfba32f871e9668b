#!/usr/bin/env bash
# rdrp quick start: install what the build needs, build and install the
# components, then run the comparison benchmark ("bench") or the whole test
# suite ("test").  Idempotent: a second run reuses the build.
#
#   scripts/quickstart.sh bench   # main job: pml rdrp vs ucx vs ob1, table with ratios
#   scripts/quickstart.sh test    # unit tests + MPI tests, ends with "N passed, N failed"
#   scripts/quickstart.sh build   # only dependencies, build and install
#
# Environment: PREFIX (install prefix, default ./_install), BUILD_DIR
# (default ./build), SKIP_DEPS=1 to skip apt-get.
set -euo pipefail

what=${1:-test}
shift || true
top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build}
prefix=${PREFIX:-$top/_install}

deps() {
    local pkgs="libopenmpi-dev openmpi-bin libucx-dev ucx-utils libhwloc-dev autoconf automake
                libtool pkg-config make g++ libgtest-dev gnuplot-nox procps valgrind"
    local missing=""
    for p in $pkgs; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    echo "== installing:$missing"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
}

build() {
    echo "== building in $build, installing into $prefix"
    cd "$top"
    if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
        mkdir -p m4
        autoreconf -fi >/dev/null
    fi
    mkdir -p "$build"
    cd "$build"
    if [ ! -f Makefile ] || [ "$top/configure" -nt Makefile ]; then
        "$top/configure" --prefix="$prefix" >configure.out 2>&1 || { tail -20 configure.out; exit 1; }
    fi
    make -j"$(nproc)" >make.out 2>&1 || { grep -E 'error|Error' -A3 make.out | head -40; exit 1; }
    make install >install.out 2>&1 || { tail -20 install.out; exit 1; }
    echo "== components in $prefix/lib/openmpi:" $(cd "$prefix/lib/openmpi" && ls mca_*.so)
}

[ "${SKIP_DEPS:-0}" = 1 ] || deps
build
case "$what" in
    build) ;;
    bench) exec bash "$top/bench/compare.sh" --component-path "$prefix/lib/openmpi" "$@" ;;
    test)  RDRP_BUILD_DIR="$build" exec bash "$top/test/run_all.sh" "$@" ;;
    *) echo "usage: $0 bench|test|build" >&2; exit 2 ;;
esac
