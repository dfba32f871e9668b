"""scripts/conformance.sh: MPICH's test/mpi and mpi4py's test suite under
ob1 (reference) and under every configuration of our components, one job at
a time; one table of passed/failed/timeout per (row, configuration), and the
tests that fail with our components but pass with ob1, each with a repro.
"""
import argparse
import json
import re
import os
import shlex
import subprocess
import sys
import time

import configs as C
import exclusions
import mpich
import mpi4py_suite
import prepare

USAGE_TAIL = """
Configurations: %s (reference: %s).
--quick: rows %s, configurations %s, mpi4py at np %s.
""" % (", ".join(C.CONFIGS), C.REFERENCE, ", ".join(C.QUICK_ROWS), ", ".join(C.QUICK_CONFIGS),
       ", ".join(map(str, C.QUICK_MPI4PY_NP)))


def die(msg):
    print("conformance: " + msg, file=sys.stderr)
    sys.exit(2)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="conformance.sh", epilog=USAGE_TAIL,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Run MPICH's test/mpi and mpi4py's tests under ob1 and our components.")
    p.add_argument("--mpich", metavar="SRC", help="MPICH source: a tree (or its test/mpi), its .tar.gz or a URL of it; "
                   "a test/mpi not yet configured is copied into --out and configured there against this Open MPI")
    p.add_argument("--rebuild-mpich", action="store_true",
                   help="copy and configure test/mpi in --out even if the tree given is configured")
    p.add_argument("--mpi4py", metavar="SRC", help="mpi4py's test directory (holding runtests.py), an mpi4py source "
                   "tree, its .tar.gz or a URL of it (the tests run against the mpi4py installed for this Open MPI)")
    p.add_argument("--quick", action="store_true", help="pt2pt and coll, ob1 against rdrp + cdag")
    p.add_argument("--configs", metavar="LIST", help="comma-separated configurations (default: all)")
    p.add_argument("--dirs", metavar="LIST", help="comma-separated MPICH rows (default: all), e.g. pt2pt,coll/dtp")
    p.add_argument("--timeout", metavar="S", type=int, default=120,
                   help="per-test limit in seconds (a list's larger timeLimit wins; default 120)")
    p.add_argument("--retries", metavar="N", type=int, default=1,
                   help="runs again, alone, of a test that fails in a configuration of ours but passes with ob1 "
                   "(mpi4py: of a failing test case, in every configuration); one that passes then is "
                   "reported as flaky, not as failed (default 1)")
    p.add_argument("--make-jobs", metavar="N", type=int, default=2,
                   help="compilers at a time when building a row's programs (default 2)")
    p.add_argument("--maxnp", metavar="N", type=int, default=4,
                   help="rank cap, alike for every configuration (default 4)")
    p.add_argument("--mpi4py-np", metavar="LIST", help="ranks for mpi4py (default 1,2,3)")
    p.add_argument("--mpi4py-exclude", metavar="LIST", default="",
                   help="comma-separated runtests.py -e patterns to leave out, e.g. test_spawn (Open MPI 4.1.4's spawn "
                   "on an external PMIx hangs now and then under ob1 too); the rows are named after them, so "
                   "their results never mix with whole-suite runs")
    p.add_argument("--mpi4py-timeout", metavar="S", type=int, default=1800, help="limit per mpi4py run (default 1800)")
    p.add_argument("--python", help="python with mpi4py (default: the first of python3, /usr/bin/python3 "
                   "that imports it)")
    p.add_argument("--component-path", metavar="DIR", help="directory holding mca_pml_rdrp.so etc. "
                   "(default: OMPI_MCA_mca_base_component_path)")
    p.add_argument("--out", metavar="DIR", help="results and logs (default: a new directory under $TMPDIR)")
    p.add_argument("--resume", action="store_true", help="keep the results already in --out, run only the rest")
    p.add_argument("--report", action="store_true", help="only print the table of the results in --out")
    p.add_argument("--interleave", action="store_true",
                   help="run a row entry by entry, each under every configuration in turn (reference first), "
                   "instead of configuration by configuration")
    p.add_argument("--list", action="store_true", help="list the MPICH entries that would run, and the exclusions")
    a = p.parse_args(argv)
    if not (a.mpich or a.mpi4py or a.report):
        p.error("give --mpich DIR and/or --mpi4py DIR")
    return a


