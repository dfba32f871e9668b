#!/usr/bin/env bash
# cluster_bench.sh - measurements across the namespace cluster
# (test/cluster/cluster.sh), issues 16 and 21.  Every part builds its own
# cluster, runs its configurations interleaved (rep 1 of each, then rep 2,
# ...), keeps the best of the repetitions, tears the cluster down, and holds
# the shared bench lock (/tmp/rdrp-bench.lock) only while it measures.
#
#   bash bench/cluster_bench.sh [--component-path DIR] [--parts LIST] [--reps N] [--out DIR] [--rt] [--replot]
#
# --replot: measure nothing; rebuild the tables and plots of the parts from
# the <part>.raw files already in --out (e.g. after a change to a plot).
#
# --rt: as in bench/suites.sh and bench/flood.sh, mpirun (and so the orteds it
# starts) runs round-robin real-time at chrt -r 20 and the ranks at chrt -r 10,
# so that other work on a shared machine cannot take the CPU from a
# measurement -- but only for jobs whose ranks fit the cores: the "nodes" all
# share this machine's cores, so that is the job's total rank count (np <=
# nproc), not the ranks of one node.  More busy-polling real-time ranks than
# cores would take turns in 100 ms round-robin slices (worse than the normal
# scheduler) and starve the kernel's own network work.  Never SCHED_FIFO: a
# FIFO rank polling for a message from a rank on the same core never yields.
# With 2 cores: xhost and credit (np 2) run real-time, incast (np 5) and
# throttle (np 4) do not.
#
# Parts (default all, in this order):
#   xhost     2 nodes x 1 rank: latency, bandwidth, bidirectional bandwidth
#             (bench/rdrp_bench.c) and a one-way flood (bench/flood.c, 50
#             windows x 256 x 4 KiB) under ob1/tcp, pml ucx, pml rdrp and
#             ob1 + btl credit; ports unshaped, then shaped to 2 Gbit/s
#   incast    4 nodes: 2 senders stream 4 MiB messages to a receiver whose
#             switch port is shaped to 200 Mbit/s with a 64-packet queue,
#             while a victim does 8-byte ping-pongs across the same port;
#             victim round trip (mean/p99), receiver goodput, queue
#             occupancy of the port (tc -s qdisc sampled every 0.1 s);
#             pml rdrp vs pml ucx vs ob1/tcp, pml rdrp with its window
#             sized to the switch queue (rdrp-qwin), and the victim without
#             the incast (idle: senders send 8 bytes)
#   throttle  2 nodes x 2 ranks: coll/cdag alltoall (bench/coll_bench.c) with
#             coll_cdag_throttle off/rank/node and many-isend floods
#             (bench/throttle_isend.c) with pml_rdrp_throttle off/rank/node,
#             unshaped and shaped to 2 Gbit/s
#   credit    2 nodes x 1 rank: eager floods over TCP with static vs dynamic
#             credits (pml rdrp and btl credit): time, peak RSS, mailbox
#             high-water mark
# Output: DIR (default bench/results/cluster-<date>) with <part>.raw (every
# run), <part>.txt (the tables) and PNG plots (xhost-*.png, incast.png,
# throttle.png, credit.png); the tables are printed too.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/.." && pwd)
CL=$TOP/test/cluster
COMP=$TOP/build/.libs
PARTS=xhost,incast,throttle,credit
REPS=2
OUT=""
RT=0 REPLOT=0
while [ $# -gt 0 ]; do
    case $1 in
        --component-path) COMP=$2; shift 2 ;;
        --parts) PARTS=$2; shift 2 ;;
        --reps) REPS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --rt) RT=1; shift ;;
        --replot) REPLOT=1; shift ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "cluster_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
[ -d "$COMP" ] || { echo "no components in $COMP (--component-path)" >&2; exit 2; }
export OMPI_MCA_mca_base_component_path="SYS_DEFAULT:$(cd "$COMP" && pwd)"
[ -n "$OUT" ] || OUT=$HERE/results/cluster-$(date +%Y%m%d-%H%M)
mkdir -p "$OUT" "$HERE/build"
OUT=$(cd "$OUT" && pwd)

