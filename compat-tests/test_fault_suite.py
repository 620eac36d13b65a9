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

One run has other topics (issue 38): a compacted topic (segments rolled every second, cleaned
every 500 ms) with keyed writes over a bounded key space, and a LogAppendTime topic, under kills of
a leader and a follower held until the leaders have compacted what the killed broker missed, and a
restart; the checker then holds each key's latest acknowledged write, and each record's append
time, to account, in the final read and in each broker's own copy read from its segment files.

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
from fault_workload import History, Producer, Reader, Transactions, final_reads, pkey, replica_records
from kafka_tools import KafkaTools
from test_controller_quorum import QUORUM, ids, quorum_status, running

pytestmark = [pytest.mark.skipif(TARGET != "ketch", reason="a Ketch cluster"),
              pytest.mark.skipif(fault_net.available() is not None, reason=f"{fault_net.available()}")]

VOTERS = (1, 2, 3)
BROKERS = (11, 12, 13)
# {topic: (partitions, configs)}; every topic has replication factor 3 and min.insync.replicas=2
TOPICS = {"acked": (3, {}), "txns": (3, {})}
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

    def __init__(self, workdir: Path, quorum, node_id: int, host: fault_net.Host, extra: dict | None = None):
        self.ns_host = host
        port = free_port()
        settings = {"listeners": f"PLAINTEXT://{host.ip}:{port}",
                    "default.replication.factor": "3", "min.insync.replicas": "2",
                    "offsets.topic.replication.factor": "3", "transaction.state.log.replication.factor": "3",
                    "transaction.state.log.min.isr": "2", **(extra or {})}
        super().__init__(workdir, quorum, node_id, settings)
        self.node_id, self.host, self.port = node_id, host.ip, port

    def command(self) -> list[str]:
        return self.ns_host.wrap(KetchBroker.command(self))

    def command_settings(self) -> dict[str, str]:
        args = KetchBroker.command(self)[1:]
        return dict(a.split("=", 1) for a in args[1::2])


class FaultCluster:
    """`topics`: the workload's topics ({name: (partitions, configs)}); `broker_settings`: more
    settings of every broker; `small_disk_on`: a broker whose data directory is a small tmpfs."""

    def __init__(self, root: Path, net: fault_net.Network, kafka_libs: Path, small_disk_on: int | None = None,
                 topics: dict | None = None, broker_settings: dict | None = None):
        self.net = net
        self.topics = dict(topics or TOPICS)
        self.partitions = {t: n for t, (n, _) in self.topics.items()}  # {topic: partition count}
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
        self.brokers = {n: NsBroker(root / f"b{n}", self, n, hosts[n], broker_settings) for n in BROKERS}
        self.nodes = {**self.controllers, **self.brokers}
        self.servers = bootstrap(self.brokers.values())
        self.admin = AdminClient({"bootstrap.servers": self.servers})
        self.kt = KafkaTools(kafka_libs, self.brokers[BROKERS[0]], root)
        self.last_seen: dict = {}  # what healthy() saw last (for its timeout's message)

    def metadata(self):
        return self.admin.list_topics(timeout=10)

    def partition_leader(self, rng: random.Random) -> int:
        topic = rng.choice(sorted(self.topics))
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
        whole = all(isr == list(BROKERS) for _, _, isr in parts)
        return parts if whole and len(parts) >= sum(self.partitions.values()) else None

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
            new = [NewTopic(t, num_partitions=n, replication_factor=3, config=config)
                   for t, (n, config) in self.topics.items()]
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
        cluster = FaultCluster(tmp_path, net, kafka_libs, **getattr(request, "param", {}))
        request.node._compat_brokers = list(cluster.nodes.values())  # logs in a failure's report
        with running(list(cluster.nodes.values())):
            cluster.create_topics()
            yield cluster
    finally:
        if cluster is not None and cluster.disk is not None:
            cluster.disk.close()
        net.close()


# What a run must at least have done (fault_checker's counts).
MINIMUMS = {"sends_ok": 1000, "txns_committed": 20, "polled_records": 1000}


