"""Ketch's own KRaft controller (`process.roles=controller`, the only voter, node 3000:
cluster.KetchController) serving a cluster, compared with an Apache Kafka 4.1 controller where
the test is about the controller's answers.

- `kafka-metadata-quorum --bootstrap-controller <ctl> describe --status` and `--replication`
  (MetadataQuorumCommand: DescribeQuorum v2 and DescribeCluster to the controller listener): the
  controller 3000 leads, the three brokers are observers of the metadata log with their log end
  offsets and no lag. Run under both controllers: the Kafka run proves the answer's shape.
- An Apache Kafka 4.1 broker in a Ketch-controlled cluster, with two brokers of the target kind:
  it registers and is unfenced, a replication-factor-3 topic with a manual assignment has one
  partition led by each broker (the Kafka broker leads one, follows two), acks=all records to every
  partition are read back, and after kill -9 of the Kafka broker the others take over its
  partition with every acknowledged record at its offset (they had replicated it from the Kafka
  leader), while the Kafka broker's own log holds the records of the partitions it followed (it
  had replicated them from the target-kind leaders); restarted, it catches up from them and is
  back in every ISR.

- A topic created through a broker (CreateTopics forwarded to the controller of either kind) is
  served by that broker as soon as CreateTopics is answered: a Metadata request and a Fetch by topic
  id sent to it at once find the topic (go/createprobe, raw franz-go requests pinned to that broker).
  Kafka's broker answers as soon as the controller has, before applying the topic (its clients
  retry), so this is Ketch's alone; without the wait some rounds saw UNKNOWN_TOPIC_ID (15 of 30,
  and 2 of 15, in two runs).

The VerifiableProducer / VerifiableConsumer kill -9 test under a Ketch controller is
test_cluster_verifiable_clients.py::test_hard_kill_of_the_leader_loses_no_acknowledged_message[ketch].

With KETCH_COMPAT_TARGET=kafka the brokers of the target kind are Kafka 4.1 brokers: every broker
here is then Kafka, under Ketch's controller.
"""

from __future__ import annotations

import re
import subprocess
import time

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import (CONTROLLER_ID, THREE_BROKER_SETTINGS, THREE_NODES, bootstrap, create_topic, partition_states,
                     three_broker_cluster, wait_for, wait_for_isr, wait_for_leader)
from conftest import TARGET, go_build
from kafka_tools import KafkaTools
from test_cluster_under_kafka_controller import Acks, assert_log_is, idempotent_producer, produce_all

pytestmark = pytest.mark.timeout(240)

QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"


# ---------------------------------------------------------------------------------------------
# kafka-metadata-quorum describe
# ---------------------------------------------------------------------------------------------


def status_of(kt: KafkaTools, ctl) -> dict[str, str]:
    """`describe --status` as {field: value}."""
    r = kt.run(QUORUM, "--bootstrap-controller", ctl.bootstrap, "describe", "--status", timeout=60)
    fields = {}
    for line in r.stdout.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            fields[k.strip()] = v.strip()
    return fields


def replication_of(kt: KafkaTools, ctl) -> dict[int, dict[str, str]]:
    """`describe --replication` as {node id: {column: value}}."""
    r = kt.run(QUORUM, "--bootstrap-controller", ctl.bootstrap, "describe", "--replication", timeout=60)
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    header = re.split(r"\s{2,}|\t", lines[0].strip())
    rows = {}
    for line in lines[1:]:
        cells = re.split(r"\s{2,}|\t", line.strip())
        rows[int(cells[0])] = dict(zip(header, cells))
    return rows


def ids_in(text: str) -> list[int]:
    """The node ids of a `CurrentVoters` / `CurrentObservers` value (a list of {"id": N, ...})."""
    return sorted(int(n) for n in re.findall(r'"id":\s*(\d+)', text))


