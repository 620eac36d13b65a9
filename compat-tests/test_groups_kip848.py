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
    def __init__(self, jar, bootstrap, group, topic, out, protocol="consumer"):
        self.out, self.protocol = out, protocol
        self.proc = subprocess.Popen(
            ["java", "-cp", jar, "ketch.compat.Kip848Consumer", bootstrap, group, topic, str(out)],
            stdout=subprocess.DEVNULL, stderr=open(str(out) + ".stderr", "w"),
            env={**os.environ, "KETCH_GROUP_PROTOCOL": protocol})

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
def test_rolling_upgrade_from_classic_to_consumer_members_and_back(broker, java_compat_jar, kafka_libs, tmp_path):
    """Kafka 4.1's online migration (`group.consumer.migration.policy`, bidirectional by default):
    a group of classic consumers is upgraded one member at a time to group.protocol=consumer, the
    group turning into a consumer group at the first such member (the classic members stay in it),
    then downgraded back the same way, turning classic again when its last consumer-protocol
    member leaves. The partitions are split among the members at every step, every record is
    consumed, none twice (each member commits before it gives a partition up)."""
    topic, group = "kip848-migrate", "kip848-migrating"
    create_topic(broker.bootstrap, topic, 6)
    produced = []
    members = []

    def batch(name):
        values = [f"{name}-{i}" for i in range(120)]
        produce(broker.bootstrap, topic, values)
        produced.extend(values)
        wait_for(f"{len(produced)} records consumed", lambda: set(consumed(members)) >= set(produced), members)

    def start(name, protocol):
        m = JavaMember(java_compat_jar, broker.bootstrap, group, topic, tmp_path / f"{name}.out", protocol)
        members.append(m)
        return m

    def split(live):
        def ok():
            sets = [m.assigned() for m in live]
            return (all(sets) and set().union(*sets) == set(range(6)) and sum(len(s) for s in sets) == 6
                    and max(len(s) for s in sets) - min(len(s) for s in sets) <= 1)
        names = ", ".join(m.out.stem for m in live)
        wait_for(f"{names} sharing the six partitions", ok, members)

    def group_type():
        out = cgc(kafka_libs, broker.bootstrap, "--list", "--type")
        line = [ln.split() for ln in out.splitlines() if ln.split()[:1] == [group]]
        return line[0][1].lower() if line else None

    try:
        live = [start("a1", "classic"), start("b1", "classic")]
        split(live)
        batch("classic")
        assert group_type() == "classic"
        steps = [("c1", "consumer", None), ("a2", "consumer", "a1"), ("b2", "consumer", "b1"),
                 ("a3", "classic", "a2"), ("b3", "classic", "b2"), (None, None, "c1")]
        for name, protocol, leaving in steps:
            if name is not None:
                live.append(start(name, protocol))
                split(live)
            if leaving is not None:
                gone = next(m for m in live if m.out.stem == leaving)
                live.remove(gone)
                gone.stop()
                split(live)
            batch(f"after-{name or 'last'}")
            kinds = {m.protocol for m in live}
            print(f"members {[m.out.stem for m in live]}: {group_type()} group")
            assert group_type() == ("consumer" if "consumer" in kinds else "classic"), kinds
        all_records = consumed(members)
        assert set(all_records) == set(produced)
        dups = sorted({r for r in all_records if all_records.count(r) > 1})
        assert not dups, f"consumed twice: {dups[:20]}"
    finally:
        for m in members:
            if m.proc.poll() is None:
                m.kill()


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


@KIP848
def test_librdkafka_classic_and_consumer_members_migrate_a_group(broker):
    """The online migration with librdkafka: two classic consumers (range) are joined by a
    group.protocol=consumer one (the group becomes a consumer group, the classic members stay in
    it), the classic ones leave, a classic one joins again and the consumer-protocol one leaves
    (the group is classic again). Every record is consumed, and read twice only where a commit
    raced a member's move to its next epoch."""
    topic, group = "kip848-rdk-migrate", f"rdk-mig-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 4)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    base = {"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False}
    classic = {**base, "group.protocol": "classic", "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
               "partition.assignment.strategy": "range"}
    modern = {**base, "group.protocol": "consumer"}
    live, seen, produced = {}, [], []
    # A commit racing a member's move to its next epoch (or a classic rejoin) is refused by Kafka
    # too; the partition's next owner then starts at the last commit that went through, so its
    # records after that one may be read twice.
    partition_of, refused = {}, set()
    racing = (KafkaError.STALE_MEMBER_EPOCH, KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS,
              KafkaError.UNKNOWN_MEMBER_ID)

    def poll_all(seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for c in list(live.values()):
                for m in c.consume(50, 0.1):
                    if m.error() is None:
                        seen.append(m.value().decode())
                        partition_of[m.value().decode()] = m.partition()
                        try:
                            c.commit(message=m, asynchronous=False)
                        except KafkaException as e:
                            if e.args[0].code() not in racing:
                                raise
                            print(f"commit at partition {m.partition()} offset {m.offset()}: {e}")
                            refused.add(m.partition())

    def step(name, conf=None, leaving=None):
        if conf is not None:
            live[name] = Consumer(dict(conf))
            live[name].subscribe([topic])
        if leaving is not None:
            poll_all(1)
            live.pop(leaving).close()
        values = [f"{name}-{i}" for i in range(100)]
        produce(broker.bootstrap, topic, values)
        produced.extend(values)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not set(seen) >= set(produced):
            poll_all(0.5)
        assert set(seen) >= set(produced), f"after {name}: {len(set(produced) - set(seen))} records not consumed"
        listed = admin.list_consumer_groups().result(30)
        kinds = {g.group_id: g.type for g in listed.valid}
        print(f"after {name}: members {sorted(live)}, group type {kinds.get(group)}")
        return str(kinds.get(group)).lower()

    try:
        step("a", classic)
        assert "classic" in step("b", classic)
        assert "consumer" in step("c", modern)
        step("a-gone", leaving="a")
        assert "consumer" in step("b-gone", leaving="b")
        assert "consumer" in step("d", classic)
        assert "classic" in step("c-gone", leaving="c")
        dups = sorted({v for v in seen if seen.count(v) > 1})
        assert {partition_of[v] for v in dups} <= refused, f"consumed twice without a refused commit: {dups[:20]}"
    finally:
        for c in live.values():
            c.close()
