#!/usr/bin/env bash
# suites.sh -- compare the PMLs (rdrp, ucx, ob1) and the collective
# components (coll/cdag, coll/tuned) with the OSU Micro-Benchmarks and the
# Intel MPI Benchmarks the user has built.  See bench/README.md.
#
#   bench/suites.sh --osu OSU_DIR --imb IMB_DIR [--imb-check IMB_CHECK_DIR]
#   bench/suites.sh --osu DIR --quick --reps 2 --benchmarks "osu_latency osu_allreduce"
#
# Timed runs are interleaved (every configuration of one benchmark runs
# before the next repetition starts, in a rotating order) and the best of
# --reps repetitions is reported per size (--stat median: the median; both
# are written, summary.csv and median.csv).  A data-check pass follows: OSU
# with validation (-c) and, with --imb-check, an IMB-MPI1 built with
# -DCHECK; any data defect is listed and makes the exit status 1.
#
# This script builds nothing: it runs the binaries you built.
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

OSU_DIR=""
IMB_DIR=""
IMB_CHECK_DIR=""
REPS=3
NP=2
COLL_NP=4
MAX_P2P=4M
MAX_COLL=1M
PMLS="rdrp ucx ob1"
COLL_PMLS="rdrp ucx ob1"
COLLS="cdag tuned"
EXTRA_COLL=()
BENCHMARKS=""
COMPONENT_PATH=""
MPIRUN_ARGS=""
OUT=""
QUICK=0
RT=0
CHECK=1
TIMING=1
PLOT=1
STAT=best
TIMEOUT=300

usage() {
    cat <<'EOF'
usage: suites.sh [--osu DIR] [--imb DIR] [--imb-check DIR] [options]
Benchmarks (at least one of --osu / --imb)
  --osu DIR          a built OSU Micro-Benchmarks tree (install prefix, its
                     libexec/osu-micro-benchmarks/mpi, or the build tree):
                     osu_latency osu_bw osu_bibw osu_mbw_mr, osu_allreduce
                     osu_bcast osu_alltoall osu_allgather osu_reduce
                     osu_gather osu_scatter osu_reduce_scatter osu_barrier,
                     osu_allgatherv osu_alltoallv osu_gatherv osu_scatterv
  --imb DIR          directory holding a built IMB-MPI1 (timed runs):
                     PingPong Sendrecv Exchange, Allreduce Bcast Alltoall
  --imb-check DIR    directory holding an IMB-MPI1 built with -DCHECK (data
                     check pass; without it IMB data is not checked)
  --benchmarks LIST  only these, e.g. "osu_latency imb_pingpong osu_allreduce"
Configurations
  --pmls LIST        point-to-point runs (default "rdrp ucx ob1")
  --coll-pmls LIST   PMLs under the collective runs (default "rdrp ucx ob1")
  --colls LIST       collective components (default "cdag tuned"; also cdagucx:
                     coll/cdag without its shared-memory rings): each
                     collective benchmark runs under every COLL+PML pair
  --coll-config NAME=ARGS  one more collective configuration for --colls
                     (repeatable): NAME runs with mpirun ARGS, e.g. an older
                     build of coll/cdag interleaved with the current one:
                     "cdagold=--mca coll_cdag_priority 100 --mca
                     mca_base_component_path SYS_DEFAULT:/old/.libs"
  --component-path DIR  where mca_pml_rdrp.so etc. are (default: wherever
                     Open MPI finds them: installed package, environment)
  --mpirun-args ARGS extra mpirun arguments for every run
  --rt               run mpirun and the ranks round-robin real-time (chrt -r:
                     mpirun above the ranks) when ranks <= cores, so other
                     work on a shared machine cannot preempt a timed rank;
                     every configuration is run the same way
What and how long
  --reps N           timed repetitions, best reported (default 3)
  --stat best|median what the tables and plots show per size: the best of
                     the repetitions (default) or their median.  On a host
                     whose launches land in a fast or a slow mode (a VM
                     whose vCPUs the hypervisor places near or far), the
                     best says which configuration caught a fast launch and
                     the median compares the common mode
  --np N             ranks of point-to-point runs (default 2)
  --coll-np N        ranks of collective runs (default 4)
  --max-size SIZE    largest point-to-point message (default 4M)
  --max-coll SIZE    largest collective message (default 1M)
  --quick            fewer iterations, max sizes 1M / 64K
  --no-check         skip the data-check pass
  --check-only       only the data-check pass
  --timeout SEC      limit of one mpirun (default 300)
Output
  --out DIR          results directory (default bench/results/suites-<date-time>)
  --no-plot          no PNG plots
  -h, --help
EOF
}
die() { echo "suites.sh: $*" >&2; exit 2; }

