"""The fault suite (issue 15): a Ketch cluster with no single point of failure (three Ketch
controllers in a KRaft quorum, three Ketch brokers, every node in its own network namespace) under
a workload of real librdkafka clients while a nemesis kills, pauses and cuts off nodes; then
fault_checker.py checks every acknowledged write and every consumed record.

Workload (fault_workload.py): an idempotent acks=all producer (topic `acked`), a transactional
producer committing and aborting (topic `txns`), a read_committed consumer group reading both;
both topics have 3 partitions, replication factor 3, min.insync.replicas=2.

Faults, each held for a few seconds, then healed, then the cluster must recover (every partition
back to an ISR of three, the quorum led and caught up as kafka-metadata-quorum shows it) before the
next: kill -9 (then restart) of a partition leader or of the active controller, SIGSTOP (then
SIGCONT) of either, a partition cutting either off from every other node and from the clients
(iptables DROP in its namespace), a rolling restart of the brokers (leadership balanced again
afterwards by the controller's preferred-leader elections), and a full disk on one broker.

Each run prints the checker's summary (counts, anomalies, unavailability windows) and keeps its
history as `history.jsonl` in the test's directory (`python3 fault_checker.py <file>` checks it
again). Nothing lost, nothing duplicated, no anomaly, in any run.

`KETCH_FAULT_SECONDS` (default 60) sets how long the nemesis of the first test runs; the others
are bounded by their faults. Root only (network namespaces); Ketch only.
"""

from __future__ import annotations

import os
import re
import random
import signal
import sys
import time
import traceback
from datetime import datetime
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

import fault_checker
import fault_net
from cluster import KetchBrokerUnder, KetchController, bootstrap, new_cluster_id, wait_for
from conftest import TARGET, KetchBroker, free_port
from fault_workload import History, Producer, Reader, Transactions, final_reads
from kafka_tools import KafkaTools
from test_controller_quorum import QUORUM, ids, quorum_status, running

pytestmark = [pytest.mark.skipif(TARGET != "ketch", reason="a Ketch cluster"),
              pytest.mark.skipif(fault_net.available() is not None, reason=f"{fault_net.available()}")]

VOTERS = (1, 2, 3)
BROKERS = (11, 12, 13)
TOPICS = {"acked": 3, "txns": 3}
FAULT_SECONDS = float(os.environ.get("KETCH_FAULT_SECONDS", "60"))
# broker.session.timeout.ms: Kafka's default (the other cluster tests use 3 s to be quick; here a
# paused or cut-off controller's brokers must find the new one within a session, as in production).
SESSION_TIMEOUT_MS = 9000
FENCING_RE = re.compile(r"^(\S+Z) .*broker session lapsed: fencing the broker broker=(\d+)")


class NsVoter(KetchController):
    """A Ketch controller in its own namespace, one of the three voters."""

    def __init__(self, workdir: Path, node_id: int, host: fault_net.Host, voters: str, cluster_id: str):
        super().__init__(workdir)
        self.node_id, self.ns_host, self.voters, self.cluster_id = node_id, host, voters, cluster_id

    @property
    def bootstrap(self) -> str:
        return f"{self.ns_host.ip}:{self.port}"

    def settings(self) -> dict[str, str]:
        props = super().settings()
        props.update({"node.id": str(self.node_id), "controller.quorum.voters": self.voters,
                      "listeners": f"CONTROLLER://{self.bootstrap}",
                      "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                      # Preferred leaders back every 5 s (Kafka: 300 s) so a test sees it.
                      "leader.imbalance.check.interval.seconds": "5"})
        return props

    def command(self) -> list[str]:
        return self.ns_host.wrap(super().command())


class NsBroker(KetchBrokerUnder):
    """A Ketch broker in its own namespace, on a fixed port (its address survives restarts)."""

    def __init__(self, workdir: Path, quorum, node_id: int, host: fault_net.Host):
        self.ns_host = host
        port = free_port()
        settings = {"listeners": f"PLAINTEXT://{host.ip}:{port}",
                    "default.replication.factor": "3", "min.insync.replicas": "2",
                    "offsets.topic.replication.factor": "3", "transaction.state.log.replication.factor": "3",
                    "transaction.state.log.min.isr": "2"}
        super().__init__(workdir, quorum, node_id, settings)
        self.node_id, self.host, self.port = node_id, host.ip, port

    def command(self) -> list[str]:
        return self.ns_host.wrap(KetchBroker.command(self))

    def command_settings(self) -> dict[str, str]:
        args = KetchBroker.command(self)[1:]
        return dict(a.split("=", 1) for a in args[1::2])


