"""Followers copy whatever their leader holds (issue 38; Kafka's `UnifiedLog.appendAsFollower`):
a replica checks what it copies for integrity (CRC, offsets only going forward, epochs never
going back), never with the rules the leader applied to its producers, with the leader's config
and clock. Before this held, Ketch's followers refused, and fetched again forever, every batch of
a LogAppendTime topic (acks=all writes then never reached min.insync.replicas), compacted batches
with offset gaps (a follower whose copy of a compacted topic was lost never rejoined the ISR), and
records timestamped ahead of their own clock (metadata from a controller whose clock is ahead
never applied).

Three brokers (THREE_BROKER_SETTINGS: min.insync.replicas=2) under a Kafka 4.1 controller, in two
line-ups: `all`, three brokers of the target kind, and (Ketch target only) `mixed`, a Kafka broker
(1) with two Ketch brokers (2, 3), where partitions are placed so that a Ketch broker copies from a
Kafka leader and a Kafka broker from a Ketch leader. A follower's copy is checked by making it
the leader (kill -9 of the leader: the controller elects the next replica of the assignment that
is in the ISR) and reading it back: every record at the offset it was acknowledged at.

- LogAppendTime: 3,000 records written acks=all to two partitions (led by brokers 1 and 2) all
  acknowledged, the ISR staying whole, every record read back with a LogAppendTime timestamp.
- Compacted: after the leader's cleaner removed most of the records (holes within batches and
  between them), a follower is killed, its partition directory deleted and the broker restarted:
  it copies the compacted log back, rejoins the ISR and, made leader, serves exactly the records
  of the compacted log (each an acknowledged record at its offset, each key's latest value).
- Clocks: the controller's clock two hours ahead (a Kafka or a Ketch controller; libfaketime, see
  clock.py) and a follower's two hours behind: the brokers register, follow the metadata log, and
  a replicated topic takes acks=all writes. And (Ketch target) a quorum of three Ketch
  controllers whose active controller's clock jumps two hours ahead keeps committing: topics are
  still created, and every voter catches up.

Also against Kafka (KETCH_COMPAT_TARGET=kafka: the `all` line-ups of Kafka brokers).
"""

from __future__ import annotations

import shutil
import time

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from clock import FakeClock
from cluster import THREE_BROKER_SETTINGS, bootstrap, create_topic, wait_for, wait_for_isr, wait_for_leader
from conftest import TARGET
from test_cluster_under_kafka_controller import assert_log_is, idempotent_producer, produce_all

pytestmark = pytest.mark.timeout(300)

LINEUPS = {"all": (TARGET, TARGET, TARGET)}
if TARGET == "ketch":
    LINEUPS["mixed"] = ("kafka", "ketch", "ketch")
CLEANER = {"log.cleaner.backoff.ms": "500"}


def start(start_cluster, lineup: str, extra=None, controller: str = "kafka", before_start=None):
    """The line-up's three brokers (node ids 1, 2, 3) under a fresh controller, every broker in
    the Metadata; `before_start(cluster)` runs before anything starts."""
    settings = {**THREE_BROKER_SETTINGS, **(extra or {})}
    nodes = {n: (kind, settings) for n, kind in zip((1, 2, 3), LINEUPS[lineup])}
    c = start_cluster(nodes, parallel=True, kill=True, controller=controller, before_start=before_start)
    c.wait_registered(AdminClient({"bootstrap.servers": c.bootstrap()}), timeout=90)
    return c


def create(admin, topic: str, assignment: list[list[int]], config: dict) -> None:
    """`topic` with explicit replicas (the first of each list leads), min.insync.replicas=2;
    waits until every partition has its whole ISR."""
    new = NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment, config={"min.insync.replicas": "2", **config})
    create_topic(admin, new, KafkaError.INVALID_REPLICATION_FACTOR)
    wait_for_isr(admin, topic, [1, 2, 3], leaders={a[0] for a in assignment}, count=len(assignment),
                 what=f"{topic} led as assigned with its whole ISR", timeout=60)


def make_leader(c, topic: str, partition: int, new_leader: int, old_leader: int) -> list:
    """kill -9 of `old_leader` (it leads `partition`); waits until `new_leader` (the next replica of
    the assignment in the ISR) leads it. Returns the surviving brokers."""
    c.brokers[old_leader].kill9()
    survivors = [b for n, b in c.brokers.items() if n != old_leader]
    admin = AdminClient({"bootstrap.servers": bootstrap(survivors)})
    wait_for_leader(admin, topic, {new_leader}, only=[partition], timeout=60,
                    what=f"{topic}-{partition} led by {new_leader} after kill -9 of {old_leader}")
    return survivors


