"""Sarama (github.com/IBM/sarama, the other widely used Go client) against the broker under test.

The client program is compat-tests/go/sarama (built once per session into .cache/go/sarama); see
its doc comment for every check. Sarama's own defaults are kept except where a step needs
otherwise. `-version` sets Config.Version, which caps the request versions Sarama sends (then
negotiated down with ApiVersions). Against Kafka 4.1 (from its request log) Sarama 1.61.1 sends:
- "4.1.0": Produce v10, Fetch v12, ListOffsets v6, Metadata v11, OffsetCommit v8, OffsetFetch v8,
  FindCoordinator v3, JoinGroup v8, SyncGroup v5, Heartbeat v4, LeaveGroup v5, DescribeGroups v5,
  ListGroups v5, InitProducerId v4, CreateTopics v7, DeleteTopics v6, CreatePartitions v3,
  DeleteRecords v2, DescribeConfigs v4, DescribeCluster v2, DeleteGroups v2, ApiVersions v4;
- "default" (sarama.DefaultVersion, 2.8.0): the same except Produce v9, OffsetFetch v7,
  JoinGroup v7, LeaveGroup v4, ListGroups v4, DescribeCluster v0, ApiVersions v3;
- "2.1.0" (the oldest client version Kafka 4.x serves, KIP-896), no flexible versions: Produce v7,
  Fetch v10, ListOffsets v4, Metadata v7, OffsetCommit v6, OffsetFetch v5, FindCoordinator v2,
  JoinGroup v3, SyncGroup v2, Heartbeat v2, LeaveGroup v2, DescribeGroups v2, ListGroups v2,
  CreateTopics v3, DeleteTopics v3, CreatePartitions v1, DeleteRecords v1, DescribeConfigs v2,
  DeleteGroups v1 (DescribeCluster falls back to Metadata).

Scenarios:
- produce: SyncProducer (SendMessage, SendMessages) and AsyncProducer, acks=all, per codec
  (Sarama 1.61's lz4 writer is pierrec/lz4 with 64 KiB blocks, hard-coded since Sarama 1.46.0 (PR #3258),
  not pierrec's 4 MiB default; batches up to 256 KiB span several blocks), optionally idempotent
  (Net.MaxOpenRequests=1); acked offsets consecutive per partition in send order; then the partition Consumer from OffsetOldest checks every record's
  key / value (null vs empty) / headers (order, null values) / timestamp at its offset.
- group: ConsumerGroup (range) with two members, rebalances on join and leave, auto-commit with
  MarkMessage metadata, exactly-once across the rebalances, Empty group keeps its offsets, a
  restarted member resumes at the committed offsets; ClusterAdmin ListConsumerGroups /
  DescribeConsumerGroups / ListConsumerGroupOffsets / DeleteConsumerGroup.
- admin: ClusterAdmin CreateTopic with configs, ListTopics, DescribeTopics, DescribeConfig,
  CreatePartitions, DeleteRecords, DeleteTopic, with the refusals Kafka answers.
- topic-configs: DescribeConfig of a topic lists every topic config Kafka 4.1 lists.

By hand: `compat-tests/.cache/go/sarama -brokers 127.0.0.1:PORT -scenario produce -codecs lz4
[-idempotent] [-version default] [-debug]`.
"""

from pathlib import Path

import pytest

from conftest import go_build, run_logged

RUN_TIMEOUT = 150  # the program's own overall deadline is 100 s
MODERN = "4.1.0"
ALL_CODECS = "none,gzip,snappy,lz4,zstd"


@pytest.fixture(scope="session")
def sarama_bin() -> Path:
    return go_build("sarama")


def sarama(binary, broker, scenario, *args):
    r = run_logged([binary, "-brokers", broker.bootstrap, "-scenario", scenario, *args], timeout=RUN_TIMEOUT,
                   what=f"sarama -scenario {scenario} {' '.join(args)}")
    print(r.stdout)
    if r.stderr.strip():
        print("--- stderr (sarama log, last 5000 chars) ---\n" + r.stderr[-5000:])
    assert r.stdout.rstrip().endswith("PASS"), r.stdout
    return r


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_sarama_produce_consume_codec(broker, sarama_bin, codec):
    """SyncProducer + AsyncProducer with one codec, acks=all; full read-back from OffsetOldest."""
    sarama(sarama_bin, broker, "produce", "-version", MODERN, "-codecs", codec)


def test_sarama_idempotent_producer(broker, sarama_bin):
    """Producer.Idempotent with Net.MaxOpenRequests=1 (InitProducerId, sequence numbers), every codec
    in the same partitions: offsets exactly as acked, nothing duplicated or lost."""
    sarama(sarama_bin, broker, "produce", "-version", MODERN, "-codecs", ALL_CODECS, "-idempotent",
           "-records", "400")


def test_sarama_consumer_group(broker, sarama_bin):
    sarama(sarama_bin, broker, "group", "-version", MODERN)


def test_sarama_cluster_admin(broker, sarama_bin):
    sarama(sarama_bin, broker, "admin", "-version", MODERN)


def test_sarama_describe_config_lists_every_topic_config(broker, sarama_bin):
    """DescribeConfig of a topic lists every topic config Kafka 4.1 lists (names; values of the ones
    the admin scenario sets are checked there)."""
    sarama(sarama_bin, broker, "topic-configs", "-version", MODERN)


@pytest.mark.parametrize("scenario", ["produce", "group", "admin"])
@pytest.mark.parametrize("version", ["default", "2.1.0"])
def test_sarama_older_version(broker, sarama_bin, version, scenario):
    """The same with sarama.DefaultVersion (2.8.0) and with 2.1.0 (the oldest client version Kafka
    4.x still serves, KIP-896): the older request versions Sarama pins for them."""
    args = ["-codecs", ALL_CODECS, "-records", "300"] if scenario == "produce" else []
    sarama(sarama_bin, broker, scenario, "-version", version, *args)
