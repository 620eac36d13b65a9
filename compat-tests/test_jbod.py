"""JBOD: a broker with three `log.dirs`, seen with Kafka's `kafka-log-dirs`
(org.apache.kafka.tools.LogDirsCommand) and librdkafka (confluent-kafka).

Kafka's rule (LogManager.nextLogDirs): each new partition goes to the log directory holding the
fewest partitions. So all partitions (internal topics included) stay spread at most one apart,
a topic created or grown alone is spread evenly, `kafka-log-dirs --describe` reports each
directory with its partitions, each partition's directory `<dir>/<topic>-<p>` is where the
tool says, and after a clean restart and after a kill -9 every record is read back from every
partition and no partition has moved. (Within one CreateTopics of several topics Kafka creates
the partitions in no set order, so only the totals are even there: not asserted per topic.)

On the Kafka target the three directories are formatted before the start as
`kafka-storage format` does (a KRaft broker refuses an unformatted log dir): conftest formats
only its own `data_dir`, so the test writes `meta.properties` itself into each of its dirs
(the session's formatted cluster id, node id 1, a fresh `directory.id` per dir) and copies
`bootstrap.checkpoint` into the first (the metadata directory). Ketch formats them itself.

Moves between log dirs (AlterReplicaLogDirs) through `kafka-reassign-partitions --execute` with
`log_dirs` and `--verify`: a partition moves while a producer keeps writing to it, every
acknowledged record is read back at its offset, `kafka-log-dirs` and the disk show it in the
new dir only; a kill -9 right after a move was asked for leaves the partition in exactly one
dir with every acknowledged record (Kafka resumes the move after the restart, Ketch drops the
unfinished copy: both are accepted), and the move asked for again completes.

A log dir that fails at run time (a 2 MiB tmpfs filled up: ENOSPC; skipped where mounting is
not permitted) goes offline: its partition's records are refused, Metadata shows it without a
leader (LEADER_NOT_AVAILABLE), `kafka-log-dirs` reports the dir with an error, and the partition
in the other dir keeps serving.
"""

from __future__ import annotations

import base64
import collections
import json
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from conftest import TARGET, _kafka_format_template
from kafka_tools import KafkaTools

LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
RECORDS_PER_PARTITION = 200


def uid() -> str:
    return uuid.uuid4().hex[:8]


def kafka_dir_id() -> str:
    while True:
        s = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not s.startswith("-"):
            return s


def format_for_kafka(kafka_libs: Path, dirs: list[Path]) -> None:
    template = _kafka_format_template(kafka_libs)
    meta = (template / "meta.properties").read_text()
    for i, d in enumerate(dirs):
        d.mkdir(parents=True, exist_ok=True)
        lines = [l for l in meta.splitlines() if not l.startswith("directory.id=")]
        (d / "meta.properties").write_text("\n".join(lines + [f"directory.id={kafka_dir_id()}"]) + "\n")
        if i == 0:
            for f in template.iterdir():
                if f.name != "meta.properties":
                    shutil.copy2(f, d / f.name)


@pytest.fixture
def jbod(start_broker, kafka_libs, tmp_path):
    dirs = [tmp_path / f"disk{i}" for i in range(3)]
    if TARGET == "kafka":
        format_for_kafka(kafka_libs, dirs)
    broker = start_broker({"log.dirs": ",".join(str(d) for d in dirs)})
    return broker, dirs


