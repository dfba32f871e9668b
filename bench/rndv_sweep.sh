#!/usr/bin/env bash
# rndv_sweep.sh -- chunk size x window sweep of pml rdrp's rendezvous
# (pml_rdrp_chunk_size x pml_rdrp_max_outstanding, data paths am and rma):
# bw (optionally bibw) for a few large message sizes.  Every point is one
# compare.sh configuration, so the runs are interleaved, timed with the
# best-chunk statistic and checked for noise exactly like compare.sh runs;
# this script only defines the grid and turns compare.sh's summary.csv into
# per-size tables, the best setting per size, sweep.csv and a PNG plot.
# See bench/README.md.
#
#   bench/rndv_sweep.sh                       # 7 chunks x 5 windows x am,rma; 1M..64M; ~4-7 min
#   bench/rndv_sweep.sh --quick               # 3 x 3 x 2 grid, 1 rep; ~1 min
#   bench/rndv_sweep.sh --bibw --paths am --chunks "256K 512K 1M"
set -u -o pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

CHUNKS="64K 128K 256K 512K 1M 2M 4M"
WINDOWS="1 2 4 8 16"
PATHS_="am rma"
SIZES="1M 4M 16M 64M"
TESTS="bw"
REPS=3
TARGET_MS=80
ITERS=40000             # rdrp_bench -i: caps 64M at 5 timed messages, 16M at 20
REF=ucx                 # reference configuration measured alongside
MSG_WINDOW=1
QUICK=0
PLOT=1
OUT=""
SEED=1
COMPONENT_PATH=""
PASS=()
DEF_CHUNK=512K          # the component's defaults, marked in the tables
DEF_WINDOW=8
DEF_PATH=am             # what data_path=auto picks on-node
set_chunks=0 set_windows=0 set_reps=0 set_target=0

usage() {
    cat <<'EOF'
usage: rndv_sweep.sh [options]
Grid
  --chunks "64K 128K ..."  pml_rdrp_chunk_size values (default 64K 128K 256K
                           512K 1M 2M 4M)
  --windows "1 2 4 8 16"   pml_rdrp_max_outstanding values (default 1 2 4 8 16)
  --paths "am rma"         pml_rdrp_data_path values (default am rma)
  --sizes "1M 4M 16M 64M"  message sizes (default 1M 4M 16M 64M)
  --bibw                   also measure bibw (about doubles the time)
  --ref NAME|none          compare.sh configuration measured alongside as a
                           reference (default ucx)
Measurement
  --reps R                 runs per point, best one reported (default 3;
                           --quick 1)
  --target-ms MS           time per size and run (default 80; --quick 25).
                           The count is also capped at 40000*8K/size
                           messages (-i 40000): 64M gets 3-5 timed
                           messages, 16M up to 20, 1M/4M are cut by the time
  --msg-window N           messages rdrp_bench keeps in flight (-W, default 1:
                           one message at a time, so the PML's chunk window is
                           the only pipelining).  N > 1 adds -D (distinct
                           buffers)
  --quick                  grid "128K 512K 2M" x "2 8 16", 1 rep, 25 ms
  --seed N                 shuffle seed for the run order (default 1)
  --component-path DIR     directory with mca_pml_rdrp.so (see compare.sh)
  --compare-args "..."     further compare.sh options (e.g. "--wait-quiet 30")
Output
  --out DIR                results directory (default
                           bench/results/sweep-<date-time>)
  --no-plot                no PNG
  -h, --help
EOF
}

die() { echo "rndv_sweep.sh: $*" >&2; exit 2; }

while [[ $# -gt 0 ]]; do
    case $1 in
    --chunks)       CHUNKS=${2//,/ }; set_chunks=1; shift ;;
    --windows)      WINDOWS=${2//,/ }; set_windows=1; shift ;;
    --paths)        PATHS_=${2//,/ }; shift ;;
    --sizes)        SIZES=${2//,/ }; shift ;;
    --bibw)         TESTS="bw bibw" ;;
    --ref)          REF=$2; shift ;;
    --reps)         REPS=$2; set_reps=1; shift ;;
    --target-ms)    TARGET_MS=$2; set_target=1; shift ;;
    --msg-window)   MSG_WINDOW=$2; shift ;;
    --quick)        QUICK=1 ;;
    --seed)         SEED=$2; shift ;;
    --component-path) COMPONENT_PATH=$2; shift ;;
    --compare-args) read -r -a more <<< "$2"; PASS+=("${more[@]}"); shift ;;
    --out)          OUT=$2; shift ;;
    --no-plot)      PLOT=0 ;;
    -h|--help)      usage; exit 0 ;;
    *)              usage >&2; die "unknown option '$1'" ;;
    esac
    shift || die "option needs an argument"