while [[ $# -gt 0 ]]; do
    case $1 in
    --osu)          OSU_DIR=$2; shift ;;
    --imb)          IMB_DIR=$2; shift ;;
    --imb-check)    IMB_CHECK_DIR=$2; shift ;;
    --benchmarks)   BENCHMARKS=${2//,/ }; shift ;;
    --pmls)         PMLS=$2; shift ;;
    --coll-pmls)    COLL_PMLS=$2; shift ;;
    --colls)        COLLS=$2; shift ;;
    --coll-config)  [[ $2 == *=* ]] || die "--coll-config wants NAME=ARGS"; EXTRA_COLL+=("$2"); shift ;;
    --component-path) COMPONENT_PATH=$2; shift ;;
    --mpirun-args)  MPIRUN_ARGS=$2; shift ;;
    --rt)           RT=1 ;;
    --reps)         REPS=$2; shift ;;
    --np)           NP=$2; shift ;;
    --coll-np)      COLL_NP=$2; shift ;;
    --stat)         STAT=$2; shift ;;
    --max-size)     MAX_P2P=$2; shift ;;
    --max-coll)     MAX_COLL=$2; shift ;;
    --quick)        QUICK=1 ;;
    --no-check)     CHECK=0 ;;
    --check-only)   TIMING=0 ;;
    --timeout)      TIMEOUT=$2; shift ;;
    --out)          OUT=$2; shift ;;
    --no-plot)      PLOT=0 ;;
    -h|--help)      usage; exit 0 ;;
    *)              usage >&2; die "unknown option '$1'" ;;
    esac
    shift || die "option needs an argument"
done

bytes() {   # 4M -> 4194304
    local v=$1 n
    n=${v%[KkMmGg]}
    [[ $n =~ ^[0-9]+$ ]] || die "bad size '$v'"
    case $v in
    *[Kk]) echo $((n << 10)) ;; *[Mm]) echo $((n << 20)) ;; *[Gg]) echo $((n << 30)) ;; *) echo "$n" ;;
    esac
}
[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "--reps needs a positive integer"
[[ $NP =~ ^[0-9]+$ && $NP -ge 2 ]] || die "--np needs an integer >= 2"
[[ $COLL_NP =~ ^[0-9]+$ && $COLL_NP -ge 2 ]] || die "--coll-np needs an integer >= 2"
if (( QUICK )); then
    [[ $MAX_P2P == 4M ]] && MAX_P2P=1M
    [[ $MAX_COLL == 1M ]] && MAX_COLL=64K
fi
MAXB_P2P=$(bytes "$MAX_P2P")
MAXB_COLL=$(bytes "$MAX_COLL")
log2() { local v=$1 l=0; while (( (1 << (l + 1)) <= v )); do l=$((l + 1)); done; echo $l; }
[[ -n $OSU_DIR || -n $IMB_DIR || -n $IMB_CHECK_DIR ]] || { usage >&2; die "give --osu DIR and/or --imb DIR"; }

# ------------------------------------------------------------ binaries
# find NAME under DIR: the first executable file of that name
find_bin() { find -L "$1" -maxdepth 7 -type f -name "$2" -perm -u+x 2>/dev/null | sort | head -1; }
declare -A BIN=()
OSU_P2P="osu_latency osu_bw osu_bibw osu_mbw_mr"
OSU_COLL="osu_allreduce osu_bcast osu_alltoall osu_allgather osu_reduce osu_gather osu_scatter osu_reduce_scatter osu_barrier
          osu_allgatherv osu_alltoallv osu_gatherv osu_scatterv"
IMB_P2P="PingPong Sendrecv Exchange"
IMB_COLL="Allreduce Bcast Alltoall"
if [[ -n $OSU_DIR ]]; then
    [[ -d $OSU_DIR ]] || die "--osu $OSU_DIR is not a directory"
    for b in $OSU_P2P $OSU_COLL; do BIN[$b]=$(find_bin "$OSU_DIR" "$b"); done
    found=0
    for b in $OSU_P2P $OSU_COLL; do [[ -n ${BIN[$b]} ]] && found=1; done
    (( found )) || die "no OSU binaries under $OSU_DIR: build OSU Micro-Benchmarks with this MPI (./configure CC=mpicc CXX=mpicxx --prefix=P && make install) and pass --osu P"
fi
find_imb() {   # DIR WHAT
    [[ -d $1 ]] || die "$2 $1 is not a directory"
    local b
    b=$(find_bin "$1" IMB-MPI1)
    [[ -n $b ]] || die "no IMB-MPI1 under $1: build it from the Intel MPI Benchmarks sources with this MPI (make CC=mpicc CXX=mpicxx IMB-MPI1$([[ $2 == --imb-check ]] && echo ' CPPFLAGS=-DCHECK')) and pass that directory"
    echo "$b"
}
IMB_BIN=""
IMB_CHECK_BIN=""
[[ -n $IMB_DIR ]] && IMB_BIN=$(find_imb "$IMB_DIR" --imb)
[[ -n $IMB_CHECK_DIR ]] && IMB_CHECK_BIN=$(find_imb "$IMB_CHECK_DIR" --imb-check)

# The benchmark table: NAME -> "kind suite metric unit better"
declare -A B_KIND=() B_UNIT=() B_BETTER=()
ALL=()
add_bench() { ALL+=("$1"); B_KIND[$1]=$2; B_UNIT[$1]=$3; B_BETTER[$1]=$4; }
for b in $OSU_P2P; do
    [[ -n ${BIN[$b]:-} ]] || continue
    case $b in osu_latency) add_bench "$b" p2p "us" lower ;; *) add_bench "$b" p2p "MB/s" higher ;; esac
