"""Process hygiene and /proc measurements for scripts/bench: spawning children that die with the
benchmark (PR_SET_PDEATHSIG, kill at exit and on signals), bounded runs (RunFailed), free ports,
and reading a process's RSS, CPU time, sockets and open files, plus a peak-RSS sampler.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import threading

from .config import log

# ---------------------------------------------------------------------------------------------
# process hygiene
# ---------------------------------------------------------------------------------------------

_LIVE: set[subprocess.Popen] = set()
_LOCK = threading.Lock()


def _pdeathsig() -> None:  # in the child, between fork and exec
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def spawn(args, **kw) -> subprocess.Popen:
    p = subprocess.Popen([str(a) for a in args], preexec_fn=_pdeathsig, **kw)
    with _LOCK:
        _LIVE.add(p)
    return p


def reap(p: subprocess.Popen, sig=signal.SIGTERM, timeout: float = 30) -> None:
    if p.poll() is None:
        try:
            p.send_signal(sig)
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=30)
        except ProcessLookupError:
            pass
    with _LOCK:
        _LIVE.discard(p)


@atexit.register
def _kill_all() -> None:
    procs = list(_LIVE)  # no lock: may run in a signal handler that interrupted a holder of _LOCK
    for p in procs:
        if p.poll() is None:
            try:
                p.kill()
            except Exception:
                pass
    for p in procs:
        try:
            p.wait(timeout=10)
        except Exception:
            pass


def _on_signal(signum, _frame):
    # Interrupted: no graceful stops, every child is killed now (data is thrown away anyway).
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    log(f"signal {signum}: killing every process started by the benchmark and stopping")
    _kill_all()
    raise SystemExit(128 + signum)


class RunFailed(Exception):
    pass


def run(args, timeout: float, what: str, env=None, cwd=None) -> subprocess.CompletedProcess:
    """Run a bounded command, raising RunFailed (with its output's tail) on error or timeout."""
    p = spawn(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
              text=True, env=env, cwd=cwd)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        reap(p)
        raise RunFailed(f"{what}: timed out after {timeout:.0f}s; stderr tail: {tail_text(err)}")
    reap(p)
    if p.returncode != 0:
        raise RunFailed(f"{what}: exit {p.returncode}; stderr tail: {tail_text(err or out)}")
    return subprocess.CompletedProcess(args, p.returncode, out, err)


def tail_text(s: str | None, n: int = 6) -> str:
    lines = [ln for ln in (s or "").strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:])[-1500:]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# /proc measurements
# ---------------------------------------------------------------------------------------------

CLK = os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def cpu_s(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK  # utime, stime
    except (OSError, IndexError, ValueError):
        return None


def socket_count(pid: int) -> int | None:
    try:
        n = 0
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                    n += 1
            except OSError:
                pass
        return n
    except OSError:
        return None


def fd_count(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class RssSampler:
    """Peak VmRSS of some pids, sampled every 100 ms while active."""

    def __init__(self, pids: list[int]):
        self.pids = pids
        self.peak: dict[int, float] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.is_set():
            for pid in self.pids:
                r = rss_mb(pid)
                if r is not None and r > self.peak.get(pid, 0):
                    self.peak[pid] = r
            self._stop.wait(0.1)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
