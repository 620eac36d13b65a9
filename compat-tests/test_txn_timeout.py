"""transaction.timeout.ms is enforced by the coordinator: an open transaction that outlives its
timeout is aborted and its producer fenced (librdkafka / confluent-kafka as the client)."""

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


# Kafka checks for timed-out transactions every 10 s by default; Ketch checks continuously.
@pytest.mark.broker_config(**{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
def test_expired_transaction_is_aborted_and_producer_fenced(broker):
    topic = "txn-timeout"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)

    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "txn-timeout-id",
                         "transaction.timeout.ms": 2000})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, value=f"doomed-{i}".encode(), partition=0)
    producer.flush(30)

    # Past the timeout the coordinator aborts the transaction and bumps the epoch.
    time.sleep(5)
    with pytest.raises(KafkaException) as failure:
        producer.commit_transaction(30)
    error = failure.value.args[0]
    assert error.fatal() or error.txn_requires_abort(), f"unexpected commit outcome: {error}"

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "txn-timeout-reader",
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen, eof, deadline = [], False, time.time() + 20
    while not eof and time.time() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error():
            eof = message.error().code() == -191  # _PARTITION_EOF
            continue
        seen.append(message.value())
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    consumer.close()
    assert eof, "read_committed consumer never reached the end: the LSO is stuck"
    assert seen == [], f"aborted records were visible to read_committed: {seen}"
    assert high == 6, f"expected 5 records and one abort marker, high watermark is {high}"
