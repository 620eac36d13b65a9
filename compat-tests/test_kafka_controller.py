"""A broker of the target kind under an Apache Kafka 4.1 controller (`process.roles=broker` with
`controller.quorum.bootstrap.servers`): it registers (BrokerRegistration), heartbeats, replicates
the metadata log as an observer (Fetch of `__cluster_metadata`), is unfenced once caught up, and
leaves with a controlled shutdown. Kafka's own tools, asked of the controller, show it:
`kafka-metadata-quorum --bootstrap-controller ... describe --replication` (an observer with no lag)
and `kafka-cluster`-style DescribeCluster through `kafka-broker-api-versions`-free admin calls.
Passes with a Ketch broker and with a Kafka 4.1 broker (KETCH_COMPAT_TARGET=kafka).
"""

from __future__ import annotations

import json
import re
import time

import pytest

from cluster import CONTROLLER_ID, KafkaController, broker_under, wait_for
from conftest import TARGET
from kafka_tools import KafkaTools

QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
NODE = 2


@pytest.fixture
def controller(tmp_path):
    # Kafka 4.1's default features (metadata.version 4.1-IV1, group.version 1, transaction.version
    # 2, eligible.leader.replicas.version 1): a broker must support every finalized level.
    ctl = KafkaController(tmp_path / "controller")
    ctl.start()
    yield ctl
    ctl.close()


def replication_rows(kt: KafkaTools, ctl) -> dict[str, dict[str, str]]:
    """`describe --replication` as {node id: {column: value}}."""
    r = kt.run(QUORUM, "--bootstrap-controller", ctl.bootstrap, "describe", "--replication", timeout=60)
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    header = re.split(r"\s{2,}|\t", lines[0].strip())
    rows = {}
    for line in lines[1:]:
        cells = re.split(r"\s{2,}|\t", line.strip())
        rows[cells[0]] = dict(zip(header, cells))
    return rows


def test_broker_registers_replicates_metadata_and_is_unfenced(controller, kafka_libs, tmp_path):
    broker = broker_under(controller, tmp_path / "broker", NODE, TARGET)
    try:
        broker.start()
        kt = KafkaTools(kafka_libs, controller, tmp_path)

        def observer_caught_up():
            rows = replication_rows(kt, controller)
            row = rows.get(str(NODE))
            return row if row and row.get("Status") == "Observer" and row.get("Lag") == "0" else None

        wait_for(observer_caught_up, "the broker as a caught-up observer")
        assert rows_has_leader(replication_rows(kt, controller))
        port = broker.port

        def unfenced():
            records = controller_records(kt, controller)
            return records if any(r["type"] == "BROKER_REGISTRATION_CHANGE_RECORD" and r["data"]["brokerId"] == NODE
                                  and r["data"].get("fenced") == -1 for r in records) else None

        records = wait_for(unfenced, "the broker unfenced by the controller")
        registered = [r["data"] for r in records if r["type"] == "REGISTER_BROKER_RECORD"]
        assert [r["brokerId"] for r in registered] == [NODE], registered
        reg = registered[0]
        assert [(e["name"], e["host"], e["port"], e["securityProtocol"]) for e in reg["endPoints"]] == \
            [("PLAINTEXT", "127.0.0.1", port, 0)], reg
        assert reg["fenced"] is True and len(reg["logDirs"]) == 1, reg
        features = {f["name"]: (f["minSupportedVersion"], f["maxSupportedVersion"]) for f in reg["features"]}
        assert features["metadata.version"][1] >= 27 and features["transaction.version"] == (0, 2), features

        broker.stop()  # a controlled shutdown: the controller lets the broker go
        assert broker.proc.returncode in (0, 143), broker.proc.returncode  # 143: the JVM after SIGTERM

        def shut_down():
            after = controller_records(kt, controller)[len(records):]
            changes = [r["data"] for r in after if r["data"].get("brokerId") == NODE]
            return any(c.get("inControlledShutdown") == 1 or c.get("fenced") == 1 for c in changes)

        wait_for(shut_down, "the controller's record of the broker's controlled shutdown")
    finally:
        broker.close()


