"""ACLs are cluster metadata (Kafka 4.1 KRaft): with Kafka's StandardAuthorizer on every node, an ACL
created through broker 1 (`CreateAcls`, forwarded to the controller, which writes an
AccessControlEntryRecord) is enforced by broker 2, which authorizes with the ACLs of its metadata
image, and listed by it (`DescribeAcls`); deleted through broker 2, it stops being enforced on
broker 1. Principals come from SASL/PLAIN logins (`User:alice`, `User:admin`) on each broker's
SASL_PLAINTEXT listener; the brokers' own PLAINTEXT traffic is `User:ANONYMOUS`, a super user with
`User:admin`. Under either controller (`[kafka]` Apache Kafka 4.1's, `[ketch]` Ketch's, which
writes the records itself, `controller::acls`); brokers of the target kind (KETCH_COMPAT_TARGET=
kafka: Kafka's). Before Ketch's cluster brokers read the image's ACLs, each kept its own ACL file:
an ACL made through one broker was unknown to the others.
"""

from __future__ import annotations

import confluent_kafka as ck
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)

from cluster import create_topic, wait_for, wait_for_isr
from conftest import TARGET, free_port

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS;User:admin",
}
TOPIC = "acl-orders"


def sasl_broker(port: int) -> dict:
    return {
        **AUTHORIZER,
        "extra_listeners": {"SASL_PLAINTEXT": ("SASL_PLAINTEXT", port)},
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'{PLAIN_MODULE} required user_admin="admin-secret" user_alice="alice-secret";',
    }


def client(port: int, user: str) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret"}


def alice_writes(port: int) -> str | None:
    """None when alice's record is acknowledged, else its error."""
    outcome = []
    p = Producer({**client(port, "alice"), "acks": "all", "message.timeout.ms": 5000, "retries": 0})
    p.produce(TOPIC, b"from-alice", on_delivery=lambda err, _m: outcome.append(err))
    p.flush(10)
    if not outcome:
        return "no delivery report"
    return None if outcome[0] is None else outcome[0].name()


@pytest.mark.parametrize("controller", ["kafka", "ketch"])
def test_acls_made_through_one_broker_are_enforced_by_another(start_cluster, controller):
    p1, p2 = free_port(), free_port()
    c = start_cluster({1: (TARGET, sasl_broker(p1)), 2: (TARGET, sasl_broker(p2))}, kill=True,
                      controller_overrides=AUTHORIZER, controller=controller)
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    c.wait_registered(admin, timeout=60)
    create_topic(admin, NewTopic(TOPIC, num_partitions=1, replication_factor=2),
                 ck.KafkaError.INVALID_REPLICATION_FACTOR)
    wait_for_isr(admin, TOPIC, [1, 2], timeout=60)
    assert "TOPIC_AUTHORIZATION_FAILED" in (alice_writes(p2) or ""), "no ACL yet"

    admin1 = AdminClient(client(p1, "admin"))
    bindings = [AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*", op,
                           AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.DESCRIBE)]
    for f in admin1.create_acls(bindings).values():
        f.result(timeout=30)
    wait_for(lambda: alice_writes(p2) is None, "alice writes through broker 2", timeout=30)

    admin2 = AdminClient(client(p2, "admin"))
    alice_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None,
                                    AclOperation.ANY, AclPermissionType.ANY)
    listed = admin2.describe_acls(alice_filter).result(timeout=30)
    assert sorted(str(b.operation) for b in listed) == sorted(str(b.operation) for b in bindings), listed
    deleted = admin2.delete_acls([alice_filter])[alice_filter].result(timeout=30)
    assert len(deleted) == 2, deleted
    wait_for(lambda: "TOPIC_AUTHORIZATION_FAILED" in (alice_writes(p1) or ""),
             "alice refused on broker 1 once the ACLs are deleted", timeout=30)
    assert admin1.describe_acls(alice_filter).result(timeout=30) == [] or wait_for(
        lambda: admin1.describe_acls(alice_filter).result(timeout=30) == [], "no ACL left on broker 1")


def alice_creates(port: int, topic: str) -> str:
    """The outcome of alice's CreateTopics through the broker on `port`: NONE or the error's name."""
    admin = AdminClient(client(port, "alice"))
    try:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
        return "NONE"
    except ck.KafkaException as e:
        return e.args[0].name()


@pytest.mark.parametrize("controller", ["kafka", "ketch"])
def test_the_controller_authorizes_the_client_a_kafka_broker_forwards_for(start_cluster, controller):
    """A Kafka 4.1 broker does not authorize CreateTopics itself: it forwards it in an Envelope
    with the client's principal, and the controller decides with its ACLs (Kafka's
    `ControllerApis`). So under either controller: alice, without CREATE, is refused with
    TOPIC_AUTHORIZATION_FAILED, and nothing is created; once an ACL lets her create topics
    prefixed `alice-`, her topic is created and another is still refused; the broker (User:ANONYMOUS,
    a super user) forwards for her (CLUSTER_ACTION on the Envelope)."""
    port = free_port()
    c = start_cluster({1: ("kafka", sasl_broker(port))}, kill=True, controller_overrides=AUTHORIZER,
                      controller=controller)
    admin = AdminClient(client(port, "admin"))
    c.wait_registered(admin, timeout=60)
    assert alice_creates(port, "alice-orders") == "TOPIC_AUTHORIZATION_FAILED"
    assert "alice-orders" not in admin.list_topics(timeout=10).topics
    binding = AclBinding(ResourceType.TOPIC, "alice-", ResourcePatternType.PREFIXED, "User:alice", "*",
                         AclOperation.CREATE, AclPermissionType.ALLOW)
    admin.create_acls([binding])[binding].result(timeout=30)
    wait_for(lambda: alice_creates(port, "alice-orders") in ("NONE", "TOPIC_ALREADY_EXISTS"),
             "alice creates her topic once the ACL is in", timeout=30)
    assert alice_creates(port, "bobs-orders") == "TOPIC_AUTHORIZATION_FAILED"
    # (The broker's metadata shows the topic once it has caught up with the controller's record.)
    wait_for(lambda: "alice-orders" in admin.list_topics(timeout=10).topics, "alice-orders in the broker's metadata",
             timeout=30)