done
if [[ -n $IMB_BIN ]]; then
    for b in $IMB_P2P; do add_bench "imb_${b,,}" p2p "us" lower; done
fi
for b in $OSU_COLL; do [[ -n ${BIN[$b]:-} ]] && add_bench "$b" coll "us" lower; done
if [[ -n $IMB_BIN ]]; then
    for b in $IMB_COLL; do add_bench "imb_${b,,}" coll "us" lower; done
fi
imb_name() { case $1 in imb_pingpong) echo PingPong ;; imb_sendrecv) echo Sendrecv ;; imb_exchange) echo Exchange ;;
             imb_allreduce) echo Allreduce ;; imb_bcast) echo Bcast ;; imb_alltoall) echo Alltoall ;; esac; }
SEL=()
if [[ -n $BENCHMARKS ]]; then
    for b in $BENCHMARKS; do
        [[ -n ${B_KIND[$b]:-} ]] || die "benchmark '$b' unknown or its binary not found (have: ${ALL[*]:-none})"
        SEL+=("$b")
    done
else
    SEL=("${ALL[@]}")
fi

# ------------------------------------------------------------ configurations
declare -A PML_ARGS=(
    [rdrp]="--mca pml rdrp"
    [ucx]="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any"
    [ob1]="--mca pml ob1 --mca btl self,vader"
)
# cdagucx: coll/cdag with every schedule message over UCX (no shared-memory rings)
declare -A COLL_ARGS=([cdag]="--mca coll_cdag_priority 100" [cdagucx]="--mca coll_cdag_priority 100 --mca coll_cdag_ring 0" [tuned]="")
for e in "${EXTRA_COLL[@]}"; do COLL_ARGS[${e%%=*}]=${e#*=}; done
[[ $STAT == best || $STAT == median ]] || die "--stat takes best or median, not '$STAT'"
for p in $PMLS $COLL_PMLS; do [[ -n ${PML_ARGS[$p]+x} ]] || die "unknown PML '$p' (rdrp ucx ob1)"; done
for c in $COLLS; do [[ -n ${COLL_ARGS[$c]+x} ]] || die "unknown collective component '$c' (cdag cdagucx tuned)"; done
P2P_CFGS=($PMLS)
COLL_CFGS=()
for p in $COLL_PMLS; do for c in $COLLS; do COLL_CFGS+=("$c+$p"); done; done
cfg_args() {   # NAME -> mpirun arguments
    case $1 in
    *+*) echo "${COLL_ARGS[${1%%+*}]} ${PML_ARGS[${1#*+}]}" ;;
    *)   echo "${PML_ARGS[$1]}" ;;
    esac
}
cfgs_of() { if [[ ${B_KIND[$1]} == p2p ]]; then echo "${P2P_CFGS[*]}"; else echo "${COLL_CFGS[*]}"; fi; }
np_of() { if [[ ${B_KIND[$1]} == p2p ]]; then echo "$NP"; else echo "$COLL_NP"; fi; }

