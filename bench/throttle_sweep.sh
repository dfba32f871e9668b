#!/usr/bin/env bash
# throttle_sweep.sh -- derive token-throttling thresholds on this machine
# (token-throttling seed, section 5.1) and measure coll/cdag's throttle
# modes side by side.
#
#   bench/throttle_sweep.sh [--component-path DIR] [--quick] [--parts 1,2,3,4]
#
# 1. bench/throttle_sweep.c (MPI point-to-point, the seed's Fig. 2/3
#    microbenchmark) at 2 and 4 ranks (oversubscribed when the machine has
#    fewer cores) over shared memory (ob1/vader, ucx) and over TCP
#    (pml ucx with UCX_TLS=tcp,self): throughput per messages in flight per
#    rank x active ranks x size, and the CCT / CRCT / NRCT it implies.
# 2. coll/cdag alltoall and ialltoall (bench/coll_bench.c) with
#    coll_cdag_throttle off / rank / node at 2, 4 and 8 ranks, over shared
#    memory and over TCP, each value best of 3, with the ratio to "off"
#    (the seed accepts at most 4% overhead where throttling brings nothing).
# 3. bench/throttle_isend.c: many outstanding MPI_Isend per rank, each one
#    admitted by the same throttling engine in mode off / rank / node, at
#    2, 4 and 8 ranks over shared memory (ob1) and TCP (ucx, tcp,self).
# 4. The same isend pattern through pml/rdrp with its own admission
#    control, pml_rdrp_throttle off / rank / node, shared memory and TCP.
set -u -o pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
QUICK=0
PARTS=1,2,3,4
while [ $# -gt 0 ]; do
    case "$1" in
        --component-path) export OMPI_MCA_mca_base_component_path="SYS_DEFAULT:$2"; shift 2 ;;
        --quick) QUICK=1; shift ;;
        --parts) PARTS=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//; /^set -u/d'; exit 0 ;;
        *) echo "throttle_sweep.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
mkdir -p "$HERE/build"
for p in throttle_sweep coll_bench; do
    if [ ! -x "$HERE/build/$p" ] || [ "$HERE/$p.c" -nt "$HERE/build/$p" ]; then
        mpicc -O2 -Wall -o "$HERE/build/$p" "$HERE/$p.c" || exit 1
    fi
done
if [ ! -x "$HERE/build/throttle_isend" ] || [ "$HERE/throttle_isend.c" -nt "$HERE/build/throttle_isend" ] ||
   [ "$HERE/../common/throttle/throttle.cc" -nt "$HERE/build/throttle_isend" ]; then
    mpicxx -O2 -std=c++17 -c -o "$HERE/build/throttle.o" "$HERE/../common/throttle/throttle.cc" &&
        mpicc -O2 -Wall -I"$HERE/.." -c -o "$HERE/build/throttle_isend.o" "$HERE/throttle_isend.c" &&
        mpicxx -o "$HERE/build/throttle_isend" "$HERE/build/throttle_isend.o" "$HERE/build/throttle.o" || exit 1
fi
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
UCX=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any)
SIZES=64,1024,16384,262144
[ $QUICK = 1 ] && SIZES=1024,65536

part() { [[ ",$PARTS," == *",$1,"* ]]; }

part 1 && echo "######## 1. point-to-point sweep (seed Fig. 2/3)"
part 1 && for np in 2 4; do
    echo; echo "#### np $np, shared memory, pml ob1 (vader)"
    timeout 300 "${MPIRUN[@]}" -np $np --mca pml ob1 "$HERE/build/throttle_sweep" -s $SIZES -n 128 -d 1,2,4,8,16
    echo; echo "#### np $np, shared memory, pml ucx"
    timeout 300 "${MPIRUN[@]}" -np $np "${UCX[@]}" "$HERE/build/throttle_sweep" -s $SIZES -n 128 -d 1,2,4,8,16
    echo; echo "#### np $np, TCP (pml ucx, UCX_TLS=tcp,self)"
    timeout 300 "${MPIRUN[@]}" -np $np "${UCX[@]}" -x UCX_TLS=tcp,self "$HERE/build/throttle_sweep" -s $SIZES -n 64 -d 1,2,4,8,16
done

