"""Kafka's own replication system test (`tests/kafkatest/tests/core/replication_test.py`,
`ReplicationTest` on `EndToEndTest`), with Kafka's own test clients, against a 3-broker cluster of
the target kind under an Apache Kafka 4.1 controller (cluster.three_broker_cluster, as in
test_cluster_under_kafka_controller.py: replication factor 3 for `__consumer_offsets`,
min.insync.replicas=2, the controller fences a dead broker ~3 s after its last heartbeat).

Clients: `org.apache.kafka.tools.VerifiableProducer` and `org.apache.kafka.tools.VerifiableConsumer`
(Maven artifact org.apache.kafka:kafka-tools 4.1), run unchanged in the background, configured as
kafkatest's services configure them for `enable_idempotence=True`:

    VerifiableProducer --bootstrap-server B1,B2,B3 --topic test_topic --max-messages -1
        --throughput 500 --acks -1 --producer.config P
      P: request.timeout.ms=30000, max.in.flight.requests.per.connection=5, retries=1000000,
         enable.idempotence=true   (the tool itself sets retries=0 unless the config overrides it)
    VerifiableConsumer --bootstrap-server B1,B2,B3 --topic test_topic --group-id test_group
        --group-protocol classic --reset-policy earliest --session-timeout 30000 --verbose
      (no --enable-autocommit: it commits synchronously after every poll)

Both tests are parametrized over the controller: `[kafka]` an Apache Kafka 4.1 controller, `[ketch]`
Ketch's own KRaft controller (cluster.KetchController, `process.roles=controller`; with the default
target that is three Ketch brokers under a Ketch controller, with KETCH_COMPAT_TARGET=kafka three
Kafka 4.1 brokers under it). Seen under the Ketch controller: each test 22 s (cluster start 3 s)
with Ketch brokers, 55 s with Kafka brokers; the killed broker fenced and partition 0 failed over
~3 s after a kill -9, a SIGTERMed broker out of the Metadata, every ISR and every leadership 1.1 s
later (once 5.6 s: an OffsetCommit on the stopping coordinator waited the 5 s replication timeout
and was answered COORDINATOR_NOT_AVAILABLE; retried by the consumer, nothing lost).

Each prints one JSON event per line; the producer's values are increasing integers ("0", "1", ...),
`producer_send_success` carries the partition and offset of each acknowledged one, the consumer's
`record_data` (--verbose) the partition, offset and value of each record consumed.

Scenario (ReplicationTest.test_replication_with_broker_failure): topic `test_topic`, 3 partitions,
replication factor 3, min.insync.replicas=2; producer and consumer start and run in the background
while brokers are bounced; then the producer must still be making progress, is stopped, the
consumer reads until it has reached the last acknowledged offset of every partition and is stopped.
Kafka's `validate_delivery` then requires every acked value to have been consumed and, with
idempotence, no value consumed twice. These tests check that, and more precisely:

- every acknowledged record was consumed at the partition and offset it was acknowledged at;
- no value is in the log twice (at two positions): what idempotence guarantees;
- the producer reported no `producer_send_error` at all (stricter than Kafka's test, which ignores
  unacknowledged sends): with idempotence, 10^6 retries and a 120 s delivery timeout every send
  must be acknowledged in the end, only retriable errors may show up on the way (they are counted
  from the producer's WARN log and printed);
- the consumer's history obeys the group protocol: records only from assigned partitions, offsets
  consecutive within an assignment (nothing skipped), after every (re)assignment the consumer
  resumes no earlier than its last successful commit of that partition (a coordinator that lost a
  committed offset would make it go back further) and no later than the next record;
- no record consumed twice either (Kafka's check counts those as duplicates too): the consumer
  commits after every poll, so it could only read a record again after a failed commit and a
  reassignment, which a group whose coordinator moves with its members and offsets never needs;
- the group's committed offsets in the end are the log end offsets (every commit was
  replicated to the new coordinators).

The producer and consumer bootstrap to the brokers' first addresses; a restarted broker listens on
a new port, which the clients learn from the Metadata of the others. Phase times, the
acknowledgements per phase, the producer's retriable errors and the consumer's group conversation
per phase (from their logs) are printed (`pytest -s`).

Seen with Kafka 4.1 brokers (KETCH_COMPAT_TARGET=kafka, 2 cores shared with other runs; each test
50 to 75 s with the cluster's start (15 to 25 s), the whole file 2 to 2.5 minutes; 14,000 to
26,000 records per test):

- clean bounce: SIGTERM to exit 2 to 3 s (controlled shutdown: right after the exit the broker is
  out of the Metadata, leads nothing and is in no ISR), restart 6 to 10 s, back in every ISR
  within 1 s. The producer is never without an acknowledgement for more than ~1 s; it gets
  NOT_LEADER_OR_FOLLOWER (5 or 6 batches in flight to the old leader), sometimes
  OUT_OF_ORDER_SEQUENCE_NUMBER (a batch that followed the refused ones), all retried. The group's
  coordinator, when it is the broker stopped, answers NOT_COORDINATOR to an OffsetCommit; the
  consumer finds the new one (the new leader of the group's __consumer_offsets partition), whose
  first answer is COORDINATOR_LOAD_IN_PROGRESS, then the commit succeeds; no rebalance (one
  generation, one assignment), nothing read twice.
- hard kill: the killed leader is fenced and partition 0 led by a survivor ~3.2 s after the kill
  (broker.session.timeout.ms=3000), during which acks=-1 writes wait (the dead broker is still in
  the ISRs); the producer gets NETWORK_EXCEPTION for the batches in flight to it, then connection
  refusals, sometimes NOT_LEADER_OR_FOLLOWER and OUT_OF_ORDER_SEQUENCE_NUMBER once the new leader
  has taken over, all retried; restart 7 to 10 s. A killed coordinator is rediscovered (still the dead one) until it
  is fenced, then the consumer moves to the new one (COORDINATOR_LOAD_IN_PROGRESS first); no
  rebalance, nothing read twice.
"""

