"""Client quotas: `kafka-configs` (Kafka 4.1's ConfigCommand, unchanged) sets, describes and
removes `producer_byte_rate` / `consumer_byte_rate` / `request_percentage` for users, client
ids, their defaults and combinations (AlterClientQuotas / DescribeClientQuotas), with Kafka's
refusals, kept across a restart; and the quotas are enforced: a librdkafka producer that tries
to go as fast as it can is held at its client id's `producer_byte_rate` within 10%, a consumer
at its `consumer_byte_rate` (never above it; below it as Kafka's own consumer is), measured
after the first seconds (Kafka's rate lets a new client use its whole window's worth at once);
a client id over its `request_percentage` gets a throttle time in its responses.
Passes on Ketch and on Apache Kafka 4.1 (KETCH_COMPAT_TARGET=kafka).
"""

from __future__ import annotations

import re
import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_tools import KafkaTools
from test_acls_tool import until  # (Kafka brokers apply quota changes from their metadata asynchronously)

CONFIG_CMD = "kafka.admin.ConfigCommand"  # kafka_2.13 (Scala); kafka-tools 4.1 has no ConfigCommand
QUOTA_BYTES_PER_S = 1_000_000
RECORD = b"x" * 1000
# A rate over 5 windows of 1 s (Kafka's default: 11): a throttled client's bursts then come every
# few seconds instead of every ten or so, and 20 s of measurement hold several of them.
SHORT_WINDOW = {"quota.window.num": "5", "quota.window.size.seconds": "1"}
RUN_S, MEASURED_FROM_S = 24, 4


def configs(kt, bs, *args, check=True):
    return kt.run(CONFIG_CMD, "--bootstrap-server", bs, *args, check=check)


def described(kt, bs, *args) -> set[str]:
    """The `Quota configs for ... are k=v, ...` lines, each with its values sorted."""
    out = configs(kt, bs, "--describe", *args).stdout
    lines = set()
    for who, values in re.findall(r"Quota configs for (.*) are (.*)", out):
        lines.add(f"{who}: {', '.join(sorted(v.strip() for v in values.split(',')))}")
    return lines


