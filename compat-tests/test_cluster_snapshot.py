"""A broker that joins a KRaft cluster from the controller's snapshot: its Fetch of
`__cluster_metadata` is answered with a `snapshotId`, it downloads the snapshot with FetchSnapshot,
stores it as Kafka does (`__cluster_metadata-0/<20-digit end offset>-<10-digit epoch>.checkpoint` in
its metadata dir), builds its metadata image from it and fetches the log from the snapshot's end
offset. Brokers of the target kind (Ketch, or Kafka 4.1 with KETCH_COMPAT_TARGET=kafka) under an
Apache Kafka 4.1 controller-only node (cluster.KafkaController) that logs the FetchSnapshot requests
it completes (kafka.request.logger at DEBUG, filtered to them).

When Kafka 4.1's leader answers a Fetch with a snapshot id (raft's KafkaRaftClient
`tryCompleteFetchRequest` and `ReplicatedLog.validateOffsetAndEpoch`, read from the 4.1 jars):

- a Fetch at offset 0 whenever the leader has a snapshot other than the bootstrap one (0-0),
  whatever its log start offset: a new broker joins from the latest snapshot;
- a Fetch below the log start offset (or at it with another epoch): a broker that was down while
  the log start moved past its log end.

The controller writes a snapshot every 10 s (`metadata.log.max.snapshot.interval.ms=10000`, checked
at each replayed batch: its NoOpRecord every 500 ms), so broker 1, started first, normally replicates
the log from offset 0 (`metadata.log.max.record.bytes.between.snapshots=1` would give a snapshot per
NoOpRecord, and broker 1 too would join from one). The log start moves only when the controller's
log cleaner (`KafkaMetadataLog.maybeClean`) runs:
on a fixed 60 s timer from the raft client's start (RaftMetadataLogCleanerManager, not
configurable); with `metadata.max.retention.bytes=1` (log + snapshots always above it) that first
run marks every snapshot but the newest for deletion (`.checkpoint.deleted`) and moves the log
start to the newest, logging `Incremented log start offset to N due to snapshot generated`.

- `joins`: broker 1 registers; topic `before` (3 partitions, RF 1) gets 30 records and, by
  IncrementalAlterConfigs, `retention.ms` and `max.message.bytes`. Once the controller has a
  snapshot written after that, a NEW broker 2 (empty data dir) starts: it registers and is
  unfenced; the controller answered its FetchSnapshot; its metadata dir holds that `.checkpoint`,
  from which Kafka's DumpLogSegments decodes the features, broker 1's registration, `before`, its
  partitions and configs. Through broker 2: `before`'s configs and records; topic `after` (replicas
  [2, 1] and [1, 2]) created, ISR [1, 2], acks=all writes read back, broker 2 leading partition 0.
  Broker 2 restarted (SIGTERM, start) reopens its snapshot and the log after it (no new
  FetchSnapshot) and is back in the ISR. Broker 1 killed (-9): broker 2 alone answers from its own
  image (Metadata, DescribeConfigs of `before`), leads both `after` partitions, takes acks=all
  writes and serves every record. 35 to 55 s (most of it Kafka JVMs starting).
- `behind`: brokers 1 and 2 run (broker 2 may already have joined from the first snapshot); topics
  `kept` (replicas [1, 2]) and `gone`; broker 2 stops
  (SIGTERM); meanwhile `gone` is deleted, `kept`'s `retention.ms` changed, `later` created and
  `kept` written to; once the controller's log start (its first clean, 60 s after its start) is past
  a snapshot holding all that, broker 2 starts again: its Fetch at its old log end is below the log
  start, the controller answers its FetchSnapshot, broker 2 replaces its image (and log) with the
  snapshot: with broker 1 killed, broker 2 alone shows no `gone`, `later`, the new `retention.ms`,
  leads `kept` and serves all its records, those written while it was down included. 75 to 80 s,
  most of it waiting for the controller's first clean (no setting makes it sooner).
"""

from __future__ import annotations

import json
import re
import shutil
import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                  NewTopic)

from cluster import KafkaController, KetchController, broker_under, create_topic, read_all, wait_for, wait_for_partitions
from conftest import TARGET
from kafka_tools import KafkaTools
from test_kafka_controller_leader import produce as produce_values
from test_metadata_log import payloads

pytestmark = pytest.mark.timeout(300)