class FaultCluster:
    def __init__(self, root: Path, net: fault_net.Network, kafka_libs: Path, small_disk_on: int | None = None):
        self.net = net
        hosts = {n: net.add_host(f"c{n}") for n in VOTERS} | {n: net.add_host(f"b{n}") for n in BROKERS}
        ports = {n: free_port() for n in VOTERS}
        voters = ",".join(f"{n}@{hosts[n].ip}:{ports[n]}" for n in VOTERS)
        self.cluster_id = new_cluster_id()
        self.voter, self.disk = voters, None  # what brokers need (cluster.controller_settings)
        self.controllers = {}
        for n in VOTERS:
            v = NsVoter(root / f"c{n}", n, hosts[n], voters, self.cluster_id)
            v.port = ports[n]
            self.controllers[n] = v
        if small_disk_on is not None:
            self.disk = fault_net.SmallDisk(root / f"b{small_disk_on}" / "data", 96)
        self.brokers = {n: NsBroker(root / f"b{n}", self, n, hosts[n]) for n in BROKERS}
        self.nodes = {**self.controllers, **self.brokers}
        self.servers = bootstrap(self.brokers.values())
        self.admin = AdminClient({"bootstrap.servers": self.servers})
        self.kt = KafkaTools(kafka_libs, self.brokers[BROKERS[0]], root)
        self.last_seen: dict = {}  # what healthy() saw last (for its timeout's message)

    def metadata(self):
        return self.admin.list_topics(timeout=10)

    def partition_leader(self, rng: random.Random) -> int:
        topic = rng.choice(sorted(TOPICS))
        parts = wait_for(lambda: self._led(topic), f"every partition of {topic} led", timeout=60)
        return parts[rng.randrange(len(parts))]

    def _led(self, topic: str):
        try:
            t = self.metadata().topics[topic]
        except Exception:
            return None
        leaders = [pm.leader for _, pm in sorted(t.partitions.items())]
        return leaders if leaders and all(n in BROKERS for n in leaders) else None

    def active_controller(self) -> int:
        """The leader that kafka-metadata-quorum reports."""
        def ask():
            leader = int(quorum_status(self.kt, self.controllers.values()).get("LeaderId", "-1"))
            return leader if leader in VOTERS else None
        return wait_for(ask, "a leader of the controller quorum", timeout=60)

    def in_sync(self):
        """Every partition of the workload's topics and the internal ones with an ISR of three."""
        try:
            md = self.metadata()
        except Exception as e:
            self.last_seen["metadata"] = repr(e)
            return None
        parts = [(t, p, sorted(pm.isrs)) for t, tm in md.topics.items() if tm.error is None
                 for p, pm in tm.partitions.items()]
        self.last_seen["metadata"] = [p for p in parts if p[2] != list(BROKERS)] or f"{len(parts)} partitions"
        return parts if all(isr == list(BROKERS) for _, _, isr in parts) and len(parts) >= 6 else None

    def healthy(self, timeout: float = 120) -> dict:
        """Waits until every partition is back in sync and the quorum is led, with all three voters
        caught up and the three brokers observing; returns the quorum's status. A timeout says what
        was seen last (the partitions out of sync, the quorum's status and its replication)."""
        self.last_seen = {}

        def quorum_ok():
            s = quorum_status(self.kt, self.controllers.values())
            self.last_seen["quorum"] = s
            ok = (int(s.get("LeaderId", "-1")) in VOTERS and s.get("MaxFollowerLag") == "0"
                  and ids(s.get("CurrentVoters", "[]")) == set(VOTERS)
                  and ids(s.get("CurrentObservers", "[]")) == set(BROKERS))
            return s if ok else None
        try:
            wait_for(self.in_sync, "every partition back to an ISR of three", timeout=timeout)
            return wait_for(quorum_ok, "kafka-metadata-quorum showing the quorum healthy", timeout=timeout,
                            interval=1)
        except AssertionError as e:
            servers = ",".join(v.bootstrap for v in self.controllers.values())
            r = self.kt.run(QUORUM, "--bootstrap-controller", servers, "describe", "--replication",
                            timeout=60, check=False)
            raise AssertionError(f"{e}\nlast seen: {self.last_seen}\nreplication:\n{r.stdout}{r.stderr}") from None

    def create_topics(self) -> None:
        # Kafka's placement never makes a fenced broker a first replica: a topic created while one
        # broker is still fenced is led by the others even after preferred-leader elections.
        def unfenced():
            try:
                return {b.id for b in self.metadata().brokers.values()} == set(BROKERS)
            except Exception:
                return None
        wait_for(unfenced, "every broker unfenced", timeout=60)

        def created():
            new = [NewTopic(t, num_partitions=n, replication_factor=3) for t, n in TOPICS.items()]
            futures = self.admin.create_topics(new)
            for t, f in futures.items():
                try:
                    f.result(timeout=30)
                except Exception as e:
                    if "already exists" not in str(e):
                        return None
            return True
        wait_for(created, "the workload's topics created", timeout=60, interval=1)
        wait_for(self.in_sync, "the workload's topics in sync", timeout=60)


