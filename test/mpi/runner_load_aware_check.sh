#!/usr/bin/env bash
# runner_load_aware_check.sh - checks run_mpi_tests.sh --load-aware (the
# clock test/cluster/run.sh uses), with stand-ins for mpirun (MPIRUN):
#   1. a job that needs ~0.4 s of CPU at nice 19 on a CPU shared with a busy
#      loop at normal priority gets ~1.5 % of it, so it runs for seconds,
#      past a 20 s limit: --load-aware must pass it, since it only waited for
#      the CPU (the flakiness this fixes: p2p_basic and p2p_rndv across nodes
#      hit a 240 s wall-clock limit at load 24-29 while starved);
#   2. a job that hangs (sleeps) must still fail --load-aware at the limit.
# Prints "PASS runner load-aware clock" or "FAIL ... (reason: ...)"; exit 1
# on failure.  About 40 s on a quiet machine, up to ~10 min at load 25.
# TEST_BUILD_DIR: where the runner builds (p2p_basic is built, not run).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d /tmp/rdrp-runner-check.XXXXXX)
hog=""
cleanup() { [ -n "$hog" ] && kill -KILL "$hog" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cat >"$tmp/starved" <<'EOF'
#!/usr/bin/env bash
exec taskset -c 0 nice -n 19 bash -c 'i=0; while [ $i -lt 120000 ]; do i=$((i + 1)); done'
EOF
printf '#!/usr/bin/env bash\nexec sleep 600\n' >"$tmp/hung"
chmod +x "$tmp/starved" "$tmp/hung"

run() {  # mpirun-stand-in runner-args...: the runner's result line
    local m=$1
    shift
    MPIRUN=$tmp/$m TEST_BUILD_DIR=${TEST_BUILD_DIR:-$tmp/build} \
        bash "$here/run_mpi_tests.sh" --np 2 --only '^p2p_basic$' --label check "$@" 2>&1 </dev/null |
        grep -E '^(PASS|FAIL) check'
}
reason=""
# The hog must outrank the starved job: run at nice 19 itself (run.sh under
# `nice -n 19`), an inherited hog would share the CPU evenly and starve
# nothing.  So it runs at niceness 0 (as root, which the cluster needs) or at
# the caller's, whichever is lower.
hog_nice=$(( -$(nice) ))
taskset -c 0 nice -n "$hog_nice" bash -c 'while :; do :; done' 2>/dev/null &
hog=$!
# (a wall-clock ceiling of 100 x 20 s: on a loaded machine the starved job
# may wait minutes for its 0.4 s; the limit leaves room for the clock's
# sampling error, which reached 8 s at load 24)
out=$(RDRP_TEST_TIMEOUT_CEILING=100 run starved --timeout 20 --load-aware)
kill -KILL $hog 2>/dev/null; wait $hog 2>/dev/null; hog=""
starved=$out
secs=$(sed -nE 's/.*np=2 \(([0-9]+)\.[0-9]s\).*/\1/p' <<<"$out")
case $out in
    PASS*) [ "${secs:-0}" -ge 20 ] || reason="the starved job ran within the 20 s limit, so this proves nothing: $out" ;;
    *) reason="--load-aware failed a job that only waited for the CPU: $out" ;;
esac
if [ -z "$reason" ]; then
    # A hang must be ended by the load-aware clock itself (its sleep is not
    # waiting for a CPU, so it counts), not by the wall-clock ceiling, set
    # far away (100 x 2 s) so that a starved runner -- which may take minutes
    # to look again at load 25 -- cannot be mistaken for it.
    out=$(RDRP_TEST_TIMEOUT_CEILING=100 run hung --timeout 2 --load-aware)
    n=$(sed -nE 's/.*load-aware: ([0-9]+)s not waiting for a CPU in ([0-9]+)s.*/\1/p' <<<"$out")
    m=$(sed -nE 's/.*load-aware: ([0-9]+)s not waiting for a CPU in ([0-9]+)s.*/\2/p' <<<"$out")
    case $out in
        FAIL*timeout*)
            if [ -z "$n" ]; then reason="no load-aware note on the hung job's timeout: $out"
            elif [ "$n" -lt 2 ] || [ "$m" -ge 200 ]; then reason="the hung job was ended by the wall-clock ceiling, not the load-aware limit: $out"
            fi ;;
        *) reason="--load-aware did not fail a hung job: $out" ;;
    esac
fi
if [ -z "$reason" ]; then echo "PASS runner load-aware clock (starved: ${starved#PASS check p2p_basic }; hung: ${out#FAIL check p2p_basic })"
else echo "FAIL runner load-aware clock (reason: $reason)"; exit 1; fi
