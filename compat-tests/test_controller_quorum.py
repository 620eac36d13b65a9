"""A quorum of three Ketch controllers (issue 15): `process.roles=controller` on three nodes whose
`controller.quorum.voters` names all three, with two Ketch brokers attached.

- They elect one active controller (Vote with KIP-996 pre-votes, BeginQuorumEpoch) and replicate the
  metadata log to each other with Fetch; `kafka-metadata-quorum --bootstrap-controller describe
  --status` (Apache Kafka 4.1's MetadataQuorumCommand, from Maven) names the leader, the three
  voters and the brokers as observers.
- Topics are created through the brokers (forwarded to the active controller) and written with an
  idempotent acks=all librdkafka producer.
- The active controller is killed (-9): the other two elect a new one, the brokers find it (they
  are not fenced en masse: their sessions start again with the new controller), a new topic is
  created and written, and every record acknowledged before and after the kill is read back at
  its offset, exactly once.
- The killed controller restarts on its log, follows the new leader and catches up: the quorum
  shows all three voters at the high watermark.
- All three are killed (-9) at once and restarted: every topic is still there, new topics are
  created and the old ones written.

And a mixed quorum: one Apache Kafka 4.1 controller and two Ketch controllers, a Ketch and a Kafka
broker; the active controller is killed (-9) and restarted until a leader of each kind was killed;
every time the new leader (of either kind) creates a topic written through both brokers.

Ketch only (KETCH_COMPAT_TARGET=kafka skips: the all-Kafka scenario is Kafka's own test suite).
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import (KafkaController, KetchController, bootstrap, broker_under, create_topic,
                     kafka_storage_format, new_cluster_id, wait_for, wait_for_isr)
from conftest import TARGET, free_port
from kafka_tools import KafkaTools
from test_cluster_under_kafka_controller import assert_log_is, produce_all

pytestmark = pytest.mark.skipif(TARGET != "ketch", reason="a quorum of Ketch controllers")

QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
VOTERS = (1, 2, 3)


def join_quorum(node, node_id: int, ports: dict[int, int], cluster_id: str) -> None:
    """Makes a controller `node_id` of the quorum of `ports` ({voter id: port}) in `cluster_id`."""
    node.node_id = node_id
    node.port = ports[node_id]
    node.cluster_id = cluster_id
    node.voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in ports.items())


class Voter(KetchController):
    """One of the three controllers: its own node id, every voter in controller.quorum.voters."""

    def __init__(self, workdir: Path, node_id: int, ports: dict[int, int], cluster_id: str):
        super().__init__(workdir)
        join_quorum(self, node_id, ports, cluster_id)

    def settings(self) -> dict[str, str]:
        props = super().settings()
        props.update({
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters,
            # Kafka's defaults are 1000 / 2000 / 1000 ms; kept, so failover times are Kafka's.
        })
        return props


class KafkaVoter(KafkaController):
    """An Apache Kafka 4.1 controller (from Maven) as one of the voters (a static quorum,
    kraft.version 0, formatted by Kafka's StorageTool with the quorum's cluster id)."""

    def __init__(self, workdir: Path, node_id: int, ports: dict[int, int], cluster_id: str):
        super().__init__(workdir)
        join_quorum(self, node_id, ports, cluster_id)

    def _write_props(self) -> None:
        super()._write_props()
        text = self.props_path.read_text()
        text = "".join(line + "\n" for line in text.splitlines()
                       if not line.startswith(("node.id=", "controller.quorum.voters=")))
        text += f"node.id={self.node_id}\ncontroller.quorum.voters={self.voters}\n"
        self.props_path.write_text(text)

    def _format(self) -> None:
        kafka_storage_format(self.libs, self.props_path, self.cluster_id)
        self.formatted = True


class Quorum:
    """What brokers need of their controllers (cluster.controller_settings): the voters and the
    cluster id."""

    def __init__(self, voters: dict[int, Voter]):
        self.members = voters
        first = next(iter(voters.values()))
        self.voter = first.voters
        self.cluster_id = first.cluster_id


def quorum_status(kt: KafkaTools, voters) -> dict[str, str]:
    """kafka-metadata-quorum's status ({} when it fails: callers ask again). Right after a leader
    dies a voter may still name it as the controller, and the tool's AdminClient would wait for it
    for its whole default 60 s API timeout: bounded to 15 s (5 s per request) instead."""
    servers = ",".join(v.bootstrap for v in voters)
    config = kt.workdir / "quorum-tool.properties"
    config.write_text("default.api.timeout.ms=15000\nrequest.timeout.ms=5000\n")
    r = kt.run(QUORUM, "--bootstrap-controller", servers, "--command-config", config, "describe", "--status",
               timeout=60, check=False)
    if r.returncode != 0:
        return {}
    return {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in r.stdout.splitlines() if ":" in line)}


def ids(replicas: str) -> set[int]:
    """The ids of kafka-metadata-quorum's CurrentVoters / CurrentObservers (JSON)."""
    return {r["id"] for r in json.loads(replicas)}