from __future__ import annotations

import re
import signal
import time
from collections import Counter
from contextlib import contextmanager
from datetime import datetime

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from cluster import THREE_NODES as NODES
from cluster import (bootstrap, cluster_states, create_three_way_topic, group_offsets, three_broker_cluster,
                     wait_for, wait_for_isr, wait_for_leader)
from kafka_tools import BackgroundTool, KafkaTools

pytestmark = pytest.mark.timeout(300)  # pytest-timeout; each test takes about a minute on Kafka

TOPIC, PARTITIONS, GROUP = "test_topic", 3, "test_group"
THROUGHPUT = 500  # messages/s (EndToEndTest uses 1000)
MIN_ACKED = 10_000  # acknowledged before the producer is stopped (EndToEndTest.run_validation: 5000)

PRODUCER_CONFIG = {  # kafkatest's VerifiableProducer with enable_idempotence=True
    "request.timeout.ms": "30000",
    "max.in.flight.requests.per.connection": "5",
    "retries": "1000000",
    "enable.idempotence": "true",
}
COORDINATOR_LOGGERS = {  # the consumer's group conversation, INFO, on its stderr
    "org.apache.kafka.clients.consumer.internals.AbstractCoordinator": "INFO",
    "org.apache.kafka.clients.consumer.internals.ConsumerCoordinator": "INFO",
}


@pytest.fixture
def controller() -> str:
    """The cluster's controller kind: an Apache Kafka 4.1 controller unless a test is parametrized
    with `controller` ("ketch": Ketch's own KRaft controller, `process.roles=controller`)."""
    return "kafka"


@pytest.fixture
def cluster(start_cluster, controller):
    """{node id: started broker} of a fresh 3-broker cluster, every broker unfenced; killed at the end."""
    return three_broker_cluster(start_cluster, controller)


# ---------------------------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------------------------


