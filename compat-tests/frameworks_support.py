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


def committed(bootstrap: str, group: str, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """A group's committed offsets ({(topic, partition): offset}, negative when none)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(t, p) for t, p in tps], timeout=30)
        return {(tp.topic, tp.partition): tp.offset for tp in got}
    finally:
        c.close()


def read_to_end(bootstrap: str, topic: str, partition: int = 0, timeout: float = 60
                ) -> list[tuple[int, str | None, str | None]]:
    """Every record of one partition from the beginning to its current high watermark, as
    (offset, key, value) strings (no group)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}", "enable.auto.commit": False})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        out: list[tuple[int, str | None, str | None]] = []
        if high <= low:
            return out
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in c.consume(1000, timeout=0.5):
                if m.error():
                    raise AssertionError(f"consume {topic}[{partition}]: {m.error()}")
                out.append((m.offset(), m.key() and m.key().decode(), m.value() and m.value().decode()))
                if m.offset() + 1 >= high:
                    return out
        raise AssertionError(f"{topic}[{partition}]: end offset {high} not reached in {timeout}s ({len(out)} read)")
    finally:
        c.close()


def mirror_maker_props(source: str, target: str, topics_regex: str, groups_regex: str, **extra) -> dict:
    """mm2.properties for one direction source -> target (cluster aliases `source` and `target`),
    single-node clusters (replication factors 1), every interval short for a test."""
    props = {
        "clusters": "source, target",
        "source.bootstrap.servers": source,
        "target.bootstrap.servers": target,
        "source->target.enabled": "true",
        "target->source.enabled": "false",
        "source->target.topics": topics_regex,
        "source->target.groups": groups_regex,
        "replication.factor": 1,
        "checkpoints.topic.replication.factor": 1,
        "heartbeats.topic.replication.factor": 1,
        "offset-syncs.topic.replication.factor": 1,
        "offset.storage.replication.factor": 1,
        "status.storage.replication.factor": 1,
        "config.storage.replication.factor": 1,
        "emit.checkpoints.interval.seconds": 1,
        "emit.heartbeats.interval.seconds": 1,
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": 1,
        "refresh.topics.interval.seconds": 2,
        "refresh.groups.interval.seconds": 2,
        "sync.topic.configs.interval.seconds": 2,
        # worker settings of the dedicated herder come from `<target alias>.`-prefixed keys (a
        # top-level offset.flush.interval.ms is ignored, MirrorMakerConfig.workerConfig): the
        # source task's commit() every flush interval sends the delayed offset syncs that group
        # offset translation waits for (Connect's default is 60 s)
        "target.offset.flush.interval.ms": 1000,
        # every plugin on the classpath has a ServiceLoader manifest: skip the reflective
        # classpath scans (MirrorMakerConfig's and the herder's, several seconds each)
        "plugin.discovery": "service_load",
        "target.plugin.discovery": "service_load",
    }
    props.update(extra)
    return props


def start_mirror_maker(java_compat_jar: Path, props: dict, workdir: Path):
    """Runs `org.apache.kafka.connect.mirror.MirrorMaker <props> --clusters target` (a dedicated
    MM2 cluster driving the target); returns (process, log path, fail(msg)) where fail kills it and
    fails the test with the tail of its log."""
    import subprocess

    from conftest import _reap, _spawn

    path = workdir / "mm2.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    log = workdir / "mirror-maker.log"
    with open(log, "ab") as f:
        proc = _spawn(java_framework_cmd(java_compat_jar, "org.apache.kafka.connect.mirror.MirrorMaker", path,
                                         "--clusters", "target"), stdin=subprocess.DEVNULL, stdout=f, stderr=f)

    def fail(msg: str):
        _reap(proc, 9, 10)
        pytest.fail(f"{msg}\n--- MirrorMaker log (tail) ---\n{log.read_text(errors='replace')[-20000:]}",
                    pytrace=False)

    return proc, log, fail
