#!/usr/bin/env bash
# The whole rdrp test suite: GoogleTest unit tests of the engines, then the
# MPI tests (test/mpi) launched by mpirun against the components just built,
# in every configuration below.  One line per test; the last line is
# "N passed, N failed" over everything.  Exit status 0 only if nothing failed.
#
# RDRP_BUILD_DIR: the configured build tree (default: ./build).
# RDRP_TEST_CONFIGS: space-separated subset of the configuration names
#   ("none": unit tests and simulator only).  Configurations named smoke-*
#   (a few quick tests, for make distcheck) run only when named here.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${RDRP_BUILD_DIR:-$top/build}
[ -f "$build/Makefile" ] || { echo "no configured build in $build (run scripts/quickstart.sh build)"; exit 2; }
export OMPI_MCA_mca_base_component_path="SYS_DEFAULT:$build/.libs"
export TEST_BUILD_DIR="$build/test-mpi"

pass=0
fail=0
tally() {  # add the counts of a runner's closing "N passed, N failed" line
    local line
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -1)
    if [ -z "$line" ]; then
        echo "FAIL $2: runner printed no result line"
        fail=$((fail + 1))
        return
    fi
    pass=$((pass + $(echo "$line" | cut -d' ' -f1)))
    fail=$((fail + $(echo "$line" | cut -d' ' -f3)))
}

# ---------------------------------------------------------------- unit tests
echo "== unit tests (GoogleTest)"
make -C "$build" -s test/unit/rdrp_unit_tests >/dev/null 2>"$build/unit-build.err" ||
    { cat "$build/unit-build.err"; echo "FAIL unit tests: build"; fail=$((fail + 1)); }
if [ -x "$build/test/unit/rdrp_unit_tests" ]; then
    out="$build/unit.out"
    "$build/test/unit/rdrp_unit_tests" --gtest_color=no >"$out" 2>&1
    grep -E '^\[ +(OK|FAILED) +\] [A-Za-z]' "$out" | sed -E 's/^\[ +OK +\]/PASS unit/; s/^\[ +FAILED +\]/FAIL unit/'
    ok=$(grep -cE '^\[ +OK +\] ' "$out")
    bad=$(grep -E '^\[ +FAILED +\] [A-Za-z]' "$out" | grep -vc ' listed below' || true)
    grep -q '^\[  PASSED  \]' "$out" || { [ "$bad" -gt 0 ] || bad=1; tail -20 "$out"; }
    # what a failed test printed (its assertion messages), so that a
    # failure seen once in CI can be read there: the output file goes with
    # the build directory (make distcheck removes its own)
    if [ "$bad" -gt 0 ]; then
        awk '/^\[ RUN +\]/ { n = 0 } { blk[++n] = $0 }
            /^\[ +FAILED +\] [A-Za-z].*\([0-9]+ ms\)$/ { for (i = 1; i <= n && i <= 60; i++) print "    | " blk[i] }' "$out"
    fi
    pass=$((pass + ok))
    fail=$((fail + bad))
fi

# ---------------------------------------------------------------- fuzz corpus replay
# Every fuzz target over its committed corpus (seeds and regression
# inputs), built with the ordinary compiler; campaigns: scripts/fuzz.sh.
echo "== fuzz corpus replay"
for t in pml_wire btl_wire cdag_wire shm_ring credit_engine; do
    if make -C "$build" -s "test/fuzz/replay_$t" >/dev/null 2>"$build/replay-$t.err" &&
        "$build/test/fuzz/replay_$t" "$top/test/fuzz/corpus/$t" >"$build/replay-$t.out" 2>&1; then
        echo "PASS fuzz-replay $t ($(cat "$build/replay-$t.out"))"
        pass=$((pass + 1))
    else
        tail -20 "$build/replay-$t.err" "$build/replay-$t.out" 2>/dev/null
        echo "FAIL fuzz-replay $t"
        fail=$((fail + 1))
    fi
done

# ---------------------------------------------------------------- credit simulator
echo "== credit engine simulator (quick, invariants checked)"
if make -C "$build" -s test/sim/credit_sim >/dev/null 2>"$build/sim-build.err" &&
    "$build/test/sim/credit_sim" --quick >"$build/sim.out" 2>&1; then
    echo "PASS sim credit_sim --quick"
    pass=$((pass + 1))
else
    tail -20 "$build/sim-build.err" "$build/sim.out" 2>/dev/null
    echo "FAIL sim credit_sim --quick"
    fail=$((fail + 1))
fi

# ---------------------------------------------------------------- MPI tests
# Configurations live in test/configs/*.conf, one per line:
#   name ; ranks ; test regex (empty: all) ; mpirun arguments
# (blank lines and lines starting with # are ignored).  Each component keeps
# its own file, so adding a component never edits this script.
configs=()
for f in "$top"/test/configs/*.conf; do
    while IFS= read -r line; do
        case "$line" in ''|'#'*) continue ;; esac
        configs+=("$line")
    done <"$f"
done
for c in "${configs[@]}"; do
    IFS=';' read -r name nps only args <<<"$c"
    only_arg=()
    [ -n "$only" ] && only_arg=(--only "$only")
    if [ -n "${RDRP_TEST_CONFIGS:-}" ]; then
        [[ " $RDRP_TEST_CONFIGS " == *" $name "* ]] || continue
    else
        case $name in smoke-*) continue ;; esac
    fi
    echo "== MPI tests: $name ($args), np $nps"
    out="$build/mpi-$name.out"
    # shellcheck disable=SC2086
    bash "$top/test/mpi/run_mpi_tests.sh" --np "$nps" "${only_arg[@]}" --label "$name" -- $args 2>&1 | tee "$out" |
        grep -vE '^[0-9]+ passed, [0-9]+ failed'
    tally "$out" "$name"
done

# ---------------------------------------------------------------- across nodes
# the CI subset of the cross-node suite (test/cluster/ci.conf) on a cluster of
# network-namespace nodes; prints a SKIP line where namespaces cannot be made
# (not root).  RDRP_TEST_CONFIGS selects it by the name "cluster".
if [ -z "${RDRP_TEST_CONFIGS:-}" ] || [[ " $RDRP_TEST_CONFIGS " == *" cluster "* ]]; then
    echo "== MPI tests across nodes: test/cluster/run.sh --ci"
    out="$build/mpi-cluster.out"
    RDRP_BUILD_DIR="$build" bash "$top/test/cluster/run.sh" --ci 2>&1 | tee "$out" |
        grep -vE '^[0-9]+ passed, [0-9]+ failed'
    tally "$out" cluster
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
