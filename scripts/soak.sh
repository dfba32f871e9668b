#!/usr/bin/env bash
# Soak: test/soak/soak.c (random sizes 0 B-16 MiB skewed small, tags,
# wildcard and probed receives, derived datatypes, every send mode,
# cancel; every byte checksummed, per-(source, tag, communicator) order and
# sent = received checked) under each configuration below, at each process
# count, for a given time or message count.  One line per run (messages,
# bytes, errors, seconds), then "N passed, N failed".
#
#   scripts/soak.sh [--seconds S] [--messages N] [--timeout S] [--np "2 3 4"] [--configs "LIST"] [--ci] [--list]
#
# --seconds: per run (default 600, or no limit with --messages);
# --messages: stop a run once N messages were sent over the job (whichever
# of the two comes first); --ci: 15 s each of rdrp, rdrp-tiny, ob1-credit
# and rdrp-mt at np 3 (about a minute, as 20 s of the first three was).
# Runs niced, against the components of ./build (RDRP_BUILD_DIR).  A run
# fails on any error the program reports, a non-zero exit, or a hang
# (killed after S + 180 s, or after --timeout S).  The *-mt configurations run the program with --threads 4
# (MPI_THREAD_MULTIPLE, 4 threads per rank on their own communicators, each
# with checked Ibcast/Iallreduce/Ialltoall under coll/cdag every round; the
# line adds the collectives).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${RDRP_BUILD_DIR:-$top/build}
seconds=""
messages=""
limit=""
nps="2 3 4"
sel=""
declare -A cfg=(
    [rdrp]="--mca pml rdrp"
    [rdrp-get]="--mca pml rdrp --mca pml_rdrp_rndv_protocol get"
    [rdrp-put]="--mca pml rdrp --mca pml_rdrp_rndv_protocol put"
    [rdrp-am]="--mca pml rdrp --mca pml_rdrp_data_path am"
    [rdrp-rma]="--mca pml rdrp --mca pml_rdrp_data_path rma"
    [rdrp-noshm]="--mca pml rdrp --mca pml_rdrp_shm 0"
    [rdrp-tiny]="--mca pml rdrp --mca pml_rdrp_credit_slots 16 --mca pml_rdrp_eager_limit 64 --mca pml_rdrp_shm_eager_limit 64 --mca pml_rdrp_rndv_first_chunk 16 --mca pml_rdrp_chunk_size 4096 --mca pml_rdrp_max_outstanding 2"
    [rdrp-credit-static]="--mca pml rdrp --mca pml_rdrp_credit_slots 16 --mca pml_rdrp_credit_mode static"
    [rdrp-throttle]="--mca pml rdrp --mca pml_rdrp_throttle node --mca pml_rdrp_throttle_node_tokens 4"
    [ob1-credit]="--mca pml ob1 --mca btl self,credit"
    [ob1-credit-tiny]="--mca pml ob1 --mca btl self,credit --mca btl_credit_slots 16"
    [rdrp-mt]="--mca pml rdrp --mca coll_cdag_priority 100"
    [rdrp-mt-cdag-thread]="--mca pml rdrp --mca coll_cdag_priority 100 --mca coll_cdag_progress thread"
    [ob1-credit-mt]="--mca pml ob1 --mca btl self,credit --mca coll_cdag_priority 100"
)
# program arguments beyond the stop condition, per configuration
declare -A args=(
    [rdrp-mt]="--threads 4"
    [rdrp-mt-cdag-thread]="--threads 4"
    [ob1-credit-mt]="--threads 4"
)
order="rdrp rdrp-get rdrp-put rdrp-am rdrp-rma rdrp-noshm rdrp-tiny rdrp-credit-static rdrp-throttle ob1-credit ob1-credit-tiny rdrp-mt rdrp-mt-cdag-thread ob1-credit-mt"
while [ $# -gt 0 ]; do
    case $1 in
        --seconds) seconds=$2; shift 2 ;;
        --messages) messages=$2; shift 2 ;;
        --timeout) limit=$2; shift 2 ;;
        --np) nps=$2; shift 2 ;;
        --configs) sel=$2; shift 2 ;;
        --ci) seconds=15; nps=3; sel="rdrp rdrp-tiny ob1-credit rdrp-mt"; shift ;;
        --list) for c in $order; do echo "$c: ${cfg[$c]}${args[$c]:+ (program: ${args[$c]})}"; done; exit 0 ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "unknown argument $1 (see --help)"; exit 2 ;;
    esac
done
[ -n "$sel" ] || sel=$order
if [ -z "$seconds" ]; then
    if [ -n "$messages" ]; then seconds=1000000; else seconds=600; fi
fi
stop=(--seconds "$seconds")
[ -n "$messages" ] && stop+=(--messages "$messages")
if [ -z "$limit" ]; then
    limit=$((seconds + 180))
    [ -n "$messages" ] && [ "$limit" -gt 7200 ] && limit=7200
fi
export OMPI_MCA_mca_base_component_path="SYS_DEFAULT:$build/.libs"
export OMPI_MCA_mpi_yield_when_idle=1
mkdir -p "$build/soak"
bin=$build/soak/soak
if [ ! -x "$bin" ] || [ "$top/test/soak/soak.c" -nt "$bin" ]; then
    nice -n 19 mpicc -std=c99 -pthread -O2 -Wall -Werror -o "$bin" "$top/test/soak/soak.c" ||
        { echo "FAIL soak: build"; echo "0 passed, 1 failed"; exit 1; }
fi
pass=0
fail=0
seed=$(date +%s)
for c in $sel; do
    [ -n "${cfg[$c]:-}" ] || { echo "FAIL soak $c: unknown configuration (--list)"; fail=$((fail + 1)); continue; }
    for n in $nps; do
        log=$build/soak/$c.np$n.log
        seed=$((seed + 1))
        start=$(date +%s)
        # shellcheck disable=SC2086
        timeout -k 10 "$limit" nice -n 19 mpirun --allow-run-as-root --oversubscribe -np "$n" ${cfg[$c]} \
            "$bin" "${stop[@]}" --seed "$seed" ${args[$c]:-} >"$log" 2>&1
        rc=$?
        secs=$(( $(date +%s) - start ))
        line=$(grep '^soak: rounds' "$log" | tail -1)
        if [ $rc -eq 0 ] && [ -n "$line" ] && grep -q 'errors 0 ' <<<"$line"; then
            echo "PASS soak $c np=$n: ${line#soak: } (seed $seed)"
            pass=$((pass + 1))
        else
            tail -15 "$log"
            progress=$(grep '^soak: progress' "$log" | tail -1)
            [ $rc -eq 124 ] && line="hang: killed after $limit s${progress:+, last ${progress#soak: }}"
            echo "FAIL soak $c np=$n (${secs}s, exit $rc): ${line:-no result} (seed $seed, log $log)"
            fail=$((fail + 1))
        fi
    done
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
