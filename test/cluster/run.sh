#!/usr/bin/env bash
# run.sh - the MPI test suite across nodes (issue 16): builds a namespace
# cluster (cluster.sh, 2 nodes), runs test/mpi's tests across it with
# mpirun.sh in the configurations of ci.conf (and full.conf), then the fault
# tests (a rank killed with SIGKILL on one node, a node's switch port taken
# down mid-transfer: the job must end with a message naming the failure
# within 30 s and leave no process or segment behind), tears the cluster down
# and checks nothing is left.  Last line: "N passed, N failed".
#
# Usage: run.sh [--ci] [--only CONFIG-REGEX] [--no-faults] [--timeout S]
#   --ci          only ci.conf and the kill -9 fault test (CI; a few minutes)
#   --only RE     only configurations whose name matches RE
#   --no-faults   skip the fault tests
#   --timeout S   per-run limit of each MPI test (default 240, or
#                 RDRP_CLUSTER_TIMEOUT), counted load-aware
#                 (run_mpi_tests.sh --load-aware: time a job spends waiting
#                 for a CPU does not count, up to 6x the limit in wall time).
#                 A launch across nodes goes through the rsh agent and a
#                 daemon per node; niced at load ~15 on 2 cores, the on-node
#                 default of 120 s failed p2p_basic after it had printed "all
#                 checks passed", and at load 24-29 (real-time benchmarks
#                 alongside) p2p_basic and p2p_rndv hit a 240 s wall-clock
#                 limit.  A limit catches hangs; it is not a speed check.
# Needs root and ip/nsenter/unshare.  Where network namespaces cannot be made
# it prints "SKIP cluster: <why>" and "0 passed, 0 failed", exit 0 -- unless
# RDRP_CLUSTER_REQUIRED=1 (.ci/run sets it: CI runs as root), then it fails.
# RDRP_BUILD_DIR: the configured build (default ./build); the components are
# taken from its .libs as in test/run_all.sh.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
build=${RDRP_BUILD_DIR:-$top/build}
ci=0 only="" faults=1 tmo=${RDRP_CLUSTER_TIMEOUT:-240}
while [ $# -gt 0 ]; do
    case $1 in
        --ci) ci=1; shift ;;
        --only) only=$2; shift 2 ;;
        --no-faults) faults=0; shift ;;
        --timeout) tmo=$2; shift 2 ;;
        *) echo "run.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done

# can this machine make network namespaces at all?
why=""
if [ "$(id -u)" != 0 ]; then why="not root"
elif ! command -v ip >/dev/null || ! command -v nsenter >/dev/null || ! command -v unshare >/dev/null; then
    why="ip, nsenter or unshare missing"
elif ! ip netns add "rdcprobe$$" 2>/dev/null; then why="cannot create a network namespace"
else ip netns del "rdcprobe$$"
fi
if [ -n "$why" ]; then
    if [ "${RDRP_CLUSTER_REQUIRED:-0}" = 1 ]; then  # CI: root, so it must run
        echo "FAIL cluster: $why (RDRP_CLUSTER_REQUIRED=1)"
        echo "0 passed, 1 failed"
        exit 1
    fi
    echo "SKIP cluster: $why (the cross-node suite needs network namespaces)"
    echo "0 passed, 0 failed"
    exit 0
fi
[ -f "$build/Makefile" ] || { echo "run.sh: no configured build in $build"; echo "0 passed, 1 failed"; exit 1; }
export OMPI_MCA_mca_base_component_path="SYS_DEFAULT:$build/.libs"
export TEST_BUILD_DIR=${TEST_BUILD_DIR:-$build/test-mpi}
logs=$build/cluster-logs
mkdir -p "$logs" "$TEST_BUILD_DIR"

