"""Shared fixtures for the Ketch compatibility suite.

The `broker` fixture starts a fresh single-node broker per test on an ephemeral port of
127.0.0.1 and yields a `Broker` object:

    broker.bootstrap   "127.0.0.1:PORT" (changes on restart)
    broker.host, broker.port
    broker.data_dir    pathlib.Path of log.dirs (kept across restart())
    broker.log_path    pathlib.Path of the broker's stdout+stderr log
    broker.target      "ketch" or "kafka"
    broker.kill9()     SIGKILL and wait
    broker.stop()      SIGTERM and wait (SIGKILL after a timeout)
    broker.restart()   start again on the same data dir (stops it first if running)
    broker.is_running()

Environment:
    KETCH_COMPAT_TARGET    "ketch" (default) or "kafka": run real Apache Kafka (KRaft, from Maven jars)
    KETCH_BIN              path of the ketch binary (default <repo>/target/release/ketch)
    KAFKA_VERSION          Kafka version for the "kafka" target (default 4.1.0)
    KETCH_COMPAT_START_TIMEOUT   seconds to wait for a broker to be ready (default 30 ketch / 120 kafka)
    KETCH_COMPAT_LOG_LINES       broker log lines shown on failure (default 200)
    KETCH_COMPAT_KAFKA_REQUEST_LOG=1   real Kafka logs every request (kafka.request.logger DEBUG)
    KETCH_COMPAT_KAFKA_CDS=0     do not use a class-data-sharing archive for the Kafka JVM
    KETCH_COMPAT_KAFKA_JVM_OPTS  extra JVM options for the Kafka broker
    KETCH_COMPAT_JAVA_BUILD      where java/ is built (default .cache/java-build)

Per-test broker settings: `@pytest.mark.broker_config(**{"num.partitions": "3"})` adds
`--override key=value` for Ketch and `key=value` lines in server.properties for Kafka.
For more than one broker in a test, use the `start_broker` factory fixture:
`b = start_broker({"key": "value"})`, or `start_broker(kind="kafka")` for a broker of the other kind.
Listeners besides PLAINTEXT (which `bootstrap` names): `start_broker(overrides, extra_listeners=
{"SSL": ("SSL", port)})` adds `NAME://127.0.0.1:port` to `listeners` (and `advertised.listeners`)
with its security protocol in `listener.security.protocol.map`, on either target.
"""

from __future__ import annotations

import atexit
import base64
import os
import re
import shutil
import signal
import random
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from client_builds import cache_lock, go_build, java_compat_jar_built  # noqa: F401 (go_build: for the tests)

# cluster.py's fixtures (start_cluster: a Kafka controller and brokers under it) for every test module
pytest_plugins = ["cluster"]

REPO_ROOT = Path(__file__).resolve().parent.parent
COMPAT_DIR = Path(__file__).resolve().parent
CACHE_DIR = COMPAT_DIR / ".cache"

TARGET = os.environ.get("KETCH_COMPAT_TARGET", "ketch").strip().lower() or "ketch"
if TARGET not in ("ketch", "kafka"):
    raise pytest.UsageError(f"KETCH_COMPAT_TARGET must be 'ketch' or 'kafka', not {TARGET!r}")

KAFKA_VERSION = os.environ.get("KAFKA_VERSION", "4.1.0")
LISTENING_RE = re.compile(r"listening on ([0-9.]+):(\d+)")
# A Rust panic's message ("thread 'x' panicked at src/...") in a Ketch log.
PANIC_RE = re.compile(r"thread '[^']*' panicked at|\bpanicked at src/")
LOG_LINES = int(os.environ.get("KETCH_COMPAT_LOG_LINES", "200"))


def _start_timeout() -> float:
    default = "120" if TARGET == "kafka" else "30"
    return float(os.environ.get("KETCH_COMPAT_START_TIMEOUT", default))


# ---------------------------------------------------------------------------------------------
# process hygiene: every child we start is killed if pytest goes away
# ---------------------------------------------------------------------------------------------

