"""Eligible leader replicas (KIP-966, on by default in a new Kafka 4.1 cluster) on a three-broker
cluster under both controllers: `[kafka]` an Apache Kafka 4.1 controller (the reference), `[ketch]`
Ketch's own (`process.roles=controller`). Brokers of the target kind (THREE_BROKER_SETTINGS;
the controllers fence a dead broker ~3 s after its last heartbeat).

Topic `elr`: one partition, replicas [1, 2, 3], min.insync.replicas=2 (a topic config).

a) 100 acks=all records with ISR [1, 2, 3]; broker 3 is killed (-9): ISR [1, 2], at min ISR, so
   `kafka-topics --describe` (TopicCommand: DescribeTopicPartitions) shows no Elr; 100 more acks=all
   records are acknowledged (by 1 and 2);
b) broker 2 is stopped (SIGTERM, a controlled shutdown): ISR [1] < min ISR, `Elr: 2` (the replica
   whose removal took the ISR below min ISR; 3, removed at min ISR, is not eligible);
c) broker 1, the leader, is stopped too: the ISR empties, the partition has no leader. Broker 3
   restarts (it was killed: an unclean shutdown) and is not eligible: `Leader: none`, `Isr:` empty,
   `Elr: 1,2`, `LastKnownElr: 1`;
d) broker 2 restarts (it shut down cleanly, so it stays in the ELR) and is elected leader from the
   ELR; 3 catches up and joins the ISR: ISR [2, 3], the ELR cleared (min ISR reached). Every
   acknowledged record is there at its acknowledged offset: nothing acknowledged was lost.
   Broker 1 restarts: ISR [1, 2, 3].
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import THREE_BROKER_SETTINGS, THREE_NODES, bootstrap, create_topic, wait_for, wait_for_isr, \
    wait_for_leader
from conftest import TARGET
from kafka_tools import KafkaTools
from test_cluster_under_kafka_controller import Acks, assert_log_is, idempotent_producer

pytestmark = pytest.mark.timeout(360)

TOPIC = "elr"


def describe(kt: KafkaTools, servers: str) -> dict | str:
    """TopicCommand --describe of TOPIC's partition 0: {"leader": id or None, "isr": sorted ids,
    "elr": text, "last_known_elr": text}, or the tool's output when it failed."""
    r = kt.run("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", servers, "--describe",
               "--topic", TOPIC, timeout=60, check=False)
    if r.returncode != 0:
        return f"TopicCommand exited {r.returncode}: {r.out[-2000:]}"
    for line in r.stdout.splitlines():  # "\tTopic: elr\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2\t..."
        fields = dict(f.split(":", 1) for f in line.strip().split("\t") if ":" in f)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        if fields.get("Partition") == "0":
            return {"leader": None if fields["Leader"] == "none" else int(fields["Leader"]),
                    "isr": sorted(int(x) for x in fields["Isr"].split(",") if x),
                    "elr": fields.get("Elr"), "last_known_elr": fields.get("LastKnownElr")}
    return f"no partition 0 in: {r.stdout[-2000:]}"


def expect_describe(kt: KafkaTools, servers: str, leader, isr, elr: str, last_known: str, what: str,
                    timeout: float = 30) -> None:
    expected = {"leader": leader, "isr": isr, "elr": elr, "last_known_elr": last_known}
    rows = wait_for(lambda: (d := describe(kt, servers)) == expected and d, what, timeout=timeout) \
        if timeout else describe(kt, servers)
    assert rows == expected, (what, rows)


def produce(servers: str, prefix: str, n: int) -> list:
    acks = Acks()
    producer = idempotent_producer(servers)
    for i in range(n):
        producer.produce(TOPIC, value=f"{prefix}{i}".encode(), partition=0, on_delivery=acks)
        producer.poll(0)
    assert producer.flush(60) == 0, "records neither delivered nor failed"
    assert acks.errors == [] and len(acks.acked) == n, acks.errors
    return acks.acked


