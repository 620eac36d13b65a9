"""Bench, the benchmark run of scripts/bench: its settings (from the mode and options), setup (Kafka
from Maven, builds, payload file, fsync probe), the brokers it keeps up, recording of values,
failures and CPU use, the helpers every workload uses (bench-client calls, measured runs, topic
deletion, log keeping) and run_all, the order of the workloads. The workloads themselves and the
report are mixins (workloads_throughput, workloads_footprint, report).
"""

from __future__ import annotations

import atexit
import datetime as dt
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from .brokers import Broker, Kafka, Ketch, Security
from .config import CARGO, GO, KAFKA_VERSION, REPO, SYSTEMS_ALL, WORKLOADS_ALL, WORKLOADS_OPT_IN, log
from .proc import RunFailed, children_cpu, cpu_s, run, tail_text
from .report import Report
from .workloads_cluster import ClusterWorkloads
from .workloads_footprint import FootprintWorkloads
from .workloads_throughput import ThroughputWorkloads


class Bench(ThroughputWorkloads, FootprintWorkloads, ClusterWorkloads, Report):
    """One benchmark run; the workloads and the report are methods from the mixins."""

    def __init__(self, args):
        self.args = args
        self.quick = args.quick
        q = self.quick
        self.runs = args.runs or (3 if q else 5)
        self.slow_runs = args.runs or (2 if q else 5)  # JVM tools, e2e
        self.produce_records = 300_000 if q else 1_000_000  # native client
        self.perf_records = 100_000 if q else 500_000  # ProducerPerformance (slower: JVM client)
        self.consume_records = (512 if q else 2048) * 1024  # 1 KiB records: 512 MiB / 2 GiB
        self.e2e_duration = 6 if q else 30
        self.e2e_warmup = 1 if q else 3
        self.e2e_rate = 5000
        self.settle = 5 if q else 15
        self.scale_duration = 60
        self.cluster_records = 300_000 if q else 1_000_000  # RF 3: every record is written 3 times
        self.cluster_runs = args.runs or (2 if q else 3)
        self.workloads = args.workloads or (WORKLOADS_ALL[:7] if q else [w for w in WORKLOADS_ALL if w not in WORKLOADS_OPT_IN])
        self.systems = args.systems or SYSTEMS_ALL
        ts = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        self.out = Path(args.out) if args.out else REPO / "bench-results" / ts
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "logs").mkdir(exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix="ketch-bench-", dir=args.tmp))
        if not args.keep_data:
            atexit.register(lambda: shutil.rmtree(self.tmp, ignore_errors=True))
        # results: metric key -> system -> list of per-run values; failures: (metric, system) -> reason
        self.values: dict[str, dict[str, list]] = {}
        self.failures: dict[tuple[str, str], str] = {}
        self.runs_log: list[dict] = []
        self.cpu: dict[str, dict[str, dict[str, list]]] = {}  # workload -> system -> {broker, client}
        self.brokers: dict[str, Broker] = {}
        self.notes: list[str] = []

    # ------------------------------------------------------------------ setup

    def setup(self):
        a = self.args
        log(f"results in {self.out}; temporary data in {self.tmp}")
        dest = REPO / "compat-tests/.cache" / ("kafka-libs" if KAFKA_VERSION == "4.1.0" else f"kafka-libs-{KAFKA_VERSION}")
        log(f"resolving Kafka {KAFKA_VERSION} from Maven (scripts/kafka-from-maven)")
        run([REPO / "scripts/kafka-from-maven", dest], 1800, "kafka-from-maven",
            env=dict(os.environ, KAFKA_VERSION=KAFKA_VERSION))
        self.libs = dest
        log("building scripts/bench-client (go build)")
        bindir = REPO / "target/bench"
        bindir.mkdir(parents=True, exist_ok=True)
        self.client_bin = bindir / "bench-client"
        run([GO, "build", "-o", self.client_bin, "."], 900, "go build bench-client", cwd=REPO / "scripts/bench-client",
            env=dict(os.environ, GOFLAGS="-mod=mod"))
        if a.ketch_bin:
            src = Path(a.ketch_bin)
        else:
            if not a.no_build:
                log("building ketch (cargo build --release)")
                run([CARGO, "build", "--release", "--bin", "ketch"], 3600, "cargo build --release", cwd=REPO)
            src = REPO / "target/release/ketch"
        if not src.is_file():
            raise SystemExit(f"bench: no ketch binary at {src}")
        # a private copy: a rebuild during the benchmark must not swap the binary under it
        self.ketch_bin = self.tmp / "ketch"
        shutil.copy2(src, self.ketch_bin)
        self.ketch_source = str(src)
        self.payload_file = self.tmp / "payload-1k.txt"
        self._write_payload_file()
        self.tools_log4j = self.tmp / "log4j2-tools.properties"
        self.tools_log4j.write_text(
            "status = warn\nappender.console.type = Console\nappender.console.name = STDERR\n"
            "appender.console.target = SYSTEM_ERR\nappender.console.layout.type = PatternLayout\n"
            "appender.console.layout.pattern = [%d] %p %m (%c)%n\nrootLogger.level = WARN\n"
            "rootLogger.appenderRef.stderr.ref = STDERR\n")
        if any(s.startswith("kafka") for s in self.systems):
            log("formatting a Kafka KRaft data directory (StorageTool, once)")
            Kafka.format_template(self.libs, self.tmp)
        self.git = self._git_info()
        self.fsync_us = self._fsync_latency()
        log(f"fsync latency of the data directory's disk: p50 {self.fsync_us[0]:.0f} µs, p99 {self.fsync_us[1]:.0f} µs")

    def _fsync_latency(self) -> tuple[float, float]:
        """4 KiB append + fsync, 200 times, in the temporary directory: what an acks=all fsync costs here."""
        path = self.tmp / "fsync-probe"
        lat = []
        with open(path, "wb") as f:
            for _ in range(200):
                f.write(b"x" * 4096)
                f.flush()
                t = time.perf_counter()
                os.fsync(f.fileno())
                lat.append((time.perf_counter() - t) * 1e6)
        path.unlink()
        lat.sort()
        return lat[len(lat) // 2], lat[int(len(lat) * 0.99) - 1]

    def _write_payload_file(self):
        # The same text-like 1 KiB payloads as bench-client, one per line, for ProducerPerformance.
        r = run([self.client_bin, "payload", "-size", "1024", "-lines", "4096"], 60, "bench-client payload")
        self.payload_file.write_text(r.stdout)

    def _git_info(self) -> str:
        try:
            rev = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], capture_output=True,
                                 text=True, timeout=10).stdout.strip()
            return rev or "?"
        except Exception:
            return "?"

    def new_broker(self, system: str, name: str, security: Security | None = None) -> Broker:
        wd = self.tmp / name
        if system.startswith("kafka"):
            return Kafka(system, wd, self.libs, security)
        return Ketch(system, wd, self.ketch_bin, security)

    # ------------------------------------------------------------------ recording

    def record(self, metric: str, system: str, value, extra: dict | None = None):
        self.values.setdefault(metric, {}).setdefault(system, []).append(value)
        self.runs_log.append({"metric": metric, "system": system, "value": value, **(extra or {})})

    def fail(self, metric: str, system: str, reason: str):
        log(f"FAILED {metric} on {system}: {reason[:400]}")
        self.failures.setdefault((metric, system), reason)
        self.runs_log.append({"metric": metric, "system": system, "failed": reason})

    def record_cpu(self, workload: str, system: str, broker_cores, client_cores):
        d = self.cpu.setdefault(workload, {}).setdefault(system, {"broker": [], "client": []})
        d["broker"].append(broker_cores)
        d["client"].append(client_cores)

    def record_cpu_per_gib(self, metric: str, system: str, res: dict):
        """Broker CPU-seconds per GiB moved, over the native client's measured window: what the broker
        spends, whether or not the client is the bottleneck."""
        gib = res.get("mb_per_s", 0) * res.get("seconds", 0) / 1024
        if gib > 0 and "broker_window_cpu_s" in res:
            self.record(metric, system, res["broker_window_cpu_s"] / gib)

    def record_throughput(self, metric: str, system: str, res: dict, detail: str = "") -> None:
        """A native-client run's MB/s under `metric`, its broker CPU per GiB under `cpu.<metric>`."""
        self.record(metric, system, res["mb_per_s"], res)
        self.record_cpu_per_gib("cpu." + metric, system, res)
        log(f"{metric} {system}: {res['mb_per_s']:.1f} MB/s{detail}")

    def order(self, systems: list[str], r: int) -> list[str]:
        k = r % len(systems)
        return systems[k:] + systems[:k]

    def client(self, *args, timeout: float = 600, what: str = "bench-client") -> dict:
        # flags before any "--" (startup passes the broker command after it)
        k = 2 if args and args[0] == "topic" else 1
        argv = [*args[:k], "-timeout", f"{int(timeout)}s", *args[k:]]
        r = run([self.client_bin, *argv], timeout + 30, what)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        if not lines:
            raise RunFailed(f"{what}: no JSON output; stderr: {tail_text(r.stderr)}")
        return json.loads(lines[-1])

    def live(self, system: str) -> Broker:
        b = self.brokers.get(system)
        if b is None or not b.alive():
            raise RunFailed(f"{system} broker is not running (see {b.log_path if b else '?'})")
        return b

    def measured(self, workload: str, system: str, fn):
        """Run fn(broker) -> result dict and record CPU use. The native client measures its own window
        (-broker-pid: broker CPU over exactly the measured part); for the JVM tools the window is the
        whole tool run, JVM start included. RunFailed propagates."""
        b = self.live(system)
        # Write back what earlier runs left in the page cache (Kafka and fsync-off Ketch leave
        # hundreds of MB dirty), so a run never pays for another system's writeback: with ext4's
        # ordered journal an fsync in this run would otherwise flush that data too.
        os.sync()
        c0, w0, k0 = cpu_s(b.pid), time.monotonic(), children_cpu()
        res = fn(b)
        wall = time.monotonic() - w0
        c1, k1 = cpu_s(b.pid), children_cpu()
        if res.get("window_s") and "broker_window_cpu_s" in res:
            w = res["window_s"]
            self.record_cpu(workload, system, res["broker_window_cpu_s"] / w, res["client_window_cpu_s"] / w)
        elif c0 is not None and c1 is not None and wall > 0:
            self.record_cpu(workload, system, (c1 - c0) / wall, (k1 - k0) / wall)
        return res

    # ------------------------------------------------------------------ shared by the workloads

    def _keep_log(self, b: Broker, name: str):
        try:
            shutil.copy2(b.log_path, self.out / "logs" / f"{name}.log")
        except OSError:
            pass

    def start_brokers(self):
        # A SASL_SSL listener too when its workload runs (on every main broker: the durability
        # variants do not run it, but one configuration for all keeps them comparable).
        security = Security(self.tmp / "security") if "sasl-ssl" in self.workloads else None
        for s in self.systems:
            log(f"starting {s}")
            b = self.new_broker(s, f"main-{s}", security)
            try:
                t = time.monotonic()
                b.start()
                self.brokers[s] = b
                log(f"{s} ready in {time.monotonic() - t:.1f}s on {b.bootstrap} (pid {b.pid})")
            except RunFailed as e:
                self.fail("broker start", s, str(e))
                self._keep_log(b, f"main-{s}")

    def _create_topic(self, s: str, topic: str):
        """A 6-partition topic for one measured run."""
        self.client("topic", "create", "-brokers", self.live(s).bootstrap, "-topic", topic, "-partitions", "6",
                    timeout=120, what="create topic")

    def _delete_topic(self, s: str, topic: str, timeout: float = 90):
        """Deletes a run's topic and waits until its partition directories are gone from the
        broker's data directory, so that no later run pays for removing them. On this disk (ext4
        mounted with `discard`) freeing hundreds of MB stalls writes and fsyncs for a moment.
        Ketch removes the files before it answers; Kafka renames the directories to `*-delete`
        and removes them in a background task (every `log.segment.delete.delay.ms`, set to 1 s for
        the benchmark, see brokers.Kafka; its first pass runs 30 s after start)."""
        b = self.live(s)
        try:
            self.client("topic", "delete", "-brokers", b.bootstrap, "-topic", topic, timeout=120,
                        what="delete topic")
        except RunFailed as e:
            log(f"(delete {topic} on {s} failed: {str(e)[:200]})")
            return
        deadline = time.monotonic() + timeout
        while any(p.name.startswith(f"{topic}-") for p in b.data.iterdir()):
            if time.monotonic() > deadline:
                log(f"({topic} on {s}: partition directories still there {timeout:.0f} s after the delete)")
                return
            time.sleep(0.1)

    # ------------------------------------------------------------------ main

    def run_all(self):
        started = time.monotonic()
        self.load_start = os.getloadavg()[0]
        self.setup()
        self.t_setup = time.monotonic() - started
        t0 = time.monotonic()
        steps = [w for w in WORKLOADS_ALL if w in self.workloads]
        if "startup" in steps:
            log("== startup: spawn -> first acked record")
            self._guard("startup", self.w_startup)
        if any(w in steps for w in ("idle", "produce", "producer-perf", "consume", "sasl-ssl", "e2e", "conns")):
            self.start_brokers()
        if "idle" in steps:  # first, while the brokers are fresh
            log("== idle")
            self._guard("idle", self.w_idle)
        if any(w in steps for w in ("produce", "producer-perf", "consume", "sasl-ssl", "e2e", "conns")):
            log("== warm-up (not measured)")
            self.warmup()
        for w, fn in (("produce", self.w_produce), ("producer-perf", self.w_producer_perf),
                      ("consume", self.w_consume), ("sasl-ssl", self.w_sasl_ssl), ("e2e", self.w_e2e),
                      ("conns", self.w_conns)):
            if w in steps:
                log(f"== {w}")
                self._guard(w, fn)
        for s in [s for s in self.brokers]:
            b = self.brokers[s]
            if not b.alive():
                self.notes.append(f"{s} broker died during the run (exit {b.proc.returncode}); log kept in logs/")
            self._keep_log(b, f"main-{s}")
        if "scale" in steps:
            log("== scale")
            self._guard("scale", self.w_scale)
        for s in list(self.brokers):
            self.brokers.pop(s).stop()
        if "cluster" in steps or "failover" in steps:  # after every single broker is stopped: one system's cluster at a time
            log("== cluster: 3 brokers under a controller, per system" + ("" if "cluster" in steps else " (failover only)"))
            self._guard("cluster", self.w_cluster)
        if "controller-failover" in steps:
            log("== controller-failover: kill -9 of the active controller of 3, per system")
            self._guard("controller-failover", self.w_controller_failover)
        self.t_bench = time.monotonic() - t0
        self.write_results()

    def _guard(self, name, fn):
        try:
            fn()
        except RunFailed as e:
            self.notes.append(f"workload {name} aborted: {e}")
            log(f"workload {name} aborted: {e}")