def describe(kt: KafkaTools, broker, futures: list | None = None) -> dict[str, dict[str, int]]:
    """kafka-log-dirs --describe: log dir -> {"topic-p": size}. Future replicas (a move in
    progress) are collected into `futures` as (dir, "topic-p") when given, else refused."""
    r = kt.run(LOG_DIRS, "--bootstrap-server", broker.bootstrap, "--describe", "--broker-list", "1")
    doc = next((json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")), None)
    assert doc is not None, f"kafka-log-dirs printed no JSON:\n{r.out}"
    assert [b["broker"] for b in doc["brokers"]] == [1], doc
    out = {}
    for ld in doc["brokers"][0]["logDirs"]:
        assert ld["error"] is None, f"log dir error: {ld}"
        out[ld["logDir"]] = {p["partition"]: p["size"] for p in ld["partitions"] if not p["isFuture"]}
        for p in ld["partitions"]:
            if p["isFuture"] and futures is not None:
                futures.append((ld["logDir"], p["partition"]))
                continue
            assert p["offsetLag"] == 0 and p["isFuture"] is False, p
    return out


def per_topic(seen: dict[str, dict[str, int]], topic: str) -> dict[str, list[int]]:
    return {d: sorted(int(p.rsplit("-", 1)[1]) for p in parts if p.rsplit("-", 1)[0] == topic)
            for d, parts in seen.items()}


def wait_placed(kt: KafkaTools, broker, topics: dict[str, int]) -> dict[str, dict[str, int]]:
    """kafka-log-dirs until every partition of `topics` is in some dir (Kafka creates the logs
    when the broker applies the new metadata, a moment after the admin call returned)."""
    deadline = time.time() + 30
    while True:
        seen = describe(kt, broker)
        placed = {p for parts in seen.values() for p in parts}
        if all(f"{t}-{p}" in placed for t, n in topics.items() for p in range(n)) or time.time() > deadline:
            return seen
        time.sleep(0.5)


def check_spread(seen: dict[str, dict[str, int]], dirs: list[Path], topics: dict[str, int]) -> None:
    """Every partition of `topics` in exactly one dir, on disk where reported; all partitions
    (internal topics included) spread over the dirs at most one apart (the fewest-first rule
    keeps that whatever order the partitions of one request are created in)."""
    assert sorted(seen) == sorted(str(d) for d in dirs), f"log dirs reported: {sorted(seen)}"
    for topic, n in topics.items():
        spread = per_topic(seen, topic)
        assert sorted(p for ps in spread.values() for p in ps) == list(range(n)), f"{topic}: {spread}"
    totals = [len(seen[str(d)]) for d in dirs]
    assert max(totals) - min(totals) <= 1, f"all partitions not spread evenly: {totals} {seen}"
    for d in dirs:
        for p in seen[str(d)]:
            assert (d / p).is_dir(), f"{p} reported in {d} but not there"
            assert not any((o / p).exists() for o in dirs if o != d), f"{p} also in another dir"


def counts(seen: dict[str, dict[str, int]], dirs: list[Path], topic: str) -> list[int]:
    spread = per_topic(seen, topic)
    return [len(spread[str(d)]) for d in dirs]


def produce_all(bootstrap: str, topic: str, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failed = []
    for p in range(partitions):
        for i in range(RECORDS_PER_PARTITION):
            producer.produce(topic, value=f"{topic}/{p}/{i}".encode(), partition=p,
                             on_delivery=lambda err, _m: err and failed.append(err))
            producer.poll(0)
    assert producer.flush(60) == 0, "undelivered records"
    assert not failed, failed[:5]


def read_back(bootstrap: str, topic: str, partitions: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"jbod-{uid()}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got = collections.defaultdict(list)
        done: set[int] = set()
        deadline = time.time() + 90
        while len(done) < partitions and time.time() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    if len(got[msg.partition()]) >= RECORDS_PER_PARTITION:
                        done.add(msg.partition())
                    continue
                raise AssertionError(f"consume error: {msg.error()}")
            got[msg.partition()].append((msg.offset(), msg.value().decode()))
        for p in range(partitions):
            want = [(i, f"{topic}/{p}/{i}") for i in range(RECORDS_PER_PARTITION)]
            assert got[p] == want, f"{topic}-{p}: read {len(got[p])} records, first differences " \
                                   f"{[x for x in zip(got[p], want) if x[0] != x[1]][:3]}"
    finally:
        consumer.close()


def test_partitions_spread_over_three_log_dirs_and_survive_restarts(jbod, kafka_libs, tmp_path):
    broker, dirs = jbod
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    a, b = f"jbod-a-{uid()}", f"jbod-b-{uid()}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    # One request at a time, each placed before the next: within one request Kafka creates
    # the partitions of several topics in no set order, so only the totals stay even then.
    admin.create_topics([NewTopic(a, num_partitions=6, replication_factor=1)])[a].result(timeout=30)
    seen = wait_placed(kt, broker, {a: 6})
    check_spread(seen, dirs, {a: 6})
    assert counts(seen, dirs, a) == [2, 2, 2], f"6 partitions over 3 empty dirs: {per_topic(seen, a)}"
    admin.create_topics([NewTopic(b, num_partitions=4, replication_factor=1)])[b].result(timeout=30)
    seen = wait_placed(kt, broker, {a: 6, b: 4})
    check_spread(seen, dirs, {a: 6, b: 4})
    assert sorted(counts(seen, dirs, b)) == [1, 1, 2], f"4 partitions over 3 dirs: {per_topic(seen, b)}"
    # Grown: one new partition in each dir (the two emptier first, then the first in log.dirs).
    admin.create_partitions([NewPartitions(a, 9)])[a].result(timeout=30)
    topics = {a: 9, b: 4}
    seen = wait_placed(kt, broker, topics)
    check_spread(seen, dirs, topics)
    assert counts(seen, dirs, a) == [3, 3, 3], f"9 partitions over 3 dirs: {per_topic(seen, a)}"
    spread = {t: per_topic(seen, t) for t in topics}

    for t, n in topics.items():
        produce_all(broker.bootstrap, t, n)
        read_back(broker.bootstrap, t, n)
    sizes = describe(kt, broker)
    for t, n in topics.items():
        for d in dirs:
            for p in spread[t][str(d)]:
                assert sizes[str(d)][f"{t}-{p}"] > RECORDS_PER_PARTITION * 10, f"{t}-{p} size in {d}: {sizes}"

    for how in ("restart", "kill -9"):
        if how == "restart":
            broker.restart()
        else:
            broker.kill9()
            broker.start()
        for t, n in topics.items():
            read_back(broker.bootstrap, t, n)
        after = describe(kt, broker)
        assert {t: per_topic(after, t) for t in topics} == spread, f"partitions moved after a {how}"
        check_spread(after, dirs, topics)


def where(seen: dict[str, dict[str, int]], name: str) -> list[str]:
    return [d for d, parts in seen.items() if name in parts]


def reassign(kt: KafkaTools, broker, tmp_path: Path, topic: str, partition: int, log_dir: Path) -> None:
    """kafka-reassign-partitions --execute with log_dirs (the replica list unchanged: node 1)."""
    plan = {"version": 1, "partitions": [
        {"topic": topic, "partition": partition, "replicas": [1], "log_dirs": [str(log_dir)]}]}
    f = tmp_path / f"reassign-{uid()}.json"
    f.write_text(json.dumps(plan))
    r = kt.run(REASSIGN, "--bootstrap-server", broker.bootstrap, "--execute", "--reassignment-json-file", str(f))
    assert "Successfully started partition reassignment" in r.stdout or "Successfully started" in r.out, r.out
    return f


def verify_until_done(kt: KafkaTools, broker, plan: Path, name: str, deadline_s: float = 60) -> str:
    """kafka-reassign-partitions --verify until the replica move is reported complete."""
    deadline = time.time() + deadline_s
    while True:
        r = kt.run(REASSIGN, "--bootstrap-server", broker.bootstrap, "--verify",
                   "--reassignment-json-file", str(plan), check=False)
        if f"Reassignment of replica {name}-1 completed successfully." in r.stdout:
            return r.stdout
        assert time.time() < deadline, f"move of {name} not complete:\n{r.out}"
        time.sleep(0.5)


def read_partition(bootstrap: str, topic: str, partition: int) -> list[tuple[int, str]]:
    """Every record of one partition, (offset, value), up to its high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"jbod-{uid()}",
                         "enable.auto.commit": False})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        consumer.assign([TopicPartition(topic, partition, 0)])
        got = []
        deadline = time.time() + 90
        while (not got or got[-1][0] < high - 1) and time.time() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert not msg.error(), f"consume error: {msg.error()}"
            got.append((msg.offset(), msg.value().decode()))
        return got
    finally:
        consumer.close()


class LiveProducer:
    """Produces to one partition from a thread until stopped; keeps what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, partition: int):
        import threading
        self.acked: list[tuple[int, str]] = []
        self.errors: list = []
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                                   "message.timeout.ms": 60000})
        self._thread = threading.Thread(target=self._run, args=(topic, partition), daemon=True)
        self._thread.start()

    def _run(self, topic: str, partition: int) -> None:
        def done(err, msg):
            if err:
                self.errors.append(err)
            else:
                self.acked.append((msg.offset(), msg.value().decode()))
        i = 0
        while not self._stop.is_set():
            self._producer.produce(topic, value=f"live-{i}".encode(), partition=partition, on_delivery=done)
            self._producer.poll(0)
            i += 1
            if i % 50 == 0:
                time.sleep(0.01)
        self._producer.flush(60)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(90)


def fill(bootstrap: str, topic: str, partition: int, n: int, size: int) -> list[tuple[int, str]]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                         "batch.size": 1 << 20, "compression.type": "none"})
    acked = []
    pad = "x" * size
    for i in range(n):
        producer.produce(topic, value=f"fill-{i}-{pad}".encode(), partition=partition,
                         on_delivery=lambda err, m: acked.append((m.offset(), m.value().decode())) if not err else None)
        producer.poll(0)
    assert producer.flush(120) == 0
    assert len(acked) == n
    return acked


