"""KIP-848 consumer groups (`group.protocol=consumer`): the broker computes the assignment and
hands partitions over through ConsumerGroupHeartbeat.

- java: Java KafkaConsumers (compat-tests/java, ketch.compat.Kip848Consumer, one process each so
  one can be SIGKILLed) share a 6-partition topic: two, then three members (each partition owned
  by one member at a time, every member gets some), one leaves cleanly (its partitions move), one
  is killed (its partitions move once its session times out, `group.consumer.session.timeout.ms`),
  records produced throughout are all consumed, and only the killed member's uncommitted last
  records may be consumed twice; `kafka-consumer-groups --list` and `--describe` (members,
  assignments, state) show the group; after a broker restart a new member resumes at the
  committed offsets (nothing consumed twice).
- librdkafka (confluent-kafka, librdkafka >= 2.4): two consumers with group.protocol=consumer split
  a topic and consume every record once; committed offsets resume a new consumer.
- probe (compat-tests/go/kip848probe, raw franz-go kmsg requests): the protocol request by request
  with Kafka 4.1's error codes and messages (invalid first heartbeats, unknown groups and members,
  fencing, revocation before hand-over, describe and list, OffsetCommit / OffsetFetch v9 member
  epochs, classic and consumer group ids, group size, static members, DeleteGroups); see its doc
  comment. Every mismatch is listed in one run.
"""

import os
import signal
import subprocess
import time
import uuid

import confluent_kafka
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import _set_pdeathsig, go_build, kafka_cds_options, run_logged

SESSION_MS = 8000
KIP848 = pytest.mark.broker_config(**{
    "group.consumer.session.timeout.ms": str(SESSION_MS),
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
})
TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def create_topic(bootstrap, topic, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)


def produce(bootstrap, topic, values):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for v in values:
        p.produce(topic, value=v.encode())
    assert p.flush(30) == 0


class JavaMember:
    def __init__(self, jar, bootstrap, group, topic, out):
        self.out = out
        self.proc = subprocess.Popen(
            ["java", "-cp", jar, "ketch.compat.Kip848Consumer", bootstrap, group, topic, str(out)],
            stdout=subprocess.DEVNULL, stderr=open(str(out) + ".stderr", "w"))

    def lines(self):
        return self.out.read_text().splitlines() if self.out.exists() else []

    def assigned(self):
        last = [line for line in self.lines() if line.startswith("ASSIGNED")]
        if not last:
            return None
        rest = last[-1][len("ASSIGNED"):].strip()
        return {int(p) for p in rest.split(",")} if rest else set()

    def records(self):
        return [line.split(" ", 3)[3] for line in self.lines() if line.startswith("R ")]

    def uncommitted_tail(self):
        lines = self.lines()
        last = max((i for i, line in enumerate(lines) if line == "COMMITTED"), default=-1)
        return {line.split(" ", 3)[3] for line in lines[last + 1:] if line.startswith("R ")}

    def stop(self):
        open(str(self.out) + ".stop", "w").close()
        self.proc.wait(60)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stderr(self):
        try:
            return open(str(self.out) + ".stderr").read()[-3000:]
        except OSError:
            return ""


def wait_for(what, cond, members, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.25)
    state = "\n".join(f"{m.out.name}: assigned={m.assigned()} records={len(m.records())}\n{m.stderr()}"
                      for m in members)
    pytest.fail(f"timed out waiting for {what}\n{state}")


def consumed(members):
    out = []
    for m in members:
        out += m.records()
    return out


def cgc(kafka_libs, bootstrap, *args):
    r = run_logged(["java", "-XX:TieredStopAtLevel=1", *kafka_cds_options(kafka_libs), "-cp", f"{kafka_libs}/*", TOOL,
                    "--bootstrap-server", bootstrap, *args], timeout=90, what=f"kafka-consumer-groups {args}")
    out = r.stdout + r.stderr
    print(f"$ kafka-consumer-groups {' '.join(args)}\n{out}")
    return out