class Phases:
    """Named phases with their wall-clock span (to relate them to the tools' event timestamps)."""

    def __init__(self):
        self.rows: list[tuple[str, float, float]] = []  # (name, start, end), time.time()

    @contextmanager
    def __call__(self, name: str):
        t0 = time.time()
        try:
            yield
        finally:
            self.rows.append((name, t0, time.time()))
            print(f"[phase] {name}: {time.time() - t0:.1f} s")

    def at(self, t: float) -> str:
        """The phase wall-clock time `t` falls in (or the one it follows)."""
        name = "before the first phase"
        for n, t0, t1 in self.rows:
            if t0 <= t <= t1:
                return n
            if t > t1:
                name = f"after '{n}'"
        return name

    def report(self, acked_ts: list[float]) -> str:
        """Each phase's duration, with the acknowledgements that arrived in it and the longest
        time without one."""
        lines = []
        for name, t0, t1 in self.rows:
            inside = [t for t in acked_ts if t0 <= t <= t1]
            gaps = [b - a for a, b in zip([t0] + inside, inside + [t1])]
            lines.append(f"  {t1 - t0:6.1f} s  {name}  ({len(inside)} acks, longest without one "
                         f"{max(gaps):.1f} s)")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# cluster state
# ---------------------------------------------------------------------------------------------

_ADMINS: dict[str, AdminClient] = {}


def admin_of(cluster) -> AdminClient:
    """An admin client bootstrapped to the running brokers' current addresses."""
    servers = bootstrap(b for b in cluster.values() if b.is_running())
    if servers not in _ADMINS:
        _ADMINS.clear()  # one client at a time: the old one would keep reconnecting to dead ports
        _ADMINS[servers] = AdminClient({"bootstrap.servers": servers})
    return _ADMINS[servers]


def wait_full_isr(cluster, what: str, timeout: float = 90) -> dict:
    """Every partition of test_topic and __consumer_offsets led by a broker with ISR [1, 2, 3], and
    every broker in the Metadata; returns the partition states {(topic, partition): (leader, ISR)}."""
    return wait_for_isr(admin_of(cluster), [TOPIC, "__consumer_offsets"], NODES, leaders=NODES, brokers=NODES,
                        count={TOPIC: PARTITIONS}, what=what, timeout=timeout)[0]


def leaders(parts: dict) -> dict[int, int]:
    return {p: parts[(TOPIC, p)][0] for p in range(PARTITIONS)}


# ---------------------------------------------------------------------------------------------
# the workload: VerifiableProducer + VerifiableConsumer
# ---------------------------------------------------------------------------------------------


class Workload:
    def __init__(self, cluster, kafka_libs, tmp_path, phases: Phases):
        self.cluster, self.phases = cluster, phases
        self.kt = KafkaTools(kafka_libs, cluster[NODES[0]], tmp_path)
        self.servers = bootstrap(cluster.values())
        config = tmp_path / "verifiable_producer.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in PRODUCER_CONFIG.items()))
        self.producer_args = ["--bootstrap-server", self.servers, "--topic", TOPIC, "--max-messages", "-1",
                              "--throughput", str(THROUGHPUT), "--acks", "-1", "--producer.config", str(config)]
        self.consumer_args = ["--bootstrap-server", self.servers, "--topic", TOPIC, "--group-id", GROUP,
                              "--group-protocol", "classic", "--reset-policy", "earliest",
                              "--session-timeout", "30000", "--verbose"]
        self.producer: BackgroundTool | None = None
        self.consumer: BackgroundTool | None = None

    def acked(self) -> list[dict]:
        return self.producer.events("producer_send_success")

    def consumed(self) -> list[dict]:
        return self.consumer.events("record_data")

    def start(self) -> None:
        """EndToEndTest: producer first (5 acks within the bound), then the consumer (5 records)."""
        with self.phases("producer start until 5 acks"):
            self.producer = self.kt.start("org.apache.kafka.tools.VerifiableProducer", *self.producer_args)
            wait_for(lambda: self.alive() and len(self.acked()) > 5, "the producer's first acks", timeout=60)
        with self.phases("consumer start until 5 records (group joined)"):
            self.consumer = self.kt.start("org.apache.kafka.tools.VerifiableConsumer", *self.consumer_args,
                                          loggers=COORDINATOR_LOGGERS)
            wait_for(lambda: self.alive() and len(self.consumed()) >= 5, "the consumer's first records", timeout=60)

    def alive(self) -> bool:
        """True, or fails the test with the log of a tool that exited before it was stopped."""
        for tool in (self.producer, self.consumer):
            if tool is not None and not tool.stopped and not tool.alive():
                raise AssertionError(f"{tool.what} exited ({tool.proc.returncode}):\n{tool.stderr()[-5000:]}")
        return True

    def finish(self) -> None:
        """ProduceConsumeValidateTest.stop_producer_and_consumer + EndToEndTest.run_validation: the
        producer still makes progress, has at least MIN_ACKED acks, is stopped (SIGTERM: it flushes
        and prints shutdown_complete); the consumer reaches the last acknowledged offset of every
        partition and is stopped."""
        with self.phases("producer still acknowledged after the failures"):
            now = len(self.acked())
            wait_for(lambda: self.alive() and len(self.acked()) > now + 5, "the producer to keep producing")
            wait_for(lambda: self.alive() and len(self.acked()) >= MIN_ACKED, f"{MIN_ACKED} acks", timeout=60)
        with self.phases("producer stop (SIGTERM, flush)"):
            rc = self.producer.stop(timeout=150)  # kafkatest's stop_timeout_sec
            assert rc != -signal.SIGKILL, "the producer did not stop within 150 s of SIGTERM"
            assert self.producer.events("shutdown_complete"), self.producer.stderr()[-5000:]
        last = {}
        for e in self.acked():
            last[e["partition"]] = max(last.get(e["partition"], -1), e["offset"])
        with self.phases("consumer catches up with the last acked offsets"):
            def caught_up():
                self.alive()
                got = {}
                for e in self.consumed():
                    got[e["partition"]] = max(got.get(e["partition"], -1), e["offset"])
                return all(got.get(p, -1) >= o for p, o in last.items())
            wait_for(caught_up, f"the consumer to reach offsets {last}", timeout=60)
        with self.phases("consumer stop (SIGTERM, close)"):
            rc = self.consumer.stop(timeout=60)
            assert rc != -signal.SIGKILL, "the consumer did not stop within 60 s of SIGTERM"
            assert self.consumer.events("shutdown_complete"), self.consumer.stderr()[-5000:]

    def close(self) -> None:
        for tool in (self.producer, self.consumer):
            if tool is not None:
                tool.kill()