_LIVE: set[subprocess.Popen] = set()
_LIVE_LOCK = threading.Lock()


def _set_pdeathsig() -> None:  # runs in the child between fork and exec
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:
        pass


def _spawn(args, **kw) -> subprocess.Popen:
    proc = subprocess.Popen(args, preexec_fn=_set_pdeathsig, **kw)
    with _LIVE_LOCK:
        _LIVE.add(proc)
    return proc


def _reap(proc: subprocess.Popen, sig: int, timeout: float) -> None:
    if proc.poll() is None:
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
    with _LIVE_LOCK:
        _LIVE.discard(proc)


@atexit.register
def _kill_leftovers() -> None:
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for p in procs:
        if p.poll() is None:
            p.kill()
            try:
                p.wait(timeout=10)
            except Exception:
                pass


_PORTS_GIVEN: set[int] = set()


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago, for a listener a test names before its
    process starts. Drawn at random from below the kernel's ephemeral range (ip_local_port_range),
    so no port-0 listener (Ketch's and Kafka's own) and no outgoing connection can take it before
    the process binds it, as happened with a port the kernel had just handed out; never the same
    port twice in a run."""
    low = 10000
    high = max(low + 1000, _ephemeral_low())
    for _ in range(500):
        port = random.randrange(low, high)
        if port in _PORTS_GIVEN:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _PORTS_GIVEN.add(port)
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(host: str, port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def tail(path: Path, lines: int = LOG_LINES) -> str:
    try:
        data = path.read_bytes()
    except OSError as e:
        return f"<cannot read {path}: {e}>"
    text = data[-2_000_000:].decode("utf-8", "replace")
    return "\n".join(text.splitlines()[-lines:])


class BrokerStartError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# broker implementations
# ---------------------------------------------------------------------------------------------


class Broker:
    """Common interface; see module docstring."""

    target = "?"

    def __init__(self, workdir: Path, overrides: dict[str, str] | None = None, extra_listeners=None):
        self.workdir = Path(workdir)
        # name -> (security protocol, port): listeners besides PLAINTEXT
        self.extra_listeners: dict[str, tuple[str, int]] = dict(extra_listeners or {})
        self.data_dir = self.workdir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / "broker.log"
        self.overrides = {k: str(v) for k, v in (overrides or {}).items()}
        self.proc: subprocess.Popen | None = None
        self.host = "127.0.0.1"
        self.port: int | None = None
        self.starts = 0
        # Extra environment of the process (e.g. a faked clock: clock.py), from its next start.
        self.env: dict[str, str] = {}
        # Whether the test stopped the process (stop, kill9) since it last started; a test that
        # expects the process to exit by itself sets `may_exit` (see `health_problems`).
        self.stopped = False
        self.may_exit = False

    @property
    def bootstrap(self) -> str:
        if self.port is None:
            raise RuntimeError("broker is not started")
        return f"{self.host}:{self.port}"

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _log_marker(self, text: str) -> None:
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(f"\n===== [compat-harness {time.strftime('%H:%M:%S')}] {text} =====\n")

    def start(self) -> "Broker":
        raise NotImplementedError

    def restart(self) -> "Broker":
        if self.is_running():
            self.stop()
        return self.start()

    def health_problems(self) -> list[str]:
        """What teardown finds wrong with the process: it exited although the test neither
        stopped it nor expected it to exit, or (Ketch) its log shows a panic."""
        problems = []
        if self.proc is not None and not self.stopped and not self.may_exit and self.proc.poll() is not None:
            problems.append(f"{self} exited by itself with code {self.proc.returncode}")
        if self.target == "ketch" and self.log_path.exists():
            panics = [line for line in self.log_path.read_text(errors="replace").splitlines() if PANIC_RE.search(line)]
            if panics:
                problems.append(f"{self} panicked: " + " | ".join(panics[:3]))
        return problems

    def kill9(self) -> None:
        self.stopped = True
        if self.proc is not None:
            self._log_marker("kill -9")
            _reap(self.proc, signal.SIGKILL, 30)

    def stop(self, timeout: float = 30) -> None:
        self.stopped = True
        if self.proc is not None:
            if self.proc.poll() is None:
                self._log_marker("SIGTERM")
            _reap(self.proc, signal.SIGTERM, timeout)

    def close(self) -> None:
        """Teardown: stop gracefully, then make sure nothing is left."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.stop(timeout=20)
            finally:
                if self.proc.poll() is None:
                    self.kill9()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.target} {self.host}:{self.port} data={self.data_dir}>"


