"""Run Kafka's command-line tools (main classes from the Maven jars: kafka-tools, kafka_2.13) against
a test broker, with a hard timeout, capturing their output.

    kt = KafkaTools(kafka_libs, broker, tmp_path)
    r = kt.run("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", broker.bootstrap, "--list")
    r.out        stdout + stderr
    r.apis       on the kafka target with KETCH_COMPAT_KAFKA_REQUEST_LOG=1: the requests the tool sent,
                 [(api name, version, error names)], read from the broker's request log

Every run prints the command, its exit code, time, output and (when known) the APIs it used, so a
failing test (or `pytest -s`) shows the whole conversation. `check=True` (default) fails the test
on a non-zero exit; `check=False` returns the result for the test to judge. A timeout always fails
the test, with whatever the tool printed until then.

`kt.start(main_class, *args)` runs a tool in the background instead (e.g. VerifiableProducer /
VerifiableConsumer, which print one JSON event per line until stopped): a `BackgroundTool` whose
stdout and stderr go to files in the work dir; `.events()` parses the JSON lines printed so far,
`.stop()` sends SIGTERM (the tools' shutdown hooks close the client and print their last events)
and waits for the exit.

The JVM runs with C1 only (`-XX:TieredStopAtLevel=1`): a tool is short-lived, and this halves its
start on 2 cores. It also maps the Kafka broker's class-data-sharing archive (conftest's
kafka_cds_options; same jars, same classpath), which halves the start again (`TopicCommand --list`:
1.65 s without it, 0.78 s with it). Without an archive (KETCH_COMPAT_KAFKA_CDS=0, or making it
failed) the JVM's default one is used.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import TARGET, _reap, _set_pdeathsig, _spawn, kafka_cds_options

TOOL_LOG4J = """status = warn
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
"""

REQUEST_LOG = TARGET == "kafka" and bool(os.environ.get("KETCH_COMPAT_KAFKA_REQUEST_LOG"))
_REQ_RE = re.compile(r"Completed request:(\{.*\}) \(kafka\.request\.logger\)\s*$")

# error codes that show up in tool conversations (kafka.common.protocol.Errors)
ERROR_NAMES = {
    -1: "UNKNOWN_SERVER_ERROR", 1: "OFFSET_OUT_OF_RANGE", 2: "CORRUPT_MESSAGE", 3: "UNKNOWN_TOPIC_OR_PARTITION",
    4: "INVALID_FETCH_SIZE", 5: "LEADER_NOT_AVAILABLE", 6: "NOT_LEADER_OR_FOLLOWER", 7: "REQUEST_TIMED_OUT",
    10: "MESSAGE_TOO_LARGE", 14: "COORDINATOR_LOAD_IN_PROGRESS", 15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR", 17: "INVALID_TOPIC_EXCEPTION", 18: "RECORD_LIST_TOO_LARGE", 22: "ILLEGAL_GENERATION",
    25: "UNKNOWN_MEMBER_ID", 27: "REBALANCE_IN_PROGRESS", 35: "UNSUPPORTED_VERSION", 36: "TOPIC_ALREADY_EXISTS",
    37: "INVALID_PARTITIONS", 38: "INVALID_REPLICATION_FACTOR", 39: "INVALID_REPLICA_ASSIGNMENT",
    40: "INVALID_CONFIG", 41: "NOT_CONTROLLER", 42: "INVALID_REQUEST", 44: "POLICY_VIOLATION",
    45: "OUT_OF_ORDER_SEQUENCE_NUMBER", 46: "DUPLICATE_SEQUENCE_NUMBER", 47: "INVALID_PRODUCER_EPOCH",
    48: "INVALID_TXN_STATE", 49: "INVALID_PRODUCER_ID_MAPPING", 50: "INVALID_TRANSACTION_TIMEOUT",
    51: "CONCURRENT_TRANSACTIONS", 53: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", 54: "SECURITY_DISABLED",
    56: "KAFKA_STORAGE_ERROR", 57: "LOG_DIR_NOT_FOUND", 59: "UNKNOWN_PRODUCER_ID", 69: "GROUP_ID_NOT_FOUND",
    74: "FENCED_LEADER_EPOCH", 75: "UNKNOWN_LEADER_EPOCH", 79: "MEMBER_ID_REQUIRED", 84: "ELECTION_NOT_NEEDED",
    85: "NO_REASSIGNMENT_IN_PROGRESS", 89: "THROTTLING_QUOTA_EXCEEDED", 90: "PRODUCER_FENCED",
    100: "UNKNOWN_TOPIC_ID",
}


@dataclass
class ToolResult:
    what: str
    returncode: int
    stdout: str
    stderr: str
    elapsed: float
    apis: list[tuple[str, int, tuple[str, ...]]] = field(default_factory=list)
    main_class: str = ""

    @property
    def out(self) -> str:
        return self.stdout + self.stderr

    def api_summary(self) -> str:
        """'API_VERSIONS v4, METADATA v13, CREATE_TOPICS v7 [INVALID_PARTITIONS]' (first use order)."""
        seen: dict[tuple[str, int], set[str]] = {}
        for name, version, errors in self.apis:
            seen.setdefault((name, version), set()).update(errors)
        return ", ".join(f"{n} v{v}" + (f" [{' '.join(sorted(e))}]" if e else "") for (n, v), e in seen.items())


def _errors(obj, acc: set[str]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "errorCode" and isinstance(v, int) and v != 0:
                acc.add(ERROR_NAMES.get(v, f"error{v}"))
            else:
                _errors(v, acc)
    elif isinstance(obj, list):
        for v in obj:
            _errors(v, acc)


def requests_in(log_path: Path, start: int) -> list[tuple[str, int, tuple[str, ...]]]:
    """Java client requests (PLAINTEXT listener) logged by Kafka's request logger after byte `start`."""
    try:
        with open(log_path, "rb") as f:
            f.seek(start)
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    out = []
    for line in data.splitlines():
        m = _REQ_RE.search(line)
        if not m:
            continue
        try:
            d = json.loads(m.group(1))
        except ValueError:
            continue
        if d.get("listener") != "PLAINTEXT" or d.get("isForwarded"):
            continue
        h = d.get("requestHeader", {})
        # only the (Java) tool: librdkafka clients writing a test's setup data may be logged late
        # (client id "rdkafka"; a connection's first ApiVersions shows software "unknown")
        software = (d.get("clientInformation") or {}).get("softwareName")
        if h.get("clientId") == "rdkafka" or software not in ("apache-kafka-java", "unknown"):
            continue
        errs: set[str] = set()
        _errors(d.get("response"), errs)
        out.append((h.get("requestApiKeyName", str(h.get("requestApiKey"))), h.get("requestApiVersion"),
                    tuple(sorted(errs))))
    return out


