"""Snapshots of a controller quorum's metadata log (issue 15, KIP-630), with Ketch voters that
snapshot at every commit and keep no log below their newest snapshot
(`metadata.log.max.record.bytes.between.snapshots=1`, `metadata.max.retention.bytes=1`, Kafka's
names and meanings):

- Three Ketch controllers: the leader's snapshots are Kafka's files (Kafka 4.1's DumpLogSegments
  decodes the topics from a `.checkpoint`); a voter killed (-9) while topics are created comes
  back behind the leader's log start, downloads the leader's snapshot with FetchSnapshot and
  catches up (kafka-metadata-quorum: MaxFollowerLag 0); a broker stopped meanwhile does the same.
  Leadership is then moved to the voter that caught up from a snapshot: its image holds every
  topic (CreateTopics of an old name is TOPIC_ALREADY_EXISTS) and it creates new ones. All three
  killed (-9) and restarted reopen from their snapshots with the topics there.
- A mixed quorum (Kafka 4.1 controller 1, Ketch controllers 2 and 3, snapshotting every 2 s on
  Kafka's side): the Kafka voter, killed while a Ketch voter leads and cleans its log, comes back
  and loads the Ketch leader's snapshot (Kafka's own snapshot reader validates Ketch's files and
  FetchSnapshot answers), then leads with that state; a Ketch voter whose metadata log was lost
  rejoins under the Kafka leader from Kafka's snapshot.

Ketch only (KETCH_COMPAT_TARGET=kafka skips).
"""

from __future__ import annotations

import random
import shutil
import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import bootstrap, broker_under, create_topic, new_cluster_id, wait_for, wait_for_isr
from conftest import TARGET, free_port
from kafka_tools import KafkaTools
from test_cluster_snapshot import checkpoints, decoded
from test_controller_quorum import VOTERS, KafkaVoter, Quorum, Voter, ids, leader_of, quorum_status, running
from test_cluster_under_kafka_controller import assert_log_is, produce_all

pytestmark = pytest.mark.skipif(TARGET != "ketch", reason="a quorum of Ketch controllers")

SNAPSHOT_EVERY_COMMIT = {
    "metadata.log.max.record.bytes.between.snapshots": "1",
    "metadata.max.retention.bytes": "1",
}


def log_start(node) -> int:
    """The metadata log's start offset on `node` (0 until it was cleaned)."""
    f = node.data_dir / "__cluster_metadata-0" / "log-start-offset"
    return int(f.read_text().split()[0]) if f.exists() else 0


def caught_up(kt, voters):
    def check():
        status = quorum_status(kt, voters)
        ok = status.get("MaxFollowerLag") == "0" and ids(status.get("CurrentVoters", "[]")) == set(VOTERS)
        return status if ok and int(status.get("LeaderId", "-1")) in VOTERS else None
    return check


def assert_exists(admin, topic: str) -> None:
    """CreateTopics of `topic` is refused as existing: the active controller's image holds it."""
    new = NewTopic(topic, num_partitions=1, replication_factor=1)
    with pytest.raises(KafkaException) as e:
        admin.create_topics([new])[topic].result(timeout=60)
    assert e.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS, e.value


def lead(kt, voters: dict, wanted: int, rounds: int = 12) -> None:
    """Kills (-9) and restarts whoever else leads until `wanted` does. (Which voter wins an
    election is not random enough to leave to chance: the follower that notices the leader gone
    last tends to win, the first one's pre-vote being refused while the other still hears from
    the leader; restarts after a random pause shift those phases.)"""
    for _ in range(rounds):
        leader, _ = leader_of(kt, voters.values())
        if leader == wanted:
            return
        voters[leader].kill9()
        leader_of(kt, [v for n, v in voters.items() if n != leader], not_=leader)
        time.sleep(random.uniform(0, 1.5))
        voters[leader].start()
        wait_for(caught_up(kt, voters.values()), "the restarted voter caught up", timeout=90)
    pytest.fail(f"voter {wanted} never led in {rounds} rounds")


def first_topic(brokers, kafka_libs, tmp_path):
    """Kafka's tools, the brokers' bootstrap, an admin client, and topic `first` (RF 2 on
    brokers 11 and 12) with 100 records written: the records acknowledged."""
    kt = KafkaTools(kafka_libs, brokers[11], tmp_path)
    servers = bootstrap(brokers.values())
    admin = AdminClient({"bootstrap.servers": servers})
    new = NewTopic("first", num_partitions=2, replication_factor=2)
    create_topic(admin, new, KafkaError.INVALID_REPLICATION_FACTOR, "first created", timeout=60)
    wait_for_isr(admin, "first", [11, 12], count=2, timeout=60)
    return kt, servers, admin, produce_all(servers, "first", [b"a%d" % i for i in range(100)], 2)


