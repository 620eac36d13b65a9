"""Ketch's Prometheus endpoint (`ketch.metrics.listener`) and readiness, with a real client.

A librdkafka producer and consumer (confluent-kafka, in this process) produce to a two-partition
topic, consume it and commit offsets for a group leaving a known lag; then /metrics is scraped
and parsed strictly (text format 0.0.4: HELP/TYPE before samples, a family's samples together,
escaped label values) and the figures are checked against what the client did. Other tests:
the endpoint is off by default, a bad listener value stops the start naming the key, and /ready
is 503 until recovery finished (observed on a restart that recovers many partitions).

Real Kafka has no such endpoint (it exposes JMX), so against KETCH_COMPAT_TARGET=kafka these
tests are skipped.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest

from conftest import TARGET, BrokerStartError, KetchBroker, free_port

pytestmark = pytest.mark.skipif(
    TARGET != "ketch", reason="Ketch-only: Apache Kafka exposes metrics over JMX, not a Prometheus /metrics endpoint"
)

METRICS_ON = {"ketch.metrics.listener": "127.0.0.1:0"}
# Topics of 100 partitions created before the kill -9 in the readiness test.
RECOVERY_TOPICS = 10
METRICS_LINE = re.compile(rb"ketch metrics on http://([0-9.]+):(\d+)/metrics")


def metrics_base(broker, timeout: float = 10) -> str:
    """http://host:port of the endpoint, from the line Ketch prints after its listening line
    (the last one in the log: the port changes on restart)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = METRICS_LINE.findall(broker.log_path.read_bytes())
        if found:
            host, port = found[-1]
            return f"http://{host.decode()}:{int(port)}"
        time.sleep(0.05)
    pytest.fail(f"no 'ketch metrics on' line in {broker.log_path}", pytrace=False)


