"""Kafka Streams 4.1 (org.apache.kafka:kafka-streams from Maven, unchanged) against the broker.

test_streams_word_count_exactly_once proves that a Streams application with a state store, a
repartition topic and processing.guarantee=exactly_once_v2 (2 stream threads, the classic group
protocol, Streams 4.1's default) computes exact results, and stays exactly-once across a SIGKILL
of its JVM mid-run and a restart: the state store is rebuilt from its changelog, uncommitted
transactions are aborted, and a read_committed reader of the output sees each word's count go
1, 2, ..., N with no repeat and no gap (a replayed update would repeat a count, a lost one skip it).
test_streams_two_instances_one_killed runs the same application as two instances (two JVMs, same
application.id, each with its own state dir): the input partitions are spread over both; one is
SIGKILLed while input keeps coming, the survivor takes over its tasks (their stores restored from
the changelogs) and the counts stay exactly once; then the killed one is restarted and rejoins.

Both also pass against Apache Kafka 4.1 (KETCH_COMPAT_TARGET=kafka).

The application is ketch.compat.StreamsWordCount (compat-tests/java); by hand:
    java -cp 'compat-tests/.cache/java-build/ketch-compat-java.jar:compat-tests/.cache/java-build/lib/*' \
        ketch.compat.StreamsWordCount 127.0.0.1:PORT app-id input output /tmp/state
"""

from __future__ import annotations

import collections
import random
import re
import struct
import threading
import time
import uuid

import pytest

from frameworks_support import (TopicReader, admin, create_topics, java_framework_cmd, produce_all, topic_config,
                                topics)
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


def spawn_streams(watched, jar, bootstrap, app, inp, out, state_dir, n):
    return watched(java_framework_cmd(jar, "ketch.compat.StreamsWordCount", bootstrap, app, inp, out, state_dir, 300,
                                      log_level="warn"), f"streams-{n}")


def wait_running(w):
    w.wait_line(lambda l: l.startswith("group.protocol"), 60, "the group protocol line")
    line = w.wait_line(lambda l: l == "STATE RUNNING" or l.startswith("ERROR"), 120, "STATE RUNNING")
    if line != "STATE RUNNING":
        w.fail(line)
    return w


def start_streams(watched, jar, bootstrap, app, inp, out, state_dir, n):
    return wait_running(spawn_streams(watched, jar, bootstrap, app, inp, out, state_dir, n))


class Feeder:
    """Produces `records` in the background, 100 at a time every 0.1 s (so a kill lands mid-stream)."""

    def __init__(self, bootstrap: str, topic: str, records):
        self.err: list[BaseException] = []

        def run():
            try:
                for i in range(0, len(records), 100):
                    produce_all(bootstrap, topic, records[i:i + 100])
                    time.sleep(0.1)
            except BaseException as e:  # noqa: BLE001 - reported by the test thread
                self.err.append(e)

        self.t = threading.Thread(target=run, daemon=True)
        self.t.start()

    def join(self, timeout: float) -> None:
        self.t.join(timeout)
        assert not self.t.is_alive() and not self.err, f"background producer: {self.err or 'still running'}"


def assert_exactly_once(output: Output, want: dict[str, int]) -> None:
    upd = output.updates()
    bad = {w: seq for w, seq in upd.items() if seq != list(range(1, want[w] + 1))}
    assert not bad, ("count updates not exactly 1..N (exactly once broken): "
                     + "; ".join(f"{w}: {seq[:10]}...{seq[-5:]} (N={want[w]})" for w, seq in list(bad.items())[:5]))


STREAM_THREAD_RE = re.compile(r"^(.*)-StreamThread-\d+-consumer$")


def input_owners(bootstrap: str, app: str, inp: str) -> dict[str, set[int]]:
    """Input partitions per Streams instance, from DescribeGroups of the application's (classic)
    group: members' client ids are <application.id>-<process id>-StreamThread-<n>-consumer."""
    a = admin(bootstrap)  # must outlive the future
    g = a.describe_consumer_groups([app], request_timeout=30)[app].result(timeout=60)
    owners: dict[str, set[int]] = collections.defaultdict(set)
    for m in g.members:
        mo = STREAM_THREAD_RE.match(m.client_id)
        process = mo.group(1) if mo else m.client_id
        owners[process] |= {tp.partition for tp in m.assignment.topic_partitions if tp.topic == inp}
    return dict(owners)


def wait_owners(bootstrap: str, app: str, inp: str, pred, timeout: float, desc: str, procs) -> dict[str, set[int]]:
    deadline = time.monotonic() + timeout
    while True:
        owners = input_owners(bootstrap, app, inp)
        if pred(owners):
            return owners
        if time.monotonic() > deadline:
            procs[0].fail(f"{desc}: input partitions per instance {owners}")
        time.sleep(0.5)


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