# A snapshot every 10 s: broker 1 (started first) replicates the log from 0, later brokers join
# from a snapshot.
SNAPSHOT_EVERY_10S = {"metadata.log.max.snapshot.interval.ms": "10000"}
# ... and the log start moved to the newest snapshot at each run of the cleaner (every 60 s).
RETENTION_1_BYTE = {**SNAPSHOT_EVERY_10S, "metadata.max.retention.bytes": "1"}
# The cleaner's first run is 60 s after the controller's raft client starts: a deadline with margin.
LOG_START_DEADLINE = 120

LOG_START_MOVED = re.compile(
    rb"\[UnifiedLog partition=__cluster_metadata-0, [^\]]*\] Incremented log start offset to (\d+) "
    rb"due to snapshot generated")
CHECKPOINT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
REQUEST = re.compile(r"Completed request:(\{.*\}) \(kafka\.request\.logger\)\s*$")
TOPIC_CONFIGS = {"retention.ms": "5400000", "max.message.bytes": "300000"}
DUMP_LOG = "kafka.tools.DumpLogSegments"


class SnapshottingController(KafkaController):
    """A Kafka 4.1 controller that logs the FetchSnapshot requests it completes (kafka.request.logger
    at DEBUG, every other request filtered out)."""

    def _log4j_config(self):
        cfg = self.workdir / "log4j2.properties"
        cfg.write_text((self.libs / "log4j2.properties").read_text() + "\n".join([
            "logger.request.name = kafka.request.logger",
            "logger.request.level = DEBUG",
            "logger.request.filter.snapshots.type = RegexFilter",
            "logger.request.filter.snapshots.regex = .*\"requestApiKeyName\":\"FETCH_SNAPSHOT\".*",
            "logger.request.filter.snapshots.onMatch = ACCEPT",
            "logger.request.filter.snapshots.onMismatch = DENY",
            ""]))
        return cfg

    def log_start(self) -> int | None:
        """The metadata log's start offset from the controller's last `Incremented log start
        offset` line (None: still 0)."""
        found = LOG_START_MOVED.findall(self.log_path.read_bytes())
        return int(found[-1]) if found else None

    def fetch_snapshots(self, replica: int) -> list[tuple[int, int, int]]:
        """The FetchSnapshot requests from broker `replica` the controller completed without error:
        [(version, snapshot end offset, snapshot epoch)] of their first fetch (position 0)."""
        out = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            m = REQUEST.search(line)
            if not m:
                continue
            d = json.loads(m.group(1))
            req, resp = d.get("request", {}), d.get("response", {})
            if req.get("replicaId") != replica or resp.get("errorCode"):
                continue
            errors = [p.get("errorCode") for t in resp.get("topics", []) for p in t.get("partitions", [])]
            for t in req.get("topics", []):
                for p in t.get("partitions", []):
                    if p.get("position") == 0 and not any(errors):
                        out.append((d["requestHeader"]["requestApiVersion"], p["snapshotId"]["endOffset"],
                                    p["snapshotId"]["epoch"]))
        return out

    def snapshot_after(self, since: float, timeout: float = 30) -> int:
        """The end offset of the controller's first snapshot written at least 1 s after wall time
        `since`: it holds every change committed before `since` (the controller's image has it
        within milliseconds of the commit, and a snapshot is written from that image)."""
        def newer():
            found = []
            for o, e, _ in checkpoints(self.data_dir):
                try:
                    if checkpoint_path(self.data_dir, o, e).stat().st_mtime >= since + 1:
                        found.append(o)
                except OSError:  # renamed to .checkpoint.deleted meanwhile
                    pass
            return min(found) if found else None
        return wait_for(newer, "a controller snapshot after the changes", timeout=timeout)


def checkpoints(data_dir) -> list[tuple[int, int, int]]:
    """[(end offset, epoch, size)] of the `.checkpoint` snapshots in `data_dir`'s
    `__cluster_metadata-0` (those marked for deletion, `.checkpoint.deleted`, left out)."""
    d = data_dir / "__cluster_metadata-0"
    if not d.is_dir():
        return []
    found = []
    for f in d.iterdir():
        if m := CHECKPOINT.match(f.name):
            try:
                found.append((int(m.group(1)), int(m.group(2)), f.stat().st_size))
            except FileNotFoundError:  # cleaned by the node since the listing (it snapshots all along)
                continue
    return sorted(found)


def checkpoint_path(data_dir, end_offset: int, epoch: int):
    return data_dir / "__cluster_metadata-0" / f"{end_offset:020d}-{epoch:010d}.checkpoint"


