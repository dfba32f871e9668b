#!/usr/bin/env bash
# Sanitizer and memcheck runs (README "Reliability checks"):
#   asan      components, engines and tests built with ASan+UBSan
#             (configure --enable-asan --enable-ubsan) in build-asan/: the
#             unit tests and corpus replays, then the MPI tests of the
#             configurations in --configs with libasan+libubsan preloaded
#             into every rank (Open MPI is not rebuilt).
#   valgrind  the unit tests of the ordinary build under valgrind memcheck:
#             0 errors and no definite leaks required.  --quick: only the
#             engines' pure tests (wire checks, credit, matching, shm ring,
#             parameters, peer watch; well under a minute: CI).
#   tsan      configure --enable-tsan in build-tsan/: the unit tests of the
#             engines that take locks or share memory between threads or
#             processes (throttle, credit, shm ring, ucx_glue, cdag
#             executor), then the MPI tests that use threads (p2p_threads,
#             mt_coll_threads, coll_cdag_thread_progress and _handoff with the cdag
#             engine thread) with libtsan preloaded into every rank and
#             scripts/tsan-suppressions.txt (races inside the uninstrumented
#             Open MPI / PMIx / UCX only; see that file).  A rank's report
#             fails its test (TSan exit code 66) and is counted.  Then 60 s
#             of the threaded soak (test/soak/soak.c --threads 4, itself
#             built with TSan) under pml rdrp + coll cdag, inline and with
#             the cdag engine thread.
#   leaks     the finalize leak check: the MPI tests of the ordinary
#             build ($RDRP_BUILD_DIR or build/) in the configurations of
#             --leak-configs (default: rdrp, rdrp-am, rdrp-rma, rdrp-get,
#             rdrp-put, btl-credit, coll-cdag, coll-cdag-thread,
#             coll-cdag-rdrp, with the ranks of test/configs/*.conf or
#             --np) with pml_rdrp/btl_credit/coll_cdag_finalize_check 2:
#             a test whose ranks report any object left at finalize
#             ("leak-check ..." line) fails (MPITEST_FAIL_ON_LEAK).  The
#             leak_* tests, which leak on purpose, are not in these
#             configurations' test sets (they run in rdrp-leak,
#             btl-credit-leak, coll-cdag-rdrp-leak of the ordinary suite).
#             p2p_truncate skips its MPI_Sendrecv truncation here: Open MPI
#             4.1.4's MPI_Sendrecv leaves its failed receive request (one
#             "requests" per call whatever the PML).
# One line per check, then "N passed, N failed".  Everything runs niced.
#
#   scripts/sanitize.sh [asan|valgrind|tsan|leaks]... [--quick] [--configs "LIST"]
#                       [--leak-configs "LIST"] [--np "LIST"]
#
# Leak detection in MPI ranks is off (detect_leaks=0): Open MPI 4.1.4 and
# UCX 1.13 leave their own allocations at exit (not ours to fix, and an
# LSan suppression by library name would also hide our leaks reached
# through their call stacks); leaks of our engines are found by the unit
# tests under LSan and valgrind.  No other suppression is used.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
modes=()
configs="rdrp rdrp-credit-tiny rdrp-get rdrp-put btl-credit coll-cdag"
leak_configs="rdrp rdrp-am rdrp-rma rdrp-get rdrp-put btl-credit coll-cdag coll-cdag-thread coll-cdag-rdrp"
np=""
quick=0
# the coll/cdag schedule sweep (pure computation, 1..64 ranks in the
# ordinary run) to 16 ranks: at 64 it takes hours under these tools (also
# in the unit tests test/run_all.sh runs before the MPI tests)
export RDRP_CDAG_SWEEP_RANKS=${RDRP_CDAG_SWEEP_RANKS:-16}
while [ $# -gt 0 ]; do
    case $1 in
        asan|valgrind|tsan|leaks) modes+=("$1"); shift ;;
        --configs) configs=$2; shift 2 ;;
        --leak-configs) leak_configs=$2; shift 2 ;;
        --np) np=$2; shift 2 ;;
        --quick) quick=1; shift ;;
        -h|--help) sed -n '2,47p' "$0"; exit 0 ;;
        *) echo "unknown argument $1 (see --help)"; exit 2 ;;
    esac
