#!/usr/bin/env bash
# compare.sh -- run rdrp_bench under several PML configurations in one go and
# print one comparison table per benchmark.  See bench/README.md.
#
#   bench/compare.sh                          # rdrp, ucx, ob1; all tests; R=3
#   bench/compare.sh --pmls "ucx ob1" --quick
#   bench/compare.sh --component-path /work/main/build/.libs \
#       --config "rdrp-get: --mca pml rdrp --mca pml_rdrp_rndv_protocol get"
#   bench/compare.sh --rndv                   # rendezvous protocols, 16K..64M
#   bench/compare.sh --tests "bowtie a2a" --np 4 --min 1M --max 16M
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# ------------------------------------------------------------------ defaults
declare -A CFG=(
    [rdrp]="--mca pml rdrp"
    [ucx]="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any"
    [ob1]="--mca pml ob1 --mca btl self,vader"
    [rdrp-rma]="--mca pml rdrp --mca pml_rdrp_data_path rma"
    [get]="--mca pml rdrp --mca pml_rdrp_rndv_protocol get"
    [put]="--mca pml rdrp --mca pml_rdrp_rndv_protocol put"
)
declare -A EXTRA=()
declare -A TEST_EXTRA=()        # per-test rdrp_bench options (--test-args)
CFG_ORDER=(rdrp ucx ob1 rdrp-rma get put)   # known names in definition order
PMLS=""                         # selection given with --pmls
ADDED=()                        # configs defined with --config
REFS="ucx ob1"                  # ratio denominators
RATIOS=""                       # explicit ratio columns "A/B C/D" (or none)
ALL_TESTS="lat bw bibw mr bowtie a2a"
TESTS="lat bw bibw mr"
TESTS_SET=0
RNDV=0
SIZES=""
PREFLIGHT=all
SHOW_TABLES=1
SNAPSHOT=1
REPS=3
REPS_SET=0
NP=2
QUICK=0
STRICT=0
PLOT=1
TIMEOUT=180
OUT=""
MIN=""
MAX=""
BENCH=""
BENCH_ARGS=""
MPIRUN_ARGS=""
COMPONENT_PATH=""
STAT=best
NICE=""
WAIT_QUIET=0