@pytest.fixture
def fault_cluster(request, tmp_path, kafka_libs):
    net = fault_net.Network.create()
    cluster = None
    try:
        cluster = FaultCluster(tmp_path, net, kafka_libs, getattr(request, "param", None))
        request.node._compat_brokers = list(cluster.nodes.values())  # logs in a failure's report
        with running(list(cluster.nodes.values())):
            cluster.create_topics()
            yield cluster
    finally:
        if cluster is not None and cluster.disk is not None:
            cluster.disk.close()
        net.close()


class Run:
    """The workload on `cluster`, and the history of the run, checked at the end."""

    def __init__(self, cluster: FaultCluster, workdir: Path):
        self.cluster, self.workdir = cluster, workdir
        self.history = History()
        servers = cluster.servers
        self.workers = [Producer("p1", self.history, servers, "acked", TOPICS["acked"]),
                        Transactions("t1", self.history, servers, "txns", TOPICS["txns"]),
                        Reader("r1", self.history, servers, list(TOPICS), "fault-readers")]

    def __enter__(self) -> "Run":
        for w in self.workers:
            w.start()
        time.sleep(3)  # the workload going before the first fault
        return self

    def fault(self, kind: str, node: int, apply, heal, hold_s: float) -> None:
        start = self.history.now_ms()
        print(f"{start / 1000:6.1f} s: {kind} {node}")
        apply()
        time.sleep(hold_s)
        heal()
        self.history.add({"type": "fault", "fault": kind, "node": node, "from_ms": start, "to_ms": self.history.now_ms()})
        status = self.cluster.healthy()
        print(f"{self.history.now_ms() / 1000:6.1f} s: healthy again, leader {status.get('LeaderId')}")

    def __exit__(self, *exc) -> None:
        time.sleep(2)
        for w in self.workers:
            w.stop()
        for w in self.workers:
            w.join(timeout=120)

    def unexpected_fencings(self) -> list[str]:
        """Brokers an active controller fenced for a lapsed session (its log says when) while no
        fault was on them: a new active controller must never fence live brokers (Kafka's gives
        every broker a whole session from its activation). A controller that is itself cut off or
        just resumed from a pause may still try (it believes it leads), but without a majority
        nothing it writes commits: its lines during its own fault, and 3 s after, are left out."""
        faulted = [(e["node"], e["from_ms"], e["to_ms"]) for e in self.history.events if e["type"] == "fault"]

        def during(node: int, at_ms: float, grace_ms: int) -> bool:
            return any(n == node and a - 1000 <= at_ms <= z + grace_ms for n, a, z in faulted)

        found = []
        for n, node in self.cluster.controllers.items():
            for line in node.log_path.read_text(errors="replace").splitlines():
                m = FENCING_RE.search(line)
                if not m:
                    continue
                at_ms = (datetime.fromisoformat(m.group(1)).timestamp() - self.history.wall_start) * 1000
                broker = int(m.group(2))
                if at_ms > 0 and not during(n, at_ms, 3000) and not during(broker, at_ms, SESSION_TIMEOUT_MS + 5000):
                    found.append(f"controller {n} at {at_ms / 1000:.1f} s: {line.strip()}")
        return found

    def check(self) -> dict:
        stuck = {w.label: "".join(traceback.format_stack(sys._current_frames()[w.ident]))
                 for w in self.workers if w.is_alive()}
        assert not stuck, f"workers that did not stop: {stuck}"
        self.cluster.healthy()
        final_reads(self.history, self.cluster.servers, TOPICS)
        path = self.workdir / "history.jsonl"
        fault_checker.save(path, self.history.events)
        report = fault_checker.check(self.history.events)
        print(fault_checker.summary(report))
        print(f"history kept in {path}")
        errors = [e for e in self.history.events if e["type"] == "error"]
        assert not errors, errors
        assert not report["anomalies"], fault_checker.summary(report)
        fenced = self.unexpected_fencings()
        assert not fenced, "live brokers fenced:\n" + "\n".join(fenced)
        counts = report["counts"]
        assert counts["sends_ok"] > 1000 and counts["txns_committed"] > 20 and counts["polled_records"] > 1000, counts
        return report