@pytest.mark.parametrize("lineup", LINEUPS)
def test_a_log_append_time_topic_keeps_its_isr_under_acks_all(start_cluster, lineup):
    c = start(start_cluster, lineup)
    servers = c.bootstrap()
    admin = AdminClient({"bootstrap.servers": servers})
    # Partition 0 led by broker 1 (Kafka in `mixed`), partition 1 by broker 2 (Ketch in `mixed`).
    create(admin, "appended", [[1, 2, 3], [2, 1, 3]], {"message.timestamp.type": "LogAppendTime"})
    started = time.monotonic()
    acked = produce_all(servers, "appended", [b"v%d" % i for i in range(3000)], 2)
    print(f"{lineup}: 3,000 records acknowledged (acks=all) in {time.monotonic() - started:.1f} s")
    wait_for_isr(admin, "appended", [1, 2, 3], count=2, timeout=5, what="the ISR still whole after the writes")

    consumer = Consumer({"bootstrap.servers": servers, "group.id": "lat", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("appended", p, 0) for p in (0, 1)])
        types, count = set(), 0
        deadline = time.monotonic() + 30
        while count < len(acked):
            assert time.monotonic() < deadline, f"read {count} of {len(acked)} records"
            for m in consumer.consume(1000, 1.0):
                assert not m.error(), m.error()
                types.add(m.timestamp()[0])
                count += 1
        assert types == {TIMESTAMP_LOG_APPEND_TIME}, types
    finally:
        consumer.close()

    # The followers' copies: partition 0's followers take over from broker 1.
    survivors = make_leader(c, "appended", 0, 2, 1)
    assert_log_is(bootstrap(survivors), "appended", acked, 2)


def produce_rounds(servers: str, topic: str, rounds: int, keys: int) -> list:
    """`rounds` rounds of a value for each of `keys` keys (one idempotent acks=all producer), a
    segment roll (segment.ms) apart, then one more record that rolls the last round's segment:
    every round but the newest is cleanable. Returns the acknowledged (offset, key, value)."""
    acks = []

    def report(err, msg):
        assert err is None, err
        acks.append((msg.offset(), msg.key(), msg.value()))

    producer = idempotent_producer(servers)
    for r in range(rounds):
        for k in range(keys):
            producer.produce(topic, key=b"k%d" % k, value=b"r%d-k%d-" % (r, k) + b"x" * 100, on_delivery=report)
            producer.poll(0)
        assert producer.flush(60) == 0
        time.sleep(0.8)
    producer.produce(topic, key=b"roll", value=b"roll", on_delivery=report)
    assert producer.flush(60) == 0
    return acks


def compacted_copy_is_exact(servers: str, topic: str, acked: list) -> list:
    """The records of `topic` (one partition) read from the beginning: each an acknowledged
    record at its offset, each key's latest value present; returns them."""
    end = max(o for o, _, _ in acked) + 1
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "compacted-check",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen, at_end = [], -1
        deadline = time.monotonic() + 30
        while at_end < end:
            assert time.monotonic() < deadline, f"reading {topic} timed out at {at_end}, want {end}"
            m = consumer.poll(0.5)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                at_end = m.offset()
                continue
            seen.append((m.offset(), m.key(), m.value()))
    finally:
        consumer.close()
    by_offset = {o: (k, v) for o, k, v in acked}
    strangers = [r for r in seen if by_offset.get(r[0]) != (r[1], r[2])]
    assert not strangers, f"records not acknowledged at their offset: {strangers[:5]}"
    latest = {}
    for o, k, v in sorted(acked):
        latest[k] = (o, k, v)
    missing = sorted(set(latest.values()) - set(seen))
    assert not missing, f"latest values missing: {missing[:5]}"
    return seen


def wait_compacted(servers: str, topic: str, acked: list) -> list:
    """Until the leader's cleaner removed most records (holes within and between batches)."""
    def compacted():
        seen = compacted_copy_is_exact(servers, topic, acked)
        return seen if len(seen) < len(acked) // 2 else None
    return wait_for(compacted, f"{topic} compacted by its leader", timeout=60, interval=1)


def delete_copy_and_rejoin(c, topic: str, victim: int) -> None:
    """kill -9 of `victim`, its partition directory of `topic` deleted, restart: waits until it is
    back in the ISR (it copied the leader's log again)."""
    broker = c.brokers[victim]
    broker.kill9()
    others = [n for n in c.brokers if n != victim]
    admin = AdminClient({"bootstrap.servers": bootstrap(c.brokers[n] for n in others)})
    # Fenced by the controller (its session expired): out of the ISR.
    wait_for_isr(admin, topic, others, timeout=60, what=f"broker {victim} out of the ISR of {topic}")
    copy = broker.data_dir / f"{topic}-0"
    assert copy.is_dir(), f"no {copy}"
    shutil.rmtree(copy)
    started = time.monotonic()
    broker.start()
    wait_for_isr(admin, topic, [1, 2, 3], timeout=90, what=f"broker {victim} back in the ISR of {topic}")
    print(f"broker {victim} ({broker.target}) copied {topic} again and rejoined its ISR "
          f"{time.monotonic() - started:.1f} s after its restart")