def test_kafka_configs_sets_describes_and_removes_quotas(broker, kafka_libs, tmp_path):
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    bs = broker.bootstrap
    configs(kt, bs, "--alter", "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048",
            "--entity-type", "users", "--entity-name", "alice")
    configs(kt, bs, "--alter", "--add-config", "request_percentage=12.5", "--entity-type", "clients",
            "--entity-default")
    configs(kt, bs, "--alter", "--add-config", "producer_byte_rate=4096", "--entity-type", "users",
            "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app")
    alice = "user-principal 'alice': consumer_byte_rate=2048.0, producer_byte_rate=1024.0"
    alice_app = "user-principal 'alice', client-id 'app': producer_byte_rate=4096.0"
    # (The tool asks for exactly the entity named: a strict filter.)
    got = until(lambda: described(kt, bs, "--entity-type", "users", "--entity-name", "alice"),
                lambda got: alice in got)
    assert got == {alice}, got
    assert described(kt, bs, "--entity-type", "clients", "--entity-default") == \
        {"the default client-id: request_percentage=12.5"}
    got = described(kt, bs, "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                    "--entity-name", "app")
    assert got == {alice_app}, got
    # Every entity naming only a user (the tool asks with a strict filter).
    got = described(kt, bs, "--entity-type", "users")
    assert got == {alice}, got

    # Refused as Kafka refuses them.
    r = configs(kt, bs, "--alter", "--add-config", "producer_byte_rate=1.5", "--entity-type", "users",
                "--entity-name", "bob", check=False)
    assert r.returncode != 0 and "producer_byte_rate cannot be a fractional value." in r.out, r.out
    r = configs(kt, bs, "--alter", "--add-config", "consumer_byte_rate=0", "--entity-type", "clients",
                "--entity-name", "c", check=False)
    assert r.returncode != 0 and "Quota consumer_byte_rate must be greater than 0" in r.out, r.out
    assert described(kt, bs, "--entity-type", "users", "--entity-name", "bob") == set()

    # Kept across a restart; removed key by key.
    broker.restart()
    bs = broker.bootstrap
    got = until(lambda: described(kt, bs, "--entity-type", "users", "--entity-name", "alice"),
                lambda got: alice in got)
    assert got == {alice}, got
    configs(kt, bs, "--alter", "--delete-config", "producer_byte_rate", "--entity-type", "users",
            "--entity-name", "alice")
    got = until(lambda: described(kt, bs, "--entity-type", "users", "--entity-name", "alice"),
                lambda got: "user-principal 'alice': consumer_byte_rate=2048.0" in got)
    assert "user-principal 'alice': consumer_byte_rate=2048.0" in got, got
    configs(kt, bs, "--alter", "--delete-config", "consumer_byte_rate", "--entity-type", "users",
            "--entity-name", "alice")
    configs(kt, bs, "--alter", "--delete-config", "request_percentage", "--entity-type", "clients",
            "--entity-default")
    got = until(lambda: described(kt, bs, "--entity-type", "clients", "--entity-default"), lambda got: not got)
    assert got == set(), got


def per_second(stamps: list[tuple[float, int]]) -> list[int]:
    """kB in each second (for the failure message)."""
    out = [0] * (int(max((t for t, _ in stamps), default=0)) + 1)
    for t, b in stamps:
        out[int(t)] += b // 1000
    return out


def rate_between(stamps: list[tuple[float, int]], start: float, end: float) -> float:
    """Bytes per second from (time, bytes) stamps within [start, end): the slope of a least-squares
    line through the cumulative bytes, which a throttled client's steps (a burst, then a pause)
    do not tilt the way a plain count over the interval is tilted by where the steps fall."""
    points, total = [], 0
    for t, b in sorted(stamps):
        total += b
        if start <= t < end:
            points.append((t, total))
    n = len(points)
    assert n >= 2, "nothing measured"
    mt, mb = sum(t for t, _ in points) / n, sum(b for _, b in points) / n
    return sum((t - mt) * (b - mb) for t, b in points) / sum((t - mt) ** 2 for t, _ in points)


def set_quota(kt, bs, key, client_id, value=QUOTA_BYTES_PER_S):
    configs(kt, bs, "--alter", "--add-config", f"{key}={value}", "--entity-type", "clients",
            "--entity-name", client_id)
    until(lambda: described(kt, bs, "--entity-type", "clients", "--entity-name", client_id), lambda got: bool(got))
    # Kafka's brokers apply it from their metadata a little later.
    time.sleep(1)


def produce_flat_out(bootstrap: str, topic: str, client_id: str, run_s: float, **conf) -> list[tuple[float, int]]:
    """Writes 1 kB records as fast as librdkafka takes them for `run_s`: (seconds since the start,
    bytes) of each acknowledged one."""
    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5, "acks": "1",
                  "queue.buffering.max.kbytes": 4096, **conf})
    stamps: list[tuple[float, int]] = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < run_s:
        try:
            p.produce(topic, RECORD, on_delivery=lambda err, m: err or stamps.append(
                (time.monotonic() - t0, len(m.value()))))
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    p.flush(30)
    return stamps


@pytest.mark.broker_config(**SHORT_WINDOW)
def test_a_producer_is_held_at_its_quota(broker, kafka_libs, tmp_path):
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    set_quota(kt, broker.bootstrap, "producer_byte_rate", "slow-writer")
    stamps = produce_flat_out(broker.bootstrap, "quota-writes", "slow-writer", RUN_S)
    steady = rate_between(stamps, MEASURED_FROM_S, RUN_S)
    assert abs(steady - QUOTA_BYTES_PER_S) <= 0.1 * QUOTA_BYTES_PER_S, \
        f"{steady:.0f} B/s; kB per second: {per_second(stamps)}"