@pytest.fixture
def workload(cluster, kafka_libs, tmp_path):
    """(Workload, Phases) on test_topic, created with RF 3 / min ISR 2; started by the test."""
    phases = Phases()
    with phases("create test_topic (RF 3, ISR [1, 2, 3])"):
        create_three_way_topic(admin_of(cluster), TOPIC, PARTITIONS)
    w = Workload(cluster, kafka_libs, tmp_path, phases)
    try:
        yield w, phases
    finally:
        w.close()
        _ADMINS.clear()
        for tool in (w.producer, w.consumer):
            if tool is not None:
                print(f"{tool.what.split()[0]}: stdout {tool.stdout_path}, stderr {tool.stderr_path}")


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------

LOG_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] (\w+) (.*)$", re.M)
LOGGER_SUFFIX = re.compile(r" \([\w.$]+\)$")
CLIENT_PREFIX = re.compile(r"^\[(?:Producer|Consumer) clientId=[^\]]*\] ")
NODE_DETAILS = re.compile(r" \(id: \d+ rack: [^)]*\)")
PRODUCER_PATTERNS = [  # (regex on a log message, label) for the producer's WARN lines
    (re.compile(r"Got error produce response .* Error: (\w+)"), "produce error {}"),
    (re.compile(r"Received invalid metadata error in produce request on partition (\S+) due to \S*?(\w+Exception)"),
     "metadata refreshed after {1} on {0}"),
    (re.compile(r"Connection to node (-?\d+) .*could not be established"), "connection to {} refused"),
    (re.compile(r"Disconnecting from node (-?\d+) due to request timeout"), "request timeout, node {}"),
]
CONSUMER_PATTERNS = [  # the consumer's group conversation (AbstractCoordinator / ConsumerCoordinator INFO)
    (re.compile(r"Discovered group coordinator (\S+) \(id: (\d+)"), "coordinator {}"),
    (re.compile(r"Group coordinator \S+ .*?is unavailable or invalid due to cause: (.*?)\. isDisconnected: (\w+)"),
     "coordinator dropped: {} (disconnected {})"),
    (re.compile(r"JoinGroup failed: (.*?)(?: Marking coordinator unknown.*| Sent generation.*)?$"),
     "JoinGroup failed: {}"),
    (re.compile(r"Successfully joined group with generation Generation\{generationId=(\d+)"), "joined generation {}"),
    (re.compile(r"Offset commit failed on partition (\S+) at offset \d+: (.*)$"), "commit of {} failed: {}"),
    (re.compile(r"Setting offset for partition (\S+) to the committed offset FetchPosition\{offset=(\d+)"),
     "{} resumes at committed {}"),
    (re.compile(r"Connection to node (-?\d+) .*could not be established"), "connection to {} refused"),
    (re.compile(r"sending LeaveGroup"), "LeaveGroup"),
]


