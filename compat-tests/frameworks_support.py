"""Helpers for the framework tests (test_frameworks_*.py): Kafka Streams, Connect and MirrorMaker 2
run unchanged from the Maven jars in the Java compat build's lib/ directory (compat-tests/java's
pom.xml pulls kafka-streams, connect-runtime, connect-file and connect-mirror at Kafka's version).

Produce / read-back / admin calls go through confluent-kafka in-process (librdkafka), so the
only JVMs are the frameworks themselves.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic


def framework_cp(java_compat_jar: Path) -> str:
    """Classpath of the compat jar and every dependency (Streams, Connect, MirrorMaker 2)."""
    return f"{java_compat_jar}:{java_compat_jar.parent / 'lib'}/*"


def java_framework_cmd(java_compat_jar: Path, main: str, *args, log_level: str = "info") -> list[str]:
    return ["java", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            f"-Dorg.slf4j.simpleLogger.defaultLogLevel={log_level}",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
            "-cp", framework_cp(java_compat_jar), main, *map(str, args)]


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topics(bootstrap: str, topics: dict[str, int], configs: dict[str, str] | None = None) -> None:
    a = admin(bootstrap)  # must outlive the futures
    futures = a.create_topics(
        [NewTopic(t, num_partitions=n, replication_factor=1, config=configs or {}) for t, n in topics.items()],
        operation_timeout=30, request_timeout=30)
    for f in futures.values():
        f.result(timeout=60)


def topic_config(bootstrap: str, topic: str) -> dict[str, str]:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    a = admin(bootstrap)
    entries = a.describe_configs([res], request_timeout=30)[res].result(timeout=60)
    return {k: v.value for k, v in entries.items()}


def topics(bootstrap: str) -> dict[str, int]:
    md = admin(bootstrap).list_topics(timeout=30)
    return {t: len(m.partitions) for t, m in md.topics.items()}


def topic_end(bootstrap: str, topic: str, partition: int = 0) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"end-{topic}"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)[1]
    finally:
        c.close()


def producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                     "linger.ms": 5})


def produce_all(bootstrap: str, topic: str, records: list[tuple[str | None, str]], partition=None) -> None:
    p = producer(bootstrap)
    errors: list[str] = []

    def cb(err, _msg):
        if err is not None:
            errors.append(str(err))

    for k, v in records:
        kw = {} if partition is None else {"partition": partition}
        p.produce(topic, key=k, value=v, on_delivery=cb, **kw)
        p.poll(0)
    left = p.flush(60)
    assert left == 0 and not errors, f"produce to {topic}: {left} unacknowledged, errors {errors[:5]}"


class TopicReader:
    """Reads every partition of a topic from the beginning (no group), read_committed by default;
    `poll_for(seconds)` appends what arrives to `records` [(partition, offset, key, value)]."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed"):
        self.topic = topic
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}",
                           "enable.auto.commit": False, "isolation.level": isolation,
                           "enable.partition.eof": False})
        self.c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        self.records: list[tuple[int, int, bytes | None, bytes | None]] = []

    def poll_for(self, seconds: float) -> int:
        n = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            msgs = self.c.consume(1000, timeout=min(0.5, max(0.01, deadline - time.monotonic())))
            for m in msgs:
                if m.error():
                    raise AssertionError(f"consume {self.topic}: {m.error()}")
                self.records.append((m.partition(), m.offset(), m.key(), m.value()))
                n += 1
        return n

    def wait_until(self, pred, timeout: float, desc: str, on_fail=None) -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > deadline:
                msg = f"{desc}: not reached within {timeout}s ({len(self.records)} records read from {self.topic})"
                if on_fail is not None:
                    on_fail(msg)
                pytest.fail(msg, pytrace=False)
            self.poll_for(0.5)

    def close(self) -> None:
        self.c.close()


def log_value(path: Path, pattern: str, timeout: float, proc=None, start: int = 0) -> re.Match:
    """Wait for a regex in a log file from byte `start` on (e.g. Connect's REST port); fail on
    timeout or process exit."""
    rx = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path, "rb") as f:
                f.seek(start)
                m = rx.search(f.read().decode("utf-8", "replace"))
        except OSError:
            m = None
        if m:
            return m
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.2)
    pytest.fail(f"no /{pattern}/ in {path} within {timeout}s", pytrace=False)