part 2 && echo && echo "######## 2. coll/cdag alltoall with throttle off / rank / node (us, lower is better; best of 3)"
declare -A T=(
    [off]="--mca coll_cdag_throttle off"
    [rank]="--mca coll_cdag_throttle rank"
    [node]="--mca coll_cdag_throttle node"
)
part 2 && for net in shm tcp; do
    env=()
    [ $net = tcp ] && env=(-x UCX_TLS=tcp,self)
    for np in 2 4 8; do
        out=$(mktemp)
        for rep in 1 2 3; do
            for m in off rank node; do
                # shellcheck disable=SC2086
                timeout 300 "${MPIRUN[@]}" -np $np --mca coll_cdag_priority 100 ${T[$m]} "${env[@]}" \
                    "$HERE/build/coll_bench" lat -c alltoall -s 1024,65536,1048576 | awk -v m=$m '{print m, $0}' >>"$out"
                # shellcheck disable=SC2086
                timeout 300 "${MPIRUN[@]}" -np $np --mca coll_cdag_priority 100 ${T[$m]} "${env[@]}" \
                    "$HERE/build/coll_bench" overlap -c ialltoall -s 1024,65536,1048576 | grep pure_us | awk -v m=$m '{print m, $0}' >>"$out"
            done
        done
        echo; echo "#### $net, np $np"
        awk '$2 != "lat" && $2 != "pure_us" { next }
             { k = $3 " " $4; v = $5 + 0; id = $1 SUBSEP k
               if (!(k in seen)) { seen[k] = 1; order[++n] = k }
               if (!(id in best) || v < best[id]) best[id] = v }
             END { printf "%-12s %9s %10s %10s %10s %9s %9s\n", "collective", "bytes", "off", "rank", "node", "rank/off", "node/off"
                   for (i = 1; i <= n; i++) { split(order[i], p, " "); o = best["off" SUBSEP order[i]]
                       r = best["rank" SUBSEP order[i]]; d = best["node" SUBSEP order[i]]
                       printf "%-12s %9s %10.2f %10.2f %10.2f %9.2f %9.2f\n", p[1], p[2], o, r, d, r / o, d / o } }' "$out"
        rm -f "$out"
    done
done

# One isend table: rows "isend <mode> <bytes> <MB/s>" in, off/rank/node side by side out.
isend_table() {
    awk '{ k = $3; id = $2 SUBSEP k; v[id] = $4
           if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
         END { printf "%9s %10s %10s %10s %9s %9s\n", "bytes", "off", "rank", "node", "rank/off", "node/off"
               for (i = 1; i <= n; i++) { k = order[i]; o = v["off" SUBSEP k]; r = v["rank" SUBSEP k]; d = v["node" SUBSEP k]
                   printf "%9s %10.1f %10.1f %10.1f %9.2f %9.2f\n", k, o, r, d, (o ? r / o : 0), (o ? d / o : 0) } }' "$1"
}

# isend_part NUMBER TITLE WHICH: WHICH=engine (the benchmark's own admission
# over ob1 / pml ucx) or pml (pml/rdrp's pml_rdrp_throttle, benchmark off)
isend_part() {
    part "$1" || return 0
    echo; echo "######## $1. $2 (MB/s, higher is better; best of 5)"
    for net in shm tcp; do
        for np in 2 4 8; do
            out=$(mktemp)
            for m in off rank node; do
                if [ "$3" = engine ]; then
                    args=(--mca pml ob1)
                    [ $net = tcp ] && args=("${UCX[@]}" -x UCX_TLS=tcp,self)
                    args+=("$HERE/build/throttle_isend" $m)
                else
                    args=(--mca pml rdrp --mca pml_rdrp_throttle $m)
                    [ $net = tcp ] && args+=(-x UCX_TLS=tcp,self)
                    args+=("$HERE/build/throttle_isend" off)
                fi
                timeout 300 "${MPIRUN[@]}" -np $np "${args[@]}" -s 64,1024,16384,262144 -n 256 |
                    grep '^isend' | awk -v m=$m '{ $2 = m; print }' >>"$out"
            done
            echo; echo "#### $net, np $np"
            isend_table "$out"
            rm -f "$out"
        done
    done
}
isend_part 3 "many outstanding isends admitted by the throttle" engine
isend_part 4 "many outstanding isends through pml/rdrp, pml_rdrp_throttle off / rank / node" pml
