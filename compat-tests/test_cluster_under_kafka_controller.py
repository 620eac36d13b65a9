"""A 3-broker cluster under an Apache Kafka 4.1 controller: brokers 1, 2 and 3 are all of the target
kind (`process.roles=broker`), the controller is a controller-only Kafka 4.1 node
(cluster.KafkaController, broker.session.timeout.ms=3000: a killed broker is fenced about 3 s
after its last heartbeat, and the controller then elects new leaders and drops it from every ISR).
Every broker gets the same Kafka settings (cluster.THREE_BROKER_SETTINGS): replication factor 3 for
the topics, `__consumer_offsets` (6 partitions) and the transaction log, min.insync.replicas=2.

What the brokers must do together:

- replicate a topic 3 ways, take over leadership when the controller fails a killed leader over,
  and keep an idempotent acks=all producer's records exactly once across the failover (followers
  keep the producers' sequence state, so a retried batch is recognised by the new leader);
- coordinate a consumer group on the leader of its `__consumer_offsets` partition, replicate the
  committed offsets, and serve them from the new leader once the coordinator is killed;
- hand out producer ids from the controller's blocks (AllocateProducerIds), so that idempotent
  producers initialised on different brokers never share a producer id.

Seen with Kafka 4.1 brokers (KETCH_COMPAT_TARGET=kafka, which these tests pass; requests from
KETCH_COMPAT_KAFKA_REQUEST_LOG=1): librdkafka sends FindCoordinator to any broker (answered
COORDINATOR_NOT_AVAILABLE while `__consumer_offsets` is being created), the group's JoinGroup,
SyncGroup, Heartbeat, OffsetCommit and OffsetFetch to the coordinator, Fetch and ListOffsets to the
partition leaders, and InitProducerId to a random broker, whose first one is answered
COORDINATOR_LOAD_IN_PROGRESS while it gets its first block of 1000 ids from the controller (ids
0.., 1000.., 2000..). New leaders show in the Metadata about 3 s after a kill -9; the producer's
retries and the group's move to the new coordinator raise no error code on the way.
"""

from __future__ import annotations

import logging
import re
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from cluster import (bootstrap, create_three_way_topic, group_offsets, partition_states, read_all,
                     three_broker_cluster, wait_for_isr, wait_for_leader)
from kafka_tools import KafkaTools

pytestmark = pytest.mark.timeout(240)  # pytest-timeout; each test takes well under 2 minutes


@pytest.fixture
def cluster(start_cluster):
    """{node id: started broker} of a fresh 3-broker cluster (cluster.three_broker_cluster), every
    broker unfenced (in the Metadata); the brokers are killed (-9) at the end."""
    return three_broker_cluster(start_cluster)


class Acks:
    """Delivery reports of a producer: acked [(partition, offset, value)] and errors."""

    def __init__(self):
        self.acked, self.errors = [], []

    def __call__(self, err, msg):
        if err:
            self.errors.append(err)
        else:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))


def idempotent_producer(servers: str, **extra) -> Producer:
    return Producer({"bootstrap.servers": servers, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                     "message.timeout.ms": 60000, **extra})


def produce_all(servers: str, topic: str, values, partitions: int) -> list:
    acks = Acks()
    producer = idempotent_producer(servers)
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % partitions, on_delivery=acks)
        producer.poll(0)
    assert producer.flush(60) == 0, "records neither delivered nor failed"
    assert acks.errors == [] and len(acks.acked) == len(values), acks.errors
    return acks.acked


def assert_log_is(servers: str, topic: str, acked: list, partitions: int) -> None:
    """The partitions hold exactly the acknowledged records, each at its acknowledged offset."""
    expected = {p: sorted((o, v) for q, o, v in acked if q == p) for p in range(partitions)}
    ends = {p: (rows[-1][0] + 1 if rows else 0) for p, rows in expected.items()}
    seen = read_all(servers, topic, ends)
    for p in range(partitions):
        assert seen[p] == expected[p], (p, len(seen[p]), len(expected[p]),
                                        sorted(set(seen[p]) ^ set(expected[p]))[:10])


