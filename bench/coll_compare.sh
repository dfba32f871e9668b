#!/usr/bin/env bash
# coll_compare.sh -- coll/cdag against Open MPI's own collectives, in one run.
#
#   bench/coll_compare.sh [--np N] [--sizes LIST] [--reps R] [--component-path DIR]
#                         [--tests "lat overlap sleep osutest"] [--pml ob1|rdrp] [--rt]
#                         [--colls LIST] [--configs "tuned cdag cdag-thread"]
#
# Configurations, measured alternately rep by rep (best of R per value):
#   tuned        Open MPI's defaults: coll/tuned (blocking), libnbc (nonblocking)
#   cdag         --mca coll_cdag_priority 100 (inline progress)
#   cdag-thread  --mca coll_cdag_priority 100 --mca coll_cdag_progress thread
# Prints a latency table (us, lower is better, with cdag/tuned ratios) and
# overlap tables (percent, higher is better; see bench/coll_bench.c):
#   overlap  busy compute with no MPI call (OSU's method)
#   sleep    the host waits outside MPI in nanosleep (accelerator, I/O)
#   osutest  busy compute with MPI_Test calls (OSU's -t)
# --colls restricts the collectives (coll_bench -c), --configs the
# configurations (a subset of the three above, in that order of runs).
# --pml picks the PML underneath every configuration (default: Open MPI's).
# --rt runs mpirun round-robin real-time (chrt -r 20) and the ranks, with
# their engine threads, at chrt -r 10, bound to a core, when ranks <= cores:
# other work on a shared machine cannot preempt a timed rank.  Every
# configuration runs the same way.
# The engine thread can only overlap busy computation when a core is free
# for it: with as many ranks as cores it shares its rank's core.  While the
# host sleeps, the rank's own core is free.
set -u -o pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NP=2
SIZES="8,1024,65536,1048576"
REPS=3
TESTS="lat overlap"
CPATH=""
PML=""
RT=0
COLLS=""
CONFIGS="tuned cdag cdag-thread"
while [ $# -gt 0 ]; do
    case "$1" in
        --np) NP=$2; shift 2 ;;
        --sizes) SIZES=$2; shift 2 ;;
        --reps) REPS=$2; shift 2 ;;
        --tests) TESTS=$2; shift 2 ;;
        --component-path) CPATH=$2; shift 2 ;;
        --pml) PML=$2; shift 2 ;;
        --rt) RT=1; shift ;;
        --colls) COLLS=$2; shift 2 ;;
        --configs) CONFIGS=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//; /^set -u/d'; exit 0 ;;
        *) echo "coll_compare.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
if [ -n "$CPATH" ]; then
    export OMPI_MCA_mca_base_component_path="SYS_DEFAULT:$CPATH"
fi
mkdir -p "$HERE/build"
BIN=$HERE/build/coll_bench
if [ ! -x "$BIN" ] || [ "$HERE/coll_bench.c" -nt "$BIN" ]; then
    mpicc -O2 -Wall -o "$BIN" "$HERE/coll_bench.c" || exit 1
fi
OUT=$(mktemp -d /tmp/coll_compare.XXXXXX)
declare -A ARGS=(
    [tuned]=""
    [cdag]="--mca coll_cdag_priority 100"
    [cdag-thread]="--mca coll_cdag_priority 100 --mca coll_cdag_progress thread"
)
LAUNCH=(timeout 600 mpirun)
RANK=()
if (( RT && NP <= $(nproc) )); then
    # timeout inside chrt: a hung real-time job dies
    LAUNCH=(chrt -r 20 timeout 600 mpirun --bind-to core --map-by core)
    RANK=(chrt -r 10)
fi
for t in $TESTS; do
    for rep in $(seq 1 "$REPS"); do
        for c in $CONFIGS; do
            # shellcheck disable=SC2086
            "${LAUNCH[@]}" --allow-run-as-root --oversubscribe -np "$NP" ${PML:+--mca pml $PML} ${ARGS[$c]} \
                "${RANK[@]}" "$BIN" "$t" -s "$SIZES" ${COLLS:+-c "$COLLS"} 2>"$OUT/$c.$t.$rep.err" |
                awk -v c="$c" '{print c, $0}' >>"$OUT/raw.txt" ||
                echo "!! $c $t rep $rep failed (see $OUT/$c.$t.$rep.err)"
        done
    done