def test_a_user_is_held_at_the_default_user_quota(start_broker, kafka_libs, tmp_path):
    """`--entity-type users --entity-default`: a SASL user (PLAIN `alice`) with no quota of its own
    is held at the default users' producer_byte_rate, whatever its client id."""
    from conftest import free_port
    port = free_port()
    plain = "org.apache.kafka.common.security.plain.PlainLoginModule"
    broker = start_broker({**SHORT_WINDOW, "sasl.enabled.mechanisms": "PLAIN",
                           "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                               f'{plain} required user_alice="alice-secret";'},
                          extra_listeners={"SASL_PLAINTEXT": ("SASL_PLAINTEXT", port)})
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    users = ["--entity-type", "users", "--entity-default"]
    configs(kt, broker.bootstrap, "--alter", "--add-config", f"producer_byte_rate={QUOTA_BYTES_PER_S}", *users)
    until(lambda: described(kt, broker.bootstrap, *users), lambda got: bool(got))
    time.sleep(1)
    sasl = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "alice",
            "sasl.password": "alice-secret"}
    stamps = produce_flat_out(f"127.0.0.1:{port}", "user-quota-writes", "any-client", RUN_S, **sasl)
    steady = rate_between(stamps, MEASURED_FROM_S, RUN_S)
    assert abs(steady - QUOTA_BYTES_PER_S) <= 0.1 * QUOTA_BYTES_PER_S, \
        f"{steady:.0f} B/s; kB per second: {per_second(stamps)}"


@pytest.mark.broker_config(**SHORT_WINDOW)
def test_a_consumer_is_held_at_its_quota(broker, kafka_libs, tmp_path):
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("quota-reads", 1, 1)])["quota-reads"].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "queue.buffering.max.kbytes": 65536})
    for _ in range(30_000):  # 30 MB: more than RUN_S of reading at the quota
        while True:
            try:
                p.produce("quota-reads", RECORD)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0
    set_quota(kt, broker.bootstrap, "consumer_byte_rate", "slow-reader")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": "slow-reader", "group.id": "quota-readers",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["quota-reads"])
    stamps: list[tuple[float, int]] = []
    t0 = None
    try:
        while t0 is None or time.monotonic() - t0 < RUN_S:
            for m in c.consume(500, timeout=0.2):
                if m.error() is None:
                    t0 = t0 or time.monotonic()
                    stamps.append((time.monotonic() - t0, len(m.value())))
    finally:
        c.close()
    steady = rate_between(stamps, MEASURED_FROM_S, RUN_S)
    # Never above the quota; below it by as much as Kafka 4.1's own consumer is here (about 0.78 of
    # the quota: a fetch that would go over is answered empty and the client waits out the throttle,
    # so whole windows pass with nothing read).
    assert 0.6 * QUOTA_BYTES_PER_S <= steady <= 1.1 * QUOTA_BYTES_PER_S, \
        f"{steady:.0f} B/s; kB per second: {per_second(stamps)}"


def api_versions_v1_throttles(bootstrap: str, client_id: str, seconds: float, stop_at_first: bool) -> list[int]:
    """Sends ApiVersions v1 requests one after another on one connection for `seconds` (or until a
    response is throttled, with `stop_at_first`): each response's `throttle_time_ms`."""
    import socket
    import struct
    host, port = bootstrap.rsplit(":", 1)
    cid = client_id.encode()
    throttles: list[int] = []
    with socket.create_connection((host, int(port)), timeout=10) as s:
        t0, n = time.monotonic(), 0
        while time.monotonic() - t0 < seconds:
            n += 1
            body = struct.pack(">hhih", 18, 1, n, len(cid)) + cid
            s.sendall(struct.pack(">i", len(body)) + body)
            size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
            frame = s.recv(size, socket.MSG_WAITALL)
            got_id, error, count = struct.unpack(">ihi", frame[:10])
            assert got_id == n and error == 0, (got_id, error)
            throttles.append(struct.unpack(">i", frame[10 + 6 * count:14 + 6 * count])[0])
            if stop_at_first and throttles[-1] > 0:
                break
    return throttles


