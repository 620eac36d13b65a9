"""Kafka's own `kafka-consumer-groups` tool (ConsumerGroupCommand from kafka-tools 4.x, run from the
Maven jars) against the broker.

One test walks a group through its life: an active librdkafka member (in this process) with
committed offsets M on a 3-partition topic holding N records, and a second group that only has
standalone commits (no member ever: protocol type ""). The tool lists groups (plain, with a state
filter, with types), describes offsets and lag (checked against N - M), members (--verbose:
assignment), state (assignor, state, member count), refuses to reset or delete an active group,
then, once the member left: describes the Empty group, resets (dry run, to-earliest, to-offset on
one partition), a consumer re-reads from offset 0, deletes one partition's offset (OffsetDelete),
deletes the group, and the group is gone.

The tool exits 0 even when it prints `Error: ...`: every step checks the printed values. Each step
prints the command and its full output.
"""

import re
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import kafka_cds_options, run_logged

TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
TOOL_TIMEOUT = 90
N = {0: 30, 1: 40, 2: 50}  # records per partition
M = {0: 10, 1: 40, 2: 0}  # committed offsets of the active group

LOG4J = """status = warn
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
"""


@pytest.fixture
def consumer_groups_tool(broker, kafka_libs, tmp_path):
    """cgc(*args) runs ConsumerGroupCommand --bootstrap-server <broker> args; returns stdout + stderr."""
    log4j = tmp_path / "log4j2-tool.properties"
    log4j.write_text(LOG4J)

    def cgc(*args):
        # C1 only: the tool is short-lived, and this halves its start (~3 s -> ~1.3 s on 2 cores)
        cmd = ["java", "-XX:TieredStopAtLevel=1", *kafka_cds_options(kafka_libs),
               f"-Dlog4j2.configurationFile={log4j}", "-cp",
               f"{kafka_libs}/*", TOOL, "--bootstrap-server", broker.bootstrap, *args]
        t0 = time.monotonic()
        r = run_logged(cmd, timeout=TOOL_TIMEOUT, what=f"kafka-consumer-groups {' '.join(args)}")
        out = r.stdout + r.stderr
        print(f"$ kafka-consumer-groups {' '.join(args)}    ({time.monotonic() - t0:.1f}s)\n{out.rstrip()}\n")
        return out

    return cgc