# ------------------------------------------------------------ binaries
build_bin() {  # name source [extra mpicc args]
    local b=$HERE/build/$1
    if [ ! -x "$b" ] || [ "$2" -nt "$b" ]; then mpicc -O2 -Wall -o "$b" "$2" "${@:3}" || exit 1; fi
}
build_bin rdrp_bench "$HERE/rdrp_bench.c"
build_bin flood "$HERE/flood.c"
build_bin incast "$HERE/incast.c"
build_bin coll_bench "$HERE/coll_bench.c" -lm
if [ ! -x "$HERE/build/tcp_stream" ] || [ "$HERE/tcp_stream.c" -nt "$HERE/build/tcp_stream" ]; then
    cc -O2 -Wall -pthread -o "$HERE/build/tcp_stream" "$HERE/tcp_stream.c" || exit 1
fi
if [ ! -x "$HERE/build/throttle_isend" ] || [ "$HERE/throttle_isend.c" -nt "$HERE/build/throttle_isend" ]; then
    mpicxx -O2 -std=c++17 -I"$TOP" -c -o "$HERE/build/throttle.o" "$TOP/common/throttle/throttle.cc" &&
        mpicc -O2 -Wall -I"$TOP" -c -o "$HERE/build/throttle_isend.o" "$HERE/throttle_isend.c" &&
        mpicxx -o "$HERE/build/throttle_isend" "$HERE/build/throttle_isend.o" "$HERE/build/throttle.o" || exit 1
fi

# ------------------------------------------------------------ the cluster
dir=""
down() { [ -n "$dir" ] && bash "$CL/cluster.sh" down "$dir"; dir=""; }
trap down EXIT
trap 'exit 130' INT TERM
up() {  # cluster.sh up arguments
    down
    dir=$(mktemp -d /tmp/rdrp-cluster.XXXXXX)
    bash "$CL/cluster.sh" up --dir "$dir" "$@" >/dev/null || { dir=""; echo "cluster up failed" >&2; exit 1; }
    export RDRP_CLUSTER_DIR=$dir
}
# rt_fits NP: whether a job of NP ranks runs real-time (--rt and NP <= cores)
rt_fits() { (( RT && $1 <= $(nproc) )); }
run() {  # mpirun.sh arguments (with -np N): one job, 300 s at most; mpirun at chrt -r 20 when rt_fits N
    local np=0 a pre=()
    for a in "$@"; do [ "$np" = next ] && np=$a; [ "$a" = -np ] && np=next; done
    rt_fits "$np" && pre=(chrt -r 20)
    timeout -k 5 300 "${pre[@]}" bash "$CL/mpirun.sh" --allow-run-as-root --oversubscribe "$@" </dev/null
}
rank() { rt_fits "$1" && echo "chrt -r 10"; }   # rank NP: the prefix of the ranks' command
# the bench lock, held while a part measures
lock() {
    exec 8>/tmp/rdrp-bench.lock; flock 8
    echo "# $(date -u +%H:%M:%S) lock taken; $(uptime)$( ((RT)) && echo "; --rt: jobs of <= $(nproc) ranks real-time")"
}
unlock() { echo "# $(date -u +%H:%M:%S) done; $(uptime)"; flock -u 8; exec 8>&-; }

declare -A PML=(
    [ob1-tcp]="--mca pml ob1 --mca btl self,tcp"
    [ucx]="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any"
    [rdrp]="--mca pml rdrp"
    [ob1-credit]="--mca pml ob1 --mca btl self,credit"
)
part_on() { [[ ",$PARTS," == *",$1,"* ]]; }

plot() {  # png title xlabel ylabel logx(0/1) data-file columns-spec...
    local png=$1 title=$2 xl=$3 yl=$4 logx=$5 data=$6
    shift 6
    {
        echo "set terminal png size 900,560; set output '$png'; set title '$title'"
        echo "set xlabel '$xl'; set ylabel '$yl'; set key left top; set grid"
        [ "$logx" = 1 ] && echo "set logscale x 2; set format x '%.0s%cB'"
        echo "plot $*"
    } | gnuplot 2>/dev/null || echo "# gnuplot failed for $png"
}