if [[ -n $COMPONENT_PATH ]]; then
    [[ -d $COMPONENT_PATH ]] || die "--component-path $COMPONENT_PATH is not a directory"
    export OMPI_MCA_mca_base_component_path="SYS_DEFAULT:$(cd "$COMPONENT_PATH" && pwd)"
fi

# ------------------------------------------------------------ running
[[ -n $OUT ]] || OUT=$HERE/results/suites-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT/logs" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
RAW=$OUT/raw.csv          # benchmark,config,rep,size,value
echo "benchmark,config,rep,size,value" > "$RAW"
CHECKS=$OUT/check.txt
: > "$CHECKS"

mpirun_for() {   # NP -> mpirun and its placement options
    local np=$1
    local a=(mpirun -np "$np" --oversubscribe)
    (( RT && np <= $(nproc) )) && a=(chrt -r 20 "${a[@]}")
    [[ $(id -u) == 0 ]] && a+=(--allow-run-as-root)
    if (( np > $(nproc) )); then
        # more ranks than cores: no binding, ranks yield when idle
        a+=(--bind-to none -x OMPI_MCA_mpi_yield_when_idle=1)
    else
        a+=(--bind-to core --map-by core)
    fi
    echo "${a[*]}"
}

# The command line of one run: BENCH CHECKMODE(0|1) -> words
cmd_of() {
    local b=$1 chk=$2 np args it
    np=$(np_of "$b")
    local rt=""
    (( RT && np <= $(nproc) )) && rt="chrt -r 10 "
    case $b in
    osu_*)
        local max=$MAXB_P2P
        [[ ${B_KIND[$b]} == coll ]] && max=$MAXB_COLL
        args="-m 1:$max"
        # latency from 0 B, as OSU's own default and issue 13's table run it
        [[ $b == osu_latency ]] && args="-m 0:$max"
        [[ $b == osu_barrier ]] && args=""
        if (( chk )); then
            args+=" -c -i 20 -x 5"
        elif (( QUICK )); then
            args+=" -i 200 -x 20"
        fi
        echo "$rt${BIN[$b]} $args" ;;
    imb_*)
        local max=$MAXB_P2P bin=$IMB_BIN
        [[ ${B_KIND[$b]} == coll ]] && max=$MAXB_COLL
        (( chk )) && bin=$IMB_CHECK_BIN
        it="-time 2 -iter 1000"
        (( QUICK )) && it="-time 0.5 -iter 200"
        (( chk )) && it="-time 0.5 -iter 20"
        echo "$rt$bin -npmin $np -msglog 0:$(log2 "$max") $it -mem 2 $(imb_name "$b")" ;;
    esac
}

RUN_RC=0
run() {   # BENCH CONFIG CHECK LOGBASE
    local b=$1 cfg=$2 chk=$3 log=$4 -
    set -f
    # shellcheck disable=SC2046
    timeout --kill-after=10 "$TIMEOUT" $(mpirun_for "$(np_of "$b")") $(cfg_args "$cfg") $MPIRUN_ARGS \
        $(cmd_of "$b" "$chk") >"$log.out" 2>"$log.err" </dev/null
    RUN_RC=$?
    return $RUN_RC
}

# OSU: "size value ..." lines (barrier: one value, size 0); IMB: the
# table after "# Benchmarking NAME", t[usec] (PingPong) or t_avg[usec].
parse() {   # BENCH LOG -> "size value" lines
    case $1 in
    osu_barrier) awk '$1 ~ /^[0-9.]+$/ && NF == 1 { print 0, $1 }' "$2" ;;
    osu_*) awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9.]+$/ { print $1, $2 }' "$2" ;;
    imb_*) awk '/^# Benchmarking/ { on = 1; col = 0; next }
               on && /#bytes/ { for (i = 1; i <= NF; i++) if ($i == "t[usec]" || $i == "t_avg[usec]") col = i; next }
               on && col && $1 ~ /^[0-9]+$/ && NF >= col { print $1, $col }
               on && NF == 0 && col { on = 0 }' "$2" ;;
    esac
}

