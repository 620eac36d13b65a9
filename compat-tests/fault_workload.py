"""The fault suite's workload (issue 15): real librdkafka clients (confluent-kafka) writing and
reading a cluster while a nemesis breaks it, every outcome recorded in a `History` in the format of
fault_checker.py.

- `Producer`: an idempotent acks=all producer; every value (`<name>-<n>`, unique) goes to partition
  n % partitions; its delivery report is the send's status (`ok` with the offset, else `info`: a
  timed-out or failed delivery may still be in the log). A fatal error (e.g. the producer id
  fenced) replaces the producer by a new one.
- `Transactions`: a transactional producer writing 2-5 values per transaction across partitions,
  one in four aborted on purpose; the outcome is what the client was told (`commit`, `abort`, or
  `info` when the commit's answer never came).
- `Reader`: a read_committed consumer in a group, subscribed to the topics; each poll's records
  are recorded under the current session (a new one at each assignment).
- `final_reads`: after the faults healed, every partition read from its start to its high
  watermark, read_committed.

Partitions are named `<topic>:<partition>` in the history, so one checker covers several topics.
Workers run on threads until `stop()`; a worker that hits an unexpected exception records it as
an `error` event and the test fails on it.
"""

from __future__ import annotations

import random
import threading
import time

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


class Producer(Worker):
    def __init__(self, name: str, history: History, servers: str, topic: str, partitions: int, per_s: int = 100):
        super().__init__(name, history)
        self.servers, self.topic, self.partitions, self.per_s = servers, topic, partitions, per_s
        self.sent = 0
        self.replaced = 0

    def _client(self) -> RdProducer:
        return RdProducer({"bootstrap.servers": self.servers, "enable.idempotence": True, "acks": "all",
                           "linger.ms": 5, "message.timeout.ms": 60000, "request.timeout.ms": 10000,
                           "error_cb": self._error})

    def _error(self, err: KafkaError) -> None:
        if err.fatal():
            self.fatal = err

    def _report(self, value: str, partition: int):
        def report(err, msg):
            event = {"type": "send", "producer": self.label, "value": value,
                     "partition": pkey(self.topic, partition)}
            if err is None:
                event.update(status="ok", offset=msg.offset())
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
            partition = self.sent % self.partitions
            try:
                client.produce(self.topic, value=value.encode(), partition=partition,
                               on_delivery=self._report(value, partition))
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
                    records.append([pkey(msg.topic(), msg.partition()), msg.offset(), msg.value().decode()])
                if records:
                    self.history.add({"type": "poll", "consumer": self.label, "session": self.session,
                                      "records": records, "isolation": "read_committed"})
        finally:
            consumer.close()


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
                    seen = read_all(servers, topic, ends, "read_committed", timeout=timeout)
                    break
                except KafkaException as e:
                    if not e.args[0].retriable() and e.args[0].code() != KafkaError.NOT_LEADER_FOR_PARTITION \
                            or time.monotonic() > deadline:
                        raise
                    time.sleep(1)
            for p, rows in seen.items():
                history.add({"type": "read", "partition": pkey(topic, p),
                             "records": [[o, v.decode()] for o, v in rows]})
    finally:
        probe.close()
