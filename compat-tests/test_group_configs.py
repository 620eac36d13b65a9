"""Group configs (`kafka-configs --entity-type groups`, Kafka's GroupConfig): per-group overrides of the
broker's `group.consumer.*` settings, run with Kafka 4.1's own ConfigCommand and Java consumers.

- the tool: `--describe --all` lists Kafka 4.1's ten group configs with the broker's defaults;
  `--add-config` / `--delete-config` change them (DYNAMIC_GROUP_CONFIG synonyms), Kafka's validation refuses
  bad values with its messages (unknown names, types, the broker's min/max bounds, session timeout
  above heartbeat interval, share.auto.offset.reset), a group's configs are listed by
  `--describe --entity-type groups`, and they survive a broker restart;
- the effect: a group whose `consumer.heartbeat.interval.ms` is above the broker's has its Java
  consumers heartbeat at its own interval, and one whose `consumer.session.timeout.ms` is below the
  broker's `group.consumer.session.timeout.ms` loses a killed member after its own timeout.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from cli_support import Soft, Tools, assert_in, uid
from test_cli_tools import CONFIG_CMD, config_entries
from test_groups_kip848 import JavaMember, create_topic, wait_for

GROUP_CONFIGS = {
    "consumer.session.timeout.ms": "45000",
    "consumer.heartbeat.interval.ms": "5000",
    "share.session.timeout.ms": "45000",
    "share.heartbeat.interval.ms": "5000",
    "share.record.lock.duration.ms": "30000",
    "share.auto.offset.reset": "latest",
    "share.isolation.level": "read_uncommitted",
    "streams.session.timeout.ms": "45000",
    "streams.heartbeat.interval.ms": "5000",
    "streams.num.standby.replicas": "0",
}


@pytest.fixture
def kt(broker, kafka_libs, tmp_path):
    return Tools(kafka_libs, broker, tmp_path)


@pytest.mark.broker_config(**{"group.consumer.max.session.timeout.ms": "70000"})
def test_kafka_configs_groups(broker, kt):
    soft = Soft()
    group = f"cfg-group-{uid()}"
    ent = ["--entity-type", "groups", "--entity-name", group]
    header = f"Dynamic configs for group {group} are:"

    with soft("--describe --all: every group config with the broker's defaults"):
        e = config_entries(kt.tool(CONFIG_CMD, "--describe", *ent, "--all").stdout, f"All configs for group {group} are:")
        assert {k: v["value"] for k, v in e.items()} == GROUP_CONFIGS, f"--all: {e}"
        assert e["consumer.session.timeout.ms"]["synonyms"] == [("DEFAULT_CONFIG", "consumer.session.timeout.ms=45000")], e
    out = kt.tool(CONFIG_CMD, "--describe", *ent).stdout
    assert_in(f"The group '{group}' doesn't exist and doesn't have dynamic config.", out, "--describe (no configs)")

    r = kt.tool(CONFIG_CMD, "--alter", *ent, "--add-config",
                "consumer.session.timeout.ms=60000,consumer.heartbeat.interval.ms=6000,share.auto.offset.reset=by_duration:PT1H")
    assert_in(f"Completed updating config for group {group}.", r.out, "--alter --add-config")
    want = {"consumer.session.timeout.ms": "60000", "consumer.heartbeat.interval.ms": "6000",
            "share.auto.offset.reset": "by_duration:PT1H"}
    e = config_entries(kt.tool(CONFIG_CMD, "--describe", *ent).stdout, header)
    assert {k: v["value"] for k, v in e.items()} == want, f"describe after --add-config: {e}"
    assert e["consumer.session.timeout.ms"]["synonyms"] == [("DYNAMIC_GROUP_CONFIG", "consumer.session.timeout.ms=60000")], e

    refused = {
        "consumer.session.timeout.ms=abc":
            "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT",
        "consumer.session.timeout.ms=1000":
            "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
        "consumer.session.timeout.ms=80000":
            "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms",
        "consumer.heartbeat.interval.ms=60000":
            "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms",
        "streams.num.standby.replicas=5":
            "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas",
        "share.isolation.level=dirty":
            "Invalid value dirty for configuration share.isolation.level: String must be one of: read_committed, "
            "read_uncommitted",
        "share.auto.offset.reset=none":
            "Invalid value none for configuration share.auto.offset.reset: Invalid value `none` for configuration "
            "share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format "
            "'by_duration:<PnDTnHnMn.nS>'.",
        "no.such.config=1": "Unknown group config name: no.such.config",
    }
    for arg, message in refused.items():
        with soft(arg):
            r = kt.tool(CONFIG_CMD, "--alter", *ent, "--add-config", arg, check=False)
            assert r.returncode == 1, f"{arg} exited {r.returncode}\n{r.out}"
            assert_in(f"org.apache.kafka.common.errors.InvalidConfigurationException: {message}", r.out, arg)
    e = config_entries(kt.tool(CONFIG_CMD, "--describe", *ent).stdout, header)
    assert {k: v["value"] for k, v in e.items()} == want, f"refused alters changed the configs: {e}"

    # A group with committed offsets and no configs.
    plain, topic = f"cfg-plain-{uid()}", f"cfg-topic-{uid()}"
    create_topic(broker.bootstrap, topic, 1)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": plain})
    c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    c.close()
    with soft("--describe --entity-type groups lists the groups (with configs, and those ListGroups knows)"):
        out = kt.tool(CONFIG_CMD, "--describe", "--entity-type", "groups").stdout
        assert_in(header, out, "--describe --entity-type groups")
        assert_in(f"Dynamic configs for group {plain} are:", out, "--describe --entity-type groups")

    broker.restart()
    e = config_entries(kt.tool(CONFIG_CMD, "--describe", *ent).stdout, header)
    assert {k: v["value"] for k, v in e.items()} == want, f"after a restart: {e}"

    r = kt.tool(CONFIG_CMD, "--alter", *ent, "--delete-config", "consumer.heartbeat.interval.ms,share.auto.offset.reset")
    assert_in(f"Completed updating config for group {group}.", r.out, "--alter --delete-config")
    e = config_entries(kt.tool(CONFIG_CMD, "--describe", *ent).stdout, header)
    assert {k: v["value"] for k, v in e.items()} == {"consumer.session.timeout.ms": "60000"}, f"after --delete-config: {e}"
    soft.verify()


def heartbeats(member: JavaMember) -> int:
    """The member's last reported heartbeat-total (Java consumer metric)."""
    counts = [int(line.split()[1]) for line in member.lines() if line.startswith("HEARTBEATS ")]
    assert counts, f"{member.out.name} reported no heartbeat count"
    return counts[-1]


