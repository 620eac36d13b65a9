"""A broker of the target kind LEADS replicated partitions under an Apache Kafka 4.1 controller,
with an Apache Kafka 4.1 broker as its follower (the inverse of
`test_kafka_controller.test_a_kafka_leader_replicates_to_a_broker_of_the_target_kind`).

Cluster: a controller-only Kafka node (cluster.KafkaController), broker 2 of the target kind and
Kafka broker 1, topics created with the replica assignment [2, 1] so that broker 2 is the
preferred and first leader (the controller puts every assigned replica in the initial ISR).
What the target broker must do as a leader:

- answer the Kafka follower's replica Fetch (v17: topic ids, ReplicaState with the broker epoch,
  last fetched epoch), with its high watermark, so that the follower's high watermark follows;
- serve Metadata and acks=all Produce from librdkafka (InitProducerId of the idempotent producer
  may go to either broker), answering only once the follower has fetched past the records
  (min.insync.replicas=2);
- drop a follower that stopped fetching from the ISR after `replica.lag.time.max.ms`
  (AlterPartition to the controller) while the controller still has that broker registered and
  unfenced; then refuse acks=all with NOT_ENOUGH_REPLICAS (without appending) and accept acks=1;
- take the follower back into the ISR once it fetches again (AlterPartition again).

Runs with KETCH_COMPAT_TARGET=kafka (a Kafka broker in the target's place) to prove the test.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import create_topic, partition_states, wait_for, wait_for_isr, wait_for_leader
from conftest import TARGET

pytestmark = pytest.mark.timeout(240)  # pytest-timeout (requirements.txt)

LEADER = 2  # the broker of the target kind
FOLLOWER = 1  # the Kafka broker
# The leader checks its followers every replica.lag.time.max.ms / 2 (Kafka's default is 30000).
LAG_MS = 5000
# Controller session of test 2: long enough that the leader, not the controller's fencing, shrinks
# the ISR (the controller also drops a fenced broker from every ISR).
LONG_SESSION_MS = 25000


def start_pair(start_cluster, leader_overrides=None, controller_overrides=None):
    """The controller (broker.session.timeout.ms=3000 unless overridden, cluster.py: a killed broker
    is fenced ~3 s after its last heartbeat, brokers heartbeat every 500 ms), the Kafka follower,
    then the leader of the target kind; returns the started Cluster."""
    # The Kafka follower writes its high watermarks to replication-offset-checkpoint every 200 ms
    # (default 5000): the test reads there what the leader told it.
    return start_cluster({FOLLOWER: ("kafka", {"replica.high.watermark.checkpoint.interval.ms": "200"}),
                          LEADER: (TARGET, leader_overrides)}, controller_overrides)


def create_led_topic(admin: AdminClient, topic: str, partitions: int) -> None:
    """`topic` with replicas [LEADER, FOLLOWER] for every partition and min.insync.replicas=2."""
    new = NewTopic(topic, num_partitions=partitions, replication_factor=-1,
                   replica_assignment=[[LEADER, FOLLOWER]] * partitions, config={"min.insync.replicas": "2"})
    create_topic(admin, new, KafkaError.INVALID_REPLICA_ASSIGNMENT, f"{topic} created with its replica assignment")


def produce(bootstrap: str, topic: str, values, partition_of, **config) -> tuple[list, list]:
    """Produces `values` (bytes) in order; returns ([(partition, offset, value)] acked, [errors])."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    acked, errors = [], []

    def report(err, msg):
        if err:
            errors.append(err)
        else:
            acked.append((msg.partition(), msg.offset(), msg.value()))

    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=partition_of(i), on_delivery=report)
        producer.poll(0)
    assert producer.flush(60) == 0, "records neither delivered nor failed"
    return acked, errors


def checkpointed_high_watermarks(broker, topic: str) -> dict[int, int]:
    """{partition: high watermark} of `topic` in a Kafka broker's replication-offset-checkpoint
    (version line, count line, then `topic partition offset` lines)."""
    try:
        lines = (broker.data_dir / "replication-offset-checkpoint").read_text().splitlines()[2:]
    except OSError:
        return {}
    return {int(p): int(o) for t, p, o in (line.split() for line in lines) if t == topic}


