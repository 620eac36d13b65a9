"""ListOffsets on a replicated partition whose followers stopped fetching, seen by librdkafka
(`get_watermark_offsets`, `offsets_for_times`), under both controllers (`[kafka]` Apache Kafka 4.1's,
`[ketch]` Ketch's own; with KETCH_COMPAT_TARGET=kafka the brokers are Kafka 4.1's, which pass it).

Partition 0 of a 3-way topic is led by broker 1. Five records are written with acks=all; then
brokers 2 and 3 are frozen (SIGSTOP) and three more are written with acks=1: the leader's log ends
at 8 but its high watermark stays at 5 (the controller's session timeout and replica.lag.time.max.ms
are 30 s, so the ISR does not shrink meanwhile). A consumer may only see up to the high watermark:

- the high watermark (LATEST) is 5, for read_uncommitted and read_committed alike (no transactions);
- a timestamp lookup finds the records below it (timestamp of record 2 -> offset 2), and nothing
  for a record at or beyond it (timestamp of record 6 -> -1), though the leader holds that record;
- once the followers are thawed they catch up: LATEST is 8 and the same lookup finds offset 6.
"""

from __future__ import annotations

import os
import signal

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import THREE_BROKER_SETTINGS, THREE_NODES, create_topic, wait_for, wait_for_isr
from conftest import TARGET

pytestmark = pytest.mark.timeout(240)

TOPIC = "hw-offsets"
BASE_TS = 1_700_000_000_000


def produce(servers: str, acks: str, first: int, count: int) -> None:
    """Records first..first+count-1 to partition 0, record i at timestamp BASE_TS + 1000 i."""
    errors = []
    p = Producer({"bootstrap.servers": servers, "acks": acks, "enable.idempotence": False,
                  "message.timeout.ms": 30000})
    for i in range(first, first + count):
        p.produce(TOPIC, value=b"r%d" % i, partition=0, timestamp=BASE_TS + 1000 * i,
                  on_delivery=lambda err, _msg: err and errors.append(err))
    assert p.flush(40) == 0 and errors == [], errors


def consumer(servers: str, isolation: str) -> Consumer:
    return Consumer({"bootstrap.servers": servers, "group.id": f"lo-{isolation}", "isolation.level": isolation,
                     "enable.auto.commit": False})


def latest(c: Consumer) -> int:
    return c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=20, cached=False)[1]


def offset_for_record(c: Consumer, i: int) -> int:
    [tp] = c.offsets_for_times([TopicPartition(TOPIC, 0, BASE_TS + 1000 * i)], timeout=20)
    assert tp.error is None, tp.error
    return tp.offset


@pytest.mark.parametrize("controller", ["kafka", "ketch"])
def test_list_offsets_stop_at_the_high_watermark(start_cluster, controller):
    c = start_cluster({n: (TARGET, THREE_BROKER_SETTINGS) for n in THREE_NODES},
                      controller_overrides={"broker.session.timeout.ms": "30000"}, parallel=True, kill=True,
                      controller=controller)
    brokers = c.brokers
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    c.wait_registered(admin, timeout=60)
    create_topic(admin, NewTopic(TOPIC, num_partitions=1, replication_factor=-1, replica_assignment=[[1, 2, 3]]),
                 KafkaError.INVALID_REPLICA_ASSIGNMENT)
    wait_for_isr(admin, TOPIC, THREE_NODES, count=1, brokers=THREE_NODES, timeout=60)
    leader = brokers[1].bootstrap
    produce(leader, "all", 0, 5)

    followers = [brokers[2].proc.pid, brokers[3].proc.pid]
    for pid in followers:
        os.kill(pid, signal.SIGSTOP)
    try:
        produce(leader, "1", 5, 3)
        uncommitted, committed = consumer(leader, "read_uncommitted"), consumer(leader, "read_committed")
        try:
            assert latest(uncommitted) == 5
            assert latest(committed) == 5
            assert offset_for_record(uncommitted, 2) == 2
            assert offset_for_record(uncommitted, 6) == -1, "found a record beyond the high watermark"
            assert offset_for_record(committed, 6) == -1
        finally:
            uncommitted.close()
            committed.close()
    finally:
        for pid in followers:
            os.kill(pid, signal.SIGCONT)

    after = consumer(leader, "read_uncommitted")
    try:
        wait_for(lambda: latest(after) == 8, "the high watermark at 8 once the followers fetch again", timeout=30)
        assert offset_for_record(after, 6) == 6
    finally:
        after.close()
