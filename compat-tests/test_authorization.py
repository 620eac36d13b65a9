"""ACLs enforced on every request, as Kafka 4.1's KafkaApis does, with TLS client certificates as
principals (also run against Kafka 4.1: KETCH_COMPAT_TARGET=kafka).

The broker has Kafka's StandardAuthorizer, a PLAINTEXT listener (its own, `User:ANONYMOUS`, a
super user so that Kafka's controller and broker talk to each other) and an SSL listener that
requires a client certificate. Three certificates: `CN=admin` (in `super.users`), `CN=alice`
and `CN=bob` (ordinary principals `User:CN=alice`, `User:CN=bob`). The admin creates topics and
ACLs with the AdminClient (librdkafka); alice and bob then run identical client scenarios
(librdkafka producers, consumers, transactions, AdminClient calls; Kafka's own
`kafka-consumer-groups` tool; the Java client through ketch.compat.AuthzProbe: describeTopics /
describeCluster with includeAuthorizedOperations, an idempotent producer, a consumer group, all
over mutual TLS) whose outcomes, error and exception names included, are
collected and compared with one expected table: both brokers must give exactly these results.
Also host ACLs (bob's WRITE from another host does not count, from 127.0.0.1 it does, a DENY
from 127.0.0.1 wins) and KIP-430's authorized operations of a group.
Outcomes that depend on an ACL just created are polled until they change (Kafka applies ACL
changes to its authorizer asynchronously); refusals are taken before any ACL allows them.
"""

from __future__ import annotations

import time

import pytest

from conftest import free_port, run_logged
from kafka_tools import KafkaTools

ck = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")
from test_tls import _cert, _key, _pem_cert, _pem_key  # noqa: E402

from confluent_kafka import TopicCollection, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

GROUPS_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
WHO = ("admin", "alice", "bob")