@pytest.mark.broker_config(**{
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
})
def test_group_session_timeout_config_expires_a_killed_member(broker, kt, java_compat_jar, tmp_path):
    """The broker keeps Kafka's 45 s consumer session timeout and a 500 ms heartbeat interval; the
    group's own 6 s and 2 s apply."""
    topic, group = f"cfg-topic-{uid()}", f"cfg-group-{uid()}"
    create_topic(broker.bootstrap, topic, 4)
    r = kt.tool(CONFIG_CMD, "--alter", "--entity-type", "groups", "--entity-name", group, "--add-config",
                "consumer.session.timeout.ms=6000,consumer.heartbeat.interval.ms=2000")
    assert_in(f"Completed updating config for group {group}.", r.out, "--alter --add-config")
    a = JavaMember(java_compat_jar, broker.bootstrap, group, topic, tmp_path / "a.out")
    b = JavaMember(java_compat_jar, broker.bootstrap, group, topic, tmp_path / "b.out")
    members = [a, b]
    try:
        wait_for("two members sharing the four partitions",
                 lambda: all(m.assigned() for m in members) and a.assigned() | b.assigned() == set(range(4)), members)
        # The group's 2 s heartbeat interval, not the broker's 500 ms: about 5 heartbeats in 10 s, not 20.
        first = heartbeats(a)
        time.sleep(10)
        sent = heartbeats(a) - first
        assert 2 <= sent <= 8, f"{sent} heartbeats in 10 s with a 2 s heartbeat interval"
        b.kill()
        t0 = time.monotonic()
        # The broker's 45 s would still hold b's partitions at 30 s.
        wait_for("a owns every partition", lambda: a.assigned() == set(range(4)), members, timeout=30)
        print(f"the killed member's partitions moved after {time.monotonic() - t0:.1f}s")
        a.stop()
    finally:
        for m in members:
            if m.proc.poll() is None:
                m.kill()
