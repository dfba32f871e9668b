#!/usr/bin/env bash
# Fault injection (README "Reliability checks"): one line per scenario,
# then "N passed, N failed".
#
#   kill   SIGKILL of a random rank (not 0) at a random moment (0.3-2.5 s
#          into its traffic) of test/faults/fault_victim.c: during an eager
#          flood, mid-rendezvous under each protocol, while holding node
#          tokens (throttle node), inside collectives (coll/cdag), and
#          under ob1 + btl/credit.  Passes if mpirun exits non-zero within
#          30 s of the kill, its output names the killed rank or its pid,
#          no process of the job is left 10 s later, and no /dev/shm name of the job
#          (rdrp-*/cdag pools, vader segments) remains.
#   mca    every MCA parameter of pml/rdrp, btl/credit and coll/cdag set to
#          nonsense (-1, a huge number, a word): the job either runs
#          correctly (numbers: clamped or taken as they are) or fails within
#          30 s with a message naming the parameter; a word must be refused;
#          never a crash or hang.  Takes ~30 min (np 2, one job per value).
#
#   scripts/faults.sh [kill] [mca] [--np N] [--repeat K] [--only REGEX]
# Runs niced against ./build (RDRP_BUILD_DIR).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${RDRP_BUILD_DIR:-$top/build}
parts=()
np=3
repeat=1
only=""
while [ $# -gt 0 ]; do
    case $1 in
        kill|mca) parts+=("$1"); shift ;;
        --np) np=$2; shift 2 ;;
        --repeat) repeat=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "unknown argument $1 (see --help)"; exit 2 ;;
    esac