class BackgroundTool:
    """A tool process started by `KafkaTools.start`: stdout in `stdout_path`, stderr in `stderr_path`.
    Only the thread that started it should use it (its child dies with that thread: PR_SET_PDEATHSIG)."""

    def __init__(self, what: str, proc, stdout_path: Path, stderr_path: Path):
        self.what, self.proc = what, proc
        self.stdout_path, self.stderr_path = stdout_path, stderr_path
        self.started = time.monotonic()
        self._read = 0  # bytes of stdout parsed so far (complete lines only)
        self._events: list[dict] = []
        self.other_lines: list[str] = []  # stdout lines that are not JSON
        self.stopped = False  # stop() or kill() was called

    def alive(self) -> bool:
        return self.proc.poll() is None

    def events(self, name: str | None = None) -> list[dict]:
        """The JSON lines printed so far (parsed once each), all or those with `"name": name`."""
        with open(self.stdout_path, "rb") as f:
            f.seek(self._read)
            data = f.read()
        end = data.rfind(b"\n") + 1
        for line in data[:end].decode("utf-8", "replace").splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                self._events.append(json.loads(line))
            except ValueError:
                self.other_lines.append(line)
        self._read += end
        return self._events if name is None else [e for e in self._events if e.get("name") == name]

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        """Signal the tool and wait for its exit (SIGKILL after `timeout`); returns its exit code
        (-9 when it had to be killed)."""
        self.stopped = True
        _reap(self.proc, sig, timeout)
        rc = self.proc.returncode
        print(f"$ {self.what}    (stopped with signal {int(sig)}: exit {rc}, "
              f"{time.monotonic() - self.started:.1f}s; stdout {self.stdout_path}, stderr {self.stderr_path})")
        return rc

    def kill(self) -> None:
        self.stopped = True
        if self.proc.poll() is None:
            _reap(self.proc, signal.SIGKILL, 30)


