"""A combined node (`process.roles=broker,controller`, Kafka's combined mode: the only voter of the
quorum and a broker) that other brokers join, as Kafka's own `config/server.properties` sets a node
up and as small clusters are run: node 1 combined, nodes 2 and 3 brokers (`process.roles=broker`)
whose `controller.quorum.voters` name node 1's controller listener.

With the target Ketch, node 1 is a Ketch combined node; the `mixed` runs make node 3 an Apache
Kafka 4.1 broker (a Kafka broker joining a Ketch cluster, as a migration would). With
KETCH_COMPAT_TARGET=kafka, node 1 is a Kafka combined node and `mixed` makes node 3 a Ketch broker:
Kafka shows what each step answers.

- Joined, then a broker killed: all three nodes register (Metadata lists 1, 2 and 3), a
  replication-factor-3 topic (min.insync.replicas=2) gets the ISR [1, 2, 3]; an idempotent acks=all
  producer writes 300 records; broker 2 is killed (-9): the controller in node 1 fences it and
  leadership and the ISR move to 1 and 3; 300 more records are acknowledged; every acknowledged
  record is read back at its offset, none twice. `kafka-metadata-quorum --bootstrap-controller`
  names node 1 the leader and only voter. Before the kill, a producer writing to a topic nobody
  created, through broker 2, has it auto-created (one partition, replication factor 3 from
  `default.replication.factor`) and its records read back.
- The combined node restarted: SIGTERM to node 1 is a controlled shutdown of its broker half
  through its own controller (its leaderships move to 2 and 3, it leaves the ISR) before the
  controller stops; with no controller running, brokers 2 and 3 keep acknowledging the acks=all
  writes of a producer that has its producer id (new ids need the controller: Kafka's brokers
  answer COORDINATOR_LOAD_IN_PROGRESS meanwhile); node 1 restarted catches up and is back in every
  ISR, the producer writes on; every acknowledged record is there, none twice.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka.admin import AdminClient

from cluster import (THREE_BROKER_SETTINGS, KetchController, bootstrap, broker_under, create_three_way_topic,
                     kafka_storage_format, new_cluster_id, wait_for, wait_for_partitions)
from conftest import TARGET, Broker, KafkaBroker, free_port
from kafka_tools import KafkaTools
from test_cluster_under_kafka_controller import Acks, assert_log_is, idempotent_producer, produce_all

pytestmark = pytest.mark.timeout(300)

QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
OTHER = "kafka" if TARGET == "ketch" else "ketch"


class KetchCombined(KetchController):
    """Node 1 of the target Ketch: broker and the only controller, its controller listener on a port
    fixed for its life (the brokers are configured with it), its broker listener ephemeral."""

    def __init__(self, workdir, overrides=None):
        super().__init__(workdir, overrides)
        self.controller_port, self.port = self.port, None

    @property
    def bootstrap(self) -> str:
        return Broker.bootstrap.fget(self)

    @property
    def voter(self) -> str:
        return f"1@127.0.0.1:{self.controller_port}"

    def settings(self) -> dict[str, str]:
        props = super().settings()
        props.update({
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": self.voter,
            # PLAINTEXT first: start() reads the first listening line
            "listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{self.controller_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "broker.heartbeat.interval.ms": "500",
        })
        props.update(self.overrides)
        return props


class KafkaCombined(KafkaBroker):
    """Node 1 as Apache Kafka 4.1 runs it combined, formatted with its own cluster id; the controller
    port is fixed for its life."""

    def __init__(self, workdir, overrides=None):
        super().__init__(workdir, overrides)
        self.cluster_id = new_cluster_id()
        self.fixed_controller_port = free_port()

    @property
    def voter(self) -> str:
        return f"1@127.0.0.1:{self.fixed_controller_port}"

    def _pick_ports(self) -> None:
        self.controller_port = self.fixed_controller_port
        self.port = free_port()
        while self.port == self.controller_port:
            self.port = free_port()

    def _format(self) -> None:
        kafka_storage_format(self.libs, self.props_path, self.cluster_id)
        self.formatted = True


@pytest.fixture
def combined_cluster(request, tmp_path):
    """Factory: combined_cluster(third) -> {1: combined node of the target kind, 2: broker of the
    target kind, 3: broker of kind `third`}, all registered; killed (-9) at the end."""
    nodes: dict = {}
    pool = ThreadPoolExecutor(2)  # lives until the end: children die with the thread that spawned them

    def factory(third: str) -> dict:
        (tmp_path / "node1").mkdir()
        kind = KetchCombined if TARGET == "ketch" else KafkaCombined
        nodes[1] = kind(tmp_path / "node1", THREE_BROKER_SETTINGS)
        nodes[2] = broker_under(nodes[1], tmp_path / "node2", 2, TARGET, THREE_BROKER_SETTINGS)
        nodes[3] = broker_under(nodes[1], tmp_path / "node3", 3, third, THREE_BROKER_SETTINGS)
        request.node._compat_brokers = list(nodes.values())
        nodes[1].start()
        list(pool.map(lambda n: nodes[n].start(), [2, 3]))
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes.values())})

        def registered():
            try:
                return sorted(admin.list_topics(timeout=10).brokers) == [1, 2, 3]
            except Exception:  # e.g. librdkafka's _PARTIAL while the brokers start serving
                return False

        wait_for(registered, "nodes 1, 2 and 3 in the Metadata", timeout=60)
        return nodes

    yield factory
    for n in sorted(nodes, reverse=True):
        nodes[n].kill9()
    pool.shutdown()


def quorum_status(kt: KafkaTools, node1) -> dict[str, str]:
    """`kafka-metadata-quorum --bootstrap-controller <node 1's controller listener> describe --status`."""
    addr = node1.voter.split("@", 1)[1]
    r = kt.run(QUORUM, "--bootstrap-controller", addr, "describe", "--status", timeout=60)
    return {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in r.stdout.splitlines() if ":" in line)}


@pytest.mark.parametrize("third", [TARGET, OTHER], ids=["same", "mixed"])
def test_brokers_join_a_combined_node_and_outlive_a_broker_kill(combined_cluster, kafka_libs, tmp_path, third):
    nodes = combined_cluster(third)
    admin = AdminClient({"bootstrap.servers": bootstrap(nodes.values())})
    create_three_way_topic(admin, "joined", 3)
    acked = produce_all(bootstrap(nodes.values()), "joined", [b"a%d" % i for i in range(300)], 3)

    # Auto-creation through a broker of the target kind (Metadata for a topic nobody created):
    # num.partitions (1) and default.replication.factor (3), as Kafka's AutoTopicCreationManager asks.
    made = produce_all(nodes[2].bootstrap, "auto-made", [b"m%d" % i for i in range(10)], 1)
    states, _ = wait_for_partitions(admin, "auto-made", isr=[1, 2, 3], count=1, what="auto-made in sync")
    assert_log_is(bootstrap(nodes.values()), "auto-made", made, 1)

    nodes[2].kill9()
    survivors = bootstrap([nodes[1], nodes[3]])
    wait_for_partitions(AdminClient({"bootstrap.servers": survivors}), "joined", leaders=[1, 3], isr=[1, 3],
                        what="leaders and ISR of joined on 1 and 3 after the kill of 2", timeout=60)
    acked += produce_all(survivors, "joined", [b"b%d" % i for i in range(300)], 3)
    assert_log_is(survivors, "joined", acked, 3)
    assert len({v for _, _, v in acked}) == 600

    status = quorum_status(KafkaTools(kafka_libs, nodes[1], tmp_path), nodes[1])
    print(f"--status: {status}")
    assert status["LeaderId"] == "1", status
    assert sorted(int(n) for n in re.findall(r'"id":\s*(\d+)', status["CurrentVoters"])) == [1], status


def send(producer, acks: Acks, topic: str, values: list, partitions: int) -> None:
    """Writes `values` round robin and waits for every delivery report."""
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % partitions, on_delivery=acks)
        producer.poll(0)
    assert producer.flush(60) == 0, "records neither delivered nor failed"
    assert acks.errors == [], acks.errors


def test_a_combined_node_restarts_while_its_brokers_serve(combined_cluster):
    nodes = combined_cluster(TARGET)
    admin = AdminClient({"bootstrap.servers": bootstrap(nodes.values())})
    create_three_way_topic(admin, "restarted", 3)
    # One producer throughout: with no controller running a broker cannot hand out new producer
    # ids (Kafka's answer COORDINATOR_LOAD_IN_PROGRESS until it can), but one that has its id writes on.
    acks = Acks()
    producer = idempotent_producer(bootstrap(nodes.values()))
    send(producer, acks, "restarted", [b"a%d" % i for i in range(200)], 3)

    nodes[1].stop()  # SIGTERM: controlled shutdown, then the controller stops
    others = bootstrap([nodes[2], nodes[3]])
    wait_for_partitions(AdminClient({"bootstrap.servers": others}), "restarted", leaders=[2, 3], isr=[2, 3],
                        what="node 1 moved out of leadership and the ISR", timeout=30)
    send(producer, acks, "restarted", [b"b%d" % i for i in range(200)], 3)

    nodes[1].start()
    admin = AdminClient({"bootstrap.servers": bootstrap(nodes.values())})
    wait_for_partitions(admin, "restarted", isr=[1, 2, 3], what="node 1 back in every ISR", timeout=60)
    send(producer, acks, "restarted", [b"c%d" % i for i in range(200)], 3)
    assert len(acks.acked) == 600
    assert_log_is(bootstrap(nodes.values()), "restarted", acks.acked, 3)
