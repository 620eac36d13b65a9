"""Losing the in-sync quorum of a replicated partition, and getting it back: a 3-broker cluster of the
target kind under an Apache Kafka 4.1 controller (the `cluster` fixture, cluster.py's
three_broker_cluster with THREE_BROKER_SETTINGS: broker.session.timeout.ms=3000 on the controller, so a dead
broker is fenced about 3 s after its last heartbeat), topic `quorum` with 3 partitions, replication
factor 3, min.insync.replicas=2. Broker 1 survives throughout; broker 3 is killed (-9) first, then
broker 2 is stopped (SIGTERM: a controlled shutdown), then both come back.

a) one broker down (3): an idempotent acks=all librdkafka producer writes while the controller fences
   it; every record is acknowledged within 15 s of the kill (the controller fences it after ~3 s), and
   a consumer reads exactly the acknowledged records at their acknowledged offsets;
d) with broker 3 down, `kafka-topics.sh --describe` (Kafka's own TopicCommand) shows for every
   partition a live Leader, the Replicas the topic was created with, an Isr without broker 3 and no
   Elr; `--under-replicated-partitions` lists every partition, `--under-min-isr-partitions` none;
b) two brokers down (3 and 2), ISR = {1} < min.insync.replicas: acks=all writes are refused with
   NOT_ENOUGH_REPLICAS (librdkafka's delivery report with retries=0, and the Java producer's
   NotEnoughReplicasException), nothing of them is written; acks=1 writes to the survivor are
   acknowledged, at the offsets following the high watermark. The high watermark does not move
   (Kafka 4.x: no HW advance while the ISR is below min.insync.replicas), so a consumer reads exactly
   what was there before, not the acks=1 records, and the partition's latest offset (ListOffsets)
   stays at the old high watermark. `--describe` shows Leader 1, Isr 1, Elr 2, and
   `--under-min-isr-partitions` lists every partition;
c) brokers 2 and 3 restart: every ISR is [1, 2, 3] again, the high watermark moves to the log end and
   the consumer gets the acks=1 records too; acks=all writes are acknowledged again; the topic holds
   exactly every acknowledged record (phases a, b with acks=1, c) at its acknowledged offset, nothing
   else. Finally broker 1, the only broker that was up throughout, is killed: brokers 2 and 3 lead
   and serve the same records (they really replicated them).

What --describe shows and how long the first failover takes are checked softly (collected, the test
fails at its end with all of them), so that a wrong answer there does not hide the later phases.

Seen with Kafka 4.1 brokers (KETCH_COMPAT_TARGET=kafka, which this test passes; 2 cores; the test
65 to 70 s plus 35 s for the cluster's start):

- kill -9 of broker 3: fenced ~3 s after it; the 300 acks=all writes (3 s of writing) are all
  acknowledged 3.2 s after the kill: the writes wait only for the controller's ISR change, never
  for replica.lag.time.max.ms. Kafka's leader counts a caught-up replica outside the ISR toward
  the high watermark, and adds it back to the ISR, only if the broker is ISR-eligible (not fenced,
  not shutting down: `Partition.isReplicaIsrEligible`).
- --describe with broker 3 down: `Isr: 1,2`, `Elr:` and `LastKnownElr:` empty; every partition is
  under-replicated, none under min ISR.
- SIGTERM of broker 2 (controlled shutdown, exit 143): when it has exited, every partition is led by
  1 with ISR [1], and --describe shows `Elr: 2` (KIP-966: the replica whose removal took the ISR
  below min.insync.replicas stays eligible; broker 3, removed while the ISR had 2, is not).
- acks=all then: NOT_ENOUGH_REPLICAS (19) at once for every record; the Java producer reports
  NotEnoughReplicasException. acks=1: acknowledged at offsets 150..169 of each partition, while the
  high watermark (and ListOffsets latest) stays at 150 and a consumer reads offsets 0..149 only.
- restart: ~7 s per Kafka broker; the ISR is [1, 2, 3] within a second of the second restart, and
  the high watermark jumps to 170 (the acks=1 records become visible).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from conftest import TARGET
from kafka_tools import KafkaTools
from cluster import bootstrap, partition_states, read_all, wait_for
from cluster import create_three_way_topic as create_topic
from test_cluster_under_kafka_controller import (Acks, assert_log_is, cluster,  # noqa: F401 (fixture)
                                                  idempotent_producer)

pytestmark = pytest.mark.timeout(420)  # pytest-timeout; every wait below is bounded on its own

TOPIC, PARTITIONS = "quorum", 3
SURVIVOR, FIRST, SECOND = 1, 3, 2  # broker 1 stays up; 3 is killed first, then 2 is stopped


def ids(text: str) -> list[int]:
    return sorted(int(x) for x in text.split(",") if x)


def describe(kt: KafkaTools, servers: str, *flags: str) -> dict[int, dict] | str:
    """TopicCommand --describe of TOPIC (with `flags`, e.g. --under-replicated-partitions):
    {partition: {"leader": id or None, "replicas": [ids in order], "isr": sorted ids, "elr": text,
    "last_known_elr": text}}, or the tool's output when it failed."""
    r = kt.run("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", servers, "--describe",
               "--topic", TOPIC, *flags, timeout=60, check=False)
    if r.returncode != 0:
        return f"TopicCommand exited {r.returncode}: {r.out[-2000:]}"
    rows = {}
    for line in r.stdout.splitlines():  # "\tTopic: quorum\tPartition: 0\tLeader: 1\tReplicas: 3,1,2\tIsr: 1,2\t..."
        fields = dict(f.split(":", 1) for f in line.strip().split("\t") if ":" in f)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        if "Partition" not in fields:
            continue
        rows[int(fields["Partition"])] = {
            "leader": None if fields["Leader"] == "none" else int(fields["Leader"]),
            "replicas": [int(x) for x in fields["Replicas"].split(",") if x], "isr": ids(fields["Isr"]),
            "elr": fields.get("Elr"), "last_known_elr": fields.get("LastKnownElr")}
    return rows