def http_get(url: str, timeout: float = 10) -> tuple[int, dict, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')


def parse_labels(text: str) -> tuple:
    labels, pos = [], 0
    while pos < len(text):
        m = LABEL.match(text, pos)
        assert m, f"bad label syntax at {text[pos:]!r}"
        value = re.sub(r'\\(.)', lambda e: {"n": "\n"}.get(e.group(1), e.group(1)), m.group(2))
        labels.append((m.group(1), value))
        pos = m.end()
    return tuple(sorted(labels))


def parse_exposition(text: str) -> dict[str, dict[tuple, float]]:
    """{sample name: {sorted label tuple: value}}, checking the format on the way."""
    assert text.endswith("\n")
    samples: dict[str, dict[tuple, float]] = {}
    types: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram"), line
            assert name not in types, f"family {name} declared twice"
            types[name] = kind
            current = name
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        name, labels, value = m.group(1), parse_labels(m.group(2) or ""), m.group(3)
        allowed = {current} if types[current] != "histogram" else {f"{current}_{s}" for s in ("bucket", "sum", "count")}
        assert name in allowed, f"{name} outside its family {current}"
        if types[current] == "counter":
            assert name.endswith("_total"), name
        series = samples.setdefault(name, {})
        assert labels not in series, f"duplicate series {name}{labels}"
        series[labels] = float(value)
    return samples


def get(samples, name, **labels) -> float | None:
    return samples.get(name, {}).get(tuple(sorted((k, str(v)) for k, v in labels.items())))


def check_histograms(samples) -> int:
    """Every histogram series: buckets cumulative in `le` order, +Inf == _count. Returns how many."""
    checked = 0
    for labels, count in samples.get("ketch_request_duration_seconds_count", {}).items():
        buckets = sorted(
            (float(dict(bl)["le"]), v)
            for bl, v in samples["ketch_request_duration_seconds_bucket"].items()
            if tuple(kv for kv in bl if kv[0] != "le") == labels
        )
        assert len(buckets) >= 2 and buckets[-1][0] == float("inf"), buckets
        values = [v for _, v in buckets]
        assert values == sorted(values), f"non-monotone buckets for {labels}: {buckets}"
        assert buckets[-1][1] == count, f"+Inf {buckets[-1][1]} != count {count} for {labels}"
        assert samples["ketch_request_duration_seconds_sum"][labels] >= 0
        checked += 1
    return checked


@pytest.mark.broker_config(**METRICS_ON)
def test_metrics_after_produce_consume_commit(broker):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"metrics-{uuid.uuid4().hex[:8]}", f"metrics-group-{uuid.uuid4().hex[:8]}"
    base = metrics_base(broker)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(timeout=30)

    per_partition = {0: 30, 1: 20}
    value = b"v" * 200
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
    for p, n in per_partition.items():
        for i in range(n):
            producer.produce(topic, value=value, key=f"k{i}".encode(), partition=p)
    assert producer.flush(30) == 0, "all records delivered"

    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    consumer.assign([TopicPartition(topic, p, 0) for p in per_partition])
    got, deadline = 0, time.monotonic() + 30
    while got < sum(per_partition.values()) and time.monotonic() < deadline:
        for m in consumer.consume(num_messages=100, timeout=1):
            assert m.error() is None, m.error()
            got += 1
    assert got == 50, f"consumed {got} of 50"
    committed = {0: 25, 1: 5}  # expected lag: 5 and 15
    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in committed.items()], asynchronous=False)

    status, headers, body = http_get(base + "/metrics")  # the consumer is still connected
    assert status == 200
    assert headers.get("Content-Type") == "text/plain; version=0.0.4; charset=utf-8", headers
    s = parse_exposition(body)

    for api in ("Produce", "Fetch", "OffsetCommit", "Metadata", "ApiVersions"):
        assert get(s, "ketch_requests_total", api=api) > 0, api
    assert check_histograms(s) >= 5
    assert get(s, "ketch_request_duration_seconds_count", api="Produce") >= 1
    assert get(s, "ketch_request_duration_seconds_count", api="Produce") <= get(s, "ketch_requests_total", api="Produce")
    assert get(s, "ketch_requests_rejected_total") == 0
    # Every record crossed the network once each way (plus framing).
    assert get(s, "ketch_network_received_bytes_total") > 50 * len(value)
    assert get(s, "ketch_network_sent_bytes_total") > 50 * len(value)
    assert get(s, "ketch_connections_active") >= 1
    assert get(s, "ketch_connections_accepted_total") >= get(s, "ketch_connections_active")
    assert get(s, "ketch_ready") == 1
    assert get(s, "ketch_uptime_seconds") > 0

    for p, n in per_partition.items():
        assert get(s, "ketch_log_size_bytes", topic=topic, partition=p) > n * len(value)
        assert get(s, "ketch_log_start_offset", topic=topic, partition=p) == 0
        assert get(s, "ketch_log_end_offset", topic=topic, partition=p) == n
        assert get(s, "ketch_log_high_watermark", topic=topic, partition=p) == n
        assert get(s, "ketch_consumer_group_committed_offset", group=group, topic=topic, partition=p) == committed[p]
        assert get(s, "ketch_consumer_group_lag", group=group, topic=topic, partition=p) == n - committed[p]

    for path in ("/health", "/ready", "/live"):
        assert http_get(base + path)[0] == 200, path
    assert http_get(base + "/nope")[0] == 404

    consumer.close()
    # Connections close asynchronously on the broker's side: wait for the gauge to fall.
    before = get(s, "ketch_connections_active")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        now = get(parse_exposition(http_get(base + "/metrics")[2]), "ketch_connections_active")
        if now < before:
            break
        time.sleep(0.1)
    assert now < before, f"connections_active stayed at {now} after the consumer closed"