def test_streams_two_instances_one_killed(broker, java_compat_jar, watched, tmp_path):
    t0 = time.monotonic()
    s = uuid.uuid4().hex[:8]
    app, inp, out = f"wordcount2-{s}", f"wc2-in-{s}", f"wc2-out-{s}"
    create_topics(broker.bootstrap, {inp: IN_PARTS, out: OUT_PARTS})
    rng = random.Random(18)
    phase1, phase2 = lines(rng, 1500, 0), lines(rng, 3000, 1500)
    phase3 = lines(rng, 500, 4500)
    args = (java_compat_jar, broker.bootstrap, app, inp, out)

    # both instances start before any input: no store has state yet, so the assignor spreads the
    # stateful tasks too (with state on one side only it would keep them there until a probing
    # rebalance, 10 minutes later)
    a = spawn_streams(watched, *args, tmp_path / "state-a", "a")
    b = spawn_streams(watched, *args, tmp_path / "state-b", "b")
    wait_running(a)
    wait_running(b)
    owners = wait_owners(broker.bootstrap, app, inp,
                         lambda o: len(o) == 2 and all(o.values()) and set().union(*o.values()) == set(range(IN_PARTS)),
                         90, "input partitions spread over both instances", [a, b])
    print(f"two instances running, input partitions {sorted(map(sorted, owners.values()))} "
          f"({time.monotonic() - t0:.1f}s)")

    produce_all(broker.bootstrap, inp, phase1)
    reader = TopicReader(broker.bootstrap, out, OUT_PARTS)
    output = Output(reader)
    want = dict(counts(phase1))
    reader.wait_until(lambda: output.latest() == want, 180, "exact counts of phase 1 (two instances)",
                      on_fail=lambda m: a.fail(m))
    print(f"phase 1: {sum(want.values())} words counted exactly by two instances ({time.monotonic() - t0:.1f}s)")

    # phase 2 is produced slowly; instance a is SIGKILLed while it runs
    feeder = Feeder(broker.bootstrap, inp, phase2)
    before = len(reader.records)
    reader.wait_until(lambda: len(reader.records) > before + 500, 120, "phase 2 output under way",
                      on_fail=lambda m: a.fail(m))
    assert feeder.t.is_alive(), "phase 2 was produced before the kill: make it slower"
    before_owners = input_owners(broker.bootstrap, app, inp)
    a.proc.kill()
    a.proc.wait(30)
    killed_at = time.monotonic()
    print(f"instance a killed (-9) after {len(reader.records) - before} phase 2 updates "
          f"({time.monotonic() - t0:.1f}s)")

    # the survivor alone: it owns every input partition (a's session expires) and finishes phase 2
    feeder.join(120)
    survivor = wait_owners(broker.bootstrap, app, inp,
                           lambda o: len(o) == 1 and set().union(*o.values()) == set(range(IN_PARTS)),
                           90, "the survivor owning every input partition", [b])
    (b_process,) = survivor
    assert b_process in before_owners and before_owners[b_process] != set(range(IN_PARTS)), \
        f"b should have owned only some input partitions before the kill: {before_owners}, now {survivor}"
    want = dict(counts(phase1 + phase2))
    reader.wait_until(lambda: output.latest() == want, 240, "exact counts after the kill (survivor alone)",
                      on_fail=lambda m: b.fail(m))
    print(f"survivor took over {sorted(set(range(IN_PARTS)) - before_owners[b_process])} and finished phase 2 "
          f"{time.monotonic() - killed_at:.1f}s after the kill ({time.monotonic() - t0:.1f}s)")
    reader.poll_for(1)
    assert_exactly_once(output, want)
    assert b.proc.poll() is None, "the survivor exited:\n" + b.output()

    # the killed instance comes back on its state dir; phase 3 is counted by both
    a = start_streams(watched, *args, tmp_path / "state-a", "a2")
    wait_owners(broker.bootstrap, app, inp, lambda o: len(o) == 2, 90, "two instances again", [a, b])
    feeder = Feeder(broker.bootstrap, inp, phase3)
    feeder.join(120)
    want = dict(counts(phase1 + phase2 + phase3))
    reader.wait_until(lambda: output.latest() == want, 180, "exact counts after the restart",
                      on_fail=lambda m: a.fail(m))
    reader.poll_for(2)  # anything late (a duplicate) would show now
    assert_exactly_once(output, want)
    for w in (a, b):
        assert w.proc.poll() is None, f"{w.what} exited:\n" + w.output()
    reader.close()
    print(f"{sum(want.values())} words, {len(reader.records)} count updates, exactly once across the kill "
          f"and the rejoin ({time.monotonic() - t0:.1f}s)")
