"""Kafka Connect 4.1 (connect-runtime + connect-file from Maven, unchanged) against the broker.

- test_connect_standalone_file_pipeline: ConnectStandalone with a FileStreamSource (file -> topic)
  and a FileStreamSink (topic -> file): the sink file equals the source file line for line. The
  worker is stopped (SIGTERM), lines are appended, and it is started again: the source resumes
  from the offsets in its standalone offsets file, the sink from its consumer group's committed
  offsets, so the sink file is again exactly the source file (nothing lost, nothing repeated).
- test_connect_distributed_file_pipeline: ConnectDistributed, its config / offset / status
  topics created by the worker on the broker (compacted, checked), the two connectors created
  through the REST API; the worker is killed (SIGKILL) mid-stream and restarted: it reads its
  connectors back from the config topic and its source offsets from the offset topic, and every
  source line reaches the sink file, in order (Connect is at-least-once: after a SIGKILL a line
  may be written twice, never lost; lines whose offsets were committed before the kill are not
  written again).
Both also pass against Apache Kafka 4.1 (KETCH_COMPAT_TARGET=kafka).
"""

from __future__ import annotations

import collections
import json
import signal
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from conftest import _reap, _spawn
from frameworks_support import create_topics, topic_end, java_framework_cmd, log_value, topic_config, topics

pytestmark = pytest.mark.timeout(420)  # pytest-timeout (requirements.txt)

STRING = "org.apache.kafka.connect.storage.StringConverter"
# every plugin on the classpath has a ServiceLoader manifest: no reflective classpath scan at each
# worker start (Connect's default plugin.discovery=hybrid_warn does both)
NO_PLUGIN_SCAN = {"plugin.discovery": "service_load"}


class Worker:
    """A Connect worker JVM with its log in a file."""

    def __init__(self, jar: Path, main: str, props: list[Path], log: Path):
        self.log = log
        self.offset = log.stat().st_size if log.exists() else 0
        f = open(log, "ab")
        try:
            self.proc = _spawn(java_framework_cmd(jar, main, *props), stdin=subprocess.DEVNULL, stdout=f, stderr=f)
        finally:
            f.close()

    def rest_url(self) -> str:
        # "REST server listening at http://127.0.0.1:PORT/, advertising URL ..." (the port is ephemeral)
        m = log_value(self.log, r"REST server listening at (http://[0-9.]+:\d+/)", 120, self.proc, self.offset)
        # the resources (/connectors, ...) answer 404 until this line
        log_value(self.log, r"REST resources initialized", 120, self.proc, self.offset)
        return m.group(1)

    def stop(self, sig=signal.SIGTERM) -> None:
        _reap(self.proc, sig, 60)


def write_props(path: Path, props: dict) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def read_lines(path: Path) -> list[str]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return text.splitlines()


def wait_sink(sink: Path, pred, timeout: float, worker: Worker, desc: str) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        have = read_lines(sink)
        if pred(have):
            return have
        if worker.proc.poll() is not None or time.monotonic() > deadline:
            why = "worker exited" if worker.proc.poll() is not None else f"not within {timeout}s"
            pytest.fail(f"{desc}: {why}; sink has {len(have)} lines, last {have[-3:]}\n"
                        f"--- worker log ---\n{worker.log.read_text(errors='replace')[-15000:]}", pytrace=False)
        time.sleep(0.3)


def append(path: Path, first: int, n: int, tag: str) -> None:
    with open(path, "a") as f:
        for i in range(first, first + n):
            # ASCII only: FileStreamSource's stored position counts characters but is applied by
            # skipping bytes, so a restart after multi-byte characters resumes mid-line (Kafka too)
            f.write(f"{tag} line {i:05d} {'x' * (i % 37)}\n")


