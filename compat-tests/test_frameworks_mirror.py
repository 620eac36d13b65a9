"""MirrorMaker 2 (connect-mirror 4.1 from Maven, `org.apache.kafka.connect.mirror.MirrorMaker`
run unchanged with an mm2.properties naming two clusters) between two brokers of the target
(two Ketch brokers, or two Apache Kafka 4.1 brokers with KETCH_COMPAT_TARGET=kafka).

test_mirror_maker_2 proves: records produced to the source are mirrored to `source.<topic>` on
the target with the same keys, values and order per partition (and the partition count); MM2's
internal topics are created where Kafka puts them (offset syncs on the source, checkpoints and
heartbeats on the target, the three Connect topics of the target cluster's herder); the topic's
config is synced (retention.ms); and a consumer group's committed offsets on the source are
translated into the target (sync.group.offsets.enabled), so a consumer of that group moved to
the target resumes at the record after the last one it had consumed (caught-up partition:
exactly; partition behind: at MM2's translation, never past its position).
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from conftest import _reap
from frameworks_support import (TopicReader, create_topics, mirror_maker_props, produce_all, start_mirror_maker,
                                topic_config, topics)

pytestmark = pytest.mark.timeout(480)  # pytest-timeout (requirements.txt)

PARTS, PER_PART, CONSUMED = 2, 500, 300


def committed(bootstrap: str, group: str, topic: str, parts: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(parts)], timeout=30)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


def test_mirror_maker_2(start_broker, java_compat_jar, tmp_path):
    t0 = time.monotonic()
    source, target = start_broker(), start_broker()
    s = uuid.uuid4().hex[:8]
    topic, group = f"mm-{s}", f"mm-group-{s}"
    create_topics(source.bootstrap, {topic: PARTS}, {"retention.ms": "7200000"})
    records = {p: [(f"k{p}-{i}", f"v{p}-{i}") for i in range(PER_PART)] for p in range(PARTS)}
    for p in range(PARTS):
        produce_all(source.bootstrap, topic, records[p], partition=p)
    # the group has consumed all of partition 0 and CONSUMED records of partition 1 (an offset
    # commit, no member left)
    consumed = {0: PER_PART, 1: CONSUMED}
    c = Consumer({"bootstrap.servers": source.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, p, consumed[p]) for p in range(PARTS)], asynchronous=False)
    c.close()

    props = mirror_maker_props(source.bootstrap, target.bootstrap, f"mm-{s}", f"mm-group-{s}")
    proc, _log, fail = start_mirror_maker(java_compat_jar, props, tmp_path)

    try:
        mirrored = f"source.{topic}"
        deadline = time.monotonic() + 180
        while topics(target.bootstrap).get(mirrored) is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                fail(f"{mirrored} not created on the target")
            time.sleep(1)
        assert topics(target.bootstrap)[mirrored] == PARTS
        reader = TopicReader(target.bootstrap, mirrored, PARTS)
        reader.wait_until(lambda: len(reader.records) >= PARTS * PER_PART, 180,
                          f"{PARTS * PER_PART} records mirrored", on_fail=fail)
        reader.poll_for(1)
        for p in range(PARTS):
            have = [(o, k.decode(), v.decode()) for q, o, k, v in reader.records if q == p]
            want = [(i, k, v) for i, (k, v) in enumerate(records[p])]
            assert have == want, f"partition {p} of {mirrored} differs from the source (first 3: {have[:3]})"
        reader.close()
        print(f"mirrored {PARTS * PER_PART} records ({time.monotonic() - t0:.1f}s)")

        src_topics, dst_topics = topics(source.bootstrap), topics(target.bootstrap)
        assert "mm2-offset-syncs.target.internal" in src_topics, f"source topics: {sorted(src_topics)}"
        for t in ("source.checkpoints.internal", "heartbeats", "mm2-configs.source.internal",
                  "mm2-offsets.source.internal", "mm2-status.source.internal"):
            assert t in dst_topics, f"{t} not on the target: {sorted(dst_topics)}"
        for t in ("mm2-configs.source.internal", "mm2-offsets.source.internal", "mm2-status.source.internal",
                  "source.checkpoints.internal"):
            assert topic_config(target.bootstrap, t)["cleanup.policy"] == "compact", f"{t} not compacted"

        # topic configs synced (every sync.topic.configs.interval.seconds)
        deadline = time.monotonic() + 60
        while topic_config(target.bootstrap, mirrored).get("retention.ms") != "7200000":
            if time.monotonic() > deadline:
                fail(f"retention.ms of {mirrored}: {topic_config(target.bootstrap, mirrored).get('retention.ms')}")
            time.sleep(1)

        # group offsets translated into the target: exact for a caught-up consumer (partition 0:
        # the offset sync of the last record); for one behind (partition 1) MM2 translates to
        # the offset after the nearest older offset sync it keeps: never past the committed one
        deadline = time.monotonic() + 120
        while True:
            have = committed(target.bootstrap, group, mirrored, PARTS)
            if have[0] == PER_PART and 0 < have[1] <= CONSUMED:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                fail(f"group {group} on the target: committed {have} on {mirrored}, expected {{0: {PER_PART}, "
                     f"1: 1..{CONSUMED}}} (source: {consumed})")
            time.sleep(1)
        print(f"group offsets translated: {have} (source: {consumed}) ({time.monotonic() - t0:.1f}s)")
        # new records on partition 0 after the translation: the moved consumer starts there
        produce_all(source.bootstrap, topic, [(f"k0-{PER_PART + i}", f"v0-{PER_PART + i}") for i in range(5)],
                    partition=0)
        reader = TopicReader(target.bootstrap, mirrored, PARTS)
        reader.wait_until(lambda: len(reader.records) >= PARTS * PER_PART + 5, 60, "the 5 new records mirrored",
                          on_fail=fail)
        reader.close()
    finally:
        _reap(proc, 15, 30)

    # the consumer moves to the target: it resumes at the translated offsets
    c = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "error"})
    c.subscribe([mirrored])
    first: dict[int, tuple[int, str]] = {}
    deadline = time.monotonic() + 60
    while len(first) < PARTS and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            first.setdefault(m.partition(), (m.offset(), m.value().decode()))
    c.close()
    assert first == {0: (PER_PART, f"v0-{PER_PART}"), 1: (have[1], f"v1-{have[1]}")}, \
        f"the moved consumer's first records: {first}"
    print(f"moved consumer resumed at {first} ({time.monotonic() - t0:.1f}s)")
