"""Get the suites ready in the output directory, never in this repository:
an MPICH source tree (directory, .tar.gz or URL) whose test/mpi is not yet
configured is copied and configured there against the Open MPI in PATH; an
mpi4py source distribution (.tar.gz or URL) is unpacked there.
"""
import os
import shutil
import subprocess
import sys
import tarfile

# test/mpi's configure for a plain MPI-3.1 library: no MPICH extensions, no
# Fortran/C++ bindings, no tests of dynamic processes, I/O or fault tolerance.
MPICH_CONFIGURE = ["CC=mpicc", "CXX=mpicxx", "MPIEXEC=mpirun", "--disable-fortran", "--disable-cxx",
                   "--enable-strictmpi", "--disable-spawn", "--disable-romio", "--disable-ft-tests",
                   "--disable-perftest"]


def die(msg):
    print("conformance: " + msg, file=sys.stderr)
    sys.exit(2)


def _step(cmd, cwd, log, what):
    print("   %s (log: %s)" % (what, log), flush=True)
    with open(log, "a") as f:
        f.write("\n$ (cd %s && %s)\n" % (cwd, " ".join(cmd)))
        f.flush()
        rc = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        die("%s failed (exit %d); see %s" % (what, rc, log))


def fetch(src, work):
    """A local path for src: a URL is downloaded into work, a .tar.gz is
    unpacked into work; a directory is returned as it is."""
    if src.startswith(("http://", "https://")):
        os.makedirs(work, exist_ok=True)
        dest = os.path.join(work, os.path.basename(src.split("?")[0]) or "download.tar.gz")
        if not os.path.exists(dest):
            print("   downloading %s" % src, flush=True)
            for cmd in (["curl", "-fsSL", "-o", dest, src], ["wget", "-q", "-O", dest, src]):
                if shutil.which(cmd[0]) and subprocess.run(cmd).returncode == 0:
                    break
            else:
                if os.path.exists(dest):
                    os.unlink(dest)
                die("cannot download %s (no network? download it yourself and give the file)" % src)
        src = dest
    src = os.path.abspath(src)
    if os.path.isfile(src) and tarfile.is_tarfile(src):
        os.makedirs(work, exist_ok=True)
        with tarfile.open(src) as t:
            tops = {m.name.split("/")[0] for m in t.getmembers() if m.name and not m.name.startswith("/")}
            dest = os.path.join(work, sorted(tops)[0]) if len(tops) == 1 else work
            if not os.path.isdir(dest):
                print("   unpacking %s" % src, flush=True)
                t.extractall(work)
        return dest
    if not os.path.isdir(src):
        die("%s: neither a directory, nor a .tar.gz, nor a URL" % src)
    return src


def is_configured(testmpi):
    return (os.path.isfile(os.path.join(testmpi, "Makefile")) and
            os.path.isfile(os.path.join(testmpi, "pt2pt", "testlist")))


def mpich_testdir(src):
    """test/mpi of an MPICH tree (or src itself if it is one), else None."""
    for cand in (os.path.join(src, "test", "mpi"), src):
        if os.path.isfile(os.path.join(cand, "configure.ac")) and os.path.isdir(os.path.join(cand, "pt2pt")):
            return cand
    return None


def mpich(src, out, rebuild):
    """A configured MPICH test/mpi for src.  Used in place if src is
    configured already (and not rebuild); otherwise test/mpi (with the
    confdb and version.m4 its autogen.sh takes from the tree above) is
    copied into out/mpich and configured there."""
    top = mpich_testdir(fetch(src, os.path.join(out, "download")))
    if top is None:
        die("--mpich %s: no MPICH test/mpi suite there" % src)
    if is_configured(top) and not rebuild:
        return top
    dest_root = os.path.join(out, "mpich")
    dest = os.path.join(dest_root, "test", "mpi")
    log = os.path.join(out, "mpich-configure.log")
    if is_configured(dest):
        return dest
    print("== preparing MPICH's test/mpi in %s" % dest, flush=True)
    shutil.rmtree(dest_root, ignore_errors=True)
    shutil.copytree(top, dest, symlinks=True)
    src_root = os.path.dirname(os.path.dirname(top))
    for rel in ("confdb", os.path.join("maint", "version.m4")):
        p = os.path.join(src_root, rel)
        if os.path.isdir(p):
            shutil.copytree(p, os.path.join(dest_root, rel), symlinks=True)
        elif os.path.isfile(p):
            os.makedirs(os.path.dirname(os.path.join(dest_root, rel)), exist_ok=True)
            shutil.copy2(p, os.path.join(dest_root, rel))
    if os.path.exists(os.path.join(dest, "Makefile")):
        subprocess.run(["make", "distclean"], cwd=dest, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not os.path.isfile(os.path.join(dest, "configure")):
        for tool in ("autoreconf", "libtoolize"):
            if not shutil.which(tool):
                die("MPICH's test/mpi has no configure script: its autogen.sh needs autoconf, automake and "
                    "libtool (Debian: apt-get install autoconf automake libtool), or use a release tarball")
        _step(["sh", "autogen.sh"], dest, log, "autogen.sh")
    _step(["./configure"] + MPICH_CONFIGURE, dest, log, "configure against this Open MPI (mpicc)")
    if not is_configured(dest):
        die("configure left no pt2pt/testlist in %s; see %s" % (dest, log))
    return dest


def mpi4py(src, out):
    """mpi4py's test directory (holding runtests.py) for src: a test
    directory, an mpi4py source tree, or its source distribution."""
    path = fetch(src, os.path.join(out, "download"))
    for cand in (os.path.join(path, "runtests.py"), os.path.join(path, "test", "runtests.py")):
        if os.path.isfile(cand):
            return cand
    return None
