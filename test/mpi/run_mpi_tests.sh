#!/usr/bin/env bash
# run_mpi_tests.sh - build and run the rdrp MPI point-to-point test suite.
#
# Usage: run_mpi_tests.sh [--np "2 3 4"] [--only REGEX] [--timeout S]
#                         [--label NAME] [--list] -- [extra mpirun args...]
#
#   --np "LIST"    process counts to run every test at (default "2 3 4")
#   --only REGEX   run only the tests whose name matches REGEX (grep -E)
#   --timeout S    per-run time limit in seconds (default 120); a hang fails.
#                  abort_* tests are limited to 30 s regardless.
#                  leak_* tests pass iff they exit 0 and the finalize leak
#                  check printed exactly the "leak-check ..." lines the test
#                  announced with "EXPECT-LEAK ..." lines.
#   --load-aware   count only the time the job was not waiting for a CPU
#                  towards the limit (run-queue wait from /proc/PID/schedstat),
#                  up to 6x the limit in wall time (RDRP_TEST_TIMEOUT_CEILING
#                  sets the factor); for shared machines where
#                  niced runs are starved for minutes.  The tests' wall-clock
#                  watchdog is then replaced by SIGALRM from the runner at
#                  the limit.
#   --label NAME   label printed on every result line (default: the value of
#                  "--mca pml X" in the extra args, else "default")
#   --list         print the test names and exit
#   -- ARGS        passed to mpirun after the runner's defaults, e.g.
#                  -- --mca pml ob1 --mca btl self,vader
#
# Environment:
#   TEST_BUILD_DIR   where binaries and logs go (default
#                    $RDRP_BUILD_DIR/test/mpi if RDRP_BUILD_DIR is set, else
#                    /tmp/rdrp-mpitests-<uid>)
#   MPICC, MPIRUN    compiler / launcher (default mpicc / mpirun)
#   MPITEST_MPIRUN_DEFAULTS  extra mpirun args placed before the "--" args
#                    (default none)
#   MPITEST_FAIL_ON_LEAK=1   a finalize leak report ("leak-check ...", the
#                    components' *_finalize_check) fails the test
#                    (scripts/sanitize.sh leaks)
#   OMPI_MCA_*       pass through untouched (mpirun forwards them itself).
#                    OMPI_MCA_mpi_yield_when_idle defaults to 1 (oversubscribed
#                    busy polling); set it, or pass --mca mpi_yield_when_idle
#                    after --, to override.
#
# Output: one line per (test, np):
#   PASS <label> <test> np=<N> (<secs>s)
#   FAIL <label> <test> np=<N> (<secs>s) (reason: ...)   + last 30 lines
# then "<N> passed, <N> failed"; exit status 1 if anything failed.

set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
nps="2 3 4"
only=""
tmo=120
label=""
list=0
load_aware=0
ceiling=${RDRP_TEST_TIMEOUT_CEILING:-6}

usage() { sed -n '2,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
        --np) nps=$2; shift 2 ;;
        --np=*) nps=${1#*=}; shift ;;
        --only) only=$2; shift 2 ;;
        --only=*) only=${1#*=}; shift ;;
        --timeout) tmo=$2; shift 2 ;;
        --timeout=*) tmo=${1#*=}; shift ;;
        --label) label=$2; shift 2 ;;
        --label=*) label=${1#*=}; shift ;;
        --list) list=1; shift ;;
        --load-aware) load_aware=1; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        *) echo "run_mpi_tests.sh: unknown argument '$1' (extra mpirun args go after --)" >&2
           exit 2 ;;
    esac
done
extra=("$@")

case "$tmo" in ''|*[!0-9]*) echo "run_mpi_tests.sh: --timeout needs an integer" >&2; exit 2 ;; esac