class Store:
    """results.jsonl in the output directory; one record per (test, config)."""

    def __init__(self, out, keep):
        self.path = os.path.join(out, "results.jsonl")
        self.recs = {}
        if keep and os.path.exists(self.path):
            with open(self.path) as f:
                for line in f:
                    r = json.loads(line)
                    self.recs[(r["key"], r["config"])] = r
        elif os.path.exists(self.path):
            os.unlink(self.path)

    def forget(self, keys):
        """Drop the records of entries now excluded (a --resume over results
        from before the exclusion would count them): rewrites the file."""
        stale = [k for k in self.recs if k[0] in keys]
        if not stale:
            return 0
        for k in stale:
            del self.recs[k]
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            for r in self.recs.values():
                f.write(json.dumps(r) + "\n")
        os.replace(tmp, self.path)
        return len(stale)

    def has(self, key, config):
        return (key, config) in self.recs

    def add(self, rec):
        self.recs[(rec["key"], rec["config"])] = rec
        with open(self.path, "a") as f:
            f.write(json.dumps(rec) + "\n")


def component_env(a):
    path = os.environ.get("OMPI_MCA_mca_base_component_path", "")
    if a.component_path:
        d = os.path.abspath(a.component_path)
        if not os.path.isdir(d):
            die("--component-path %s: no such directory" % d)
        path = "SYS_DEFAULT:" + d
        os.environ["OMPI_MCA_mca_base_component_path"] = path
    return ["OMPI_MCA_mca_base_component_path=" + shlex.quote(path)] if path else []


