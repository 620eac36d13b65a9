"""Config changes in a KRaft cluster: three brokers of the target kind under a controller of either
kind (`controller` parametrized: `[kafka]` an Apache Kafka 4.1 controller, `[ketch]` Ketch's own,
`process.roles=controller`), changed with Kafka's own `kafka-configs` (kafka.admin.ConfigCommand,
kafka_2.13 4.1) sent to the controller (`--bootstrap-controller`), read back from the controller
and from every broker (`--bootstrap-server`), which apply the controller's ConfigRecords from
their metadata image.

What `kafka-configs --alter` sends: DescribeConfigs of the resource first (it checks that every
name to delete is set), then IncrementalAlterConfigs (SET for --add-config, DELETE for
--delete-config); `--describe` is one DescribeConfigs (dynamic entries only). A topic cannot be
described with `--bootstrap-controller` (the 4.1 tool looks the topic up first, which its admin
client refuses to do on a controller: UnsupportedEndpointTypeException, whatever the controller),
so topics are described through the brokers.

- a topic: --add-config retention.ms and max.message.bytes, both shown as DYNAMIC_TOPIC_CONFIG by
  every broker once it has the change; --delete-config; an invalid
  value, an unknown name and an unknown topic refused with Kafka's exception and message;
- the cluster-wide default of a broker config (`--entity-type brokers --entity-default`): set and
  deleted, shown as DYNAMIC_DEFAULT_BROKER_CONFIG by the controller and by every broker;
- a group's configs (`--entity-type groups`, through a broker: the 4.1 tool lists groups first, which
  a controller does not answer): set, shown as DYNAMIC_GROUP_CONFIG by every broker, an invalid value
  refused by the controller with Kafka's message, deleted.

Each change is also made through a broker (`--bootstrap-server`), which forwards it to the
controller.
"""

from __future__ import annotations

import re
import time

import pytest
from confluent_kafka.admin import AdminClient

from cluster import THREE_BROKER_SETTINGS, THREE_NODES, create_three_way_topic, wait_for
from conftest import TARGET
from kafka_tools import KafkaTools

pytestmark = pytest.mark.timeout(300)

CONFIG_CMD = "kafka.admin.ConfigCommand"  # kafka_2.13 (Scala); kafka-tools 4.1 has no ConfigCommand


@pytest.fixture(params=["kafka", "ketch"])
def controller(request) -> str:
    return request.param


@pytest.fixture
def cluster(start_cluster, controller):
    """A started Cluster (cluster.py): `.ctl` the controller, `.brokers` {node id: broker}."""
    c = start_cluster({n: (TARGET, THREE_BROKER_SETTINGS) for n in THREE_NODES}, parallel=True, kill=True,
                      controller=controller)
    c.wait_registered(AdminClient({"bootstrap.servers": c.bootstrap()}), timeout=60)
    return c


@pytest.fixture
def kt(cluster, kafka_libs, tmp_path):
    return KafkaTools(kafka_libs, cluster.brokers[THREE_NODES[0]], tmp_path)


def via_controller(cluster) -> list[str]:
    return ["--bootstrap-controller", cluster.ctl.bootstrap]


def via_broker(broker) -> list[str]:
    return ["--bootstrap-server", broker.bootstrap]


def describe(kt, via: list[str], entity: list[str], header: str) -> dict[str, tuple[str, list]]:
    """ConfigCommand --describe: {name: (value, [synonym, ...])}, each synonym "SOURCE:name=value"."""
    r = kt.run(CONFIG_CMD, *via, "--describe", *entity)
    assert header in r.stdout, f"--describe {entity}: no {header!r} in\n{r.out}"
    entries = {}
    for line in r.stdout.splitlines():
        m = re.fullmatch(r"  (\S+?)=(.*) sensitive=(?:true|false) synonyms=\{(.*)\}", line)
        if m:
            entries[m.group(1)] = (m.group(2), [s for s in m.group(3).split(", ") if s])
    return entries


def values(entries: dict) -> dict[str, str]:
    return {k: v for k, (v, _) in entries.items()}


def on_every_broker(cluster, kt, entity: list[str], header: str, want: dict[str, str], timeout: float = 30):
    """Until every broker describes `entity` with exactly the dynamic values `want`."""
    for n, broker in cluster.brokers.items():
        wait_for(lambda: values(describe(kt, via_broker(broker), entity, header)) == want,
                 f"broker {n} describes {' '.join(entity)} as {want}", timeout=timeout)