def test_request_percentage_throttles_a_busy_client(broker, kafka_libs, tmp_path):
    """A client id whose requests take more than its `request_percentage` of a thread gets a
    throttle time (at most one quota window, 1 s) in its responses; another client id does not."""
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    bs = broker.bootstrap
    set_quota(kt, bs, "request_percentage", "busy", 0.01)
    busy = api_versions_v1_throttles(bs, "busy", 30, stop_at_first=True)
    assert busy[-1] > 0, f"{len(busy)} requests in 30 s, none throttled at request_percentage=0.01"
    assert max(busy) <= 1000, f"a request throttle beyond one quota window: {max(busy)} ms"
    free = api_versions_v1_throttles(bs, "free", 3, stop_at_first=False)
    assert len(free) > 10 and max(free) == 0, f"a client without a quota was throttled: {max(free)} ms"


# A bucket of 2 s of the rate (Kafka's controller mutation quota has its own window settings).
@pytest.mark.broker_config(**{"controller.quota.window.num": "2", "controller.quota.window.size.seconds": "1"})
def test_controller_mutation_rate_refuses_topics_beyond_the_bucket(broker, kafka_libs, tmp_path):
    """`controller_mutation_rate=1` (partitions per second) for one client id: its bucket holds 2
    partitions. In one CreateTopics v7 (franz-go, raw requests: go/mutationprobe) of five
    2-partition topics, the first takes the bucket to 0, the second below it, and the rest are
    refused with THROTTLING_QUOTA_EXCEEDED, the response saying how long the bucket needs (2 s);
    the DeleteTopics that follows is held to the same bucket. Another client id is not. (A
    single node's own quota; test_cluster_quotas.py has a cluster's, held by the controller.)"""
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    bs = broker.bootstrap
    set_quota(kt, bs, "controller_mutation_rate", "mutator", 1)
    check_mutation_quota(lambda client_id, prefix: probe_mutations(bs, client_id, prefix))


def probe_mutations(bs: str, client_id: str, prefix: str) -> tuple[list[str], list[str], dict[str, int]]:
    """go/mutationprobe with `client_id`: one CreateTopics of five 2-partition topics named
    `prefix`-N, then one DeleteTopics of those created. Returns the error names of each creation
    and deletion, and the two responses' throttle times."""
    from conftest import go_build
    r = subprocess.run([str(go_build("mutationprobe")), bs, client_id, prefix, "5", "2"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.split("\n")
    created = [l.split()[2] for l in lines if l.startswith("create ")]
    deleted = [l.split()[2] for l in lines if l.startswith("delete ")]
    throttle = {k: int(v) for k, v in (kv.split("=") for l in lines if l.startswith("throttle ")
                                       for kv in l.split()[1:])}
    return created, deleted, throttle


def check_mutation_quota(run) -> None:
    """What a client id `mutator` held to `controller_mutation_rate=1` with a bucket of 2
    partitions sees (`run(client_id, prefix)` is `probe_mutations` against some broker), and a
    client id `unlimited` without a quota beside it."""
    created, deleted, throttle = run("mutator", "throttled")
    assert created == ["NONE", "NONE"] + ["THROTTLING_QUOTA_EXCEEDED"] * 3, created
    assert 1000 < throttle["create"] <= 2000, throttle
    # franz-go waits out the 2 s before its next request: the bucket is back near 0, so deleting
    # both topics (4 partitions) cannot all pass. (Whether the first passes depends on the
    # milliseconds, on Kafka too.)
    assert "THROTTLING_QUOTA_EXCEEDED" in deleted and set(deleted) <= {"NONE", "THROTTLING_QUOTA_EXCEEDED"}, deleted
    created, deleted, throttle = run("unlimited", "free")
    assert created == ["NONE"] * 5 and deleted == ["NONE"] * 5 and throttle == {"create": 0, "delete": 0}, \
        (created, deleted, throttle)