dir=$(mktemp -d /tmp/rdrp-cluster.XXXXXX)
# Every way out -- the end, a failure, Ctrl-C (INT), TERM, HUP -- goes through
# the EXIT trap: stop the test runner (and the ranks it started: they run in
# the nodes, and "cluster.sh down" kills everything in or entering them),
# then tear the cluster down and say if anything was left.
teardown() {
    trap - EXIT INT TERM HUP   # once, also when a second Ctrl-C comes
    local id=""
    [ -f "$dir/id" ] && id=$(cat "$dir/id")
    [ -n "${runner:-}" ] && kill -TERM "$runner" 2>/dev/null
    [ -n "${stream_pid:-}" ] && kill -KILL "$stream_pid" 2>/dev/null
    bash "$here/cluster.sh" down "$dir"
    if [ -n "$id" ] && ! left=$(bash "$here/cluster.sh" leftovers "$id" "$dir"); then
        echo "run.sh: left behind after teardown: $(echo $left)" >&2
    fi
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
pass=0 fail=0
result() {  # ok|fail name [reason]
    if [ "$1" = ok ]; then echo "PASS $2"; pass=$((pass + 1))
    else echo "FAIL $2 (reason: $3)"; fail=$((fail + 1)); fi
}

if ! bash "$here/cluster.sh" up --nodes 2 --dir "$dir" >/dev/null; then
    result fail "cluster up" "cluster.sh up failed"
    echo "$pass passed, $fail failed"
    exit 1
fi
export RDRP_CLUSTER_DIR=$dir
export MPIRUN="$here/mpirun.sh"
echo "== cluster: 2 nodes in $dir, subnet $(cat "$dir/subnet")"

# ------------------------------------------------------------ the MPI suite
# first the clock that limits each test (run_mpi_tests.sh --load-aware)
chk=$(bash "$top/test/mpi/runner_load_aware_check.sh" 2>&1 | tail -1)
echo "$chk"
case $chk in PASS*) pass=$((pass + 1)) ;; *) fail=$((fail + 1)) ;; esac
confs=("$here/ci.conf")
[ $ci = 1 ] || confs+=("$here/full.conf")
for f in "${confs[@]}"; do
    while IFS= read -r line; do
        case "$line" in ''|'#'*) continue ;; esac
        IFS=';' read -r name nps re args <<<"$line"
        [ -n "$only" ] && ! grep -Eq -- "$only" <<<"$name" && continue
        echo "== cross-node: $name ($args), np $nps"
        out=$logs/$name.out
        : >"$out"   # exists before tail opens it (the runner's redirection may come later)
        # (in the background and waited for, so that INT/TERM reach the trap at once)
        # shellcheck disable=SC2086
        bash "$top/test/mpi/run_mpi_tests.sh" --np "$nps" --only "$re" --label "$name" --timeout "$tmo" --load-aware -- \
            $args -x MPITEST_EXPECT_NODES=2 >"$out" 2>&1 </dev/null &
        runner=$!
        tail -n +1 -f --pid=$runner "$out" | grep --line-buffered -vE '^[0-9]+ passed, [0-9]+ failed' &
        wait $runner
        wait
        runner=""
        line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -1)
        if [ -z "$line" ]; then result fail "$name" "runner printed no result line"; continue; fi
        pass=$((pass + $(cut -d' ' -f1 <<<"$line")))
        fail=$((fail + $(cut -d' ' -f3 <<<"$line")))
    done <"$f"
done

# ------------------------------------------------------------ fault tests
node_procs() {  # node: pids of the node's processes other than its holder
    local holder ns
    holder=$(awk -v n="$1" '$1 == n { print $2 }' "$dir/nodes")
    ns=$(awk -v n="$1" '$1 == n { print $5 }' "$dir/nodes")
    ip netns pids "$ns" 2>/dev/null | grep -vx "$holder"
}
node_shm() { bash "$here/cluster.sh" exec "$dir" "$1" sh -c 'ls -A /dev/shm'; }