def controller_records(kt: KafkaTools, ctl) -> list[dict]:
    """The controller's metadata log, decoded by Kafka's DumpLogSegments."""
    segments = sorted((ctl.data_dir / "__cluster_metadata-0").glob("*.log"))
    r = kt.run("kafka.tools.DumpLogSegments", "--cluster-metadata-decoder", "--files",
               ",".join(map(str, segments)), timeout=90)
    found = []
    for line in r.stdout.splitlines():
        m = re.search(r"payload: (\{.*\})\s*$", line)
        if m:
            found.append(json.loads(m.group(1)))
    return found


def rows_has_leader(rows) -> bool:
    return rows.get(str(CONTROLLER_ID), {}).get("Status") == "Leader"


def test_a_kafka_leader_replicates_to_a_broker_of_the_target_kind(controller, kafka_libs, tmp_path):
    """Kafka 4.1 broker 1 leads; broker 2 (the target kind) follows with Kafka's replica Fetch:
    it joins the ISR (Kafka's leader decides, from the follower's fetches), acks=all writes with
    min.insync.replicas=2 succeed, and the follower's log holds every record (read with Kafka's
    DumpLogSegments)."""
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    leader = broker_under(controller, tmp_path / "kafka1", 1, "kafka")
    follower = broker_under(controller, tmp_path / "follower", NODE, TARGET)
    try:
        leader.start()
        follower.start()
        admin = AdminClient({"bootstrap.servers": leader.bootstrap})

        def both_registered():
            return len(admin.list_topics(timeout=10).brokers) == 2

        wait_for(both_registered, "both brokers in the cluster's metadata")
        topic = NewTopic("rep", num_partitions=2, replication_factor=-1, replica_assignment=[[1, NODE], [1, NODE]], config={"min.insync.replicas": "2"})

        def created():
            # The client sends CreateTopics to the "controller" the Metadata answer names: a
            # random broker, which forwards it (a Ketch broker too). Right after the brokers
            # start, the assignment may name one not registered yet: ask again.
            try:
                admin.create_topics([topic])["rep"].result(timeout=30)
                return True
            except KafkaException as e:
                if e.args[0].code() != KafkaError.INVALID_REPLICA_ASSIGNMENT:
                    raise
                return False

        wait_for(created, "the topic created with its replica assignment")

        def in_sync():
            md = admin.list_topics("rep", timeout=10).topics["rep"]
            parts = md.partitions
            return len(parts) == 2 and all(sorted(p.isrs) == [1, NODE] and p.leader == 1 for p in parts.values())

        wait_for(in_sync, "the follower in the ISR of both partitions", timeout=60)
        producer = Producer({"bootstrap.servers": leader.bootstrap, "acks": "all", "enable.idempotence": True})
        errors = []
        for i in range(200):
            producer.produce("rep", value=f"v{i}".encode(), partition=i % 2,
                             on_delivery=lambda err, msg: errors.append(err) if err else None)
        assert producer.flush(30) == 0
        assert errors == [], errors
        assert in_sync(), "still in sync after the writes"
        time.sleep(1)  # the follower's next fetch brings the last batch
        follower.stop()
        kt = KafkaTools(kafka_libs, leader, tmp_path)
        for p in (0, 1):
            segment = follower.data_dir / f"rep-{p}" / "00000000000000000000.log"
            r = kt.run("kafka.tools.DumpLogSegments", "--print-data-log", "--files", str(segment), timeout=90)
            values = re.findall(r"payload: (v\d+)", r.stdout)
            assert values == [f"v{i}" for i in range(p, 200, 2)], r.stdout[-2000:]
    finally:
        follower.close()
        leader.close()