def test_reassign_partitions_moves_a_partition_between_log_dirs_while_it_is_written(jbod, kafka_libs, tmp_path):
    broker, dirs = jbod
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    topic = f"jbod-move-{uid()}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    # Small segments: the copy has sealed segments, indexes and producer snapshots to carry.
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1,
                                  config={"segment.bytes": "1048576"})])[topic].result(timeout=30)
    seen = wait_placed(kt, broker, {topic: 3})
    name = f"{topic}-0"
    [source] = where(seen, name)
    target = next(d for d in dirs if str(d) != source and name not in seen[str(d)])
    before = fill(broker.bootstrap, topic, 0, 8000, 400)  # ~3 segments

    live = LiveProducer(broker.bootstrap, topic, 0)
    time.sleep(1)
    plan = reassign(kt, broker, tmp_path, topic, 0, target)
    out = verify_until_done(kt, broker, plan, name)
    time.sleep(1)
    live.stop()
    assert not live.errors, live.errors[:5]
    assert len(live.acked) > 100, f"only {len(live.acked)} records produced during the move"
    acked = sorted(before + live.acked)
    assert "is still in progress" not in out

    after = describe(kt, broker)
    assert where(after, name) == [str(target)], f"{name} after the move: {after}"
    assert (target / name).is_dir() and not (Path(source) / name).exists()
    assert not list(target.glob(f"{name}.*-future")), "no future dir left"
    got = read_partition(broker.bootstrap, topic, 0)
    assert len(got) == len(acked) and got == acked, \
        f"read {len(got)} records, {len(acked)} acknowledged; first differences " \
        f"{[x for x in zip(got, acked) if x[0] != x[1]][:3]}"
    # Kept across a restart, and it moves back as well.
    broker.restart()
    assert where(describe(kt, broker), name) == [str(target)]
    assert read_partition(broker.bootstrap, topic, 0) == acked
    plan = reassign(kt, broker, tmp_path, topic, 0, Path(source))
    verify_until_done(kt, broker, plan, name)
    assert where(describe(kt, broker), name) == [source]
    assert read_partition(broker.bootstrap, topic, 0) == acked