usage() {
    cat <<'EOF'
usage: compare.sh [options]
Configurations
  --pmls "A B ..."        configurations to run, in this order
                          (default "rdrp ucx ob1"; built-in: rdrp ucx ob1,
                          and rdrp-rma get put: pml rdrp with data_path rma,
                          rndv_protocol get, rndv_protocol put)
  --config "NAME: ARGS"   define (or redefine) configuration NAME with mpirun
                          MCA arguments ARGS; it is added to the run unless
                          already selected.  Repeatable.
  --extra "NAME: ARGS"    append ARGS to configuration NAME (NAME=all: every
                          configuration).  Repeatable.
  --refs "A B"            ratio denominators (default "ucx ob1"): the table
                          gets X/A, X/B for every other selected config X
  --ratios "X/A Y/B ..."  exactly these ratio columns instead (none: no
                          ratio columns)
  --component-path DIR    directory holding mca_pml_rdrp.so; prepended to the
                          default Open MPI component path through
                          OMPI_MCA_mca_base_component_path
  --no-snapshot           load mca_pml_rdrp.so from there directly (default:
                          from a copy taken at the start, in OUT/component,
                          so that a rebuild during the run cannot mix builds)
Presets
  --rndv                  rendezvous protocol comparison: configurations
                          rdrp rdrp-rma get put ucx, tests lat bw, sizes
                          16K..64M, bw with "-W 8 -D", ratios vs ucx and
                          rdrp/get, rdrp-rma/rdrp (explicit options win)
What to run
  --tests "lat bw bibw mr" benchmarks (default these four; also bowtie a2a)
  --test-args "T: ARGS"   extra rdrp_bench options for test T only, e.g.
                          "bw: -W 8 -D".  Repeatable
  --reps R                repetitions per measurement, best one reported
                          (default 3; --quick: 2)
  --quick                 short run (~1 minute): shorter per-size time
  --min SIZE / --max SIZE size range passed to rdrp_bench (e.g. 1K, 4M)
  --sizes LIST            explicit sizes instead (e.g. 1M,4M,16M,64M)
  --np N                  ranks (default 2)
  --stat best|avg         per-run value: best ~2 ms timed chunk (default,
                          robust against other processes) or plain average
  --bench-args "..."      extra rdrp_bench options (e.g. "--distinct")
  --mpirun-args "..."     extra mpirun options for every configuration
  --bench PATH            use this rdrp_bench binary (default: build
                          bench/build/rdrp_bench from bench/rdrp_bench.c)
  --timeout SEC           kill one mpirun after SEC seconds (default 180)
  --preflight all|none|"A B"  which configurations get the pre-flight run
                          (default all)
Noise (the machine is shared)
  --wait-quiet SEC        before each run wait up to SEC s until other
                          processes use < 20% of one CPU (default 0: don't)
  --nice N                run mpirun under "nice -n N" (e.g. -10, needs root;
                          slows other users' jobs down while it runs)
Output
  --out DIR               results directory (default
                          bench/results/<date-time>)
  --no-plot               do not draw PNG plots even if gnuplot is there
  --no-tables             write tables.txt but do not print it
  --strict                exit 1 if any configuration failed
  -h, --help
EOF
}

die() { echo "compare.sh: $*" >&2; exit 2; }

define_config() {       # "NAME: ARGS"
    local spec=$1 name args
    [[ $spec == *:* ]] || die "expected \"NAME: ARGS\", got \"$spec\""
    name=${spec%%:*}; name=${name//[[:space:]]/}
    args=${spec#*:}
    [[ -n $name && $name =~ ^[A-Za-z0-9._+-]+$ ]] || die "bad configuration name '$name'"
    [[ -n ${CFG[$name]+x} ]] || CFG_ORDER+=("$name")
    CFG[$name]=$args
    ADDED+=("$name")
}

add_test_args() {       # "TEST: ARGS"
    local spec=$1 name
    [[ $spec == *:* ]] || die "expected \"TEST: ARGS\", got \"$spec\""
    name=${spec%%:*}; name=${name//[[:space:]]/}
    [[ " $ALL_TESTS " == *" $name "* ]] || die "--test-args for unknown test '$name'"
    TEST_EXTRA[$name]="${TEST_EXTRA[$name]:-} ${spec#*:}"
}

add_extra() {           # "NAME: ARGS"
    local spec=$1 name
    [[ $spec == *:* ]] || die "expected \"NAME: ARGS\", got \"$spec\""
    name=${spec%%:*}; name=${name//[[:space:]]/}
    EXTRA[$name]="${EXTRA[$name]:-} ${spec#*:}"
}

while [[ $# -gt 0 ]]; do
    case $1 in
    --pmls|--configs) PMLS=$2; shift ;;
    --config)       define_config "$2"; shift ;;
    --extra)        add_extra "$2"; shift ;;
    --refs)         REFS=$2; shift ;;
    --ratios)       RATIOS=$2; shift ;;
    --rndv)         RNDV=1 ;;
    --test-args)    add_test_args "$2"; shift ;;
    --sizes)        SIZES=$2; shift ;;
    --preflight)    PREFLIGHT=$2; shift ;;
    --no-tables)    SHOW_TABLES=0 ;;
    --no-snapshot)  SNAPSHOT=0 ;;
    --component-path) COMPONENT_PATH=$2; shift ;;
    --tests)        TESTS=${2//,/ }; TESTS_SET=1; shift ;;
    --reps)         REPS=$2; REPS_SET=1; shift ;;
    --quick)        QUICK=1 ;;
    --min)          MIN=$2; shift ;;
    --max)          MAX=$2; shift ;;
    --np)           NP=$2; shift ;;
    --bench-args)   BENCH_ARGS=$2; shift ;;
    --stat)         STAT=$2; shift ;;
    --nice)         NICE=$2; shift ;;
    --wait-quiet)   WAIT_QUIET=$2; shift ;;
    --mpirun-args)  MPIRUN_ARGS=$2; shift ;;
    --bench)        BENCH=$2; shift ;;
    --timeout)      TIMEOUT=$2; shift ;;
    --out)          OUT=$2; shift ;;
    --no-plot)      PLOT=0 ;;
    --strict)       STRICT=1 ;;
    -h|--help)      usage; exit 0 ;;
    *)              usage >&2; die "unknown option '$1'" ;;
    esac
    shift || die "option needs an argument"
done

# --rndv: the rendezvous protocol comparison; explicit options win.  bw
# uses distinct buffers (-D): the get and put protocols complete a receive
# by polling its last byte, which breaks when concurrent receives share one
# buffer (the OSU-style default) -- they then crash or finish early.
if (( RNDV )); then
    [[ -n $PMLS ]] || PMLS="rdrp rdrp-rma get put ucx"
    (( TESTS_SET )) || TESTS="lat bw"
    if [[ -z $SIZES ]]; then
        [[ -n $MIN ]] || MIN=16K
        [[ -n $MAX ]] || MAX=64M
    fi
    [[ -n $RATIOS ]] || RATIOS="rdrp/ucx rdrp-rma/ucx get/ucx put/ucx rdrp/get rdrp-rma/rdrp"
    TEST_EXTRA[bw]="-W 8 -D ${TEST_EXTRA[bw]:-}"
    TEST_EXTRA[bibw]="-W 8 -D ${TEST_EXTRA[bibw]:-}"
fi