def leader_of(kt, voters, not_: int | None = None, timeout: float = 60) -> tuple[int, dict]:
    """The leader kafka-metadata-quorum names (another than `not_`), with the whole status."""
    def ask():
        status = quorum_status(kt, voters)
        leader = int(status.get("LeaderId", "-1"))
        return (leader, status) if leader in VOTERS and leader != not_ else None
    return wait_for(ask, "a leader of the controller quorum", timeout=timeout)


@contextlib.contextmanager
def running(processes):
    """Starts `processes` in order (from this thread: the harness's children die with the thread
    that started them) and kills (-9) every one started at the end, last first."""
    started = []
    try:
        for p in processes:
            p.start()
            started.append(p)
        yield
    finally:
        for p in reversed(started):
            p.kill9()


@pytest.fixture
def quorum_cluster(tmp_path):
    ports = {n: free_port() for n in VOTERS}
    cluster_id = new_cluster_id()
    voters = {}
    for n in VOTERS:
        (tmp_path / f"c{n}").mkdir()
        voters[n] = Voter(tmp_path / f"c{n}", n, ports, cluster_id)
    quorum = Quorum(voters)
    brokers = {n: broker_under(quorum, tmp_path / f"b{n}", n, "ketch") for n in (11, 12)}
    with running([*voters.values(), *brokers.values()]):
        yield voters, brokers


def test_three_ketch_controllers_elect_replicate_and_survive_the_kill_of_the_active_one(quorum_cluster, kafka_libs,
                                                                                      tmp_path):
    voters, brokers = quorum_cluster
    kt = KafkaTools(kafka_libs, brokers[11], tmp_path)
    servers = bootstrap(brokers.values())
    admin = AdminClient({"bootstrap.servers": servers})

    leader, status = leader_of(kt, voters.values())
    assert ids(status["CurrentVoters"]) == set(VOTERS), status

    # The brokers fetch the metadata log from the leader: its observers.
    def observed():
        status = quorum_status(kt, voters.values())
        return status if ids(status.get("CurrentObservers", "[]")) == {11, 12} else None
    wait_for(observed, "both brokers observing the quorum", timeout=30)

    new = NewTopic("before", num_partitions=2, replication_factor=2)
    create_topic(admin, new, KafkaError.INVALID_REPLICATION_FACTOR, "before created with replication factor 2")
    wait_for_isr(admin, "before", [11, 12], count=2, timeout=60)
    acked = produce_all(servers, "before", [b"a%d" % i for i in range(200)], 2)

    # The active controller dies: another takes over, and the brokers stay in the cluster.
    killed_at = time.monotonic()
    voters[leader].kill9()
    survivors = [v for n, v in voters.items() if n != leader]
    second, _ = leader_of(kt, survivors, not_=leader)
    new = NewTopic("after", num_partitions=2, replication_factor=2)
    create_topic(admin, new, KafkaError.INVALID_REPLICATION_FACTOR, "after created under the new controller",
                 timeout=60)
    wait_for_isr(admin, "after", [11, 12], count=2, timeout=60)
    print(f"kill -9 of controller {leader} to a topic created and in sync under controller {second}: "
          f"{time.monotonic() - killed_at:.1f} s")
    acked_after = produce_all(servers, "after", [b"b%d" % i for i in range(200)], 2)
    acked += produce_all(servers, "before", [b"c%d" % i for i in range(200)], 2)
    assert_log_is(servers, "before", acked, 2)
    assert_log_is(servers, "after", acked_after, 2)

    # Back on its log: it follows the new leader and catches up.
    voters[leader].start()

    def caught_up():
        status = quorum_status(kt, voters.values())
        if int(status.get("LeaderId", "-1")) not in VOTERS:
            return None
        # MaxFollowerLag: the slowest voter's distance from the leader's end.
        return status if status.get("MaxFollowerLag") == "0" and ids(status["CurrentVoters"]) == set(VOTERS) else None

    status = wait_for(caught_up, "all three voters caught up", timeout=60)
    print(status)

    # The whole quorum killed at once and restarted: the metadata is all there (the topics with
    # their partitions and replicas), and the cluster takes writes again.
    for v in voters.values():
        v.kill9()
    for v in voters.values():
        v.start()
    leader_of(kt, voters.values())
    described = admin.list_topics(timeout=30).topics
    assert {"before", "after"} <= set(described), sorted(described)
    new = NewTopic("restarted", num_partitions=1, replication_factor=2)
    create_topic(admin, new, KafkaError.INVALID_REPLICATION_FACTOR, "a topic created after the restart", timeout=60)
    wait_for_isr(admin, "restarted", [11, 12], count=1, timeout=60)
    acked_after += produce_all(servers, "after", [b"d%d" % i for i in range(100)], 2)
    assert_log_is(servers, "after", acked_after, 2)