def test_a_kill_9_during_a_move_keeps_the_partition_in_one_dir_with_every_record(jbod, kafka_libs, tmp_path):
    broker, dirs = jbod
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    topic = f"jbod-kill-{uid()}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1,
                                  config={"segment.bytes": "1048576"})])[topic].result(timeout=30)
    seen = wait_placed(kt, broker, {topic: 1})
    name = f"{topic}-0"
    [source] = where(seen, name)
    target = next(d for d in dirs if str(d) != source)
    acked = fill(broker.bootstrap, topic, 0, 40000, 1000)  # ~40 MB to copy

    plan = reassign(kt, broker, tmp_path, topic, 0, target)
    broker.kill9()
    broker.start()
    deadline = time.time() + 60
    while True:
        futures: list = []
        seen = describe(kt, broker, futures)
        on_disk = [str(d) for d in dirs if (d / name).is_dir()]
        if not futures or time.time() > deadline:
            break
        time.sleep(0.5)  # Kafka resumes the move after a restart: let it end
    assert len(where(seen, name)) == 1 and where(seen, name) == on_disk, f"{name}: {seen}, on disk {on_disk}"
    assert on_disk[0] in (source, str(target))
    got = read_partition(broker.bootstrap, topic, 0)
    assert len(got) == len(acked) and got == acked, f"read {len(got)} of {len(acked)} acknowledged records"
    # Asked again, the move completes.
    plan = reassign(kt, broker, tmp_path, topic, 0, target)
    verify_until_done(kt, broker, plan, name, deadline_s=120)
    assert where(describe(kt, broker), name) == [str(target)]
    assert not list(target.glob(f"{name}.*-future"))
    assert read_partition(broker.bootstrap, topic, 0) == acked


