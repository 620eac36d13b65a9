"""The metadata log `__cluster_metadata`: topic changes are Kafka's metadata records in Kafka's log
format, so Kafka's own `kafka-dump-log --cluster-metadata-decoder` (kafka.tools.DumpLogSegments from
Kafka 4.1's jars) decodes the broker's log files. Topics, partitions, configs and deletions are
what a restart replays. Passes on Ketch and on Apache Kafka 4.1 (KETCH_COMPAT_TARGET=kafka).

`test_upgrade_keeps_everything` (Ketch only): a data directory written by the Ketch from before
the metadata log (topic files in `.ketch/topics/`, tests/fixtures/ketch-pre-metadata-log-data.tar.gz,
made by scripts/make-upgrade-fixture) opens with every topic, config, record, committed group offset
and producer state it had.
"""

from __future__ import annotations

import json
import re
import shutil
import tarfile
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

from conftest import REPO_ROOT, TARGET
from kafka_tools import KafkaTools

DUMP_LOG = "kafka.tools.DumpLogSegments"
FIXTURE = REPO_ROOT / "tests" / "fixtures" / "ketch-pre-metadata-log-data.tar.gz"


def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10000})


def wait_for(check, what: str, timeout: float = 20):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            assert value, f"timed out waiting for {what}"
            return value
        time.sleep(0.2)


def payloads(out: str) -> list[dict]:
    """The decoded metadata records of DumpLogSegments' output (one `payload: {json}` per record)."""
    found = []
    for line in out.splitlines():
        m = re.search(r"payload: (\{.*\})\s*$", line)
        if m:
            found.append(json.loads(m.group(1)))
    return found


def dump(kt: KafkaTools, broker) -> list[dict]:
    segments = sorted((broker.data_dir / "__cluster_metadata-0").glob("*.log"))
    assert segments, f"no metadata log segment in {broker.data_dir}"
    r = kt.run(DUMP_LOG, "--cluster-metadata-decoder", "--files", ",".join(map(str, segments)), timeout=90)
    return payloads(r.stdout)


def topic_names(broker) -> set[str]:
    return set(admin(broker).list_topics(timeout=10).topics)


def test_kafka_dump_log_decodes_topic_changes(start_broker, kafka_libs, tmp_path):
    broker = start_broker()
    a = admin(broker)
    for f in a.create_topics([NewTopic("alpha", 2, 1, config={"retention.ms": "12345"}),
                              NewTopic("beta", 1, 1)]).values():
        f.result(timeout=20)
    a.create_partitions([NewPartitions("alpha", 3)])["alpha"].result(timeout=20)
    a.delete_topics(["beta"])["beta"].result(timeout=20)
    wait_for(lambda: "beta" not in topic_names(broker) and "alpha" in topic_names(broker), "beta deleted")
    # Restarted: the log is replayed; the changes hold.
    broker.restart()
    names = wait_for(lambda: topic_names(broker) if "alpha" in topic_names(broker) else None, "alpha after restart")
    assert "beta" not in names
    a = admin(broker)  # kept: a dropped client destroys its pending futures
    md = a.list_topics("alpha", timeout=10).topics["alpha"]
    assert sorted(md.partitions) == [0, 1, 2]
    res = ConfigResource(ConfigResource.Type.TOPIC, "alpha")
    configs = a.describe_configs([res])[res].result(timeout=20)
    assert configs["retention.ms"].value == "12345"
    broker.stop()

    records = dump(KafkaTools(kafka_libs, broker, tmp_path), broker)
    by_type: dict[str, list[dict]] = {}
    for r in records:
        by_type.setdefault(r["type"], []).append(r["data"])
    topics = {t["name"]: t["topicId"] for t in by_type.get("TOPIC_RECORD", [])}
    assert {"alpha", "beta"} <= set(topics), records
    alpha_partitions = sorted(p["partitionId"] for p in by_type["PARTITION_RECORD"] if p["topicId"] == topics["alpha"])
    assert alpha_partitions == [0, 1, 2], records
    assert any(c["resourceName"] == "alpha" and c["name"] == "retention.ms" and c["value"] == "12345"
               for c in by_type.get("CONFIG_RECORD", [])), records
    assert any(r["topicId"] == topics["beta"] for r in by_type.get("REMOVE_TOPIC_RECORD", [])), records


@pytest.mark.broker_config(**{"metadata.log.max.record.bytes.between.snapshots": "1",
                               "metadata.max.retention.bytes": "0"})