reason() {   # LOGBASE -> a line
    local log=$1
    if [[ $RUN_RC == 124 || $RUN_RC == 137 ]]; then echo "timed out after ${TIMEOUT}s"; return; fi
    local m
    m=$(awk '/^-------------------+$/ { box = !box; next } box && NF { print; exit }' "$log.err")
    [[ -n $m ]] || m=$(grep -v '^\s*$' "$log.err" | head -1)
    echo "exit $RUN_RC: ${m:-no error output}"
}

declare -A DEAD=()      # config -> why it was dropped (failed preflight)
declare -A FAILS=()     # bench:config -> reason of the last failed run
NFAIL=0
T0=$SECONDS

# Preflight: one tiny run per configuration, so a component that does not
# load is reported once instead of failing every benchmark.
preflight() {   # CONFIG NP KIND(p2p|coll)
    local cfg=$1 np=$2 kind=$3 -
    local log=$OUT/logs/preflight-$cfg
    set -f
    local prog
    # osu_latency needs exactly 2 ranks: collective configurations at
    # other rank counts are tried with osu_barrier
    if [[ -n ${BIN[osu_barrier]:-} && ( $kind == coll || -z ${BIN[osu_latency]:-} ) ]]; then
        prog="${BIN[osu_barrier]} -i 10 -x 1"
    elif [[ -n ${BIN[osu_latency]:-} ]]; then prog="${BIN[osu_latency]} -m 1:1 -i 10 -x 1"
    else prog="${IMB_BIN:-$IMB_CHECK_BIN} -npmin $np -msglog 0:0 -iter 10 PingPong"; fi
    # shellcheck disable=SC2046
    timeout --kill-after=10 60 $(mpirun_for "$np") $(cfg_args "$cfg") $MPIRUN_ARGS $prog \
        >"$log.out" 2>"$log.err" </dev/null
    RUN_RC=$?
    if (( RUN_RC != 0 )); then
        DEAD[$cfg]=$(reason "$log")
        echo "!! configuration $cfg does not run, skipped: ${DEAD[$cfg]}"
    fi
}
echo "# suites.sh: results in $OUT"
echo "# point-to-point np $NP: ${P2P_CFGS[*]}; collectives np $COLL_NP: ${COLL_CFGS[*]}"
echo "# $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)$( (( RT )) && echo ", ranks real-time round-robin (--rt) where ranks <= cores")"
need_p2p=0; need_coll=0
for b in "${SEL[@]}"; do [[ ${B_KIND[$b]} == p2p ]] && need_p2p=1 || need_coll=1; done
(( need_coll && COLL_NP > $(nproc) )) && echo "# note: $COLL_NP ranks on $(nproc) cores (oversubscribed): collective times include scheduling"
(( need_p2p )) && for c in "${P2P_CFGS[@]}"; do preflight "$c" "$NP" p2p; done
(( need_coll )) && for c in "${COLL_CFGS[@]}"; do preflight "$c" "$COLL_NP" coll; done