class KetchBroker(Broker):
    target = "ketch"

    def __init__(self, workdir: Path, overrides=None, binary: Path | None = None, extra_listeners=None):
        super().__init__(workdir, overrides, extra_listeners)
        self.binary = Path(binary or os.environ.get("KETCH_BIN") or REPO_ROOT / "target/release/ketch")

    def command(self) -> list[str]:
        args = [str(self.binary)]
        # Same test-speed settings as the Kafka target gets (see KafkaBroker below).
        settings = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(self.data_dir),
            "group.initial.rebalance.delay.ms": "0",
        }
        if self.extra_listeners:
            # PLAINTEXT first: its listening line is the first one, which start() reads.
            extra = self.extra_listeners.items()
            settings["listeners"] += "".join(f",{n}://127.0.0.1:{port}" for n, (_, port) in extra)
            settings["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT" + "".join(
                f",{n}:{proto}" for n, (proto, _) in extra
            )
        settings.update(self.overrides)
        for k, v in settings.items():
            args += ["--override", f"{k}={v}"]
        return args

    def start(self) -> "Broker":
        if not self.binary.is_file() or not os.access(self.binary, os.X_OK):
            raise BrokerStartError(
                f"ketch binary not found at {self.binary} (build it with `cargo build --release`, "
                f"or set KETCH_BIN)"
            )
        self.starts += 1
        self._log_marker(f"start #{self.starts}: {' '.join(self.command())}")
        logf = open(self.log_path, "ab")
        try:
            env = {**os.environ, **self.env}
            env.setdefault("NO_COLOR", "1")  # plain log file
            env.setdefault("RUST_BACKTRACE", "1")
            self.stopped = False  # from here, an exit the test did not cause is reported
            self.proc = _spawn(
                self.command(),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=logf,
                cwd=self.workdir,
            )
        finally:
            logf.close()
        found: dict[str, tuple[str, int]] = {}
        ready = threading.Event()
        proc = self.proc

        def pump() -> None:
            # Copy stdout into the log (so the pipe never fills) and find the listening line.
            with open(self.log_path, "ab") as out:
                for raw in iter(proc.stdout.readline, b""):
                    out.write(b"[stdout] " + raw)
                    out.flush()
                    if not ready.is_set():
                        m = LISTENING_RE.search(raw.decode("utf-8", "replace"))
                        if m:
                            found["addr"] = (m.group(1), int(m.group(2)))
                            ready.set()
            proc.stdout.close()
            ready.set()

        threading.Thread(target=pump, name=f"ketch-stdout-{proc.pid}", daemon=True).start()
        timeout = _start_timeout()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.05):
            if proc.poll() is not None:
                ready.wait(2)  # let the pump finish reading
                break
            if time.monotonic() > deadline:
                break
        if "addr" not in found:
            rc = proc.poll()
            _reap(proc, signal.SIGKILL, 10)
            self.stopped = True  # the harness stopped it; the start error reports why
            why = f"exited with code {rc}" if rc is not None else f"printed no listening line within {timeout:.0f}s"
            raise BrokerStartError(f"ketch {why}; log tail:\n{tail(self.log_path)}")
        self.host, self.port = found["addr"]
        return self


