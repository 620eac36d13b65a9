"""The footprint and scale workloads of scripts/bench, as a mixin of Bench: startup (spawn -> first
acked record), idle (RSS, CPU, 1,000 partitions), conns (1,000 concurrent clients) and scale
(10,000 partitions on a fresh broker, shutdown and restart).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import uuid

from .brokers import Kafka
from .config import DURABILITY_VARIANTS, log
from .proc import RssSampler, RunFailed, cpu_s, fd_count, free_port, reap, rss_mb, socket_count, spawn, tail_text


class FootprintWorkloads:
    """Workloads about what a broker costs and how it scales (methods of Bench)."""

    def w_startup(self):
        systems = [s for s in self.systems if s not in DURABILITY_VARIANTS]
        for r in range(self.runs):
            for s in self.order(systems, r):
                name = f"startup-{s}-{r}"
                b = self.new_broker(s, name)
                try:
                    if isinstance(b, Kafka):
                        b.prepare()
                        cmd = b.command()
                    else:
                        b.port = free_port()
                        cmd = b.command(b.port)
                    res = self.client("startup", "-brokers", b.bootstrap, "-log", b.log_path, "--", *cmd,
                                      timeout=300, what=f"startup {s}")
                    log(f"startup {s}: port open {res['port_open_ms']:.1f} ms, first acked record "
                        f"{res['first_produce_ms']:.1f} ms")
                    self.record("startup.first_produce_ms", s, res["first_produce_ms"], res)
                    self.record("startup.port_open_ms", s, res["port_open_ms"], res)
                except RunFailed as e:
                    self.fail("startup.first_produce_ms", s, str(e))
                    self._keep_log(b, name)
                finally:
                    shutil.rmtree(b.workdir, ignore_errors=True)

    def w_idle(self):
        live = [s for s in self.systems if s in self.brokers and s not in DURABILITY_VARIANTS]
        c0 = {s: cpu_s(self.brokers[s].pid) for s in live}
        time.sleep(self.settle)
        for s in live:
            b = self.brokers[s]
            if not b.alive():
                self.fail("idle.rss_mb", s, "broker died")
                continue
            self.record("idle.rss_mb", s, rss_mb(b.pid))
            c1 = cpu_s(b.pid)
            if c0[s] is not None and c1 is not None:
                self.record("idle.cpu_pct", s, 100 * (c1 - c0[s]) / self.settle)
            log(f"idle {s}: RSS {rss_mb(b.pid):.1f} MB")
        for s in live:
            try:
                res = self.client("topic", "create", "-brokers", self.live(s).bootstrap, "-topic", "idle-1000",
                                  "-partitions", "1000", timeout=300, what=f"create 1000 partitions on {s}")
                self.record("idle.create_1000_s", s, res["seconds"], res)
                log(f"{s}: 1,000 partitions created in {res['seconds']:.2f}s")
            except RunFailed as e:
                self.fail("idle.rss_1000_mb", s, str(e))
                self.fail("idle.create_1000_s", s, str(e))
        time.sleep(self.settle)
        for s in live:
            if ("idle.rss_1000_mb", s) in self.failures:
                continue
            b = self.brokers[s]
            if b.alive():
                self.record("idle.rss_1000_mb", s, rss_mb(b.pid))
                self.record("idle.fds_1000", s, fd_count(b.pid))
                log(f"idle {s} with 1,000 partitions: RSS {rss_mb(b.pid):.1f} MB")
            else:
                self.fail("idle.rss_1000_mb", s, "broker died")

    def w_conns(self):
        systems = [s for s in self.systems if s in self.brokers and s not in DURABILITY_VARIANTS]
        clients = 1000
        for r in range(max(1, self.runs // 2)):
            for s in self.order(systems, r):
                topic = f"conns-{r}-{uuid.uuid4().hex[:6]}"
                try:
                    b = self.live(s)
                    self._create_topic(s, topic)
                    rss0 = rss_mb(b.pid)
                    cmd = [self.client_bin, "conns", "-broker-pid", b.pid, "-brokers", b.bootstrap, "-topic", topic, "-clients", str(clients),
                           "-records-per-client", "100", "-size", "1024", "-hold", "3s", "-timeout", "600s"]
                    p = spawn(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                    got: dict = {}
                    err_lines: list[str] = []

                    def pump():
                        for line in p.stderr:
                            err_lines.append(line)
                            if line.startswith("CONNECTED"):
                                time.sleep(1.0)
                                got["rss"] = rss_mb(b.pid)
                                got["sockets"] = socket_count(b.pid)

                    t = threading.Thread(target=pump, daemon=True)
                    t.start()
                    killer = threading.Timer(660, p.kill)
                    killer.start()
                    try:
                        out = p.stdout.read()
                        p.wait()
                        t.join(10)
                    finally:
                        killer.cancel()
                        reap(p)
                    if p.returncode != 0:
                        raise RunFailed(f"conns exit {p.returncode}: {tail_text(''.join(err_lines))}")
                    res = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
                    self.record("conns.connect_s", s, res["connect_s"], res)
                    if res.get("window_s"):
                        self.record_cpu("1,000 clients produce at once", s, res["broker_window_cpu_s"] / res["window_s"],
                                        res["client_window_cpu_s"] / res["window_s"])
                    self.record("conns.mb_per_s", s, res["mb_per_s"])
                    self.record("conns.ack_p99_ms", s, res["ack_latency_ms_p99"])
                    if "rss" in got:
                        self.record("conns.rss_mb", s, got["rss"], {"rss_before_mb": rss0, "sockets": got["sockets"]})
                    log(f"conns {s}: {clients} clients connected in {res['connect_s']:.2f}s, broker RSS "
                        f"{got.get('rss', 0):.0f} MB with {got.get('sockets')} sockets, then {res['mb_per_s']:.1f} MB/s")
                except (RunFailed, ValueError, IndexError) as e:
                    for m in ("conns.connect_s", "conns.mb_per_s", "conns.ack_p99_ms", "conns.rss_mb"):
                        self.fail(m, s, str(e))
                self._delete_topic(s, topic)

    def w_scale(self):
        # a fresh broker per system, one at a time (the long-lived ones are stopped first)
        for s in list(self.brokers):
            self.brokers.pop(s).stop()
        systems = [s for s in self.systems if s not in DURABILITY_VARIANTS]
        topics = [f"scale-{i}" for i in range(10)]
        records = 5_000_000  # upper bound; each run stops after scale_duration
        for s in systems:
            name = f"scale-{s}"
            b = self.new_broker(s, name)
            try:
                b.start()
                self.brokers[s] = b
                t = time.monotonic()
                for tp in topics:  # one request per topic: Kafka refuses > 10,000 records per request
                    self.client("topic", "create", "-brokers", b.bootstrap, "-topic", tp, "-partitions", "1000",
                                timeout=900, what=f"create {tp} on {s}")
                created = time.monotonic() - t
                self.record("scale.create_s", s, created)
                log(f"scale {s}: 10,000 partitions created in {created:.1f}s")
                time.sleep(self.settle)
                self.record("scale.idle_rss_mb", s, rss_mb(b.pid))
                self.record("scale.open_fds", s, fd_count(b.pid))
                for acks in ("1", "all"):
                    with RssSampler([b.pid]) as smp:
                        res = self.measured(f"produce spread over 10k partitions acks={acks}", s, lambda b: self.client(
                            "produce", "-broker-pid", str(b.pid), "-brokers", b.bootstrap, "-topic", ",".join(topics), "-spread", "-records",
                            str(records), "-duration", f"{self.scale_duration}s", "-size", "1024", "-acks", acks,
                            "-compression", "none", timeout=self.scale_duration + 900,
                            what=f"produce 10k partitions {s}"))
                    self.record(f"scale.produce_acks{acks}", s, res["mb_per_s"], res)
                    self.record("scale.peak_rss_mb", s, smp.peak.get(b.pid))
                    log(f"scale {s}: produce over 10,000 partitions acks={acks}: {res['mb_per_s']:.1f} MB/s, "
                        f"peak RSS {smp.peak.get(b.pid, 0):.0f} MB")
                down = b.stop(timeout=600)
                self.record("scale.shutdown_s", s, down)
                log(f"scale {s}: clean shutdown in {down:.1f}s; restarting")
                if isinstance(b, Kafka):
                    b.prepare()
                    cmd = b.command()
                else:
                    b.port = free_port()
                    cmd = b.command(b.port)
                res = self.client("startup", "-brokers", b.bootstrap, "-topic", topics[-1], "-log",
                                  b.workdir / "restart.log", "--", *cmd, timeout=900, what=f"restart {s}")
                self.record("scale.restart_first_produce_s", s, res["first_produce_ms"] / 1000, res)
                log(f"scale {s}: restart -> first acked record {res['first_produce_ms'] / 1000:.2f}s")
            except RunFailed as e:
                for m in ("scale.create_s", "scale.idle_rss_mb", "scale.open_fds", "scale.produce_acks1", "scale.produce_acksall",
                          "scale.peak_rss_mb", "scale.shutdown_s", "scale.restart_first_produce_s"):
                    if m not in self.values or s not in self.values[m]:
                        self.fail(m, s, str(e))
                self._keep_log(b, name)
            finally:
                b.stop()
                self.brokers.pop(s, None)
                shutil.rmtree(b.workdir, ignore_errors=True)