def registered(admin, ids: list[int]):
    """A check for wait_for: `admin`'s Metadata answer names exactly the brokers `ids`."""
    def check():
        try:
            return sorted(admin.list_topics(timeout=10).brokers) == ids
        except KafkaException:
            return False
    return check


def topic_configs(admin, topic: str) -> dict[str, tuple[str, int]]:
    """{name: (value, source)} of TOPIC_CONFIGS' names as DescribeConfigs answers them."""
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    got = admin.describe_configs([res], request_timeout=30)[res].result(timeout=60)
    return {k: (got[k].value, got[k].source) for k in TOPIC_CONFIGS if k in got}


def produce(servers: str, topic: str, values: list[bytes], partitions: int) -> list[tuple[int, int, bytes]]:
    """acks=all writes, `values` round-robin over the partitions: [(partition, offset, value)]."""
    acked, errors = produce_values(servers, topic, values, lambda i: i % partitions, acks="all",
                                   **{"message.timeout.ms": 60000})
    assert errors == [] and len(acked) == len(values), errors
    return acked


def assert_reads(servers: str, topic: str, acked: list, partitions: int) -> None:
    """Reading `topic` through `servers` gives exactly the acknowledged records at their offsets."""
    expected = {p: sorted((o, v) for q, o, v in acked if q == p) for p in range(partitions)}
    ends = {p: (rows[-1][0] + 1 if rows else 0) for p, rows in expected.items()}
    seen = read_all(servers, topic, ends, timeout=60)
    assert {p: sorted(rows) for p, rows in seen.items()} == expected


def alter_topic(admin, topic: str, configs: dict[str, str]) -> None:
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    admin.incremental_alter_configs([res])[res].result(timeout=60)


def decoded(kafka_libs, broker, tmp_path, path) -> dict[str, list[dict]]:
    """{record type: [record data]} of a snapshot file, decoded by Kafka's DumpLogSegments."""
    r = KafkaTools(kafka_libs, broker, tmp_path).run(DUMP_LOG, "--cluster-metadata-decoder", "--files", str(path),
                                                     timeout=90)
    by_type: dict[str, list[dict]] = {}
    for rec in payloads(r.stdout):
        by_type.setdefault(rec["type"], []).append(rec["data"])
    assert by_type, f"DumpLogSegments decoded no record from {path}:\n{r.out[-2000:]}"
    return by_type


def started(broker, ids: list[int], what: str):
    """Starts `broker` and waits until the Metadata answer of an AdminClient bootstrapped to it
    names exactly the brokers `ids`; returns that client."""
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    wait_for(registered(admin, ids), what, timeout=60)
    return admin


@pytest.fixture
def nodes(request, tmp_path):
    """factory(controller settings) -> (controller, broker 1, broker 2), none started; at the end
    the brokers are killed (-9) and the controller stopped."""
    made = []

    def factory(settings):
        ctl = SnapshottingController(tmp_path / "controller", settings)
        b1 = broker_under(ctl, tmp_path / "broker1", 1, TARGET)
        b2 = broker_under(ctl, tmp_path / "broker2", 2, TARGET)
        request.node._compat_brokers = [ctl, b1, b2]  # their logs go into a failure's report
        made.append((ctl, b1, b2))
        return ctl, b1, b2

    yield factory
    for ctl, b1, b2 in made:
        try:
            b2.kill9()
            b1.kill9()
        finally:
            ctl.close()