done
report() {  # test-key  title  better(min|max)
    echo
    echo "== $2 (np $NP, best of $REPS)"
    awk -v key="$1" -v better="$3" '
        $2 == key { k = $3 " " $4; v = $5 + 0
                    if (!(k in seen)) { seen[k] = 1; order[++n] = k }
                    id = $1 SUBSEP k
                    if (!(id in best) || (better == "min" ? v < best[id] : v > best[id])) best[id] = v }
        END {
            printf "%-22s %9s %11s %11s %12s %10s %12s\n", "collective", "bytes", "tuned", "cdag", "cdag-thread", "cdag/tuned", "thread/tuned"
            for (i = 1; i <= n; i++) {
                split(order[i], p, " ")
                t = best["tuned" SUBSEP order[i]]; a = best["cdag" SUBSEP order[i]]; b = best["cdag-thread" SUBSEP order[i]]
                printf "%-22s %9s %11.2f %11.2f %12.2f %10s %12s\n", p[1], p[2], t, a, b,
                       (t > 0 ? sprintf("%.2f", a / t) : "-"), (t > 0 ? sprintf("%.2f", b / t) : "-")
            }
        }' "$OUT/raw.txt"
}
case " $TESTS " in *" lat "*) report lat "blocking latency [us], lower is better" min ;; esac
for t in overlap sleep osutest; do
    case " $TESTS " in *" $t "*)
        case $t in
            overlap) what="with busy computation (no MPI call)" ;;
            sleep) what="while the host sleeps outside MPI" ;;
            osutest) what="with computation calling MPI_Test (OSU -t)" ;;
        esac
        report "$t" "overlap [%] of nonblocking collectives $what, higher is better" max
        report "${t}_pure_us" "nonblocking collective alone (icoll + wait) [us], lower is better" min ;;
    esac
done
# PNG plots (gnuplot, when installed): one clustered bar chart per table
plot() {  # key  title  ylabel
    local dat=$OUT/$1.dat
    awk -v key="$1" '
        $2 == key { k = $3 "@" $4; v = $5 + 0
                    if (!(k in seen)) { seen[k] = 1; order[++n] = k }
                    id = $1 SUBSEP k
                    if (!(id in best) || (key == "overlap" ? v > best[id] : v < best[id])) best[id] = v }
        END { print "case tuned cdag cdag-thread"
              for (i = 1; i <= n; i++) print order[i], best["tuned" SUBSEP order[i]] + 0,
                  best["cdag" SUBSEP order[i]] + 0, best["cdag-thread" SUBSEP order[i]] + 0 }' "$OUT/raw.txt" >"$dat"
    [ "$(wc -l <"$dat")" -gt 1 ] || return 0
    {
        echo "set terminal pngcairo size 1200,600 noenhanced"
        echo "set output '$OUT/$1.png'"
        echo "set title '$2 (np $NP)'"
        echo "set ylabel '$3'"
        echo "set style data histograms; set style histogram clustered gap 1; set style fill solid 0.8"
        echo "set xtics rotate by -45; set key top left; set grid ytics"
        [ "$1" = lat ] && echo "set logscale y"
        echo "plot '$dat' using 2:xtic(1) title columnheader(2), '' using 3 title columnheader(3), '' using 4 title columnheader(4)"
    } >"$OUT/$1.gp"
    gnuplot "$OUT/$1.gp" 2>/dev/null && echo "# plot: $OUT/$1.png"
}
if command -v gnuplot >/dev/null 2>&1; then
    case " $TESTS " in *" lat "*) plot lat "blocking collective latency" "us (log)" ;; esac
    case " $TESTS " in *" overlap "*) plot overlap "overlap of nonblocking collectives with computation" "percent" ;; esac
fi
echo
echo "# $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)$( (( RT )) && echo ", real-time round-robin (--rt)")"
echo "# raw: $OUT/raw.txt"
