"""Helpers of test_cli_tools.py: soft assertions, Kafka's tools run against one broker, and the
setup data written with confluent-kafka (no JVM start)."""

from __future__ import annotations

import contextlib
import re
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_tools import KafkaTools


class Soft:
    """`with soft("what"): ...` records an assertion failure and continues; soft.verify() fails
    the test with all of them."""

    def __init__(self):
        self.failures: list[str] = []

    @contextlib.contextmanager
    def __call__(self, what: str):
        try:
            yield
        except (AssertionError, pytest.fail.Exception) as e:
            msg = str(e).strip()
            self.failures.append(f"[{what}] {msg}")
            print(f"!!! MISMATCH [{what}]: {msg}\n")

    def verify(self):
        if self.failures:
            pytest.fail(f"{len(self.failures)} mismatch(es) with Kafka's behaviour:\n\n" + "\n\n".join(self.failures),
                        pytrace=False)


class Tools(KafkaTools):
    """KafkaTools.run with --bootstrap-server <broker> first."""

    def tool(self, main_class, *args, **kw):
        return self.run(main_class, "--bootstrap-server", self.broker.bootstrap, *args, **kw)


def uid() -> str:
    return uuid.uuid4().hex[:8]


def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10000})


def create_topic(broker, name, partitions, config=None):
    a = admin(broker)  # keep the client alive until the future is done
    fut = a.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=30,
                          request_timeout=30)
    fut[name].result(60)


def produce(broker, topic, records, batch=None):
    """records: [(partition, key, value, timestamp_ms or None)]; flush every `batch` records (a batch
    boundary) when given."""
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": "all",
                  "enable.idempotence": False})
    errors = []

    def cb(err, msg):
        if err is not None:
            errors.append(err)

    for i, (part, key, value, ts) in enumerate(records):
        kw = {"timestamp": ts} if ts is not None else {}
        p.produce(topic, key=key, value=value, partition=part, on_delivery=cb, **kw)
        if batch and (i + 1) % batch == 0:
            assert p.flush(30) == 0, "produce: flush timed out"
    assert p.flush(30) == 0, "produce: flush timed out"
    assert not errors, f"produce to {topic}: {errors}"


def assert_in(needle, out, what):
    assert needle in out, f"{what}: expected {needle!r} in the output:\n{out}"


def offsets_out(out: str, topic: str) -> dict[int, int]:
    """GetOffsetShell lines `topic:partition:offset` -> {partition: offset}."""
    res = {}
    for line in out.splitlines():
        m = re.fullmatch(rf"{re.escape(topic)}:(\d+):(-?\d+)", line.strip())
        if m:
            res[int(m.group(1))] = int(m.group(2))
    return res
