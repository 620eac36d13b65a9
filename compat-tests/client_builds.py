"""Builds the compatibility suite shares between its tests and its pytest processes: the Go
client programs (compat-tests/go, into .cache/go/<pkg>) and the Java scenario jar
(compat-tests/java with Maven, into .cache/java-build), each under a file lock (`cache_lock`), so
the `-n` workers of pytest-xdist (scripts/test runs two) never build one at the same time.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

COMPAT_DIR = Path(__file__).resolve().parent
CACHE_DIR = COMPAT_DIR / ".cache"


@contextlib.contextmanager
def cache_lock(name: str):
    """Held while a cache in .cache/ that several pytest processes share (the `-n` workers of
    pytest-xdist, or two runs) is checked and built: an flock on .cache/.<name>.lock (which also
    excludes other threads of this process, each opening the file anew)."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with open(CACHE_DIR / f".{name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def go_build(pkg: str) -> Path:
    """go build ./<pkg> of compat-tests/go into .cache/go/<pkg> (Go's build cache makes repeated
    builds cheap); fails the test with the compiler output if it does not build."""
    go = shutil.which("go")
    if go is None:
        pytest.fail("`go` not found on PATH (the Go client tests need the Go toolchain)", pytrace=False)
    out = CACHE_DIR / "go" / pkg
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with cache_lock(f"go-{pkg}"):
            r = subprocess.run([go, "build", "-o", str(out), f"./{pkg}"], cwd=COMPAT_DIR / "go",
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        pytest.fail(f"go build of compat-tests/go/{pkg} timed out", pytrace=False)
    if r.returncode != 0:
        pytest.fail(f"go build of compat-tests/go/{pkg} failed:\n{r.stdout}\n{r.stderr}", pytrace=False)
    return out


# The Java (kafka-clients) scenario jar

JAVA_PROJECT = COMPAT_DIR / "java"
# KETCH_COMPAT_JAVA_BUILD: build it elsewhere (e.g. to try a changed pom.xml while another run uses
# the shared .cache/java-build)
JAVA_BUILD = Path(os.environ.get("KETCH_COMPAT_JAVA_BUILD") or CACHE_DIR / "java-build")


def _java_sources_digest() -> str:
    import hashlib

    h = hashlib.sha256()
    files = [JAVA_PROJECT / "pom.xml"] + sorted((JAVA_PROJECT / "src").rglob("*"))
    for f in files:
        if f.is_file():
            h.update(str(f.relative_to(JAVA_PROJECT)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def java_compat_jar_built() -> Path:
    """Path of compat-tests/java built with Maven (rebuilt only when its sources change)."""
    with cache_lock("java-build"):
        return _java_compat_jar()


def _java_compat_jar() -> Path:
    jar = JAVA_BUILD / "ketch-compat-java.jar"
    stamp = JAVA_BUILD / ".sources-sha256"
    digest = _java_sources_digest()
    if jar.is_file() and stamp.is_file() and stamp.read_text().strip() == digest:
        return jar
    JAVA_BUILD.mkdir(parents=True, exist_ok=True)
    cmd = ["mvn", "-q", "-B", "-Dstyle.color=never", "package", f"-Dketch.build.dir={JAVA_BUILD}"]
    try:
        r = subprocess.run(cmd, cwd=JAVA_PROJECT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=900)
    except subprocess.TimeoutExpired:
        pytest.fail("building compat-tests/java with Maven timed out", pytrace=False)
    if r.returncode != 0 or not jar.is_file():
        pytest.fail(f"building compat-tests/java failed ({r.returncode}):\n{r.stdout[-10000:]}\n{r.stderr[-10000:]}",
                    pytrace=False)
    stamp.write_text(digest)
    return jar
