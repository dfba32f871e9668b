#!/usr/bin/env bash
# Fuzz campaigns: builds every libFuzzer target of test/fuzz with clang
# (-fsanitize=fuzzer,address,undefined) and runs each for a given time or
# number of executions, starting from the committed seed corpus
# (test/fuzz/corpus/<target>; new inputs go to the output directory, not
# into the repository).  One line per target, then "N passed, N failed".
# A crash leaves its input in OUT/artifacts/<target>/: add it to the
# corpus as a regression input once the defect is fixed.
#
#   scripts/fuzz.sh [--seconds N] [--runs N] [--target NAME]... [--out DIR] [--jobs N]
#   scripts/fuzz.sh --seeds     rewrite test/fuzz/corpus from make_seeds.cc
#
# --seconds: per target (default 60); --runs: stop after N executions
# instead (whichever comes first when both are given).  Runs under nice.
# Needs clang++ with libFuzzer (Debian: clang, libclang-rt-14-dev).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
seconds=60
runs=""
targets=()
out="$top/build/fuzz"
seeds=0
while [ $# -gt 0 ]; do
    case $1 in
        --seconds) seconds=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --target) targets+=("$2"); shift 2 ;;
        --out) out=$2; shift 2 ;;
        --seeds) seeds=1; shift ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "unknown argument $1 (see --help)"; exit 2 ;;
    esac
done
all_targets=(pml_wire btl_wire cdag_wire shm_ring credit_engine)
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
CXX=${FUZZ_CXX:-$(command -v clang++ || command -v clang++-14)}
[ -n "$CXX" ] || { echo "no clang++ (apt-get install clang libclang-rt-14-dev)"; echo "0 passed, 1 failed"; exit 1; }
mkdir -p "$out"
common=(-std=c++17 -g -O1 -I"$top" -I"$top/test/fuzz")

if [ "$seeds" = 1 ]; then
    "$CXX" "${common[@]}" "$top/test/fuzz/make_seeds.cc" -o "$out/make_seeds" || exit 1
    rm -rf "$top/test/fuzz/corpus"
    "$out/make_seeds" "$top/test/fuzz/corpus" && find "$top/test/fuzz/corpus" -type f | wc -l
    exit $?
fi

extra_sources() {  # what a target links besides its own file
    case $1 in
        credit_engine) ls "$top"/common/credit/*.cc ;;
    esac
}

pass=0
fail=0
for t in "${targets[@]}"; do
    bin="$out/fuzz_$t"
    # shellcheck disable=SC2046
    if ! nice -n 19 "$CXX" "${common[@]}" -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
            "$top/test/fuzz/fuzz_$t.cc" $(extra_sources "$t") -o "$bin" 2>"$out/build-$t.err"; then
        tail -20 "$out/build-$t.err"
        echo "FAIL fuzz $t: build"
        fail=$((fail + 1))
        continue
    fi
    work="$out/corpus/$t"
    art="$out/artifacts/$t"
    mkdir -p "$work" "$art"
    limit=(-max_total_time="$seconds")
    [ -n "$runs" ] && limit+=(-runs="$runs")
    log="$out/fuzz-$t.log"
    start=$(date +%s)
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
        nice -n 19 "$bin" "${limit[@]}" -print_final_stats=1 -artifact_prefix="$art/" \
        "$work" "$top/test/fuzz/corpus/$t" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    if [ $rc -eq 0 ]; then
        echo "PASS fuzz $t: ${execs:-?} executions in ${secs} s"
        pass=$((pass + 1))
    else
        grep -E 'ERROR|invariant failed|runtime error|SUMMARY' "$log" | head -5
        echo "FAIL fuzz $t: exit $rc after ${execs:-?} executions (input in $art, log $log)"
        fail=$((fail + 1))
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