@KIP848
def test_java_consumer_protocol_members_leave_killed_restart(broker, java_compat_jar, kafka_libs, tmp_path):
    topic, group = "kip848-java", "kip848-group"
    create_topic(broker.bootstrap, topic, 6)
    produced = [f"a-{i}" for i in range(300)]
    produce(broker.bootstrap, topic, produced)
    a = JavaMember(java_compat_jar, broker.bootstrap, group, topic, tmp_path / "a.out")
    b = JavaMember(java_compat_jar, broker.bootstrap, group, topic, tmp_path / "b.out")
    members = [a, b]
    try:
        def split(ms):
            sets = [m.assigned() for m in ms]
            if any(not s for s in sets):
                return False
            union = set().union(*sets)
            return union == set(range(6)) and sum(len(s) for s in sets) == 6

        wait_for("two members sharing the six partitions", lambda: split([a, b]), members)
        wait_for("300 records consumed", lambda: len(set(consumed(members))) == 300, members)
        c = JavaMember(java_compat_jar, broker.bootstrap, group, topic, tmp_path / "c.out")
        members.append(c)
        wait_for("three members with two partitions each",
                 lambda: split([a, b, c]) and all(len(m.assigned()) == 2 for m in (a, b, c)), members)
        batch = [f"b-{i}" for i in range(300)]
        produce(broker.bootstrap, topic, batch)
        produced += batch
        wait_for("600 records consumed", lambda: len(set(consumed(members))) == 600, members)

        out = cgc(kafka_libs, broker.bootstrap, "--list")
        assert group in out.split()
        out = cgc(kafka_libs, broker.bootstrap, "--describe", "--group", group, "--members", "--verbose")
        assert out.count(f"/127.0.0.1") >= 3 and "a.out" in out and "c.out" in out, out
        out = cgc(kafka_libs, broker.bootstrap, "--describe", "--group", group, "--state")
        assert "Stable" in out and "uniform" in out, out

        # b leaves (close): its partitions move to a and c.
        b.stop()
        wait_for("a and c own the six partitions", lambda: split([a, c]), members)
        batch = [f"c-{i}" for i in range(300)]
        produce(broker.bootstrap, topic, batch)
        produced += batch
        wait_for("900 records consumed", lambda: len(set(consumed(members))) == 900, members)

        # c is killed: its partitions move to a once its session timed out.
        c.kill()
        t0 = time.monotonic()
        batch = [f"d-{i}" for i in range(300)]
        produce(broker.bootstrap, topic, batch)
        produced += batch
        wait_for("a owns every partition", lambda: a.assigned() == set(range(6)), members, timeout=SESSION_MS / 1000 + 60)
        print(f"partitions of the killed member moved after {time.monotonic() - t0:.1f}s")
        wait_for("1200 records consumed", lambda: len(set(consumed(members))) == 1200, members)
        all_records = consumed(members)
        assert set(all_records) == set(produced)
        dups = {r for r in all_records if all_records.count(r) > 1}
        assert dups <= c.uncommitted_tail(), f"consumed twice outside the killed member's last batch: {dups}"
        a.stop()
    finally:
        for m in members:
            if m.proc.poll() is None:
                m.kill()

    # Restart: a new member resumes at the committed offsets.
    broker.restart()
    batch = [f"e-{i}" for i in range(60)]
    produce(broker.bootstrap, topic, batch)
    d = JavaMember(java_compat_jar, broker.bootstrap, group, topic, tmp_path / "d.out")
    try:
        wait_for("the new member consumes the 60 new records", lambda: len(d.records()) >= 60, [d])
        time.sleep(2)
        assert sorted(d.records()) == sorted(batch), "resumed exactly at the committed offsets"
        d.stop()
    finally:
        if d.proc.poll() is None:
            d.kill()


@KIP848
def test_librdkafka_consumer_protocol(broker):
    major, minor = (int(x) for x in confluent_kafka.libversion()[0].split(".")[:2])
    assert (major, minor) >= (2, 4), f"librdkafka {confluent_kafka.libversion()[0]} lacks group.protocol=consumer"
    topic, group = "kip848-rdkafka", f"rdk-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 4)
    values = [f"v-{i}" for i in range(400)]
    produce(broker.bootstrap, topic, values)
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False}
    consumers = [Consumer(dict(conf)) for _ in range(2)]
    seen = {0: [], 1: []}
    partition_of = {}
    # A commit sent by a member while the coordinator moves it to its next epoch (right after it
    # acknowledged a revocation) gets STALE_MEMBER_EPOCH from Kafka too; the partition's new owner
    # then starts from the last commit that succeeded, so records after it may be read twice.
    stale_partitions = set()
    try:
        for c in consumers:
            c.subscribe([topic])
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            for i, c in enumerate(consumers):
                for m in c.consume(100, 0.2):
                    if m.error() is None:
                        seen[i].append(m.value().decode())
                        partition_of[m.value().decode()] = m.partition()
                        try:
                            c.commit(message=m, asynchronous=False)
                        except KafkaException as e:
                            if e.args[0].code() != KafkaError.STALE_MEMBER_EPOCH:
                                raise
                            print(f"commit at partition {m.partition()} offset {m.offset()}: {e}")
                            stale_partitions.add(m.partition())
            if len(set(seen[0] + seen[1])) >= 400 and all(c.assignment() for c in consumers):
                break
        owned = [{tp.partition for tp in c.assignment()} for c in consumers]
        print(f"assignments {owned}, consumed {len(seen[0])} + {len(seen[1])}")
        assert all(owned) and owned[0].isdisjoint(owned[1]) and owned[0] | owned[1] == set(range(4)), owned
        got = seen[0] + seen[1]
        assert set(got) == set(values), "every record consumed"
        twice = {v for v in got if got.count(v) > 1}
        assert {partition_of[v] for v in twice} <= stale_partitions, \
            f"records read twice only where a commit was refused: {sorted(twice)[:10]}"
    finally:
        for c in consumers:
            c.close()
    produce(broker.bootstrap, topic, ["after"])
    c = Consumer(dict(conf))
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not got:
        got += [m.value().decode() for m in c.consume(100, 0.5) if m.error() is None]
    time.sleep(1)
    got += [m.value().decode() for m in c.consume(100, 0.5) if m.error() is None]
    c.close()
    assert got == ["after"], "resumed at the committed offsets"


@pytest.mark.broker_config(**{
    "group.consumer.max.size": "3",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
})
def test_consumer_protocol_probe(broker):
    probe = go_build("kip848probe")
    try:
        r = subprocess.run([str(probe), "-brokers", broker.bootstrap], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=120, preexec_fn=_set_pdeathsig)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"kip848 probe timed out\n{e.stdout}\n{e.stderr}", pytrace=False)
    print(r.stdout)
    if r.returncode != 0 or not r.stdout.rstrip().endswith("PASS"):
        mism = [line for line in r.stdout.splitlines() if line.startswith("MISMATCH")]
        pytest.fail(f"kip848 probe: exit {r.returncode}, {len(mism)} mismatches:\n" + "\n".join(mism)
                    + f"\n{r.stderr[-3000:]}", pytrace=False)
