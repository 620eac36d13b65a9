"""Log compaction (cleanup.policy=compact) seen through librdkafka (confluent-kafka).

A topic created with cleanup.policy=compact gets several rounds of values for the same keys;
segments roll by segment.ms (Kafka 4.x refuses a segment.bytes below 1 MiB), the cleaner runs
every 500 ms. A consumer reading from the beginning must then see each key once in the cleaned
part, with its latest value (or its tombstone), at the offset it was written at, in offset order.
A keyless record is refused with INVALID_RECORD. The kill -9 test restarts the broker while the
cleaner works through a larger log and checks that nothing is lost or duplicated.
Both also run against Apache Kafka (KETCH_COMPAT_TARGET=kafka).
"""

import random
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

CLEANER = {"log.cleaner.backoff.ms": "500"}
SEGMENT_MS = 700


def create_compacted(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {
        "cleanup.policy": "compact",
        "segment.ms": str(SEGMENT_MS),
        "min.cleanable.dirty.ratio": "0.01",
    }
    futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1, config=config)])
    futures[topic].result(timeout=30)


def produce(bootstrap: str, topic: str, records, expect_error=None) -> list:
    """Produces (key, value) pairs in order; returns their offsets (or error codes)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "enable.idempotence": True})
    results = [None] * len(records)

    def report(i):
        def cb(err, msg):
            results[i] = err.code() if err else msg.offset()
        return cb

    for i, (key, value) in enumerate(records):
        producer.produce(topic, key=key, value=value, on_delivery=report(i))
        producer.poll(0)
    assert producer.flush(60) == 0, "undelivered records"
    return results


def read_all(bootstrap: str, topic: str) -> list:
    """Every record from the beginning to the current end: (offset, key, value)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        consumer.assign([TopicPartition(topic, 0, 0)])
        out = []
        deadline = time.time() + 60
        while time.time() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= high:
                        return out
                    continue
                raise AssertionError(f"consume error: {msg.error()}")
            out.append((msg.offset(), msg.key().decode(), msg.value().decode() if msg.value() is not None else None))
            if msg.offset() + 1 >= high:
                return out
        raise AssertionError(f"did not reach the end offset {high}: read {len(out)} records")
    finally:
        consumer.close()


def wait_compacted(bootstrap: str, topic: str, superseded, timeout: float = 90.0) -> list:
    """Reads until no superseded (key, value) is left; returns that read."""
    deadline = time.time() + timeout
    while True:
        records = read_all(bootstrap, topic)
        left = [r for r in records if (r[1], r[2]) in superseded]
        if not left:
            return records
        if time.time() > deadline:
            raise AssertionError(f"{len(left)} superseded records still there after {timeout}s, e.g. {left[:3]}")
        time.sleep(1)


@pytest.mark.broker_config(**CLEANER)
def test_compacted_topic_keeps_the_latest_value_per_key(broker):
    topic = f"compact-{uuid.uuid4().hex[:8]}"
    create_compacted(broker.bootstrap, topic)
    keys = [f"k{i}" for i in range(20)]
    latest = {}
    superseded = set()
    for round_no in range(5):
        batch = [(k, f"{k}-round{round_no}") for k in keys]
        if round_no == 4:
            batch[0] = (keys[0], None)  # a tombstone for k0
        offsets = produce(broker.bootstrap, topic, batch)
        for (k, v), off in zip(batch, offsets):
            assert isinstance(off, int) and off >= 0, f"produce failed: {off}"
            if k in latest:
                superseded.add((k, latest[k][1]))
            latest[k] = (off, v)
        time.sleep(SEGMENT_MS * 1.5 / 1000)
    # A last write rolls the final round out of the active segment.
    produce(broker.bootstrap, topic, [("roll", "x")])

    records = wait_compacted(broker.bootstrap, topic, superseded)
    offsets = [r[0] for r in records]
    assert offsets == sorted(set(offsets)), "offsets must be unique and in order"
    seen = {}
    for off, k, v in records:
        assert k not in seen, f"key {k} appears twice: {seen[k]} and {(off, v)}"
        seen[k] = (off, v)
    for k, (off, v) in latest.items():
        assert seen.get(k) == (off, v), f"key {k}: expected {(off, v)} (latest write), read {seen.get(k)}"

    # Compacted topics refuse records without a key.
    errors = produce(broker.bootstrap, topic, [(None, "no key")])
    assert errors == [KafkaError.INVALID_RECORD], errors