def test_connect_standalone_file_pipeline(broker, java_compat_jar, tmp_path):
    t0 = time.monotonic()
    s = uuid.uuid4().hex[:8]
    topic = f"connect-file-{s}"
    create_topics(broker.bootstrap, {topic: 1})
    source, sink, offsets = tmp_path / "source.txt", tmp_path / "sink.txt", tmp_path / "connect.offsets"
    append(source, 0, 1000, s)
    worker_props = write_props(tmp_path / "worker.properties", {
        "bootstrap.servers": broker.bootstrap,
        "key.converter": STRING, "value.converter": STRING,
        "offset.storage.file.filename": offsets,
        "offset.flush.interval.ms": 1000,
        "listeners": "http://127.0.0.1:0",
        **NO_PLUGIN_SCAN,
    })
    source_props = write_props(tmp_path / "source.properties", {
        "name": f"file-source-{s}", "connector.class": "FileStreamSource", "tasks.max": 1,
        "file": source, "topic": topic,
    })
    sink_props = write_props(tmp_path / "sink.properties", {
        "name": f"file-sink-{s}", "connector.class": "FileStreamSink", "tasks.max": 1,
        "file": sink, "topics": topic,
    })
    log = tmp_path / "connect-standalone.log"
    main = "org.apache.kafka.connect.cli.ConnectStandalone"
    w = Worker(java_compat_jar, main, [worker_props, source_props, sink_props], log)
    try:
        w.rest_url()
        want = read_lines(source)
        wait_sink(sink, lambda h: len(h) >= len(want), 120, w, "sink file complete")
        assert read_lines(sink) == want, "sink file differs from the source file"
        print(f"standalone: {len(want)} lines file -> topic -> file ({time.monotonic() - t0:.1f}s)")
        w.stop()
        assert w.proc.returncode in (0, 130, 143), f"worker exit code {w.proc.returncode}"
        assert offsets.is_file() and offsets.stat().st_size > 0, "no standalone offsets file"

        append(source, 1000, 500, s)
        w = Worker(java_compat_jar, main, [worker_props, source_props, sink_props], log)
        want = read_lines(source)
        wait_sink(sink, lambda h: len(h) >= len(want), 120, w, "sink file complete after the restart")
        time.sleep(2)  # a repeated line would arrive now
        have = read_lines(sink)
        assert have == want, f"after the restart the sink has {len(have)} lines for {len(want)} source lines " \
                             f"(first difference: {next((i for i, (a, b) in enumerate(zip(have, want)) if a != b), None)})"
        print(f"standalone restart: {len(want)} lines exactly once ({time.monotonic() - t0:.1f}s)")
    finally:
        w.stop()


def rest(url: str, method: str = "GET", body: dict | None = None, timeout: float = 30):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        text = r.read().decode()
    return json.loads(text) if text else None


def wait_running(base: str, name: str, timeout: float, worker: Worker) -> None:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline and worker.proc.poll() is None:
        try:
            last = rest(f"{base}connectors/{name}/status")
            if last["connector"]["state"] == "RUNNING" and last["tasks"] \
                    and all(t["state"] == "RUNNING" for t in last["tasks"]):
                return
        except Exception as e:  # noqa: BLE001 - not yet there (404, 409 while rebalancing)
            last = repr(e)
        time.sleep(0.5)
    pytest.fail(f"connector {name} not RUNNING within {timeout}s: {last}\n"
                f"--- worker log ---\n{worker.log.read_text(errors='replace')[-15000:]}", pytrace=False)