def node_name(node_id: str) -> str:
    """Kafka clients connect to a group coordinator as node MAX_INT - its id."""
    n = int(node_id)
    return f"node {2147483647 - n} (as coordinator)" if n > 2**30 else f"node {n}"


def client_story(log: str, patterns, phases: "Phases") -> dict[str, Counter]:
    """{phase: Counter(label)} of the labelled lines of a client's log, phases and labels in the
    order they first appear."""
    story: dict[str, Counter] = {}
    for stamp, level, msg in LOG_LINE.findall(log):
        msg = CLIENT_PREFIX.sub("", LOGGER_SUFFIX.sub("", msg))
        for rx, fmt in patterns:
            m = rx.search(msg)
            if not m:
                continue
            groups = list(m.groups())
            if fmt == "coordinator {}":
                groups = [f"node {2147483647 - int(groups[1])} at {groups[0]}"]
            elif fmt.startswith("connection to"):
                groups = [node_name(groups[0])]
            label = fmt.format(*groups)
            break
        else:
            if level not in ("WARN", "ERROR"):
                continue
            label = f"other {level}: {msg[:160]}"  # anything unexpected is shown too
        phase = phases.at(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp())
        story.setdefault(phase, Counter())[NODE_DETAILS.sub("", label)] += 1
    return story


def print_story(who: str, story: dict[str, Counter]) -> None:
    for phase, labels in story.items():
        print(f"  {who} during '{phase}': " + "; ".join(f"{k}" + (f" (x{n})" if n > 1 else "")
                                                         for k, n in labels.items()))


def check_consumer_history(events: list[dict]) -> tuple[list[str], dict]:
    """Replays the consumer's events in order (one thread prints them all): returns (problems,
    stats). See the module docstring for the rules."""
    problems: list[str] = []
    assigned: set[int] = set()
    committed: dict[int, int] = {}  # last successful commit
    seen_max: dict[int, int] = {}  # highest offset consumed so far
    expect: dict[int, int | None] = {}  # next offset within the current assignment (None: just assigned)
    value_at: dict[tuple[int, int], str] = {}
    stats = Counter()
    for e in events:
        name = e.get("name")
        if name == "partitions_assigned":
            stats["assignments"] += 1
            for tp in e["partitions"]:
                assigned.add(tp["partition"])
                expect[tp["partition"]] = None
        elif name == "partitions_revoked":
            stats["revocations"] += 1
            assigned -= {tp["partition"] for tp in e["partitions"]}
        elif name == "offsets_committed":
            if e.get("success"):
                stats["commits"] += 1
                for o in e["offsets"]:
                    committed[o["partition"]] = o["offset"]
            else:
                stats["failed commits"] += 1
                print(f"consumer: commit failed: {e.get('error')} {e['offsets']}")
        elif name == "record_data":
            p, o, v = e["partition"], e["offset"], e["value"]
            if value_at.setdefault((p, o), v) != v:
                problems.append(f"partition {p} offset {o} read as {value_at[(p, o)]!r} then as {v!r}")
            if p not in assigned:
                problems.append(f"record {p}/{o} consumed from a partition not assigned")
            top = seen_max.get(p, -1)
            if expect.get(p) is None:  # first record since the assignment: where the group resumed
                if o < committed.get(p, 0):
                    problems.append(f"partition {p} resumed at {o}, before its last commit {committed.get(p, 0)}")
                if o > top + 1:
                    problems.append(f"partition {p} resumed at {o}, past the next record {top + 1} (skipped)")
                if o <= top:
                    stats["records read again"] += top - o + 1
                    print(f"consumer: partition {p} resumed at {o} after {top} had been consumed "
                          f"(last successful commit {committed.get(p)})")
            elif o != expect[p]:
                problems.append(f"partition {p}: offset {o} consumed after {expect[p] - 1}")
            expect[p] = o + 1
            seen_max[p] = max(top, o)
    return problems, dict(stats)