[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "--reps needs a positive integer"
[[ $NP =~ ^[1-9][0-9]*$ && $NP -ge 2 ]] || die "--np needs an integer >= 2"
(( QUICK && !REPS_SET )) && REPS=2
[[ $STAT == best || $STAT == avg ]] || die "--stat must be best or avg"
[[ -z $NICE || $NICE =~ ^-?[0-9]+$ ]] || die "--nice needs an integer"
[[ $WAIT_QUIET =~ ^[0-9]+$ ]] || die "--wait-quiet needs seconds"

# selection: --pmls (or the default set), then configs added with --config
SEL=()
for c in ${PMLS:-rdrp ucx ob1} "${ADDED[@]}"; do
    [[ -n ${CFG[$c]+x} ]] || die "unknown configuration '$c' (define it with --config \"$c: ARGS\")"
    [[ " ${SEL[*]:-} " == *" $c "* ]] || SEL+=("$c")
done
for t in $TESTS; do
    [[ " $ALL_TESTS " == *" $t "* ]] || die "unknown test '$t' (known: $ALL_TESTS)"
done
case $PREFLIGHT in
all|none) ;;
*) for c in $PREFLIGHT; do
       [[ " ${SEL[*]} " == *" $c "* ]] || die "--preflight: '$c' is not a selected configuration"
   done ;;
esac
if [[ -n $RATIOS && $RATIOS != none ]]; then
    for r in $RATIOS; do
        [[ $r =~ ^[A-Za-z0-9._+-]+/[A-Za-z0-9._+-]+$ ]] || die "--ratios: expected A/B, got '$r'"
    done
fi
for n in "${!EXTRA[@]}"; do
    [[ $n == all || -n ${CFG[$n]+x} ]] || die "--extra for unknown configuration '$n'"
done

cfg_args() {
    echo "${CFG[$1]} ${EXTRA[all]:-} ${EXTRA[$1]:-}"
}

# ---------------------------------------------------------- component path
# Setting mca_base_component_path *replaces* Open MPI's default search path
# (then even mpirun's own components vanish), so keep the default in it.
DEFAULT_CPATH=$(env -u OMPI_MCA_mca_base_component_path ompi_info --param mca base --level 9 2>/dev/null |
    sed -n 's/.*"mca_base_component_path" (current value: "\([^"]*\)".*/\1/p' | head -1)
[[ -n $DEFAULT_CPATH ]] || DEFAULT_CPATH=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
if [[ -n $COMPONENT_PATH ]]; then
    [[ -d $COMPONENT_PATH ]] || echo "compare.sh: warning: --component-path $COMPONENT_PATH is not a directory" >&2
    cp_abs=$(cd "$COMPONENT_PATH" 2>/dev/null && pwd) || cp_abs=$COMPONENT_PATH
    export OMPI_MCA_mca_base_component_path="$cp_abs:$DEFAULT_CPATH"
elif [[ -n ${OMPI_MCA_mca_base_component_path:-} ]]; then
    first=${DEFAULT_CPATH%%:*}
    if [[ ":$OMPI_MCA_mca_base_component_path:" != *":$first:"* ]]; then
        echo "note: OMPI_MCA_mca_base_component_path lacks Open MPI's own component directory; appending $DEFAULT_CPATH" >&2
        export OMPI_MCA_mca_base_component_path="$OMPI_MCA_mca_base_component_path:$DEFAULT_CPATH"
    fi
fi

# ------------------------------------------------------------------- build
if [[ -z $BENCH ]]; then
    BENCH=$HERE/build/rdrp_bench
    if [[ ! -x $BENCH || $HERE/rdrp_bench.c -nt $BENCH ]]; then
        mkdir -p "$HERE/build" || die "cannot create $HERE/build"
        echo "building $BENCH"
        if ! mpicc -O2 -Wall -o "$BENCH.tmp.$$" "$HERE/rdrp_bench.c"; then
            rm -f "$BENCH.tmp.$$"; die "building rdrp_bench failed"
        fi
        mv -f "$BENCH.tmp.$$" "$BENCH" || die "cannot install $BENCH"
    fi
fi
[[ -x $BENCH ]] || die "$BENCH is not executable"

# ------------------------------------------------------------- run set-up
[[ -n $OUT ]] || OUT=$HERE/results/$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT/logs" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)     # absolute: it may end up in the component path
RAW=$OUT/raw.csv
SUMMARY=$OUT/summary.csv
TABLES=$OUT/tables.txt
RUNS=$OUT/runs.csv
echo "config,rep,test,np,size,value,unit,iters,avg" > "$RAW"
echo "test,rep,config,exit,wall_s,other_cpu_pct" > "$RUNS"

# Per-test rdrp_bench options: -i caps the small-message iteration count,
# -T caps each size at about T ms; together they bound the run time no
# matter how slow a configuration is.
if (( QUICK )); then
    declare -A TEST_ARGS=([lat]="-i 20000 -T 25" [bw]="-i 2000 -T 25"
                          [bibw]="-i 2000 -T 25" [mr]="-i 4000 -T 25"
                          [bowtie]="-i 20000 -T 25" [a2a]="-i 20000 -T 25")