if [ -z "$label" ]; then
    label=default
    for ((i = 0; i + 2 < ${#extra[@]}; i++)); do
        if [ "${extra[i]}" = "--mca" ] || [ "${extra[i]}" = "-mca" ]; then
            [ "${extra[i+1]}" = "pml" ] && label=${extra[i+2]}
        fi
    done
fi

MPICC=${MPICC:-mpicc}
MPIRUN=${MPIRUN:-mpirun}
read -r -a defaults <<< "${MPITEST_MPIRUN_DEFAULTS:-}"
# a default given through the environment never clashes with a --mca on the
# command line (mpirun refuses a parameter listed twice; the command line
# wins over the environment)
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
if [ -n "${TEST_BUILD_DIR:-}" ]; then
    bdir=$TEST_BUILD_DIR
elif [ -n "${RDRP_BUILD_DIR:-}" ]; then
    bdir=$RDRP_BUILD_DIR/test/mpi
else
    bdir=/tmp/rdrp-mpitests-$(id -u)
fi
mkdir -p "$bdir/logs" || { echo "cannot create $bdir" >&2; exit 2; }

tests=()
for src in "$here"/*.c; do
    t=$(basename "$src" .c)
    if [ -n "$only" ] && ! grep -Eq -- "$only" <<< "$t"; then continue; fi
    tests+=("$t")
done
if [ $list = 1 ]; then printf '%s\n' "${tests[@]}"; exit 0; fi
if [ ${#tests[@]} = 0 ]; then
    echo "run_mpi_tests.sh: no test matches '$only'" >&2
    echo "0 passed, 1 failed"
    exit 1
fi

npass=0
nfail=0

# elapsed seconds (one decimal) since $1 (ns timestamp)
elapsed() { local d=$(( ($(date +%s%N) - $1) / 100000000 )); echo "$((d / 10)).$((d % 10))"; }

print_tail() {  # file
    if [ -s "$1" ]; then
        tail -n 30 "$1" | sed 's/^/    | /'
    else
        echo "    | (no output)"
    fi
}

# all descendants of a pid (children first found breadth-first)
descendants() {
    ps -e -o pid= -o ppid= | awk -v root="$1" '
        { parent[$1] = $2 }
        END { q[0] = root; n = 1
              for (i = 0; i < n; i++)
                  for (p in parent) if (parent[p] == q[i]) { q[n++] = p; print p } }'
}

# --load-aware: how long the job has waited for a CPU.  Every ~1 s it reads
# each of the job's processes' run-queue wait and run time (the second and
# first fields of /proc/PID/schedstat, ns).  The kernel adds a wait to that
# sum only when the process gets the CPU again, in lumps of seconds under
# load, so a process that is runnable (state R) and has not run since the
# last look is counted as waiting for the whole stretch at once, and the
# lump, when it comes, only for what was not counted yet.  The job's wait
# is the largest of its processes' (a job is held up as soon as one of its
# ranks cannot run); exited processes keep theirs.  A hung job that sleeps
# waits for nothing; one that busy-polls waits for what it does not get of
# the CPU.  Sets job_wait_ns.
declare -A qwait qrun qest qpend
clk_tck=$(getconf CLK_TCK 2> /dev/null || echo 100)
charge_stretch() {  # pid stretch_ns
    local p w r line st d up_cs
    { read -r up_cs _ < /proc/uptime; } 2> /dev/null
    up_cs=${up_cs/./}; up_cs=$((10#$up_cs))   # centiseconds since boot
    for p in $1 $(descendants "$1"); do
        { read -r r w _ < "/proc/$p/schedstat" && read -r line < "/proc/$p/stat"; } 2> /dev/null || continue
        st=${line##*) }
        st=${st%% *}
        if [ -z "${qwait[$p]:-}" ]; then
            # new: its reported wait, and if it is runnable now, all of its
            # life that it did not run as waiting too (the kernel has not
            # reported the current wait yet; counting a sleep before it as
            # waiting only makes the clock lenient, the ceiling still holds)
            qest[$p]=$w qpend[$p]=0
            if [ "$st" = R ]; then
                set -- "$1" "$2" ${line##*) }
                d=$(( (up_cs - ${22} * 100 / clk_tck) * 10000000 - r ))   # $22 = field 22: start, in ticks
                [ $d -gt "$w" ] && qpend[$p]=$((d - w)) qest[$p]=$d
                set -- "$1" "$2"
            fi
        elif [ "$st" = R ] && [ "$r" = "${qrun[$p]}" ]; then
            qest[$p]=$((qest[$p] + $2))         # runnable and not run: waiting
            qpend[$p]=$((qpend[$p] + $2))
        else
            d=$((w - qwait[$p] - qpend[$p]))    # the reported wait not yet counted
            if [ $d -ge 0 ]; then qest[$p]=$((qest[$p] + d)) qpend[$p]=0
            else qpend[$p]=$((-d)); fi
        fi
        qwait[$p]=$w qrun[$p]=$r
        [ "${qest[$p]}" -gt "$job_wait_ns" ] && job_wait_ns=${qest[$p]}
    done
}

# run "$@" with output to $log, limit $limit seconds; sets rc, timed_out,
# timeout_note.  With --load-aware the limit counts only the time the job
# was not waiting for a CPU (charge_stretch), up to a wall-clock ceiling of
# $ceiling times the limit, so that a starved machine slows the clock
# instead of failing tests that run, and a hang still ends.
run_limited() {
    local limit=$1; shift
    local start_ns=$(date +%s%N) pid kids now last_ns over
    "$@" < /dev/null > "$log" 2>&1 &
    pid=$!
    timed_out=0 timeout_note="" job_wait_ns=0 last_ns=$start_ns
    qwait=() qrun=() qest=() qpend=()
    while kill -0 "$pid" 2> /dev/null; do
        now=$(date +%s%N)
        over=0
        if [ $load_aware = 1 ]; then
            if [ $((now - last_ns)) -ge 1000000000 ]; then
                charge_stretch "$pid" $((now - last_ns))
                last_ns=$now
            fi
            [ $(( (now - start_ns - job_wait_ns) / 1000000000 )) -ge "$limit" ] && over=1
            [ $(( (now - start_ns) / 1000000000 )) -ge $((limit * ceiling)) ] && over=1
        else
            [ $(( (now - start_ns) / 1000000000 )) -ge "$limit" ] && over=1
        fi
        if [ $over = 1 ]; then
            timed_out=1
            kids=$(descendants "$pid")
            if [ $load_aware = 1 ]; then
                timeout_note=" (load-aware: $(( (now - start_ns - job_wait_ns) / 1000000000 ))s not waiting for a CPU in $(( (now - start_ns) / 1000000000 ))s)"
                # the tests' own watchdog (MPITEST_TIMEOUT, a wall-clock
                # alarm, off in this mode) says where each rank is stuck
                # shellcheck disable=SC2086
                [ -n "$kids" ] && ps -o pid=,comm= -p $(echo $kids | tr ' ' ,) 2> /dev/null |
                    awk -v b="${bin##*/}" '$2 == substr(b, 1, 15) { print $1 }' | xargs -r kill -ALRM 2> /dev/null
                sleep 2
            fi
            kill -TERM "$pid" 2> /dev/null
            for _ in 1 2 3 4 5 6 7 8 9 10; do
                kill -0 "$pid" 2> /dev/null || break
                sleep 0.5
            done
            # shellcheck disable=SC2086
            kill -KILL "$pid" $kids $(descendants "$pid") 2> /dev/null
            break
        fi
        sleep 0.05
    done
    wait "$pid"
    rc=$?
}

cflags=(-std=c99 -O2 -Wall -Werror -pthread)

for t in "${tests[@]}"; do
    src=$here/$t.c
    bin=$bdir/$t
    clog=$bdir/logs/$t.compile.log
    built=1
    if [ ! -x "$bin" ] || [ "$src" -nt "$bin" ] || [ -n "$(find "$here" -maxdepth 1 -name 'mpitest*.h' -newer "$bin")" ]; then
        tmpbin=$bin.tmp.$$
        # a test may ask for more flags in its source: "mpitest-cflags: -rdynamic"
        read -r -a tflags <<< "$(sed -n 's/.*mpitest-cflags: *\([^*]*\).*/\1/p' "$src" | head -n 1)"
        if "$MPICC" "${cflags[@]}" "${tflags[@]}" -o "$tmpbin" "$src" > "$clog" 2>&1; then
            mv -f "$tmpbin" "$bin"
        else
            built=0
            rm -f "$tmpbin"
        fi
    fi
    for np in $nps; do
        if [ $built = 0 ]; then
            echo "FAIL $label $t np=$np (0.0s) (reason: compile error, $clog)"
            [ "$np" = "${nps%% *}" ] && print_tail "$clog"
            nfail=$((nfail + 1))
            continue
        fi
        log=$bdir/logs/$label.$t.np$np.log
        limit=$tmo
        case $t in abort_*) [ "$limit" -gt 30 ] && limit=30 ;; esac
        wd=$(( limit > 20 ? limit - 10 : limit - 2 ))
        [ $wd -lt 1 ] && wd=1
        case $t in abort_*) wd=0 ;; esac
        [ $load_aware = 1 ] && wd=0
        start=$(date +%s%N)
        run_limited "$limit" "$MPIRUN" --allow-run-as-root --oversubscribe "${defaults[@]}" \
            "${extra[@]}" -x MPITEST_TIMEOUT=$wd -np "$np" "$bin"
        secs=$(elapsed "$start")
        reason=""
        case $t in
            abort_*)
                if [ $timed_out = 1 ]; then
                    reason="timeout: mpirun did not exit within ${limit}s after the peer died$timeout_note"
                elif [ $rc = 0 ]; then
                    reason="mpirun exited 0 although a rank was killed"
                # mpirun's own report of the death, or the component's: across
                # nodes the survivor sees the connection go and aborts the job
                # before the dead rank's daemon reports, so mpirun prints only
                # that -- pml/rdrp "lost its connection to a peer" (naming it),
                # btl/credit "... The peer process most likely died"
                elif ! grep -Eqi 'exited on signal|noticed that process|detected that one or more processes exited|lost its connection to a peer|peer process most likely died' "$log"; then
                    reason="exit code $rc but no message naming the failure"
                fi
                ;;
            leak_*)
                # the finalize leak check must print exactly the lines the
                # test announced (EXPECT-LEAK ...) as "leak-check ..." lines
                want=$(sed -n 's/^EXPECT-LEAK //p' "$log" | sort)
                got=$(grep -o 'leak-check .*' "$log" | sed 's/^leak-check //' | sort)
                if [ $timed_out = 1 ]; then
                    reason="timeout after ${limit}s$timeout_note"
                elif [ $rc != 0 ]; then
                    reason="exit code $rc"
                elif [ "$want" != "$got" ]; then
                    reason="finalize leak reports differ from the expected ones: expected [${want//$'\n'/ | }] got [${got//$'\n'/ | }]"
                fi
                ;;
            *)
                if [ $timed_out = 1 ]; then
                    reason="timeout after ${limit}s$timeout_note"
                elif [ $rc != 0 ]; then
                    reason="exit code $rc"
                elif [ "${MPITEST_FAIL_ON_LEAK:-0}" = 1 ] && grep -q 'leak-check ' "$log"; then
                    # scripts/sanitize.sh leaks: a finalize leak report
                    reason="finalize leak check: $(grep -o 'leak-check .*' "$log" | sort -u | head -3 | tr '\n' ' ')"
                elif grep -q 'was not returned to mpool' "$log"; then
                    # UCX lists every request still outstanding when a worker
                    # is destroyed: a PML must finish all of its operations
                    reason="UCX objects left at finalize (was not returned to mpool)"
                fi
                ;;
        esac
        if [ -z "$reason" ]; then
            echo "PASS $label $t np=$np (${secs}s)"
            npass=$((npass + 1))
        else
            echo "FAIL $label $t np=$np (${secs}s) (reason: $reason)"
            print_tail "$log"
            nfail=$((nfail + 1))
        fi
    done
done

echo "$npass passed, $nfail failed"
[ $nfail = 0 ]