def read_partitions(bootstrap: str, topic: str, partitions: int, timeout: float = 30) -> dict[int, list]:
    """Every record of each partition up to its end (high watermark): {partition: [(offset, value)]}."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "leader-check",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        seen: dict[int, list] = {p: [] for p in range(partitions)}
        eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(eof) < partitions:
            assert time.monotonic() < deadline, f"read {topic} timed out: {seen}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(msg.partition())
                    continue
                raise KafkaException(msg.error())
            eof.discard(msg.partition())
            seen[msg.partition()].append((msg.offset(), msg.value()))
        return seen
    finally:
        consumer.close()


def test_a_target_kind_leader_replicates_to_a_kafka_follower_and_fails_over(start_cluster):
    """The target broker (2) leads both partitions of `lead` (replicas [2, 1],
    min.insync.replicas=2, ISR [1, 2]). 200 records produced to the target broker with acks=all
    and idempotence are all acknowledged: each one was on the Kafka follower before its answer. The
    follower's checkpointed high watermarks reach 100 and 100: the leader passed its high
    watermark on. Then the leader is killed (-9): the controller fences it
    (broker.session.timeout.ms=3000, about 3.5 s after the kill) and elects broker 1, the only
    other ISR member, leader of both partitions with ISR [1]; reading broker 1 from the beginning
    finds every acknowledged record exactly once, at the offset it was acknowledged at, in order:
    nothing acknowledged was lost."""
    c = start_pair(start_cluster)
    leader, follower = c.brokers[LEADER], c.brokers[FOLLOWER]
    admin = AdminClient({"bootstrap.servers": leader.bootstrap})
    c.wait_registered(admin)
    create_led_topic(admin, "lead", 2)
    in_sync = {0: (LEADER, [FOLLOWER, LEADER]), 1: (LEADER, [FOLLOWER, LEADER])}
    wait_for_isr(admin, "lead", [FOLLOWER, LEADER], leaders=[LEADER], count=2,
                 what="broker 2 leading both partitions with ISR [1, 2]", timeout=60)

    values = [f"v{i}".encode() for i in range(200)]
    acked, errors = produce(leader.bootstrap, "lead", values, lambda i: i % 2,
                            acks="all", **{"enable.idempotence": True})
    assert errors == [], errors
    assert sorted(acked) == sorted((i % 2, i // 2, v) for i, v in enumerate(values)), acked
    assert partition_states(admin, "lead")[0] == in_sync, "still in sync after the writes"
    # The follower learns the leader's high watermark from the leader's next Fetch answers. It
    # matters: with eligible.leader.replicas.version=1 (Kafka 4.1's default) a leader whose ISR
    # is below min.insync.replicas does not advance its high watermark, so broker 1, leading
    # alone after the failover, would keep acknowledged records past its last known high
    # watermark unreadable until broker 2 is back (seen with a kill right after the flush).
    wait_for(lambda: checkpointed_high_watermarks(follower, "lead") == {0: 100, 1: 100},
             "the leader's high watermark 100 of both partitions on the follower", timeout=10)

    leader.kill9()
    killed = time.monotonic()
    survivor = AdminClient({"bootstrap.servers": follower.bootstrap})
    failed_over = wait_for_leader(survivor, "lead", [FOLLOWER],
                                  what="the controller electing broker 1 leader of both partitions", timeout=30)
    print(f"failover {time.monotonic() - killed:.1f} s after the kill: {failed_over}")
    # The fenced broker left the ISR (and the Metadata's brokers).
    assert failed_over == ({0: (FOLLOWER, [FOLLOWER]), 1: (FOLLOWER, [FOLLOWER])}, [FOLLOWER]), failed_over

    seen = read_partitions(follower.bootstrap, "lead", 2)
    for p in (0, 1):
        assert seen[p] == [(o, v) for (q, o, v) in sorted(acked) if q == p], (p, seen[p])


def wait_whole(admin: AdminClient, what: str) -> None:
    """`shrink` led by broker 2 with the ISR [1, 2], both brokers in the Metadata."""
    wait_for_isr(admin, "shrink", [FOLLOWER, LEADER], leaders=[LEADER], count=1, brokers=[FOLLOWER, LEADER],
                 what=what, timeout=60)


def test_a_target_kind_leader_shrinks_the_isr_when_its_follower_stops(start_cluster):
    """The target broker (2) leads `shrink` (1 partition, replicas [2, 1], min.insync.replicas=2)
    with `replica.lag.time.max.ms=5000` (Kafka's default is 30000); acks=all writes succeed with the
    Kafka follower (1) in the ISR. The follower is then killed (-9) under a controller whose
    broker.session.timeout.ms is 25000, so that for 25 s the controller still has broker 1
    registered and unfenced (fencing would take it out of the ISR too): an ISR [2] seen with
    broker 1 still among the Metadata's brokers is the leader's own AlterPartition.

    Kafka's rule, which the leader must follow: a follower is out of sync when it is behind the
    leader's log end AND has not been caught up (fetched up to the log end) for
    replica.lag.time.max.ms; the leader checks every replica.lag.time.max.ms / 2. So a stopped
    follower that had every record stays in the ISR (checked 8 s after the kill, past a check made
    more than 5 s after its last fetch); an acks=1 write then leaves it behind and the leader drops
    it at its next check (Kafka: within about 1 to 3 s, its last caught-up time being older than
    5 s by then; a leader measuring 5 s from the moment the follower fell behind would pass too).
    An acks=all write then fails with NOT_ENOUGH_REPLICAS (error 19, the broker's
    answer: retries=0 so librdkafka reports it as is) and is not appended; an acks=1 write succeeds.
    Once broker 1 is restarted and fetches, the leader takes it back into the ISR [1, 2] and acks=all
    writes succeed again. (Kafka's restarted broker fetches before the controller accepts its new
    registration, refused with DUPLICATE_BROKER_REGISTRATION until the killed incarnation's session
    expires: its leader puts it back into the ISR while the controller still has the old
    registration, the controller takes it out again when the new incarnation registers, and the
    leader puts it back once more.) Reading the
    partition from the leader finds exactly the acknowledged records (with the ISR below
    min.insync.replicas Kafka 4.1 does not advance the high watermark, so the acks=1 records become
    readable only once the ISR is whole again)."""
    c = start_pair(start_cluster, {"replica.lag.time.max.ms": str(LAG_MS)},
                   {"broker.session.timeout.ms": str(LONG_SESSION_MS)})
    leader, follower = c.brokers[LEADER], c.brokers[FOLLOWER]
    admin = AdminClient({"bootstrap.servers": leader.bootstrap})
    c.wait_registered(admin)
    create_led_topic(admin, "shrink", 1)
    whole = ({0: (LEADER, [FOLLOWER, LEADER])}, [FOLLOWER, LEADER])
    wait_whole(admin, "broker 2 leading with ISR [1, 2]")
    all_acks = {"acks": "all", "enable.idempotence": False, "retries": 0, "message.timeout.ms": 10000}
    one_ack = {"acks": "1", "enable.idempotence": False, "retries": 0, "message.timeout.ms": 10000}
    acked, errors = produce(leader.bootstrap, "shrink", [f"a{i}".encode() for i in range(20)], lambda i: 0,
                            **all_acks)
    assert errors == [] and [o for _, o, _ in acked] == list(range(20)), (acked, errors)

    follower.kill9()
    killed = time.monotonic()
    time.sleep(LAG_MS * 1.5 / 1000 + 0.5)
    assert partition_states(admin, "shrink") == whole, "a caught-up follower stays in the ISR"
    behind, errors = produce(leader.bootstrap, "shrink", [b"behind"], lambda i: 0, **one_ack)
    assert errors == [] and [o for _, o, _ in behind] == [20], (behind, errors)
    left_behind = time.monotonic()
    shrunk = wait_for_isr(admin, "shrink", [LEADER], only=[0], what="the leader dropping broker 1 from the ISR",
                          timeout=LAG_MS * 2 / 1000)
    shrink_s = time.monotonic() - left_behind
    print(f"ISR shrunk {shrink_s:.1f} s after the follower fell behind "
          f"({time.monotonic() - killed:.1f} s after the kill): {shrunk}")
    assert shrunk == ({0: (LEADER, [LEADER])}, [FOLLOWER, LEADER]), \
        f"the ISR shrank while broker 1 was still registered and unfenced: {shrunk}"

    refused, errors = produce(leader.bootstrap, "shrink", [b"refused"], lambda i: 0, **all_acks)
    assert refused == [] and [e.code() for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS], errors
    one, errors = produce(leader.bootstrap, "shrink", [b"acks1"], lambda i: 0, **one_ack)
    assert errors == [] and [o for _, o, _ in one] == [21], (one, errors)
    one = behind + one

    follower.start()  # waits out the killed broker's session (DuplicateBrokerRegistration) first
    restarted = time.monotonic()
    wait_whole(admin, "the leader taking broker 1 back into the ISR")
    print(f"follower back in the ISR {time.monotonic() - restarted:.1f} s after its start returned "
          f"({time.monotonic() - killed:.1f} s after the kill)")
    # Retried (idempotent) in case the leader's ISR is still [1] for a moment: see the docstring.
    again, errors = produce(leader.bootstrap, "shrink", [f"b{i}".encode() for i in range(5)], lambda i: 0,
                            acks="all", **{"enable.idempotence": True, "message.timeout.ms": 20000})
    assert errors == [] and [o for _, o, _ in again] == list(range(22, 27)), (again, errors)

    expected = [(o, v) for _, o, v in acked + one + again]
    assert read_partitions(leader.bootstrap, "shrink", 1)[0] == expected