def test_replicated_topic_survives_kill_of_its_leader(cluster):
    """`survive`: 3 partitions, replication factor 3, min.insync.replicas=2, ISR [1, 2, 3]. An
    idempotent acks=all producer bootstrapped to all three brokers writes 300 records; the leader
    of partition 0 is killed (-9); the producer writes 300 more (10 every 0.2 s) while the controller
    fences the dead broker and elects new leaders (the writes to partitions led by survivors wait
    for the ISR to lose the dead follower, the ones to partition 0 for its new leader). Every record
    is delivered without error, and the survivors hold each acknowledged record exactly once, at
    the offset it was acknowledged at, and nothing else."""
    topic, partitions = "survive", 3
    servers = bootstrap(cluster.values())
    admin = AdminClient({"bootstrap.servers": servers})
    create_three_way_topic(admin, topic, partitions)
    first = produce_all(servers, topic, [f"a{i}".encode() for i in range(300)], partitions)
    victim = partition_states(admin, topic)[0][0][0]
    survivors = [b for n, b in cluster.items() if n != victim]
    survivor_ids = sorted(n for n in cluster if n != victim)
    watcher = AdminClient({"bootstrap.servers": bootstrap(survivors)})

    acks = Acks()
    producer = idempotent_producer(servers)
    cluster[victim].kill9()
    killed = time.monotonic()
    failover, i = None, 0
    while i < 300 or failover is None:
        assert time.monotonic() - killed < 60, f"no failover of broker {victim}'s partitions within 60 s"
        for _ in range(10 if i < 300 else 0):
            producer.produce(topic, value=f"b{i}".encode(), partition=i % partitions, on_delivery=acks)
            i += 1
        if failover is None and (s := partition_states(watcher, topic)) and \
                all(leader in survivor_ids for leader, _ in s[0].values()):
            failover = (time.monotonic() - killed, s)
        producer.poll(0.2)
    assert producer.flush(90) == 0, "records neither delivered nor failed"
    print(f"broker {victim} killed; new leaders seen {failover[0]:.1f} s later: {failover[1]}; "
          f"all delivered {time.monotonic() - killed:.1f} s after the kill")
    assert acks.errors == [] and len(acks.acked) == 300, acks.errors
    # The fenced broker left the Metadata and every ISR.
    wait_for_isr(watcher, topic, survivor_ids, brokers=survivor_ids, what=f"broker {victim} out of every ISR")
    assert_log_is(bootstrap(survivors), topic, first + acks.acked, partitions)


def consume(consumer: Consumer, n: int, timeout: float) -> list:
    """Exactly `n` records [(partition, offset, value)] from a subscribed consumer (fewer: fails)."""
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        assert time.monotonic() < deadline, f"{len(got)} of {n} records within {timeout} s"
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        got.append((msg.partition(), msg.offset(), msg.value()))
    return got


def test_consumer_group_continues_after_its_coordinator_is_killed(cluster):
    """`orders`: 3 partitions, replication factor 3, 200 records. Consumer group `g` (one
    librdkafka consumer, classic protocol, no auto commit) reads 100 of them and commits their
    offsets synchronously; the consumer leaves. The group's coordinator (describe_consumer_groups)
    is killed (-9); once the controller has moved every leadership (orders and `__consumer_offsets`)
    off the dead broker, ListConsumerGroupOffsets asked of the survivors gives the committed offsets
    (the new leader of the group's `__consumer_offsets` partition coordinates the group), and a new
    consumer of `g`, bootstrapped to the survivors, starts exactly there: it gets the other 100
    records, none of the first 100, none twice."""
    topic, partitions, group = "orders", 3, "g"
    servers = bootstrap(cluster.values())
    admin = AdminClient({"bootstrap.servers": servers})
    create_three_way_topic(admin, topic, partitions)
    produced = produce_all(servers, topic, [f"o{i}".encode() for i in range(200)], partitions)

    settings = {"group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    consumer = Consumer({"bootstrap.servers": servers, **settings})
    try:
        consumer.subscribe([topic])
        first = consume(consumer, 100, timeout=60)
        positions = {p: 1 + max((o for q, o, _ in first if q == p), default=-1) for p in range(partitions)}
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in positions.items()], asynchronous=False)
        described = admin.describe_consumer_groups([group])[group].result(timeout=30)
    finally:
        consumer.close()
    coordinator = described.coordinator.id
    committed = {(topic, p): o for p, o in positions.items()}
    assert group_offsets(admin, group) == committed

    survivors = [b for n, b in cluster.items() if n != coordinator]
    survivor_ids = sorted(n for n in cluster if n != coordinator)
    watcher = AdminClient({"bootstrap.servers": bootstrap(survivors)})
    cluster[coordinator].kill9()
    killed = time.monotonic()

    # Every partition of both topics (each in the answer) led by a survivor, the killed one fenced.
    wait_for_leader(watcher, [topic, "__consumer_offsets"], survivor_ids, brokers=survivor_ids,
                    what=f"no partition led by the killed coordinator {coordinator}", timeout=60)
    print(f"coordinator {coordinator} killed; every leadership moved {time.monotonic() - killed:.1f} s later")
    assert group_offsets(watcher, group) == committed, "the committed offsets after the coordinator's kill"
    print(f"committed offsets served by the survivors {time.monotonic() - killed:.1f} s after the kill")

    consumer = Consumer({"bootstrap.servers": bootstrap(survivors), **settings})
    try:
        consumer.subscribe([topic])
        rest = consume(consumer, 100, timeout=60)
        deadline = time.monotonic() + 3  # nothing more (no record twice)
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            assert msg is None or msg.error(), f"a record past the 200: {msg.partition()}/{msg.offset()}"
    finally:
        consumer.close()
    print(f"the new consumer had the other 100 records {time.monotonic() - killed:.1f} s after the kill")
    assert len(set(rest)) == 100 and not set(rest) & set(first), "a record read twice"
    assert sorted(rest) == sorted(set(produced) - set(first))
    assert all(o >= positions[p] for p, o, _ in rest), "a record before the committed offset"


