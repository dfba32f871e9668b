#!/usr/bin/env bash
# flood.sh: the producer/consumer floods of issue 12, pml rdrp vs ob1 vs
# pml ucx, interleaved, best of N (time) and the largest peak RSS seen.
#
#   bash bench/flood.sh [--component-path DIR] [--reps N] [--quick] [--run SECONDS]
#                       [--windows N] [--sleep US] [--rt]
#
#   --rt: mpirun and the two ranks run round-robin real-time (chrt -r,
#         mpirun above the ranks), so other work on a shared machine cannot
#         preempt them; every PML is run the same way
#
#   part 1: 2000 and 20000 windows x 64 x 16 B and 1 KiB, consumer at full
#           speed, and 2000 x 64 x 1 KiB with a consumer that sleeps 200 us
#           per window (--quick: 2000 windows only)
#   part 3: the rdrp variants under the 2000 x 64 x 1 KiB flood (with a
#           consumer at full speed and one sleeping 200 us per window):
#           throttle rank/node, rendezvous get/put, data paths am/rma, no
#           shared-memory transport
#   part 2: a producer that outruns its consumer for a long time: --windows
#           (default 10^6) windows x 64 x 1 KiB against a consumer that
#           sleeps --sleep US (default 20) per window, ending early after
#           --run S (default 600); every second both print the windows done
#           and their resident memory (flat = paced; every 5th line shown)
# Output: one line per (test, PML): best time, ratio to ob1, peak RSS of
# producer and consumer and the ratio of the producer's to ob1's.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
COMP=""
REPS=3
QUICK=0
RUN=600
P2_WINDOWS=1000000
P2_SLEEP=20
RT=()
while [ $# -gt 0 ]; do
    case "$1" in
        --component-path) COMP=$2; shift 2 ;;
        --reps) REPS=$2; shift 2 ;;
        --quick) QUICK=1; shift ;;
        --run) RUN=$2; shift 2 ;;
        --windows) P2_WINDOWS=$2; shift 2 ;;
        --sleep) P2_SLEEP=$2; shift 2 ;;
        --rt) RT=(chrt -r 10); shift ;;
        *) echo "flood.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "$COMP" ] && export OMPI_MCA_mca_base_component_path="SYS_DEFAULT:$COMP"
mkdir -p "$HERE/build"
if [ ! -x "$HERE/build/flood" ] || [ "$HERE/flood.c" -nt "$HERE/build/flood" ]; then
    mpicc -O2 -Wall -o "$HERE/build/flood" "$HERE/flood.c" || exit 1