class KafkaBroker(Broker):
    """Real Apache Kafka (KRaft, combined broker+controller, node id 1) from Maven jars."""

    target = "kafka"

    def __init__(self, workdir: Path, overrides=None, libs: Path | None = None, extra_listeners=None):
        super().__init__(workdir, overrides, extra_listeners)
        self.libs = Path(libs) if libs else kafka_libs_dir()
        self.props_path = self.workdir / "server.properties"
        self.controller_port: int | None = None
        self.formatted = False

    cds_dump: Path | None = None  # set on the throwaway broker that writes the CDS archive

    def _pick_ports(self) -> None:
        # New ephemeral ports on every start, like Ketch (clients re-bootstrap on restart).
        self.port = free_port()
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()

    def _java(self) -> list[str]:
        cmd = [os.environ.get("JAVA", "java"), "-Xms256m", "-Xmx1g", "-XX:+UseG1GC"]
        if self.cds_dump is not None:
            cmd.append(f"-XX:ArchiveClassesAtExit={self.cds_dump}")
        elif (archive := _CDS_STATE.get(str(self.libs))) is not None:  # made in start()
            cmd += [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=error,cds+dynamic=error"]
        cmd += os.environ.get("KETCH_COMPAT_KAFKA_JVM_OPTS", "").split()
        cmd += [
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self._log4j_config()}",
            "-cp",
            str(self.libs / "*"),
        ]
        return cmd

    def _log4j_config(self) -> Path:
        base = self.libs / "log4j2.properties"
        if not os.environ.get("KETCH_COMPAT_KAFKA_REQUEST_LOG"):
            return base
        # Log every request (api key, version, client) to see exactly what clients send.
        cfg = self.workdir / "log4j2.properties"
        cfg.write_text(
            base.read_text()
            + "logger.request.name = kafka.request.logger\nlogger.request.level = DEBUG\n"
        )
        return cfg

    def _write_props(self) -> None:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # after kill -9 the restarted node waits out its old registration's session: keep it short
            "broker.session.timeout.ms": "2000",
            "broker.heartbeat.interval.ms": "500",
        }
        for name, (proto, port) in self.extra_listeners.items():
            props["listeners"] += f",{name}://127.0.0.1:{port}"
            props["advertised.listeners"] += f",{name}://127.0.0.1:{port}"
            props["listener.security.protocol.map"] += f",{name}:{proto}"
        props.update(self.overrides)
        self.props_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def _format(self) -> None:
        # Formatting costs a JVM start: format one template per session and copy it (each broker is
        # its own single-node cluster, so sharing the cluster id between them is harmless).
        import shutil

        template = _kafka_format_template(self.libs)
        for f in template.iterdir():
            shutil.copy2(f, self.data_dir / f.name)
        self._log_marker(f"data dir formatted (copied from {template})")
        self.formatted = True

    def start(self) -> "Broker":
        if self.cds_dump is None:
            _kafka_cds_archive(self.libs)
        self._pick_ports()
        self._write_props()
        if not self.formatted:
            self._format()
        self.starts += 1
        start_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        cmd = self._java() + ["kafka.Kafka", str(self.props_path)]
        self._log_marker(f"start #{self.starts}: " + " ".join(cmd))
        logf = open(self.log_path, "ab")
        try:
            self.stopped = False  # from here, an exit the test did not cause is reported
            self.proc = _spawn(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, cwd=self.workdir,
                               env={**os.environ, **self.env})
        finally:
            logf.close()
        timeout = _start_timeout()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                rc = self.proc.returncode
                _reap(self.proc, signal.SIGKILL, 10)
                self.stopped = True  # the harness stopped it; the start error reports why
                raise BrokerStartError(f"kafka exited with code {rc}; log tail:\n{tail(self.log_path)}")
            with open(self.log_path, "rb") as f:
                f.seek(start_offset)
                if b"Kafka Server started" in f.read():
                    break
            if time.monotonic() > deadline:
                _reap(self.proc, signal.SIGKILL, 10)
                self.stopped = True  # the harness stopped it; the start error reports why
                raise BrokerStartError(f"kafka not ready within {timeout:.0f}s; log tail:\n{tail(self.log_path)}")
            time.sleep(0.2)
        if not wait_port(self.host, self.port, max(1.0, deadline - time.monotonic())):
            _reap(self.proc, signal.SIGKILL, 10)
            self.stopped = True  # the harness stopped it; the start error reports why
            raise BrokerStartError(f"kafka port {self.port} not accepting; log tail:\n{tail(self.log_path)}")
        return self


