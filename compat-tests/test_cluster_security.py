"""A cluster whose own traffic is secured as a production Kafka cluster's is: the controller
listener is SASL_SSL with PLAIN (`sasl.mechanism.controller.protocol`), the inter-broker listener
INTERNAL is SASL_SSL with SCRAM-SHA-512 (`sasl.mechanism.inter.broker.protocol`, the credential
formatted into the controller with `--add-scram`), both with host name verification against a
CA's certificate for 127.0.0.1. Brokers register, heartbeat and fetch the metadata log over the
controller listener; followers replicate over INTERNAL (min.insync.replicas=2, so an acks=all
produce needs them); a transaction's markers go from its coordinator to the leaders of other
brokers over INTERNAL too. Cases: a Ketch controller with Ketch brokers; Kafka 4.1's controller
with a Ketch and a Kafka broker; Ketch's controller with a Kafka and a Ketch broker
(KETCH_COMPAT_TARGET=kafka: Kafka everywhere, the first case). Then a broker whose controller
login is wrong never joins. A combined node (`process.roles=broker,controller`) with the same
listeners serves its own broker half and a second broker (`mixed`: of the other kind). Before this, a Ketch broker could only reach PLAINTEXT controller and
inter-broker listeners, and a Ketch controller served PLAINTEXT only.
"""

from __future__ import annotations

import time
import uuid

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import broker_under, create_topic, read_all, wait_for, wait_for_isr
from conftest import TARGET, free_port
from test_sasl import pki  # noqa: F401 (the CA and the brokers' certificate for 127.0.0.1)

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
TOPIC = "secured"


def controller_login(password: str = "admin-secret") -> dict:
    """The controller listener's side, on every node: PLAIN users, and this node's own login."""
    return {
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config":
            f'{PLAIN_MODULE} required username="admin" password="{password}" user_admin="admin-secret";',
    }


def tls(pki) -> dict:
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": pki["broker"],
            "ssl.truststore.type": "PEM", "ssl.truststore.location": pki["ca"]}


def broker_settings(pki, internal_port: int, password: str = "admin-secret") -> dict:
    return {
        **tls(pki),
        **controller_login(password),
        "extra_listeners": {"INTERNAL": ("SASL_SSL", internal_port)},
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL,INTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config":
            f'{SCRAM_MODULE} required username="admin" password="admin-secret";',
        "min.insync.replicas": "2",
        "default.replication.factor": "2",
        "offsets.topic.replication.factor": "2",
        "transaction.state.log.replication.factor": "2",
        "transaction.state.log.min.isr": "2",
        "transaction.state.log.num.partitions": "2",
    }


CASES = [("ketch", ("ketch", "ketch")), ("kafka", ("ketch", "kafka")), ("ketch", ("kafka", "ketch"))]
if TARGET == "kafka":
    CASES = [("kafka", ("kafka", "kafka"))]


@pytest.mark.parametrize("controller,kinds", CASES, ids=lambda v: v if isinstance(v, str) else "+".join(v))
def test_controller_and_inter_broker_traffic_over_sasl_ssl(start_cluster, pki, tmp_path, controller, kinds):  # noqa: F811
    internal = [free_port(), free_port()]  # (never the same port twice)
    nodes = {n: (kind, broker_settings(pki, internal[n - 1])) for n, kind in zip((1, 2), kinds)}
    ctl_overrides = {**tls(pki), **controller_login(), "listener.security.protocol.map": "CONTROLLER:SASL_SSL"}
    c = start_cluster(nodes, controller_overrides=ctl_overrides, parallel=True, kill=True, controller=controller,
                      controller_scram=["SCRAM-SHA-512=[name=admin,password=admin-secret]"])
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    c.wait_registered(admin, timeout=90)
    # Two partitions led by different brokers, each replicated to the other over INTERNAL.
    create_topic(admin, NewTopic(TOPIC, num_partitions=2, replica_assignment=[[1, 2], [2, 1]]), not_yet=39)
    wait_for_isr(admin, TOPIC, [1, 2], timeout=60)
    p = ck.Producer({"bootstrap.servers": c.bootstrap(), "acks": "all", "enable.idempotence": True})
    failed = []
    for i in range(200):
        p.produce(TOPIC, value=b"plain-%d" % i, partition=i % 2,
                  on_delivery=lambda err, _m: failed.append(err) if err else None)
    assert p.flush(60) == 0 and not failed, failed[:3]
    # A transaction across both partitions: its coordinator writes markers to both leaders, one
    # of them on the other broker (over INTERNAL).
    tp = ck.Producer({"bootstrap.servers": c.bootstrap(), "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"})
    tp.init_transactions(60)
    tp.begin_transaction()
    for i in range(20):
        tp.produce(TOPIC, value=b"txn-%d" % i, partition=i % 2)
    tp.commit_transaction(60)
    # Past the commit markers: 100 plain + 10 transactional records + 1 marker per partition.
    got = read_all(c.bootstrap(), TOPIC, {0: 111, 1: 111}, isolation="read_committed", timeout=60)
    for partition in (0, 1):
        values = [v for _, v in got[partition]]
        assert values[:100] == [b"plain-%d" % i for i in range(partition, 200, 2)], partition
        assert values[100:] == [b"txn-%d" % i for i in range(partition, 20, 2)], partition
    # Every broker still in the ISR of both partitions: the followers kept fetching.
    wait_for_isr(admin, TOPIC, [1, 2], timeout=30)
    # A third broker whose controller login is wrong never joins; its log says why.
    kind = kinds[0]
    wrong = broker_under(c.ctl, tmp_path / "wrong", 3, kind, broker_settings(pki, free_port(), password="wrong"))
    c.brokers[3] = wrong  # stopped (and its log reported) with the cluster
    try:
        wrong.start()
    except Exception:  # noqa: BLE001 (a Kafka broker may give up at its start)
        pass
    time.sleep(8)
    assert sorted(admin.list_topics(timeout=10).brokers) == [1, 2]
    log = wrong.log_path.read_text(errors="replace")
    assert "uthentication failed" in log, log[-3000:]