if (( TIMING )); then
    for ((rep = 1; rep <= REPS; rep++)); do
        echo "== repetition $rep of $REPS ($((SECONDS - T0)) s)"
        for b in "${SEL[@]}"; do
            read -r -a cs <<<"$(cfgs_of "$b")"
            n=${#cs[@]}
            for ((k = 0; k < n; k++)); do
                c=${cs[$(( (k + rep - 1) % n ))]}     # rotate the order every repetition
                [[ -n ${DEAD[$c]:-} ]] && continue
                log=$OUT/logs/$b.$c.rep$rep
                if run "$b" "$c" 0 "$log"; then
                    parse "$b" "$log.out" | awk -v b="$b" -v c="$c" -v r="$rep" '{ print b "," c "," r "," $1 "," $2 }' >> "$RAW"
                else
                    FAILS[$b:$c]=$(reason "$log")
                    NFAIL=$((NFAIL + 1))
                    echo "   FAIL $b $c rep $rep: ${FAILS[$b:$c]}"
                fi
            done
        done
    done
fi

# ------------------------------------------------------------ data check
NDEFECT=0
NCHECK=0
if (( CHECK )); then
    echo "== data check ($((SECONDS - T0)) s): OSU -c$([[ -n $IMB_CHECK_BIN ]] && echo ', IMB-MPI1 -DCHECK')"
    for b in "${SEL[@]}"; do
        case $b in
        osu_barrier) continue ;;                    # no data
        imb_*) [[ -n $IMB_CHECK_BIN ]] || continue ;;
        esac
        read -r -a cs <<<"$(cfgs_of "$b")"
        for c in "${cs[@]}"; do
            [[ -n ${DEAD[$c]:-} ]] && continue
            log=$OUT/logs/check.$b.$c
            NCHECK=$((NCHECK + 1))
            run "$b" "$c" 1 "$log"
            rc=$RUN_RC
            case $b in
            osu_*) bad=$(awk '$1 ~ /^[0-9]+$/ && $NF == "Fail" { printf "%s%s", s, $1; s = " " }' "$log.out")
                   ok=$(grep -c 'Pass$' "$log.out") ;;
            imb_*) bad=$(awk '/^# Benchmarking/ { on = 1; col = 0; next }
                        on && /#bytes/ { for (i = 1; i <= NF; i++) if ($i == "defects") col = i; next }
                        on && col && $1 ~ /^[0-9]+$/ && $col + 0 != 0 { printf "%s%s", s, $1; s = " " }' "$log.out")
                   ok=$(grep -c 'defects' "$log.out") ;;
            esac
            if (( rc != 0 )); then
                echo "DEFECT $b $c: run failed ($(reason "$log"))" | tee -a "$CHECKS"
                NDEFECT=$((NDEFECT + 1))
            elif [[ -n $bad ]]; then
                echo "DEFECT $b $c: wrong data at sizes $bad (log $log.out)" | tee -a "$CHECKS"
                NDEFECT=$((NDEFECT + 1))
            elif [[ $ok == 0 ]]; then
                echo "DEFECT $b $c: no validation output (is it a validating build?) (log $log.out)" | tee -a "$CHECKS"
                NDEFECT=$((NDEFECT + 1))
            else
                echo "ok $b $c" >> "$CHECKS"
            fi
        done
    done
    [[ -z $IMB_CHECK_BIN && -n $IMB_BIN ]] &&
        echo "note: IMB data not checked: pass --imb-check DIR with an IMB-MPI1 built with CPPFLAGS=-DCHECK" | tee -a "$CHECKS"
fi

# ------------------------------------------------------------ tables
SUMMARY=$OUT/summary.csv   # benchmark,size,config,best
MEDIAN=$OUT/median.csv     # benchmark,size,config,median
TABLES=$OUT/tables.txt
awk -F, 'NR > 1 { k = $1 "," $4 "," $2
                  better = ($1 == "osu_bw" || $1 == "osu_bibw" || $1 == "osu_mbw_mr") ? "higher" : "lower"
                  if (!(k in best) || (better == "lower" ? $5 < best[k] : $5 > best[k])) best[k] = $5 }
         END { for (k in best) print k "," best[k] }' "$RAW" | sort -t, -k1,1 -k2,2n > "$SUMMARY"
# the median of each cell's repetitions (the mean of the middle two for an
# even count)
sort -t, -k1,1 -k4,4n -k2,2 -k5,5g <(tail -n +2 "$RAW") |
    awk -F, 'function out() { if (n) print key "," (n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2) }
             { k = $1 "," $4 "," $2; if (k != key) { out(); key = k; n = 0 } x[++n] = $5 }
             END { out() }' > "$MEDIAN"
[[ $STAT == median ]] && SUMMARY=$MEDIAN

