"""Helpers for the idempotence / transaction compatibility tests (test_idempotence.py,
test_transactions_*.py): the Java TxnScenario runner, dump parsing, a TCP proxy that can lose
responses or survive a broker restart, and a line-watching subprocess wrapper.

The proxy: a broker started with `advertised.listeners=PLAINTEXT://127.0.0.1:<proxy port>` is
reached only through it (Metadata and FindCoordinator point clients at the proxy), so a client
keeps one valid address across `broker.restart()` (which picks a new port), and the test can
drop the broker's responses (the requests still reach the broker: the producer must retry and
the broker must deduplicate) or cut every connection.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import TARGET, _reap, _spawn, run_logged

JAVA_TIMEOUT = 180  # seconds per JVM run (TxnScenario's own watchdog: 150 s)


# ---------------------------------------------------------------------------------------------
# Java TxnScenario
# ---------------------------------------------------------------------------------------------


def java_cmd(jar, bootstrap, *args) -> list[str]:
    return ["java", "-cp", str(jar), "ketch.compat.TxnScenario", bootstrap, *map(str, args)]


def java_txn(jar, bootstrap, *args, timeout=JAVA_TIMEOUT, quiet=False):
    """Run one TxnScenario command; fail the test (with its output) on a non-zero exit."""
    t0 = time.monotonic()
    r = run_logged(java_cmd(jar, bootstrap, *args), timeout=timeout,
                   what=f"java TxnScenario {' '.join(map(str, args))}")
    if not quiet:
        print(f"--- java TxnScenario {' '.join(map(str, args))} ({time.monotonic() - t0:.1f}s) ---")
        print(r.stdout[-20000:])
        if r.stderr.strip():
            print("--- stderr ---\n" + r.stderr[-5000:])
    return r


class Dump:
    """Records read back by `TxnScenario dump` (or any client printing the same JSON lines)."""

    def __init__(self, text: str):
        self.end: dict[int, int] = {}
        self.records: dict[int, list[tuple[int, str | None, str | None]]] = {}
        for line in text.splitlines():
            line = line.strip()
            if not line.startswith("{"):
                continue
            d = json.loads(line)
            if "end" in d:
                self.end = {int(k): v for k, v in d["end"].items()}
            else:
                self.records.setdefault(d["p"], []).append((d["o"], d["k"], d["v"]))
        for p in self.end:
            self.records.setdefault(p, [])

    def values(self, p: int) -> list[str]:
        return [v for _, _, v in self.records.get(p, [])]

    def offsets(self, p: int) -> list[int]:
        return [o for o, _, _ in self.records.get(p, [])]

    def total(self) -> int:
        return sum(len(v) for v in self.records.values())


def java_dump(jar, bootstrap, topic, isolation) -> Dump:
    r = java_txn(jar, bootstrap, "dump", topic, isolation, quiet=True)
    d = Dump(r.stdout)
    print(f"dump {topic} {isolation}: end offsets {d.end}, records per partition "
          f"{ {p: len(v) for p, v in sorted(d.records.items())} }")
    return d


def first_difference(have: list, want: list) -> str:
    """A short description of where two sequences part."""
    i = 0
    while i < len(have) and i < len(want) and have[i] == want[i]:
        i += 1
    h = have[i] if i < len(have) else "<end>"
    w = want[i] if i < len(want) else "<end>"
    return (f"{len(have)} read, {len(want)} expected; first difference at #{i}: read {h!r}, expected {w!r}; "
            f"read around it: {have[max(0, i - 3):i + 5]}")


def assert_values(dump: Dump, p: int, want: list[str], what: str) -> None:
    have = dump.values(p)
    assert have == want, f"{what}, partition {p}: {first_difference(have, want)}"
    offs = dump.offsets(p)
    assert offs == sorted(set(offs)), f"{what}, partition {p}: offsets not strictly increasing: {offs[:50]}"


# ---------------------------------------------------------------------------------------------
# transaction protocol variants
# ---------------------------------------------------------------------------------------------

# Kafka 4.x and Ketch finalize transaction.version=2 (KIP-890 part 2) on a fresh cluster: 4.x
# clients then skip AddPartitionsToTxn (the broker adds partitions on Produce v12+) and EndTxn v5
# bumps the epoch. After UpdateFeatures to transaction.version=1 the same clients use the classic
# protocol (AddPartitionsToTxn v3, EndTxn v4, Produce v11).
TXN_PROTOCOLS = ["advertised", "tv1"]


def apply_txn_protocol(jar, broker, protocol: str) -> None:
    if protocol == "advertised":
        return
    java_txn(jar, broker.bootstrap, "set-feature", "transaction.version", "1")


# ---------------------------------------------------------------------------------------------
# TCP proxy
# ---------------------------------------------------------------------------------------------


class TcpProxy:
    """Forwards 127.0.0.1:<port> to an upstream broker; can drop responses and cut connections."""

    def __init__(self):
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.port = self.listener.getsockname()[1]
        self.upstream: tuple[str, int] | None = None
        self.drop_responses = False
        self.dropped_bytes = 0
        self.accepted = 0
        self.refused = 0
        self.cuts = 0
        self._lock = threading.Lock()
        self._pairs: set[tuple[socket.socket, socket.socket]] = set()
        self._closed = False
        threading.Thread(target=self._accept_loop, name=f"proxy-{self.port}", daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def set_upstream(self, bootstrap: str | None) -> None:
        if bootstrap is None:
            self.upstream = None
        else:
            host, port = bootstrap.rsplit(":", 1)
            self.upstream = (host, int(port))

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            up = self.upstream
            server = None
            if up is not None:
                try:
                    server = socket.create_connection(up, timeout=2)
                    server.settimeout(None)
                except OSError:
                    server = None
            if server is None:
                self.refused += 1
                client.close()
                continue
            self.accepted += 1
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = (client, server)
            with self._lock:
                self._pairs.add(pair)
            threading.Thread(target=self._pump, args=(client, server, pair, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, pair, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, pair, is_response: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if is_response and self.drop_responses:
                    self.dropped_bytes += len(data)
                    continue
                dst.sendall(data)
        except OSError:
            pass
        self._close_pair(pair)

    def _close_pair(self, pair) -> None:
        with self._lock:
            self._pairs.discard(pair)
        for s in pair:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass

    def cut(self) -> int:
        """Close every open connection (clients see a disconnect). Returns how many."""
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            self._close_pair(pair)
        self.cuts += 1
        return len(pairs)

    def close(self) -> None:
        self._closed = True
        try:
            self.listener.close()
        except OSError:
            pass
        self.cut()

    def stats(self) -> str:
        return (f"proxy {self.address}: {self.accepted} connections forwarded, {self.refused} refused, "
                f"{self.cuts} cuts, {self.dropped_bytes} response bytes dropped")


@pytest.fixture
def proxied_broker(start_broker):
    """(proxy, broker): a broker that advertises a proxy in front of it; the proxy follows restarts
    only when told (proxy.set_upstream(broker.bootstrap))."""
    proxy = TcpProxy()
    b = start_broker({"advertised.listeners": f"PLAINTEXT://{proxy.address}"})
    proxy.set_upstream(b.bootstrap)
    yield proxy, b
    print(proxy.stats())
    proxy.close()


# ---------------------------------------------------------------------------------------------
# a client process whose output the test watches while it runs
# ---------------------------------------------------------------------------------------------


class Watched:
    """A subprocess whose stdout lines are collected by a thread (stderr goes to a file)."""

    def __init__(self, cmd, what: str, workdir: Path, env=None):
        self.what = what
        self.lines: list[str] = []
        self._cv = threading.Condition()
        self.stderr_path = Path(workdir) / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', what)}.stderr"
        self._stderr = open(self.stderr_path, "wb")
        self.proc = _spawn([str(c) for c in cmd], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=self._stderr, env=env)
        self.t0 = time.monotonic()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for raw in iter(self.proc.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._cv:
                self.lines.append(line)
                self._cv.notify_all()
        with self._cv:
            self._cv.notify_all()

    def wait_line(self, pred, timeout: float, desc: str):
        """Wait for a stdout line matching pred (returns it); fail the test on timeout or exit."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self._cv:
            while True:
                while seen < len(self.lines):
                    line = self.lines[seen]
                    seen += 1
                    if pred(line):
                        return line
                if self.proc.poll() is not None and seen >= len(self.lines):
                    self._cv.wait(0.2)
                    if seen >= len(self.lines):
                        self.fail(f"exited ({self.proc.returncode}) before {desc}")
                left = deadline - time.monotonic()
                if left <= 0:
                    self.fail(f"no {desc} within {timeout}s")
                self._cv.wait(min(left, 0.5))

    def wait(self, timeout: float) -> int:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _reap(self.proc, 9, 10)
            self.fail(f"still running after {timeout}s (killed)")
        time.sleep(0.1)  # let the reader thread drain
        _reap(self.proc, 9, 1)
        return rc

    def output(self) -> str:
        with self._cv:
            out = "\n".join(self.lines)
        try:
            err = self.stderr_path.read_text(errors="replace")
        except OSError:
            err = ""
        return f"--- stdout ---\n{out[-20000:]}\n--- stderr ({self.stderr_path}) ---\n{err[-20000:]}"

    def fail(self, why: str):
        if self.proc.poll() is None:
            _reap(self.proc, 9, 10)
        pytest.fail(f"{self.what}: {why}\n{self.output()}", pytrace=False)

    def close(self) -> None:
        if self.proc.poll() is None:
            _reap(self.proc, 9, 10)
        self._stderr.close()


@pytest.fixture
def watched(tmp_path):
    """Factory for Watched processes, all killed at the end of the test."""
    procs: list[Watched] = []

    def make(cmd, what: str, env=None) -> Watched:
        w = Watched(cmd, what, tmp_path, env=env)
        procs.append(w)
        return w

    yield make
    for w in procs:
        w.close()