@pytest.mark.parametrize("second", [TARGET, "kafka" if TARGET == "ketch" else "ketch"], ids=["same", "mixed"])
def test_a_combined_node_serves_its_controller_listener_over_sasl_ssl(request, pki, tmp_path, second):  # noqa: F811
    """A combined node (`process.roles=broker,controller`, the target kind) whose controller and
    inter-broker listeners are SASL_SSL: its own broker half and a second broker (`mixed`: of the
    other kind) register through it, and replicate each other over INTERNAL."""
    from cluster import kafka_storage_format
    from test_cluster_combined import KafkaCombined, KetchCombined

    internal = [free_port(), free_port()]  # (never the same port twice)
    spec = "SCRAM-SHA-512=[name=admin,password=admin-secret]"
    settings = broker_settings(pki, internal[0])
    extra = settings.pop("extra_listeners")
    (tmp_path / "node1").mkdir()
    if TARGET == "ketch":
        node1 = KetchCombined(tmp_path / "node1", settings)
        node1.overrides["listeners"] = (f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{node1.controller_port},"
                                        f"INTERNAL://127.0.0.1:{internal[0]}")
        node1.scram = [spec]
    else:
        node1 = KafkaCombined(tmp_path / "node1", settings)
        node1.extra_listeners = extra

        def format_with_scram():
            kafka_storage_format(node1.libs, node1.props_path, node1.cluster_id, "--add-scram", spec)
            node1.formatted = True

        node1._format = format_with_scram
    node2 = broker_under(node1, tmp_path / "node2", 2, second, broker_settings(pki, internal[1]))
    request.node._compat_brokers = [node1, node2]
    try:
        node1.start()
        node2.start()
        servers = f"{node1.bootstrap},{node2.bootstrap}"
        admin = AdminClient({"bootstrap.servers": servers})

        def registered():
            try:
                return sorted(admin.list_topics(timeout=10).brokers) == [1, 2]
            except ck.KafkaException:
                return False

        wait_for(registered, "nodes 1 and 2 in the Metadata", timeout=90)
        create_topic(admin, NewTopic(TOPIC, num_partitions=2, replica_assignment=[[1, 2], [2, 1]]), not_yet=39)
        wait_for_isr(admin, TOPIC, [1, 2], timeout=60)
        p = ck.Producer({"bootstrap.servers": servers, "acks": "all"})
        failed = []
        for i in range(100):
            p.produce(TOPIC, value=b"c-%d" % i, partition=i % 2,
                      on_delivery=lambda err, _m: failed.append(err) if err else None)
        assert p.flush(60) == 0 and not failed, failed[:3]
        got = read_all(servers, TOPIC, {0: 50, 1: 50}, timeout=60)
        for partition in (0, 1):
            assert [v for _, v in got[partition]] == [b"c-%d" % i for i in range(partition, 100, 2)], partition
    finally:
        for node in (node2, node1):
            node.kill9()