@pytest.mark.parametrize("controller", ["kafka", "ketch"])
def test_elr_member_is_elected_after_the_isr_empties_and_nothing_acknowledged_is_lost(
        start_cluster, kafka_libs, tmp_path, controller):
    c = start_cluster({n: (TARGET, THREE_BROKER_SETTINGS) for n in THREE_NODES}, parallel=True, kill=True,
                      controller=controller)
    brokers = c.brokers
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    c.wait_registered(admin, timeout=60)
    new = NewTopic(TOPIC, num_partitions=1, replication_factor=-1, replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "2"})
    create_topic(admin, new, KafkaError.INVALID_REPLICA_ASSIGNMENT)
    wait_for_isr(admin, TOPIC, [1, 2, 3], leaders=[1], count=1, timeout=60)
    kt = KafkaTools(kafka_libs, brokers[1], tmp_path)
    acked = produce(c.bootstrap(), "base", 100)

    # a) broker 3 killed: ISR [1, 2], at min ISR: no ELR.
    brokers[3].kill9()
    two = bootstrap([brokers[1], brokers[2]])
    watch = AdminClient({"bootstrap.servers": two})
    wait_for_isr(watch, TOPIC, [1, 2], leaders=[1], timeout=60)
    expect_describe(kt, two, 1, [1, 2], "", "", "a) broker 3 down")
    acked += produce(two, "a", 100)

    # b) broker 2 stopped: ISR [1] below min ISR, 2 eligible.
    brokers[2].stop()
    one = brokers[1].bootstrap
    wait_for_isr(AdminClient({"bootstrap.servers": one}), TOPIC, [1], leaders=[1], timeout=60)
    expect_describe(kt, one, 1, [1], "2", "", "b) brokers 2 and 3 down")

    # c) broker 1 stopped: the ISR empties; 3 (killed, so not eligible) restarts and may not lead.
    brokers[1].stop()
    brokers[3].start()
    three = brokers[3].bootstrap
    kt3 = KafkaTools(kafka_libs, brokers[3], tmp_path)
    expect_describe(kt3, three, None, [], "1,2", "1", "c) leaderless, only 3 up", timeout=60)
    time.sleep(3)  # a few heartbeats: 3 stays out of leadership
    expect_describe(kt3, three, None, [], "1,2", "1", "c) 3 still not leading", timeout=0)

    # d) broker 2 restarts after its clean shutdown: elected from the ELR; 3 joins the ISR.
    brokers[2].start()
    live = bootstrap([brokers[2], brokers[3]])
    watch = AdminClient({"bootstrap.servers": live})
    wait_for_leader(watch, TOPIC, [2], timeout=60, what="2 elected from the ELR")
    wait_for_isr(watch, TOPIC, [2, 3], leaders=[2], timeout=60)
    expect_describe(kt3, live, 2, [2, 3], "", "", "d) 2 leads, 3 back in the ISR")
    assert_log_is(live, TOPIC, acked, 1)
    brokers[1].start()
    wait_for_isr(AdminClient({"bootstrap.servers": c.bootstrap()}), TOPIC, [1, 2, 3], leaders=[2], timeout=60)


FEATURES = "org.apache.kafka.tools.FeatureCommand"


def elr_line(kt: KafkaTools, ctl: str) -> dict:
    """`kafka-features --bootstrap-controller ctl describe`: the eligible.leader.replicas.version row."""
    out = kt.run(FEATURES, "--bootstrap-controller", ctl, "describe").stdout
    for line in out.splitlines():
        fields = dict(f.split(": ", 1) for f in line.strip().split("\t") if ": " in f)
        if fields.get("Feature") == "eligible.leader.replicas.version":
            return fields
    return {"missing": out}


@pytest.mark.parametrize("controller", ["kafka", "ketch"])
def test_kafka_features_on_the_controller_turns_elr_off_and_on(start_cluster, kafka_libs, tmp_path, controller):
    """`kafka-features --bootstrap-controller`: a new cluster has eligible.leader.replicas.version 1
    (supported 0-1); level 2 is refused with Kafka's message; a downgrade to 0 and an upgrade back
    to 1 are applied (the epoch grows)."""
    c = start_cluster({1: (TARGET, {})}, controller=controller, kill=True)
    c.wait_registered(AdminClient({"bootstrap.servers": c.bootstrap()}), timeout=60)
    kt, ctl = KafkaTools(kafka_libs, c.brokers[1], tmp_path), c.ctl.bootstrap
    first = elr_line(kt, ctl)
    assert (first.get("SupportedMinVersion"), first.get("SupportedMaxVersion"), first.get("FinalizedVersionLevel")) \
        == ("0", "1", "1"), first
    refused = kt.run(FEATURES, "--bootstrap-controller", ctl, "upgrade", "--feature",
                     "eligible.leader.replicas.version=2", check=False)
    assert refused.returncode != 0, refused.out
    assert "Could not upgrade eligible.leader.replicas.version to 2. The update failed for all features since the " \
           "following feature had an error: Invalid update version 2 for feature eligible.leader.replicas.version. " \
           "Local controller 3000 only supports versions 0-1" in refused.out, refused.out
    down = kt.run(FEATURES, "--bootstrap-controller", ctl, "downgrade", "--feature",
                  "eligible.leader.replicas.version=0")
    assert down.stdout.strip() == "eligible.leader.replicas.version was downgraded to 0.", down.out
    after_down = wait_for(lambda: (d := elr_line(kt, ctl)).get("FinalizedVersionLevel") == "0" and d, "ELR off")
    up = kt.run(FEATURES, "--bootstrap-controller", ctl, "upgrade", "--feature", "eligible.leader.replicas.version=1")
    assert up.stdout.strip() == "eligible.leader.replicas.version was upgraded to 1.", up.out
    after_up = wait_for(lambda: (d := elr_line(kt, ctl)).get("FinalizedVersionLevel") == "1" and d, "ELR on")
    assert int(first["Epoch"]) < int(after_down["Epoch"]) < int(after_up["Epoch"]), (first, after_down, after_up)