# ------------------------------------------------------------ xhost (issue 21)
XH_CFGS="ob1-tcp ucx rdrp ob1-credit"
# the link's payload rate: a plain TCP connection node1 -> node2 for 3 s, one
# way (bw) and both ways at once (bibw, the sum), as rows "link" of xhost.raw
xhost_link() {  # label rep
    local a2 pre=() t
    a2=$(awk '$1 == "node2" { print $3 }' "$dir/nodes")
    ((RT)) && pre=(chrt -r 10)
    for t in bw bibw; do
        timeout -k 5 30 bash "$CL/cluster.sh" exec "$dir" node2 "${pre[@]}" "$HERE/build/tcp_stream" -l 5201 >"$OUT/.link2" &
        sleep 0.5
        timeout -k 5 30 bash "$CL/cluster.sh" exec "$dir" node1 "${pre[@]}" "$HERE/build/tcp_stream" -c "$a2" 5201 -t 3 \
            $([ $t = bibw ] && echo -b) >"$OUT/.link1"
        wait
        cat "$OUT/.link1" "$OUT/.link2" | awk -v l="$1" -v r="$2" -v t=$t '/^recv MB\/s/ { s += $3 }
            END { print l, "link", r, t, 0, s + 0 }' >>"$OUT/xhost.raw"
    done
    rm -f "$OUT/.link1" "$OUT/.link2"
}
xhost_shape() {  # label rate|"" sizes
    local label=$1 rate=$2 sizes=$3 raw=$OUT/xhost.raw
    if [ -n "$rate" ]; then up --nodes 2 --rate "$rate" --queue 1000; else up --nodes 2; fi
    lock   # per shape: each locked stretch stays under ~10 minutes
    for rep in $(seq 1 "$REPS"); do
        for c in $XH_CFGS; do
            # shellcheck disable=SC2086
            run -np 2 ${PML[$c]} $(rank 2) "$HERE/build/rdrp_bench" -t lat,bw,bibw --csv -z "$sizes" -W 16 -T 100 --stat best 2>&1 |
                awk -F, -v l="$label" -v c="$c" -v r="$rep" '$1 ~ /^(lat|bw|bibw)$/ { print l, c, r, $1, $3, $4 }' >>"$raw"
            # shellcheck disable=SC2086
            run -np 2 ${PML[$c]} $(rank 2) "$HERE/build/flood" -n 50 -w 256 -b 4096 2>&1 |
                awk -v l="$label" -v c="$c" -v r="$rep" '/^flood windows/ { for (i = 1; i <= NF; i++) if ($i == "time") t = $(i + 1)
                    print l, c, r, "flood", 4096, t }' >>"$raw"
        done
        xhost_link "$label" "$rep"
    done
    unlock
    down
}
xhost_table() {  # label
    awk -v l="$1" -v cfgs="$XH_CFGS" '
        $1 != l { next }
        $2 == "link" { if ($6 > link[$4]) link[$4] = $6; next }
        { k = $4 " " $5; v = $6 + 0; id = $2 SUBSEP k
          if (!(k in seen)) { seen[k] = 1; order[++n] = k }
          lower = ($4 == "lat" || $4 == "flood")
          if (!(id in best) || (lower ? v < best[id] : v > best[id])) best[id] = v }
        END { nc = split(cfgs, C, " ")
              printf "%-6s %9s", "test", "bytes"; for (i = 1; i <= nc; i++) printf " %10s", C[i]
              printf " %11s %11s\n", "rdrp/best", "credit/tcp"
              for (j = 1; j <= n; j++) { split(order[j], p, " "); lower = (p[1] == "lat" || p[1] == "flood")
                  printf "%-6s %9s", p[1], p[2]
                  for (i = 1; i <= nc; i++) printf " %10.2f", best[C[i] SUBSEP order[j]]
                  t = best["ob1-tcp" SUBSEP order[j]]; u = best["ucx" SUBSEP order[j]]; r = best["rdrp" SUBSEP order[j]]
                  cr = best["ob1-credit" SUBSEP order[j]]
                  ref = lower ? (t < u ? t : u) : (t > u ? t : u)
                  printf " %11.2f %11.2f\n", ref ? r / ref : 0, t ? cr / t : 0 }
              if (link["bw"] > 0) {
                  printf "# link (plain TCP, one connection, best): one way %.1f MB/s, both ways %.1f MB/s;", link["bw"], link["bibw"]
                  printf " worst bw, bibw / link at >= 1 MiB:"
                  for (i = 1; i <= nc; i++) { mb = 9; mi = 9
                      for (j = 1; j <= n; j++) { split(order[j], p, " "); if (p[2] + 0 < 1048576) continue
                          v = best[C[i] SUBSEP order[j]]
                          if (p[1] == "bw" && v / link["bw"] < mb) mb = v / link["bw"]
                          if (p[1] == "bibw" && link["bibw"] > 0 && v / link["bibw"] < mi) mi = v / link["bibw"] }
                      printf " %s %.3f %.3f", C[i], mb, mi }
                  printf "\n" } }' "$OUT/xhost.raw"
}
if part_on xhost; then
    echo "######## xhost: 2 nodes x 1 rank (lat us: lower is better; bw/bibw MB/s: higher; flood s: lower; best of $REPS)"
    if ((!REPLOT)); then
        xhost_shape unshaped "" 8,16K,64K,1M,4M
        xhost_shape 2gbit 2gbit 8,64K,1M,4M
    fi
    for l in unshaped 2gbit; do
        echo "#### ports $l (ratios: rdrp / best of ob1-tcp and ucx; ob1-credit / ob1-tcp)"
        xhost_table $l
    done | tee "$OUT/xhost.txt"
    for l in unshaped 2gbit; do
        for t in bw lat; do
            xhost_table $l | awk -v t=$t '$1 == t { print $2, $3, $4, $5, $6 }' | sed 's/K / * 1024 /' >/dev/null
            xhost_table $l | awk -v t=$t '$1 == t { s = $2; m = 1
                if (s ~ /K$/) m = 1024; if (s ~ /M$/) m = 1048576; sub(/[KM]$/, "", s); print s * m, $3, $4, $5, $6 }' >"$OUT/xhost-$l-$t.dat"
            plot "$OUT/xhost-$l-$t.png" "across 2 nodes, ports $l: $t" "message size" \
                "$([ $t = lat ] && echo 'latency, us' || echo 'bandwidth, MB/s')" 1 "$OUT/xhost-$l-$t.dat" \
                "'$OUT/xhost-$l-$t.dat' using 1:2 with linespoints title 'ob1/tcp', '' using 1:3 with linespoints title 'pml ucx', '' using 1:4 with linespoints lw 2 title 'pml rdrp', '' using 1:5 with linespoints title 'ob1 + btl credit'"
        done
    done