def test_snapshots_of_a_single_node_keep_its_state_across_restarts(broker, kafka_libs, tmp_path):
    """A single node (the only voter of its metadata log) snapshots after every change with these
    settings and cleans its log below the newest snapshot; a restart loads that snapshot and
    replays only the log after it: every change holds."""
    a = admin(broker)
    for i in range(5):
        for f in a.create_topics([NewTopic(f"snap-{i}", 1, 1, config={"retention.ms": str(100000 + i)})]).values():
            f.result(timeout=20)
    a.delete_topics(["snap-0"])["snap-0"].result(timeout=20)
    wait_for(lambda: "snap-0" not in topic_names(broker), "snap-0 deleted")

    def snapshots():
        found = [p.name for p in broker.data_dir.rglob("__cluster_metadata-0/*.checkpoint")
                 if not p.name.startswith("00000000000000000000-")]
        return found or None

    print("snapshots:", wait_for(snapshots, "a metadata snapshot", timeout=30))
    broker.restart()
    names = wait_for(lambda: topic_names(broker) if "snap-4" in topic_names(broker) else None, "topics after restart")
    assert {f"snap-{i}" for i in range(1, 5)} <= set(names) and "snap-0" not in names, names
    a = admin(broker)
    res = ConfigResource(ConfigResource.Type.TOPIC, "snap-3")
    assert a.describe_configs([res])[res].result(timeout=20)["retention.ms"].value == "100003"
    for f in a.create_topics([NewTopic("snap-after", 1, 1)]).values():
        f.result(timeout=20)
    broker.restart()
    wait_for(lambda: "snap-after" in topic_names(broker) or None, "snap-after after a second restart")


@pytest.mark.skipif(TARGET != "ketch", reason="upgrade from an older Ketch's data directory")
def test_upgrade_keeps_everything(start_broker, kafka_libs, tmp_path):
    """The fixture (see scripts/make-upgrade-fixture for what it holds) opened by this Ketch."""
    broker = start_broker()
    broker.stop()
    data = broker.data_dir
    for child in data.iterdir():
        if child.is_dir():
            shutil.rmtree(child)
        else:
            child.unlink()
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(data, filter="data")
    manifest = json.loads((data / "fixture.json").read_text())
    assert (data / ".ketch" / "topics").is_dir(), "the fixture is in the old layout"
    broker.start()

    a = admin(broker)
    md = a.list_topics(timeout=10)
    for name, spec in manifest["topics"].items():
        assert name in md.topics, (name, sorted(md.topics))
        assert len(md.topics[name].partitions) == spec["partitions"], name
        if spec["configs"]:
            res = ConfigResource(ConfigResource.Type.TOPIC, name)
            got = a.describe_configs([res])[res].result(timeout=20)
            for k, v in spec["configs"].items():
                assert got[k].value == v, (name, k, got[k].value)

    # Every record, in order, and the group's committed offsets.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": manifest["group"],
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        committed = consumer.committed([TopicPartition(t, p) for t, p, _ in manifest["committed"]], timeout=20)
        assert sorted((c.topic, c.partition, c.offset) for c in committed) == \
            sorted(tuple(x) for x in manifest["committed"])
        for topic, values in manifest["records"].items():
            consumer.assign([TopicPartition(topic, 0, 0)])
            got = []
            deadline = time.monotonic() + 30
            while len(got) < len(values) and time.monotonic() < deadline:
                m = consumer.poll(1)
                if m is not None and not m.error():
                    got.append(m.value().decode())
            assert got == values, topic
    finally:
        consumer.close()

    # Producer state: the fixture's idempotent producer is still known, with its last sequence.
    r = KafkaTools(kafka_libs, broker, tmp_path).run(
        "org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", broker.bootstrap,
        "describe-producers", "--topic", "idem", "--partition", "0")
    rows = [line.split() for line in r.stdout.splitlines()[1:] if line.strip()]
    assert [row[3] for row in rows] == [str(manifest["idempotent_records"] - 1)], r.out
    assert (data / "__cluster_metadata-0").is_dir()
    assert not (data / ".ketch" / "topics").exists()
    assert (data / ".ketch" / "topics.moved-to-metadata-log").is_dir()

    # A second start replays the metadata log only.
    broker.restart()
    assert set(manifest["topics"]) <= set(admin(broker).list_topics(timeout=10).topics)


def test_kafka_metadata_quorum_through_the_broker(broker, kafka_libs, tmp_path):
    """`kafka-metadata-quorum --bootstrap-server <broker> describe --status` and `--replication`
    (DescribeQuorum v2, forwarded by Kafka's broker to its controller; a single Ketch node answers
    for its own metadata log): node 1 leads, is the only voter, nobody observes, the high
    watermark grows when a topic is created."""
    kt = KafkaTools(kafka_libs, broker, tmp_path)

    def status() -> dict[str, str]:
        r = kt.run("org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-server", broker.bootstrap,
                   "describe", "--status", timeout=60)
        return {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in r.stdout.splitlines() if ":" in line)}

    before = status()
    print(before)
    assert before["LeaderId"] == "1" and int(before["LeaderEpoch"]) >= 1, before
    assert re.findall(r'"id":\s*(\d+)', before["CurrentVoters"]) == ["1"], before
    assert before["CurrentObservers"] == "[]", before
    client = admin(broker)
    client.create_topics([NewTopic("quorum-grows", 1, 1)])["quorum-grows"].result(30)
    after = status()
    assert int(after["HighWatermark"]) > int(before["HighWatermark"]), (before, after)
    r = kt.run("org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-server", broker.bootstrap,
               "describe", "--replication", timeout=60)
    rows = [line.split() for line in r.stdout.splitlines()[1:] if line.strip()]
    assert [(row[0], row[-1]) for row in rows] == [("1", "Leader")], r.stdout