_CDS_LOCK = threading.Lock()
_CDS_STATE: dict[str, Path | None] = {}


def _kafka_cds_archive(libs: Path) -> Path | None:
    """An AppCDS archive of the Kafka broker's classes: halves the JVM start (about 6 s to 3 s on
    2 cores). Made once (a throwaway broker started and stopped) and cached in .cache/kafka-cds;
    KETCH_COMPAT_KAFKA_CDS=0 turns it off. Any problem: run without it."""
    import hashlib
    import shutil

    if os.environ.get("KETCH_COMPAT_KAFKA_CDS", "1") == "0":
        return None
    key = str(libs)
    with _CDS_LOCK, cache_lock("kafka-cds"):
        if key in _CDS_STATE:
            return _CDS_STATE[key]
        _CDS_STATE[key] = None  # while the archive is being made, and if making it fails
        java = shutil.which(os.environ.get("JAVA", "java")) or "java"
        h = hashlib.sha256(os.path.realpath(java).encode())
        for jar in sorted(libs.glob("*.jar")):
            st = jar.stat()
            h.update(f"{jar.name}:{st.st_size}:{st.st_mtime_ns}".encode())
        archive = CACHE_DIR / "kafka-cds" / f"kafka-{KAFKA_VERSION}-{h.hexdigest()[:16]}.jsa"
        if not archive.is_file():
            import tempfile

            archive.parent.mkdir(parents=True, exist_ok=True)
            for old in archive.parent.glob("*.jsa"):
                old.unlink(missing_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix="kafka-cds-"))
            dump = archive.parent / f".{archive.name}.{os.getpid()}.tmp"
            try:
                b = KafkaBroker(tmp, libs=libs)
                b.cds_dump = dump
                b.start()
                b.stop(timeout=60)  # the archive is written at a clean exit
                if dump.is_file() and dump.stat().st_size > 0:
                    os.replace(dump, archive)
            except Exception as e:  # noqa: BLE001 - CDS is only an optimisation
                print(f"compat: no Kafka CDS archive ({e!r}); starting without it", file=sys.stderr)
            finally:
                dump.unlink(missing_ok=True)
                shutil.rmtree(tmp, ignore_errors=True)
        if archive.is_file():
            _CDS_STATE[key] = archive
        return _CDS_STATE[key]


