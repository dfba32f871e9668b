#!/usr/bin/env bash
# runner_load_aware_check.sh - checks run_mpi_tests.sh --load-aware (the
# clock test/cluster/run.sh uses), with stand-ins for mpirun (MPIRUN):
#   1. a job that needs ~0.2 s of CPU at nice 19 on a CPU shared with a busy
#      loop at normal priority gets ~1.5 % of it, so it runs for seconds,
#      past an 8 s limit: --load-aware must pass it, since it only waited for
#      the CPU (the flakiness this fixes: p2p_basic and p2p_rndv across nodes
#      hit a 240 s wall-clock limit at load 24-29 while starved);
#   2. a job that hangs (sleeps) must still fail --load-aware at the limit.
# Prints "PASS runner load-aware clock" or "FAIL ... (reason: ...)"; exit 1
# on failure.  A few seconds on a quiet machine, up to ~2 min at load 25.
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
exec taskset -c 0 nice -n 19 bash -c 'i=0; while [ $i -lt 60000 ]; do i=$((i + 1)); done'
EOF
printf '#!/usr/bin/env bash\nexec sleep 60\n' >"$tmp/hung"
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
# (a wall-clock ceiling of 100 x 8 s: on a loaded machine the starved job
# may wait minutes for its 0.2 s; the limit leaves room for the clock's
# sampling error, a second or two when the runner itself is starved)
out=$(RDRP_TEST_TIMEOUT_CEILING=100 run starved --timeout 8 --load-aware)
kill -KILL $hog 2>/dev/null; wait $hog 2>/dev/null; hog=""
starved=$out
secs=$(sed -nE 's/.*np=2 \(([0-9]+)\.[0-9]s\).*/\1/p' <<<"$out")
case $out in
    PASS*) [ "${secs:-0}" -ge 8 ] || reason="the starved job ran within the 8 s limit, so this proves nothing: $out" ;;
    *) reason="--load-aware failed a job that only waited for the CPU: $out" ;;
esac
if [ -z "$reason" ]; then
    s=$(date +%s)
    out=$(run hung --timeout 2 --load-aware)
    e=$(($(date +%s) - s))
    case $out in
        FAIL*timeout*) [ $e -le 20 ] || reason="--load-aware took ${e}s to end a hung job (limit 2 s)" ;;
        *) reason="--load-aware did not fail a hung job: $out" ;;
    esac
fi
if [ -z "$reason" ]; then echo "PASS runner load-aware clock (starved: ${starved#PASS check p2p_basic }; hung: ${out#FAIL check p2p_basic })"
else echo "FAIL runner load-aware clock (reason: $reason)"; exit 1; fi