fi

# ------------------------------------------------------------ incast (issue 16, RDRP seed)
# rdrp-qwin: pml rdrp with its receiver-driven window sized to the switch
# queue (the seed's premise): 8 receives in flight x (4 KiB first chunk + one
# 4 KiB chunk outstanding) = 64 KiB, under the 64-packet (96 KB) queue.  On
# the rma data path: on the am path (auto's choice for a TCP peer) the sender
# streams every chunk as a UCX active message and chunks below UCX's own
# rendezvous threshold arrive eagerly, so the receiver's window bounds nothing
# (measured: same drops and queue as plain rdrp).
# idle: the same 5 ranks with 8-byte messages instead of 4 MiB ones -- what
# the victim's round trip is without the incast (CPU scheduling alone).
IC_CFGS="rdrp rdrp-qwin ucx ob1-tcp idle"
PML[rdrp-qwin]="--mca pml rdrp --mca pml_rdrp_data_path rma --mca pml_rdrp_chunk_size 4096 --mca pml_rdrp_rndv_first_chunk 4096 --mca pml_rdrp_max_outstanding 1"
PML[idle]="--mca pml rdrp"
if part_on incast; then
    echo "######## incast: 2 senders -> receiver behind 200 Mbit/s, 64-packet queue; victim across the same port (best of $REPS by victim mean)"
    raw=$OUT/incast.raw
    if ((!REPLOT)); then
        up --nodes 4
        bash "$CL/cluster.sh" shape "$dir" node1 200mbit 64
        port=$(awk '$1 == "node1" { print $4 }' "$dir/nodes")
        lock
        for rep in $(seq 1 "$REPS"); do
            for c in $IC_CFGS; do
                q=$OUT/incast-q.$c.$rep
                : >"$q"
                ( while :; do tc -s qdisc show dev "$port" | awk '/backlog/ { print $3; exit }' | tr -d p >>"$q"; sleep 0.1; done ) &
                sampler=$!
                d0=$(tc -s qdisc show dev "$port" | awk '/dropped/ { gsub(",", ""); print $7; exit }')
                # shellcheck disable=SC2086
                size=4194304; [ "$c" = idle ] && size=8
                line=$(run -np 5 ${PML[$c]} $(rank 5) "$HERE/build/incast" -d 4 -b $size -w 4 2>&1 | grep '^incast')
                d1=$(tc -s qdisc show dev "$port" | awk '/dropped/ { gsub(",", ""); print $7; exit }')
                kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
                qs=$(awk '{ s += $1; if ($1 > m) m = $1 } END { printf "qmean_pkts=%.1f qmax_pkts=%d", NR ? s / NR : 0, m }' "$q")
                rm -f "$q"
                echo "$c $rep $line $qs drops=$((d1 - d0))" | tee -a "$raw"
            done
        done
        unlock
        down
    fi
    awk -v cfgs="$IC_CFGS" '
        { c = $1; for (i = 3; i <= NF; i++) if (split($i, kv, "=") == 2) v[kv[1]] = kv[2]
          if (!(c in best) || v["mean"] < bm[c]) { bm[c] = v["mean"]; best[c] = v["mean"] " " v["p50"] " " v["p99"] " " v["max"] " " v["goodput_MBps"] " " v["qmean_pkts"] " " v["qmax_pkts"] " " v["drops"] } }
        END { printf "%-9s %10s %10s %10s %10s %12s %9s %9s %8s\n", "pml", "mean_us", "p50_us", "p99_us", "max_us", "goodput_MB/s", "q_mean", "q_max", "drops"
              n = split(cfgs, C, " ")
              for (i = 1; i <= n; i++) { split(best[C[i]], b, " ")
                  printf "%-9s %10.1f %10.1f %10.1f %10.1f %12.1f %9.1f %9d %8d\n", C[i], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8] } }' "$raw" |
        tee "$OUT/incast.txt"
    awk 'NR > 1 { print $1, $2, $4 }' "$OUT/incast.txt" >"$OUT/incast.dat"
    {
        echo "set terminal png size 800,500; set output '$OUT/incast.png'"
        echo "set title 'victim round trip during incast (200 Mbit/s port, 64-packet queue)'; set ylabel 'us'; set logscale y"
        echo "set style data histograms; set style histogram clustered; set style fill solid 0.7; set grid y"
        echo "plot '$OUT/incast.dat' using 2:xtic(1) title 'mean', '' using 3 title 'p99'"
    } | gnuplot 2>/dev/null