def refused(kt, via: list[str], *args) -> str:
    r = kt.run(CONFIG_CMD, *via, "--alter", *args, check=False)
    assert r.returncode != 0, f"--alter {args} was accepted:\n{r.out}"
    return r.out


def test_topic_config_set_on_the_controller_reaches_every_broker(cluster, kt, controller):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    topic = f"cfg-{int(time.time() * 1000) % 1_000_000}"
    create_three_way_topic(admin, topic, 1)
    entity = ["--entity-type", "topics", "--entity-name", topic]
    header = f"Dynamic configs for topic {topic} are:"
    ctl, broker2 = via_controller(cluster), via_broker(cluster.brokers[2])

    r = kt.run(CONFIG_CMD, *ctl, "--alter", *entity, "--add-config", "retention.ms=123456,max.message.bytes=200000")
    assert f"Completed updating config for topic {topic}." in r.out, r.out
    # min.insync.replicas=2: set at creation (create_three_way_topic).
    on_every_broker(cluster, kt, entity, header,
                    {"retention.ms": "123456", "max.message.bytes": "200000", "min.insync.replicas": "2"})
    got = describe(kt, via_broker(cluster.brokers[THREE_NODES[0]]), entity, header)
    assert got["retention.ms"][1][0] == "DYNAMIC_TOPIC_CONFIG:retention.ms=123456", got

    r = kt.run(CONFIG_CMD, *ctl, "--alter", *entity, "--delete-config", "max.message.bytes")
    assert f"Completed updating config for topic {topic}." in r.out, r.out
    on_every_broker(cluster, kt, entity, header, {"retention.ms": "123456", "min.insync.replicas": "2"})

    # The same through a broker, which forwards to the controller.
    r = kt.run(CONFIG_CMD, *broker2, "--alter", *entity, "--add-config", "segment.ms=3600000",
               "--delete-config", "retention.ms")
    assert f"Completed updating config for topic {topic}." in r.out, r.out
    want = {"segment.ms": "3600000", "min.insync.replicas": "2"}
    on_every_broker(cluster, kt, entity, header, want)

    for via in (ctl, broker2):
        out = refused(kt, via, *entity, "--add-config", "retention.ms=abc")
        assert "InvalidConfigurationException: Invalid value abc for configuration retention.ms" in out, out
        out = refused(kt, via, *entity, "--add-config", "no.such.config=1")
        assert "InvalidConfigurationException: Unknown topic config name: no.such.config" in out, out
        out = refused(kt, via, *entity, "--delete-config", "retention.ms")
        assert "Invalid config(s): retention.ms" in out, out
        out = refused(kt, via, "--entity-type", "topics", "--entity-name", f"{topic}-nope", "--add-config",
                      "retention.ms=1")
        assert "UnknownTopicOrPartitionException" in out, out
    # Nothing refused changed anything.
    on_every_broker(cluster, kt, entity, header, want, timeout=5)


def test_group_config_set_through_a_broker_reaches_every_broker(cluster, kt, controller):
    group = f"cfg-group-{int(time.time() * 1000) % 1_000_000}"
    entity = ["--entity-type", "groups", "--entity-name", group]
    header = f"Dynamic configs for group {group} are:"
    broker2 = via_broker(cluster.brokers[2])

    r = kt.run(CONFIG_CMD, *broker2, "--alter", *entity, "--add-config",
               "consumer.session.timeout.ms=50000,consumer.heartbeat.interval.ms=6000")
    assert f"Completed updating config for group {group}." in r.out, r.out
    want = {"consumer.session.timeout.ms": "50000", "consumer.heartbeat.interval.ms": "6000"}
    on_every_broker(cluster, kt, entity, header, want)
    got = describe(kt, via_broker(cluster.brokers[THREE_NODES[0]]), entity, header)
    assert got["consumer.session.timeout.ms"][1] == ["DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000"], got

    out = refused(kt, broker2, *entity, "--add-config", "consumer.session.timeout.ms=5000")
    assert ("InvalidConfigurationException: consumer.session.timeout.ms must be greater than or equal to "
            "group.consumer.min.session.timeout.ms") in out, out
    out = refused(kt, broker2, *entity, "--add-config", "no.such.config=1")
    assert "InvalidConfigurationException: Unknown group config name: no.such.config" in out, out

    r = kt.run(CONFIG_CMD, *broker2, "--alter", *entity, "--delete-config", "consumer.heartbeat.interval.ms")
    assert f"Completed updating config for group {group}." in r.out, r.out
    on_every_broker(cluster, kt, entity, header, {"consumer.session.timeout.ms": "50000"})