else
    declare -A TEST_ARGS=([lat]="-i 100000 -T 200" [bw]="-i 10000 -T 200"
                          [bibw]="-i 10000 -T 200" [mr]="-i 20000 -T 200"
                          [bowtie]="-i 100000 -T 200" [a2a]="-i 100000 -T 200")
fi
for t in "${!TEST_EXTRA[@]}"; do TEST_ARGS[$t]+=" ${TEST_EXTRA[$t]}"; done
SIZE_ARGS=""
[[ -n $MIN ]] && SIZE_ARGS+=" -m $MIN"
[[ -n $MAX ]] && SIZE_ARGS+=" -M $MAX"
[[ -n $SIZES ]] && SIZE_ARGS+=" -z $SIZES"

# more ranks than cores (e.g. --np 4 here): Open MPI refuses to bind two
# ranks to one core unless told that this overload is intended
BIND=core
(( NP > $(nproc) )) && BIND=core:overload-allowed
MPIRUN=()
[[ -n $NICE ]] && MPIRUN+=(nice -n "$NICE")
MPIRUN+=(mpirun --np "$NP" --bind-to "$BIND" --map-by core)
[[ $(id -u) == 0 ]] && MPIRUN+=(--allow-run-as-root)
MPIRUN+=(--oversubscribe)

declare -A DISABLED=() FAILED=()
FAILURES=0
EXTRA_RUN=""

# Noise accounting: CPU time of the whole machine (/proc/stat, steal
# included) minus the CPU time of our own mpirun tree (/usr/bin/time, which
# sees all waited-for descendants) = what other processes took while we ran.
HZ=$(getconf CLK_TCK 2>/dev/null || echo 100)
NCPU=$(nproc)
TIME_BIN=/usr/bin/time
[[ -x $TIME_BIN ]] || TIME_BIN=""
cpu_busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
OTHER_PCT=""            # set by run_one: % of all CPUs used by others