def listening_sockets(pid: int) -> list[tuple[str, int]]:
    """(family, port) of every TCP socket in LISTEN state held by process `pid` (Linux /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for family in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{family}") as f:
            next(f)
            for row in f:
                cols = row.split()
                if cols[3] == "0A" and cols[9] in inodes:  # 0A = LISTEN
                    found.append((family, int(cols[1].rsplit(":", 1)[1], 16)))
    return found


def test_metrics_off_by_default(broker):
    assert not METRICS_LINE.search(broker.log_path.read_bytes()), "no endpoint line without the key"
    assert listening_sockets(broker.proc.pid) == [("tcp", broker.port)], "only the Kafka listener"


@pytest.mark.broker_config(**METRICS_ON)
def test_metrics_on_adds_exactly_one_listener(broker):
    port = int(metrics_base(broker).rsplit(":", 1)[1])
    assert sorted(listening_sockets(broker.proc.pid)) == sorted([("tcp", broker.port), ("tcp", port)])


@pytest.mark.parametrize("value", ["9404", "127.0.0.1:notaport", "127.0.0.1:70000"])
def test_bad_metrics_listener_is_a_start_error(tmp_path, value):
    b = KetchBroker(tmp_path, {"ketch.metrics.listener": value})
    try:
        with pytest.raises(BrokerStartError) as e:
            b.start()
        assert "ketch.metrics.listener" in str(e.value), str(e.value)
    finally:
        b.close()


def test_bad_log_level_is_a_start_error(tmp_path):
    b = KetchBroker(tmp_path, {"ketch.log.level": "ketch=loudest"})
    try:
        with pytest.raises(BrokerStartError) as e:
            b.start()
        assert "ketch.log.level" in str(e.value), str(e.value)
    finally:
        b.close()


@pytest.mark.parametrize("level", ["warn", "debug"])
def test_log_level_from_config(start_broker, level):
    if os.environ.get("KETCH_LOG"):
        pytest.skip(f"KETCH_LOG={os.environ['KETCH_LOG']} is set and takes precedence over ketch.log.level")
    b = start_broker({"ketch.log.level": level})
    # A connection closed mid-frame is logged at debug level.
    with socket.create_connection((b.host, b.port)) as s:
        s.sendall(b"\x00\x00\x00\x10abc")
    deadline = time.monotonic() + (1 if level == "warn" else 10)  # warn: give a wrong line time to show
    while time.monotonic() < deadline and b" DEBUG " not in b.log_path.read_bytes():
        time.sleep(0.05)
    log = b.log_path.read_bytes()
    if level == "warn":
        assert b" INFO " not in log and b" DEBUG " not in log, "ketch.log.level=warn hides info and debug"
    else:
        assert b" INFO " in log and b" DEBUG " in log, "ketch.log.level=debug shows debug lines"


def test_ready_is_503_until_recovery_finished(tmp_path):
    """Many partitions and a kill -9 make the restart recover for a while; meanwhile /ready is
    polled from before the process is spawned. The statuses seen must run (refused)* 503* 200+
    and never go back, and 200 must be there once the listening line was printed."""
    from confluent_kafka.admin import AdminClient, NewTopic

    port = free_port()
    b = KetchBroker(tmp_path, {"ketch.metrics.listener": f"127.0.0.1:{port}"})
    try:
        b.start()
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        futures = admin.create_topics([NewTopic(f"many-{i}", num_partitions=100, replication_factor=1)
                                       for i in range(RECOVERY_TOPICS)])
        for f in futures.values():
            f.result(timeout=120)
        del admin, futures  # a client left behind would retry the dead port until collected
        b.kill9()

        statuses = []
        done = threading.Event()

        def poll():
            try:
                status = http_get(f"http://127.0.0.1:{port}/ready", timeout=5)[0]
            except (urllib.error.URLError, ConnectionError):
                status = "refused"
            if not statuses or statuses[-1] != status:
                statuses.append(status)
            return status

        def poller():
            while not done.is_set():
                poll()

        # The broker is started from this thread: conftest's PR_SET_PDEATHSIG kills a child when
        # the thread that spawned it ends.
        poll()
        watcher = threading.Thread(target=poller)
        watcher.start()
        try:
            b.start()
        finally:
            done.set()
            watcher.join()
        assert poll() == 200, f"not ready after the listening line: {statuses}"
        order = {"refused": 0, 503: 1, 200: 2}
        assert all(s in order for s in statuses), statuses
        assert [order[s] for s in statuses] == sorted(order[s] for s in statuses), f"went back: {statuses}"
        assert len(statuses) == len(set(statuses)), f"went back: {statuses}"
        print(f"/ready during the restart: {statuses}")
        assert 503 in statuses, f"recovery was too quick to observe 503: {statuses}"
    finally:
        b.kill9()  # a clean stop would fsync 1,000 partitions: seconds of nothing tested