def kill(node):
    return node.kill9, node.start


def pause(node):
    return (lambda: os.kill(node.proc.pid, signal.SIGSTOP)), (lambda: os.kill(node.proc.pid, signal.SIGCONT))


def isolate(node):
    return node.ns_host.isolate, node.ns_host.heal


def test_kills_pauses_and_partitions_of_leaders_and_the_active_controller_lose_nothing(fault_cluster, tmp_path):
    """The nemesis picks a fault (kill -9, SIGSTOP, isolation) and a target (a partition leader or
    the active controller) at random, seeded (the seed is printed), until KETCH_FAULT_SECONDS have
    passed, each fault kind at least once."""
    seed = int(os.environ.get("KETCH_FAULT_SEED", random.randrange(1 << 30)))
    print(f"nemesis seed {seed} (KETCH_FAULT_SEED={seed} replays the same choices)")
    rng = random.Random(seed)
    cluster = fault_cluster
    kinds = [(f, t) for f in ("kill", "pause", "isolate") for t in ("leader", "controller")]
    rng.shuffle(kinds)
    with Run(cluster, tmp_path) as run:
        deadline = time.monotonic() + FAULT_SECONDS
        done = 0
        while done < len(kinds) or time.monotonic() < deadline:
            how, target = kinds[done] if done < len(kinds) else rng.choice(kinds)
            n = cluster.partition_leader(rng) if target == "leader" else cluster.active_controller()
            apply, heal = {"kill": kill, "pause": pause, "isolate": isolate}[how](cluster.nodes[n])
            # Held up to beyond a broker session: sometimes the controller fences the broker first.
            run.fault(f"{how} {target}", n, apply, heal, hold_s=rng.uniform(3, 12))
            done += 1
    run.check()


def test_rolling_restart_under_load_loses_nothing_and_leaves_leadership_balanced(fault_cluster, tmp_path):
    """Each broker stopped (SIGTERM: a controlled shutdown moves its leaderships away) and started
    again, the next one only when every partition is back in sync; then the controller's
    preferred-leader elections hand every partition back to its first replica."""
    cluster = fault_cluster
    with Run(cluster, tmp_path) as run:
        for n in BROKERS:
            node = cluster.brokers[n]
            run.fault("restart broker", n, node.stop, node.start, hold_s=1)

    def balanced():
        md = cluster.metadata()
        parts = [(t, p, pm.leader, pm.replicas) for t in TOPICS for p, pm in md.topics[t].partitions.items()]
        return parts if all(leader == replicas[0] for _, _, leader, replicas in parts) else None
    parts = wait_for(balanced, "every partition led by its preferred replica", timeout=60)
    leaders = sorted(leader for _, _, leader, _ in parts)
    print(f"leaders after the rolling restart: {leaders}")
    assert set(leaders) == set(BROKERS), leaders  # 6 partitions over 3 brokers: each leads some
    run.check()


@pytest.mark.parametrize("fault_cluster", [BROKERS[-1]], indirect=True)
def test_a_full_disk_on_one_broker_loses_nothing(fault_cluster, tmp_path):
    """Broker 13's data directory is a 96 MiB tmpfs: it is filled for 10 s while the workload
    runs. The two other replicas keep every partition writable (min.insync.replicas=2); once space
    is back (and the broker restarted if it stopped), it catches up and nothing was lost."""
    cluster = fault_cluster
    node = cluster.brokers[BROKERS[-1]]

    def heal():
        cluster.disk.free()
        if not node.is_running():
            print(f"broker {node.node_id} stopped on the full disk (exit code {node.proc.returncode}): restarted")
            node.start()

    with Run(cluster, tmp_path) as run:
        run.fault("disk full", node.node_id, cluster.disk.fill, heal, hold_s=10)
    run.check()
