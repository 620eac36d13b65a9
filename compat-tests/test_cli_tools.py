"""Kafka's command-line tools, unchanged (main classes of kafka-tools / kafka_2.13 4.1 from Maven),
against the broker: every test drives one tool the way an operator does and checks what it prints.

    kafka-topics               org.apache.kafka.tools.TopicCommand
    kafka-configs              kafka.admin.ConfigCommand (topics; brokers)
    kafka-delete-records       org.apache.kafka.tools.DeleteRecordsCommand
    kafka-log-dirs             org.apache.kafka.tools.LogDirsCommand
    kafka-broker-api-versions  org.apache.kafka.tools.BrokerApiVersionsCommand
    kafka-get-offsets          org.apache.kafka.tools.GetOffsetShell
    kafka-console-producer     org.apache.kafka.tools.ConsoleProducer
    kafka-console-consumer     org.apache.kafka.tools.consumer.ConsoleConsumer
    ClientCompatibilityTest    org.apache.kafka.tools.ClientCompatibilityTest (Kafka's own ducktape probe)

Most tools exit 0 even when they print an error for one partition (DeleteRecordsCommand), so every
step checks the printed values. Independent checks of one test run as "soft" sections: a mismatch
is recorded and the test goes on, then fails listing every mismatch (so one run shows all that
differs from Kafka). Each tool run prints its command, output and time; with
`KETCH_COMPAT_TARGET=kafka KETCH_COMPAT_KAFKA_REQUEST_LOG=1 pytest -s` also the requests
(API + version, response errors) it sent, and a per-tool summary at the end of the module.

Setup data (topics, records with chosen timestamps) is written with confluent-kafka (librdkafka,
no JVM start) where the tool under test is not the producer.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from confluent_kafka import KafkaError, Producer

from cli_support import Soft, Tools, assert_in, create_topic, offsets_out, produce, uid
from kafka_tools import REQUEST_LOG

TOOLS = "org.apache.kafka.tools."
TOPIC_CMD = TOOLS + "TopicCommand"
CONFIG_CMD = "kafka.admin.ConfigCommand"  # kafka_2.13 (Scala); kafka-tools 4.1 has no ConfigCommand
DELETE_RECORDS = TOOLS + "DeleteRecordsCommand"
LOG_DIRS = TOOLS + "LogDirsCommand"
API_VERSIONS = TOOLS + "BrokerApiVersionsCommand"
GET_OFFSETS = TOOLS + "GetOffsetShell"
CONSOLE_PRODUCER = TOOLS + "ConsoleProducer"
CONSOLE_CONSUMER = TOOLS + "consumer.ConsoleConsumer"
CLIENT_COMPAT = TOOLS + "ClientCompatibilityTest"

NODE_ID = "1"  # node.id of the single broker (Kafka target: node.id=1; Ketch's default)

_API_LOG: dict[str, dict[tuple[str, int], set[str]]] = {}  # tool -> (api, version) -> errors seen


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def soft():
    return Soft()


@pytest.fixture(scope="module", autouse=True)
def _api_summary():
    yield
    if REQUEST_LOG and _API_LOG:
        print("\n===== requests sent by each tool (Kafka request log) =====")
        for tool, apis in _API_LOG.items():
            items = [f"{n} v{v}" + (f" [{' '.join(sorted(e))}]" if e else "") for (n, v), e in apis.items()]
            print(f"{tool}: {', '.join(items)}")


@pytest.fixture
def kt(broker, kafka_libs, tmp_path):
    tools = Tools(kafka_libs, broker, tmp_path)
    yield tools
    for r in tools.history:
        per_tool = _API_LOG.setdefault(r.main_class.rsplit(".", 1)[-1], {})
        for name, version, errors in r.apis:
            per_tool.setdefault((name, version), set()).update(errors)


# ---------------------------------------------------------------------------------------------
# kafka-topics
# ---------------------------------------------------------------------------------------------


def describe_topic(out: str, topic: str):
    """TopicCommand --describe: (topic fields, [partition fields]) from its tab-separated lines."""
    head, parts = None, []
    for line in out.splitlines():
        fields = {}
        for cell in line.strip("\n").split("\t"):
            if ":" in cell:
                k, _, v = cell.partition(":")
                fields[k.strip()] = v.strip()
        if fields.get("Topic") != topic:
            continue
        if "Partition" in fields:
            parts.append(fields)
        elif "PartitionCount" in fields:
            head = fields
    assert head is not None, f"no topic line for {topic} in:\n{out}"
    return head, parts


def check_describe(out, topic, partitions, configs):
    head, parts = describe_topic(out, topic)
    assert head["PartitionCount"] == str(partitions), \
        f"PartitionCount {head['PartitionCount']}, expected {partitions}\n{out}"
    assert head["ReplicationFactor"] == "1", f"ReplicationFactor {head['ReplicationFactor']}\n{out}"
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", head.get("TopicId", "")), f"TopicId {head.get('TopicId')!r}\n{out}"
    shown = dict(kv.split("=", 1) for kv in head.get("Configs", "").split(",") if "=" in kv)
    for k, v in configs.items():
        assert shown.get(k) == v, \
            f"Configs: {k}={shown.get(k)!r}, expected {v!r} (Configs: {head.get('Configs')!r})\n{out}"
    assert sorted(int(p["Partition"]) for p in parts) == list(range(partitions)), f"partition lines:\n{out}"
    for p in parts:
        got = (p["Leader"], p["Replicas"], p["Isr"])
        assert got == (NODE_ID, NODE_ID, NODE_ID), f"partition {p['Partition']}: Leader/Replicas/Isr {got}\n{out}"


def test_kafka_topics(broker, kt, soft):
    """kafka-topics: create with partitions and configs, list, describe (partitions, leader,
    replicas, isr, configs), grow the partition count, refuse to shrink it (INVALID_PARTITIONS,
    Kafka's message), refuse a duplicate and an impossible replication factor, delete."""
    topic, other = f"cli-topic-{uid()}", f"cli-topic-other-{uid()}"
    cfg = {"retention.ms": "3600000", "cleanup.policy": "delete", "max.message.bytes": "200000"}
    r = kt.tool(TOPIC_CMD, "--create", "--topic", topic, "--partitions", 3,
                *[a for k, v in cfg.items() for a in ("--config", f"{k}={v}")])
    assert_in(f"Created topic {topic}.", r.out, "--create")
    kt.tool(TOPIC_CMD, "--create", "--topic", other, "--partitions", 1, "--replication-factor", 1)

    r = kt.tool(TOPIC_CMD, "--list")
    listed = set(r.stdout.split())
    assert {topic, other} <= listed, f"--list: {sorted(listed)}"

    r = kt.tool(TOPIC_CMD, "--describe", "--topic", topic)
    check_describe(r.stdout, topic, 3, cfg)

    # grow 3 -> 5
    kt.tool(TOPIC_CMD, "--alter", "--topic", topic, "--partitions", 5)
    r = kt.tool(TOPIC_CMD, "--describe", "--topic", topic)
    check_describe(r.stdout, topic, 5, cfg)

    # shrink 5 -> 2: CreatePartitions answers INVALID_PARTITIONS; the tool exits 1 with the broker's message
    r = kt.tool(TOPIC_CMD, "--alter", "--topic", topic, "--partitions", 2, check=False)
    assert r.returncode == 1, f"--alter --partitions 2 (shrink) exited {r.returncode}, expected 1\n{r.out}"
    assert_in("org.apache.kafka.common.errors.InvalidPartitionsException", r.out, "shrink")
    with soft("shrink: Kafka's INVALID_PARTITIONS message"):
        assert_in(f"The topic {topic} currently has 5 partition(s); 2 would not be an increase.", r.out, "shrink")
    with soft("same count: INVALID_PARTITIONS"):
        r = kt.tool(TOPIC_CMD, "--alter", "--topic", topic, "--partitions", 5, check=False)
        assert r.returncode == 1, f"--alter --partitions 5 (unchanged) exited {r.returncode}, expected 1\n{r.out}"
        assert_in("InvalidPartitionsException: Topic already has 5 partition(s).", r.out, "--partitions 5 (same)")
    r = kt.tool(TOPIC_CMD, "--describe", "--topic", topic)
    check_describe(r.stdout, topic, 5, cfg)

    with soft("duplicate --create"):
        r = kt.tool(TOPIC_CMD, "--create", "--topic", topic, "--partitions", 1, check=False)
        assert r.returncode == 1, f"duplicate --create exited {r.returncode}\n{r.out}"
        assert_in("org.apache.kafka.common.errors.TopicExistsException", r.out, "duplicate --create")
        assert_in(f"Topic '{topic}' already exists.", r.out, "duplicate --create (Kafka's message)")
    with soft("--if-not-exists"):
        r = kt.tool(TOPIC_CMD, "--create", "--topic", topic, "--partitions", 1, "--if-not-exists")
        assert "Created topic" not in r.out, f"--if-not-exists on an existing topic:\n{r.out}"
    with soft("--replication-factor 2 on one broker"):
        r = kt.tool(TOPIC_CMD, "--create", "--topic", f"cli-rf2-{uid()}", "--partitions", 1,
                    "--replication-factor", 2, check=False)
        assert r.returncode == 1, f"--replication-factor 2 exited {r.returncode}\n{r.out}"
        assert_in("org.apache.kafka.common.errors.InvalidReplicationFactorException: Unable to replicate the "
                  "partition 2 time(s): The target replication factor of 2 cannot be reached because only 1 "
                  "broker(s) are registered.", r.out, "--replication-factor 2")

    kt.tool(TOPIC_CMD, "--delete", "--topic", other)
    for attempt in range(5):  # the deletion reaches the metadata a moment after the response
        listed = set(kt.tool(TOPIC_CMD, "--list").stdout.split())
        if other not in listed:
            break
        time.sleep(1)
    assert other not in listed and topic in listed, f"--list after --delete {other}: {sorted(listed)}"
    soft.verify()


# ---------------------------------------------------------------------------------------------
# kafka-configs
# ---------------------------------------------------------------------------------------------


def config_entries(out: str, header: str) -> dict[str, dict]:
    """ConfigCommand --describe: {name: {"value", "sensitive", "synonyms": [(source, name=value)]}}."""
    assert_in(header, out, "--describe")
    entries = {}
    for line in out.splitlines():
        m = re.fullmatch(r"  (\S+?)=(.*) sensitive=(true|false) synonyms=\{(.*)\}", line)
        if m:
            syn = [tuple(s.split(":", 1)) for s in m.group(4).split(", ") if s]
            entries[m.group(1)] = {"value": m.group(2), "sensitive": m.group(3), "synonyms": syn}
    return entries


def test_kafka_configs_topic(broker, kt, soft):
    """kafka-configs on a topic: describe (dynamic, --all), --add-config (lower retention.ms, set
    max.message.bytes: a larger record is then refused), --delete-config (back to the default),
    invalid value and unknown name refused."""
    topic = f"cli-cfg-{uid()}"
    create_topic(broker, topic, 1, {"retention.ms": "3600000"})
    ent = ["--entity-type", "topics", "--entity-name", topic]
    header = f"Dynamic configs for topic {topic} are:"

    e = config_entries(kt.tool(CONFIG_CMD, "--describe", *ent).stdout, header)
    assert e.get("retention.ms", {}).get("value") == "3600000", f"describe: {e}"
    assert ("DYNAMIC_TOPIC_CONFIG", "retention.ms=3600000") in e["retention.ms"]["synonyms"], e
    assert set(e) == {"retention.ms"}, f"describe (dynamic only) lists more than retention.ms: {sorted(e)}"

    r = kt.tool(CONFIG_CMD, "--alter", *ent, "--add-config", "retention.ms=60000,max.message.bytes=200000")
    assert_in(f"Completed updating config for topic {topic}.", r.out, "--alter --add-config")
    e = config_entries(kt.tool(CONFIG_CMD, "--describe", *ent).stdout, header)
    got = {k: v["value"] for k, v in e.items()}
    assert got == {"retention.ms": "60000", "max.message.bytes": "200000"}, f"describe after --add-config: {got}"
    assert ("DYNAMIC_TOPIC_CONFIG", "max.message.bytes=200000") in e["max.message.bytes"]["synonyms"], e
    with soft("max.message.bytes=200000 is enforced"):
        p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": False, "linger.ms": 0})
        errs = []
        p.produce(topic, value=b"x" * 300_000, on_delivery=lambda err, msg: errs.append(err))
        p.flush(30)
        assert errs and errs[0] is not None and errs[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, \
            f"a 300 kB record to a topic with max.message.bytes=200000: {errs} (expected MSG_SIZE_TOO_LARGE)"

    r = kt.tool(CONFIG_CMD, "--alter", *ent, "--delete-config", "max.message.bytes")
    assert_in(f"Completed updating config for topic {topic}.", r.out, "--alter --delete-config")
    e = config_entries(kt.tool(CONFIG_CMD, "--describe", *ent).stdout, header)
    got = {k: v["value"] for k, v in e.items()}
    assert got == {"retention.ms": "60000"}, f"describe after --delete-config max.message.bytes: {got}"

    with soft("--describe --all"):
        e = config_entries(kt.tool(CONFIG_CMD, "--describe", *ent, "--all").stdout,
                           f"All configs for topic {topic} are:")
        want = {"retention.ms": "60000", "max.message.bytes": "1048588", "cleanup.policy": "delete",
                "segment.bytes": "1073741824", "retention.bytes": "-1", "min.insync.replicas": "1",
                "compression.type": "producer", "message.timestamp.type": "CreateTime"}
        got = {k: e.get(k, {}).get("value") for k in want}
        assert got == want, f"--all: {got}, expected {want}"
        assert ("DEFAULT_CONFIG", "message.max.bytes=1048588") in e["max.message.bytes"]["synonyms"], \
            f"max.message.bytes synonyms {e['max.message.bytes']['synonyms']}"
        # The configs Kafka 3.x/4.x added, with their defaults and synonyms.
        want = {"segment.jitter.ms": "0", "segment.index.bytes": "10485760", "file.delete.delay.ms": "60000",
                "preallocate": "false", "compression.gzip.level": "-1", "compression.lz4.level": "9",
                "compression.zstd.level": "3", "unclean.leader.election.enable": "false",
                "local.retention.ms": "-2", "local.retention.bytes": "-2", "remote.storage.enable": "false",
                "leader.replication.throttled.replicas": "", "follower.replication.throttled.replicas": ""}
        got = {k: e.get(k, {}).get("value") for k in want}
        assert got == want, f"--all: {got}, expected {want}"
        # As for retention.ms: synonyms start at the broker name itself, which has no default.
        assert e["segment.jitter.ms"]["synonyms"] == [], e["segment.jitter.ms"]
        assert e["file.delete.delay.ms"]["synonyms"] == [("DEFAULT_CONFIG", "log.segment.delete.delay.ms=60000")], \
            e["file.delete.delay.ms"]
        assert e["remote.storage.enable"]["synonyms"] == [], e["remote.storage.enable"]
        assert len(e) == 33, f"--all lists {len(e)} topic configs: {sorted(e)}"

    with soft("newer topic configs: set, described, refused out of range"):
        r = kt.tool(CONFIG_CMD, "--alter", *ent, "--add-config",
                    "segment.jitter.ms=1000,compression.zstd.level=9,preallocate=true")
        assert_in(f"Completed updating config for topic {topic}.", r.out, "--add-config segment.jitter.ms ...")
        e = config_entries(kt.tool(CONFIG_CMD, "--describe", *ent).stdout, header)
        got = {k: v["value"] for k, v in e.items()}
        assert got == {"retention.ms": "60000", "segment.jitter.ms": "1000", "compression.zstd.level": "9",
                       "preallocate": "true"}, f"describe after --add-config: {got}"
        r = kt.tool(CONFIG_CMD, "--alter", *ent, "--add-config", "compression.zstd.level=30", check=False)
        assert r.returncode == 1, f"compression.zstd.level=30 exited {r.returncode}\n{r.out}"
        assert_in("Invalid value 30 for configuration compression.zstd.level: Value must be no more than 22",
                  r.out, "compression.zstd.level=30")
        r = kt.tool(CONFIG_CMD, "--alter", *ent, "--add-config", "remote.storage.enable=true", check=False)
        assert r.returncode == 1, f"remote.storage.enable=true exited {r.returncode}\n{r.out}"
        assert_in("Tiered Storage functionality is disabled in the broker", r.out, "remote.storage.enable=true")
        r = kt.tool(CONFIG_CMD, "--alter", *ent, "--delete-config",
                    "segment.jitter.ms,compression.zstd.level,preallocate")
        assert_in(f"Completed updating config for topic {topic}.", r.out, "--delete-config segment.jitter.ms ...")

    with soft("invalid value"):
        r = kt.tool(CONFIG_CMD, "--alter", *ent, "--add-config", "retention.ms=abc", check=False)
        assert r.returncode == 1, f"retention.ms=abc exited {r.returncode}\n{r.out}"
        assert_in("org.apache.kafka.common.errors.InvalidConfigurationException: Invalid value abc for "
                  "configuration retention.ms: Not a number of type LONG", r.out, "retention.ms=abc")
    with soft("unknown config"):
        r = kt.tool(CONFIG_CMD, "--alter", *ent, "--add-config", "no.such.config=1", check=False)
        assert r.returncode == 1, f"no.such.config=1 exited {r.returncode}\n{r.out}"
        assert_in("org.apache.kafka.common.errors.InvalidConfigurationException: Unknown topic config name: "
                  "no.such.config", r.out, "no.such.config=1")
    e = config_entries(kt.tool(CONFIG_CMD, "--describe", *ent).stdout, header)
    assert {k: v["value"] for k, v in e.items()} == {"retention.ms": "60000"}, f"refused alters changed configs: {e}"
    soft.verify()


@pytest.mark.broker_config(**{"log.retention.check.interval.ms": "1000"})
def test_kafka_configs_broker(broker, kt, soft):
    """kafka-configs on the broker: describe (dynamic: none; --all: the static settings), then Kafka's
    dynamic broker configs: a per-broker and a cluster-default log.retention.ms set, shown and
    deleted again; a read-only setting (num.partitions, log.retention.hours) and invalid values refused
    with Kafka's errors; live effects on topics without an override (a cluster-default log.retention.ms
    deletes old records, a per-broker message.max.bytes refuses a larger record) while an override
    wins; the dynamic configs survive a restart."""
    ent = ["--entity-type", "brokers", "--entity-name", NODE_ID]
    dflt = ["--entity-type", "brokers", "--entity-default"]
    dyn_header = f"Dynamic configs for broker {NODE_ID} are:"
    dflt_header = "Default configs for brokers in the cluster are:"

    e = config_entries(kt.tool(CONFIG_CMD, "--describe", *ent).stdout, dyn_header)
    assert e == {}, f"dynamic configs of a fresh broker: {e}"
    e = config_entries(kt.tool(CONFIG_CMD, "--describe", *ent, "--all").stdout,
                       f"All configs for broker {NODE_ID} are:")
    want = {"node.id": NODE_ID, "log.dirs": str(broker.data_dir), "message.max.bytes": "1048588",
            "num.partitions": "1", "log.segment.bytes": "1073741824", "auto.create.topics.enable": "true",
            "default.replication.factor": "1"}
    got = {k: e.get(k, {}).get("value") for k in want}
    assert got == want, f"--all: {got}, expected {want}"
    with soft("--all: log.retention.hours / .minutes / .ms"):
        got = {k: (e.get(k, {}).get("value"), e.get(k, {}).get("synonyms")) for k in
               ("log.retention.hours", "log.retention.minutes", "log.retention.ms")}
        assert got == {"log.retention.hours": ("168", [("DEFAULT_CONFIG", "log.retention.hours=168")]),
                       "log.retention.minutes": ("null", []), "log.retention.ms": ("null", [])}, \
            f"log.retention.*: {got} (Kafka: hours=168 DEFAULT_CONFIG, minutes and ms null without synonyms)"
    config_entries(kt.tool(CONFIG_CMD, "--describe", *dflt).stdout, dflt_header)

    with soft("per-broker dynamic config (--entity-name 1 --add-config log.retention.ms)"):
        r = kt.tool(CONFIG_CMD, "--alter", *ent, "--add-config", "log.retention.ms=86400000", check=False)
        assert r.returncode == 0, f"--alter broker {NODE_ID} log.retention.ms=86400000 exited {r.returncode}\n{r.out}"
        assert_in(f"Completed updating config for broker {NODE_ID}.", r.out, "--alter broker")
        e = config_entries(kt.tool(CONFIG_CMD, "--describe", *ent).stdout, dyn_header)
        assert e.get("log.retention.ms", {}).get("value") == "86400000", f"describe after --alter: {e}"
        assert e["log.retention.ms"]["synonyms"] == [("DYNAMIC_BROKER_CONFIG", "log.retention.ms=86400000"),
                                                     ("DEFAULT_CONFIG", "log.retention.hours=168")], e
        kt.tool(CONFIG_CMD, "--alter", *ent, "--delete-config", "log.retention.ms")
        e = config_entries(kt.tool(CONFIG_CMD, "--describe", *ent).stdout, dyn_header)
        assert "log.retention.ms" not in e, f"describe after --delete-config: {e}"

    with soft("cluster-default dynamic config (--entity-default --add-config log.retention.ms)"):
        r = kt.tool(CONFIG_CMD, "--alter", *dflt, "--add-config", "log.retention.ms=172800000", check=False)
        assert r.returncode == 0, f"--alter --entity-default exited {r.returncode}\n{r.out}"
        assert_in("Completed updating default config for brokers in the cluster.", r.out, "--alter --entity-default")
        e = config_entries(kt.tool(CONFIG_CMD, "--describe", *dflt).stdout, dflt_header)
        assert e.get("log.retention.ms", {}).get("synonyms") == \
            [("DYNAMIC_DEFAULT_BROKER_CONFIG", "log.retention.ms=172800000")], f"--entity-default describe: {e}"
        # the broker's own view lists the cluster default under its synonyms
        e = config_entries(kt.tool(CONFIG_CMD, "--describe", *ent, "--all").stdout,
                           f"All configs for broker {NODE_ID} are:")
        assert e.get("log.retention.ms", {}).get("synonyms") == \
            [("DYNAMIC_DEFAULT_BROKER_CONFIG", "log.retention.ms=172800000"),
             ("DEFAULT_CONFIG", "log.retention.hours=168")], f"broker --all log.retention.ms: {e.get('log.retention.ms')}"
        kt.tool(CONFIG_CMD, "--alter", *dflt, "--delete-config", "log.retention.ms")

    def refused(args, message, what):
        r = kt.tool(CONFIG_CMD, "--alter", *args, check=False)
        assert r.returncode == 1, f"{what} exited {r.returncode}\n{r.out}"
        assert_in(message, r.out, what)

    with soft("read-only broker config refused"):
        refused([*ent, "--add-config", "num.partitions=4"], "org.apache.kafka.common.errors.InvalidRequestException: "
                "Cannot update these configs dynamically: Set(num.partitions)", "num.partitions=4")
        refused([*dflt, "--add-config", "log.retention.hours=2"], "InvalidRequestException: Cannot update these "
                "configs dynamically: Set(log.retention.hours)", "--entity-default log.retention.hours=2")
    with soft("invalid dynamic values refused"):
        refused([*ent, "--add-config", "log.retention.ms=abc"], "InvalidRequestException: Invalid value abc for "
                "configuration log.retention.ms: Not a number of type LONG", "log.retention.ms=abc")
        refused([*dflt, "--add-config", "log.segment.bytes=10"], "InvalidRequestException: Invalid value 10 for "
                "configuration log.segment.bytes: Value must be at least 1048576", "log.segment.bytes=10")
        refused([*ent, "--add-config", "compression.type=bogus"], "InvalidRequestException: Invalid value bogus for "
                "configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, "
                "producer", "compression.type=bogus")
    e = config_entries(kt.tool(CONFIG_CMD, "--describe", *ent).stdout, dyn_header)
    assert e == {}, f"refused alters left dynamic configs: {e}"

    # Live effects on topics: `plain` follows the broker defaults, `pinned` overrides retention.ms.
    plain, pinned = f"cli-brk-plain-{uid()}", f"cli-brk-pinned-{uid()}"
    create_topic(broker, plain, 1)
    create_topic(broker, pinned, 1, {"retention.ms": "-1"})
    two_days_ago = int(time.time() * 1000) - 2 * 86_400_000
    for t in (plain, pinned):
        produce(broker, t, [(0, None, f"old-{i}".encode(), two_days_ago) for i in range(10)])

    def topic_all(topic):
        return config_entries(kt.tool(CONFIG_CMD, "--describe", "--entity-type", "topics", "--entity-name", topic,
                                      "--all").stdout, f"All configs for topic {topic} are:")

    def earliest(topic):
        return offsets_out(kt.tool(GET_OFFSETS, "--topic", topic, "--time", "-2").stdout, topic).get(0)

    with soft("cluster-default log.retention.ms=1 day: a topic without override drops 2-day-old records"):
        assert earliest(plain) == 0, f"{plain}: earliest offset {earliest(plain)} before the change (7-day default)"
        kt.tool(CONFIG_CMD, "--alter", *dflt, "--add-config", "log.retention.ms=86400000")
        e = topic_all(plain)
        assert (e["retention.ms"]["value"], e["retention.ms"]["synonyms"]) == \
            ("86400000", [("DYNAMIC_DEFAULT_BROKER_CONFIG", "log.retention.ms=86400000"),
                          ("DEFAULT_CONFIG", "log.retention.hours=168")]), f"{plain} retention.ms: {e['retention.ms']}"
        e = topic_all(pinned)
        assert e["retention.ms"]["value"] == "-1" and e["retention.ms"]["synonyms"][0] == \
            ("DYNAMIC_TOPIC_CONFIG", "retention.ms=-1"), f"{pinned} retention.ms: {e['retention.ms']}"
        for attempt in range(30):  # Kafka deletes at its next retention check (every second here)
            if earliest(plain) == 10:
                break
            time.sleep(1)
        assert earliest(plain) == 10, f"{plain}: earliest offset {earliest(plain)}, expected 10 (all expired)"
        assert earliest(pinned) == 0, f"{pinned} (retention.ms=-1 override): earliest {earliest(pinned)}, expected 0"

    with soft("per-broker message.max.bytes=200000 applies to topics without override"):
        kt.tool(CONFIG_CMD, "--alter", *ent, "--add-config", "message.max.bytes=200000")
        e = topic_all(plain)
        assert (e["max.message.bytes"]["value"], e["max.message.bytes"]["synonyms"]) == \
            ("200000", [("DYNAMIC_BROKER_CONFIG", "message.max.bytes=200000"),
                        ("DEFAULT_CONFIG", "message.max.bytes=1048588")]), f"max.message.bytes: {e['max.message.bytes']}"
        p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": False, "linger.ms": 0})
        errs = []
        p.produce(plain, value=b"x" * 300_000, on_delivery=lambda err, msg: errs.append(err))
        p.flush(30)
        assert errs and errs[0] is not None and errs[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, \
            f"a 300 kB record with a per-broker message.max.bytes=200000: {errs} (expected MSG_SIZE_TOO_LARGE)"

    with soft("dynamic broker configs survive a restart"):
        broker.restart()
        e = config_entries(kt.tool(CONFIG_CMD, "--describe", *dflt).stdout, dflt_header)
        assert e.get("log.retention.ms", {}).get("value") == "86400000", f"--entity-default after a restart: {e}"
        e = config_entries(kt.tool(CONFIG_CMD, "--describe", *ent).stdout, dyn_header)
        assert {k: v["value"] for k, v in e.items()} == {"message.max.bytes": "200000"}, \
            f"broker {NODE_ID} dynamic configs after a restart: {e}"
        e = topic_all(plain)
        assert e["max.message.bytes"]["value"] == "200000", f"max.message.bytes after a restart: {e['max.message.bytes']}"

    with soft("--delete-config restores the defaults"):
        kt.tool(CONFIG_CMD, "--alter", *ent, "--delete-config", "message.max.bytes")
        kt.tool(CONFIG_CMD, "--alter", *dflt, "--delete-config", "log.retention.ms")
        e = topic_all(plain)
        got = {k: (e[k]["value"], e[k]["synonyms"]) for k in ("retention.ms", "max.message.bytes")}
        assert got == {"retention.ms": ("604800000", []),
                       "max.message.bytes": ("1048588", [("DEFAULT_CONFIG", "message.max.bytes=1048588")])}, \
            f"{plain} after --delete-config: {got}"
        produce(broker, plain, [(0, None, b"x" * 300_000, None)])
    soft.verify()


# ---------------------------------------------------------------------------------------------
# kafka-delete-records
# ---------------------------------------------------------------------------------------------


def delete_records(kt, tmp_path, topic, offsets):
    spec = {"version": 1, "partitions": [{"topic": topic, "partition": p, "offset": o} for p, o in offsets.items()]}
    f = tmp_path / f"delete-{uid()}.json"
    f.write_text(json.dumps(spec))
    r = kt.tool(DELETE_RECORDS, "--offset-json-file", f)
    assert_in("Records delete operation completed:", r.out, "kafka-delete-records")
    res = {}
    for line in r.stdout.splitlines():
        m = re.fullmatch(rf"partition: {re.escape(topic)}-(\d+)\t(low_watermark|error): (.*)", line.strip())
        if m:
            res[int(m.group(1))] = (m.group(2), m.group(3))
    assert set(res) == set(offsets), \
        f"kafka-delete-records reported partitions {sorted(res)}, asked {sorted(offsets)}\n{r.out}"
    return res


def test_kafka_delete_records(broker, kt, tmp_path, soft):
    """kafka-delete-records: delete up to an offset inside a batch (p0) and up to the high watermark
    (offset -1, p2); the low watermark moves (kafka-get-offsets --time -2), a consumer from earliest
    starts there, an offset past the end is refused (OFFSET_OUT_OF_RANGE), an offset below the low
    watermark leaves it; it survives a broker restart."""
    topic = f"cli-delrec-{uid()}"
    create_topic(broker, topic, 3)
    produce(broker, topic, [(0, None, f"p0-{i}".encode(), None) for i in range(20)], batch=5)
    produce(broker, topic, [(2, None, f"p2-{i}".encode(), None) for i in range(10)])

    res = delete_records(kt, tmp_path, topic, {0: 7, 2: -1})
    assert res == {0: ("low_watermark", "7"), 2: ("low_watermark", "10")}, f"delete-records: {res}"
    r = kt.tool(GET_OFFSETS, "--topic", topic, "--time", "-2")
    assert offsets_out(r.stdout, topic) == {0: 7, 1: 0, 2: 10}, f"earliest offsets after delete-records:\n{r.out}"
    r = kt.tool(GET_OFFSETS, "--topic", topic, "--time", "-1")
    assert offsets_out(r.stdout, topic) == {0: 20, 1: 0, 2: 10}, f"latest offsets after delete-records:\n{r.out}"

    # a consumer group from earliest: p0 from 7, nothing left on p2
    r = kt.tool(CONSOLE_CONSUMER, "--topic", topic, "--group", f"cli-delrec-{uid()}", "--from-beginning",
                "--max-messages", 13, "--timeout-ms", 20000, "--property", "print.partition=true",
                "--property", "print.offset=true")
    got = [tuple(line.split("\t")) for line in r.stdout.splitlines() if line.startswith("Partition:")]
    want = [("Partition:0", f"Offset:{i}", f"p0-{i}") for i in range(7, 20)]
    assert got == want, f"consumer from earliest after delete-records: {got}\nexpected {want}"

    with soft("offset past the high watermark / below the low watermark"):
        res = delete_records(kt, tmp_path, topic, {1: 3, 0: 5})
        assert res[1][0] == "error" and "OffsetOutOfRangeException" in res[1][1], f"p1 (empty) up to 3: {res[1]}"
        assert res[0] == ("low_watermark", "7"), f"p0 up to 5 (low watermark already 7): {res[0]}"

    with soft("low watermark after a restart"):
        broker.restart()
        r = kt.tool(GET_OFFSETS, "--topic", topic, "--time", "-2")
        assert offsets_out(r.stdout, topic) == {0: 7, 1: 0, 2: 10}, f"earliest offsets after a restart:\n{r.out}"
    soft.verify()


# ---------------------------------------------------------------------------------------------
# kafka-log-dirs
# ---------------------------------------------------------------------------------------------


def log_dirs_json(out: str) -> dict:
    for line in out.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    pytest.fail(f"kafka-log-dirs printed no JSON:\n{out}", pytrace=False)


def test_kafka_log_dirs(broker, kt, soft):
    """kafka-log-dirs --describe: the broker's log dir with each partition and its size (bytes of
    stored batches: 0 for an empty partition), filtered by --topic-list."""
    topic, other = f"cli-logdirs-{uid()}", f"cli-logdirs-other-{uid()}"
    create_topic(broker, topic, 2)
    create_topic(broker, other, 1)
    produce(broker, topic, [(0, None, b"v" * 100, None) for _ in range(50)])
    produce(broker, other, [(0, None, b"x", None)])

    r = kt.tool(LOG_DIRS, "--describe", "--topic-list", topic)
    assert_in(f"Received log directory information from brokers {NODE_ID}", r.out, "kafka-log-dirs")
    d = log_dirs_json(r.stdout)
    assert [b["broker"] for b in d["brokers"]] == [int(NODE_ID)], f"brokers: {d}"
    dirs = d["brokers"][0]["logDirs"]
    assert len(dirs) == 1, f"log dirs: {dirs}"
    ld = dirs[0]
    assert ld["logDir"] == str(broker.data_dir), f"logDir {ld['logDir']!r}, expected {str(broker.data_dir)!r}"
    assert ld["error"] is None, f"log dir error: {ld}"
    parts = {p["partition"]: p for p in ld["partitions"]}
    assert set(parts) == {f"{topic}-0", f"{topic}-1"}, f"--topic-list {topic}: partitions {sorted(parts)}"
    for p in parts.values():
        assert p["offsetLag"] == 0 and p["isFuture"] is False, f"partition entry {p}"
    size0, size1 = parts[f"{topic}-0"]["size"], parts[f"{topic}-1"]["size"]
    assert size0 >= 50 * 100, f"{topic}-0 size {size0}: 50 records of 100 bytes are stored"
    assert size0 < 50 * 100 * 2, f"{topic}-0 size {size0}: far more than 50 records of 100 bytes"
    with soft("empty partition size"):
        assert size1 == 0, f"{topic}-1 (empty) size {size1}, Kafka: 0"

    r = kt.tool(LOG_DIRS, "--describe", "--broker-list", NODE_ID)
    names = {p["partition"] for b in log_dirs_json(r.stdout)["brokers"] for ld in b["logDirs"]
             for p in ld["partitions"]}
    assert {f"{topic}-0", f"{topic}-1", f"{other}-0"} <= names, f"--describe (all topics): {sorted(names)}"
    soft.verify()


# ---------------------------------------------------------------------------------------------
# kafka-broker-api-versions
# ---------------------------------------------------------------------------------------------

# What the tools of this file and the Java clients use (see the request log): each must be usable.
REQUIRED_APIS = [
    "Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch", "FindCoordinator",
    "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup", "DescribeGroups", "ListGroups", "ApiVersions",
    "CreateTopics", "DeleteTopics", "DeleteRecords", "InitProducerId", "OffsetForLeaderEpoch",
    "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "TxnOffsetCommit", "DescribeConfigs", "AlterConfigs",
    "DescribeLogDirs", "CreatePartitions", "DeleteGroups", "IncrementalAlterConfigs",
    "ListPartitionReassignments", "OffsetDelete", "DescribeCluster", "DescribeProducers",
    "DescribeTransactions", "ListTransactions", "DescribeTopicPartitions",
]


def test_kafka_broker_api_versions(broker, kt, soft):
    """kafka-broker-api-versions: the broker answers with its version table; every API the tools
    and clients use is usable (a version both sides support)."""
    r = kt.tool(API_VERSIONS)
    head = re.search(rf"^{re.escape(broker.bootstrap)} \(id: (\d+) rack: null isFenced: false\) -> \($", r.stdout, re.M)
    assert head and head.group(1) == NODE_ID, f"no header line for {broker.bootstrap} (id {NODE_ID}):\n{r.out}"
    table = {}
    for line in r.stdout.splitlines():
        m = re.fullmatch(r"\s+(\w+)\((\d+)\): (.*?),?", line)
        if m:
            table[m.group(1)] = m.group(3)
    assert len(table) > 40, f"API table not parsed:\n{r.out}"
    bad = {}
    for api in REQUIRED_APIS:
        v = table.get(api, "<missing>")
        if not re.fullmatch(r"\d+( to \d+)? \[usable: \d+\]", v):
            bad[api] = v
    assert not bad, f"APIs not usable by the 4.1 tools: {bad}"
    with soft("no unusable advertised API"):
        weird = {k: v for k, v in table.items() if v != "UNSUPPORTED" and "usable" not in v}
        assert not weird, f"advertised but not usable by a 4.1 client: {weird}"
    soft.verify()


# ---------------------------------------------------------------------------------------------
# kafka-get-offsets
# ---------------------------------------------------------------------------------------------


def test_kafka_get_offsets(broker, kt, soft):
    """kafka-get-offsets: latest (-1), earliest (-2), max timestamp (-3; ties: the first record) and
    by timestamp, on records with chosen timestamps; an empty partition is left out where Kafka
    finds no offset; --topic-partitions selects partitions."""
    topic = f"cli-offsets-{uid()}"
    create_topic(broker, topic, 3)
    base = (int(time.time()) - 3600) * 1000  # an hour ago: within message.timestamp.before.max.ms (unbounded)
    p2_ts = [5, 1, 9, 2, 9, 0, 4]  # seconds after base; max 9 at offsets 2 and 4
    produce(broker, topic, [(0, None, f"p0-{i}".encode(), base + i * 1000) for i in range(15)], batch=5)
    produce(broker, topic, [(2, None, f"p2-{i}".encode(), base + s * 1000) for i, s in enumerate(p2_ts)])

    cases = [
        (["--time", "-1"], {0: 15, 1: 0, 2: 7}, "latest"),
        ([], {0: 15, 1: 0, 2: 7}, "default (latest)"),
        (["--time", "-2"], {0: 0, 1: 0, 2: 0}, "earliest"),
        (["--time", "-3"], {0: 14, 2: 2}, "max timestamp"),
        (["--time", str(base + 4500)], {0: 5, 2: 0}, "time base+4.5s"),
        (["--time", str(base + 6000)], {0: 6, 2: 2}, "time base+6s"),
        (["--time", str(base + 12_000)], {0: 12}, "time base+12s"),
        (["--time", str(base + 100_000)], {}, "time after every record"),
        (["--time", str(base - 1000)], {0: 0, 2: 0}, "time before every record"),
    ]
    for args, want, what in cases:
        with soft(f"--time {args[1] if args else '(none)'} ({what})"):
            r = kt.tool(GET_OFFSETS, "--topic", topic, *args)
            got = offsets_out(r.stdout, topic)
            assert got == want, f"{what}: {got}, expected {want}\n{r.out}"
    with soft("--topic-partitions"):
        r = kt.tool(GET_OFFSETS, "--topic-partitions", f"{topic}:0,{topic}:2")
        got = offsets_out(r.stdout, topic)
        assert got == {0: 15, 2: 7}, f"--topic-partitions {topic}:0,{topic}:2: {got}\n{r.out}"
    soft.verify()


# ---------------------------------------------------------------------------------------------
# kafka-console-producer / kafka-console-consumer
# ---------------------------------------------------------------------------------------------


def consumed(out: str):
    """Console consumer lines printed with print.partition, print.offset, print.key (tab-separated)."""
    recs = []
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) == 4 and parts[0].startswith("Partition:") and parts[1].startswith("Offset:"):
            recs.append((int(parts[0][10:]), int(parts[1][7:]), parts[2], parts[3]))
    return recs


def test_console_producer_consumer(broker, kt, soft):
    """kafka-console-producer (idempotent, parse.key=true) then kafka-console-consumer: all keyed
    lines come back, each key on one partition in order, offsets contiguous; with --group the
    consumer commits, and the next run of the group gets only what was produced since."""
    topic, group = f"cli-console-{uid()}", f"cli-console-{uid()}"
    create_topic(broker, topic, 3)
    lines = [(f"key-{i % 7}", f"value-{i}") for i in range(60)]
    kt.tool(CONSOLE_PRODUCER, "--topic", topic, "--property", "parse.key=true", "--property", "key.separator=:",
            input="".join(f"{k}:{v}\n" for k, v in lines))

    show = ["--property", "print.key=true", "--property", "print.partition=true", "--property", "print.offset=true"]
    r = kt.tool(CONSOLE_CONSUMER, "--topic", topic, "--from-beginning", "--max-messages", 60,
                "--timeout-ms", 20000, *show)
    recs = consumed(r.stdout)
    assert_in("Processed a total of 60 messages", r.out, "console consumer")
    assert sorted((k, v) for _, _, k, v in recs) == sorted(lines), f"records read back differ:\n{r.stdout}"
    by_part: dict[int, list] = {}
    for p, o, k, v in recs:
        by_part.setdefault(p, []).append((o, k, v))
    key_parts: dict[str, set] = {}
    for p, rs in by_part.items():
        assert [o for o, _, _ in rs] == list(range(len(rs))), f"partition {p}: offsets {[o for o, _, _ in rs]}"
        for _, k, _ in rs:
            key_parts.setdefault(k, set()).add(p)
    assert all(len(ps) == 1 for ps in key_parts.values()), f"a key on more than one partition: {key_parts}"
    for k in key_parts:
        values = [int(v.split("-")[1]) for _, _, kk, v in recs if kk == k]
        assert values == sorted(values), f"key {k}: values out of order {values}"
    assert len(by_part) > 1, f"7 keys all on one partition of 3: {sorted(by_part)}"

    # --group: the first run reads everything and commits; the next one only what came after
    r = kt.tool(CONSOLE_CONSUMER, "--topic", topic, "--group", group, "--from-beginning", "--max-messages", 60,
                "--timeout-ms", 20000, *show)
    assert sorted((k, v) for _, _, k, v in consumed(r.stdout)) == sorted(lines), f"--group first run:\n{r.stdout}"
    more = [(f"key-{i % 7}", f"value-{i}") for i in range(60, 66)]
    kt.tool(CONSOLE_PRODUCER, "--topic", topic, "--property", "parse.key=true", "--property", "key.separator=:",
            input="".join(f"{k}:{v}\n" for k, v in more))
    with soft("--group resumes from its committed offsets"):
        r = kt.tool(CONSOLE_CONSUMER, "--topic", topic, "--group", group, "--max-messages", 6,
                    "--timeout-ms", 15000, *show)
        got = sorted((k, v) for _, _, k, v in consumed(r.stdout))
        assert got == sorted(more), f"second run of group {group}: {got}, expected only {sorted(more)}\n{r.out}"
    soft.verify()


# ---------------------------------------------------------------------------------------------
# ClientCompatibilityTest
# ---------------------------------------------------------------------------------------------

# its flags, all "supported" on a single-node Kafka 4.1 (no authorizer: DescribeAcls answers
# SECURITY_DISABLED, which the tool counts as supported)
COMPAT_FLAGS = {
    "--offsets-for-times-supported": "offsetsForTimes",
    "--cluster-id-supported": None,
    "--create-topics-supported": "createTopics",
    "--describe-acls-supported": "describeAclsSupported",
    "--describe-configs-supported": "describeConfigsSupported",
    "--idempotent-producer-supported": None,
}


def test_client_compatibility(broker, start_broker, kafka_libs, tmp_path):
    """Kafka's ClientCompatibilityTest (what ducktape's client_compatibility_features_test runs) with
    every feature flag on: describeCluster (1 node), describeConfigs (broker), createTopics,
    describeAcls, an idempotent producer, offsetsForTimes, beginning/end offsets, consuming a record
    larger than max.partition.fetch.bytes, cluster id. On a failure the test reruns on a fresh broker
    with the failing feature flag set to false, to list every unsupported feature in one go."""
    flags = {f: "true" for f in COMPAT_FLAGS}
    failed, runs = [], []
    b = broker
    for attempt in range(len(COMPAT_FLAGS) + 1):
        topic = f"cli-compat-{uid()}"
        create_topic(b, topic, 1)
        tools = Tools(kafka_libs, b, tmp_path)
        r = tools.tool(CLIENT_COMPAT, "--topic", topic, "--expect-record-too-large-exception", "false",
                       "--num-cluster-nodes", 1, *[a for kv in flags.items() for a in kv], timeout=90, check=False)
        per_tool = _API_LOG.setdefault("ClientCompatibilityTest", {})
        for name, version, errors in r.apis:
            per_tool.setdefault((name, version), set()).update(errors)
        runs.append(r)
        if r.returncode == 0 and "SUCCESS." in r.stdout:
            break
        m = re.search(r"Expected (\w+) to be supported, but it wasn't", r.out)
        flag = next((f for f, name in COMPAT_FLAGS.items() if m and name == m.group(1)), None)
        if flag is None or flags[flag] == "false":
            failed.append(f"(run {attempt + 1}: failed outside a feature flag, see its output)")
            break
        cause = re.search(r"Caused by: (.*)", r.out[m.start():])
        failed.append(f"{flag} ({m.group(1)}): {cause.group(1) if cause else 'no cause printed'}")
        flags[flag] = "false"
        b = start_broker()  # the tool needs a fresh cluster (it creates `newtopic`)
    if failed:
        details = "\n\n".join(f"--- run {i + 1}: {r.what} (exit {r.returncode}) ---\n{r.out[-6000:]}"
                              for i, r in enumerate(runs))
        pytest.fail("ClientCompatibilityTest: unsupported on this broker:\n  " + "\n  ".join(failed) +
                    f"\n\n{details}", pytrace=False)
