"""Time-based segment rolls follow Kafka's rule (LogSegment.shouldRoll), seen through librdkafka.

Kafka 4.1 rolls the active segment before an append when the segment is non-empty and
    incoming batch's max timestamp - segment's first batch's max timestamp > segment.ms - jitter
(the broker clock minus the segment's creation only when the first batch has no timestamp);
jitter is drawn per segment uniformly in [0, min(segment.jitter.ms, segment.ms)). Every
produce() + flush() here is one batch in one request; the tests read the segment files
(<data_dir>/<topic>-0/*.log, Kafka's batch format on both targets) to check exactly which
batches landed in which segment, and read the records back with a consumer:

1. 1970 CreateTime timestamps with the default segment.ms: one segment for all batches; a
   consumer placed inside the first batch and one from the log start after DeleteRecords (to an
   offset inside a later batch) read every remaining record in order.
2. Recent CreateTime timestamps, small segment.ms: a batch exactly segment.ms after the first
   does not roll, one ms more rolls, an older (out-of-order) timestamp never rolls; the broker
   clock plays no part.
3. LogAppendTime: rolls follow the broker's append times (a sleep past segment.ms rolls); the
   segment layout must match Kafka's rule replayed over the append times stored in the files.
4. segment.jitter.ms (equal to segment.ms, and far above it: Kafka caps it at segment.ms): equal
   timestamps never roll, timestamps more than segment.ms apart always roll.

Passes against Apache Kafka 4.1 (KETCH_COMPAT_TARGET=kafka); with Ketch's old rule (broker
clock minus the first batch's timestamp) 1, 2 and 4 fail.
"""

import struct
import time
import uuid