class KafkaTools:
    """Runs tool main classes against `broker` (whose bootstrap is read at each run)."""

    JVM_OPTS = ["-XX:TieredStopAtLevel=1", "-Xms64m", "-Xmx256m"]

    def __init__(self, kafka_libs: Path, broker, workdir: Path):
        self.libs = Path(kafka_libs)
        self.broker = broker
        self.workdir = Path(workdir)
        self.log4j = self.workdir / "log4j2-tools.properties"
        self.log4j.write_text(TOOL_LOG4J)
        self.history: list[ToolResult] = []
        self.background = 0  # tools started with start()

    def command(self, main_class: str, *args, log4j: Path | None = None) -> list[str]:
        return ["java", *self.JVM_OPTS, *kafka_cds_options(self.libs),
                f"-Dlog4j2.configurationFile={log4j or self.log4j}",
                "-cp", f"{self.libs}/*", main_class, *map(str, args)]

    def start(self, main_class: str, *args, what: str | None = None,
              loggers: dict[str, str] | None = None) -> BackgroundTool:
        """Start a tool in the background (see BackgroundTool). `loggers`: extra log4j levels for its
        stderr, e.g. {"org.apache.kafka.clients.consumer.internals.AbstractCoordinator": "INFO"}."""
        self.background += 1
        short = main_class.rsplit(".", 1)[-1]
        what = what or f"{short} {' '.join(map(str, args))}"
        base = self.workdir / f"{short}-{self.background}"
        log4j = None
        if loggers:
            log4j = base.with_suffix(".log4j2.properties")
            log4j.write_text(TOOL_LOG4J + "".join(
                f"logger.l{i}.name = {name}\nlogger.l{i}.level = {level}\n"
                for i, (name, level) in enumerate(loggers.items())))
        out, err = base.with_suffix(".stdout"), base.with_suffix(".stderr")
        with open(out, "wb") as o, open(err, "wb") as e:
            proc = _spawn(self.command(main_class, *args, log4j=log4j), stdin=subprocess.DEVNULL, stdout=o, stderr=e)
        print(f"$ {what}    (started in the background, pid {proc.pid})")
        return BackgroundTool(what, proc, out, err)

    def run(self, main_class: str, *args, timeout: float = 60, input: str | None = None,
            check: bool = True, what: str | None = None) -> ToolResult:
        short = main_class.rsplit(".", 1)[-1]
        what = what or f"{short} {' '.join(map(str, args))}"
        log_start = self.broker.log_path.stat().st_size if REQUEST_LOG and self.broker.log_path.exists() else 0
        t0 = time.monotonic()
        try:
            p = subprocess.run(self.command(main_class, *args), input=input if input is not None else "",
                               capture_output=True, text=True, timeout=timeout, preexec_fn=_set_pdeathsig)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
            apis = self._apis(log_start)
            r = ToolResult(what, -9, out, err, time.monotonic() - t0, apis, main_class)
            self.history.append(r)
            self._print(r)
            pytest.fail(f"{what}: timed out after {timeout}s\n--- stdout ---\n{out[-10000:]}\n--- stderr ---\n"
                        f"{err[-10000:]}" + (f"\n--- APIs sent ---\n{r.api_summary()}" if apis else ""),
                        pytrace=False)
        r = ToolResult(what, p.returncode, p.stdout, p.stderr, time.monotonic() - t0, self._apis(log_start), main_class)
        self.history.append(r)
        self._print(r)
        if check and r.returncode != 0:
            pytest.fail(f"{what}: exited {r.returncode}\n--- stdout ---\n{r.stdout[-10000:]}\n--- stderr ---\n"
                        f"{r.stderr[-10000:]}", pytrace=False)
        return r

    def _apis(self, log_start: int):
        if not REQUEST_LOG:
            return []
        time.sleep(0.3)  # the request logger writes once a response is sent: let the last lines land
        return requests_in(self.broker.log_path, log_start)

    @staticmethod
    def _print(r: ToolResult) -> None:
        print(f"$ {r.what}    (exit {r.returncode}, {r.elapsed:.1f}s)")
        if r.out.strip():
            print(r.out.rstrip()[-20000:])
        if r.apis:
            print(f"  [APIs] {r.api_summary()}")
        print()
