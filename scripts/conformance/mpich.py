"""MPICH's test/mpi suite: read its test lists, build the programs with the
suite's own Makefiles, run one entry, judge it the way MPICH's runtests does.
"""
import os
import re
import shlex
import subprocess

from runner import run_job


class Entry:
    """One test-list line: program, ranks, arguments, environment."""

    def __init__(self, row, index, directory, prog, np_listed, opts):
        self.row = row
        self.index = index              # position in the row's list (lists repeat lines)
        self.directory = directory      # absolute directory the program is built and run in
        self.prog = prog
        self.np_listed = np_listed
        self.args = opts.get("arg", [])
        self.envs = opts.get("env", [])
        self.result_test = (opts.get("resultTest") or [""])[-1]
        self.time_limit = int((opts.get("timeLimit") or ["0"])[-1] or 0)
        self.mem = float((opts.get("mem") or ["0"])[-1] or 0)
        self.strict = (opts.get("strict") or [""])[-1].lower()
        self.np = np_listed

    @property
    def key(self):
        return "%s#%d" % (self.row, self.index)

    def label(self, topdir):
        rel = os.path.relpath(self.directory, topdir)
        words = ["%s/%s" % (rel, self.prog), "np=%d" % self.np]
        if self.np != self.np_listed:
            words[-1] += "(listed %d)" % self.np_listed
        return " ".join(words + self.args + self.envs)


def _parse_list(path, row, directory, entries, makes):
    """MPICH runtests' LoadTests: '#' comments, '!dir:target' make lines,
    subdirectory lines (recursed with the same list name), then
    'program [np [key=value ...]]'."""
    name = os.path.basename(path)
    with open(path) as f:
        for line in f:
            line = re.sub(r"#.*", "", line).strip()
            if not line:
                continue
            m = re.match(r"!([^:]*):(.*)", line)
            if m:
                makes.append((os.path.join(directory, m.group(1)), m.group(2).strip()))
                continue
            words = line.split()
            prog = words[0]
            sub = os.path.join(directory, prog)
            if os.path.isdir(sub):
                sublist = os.path.join(sub, name)
                if os.path.isfile(sublist):
                    _parse_list(sublist, row, sub, entries, makes)
                continue
            np_listed = int(words[1]) if len(words) > 1 else 2
            opts = {}
            for w in words[2:]:
                if "=" in w:
                    k, v = w.split("=", 1)
                    opts.setdefault(k, []).append(v)
            d = directory
            if "/" in prog:
                d = os.path.join(directory, os.path.dirname(prog))
                prog = os.path.basename(prog)
            entries.append(Entry(row, len(entries), d, prog, np_listed, opts))


def load_row(topdir, row, directory, listname):
    """Entries of one row; (entries, pre-build make targets)."""
    path = os.path.join(topdir, directory, listname)
    entries, makes = [], []
    if os.path.isfile(path):
        _parse_list(path, row, os.path.join(topdir, directory), entries, makes)
    return entries, makes


def build(entries, makes, log, jobs=2):
    """make every program of the row in its directory (the suite's own
    Makefiles), `jobs` compilers at a time (the rma row alone is 177
    programs: 16 minutes one at a time at load 10 on 2 cores); returns the
    set of (directory, program) that exist after."""
    with open(log, "a") as out:
        for d, target in makes:
            subprocess.run(["make", target], cwd=d, stdout=out, stderr=subprocess.STDOUT)
        by_dir = {}
        for e in entries:
            by_dir.setdefault(e.directory, set()).add(e.prog)
        for d, progs in by_dir.items():
            subprocess.run(["make", "-k", "-j%d" % jobs] + sorted(progs), cwd=d, stdout=out, stderr=subprocess.STDOUT)
    return {(e.directory, e.prog) for e in entries if os.access(os.path.join(e.directory, e.prog), os.X_OK)}


def judge(entry, rc, timed_out, output):
    """passed / failed / timeout / skipped, as MPICH's runtests decides:
    the default test wants exit 0 and exactly one ' No Errors' line (besides
    'Test Passed'/'Test Skipped'); TestStatus and TestErrFatal want a
    non-zero exit (a time-out is how init/timeout is meant to end)."""
    if entry.result_test in ("TestStatus", "TestErrFatal"):
        return "passed" if rc != 0 else "failed"
    if timed_out:
        return "timeout"
    found_noerror = False
    error = False
    for line in output.splitlines():
        if re.match(r"^\s*No [Ee]rrors\s*$", line) and not found_noerror:
            found_noerror = True
        elif not re.match(r"^\s*Test (Passed|Skipped)\s*$", line):
            error = True
    if entry.result_test == "TestStatusNoErrors":
        return "passed" if (found_noerror and not error and rc != 0) else "failed"
    if not found_noerror and "Test Skipped" in output and not error and rc == 0:
        return "skipped"
    if not found_noerror or error or rc != 0:
        return "failed"
    return "passed"


def command(entry, mpirun_args):
    return (["mpirun"] + mpirun_args + ["-np", str(entry.np), "./" + entry.prog] + entry.args)


def repro(entry, mpirun_args, env_prefix):
    env = " ".join(env_prefix + entry.envs)
    cmd = " ".join(shlex.quote(w) for w in command(entry, mpirun_args))
    return "cd %s && make %s && %s%s" % (shlex.quote(entry.directory), entry.prog,
                                         env + " " if env else "", cmd)


def run(entry, mpirun_args, limit, log):
    env = dict(os.environ)
    for kv in entry.envs:
        k, _, v = kv.partition("=")
        env[k] = v
    # MPICH's runtests hands the limit to mpiexec this way; Open MPI's mpirun honours it
    env["MPIEXEC_TIMEOUT"] = str(limit)
    rc, timed_out, output, secs = run_job(command(entry, mpirun_args), entry.directory, env, limit)
    with open(log, "w") as f:
        f.write(output)
    return judge(entry, rc, timed_out, output), secs