@pytest.mark.parametrize("lineup", LINEUPS)
def test_a_follower_whose_copy_of_a_compacted_topic_was_deleted_copies_it_back(start_cluster, lineup):
    c = start(start_cluster, lineup, CLEANER)
    servers = c.bootstrap()
    admin = AdminClient({"bootstrap.servers": servers})
    config = {"cleanup.policy": "compact", "segment.ms": "700", "min.cleanable.dirty.ratio": "0.01"}
    # `from1`: led by broker 1 (Kafka in `mixed`), copied again by broker 2 (Ketch);
    # `from2`: led by broker 2 (Ketch), copied again by broker 1 (Kafka in `mixed`).
    create(admin, "from1", [[1, 2, 3]], config)
    create(admin, "from2", [[2, 1, 3]], config)
    acked = {t: produce_rounds(servers, t, 6, 50) for t in ("from1", "from2")}
    for t in acked:
        held = wait_compacted(servers, t, acked[t])
        print(f"{t}: {len(held)} of {len(acked[t])} records left by the leader's cleaner")

    delete_copy_and_rejoin(c, "from1", victim=2)
    survivors = make_leader(c, "from1", 0, new_leader=2, old_leader=1)
    compacted_copy_is_exact(bootstrap(survivors), "from1", acked["from1"])

    # Broker 1 is down: its copy of from2 goes, and it comes back.
    delete_copy_and_rejoin(c, "from2", victim=1)
    survivors = make_leader(c, "from2", 0, new_leader=1, old_leader=2)
    compacted_copy_is_exact(bootstrap(survivors), "from2", acked["from2"])


@pytest.mark.parametrize("controller", ["kafka", "ketch"])
def test_brokers_follow_a_controller_two_hours_ahead_and_a_follower_two_hours_behind(start_cluster, tmp_path,
                                                                                      controller):
    def skew(c):
        c.ctl.env.update(FakeClock(tmp_path / "controller-clock", "+2h").env())
        c.brokers[2].env.update(FakeClock(tmp_path / "broker2-clock", "-2h").env())

    c = start(start_cluster, "all", controller=controller, before_start=skew)
    servers = c.bootstrap()
    admin = AdminClient({"bootstrap.servers": servers})
    # Led by broker 1 (the machine's clock); broker 2, two hours behind, copies timestamps that
    # are two hours in its future (its message.timestamp.after.max.ms is one hour).
    create(admin, "skewed", [[1, 2, 3]], {})
    acked = produce_all(servers, "skewed", [b"s%d" % i for i in range(500)], 1)
    wait_for_isr(admin, "skewed", [1, 2, 3], timeout=5, what="the ISR still whole after the writes")
    survivors = make_leader(c, "skewed", 0, new_leader=2, old_leader=1)
    assert_log_is(bootstrap(survivors), "skewed", acked, 1)


@pytest.mark.skipif(TARGET != "ketch", reason="a quorum of Ketch controllers")
def test_a_quorum_keeps_committing_when_its_leaders_clock_jumps_two_hours_ahead(tmp_path, kafka_libs):
    from cluster import broker_under, new_cluster_id
    from conftest import free_port
    from kafka_tools import KafkaTools
    from test_controller_quorum import VOTERS, Quorum, Voter, ids, leader_of, quorum_status, running

    ports = {n: free_port() for n in VOTERS}
    cluster_id = new_cluster_id()
    voters, clocks = {}, {}
    for n in VOTERS:
        (tmp_path / f"c{n}").mkdir()
        voters[n] = Voter(tmp_path / f"c{n}", n, ports, cluster_id)
        clocks[n] = FakeClock(tmp_path / f"clock{n}", "+0")
        voters[n].env.update(clocks[n].env())
    brokers = {n: broker_under(Quorum(voters), tmp_path / f"b{n}", n, "ketch") for n in (11, 12)}
    with running([*voters.values(), *brokers.values()]):
        kt = KafkaTools(kafka_libs, brokers[11], tmp_path)
        servers = bootstrap(brokers.values())
        admin = AdminClient({"bootstrap.servers": servers})
        leader, _ = leader_of(kt, voters.values())
        clocks[leader].set("+2h")
        time.sleep(2)  # libfaketime reads the file again within a second

        # The leader's records now carry timestamps two hours ahead of the other voters' and the
        # brokers' clocks: they are committed (a follower voter appends them) and applied.
        create_topic(admin, NewTopic("ahead", num_partitions=2, replication_factor=2),
                     KafkaError.INVALID_REPLICATION_FACTOR, "a topic created under the leader ahead", timeout=60)
        wait_for_isr(admin, "ahead", [11, 12], count=2, timeout=60)
        acked = produce_all(servers, "ahead", [b"a%d" % i for i in range(200)], 2)
        assert_log_is(servers, "ahead", acked, 2)

        def caught_up():
            status = quorum_status(kt, voters.values())
            return status if status.get("MaxFollowerLag") == "0" and ids(status.get("CurrentVoters", "[]")) == set(
                VOTERS) else None

        status = wait_for(caught_up, "every voter caught up with the leader ahead", timeout=60)
        assert int(status["LeaderId"]) == leader, f"the leader changed: {status}"