fi

# ------------------------------------------------------------ throttle (Luo seed)
if part_on throttle; then
    echo "######## throttle: 2 nodes x 2 ranks; alltoall us (lower is better), isend MB/s (higher); best of $REPS"
    raw=$OUT/throttle.raw
    if ((!REPLOT)); then
        for shape in unshaped 2gbit; do
            if [ $shape = 2gbit ]; then up --nodes 2 --rate 2gbit --queue 1000; else up --nodes 2; fi
            lock   # per shape: each locked stretch stays under ~10 minutes
            for rep in $(seq 1 "$REPS"); do
                for m in off rank node; do
                    run -np 4 --mca pml rdrp --mca coll_cdag_priority 100 --mca coll_cdag_throttle $m \
                        $(rank 4) "$HERE/build/coll_bench" lat -c alltoall -s 1024,65536,1048576 2>&1 |
                        awk -v s=$shape -v m=$m '$1 == "lat" { print s, "alltoall", m, $3, $4 }' >>"$raw"
                    # (throttle_isend pairs rank r with r + np/2: ppr:2:node puts the pairs on different nodes)
                    CLUSTER_MAP=ppr:2:node run -np 4 --mca pml rdrp --mca pml_rdrp_throttle $m $(rank 4) "$HERE/build/throttle_isend" off \
                        -s 1024,16384,262144 -n 256 2>&1 |
                        awk -v s=$shape -v m=$m '$1 == "isend" { print s, "isend", m, $3, $4 }' >>"$raw"
                done
            done
            unlock
            down
        done
    fi
    awk '{ k = $1 " " $2 " " $4; id = $3 SUBSEP k; v = $5 + 0; lower = ($2 == "alltoall")
           if (!(k in seen)) { seen[k] = 1; order[++n] = k }
           if (!(id in best) || (lower ? v < best[id] : v > best[id])) best[id] = v }
         END { printf "%-9s %-9s %9s %10s %10s %10s %9s %9s\n", "ports", "test", "bytes", "off", "rank", "node", "rank/off", "node/off"
               for (i = 1; i <= n; i++) { split(order[i], p, " "); o = best["off" SUBSEP order[i]]
                   r = best["rank" SUBSEP order[i]]; d = best["node" SUBSEP order[i]]
                   printf "%-9s %-9s %9s %10.1f %10.1f %10.1f %9.2f %9.2f\n", p[1], p[2], p[3], o, r, d, o ? r / o : 0, o ? d / o : 0 } }' "$raw" |
        tee "$OUT/throttle.txt"
    # the ratios to "off" per row: below 1 for alltoall and above 1 for isend are gains
    awk 'NR > 1 { printf "%s/%s/%s %s %s\n", $1 == "unshaped" ? "u" : "2g", $2 == "alltoall" ? "a2a" : "isend", $3, $7, $8 }' \
        "$OUT/throttle.txt" | sed 's|/1024 | 1K |; s|/16384 | 16K |; s|/65536 | 64K |; s|/262144 | 256K |; s|/1048576 | 1M |' |
        awk '{ print $1 "/" $2, $3, $4 }' >"$OUT/throttle.dat"
    {
        echo "set terminal png size 1000,520; set output '$OUT/throttle.png'"
        echo "set title 'token throttling across 2 nodes x 2 ranks: time or rate relative to throttle off (u = unshaped, 2g = 2 Gbit/s)'"
        echo "set ylabel 'ratio to off (a2a time: < 1 gains; isend rate: > 1 gains)'; set logscale y; set grid y; set xtics rotate by -45"
        echo "set style data histograms; set style histogram clustered; set style fill solid 0.7"
        echo "plot '$OUT/throttle.dat' using 2:xtic(1) title 'rank / off', '' using 3 title 'node / off', 1 with lines lc rgb 'black' notitle"
    } | gnuplot 2>/dev/null || echo "# gnuplot failed for throttle.png"