def validate(w: Workload, phases: Phases) -> None:
    acked, consumed = w.acked(), w.consumed()
    send_errors = w.producer.events("producer_send_error")
    tool_data = w.producer.events("tool_data")
    print(f"acked {len(acked)}, send errors {len(send_errors)}, consumed {len(consumed)} records "
          f"({len({(e['partition'], e['offset']) for e in consumed})} distinct positions); tool_data {tool_data}")
    print("phases:\n" + phases.report([e["timestamp"] / 1000 for e in acked]))
    print("producer (WARN log: retriable errors), consumer (group coordination log):")
    print_story("producer", client_story(w.producer.stderr(), PRODUCER_PATTERNS, phases))
    print_story("consumer", client_story(w.consumer.stderr(), CONSUMER_PATTERNS, phases))

    assert not send_errors, f"{len(send_errors)} sends failed, e.g. {send_errors[:5]}"
    assert tool_data and tool_data[-1]["sent"] == tool_data[-1]["acked"] == len(acked), tool_data
    positions = Counter((e["partition"], e["offset"]) for e in acked)
    assert max(positions.values()) == 1, f"two acks at one offset: {[tp for tp, n in positions.items() if n > 1][:10]}"

    # Kafka's validate_delivery: every acked value consumed; with idempotence, none twice.
    consumed_values = {e["value"] for e in consumed}
    missing = [e["value"] for e in acked if e["value"] not in consumed_values]
    assert not missing, f"{len(missing)} acked values not consumed, e.g. {missing[:20]}"
    where = {(e["partition"], e["offset"]): e["value"] for e in consumed}
    moved = [e for e in acked if where.get((e["partition"], e["offset"])) != e["value"]]
    assert not moved, f"{len(moved)} acked records not at their acknowledged offset, e.g. {moved[:5]}"
    places = Counter(where.values())
    twice = sorted((v for v, n in places.items() if n > 1), key=int)
    assert not twice, f"{len(twice)} values in the log twice (idempotence): {twice[:20]}"
    assert len(where) == len(acked), f"{len(where) - len(acked)} records in the log that were never acknowledged"

    problems, stats = check_consumer_history(w.consumer.events())
    print(f"consumer: {stats}")
    assert not problems, problems[:20]
    # Kafka's check counts these as duplicates too: a group kept across the bounces (its coordinator
    # moved with its members and offsets, every commit succeeding in the end) never reads a record twice.
    assert not stats.get("records read again"), \
        f"the consumer read {stats['records read again']} records twice (after a failed commit and a reassignment)"

    # The producer's sticky partitioner may leave a partition without a record in a short run: its
    # log end is 0, and the group may or may not have committed 0 for it.
    ends = {p: 1 + max((o for q, o in where if q == p), default=-1) for p in range(PARTITIONS)}
    offsets = group_offsets(admin_of(w.cluster), GROUP)
    expected = {(TOPIC, p): o for p, o in ends.items() if o > 0 or (TOPIC, p) in offsets}
    assert offsets == expected, f"committed {offsets}, log ends {ends}"