done

if (( QUICK )); then
    (( set_chunks )) || CHUNKS="128K 512K 2M"
    (( set_windows )) || WINDOWS="2 8 16"
    (( set_reps )) || REPS=1
    (( set_target )) || TARGET_MS=25
fi

to_bytes() {            # 512K -> 524288 (K/M/G = powers of 1024)
    local v=$1 n
    [[ $v =~ ^([0-9]+)([KkMmGg]?)$ ]] || die "bad size '$v'"
    n=${BASH_REMATCH[1]}
    case ${BASH_REMATCH[2]} in
    K|k) n=$((n << 10)) ;;
    M|m) n=$((n << 20)) ;;
    G|g) n=$((n << 30)) ;;
    esac
    echo "$n"
}

[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "--reps needs a positive integer"
[[ $MSG_WINDOW =~ ^[1-9][0-9]*$ ]] || die "--msg-window needs a positive integer"
[[ $SEED =~ ^[0-9]+$ ]] || die "--seed needs an integer"
for p in $PATHS_; do [[ $p == am || $p == rma ]] || die "data path must be am or rma, not '$p'"; done
for w in $WINDOWS; do [[ $w =~ ^[1-9][0-9]*$ ]] || die "bad window '$w'"; done
for c in $CHUNKS $SIZES; do to_bytes "$c" >/dev/null; done
[[ -n $CHUNKS && -n $WINDOWS && -n $PATHS_ && -n $SIZES ]] || die "empty grid"

[[ -n $OUT ]] || OUT=$HERE/results/sweep-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT" || die "cannot create $OUT"

# ------------------------------------------------------------- the grid
# One compare.sh configuration per point: NAME = PATH-cCHUNK-wWINDOW.  The
# protocol is pinned to rdrp (the knobs only apply to it).  Run order is
# shuffled so that a change of the machine's load over the run does not
# line up with one path, chunk size or window.
CONFIGS=()
NAMES=()
for p in $PATHS_; do
    for c in $CHUNKS; do
        for w in $WINDOWS; do
            n="$p-c$c-w$w"
            NAMES+=("$n")
            CONFIGS+=(--config "$n: --mca pml rdrp --mca pml_rdrp_rndv_protocol rdrp --mca pml_rdrp_data_path $p --mca pml_rdrp_chunk_size $(to_bytes "$c") --mca pml_rdrp_max_outstanding $w")
        done
    done
done
ORDER=$(printf '%s\n' "${NAMES[@]}" | awk -v seed="$SEED" 'BEGIN { srand(seed) } { print rand() "\t" $0 }' |
        sort -k1,1 | cut -f2 | tr '\n' ' ')
NPTS=${#NAMES[@]}

# pre-flight (full validation, PML selection) for the default point of each
# path, or the first point if the default is not in the grid
PRE=""
for p in $PATHS_; do
    d="$p-c$DEF_CHUNK-w$DEF_WINDOW"
    if [[ " ${NAMES[*]} " == *" $d "* ]]; then PRE+="$d "; else PRE+="$p-c${CHUNKS%% *}-w${WINDOWS%% *} "; fi
done

[[ $REF == none ]] && REF=""
[[ -n $REF ]] && { ORDER="$REF $ORDER"; PRE+="$REF"; }
BARGS="-W $MSG_WINDOW -T $TARGET_MS -i $ITERS"
(( MSG_WINDOW > 1 )) && BARGS+=" -D"
CMP=("$HERE/compare.sh" --pmls "$ORDER" "${CONFIGS[@]}" --tests "$TESTS"
     --sizes "$(echo $SIZES | tr ' ' ',')" --reps "$REPS" --ratios none
     --preflight "$PRE" --no-tables --no-plot --out "$OUT")
for t in $TESTS; do CMP+=(--test-args "$t: $BARGS"); done
[[ -n $COMPONENT_PATH ]] && CMP+=(--component-path "$COMPONENT_PATH")
CMP+=("${PASS[@]}")

nt=$(wc -w <<< "$TESTS")
NRUN=$(( (NPTS + (${#REF} > 0 ? 1 : 0)) * REPS * nt ))
echo "# rndv_sweep: $NPTS points (chunks: $CHUNKS; windows: $WINDOWS; paths: $PATHS_), sizes $SIZES${REF:+, reference $REF}"
echo "# tests: $TESTS, rdrp_bench $BARGS, best of $REPS; $NRUN runs; results in $OUT"
T0=$(date +%s)
# compare.sh prints one line per run: show failures, pre-flight and the
# summary, and a progress line every 10 runs
"${CMP[@]}" 2>&1 | tee "$OUT/compare.log" | awk -v total=$NRUN '
    / rep [0-9]+\/[0-9]+ / && !/FAILED/ { n++; if (n % 10 == 0 || n == total) { printf "   %d/%d runs\n", n, total; fflush() }; next }
    /^# config / { next }
    { print; fflush() }'
rc=${PIPESTATUS[0]}
T1=$(date +%s)
(( rc == 0 )) || echo "!! compare.sh exited with $rc (see $OUT/compare.log)"
[[ -s $OUT/summary.csv ]] || die "no results (see $OUT/compare.log)"

# ------------------------------------------------------------ sweep.csv
SWEEP=$OUT/sweep.csv
echo "test,size,path,chunk,chunk_bytes,window,best,median,worst,runs,unit" > "$SWEEP"
for c in $CHUNKS; do echo "$c $(to_bytes "$c")"; done > "$OUT/.chunks"
awk -F, -v OFS=, 'NR == FNR { cb[$1 " "] = $2; next }
    FNR == 1 { next }
    { n = split($3, a, "-"); if (n != 3) next
      p = a[1]; c = substr(a[2], 2); w = substr(a[3], 2)
      print $1, $2, p, c, cb[c " "], w, $4, $5, $6, $7, $8 }' FS=' ' "$OUT/.chunks" FS=, "$OUT/summary.csv" |
    sort -t, -k1,1 -k2,2n -k3,3 -k5,5n -k6,6n >> "$SWEEP"
rm -f "$OUT/.chunks"

# ----------------------------------------------------------- the tables
awk -F, -v chunks="$CHUNKS" -v windows="$WINDOWS" -v paths="$PATHS_" -v tests="$TESTS" \
    -v dc="$DEF_CHUNK" -v dw="$DEF_WINDOW" -v dp="$DEF_PATH" -v reps="$REPS" -v mw="$MSG_WINDOW" -v ref="$REF" '
function hsize(b) { return b >= 1048576 ? (b / 1048576) "M" : b >= 1024 ? (b / 1024) "K" : b }
FNR == 1 { next }
FILENAME != sweep { if ($3 == ref) rv[$1, $2 + 0] = $4 + 0; next }
{
    t = $1; s = $2 + 0; k = t SUBSEP s SUBSEP $3 SUBSEP $4 SUBSEP $6
    v[k] = $7 + 0; lo[k] = $9 + 0
    if (!((t, s) in seen)) { seen[t, s] = 1; ns[t]++; S[t, ns[t]] = s }
}
END {
    nch = split(chunks, CH, " "); nw = split(windows, W, " "); np = split(paths, P, " ")
    nt = split(tests, T, " ")
    for (ti = 1; ti <= nt; ti++) {
        t = T[ti]
        if (!(t in ns)) { printf "\n== %s: no results\n", t; continue }
        m = ns[t]
        for (i = 1; i <= m; i++) Z[i] = S[t, i]
        for (i = 2; i <= m; i++) { x = Z[i]; for (j = i - 1; j >= 1 && Z[j] > x; j--) Z[j + 1] = Z[j]; Z[j + 1] = x }
        printf "\n== %s (pml rdrp, rdrp_bench -W %d): MB/s, higher is better; best of %d runs, each the best ~2 ms chunk\n", t, mw, reps
        printf "   rows: pml_rdrp_chunk_size, columns: pml_rdrp_max_outstanding; * = best of the size, d = default (%s %s w%s)\n", dp, dc, dw
        for (i = 1; i <= m; i++) {
            s = Z[i]; bestv = -1; nsp = 0; spsum = 0
            for (pi = 1; pi <= np; pi++) for (ci = 1; ci <= nch; ci++) for (wi = 1; wi <= nw; wi++) {
                k = t SUBSEP s SUBSEP P[pi] SUBSEP CH[ci] SUBSEP W[wi]
                if (!(k in v)) continue
                if (v[k] > bestv) { bestv = v[k]; bp = P[pi]; bc = CH[ci]; bw = W[wi] }
                if (v[k] > 0) { nsp++; SP[nsp] = (v[k] - lo[k]) / v[k] }
            }
            for (a = 2; a <= nsp; a++) { x = SP[a]; for (b = a - 1; b >= 1 && SP[b] > x; b--) SP[b + 1] = SP[b]; SP[b + 1] = x }
            medsp = nsp ? SP[int((nsp + 1) / 2)] : 0
            note = reps > 1 ? sprintf("; median run-to-run spread %.0f%%", medsp * 100) : ""
            printf "\n-- %s, size %s (%d B)%s\n", t, hsize(s), s, note
            line = sprintf("%7s", "")
            for (pi = 1; pi <= np; pi++) {
                lab = "data path " P[pi]; wd = 8 * nw
                pad = int((wd - length(lab)) / 2); if (pad < 0) pad = 0
                line = line sprintf("  |%-*s", wd, sprintf("%*s%s", pad, "", lab))
            }
            print line
            line = sprintf("%7s", "chunk")
            for (pi = 1; pi <= np; pi++) {
                line = line "  |"
                for (wi = 1; wi <= nw; wi++) line = line sprintf(" %6s ", "w" W[wi])
            }
            print line
            for (ci = 1; ci <= nch; ci++) {
                line = sprintf("%7s", CH[ci])
                for (pi = 1; pi <= np; pi++) {
                    line = line "  |"
                    for (wi = 1; wi <= nw; wi++) {
                        k = t SUBSEP s SUBSEP P[pi] SUBSEP CH[ci] SUBSEP W[wi]
                        mark = (P[pi] == bp && CH[ci] == bc && W[wi] == bw) ? "*" : (P[pi] == dp && CH[ci] == dc && W[wi] == dw) ? "d" : " "
                        line = line ((k in v) ? sprintf(" %6.0f%s", v[k], mark) : sprintf(" %7s", "-"))
                    }
                }
                print line
            }
            best[t, s] = bestv; BP[t, s] = bp; BC[t, s] = bc; BW[t, s] = bw
        }
        # best per size, per path, the default, and how flat the optimum is
        printf "\n== %s: best setting per size (within = points within 5%% of the best)\n", t
        printf "%7s  %-18s %8s", "size", "best", "MB/s"
        for (pi = 1; pi <= np; pi++) printf "  %-18s", "best " P[pi]
        printf "  %8s %8s %7s", "default", "best/def", "within"
        if (ref != "") printf "  %8s %8s %8s", ref, "best/" ref, "def/" ref
        printf "\n"
        for (i = 1; i <= m; i++) {
            s = Z[i]; line = sprintf("%7s  %-18s %8.0f", hsize(s), BP[t, s] " " BC[t, s] " w" BW[t, s], best[t, s])
            near = 0
            for (pi = 1; pi <= np; pi++) {
                pb = -1
                for (ci = 1; ci <= nch; ci++) for (wi = 1; wi <= nw; wi++) {
                    k = t SUBSEP s SUBSEP P[pi] SUBSEP CH[ci] SUBSEP W[wi]
                    if (!(k in v)) continue
                    if (v[k] > pb) { pb = v[k]; pc = CH[ci]; pw = W[wi] }
                    if (v[k] >= 0.95 * best[t, s]) near++
                }
                line = line sprintf("  %-18s", pb < 0 ? "-" : sprintf("%s w%s %.0f", pc, pw, pb))
            }
            k = t SUBSEP s SUBSEP dp SUBSEP dc SUBSEP dw
            line = line ((k in v) ? sprintf("  %8.0f %8.2f", v[k], best[t, s] / v[k]) : sprintf("  %8s %8s", "-", "-"))
            line = line sprintf(" %7d", near)
            if (ref != "") {
                r = ((t, s) in rv) ? rv[t, s] : 0
                line = line (r > 0 ? sprintf("  %8.0f %8.2f %8s", r, best[t, s] / r, (k in v) ? sprintf("%.2f", v[k] / r) : "-") : sprintf("  %8s %8s %8s", "-", "-", "-"))
            }
            print line
        }
        # one setting for all sizes: geometric mean of value / best-of-size
        printf "\n== %s: settings ranked over all sizes (score = geometric mean over the sizes of MB/s / best MB/s of that size; 1.00 = best everywhere)\n", t
        nr = 0
        for (pi = 1; pi <= np; pi++) for (ci = 1; ci <= nch; ci++) for (wi = 1; wi <= nw; wi++) {
            lg = 0; cnt = 0; mn = 9
            for (i = 1; i <= m; i++) {
                s = Z[i]; k = t SUBSEP s SUBSEP P[pi] SUBSEP CH[ci] SUBSEP W[wi]
                if (!(k in v) || v[k] <= 0 || best[t, s] <= 0) { cnt = -1; break }
                r = v[k] / best[t, s]; lg += log(r); cnt++; if (r < mn) mn = r
            }
            if (cnt <= 0) continue
            nr++; SC[nr] = exp(lg / cnt); RN[nr] = P[pi] " " CH[ci] " w" W[wi]; RM[nr] = mn
            RD[nr] = (P[pi] == dp && CH[ci] == dc && W[wi] == dw)
        }
        for (a = 2; a <= nr; a++) {
            x = SC[a]; xn = RN[a]; xm = RM[a]; xd = RD[a]
            for (b = a - 1; b >= 1 && SC[b] < x; b--) { SC[b + 1] = SC[b]; RN[b + 1] = RN[b]; RM[b + 1] = RM[b]; RD[b + 1] = RD[b] }
            SC[b + 1] = x; RN[b + 1] = xn; RM[b + 1] = xm; RD[b + 1] = xd
        }
        printf "%5s  %-18s %6s %6s\n", "rank", "setting", "score", "worst"
        for (a = 1; a <= nr; a++)
            if (a <= 8 || RD[a]) printf "%5d  %-18s %6.2f %6.2f%s\n", a, RN[a], SC[a], RM[a], RD[a] ? "   <- default" : ""
        for (pi = 1; pi <= np; pi++)
            for (a = 1; a <= nr; a++) if (index(RN[a], P[pi] " ") == 1) {
                if (a > 8) printf "%5d  %-18s %6.2f %6.2f   <- best %s\n", a, RN[a], SC[a], RM[a], P[pi]
                break
            }
    }
}' sweep="$SWEEP" "$OUT/summary.csv" "$SWEEP" | tee "$OUT/sweep.txt"

# ------------------------------------------------------------------ plot
if (( PLOT )) && command -v gnuplot >/dev/null 2>&1; then
    npath=$(wc -w <<< "$PATHS_"); nsize=$(wc -w <<< "$SIZES")
    for t in $TESTS; do
        grep -q "^$t," "$SWEEP" || continue
        gp=$OUT/.sweep-$t.gp
        {
            echo "set terminal pngcairo size $((520 * npath)),$((300 * nsize + 60)) noenhanced font ',9'"
            echo "set output '$OUT/sweep-$t.png'"
            echo "set multiplot layout $nsize,$npath title 'pml rdrp $t (MB/s) vs chunk size, one line per max_outstanding; best of $REPS, $(date +%F)'"
            echo "set logscale x 2; set grid; set key right bottom font ',8'"
            cmin=$(for c in $CHUNKS; do to_bytes "$c"; done | sort -n | head -1)
            cmax=$(for c in $CHUNKS; do to_bytes "$c"; done | sort -n | tail -1)
            echo "set xrange [$cmin / 1.4 : $cmax * 1.4]"
            echo "set xtics ('64K' 65536, '128K' 131072, '256K' 262144, '512K' 524288, '1M' 1048576, '2M' 2097152, '4M' 4194304, '8M' 8388608, '16M' 16777216)"
            for s in $SIZES; do
                sb=$(to_bytes "$s")
                # same y scale for all paths of one size
                ymax=$(awk -F, -v t="$t" -v s="$sb" '$1 == t && $2 == s && $7 > m { m = $7 } END { print (m > 0 ? m * 1.08 : 1) }' "$SWEEP")
                for p in $PATHS_; do
                    echo "set title '$s messages, data path $p'"
                    echo "set yrange [0:$ymax]"
                    plots=()
                    for w in $WINDOWS; do
                        dat=$OUT/.sweep-$t-$sb-$p-$w.dat
                        awk -F, -v t="$t" -v s="$sb" -v p="$p" -v w="$w" \
                            '$1 == t && $2 == s && $3 == p && $6 == w { print $5, $7 }' "$SWEEP" > "$dat"
                        [[ -s $dat ]] && plots+=("'$dat' using 1:2 with linespoints title 'w$w'")
                    done
                    (( ${#plots[@]} )) || plots=("NaN notitle")
                    (IFS=,; echo "plot ${plots[*]}")
                done
            done
            echo "unset multiplot"
        } > "$gp"
        if gnuplot "$gp" 2>"$OUT/logs/gnuplot-sweep-$t.err"; then
            echo "# plot: $OUT/sweep-$t.png"
        else
            echo "note: gnuplot failed for $t (see $OUT/logs/gnuplot-sweep-$t.err)"
        fi
        rm -f "$gp" "$OUT"/.sweep-"$t"-*.dat
    done
fi

echo "# sweep wall time $((T1 - T0)) s; table: $OUT/sweep.txt  csv: $SWEEP  raw: $OUT/raw.csv  runs: $OUT/runs.csv"
grep -E '^# (WARNING|noise)' "$OUT/compare.log" || true
