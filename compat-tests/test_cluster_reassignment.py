"""Partition reassignment in a three-broker cluster, driven by Kafka's own tool
(`kafka-reassign-partitions`, org.apache.kafka.tools.reassign.ReassignPartitionsCommand), while
producers write with acks=all:

    --bootstrap-server B --execute --reassignment-json-file plan
    --bootstrap-server B --verify  --reassignment-json-file plan   (until every move is completed)

Topic `moving`, replication factor 2, min.insync.replicas=1: partition 0 on [1, 2] moves to [3]
(the data leaves both its brokers, its leader 1 is removed, the replication factor drops to 1),
partition 1 on [2, 1] moves to [3, 2] (3 added, 1 removed, leader 2 kept).
Then each partition has exactly the target replicas, all in the ISR, led by one of them; every
acknowledged record is read back at the offset it was acknowledged at from broker 3, the new
replica of both (a preferred election first moves partition 1's leadership to it); no send failed.

Parametrized over the controller, as test_cluster_verifiable_clients.py: `[kafka]` an Apache Kafka
4.1 controller, `[ketch]` Ketch's own KRaft controller (src/controller/reassignment.rs decides the
moves; under it `--list --bootstrap-controller` asks it ListPartitionReassignments directly). The
brokers forward AlterPartitionReassignments / ListPartitionReassignments to the controller (Ketch
brokers as Kafka brokers do). `--verify` is judged by its status lines: after them it clears the
throttles (IncrementalAlterConfigs), which a Ketch controller does not serve yet, so under it the
tool exits 1 after reporting the moves completed.

Seen (2 cores shared with other runs): each test 15 to 35 s with the cluster's start; the moves
complete before the first `--verify` (about 1 s after `--execute`), so `--list` right after
`--execute` usually finds nothing in progress any more. Also run with KETCH_COMPAT_TARGET=kafka
(Kafka 4.1 brokers under either controller).
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import bootstrap, create_topic, three_broker_cluster, wait_for
from kafka_tools import KafkaTools
from test_jbod import LiveProducer, read_partition

pytestmark = pytest.mark.timeout(300)

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
TOPIC = "moving"
BEFORE = {0: [1, 2], 1: [2, 1]}
AFTER = {0: [3], 1: [3, 2]}
ACKED_BEFORE_MOVE = 2000  # per partition
ACKED_AFTER_MOVE = 1000


def assignment(admin: AdminClient) -> dict[int, tuple[list[int], int, list[int]]] | None:
    """{partition: (replicas, leader, sorted ISR)} of TOPIC from one Metadata answer, or None."""
    try:
        md = admin.list_topics(TOPIC, timeout=5)
    except KafkaException:
        return None
    t = md.topics.get(TOPIC)
    if t is None or t.error is not None:
        return None
    return {p: (list(pm.replicas), pm.leader, sorted(pm.isrs)) for p, pm in t.partitions.items()}


def settled(admin: AdminClient, want: dict[int, list[int]]):
    """The assignment once every partition has replicas `want[p]`, all in the ISR, led by one of them."""
    s = assignment(admin)
    if s is None or sorted(s) != sorted(want):
        return None
    ok = all(s[p][0] == r and s[p][2] == sorted(r) and s[p][1] in r for p, r in want.items())
    return s if ok else None


def high_watermark(servers: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"hw-{uuid.uuid4().hex[:8]}"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=10)[1]
    except KafkaException:
        return -1
    finally:
        consumer.close()


def acked_at_least(producers: dict[int, LiveProducer], n: int) -> dict[int, int] | None:
    """{partition: acknowledged} once each producer has at least `n`, else None (shown on a timeout)."""
    counts = {p: len(pr.acked) for p, pr in producers.items()}
    return counts if all(c >= n for c in counts.values()) else None


@pytest.fixture
def controller() -> str:
    return "kafka"


@pytest.mark.parametrize("controller", ["kafka", "ketch"])
def test_partitions_move_to_other_brokers_while_written(start_cluster, kafka_libs, tmp_path, controller):
    brokers = three_broker_cluster(start_cluster, controller)
    ctl = brokers[1].ctl
    servers = bootstrap(brokers.values())
    admin = AdminClient({"bootstrap.servers": servers})
    new = NewTopic(TOPIC, num_partitions=len(BEFORE), replication_factor=-1, replica_assignment=[BEFORE[0], BEFORE[1]],
                   config={"min.insync.replicas": "1"})
    create_topic(admin, new, KafkaError.INVALID_REPLICA_ASSIGNMENT)
    wait_for(lambda: settled(admin, BEFORE), f"{TOPIC} on {BEFORE}", timeout=30)

    producers = {p: LiveProducer(servers, TOPIC, p) for p in BEFORE}
    try:
        wait_for(lambda: acked_at_least(producers, ACKED_BEFORE_MOVE), "records acknowledged before the move",
                 timeout=60)
        plan = tmp_path / f"plan-{uuid.uuid4().hex[:8]}.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": TOPIC, "partition": p, "replicas": r} for p, r in AFTER.items()]}))
        kt = KafkaTools(kafka_libs, brokers[1], tmp_path)
        r = kt.run(REASSIGN, "--bootstrap-server", servers, "--execute", "--reassignment-json-file", plan)
        assert "Successfully started partition reassignment" in r.stdout, r.out
        if controller == "ketch":
            # ListPartitionReassignments answered by the Ketch controller itself.
            r = kt.run(REASSIGN, "--bootstrap-controller", ctl.bootstrap, "--list")
            assert "Current partition reassignments:" in r.stdout or "No partition reassignments found." in r.stdout, r.out

        def verified():
            r = kt.run(REASSIGN, "--bootstrap-server", servers, "--verify", "--reassignment-json-file", plan,
                       check=False)
            done = all(f"Reassignment of partition {TOPIC}-{p} is completed." in r.stdout for p in AFTER)
            return r.stdout if done else None

        t0 = time.monotonic()
        out = wait_for(verified, "kafka-reassign-partitions --verify: every move completed", timeout=90, interval=1)
        print(f"[reassign] verified complete after {time.monotonic() - t0:.1f} s:\n{out}")
        states = wait_for(lambda: settled(admin, AFTER), f"{TOPIC} on {AFTER}", timeout=30)
        print(f"[reassign] after the move: {states}")
        # The producers go on writing to the new leaders.
        marks = {p: len(pr.acked) for p, pr in producers.items()}
        try:
            wait_for(lambda: all(len(pr.acked) >= marks[p] + ACKED_AFTER_MOVE for p, pr in producers.items()),
                     "records acknowledged after the move", timeout=60)
        except AssertionError:
            counts = {p: len(pr.acked) for p, pr in producers.items()}
            raise AssertionError(f"acknowledged before the move {marks}, now {counts}; errors "
                                 f"{ {p: pr.errors[:3] for p, pr in producers.items()} }") from None
        if controller == "ketch":
            r = kt.run(REASSIGN, "--bootstrap-controller", ctl.bootstrap, "--list")
            assert "No partition reassignments found." in r.stdout, r.out
    finally:
        for pr in producers.values():
            pr.stop()

    for p, pr in producers.items():
        assert not pr.errors, f"partition {p}: sends failed: {pr.errors[:5]}"
    # Partition 1's preferred replica is the new broker 3: leading, it serves the read-back, so every
    # record is read from a replica the move created.
    admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, 1)]).result(timeout=30)
    wait_for(lambda: (s := assignment(admin)) and all(s[p][1] == AFTER[p][0] for p in AFTER),
             f"{TOPIC} led by the first target replicas", timeout=30)
    for p, pr in producers.items():
        # A leader just elected may report a high watermark from before its election until its
        # follower fetches (Kafka answers ListOffsets OFFSET_NOT_AVAILABLE meanwhile, which clients
        # retry; a Ketch broker answers the stale one): wait for every acknowledged offset below it.
        end = max((o for o, _ in pr.acked), default=-1) + 1
        wait_for(lambda: high_watermark(servers, p) >= end, f"{TOPIC}-{p}'s high watermark at {end}", timeout=30)
        got = dict(read_partition(servers, TOPIC, p))
        missing = [(o, v) for o, v in pr.acked if got.get(o) != v]
        assert not missing, f"partition {p}: {len(missing)} acknowledged records not read back, first {missing[:5]}"
        print(f"[reassign] partition {p}: {len(pr.acked)} acknowledged records read back from broker {AFTER[p][0]}")
    assert settled(admin, AFTER), assignment(admin)
