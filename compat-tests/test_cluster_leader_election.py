"""Kafka's own admin tools on a three-broker cluster: `kafka-leader-election` (LeaderElectionCommand,
ElectLeaders forwarded by the broker to the controller) and `kafka-topics --describe` (TopicCommand),
under both controllers: `[kafka]` an Apache Kafka 4.1 controller, `[ketch]` Ketch's own
(`process.roles=controller`). Automatic preferred-leader rebalancing is off on the controller
(`auto.leader.rebalance.enable=false`), so only the tool moves leadership back.

- `elect` (3 partitions, assignment [[1,2,3],[2,3,1],[3,1,2]]): preferred leaders 1, 2, 3, seen in
  `--describe` with Replicas in assignment order and Isr 1,2,3;
- broker 1's graceful stop (controlled shutdown) moves partition 0's leadership to 2 or 3; restarted,
  broker 1 is back in the ISR but partition 0 keeps its new leader;
- `--election-type PREFERRED --topic elect --partition 0` prints Kafka's "Successfully completed
  leader election (PREFERRED) for partitions elect-0" and broker 1 leads partition 0 again;
- `--election-type PREFERRED --all-topic-partitions` then elects nothing and lists nothing (Kafka's
  controller leaves out the partitions not named whose election is not needed);
- `--election-type UNCLEAN --topic elect --partition 1` on a partition whose leader is alive:
  "Valid replica already elected" too (Kafka's ELECTION_NOT_NEEDED).

With KETCH_COMPAT_TARGET=kafka the brokers are Kafka 4.1 brokers (under either controller).
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import THREE_BROKER_SETTINGS, THREE_NODES, create_topic, wait_for_isr, wait_for_leader
from conftest import TARGET
from kafka_tools import KafkaTools

pytestmark = pytest.mark.timeout(240)

TOPIC = "elect"
ASSIGNMENT = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"


def describe(kt: KafkaTools, servers: str) -> dict[int, dict]:
    """TopicCommand --describe of TOPIC: {partition: {"leader", "replicas" (in order), "isr" (sorted)}}."""
    r = kt.run("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", servers, "--describe",
               "--topic", TOPIC, timeout=60)
    rows = {}
    for line in r.stdout.splitlines():  # "\tTopic: elect\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3..."
        fields = dict(f.split(":", 1) for f in line.strip().split("\t") if ":" in f)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        if "Partition" in fields:
            rows[int(fields["Partition"])] = {
                "leader": int(fields["Leader"]), "replicas": [int(x) for x in fields["Replicas"].split(",")],
                "isr": sorted(int(x) for x in fields["Isr"].split(","))}
    return rows


@pytest.mark.parametrize("controller", ["kafka", "ketch"])
def test_preferred_leader_election_with_kafkas_tool(start_cluster, kafka_libs, tmp_path, controller):
    c = start_cluster({n: (TARGET, THREE_BROKER_SETTINGS) for n in THREE_NODES},
                      controller_overrides={"auto.leader.rebalance.enable": "false"}, parallel=True, kill=True,
                      controller=controller)
    brokers = c.brokers
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    c.wait_registered(admin, timeout=60)
    create_topic(admin, NewTopic(TOPIC, num_partitions=3, replication_factor=-1, replica_assignment=ASSIGNMENT),
                 KafkaError.INVALID_REPLICA_ASSIGNMENT)
    wait_for_isr(admin, TOPIC, THREE_NODES, count=3, brokers=THREE_NODES, timeout=60)
    kt = KafkaTools(kafka_libs, brokers[2], tmp_path)
    before = describe(kt, brokers[2].bootstrap)
    assert before == {p: {"leader": a[0], "replicas": a, "isr": THREE_NODES} for p, a in enumerate(ASSIGNMENT)}, before

    # Controlled shutdown of broker 1 moves partition 0 away; restarted, it only rejoins the ISR.
    brokers[1].close()
    survivors = AdminClient({"bootstrap.servers": f"{brokers[2].bootstrap},{brokers[3].bootstrap}"})
    wait_for_leader(survivors, TOPIC, [2, 3], only=[0], timeout=60, what="partition 0 led by 2 or 3")
    brokers[1].start()
    wait_for_isr(survivors, TOPIC, THREE_NODES, count=3, timeout=60, what="broker 1 back in every ISR")
    moved = describe(kt, brokers[2].bootstrap)
    assert moved[0]["leader"] in (2, 3) and moved[0]["replicas"] == ASSIGNMENT[0], moved

    r = kt.run(ELECTION, "--bootstrap-server", brokers[2].bootstrap, "--election-type", "PREFERRED",
               "--topic", TOPIC, "--partition", "0", timeout=60)
    assert f"Successfully completed leader election (PREFERRED) for partitions {TOPIC}-0" in r.stdout, r.out
    wait_for_leader(survivors, TOPIC, [1], only=[0], timeout=30, what="partition 0 led by broker 1 again")
    assert describe(kt, brokers[3].bootstrap) == before

    r = kt.run(ELECTION, "--bootstrap-server", brokers[3].bootstrap, "--election-type", "PREFERRED",
               "--all-topic-partitions", timeout=60)
    # Kafka's controller leaves out the partitions it was not asked for by name whose election
    # is not needed: nothing elected, nothing listed.
    assert "Successfully completed leader election" not in r.stdout and f"{TOPIC}-" not in r.stdout, r.out

    r = kt.run(ELECTION, "--bootstrap-server", brokers[1].bootstrap, "--election-type", "UNCLEAN",
               "--topic", TOPIC, "--partition", "1", timeout=60)
    assert f"Valid replica already elected for partitions {TOPIC}-1" in r.stdout, r.out
    assert describe(kt, brokers[1].bootstrap) == before