class Run:
    """The workload on `cluster`, and the history of the run, checked at the end. `workers(history,
    servers)` makes the workload's workers (default: an idempotent producer on `acked`, a
    transactional one on `txns`, a reader of both); `minimums`: the counts the run must exceed."""

    def __init__(self, cluster: FaultCluster, workdir: Path, workers=None, minimums: dict | None = None):
        self.cluster, self.workdir = cluster, workdir
        self.history = History()
        self.minimums = MINIMUMS if minimums is None else minimums
        servers = cluster.servers
        for topic, (partitions, config) in cluster.topics.items():
            self.history.add({"type": "topic", "topic": topic, "partitions": partitions, "config": config})
        if workers is None:
            self.workers = [Producer("p1", self.history, servers, "acked", cluster.partitions["acked"]),
                            Transactions("t1", self.history, servers, "txns", cluster.partitions["txns"]),
                            Reader("r1", self.history, servers, list(cluster.topics), "fault-readers")]
        else:
            self.workers = workers(self.history, servers)

    def __enter__(self) -> "Run":
        for w in self.workers:
            w.start()
        time.sleep(3)  # the workload going before the first fault
        return self

    def fault(self, kind: str, node: int, apply, heal, hold_s: float, hold_until=None) -> None:
        """`apply`, held `hold_s` s (and then until `hold_until()`, if given, says so), `heal`;
        then waits until the cluster is healthy again."""
        start = self.history.now_ms()
        print(f"{start / 1000:6.1f} s: {kind} {node}")
        apply()
        time.sleep(hold_s)
        if hold_until is not None:
            hold_until()
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
        final_reads(self.history, self.cluster.servers, self.cluster.partitions)
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
        assert all(counts[k] > n for k, n in self.minimums.items()), (self.minimums, counts)
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
        parts = [(t, p, pm.leader, pm.replicas) for t in cluster.topics for p, pm in md.topics[t].partitions.items()]
        return parts if all(leader == replicas[0] for _, _, leader, replicas in parts) else None
    parts = wait_for(balanced, "every partition led by its preferred replica", timeout=60)
    leaders = sorted(leader for _, _, leader, _ in parts)
    print(f"leaders after the rolling restart: {leaders}")
    assert set(leaders) == set(BROKERS), leaders  # 6 partitions over 3 brokers: each leads some
    run.check()


@pytest.mark.parametrize("fault_cluster", [{"small_disk_on": BROKERS[-1]}], indirect=True, ids=[str(BROKERS[-1])])
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


# Compacted and LogAppendTime topics (issue 38). Segments roll every second (segment.ms; the
# segment.bytes Kafka accepts at least, 1 MiB, is never reached at this rate) and the cleaner runs
# every 500 ms on any dirty segment (min.cleanable.dirty.ratio 0.01), so leaders and followers
# compact all along the run.
COMPACTED, APPEND_TIME = "compacted", "appendtime"
COMPACT_TOPICS = {
    COMPACTED: (3, {"cleanup.policy": "compact", "segment.ms": "1000", "segment.bytes": "1048576",
                    "min.cleanable.dirty.ratio": "0.01", "min.insync.replicas": "2"}),
    APPEND_TIME: (3, {"message.timestamp.type": "LogAppendTime", "segment.ms": "1000", "min.insync.replicas": "2"}),
}
CLEANER = {"log.cleaner.backoff.ms": "500"}  # every broker's cleaner passes (Kafka's default: 15 s)
KEYS = (12, 48, 200)  # hot, warm and cold keys of the compacted topic (fault_workload.Producer)
# A killed broker stays down at least this long: Ketch's controller fences a broker about 1 s after
# its connection closed, the leaders go on without it and roll a segment a second, so it misses
# several segments, cleaned before it is back.
KILL_HOLD_S = 6
CLEANED_RE = re.compile(r"^(\S+Z) .*log cleaned topic=(\S+) partition=(\d+) .*records_removed=(\d+)")


def cleanings(node, topic: str) -> list[tuple[float, int, int]]:
    """(wall-clock s, partition, records removed) of every cleaning pass `node` logged on `topic`."""
    found = []
    for line in node.log_path.read_text(errors="replace").splitlines():
        m = CLEANED_RE.search(line)
        if m and m.group(2) == topic:
            found.append((datetime.fromisoformat(m.group(1)).timestamp(), int(m.group(3)), int(m.group(4))))
    return found


def compacted_while_away(cluster: FaultCluster, victim: int):
    """Holds a fault on broker `victim` until it is out of the ISR of every partition of the compacted
    topic and each of their leaders has then compacted the partition (a cleaning pass that removed
    records, logged after the ISR shrank): the records the victim missed were cleaned before it
    copies them, so it copies compacted batches, with offset gaps."""
    def hold():
        def shrunk():
            try:
                parts = cluster.metadata().topics[COMPACTED].partitions
            except Exception:
                return None
            return {p: pm.leader for p, pm in parts.items()} \
                if all(victim not in pm.isrs and pm.leader in BROKERS for pm in parts.values()) else None
        leaders = wait_for(shrunk, f"broker {victim} out of every ISR of {COMPACTED}", timeout=60)
        since = time.time()

        def cleaned():
            return all(any(at > since and part == p and removed > 0
                           for at, part, removed in cleanings(cluster.brokers[leader], COMPACTED))
                       for p, leader in leaders.items())
        wait_for(cleaned, f"every partition of {COMPACTED} compacted by its leader {leaders} without {victim}",
                 timeout=60)
    return hold