def test_new_broker_joins_from_the_controllers_snapshot(nodes, kafka_libs, tmp_path):
    """`joins` (module docstring)."""
    ctl, b1, b2 = nodes(SNAPSHOT_EVERY_10S)
    t0 = time.monotonic()
    ctl.start()
    admin1 = started(b1, [1], "broker 1 registered and unfenced")
    print(f"broker 1 in the Metadata {time.monotonic() - t0:.1f} s after the controller's start; "
          f"FetchSnapshot requests from broker 1: {ctl.fetch_snapshots(1)}")

    create_topic(admin1, NewTopic("before", num_partitions=3, replication_factor=1),
                 KafkaError.INVALID_REPLICATION_FACTOR)
    wait_for_partitions(admin1, "before", leaders=[1], count=3, what="before's 3 partitions led by broker 1")
    before = produce(b1.bootstrap, "before", [f"b{i}".encode() for i in range(30)], 3)
    alter_topic(admin1, "before", TOPIC_CONFIGS)
    setup_end = ctl.snapshot_after(time.time())
    print(f"controller snapshot {setup_end} holds the setup, {time.monotonic() - t0:.1f} s after its start")

    # A new broker, empty data dir: its Fetch at offset 0 is answered with the latest snapshot's id.
    admin2 = started(b2, [1, 2], "broker 2 registered and unfenced")
    joined = time.monotonic() - t0
    fetched = ctl.fetch_snapshots(2)
    snaps = checkpoints(b2.data_dir)
    print(f"broker 2 in the Metadata {joined:.1f} s after the controller's start; FetchSnapshot requests "
          f"(version, end offset, epoch) from broker 2: {fetched}; its snapshots (end offset, epoch, size): {snaps}; "
          f"the controller's: {checkpoints(ctl.data_dir)}")
    assert fetched and fetched[0][1] >= setup_end, f"broker 2 fetched no snapshot at or past {setup_end}: {fetched}"
    assert snaps and all(o > 0 for o, _, _ in snaps), snaps
    assert any((o, e) == (fo, fe) for o, e, _ in snaps for _, fo, fe in fetched), (snaps, fetched)

    # What broker 2 stored is Kafka's snapshot: DumpLogSegments decodes the cluster from it.
    by_type = decoded(kafka_libs, b2, tmp_path, checkpoint_path(b2.data_dir, *snaps[-1][:2]))
    assert any(f["name"] == "metadata.version" for f in by_type.get("FEATURE_LEVEL_RECORD", [])), sorted(by_type)
    assert 1 in [b["brokerId"] for b in by_type.get("REGISTER_BROKER_RECORD", [])], by_type.get(
        "REGISTER_BROKER_RECORD")
    topic_ids = {t["name"]: t["topicId"] for t in by_type.get("TOPIC_RECORD", [])}
    assert "before" in topic_ids, sorted(by_type)
    assert sorted(p["partitionId"] for p in by_type["PARTITION_RECORD"] if p["topicId"] == topic_ids["before"]) \
        == [0, 1, 2]
    assert {c["name"]: c["value"] for c in by_type.get("CONFIG_RECORD", [])
            if c["resourceName"] == "before"} == TOPIC_CONFIGS

    # Through broker 2: the topic, its configs and records from before the snapshot.
    wait_for_partitions(admin2, "before", leaders=[1], count=3, what="before as broker 2 knows it")
    assert topic_configs(admin2, "before") == {k: (v, ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
                                               for k, v in TOPIC_CONFIGS.items()}
    assert_reads(b2.bootstrap, "before", before, 3)

    # A topic on both brokers, created through broker 2; broker 2 leads partition 0.
    create_topic(admin2, NewTopic("after", num_partitions=2, replication_factor=-1,
                                  replica_assignment=[[2, 1], [1, 2]]), KafkaError.INVALID_REPLICA_ASSIGNMENT)
    states = wait_for_partitions(admin2, "after", isr=[1, 2], count=2, what="after with ISR [1, 2]")[0]
    assert states[0][0] == 2 and states[1][0] == 1, states
    after = produce(b2.bootstrap, "after", [f"a{i}".encode() for i in range(40)], 2)
    assert_reads(b2.bootstrap, "after", after, 2)

    # Broker 2 restarted: it reopens its snapshot and the log after it, no new FetchSnapshot.
    b2.stop()
    admin2 = started(b2, [1, 2], "broker 2 back after its restart")
    wait_for_partitions(admin2, "after", isr=[1, 2], count=2, what="broker 2 back in after's ISR", timeout=60)
    assert ctl.fetch_snapshots(2) == fetched, "broker 2 fetched a snapshot again after its restart"
    assert any(o >= snaps[-1][0] for o, _, _ in checkpoints(b2.data_dir)), "broker 2's snapshot gone after its restart"
    after += produce(b2.bootstrap, "after", [f"c{i}".encode() for i in range(20)], 2)

    # Broker 1 killed: broker 2 alone answers from its own metadata image, leads and serves.
    b1.kill9()
    wait_for_partitions(admin2, "after", leaders=[2], count=2, brokers=[2],
                        what="broker 2 the only broker, leading both partitions of after", timeout=60)
    md = admin2.list_topics("before", timeout=10).topics["before"]
    assert sorted(md.partitions) == [0, 1, 2], md
    assert {k: v for k, (v, _) in topic_configs(admin2, "before").items()} == TOPIC_CONFIGS
    after += produce(b2.bootstrap, "after", [f"d{i}".encode() for i in range(20)], 2)
    assert_reads(b2.bootstrap, "after", after, 2)
    print(f"done {time.monotonic() - t0:.1f} s after the controller's start")


def test_restarted_broker_behind_the_log_start_loads_the_new_snapshot(nodes, kafka_libs, tmp_path):
    """`behind` (module docstring)."""
    ctl, b1, b2 = nodes(RETENTION_1_BYTE)
    t0 = time.monotonic()
    ctl.start()
    started(b1, [1], "broker 1 registered and unfenced")
    admin = started(b2, [1, 2], "broker 2 registered and unfenced")
    create_topic(admin, NewTopic("kept", num_partitions=1, replication_factor=-1, replica_assignment=[[1, 2]]),
                 KafkaError.INVALID_REPLICA_ASSIGNMENT)
    create_topic(admin, NewTopic("gone", num_partitions=1, replication_factor=2), KafkaError.INVALID_REPLICATION_FACTOR)
    wait_for_partitions(admin, "kept", isr=[1, 2], count=1, what="kept with ISR [1, 2]")
    kept = produce(b1.bootstrap, "kept", [f"k{i}".encode() for i in range(20)], 1)
    alter_topic(admin, "kept", {"retention.ms": "3600000"})
    before_stop = ctl.fetch_snapshots(2)

    # Broker 2 down while the cluster changes.
    b2.stop()
    admin1 = AdminClient({"bootstrap.servers": b1.bootstrap})
    wait_for_partitions(admin1, "kept", isr=[1], brokers=[1], what="kept's ISR without broker 2")
    admin1.delete_topics(["gone"])["gone"].result(timeout=60)
    alter_topic(admin1, "kept", {"retention.ms": "7200000"})
    create_topic(admin1, NewTopic("later", num_partitions=2, replication_factor=1),
                 KafkaError.INVALID_REPLICATION_FACTOR)
    kept += produce(b1.bootstrap, "kept", [f"m{i}".encode() for i in range(20)], 1)
    changes_end = ctl.snapshot_after(time.time())
    print(f"controller snapshot {changes_end} holds the changes, {time.monotonic() - t0:.1f} s after its start")

    # The controller's cleaner (60 s after its start) moves the log start past broker 2's log end.
    log_start = wait_for(lambda: (n := ctl.log_start()) is not None and n >= changes_end and n,
                         f"the controller's metadata log start at or past {changes_end}",
                         timeout=max(1.0, LOG_START_DEADLINE - (time.monotonic() - t0)), interval=1)
    deleted = sorted(f.name for f in (ctl.data_dir / "__cluster_metadata-0").glob("*.checkpoint.deleted"))
    print(f"controller log start moved to {log_start} {time.monotonic() - t0:.1f} s after its start; its "
          f"snapshots: {checkpoints(ctl.data_dir)}, marked for deletion: {deleted}")

    admin2 = started(b2, [1, 2], "broker 2 back, registered and unfenced")
    fetched = ctl.fetch_snapshots(2)[len(before_stop):]
    snaps = checkpoints(b2.data_dir)
    print(f"broker 2 back {time.monotonic() - t0:.1f} s after the controller's start; FetchSnapshot requests "
          f"(version, end offset, epoch) from broker 2 after its restart: {fetched}; its snapshots: {snaps}")
    assert fetched and fetched[0][1] >= log_start, f"no FetchSnapshot at or past the log start {log_start}: {fetched}"
    assert any((o, e) == (fo, fe) for o, e, _ in snaps for _, fo, fe in fetched), (snaps, fetched)
    wait_for_partitions(admin2, "kept", isr=[1, 2], count=1, what="broker 2 back in kept's ISR", timeout=60)

    # Broker 1 killed: broker 2 alone answers from the image it built from the new snapshot.
    b1.kill9()
    wait_for_partitions(admin2, "kept", leaders=[2], count=1, brokers=[2],
                        what="broker 2 the only broker, leading kept", timeout=60)
    topics = admin2.list_topics(timeout=10).topics
    assert "gone" not in topics and "later" in topics and len(topics["later"].partitions) == 2, sorted(topics)
    assert topic_configs(admin2, "kept")["retention.ms"][0] == "7200000"
    kept += produce(b2.bootstrap, "kept", [f"n{i}".encode() for i in range(10)], 1)
    assert_reads(b2.bootstrap, "kept", kept, 1)
    print(f"done {time.monotonic() - t0:.1f} s after the controller's start")


def test_single_ketch_controller_snapshots_and_serves_its_snapshot(kafka_libs, tmp_path, request):
    """The only voter's snapshots (src/raft/single_snapshots.rs): a Ketch controller
    (`process.roles=controller`, the only voter of its quorum) with
    `metadata.log.max.record.bytes.between.snapshots=1` and `metadata.max.retention.bytes=0` writes a
    snapshot after every change and, from its second one on, moves its log start to the newest.
    Kafka's DumpLogSegments decodes its snapshot; a new broker of the target kind joining afterwards
    (its Fetch at 0 is below the log start) is pointed at the snapshot, downloads it with
    FetchSnapshot and sees every topic, config and record; the controller restarted opens from its
    snapshot and serves both brokers on."""
    ctl = KetchController(tmp_path / "controller", {"metadata.log.max.record.bytes.between.snapshots": "1",
                                                    "metadata.max.retention.bytes": "0"})
    b1 = broker_under(ctl, tmp_path / "broker1", 1, TARGET)
    b2 = broker_under(ctl, tmp_path / "broker2", 2, TARGET)
    request.node._compat_brokers = [ctl, b1, b2]
    try:
        ctl.start()
        admin1 = started(b1, [1], "broker 1 registered and unfenced")
        create_topic(admin1, NewTopic("before", num_partitions=2, replication_factor=1),
                     KafkaError.INVALID_REPLICATION_FACTOR)
        wait_for_partitions(admin1, "before", leaders=[1], count=2, what="before's partitions led by broker 1")
        before = produce(b1.bootstrap, "before", [f"b{i}".encode() for i in range(20)], 2)
        alter_topic(admin1, "before", TOPIC_CONFIGS)
        # One snapshot left: each new one takes the log start and the older one goes (a new one comes
        # with every change, the controller's periodic NoOpRecord included: copied before decoding).
        copies = tmp_path / "copied"

        def newest_alone():
            snaps = checkpoints(ctl.data_dir)
            if len(snaps) != 1:
                return None
            path = checkpoint_path(ctl.data_dir, *snaps[0][:2])
            copy = copies / path.parent.name / path.name  # Kafka's names, which DumpLogSegments parses
            copy.parent.mkdir(parents=True, exist_ok=True)
            try:
                shutil.copyfile(path, copy)
            except FileNotFoundError:
                return None
            return copy

        copy = wait_for(newest_alone, "the controller's newest snapshot, the older ones cleaned", timeout=10)
        by_type = decoded(kafka_libs, b1, tmp_path, copy)
        assert "before" in [t["name"] for t in by_type.get("TOPIC_RECORD", [])], sorted(by_type)
        assert {c["name"]: c["value"] for c in by_type.get("CONFIG_RECORD", [])
                if c["resourceName"] == "before"} == TOPIC_CONFIGS

        # A new broker: pointed at the snapshot, which it downloads and keeps.
        admin2 = started(b2, [1, 2], "broker 2 registered and unfenced")
        got = checkpoints(b2.data_dir)
        print(f"broker 2's snapshots: {got}; the controller's: {checkpoints(ctl.data_dir)}")
        assert got and all(o > 0 for o, _, _ in got), f"broker 2 joined without the controller's snapshot: {got}"
        wait_for_partitions(admin2, "before", leaders=[1], count=2, what="before as broker 2 knows it")
        assert topic_configs(admin2, "before") == {k: (v, ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
                                                   for k, v in TOPIC_CONFIGS.items()}
        assert_reads(b2.bootstrap, "before", before, 2)

        # The controller restarted: it opens from its snapshot; both brokers go on.
        ctl.stop()
        ctl.start()
        create_topic(admin2, NewTopic("after", num_partitions=2, replication_factor=-1,
                                      replica_assignment=[[2, 1], [1, 2]]), KafkaError.INVALID_REPLICA_ASSIGNMENT,
                     timeout=60)
        wait_for_partitions(admin1, "after", isr=[1, 2], count=2, what="after with ISR [1, 2] on broker 1")
        wait_for_partitions(admin2, "after", isr=[1, 2], count=2, what="after with ISR [1, 2] on broker 2")
        after = produce(b2.bootstrap, "after", [f"a{i}".encode() for i in range(20)], 2)
        assert_reads(b1.bootstrap, "after", after, 2)
        assert {k: v for k, (v, _) in topic_configs(admin1, "before").items()} == TOPIC_CONFIGS
    finally:
        for b in (b2, b1):
            b.kill9()
        ctl.close()
