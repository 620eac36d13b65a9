"""The throughput and latency workloads of scripts/bench, as a mixin of Bench: the unmeasured
warm-up, produce (native client, and broker-bound raw requests of pre-built batches),
producer-perf (Kafka's ProducerPerformance), consume (native client, broker-bound raw fetches,
ConsumerPerformance), sasl-ssl (produce and consume over a SASL_SSL listener with SCRAM-SHA-512)
and e2e (end-to-end latency at a fixed rate).
"""

from __future__ import annotations

import re
import subprocess
import uuid

from .config import DURABILITY_VARIANTS, JAVA, KAFKA_TOOL_JVM, log
from .proc import RssSampler, RunFailed, run, tail_text


class ThroughputWorkloads:
    """Workloads that move data through the long-lived brokers (methods of Bench)."""

    def warmup(self):
        """Not measured: let the JVM compile its hot paths (and Ketch fault in its pages) before the
        throughput workloads, so the first measured runs do not pay for Kafka's JIT warm-up."""
        for s in [s for s in self.systems if s in self.brokers]:
            topic = f"warmup-{uuid.uuid4().hex[:6]}"
            try:
                b = self.live(s)
                self._create_topic(s, topic)
                n = str(self.produce_records // 2)
                for acks, comp in self._produce_configs():
                    self.client("produce", "-brokers", b.bootstrap, "-topic", topic, "-records", n, "-size", "1024",
                                "-acks", acks, "-compression", comp, timeout=600, what=f"warm-up produce {s}")
                self.client("consume", "-brokers", b.bootstrap, "-topic", topic, "-records", str(int(n) * 4),
                            timeout=600, what=f"warm-up consume {s}")
                log(f"warmed up {s}")
            except RunFailed as e:
                log(f"warm-up of {s} failed: {e}")
            self._delete_topic(s, topic)

    def _produce_configs(self):
        return [(acks, comp) for acks in ("1", "all") for comp in ("none", "lz4")]

    def _systems_for_acks(self, acks: str) -> list[str]:
        return [s for s in self.systems if s in self.brokers and (acks == "all" or s not in DURABILITY_VARIANTS)]

    def w_produce(self):
        peaks: dict[str, float] = {}
        for acks, comp in self._produce_configs():
            metric = f"produce.native.acks{acks}.{comp}"
            systems = self._systems_for_acks(acks)
            for r in range(self.runs):
                for s in self.order(systems, r):
                    topic = f"prod-{acks}-{comp}-{r}-{uuid.uuid4().hex[:6]}"
                    try:
                        b = self.live(s)
                        self._create_topic(s, topic)
                        with RssSampler([b.pid]) as smp:
                            res = self.measured(f"produce native acks={acks} {comp}", s, lambda b: self.client(
                                "produce", "-broker-pid", str(b.pid), "-brokers", b.bootstrap, "-topic", topic,
                                "-records", str(self.produce_records), "-size", "1024", "-acks", acks, "-compression", comp,
                                timeout=600, what=f"produce {s}"))
                        peaks[s] = max(peaks.get(s, 0), smp.peak.get(b.pid, 0))
                        self.record_throughput(metric, s, res, f" ({res['records_per_s']:.0f} rec/s)")
                    except RunFailed as e:
                        self.fail(metric, s, str(e))
                    # The same workload, broker-bound: batches built before the run, sent as they are.
                    raw = f"produce.raw.acks{acks}.{comp}"
                    try:
                        res = self.measured(f"produce raw acks={acks} {comp}", s, lambda b: self.client(
                            "produce-raw", "-broker-pid", str(b.pid), "-brokers", b.bootstrap, "-topic", topic,
                            "-records", str(self.produce_records), "-size", "1024", "-acks", acks, "-compression", comp,
                            timeout=600, what=f"produce-raw {s}"))
                        self.record_throughput(raw, s, res)
                    except RunFailed as e:
                        self.fail(raw, s, str(e))
                    self._delete_topic(s, topic)
        for s, p in peaks.items():
            self.record("load.peak_rss_mb", s, p)

    def java_tool(self, main_class: str, args: list[str], timeout: float, what: str) -> subprocess.CompletedProcess:
        return run([JAVA, *KAFKA_TOOL_JVM, f"-Dlog4j2.configurationFile={self.tools_log4j}", "-cp",
                    f"{self.libs}/*", main_class, *args], timeout, what)

    def w_producer_perf(self):
        pat = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency")
        n = self.perf_records
        for acks, comp in self._produce_configs():
            metric = f"produce.perf.acks{acks}.{comp}"
            systems = self._systems_for_acks(acks)
            for r in range(self.slow_runs):
                for s in self.order(systems, r):
                    topic = f"perf-{acks}-{comp}-{r}-{uuid.uuid4().hex[:6]}"
                    try:
                        b = self.live(s)
                        self._create_topic(s, topic)
                        out = self.measured(f"ProducerPerformance acks={acks} {comp} (*)", s, lambda b: {"out": self.java_tool(
                            "org.apache.kafka.tools.ProducerPerformance",
                            ["--topic", topic, "--num-records", str(n), "--throughput", "-1",
                             "--payload-file", str(self.payload_file), "--producer-props",
                             f"bootstrap.servers={b.bootstrap}", f"acks={acks}", f"compression.type={comp}"],
                            600, f"ProducerPerformance {s}").stdout})["out"]
                        m = None
                        for line in out.splitlines():
                            m = pat.search(line) or m
                        if not m or int(m.group(1)) != n:
                            raise RunFailed(f"ProducerPerformance output not understood: {tail_text(out)}")
                        mbs = float(m.group(3))
                        self.record(metric, s, mbs, {"records_per_s": float(m.group(2)), "avg_latency_ms": float(m.group(4))})
                        log(f"{metric} {s}: {mbs:.1f} MB/s")
                    except RunFailed as e:
                        self.fail(metric, s, str(e))
                    self._delete_topic(s, topic)

    def w_consume(self):
        systems = [s for s in self.systems if s in self.brokers and s not in DURABILITY_VARIANTS]
        n = self.consume_records
        topic = "consume-big"
        loaded = []
        for s in systems:
            try:
                b = self.live(s)
                self._create_topic(s, topic)
                log(f"filling {topic} on {s} with {n * 1024 // 2**20} MiB")
                res = self.client("produce", "-brokers", b.bootstrap, "-topic", topic, "-records", str(n),
                                  "-size", "1024", "-acks", "1", "-compression", "none", timeout=1800,
                                  what=f"fill {s}")
                log(f"filled {s} at {res['mb_per_s']:.1f} MB/s")
                loaded.append(s)
            except RunFailed as e:
                for metric in ("consume.native", "consume.raw", "consume.perf"):
                    self.fail(metric, s, str(e))
        for r in range(self.runs):
            for s in self.order(loaded, r):
                try:
                    res = self.measured("consume (native)", s, lambda b: self.client(
                        "consume", "-broker-pid", str(b.pid), "-brokers", b.bootstrap, "-topic", topic, "-records", str(n),
                        timeout=900,
                        what=f"consume {s}"))
                    self.record_throughput("consume.native", s, res)
                except RunFailed as e:
                    self.fail("consume.native", s, str(e))
        for r in range(self.runs):
            for s in self.order(loaded, r):
                try:
                    res = self.measured("consume (raw)", s, lambda b: self.client(
                        "consume-raw", "-broker-pid", str(b.pid), "-brokers", b.bootstrap, "-topic", topic,
                        "-records", str(n), "-size", "1024", timeout=900, what=f"consume-raw {s}"))
                    self.record_throughput("consume.raw", s, res, f" ({res['fetches']} fetches)")
                except RunFailed as e:
                    self.fail("consume.raw", s, str(e))
        for r in range(self.slow_runs):
            for s in self.order(loaded, r):
                try:
                    out = self.measured("ConsumerPerformance (*)", s, lambda b: {"out": self.java_tool(
                        "org.apache.kafka.tools.ConsumerPerformance",
                        ["--bootstrap-server", b.bootstrap, "--topic", topic, "--messages", str(n),
                         "--group", f"perf-{uuid.uuid4().hex[:8]}", "--timeout", "60000"],
                        900, f"ConsumerPerformance {s}").stdout})["out"]
                    rows = [ln for ln in out.splitlines() if ln.count(",") >= 9 and not ln.startswith("start.time")]
                    if not rows:
                        raise RunFailed(f"ConsumerPerformance output not understood: {tail_text(out)}")
                    f = [x.strip() for x in rows[-1].split(",")]
                    # start, end, MB, MB.sec, nMsg, nMsg.sec, rebalance.ms, fetch.ms, fetch.MB.sec, fetch.nMsg.sec
                    if int(f[4]) < n:
                        raise RunFailed(f"ConsumerPerformance read {f[4]} of {n} records")
                    self.record("consume.perf", s, float(f[8]), {"mb_per_s_total": float(f[3]),
                                                               "rebalance_ms": float(f[6]), "fetch_ms": float(f[7])})
                    log(f"consume.perf {s}: fetch {float(f[8]):.1f} MB/s (with group join {float(f[3]):.1f})")
                except (RunFailed, ValueError, IndexError) as e:
                    self.fail("consume.perf", s, str(e))

    def w_sasl_ssl(self):
        """Produce (native and broker-bound, acks=1, no compression) and consume (native) over
        each broker's SASL_SSL listener (TLS with a PEM keystore, SCRAM-SHA-512), as the user the
        benchmark creates first through AlterUserScramCredentials on the PLAINTEXT listener."""
        systems = [s for s in self.systems if s in self.brokers and s not in DURABILITY_VARIANTS]
        ready = []
        for s in systems:
            b = self.live(s)
            sec = b.security
            try:
                self.client("scram-user", "-brokers", b.bootstrap, "-user", sec.USER, "-password", sec.PASSWORD,
                            "-mechanism", sec.MECHANISM, timeout=60, what=f"scram-user {s}")
                ready.append(s)
            except RunFailed as e:
                for metric in ("sasl_ssl.produce.native", "sasl_ssl.produce.raw", "sasl_ssl.consume.native"):
                    self.fail(metric, s, str(e))
        n = str(self.produce_records)
        for r in range(self.runs):
            for s in self.order(ready, r):
                topic = f"sasl-{r}-{uuid.uuid4().hex[:6]}"
                b = self.live(s)
                over = ["-brokers", b.sasl_bootstrap, *b.security.client_flags(), "-topic", topic]
                try:
                    self._create_topic(s, topic)
                    for mode, metric in (("produce", "sasl_ssl.produce.native"), ("produce-raw", "sasl_ssl.produce.raw")):
                        res = self.measured(f"SASL_SSL {mode} acks=1 none", s, lambda b: self.client(
                            mode, "-broker-pid", str(b.pid), *over, "-records", n, "-size", "1024", "-acks", "1",
                            "-compression", "none", timeout=600, what=f"SASL_SSL {mode} {s}"))
                        self.record_throughput(metric, s, res)
                    # both runs wrote n records: read them all back
                    res = self.measured("SASL_SSL consume", s, lambda b: self.client(
                        "consume", "-broker-pid", str(b.pid), *over, "-records", str(2 * int(n)), timeout=600,
                        what=f"SASL_SSL consume {s}"))
                    self.record_throughput("sasl_ssl.consume.native", s, res)
                except RunFailed as e:
                    self.fail("sasl_ssl", s, str(e))
                self._delete_topic(s, topic)

    def w_e2e(self):
        systems = [s for s in self.systems if s in self.brokers]
        for r in range(self.slow_runs):
            for s in self.order(systems, r):
                topic = f"e2e-{r}-{uuid.uuid4().hex[:6]}"
                try:
                    b = self.live(s)
                    self._create_topic(s, topic)
                    res = self.measured("e2e latency (5k/s)", s, lambda b: self.client(
                        "e2e", "-broker-pid", str(b.pid), "-brokers", b.bootstrap, "-topic", topic, "-rate", str(self.e2e_rate),
                        "-duration", f"{self.e2e_duration}s", "-warmup", f"{self.e2e_warmup}s", "-size", "1024",
                        "-acks", "all", timeout=self.e2e_duration + self.e2e_warmup + 120, what=f"e2e {s}"))
                    for k in ("p50_us", "p99_us", "p999_us"):
                        self.record(f"e2e.{k}", s, res[k], res if k == "p50_us" else None)
                    log(f"e2e {s}: p50 {res['p50_us']:.0f} µs, p99 {res['p99_us']:.0f} µs, "
                        f"p99.9 {res['p999_us']:.0f} µs (rate {res['achieved_rate']:.0f}/s)")
                except RunFailed as e:
                    for k in ("p50_us", "p99_us", "p999_us"):
                        self.fail(f"e2e.{k}", s, str(e))
                self._delete_topic(s, topic)
