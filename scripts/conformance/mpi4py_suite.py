"""mpi4py's test suite (test/runtests.py) under mpirun: every rank runs the
whole unittest suite and prints its own summary."""
import os
import re
import shlex
import shutil

from runner import run_job


def command(runtests, np, mpirun_args, python, extra=(), outdir=None):
    """outdir: every rank's output in its own file (mpirun --output-filename),
    since unittest's progress dots of several ranks share lines otherwise."""
    split = ["--output-filename", outdir] if outdir else []
    return (["mpirun"] + mpirun_args + split + ["-np", str(np), python, runtests, "--no-builddir"] +
            list(extra))


def rank_outputs(outdir, np):
    """[(rank, text)]: Open MPI 4.1 writes DIR/1/rank.N/stdout and stderr
    (jobs spawned by the tests get DIR/2, DIR/3, ...)."""
    res = []
    for r in range(np):
        text = ""
        for name in ("stdout", "stderr"):
            path = os.path.join(outdir, "1", "rank.%d" % r, name)
            if os.path.isfile(path):
                with open(path, errors="replace") as f:
                    text += f.read()
        res.append((r, text))
    return res


def parse(output):
    """One rank's output: ran, failures, errors, skipped, summaries, and the
    failing test names as (module, 'Class.test')."""
    ran = fail = err = skip = summaries = 0
    for m in re.finditer(r"^Ran (\d+) tests? in ", output, re.M):
        ran += int(m.group(1))
    for m in re.finditer(r"^(OK|FAILED)\b(?: \(([^)]*)\))?\s*$", output, re.M):
        summaries += 1
        for kv in (m.group(2) or "").split(","):
            k, _, v = kv.strip().partition("=")
            if k == "failures":
                fail += int(v)
            elif k == "errors":
                err += int(v)
            elif k == "skipped":
                skip += int(v)
    names = set()
    # "ERROR: testX (test_mod.Class)" before Python 3.11, "(test_mod.Class.testX)" since
    for m in re.finditer(r"^(?:FAIL|ERROR): (\w+) \(([\w.]+)\)", output, re.M):
        parts = m.group(2).split(".")
        if parts[-1] == m.group(1):
            parts.pop()
        names.add((parts[0], "%s.%s" % (".".join(parts[1:]), m.group(1))))
    return ran, fail, err, skip, summaries, sorted(names)


def run(runtests, np, mpirun_args, python, limit, log, extra=()):
    """(counts dict, failing names, seconds); extra: more runtests.py
    arguments (the -e patterns of --mpi4py-exclude)."""
    outdir = log + ".ranks"
    shutil.rmtree(outdir, ignore_errors=True)
    rc, timed_out, output, secs = run_job(command(runtests, np, mpirun_args, python, extra, outdir=outdir),
                                          os.path.dirname(runtests), dict(os.environ), limit)
    ranks = rank_outputs(outdir, np)
    with open(log, "w") as f:
        f.write(output)
        for r, text in ranks:
            f.write("\n===== rank %d =====\n%s" % (r, text))
    ran = fail = err = skip = summaries = 0
    names = set()
    for _, text in ranks:
        r_ran, r_fail, r_err, r_skip, r_sum, r_names = parse(text)
        ran, fail, err, skip = ran + r_ran, fail + r_fail, err + r_err, skip + r_skip
        summaries += min(r_sum, 1)
        names.update(r_names)
    complete = summaries == np and not timed_out
    counts = {
        "passed": ran - fail - err - skip,
        "failed": fail + err + (0 if complete or timed_out else 1),
        "timeout": 1 if timed_out else 0,
        "failures": fail, "errors": err, "skipped": skip, "rc": rc, "complete": complete,
    }
    if rc != 0 and complete and fail + err == 0:
        counts["failed"] += 1       # every rank said OK but the job failed (e.g. a crash in MPI_Finalize)
    return counts, sorted(names), secs


def repro(runtests, np, mpirun_args, python, env_prefix, name=None, extra=()):
    extra = name_args(name) if name else list(extra)
    cmd = " ".join(shlex.quote(w) for w in command(runtests, np, mpirun_args, python, extra))
    env = " ".join(env_prefix)
    return (env + " " if env else "") + cmd


def name_args(name):
    """runtests.py arguments that select one test case."""
    module, test = name
    return ["-i", "^%s$" % module, "-k", test]


def rerun(runtests, np, mpirun_args, python, limit, log, name):
    """Run one failing test case alone again: True if it passed."""
    rc, timed_out, output, _ = run_job(command(runtests, np, mpirun_args, python, name_args(name)),
                                       os.path.dirname(runtests), dict(os.environ), limit)
    with open(log, "a") as f:
        f.write("\n===== rerun of %s.%s alone =====\n%s" % (name[0], name[1], output))
    ran = sum(int(m) for m in re.findall(r"^Ran (\d+) tests? in ", output, re.M))
    return rc == 0 and not timed_out and ran > 0 and not re.search(r"^(FAIL|ERROR):", output, re.M)
