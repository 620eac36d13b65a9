"""The fault suite's workload (issue 15): real librdkafka clients (confluent-kafka) writing and
reading a cluster while a nemesis breaks it, every outcome recorded in a `History` in the format of
fault_checker.py.

- `Producer`: an idempotent acks=all producer; every value (`<name>-<n>`, unique) goes to partition
  n % partitions; its delivery report is the send's status (`ok` with the offset, else `info`: a
  timed-out or failed delivery may still be in the log). A fatal error (e.g. the producer id
  fenced) replaces the producer by a new one. With `keys` (for a compacted topic) every value has a
  key from a bounded key space (a few hot keys, more warm ones, many cold ones written only a few
  times a run), on partition key % partitions. Each send records the wall-clock time of the
  produce call and of its report, and the timestamp (type, ms) the report carried: for a
  LogAppendTime topic, the leader's append time from the produce response.
- `Transactions`: a transactional producer writing 2-5 values per transaction across partitions,
  one in four aborted on purpose; the outcome is what the client was told (`commit`, `abort`, or
  `info` when the commit's answer never came).
- `Reader`: a read_committed consumer in a group, subscribed to the topics; each poll's records
  are recorded under the current session (a new one at each assignment).
- `final_reads`: after the faults healed, every partition read from its start to its high
  watermark, read_committed.
- `replica_records`: what one replica holds of a partition, read from its segment files (Kafka's
  format) with every batch's CRC checked: a follower's own copy, which no consumer reads while
  it follows.

A consumed record is kept with its key and timestamp: `[partition, offset, value, key, timestamp
type, timestamp]` in a poll, `[offset, value, key, timestamp type, timestamp]` in a final read
(timestamp types as confluent-kafka's: 1 CreateTime, 2 LogAppendTime).

Partitions are named `<topic>:<partition>` in the history, so one checker covers several topics.
Workers run on threads until `stop()`; a worker that hits an unexpected exception records it as
an `error` event and the test fails on it.
"""

from __future__ import annotations

import gzip
import random
import struct
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer as RdProducer, TopicPartition

from cluster import read_all


class History:
    """Events appended by several threads; `t` is ms since the history began."""

    def __init__(self):
        self.events: list[dict] = []
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self.wall_start = time.time()  # to place the brokers' log lines in the history

    def now_ms(self) -> int:
        return int((time.monotonic() - self._start) * 1000)

    def add(self, event: dict) -> None:
        event.setdefault("t", self.now_ms())
        with self._lock:
            self.events.append(event)