def snapshotting(voter_kind, *args):
    v = voter_kind(*args)
    v.overrides.update(SNAPSHOT_EVERY_COMMIT)
    return v


@pytest.fixture
def snapshot_quorum(tmp_path):
    ports = {n: free_port() for n in VOTERS}
    cluster_id = new_cluster_id()
    voters = {}
    for n in VOTERS:
        (tmp_path / f"c{n}").mkdir()
        voters[n] = snapshotting(Voter, tmp_path / f"c{n}", n, ports, cluster_id)
    quorum = Quorum(voters)
    brokers = {n: broker_under(quorum, tmp_path / f"b{n}", n, "ketch") for n in (11, 12)}
    with running([*voters.values(), *brokers.values()]):
        yield voters, brokers


def test_ketch_voters_snapshot_clean_and_catch_up_from_the_leaders_snapshot(snapshot_quorum, kafka_libs, tmp_path):
    voters, brokers = snapshot_quorum
    kt, servers, admin, acked = first_topic(brokers, kafka_libs, tmp_path)
    leader, _ = leader_of(kt, voters.values())

    # A follower and a broker go away while the metadata moves on and the leader cleans its log.
    # (The lowest id of the others: with logs equal, Ketch voters let the lower id campaign
    # first, so it is the one `lead` can move leadership to.)
    behind = min(n for n in VOTERS if n != leader)
    voters[behind].kill9()
    brokers[12].stop()
    end_when_down = log_start(voters[leader])
    for i in range(5):
        admin.create_topics([NewTopic(f"s{i}", num_partitions=1, replication_factor=1)])[f"s{i}"].result(timeout=60)
    wait_for(lambda: log_start(voters[leader]) > end_when_down + 5, "the leader's log cleaned below a snapshot",
             timeout=30)
    # Kafka reads Ketch's snapshot files: the topics are in the newest. A copy of it: the leader
    # snapshots at every commit and deletes the snapshots below its log start.
    (tmp_path / "newest").mkdir()
    for _ in range(20):
        snaps = checkpoints(voters[leader].data_dir)
        assert snaps, "no snapshot on the leader"
        end, epoch, _ = snaps[-1]
        name = f"{end:020d}-{epoch:010d}.checkpoint"  # Kafka's tool reads the offset from the name
        path = tmp_path / "newest" / name
        try:
            shutil.copyfile(voters[leader].data_dir / "__cluster_metadata-0" / name, path)
            break
        except FileNotFoundError:
            continue
    by_type = decoded(kafka_libs, brokers[11], tmp_path, path)
    names = {t["name"] for t in by_type.get("TOPIC_RECORD", [])}
    assert {"first", "s0", "s4"} <= names, names
    assert by_type.get("FEATURE_LEVEL_RECORD") and by_type.get("PARTITION_RECORD"), sorted(by_type)

    # Back, behind the leader's log start: it catches up from the leader's snapshot.
    voters[behind].start()
    brokers[12].start()
    wait_for(caught_up(kt, voters.values()), "the voter that was down caught up", timeout=90)
    assert "loaded from the leader's snapshot" in voters[behind].log_path.read_text()
    wait_for_isr(admin, "first", [11, 12], count=2, timeout=60)
    assert "metadata image loaded from the leader's snapshot" in brokers[12].log_path.read_text()

    # It leads with the snapshot's state.
    lead(kt, voters, behind)
    for topic in ("first", "s0", "s4"):
        assert_exists(admin, topic)
    new = NewTopic("second", num_partitions=2, replication_factor=2)
    create_topic(admin, new, KafkaError.INVALID_REPLICATION_FACTOR, "second created", timeout=60)
    wait_for_isr(admin, "second", [11, 12], count=2, timeout=60)
    acked_second = produce_all(servers, "second", [b"b%d" % i for i in range(100)], 2)

    # All killed at once: they reopen from their snapshots.
    for v in voters.values():
        v.kill9()
    assert all(log_start(v) > 0 for v in voters.values()), [log_start(v) for v in voters.values()]
    for v in voters.values():
        v.start()
    leader_of(kt, voters.values())
    for topic in ("first", "s0", "s4", "second"):
        assert_exists(admin, topic)
    acked += produce_all(servers, "first", [b"c%d" % i for i in range(100)], 2)
    assert_log_is(servers, "first", acked, 2)
    assert_log_is(servers, "second", acked_second, 2)