import pytest
from confluent_kafka import (OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Consumer,
                             Producer, TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

BATCH_HEADER = struct.Struct(">qiibihiqqqhii")  # Kafka RecordBatch v2 header, 61 bytes


def create_topic(bootstrap: str, config: dict) -> str:
    topic = f"roll-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1, config=config)])
    futures[topic].result(timeout=30)
    return topic


def produce_batches(bootstrap: str, topic: str, batches) -> list:
    """Each element of `batches` is a list of (value, timestamp or None) sent as one batch in one
    request (produce all, then flush; linger.ms keeps them together, flush sends at once).
    Returns the offsets of each batch."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1000,
                         "enable.idempotence": False, "max.in.flight.requests.per.connection": 1})
    out = []
    for batch in batches:
        offsets = []

        def cb(err, msg):
            assert err is None, f"produce failed: {err}"
            offsets.append(msg.offset())

        for value, ts in batch:
            kw = {"timestamp": ts} if ts is not None else {}
            producer.produce(topic, value=value.encode(), on_delivery=cb, **kw)
        assert producer.flush(30) == 0, "undelivered records"
        assert offsets == list(range(offsets[0], offsets[0] + len(batch))), f"not one batch: {offsets}"
        out.append(offsets)
    return out


def read_segments(broker, topic: str) -> list:
    """[(segment base offset, [(batch base offset, last offset, max timestamp), ...]), ...] from
    the *.log files of partition 0 (*.deleted, *.cleaned, *.swap ignored)."""
    segments = []
    for path in sorted((broker.data_dir / f"{topic}-0").glob("*.log")):
        data = path.read_bytes()
        batches, pos = [], 0
        while pos + BATCH_HEADER.size <= len(data):
            (base, length, _epoch, magic, _crc, _attrs, last_delta, _base_ts, max_ts,
             _pid, _pepoch, _seq, _count) = BATCH_HEADER.unpack_from(data, pos)
            if length <= 0 or magic != 2 or pos + 12 + length > len(data):
                break  # preallocated tail or a write in progress
            batches.append((base, base + last_delta, max_ts))
            pos += 12 + length
        segments.append((int(path.stem), batches))
    return segments


def layout(broker, topic: str, expected=None, timeout: float = 5.0) -> list:
    """Batch base offsets per segment, e.g. [[0, 5], [10]]; waits up to `timeout` for `expected`."""
    deadline = time.monotonic() + timeout
    while True:
        got = [[b[0] for b in batches] for _, batches in read_segments(broker, topic)]
        if got == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def consume(bootstrap: str, topic: str, start: int, end: int, timeout: float = 30.0) -> list:
    """Records [(offset, value, timestamp type, timestamp)] from `start` (an offset or
    OFFSET_BEGINNING) until offset end-1."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "enable.auto.commit": False, "auto.offset.reset": "error"})
    try:
        consumer.assign([TopicPartition(topic, 0, start)])
        out = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert not msg.error(), f"consume error: {msg.error()}"
            out.append((msg.offset(), msg.value().decode(), *msg.timestamp()))
            if msg.offset() >= end - 1:
                return out
        raise AssertionError(f"did not reach offset {end - 1} from {start} in {timeout}s: read {out}")
    finally:
        consumer.close()


def kafka_rule(max_timestamps: list, segment_ms: int) -> list:
    """Kafka's roll decision (no jitter) replayed over batch max timestamps: batch indexes per segment."""
    segments = []
    for i, ts in enumerate(max_timestamps):
        if segments and ts - max_timestamps[segments[-1][0]] > segment_ms:
            segments.append([])
        if not segments:
            segments.append([])
        segments[-1].append(i)
    return segments


def test_old_create_time_records_share_one_segment(broker):
    """1970 timestamps, default segment.ms (7 days): 6 requests of 5 records -> 1 segment."""
    topic = create_topic(broker.bootstrap, {"retention.ms": "-1"})  # no retention by 1970 timestamps
    n_batches, per_batch = 6, 5
    batches = [[(f"v{b * per_batch + r}", 1000 + b * per_batch + r) for r in range(per_batch)]
               for b in range(n_batches)]
    offsets = produce_batches(broker.bootstrap, topic, batches)
    assert offsets == [list(range(b * per_batch, (b + 1) * per_batch)) for b in range(n_batches)]
    end = n_batches * per_batch
    expected = [[b * per_batch for b in range(n_batches)]]
    assert layout(broker, topic, expected) == expected, "1970 CreateTime batches must not roll segments"
    [(_, stored)] = read_segments(broker, topic)
    assert [b[2] for b in stored] == [1000 + b * per_batch + per_batch - 1 for b in range(n_batches)]

    # A fetch inside the first batch: the whole batch comes back, the client skips to offset 2,
    # and the following batches follow.
    got = consume(broker.bootstrap, topic, 2, end)
    assert got == [(o, f"v{o}", TIMESTAMP_CREATE_TIME, 1000 + o) for o in range(2, end)]

    # DeleteRecords to an offset inside the fourth batch, then read from the log start.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    cut = 3 * per_batch + 2
    [fut] = admin.delete_records([TopicPartition(topic, 0, cut)]).values()
    assert fut.result(timeout=30).low_watermark == cut, "low watermark after DeleteRecords"
    got = consume(broker.bootstrap, topic, OFFSET_BEGINNING, end)
    assert got == [(o, f"v{o}", TIMESTAMP_CREATE_TIME, 1000 + o) for o in range(cut, end)]
    # The log start lies inside the only (active) segment: nothing to delete, nothing rolled.
    assert layout(broker, topic, expected) == expected


def test_create_time_rolls_by_batch_timestamps(broker):
    """segment.ms=3000, timestamps 10 minutes old: the batch clock decides, not the broker's."""
    seg_ms = 3000
    topic = create_topic(broker.bootstrap, {"segment.ms": str(seg_ms), "retention.ms": "-1"})
    t0 = int(time.time() * 1000) - 600_000
    t1 = t0 + seg_ms + 1
    stamps = [
        t0,               # 0: first batch of segment A
        t0 + 1000,        # 1: A
        t0 + seg_ms,      # 2: A (waited == segment.ms is not more than segment.ms)
        t0 - 5000,        # 3: A (older than the first batch: negative wait)
        t1,               # 4: rolls -> B
        t0,               # 5: B (out of order)
        t1 + seg_ms,      # 6: B
        t1 + 10 * seg_ms, # 7: rolls -> C
    ]
    produce_batches(broker.bootstrap, topic, [[(f"v{i}", ts)] for i, ts in enumerate(stamps)])
    expected = [[0, 1, 2, 3], [4, 5, 6], [7]]
    assert kafka_rule(stamps, seg_ms) == expected
    assert layout(broker, topic, expected) == expected
    assert [int(p.stem) for p in sorted((broker.data_dir / f"{topic}-0").glob("*.log"))] == [0, 4, 7]
    got = consume(broker.bootstrap, topic, OFFSET_BEGINNING, len(stamps))
    assert got == [(i, f"v{i}", TIMESTAMP_CREATE_TIME, ts) for i, ts in enumerate(stamps)]


def test_log_append_time_rolls_by_broker_clock(broker):
    """LogAppendTime, segment.ms=1500: 3 quick batches, a sleep past segment.ms, 2 quick batches."""
    seg_ms = 1500
    topic = create_topic(broker.bootstrap, {"segment.ms": str(seg_ms), "message.timestamp.type": "LogAppendTime",
                                            "retention.ms": "-1"})
    before = int(time.time() * 1000)
    produce_batches(broker.bootstrap, topic, [[(f"v{i}", 1000 + i)] for i in range(3)])  # client ts ignored
    time.sleep(seg_ms / 1000 + 0.4)
    produce_batches(broker.bootstrap, topic, [[(f"v{i}", 1000 + i)] for i in range(3, 5)])
    after = int(time.time() * 1000)

    segments = read_segments(broker, topic)
    stored = [b for _, batches in segments for b in batches]
    assert [b[0] for b in stored] == [0, 1, 2, 3, 4]
    stamps = [b[2] for b in stored]
    assert all(before - 1000 <= ts <= after + 1000 for ts in stamps), f"not append times: {stamps}"
    assert stamps[3] - stamps[0] > seg_ms, f"the sleep did not separate the append times: {stamps}"
    expected = kafka_rule(stamps, seg_ms)  # normally [[0, 1, 2], [3, 4]]
    assert len(expected) >= 2
    assert layout(broker, topic, expected) == expected, f"append times {stamps}"
    got = consume(broker.bootstrap, topic, OFFSET_BEGINNING, 5)
    assert got == [(i, f"v{i}", TIMESTAMP_LOG_APPEND_TIME, ts) for i, ts in enumerate(stamps)]


@pytest.mark.parametrize("jitter_ms", [1000, 60_000])
def test_segment_jitter_bounds(broker, jitter_ms):
    """segment.ms=1000, segment.jitter.ms >= segment.ms: the roll threshold is random in [1, 1000]."""
    seg_ms = 1000
    topic = create_topic(broker.bootstrap, {"segment.ms": str(seg_ms), "segment.jitter.ms": str(jitter_ms),
                                            "retention.ms": "-1"})
    t0 = int(time.time() * 1000) - 600_000
    stamps = [t0] * 4                                     # 0-3: equal timestamps, never roll
    stamps += [t0 + k * (seg_ms + 1) for k in (1, 2, 3)]  # 4, 5, 6: each more than segment.ms later
    stamps += [stamps[-1]] * 2                            # 7, 8: equal to the first of their segment
    produce_batches(broker.bootstrap, topic, [[(f"v{i}", ts)] for i, ts in enumerate(stamps)])
    expected = [[0, 1, 2, 3], [4], [5], [6, 7, 8]]
    assert layout(broker, topic, expected) == expected
    got = consume(broker.bootstrap, topic, OFFSET_BEGINNING, len(stamps))
    assert [(o, v, ts) for o, v, _, ts in got] == [(i, f"v{i}", ts) for i, ts in enumerate(stamps)]