done
[ ${#modes[@]} -gt 0 ] || modes=(asan valgrind tsan leaks)
pass=0
fail=0
result() {  # result PASS|FAIL text
    echo "$1 $2"
    if [ "$1" = PASS ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
}

log_reports() {  # log_reports label pattern what logdir: one result line from the ranks' logs
    local n
    n=$(cat "$4"/*.log 2>/dev/null | grep -c -- "$2")
    if [ "$n" = 0 ]; then
        result PASS "$1: 0 $3 in the ranks' logs"
    else
        result FAIL "$1: $n $3 (grep -l -- '$2' $4/*.log)"
    fi
}
mpi_result() {  # mpi_result label out: one result line from a run_mpi_tests.sh output
    local line
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$2" | tail -1)
    if [ -n "$line" ] && [ "$(echo "$line" | cut -d' ' -f3)" = 0 ]; then
        result PASS "$1: $line"
    else
        result FAIL "$1: ${line:-no result} (see $2)"
    fi
}

# configure + build a sanitizer tree once (reconfigured if the flags differ)
build_tree() {  # dir configure-flags...
    local dir=$1
    shift
    mkdir -p "$dir"
    if [ ! -f "$dir/Makefile" ] || ! grep -q -- "$*" "$dir/config.log" 2>/dev/null; then
        [ -x "$top/configure" ] || (cd "$top" && autoreconf -fi >/dev/null 2>&1)
        (cd "$dir" && nice -n 19 "$top/configure" --with-check-configs=none "$@" >configure.out 2>&1) ||
            { tail -20 "$dir/configure.out"; return 1; }
    fi
    nice -n 19 make -C "$dir" -j2 -s >"$dir/make.out" 2>&1 &&
        nice -n 19 make -C "$dir" -j2 -s test/unit/rdrp_unit_tests >>"$dir/make.out" 2>&1 ||
        { tail -30 "$dir/make.out"; return 1; }
}

unit_run() {  # label binary [gtest args...]: one result line from a gtest run
    local label=$1 bin=$2
    shift 2
    local out="$bin.$label.out"
    if nice -n 19 "$bin" --gtest_color=no "$@" >"$out" 2>&1 && grep -q '^\[  PASSED  \]' "$out"; then
        result PASS "$label: $(grep -c '^\[       OK \]' "$out") unit tests ($(sed -n 's/^\[  PASSED  \] //p' "$out"))"
    else
        grep -E 'ERROR: |runtime error|WARNING: ThreadSanitizer|FAILED' "$out" | head -10
        result FAIL "$label: see $out"
    fi
}

for m in "${modes[@]}"; do
    case $m in
    asan)
        dir=$top/build-asan
        echo "== ASan+UBSan build in $dir"
        if ! build_tree "$dir" --enable-asan --enable-ubsan; then result FAIL "asan: build"; continue; fi
        export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1
        export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
        unit_run asan-unit "$dir/test/unit/rdrp_unit_tests"
        for t in pml_wire btl_wire cdag_wire shm_ring credit_engine; do
            if nice -n 19 make -C "$dir" -s "test/fuzz/replay_$t" >/dev/null 2>&1 &&
                nice -n 19 "$dir/test/fuzz/replay_$t" "$top/test/fuzz/corpus/$t" >/dev/null 2>"$dir/replay-$t.err"; then
                result PASS "asan-replay $t"
            else
                head -20 "$dir/replay-$t.err"
                result FAIL "asan-replay $t"
            fi
        done
        # MPI ranks: uninstrumented Open MPI loads our instrumented
        # components, so the runtimes are preloaded into each rank.
        pre="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
        export MPITEST_MPIRUN_DEFAULTS="-x LD_PRELOAD=$pre -x ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:verify_asan_link_order=0 -x UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1"
        out=$dir/mpi-asan.out
        echo "== MPI tests under ASan+UBSan: $configs"
        RDRP_BUILD_DIR=$dir RDRP_TEST_CONFIGS="$configs" ASAN_OPTIONS=detect_leaks=0 \
            nice -n 19 bash "$top/test/run_all.sh" >"$out" 2>&1
        unset MPITEST_MPIRUN_DEFAULTS
        grep -E '^FAIL' "$out" | head -20
        line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -1)
        errs=$(grep -c -E 'ERROR: AddressSanitizer|runtime error:' "$dir"/test-mpi/logs/*.log "$out" 2>/dev/null | awk -F: '{s+=$NF} END {print s+0}')
        if [ -n "$line" ] && [ "$(echo "$line" | cut -d' ' -f3)" = 0 ] && [ "$errs" = 0 ]; then
            result PASS "asan-mpi: $line, 0 sanitizer reports"
        else
            result FAIL "asan-mpi: ${line:-no result}, $errs sanitizer reports (see $out)"
        fi
        ;;
    valgrind)
        build=${RDRP_BUILD_DIR:-$top/build}
        echo "== valgrind memcheck of the unit tests ($build)"
        nice -n 19 make -C "$build" -s test/unit/rdrp_unit_tests >/dev/null 2>&1 || { result FAIL "valgrind: build"; continue; }
        log=$build/valgrind-unit.log
        vg_filter=()
        [ $quick = 1 ] && vg_filter=(--gtest_filter='WireCheck*:Credit*:Match*:ShmRing*:ParamCheck*:PeerWatch*')
        nice -n 19 valgrind --tool=memcheck --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
            --track-fds=no --trace-children=no --child-silent-after-fork=yes \
            "$build/test/unit/rdrp_unit_tests" --gtest_color=no "${vg_filter[@]}" >"$build/valgrind-unit.out" 2>"$log"
        rc=$?
        summary=$(grep 'ERROR SUMMARY' "$log" | tail -1 | sed 's/^==[0-9]*== //')
        if [ $rc -eq 0 ] && grep -q '^\[  PASSED  \]' "$build/valgrind-unit.out"; then
            result PASS "valgrind-unit: $(grep -c '^\[       OK \]' "$build/valgrind-unit.out") unit tests, $summary"
        else
            result FAIL "valgrind-unit: exit $rc, $summary (see $log)"
        fi
        ;;
    tsan)
        dir=$top/build-tsan
        echo "== TSan build in $dir"
        if ! build_tree "$dir" --enable-tsan; then result FAIL "tsan: build"; continue; fi
        # UCX's malloc/mmap hooks patch the allocator under TSan's own
        # interceptors (crashes at start-up): off, in the unit tests and in
        # the ranks.  The registration cache is then invalidated by our
        # own release hooks only, which the tests check through the glue.
        export UCX_MEM_EVENTS=no UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none
        supp=$top/scripts/tsan-suppressions.txt
        TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=7:suppressions=$supp" \
            unit_run tsan-unit "$dir/test/unit/rdrp_unit_tests" \
            --gtest_filter='Throttle*:Credit*:ShmRing*:ShmSegment*:UcxContext.*:UcxPair.*:UcxGlue*:CdagExec*:PeerWatch*'
        # coll_cdag_thread_progress runs without MPITEST_EXPECT_ENGINE: its
        # "complete after 1 s asleep" and idle-CPU checks do not hold at
        # TSan's 5-15x slowdown; the engine thread still carries its
        # collectives while the ranks sleep (10 ms), and TSan watches it.
        # MPI ranks: Open MPI, PMIx and UCX are not instrumented, so TSan
        # sees our accesses and the locks we take, not theirs.  Open MPI's
        # memory patcher is off (memory ^patcher): its munmap hook runs as
        # a thread's stack is unmapped, after TSan has retired the thread,
        # and every rank died there (SIGSEGV in TSan's rwlock interceptor,
        # from ucm_event_enter).  Without the hooks our registration caches
        # switch themselves off (pml_rdrp/btl_credit reg_cache).
        # history_size=7 (4 M accesses a thread, the most): with the
        # default, the other side of a report on a request completed by
        # another thread's progress was often too old to restore ("failed
        # to restore the stack"), so a suppression naming Open MPI's
        # function could not match it (threaded soak, coll/cdag request
        # reuse after ompi_request_complete)
        tsan_rt=$(gcc -print-file-name=libtsan.so)
        export MPITEST_MPIRUN_DEFAULTS="--mca memory ^patcher -x LD_PRELOAD=$tsan_rt -x TSAN_OPTIONS=halt_on_error=0:exitcode=66:second_deadlock_stack=1:history_size=7:suppressions=$supp -x UCX_MEM_EVENTS=no -x UCX_MEM_MALLOC_HOOKS=no -x UCX_MEM_MMAP_HOOK_MODE=none"
        export TEST_BUILD_DIR=$dir/test-mpi-tsan OMPI_MCA_mca_base_component_path="SYS_DEFAULT:$dir/.libs"
        rm -f "$TEST_BUILD_DIR"/logs/*.log
        for run in "rdrp;^p2p_threads$;--mca pml rdrp" \
            "rdrp-throttle-node;^p2p_threads$;--mca pml rdrp --mca pml_rdrp_throttle node --mca pml_rdrp_throttle_node_tokens 4" \
            "btl-credit;^p2p_threads$;--mca pml ob1 --mca btl self,credit" \
            "coll-cdag-rdrp;^mt_coll_threads$;--mca pml rdrp --mca coll_cdag_priority 100" \
            "coll-cdag-thread;^(mt_coll_threads|coll_cdag_thread_progress|coll_cdag_thread_handoff)$;--mca pml rdrp --mca coll_cdag_priority 100 --mca coll_cdag_progress thread" \
            "coll-cdag-thread-throttle;^mt_coll_threads$;--mca pml rdrp --mca coll_cdag_priority 100 --mca coll_cdag_progress thread --mca coll_cdag_throttle node --mca coll_cdag_throttle_node_tokens 1"; do
            IFS=';' read -r name only args <<<"$run"
            out=$dir/tsan-mpi-$name.out
            # shellcheck disable=SC2086
            nice -n 19 bash "$top/test/mpi/run_mpi_tests.sh" --np "${np:-2}" --timeout 600 --only "$only" \
                --label "tsan-$name" -- $args >"$out" 2>&1
            grep -E '^(PASS|FAIL)' "$out"
            mpi_result "tsan-mpi $name" "$out"
        done
        # the threaded soak: 4 threads per rank, each with its own
        # communicators, p2p of every mode and size, probes, and checked
        # nonblocking collectives; the program is instrumented too, so its
        # reads of received bytes must be ordered after our completions
        soak_bin=$dir/soak/soak
        soak_np=${np:-2}
        mkdir -p "$dir/soak"
        if nice -n 19 mpicc -std=c99 -pthread -O1 -g -fsanitize=thread -Wall -Werror -o "$soak_bin" "$top/test/soak/soak.c"; then
            for run in "rdrp-mt;--mca pml rdrp --mca coll_cdag_priority 100" \
                "rdrp-mt-cdag-thread;--mca pml rdrp --mca coll_cdag_priority 100 --mca coll_cdag_progress thread"; do
                IFS=';' read -r name args <<<"$run"
                out=$dir/tsan-soak-$name.out
                # shellcheck disable=SC2086
                timeout -k 10 600 nice -n 19 mpirun --allow-run-as-root --oversubscribe -np "${soak_np%% *}" \
                    $MPITEST_MPIRUN_DEFAULTS $args "$soak_bin" --threads 4 --seconds 60 >"$out" 2>&1
                rc=$?
                n=$(grep -c 'WARNING: ThreadSanitizer' "$out")
                line=$(grep '^soak: rounds' "$out" | tail -1)
                if [ $rc -eq 0 ] && [ "$n" = 0 ] && grep -q 'errors 0 ' <<<"$line"; then
                    result PASS "tsan-soak $name: ${line#soak: }, 0 ThreadSanitizer reports"
                else
                    result FAIL "tsan-soak $name: exit $rc, $n ThreadSanitizer reports, ${line:-no result} (see $out)"
                fi
            done
        else
            result FAIL "tsan-soak: build"
        fi
        unset MPITEST_MPIRUN_DEFAULTS TEST_BUILD_DIR OMPI_MCA_mca_base_component_path
        log_reports tsan-mpi 'WARNING: ThreadSanitizer' "ThreadSanitizer reports" "$dir"/test-mpi-tsan/logs
        ;;
    leaks)
        build=${RDRP_BUILD_DIR:-$top/build}
        echo "== finalize leak check of the MPI tests ($build): $leak_configs"
        strict="--mca pml_rdrp_finalize_check 2 --mca btl_credit_finalize_check 2 --mca coll_cdag_finalize_check 2 -x MPITEST_FAIL_ON_LEAK=1"
        export TEST_BUILD_DIR=$build/test-mpi-leaks OMPI_MCA_mca_base_component_path="SYS_DEFAULT:$build/.libs"
        export MPITEST_FAIL_ON_LEAK=1
        mkdir -p "$TEST_BUILD_DIR/logs"
        rm -f "$TEST_BUILD_DIR"/logs/*.log
        for name in $leak_configs; do
            line=$(cat "$top"/test/configs/*.conf | grep -E "^$name;" | head -1)
            if [ -z "$line" ]; then result FAIL "leaks $name: no such configuration"; continue; fi
            IFS=';' read -r _ nps only args <<<"$line"
            out=$build/leaks-$name.out
            # shellcheck disable=SC2086
            nice -n 19 bash "$top/test/mpi/run_mpi_tests.sh" --np "${np:-$nps}" --only "${only:-.}" \
                --label "leaks-$name" -- $strict $args >"$out" 2>&1
            grep -E '^FAIL' "$out"
            mpi_result "leaks $name" "$out"
        done
        unset TEST_BUILD_DIR OMPI_MCA_mca_base_component_path MPITEST_FAIL_ON_LEAK
        log_reports leaks 'leak-check ' "finalize leak reports" "$build"/test-mpi-leaks/logs
        ;;
    esac
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