@pytest.fixture
def mixed_snapshot_quorum(tmp_path):
    """Voter 1 Kafka 4.1 (a snapshot every 2 s), voters 2 and 3 Ketch (one every commit, no log
    kept below it); brokers 11 (Ketch) and 12 (Kafka 4.1)."""
    ports = {n: free_port() for n in VOTERS}
    cluster_id = new_cluster_id()
    voters = {}
    for n in VOTERS:
        (tmp_path / f"c{n}").mkdir()
        if n == 1:
            voters[n] = KafkaVoter(tmp_path / f"c{n}", n, ports, cluster_id)
            voters[n].overrides.update({"metadata.log.max.snapshot.interval.ms": "2000"})
        else:
            voters[n] = snapshotting(Voter, tmp_path / f"c{n}", n, ports, cluster_id)
    quorum = Quorum(voters)
    brokers = {11: broker_under(quorum, tmp_path / "b11", 11, "ketch"),
               12: broker_under(quorum, tmp_path / "b12", 12, "kafka")}
    with running([voters[2], voters[3], voters[1], *brokers.values()]):
        yield voters, brokers


def test_kafka_and_ketch_voters_catch_up_from_each_others_snapshots(mixed_snapshot_quorum, kafka_libs, tmp_path):
    voters, brokers = mixed_snapshot_quorum
    kt, servers, admin, acked = first_topic(brokers, kafka_libs, tmp_path)

    # The Kafka voter is down (a Ketch voter leads) while the Ketch leader cleans its log.
    voters[1].kill9()
    ketch, _ = leader_of(kt, [voters[2], voters[3]], not_=1)
    kafka_end = max((e for e, _, _ in checkpoints(voters[1].data_dir)), default=0)
    start_before = log_start(voters[ketch])
    for i in range(5):
        admin.create_topics([NewTopic(f"k{i}", num_partitions=1, replication_factor=1)])[f"k{i}"].result(timeout=60)
    wait_for(lambda: log_start(voters[ketch]) > start_before + 5, "the Ketch leader's log cleaned", timeout=30)
    voters[1].start()
    wait_for(caught_up(kt, voters.values()), "the Kafka voter caught up", timeout=90)
    # It installed the Ketch leader's snapshot: its log starts over past 0 (Kafka's
    # truncateFullyAndStartAt; its own cleaner, every 60 s and above 100 MiB, never ran here).
    segments = sorted(int(f.stem) for f in (voters[1].data_dir / "__cluster_metadata-0").glob("*.log"))
    kafka_snaps = checkpoints(voters[1].data_dir)
    assert segments and segments[0] > kafka_end, (kafka_end, segments, kafka_snaps)
    assert any(e == segments[0] for e, _, _ in kafka_snaps), (segments, kafka_snaps)
    print(f"Kafka voter: log from {segments[0]} (had {kafka_end}), snapshots {kafka_snaps}")

    # The Kafka voter leads with the state it loaded from Ketch's snapshot.
    lead(kt, voters, 1)
    for topic in ("first", "k0", "k4"):
        assert_exists(admin, topic)
    new = NewTopic("under-kafka", num_partitions=2, replication_factor=2)
    create_topic(admin, new, KafkaError.INVALID_REPLICATION_FACTOR, "under-kafka created", timeout=60)
    wait_for_isr(admin, "under-kafka", [11, 12], count=2, timeout=60)

    # A Ketch voter loses its metadata log and rejoins under the Kafka leader from Kafka's snapshot
    # (Kafka answers a Fetch from offset 0 with its newest snapshot). Voter 2: the lower Ketch id,
    # which wins against voter 3 with equal logs, so `lead` can hand it leadership.
    wait_for(lambda: checkpoints(voters[1].data_dir), "a snapshot on the Kafka leader", timeout=30)
    voters[2].kill9()
    shutil.rmtree(voters[2].data_dir / "__cluster_metadata-0")
    time.sleep(0.5)
    voters[2].start()
    wait_for(caught_up(kt, voters.values()), "the Ketch voter rejoined", timeout=90)
    assert "loaded from the leader's snapshot" in voters[2].log_path.read_text()
    lead(kt, voters, 2)
    for topic in ("first", "k0", "k4", "under-kafka"):
        assert_exists(admin, topic)
    acked += produce_all(servers, "first", [b"b%d" % i for i in range(100)], 2)
    assert_log_is(servers, "first", acked, 2)