ratio_cols() {   # BENCH -> "A/B ..." pairs
    local b=$1 r=() p c x
    if [[ ${B_KIND[$b]} == p2p ]]; then
        local first=${P2P_CFGS[0]}
        for p in "${P2P_CFGS[@]:1}"; do r+=("$first/$p"); done
    else
        for p in $COLL_PMLS; do
            read -r -a cl <<<"$COLLS"
            x=${cl[0]}
            for c in "${cl[@]:1}"; do r+=("$x+$p/$c+$p"); done
        done
    fi
    echo "${r[*]:-}"
}
: > "$TABLES"
if (( TIMING )); then
    for b in "${SEL[@]}"; do
        read -r -a cs <<<"$(cfgs_of "$b")"
        ratios=$(ratio_cols "$b")
        {
            echo
            echo "== $b, np $(np_of "$b"), ${B_UNIT[$b]} (${B_BETTER[$b]} is better), $STAT of $REPS"
            awk -F, -v b="$b" -v cfgs="${cs[*]}" -v ratios="$ratios" -v better="${B_BETTER[$b]}" '
                BEGIN { nc = split(cfgs, C, " "); nr = split(ratios, R, " ") }
                $1 == b { v[$2 "," $3] = $4; if (!($2 in seen)) { seen[$2] = 1; S[++ns] = $2 } }
                END {
                    if (ns == 0) { print "   (no results)"; exit }
                    printf "%10s", "size"
                    for (i = 1; i <= nc; i++) printf " %12s", C[i]
                    for (i = 1; i <= nr; i++) printf " %16s", R[i]
                    printf "\n"
                    for (s = 1; s <= ns; s++) {
                        printf "%10s", S[s]
                        for (i = 1; i <= nc; i++) {
                            k = S[s] "," C[i]
                            if (k in v) printf " %12.2f", v[k]; else printf " %12s", "-"
                        }
                        for (i = 1; i <= nr; i++) {
                            split(R[i], ab, "/"); ka = S[s] "," ab[1]; kb = S[s] "," ab[2]
                            if ((ka in v) && (kb in v) && v[kb] > 0) printf " %16.2f", v[ka] / v[kb]
                            else printf " %16s", "-"
                        }
                        printf "\n"
                    }
                }' "$SUMMARY"
        } >> "$TABLES"
    done
    cat "$TABLES"
fi

# ------------------------------------------------------------ plots
if (( TIMING && PLOT )) && command -v gnuplot >/dev/null 2>&1; then
    for b in "${SEL[@]}"; do
        [[ $b == osu_barrier ]] && continue       # one value per configuration
        read -r -a cs <<<"$(cfgs_of "$b")"
        plots=()
        for c in "${cs[@]}"; do
            awk -F, -v b="$b" -v c="$c" '$1 == b && $3 == c && $2 > 0 { print $2, $4 }' "$SUMMARY" > "$OUT/.plot-$b-$c.dat"
            [[ -s $OUT/.plot-$b-$c.dat ]] && plots+=("'$OUT/.plot-$b-$c.dat' using 1:2 with linespoints title '$c'")
        done
        (( ${#plots[@]} )) || continue
        {
            echo "set terminal pngcairo size 1000,650 noenhanced"
            echo "set output '$OUT/$b.png'"
            echo "set title '$b, np $(np_of "$b"), $STAT of $REPS'"
            echo "set logscale x 2; set logscale y 10; set grid"
            echo "set xtics ('1' 1, '16' 16, '256' 256, '4K' 4096, '64K' 65536, '1M' 1048576, '16M' 16777216)"
            echo "set xlabel 'message size [bytes]'; set ylabel '${B_UNIT[$b]} (${B_BETTER[$b]} is better)'; set key left top"
            (IFS=,; echo "plot ${plots[*]}")
        } > "$OUT/.plot-$b.gp"
        gnuplot "$OUT/.plot-$b.gp" 2>"$OUT/logs/gnuplot-$b.err" || echo "note: gnuplot failed for $b (see $OUT/logs/gnuplot-$b.err)"
    done
    rm -f "$OUT"/.plot-*
fi

# ------------------------------------------------------------ summary
echo
for c in "${!DEAD[@]}"; do echo "!! configuration $c did not run: ${DEAD[$c]}"; done
for k in "${!FAILS[@]}"; do echo "!! $k failed: ${FAILS[$k]}"; done
(( CHECK )) && echo "# data check: $NCHECK runs, $NDEFECT with defects$( (( NDEFECT )) && echo ": see $CHECKS")"
echo "# wall time $((SECONDS - T0)) s; raw $RAW, summary $SUMMARY, tables $TABLES"
pngs=("$OUT"/*.png)
[[ -e ${pngs[0]} ]] && echo "# plots: ${pngs[*]}"
(( NDEFECT == 0 && ${#DEAD[@]} == 0 && NFAIL == 0 ))
