"""Run one job (an mpirun) with a time limit and leave nothing behind."""
import os
import signal
import subprocess
import time

TIMEOUT_MARK = "The user-provided time limit for job execution has been reached"


def _session(sid):
    """pids of the processes still in the job's session (ranks mpirun lost)."""
    pids = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid:       # state ppid pgrp session
                pids.append(int(p))
        except (OSError, IndexError, ValueError):
            pass
    return pids


def run_job(cmd, cwd, env, limit):
    """(exit status, timed out, output, seconds).  mpirun gets the limit
    itself (MPIEXEC_TIMEOUT, set by the caller); this is the backstop 30 s
    later, which kills the job's whole process group."""
    t0 = time.time()
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True)
    timed_out = False
    try:
        out, _ = p.communicate(timeout=limit + 30)
    except subprocess.TimeoutExpired:
        timed_out = True
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            try:
                out, _ = p.communicate(timeout=10)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            out = b""
    secs = time.time() - t0
    text = out.decode("utf-8", "replace") if out else ""
    if TIMEOUT_MARK in text:
        timed_out = True
    for pid in _session(p.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if timed_out:
        text += "\n[conformance] time limit of %d s reached\n" % limit
    return p.returncode, timed_out, text, secs