@pytest.fixture
def certs(tmp_path):
    """PEM files: ca, broker (key + chain), and <who>.crt / <who>.key / <who>.keystore for WHO."""
    ca_key = _key()
    ca = _cert("authz CA", ca_key, None, None, ca=True)
    import ipaddress

    from cryptography import x509

    broker_key = _key()
    broker = _cert("broker", broker_key, ca.subject, ca_key,
                   sans=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    files = {"ca.pem": _pem_cert(ca), "broker.pem": _pem_key(broker_key) + _pem_cert(broker) + _pem_cert(ca)}
    for who in WHO:
        key = _key()
        cert = _cert(who, key, ca.subject, ca_key)
        files[f"{who}.crt"] = _pem_cert(cert)
        files[f"{who}.key"] = _pem_key(key)
        files[f"{who}.keystore"] = _pem_key(key) + _pem_cert(cert)  # for the Java tool
    paths = {}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        paths[name] = str(tmp_path / name)
    return paths


def until(f, want, timeout=30.0):
    """f() polled until want(result) or the timeout; the last result."""
    deadline = time.monotonic() + timeout
    while True:
        got = f()
        if want(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


class Scenario:
    def __init__(self, bootstrap: str, certs: dict):
        self.bootstrap = bootstrap
        self.certs = certs
        self.admins: dict[str, AdminClient] = {}  # kept: a future dies with its client

    def conf(self, who: str) -> dict:
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": self.certs["ca.pem"],
            "ssl.certificate.location": self.certs[f"{who}.crt"],
            "ssl.key.location": self.certs[f"{who}.key"],
        }

    def admin(self, who: str) -> AdminClient:
        if who not in self.admins:
            self.admins[who] = AdminClient(self.conf(who))
        return self.admins[who]

    def allow(self, principal: str, resource_type, name: str, *operations) -> None:
        bindings = [AclBinding(resource_type, name, ResourcePatternType.LITERAL, f"User:CN={principal}", "*", op,
                               AclPermissionType.ALLOW) for op in operations]
        for f in self.admin("admin").create_acls(bindings).values():
            f.result(timeout=30)

    def acl(self, principal: str, name: str, operation, host: str, permission) -> None:
        """One ACL on topic `name` for `principal` from `host`."""
        binding = AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, f"User:CN={principal}", host,
                             operation, permission)
        for f in self.admin("admin").create_acls([binding]).values():
            f.result(timeout=30)

    def group_operations(self, who: str, group: str) -> list[str] | str:
        fs = self.admin(who).describe_consumer_groups([group], include_authorized_operations=True)
        try:
            ops = fs[group].result(timeout=20).authorized_operations or []
        except ck.KafkaException as e:
            return e.args[0].name()
        return sorted(op.name for op in ops)

    def produce(self, who: str, topic: str, **extra) -> str:
        """Outcome of producing one record: OK, the delivery error's name, or `fatal <name>`."""
        fatal = []

        def on_error(e):
            if e.fatal():
                fatal.append(e.name())

        p = ck.Producer({**self.conf(who), "message.timeout.ms": 8000, "enable.idempotence": False, **extra,
                         "error_cb": on_error})
        results = []
        try:
            p.produce(topic, key=b"k", value=f"from {who}".encode(), on_delivery=lambda e, _m: results.append(e))
            p.flush(20)
        except (ck.KafkaException, SystemError) as e:
            # A fatal error raised from a callback surfaces as a SystemError around it.
            cause = e if isinstance(e, ck.KafkaException) else (e.__cause__ or e.__context__)
            fatal.append(cause.args[0].name() if isinstance(cause, ck.KafkaException) else repr(e))
        if fatal:
            return f"fatal {fatal[0]}"
        assert results, "no delivery report"
        return "OK" if results[0] is None else results[0].name()

    def consume(self, who: str, topic: str, group: str) -> str:
        """Outcome of consuming `topic` in `group`: OK once a record arrives, else the first error."""
        c = ck.Consumer({**self.conf(who), "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
        c.subscribe([topic])
        try:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None:
                    continue
                if m.error() is not None:
                    if m.error().code() == ck.KafkaError._PARTITION_EOF:
                        continue
                    return m.error().name()
                c.commit(message=m, asynchronous=False)
                return "OK"
            return "nothing"
        finally:
            c.close()

    def transaction(self, who: str, txn_id: str, topic: str) -> str:
        p = ck.Producer({**self.conf(who), "transactional.id": txn_id, "transaction.timeout.ms": 10000})
        try:
            p.init_transactions(20)
            p.begin_transaction()
            p.produce(topic, value=b"in a transaction")
            p.commit_transaction(20)
            return "OK"
        except ck.KafkaException as e:
            return e.args[0].name()

    def visible_topics(self, who: str) -> list[str]:
        md = self.admin(who).list_topics(timeout=10)
        return sorted(t for t in md.topics if not t.startswith("__"))

    def named_topic_error(self, who: str, topic: str) -> str:
        md = self.admin(who).list_topics(topic=topic, timeout=10)
        err = md.topics[topic].error
        return "OK" if err is None else err.name()

    def admin_error(self, future) -> str:
        try:
            future.result(timeout=20)
            return "OK"
        except ck.KafkaException as e:
            return e.args[0].name()

    def topic_operations(self, who: str, topic: str) -> list[str]:
        fs = self.admin(who).describe_topics(TopicCollection([topic]), include_authorized_operations=True)
        ops = fs[topic].result(timeout=20).authorized_operations or []
        return sorted(op.name for op in ops)

    def cluster_operations(self, who: str) -> list[str]:
        ops = self.admin(who).describe_cluster(include_authorized_operations=True).result(timeout=20)
        return sorted(op.name for op in (ops.authorized_operations or []))

    def listed_groups(self, who: str) -> list[str]:
        result = self.admin(who).list_consumer_groups().result(timeout=20)
        return sorted(g.group_id for g in result.valid)


def more_admin_outcomes(s: Scenario) -> dict[str, object]:
    """alice's AdminClient calls once she may READ and WRITE `orders` and READ group g1."""
    a = s.admin("alice")
    out: dict[str, object] = {}
    f = a.create_partitions([admin_mod.NewPartitions("orders", 2)])["orders"]
    out["alice create partitions"] = s.admin_error(f)
    orders_res = ConfigResource(ConfigResource.Type.TOPIC, "orders")
    out["alice describe configs orders"] = s.admin_error(a.describe_configs([orders_res])[orders_res])
    alter = ConfigResource(ConfigResource.Type.TOPIC, "orders", incremental_configs=[
        admin_mod.ConfigEntry("retention.ms", "100000",
                              incremental_operation=admin_mod.AlterConfigOpType.SET)])
    out["alice incremental alter configs"] = s.admin_error(a.incremental_alter_configs([alter])[alter])
    for group in ("g1", "admin-group"):
        req = [ck.ConsumerGroupTopicPartitions(group)]
        try:
            result = a.list_consumer_group_offsets(req)[group].result(timeout=20)
            out[f"alice offsets of {group}"] = sorted(tp.topic for tp in result.topic_partitions)
        except ck.KafkaException as e:
            out[f"alice offsets of {group}"] = e.args[0].name()
    for topic in ("orders", "secret"):
        tp = TopicPartition(topic, 0)
        f = a.list_offsets({tp: admin_mod.OffsetSpec.latest()})[tp]
        out[f"alice list offsets {topic}"] = s.admin_error(f)
    out["alice delete group g1"] = s.admin_error(a.delete_consumer_groups(["g1"])["g1"])
    return out


def java_props(certs: dict, who: str, tmp_path) -> str:
    """A Java client config for `who` over mutual TLS (PEM truststore and keystore)."""
    props = tmp_path / f"{who}.properties"
    props.write_text("security.protocol=SSL\nssl.truststore.type=PEM\n"
                     f"ssl.truststore.location={certs['ca.pem']}\nssl.keystore.type=PEM\n"
                     f"ssl.keystore.location={certs[f'{who}.keystore']}\n")
    return str(props)


def java_probe(jar, bootstrap: str, props: str, *args) -> dict[str, str]:
    """ketch.compat.AuthzProbe's `key=value` lines (see its comment)."""
    r = run_logged(["java", "-cp", jar, "ketch.compat.AuthzProbe", bootstrap, props, *args], timeout=120,
                   what=f"java AuthzProbe {' '.join(args)}")
    assert r.returncode == 0, r.stdout + r.stderr
    return dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)


def test_acls_are_enforced_on_every_request(start_broker, kafka_libs, java_compat_jar, certs, tmp_path):
    mtls_port = free_port()
    broker = start_broker(
        {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:CN=admin;User:ANONYMOUS",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": certs["broker.pem"],
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": certs["ca.pem"],
            "listener.name.mtls.ssl.client.auth": "required",
            "auto.create.topics.enable": "false",
            "group.initial.rebalance.delay.ms": "0",
        },
        extra_listeners={"MTLS": ("SSL", mtls_port)},
    )
    s = Scenario(f"127.0.0.1:{mtls_port}", certs)
    admin = s.admin("admin")
    for f in admin.create_topics([NewTopic(t, 1, 1) for t in ("orders", "secret")]).values():
        f.result(timeout=30)
    assert s.produce("admin", "secret") == "OK"
    assert s.consume("admin", "secret", "admin-group") == "OK"
    broker_id = next(iter(admin.list_topics(timeout=10).brokers))
    got: dict[str, object] = {}

    # Nothing allowed yet.
    got["alice sees topics"] = s.visible_topics("alice")
    got["alice metadata secret"] = s.named_topic_error("alice", "secret")
    got["alice produce orders"] = s.produce("alice", "orders")
    # bob may describe the topic, write to none: an idempotent producer is refused its producer id.
    s.allow("bob", ResourceType.TOPIC, "orders", AclOperation.DESCRIBE)
    got["bob idempotent produce"] = until(lambda: s.produce("bob", "orders", **{"enable.idempotence": True}),
                                          lambda r: r != "TOPIC_AUTHORIZATION_FAILED")
    got["alice create topic"] = s.admin_error(s.admin("alice").create_topics([NewTopic("alice-new", 1, 1)])["alice-new"])
    got["alice delete secret"] = s.admin_error(s.admin("alice").delete_topics(["secret"])["secret"])
    got["alice describe configs secret"] = s.admin_error(
        s.admin("alice").describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "secret")])[
            ConfigResource(ConfigResource.Type.TOPIC, "secret")])
    broker_res = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
    got["alice describe broker configs"] = s.admin_error(s.admin("alice").describe_configs([broker_res])[broker_res])
    got["alice cluster operations"] = s.cluster_operations("alice")
    got["alice transaction"] = s.transaction("alice", "tx-a", "orders")

    # WRITE on the topic: produce is allowed (and an idempotent producer: WRITE on some topic).
    s.allow("alice", ResourceType.TOPIC, "orders", AclOperation.WRITE)
    got["alice produce orders, WRITE"] = until(lambda: s.produce("alice", "orders"), lambda r: r == "OK")
    got["alice idempotent produce, WRITE"] = s.produce("alice", "orders", **{"enable.idempotence": True})
    got["alice delete records"] = s.admin_error(
        s.admin("alice").delete_records([TopicPartition("orders", 0, 1)])[TopicPartition("orders", 0, 1)])
    # READ on the topic, not yet on the group; then on the group.
    s.allow("alice", ResourceType.TOPIC, "orders", AclOperation.READ)
    got["alice consume, topic READ only"] = until(lambda: s.consume("alice", "orders", "g1"),
                                                  lambda r: r != "TOPIC_AUTHORIZATION_FAILED")
    s.allow("alice", ResourceType.GROUP, "g1", AclOperation.READ)
    got["alice consume, topic and group READ"] = until(lambda: s.consume("alice", "orders", "g1"),
                                                       lambda r: r == "OK")
    # A transactional id needs WRITE.
    s.allow("alice", ResourceType.TRANSACTIONAL_ID, "tx-a", AclOperation.WRITE)
    got["alice transaction, WRITE"] = until(lambda: s.transaction("alice", "tx-a", "orders"), lambda r: r == "OK")

    # What alice may see and do now.
    got["alice sees topics, after"] = s.visible_topics("alice")
    got["alice topic operations orders"] = s.topic_operations("alice", "orders")
    got["admin topic operations orders"] = s.topic_operations("admin", "orders")
    got["admin cluster operations"] = s.cluster_operations("admin")
    got["alice lists groups"] = s.listed_groups("alice")
    got["admin lists groups"] = s.listed_groups("admin")
    describe = s.admin("alice").describe_consumer_groups(["admin-group"])["admin-group"]
    got["alice describe admin-group"] = s.admin_error(describe)
    got.update(more_admin_outcomes(s))

    # Kafka's own kafka-consumer-groups over mutual TLS as alice.
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    alice_props = java_props(certs, "alice", tmp_path)
    r = kt.run(GROUPS_TOOL, "--bootstrap-server", s.bootstrap, "--list", "--command-config", alice_props)
    got["kafka-consumer-groups --list as alice"] = sorted(r.stdout.split())
    # The Java client (describeTopics goes by DescribeTopicPartitions), as alice and as bob.
    got["java as alice"] = java_probe(java_compat_jar, s.bootstrap, alice_props, "orders", "g1", "secret")
    got["java as bob"] = java_probe(java_compat_jar, s.bootstrap, java_props(certs, "bob", tmp_path), "orders",
                                    "g-bob", "secret")

    # Host ACLs (the client's address as Java writes it): bob's WRITE from another host does not
    # count, from 127.0.0.1 it does, and a DENY from 127.0.0.1 wins over it.
    s.acl("bob", "orders", AclOperation.WRITE, "10.9.9.9", AclPermissionType.ALLOW)
    got["bob produce, WRITE from 10.9.9.9"] = s.produce("bob", "orders")
    s.acl("bob", "orders", AclOperation.WRITE, "127.0.0.1", AclPermissionType.ALLOW)
    got["bob produce, WRITE from 127.0.0.1"] = until(lambda: s.produce("bob", "orders"), lambda r: r == "OK")
    s.acl("bob", "orders", AclOperation.WRITE, "127.0.0.1", AclPermissionType.DENY)
    got["bob produce, DENY from 127.0.0.1"] = until(lambda: s.produce("bob", "orders"), lambda r: r != "OK")
    # KIP-430 for groups: what alice (READ on g1) and admin (super user) may do with g1.
    got["alice group operations g1"] = s.group_operations("alice", "g1")
    got["admin group operations g1"] = s.group_operations("admin", "g1")

    ops_read_write = ["DESCRIBE", "READ", "WRITE"]
    every_topic_op = sorted(["ALTER", "ALTER_CONFIGS", "CREATE", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "READ",
                             "WRITE"])
    every_cluster_op = sorted(["ALTER", "ALTER_CONFIGS", "CLUSTER_ACTION", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS",
                               "IDEMPOTENT_WRITE"])
    want = {
        "alice sees topics": [],
        "alice metadata secret": "TOPIC_AUTHORIZATION_FAILED",
        "alice produce orders": "TOPIC_AUTHORIZATION_FAILED",
        "bob idempotent produce": "fatal CLUSTER_AUTHORIZATION_FAILED",
        "alice create topic": "TOPIC_AUTHORIZATION_FAILED",
        "alice delete secret": "TOPIC_AUTHORIZATION_FAILED",
        "alice describe configs secret": "TOPIC_AUTHORIZATION_FAILED",
        "alice describe broker configs": "CLUSTER_AUTHORIZATION_FAILED",
        "alice cluster operations": [],
        "alice transaction": "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        "alice produce orders, WRITE": "OK",
        "alice idempotent produce, WRITE": "OK",
        "alice delete records": "TOPIC_AUTHORIZATION_FAILED",
        "alice consume, topic READ only": "GROUP_AUTHORIZATION_FAILED",
        "alice consume, topic and group READ": "OK",
        "alice transaction, WRITE": "OK",
        "alice sees topics, after": ["orders"],
        "alice topic operations orders": ops_read_write,
        "admin topic operations orders": every_topic_op,
        "admin cluster operations": every_cluster_op,
        "alice lists groups": ["g1"],
        "admin lists groups": ["admin-group", "g1"],
        "alice describe admin-group": "GROUP_AUTHORIZATION_FAILED",
        "kafka-consumer-groups --list as alice": ["g1"],
        "alice create partitions": "TOPIC_AUTHORIZATION_FAILED",
        "alice describe configs orders": "TOPIC_AUTHORIZATION_FAILED",
        "alice incremental alter configs": "TOPIC_AUTHORIZATION_FAILED",
        "alice offsets of g1": ["orders"],
        "alice offsets of admin-group": "GROUP_AUTHORIZATION_FAILED",
        "alice list offsets orders": "OK",
        # librdkafka looks the leader up first: the topic is not in the metadata it may see.
        "alice list offsets secret": "_NOENT",
        "alice delete group g1": "GROUP_AUTHORIZATION_FAILED",
        "bob produce, WRITE from 10.9.9.9": "TOPIC_AUTHORIZATION_FAILED",
        "bob produce, WRITE from 127.0.0.1": "OK",
        "bob produce, DENY from 127.0.0.1": "TOPIC_AUTHORIZATION_FAILED",
        "alice group operations g1": ["DESCRIBE", "READ"],
        "admin group operations g1": ["ALTER_CONFIGS", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "READ"],
        "java as alice": {
            "topic_operations": "DESCRIBE,READ,WRITE",
            "describe_hidden": "TopicAuthorizationException",
            "cluster_operations": "",
            "list_topics": "orders",
            "idempotent_produce": "OK",
            "consume": "OK",
        },
        "java as bob": {
            "topic_operations": "DESCRIBE",
            "describe_hidden": "TopicAuthorizationException",
            "cluster_operations": "",
            "list_topics": "orders",
            "idempotent_produce": "ClusterAuthorizationException",
            "consume": "GroupAuthorizationException",
        },
    }
    diff = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
    assert not diff, "outcome (got, want): " + "\n".join(f"{k}: {g!r} != {w!r}" for k, (g, w) in diff.items())
