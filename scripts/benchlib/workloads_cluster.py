"""The cluster workload of scripts/bench, as a mixin of Bench: three brokers under a controller of
the same kind (benchlib.cluster), one system's cluster at a time, alternating the systems run by
run. Each run starts a fresh cluster, measures acks=all produce throughput and end-to-end latency
on a topic of replication factor 3 (min.insync.replicas=2), then the failover of a
1,000-partition RF 3 topic when broker 2 is killed with SIGKILL, and kills the cluster before the
next system's run starts. `--workloads failover` (without cluster) runs the failover step only,
after the same start and warm-up.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid

from .cluster import Cluster, KafkaCluster, KetchCluster
from .config import log
from .proc import RunFailed, cpu_s

CLUSTER_METRICS = ["cluster.produce.acksall", "cluster.e2e.p50_us", "cluster.e2e.p99_us", "cluster.e2e.p999_us"]
FAILOVER_METRICS = ["cluster.failover.all_ms", "cluster.failover.p50_ms", "cluster.failover.first_ms"]
RF3 = "min.insync.replicas=2"
KILLED = 2  # node id of the broker killed in the failover measurement


class ClusterWorkloads:
    """The 3-vs-3 cluster comparison (methods of Bench)."""

    def new_cluster(self, system: str, name: str, controllers: int = 1) -> Cluster:
        root = self.tmp / name
        if system == "kafka":
            return KafkaCluster(system, root, self.libs, controllers)
        return KetchCluster(system, root, self.ketch_bin, controllers)

    def w_controller_failover(self):
        """Three controllers (a KRaft quorum) and three brokers per system and run: the active
        controller killed (-9) by the client, which then creates a topic (RF 3) through the brokers
        until it exists and waits until its partition has a leader and a full ISR."""
        systems = [s for s in self.systems if s in ("kafka", "ketch")]
        self.notes.append(
            "controller-failover: per system and run a fresh quorum of 3 controllers (nodes 3000-3002, static "
            "controller.quorum.voters, Kafka's default controller.quorum.election.timeout.ms=1000 and "
            "fetch.timeout.ms=2000 on both) and brokers 1-3; after a warm-up topic and 2 s idle, the active controller "
            "(the leader the controllers' quorum-state files name) is killed with SIGKILL by the client, which then "
            "sends CreateTopics (1 partition, RF 3) through the brokers every 10 ms (2 s per attempt) until the topic "
            "exists, then polls the Metadata until its partition has a leader and all 3 replicas in the ISR")
        for r in range(self.cluster_runs):
            for s in self.order(systems, r):
                name = f"ctlfail-{s}-{r}"
                c = self.new_cluster(s, name, controllers=3)
                try:
                    log(f"controller-failover {s}: starting 3 controllers and 3 brokers")
                    c.start()
                    self._cluster_topic(c, "ctl-warm", 1)
                    victim = c.active_controller()
                    res = self.client("controller-failover", "-brokers", c.bootstrap, "-topic", "ctl-after",
                                      "-kill-pid", str(victim.pid), "-rf", "3", timeout=180,
                                      what=f"controller failover {s}")
                    self.record("controller.failover.created_ms", s, res["created_ms"], dict(res, killed=victim.node_id))
                    self.record("controller.failover.ready_ms", s, res["ready_ms"])
                    log(f"controller-failover {s}: controller {victim.node_id} killed; topic created "
                        f"{res['created_ms']:.0f} ms later ({res['create_attempts']} attempts), leader and ISR "
                        f"{res['ready_ms']:.0f} ms after the kill")
                except (RunFailed, KeyError) as e:
                    for m in ("controller.failover.created_ms", "controller.failover.ready_ms"):
                        self.fail(m, s, str(e))
                self._keep_cluster_logs(c, name)
                c.stop()
                self._remove_cluster(c)

    def w_cluster(self):
        systems = [s for s in self.systems if s != "kafka-fsync"]
        self.notes.append(
            "cluster: per system and run a fresh controller (node 3000, process.roles=controller) and brokers "
            "1-3 (process.roles=broker) of that system, started after the previous system's cluster was killed; "
            "broker.session.timeout.ms=3000 and broker.heartbeat.interval.ms=500 for both systems; Kafka's 4 "
            f"JVMs with kafka-server-start.sh's options; {self.cluster_records:,} records per produce run; "
            f"failover: after one acknowledged write on each of the 1,000 partitions and 2 s idle, broker {KILLED} killed with SIGKILL by the client, which then retries a 1 KiB acks=all "
            "write on every partition that broker led (10 ms backoff, metadata at most 10 ms old) until each "
            "is acknowledged")
        failover_only = "cluster" not in self.workloads
        for r in range(self.cluster_runs):
            for s in self.order(systems, r):
                name = f"cluster-{s}-{r}"
                c = self.new_cluster(s, name)
                try:
                    log(f"cluster {s}: starting a controller and 3 brokers")
                    t = time.monotonic()
                    c.start()
                    self._cluster_topic(c, "rf3-warm", 6)
                    self.record("cluster.start_s", s, time.monotonic() - t)
                    log(f"cluster {s}: 3 brokers registered, {time.monotonic() - t:.1f}s after spawn")
                    # unmeasured warm-up (JIT, connections), as for the single brokers
                    self.client("produce", "-brokers", c.bootstrap, "-topic", "rf3-warm", "-records",
                                str(self.cluster_records // 4), "-size", "1024", "-acks", "all", timeout=300,
                                what=f"cluster warm-up {s}")
                except RunFailed as e:
                    for m in ([] if failover_only else CLUSTER_METRICS) + FAILOVER_METRICS:
                        self.fail(m, s, f"cluster start: {e}")
                    self._keep_cluster_logs(c, name)
                    c.stop()
                    self._remove_cluster(c)
                    continue
                if not failover_only:
                    self._cluster_produce(c, s)
                    self._cluster_e2e(c, s, r)
                self._cluster_failover(c, s)
                # kept whether or not a step failed: the failover's timeline is in them (the
                # controller's fencing, the brokers' leadership changes; the client gives the kill time)
                self._keep_cluster_logs(c, name)
                c.stop()
                self._remove_cluster(c)

    def _remove_cluster(self, c: Cluster):
        """Removes a killed cluster's data (GBs) and lets the disk settle (written back, 5 s), so the
        next system's run does not pay for the discards of this one's files."""
        shutil.rmtree(c.root, ignore_errors=True)
        os.sync()
        time.sleep(5)

    def _cluster_topic(self, c: Cluster, topic: str, partitions: int):
        """RF 3, min.insync.replicas=2; waits for 3 registered brokers, then for a leader and a full
        ISR on every partition."""
        self.client("topic", "create", "-brokers", c.bootstrap, "-topic", topic, "-partitions", str(partitions),
                    "-rf", "3", "-configs", RF3, "-wait-brokers", "3", timeout=300, what=f"create {topic}")

    def _cluster_cpu(self, c: Cluster) -> float:
        return sum(v for v in (cpu_s(p) for p in c.pids()) if v is not None)

    def _cluster_produce(self, c: Cluster, s: str) -> bool:
        metric = "cluster.produce.acksall"
        try:
            self._cluster_topic(c, "rf3-produce", 6)
            os.sync()
            c0 = self._cluster_cpu(c)
            res = self.client("produce", "-brokers", c.bootstrap, "-topic", "rf3-produce", "-records",
                              str(self.cluster_records), "-size", "1024", "-acks", "all", timeout=900,
                              what=f"cluster produce {s}")
            w = res["window_s"]
            # replication check: the topic's bytes on each broker's disk (each should hold ~all of it)
            res["replica_mib"] = {n: round(sum(f.stat().st_size for d in b.data.glob("rf3-produce-*")
                                                for f in d.rglob("*") if f.is_file()) / 2**20, 1)
                                  for n, b in c.brokers.items()}
            self.record_cpu("cluster produce acks=all (4 processes)", s, (self._cluster_cpu(c) - c0) / w,
                            res["client_window_cpu_s"] / w)
            self.record(metric, s, res["mb_per_s"], res)
            log(f"{metric} {s}: {res['mb_per_s']:.1f} MB/s (ack p99 {res['ack_latency_ms_p99']:.1f} ms; "
                f"MiB on disk per broker {res['replica_mib']})")
            return True
        except (RunFailed, KeyError) as e:
            self.fail(metric, s, str(e))
            return False

    def _cluster_e2e(self, c: Cluster, s: str, r: int) -> bool:
        topic = f"rf3-e2e-{r}-{uuid.uuid4().hex[:6]}"
        try:
            self._cluster_topic(c, topic, 6)
            os.sync()
            res = self.client("e2e", "-brokers", c.bootstrap, "-topic", topic, "-rate", str(self.e2e_rate),
                              "-duration", f"{self.e2e_duration}s", "-warmup", f"{self.e2e_warmup}s", "-size", "1024",
                              "-acks", "all", timeout=self.e2e_duration + self.e2e_warmup + 120, what=f"cluster e2e {s}")
            for k in ("p50_us", "p99_us", "p999_us"):
                self.record(f"cluster.e2e.{k}", s, res[k], res if k == "p50_us" else None)
            log(f"cluster e2e {s}: p50 {res['p50_us']:.0f} µs, p99 {res['p99_us']:.0f} µs, "
                f"p99.9 {res['p999_us']:.0f} µs (rate {res['achieved_rate']:.0f}/s)")
            return True
        except RunFailed as e:
            for k in ("p50_us", "p99_us", "p999_us"):
                self.fail(f"cluster.e2e.{k}", s, str(e))
            return False

    def _cluster_failover(self, c: Cluster, s: str) -> bool:
        try:
            t = time.monotonic()
            self._cluster_topic(c, "failover-1000", 1000)
            created = time.monotonic() - t
            victim = c.brokers[KILLED]
            res = self.client("failover", "-brokers", c.bootstrap, "-topic", "failover-1000", "-node", str(KILLED),
                              "-kill-pid", str(victim.pid), "-acks", "all", timeout=180, what=f"cluster failover {s}")
            per = res.pop("per_partition_ms", {})
            # created (leaders and ISR in the Metadata) -> one acks=all write acknowledged on each
            self.record("cluster.create_1000_rf3_s", s, created + res["warmup_all_acked_ms"] / 1000)
            for k in ("all_ms", "p50_ms", "first_ms"):
                self.record(f"cluster.failover.{k}", s, res[k], dict(res, per_partition_ms=per) if k == "all_ms" else None)
            log(f"cluster failover {s}: killed at unix ms {res['killed_at_unix_ms']}; broker {KILLED} led {res['led']} of 1,000 partitions; all of them "
                f"writable again {res['all_ms']:.0f} ms after kill -9 (first {res['first_ms']:.0f} ms, "
                f"median {res['p50_ms']:.0f} ms)")
            return True
        except (RunFailed, KeyError) as e:
            for m in FAILOVER_METRICS:
                self.fail(m, s, str(e))
            return False

    def _keep_cluster_logs(self, c: Cluster, name: str):
        for n in c.nodes:
            try:
                shutil.copy2(n.log_path, self.out / "logs" / f"{name}-node{n.node_id}.log")
            except OSError:
                pass