def kafka_cds_options(libs: Path) -> list[str]:
    """JVM options that map the Kafka broker's AppCDS archive (_kafka_cds_archive, made if needed)
    into another JVM with the classpath `libs/*`: Kafka's tools, whose classes are mostly
    kafka-clients classes the broker loads too, start in about half the time (TopicCommand --list
    1.65 s -> 0.78 s on 2 cores). [] when there is no archive (the JVM's default one is used)."""
    archive = _kafka_cds_archive(libs)
    return [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=error,cds+dynamic=error"] if archive else []


_TEMPLATE_LOCK = threading.Lock()
_TEMPLATE: Path | None = None


def _kafka_format_template(libs: Path) -> Path:
    """A KRaft data dir formatted once per session (meta.properties + bootstrap.checkpoint)."""
    global _TEMPLATE
    import tempfile

    with _TEMPLATE_LOCK:
        if _TEMPLATE is not None:
            return _TEMPLATE
        root = Path(tempfile.mkdtemp(prefix="kafka-format-"))
        atexit.register(lambda: __import__("shutil").rmtree(root, ignore_errors=True))
        data = root / "data"
        data.mkdir()
        ctl = free_port()
        props = root / "server.properties"
        props.write_text(
            "process.roles=broker,controller\nnode.id=1\n"
            f"controller.quorum.voters=1@127.0.0.1:{ctl}\n"
            f"listeners=PLAINTEXT://127.0.0.1:{free_port()},CONTROLLER://127.0.0.1:{ctl}\n"
            "controller.listener.names=CONTROLLER\n"
            f"log.dirs={data}\n"
        )
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        while cluster_id.startswith("-"):  # argparse would take "-t -abc" for an option
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        cmd = [
            os.environ.get("JAVA", "java"),
            f"-Dlog4j2.configurationFile={libs / 'log4j2.properties'}",
            "-cp",
            str(libs / "*"),
            "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props),
        ]
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise BrokerStartError(f"kafka StorageTool format failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        _TEMPLATE = data
        return data


# ---------------------------------------------------------------------------------------------
# Kafka jars (real-Kafka target, benchmarks, Java tools)
# ---------------------------------------------------------------------------------------------

_KAFKA_LIBS_LOCK = threading.Lock()
_KAFKA_LIBS_DONE = False


def kafka_libs_dir() -> Path:
    """Resolve Kafka jars with scripts/kafka-from-maven (idempotent, cached)."""
    global _KAFKA_LIBS_DONE
    dest = CACHE_DIR / "kafka-libs"
    with _KAFKA_LIBS_LOCK, cache_lock("kafka-libs"):
        if not _KAFKA_LIBS_DONE:  # the script itself returns at once when the cache is complete
            env = dict(os.environ, KAFKA_VERSION=KAFKA_VERSION)
            r = subprocess.run(
                [str(REPO_ROOT / "scripts/kafka-from-maven"), str(dest)],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=900,
            )
            if r.returncode != 0:
                raise RuntimeError(f"scripts/kafka-from-maven failed:\n{r.stdout}\n{r.stderr}")
            _KAFKA_LIBS_DONE = True
    return dest


# ---------------------------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------------------------


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "broker_config(**settings): extra broker settings for the `broker` fixture"
    )


def pytest_report_header(config):
    if TARGET == "kafka":
        return f"compat target: real Apache Kafka {KAFKA_VERSION} (KRaft, from Maven)"
    binary = os.environ.get("KETCH_BIN") or REPO_ROOT / "target/release/ketch"
    return f"compat target: ketch ({binary})"


@pytest.fixture(scope="session")
def broker_target() -> str:
    """'ketch' or 'kafka'."""
    return TARGET


@pytest.fixture(scope="session")
def kafka_libs() -> Path:
    """Directory of Apache Kafka jars (classpath `kafka_libs / '*'`)."""
    return kafka_libs_dir()


@pytest.fixture
def start_broker(request, tmp_path_factory):
    """Factory: start_broker(overrides: dict | None = None, kind: str | None = None, extra_listeners=None) -> started Broker,
    cleaned up after the test. `kind` ("ketch" / "kafka") overrides KETCH_COMPAT_TARGET for that broker."""
    brokers: list[Broker] = []
    request.node._compat_brokers = brokers

    def factory(overrides: dict | None = None, kind: str | None = None, extra_listeners=None) -> Broker:
        kind = kind or TARGET  # "ketch" / "kafka": a test that needs both kinds (e.g. a migration)
        workdir = tmp_path_factory.mktemp(f"{kind}-broker", numbered=True)
        b: Broker = (KafkaBroker(workdir, overrides, extra_listeners=extra_listeners) if kind == "kafka"
                     else KetchBroker(workdir, overrides, extra_listeners=extra_listeners))
        brokers.append(b)
        error = None
        try:
            b.start()
        except BrokerStartError as e:
            error = str(e)
        if error is not None:
            b.may_exit = True  # reported here; teardown need not report the exit again
            pytest.fail(error, pytrace=False)
        return b

    yield factory
    errors = []
    for b in brokers:
        errors += b.health_problems()
        try:
            b.close()
        except Exception as e:  # never leave a process behind
            errors.append(f"{b}: {e!r}")
    if errors:
        raise RuntimeError("broker teardown problems: " + "; ".join(errors))


@pytest.fixture
def broker(request, start_broker) -> Broker:
    overrides: dict[str, str] = {}
    for mark in reversed(list(request.node.iter_markers("broker_config"))):
        overrides.update({k: str(v) for k, v in mark.kwargs.items()})
    return start_broker(overrides)


# The only skips that pass: each (the target it may skip on, the start of its reason), reviewed.
# Any other skip, of a test or of a whole file (an `importorskip` of a missing module, a tool this
# machine lacks), fails the run: a test that cannot run where CI runs must say so, not pass.
ALLOWED_SKIPS = [
    # What only Ketch has or does; the Kafka run leaves it out.
    ("kafka", "a quorum of Ketch"),
    ("kafka", "dynamic quorums of Ketch"),
    ("kafka", "a Ketch cluster"),
    ("kafka", "tests Ketch's container image"),
    ("kafka", "measures the Ketch process's memory"),
    ("kafka", "upgrade from an older Ketch's data directory"),
    ("kafka", "Ketch-only:"),
    ("kafka", "Kafka's broker answers a forwarded CreateTopics before applying the topic"),
    ("kafka", "Kafka on Java 17 cannot read a PBES2-encrypted PEM key"),
    # A developer's own log filter overrides what the test sets; CI sets none.
    ("ketch", "KETCH_LOG="),
]


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _judge_skip(report) -> None:
    """Turns a skip that is not on ALLOWED_SKIPS into a failure."""
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    if any(target == TARGET and reason.startswith(start) for target, start in ALLOWED_SKIPS):
        return
    report.outcome = "failed"
    report.longrepr = (f"skipped on target {TARGET}, and not on conftest.py's ALLOWED_SKIPS (a test that "
                       f"cannot run here fails): {reason}")


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _judge_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    _judge_skip(report)
    if report.failed:
        for i, b in enumerate(getattr(item, "_compat_brokers", []) or []):
            if b.log_path.exists():
                report.sections.append(
                    (f"{b.target} broker #{i} log ({b.log_path}, last {LOG_LINES} lines)", tail(b.log_path))
                )


def pytest_terminal_summary(terminalreporter):
    """Each failure's message again at the very end of the run (up to 40 lines each): a CI log is
    often read from its tail, and the broker logs of a failure's report push its message far up."""
    skipped = terminalreporter.stats.get("skipped", [])
    if skipped:
        terminalreporter.section(f"skips on the allow-list (ALLOWED_SKIPS, target {TARGET})")
        for report in skipped:
            terminalreporter.write_line(f"{report.nodeid}: {_skip_reason(report)[:200]}")
    failed = terminalreporter.stats.get("failed", []) + terminalreporter.stats.get("error", [])
    if not failed:
        return
    terminalreporter.section("failure messages (again, for a log read from its end)")
    for report in failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        message = crash.message if crash is not None else str(report.longrepr)
        lines = message.splitlines()
        terminalreporter.write_line(f"{report.nodeid}:")
        for line in lines[:40]:
            terminalreporter.write_line(f"    {line[:400]}")
        if len(lines) > 40:
            terminalreporter.write_line(f"    ... ({len(lines) - 40} more lines)")


def run_logged(cmd, timeout: float, what: str = "", **kw) -> subprocess.CompletedProcess:
    """Run a client command with a hard timeout; on failure, fail the test showing its output."""
    try:
        r = subprocess.run(
            [str(c) for c in cmd],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=_set_pdeathsig,
            **kw,
        )
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        pytest.fail(f"{what or cmd[0]} timed out after {timeout}s\n--- stdout ---\n{out}\n--- stderr ---\n{err}", pytrace=False)
    if r.returncode != 0:
        pytest.fail(
            f"{what or cmd[0]} exited {r.returncode}\n--- stdout ---\n{r.stdout}\n--- stderr ---\n{r.stderr[-20000:]}",
            pytrace=False,
        )
    return r


# ---------------------------------------------------------------------------------------------
# Go programs (compat-tests/go/<pkg>)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def java_compat_jar() -> Path:
    """Path of compat-tests/java built with Maven (rebuilt only when its sources change).

    Run it as: java -jar <jar> <bootstrap> <scenario> [args...]
    """
    return java_compat_jar_built()