fi

# ------------------------------------------------------------ credit (thesis)
CR_CFGS="rdrp-dynamic rdrp-static credit-dynamic credit-static ob1-tcp"
declare -A CR=(
    [rdrp-dynamic]="--mca pml rdrp --mca pml_rdrp_credit_mode dynamic"
    [rdrp-static]="--mca pml rdrp --mca pml_rdrp_credit_mode static"
    [credit-dynamic]="--mca pml ob1 --mca btl self,credit --mca btl_credit_mode dynamic"
    [credit-static]="--mca pml ob1 --mca btl self,credit --mca btl_credit_mode static"
    [ob1-tcp]="--mca pml ob1 --mca btl self,tcp"
)
if part_on credit; then
    echo "######## credit: eager floods over TCP, 2 nodes x 1 rank (time s: best of $REPS; RSS KiB: largest seen)"
    raw=$OUT/credit.raw
    if ((!REPLOT)); then
        up --nodes 2
        lock
        for rep in $(seq 1 "$REPS"); do
            for flood in "500 64 16 0" "500 64 1024 0" "200 64 1024 200"; do
                read -r n w b s <<<"$flood"
                for c in $CR_CFGS; do
                    # shellcheck disable=SC2086
                    run -np 2 ${CR[$c]} $(rank 2) "$HERE/build/flood" -n $n -w $w -b $b -s $s 2>&1 | grep '^flood windows' |
                        awk -v c=$c -v f="${n}x${w}x${b}B/s${s}" '{ for (i = 1; i <= NF; i++) { if ($i == "time") t = $(i + 1)
                            if ($i == "producer") p = $(i + 1); if ($i == "consumer") q = $(i + 1); if ($i == "mailbox_hwm") h = $(i + 1) }
                            print f, c, t, p, q, h }' >>"$raw"
                done
            done
        done
        unlock
        down
    fi
    awk -v cfgs="$CR_CFGS" '
        { k = $1; id = $2 SUBSEP k; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
          if (!(id in t) || $3 < t[id]) t[id] = $3
          if ($4 > p[id]) p[id] = $4; if ($5 > q[id]) q[id] = $5; if ($6 > h[id]) h[id] = $6 }
        END { nc = split(cfgs, C, " ")
              printf "%-22s %-15s %8s %8s %12s %12s %11s\n", "flood (n x w x B/sleep)", "config", "time_s", "vs_tcp", "rss_prod_KiB", "rss_cons_KiB", "mailbox_hwm"
              for (j = 1; j <= n; j++) { o = t["ob1-tcp" SUBSEP order[j]]
                  for (i = 1; i <= nc; i++) { id = C[i] SUBSEP order[j]
                      printf "%-22s %-15s %8.3f %8.2f %12d %12d %11s\n", order[j], C[i], t[id], o ? t[id] / o : 0, p[id], q[id], (C[i] ~ /^rdrp/ ? h[id] : "-") } } }' "$raw" |
        tee "$OUT/credit.txt"
    # time per flood and configuration, and the consumer's peak RSS
    awk -v cfgs="$CR_CFGS" 'NR > 1 { t[$1 SUBSEP $2] = $3; r[$1 SUBSEP $2] = $6; if (!($1 in seen)) { seen[$1] = 1; o[++n] = $1 } }
        END { nc = split(cfgs, C, " "); for (j = 1; j <= n; j++) { printf "%s", o[j]
              for (i = 1; i <= nc; i++) printf " %s", t[o[j] SUBSEP C[i]]; for (i = 1; i <= nc; i++) printf " %s", r[o[j] SUBSEP C[i]]; print "" } }' \
        "$OUT/credit.txt" >"$OUT/credit.dat"
    {
        echo "set terminal png size 1000,480; set output '$OUT/credit.png'; set multiplot layout 1,2"
        echo "set style data histograms; set style histogram clustered; set style fill solid 0.7; set grid y; set key top left font ',8'; set xtics rotate by -20 font ',8'"
        echo "set title 'eager floods over TCP: time (s)'; set yrange [0:*]"
        echo "plot for [i=2:6] '$OUT/credit.dat' using i:xtic(1) title word('$CR_CFGS', i - 1)"
        echo "set title 'consumer peak RSS (MiB)'"
        echo "plot for [i=7:11] '$OUT/credit.dat' using (column(i) / 1024):xtic(1) title word('$CR_CFGS', i - 6)"
        echo "unset multiplot"
    } | gnuplot 2>/dev/null || echo "# gnuplot failed for credit.png"
fi
echo "# results in $OUT"