# ---------------------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("controller", ["kafka", "ketch"])
def test_clean_bounce_of_every_broker_loses_nothing(cluster, workload):
    """Rolling restart (ReplicationTest's clean bounce, of every broker instead of 5 times the
    leader): with the idempotent acks=-1 VerifiableProducer (500 msgs/s) and the
    VerifiableConsumer (classic group) running, brokers 1, 2 and 3 in turn get SIGTERM, are started
    again on their data dirs and caught up until every partition of test_topic and
    __consumer_offsets has the ISR [1, 2, 3] again, before the next one goes. Proves that a clean
    stop and a restart lose no acknowledged record and duplicate none, and that the consumer group
    follows its coordinator and keeps its committed offsets. (A Kafka broker does a controlled
    shutdown: the controller moves its leaderships, group coordinators included, and takes it out
    of the ISRs before it exits; what the Metadata shows right after the exit is printed, not
    required: a broker that just exits is fenced 3 s later, which only stalls the writes longer.)
    `[ketch]`: the same under Ketch's own controller (controlled shutdown in the broker's
    heartbeats: it moves the leaderships and shrinks the ISRs before letting the broker go)."""
    w, phases = workload
    w.start()
    with phases("every ISR [1, 2, 3] (with __consumer_offsets)"):
        parts = wait_full_isr(cluster, "every ISR full before the bounces")
    print(f"leaders of {TOPIC} before the bounces: {leaders(parts)}")
    for n in NODES:
        with phases(f"broker {n}: SIGTERM until exit (controlled shutdown)"):
            cluster[n].stop(timeout=60)
        assert cluster[n].proc.returncode != -signal.SIGKILL, f"broker {n} did not stop within 60 s of SIGTERM"
        s = cluster_states(admin_of(cluster))  # observed, not required: a broker that just exited would be fenced 3 s later
        if s:
            led = sorted(f"{t}-{p}" for (t, p), (leader, _) in s[0].items() if leader == n)
            print(f"right after broker {n}'s exit: in the Metadata: {n in s[1]}, leader of {led or 'nothing'}, "
                  f"in {sum(n in isr for _, isr in s[0].values())} of {len(s[0])} ISRs")
        w.alive()
        with phases(f"broker {n}: start"):
            cluster[n].start()
        with phases(f"broker {n}: back in every ISR"):
            parts = wait_full_isr(cluster, f"broker {n} back in every ISR")
        print(f"leaders of {TOPIC} after broker {n}'s bounce: {leaders(parts)}")
        w.alive()
    w.finish()
    validate(w, phases)


@pytest.mark.parametrize("controller", ["kafka", "ketch"])
def test_hard_kill_of_the_leader_loses_no_acknowledged_message(cluster, workload):
    """ReplicationTest's hard bounce, twice: with the idempotent acks=-1 VerifiableProducer and the
    VerifiableConsumer running, the leader of test_topic's partition 0 gets kill -9; once the
    controller has fenced it (out of the Metadata) and partition 0 has a new leader, it is started
    again on its data dir and caught up until every ISR is [1, 2, 3] again; then the same with the
    new leader of partition 0 (a different broker). Proves that acknowledged records survive the
    loss of their leader (acks=-1 with min.insync.replicas=2: they were on a survivor), that the
    producer's retries to the new leader are deduplicated (the followers kept the producer state),
    that the killed broker truncates and catches up as a follower, and that the consumer group
    continues across the failovers. `[ketch]`: the same under Ketch's own controller (it fences the
    killed broker, elects the new leader from the ISR and, on the leader's AlterPartition, takes the restarted
    broker back into the ISR)."""
    w, phases = workload
    w.start()
    with phases("every ISR [1, 2, 3] (with __consumer_offsets)"):
        parts = wait_full_isr(cluster, "every ISR full before the kills")
    try:
        coordinator = admin_of(cluster).describe_consumer_groups([GROUP])[GROUP].result(timeout=15).coordinator.id
        print(f"the group's coordinator before the kills: broker {coordinator}")
    except KafkaException as e:
        print(f"describe_consumer_groups: {e}")
    victims: list[int] = []
    for round_ in (1, 2):
        victim = leaders(parts)[0]
        assert victim not in victims, f"partition 0 is led by {victim} again (leaders {leaders(parts)})"
        victims.append(victim)
        print(f"round {round_}: leaders of {TOPIC} {leaders(parts)}: kill -9 of broker {victim}")
        survivors = [n for n in NODES if n != victim]
        with phases(f"round {round_}: kill -9 of broker {victim} until fenced and partition 0 led by a survivor"):
            cluster[victim].kill9()
            moved, _ = wait_for_leader(admin_of(cluster), TOPIC, survivors, only=[0], absent=[victim],
                                       what=f"broker {victim} fenced and partition 0 failed over", timeout=60)
        print(f"round {round_}: after the failover: {TOPIC} {[moved.get(p) for p in range(PARTITIONS)]}")
        w.alive()
        with phases(f"round {round_}: broker {victim}: start"):
            cluster[victim].start()
        with phases(f"round {round_}: broker {victim}: back in every ISR"):
            parts = wait_full_isr(cluster, f"broker {victim} back in every ISR")
        w.alive()
    w.finish()
    validate(w, phases)