def table(out, *columns):
    """Rows (dicts) of the whitespace-separated table whose header holds `columns`."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        head = line.split()
        if head and all(c in head for c in columns):
            rows = []
            for row in lines[i + 1:]:
                if not row.strip():
                    break
                vals = row.split()
                if len(vals) != len(head):
                    break
                rows.append(dict(zip(head, vals)))
            return rows
    pytest.fail(f"no table with columns {columns} in the output:\n{out}", pytrace=False)


def offsets_table(out, group, topic):
    rows = table(out, "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")
    for r in rows:
        assert r["GROUP"] == group and r["TOPIC"] == topic, f"unexpected row {r}\n{out}"
    return {int(r["PARTITION"]): r for r in rows}


def state_row(out, group):
    # GROUP  COORDINATOR (ID)  ASSIGNMENT-STRATEGY  STATE  #MEMBERS  -- the coordinator column holds a space
    m = re.search(rf"^{re.escape(group)}\s+(\S+)\s+\((\d+)\)\s+(\S+)\s+(\S+)\s+(\d+)\s*$", out, re.M)
    assert m, f"no state row for {group}:\n{out}"
    return {"coordinator": m.group(1), "id": int(m.group(2)), "assignor": m.group(3), "state": m.group(4),
            "members": int(m.group(5))}


def listed(out):
    return {line.strip() for line in out.splitlines() if line.strip() and not line.startswith(("[", "WARN"))}


def check_offsets(out, group, topic, committed, member=None):
    """committed: {partition: offset}; only those partitions may appear. Lag = end - committed."""
    rows = offsets_table(out, group, topic)
    assert set(rows) == set(committed), f"partitions described {sorted(rows)}, expected {sorted(committed)}\n{out}"
    for p, off in committed.items():
        r = rows[p]
        want = {"CURRENT-OFFSET": str(off), "LOG-END-OFFSET": str(N[p]), "LAG": str(N[p] - off)}
        got = {k: r[k] for k in want}
        assert got == want, f"partition {p}: {got}, expected {want}\n{out}"
        if member is None:
            assert (r["CONSUMER-ID"], r["HOST"], r["CLIENT-ID"]) == ("-", "-", "-"), f"partition {p}: {r}\n{out}"
        else:
            assert r["CONSUMER-ID"] == member["id"] and r["CLIENT-ID"] == member["client"], \
                f"partition {p}: {r}, expected member {member}\n{out}"
            assert r["HOST"].endswith("127.0.0.1"), f"partition {p}: host {r['HOST']}\n{out}"


@pytest.mark.broker_config(**{"group.initial.rebalance.delay.ms": "0"})
def test_kafka_consumer_groups_tool(broker, consumer_groups_tool):
    cgc = consumer_groups_tool
    suffix = uuid.uuid4().hex[:8]
    topic, group, idle = f"grp-tool-{suffix}", f"group-tool-{suffix}", f"group-tool-idle-{suffix}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(timeout=30)
    deadline = time.monotonic() + 30
    while True:
        t = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == 3 and all(
                p.leader >= 0 for p in t.partitions.values()):
            break
        assert time.monotonic() < deadline, f"topic {topic} not ready"
        time.sleep(0.1)
    prod = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    for p, n in N.items():
        for i in range(n):
            prod.produce(topic, value=f"{p}-{i}".encode(), partition=p)
    assert prod.flush(30) == 0

    # a group that only ever saw commits (standalone consumer, no member)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": idle, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    c.close()

    # the active member, committed offsets M
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "tool-member",
                       "enable.auto.commit": False, "auto.offset.reset": "earliest",
                       "partition.assignment.strategy": "range", "session.timeout.ms": 30000})
    try:
        member.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(member.assignment()) < 3:
            assert time.monotonic() < deadline, f"member not assigned 3 partitions: {member.assignment()}"
            member.poll(0.2)
        member.commit(offsets=[TopicPartition(topic, p, o) for p, o in M.items()], asynchronous=False)
        member_id = member.memberid()
        me = {"id": member_id, "client": "tool-member"}

        # ---- list
        out = cgc("--list")
        assert listed(out) == {group, idle}, f"--list: {listed(out)}, expected {{{group}, {idle}}}"
        rows = table(cgc("--list", "--state", "Stable"), "GROUP", "STATE")
        assert [(r["GROUP"], r["STATE"]) for r in rows] == [(group, "Stable")], rows
        rows = table(cgc("--list", "--state", "Empty"), "GROUP", "STATE")
        assert [(r["GROUP"], r["STATE"]) for r in rows] == [(idle, "Empty")], rows
        rows = table(cgc("--list", "--type", "classic"), "GROUP", "TYPE")
        assert sorted((r["GROUP"], r["TYPE"]) for r in rows) == sorted([(group, "Classic"), (idle, "Classic")]), rows

        # ---- describe offsets / lag, members, state
        check_offsets(cgc("--describe", "--group", group), group, topic, M, member=me)
        out = cgc("--describe", "--group", group, "--members", "--verbose")
        rows = table(out, "GROUP", "CONSUMER-ID", "#PARTITIONS")
        assert len(rows) == 1, out
        r = rows[0]
        assert (r["CONSUMER-ID"], r["CLIENT-ID"], r["#PARTITIONS"]) == (member_id, "tool-member", "3"), out
        assert r["CURRENT-ASSIGNMENT"] == f"{topic}:0,1,2", out
        st = state_row(cgc("--describe", "--group", group, "--state"), group)
        assert (st["assignor"], st["state"], st["members"]) == ("range", "Stable", 1), st
        assert st["coordinator"] == broker.bootstrap, st

        # ---- an active group can be neither reset nor deleted
        out = cgc("--reset-offsets", "--to-earliest", "--execute", "--group", group, "--topic", topic)
        assert f"Assignments can only be reset if the group '{group}' is inactive, but the current state is Stable" \
            in out, out
        out = cgc("--delete", "--group", group)
        assert "GroupNotEmptyException" in out or "is not empty" in out, out
        check_offsets(cgc("--describe", "--group", group), group, topic, M, member=me)
    finally:
        member.close()  # LeaveGroup

    # ---- inactive
    deadline = time.monotonic() + 20
    while True:
        st = state_row(cgc("--describe", "--group", group, "--state"), group)
        if st["state"] == "Empty":
            break
        assert time.monotonic() < deadline, f"group still {st['state']} after its only member closed"
        time.sleep(0.5)
    assert (st["assignor"], st["members"]) == ("-", 0), st
    out = cgc("--describe", "--group", group)
    assert f"Consumer group '{group}' has no active members." in out, out
    check_offsets(out, group, topic, M)

    out = cgc("--reset-offsets", "--to-earliest", "--dry-run", "--group", group, "--topic", topic)
    rows = table(out, "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
    assert {int(r["PARTITION"]): int(r["NEW-OFFSET"]) for r in rows} == {0: 0, 1: 0, 2: 0}, out
    check_offsets(cgc("--describe", "--group", group), group, topic, M)  # dry run: nothing changed

    out = cgc("--reset-offsets", "--to-earliest", "--execute", "--group", group, "--topic", topic)
    rows = table(out, "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
    assert {int(r["PARTITION"]): int(r["NEW-OFFSET"]) for r in rows} == {0: 0, 1: 0, 2: 0}, out
    check_offsets(cgc("--describe", "--group", group), group, topic, {0: 0, 1: 0, 2: 0})

    # a consumer in the group now re-reads everything from offset 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "tool-reader",
                  "enable.auto.commit": False, "auto.offset.reset": "latest"})
    got = {}
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 45
        while sum(len(v) for v in got.values()) < sum(N.values()):
            assert time.monotonic() < deadline, f"re-read after the reset: {({p: len(v) for p, v in got.items()})}"
            for m in c.consume(num_messages=500, timeout=0.2):
                if m.error() is None:
                    got.setdefault(m.partition(), []).append(m.offset())
    finally:
        c.close()
    for p, n in N.items():
        assert got.get(p) == list(range(n)), f"partition {p}: re-read offsets {got.get(p)}, expected 0..{n - 1}"
    print(f"after --reset-offsets --to-earliest a consumer re-read {sum(N.values())} records from offset 0")

    out = cgc("--reset-offsets", "--to-offset", "25", "--execute", "--group", group, "--topic", f"{topic}:0")
    rows = table(out, "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
    assert [(int(r["PARTITION"]), int(r["NEW-OFFSET"])) for r in rows] == [(0, 25)], out
    check_offsets(cgc("--describe", "--group", group), group, topic, {0: 25, 1: 0, 2: 0})

    # ---- delete one partition's offset (OffsetDelete)
    out = cgc("--delete-offsets", "--group", group, "--topic", f"{topic}:0")
    rows = table(out, "TOPIC", "PARTITION", "STATUS")
    assert [(r["TOPIC"], r["PARTITION"], r["STATUS"]) for r in rows] == [(topic, "0", "Successful")], out
    check_offsets(cgc("--describe", "--group", group), group, topic, {1: 0, 2: 0})

    # ---- delete the group
    out = cgc("--delete", "--group", group)
    assert f"Deletion of requested consumer groups ('{group}') was successful." in out, out
    out = cgc("--list")
    assert listed(out) == {idle}, f"--list after --delete: {listed(out)}, expected {{{idle}}}"
    out = cgc("--describe", "--group", group)
    assert re.search(rf"(Group {re.escape(group)} not found|Consumer group '{re.escape(group)}' does not exist)",
                     out), out
    out = cgc("--delete", "--group", group)
    assert "GroupIdNotFoundException" in out or "does not exist" in out, out

    # the commit-only group: Empty, no assignor, its one offset
    out = cgc("--describe", "--all-groups", "--state")
    st = state_row(out, idle)
    assert (st["assignor"], st["state"], st["members"]) == ("-", "Empty", 0), st
    assert group not in out, out
    rows = offsets_table(cgc("--describe", "--group", idle), idle, topic)
    assert {p: (r["CURRENT-OFFSET"], r["LAG"]) for p, r in rows.items()} == {0: ("5", str(N[0] - 5))}, rows
