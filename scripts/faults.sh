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
#   stop   SIGSTOP of a random rank with pml_rdrp_peer_timeout 5
#          (PEER_TIMEOUT): mid eager flood with tiny credits, mid-rendezvous
#          (rdrp, get), inside cdag collectives.  Passes like kill, within
#          the timeout + 30 s.  Negative tests, which must finish with exit
#          0: a rank stopped for 2 s then continued, and a rank that sleeps
#          2 x 8 s outside MPI while the others wait for it.
#   mismatch  ranks that disagree: pml rdrp next to pml ob1 (MPMD), and
#          pml/rdrp of another version (RDRP_TEST_FAKE_VERSION on one
#          rank): the job must fail before any traffic within 30 s with a
#          message naming the disagreement.
#   mca    every MCA parameter of pml/rdrp, btl/credit and coll/cdag set to
#          nonsense (-1, a huge number, a word).  Passes when the job fails
#          within 30 s with the component's bad-value message naming the
#          parameter, or when the value is legal (inside the "(valid: ...)"
#          its help string documents) and the job runs correctly; a value
#          outside the valid ones that is accepted fails.  ~25 min (np 2,
#          one job per value); --quick: 13 parameters, one of each kind per
#          component (~1 min, CI).
#
#   scripts/faults.sh [kill] [stop] [mismatch] [mca] [--quick] [--np N] [--repeat K] [--only REGEX]
# Runs niced against ./build (RDRP_BUILD_DIR).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${RDRP_BUILD_DIR:-$top/build}
parts=()
np=3
repeat=1
only=""
quick=0
while [ $# -gt 0 ]; do
    case $1 in
        kill|mca|stop|mismatch) parts+=("$1"); shift ;;
        --quick) quick=1; shift ;;
        --np) np=$2; shift 2 ;;
        --repeat) repeat=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "unknown argument $1 (see --help)"; exit 2 ;;
    esac