DEFAULT_ENTITY = ["--entity-type", "brokers", "--entity-default"]
DEFAULT_HEADER = "Default configs for brokers in the cluster are:"


def default_value(kt, via: list[str], name: str) -> str | None:
    """The cluster default of broker config `name` as `via` describes it (None: not set)."""
    entries = describe(kt, via, DEFAULT_ENTITY, DEFAULT_HEADER)
    if name not in entries:
        return None
    value, synonyms = entries[name]
    assert synonyms == [f"DYNAMIC_DEFAULT_BROKER_CONFIG:{name}={value}"], entries
    return value


def test_cluster_default_broker_config_reaches_every_broker(cluster, kt, controller):
    """Both controllers also hold a cluster-level min.insync.replicas (Kafka's written at its
    activation when the cluster is formatted with ELR, eligible.leader.replicas.version=1, a Ketch
    controller's with its bootstrap records): only the names set here are looked at."""
    ctl, broker3 = via_controller(cluster), via_broker(cluster.brokers[3])

    def everywhere(name: str, value: str | None):
        assert default_value(kt, ctl, name) == value, f"the controller's cluster default {name}"
        for n, broker in cluster.brokers.items():
            wait_for(lambda: default_value(kt, via_broker(broker), name) == value,
                     f"broker {n} describes the cluster default {name}={value}", timeout=15)

    r = kt.run(CONFIG_CMD, *ctl, "--alter", *DEFAULT_ENTITY, "--add-config", "log.retention.ms=86400001")
    assert "Completed updating default config for brokers in the cluster." in r.out, r.out
    everywhere("log.retention.ms", "86400001")

    # Through a broker, which checks the change against its own configs and forwards it.
    r = kt.run(CONFIG_CMD, *broker3, "--alter", *DEFAULT_ENTITY, "--delete-config", "log.retention.ms",
               "--add-config", "log.retention.bytes=1099511627776")
    assert "Completed updating default config for brokers in the cluster." in r.out, r.out
    everywhere("log.retention.ms", None)
    everywhere("log.retention.bytes", "1099511627776")

    r = kt.run(CONFIG_CMD, *ctl, "--alter", *DEFAULT_ENTITY, "--delete-config", "log.retention.bytes")
    assert "Completed updating default config for brokers in the cluster." in r.out, r.out
    everywhere("log.retention.bytes", None)
    for via in (ctl, broker3):
        out = refused(kt, via, *DEFAULT_ENTITY, "--delete-config", "log.retention.bytes")
        assert "Invalid config(s): log.retention.bytes" in out, out


def test_broker_config_values_are_not_checked_by_the_controller(cluster, kt, controller):
    """Kafka's controller checks a BROKER resource's name only (`ControllerConfigurationValidator`):
    the values, and whether a name may be set dynamically at all, are the forwarding broker's
    checks (`ConfigAdminManager.preprocess`). Sent directly to the controller, a read-only name
    and a bad value are accepted and stored (seen in Kafka's metadata log with DumpLogSegments),
    but described by no node: each ignores what it would refuse. Sent through a broker: refused
    with Kafka's message."""
    ctl, broker1 = via_controller(cluster), via_broker(cluster.brokers[1])
    r = kt.run(CONFIG_CMD, *ctl, "--alter", *DEFAULT_ENTITY, "--add-config", "num.partitions=5,log.retention.ms=abc")
    assert "Completed updating default config for brokers in the cluster." in r.out, r.out
    r = kt.run(CONFIG_CMD, *ctl, "--alter", *DEFAULT_ENTITY, "--add-config", "log.retention.bytes=1099511627776")
    for n, via in [("the controller", ctl), *((f"broker {n}", via_broker(b)) for n, b in cluster.brokers.items())]:
        wait_for(lambda: default_value(kt, via, "log.retention.bytes") == "1099511627776",
                 f"{n} describes the cluster default set after the ignored ones", timeout=15)
        got = describe(kt, via, DEFAULT_ENTITY, DEFAULT_HEADER)
        assert "num.partitions" not in got and "log.retention.ms" not in got, f"{n}: {got}"
    out = refused(kt, broker1, *DEFAULT_ENTITY, "--add-config", "num.partitions=5")
    assert "Cannot update these configs dynamically: Set(num.partitions)" in out, out
    out = refused(kt, broker1, *DEFAULT_ENTITY, "--add-config", "log.retention.ms=abc")
    assert "Invalid value abc for configuration log.retention.ms" in out, out
