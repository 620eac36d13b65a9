"""Large fetches through librdkafka (confluent-kafka): the path where Ketch sends stored
batches straight from segment files (sendfile) instead of copying them.

Three partitions get about 24 MiB of records of mixed sizes (100 B to 300 KiB, a 300 KiB record
above the consumer's per-partition fetch size, so KIP-74's "at least one batch" is needed), over
1 MiB segments so fetches end at segment boundaries. Two consumers read everything back from the
beginning: one with Kafka's default fetch sizes (multi-megabyte responses), one with small ones
(many responses, each cut at a batch boundary). Every record must come back once, at its offset,
with its exact bytes. Also runs against Apache Kafka (KETCH_COMPAT_TARGET=kafka).
"""

import hashlib
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 3


def value_of(partition: int, i: int) -> bytes:
    """Deterministic, incompressible-ish bytes; every 97th record is 300 KiB."""
    size = 300 * 1024 if i % 97 == 50 else 100 + (i * 7919) % 20_000
    seed = hashlib.sha256(f"{partition}/{i}".encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def produce_all(bootstrap: str, topic: str, per_partition: int) -> dict:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "message.max.bytes": 2_000_000, "compression.type": "none"})
    offsets = {}
    failures = []

    def report(err, msg):
        if err:
            failures.append(err)
        else:
            offsets[(msg.partition(), int(msg.key()))] = msg.offset()

    for i in range(per_partition):
        for p in range(PARTITIONS):
            producer.produce(topic, key=str(i).encode(), value=value_of(p, i), partition=p, on_delivery=report)
        producer.poll(0)
    assert producer.flush(120) == 0, "undelivered records"
    assert not failures, failures[:3]
    return offsets


def consume_all(bootstrap: str, topic: str, expected: int, extra: dict) -> dict:
    config = {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}", "enable.auto.commit": False,
              "enable.partition.eof": True, **extra}
    consumer = Consumer(config)
    seen = {}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        eof = set()
        while len(eof) < PARTITIONS or len(seen) < expected:
            msg = consumer.poll(10.0)
            assert msg is not None, f"no message within 10 s after {len(seen)} of {expected}"
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                eof.add(msg.partition())
                continue
            key = (msg.partition(), int(msg.key()))
            assert key not in seen, f"record {key} delivered twice"
            assert msg.value() == value_of(*key), f"record {key} at offset {msg.offset()} has other bytes"
            seen[key] = msg.offset()
    finally:
        consumer.close()
    return seen


def test_large_fetches_return_every_record_exactly(broker):
    topic = f"large-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    config = {"segment.bytes": str(1 << 20), "max.message.bytes": "2000000"}
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1,
                                  config=config)])[topic].result(timeout=30)
    per_partition = 800
    offsets = produce_all(broker.bootstrap, topic, per_partition)
    assert len(offsets) == per_partition * PARTITIONS
    # Kafka's defaults: 1 MiB per partition, 50 MiB per response.
    assert consume_all(broker.bootstrap, topic, len(offsets), {}) == offsets
    # Small fetches: a 300 KiB record is above the per-partition limit and still delivered.
    small = {"max.partition.fetch.bytes": 64 * 1024, "fetch.max.bytes": 128 * 1024, "message.max.bytes": 100_000}
    assert consume_all(broker.bootstrap, topic, len(offsets), small) == offsets