@pytest.mark.broker_config(**CLEANER)
def test_kill9_while_cleaning_loses_and_duplicates_nothing(broker):
    topic = f"compact-kill-{uuid.uuid4().hex[:8]}"
    create_compacted(broker.bootstrap, topic)
    rng = random.Random(7)
    latest = {}
    superseded = set()
    value_pad = "v" * 200
    for round_no in range(4):
        batch = [(f"key{rng.randrange(3000)}", f"{round_no}-{i}-{value_pad}") for i in range(8000)]
        offsets = produce(broker.bootstrap, topic, batch)
        for (k, v), off in zip(batch, offsets):
            assert isinstance(off, int) and off >= 0, f"produce failed: {off}"
            if k in latest:
                superseded.add((k, latest[k][1]))
            latest[k] = (off, v)
        time.sleep(SEGMENT_MS * 1.5 / 1000)
    produce(broker.bootstrap, topic, [("roll", "x")])
    latest["roll"] = (None, "x")

    # Kill the broker at a few moments while the cleaner is (likely) at work, restart each time.
    for delay in (0.3, 0.7, 1.2):
        time.sleep(delay)
        broker.kill9()
        broker.start()

    records = wait_compacted(broker.bootstrap, topic, superseded, timeout=120)
    offsets = [r[0] for r in records]
    assert offsets == sorted(set(offsets)), "offsets must be unique and in order after kill -9"
    seen = {}
    for off, k, v in records:
        assert k not in seen, f"key {k} appears twice after kill -9"
        seen[k] = (off, v)
    for k, (off, v) in latest.items():
        assert k in seen, f"key {k} lost"
        assert seen[k][1] == v, f"key {k}: latest value lost, read {seen[k][1][:20]}"
        if off is not None:
            assert seen[k][0] == off


@pytest.mark.broker_config(**CLEANER, **{"offsets.topic.num.partitions": "1",
                                         "offsets.topic.segment.bytes": "1048576"})
def test_consumer_offsets_is_compacted_and_replays_after_kill9(broker):
    """Thousands of commits roll __consumer_offsets; the cleaner shrinks it to about one record
    per (group, partition); after kill -9 the committed offsets are the last ones."""
    topic = f"committed-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(timeout=30)
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    commits = 5000
    for n in range(1, commits + 1):
        consumer.commit(offsets=[TopicPartition(topic, p, n * 10 + p) for p in range(3)], asynchronous=False)
    consumer.close()

    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"r-{uuid.uuid4().hex[:8]}",
                       "enable.auto.commit": False, "enable.partition.eof": True})

    def offsets_topic_records() -> int:
        low, high = reader.get_watermark_offsets(TopicPartition("__consumer_offsets", 0), timeout=30)
        reader.assign([TopicPartition("__consumer_offsets", 0, low)])
        count = 0
        deadline = time.time() + 60
        while time.time() < deadline:
            msg = reader.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF and msg.offset() >= high - 1:
                    break
                continue
            count += 1
            if msg.offset() >= high - 1:
                break
        return count

    deadline = time.time() + 120
    while True:
        count = offsets_topic_records()
        print(f"__consumer_offsets records: {count}")
        if count < commits:  # 15,000 offset records were written
            break
        assert time.time() < deadline, f"__consumer_offsets still holds {count} records"
        time.sleep(1)
    reader.close()

    broker.kill9()
    broker.start()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    committed = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=60)
    consumer.close()
    assert [tp.offset for tp in committed] == [commits * 10 + p for p in range(3)]