@pytest.mark.parametrize("controller", ["ketch", "kafka"])
def test_metadata_quorum_describe_shows_leader_and_observers(start_cluster, kafka_libs, tmp_path, controller):
    """Three brokers of the target kind under a controller of kind `controller`; once a topic is
    created (so the metadata log grows past the registrations): `describe --status` names the
    cluster id, leader 3000, the only voter 3000 and the observers 1, 2 and 3, a high watermark
    > 0 and no follower lag; `describe --replication` lists 3000 as Leader and 1, 2, 3 as Observers,
    each with a log end offset at most the leader's, all caught up (lag 0, log end offset equal
    to the leader's) within 30 s."""
    brokers = three_broker_cluster(start_cluster, controller)
    ctl = next(iter(brokers.values())).ctl
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers.values())})
    create_topic(admin, NewTopic("quorum-probe", num_partitions=3, replication_factor=3),
                 KafkaError.INVALID_REPLICATION_FACTOR)
    wait_for_isr(admin, "quorum-probe", THREE_NODES, leaders=THREE_NODES, count=3, timeout=60)
    kt = KafkaTools(kafka_libs, ctl, tmp_path)

    def caught_up():
        rows = replication_of(kt, ctl)
        leader = rows.get(CONTROLLER_ID)
        if not leader or any(rows.get(n, {}).get("Lag") != "0" for n in THREE_NODES):
            return None
        if any(rows[n]["LogEndOffset"] != leader["LogEndOffset"] for n in THREE_NODES):
            return None
        return rows

    rows = wait_for(caught_up, "every broker an observer with lag 0", timeout=30, interval=1)
    print(f"--replication: {rows}")
    assert sorted(rows) == [*THREE_NODES, CONTROLLER_ID], rows
    assert rows[CONTROLLER_ID]["Status"] == "Leader", rows
    assert all(rows[n]["Status"] == "Observer" for n in THREE_NODES), rows
    leo = int(rows[CONTROLLER_ID]["LogEndOffset"])
    assert leo > 0, rows
    assert all(int(rows[n]["LogEndOffset"]) == leo for n in THREE_NODES), rows
    # Kafka prints the fetch timestamps' age in ms; each broker fetches the log continuously.
    assert all(int(rows[n]["LastFetchTimestamp"]) >= 0 for n in THREE_NODES), rows

    status = status_of(kt, ctl)
    print(f"--status: {status}")
    assert status["ClusterId"] == ctl.cluster_id, status
    assert int(status["LeaderId"]) == CONTROLLER_ID, status
    assert int(status["LeaderEpoch"]) >= 1, status
    assert int(status["HighWatermark"]) >= leo, (status, leo)  # the log may have grown since (heartbeats do not, but fencing may)
    assert int(status["MaxFollowerLag"]) == 0, status
    assert ids_in(status["CurrentVoters"]) == [CONTROLLER_ID], status
    assert f"CONTROLLER://{ctl.bootstrap}" in status["CurrentVoters"], status  # the voter's endpoint
    assert ids_in(status["CurrentObservers"]) == THREE_NODES, status


# ---------------------------------------------------------------------------------------------
# an Apache Kafka 4.1 broker in a Ketch-controlled cluster
# ---------------------------------------------------------------------------------------------

MIXED, ASSIGNMENT = "mixed", [[1, 2, 3], [2, 3, 1], [3, 1, 2]]  # partition p led by broker p + 1