class Findings:
    """Observations that do not change the cluster (what --describe shows, how long a failover
    takes) are checked softly: every deviation is collected and the test fails at its end with all
    of them, so that one does not hide the next phases' results."""

    def __init__(self):
        self.failures: list[str] = []

    def expect(self, ok: bool, what: str) -> bool:
        if not ok:
            self.failures.append(what)
            print(f"EXPECTATION FAILED: {what}")
        return ok


def expect_describe(found: Findings, kt: KafkaTools, servers: str, expected: dict, what: str, *flags: str,
                    timeout: float = 15) -> None:
    """TopicCommand --describe (with `flags`) shows exactly `expected` within `timeout` (the tool
    asks one broker, whose metadata may be a heartbeat behind the Metadata our waits read)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = describe(kt, servers, *flags)
        if rows == expected or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    found.expect(rows == expected, f"{what}: kafka-topics --describe {' '.join(flags)} showed {rows}, "
                                   f"expected {expected}")


def wait_states(admin: AdminClient, leaders: list[int], isr: list[int], what: str, timeout: float = 60) -> dict:
    """Waits until every partition of TOPIC is led by one of `leaders` with ISR `isr` (librdkafka's
    Metadata); returns {partition: (leader, ISR)}."""
    return wait_for(lambda: (s := partition_states(admin, TOPIC)) and len(s[0]) == PARTITIONS and
                    all(leader in leaders and got == isr for leader, got in s[0].values()) and s[0],
                    what, timeout=timeout)


def high_watermarks(servers: str) -> dict[int, int]:
    """{partition: latest offset} from ListOffsets (read_uncommitted: the high watermark)."""
    c = Consumer({"bootstrap.servers": servers, "group.id": "hw-check", "enable.auto.commit": False})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10, cached=False)[1]
                for p in range(PARTITIONS)}
    finally:
        c.close()


def ends_of(acked: list) -> dict[int, int]:
    return {p: 1 + max((o for q, o, _ in acked if q == p), default=-1) for p in range(PARTITIONS)}


def produce_during(producer: Producer, acks: Acks, prefix: str, n: int, timeout: float) -> None:
    """n records spread over the partitions, 10 every 0.1 s, then flush: bounded by `timeout`."""
    start = time.monotonic()
    for i in range(n):
        producer.produce(TOPIC, value=f"{prefix}{i}".encode(), partition=i % PARTITIONS, on_delivery=acks)
        if i % 10 == 9:
            producer.poll(0.1)
    left = producer.flush(max(1.0, timeout - (time.monotonic() - start)))
    assert left == 0, f"{left} records of {prefix} neither delivered nor failed within {timeout} s"


def nothing_more(servers: str, ends: dict[int, int], seconds: float) -> None:
    """A consumer positioned at `ends` gets no record for `seconds`."""
    c = Consumer({"bootstrap.servers": servers, "group.id": "nothing-more", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(TOPIC, p, o) for p, o in ends.items()])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            assert msg is None or msg.error(), \
                f"a record past the high watermark: {msg.partition()}/{msg.offset()} {msg.value()!r}"
    finally:
        c.close()


def java_producer_refused(kt: KafkaTools, servers: str, tmp_path) -> list[dict]:
    """Kafka's VerifiableProducer, acks=-1, no retries, 5 records: its send events."""
    config = tmp_path / "refused-producer.properties"
    config.write_text("enable.idempotence=false\nretries=0\nrequest.timeout.ms=15000\ndelivery.timeout.ms=20000\n"
                      "linger.ms=0\n")
    tool = kt.start("org.apache.kafka.tools.VerifiableProducer", "--bootstrap-server", servers, "--topic", TOPIC,
                    "--max-messages", "5", "--acks", "-1", "--value-prefix", "7",
                    "--producer.config", str(config))
    deadline = time.monotonic() + 60
    while tool.alive():
        if time.monotonic() > deadline:
            tool.kill()
            pytest.fail(f"VerifiableProducer still running after 60 s: {tool.events()} {tool.stderr()[-3000:]}")
        time.sleep(0.2)
    events = [e for e in tool.events() if e.get("name") in ("producer_send_success", "producer_send_error")]
    print(f"VerifiableProducer acks=-1 (exit {tool.proc.returncode}): {events}")
    assert tool.proc.returncode == 0, f"VerifiableProducer exited {tool.proc.returncode}: {tool.stderr()[-3000:]}"
    return events