def test_connect_distributed_file_pipeline(broker, java_compat_jar, tmp_path):
    t0 = time.monotonic()
    s = uuid.uuid4().hex[:8]
    topic = f"connectd-file-{s}"
    create_topics(broker.bootstrap, {topic: 1})
    internal = {"config": f"connect-configs-{s}", "offset": f"connect-offsets-{s}", "status": f"connect-status-{s}"}
    source, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    append(source, 0, 1000, s)
    worker_props = write_props(tmp_path / "worker.properties", {
        "bootstrap.servers": broker.bootstrap,
        "group.id": f"connect-cluster-{s}",
        "key.converter": STRING, "value.converter": STRING,
        "config.storage.topic": internal["config"], "config.storage.replication.factor": 1,
        "offset.storage.topic": internal["offset"], "offset.storage.replication.factor": 1,
        "offset.storage.partitions": 5,
        "status.storage.topic": internal["status"], "status.storage.replication.factor": 1,
        "status.storage.partitions": 3,
        "offset.flush.interval.ms": 1000,
        "listeners": "http://127.0.0.1:0",
        "scheduled.rebalance.max.delay.ms": 5000,  # a SIGKILLed worker's tasks come back within seconds
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
        # the sink task's consumer group too: the restarted sink's join waits for the SIGKILLed
        # member's session to expire (the consumer default is 45 s)
        "consumer.session.timeout.ms": 6000, "consumer.heartbeat.interval.ms": 1000,
        **NO_PLUGIN_SCAN,
    })
    log = tmp_path / "connect-distributed.log"
    main = "org.apache.kafka.connect.cli.ConnectDistributed"
    w = Worker(java_compat_jar, main, [worker_props], log)
    try:
        base = w.rest_url()
        have = topics(broker.bootstrap)
        assert have.get(internal["config"]) == 1 and have.get(internal["offset"]) == 5 \
            and have.get(internal["status"]) == 3, f"internal topics: { {t: have.get(t) for t in internal.values()} }"
        for t in internal.values():
            assert topic_config(broker.bootstrap, t)["cleanup.policy"] == "compact", f"{t} is not compacted"

        src_name, sink_name = f"dfile-source-{s}", f"dfile-sink-{s}"
        rest(f"{base}connectors", "POST", {"name": src_name, "config": {
            "connector.class": "FileStreamSource", "tasks.max": "1", "file": str(source), "topic": topic}})
        rest(f"{base}connectors", "POST", {"name": sink_name, "config": {
            "connector.class": "FileStreamSink", "tasks.max": "1", "file": str(sink), "topics": topic}})
        wait_running(base, src_name, 120, w)
        wait_running(base, sink_name, 120, w)
        want = read_lines(source)
        wait_sink(sink, lambda h: len(h) >= len(want), 120, w, "sink file complete")
        assert read_lines(sink) == want, "sink file differs from the source file"
        print(f"distributed: {len(want)} lines file -> topic -> file ({time.monotonic() - t0:.1f}s)")

        # SIGKILL the worker while new lines flow, append more while it is down, restart it. The
        # first 1,000 lines' source offsets (offset topic) and sink offsets (group) are committed
        # by then (offset.flush.interval.ms=1000): they must not be copied again.
        time.sleep(3)
        append(source, 1000, 2000, s)
        wait_sink(sink, lambda h: len(h) > len(want) + 100, 60, w, "second batch under way")
        w.stop(signal.SIGKILL)
        append(source, 3000, 500, s)
        w = Worker(java_compat_jar, main, [worker_props], log)
        base = w.rest_url()
        assert sorted(rest(f"{base}connectors")) == sorted([src_name, sink_name]), \
            "connectors not read back from the config topic"
        wait_running(base, src_name, 120, w)
        wait_running(base, sink_name, 120, w)
        want = read_lines(source)
        wait_sink(sink, lambda h: set(want) <= set(h), 180, w, "every source line in the sink after the restart")
        have = read_lines(sink)
        end = topic_end(broker.bootstrap, topic)
        reps = collections.Counter(collections.Counter(have).values())
        print(f"distributed: topic {topic} holds {end} records for {len(want)} source lines; sink lines by "
              f"times written: {dict(reps)}")
        assert set(have) == set(want), "the sink holds lines that are not in the source"
        first_seen = list(dict.fromkeys(have))
        assert first_seen == want, "sink lines out of order"
        assert have[:1000] == want[:1000] and not set(have[1000:]) & set(want[:1000]), \
            "lines committed before the SIGKILL were copied again"
        print(f"distributed restart: {len(want)} lines, none lost, {len(have) - len(want)} repeated after the "
              f"SIGKILL ({time.monotonic() - t0:.1f}s)")
    finally:
        w.stop()
