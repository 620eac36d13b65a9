"""A quorum of three combined Ketch nodes (issue 15): `process.roles=broker,controller` on three
nodes whose `controller.quorum.voters` names all three, the smallest cluster with no single point
of failure (Kafka's combined mode, as its `config/server.properties` sets a node up, times three).

- The three elect one active controller; `kafka-metadata-quorum --bootstrap-controller describe
  --status` (Apache Kafka 4.1's tool) names it and the three voters; every node's broker half
  registers with it, wherever it is, and is unfenced.
- A topic with replication factor 3 and min.insync.replicas=2 is created and written by an
  idempotent acks=all librdkafka producer.
- The node that leads the quorum is killed (-9), broker and controller at once: the other two
  elect a new controller, its brokers keep theirs (the new controller does not fence them), the
  partitions it led move to them, a new topic is created and written, and every acknowledged
  record is read back once at its offset.
- The killed node restarts, rejoins the quorum (MaxFollowerLag 0) and every ISR.

Ketch only (the all-Kafka case is Kafka's own test suite).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import bootstrap, create_topic, new_cluster_id, wait_for, wait_for_isr
from conftest import TARGET, free_port
from kafka_tools import KafkaTools
from test_cluster_combined import KetchCombined
from test_cluster_under_kafka_controller import assert_log_is, produce_all
from test_controller_quorum import ids, leader_of, quorum_status, running

pytestmark = pytest.mark.skipif(TARGET != "ketch", reason="a quorum of Ketch combined nodes")

NODES = (1, 2, 3)


class CombinedVoter(KetchCombined):
    """Broker and one of three voters."""

    def __init__(self, workdir, node_id: int, ports: dict[int, int], cluster_id: str):
        super().__init__(workdir, {"min.insync.replicas": "2", "default.replication.factor": "3",
                                   "offsets.topic.replication.factor": "3"})
        self.node_id, self.controller_port, self.cluster_id = node_id, ports[node_id], cluster_id
        self.voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in ports.items())

    @property
    def voter(self) -> str:
        return self.voters

    @property
    def controller(self):
        """This node as quorum_status reaches its controller listener."""
        node = self

        class Controller:
            bootstrap = f"127.0.0.1:{node.controller_port}"
        return Controller

    def settings(self) -> dict[str, str]:
        props = super().settings()
        props["node.id"] = str(self.node_id)
        return props


@pytest.fixture
def combined_quorum(tmp_path):
    ports = {n: free_port() for n in NODES}
    cluster_id = new_cluster_id()
    nodes = {}
    for n in NODES:
        (tmp_path / f"n{n}").mkdir()
        nodes[n] = CombinedVoter(tmp_path / f"n{n}", n, ports, cluster_id)
    with running(list(nodes.values())):
        yield nodes


def registered(admin, want: set[int]):
    try:
        return set(admin.list_topics(timeout=5).brokers) == want
    except Exception:
        return False


def test_three_combined_nodes_survive_the_kill_of_the_one_that_leads(combined_quorum, kafka_libs, tmp_path):
    nodes = combined_quorum
    kt = KafkaTools(kafka_libs, nodes[1], tmp_path)
    controllers = [n.controller for n in nodes.values()]
    servers = bootstrap(nodes.values())
    admin = AdminClient({"bootstrap.servers": servers})

    leader, status = leader_of(kt, controllers)
    assert ids(status["CurrentVoters"]) == set(NODES), status
    wait_for(lambda: registered(admin, set(NODES)), "the three brokers registered and unfenced", timeout=60)

    new = NewTopic("before", num_partitions=3, replication_factor=3)
    create_topic(admin, new, KafkaError.INVALID_REPLICATION_FACTOR, "before created")
    wait_for_isr(admin, "before", list(NODES), count=3, timeout=60)
    acked = produce_all(servers, "before", [b"a%d" % i for i in range(300)], 3)

    # The leading node dies whole: controller and broker.
    killed_at = time.monotonic()
    nodes[leader].kill9()
    survivors = {n: v for n, v in nodes.items() if n != leader}
    second, _ = leader_of(kt, [v.controller for v in survivors.values()], not_=leader)
    servers = bootstrap(survivors.values())
    admin = AdminClient({"bootstrap.servers": servers})
    wait_for_isr(admin, "before", sorted(survivors), count=3, timeout=60)
    new = NewTopic("after", num_partitions=3, replication_factor=2)
    create_topic(admin, new, KafkaError.INVALID_REPLICATION_FACTOR, "after created under the new controller",
                 timeout=60)
    wait_for_isr(admin, "after", sorted(survivors), count=3, timeout=60)
    print(f"kill -9 of node {leader} to a topic created under node {second}: {time.monotonic() - killed_at:.1f} s")
    assert registered(admin, set(survivors)), "a surviving broker was fenced"
    acked += produce_all(servers, "before", [b"b%d" % i for i in range(300)], 3)
    acked_after = produce_all(servers, "after", [b"c%d" % i for i in range(300)], 3)

    # Back: it rejoins the quorum and every ISR.
    nodes[leader].start()

    def caught_up():
        s = quorum_status(kt, controllers)
        return s if s.get("MaxFollowerLag") == "0" and ids(s.get("CurrentVoters", "[]")) == set(NODES) else None
    wait_for(caught_up, "the restarted node caught up with the quorum", timeout=60)
    servers = bootstrap(nodes.values())
    admin = AdminClient({"bootstrap.servers": servers})
    wait_for_isr(admin, "before", list(NODES), count=3, timeout=60)
    assert_log_is(servers, "before", acked, 3)
    assert_log_is(servers, "after", acked_after, 3)