def rows_of(states: dict, replicas: dict, elr: str = "") -> dict:
    """The --describe rows expected from {partition: (leader, ISR)} and the assignment."""
    return {p: {"leader": leader, "replicas": replicas[p], "isr": isr, "elr": elr, "last_known_elr": ""}
            for p, (leader, isr) in states.items()}


def test_quorum_loss_refuses_acks_all_serves_acks_1_and_recovers(cluster, kafka_libs, tmp_path):
    """See the module docstring (phases a, d, b, c). Phase times are printed (`pytest -s`)."""
    t0 = time.monotonic()
    found = Findings()

    def at() -> str:
        return f"[{time.monotonic() - t0:5.1f} s]"

    everyone = bootstrap(cluster.values())
    admin = AdminClient({"bootstrap.servers": everyone})
    create_topic(admin, TOPIC, PARTITIONS)
    md = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
    replicas = {p: list(pm.replicas) for p, pm in md.partitions.items()}  # in assignment order
    assert sorted(replicas) == list(range(PARTITIONS)) and all(sorted(r) == [1, 2, 3] for r in replicas.values())
    print(f"{at()} created {TOPIC}: replicas {replicas}")
    kt = KafkaTools(kafka_libs, cluster[SURVIVOR], tmp_path)

    acked = []
    base = Acks()
    produce_during(idempotent_producer(everyone), base, "base", 150, timeout=60)
    assert base.errors == [] and len(base.acked) == 150, base.errors
    acked += base.acked

    # --- a) one broker down: acks=all still works --------------------------------------------------
    cluster[FIRST].kill9()
    killed = time.monotonic()
    print(f"{at()} broker {FIRST} killed (-9)")
    two = [b for n, b in cluster.items() if n != FIRST]
    two_ids = sorted(n for n in cluster if n != FIRST)
    watcher = AdminClient({"bootstrap.servers": bootstrap(two)})
    one_down = Acks()
    produce_during(idempotent_producer(bootstrap(two)), one_down, "a", 300, timeout=90)
    took = time.monotonic() - killed
    print(f"{at()} a) 300 acks=all records written with broker {FIRST} down: {len(one_down.acked)} acked "
          f"{took:.1f} s after the kill, errors {one_down.errors}")
    assert one_down.errors == [] and len(one_down.acked) == 300, one_down.errors
    acked += one_down.acked
    # The controller fences the dead broker ~3 s after its last heartbeat and takes it out of every
    # ISR; the writes wait for no more than that (Kafka: 3 to 6 s here, the 3 s of writing included),
    # not for replica.lag.time.max.ms (30 s).
    found.expect(took < 15, f"a) the acks=all writes after the kill of broker {FIRST} were all acknowledged only "
                            f"{took:.1f} s after it (the controller fenced it after ~3 s)")
    states = wait_states(watcher, two_ids, two_ids, f"every ISR {two_ids}", timeout=60)
    print(f"{at()} Metadata with broker {FIRST} down: {states}")
    assert_log_is(bootstrap(two), TOPIC, acked, PARTITIONS)
    print(f"{at()} a) every acknowledged record consumed")

    # --- d) --describe with broker 3 down -----------------------------------------------------------
    # KIP-966: the ISR did not go below min.insync.replicas, so there are no eligible leader replicas.
    expected = rows_of(states, replicas)
    expect_describe(found, kt, bootstrap(two), expected, f"d) broker {FIRST} down")
    expect_describe(found, kt, bootstrap(two), expected, f"d) broker {FIRST} down", "--under-replicated-partitions")
    expect_describe(found, kt, bootstrap(two), {}, f"d) broker {FIRST} down", "--under-min-isr-partitions")
    print(f"{at()} d) --describe with broker {FIRST} down checked")

    # --- b) two brokers down: ISR {1} < min.insync.replicas ------------------------------------------
    hw_before = high_watermarks(bootstrap(two))
    assert hw_before == ends_of(acked), (hw_before, ends_of(acked))
    cluster[SECOND].stop()
    print(f"{at()} broker {SECOND} stopped (SIGTERM, exit {cluster[SECOND].proc.returncode})")
    survivor = cluster[SURVIVOR].bootstrap
    lone = AdminClient({"bootstrap.servers": survivor})
    states = wait_states(lone, [SURVIVOR], [SURVIVOR], f"every partition led by {SURVIVOR} with ISR [{SURVIVOR}]",
                         timeout=60)
    print(f"{at()} Metadata with brokers {FIRST} and {SECOND} down: {states}")
    assert high_watermarks(survivor) == hw_before

    refused = Acks()
    producer = Producer({"bootstrap.servers": survivor, "acks": "all", "enable.idempotence": False,
                         "retries": 0, "linger.ms": 5, "message.timeout.ms": 30000})
    produce_during(producer, refused, "refused", 30, timeout=45)
    print(f"{at()} b) acks=all with ISR [{SURVIVOR}]: {len(refused.acked)} acked, "
          f"errors {set(map(str, refused.errors))}")
    assert refused.acked == [] and len(refused.errors) == 30, (refused.acked, refused.errors)
    assert {e.code() for e in refused.errors} == {KafkaError.NOT_ENOUGH_REPLICAS}, refused.errors

    events = java_producer_refused(kt, survivor, tmp_path)
    assert [e["name"] for e in events] == ["producer_send_error"] * 5, events
    assert all(e["exception"].endswith("NotEnoughReplicasException") for e in events), events

    lonely = Acks()
    producer = Producer({"bootstrap.servers": survivor, "acks": "1", "enable.idempotence": False,
                         "retries": 0, "linger.ms": 5, "message.timeout.ms": 30000})
    produce_during(producer, lonely, "one", 60, timeout=45)
    print(f"{at()} b) acks=1 with ISR [{SURVIVOR}]: {len(lonely.acked)} acked, errors {lonely.errors}")
    assert lonely.errors == [] and len(lonely.acked) == 60, lonely.errors
    for p in range(PARTITIONS):  # appended right after the old log end: the refused ones were not written
        offsets = sorted(o for q, o, _ in lonely.acked if q == p)
        assert offsets == list(range(hw_before[p], hw_before[p] + 20)), (p, hw_before[p], offsets)

    # The high watermark stays where it was: the acks=1 records are not visible to consumers.
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert high_watermarks(survivor) == hw_before, "the high watermark moved with ISR < min.insync.replicas"
        time.sleep(0.5)
    seen = read_all(survivor, TOPIC, hw_before)
    expected_seen = {p: sorted((o, v) for q, o, v in acked if q == p) for p in range(PARTITIONS)}
    assert seen == expected_seen, "with ISR [1], a consumer reads exactly the records below the old high watermark"
    nothing_more(survivor, hw_before, 3)
    print(f"{at()} b) consumers read up to the old high watermark {hw_before}, not the acks=1 records")

    # KIP-966: broker 2, whose departure took the ISR below min.insync.replicas, is an eligible
    # leader replica (it has every record up to the high watermark); broker 3 left while the ISR
    # still had 2 members and is not.
    expected = rows_of(states, replicas, elr=str(SECOND))
    expect_describe(found, kt, survivor, expected, f"d) brokers {FIRST} and {SECOND} down")
    expect_describe(found, kt, survivor, expected, f"d) brokers {FIRST} and {SECOND} down",
                    "--under-min-isr-partitions")
    print(f"{at()} d) --describe with brokers {FIRST} and {SECOND} down checked")

    # --- c) both come back ---------------------------------------------------------------------------
    for n in (SECOND, FIRST):
        cluster[n].start()
        print(f"{at()} broker {n} restarted on {cluster[n].bootstrap}")
    everyone = bootstrap(cluster.values())
    admin = AdminClient({"bootstrap.servers": everyone})
    states = wait_states(admin, [1, 2, 3], [1, 2, 3], "every ISR [1, 2, 3] again", timeout=90)
    print(f"{at()} c) ISR expanded: {states}")
    acked += lonely.acked
    ends = ends_of(acked)
    wait_for(lambda: high_watermarks(everyone) == ends, f"the high watermarks at the log ends {ends}", timeout=30)
    assert_log_is(everyone, TOPIC, acked, PARTITIONS)
    print(f"{at()} c) the acks=1 records are visible: high watermarks {ends}")

    back = Acks()
    produce_during(idempotent_producer(everyone), back, "c", 300, timeout=60)
    assert back.errors == [] and len(back.acked) == 300, back.errors
    acked += back.acked
    assert_log_is(everyone, TOPIC, acked, PARTITIONS)
    expect_describe(found, kt, everyone, rows_of(states, replicas), "c) every broker back")
    expect_describe(found, kt, everyone, {}, "c) every broker back", "--under-replicated-partitions")
    print(f"{at()} c) acks=all works again; {len(acked)} acknowledged records, all in the log")

    # The brokers that were down really hold everything: without broker 1 they serve it all.
    cluster[SURVIVOR].kill9()
    rest = [b for n, b in cluster.items() if n != SURVIVOR]
    states = wait_states(AdminClient({"bootstrap.servers": bootstrap(rest)}), [2, 3], [2, 3],
                         f"partitions led by 2 or 3 after broker {SURVIVOR}'s kill", timeout=60)
    print(f"{at()} broker {SURVIVOR} killed; {states}")
    assert_log_is(bootstrap(rest), TOPIC, acked, PARTITIONS)
    print(f"{at()} brokers 2 and 3 serve every acknowledged record ({TARGET})")

    assert not found.failures, "\n".join(found.failures)