ASKING = re.compile(r"/(\d+): Acquiring ProducerId")  # librdkafka's debug "eos" lines
ACQUIRED = re.compile(r"Acquired PID\{Id:(\d+),Epoch:(\d+)\}")


def producer_with_pid_from(broker, node: int, attempts: int = 60):
    """(idempotent producer, its producer id, producers discarded) where broker `node` answered the
    InitProducerId. librdkafka asks a random connected broker (not necessarily its bootstrap one):
    a producer whose id came from another broker is dropped and a new one made."""
    for attempt in range(attempts):
        lines: list[str] = []
        log = logging.getLogger(f"pids-{node}-{attempt}-{time.monotonic_ns()}")
        log.addHandler(type("Keep", (logging.Handler,), {"emit": lambda self, r: lines.append(r.getMessage())})())
        log.setLevel(logging.DEBUG)
        log.propagate = False
        producer = idempotent_producer(broker.bootstrap, debug="eos", logger=log)
        deadline = time.monotonic() + 30
        while not (acquired := [m for line in lines if (m := ACQUIRED.search(line))]):
            assert time.monotonic() < deadline, f"no producer id within 30 s: {lines}"
            producer.poll(0.1)  # also hands librdkafka's log lines to the logger
        asked = [int(m.group(1)) for line in lines if (m := ASKING.search(line))]
        print(f"producer bootstrapped to broker {node}: " + "; ".join(
            x.split("]: ", 1)[-1] for x in lines if x.startswith("GETPID")))
        if asked and asked[-1] == node:
            return producer, int(acquired[0].group(1)), attempt
    raise AssertionError(f"no InitProducerId answered by broker {node} in {attempts} producers")


def test_idempotent_producers_on_different_brokers_get_distinct_producer_ids(cluster, kafka_libs, tmp_path):
    """Three idempotent producers whose InitProducerId was answered by brokers 1, 2 and 3 (seen in
    librdkafka's debug log) write 20 records each in turn, five rounds, to the one partition of
    `pids`. Producer ids from a broker-local counter would collide (same id, epoch 0, sequences
    from 0 in each): the leader would take another producer's batch for a duplicate and acknowledge
    it at the first one's offset without writing it. With ids from the controller's
    AllocateProducerIds blocks the three ids differ, Kafka's `describe-producers` lists the three,
    each with last sequence 99, and the partition holds the 300 records once each, at their
    acknowledged offsets."""
    topic = "pids"
    servers = bootstrap(cluster.values())
    create_three_way_topic(AdminClient({"bootstrap.servers": servers}), topic, 1)
    producers, pids = {}, {}
    for n, b in cluster.items():
        producers[n], pids[n], dropped = producer_with_pid_from(b, n)
        print(f"broker {n} gave producer id {pids[n]} (after {dropped} producers with ids from other brokers)")
    assert len(set(pids.values())) == 3, f"one producer id from two brokers: {pids}"

    acks = Acks()
    for r in range(5):
        for n, producer in producers.items():
            for i in range(20):
                producer.produce(topic, value=f"p{n}-{r * 20 + i}".encode(), partition=0, on_delivery=acks)
            assert producer.flush(60) == 0, "records neither delivered nor failed"
    assert acks.errors == [] and len(acks.acked) == 300, acks.errors
    assert len({o for _, o, _ in acks.acked}) == 300, "two records acknowledged at one offset"
    assert_log_is(servers, topic, acks.acked, 1)

    r = KafkaTools(kafka_libs, cluster[1], tmp_path).run(
        "org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", servers,
        "describe-producers", "--topic", topic, "--partition", "0", timeout=60)
    rows = [line.split() for line in r.stdout.splitlines()[1:] if line.strip()]
    assert sorted(int(row[0]) for row in rows) == sorted(pids.values()), r.out
    assert [row[3] for row in rows] == ["99"] * 3, r.out