def test_a_full_log_dir_goes_offline_and_the_other_keeps_serving(start_broker, kafka_libs, tmp_path):
    d0, d1 = tmp_path / "disk0", tmp_path / "disk1"
    d1.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(d1)],
                             capture_output=True).returncode == 0
    if not mounted:
        pytest.skip("cannot mount a tmpfs here")
    broker = None
    try:
        dirs = [d0, d1]
        if TARGET == "kafka":
            format_for_kafka(kafka_libs, dirs)
        broker = start_broker({"log.dirs": f"{d0},{d1}"})
        kt = KafkaTools(kafka_libs, broker, tmp_path)
        topic = f"jbod-full-{uid()}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(timeout=30)
        seen = wait_placed(kt, broker, {topic: 2})
        [full] = [int(p.rsplit("-", 1)[1]) for p in seen[str(d1)]]
        ok = 1 - full
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0,
                             "message.timeout.ms": 8000, "batch.size": 200_000})
        errors = []
        for i in range(60):
            producer.produce(topic, value=b"x" * 100_000, partition=full,
                             on_delivery=lambda err, _m: err and errors.append(err))
            producer.flush(10)
            if errors:
                break
        assert errors, "a 2 MiB directory took 6 MB"
        deadline = time.time() + 30
        while True:
            md = admin.list_topics(topic, timeout=10).topics[topic].partitions
            state = {p: (m.leader, m.error.code() if m.error else 0) for p, m in md.items()}
            if state[full] == (-1, KafkaError.LEADER_NOT_AVAILABLE) or time.time() > deadline:
                break
            time.sleep(0.5)
        assert state == {full: (-1, KafkaError.LEADER_NOT_AVAILABLE), ok: (1, 0)}, state
        # Offline: even a small record is refused; the other dir serves.
        delivered = {}
        for p, value in ((full, "small"), (ok, "fine")):
            producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "message.timeout.ms": 8000})
            producer.produce(topic, value=value.encode(), partition=p,
                             on_delivery=lambda err, _m, v=value: delivered.__setitem__(v, err))
            producer.flush(20)
        assert delivered["small"] is not None and delivered["fine"] is None, delivered
        r = kt.run(LOG_DIRS, "--bootstrap-server", broker.bootstrap, "--describe", "--broker-list", "1")
        doc = next(json.loads(l) for l in r.stdout.splitlines() if l.startswith("{"))
        errs = {ld["logDir"]: ld["error"] for ld in doc["brokers"][0]["logDirs"]}
        assert errs[str(d0)] is None and errs[str(d1)] and "KafkaStorage" in errs[str(d1)], errs
        read_ok = read_partition(broker.bootstrap, topic, ok)
        assert [v for _, v in read_ok] == ["fine"], read_ok
    finally:
        if broker is not None:
            broker.kill9()
        subprocess.run(["umount", "-l", str(d1)])