@pytest.mark.parametrize("fault_cluster", [{"topics": COMPACT_TOPICS, "broker_settings": CLEANER}], indirect=True,
                         ids=["compacted+LogAppendTime"])
def test_compacted_and_log_append_time_topics_lose_nothing(fault_cluster, tmp_path):
    """Keyed writes on a compacted topic (a bounded key space) and keyless ones on a LogAppendTime
    topic, idempotent acks=all, read by a read_committed group. Faults: kill -9 of the leader of
    compacted-0, then of a follower of compacted-0, each held until it is out of the ISR and the
    leaders have compacted what it missed (so its copy, and the copy the survivors hand on, is made
    of compacted batches, with offset gaps, and of the leaders' LogAppendTime batches); then a
    restart (SIGTERM, start) of the third broker. Leadership is spread over the three brokers, so
    each kill also takes leaders and followers of other partitions of both topics.

    Checked (fault_checker): on the compacted topic every key's latest acknowledged write is
    still read (or a later write of the key), nothing read that no one wrote, each record with the
    key it was written with and at the offset it was acknowledged at; on the LogAppendTime topic
    nothing lost, moved or duplicated, and every record read with a LogAppendTime, the same one in
    every read and as acknowledged (the leader's); offsets strictly increasing; every ISR back to
    three after each fault. The same checks on each broker's own copy of every partition, read
    from its segment files at the end. And the cleaner did work: acknowledged records compacted
    away, gaps in the final read of every compacted partition, cleaning passes logged by every
    broker."""
    cluster = fault_cluster

    def workers(history, servers):
        return [Producer("pc", history, servers, COMPACTED, cluster.partitions[COMPACTED], keys=KEYS),
                Producer("pa", history, servers, APPEND_TIME, cluster.partitions[APPEND_TIME]),
                Reader("r1", history, servers, [COMPACTED, APPEND_TIME], "fault-readers")]

    def replicas_and_leader():
        try:
            pm = cluster.metadata().topics[COMPACTED].partitions[0]
        except Exception:
            return None
        return (list(pm.replicas), pm.leader) if pm.leader in BROKERS else None

    with Run(cluster, tmp_path, workers, minimums={"sends_ok": 2000, "polled_records": 2000}) as run:
        _, leader = wait_for(replicas_and_leader, f"{COMPACTED}-0 led", timeout=60)
        run.fault(f"kill -9 leader of {COMPACTED}-0", leader, *kill(cluster.brokers[leader]), hold_s=KILL_HOLD_S,
                  hold_until=compacted_while_away(cluster, leader))
        first = leader
        replicas, leader = wait_for(replicas_and_leader, f"{COMPACTED}-0 led", timeout=60)
        follower = min(set(replicas) - {leader, first})
        run.fault(f"kill -9 follower of {COMPACTED}-0", follower, *kill(cluster.brokers[follower]),
                  hold_s=KILL_HOLD_S, hold_until=compacted_while_away(cluster, follower))
        third = (set(BROKERS) - {first, follower}).pop()
        node = cluster.brokers[third]
        run.fault("restart broker", third, node.stop, node.start, hold_s=1)
    report = run.check()

    counts = report["counts"]
    assert counts["acked_compacted_away"] > counts["keys_checked"], counts
    reads = {e["partition"]: [r[0] for r in e["records"]] for e in run.history.events if e["type"] == "read"}
    for p in range(cluster.partitions[COMPACTED]):
        offsets = reads[f"{COMPACTED}:{p}"]
        assert offsets and len(offsets) < offsets[-1] - offsets[0] + 1, f"no gap in {COMPACTED}-{p}: {offsets[:20]}"
    passes = {n: sum(removed > 0 for _, _, removed in cleanings(b, COMPACTED)) for n, b in cluster.brokers.items()}
    print(f"cleaning passes that removed records, per broker: {passes}")
    assert all(passes.values()), passes

    # Each replica's own copy, what it would serve as the next leader: every broker killed (the
    # workload has stopped and every ISR is whole, so each holds every acknowledged write), its
    # segment files read (CRCs checked) and checked as the final read was.
    for node in cluster.brokers.values():
        node.kill9()
    kept = [e for e in run.history.events if e["type"] not in ("read", "poll")]
    for n, node in cluster.brokers.items():
        reads = [{"type": "read", "partition": pkey(t, p), "records": replica_records(node.data_dir / f"{t}-{p}")}
                 for t, count in cluster.partitions.items() for p in range(count)]
        copy = fault_checker.check(kept + reads)
        print(f"broker {n}'s copy: {copy['counts']['final_records']} records, anomalies: {copy['anomalies'] or 'none'}")
        assert not copy["anomalies"], f"broker {n}'s copy:\n" + fault_checker.summary(copy)