fi
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to core)
[ ${#RT[@]} -gt 0 ] && MPIRUN=(chrt -r 20 "${MPIRUN[@]}")
declare -A PML=(
    [ob1]="--mca pml ob1 --mca btl self,vader"
    [ucx]="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any"
    [rdrp]="--mca pml rdrp"
)
ORDER="ob1 ucx rdrp"

echo "# flood.sh $(date -u +%FT%TZ) on $(hostname), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "## part 1: windows x 64 x size, best of $REPS (time s, peak RSS KiB)"
printf '%-28s %-5s %9s %8s %10s %10s %8s\n' test pml time vs_ob1 rss_prod rss_cons vs_ob1
cases="2000:16:0 2000:1024:0 2000:1024:200"
[ $QUICK = 0 ] && cases="$cases 20000:16:0 20000:1024:0"
for c in $cases; do
    IFS=: read -r n b s <<<"$c"
    declare -A best=() rssp=() rssc=()
    for rep in $(seq "$REPS"); do
        for p in $ORDER; do
            # shellcheck disable=SC2086
            line=$(timeout 600 "${MPIRUN[@]}" ${PML[$p]} "${RT[@]}" "$HERE/build/flood" -n "$n" -b "$b" -s "$s" 2>/dev/null | grep '^flood')
            t=$(sed -n 's/.* time \([0-9.]*\) s.*/\1/p' <<<"$line")
            rp=$(sed -n 's/.*maxrss producer \([0-9]*\) KiB.*/\1/p' <<<"$line")
            rc=$(sed -n 's/.*consumer \([0-9]*\) KiB.*/\1/p' <<<"$line")
            [ -z "$t" ] && { t=999999; rp=0; rc=0; }
            if [ -z "${best[$p]:-}" ] || awk -v a="$t" -v b="${best[$p]}" 'BEGIN{exit !(a<b)}'; then best[$p]=$t; fi
            [ "${rp:-0}" -gt "${rssp[$p]:-0}" ] && rssp[$p]=$rp
            [ "${rc:-0}" -gt "${rssc[$p]:-0}" ] && rssc[$p]=$rc
        done
    done
    for p in $ORDER; do
        # a PML whose every run failed (not found, crashed, timed out) shows
        # time 999999 and RSS 0 rather than ending the script
        printf '%-28s %-5s %9.3f %8.2f %10d %10d %8.2f\n' "${n}x64x${b}B sleep${s}us" "$p" "${best[$p]}" \
            "$(awk -v a="${best[$p]}" -v b="${best[ob1]}" 'BEGIN{print (b>0)?a/b:0}')" "${rssp[$p]:-0}" "${rssc[$p]:-0}" \
            "$(awk -v a="${rssp[$p]:-0}" -v b="${rssp[ob1]:-0}" 'BEGIN{print (b>0)?a/b:0}')"
    done
    unset best rssp rssc
done

echo "## part 3: pml rdrp variants, 2000 x 64 x 1 KiB, best of $REPS (time s, vs ob1 of part 1)"
declare -A VAR=(
    [throttle-rank]="--mca pml_rdrp_throttle rank" [throttle-node]="--mca pml_rdrp_throttle node"
    [get]="--mca pml_rdrp_rndv_protocol get" [put]="--mca pml_rdrp_rndv_protocol put"
    [am]="--mca pml_rdrp_data_path am" [rma]="--mca pml_rdrp_data_path rma" [noshm]="--mca pml_rdrp_shm 0"
)
printf '%-14s %-8s %9s %10s %10s\n' variant sleep time rss_prod rss_cons
for v in throttle-rank throttle-node get put am rma noshm; do
    for s in 0 200; do
        bt=""; bp=0; bc=0
        for rep in $(seq "$REPS"); do
            # shellcheck disable=SC2086
            line=$(timeout 600 "${MPIRUN[@]}" --mca pml rdrp ${VAR[$v]} "${RT[@]}" "$HERE/build/flood" -n 2000 -b 1024 -s "$s" 2>/dev/null | grep '^flood')
            t=$(sed -n 's/.* time \([0-9.]*\) s.*/\1/p' <<<"$line"); [ -z "$t" ] && t=999999
            rp=$(sed -n 's/.*maxrss producer \([0-9]*\) KiB.*/\1/p' <<<"$line"); rc=$(sed -n 's/.*consumer \([0-9]*\) KiB.*/\1/p' <<<"$line")
            if [ -z "$bt" ] || awk -v a="$t" -v b="$bt" 'BEGIN{exit !(a<b)}'; then bt=$t; fi
            [ "${rp:-0}" -gt "$bp" ] && bp=$rp; [ "${rc:-0}" -gt "$bc" ] && bc=$rc
        done
        printf '%-14s %-8s %9.3f %10d %10d\n' "$v" "${s}us" "$bt" "$bp" "$bc"
    done
done

echo "## part 2: $P2_WINDOWS windows x 64 x 1 KiB (at most ${RUN} s), consumer sleeping $P2_SLEEP us per window"
for p in $ORDER; do
    echo "### $p"
    # shellcheck disable=SC2086
    timeout $((RUN + 120)) "${MPIRUN[@]}" ${PML[$p]} "${RT[@]}" "$HERE/build/flood" -r "$RUN" -n "$P2_WINDOWS" -b 1024 -s "$P2_SLEEP" 2>/dev/null |
        grep -E '^t=|^flood' | grep -E 'producer|^flood' | awk 'NR % 5 == 1 || /^flood/'
done