def pkey(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


class Worker(threading.Thread):
    def __init__(self, name: str, history: History):
        super().__init__(name=f"fault-{name}", daemon=True)
        self.label = name
        self.history = history
        self.stopping = threading.Event()

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        try:
            self.work()
        except Exception as e:  # recorded: the test fails on any error event
            self.history.add({"type": "error", "worker": self.label, "error": repr(e)})


def wall_ms() -> float:
    return time.time() * 1000


def record_of(msg) -> list:
    """[value, key, timestamp type, timestamp] of a consumed message."""
    key = msg.key()
    ts_type, ts = msg.timestamp()
    value = msg.value()
    return [None if value is None else value.decode(), None if key is None else key.decode(), ts_type, ts]


class Producer(Worker):
    def __init__(self, name: str, history: History, servers: str, topic: str, partitions: int, per_s: int = 100,
                 keys: tuple[int, int, int] | None = None):
        """`keys`: (hot, warm, cold) key counts; 75% of the writes go to the hot keys, 20% to the
        warm ones, 5% to the cold ones (key `k<i>`, partition i % partitions). None: no keys."""
        super().__init__(name, history)
        self.servers, self.topic, self.partitions, self.per_s = servers, topic, partitions, per_s
        self.keys = keys
        self.rng = random.Random(name)
        self.sent = 0
        self.replaced = 0

    def _key(self) -> int:
        hot, warm, cold = self.keys
        r = self.rng.random()
        if r < 0.75:
            return self.rng.randrange(hot)
        if r < 0.95:
            return hot + self.rng.randrange(warm)
        return hot + warm + self.rng.randrange(cold)

    def _client(self) -> RdProducer:
        return RdProducer({"bootstrap.servers": self.servers, "enable.idempotence": True, "acks": "all",
                           "linger.ms": 5, "message.timeout.ms": 60000, "request.timeout.ms": 10000,
                           "error_cb": self._error})

    def _error(self, err: KafkaError) -> None:
        if err.fatal():
            self.fatal = err

    def _report(self, value: str, partition: int, key: str | None, sent_ms: float):
        def report(err, msg):
            event = {"type": "send", "producer": self.label, "value": value,
                     "partition": pkey(self.topic, partition), "sent_ms": round(sent_ms, 1),
                     "report_ms": round(wall_ms(), 1)}
            if key is not None:
                event["key"] = key
            if err is None:
                event.update(status="ok", offset=msg.offset(), timestamp=list(msg.timestamp()))
            else:
                event.update(status="info", error=str(err))
            self.history.add(event)
        return report

    def work(self) -> None:
        self.fatal = None
        client = self._client()
        interval = 1.0 / self.per_s
        next_at = time.monotonic()
        while not self.stopping.is_set():
            if self.fatal is not None:
                client.flush(10)
                self.history.add({"type": "note", "worker": self.label, "note": f"fatal {self.fatal}: new producer"})
                client, self.fatal = self._client(), None
                self.replaced += 1
            value = f"{self.label}-{self.sent}"
            if self.keys is None:
                key, partition = None, self.sent % self.partitions
            else:
                k = self._key()
                key, partition = f"k{k}", k % self.partitions
            try:
                client.produce(self.topic, value=value.encode(), key=None if key is None else key.encode(),
                               partition=partition, on_delivery=self._report(value, partition, key, wall_ms()))
                self.sent += 1
            except BufferError:
                client.poll(0.1)
                continue
            client.poll(0)
            next_at += interval
            time.sleep(max(0.0, next_at - time.monotonic()))
        left = client.flush(70)
        if left:
            self.history.add({"type": "error", "worker": self.label, "error": f"{left} sends never reported"})


class Transactions(Worker):
    def __init__(self, name: str, history: History, servers: str, topic: str, partitions: int):
        super().__init__(name, history)
        self.servers, self.topic, self.partitions = servers, topic, partitions
        self.rng = random.Random(name)
        self.count = 0

    def _client(self) -> RdProducer:
        client = RdProducer({"bootstrap.servers": self.servers, "transactional.id": f"fault-{self.label}",
                             "transaction.timeout.ms": 60000, "request.timeout.ms": 10000,
                             "message.timeout.ms": 60000})
        client.init_transactions(120)
        return client

    def _end(self, client: RdProducer, commit: bool) -> str:
        """Commits (or aborts) the open transaction; the outcome the client was told: commit,
        abort, or info (never answered, or a fatal error). A commit that needs an abort is
        aborted; a retriable error (timed out, coordinator moving) is retried, as librdkafka
        documents."""
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                (client.commit_transaction if commit else client.abort_transaction)(30)
                return "commit" if commit else "abort"
            except KafkaException as e:
                err = e.args[0]
                if commit and err.txn_requires_abort():
                    return self._end(client, commit=False)
                if err.fatal():
                    return "info"
                time.sleep(0.2)
        return "info"

    def work(self) -> None:
        client = self._client()
        while not self.stopping.is_set():
            txn = f"{self.label}-t{self.count}"
            self.count += 1
            writes = []
            client.begin_transaction()
            for j in range(self.rng.randint(2, 5)):
                partition = self.rng.randrange(self.partitions)
                value = f"{txn}-{j}"
                while True:
                    try:
                        client.produce(self.topic, value=value.encode(), partition=partition)
                        break
                    except BufferError:
                        client.poll(0.1)
                writes.append([pkey(self.topic, partition), value])
            status = self._end(client, commit=self.rng.random() >= 0.25)
            self.history.add({"type": "txn", "txn": txn, "writes": writes, "status": status})
            if status == "info":  # fatal or never answered: a new producer fences this one
                self.history.add({"type": "note", "worker": self.label, "note": f"{txn} unresolved: new producer"})
                client = self._client()
            time.sleep(0.05)


class Reader(Worker):
    def __init__(self, name: str, history: History, servers: str, topics: list[str], group: str):
        super().__init__(name, history)
        self.servers, self.topics, self.group = servers, topics, group
        self.session = 0

    def _assigned(self, consumer, partitions) -> None:
        self.session += 1

    def work(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.servers, "group.id": self.group,
                             "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                             "enable.auto.commit": True, "session.timeout.ms": 10000})
        consumer.subscribe(self.topics, on_assign=self._assigned, on_revoke=self._assigned)
        try:
            while not self.stopping.is_set():
                records = []
                for msg in consumer.consume(500, 0.5):
                    if msg.error():
                        if msg.error().fatal():
                            raise KafkaException(msg.error())
                        continue
                    records.append([pkey(msg.topic(), msg.partition()), msg.offset(), *record_of(msg)])
                if records:
                    self.history.add({"type": "poll", "consumer": self.label, "session": self.session,
                                      "records": records, "isolation": "read_committed"})
        finally:
            consumer.close()


def read_whole(servers: str, topic: str, ends: dict[int, int], timeout: float = 30) -> dict[int, list]:
    """Every record a read_committed consumer reads from the beginning of each partition until its
    position reaches ends[partition] (the last stable offset reaching it): {partition: [[offset,
    value, key, timestamp type, timestamp]]} (cluster.read_all, with keys and timestamps)."""
    return read_all(servers, topic, ends, "read_committed", timeout, group="fault-final",
                    record_of=lambda msg: [msg.offset(), *record_of(msg)])


def final_reads(history: History, servers: str, topics: dict[str, int], timeout: float = 120) -> None:
    """Each partition of `topics` ({name: partitions}) read whole, read_committed, into `history`
    (asked again while leadership still moves: NOT_LEADER_OR_FOLLOWER and the like)."""
    probe = Consumer({"bootstrap.servers": servers, "group.id": "fault-final", "enable.auto.commit": False})
    deadline = time.monotonic() + timeout
    try:
        for topic, partitions in topics.items():
            while True:
                try:
                    ends = {p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                            for p in range(partitions)}
                    seen = read_whole(servers, topic, ends, timeout=timeout)
                    break
                except KafkaException as e:
                    if not e.args[0].retriable() and e.args[0].code() != KafkaError.NOT_LEADER_FOR_PARTITION \
                            or time.monotonic() > deadline:
                        raise
                    time.sleep(1)
            for p, rows in seen.items():
                history.add({"type": "read", "partition": pkey(topic, p), "records": rows})
    finally:
        probe.close()


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC32C[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _varint(buf: bytes, at: int) -> tuple[int, int]:
    """A zigzag varint (Kafka's record fields) at `at`: (value, next position)."""
    shift = raw = 0
    while True:
        b = buf[at]
        at += 1
        raw |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), at


def _segment_files(partition_dir: Path) -> list[Path]:
    """The partition's segment files in offset order, as a restart would see them: a cleaner's
    committed `swap-<base>-<end>/` (left by a kill -9 before it was moved in) replaces the segments
    whose base offset lies in [base, end); `cleaning/` (uncommitted) is ignored."""
    segments = {int(f.stem): f for f in partition_dir.glob("*.log")}
    for swap in sorted(partition_dir.glob("swap-*")):
        _, base, end = swap.name.split("-")
        segments = {b: f for b, f in segments.items() if not int(base) <= b < int(end)}
        segments.update({int(f.stem): f for f in swap.glob("*.log")})
    return [segments[b] for b in sorted(segments)]


def replica_records(partition_dir: Path) -> list[list]:
    """Every data record of one replica's copy of a partition, read from its segment files:
    [[offset, value, key, timestamp type, timestamp]] as final_reads records them (control batches
    left out; an incomplete batch at the very end, a kill -9's torn write, ends the read). Raises
    AssertionError on a batch whose CRC does not match, or that is not magic 2."""
    out = []
    files = _segment_files(partition_dir)
    for i, f in enumerate(files):
        data = f.read_bytes()
        at = 0
        while at + 61 <= len(data):
            base_offset, length = struct.unpack_from(">qi", data, at)
            end = at + 12 + length
            if end > len(data):
                assert i == len(files) - 1, f"{f}: a torn batch at {at} before the last segment"
                break
            (magic,) = struct.unpack_from(">b", data, at + 16)
            assert magic == 2, f"{f}: batch at {at} (offset {base_offset}) has magic {magic}"
            (crc,) = struct.unpack_from(">I", data, at + 17)
            assert crc32c(data[at + 21:end]) == crc, f"{f}: batch at offset {base_offset}: CRC mismatch"
            attributes, _, base_ts, max_ts = struct.unpack_from(">hiqq", data, at + 21)
            (count,) = struct.unpack_from(">i", data, at + 57)
            body = data[at + 61:end]
            codec = attributes & 0x7
            if codec == 1:
                body = gzip.decompress(body)
            else:
                assert codec == 0, f"{f}: batch at offset {base_offset} compressed with codec {codec}"
            at = end
            if attributes & 0x20:  # a control batch (transaction marker)
                continue
            append_time = bool(attributes & 0x08)
            pos = 0
            for _ in range(count):
                length, pos = _varint(body, pos)
                record_end = pos + length
                pos += 1  # attributes
                ts_delta, pos = _varint(body, pos)
                offset_delta, pos = _varint(body, pos)
                key_len, pos = _varint(body, pos)
                key = None if key_len < 0 else body[pos:pos + key_len].decode()
                pos += max(key_len, 0)
                value_len, pos = _varint(body, pos)
                value = None if value_len < 0 else body[pos:pos + value_len].decode()
                pos = record_end
                out.append([base_offset + offset_delta, value, key, 2 if append_time else 1,
                            max_ts if append_time else base_ts + ts_delta])
    return out