# run_one NAME LOGBASE TIMEOUT BENCH-ARGS... ; stdout of rank 0 -> LOGBASE.out
run_one() {
    local name=$1 log=$2 tmo=$3; shift 3
    local -; set -f     # MCA arguments are split on blanks, never globbed
    local b0 b1 t0 t1 rc
    local timer=()
    [[ -n $TIME_BIN ]] && timer=("$TIME_BIN" -f "%e %U %S" -o "$log.time")
    b0=$(cpu_busy); t0=$(date +%s.%N)
    # shellcheck disable=SC2046,SC2086
    "${timer[@]}" timeout --kill-after=10 "$tmo" "${MPIRUN[@]}" $(cfg_args "$name") $MPIRUN_ARGS \
        ${EXTRA_RUN:-} "$BENCH" "$@" >"$log.out" 2>"$log.err"
    rc=$?
    b1=$(cpu_busy); t1=$(date +%s.%N)
    OTHER_PCT=""
    if [[ -n $TIME_BIN && -s $log.time ]]; then
        OTHER_PCT=$(awk -v b0="$b0" -v b1="$b1" -v hz="$HZ" -v n="$NCPU" -v t0="$t0" -v t1="$t1" '
            NF >= 3 && $1 ~ /^[0-9.]+$/ { own = $2 + $3 }
            END { wall = t1 - t0; if (wall <= 0) exit
                  o = ((b1 - b0) / hz - own) / (n * wall) * 100
                  printf "%.0f", o < 0 ? 0 : o }' "$log.time")
    fi
    return $rc
}

# % of one CPU used by other processes over SEC seconds (we are idle)
other_load() {
    local b0 b1
    b0=$(cpu_busy); sleep "$1"; b1=$(cpu_busy)
    awk -v a="$b0" -v b="$b1" -v hz="$HZ" -v s="$1" 'BEGIN { printf "%.0f", (b - a) / hz / s * 100 }'
}

wait_quiet() {
    (( WAIT_QUIET > 0 )) || return 0
    local start=$SECONDS l
    while :; do
        l=$(other_load 0.5)
        (( l < 20 )) && return 0
        if (( SECONDS - start >= WAIT_QUIET )); then
            echo "   (still busy: others use ${l}% of a CPU; running anyway)"
            return 0
        fi
        sleep 1
    done
}

fail_reason() {         # short reason from a log
    local rc=$1 log=$2
    if [[ $rc == 124 || $rc == 137 ]]; then
        echo "timed out (killed after --timeout)"
    elif grep -q "VALIDATION FAILED" "$log.err" 2>/dev/null; then
        grep -m1 "VALIDATION FAILED" "$log.err"
    elif grep -q "A requested component was not found" "$log.err" 2>/dev/null; then
        local fw comp
        fw=$(sed -n 's/^Framework:[[:space:]]*//p' "$log.err" | head -1)
        comp=$(sed -n 's/^Component:[[:space:]]*//p' "$log.err" | head -1)
        echo "component ${fw:-?}/${comp:-?} not found or not loadable (not built/installed? check --component-path / OMPI_MCA_mca_base_component_path=${OMPI_MCA_mca_base_component_path:-<unset>})"
    else
        # first line of the first Open MPI help box, else the first line that
        # is not verbose output
        local msg
        msg=$(awk '/^--------------------+$/ { box = !box; next } box && NF { print; exit }' "$log.err" 2>/dev/null)
        [[ -n $msg ]] || msg=$(grep -v '^\s*$\|mca: base:\|select:\|selected ' "$log.err" 2>/dev/null | head -1)
        echo "exit $rc: ${msg:-no error output}"
    fi
}

# which mca_pml_rdrp.so the runs load (the first in the component path)
rdrp_so_dir() {
    local d IFS=:
    for d in ${OMPI_MCA_mca_base_component_path:-$DEFAULT_CPATH}; do
        [[ -e $d/mca_pml_rdrp.so ]] && { echo "$d"; return; }
    done
}
so_id() {               # FILE -> "FILE mtime md5"
    [[ -e $1 ]] && echo "$1 $(date -r "$1" +%FT%T) md5 $(md5sum < "$1" | cut -c1-12)"
}

# The checkout is shared and other people rebuild mca_pml_rdrp.so while we
# measure; a rebuild in the middle of a run would mix two builds.  So the
# runs load a copy taken now, kept in $OUT/component (--no-snapshot: load
# the original).  Only a directory outside Open MPI's default path is
# replaced by the copy, and only when some configuration uses pml rdrp.
SO_SRC=""
SO_DIR=$(rdrp_so_dir)
[[ -n $SO_DIR ]] && SO_SRC=$SO_DIR/mca_pml_rdrp.so
SO_SRC_ID0=$(so_id "$SO_SRC")
SNAPPED=0
uses_rdrp=0
for c in "${SEL[@]}"; do
    a=" $(cfg_args "$c") "
    [[ $a == *" pml rdrp "* || $a == *credit* || $a == *cdag* ]] && uses_rdrp=1
done
# every component of ours in that directory (pml/rdrp, btl/credit, coll/cdag)
if (( SNAPSHOT && uses_rdrp )) && [[ -n $SO_DIR && ":$DEFAULT_CPATH:" != *":$SO_DIR:"* ]]; then
    if mkdir -p "$OUT/component" && cp -p "$SO_DIR"/mca_*.so "$OUT/component/"; then
        newpath=""
        IFS=: read -r -a cdirs <<< "${OMPI_MCA_mca_base_component_path:-$DEFAULT_CPATH}"
        for d in "${cdirs[@]}"; do
            [[ $d == "$SO_DIR" ]] && d=$OUT/component
            newpath+=${newpath:+:}$d
        done
        export OMPI_MCA_mca_base_component_path=$newpath
        SNAPPED=1
    else
        echo "compare.sh: warning: cannot copy $SO_SRC to $OUT/component; using the original" >&2
    fi
fi
SO_LINE=""
if [[ -n $SO_SRC_ID0 ]]; then
    if (( SNAPPED )); then
        SO_LINE="# pml rdrp: copy of $SO_SRC_ID0 in $OUT/component"
    else
        SO_LINE="# pml rdrp: $SO_SRC_ID0"
    fi
fi

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
{
    echo "# compare.sh $(date -Is) on $(hostname), $(nproc) cores, load $LOAD0"
    echo "# bench: $BENCH $BENCH_ARGS $SIZE_ARGS, np=$NP (bind-to $BIND), reps=$REPS, stat=$STAT, quick=$QUICK${NICE:+, nice $NICE}"
    for t in $TESTS; do echo "# test $t: ${TEST_ARGS[$t]}"; done
    echo "# OMPI_MCA_mca_base_component_path=${OMPI_MCA_mca_base_component_path:-<unset>}"
    [[ -n $SO_LINE ]] && echo "$SO_LINE"
    for c in "${SEL[@]}"; do echo "# config $c: $(cfg_args "$c" | tr -s ' ')"; done
} | tee "$OUT/run-info.txt"
echo "# results in $OUT"
if awk -v l="${LOAD0%% *}" -v n="$(nproc)" 'BEGIN { exit !(l > 0.3 * n) }'; then
    echo "# WARNING: machine is busy (load $LOAD0): expect noisy numbers"
fi

T_START=$(date +%s)

# is mca_FW_NAME.so (or .la) in one of the component directories?
find_component() {
    local d IFS=:
    for d in ${OMPI_MCA_mca_base_component_path:-$DEFAULT_CPATH}; do
        [[ -e $d/mca_$1_$2.so || -e $d/mca_$1_$2.la ]] && return 0
    done
    return 1
}


# ----------------------------------------------------------- pre-flight
# Small all-test run with full validation: catches a configuration that does
# not start, selects another PML, hangs or corrupts data, in a few seconds.
# Distinct buffers (-D): concurrent receives into one buffer are erroneous
# MPI, and the get/put protocols do trip over them.
for c in "${SEL[@]}"; do
    [[ $PREFLIGHT == none ]] && break
    [[ $PREFLIGHT == all || " $PREFLIGHT " == *" $c "* ]] || continue
    log=$OUT/logs/preflight-$c
    want=$(cfg_args "$c" | awk '{ for (i = 1; i < NF; i++) if ($i == "pml") p = $(i + 1) } END { print p }')
    EXTRA_RUN="--mca pml_base_verbose 10"
    run_one "$c" "$log" $(( TIMEOUT < 60 ? TIMEOUT : 60 )) -t all -M 64K -i 20 -w 2 -T 5 -F -D -c
    rc=$?
    EXTRA_RUN=""
    if (( rc != 0 )); then
        why=$(fail_reason $rc "$log")
        if [[ -n $want ]] && ! find_component pml "$want"; then
            why="mca_pml_$want.so not found in the component path (${OMPI_MCA_mca_base_component_path:-$DEFAULT_CPATH}); build/install it or pass --component-path DIR [mpirun: $why]"
        fi
        echo "!! configuration $c FAILED pre-flight, skipped: $why"
        echo "!!   log: $log.err"
        DISABLED[$c]=1; FAILED[$c]="pre-flight: $why"
        FAILURES=$((FAILURES + 1))
        continue
    fi
    got=$(sed -n 's/.*select: component \([^ ]*\) selected.*/\1/p' "$log.err" | sort -u | tr '\n' ' ')
    if [[ -n $want && ${got% } != "$want" ]]; then
        echo "!! configuration $c: asked for pml $want but ranks selected '${got% }'"
    fi
    echo "ok  $c (pml ${got% })"
done

# ------------------------------------------------------------ measurements
# Interleaved: for each test, for each repetition, every configuration once;
# the configuration order rotates between repetitions so that none is always
# first or last after another.
ACTIVE=()
for c in "${SEL[@]}"; do [[ -z ${DISABLED[$c]:-} ]] && ACTIVE+=("$c"); done
NCFG=${#ACTIVE[@]}
(( NCFG > 0 )) || echo "!! no configuration passed the pre-flight"

EXTRA_RUN=""
for t in $TESTS; do
    (( NCFG > 0 )) || break
    for ((r = 1; r <= REPS; r++)); do
        for ((k = 0; k < NCFG; k++)); do
            c=${ACTIVE[$(( (k + r - 1) % NCFG ))]}
            [[ -n ${FAILED[$c:$t]:-} ]] && continue
            log=$OUT/logs/$t-$c-r$r
            wait_quiet
            t0=$(date +%s.%N)
            # shellcheck disable=SC2086
            run_one "$c" "$log" "$TIMEOUT" -c -S "$STAT" -t "$t" ${TEST_ARGS[$t]} $SIZE_ARGS $BENCH_ARGS
            rc=$?
            dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
            echo "$t,$r,$c,$rc,$dt,$OTHER_PCT" >> "$RUNS"
            # keep whatever sizes completed, even if the run failed later
            awk -F, -v c="$c" -v r="$r" 'NF == 7 && $1 !~ /^#/ && $1 != "test" { print c "," r "," $0 }' \
                "$log.out" >> "$RAW"
            if (( rc != 0 )); then
                why=$(fail_reason $rc "$log")
                echo "!! $t rep $r: configuration $c FAILED: $why (log $log.err); skipping its remaining $t repetitions"
                FAILED[$c:$t]=$why
                FAILED[$c]=${FAILED[$c]:-"$t: $why"}
                FAILURES=$((FAILURES + 1))
            else
                printf '   %-6s rep %d/%d  %-12s %5ss  other processes: %s%% CPU\n' \
                    "$t" "$r" "$REPS" "$c" "$dt" "${OTHER_PCT:-?}"
            fi
        done
    done
done
T_END=$(date +%s)

# ----------------------------------------------------------------- tables
SELSTR="${SEL[*]}"
awk -F, -v sel="$SELSTR" -v refs="$REFS" -v ratios="$RATIOS" -v np="$NP" -v stat="$([[ $STAT == best ]] && echo "best ~2 ms chunk" || echo "average")" -v tests="$TESTS" -v reps="$REPS" \
    -v summary="$SUMMARY" '
function better(t, a, b) { return t == "lat" ? a < b : a > b }
function fmt(t, v) {
    if (v == "") return "-"
    if (t == "lat") return sprintf(v < 100 ? "%.2f" : "%.1f", v)
    if (t == "mr") return sprintf("%.0f", v)
    return sprintf(v < 1000 ? "%.1f" : "%.0f", v)
}
NR == 1 { next }
{
    c = $1; t = $3; s = $5 + 0; v = $6 + 0
    k = t SUBSEP s SUBSEP c
    n[k]++; val[k, n[k]] = v
    if (!((t, s) in seen)) { seen[t, s] = 1; ns[t]++; sz[t, ns[t]] = s }
    unit[t] = $7
}
END {
    nc = split(sel, C, " ")
    nr = split(refs, Rf, " ")
    for (i = 1; i <= nc; i++) issel[C[i]] = 1
    # ratio columns (NUM[q] / DEN[q]): --ratios as given (pairs with an
    # unselected config dropped), else every selected non-reference config
    # over every reference selected; if everything is a reference, first
    # selected over the others
    nq = 0
    if (ratios != "") {
        m = split(ratios, Q, " ")
        for (i = 1; i <= m; i++) {
            if (split(Q[i], ab, "/") != 2 || !(ab[1] in issel) || !(ab[2] in issel)) continue
            nq++; NUM[nq] = ab[1]; DEN[nq] = ab[2]
        }
    } else {
        ns_ = 0; nref = 0
        for (i = 1; i <= nc; i++) {
            isref = 0
            for (j = 1; j <= nr; j++) if (C[i] == Rf[j]) isref = 1
            if (isref) REF[++nref] = C[i]; else SUB[++ns_] = C[i]
        }
        if (ns_ == 0 && nc > 1) {
            SUB[++ns_] = C[1]; nref = 0
            for (i = 2; i <= nc; i++) REF[++nref] = C[i]
        }
        for (a = 1; a <= ns_; a++) for (b = 1; b <= nref; b++) { nq++; NUM[nq] = SUB[a]; DEN[nq] = REF[b] }
    }
    for (q = 1; q <= nq; q++) { QN[q] = NUM[q] "/" DEN[q]; QW[q] = length(QN[q]) + 1 < 10 ? 10 : length(QN[q]) + 1 }
    print "test,size,config,best,median,worst,runs,unit" > summary
    ntest = split(tests, T, " ")
    for (ti = 1; ti <= ntest; ti++) {
        t = T[ti]
        if (!(t in ns)) { printf "\n== %s: no results\n", t; continue }
        # sort sizes (insertion sort, tiny lists)
        m = ns[t]
        for (i = 1; i <= m; i++) S[i] = sz[t, i]
        for (i = 2; i <= m; i++) { x = S[i]; for (j = i - 1; j >= 1 && S[j] > x; j--) S[j + 1] = S[j]; S[j + 1] = x }
        if (t == "lat") desc = "half round-trip latency [us], LOWER is better; ratio < 1 = numerator faster"
        else if (t == "mr") desc = "message rate [msg/s], higher is better; ratio > 1 = numerator faster"
        else if (t == "bowtie") desc = "BOWTIE, pairs r <-> r+-np/2 exchange one message each way per trial, np=" np ", MB/s sent by all ranks together, higher is better; ratio > 1 = numerator faster"
        else if (t == "a2a") desc = "alltoall by point-to-point, every rank to all np-1 others per trial, np=" np ", MB/s sent by all ranks together, higher is better; ratio > 1 = numerator faster"
        else desc = (t == "bw" ? "bandwidth" : "bi-directional bandwidth") " [MB/s = 10^6 B/s], higher is better; ratio > 1 = numerator faster"
        printf "\n== %s: %s\n   best of %d runs per value (each run: %s); spread = largest (worst-best)/best over the configs\n", t, desc, reps, stat
        line = sprintf("%9s", "size")
        for (i = 1; i <= nc; i++) line = line sprintf(" %12s", C[i])
        for (q = 1; q <= nq; q++) line = line sprintf(" %*s", QW[q], QN[q])
        print line sprintf(" %7s", "spread")
        for (i = 1; i <= m; i++) {
            s = S[i]; line = sprintf("%9d", s); spread = -1
            for (ci = 1; ci <= nc; ci++) {
                c = C[ci]; k = t SUBSEP s SUBSEP c; best[c] = ""
                if (!(k in n)) { line = line sprintf(" %12s", "-"); continue }
                cnt = n[k]
                for (j = 1; j <= cnt; j++) V[j] = val[k, j]
                for (j = 2; j <= cnt; j++) { x = V[j]; for (q = j - 1; q >= 1 && V[q] > x; q--) V[q + 1] = V[q]; V[q + 1] = x }
                lo = V[1]; hi = V[cnt]
                med = cnt % 2 ? V[(cnt + 1) / 2] : (V[cnt / 2] + V[cnt / 2 + 1]) / 2
                b_ = t == "lat" ? lo : hi; w_ = t == "lat" ? hi : lo
                best[c] = b_
                if (b_ > 0) { sp = (t == "lat" ? (w_ - b_) / b_ : (b_ - w_) / b_) * 100; if (sp > spread) spread = sp }
                printf "%s,%d,%s,%.6g,%.6g,%.6g,%d,%s\n", t, s, c, b_, med, w_, cnt, unit[t] > summary
                line = line sprintf(" %12s", fmt(t, b_))
            }
            for (q = 1; q <= nq; q++) {
                x = best[NUM[q]]; y = best[DEN[q]]
                line = line sprintf(" %*s", QW[q], (x != "" && y != "" && y > 0) ? sprintf("%.2f", x / y) : "-")
            }
            line = line sprintf(" %6s", spread >= 0 ? sprintf("%.0f%%", spread) : "-")
            print line
        }
    }
}' "$RAW" > "$TABLES"
(( SHOW_TABLES )) && cat "$TABLES"

# ------------------------------------------------------------------ plots
if (( PLOT )) && command -v gnuplot >/dev/null 2>&1 && [[ -s $SUMMARY ]]; then
    for t in $TESTS; do
        grep -q "^$t," "$SUMMARY" || continue
        for c in "${SEL[@]}"; do
            awk -F, -v t="$t" -v c="$c" '$1 == t && $3 == c && $2 > 0 { print $2, $4 }' "$SUMMARY" \
                > "$OUT/.plot-$t-$c.dat"
        done
        case $t in
        lat) ylab="half round-trip latency [us] (lower is better)" ;;
        mr)  ylab="messages/s (higher is better)" ;;
        *)   ylab="MB/s (higher is better)" ;;
        esac
        {
            echo "set terminal pngcairo size 1000,650 noenhanced"
            echo "set output '$OUT/$t.png'"
            echo "set title '$t, np=$NP, best of $REPS'"
            echo "set logscale x 2; set logscale y 10; set grid"
            echo "set xtics ('1' 1, '16' 16, '256' 256, '4K' 4096, '16K' 16384, '64K' 65536, '256K' 262144, '1M' 1048576, '4M' 4194304, '16M' 16777216, '64M' 67108864)"
            echo "set xlabel 'message size'; set ylabel '$ylab'; set key left top"
            plots=()
            for c in "${SEL[@]}"; do
                [[ -s $OUT/.plot-$t-$c.dat ]] && plots+=("'$OUT/.plot-$t-$c.dat' using 1:2 with linespoints title '$c'")
            done
            (( ${#plots[@]} )) || continue
            (IFS=,; echo "plot ${plots[*]}")
        } > "$OUT/.plot-$t.gp"
        gnuplot "$OUT/.plot-$t.gp" 2>"$OUT/logs/gnuplot-$t.err" ||
            echo "note: gnuplot failed for $t (see $OUT/logs/gnuplot-$t.err)"
    done
    rm -f "$OUT"/.plot-*.dat "$OUT"/.plot-*.gp
fi

# ----------------------------------------------------------------- summary
echo
for c in "${SEL[@]}"; do
    [[ -n ${FAILED[$c]:-} ]] && echo "!! configuration $c FAILED ($(echo "${FAILED[$c]}" | head -c 300)); its columns are '-' or partial"
done
echo "# wall time $((T_END - T_START)) s (load at start $LOAD0, at end $(cut -d' ' -f1-3 /proc/loadavg))"
SO_SRC_ID1=$(so_id "$SO_SRC")
if [[ $SO_SRC_ID1 != "$SO_SRC_ID0" ]]; then
    if (( SNAPPED )); then
        echo "# note: $SO_SRC was rebuilt during the run (now ${SO_SRC_ID1#* }); all runs used the copy taken at the start (${SO_SRC_ID0#* })"
    else
        echo "# WARNING: $SO_SRC changed during the run (rebuilt?): at start '${SO_SRC_ID0#* }', at end '${SO_SRC_ID1#* }'; runs before and after measured different builds (times in runs.csv, logs/*.time)"
    fi | tee -a "$OUT/run-info.txt"
fi
awk -F, 'NR > 1 && $4 == 0 && $6 != "" { n++; if ($6 + 0 > 10) busy++; if ($6 + 0 > mx) mx = $6 + 0 }
    END { if (busy) printf "# WARNING: %d of %d runs shared the CPUs with other processes (>10%% of CPU time, worst %d%%): numbers are perturbed, see runs.csv\n", busy, n, mx
          else if (n) printf "# noise: no run lost more than 10%% of CPU time to other processes (worst %d%%)\n", mx }' "$RUNS"
echo "# raw: $RAW  summary: $SUMMARY  tables: $TABLES  runs: $RUNS"
pngs=("$OUT"/*.png)
[[ -e ${pngs[0]} ]] && echo "# plots: ${pngs[*]}"

if (( STRICT && FAILURES > 0 )); then
    exit 1
fi
exit 0