def partition_states(admin, topic: str, want: dict, timeout: float = 30) -> dict:
    """Metadata's (leader, error) per partition, polled until it equals `want` or time is up."""
    deadline = time.time() + timeout
    while True:
        md = admin.list_topics(topic, timeout=10).topics[topic].partitions
        state = {p: (m.leader, m.error.code() if m.error else 0) for p, m in md.items()}
        if state == want or time.time() > deadline:
            return state
        time.sleep(0.5)


def test_a_log_dir_failed_at_start_is_offline_and_the_others_serve(start_broker, kafka_libs, tmp_path):
    """A broker restarted while one of its two log dirs cannot be opened (its path is now a plain
    file: a disk that did not mount) starts anyway: that dir's partition has no leader
    (LEADER_NOT_AVAILABLE) and refuses records, `kafka-log-dirs` reports the dir with an error,
    the other dir serves. Once the dir is back and the broker restarted, both partitions serve
    with every record they had."""
    d0, d1 = tmp_path / "disk0", tmp_path / "disk1"
    dirs = [d0, d1]
    if TARGET == "kafka":
        format_for_kafka(kafka_libs, dirs)
    broker = start_broker({"log.dirs": f"{d0},{d1}"})
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    topic = f"jbod-gone-{uid()}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(timeout=30)
    seen = wait_placed(kt, broker, {topic: 2})
    [lost] = [int(p.rsplit("-", 1)[1]) for p in seen[str(d1)]]
    ok = 1 - lost
    for p in (0, 1):
        produce_one(broker.bootstrap, topic, p, f"before-{p}")
    broker.stop()

    away = tmp_path / "disk1-away"
    d1.rename(away)
    d1.write_text("not a directory\n")
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    state = partition_states(admin, topic, {lost: (-1, KafkaError.LEADER_NOT_AVAILABLE), ok: (1, 0)})
    assert state == {lost: (-1, KafkaError.LEADER_NOT_AVAILABLE), ok: (1, 0)}, state
    assert produce_one(broker.bootstrap, topic, lost, "refused") is not None, "a record went to an offline dir"
    assert produce_one(broker.bootstrap, topic, ok, "served") is None
    r = kt.run(LOG_DIRS, "--bootstrap-server", broker.bootstrap, "--describe", "--broker-list", "1")
    doc = next(json.loads(l) for l in r.stdout.splitlines() if l.startswith("{"))
    errs = {ld["logDir"]: ld["error"] for ld in doc["brokers"][0]["logDirs"]}
    assert errs.get(str(d0), "missing") is None and errs.get(str(d1)), errs
    broker.stop()

    d1.unlink()
    away.rename(d1)
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    state = partition_states(admin, topic, {0: (1, 0), 1: (1, 0)})
    assert state == {0: (1, 0), 1: (1, 0)}, state
    assert [v for _, v in read_partition(broker.bootstrap, topic, lost)] == [f"before-{lost}"]
    assert [v for _, v in read_partition(broker.bootstrap, topic, ok)] == [f"before-{ok}", "served"]


def produce_one(bootstrap: str, topic: str, partition: int, value: str):
    """Produces one record; returns the delivery error (None when acknowledged)."""
    result = {}
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 8000})
    producer.produce(topic, value=value.encode(), partition=partition,
                     on_delivery=lambda err, _m: result.__setitem__("err", err))
    producer.flush(20)
    assert "err" in result, f"no delivery report for {value!r}"
    return result["err"]
