"""Kafka Streams 4.1 (org.apache.kafka:kafka-streams from Maven, unchanged) against the broker.

test_streams_word_count_exactly_once proves that a Streams application with a state store, a
repartition topic and processing.guarantee=exactly_once_v2 (2 stream threads, the classic group
protocol, Streams 4.1's default) computes exact results, and stays exactly-once across a SIGKILL
of its JVM mid-run and a restart: the state store is rebuilt from its changelog, uncommitted
transactions are aborted, and a read_committed reader of the output sees each word's count go
1, 2, ..., N with no repeat and no gap (a replayed update would repeat a count, a lost one skip it).
Also passes against Apache Kafka 4.1 (KETCH_COMPAT_TARGET=kafka).

The application is ketch.compat.StreamsWordCount (compat-tests/java); by hand:
    java -cp 'compat-tests/.cache/java-build/ketch-compat-java.jar:compat-tests/.cache/java-build/lib/*' \
        ketch.compat.StreamsWordCount 127.0.0.1:PORT app-id input output /tmp/state
"""

from __future__ import annotations

import collections
import random
import struct
import threading
import time
import uuid

import pytest

from frameworks_support import TopicReader, create_topics, java_framework_cmd, produce_all, topic_config, topics
from txn_support import watched  # noqa: F401  (fixture)

pytestmark = pytest.mark.timeout(420)  # pytest-timeout (requirements.txt)

WORDS = [f"w{i:02d}" for i in range(40)]
IN_PARTS, OUT_PARTS = 4, 2


def lines(rng: random.Random, n: int, first: int) -> list[tuple[str, str]]:
    return [(f"line-{first + i}", " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))) for i in range(n)]


def counts(records) -> collections.Counter:
    c = collections.Counter()
    for _, line in records:
        c.update(line.split())
    return c


class Output:
    """Each word's count updates in the output, in order, as read_committed sees them."""

    def __init__(self, reader: TopicReader):
        self.reader = reader

    def updates(self) -> dict[str, list[int]]:
        u: dict[str, list[int]] = collections.defaultdict(list)
        for _, _, k, v in self.reader.records:
            u[k.decode()].append(struct.unpack(">q", v)[0])
        return u

    def latest(self) -> dict[str, int]:
        return {w: seq[-1] for w, seq in self.updates().items()}


def start_streams(watched, jar, bootstrap, app, inp, out, state_dir, n):
    w = watched(java_framework_cmd(jar, "ketch.compat.StreamsWordCount", bootstrap, app, inp, out, state_dir, 300,
                                   log_level="warn"), f"streams-{n}")
    w.wait_line(lambda l: l.startswith("group.protocol"), 60, "the group protocol line")
    w.wait_line(lambda l: l == "STATE RUNNING" or l.startswith("ERROR"), 120, "STATE RUNNING")
    return w


def test_streams_word_count_exactly_once(broker, java_compat_jar, watched, tmp_path):
    t0 = time.monotonic()
    s = uuid.uuid4().hex[:8]
    app, inp, out = f"wordcount-{s}", f"wc-in-{s}", f"wc-out-{s}"
    create_topics(broker.bootstrap, {inp: IN_PARTS, out: OUT_PARTS})
    rng = random.Random(17)
    phase1 = lines(rng, 2000, 0)
    phase2 = lines(rng, 3000, len(phase1))
    produce_all(broker.bootstrap, inp, phase1)
    state = tmp_path / "streams-state"

    streams = start_streams(watched, java_compat_jar, broker.bootstrap, app, inp, out, state, 1)
    assert any(l == "group.protocol classic" for l in streams.lines), "Streams 4.1 should default to classic"
    reader = TopicReader(broker.bootstrap, out, OUT_PARTS)
    output = Output(reader)
    want1 = dict(counts(phase1))
    reader.wait_until(lambda: output.latest() == want1, 180, "exact counts of phase 1",
                      on_fail=lambda m: streams.fail(m))
    print(f"phase 1: {sum(want1.values())} words counted exactly ({time.monotonic() - t0:.1f}s)")

    # the internal topics Streams created: the repartition topic and the store's compacted changelog
    have = topics(broker.bootstrap)
    repartition, changelog = f"{app}-words-repartition", f"{app}-word-counts-changelog"
    assert have.get(repartition) == IN_PARTS, f"repartition topic {repartition}: {have.get(repartition)} partitions"
    assert have.get(changelog) == IN_PARTS, f"changelog topic {changelog}: {have.get(changelog)} partitions"
    assert topic_config(broker.bootstrap, changelog)["cleanup.policy"] == "compact"

    # phase 2 is produced slowly in the background; the Streams JVM is SIGKILLed while it runs
    produced_err: list[BaseException] = []

    def produce_phase2():
        try:
            for i in range(0, len(phase2), 100):
                produce_all(broker.bootstrap, inp, phase2[i:i + 100])
                time.sleep(0.1)
        except BaseException as e:  # noqa: BLE001 - reported by the test thread
            produced_err.append(e)

    feeder = threading.Thread(target=produce_phase2, daemon=True)
    feeder.start()
    before = len(reader.records)
    reader.wait_until(lambda: len(reader.records) > before + 500, 120, "phase 2 output under way",
                      on_fail=lambda m: streams.fail(m))
    assert feeder.is_alive(), "phase 2 was produced before the kill: make it slower"
    streams.proc.kill()
    streams.proc.wait(30)
    print(f"Streams JVM killed (-9) after {len(reader.records) - before} phase 2 updates "
          f"({time.monotonic() - t0:.1f}s)")

    streams = start_streams(watched, java_compat_jar, broker.bootstrap, app, inp, out, state, 2)
    feeder.join(120)
    assert not feeder.is_alive() and not produced_err, f"phase 2 producer: {produced_err}"
    want = dict(counts(phase1 + phase2))
    reader.wait_until(lambda: output.latest() == want, 240, "exact counts after the kill and restart",
                      on_fail=lambda m: streams.fail(m))
    reader.poll_for(2)  # anything late (a duplicate) would show now
    upd = output.updates()
    bad = {w: seq for w, seq in upd.items() if seq != list(range(1, want[w] + 1))}
    assert not bad, ("count updates not exactly 1..N (exactly once broken): "
                     + "; ".join(f"{w}: {seq[:10]}...{seq[-5:]} (N={want[w]})" for w, seq in list(bad.items())[:5]))
    assert streams.proc.poll() is None, "Streams exited:\n" + streams.output()
    reader.close()
    print(f"{sum(want.values())} words, {len(reader.records)} count updates, exactly once "
          f"({time.monotonic() - t0:.1f}s)")