# start the stream workload, inject $2 once it streams, expect the job to end
# with a message naming the failure within 30 s and nothing left behind
fault_test() {  # name inject-function pml-args...
    local name=$1 inject=$2
    shift 2
    local log=$logs/fault-$name.log bin=$TEST_BUILD_DIR/cluster_stream
    if [ ! -x "$bin" ] || [ "$here/stream.c" -nt "$bin" ]; then
        mpicc -O2 -o "$bin" "$here/stream.c" || { result fail "fault $name" "cannot build stream.c"; return; }
    fi
    "$MPIRUN" --allow-run-as-root --oversubscribe "$@" -np 4 "$bin" >"$log" 2>&1 </dev/null &
    stream_pid=$!
    local t=0
    until grep -q '^streaming' "$log"; do
        sleep 0.2; t=$((t + 1))
        if [ $t -gt 300 ] || ! kill -0 $stream_pid 2>/dev/null; then
            kill -KILL $stream_pid 2>/dev/null; wait $stream_pid 2>/dev/null; stream_pid=""
            tail -5 "$log" | sed 's/^/    | /'
            result fail "fault $name" "the stream never started"
            return
        fi
    done
    "$inject"
    local start end rc=0 reason=""
    start=$(date +%s)
    while kill -0 $stream_pid 2>/dev/null && [ $(($(date +%s) - start)) -lt 30 ]; do sleep 0.2; done
    end=$(date +%s)
    if kill -0 $stream_pid 2>/dev/null; then
        reason="the job did not end within 30 s"
        kill -KILL $stream_pid 2>/dev/null
    fi
    wait $stream_pid; rc=$?
    stream_pid=""
    ip link set "$(awk '$1 == "node2" { print $4 }' "$dir/nodes")" up   # for the next test
    if [ -z "$reason" ] && [ $rc = 0 ]; then reason="mpirun exited 0"; fi
    if [ -z "$reason" ] && ! grep -Eqi "$fault_message" "$log"; then reason="exit code $rc but no message naming the failure"; fi
    # orteds and ranks of the nodes wind down: up to 30 s, since the daemon of
    # a node whose link was down learns that mpirun is gone only by TCP's
    # next retransmission once the link is back (a fixed 2 s found node2's
    # orted still there at load ~18)
    local left w=0
    while :; do
        left=$(for n in node1 node2; do node_procs $n; done | xargs -r ps -o pid=,comm= -p)
        [ -z "$left" ] || [ $w -ge 30 ] && break
        sleep 1; w=$((w + 1))
    done
    [ -z "$reason" ] && [ -n "$left" ] && reason="processes left in the nodes 30 s after mpirun ended: $(echo $left)"
    for n in node1 node2; do
        local s
        s=$(node_shm $n)
        [ -z "$reason" ] && [ -n "$s" ] && reason="left in $n's /dev/shm: $(echo $s)"
    done
    if [ -n "$left" ]; then echo "$left" | awk '{print $1}' | xargs -r kill -KILL 2>/dev/null; fi
    bash "$here/cluster.sh" exec "$dir" node1 sh -c 'rm -rf /dev/shm/* /dev/shm/.[!.]* 2>/dev/null'
    bash "$here/cluster.sh" exec "$dir" node2 sh -c 'rm -rf /dev/shm/* /dev/shm/.[!.]* 2>/dev/null'
    if [ -z "$reason" ]; then
        echo "    | ended $((end - start)) s after the fault (the nodes' processes $w s later), exit code $rc: $(grep -Eim1 "$fault_message" "$log")"
        result ok "fault $name"
    else
        tail -15 "$log" | sed 's/^/    | /'
        result fail "fault $name" "$reason"
    fi
}
kill_rank_on_node2() {
    # (a few tries: once, at load ~16, the lookup found no rank on node2
    # although the job streamed, and "kill -9 ''" left the job running)
    local p="" i
    for i in 1 2 3 4 5 6 7 8 9 10; do
        p=$(for q in $(node_procs node2); do [ "$(cat /proc/$q/comm 2>/dev/null)" = cluster_stream ] && echo "$q"; done | head -1)
        [ -n "$p" ] && break
        sleep 0.5
    done
    echo "    | kill -9 ${p:-(no rank of the job found on node2)} (a rank on node2)"
    [ -n "$p" ] && kill -KILL "$p"
}
node2_port_down() {
    echo "    | switch port of node2 down"
    bash "$here/cluster.sh" link "$dir" node2 down
}
fault_message='exited on signal|noticed that process|detected that one or more processes exited|peer.*(failed|died|unreachable|lost)|lost (its )?(contact|connection)|connection.*(lost|reset|timed out)|unreachable'
if [ $faults = 1 ]; then
    for pml in rdrp ob1-credit; do
        case $pml in
            rdrp) args=(--mca pml rdrp) ;;
            ob1-credit) args=(--mca pml ob1 --mca btl self,credit) ;;
        esac
        [ $ci = 1 ] && [ $pml != rdrp ] && continue
        echo "== fault tests ($pml)"
        fault_test "kill9-$pml" kill_rank_on_node2 "${args[@]}"
        [ $ci = 1 ] && continue
        bash "$here/cluster.sh" failfast "$dir"   # TCP gives up on a dead link in ~6 s, not ~15 min
        fault_test "linkdown-$pml" node2_port_down "${args[@]}"
    done
fi

# ------------------------------------------------------------ teardown
trap - EXIT
id=$(cat "$dir/id")
teardown 2>/dev/null
# no namespace, link or lock file of this cluster, and no process of it
# anywhere (which also frees the nodes' private /dev/shm and tmp mounts)
if left=$(bash "$here/cluster.sh" leftovers "$id" "$dir"); then result ok "teardown leaves nothing"
else result fail "teardown leaves nothing" "$(echo $left)"; fi
echo "$pass passed, $fail failed"
[ $fail = 0 ]