def test_kafka_broker_in_a_ketch_controlled_cluster(start_cluster, kafka_libs, tmp_path):
    """Kafka 4.1 broker 1 and brokers 2 and 3 of the target kind under a Ketch controller
    (THREE_BROKER_SETTINGS: RF 3, min.insync.replicas=2). Broker 1 registers and is unfenced (in
    the Metadata); `mixed` (3 partitions, assignment [[1,2,3],[2,3,1],[3,1,2]]) gets leaders 1, 2, 3
    and the ISR [1, 2, 3] everywhere; 300 idempotent acks=all records over the three partitions are
    acknowledged and read back, each at its offset. Kill -9 of broker 1: the controller fences it,
    partition 0 gets a leader among 2 and 3 and every ISR becomes [2, 3]; 300 more records are
    acknowledged, and the survivors hold all 600 exactly at their acknowledged offsets (partition
    0's first 100 came from the Kafka leader by the survivors' replica fetches). The killed Kafka
    broker's segments (Kafka's DumpLogSegments) hold the first records of partitions 1 and 2, which
    it followed (acks=all with it in the ISR). Restarted, it is taken back into every ISR, and after
    a controlled shutdown its log holds all 600 records, each partition's in offset order."""
    c = start_cluster({1: ("kafka", THREE_BROKER_SETTINGS), 2: (TARGET, THREE_BROKER_SETTINGS),
                       3: (TARGET, THREE_BROKER_SETTINGS)}, controller="ketch", parallel=True, kill=True)
    brokers = c.brokers
    servers = c.bootstrap()
    admin = AdminClient({"bootstrap.servers": servers})
    c.wait_registered(admin, timeout=90)
    create_topic(admin, NewTopic(MIXED, num_partitions=3, replication_factor=-1, replica_assignment=ASSIGNMENT, config={"min.insync.replicas": "2"}),
                 KafkaError.INVALID_REPLICA_ASSIGNMENT)
    states, _ = wait_for_isr(admin, MIXED, THREE_NODES, count=3, brokers=THREE_NODES, timeout=60,
                             what="every partition of mixed with ISR [1, 2, 3]")
    print(f"{MIXED}: {states}")
    assert {p: leader for p, (leader, _) in states.items()} == {0: 1, 1: 2, 2: 3}, states

    first = produce_all(servers, MIXED, [f"a{i}".encode() for i in range(300)], 3)
    assert_log_is(servers, MIXED, first, 3)
    s = partition_states(admin, MIXED)
    assert s and all(isr == THREE_NODES for _, isr in s[0].values()), f"ISR shrank during the writes: {s}"

    brokers[1].kill9()
    killed = time.monotonic()
    survivors = [brokers[2], brokers[3]]
    watcher = AdminClient({"bootstrap.servers": bootstrap(survivors)})
    moved, _ = wait_for_leader(watcher, MIXED, [2, 3], absent=[1], timeout=60,
                               what="broker 1 fenced and partition 0 led by 2 or 3")
    print(f"{time.monotonic() - killed:.1f} s after the kill: {moved}")
    wait_for_isr(watcher, MIXED, [2, 3], brokers=[2, 3], timeout=60, what="broker 1 out of every ISR")

    acks = Acks()
    producer = idempotent_producer(bootstrap(survivors))
    for i in range(300):
        producer.produce(MIXED, value=f"b{i}".encode(), partition=i % 3, on_delivery=acks)
        producer.poll(0)
    assert producer.flush(60) == 0, "records neither delivered nor failed"
    assert acks.errors == [] and len(acks.acked) == 300, acks.errors
    assert_log_is(bootstrap(survivors), MIXED, first + acks.acked, 3)

    kt = KafkaTools(kafka_libs, brokers[2], tmp_path)
    for p in (1, 2):
        assert kafka_log(kt, brokers[1], p) == [v.decode() for q, _, v in sorted(first) if q == p], p

    # The Kafka broker back: it registers again, catches up from the leaders 2 and 3 (partition 0's
    # later records included) and they take it back into every ISR (AlterPartition to the Ketch
    # controller); after its controlled shutdown its log holds every partition's 200 records.
    brokers[1].start()
    wait_for_isr(watcher, MIXED, THREE_NODES, brokers=THREE_NODES, timeout=60,
                 what="the restarted Kafka broker back in every ISR")
    brokers[1].stop(timeout=60)
    for p in range(3):
        assert kafka_log(kt, brokers[1], p) == [v.decode() for q, _, v in sorted(first + acks.acked) if q == p], p


def kafka_log(kt: KafkaTools, broker, partition: int) -> list[str]:
    """The values in a stopped Kafka broker's first segment of `mixed`-`partition`, in offset order."""
    segment = broker.data_dir / f"{MIXED}-{partition}" / "00000000000000000000.log"
    r = kt.run("kafka.tools.DumpLogSegments", "--print-data-log", "--files", str(segment), timeout=90)
    return re.findall(r"payload: ([ab]\d+)", r.stdout)


@pytest.mark.skipif(TARGET != "ketch", reason="Kafka's broker answers a forwarded CreateTopics before applying the topic")
@pytest.mark.parametrize("controller", ["ketch", "kafka"])
def test_a_topic_created_through_a_broker_is_served_there_at_once(start_cluster, controller):
    """CreateTopics through each broker in turn, then at once Metadata and a Fetch by topic id to
    that broker: every round finds the topic with its leaders."""
    brokers = three_broker_cluster(start_cluster, controller)
    probe = go_build("createprobe")
    rounds = 30
    r = subprocess.run([str(probe), bootstrap(brokers.values()), str(rounds), "3", "3"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"SUMMARY rounds={rounds} lagging=0" in r.stdout, r.stdout