done
[ ${#parts[@]} -gt 0 ] || parts=(kill stop mismatch mca)
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

# fault SIG NAME MODE ARGS [EXPECT]: run fault_victim MODE under ARGS, send
# SIG to a random rank (not 0) 0.3-2.5 s into its traffic and judge the end
# (README "Reliability checks").  EXPECT "ends" (default): mpirun exits
# non-zero within LIMIT s of the signal, naming the rank, and nothing of the
# job is left.  EXPECT "survives": the job must finish by itself with exit
# 0 (the stopped rank is continued after STOP_FOR s).
fault() {
    local sig=$1 name=$2 mode=$3 args=$4 expect=${5:-ends}
    local part=${sig,,}
    local dir log mp victim vpid jobid pids sent ended secs rc left shm why
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
        result FAIL "$part $name: the job did not start"
        return
    fi
    kill -"$sig" "$vpid"
    sent=$(date +%s%N)
    if [ "$expect" = survives ]; then
        sleep "$STOP_FOR"
        kill -CONT "$vpid"
    fi
    ended=""
    for _ in $(seq $((limit * 10))); do
        kill -0 $mp 2>/dev/null || { ended=1; break; }
        sleep 0.1
    done
    secs=$(awk -v a="$sent" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
    wait $mp 2>/dev/null
    rc=$?
    if [ -z "$ended" ]; then
        kill -KILL $mp 2>/dev/null
        for p in $pids; do kill -KILL "$p" 2>/dev/null; done
        result FAIL "$part $name: rank $victim got SIG$sig, mpirun still running after $limit s (hang)"
        return
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
    if [ "$expect" = survives ]; then
        [ $rc -eq 0 ] || why="$why; mpirun exited $rc"
    else
        [ $rc -ne 0 ] || why="$why; mpirun exited 0"
        # "pid=N": UCX's own fatal message when a survivor's CMA read of the
        # killed process's memory fails (on-node UCX endpoints are in error
        # mode NONE, since PEER mode drops the shared-memory transports in
        # UCX 1.13): it names the process and the job ends at once
        grep -qE "rank $victim |rank $victim\b|PID $vpid|pid=$vpid\b|\[\[[0-9]+,[0-9]+\],$victim\]|vpid $victim\b" "$log" ||
            why="$why; output does not name rank $victim / pid $vpid"
        # a stop is only seen by pml/rdrp's watch: its message, nothing else
        [ "$sig" != STOP ] || grep -qE "rank $victim \(pid $vpid\) has been stopped \(SIGSTOP\)" "$log" ||
            why="$why; no peer-stopped message naming rank $victim (pid $vpid)"
    fi
    [ -z "$left" ] || { why="$why; processes left:$left"; for p in $left; do kill -KILL "$p" 2>/dev/null; done; }
    [ -z "$shm" ] || why="$why; /dev/shm left: $(echo $shm)"
    if [ -z "$why" ] && [ "$expect" = survives ]; then
        result PASS "$part $name: rank $victim stopped ${STOP_FOR} s and continued, job finished (exit 0) in $secs s, nothing left"
        rm -rf "$dir"
    elif [ -z "$why" ]; then
        result PASS "$part $name: rank $victim got SIG$sig, job ended in $secs s, named, nothing left"
        rm -rf "$dir"
    else
        tail -8 "$log"
        result FAIL "$part $name: rank $victim got SIG$sig, ended in $secs s${why} (log $log)"
    fi
}

if [[ " ${parts[*]} " == *" kill "* ]]; then
    limit=30
    for ((rep = 0; rep < repeat; rep++)); do
        for s in "${scenarios[@]}"; do
            IFS=';' read -r name mode args <<<"$s"
            [ -z "$only" ] || grep -qE -- "$only" <<<"$name" || continue
            fault KILL "$name" "$mode" "$args"
        done
    done
fi

# A peer that stops (SIGSTOP) for longer than pml_rdrp_peer_timeout while
# the others wait for it: the job must end within the timeout + 30 s,
# naming it.  And the negative tests: a stop shorter than the timeout, and
# a rank that sleeps outside MPI for longer than it, must not end the job.
PEER_TIMEOUT=${PEER_TIMEOUT:-5}
STOP_FOR=2
stop_scenarios=(
    "stop-eager-tiny-credits;eager;--mca pml rdrp --mca pml_rdrp_credit_slots 16;ends"
    "stop-rndv-rdrp;rndv;--mca pml rdrp;ends"
    "stop-rndv-get;rndv;--mca pml rdrp --mca pml_rdrp_rndv_protocol get;ends"
    "stop-cdag-coll;coll;--mca pml rdrp --mca coll_cdag_priority 100;ends"
    "stop-shorter-than-timeout;timed;--mca pml rdrp;survives"
    "sleep-outside-mpi;sleeper;--mca pml rdrp --mca coll_cdag_priority 100;sleeper"
)
if [[ " ${parts[*]} " == *" stop "* ]]; then
    limit=$((PEER_TIMEOUT + 30))
    for ((rep = 0; rep < repeat; rep++)); do
        for s in "${stop_scenarios[@]}"; do
            IFS=';' read -r name mode args expect <<<"$s"
            [ -z "$only" ] || grep -qE -- "$only" <<<"$name" || continue
            args="$args --mca pml_rdrp_peer_timeout $PEER_TIMEOUT"
            if [ "$expect" = sleeper ]; then
                # nobody is signalled: the last rank sleeps 2 x 8 s outside MPI
                log=$work/$name.log
                start=$(date +%s%N)
                # shellcheck disable=SC2086
                timeout -k 5 90 nice -n 19 mpirun --allow-run-as-root --oversubscribe -np "$np" $args "$bin" sleeper "$work" \
                    >"$log" 2>&1
                rc=$?
                secs=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
                if [ $rc -eq 0 ]; then
                    result PASS "stop $name: the last rank slept 2 x 8 s outside MPI (timeout $PEER_TIMEOUT s), job finished (exit 0) in $secs s"
                else
                    tail -8 "$log"
                    result FAIL "stop $name: a rank sleeping outside MPI ended the job (exit $rc after $secs s, log $log)"
                fi
                continue
            fi
            fault STOP "$name" "$mode" "$args" "$expect"
        done
    done
fi

# Ranks that disagree: "NAME;EXPECTED TEXT;mpirun arguments (MPMD)".  About
# the PML, whichever side reaches add_procs first speaks and the job ends:
# ours (pml-mismatch, from the rdrp rank) or Open MPI's one line from
# mca_pml_base_pml_check_selected (from the ob1 rank).
pml_said="disagree about the PML: rank [0-9]+ .* selected pml ob1|selected pml (ob1|rdrp), but peer .* selected pml (rdrp|ob1)"
# Both ranks compare versions; whichever reports first ends the job, so the
# message may come from either side (a CI rehearsal under load had rank 1's).
version_said="run different versions: (rank 1 .* runs pml/rdrp 0.0.0-other, this process pml/rdrp|rank 0 .* runs pml/rdrp [^,]+, this process pml/rdrp 0.0.0-other)"
mismatch_scenarios=(
    "pml-rdrp-vs-ob1;$pml_said;-np 1 -x OMPI_MCA_pml=rdrp BIN : -np 1 -x OMPI_MCA_pml=ob1 BIN"
    "pml-ob1-vs-rdrp;$pml_said;-np 1 -x OMPI_MCA_pml=ob1 BIN : -np 1 -x OMPI_MCA_pml=rdrp BIN;1"
    "rdrp-version;$version_said;--mca pml rdrp -np 1 BIN : -np 1 -x RDRP_TEST_FAKE_VERSION=0.0.0-other BIN"
)
if [[ " ${parts[*]} " == *" mismatch "* ]]; then
    for s in "${mismatch_scenarios[@]}"; do
        # a fourth field names the ranks that must not leave MPI_Init (default
        # all): an ob1 rank 0 cannot see a mismatch (Open MPI compares PMLs
        # against rank 0's only) and its MPI_Init has no barrier after
        # add_procs (the modex fence is the last), so it may return before
        # the rdrp rank's abort ends the job (a CI rehearsal under load)
        IFS=';' read -r name want args must_fail <<<"$s"
        [ -z "$only" ] || grep -qE -- "$only" <<<"$name" || continue
        dir=$(mktemp -d "$work/$name.XXXX")
        log=$dir/mpirun.log
        start=$(date +%s%N)
        shm_before=$(ls /dev/shm 2>/dev/null)
        # the ranks send nothing before MPI_Init returns; fault_victim's
        # "timed" mode would run 15 s if the job wrongly started.  btl vader
        # is left out: a job that fails inside MPI_Init leaves Open MPI's
        # vader segments in /dev/shm (4.1.4), which is not what is tested
        # shellcheck disable=SC2086
        timeout -k 5 30 nice -n 19 mpirun --allow-run-as-root --oversubscribe --mca btl self,tcp \
            ${args//BIN/$bin timed $dir} >"$log" 2>&1
        rc=$?
        secs=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
        returned=""
        for f in "$dir"/rank.*; do
            [ -e "$f" ] || continue
            r=${f##*.}
            [ -z "$must_fail" ] || [[ ",$must_fail," == *",$r,"* ]] && returned="$returned$r "
        done
        if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
            result FAIL "mismatch $name: no exit within 30 s (log $log)"
        elif [ $rc -eq 0 ]; then
            result FAIL "mismatch $name: the job ran (exit 0)"
        elif [ -n "$returned" ]; then
            result FAIL "mismatch $name: MPI_Init returned on rank $returned, which must refuse (log $log)"
        elif [ -n "$(comm -13 <(echo "$shm_before") <(ls /dev/shm 2>/dev/null) | grep -E 'rdrp|cdag')" ]; then
            result FAIL "mismatch $name: /dev/shm left: $(comm -13 <(echo "$shm_before") <(ls /dev/shm) | tr '\n' ' ')"
        elif grep -qE -- "$want" "$log"; then
            result PASS "mismatch $name: refused in $secs s: $(grep -m1 -oE -- "$want.*" "$log" | cut -c1-110)"
            rm -rf "$dir"
        else
            tail -8 "$log"
            result FAIL "mismatch $name: exit $rc without a message saying so (log $log)"
        fi
    done
fi

# legal VALUE VALID: is VALUE inside VALID, the "(valid: ...)" text of a
# help string ("lo..hi", "a | b | c", "a comma list of: a | b")?
legal() {
    local v=$1 valid=$2
    case $valid in
        *..*)
            [[ $v =~ ^-?[0-9]+$ ]] || return 1
            awk -v v="$v" -v r="$valid" 'BEGIN { split(r, a, /\.\./); exit !(v + 0 >= a[1] + 0 && v + 0 <= a[2] + 0) }'
            ;;
        *)
            local w
            for w in $(sed 's/^a comma list of://; s/|/ /g' <<<"$valid"); do
                [ "$w" = "$v" ] && return 0
            done
            return 1
            ;;
    esac
}

# the short form (--quick, CI): one parameter of each kind per component
quick_params="pml_rdrp_chunk_size pml_rdrp_max_outstanding pml_rdrp_rndv_protocol pml_rdrp_credit_wait_us
    pml_rdrp_peer_timeout btl_credit_slots btl_credit_mode btl_credit_flags btl_credit_eager_limit
    coll_cdag_radix coll_cdag_progress coll_cdag_bcast_algorithm coll_cdag_throttle_bytes_per_token"

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
        info=$(ompi_info --param "$1" "$2" --level 9 --parsable 2>/dev/null)
        params=$(sed -n "s/^mca:$1:$2:param:\([^:]*\):value:.*/\1/p" <<<"$info" | sort -u)
        for p in $params; do
            if [ "$quick" = 1 ]; then
                grep -qw -- "$p" <<<"$quick_params" || continue
            fi
            [ -z "$only" ] || grep -qE -- "$only" <<<"$p" || continue
            # the valid values the help string documents
            valid=$(grep -F "mca:$1:$2:param:$p:help:" <<<"$info" | sed -n 's/.*(valid: \(.*\))$/\1/p' | head -1)
            # Open MPI's standard btl parameters keep Open MPI's help
            # strings: their valid values are listed in the component's
            # help file (topic bad-value)
            [ -n "$valid" ] || valid=$(sed -n "s/^  $p (valid: \(.*\))$/\1/p" "$top"/btl_credit/btl_credit_help.txt | head -1)
            for v in -1 99999999999 nonsense; do
                log=$work/mca.$p.$v.log
                start=$(date +%s)
                # shellcheck disable=SC2086
                # (mpirun refuses a parameter given twice: coll_cdag_priority
                # is both the selector and the parameter tested)
                timeout -k 5 30 nice -n 19 mpirun --allow-run-as-root --oversubscribe -np 2 \
                    ${sel/--mca $p 100/} --mca "$p" "$v" "$prog" >"$log" 2>&1
                rc=$?
                secs=$(( $(date +%s) - start ))
                if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
                    result FAIL "mca $p=$v: no exit within 30 s"
                elif grep -qE 'Segmentation|core dumped|Aborted|signal 6|signal 11' "$log"; then
                    result FAIL "mca $p=$v: crashed (log $log)"
                elif [ $rc -eq 0 ] && [ -n "$valid" ] && legal "$v" "$valid"; then
                    result PASS "mca $p=$v: a legal value (valid: $valid), the test passed (${secs}s)"
                elif [ $rc -eq 0 ]; then
                    result FAIL "mca $p=$v: outside its valid values (${valid:-undocumented}) but accepted (${secs}s, log $log)"
                elif grep -qE "refuses an MCA parameter value: $p = " "$log"; then
                    result PASS "mca $p=$v: refused in ${secs}s: $(grep -m1 -oE "$p = .*" "$log" | cut -c1-100)"
                else
                    tail -5 "$log"
                    result FAIL "mca $p=$v: failed (exit $rc) without the bad-value message naming it (log $log)"
                fi
            done
        done
    done
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