done
[ ${#parts[@]} -gt 0 ] || parts=(kill mca)
export OMPI_MCA_mca_base_component_path="SYS_DEFAULT:$build/.libs"
export OMPI_MCA_mpi_yield_when_idle=1
work=$build/faults
mkdir -p "$work"
bin=$work/fault_victim
if [ ! -x "$bin" ] || [ "$top/test/faults/fault_victim.c" -nt "$bin" ]; then
    nice -n 19 mpicc -std=c99 -O2 -Wall -Werror -o "$bin" "$top/test/faults/fault_victim.c" ||
        { echo "FAIL faults: build"; echo "0 passed, 1 failed"; exit 1; }
fi
pass=0
fail=0
result() { echo "$1 $2"; if [ "$1" = PASS ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi; }

# name;mode;mpirun arguments
scenarios=(
    "rdrp-eager;eager;--mca pml rdrp"
    "rdrp-eager-tiny-credits;eager;--mca pml rdrp --mca pml_rdrp_credit_slots 16"
    "rdrp-rndv-rdrp;rndv;--mca pml rdrp"
    "rdrp-rndv-am;rndv;--mca pml rdrp --mca pml_rdrp_data_path am"
    "rdrp-rndv-rma;rndv;--mca pml rdrp --mca pml_rdrp_data_path rma"
    "rdrp-rndv-get;rndv;--mca pml rdrp --mca pml_rdrp_rndv_protocol get"
    "rdrp-rndv-put;rndv;--mca pml rdrp --mca pml_rdrp_rndv_protocol put"
    "rdrp-tokens;eager;--mca pml rdrp --mca pml_rdrp_throttle node --mca pml_rdrp_throttle_node_tokens 4"
    "rdrp-quiet;quiet;--mca pml rdrp"
    "cdag-coll;coll;--mca pml rdrp --mca coll_cdag_priority 100"
    "cdag-coll-tokens;coll;--mca coll_cdag_priority 100 --mca coll_cdag_throttle node --mca coll_cdag_throttle_node_tokens 4"
    "ob1-credit-eager;eager;--mca pml ob1 --mca btl self,credit"
    "ob1-credit-rndv;rndv;--mca pml ob1 --mca btl self,credit"
)

job_shm() {  # /dev/shm names of job $1 (decimal jobid)
    local hex
    hex=$(printf '%x' "$1")
    ls /dev/shm 2>/dev/null | grep -E "(rdrp|cdag).*-$1-|\.${hex}\." || true
}

if [[ " ${parts[*]} " == *" kill "* ]]; then
    for ((rep = 0; rep < repeat; rep++)); do
        for s in "${scenarios[@]}"; do
            IFS=';' read -r name mode args <<<"$s"
            [ -z "$only" ] || grep -qE -- "$only" <<<"$name" || continue
            dir=$(mktemp -d "$work/$name.XXXX")
            log=$dir/mpirun.log
            # shellcheck disable=SC2086
            nice -n 19 mpirun --allow-run-as-root --oversubscribe -np "$np" $args "$bin" "$mode" "$dir" >"$log" 2>&1 &
            mp=$!
            for _ in $(seq 600); do  # every rank in MPI (60 s at most)
                [ "$(ls "$dir"/rank.* 2>/dev/null | wc -l)" -ge "$np" ] && break
                kill -0 $mp 2>/dev/null || break
                sleep 0.1
            done
            victim=$((1 + RANDOM % (np - 1)))
            read -r vpid jobid <"$dir/rank.$victim" 2>/dev/null || { vpid=""; jobid=0; }
            pids=$(cat "$dir"/rank.* 2>/dev/null | cut -d' ' -f1 | tr '\n' ' ')
            sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.3 + 2.2 * r / 32768 }')"
            if [ -z "$vpid" ] || ! kill -0 $mp 2>/dev/null; then
                tail -10 "$log"
                kill $mp 2>/dev/null
                result FAIL "kill $name: the job did not start"
                continue
            fi
            kill -KILL "$vpid"
            killed=$(date +%s%N)
            ended=""
            for _ in $(seq 300); do
                kill -0 $mp 2>/dev/null || { ended=1; break; }
                sleep 0.1
            done
            secs=$(awk -v a="$killed" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
            wait $mp 2>/dev/null
            rc=$?
            if [ -z "$ended" ]; then
                kill -KILL $mp 2>/dev/null
                for p in $pids; do kill -KILL "$p" 2>/dev/null; done
                result FAIL "kill $name: rank $victim killed, mpirun still running after 30 s (hang)"
                continue
            fi
            # the job's processes go with mpirun (SIGTERM, then SIGKILL from
            # the daemons): allow 10 s for that on a loaded machine
            left=""
            for _ in $(seq 100); do
                left=""
                for p in $pids; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
                [ -z "$left" ] && break
                sleep 0.1
            done
            shm=$(job_shm "$jobid")
            why=""
            [ $rc -ne 0 ] || why="$why; mpirun exited 0"
            grep -qE "rank $victim |rank $victim\b|PID $vpid|\[\[[0-9]+,[0-9]+\],$victim\]|vpid $victim\b" "$log" || why="$why; output does not name rank $victim / pid $vpid"
            [ -z "$left" ] || { why="$why; processes left:$left"; for p in $left; do kill -KILL "$p" 2>/dev/null; done; }
            [ -z "$shm" ] || why="$why; /dev/shm left: $(echo $shm)"
            if [ -z "$why" ]; then
                result PASS "kill $name: rank $victim killed, job ended in $secs s, named, nothing left"
                rm -rf "$dir"
            else
                tail -8 "$log"
                result FAIL "kill $name: rank $victim killed, ended in $secs s${why} (log $log)"
            fi
        done
    done
fi

if [[ " ${parts[*]} " == *" mca "* ]]; then
    # a program that moves data and checks it: p2p_basic of the MPI suite at np 2
    tb=$work/mpitests
    TEST_BUILD_DIR=$tb bash "$top/test/mpi/run_mpi_tests.sh" --np 2 --only '^p2p_basic$' -- --mca pml rdrp >/dev/null 2>&1
    prog=$tb/p2p_basic
    [ -x "$prog" ] || { result FAIL "mca: cannot build p2p_basic"; prog=""; }
    for comp in "pml rdrp" "btl credit" "coll cdag"; do
        [ -n "$prog" ] || break
        set -- $comp
        case $1 in
            pml) sel="--mca pml rdrp" ;;
            btl) sel="--mca pml ob1 --mca btl self,credit" ;;
            coll) sel="--mca coll_cdag_priority 100" ;;
        esac
        params=$(ompi_info --param "$1" "$2" --level 9 --parsable 2>/dev/null |
            sed -n "s/^mca:$1:$2:param:\([^:]*\):value:.*/\1/p" | sort -u)
        for p in $params; do
            case $p in *_priority|*_verbose) continue ;; esac
            for v in -1 99999999999 nonsense; do
                log=$work/mca.$p.$v.log
                start=$(date +%s)
                # shellcheck disable=SC2086
                timeout -k 5 30 nice -n 19 mpirun --allow-run-as-root --oversubscribe -np 2 $sel --mca "$p" "$v" \
                    "$prog" >"$log" 2>&1
                rc=$?
                secs=$(( $(date +%s) - start ))
                if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
                    result FAIL "mca $p=$v: no exit within 30 s"
                elif grep -qE 'Segmentation|core dumped|Aborted|signal 6|signal 11' "$log"; then
                    result FAIL "mca $p=$v: crashed (log $log)"
                elif [ $rc -eq 0 ] && [ "$v" = nonsense ]; then
                    result FAIL "mca $p=$v: a word where a value belongs was accepted without a message (${secs}s)"
                elif [ $rc -eq 0 ]; then
                    result PASS "mca $p=$v: accepted, the test passed (${secs}s)"
                elif grep -q "$p" "$log"; then
                    result PASS "mca $p=$v: refused, message names it (${secs}s): $(grep -m1 "$p" "$log" | cut -c1-120)"
                else
                    tail -5 "$log"
                    result FAIL "mca $p=$v: failed (exit $rc) without naming the parameter (log $log)"
                fi
            done
        done
    done
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