@pytest.fixture
def mixed_quorum(tmp_path):
    """Voter 1 an Apache Kafka 4.1 controller, voters 2 and 3 Ketch controllers; brokers 11
    (Ketch) and 12 (Kafka 4.1)."""
    ports = {n: free_port() for n in VOTERS}
    cluster_id = new_cluster_id()
    voters = {}
    for n in VOTERS:
        (tmp_path / f"c{n}").mkdir()
        kind = KafkaVoter if n == 1 else Voter
        voters[n] = kind(tmp_path / f"c{n}", n, ports, cluster_id)
    quorum = Quorum(voters)
    brokers = {11: broker_under(quorum, tmp_path / "b11", 11, "ketch"),
               12: broker_under(quorum, tmp_path / "b12", 12, "kafka")}
    # The Ketch voters first (each is ready once listening): Kafka's controller waits for a
    # quorum before it reports itself started.
    with running([voters[2], voters[3], voters[1], *brokers.values()]):
        yield voters, brokers


def test_a_mixed_quorum_of_ketch_and_kafka_controllers_fails_over_either_way(mixed_quorum, kafka_libs, tmp_path):
    """One Kafka 4.1 and two Ketch controllers: whoever leads, the others replicate its metadata
    log; the active controller is killed (-9) and restarted until one of each kind was killed while
    leading; after every kill a topic is created under the new leader and written through a Ketch
    and a Kafka broker, with nothing acknowledged lost."""
    voters, brokers = mixed_quorum
    kt = KafkaTools(kafka_libs, brokers[11], tmp_path)
    servers = bootstrap(brokers.values())
    admin = AdminClient({"bootstrap.servers": servers})
    acked: dict[str, list] = {}
    killed_kinds: set[str] = set()
    for round_ in range(6):
        leader, _ = leader_of(kt, voters.values())
        topic = f"t{round_}"
        new = NewTopic(topic, num_partitions=2, replication_factor=2)
        create_topic(admin, new, KafkaError.INVALID_REPLICATION_FACTOR, f"{topic} created under {leader}", timeout=60)
        wait_for_isr(admin, topic, [11, 12], count=2, timeout=60)
        acked[topic] = produce_all(servers, topic, [b"%d-%d" % (round_, i) for i in range(100)], 2)
        if killed_kinds == {"kafka", "ketch"}:
            break
        kind = "kafka" if isinstance(voters[leader], KafkaVoter) else "ketch"
        killed_at = time.monotonic()
        voters[leader].kill9()
        killed_kinds.add(kind)
        survivors = [v for n, v in voters.items() if n != leader]
        new_leader, _ = leader_of(kt, survivors, not_=leader)
        print(f"round {round_}: killed the {kind} leader {leader}; {new_leader} leads "
              f"{time.monotonic() - killed_at:.1f} s later")
        voters[leader].start()

        def all_voters_caught_up():
            status = quorum_status(kt, voters.values())
            ok = status.get("MaxFollowerLag") == "0" and ids(status.get("CurrentVoters", "[]")) == set(VOTERS)
            return status if ok else None
        wait_for(all_voters_caught_up, "the restarted voter caught up", timeout=90)
    assert killed_kinds == {"kafka", "ketch"}, f"leaders killed: {killed_kinds}"
    for topic, records in acked.items():
        assert_log_is(servers, topic, records, 2)