def check_components(names):
    """Every component the chosen configurations need must load."""
    need = sorted({c for n in names for c in C.CONFIGS[n][1]})
    if not need:
        return
    try:
        info = subprocess.run(["ompi_info", "--parsable"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True).stdout
    except OSError:
        die("ompi_info not found: is Open MPI 4.1 installed and in PATH?")
    missing = [c for c in need if "mca:%s:%s:" % tuple(c.split(":")) not in info]
    if missing:
        die("Open MPI does not load %s: give --component-path DIR (where mca_pml_rdrp.so is installed) "
            "or set OMPI_MCA_mca_base_component_path" % ", ".join(m.replace(":", "/") for m in missing))


def mpirun_common():
    args = ["--oversubscribe", "--mca", "mpi_yield_when_idle", "1"]
    if os.geteuid() == 0:
        args = ["--allow-run-as-root"] + args
    return args


def fmt_secs(s):
    s = int(s)
    return "%dh%02dm%02ds" % (s // 3600, s // 60 % 60, s % 60) if s >= 3600 else "%dm%02ds" % (s // 60, s % 60)


def select_entries(top, rows, maxnp):
    """[(row, entries to run, [(entry, why excluded)], pre-build makes)]"""
    plan = []
    for row, d, lst in C.MPICH_ROWS:
        if row not in rows:
            continue
        entries, makes = mpich.load_row(top, row, d, lst)
        run, skipped = [], []
        for e in entries:
            why = exclusions.reason(e, maxnp)
            if why is None and e.strict == "false":
                why = "uses MPICH extensions (strict=false in the test list)"
            if why is None and e.mem > float(os.environ.get("MPITEST_MEMORY_TOTAL", "20")):
                why = "needs %.1f GB (MPITEST_MEMORY_TOTAL)" % e.mem
            if why is None and e.np_listed > maxnp:
                e.np = maxnp
            (skipped.append((e, why)) if why else run.append(e))
        plan.append((row, run, skipped, makes))
    return plan


def run_one(a, top, e, n, args, built, store, out, env_prefix, row):
    """One entry under one configuration; its record, or None if it ran before."""
    if store.has(e.key, n):
        return store.recs[(e.key, n)]
    logdir = os.path.join(out, "logs", n, row.replace("/", "_"))
    os.makedirs(logdir, exist_ok=True)
    log = os.path.join(logdir, "%03d-%s.log" % (e.index, e.prog))
    if (e.directory, e.prog) not in built:
        with open(log, "w") as f:
            f.write("did not build; see %s\n" % os.path.join(out, "build.log"))
        result, secs = "failed", 0.0
    else:
        limit = max(a.timeout, e.time_limit)
        result, secs = mpich.run(e, args, limit, log)
    first = result
    ref = store.recs.get((e.key, C.REFERENCE))
    if result in ("failed", "timeout") and n != C.REFERENCE and ref and ref["result"] == "passed":
        # passes with ob1: once more alone, so load on a shared machine is told from a defect
        for i in range(a.retries):
            result, more = mpich.run(e, args, limit, "%s.retry%d" % (log, i + 1))
            secs += more
            if result == "passed":
                break
    rec = {"suite": "mpich", "row": row, "key": e.key, "label": e.label(top), "config": n,
           "result": result, "secs": round(secs, 1), "log": log,
           "flaky": first if result != first else None,
           "built": (e.directory, e.prog) in built,
           "repro": mpich.repro(e, args, env_prefix),
           "at": time.strftime("%H:%M:%S", time.gmtime())}
    store.add(rec)
    if result != "passed" or first != "passed":
        print("   %-11s %-8s %s (%.0fs)%s" % (n, result, e.label(top), secs,
                                         "" if first == result else ", %s the first time" % first),
              flush=True)
    return rec


def run_mpich(a, top, plan, names, store, out, env_prefix):
    common = mpirun_common()
    for row, entries, _, makes in plan:
        if not entries:
            continue
        todo = [n for n in names if any(not store.has(e.key, n) for e in entries)]
        if not todo:
            continue
        t0 = time.time()
        print("== %s: building %d programs with the suite's Makefiles" % (row, len({(e.directory, e.prog) for e in entries})),
              flush=True)
        built = mpich.build(entries, makes, os.path.join(out, "build.log"), a.make_jobs)
        print("   built in %s" % fmt_secs(time.time() - t0), flush=True)
        # --interleave: entry by entry, every configuration in turn (the reference first), so
        # the columns cover the same entries and see alike load when a run is cut short
        order = ([(e, n) for e in entries for n in todo] if a.interleave else
                 [(e, n) for n in todo for e in entries])
        counts = {n: {"passed": 0, "failed": 0, "timeout": 0, "skipped": 0} for n in todo}
        spent = {n: 0.0 for n in todo}
        for i, (e, n) in enumerate(order):
            t1 = time.time()
            rec = run_one(a, top, e, n, common + C.CONFIGS[n][0], built, store, out, env_prefix, row)
            counts[n][rec["result"]] += 1
            spent[n] += time.time() - t1
            if a.interleave and n != todo[-1]:
                continue
            if not a.interleave and i + 1 < len(order) and order[i + 1][1] == n:
                continue
            done = todo if a.interleave and e is entries[-1] else [n] if not a.interleave else []
            for m in done:
                c = counts[m]
                print("== %s %s: %d passed, %d failed, %d timeout%s in %s" % (
                    row, m, c["passed"], c["failed"], c["timeout"],
                    ", %d skipped" % c["skipped"] if c["skipped"] else "", fmt_secs(spent[m])), flush=True)


def run_mpi4py(a, runtests, nps, names, store, out, env_prefix):
    common = mpirun_common()
    excl = [x for x in a.mpi4py_exclude.split(",") if x]
    suffix = "".join(" -e %s" % x for x in excl)
    extra = [w for x in excl for w in ("-e", x)]
    for n in names:
        for np_ in nps:
            key = "mpi4py np%d%s" % (np_, suffix)
            if store.has(key, n):
                continue
            logdir = os.path.join(out, "logs", n)
            os.makedirs(logdir, exist_ok=True)
            log = os.path.join(logdir, "mpi4py-np%d%s.log" % (np_, "".join("-e-" + re.sub(r"\W", "_", x) for x in excl)))
            args = common + C.CONFIGS[n][0]
            counts, failing, secs = mpi4py_suite.run(runtests, np_, args, a.python, a.mpi4py_timeout, log, extra)
            # a test case that failed in the full run runs alone again: one that passes then
            # failed for the load of a shared machine (Open MPI's spawn under load), not for us
            flaky = []
            for f in failing:
                for _ in range(a.retries):
                    if mpi4py_suite.rerun(runtests, np_, args, a.python, a.timeout * 5, log, f):
                        flaky.append(f)
                        break
            if flaky:
                with open(log) as fh:
                    text = fh.read().split("\n===== rerun of ")[0]
                text = text[text.find("\n===== rank "):]     # the ranks' own files, not mpirun's copy
                for f in flaky:
                    k = len(re.findall(r"^(?:FAIL|ERROR): %s \(%s\.%s" % (
                        re.escape(f[1].split(".")[-1]), re.escape(f[0]), re.escape(f[1].rsplit(".", 1)[0])),
                        text, re.M))
                    counts["failed"] -= k
                    counts["passed"] += k
                failing = [f for f in failing if f not in flaky]
            store.add({"suite": "mpi4py", "row": key, "key": key, "label": key, "config": n, "secs": round(secs, 1),
                       "log": log, "counts": counts, "result": "passed" if not (counts["failed"] or counts["timeout"]) else "failed",
                       "failing": ["%s %s" % f for f in failing],
                       "flaky": ["%s %s" % f for f in flaky],
                       "repro": mpi4py_suite.repro(runtests, np_, args, a.python, env_prefix, extra=extra),
                       "repros": {"%s %s" % f: mpi4py_suite.repro(runtests, np_, args, a.python, env_prefix, f)
                                  for f in failing}})
            print("== mpi4py np %d%s %s: %d passed, %d failures, %d errors, %d skipped%s (%s)" % (
                np_, suffix, n, counts["passed"], counts["failures"], counts["errors"], counts["skipped"],
                ", TIMEOUT" if counts["timeout"] else ("" if counts["complete"] else ", job did not finish cleanly"),
                fmt_secs(secs)), flush=True)
            for f in flaky:
                print("   %-11s flaky    mpi4py np %d %s %s: passed when run alone" % (n, np_, f[0], f[1]), flush=True)


def report(store, names, excluded, elapsed):
    rows, cells = [], {}
    for (key, config), r in store.recs.items():
        if config not in names:
            continue
        if r["row"] not in rows:
            rows.append(r["row"])
        c = cells.setdefault((r["row"], config), [0, 0, 0, 0.0])
        if r["suite"] == "mpi4py":
            c[0] += r["counts"]["passed"]
            c[1] += r["counts"]["failed"]
            c[2] += r["counts"]["timeout"]
        elif r["result"] != "skipped":
            c[{"passed": 0, "failed": 1, "timeout": 2}[r["result"]]] += 1
        c[3] += r["secs"]
    order = [row for row, _, _ in C.MPICH_ROWS if row in rows] + sorted(x for x in rows if x.startswith("mpi4py"))
    cols = [n for n in C.CONFIGS if n in names]
    w = max([9] + [len(n) + 1 for n in cols])
    print("\npassed/failed/timeout per row and configuration (mpi4py: test cases summed over the ranks)")
    lw = max([12] + [len(row) + 1 for row in order])  # rows such as "mpi4py np2 -e test_spawn"
    print("%-*s" % (lw, "") + "".join("%*s" % (w, n) for n in cols))
    for row in order:
        line = "%-*s" % (lw, row)
        for n in cols:
            c = cells.get((row, n))
            line += "%*s" % (w, "%d/%d/%d" % tuple(c[:3]) if c else "-")
        print(line)
    print("%-*s" % (lw, "time") + "".join("%*s" % (w, fmt_secs(sum(cells.get((row, n), [0, 0, 0, 0])[3] for row in order)))
                                     for n in cols))
    if excluded:
        print("\nExcluded alike in every configuration (%d entries):" % len(excluded))
        for label, why in excluded:
            print("  %s: %s" % (label, why))
    ref = C.REFERENCE
    ours = []
    both = []
    for (key, config), r in sorted(store.recs.items(), key=lambda kv: (kv[1]["row"], kv[0][0], kv[0][1])):
        if config not in names or config == ref or r["result"] in ("passed", "skipped"):
            continue
        refrec = store.recs.get((key, ref))
        if r["suite"] == "mpi4py":
            if refrec is None:
                continue
            for f in r["failing"]:
                if f not in refrec.get("failing", []):
                    ours.append("[%s] %s %s\n      %s" % (config, key, f, r["repros"][f]))
            if not r["failing"] and refrec["result"] == "passed":
                ours.append("[%s] %s: %s\n      %s" % (config, key, "timeout" if r["counts"]["timeout"] else
                                                      "job failed", r["repro"]))
            continue
        if refrec is not None and refrec["result"] == "passed":
            ours.append("[%s] %s: %s\n      %s" % (config, r["label"], r["result"], r["repro"]))
    flaky = []
    for (key, config), r in sorted(store.recs.items(), key=lambda kv: (kv[1]["row"], kv[0][0], kv[0][1])):
        if config not in names:
            continue
        if r["suite"] == "mpi4py":
            flaky += ["[%s] %s %s" % (config, key, f) for f in r.get("flaky", [])]
        elif r.get("flaky"):
            flaky.append("[%s] %s: %s, then passed alone" % (config, r["label"], r["flaky"]))
    skipped = set()
    for (key, config), r in store.recs.items():
        if config not in names or r["suite"] != "mpich":
            continue
        if r["result"] == "skipped":
            skipped.add(r["label"])
        elif config == ref and r["result"] != "passed":
            both.append("%s: %s%s" % (r["label"], r["result"], "" if r.get("built", True) else " (did not build)"))
    print("\nFail with our components, pass with %s (%d):" % (ref, len(ours)))
    for line in ours:
        print("  " + line)
    if both:
        print("\nFail with %s itself (%d; not counted against our components):" % (ref, len(both)))
        for line in sorted(both):
            print("  " + line)
    if flaky:
        print("\nFailed in the run, passed when run again alone (counted as passed; load on a shared machine):")
        for line in flaky:
            print("  " + line)
    if skipped:
        print("\nSkipped by the test itself ('Test Skipped': a feature Open MPI lacks; not counted):")
        for label in sorted(skipped):
            print("  " + label)
    if elapsed:
        print("\nThis invocation took %s." % fmt_secs(elapsed))
    return len(ours)


def main(argv):
    t0 = time.time()
    a = parse_args(argv)
    names = list(C.QUICK_CONFIGS if a.quick else C.CONFIGS)
    if a.configs:
        names = [n.strip() for n in a.configs.split(",") if n.strip()]
        bad = [n for n in names if n not in C.CONFIGS]
        if bad:
            die("unknown configuration %s (known: %s)" % (", ".join(bad), ", ".join(C.CONFIGS)))
    if a.interleave and C.REFERENCE in names:
        names = [C.REFERENCE] + [n for n in names if n != C.REFERENCE]
    if C.REFERENCE not in names and not a.report:
        print("conformance: note: the reference %s is not among the configurations; "
              "failures are listed against results already in --out" % C.REFERENCE, file=sys.stderr)
    rows = [r for r, _, _ in C.MPICH_ROWS]
    if a.quick:
        rows = list(C.QUICK_ROWS)
    if a.dirs:
        rows = [r.strip() for r in a.dirs.split(",") if r.strip()]
        bad = [r for r in rows if r not in [x for x, _, _ in C.MPICH_ROWS]]
        if bad:
            die("unknown row %s (known: %s)" % (", ".join(bad), ", ".join(x for x, _, _ in C.MPICH_ROWS)))
    nps = C.QUICK_MPI4PY_NP if a.quick else [1, 2, 3]
    if a.mpi4py_np:
        nps = [int(x) for x in a.mpi4py_np.split(",")]

    out = a.out or os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                "rdrp-conformance-" + time.strftime("%Y%m%d-%H%M%S"))
    if a.report:
        if not a.out:
            die("--report needs --out DIR")
        store = Store(out, keep=True)
        seen = sorted({c for (_, c) in store.recs}, key=lambda c: list(C.CONFIGS).index(c) if c in C.CONFIGS else 99)
        report(store, [n for n in seen if not a.configs or n in names], [], 0)
        return 0
    env_prefix = component_env(a)

    os.makedirs(out, exist_ok=True)
    top = prepare.mpich(a.mpich, out, a.rebuild_mpich) if a.mpich else None
    runtests = None
    if a.mpi4py:
        runtests = prepare.mpi4py(a.mpi4py, out)
        if not runtests:
            die("--mpi4py %s: no runtests.py there (give mpi4py's test directory)" % a.mpi4py)
        for py in [a.python] if a.python else ["python3", "/usr/bin/python3"]:
            try:
                if subprocess.run([py, "-c", "import mpi4py"], stderr=subprocess.DEVNULL).returncode == 0:
                    a.python = py
                    break
            except OSError:
                pass
        else:
            die("no python imports mpi4py: install it built against this Open MPI (Debian: python3-mpi4py), "
                "or give --python")
    plan = select_entries(top, rows, a.maxnp) if top else []
    excluded = [(e.label(top), why) for _, _, skipped, _ in plan for e, why in skipped]
    if a.list:
        for row, run, skipped, _ in plan:
            print("== %s: %d to run, %d excluded" % (row, len(run), len(skipped)))
            for e in run:
                print("   " + e.label(top))
            for e, why in skipped:
                print("   excluded %s: %s" % (e.label(top), why))
        return 0
    check_components(names)
    store = Store(out, keep=a.resume)
    print("conformance: results and logs in %s" % out, flush=True)
    dropped = store.forget({e.key for _, _, skipped, _ in plan for e, _ in skipped})
    if dropped:
        print("conformance: dropped %d earlier results of entries now excluded" % dropped, flush=True)
    if top:
        run_mpich(a, top, plan, names, store, out, env_prefix)
    if runtests:
        run_mpi4py(a, runtests, nps, names, store, out, env_prefix)
    ours = report(store, names, excluded, time.time() - t0)
    return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
