"""kcat (librdkafka-based CLI, Debian package `kcat`) against the broker under test.

kcat ships its own (older) librdkafka, so it is a second librdkafka generation next to
confluent-kafka: different request versions, same protocol expectations.
"""

import json
import shutil
import time
import uuid

import pytest

from conftest import run_logged

KCAT_TIMEOUT = 60


@pytest.fixture(scope="session")
def kcat() -> str:
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        pytest.fail("kcat not found (apt-get install -y kcat; see scripts/install-test-deps)", pytrace=False)
    return path


def run_kcat(kcat, broker, *args):
    # -m: metadata timeout; a few -X settings keep failures quick and visible
    cmd = [kcat, "-b", broker.bootstrap, "-m", "15", "-X", "socket.timeout.ms=10000", *args]
    return run_logged(cmd, timeout=KCAT_TIMEOUT, what="kcat " + " ".join(map(str, args)))


def metadata(kcat, broker, topic=None):
    args = ["-L", "-J"] + (["-t", topic] if topic else [])
    return json.loads(run_kcat(kcat, broker, *args).stdout)


def consume(kcat, broker, topic, offset="beginning", extra=()):
    r = run_kcat(kcat, broker, "-C", "-t", topic, "-p", "0", "-o", offset, "-e", "-J", *extra)
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def produce_lines(kcat, broker, tmp_path, topic, lines, *args):
    data = tmp_path / f"in-{uuid.uuid4().hex[:6]}.txt"
    data.write_text("".join(line + "\n" for line in lines))
    run_kcat(kcat, broker, "-P", "-t", topic, "-p", "0", "-K", ":", "-l", *args, str(data))


def test_kcat_metadata_lists_broker_and_topics(kcat, broker, tmp_path):
    """kcat -L: the single broker is listed with the address clients connect to; a topic
    auto-created by a produce shows up with its partition led by that broker."""
    md = metadata(kcat, broker)
    assert len(md["brokers"]) == 1, md
    b = md["brokers"][0]
    assert b["name"] == broker.bootstrap, md
    assert md["originating_broker"]["id"] == b["id"], md

    topic = f"kcat-md-{uuid.uuid4().hex[:8]}"
    produce_lines(kcat, broker, tmp_path, topic, ["k:v"])  # auto-creates the topic

    deadline = time.time() + 20
    while True:
        md = metadata(kcat, broker, topic)
        ts = [t for t in md["topics"] if t["topic"] == topic]
        if ts and "error" not in ts[0] and ts[0]["partitions"]:
            break
        assert time.time() < deadline, f"topic {topic} not in metadata: {md}"
        time.sleep(0.2)
    parts = ts[0]["partitions"]
    assert [p["partition"] for p in parts] == [0], parts  # num.partitions=1 (Kafka's default)
    assert parts[0]["leader"] == b["id"], parts
    assert "error" not in parts[0], parts

    md = metadata(kcat, broker)  # all topics
    assert topic in [t["topic"] for t in md["topics"]], md


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_produce_consume(kcat, broker, tmp_path, codec):
    """kcat -P (keys, headers, compression) then kcat -C from the beginning, from an absolute
    offset and from the end (-o -N); -Q offset lookup by timestamp."""
    topic = f"kcat-{codec}-{uuid.uuid4().hex[:8]}"
    n = 60
    lines = [f"key-{i % 7}:value {i} {'x' * (i % 13)}" for i in range(n)]
    lines[5] = "key-empty:"  # empty value
    t0 = int(time.time() * 1000)
    produce_lines(kcat, broker, tmp_path, topic, lines[:30], "-z", codec, "-H", "h1=one", "-H", "h2=")
    produce_lines(kcat, broker, tmp_path, topic, lines[30:], "-z", codec, "-H", "h1=two")
    t1 = int(time.time() * 1000)

    msgs = consume(kcat, broker, topic)
    assert len(msgs) == n, [m.get("offset") for m in msgs]
    for i, (m, line) in enumerate(zip(msgs, lines)):
        key, _, value = line.partition(":")
        assert m["offset"] == i, m
        assert m["key"] == key, m
        assert m["payload"] == value, m
        assert m["headers"] == (["h1", "one", "h2", ""] if i < 30 else ["h1", "two"]), m
        assert m["tstype"] == "create" and t0 - 5000 <= m["ts"] <= t1 + 5000, m

    tail = consume(kcat, broker, topic, offset="17")
    assert [m["offset"] for m in tail] == list(range(17, n))
    assert [m["payload"] for m in tail] == [m["payload"] for m in msgs[17:]]

    last = consume(kcat, broker, topic, offset="-3")
    assert [m["offset"] for m in last] == [n - 3, n - 2, n - 1]

    # -Q: offsets for timestamps (ListOffsets by timestamp)
    r = run_kcat(kcat, broker, "-Q", "-t", f"{topic}:0:{t0 - 3600_000}")
    assert f"{topic} [0] offset 0" in r.stdout, r.stdout
    r = run_kcat(kcat, broker, "-Q", "-t", f"{topic}:0:{msgs[45]['ts']}")
    first45 = next(m["offset"] for m in msgs if m["ts"] >= msgs[45]["ts"])
    assert f"{topic} [0] offset {first45}" in r.stdout, r.stdout
    r = run_kcat(kcat, broker, "-Q", "-t", f"{topic}:0:{t1 + 3600_000}")
    assert f"{topic} [0] offset -1" in r.stdout, r.stdout  # no such record: -1 (OFFSET_END)
