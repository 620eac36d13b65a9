"""Kafka's transactions system test (`tests/kafkatest/tests/core/transactions_test.py`,
`TransactionsTest.test_transactions` with bounce_target="brokers", failure_mode="hard_bounce",
use_group_metadata=True) against a 3-broker cluster of the target kind under an Apache Kafka 4.1
controller (the `cluster` fixture, cluster.py's three_broker_cluster with THREE_BROKER_SETTINGS:
replication factor 3 for `__consumer_offsets` and `__transaction_state`,
transaction.state.log.min.isr=2, min.insync.replicas=2; the controller fences a dead broker about
3 s after its last heartbeat).

Scenario, as Kafka's: topics `input-topic` (2 partitions) and `output-topic` (3 partitions), both
replication factor 3 and min.insync.replicas=2. The input is seeded with the values "0".."N-1"
(confluent-kafka, idempotent, acks=all; value i to partition i % 2). Two instances of Kafka's
`org.apache.kafka.tools.TransactionalMessageCopier` (kafka-tools 4.1, unchanged) copy input
partition i to the output topic under transactional id `copier-i`, as kafkatest's service runs
them: consumer group `transactions-test-consumer-group` (manual assignment, read_committed),
transaction timeout 40 s, `--use-group-metadata` (KIP-447 sendOffsetsToTransaction with the
consumer's group metadata). The tool sends each record to the output partition of the same number
as its input partition and commits the consumed offsets in the same transaction. `copier-0` runs
with `--enable-random-aborts` (it aborts about one transaction in three after having sent its
records and offsets, then rewinds to its committed offset and copies them again); `copier-1`
without. A read_committed VerifiableConsumer (group `concurrent_consumer`) reads the output topic
while the copy goes on, as Kafka's test's concurrent ConsoleConsumer does.

While they copy, brokers are killed (-9) and restarted, two rounds (Kafka's hard bounce, of the
brokers that matter instead of every broker in turn):
  round 1: the transaction coordinator of `copier-0` (FindCoordinator + DescribeTransactions, from
           Kafka's `kafka-transactions describe`), once both copiers have copied 10 % of their
           input (both must still be copying);
  round 2: the leader of output partition 0 (where copier-0 writes), once every partition of the
           four topics has its full ISR again (copier-0 must still be copying; copier-1, without
           aborts, is faster and may be done).
Each round waits until the controller has fenced the broker and moved every leadership off it,
requires both copiers to commit transactions while it is dead (the survivors coordinate their
transactions, their groups' offsets, and lead their partitions), restarts it and waits until every
ISR of input-topic, output-topic, `__consumer_offsets` and `__transaction_state` is [1, 2, 3].
The copy's length is set by the number of transactions (records / TRANSACTION_SIZE, and copier-0's
aborted ones), each of which takes Kafka 0.2 to 0.5 s (the TxnOffsetCommit answered
CONCURRENT_TRANSACTIONS, retried, until the previous transaction's marker is in
`__consumer_offsets`): enough to outlast both rounds.

Checks, once both copiers have finished (each exits by itself once it has committed the whole
partition as it was at its start):
- each copier exited 0 and reported every record of its partition processed;
- read_committed, the output topic holds exactly the seeded values, each once (no loss, no
  duplicate), and output partition p holds input partition p's values in input order (output
  partition 2 stays empty); its last stable offset has reached the high watermark (no transaction
  left open);
- read_uncommitted sees, besides those, the records of aborted transactions: on partition 0 (random
  aborts) there are some, on partition 1 only if copier-1's producer itself aborted a transaction
  (its TransactionManager log shows a transition to ABORTING_TRANSACTION, e.g. after an abortable
  error during a failover); every aborted record is a copy of an input record of that partition;
- the concurrent read_committed consumer never got an aborted or uncommitted record (everything it
  consumed is at a committed position with the committed value: the new leaders kept the last
  stable offset and the aborted transactions' index), read every committed record, none twice.

The copiers and the concurrent consumer bootstrap to the brokers' first addresses; a restarted
broker listens on a new port, which the clients learn from the Metadata of the others. Progress,
each round's timings and the abort counts are printed (`pytest -s`).

Seen with Kafka 4.1 brokers (KETCH_COMPAT_TARGET=kafka, which this test passes; 2 cores shared with
other runs, load 8 to 20): 115 to 220 s for the whole test, cluster start included; the copiers
reach 10 % 19 to 40 s after their start (JVM start, InitProducerId, which creates
`__transaction_state`); a transaction takes 0.3 to 0.5 s, most of it TxnOffsetCommit answered
CONCURRENT_TRANSACTIONS (~170 times per copier) until the previous transaction's markers are
written; the controller fences the killed broker and moves its leaderships 2.7 to 3.5 s after the
kill; both copiers commit again 4 to 9 s after it (NOT_COORDINATOR then COORDINATOR_LOAD_IN_PROGRESS
from the new transaction coordinator, NETWORK_EXCEPTION and connection refusals for the produce
requests in flight to the dead leader, all retried: no abortable error, copier-1 aborts nothing);
the restart and catch-up take 11 to 30 s; copier-0 aborts 50 to 80 transactions (2000 to 2800
aborted records in output-topic-0), and each partition's high watermark counts one marker per
transaction (5000 records + 125 commit markers in output-topic-1).
"""

from __future__ import annotations

import re
import signal
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from conftest import TARGET
from kafka_tools import BackgroundTool, KafkaTools
from cluster import THREE_NODES as NODES
from cluster import bootstrap, read_all, wait_for
from cluster import create_three_way_topic as create_topic
from test_cluster_under_kafka_controller import cluster, produce_all  # noqa: F401 (fixture)

pytestmark = pytest.mark.timeout(330)  # pytest-timeout; 2 to 3.5 minutes on Kafka with the cluster's start

INPUT, OUTPUT = "input-topic", "output-topic"
INPUT_PARTITIONS, OUTPUT_PARTITIONS = 2, 3
# Seeded records per input partition. The copy must outlast both kill rounds (~10 s each): a
# transaction takes Kafka 0.2 to 0.5 s here and Ketch about a fifth of that (its TxnOffsetCommit
# is not answered CONCURRENT_TRANSACTIONS: EndTxn returns once the markers are written), so
# Ketch gets more records to copy; what the test proves is the same.
PER_PARTITION = 5000 if TARGET == "kafka" else 15000
TRANSACTION_SIZE = 40  # records per transaction (the copier's max.poll.records): many transactions
TRANSACTION_TIMEOUT_MS = 40000  # Kafka's test: above the request timeout, below its progress timeout
GROUP = "transactions-test-consumer-group"
CONCURRENT_GROUP = "concurrent_consumer"
COPIER = "org.apache.kafka.tools.TransactionalMessageCopier"
INTERNAL = ("__consumer_offsets", "__transaction_state")
TXN_MANAGER = "org.apache.kafka.clients.producer.internals.TransactionManager"
ABORTING = re.compile(r"Transition from state \w+ to ABORTING_TRANSACTION")
ABORTABLE = re.compile(r"Transiting to abortable error state due to (.*?) \(")


# ---------------------------------------------------------------------------------------------
# cluster state
# ---------------------------------------------------------------------------------------------


class Watch:
    """Metadata from the running brokers (one admin client per set of addresses)."""

    def __init__(self, cluster):
        self.cluster = cluster
        self._admin: tuple[str, AdminClient] | None = None

    def admin(self) -> AdminClient:
        servers = bootstrap(b for b in self.cluster.values() if b.is_running())
        if self._admin is None or self._admin[0] != servers:
            self._admin = (servers, AdminClient({"bootstrap.servers": servers}))
        return self._admin[1]

    def snapshot(self):
        """({(topic, partition): (leader, sorted ISR)} of input, output and the internal topics,
        sorted broker ids) from one Metadata request, or None."""
        try:
            md = self.admin().list_topics(timeout=5)
        except KafkaException:
            return None
        parts = {}
        for t, tm in md.topics.items():
            if t in (INPUT, OUTPUT, *INTERNAL) and tm.error is None:
                parts.update({(t, p): (pm.leader, sorted(pm.isrs)) for p, pm in tm.partitions.items()})
        return parts, sorted(md.brokers)

    def full_isr(self, what: str, timeout: float = 60) -> dict:
        """Every broker in the Metadata; every partition of the four topics led, ISR [1, 2, 3]."""
        def full():
            s = self.snapshot()
            if not s or s[1] != NODES:
                return None
            parts = s[0]
            topics = {t for t, _ in parts}
            if not {INPUT, OUTPUT, *INTERNAL} <= topics:
                return None
            return all(leader in NODES and isr == NODES for leader, isr in parts.values()) and parts
        return wait_for(full, what, timeout=timeout)

    def failed_over(self, victim: int, timeout: float = 60) -> dict:
        """`victim` out of the Metadata and leading nothing of the four topics."""
        def moved():
            s = self.snapshot()
            return s and victim not in s[1] and {INPUT, OUTPUT, *INTERNAL} <= {t for t, _ in s[0]} and \
                all(leader in NODES and leader != victim for leader, _ in s[0].values()) and s[0]
        return wait_for(moved, f"broker {victim} fenced and every leadership moved off it", timeout=timeout)


def transaction_coordinator(kt: KafkaTools, servers: str, transactional_id: str) -> int:
    """The coordinator of `transactional_id`, from Kafka's `kafka-transactions describe`
    (FindCoordinator + DescribeTransactions)."""
    def ask():
        r = kt.run("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", servers, "describe",
                   "--transactional-id", transactional_id, timeout=60, check=False)
        lines = [line.split("\t") for line in r.stdout.splitlines() if "\t" in line]
        if r.returncode != 0 or len(lines) < 2:
            return None
        row = dict(zip((c.strip() for c in lines[0]), (c.strip() for c in lines[1])))
        return int(row["CoordinatorId"]) if "CoordinatorId" in row else None
    return wait_for(ask, f"the transaction coordinator of {transactional_id}", timeout=60)


# ---------------------------------------------------------------------------------------------
# the copiers and the concurrent consumer
# ---------------------------------------------------------------------------------------------


class Copier:
    def __init__(self, kt: KafkaTools, servers: str, partition: int, random_aborts: bool, total: int):
        self.partition, self.random_aborts, self.total = partition, random_aborts, total
        self.transactional_id = f"copier-{partition}"
        args = ["--broker-list", servers, "--transactional-id", self.transactional_id,
                "--input-topic", INPUT, "--input-partition", partition, "--output-topic", OUTPUT,
                "--consumer-group", GROUP, "--max-messages", -1, "--transaction-size", TRANSACTION_SIZE,
                "--transaction-timeout", TRANSACTION_TIMEOUT_MS, "--use-group-metadata"]
        if random_aborts:
            args.append("--enable-random-aborts")
        # the producer's transaction state transitions (DEBUG) tell the aborts
        self.tool: BackgroundTool = kt.start(COPIER, *args, loggers={TXN_MANAGER: "DEBUG"})

    def status(self) -> list[dict]:
        """The tool's status lines: {"transactionalId", "stage" (ProcessLoop, ShutdownComplete),
        "totalProcessed" (records of committed transactions), "remaining", ...}."""
        return [e for e in self.tool.events() if e.get("transactionalId") == self.transactional_id]

    def processed(self) -> int:
        s = self.status()
        return s[-1]["totalProcessed"] if s else 0

    def done(self) -> bool:
        return not self.tool.alive() and self.tool.proc.returncode == 0

    def check_alive(self) -> None:
        if not self.tool.alive() and (self.tool.proc.returncode != 0 or self.processed() < self.total):
            raise AssertionError(f"{self.transactional_id} exited {self.tool.proc.returncode} after "
                                 f"{self.processed()} of {self.total} records:\n{digest(self.tool.stderr())}")

    def aborts(self) -> tuple[int, Counter]:
        """(transactions the producer aborted, Counter of the abortable errors that led to some)."""
        log = self.tool.stderr()
        return len(ABORTING.findall(log)), Counter(ABORTABLE.findall(log))


STAMP = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] ")


def digest(log: str, chars: int = 6000) -> str:
    """The end of a tool's log with runs of lines that differ only in their time stamp folded into
    one ("... (x586)"): a copier retrying FindCoordinator for a minute says so in one line."""
    out: list[list] = []
    for line in log.splitlines():
        bare = STAMP.sub("", line)
        if out and out[-1][0] == bare:
            out[-1][1] += 1
        else:
            out.append([bare, 1])
    text = "\n".join(line + (f"  (x{n})" if n > 1 else "") for line, n in out)
    return text[-chars:]


def progress(copiers: list[Copier]) -> str:
    return ", ".join(f"{c.transactional_id} {c.processed()}/{c.total}" for c in copiers)


# ---------------------------------------------------------------------------------------------
# reading the output topic back
# ---------------------------------------------------------------------------------------------


def high_watermarks(servers: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": servers, "group.id": "txn-check-hw", "isolation.level": "read_uncommitted"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in range(partitions)}
    finally:
        c.close()


# ---------------------------------------------------------------------------------------------
# the test
# ---------------------------------------------------------------------------------------------


def test_transactional_copy_is_exactly_once_across_broker_kills(cluster, kafka_libs, tmp_path):
    t_start = time.monotonic()
    servers = bootstrap(cluster.values())
    admin = AdminClient({"bootstrap.servers": servers})
    create_topic(admin, INPUT, INPUT_PARTITIONS)
    create_topic(admin, OUTPUT, OUTPUT_PARTITIONS)
    n = INPUT_PARTITIONS * PER_PARTITION
    acked = produce_all(servers, INPUT, [str(i).encode() for i in range(n)], INPUT_PARTITIONS)
    inputs = {p: [v.decode() for _, _, v in sorted(r for r in acked if r[0] == p)] for p in range(INPUT_PARTITIONS)}
    assert all(len(v) == PER_PARTITION for v in inputs.values()), {p: len(v) for p, v in inputs.items()}
    print(f"seeded {n} records in {time.monotonic() - t_start:.1f} s since the cluster was up")

    kt = KafkaTools(kafka_libs, cluster[NODES[0]], tmp_path)
    watch = Watch(cluster)
    copiers: list[Copier] = []
    concurrent: BackgroundTool | None = None
    try:
        copiers = [Copier(kt, servers, p, random_aborts=(p == 0), total=PER_PARTITION) for p in range(INPUT_PARTITIONS)]
        cfg = tmp_path / "read_committed.properties"
        cfg.write_text("isolation.level=read_committed\n")
        concurrent = kt.start("org.apache.kafka.tools.VerifiableConsumer", "--bootstrap-server", servers,
                              "--topic", OUTPUT, "--group-id", CONCURRENT_GROUP, "--group-protocol", "classic",
                              "--reset-policy", "earliest", "--session-timeout", "30000", "--verbose",
                              "--consumer.config", cfg)

        def alive() -> bool:
            for c in copiers:
                c.check_alive()
            if not concurrent.alive():
                raise AssertionError(f"the concurrent consumer exited ({concurrent.proc.returncode}):\n"
                                     f"{digest(concurrent.stderr())}")
            return True

        t_copy = time.monotonic()
        wait_for(lambda: alive() and all(c.processed() >= PER_PARTITION // 10 for c in copiers),
                 "both copiers past 10 % of their partition", timeout=90)
        print(f"copiers past 10 % {time.monotonic() - t_copy:.1f} s after their start: {progress(copiers)}")
        wait_for(lambda: alive() and concurrent.events("record_data"), "the concurrent consumer's first records",
                 timeout=60)
        parts = watch.full_isr("every ISR [1, 2, 3] before the kills")
        coordinator = transaction_coordinator(kt, servers, "copier-0")
        print(f"the transaction coordinator of copier-0: broker {coordinator}; leaders of {OUTPUT} "
              f"{ {p: parts[(OUTPUT, p)][0] for p in range(OUTPUT_PARTITIONS)} }; {progress(copiers)}")

        victims = []
        for round_ in (1, 2):
            if round_ == 1:
                victim, role = coordinator, "the transaction coordinator of copier-0"
            else:
                victim, role = parts[(OUTPUT, 0)][0], f"the leader of {OUTPUT}-0"
            led = sorted(f"{t}-{p}" for (t, p), (leader, _) in parts.items() if leader == victim)
            # The victims are chosen for copier-0, which must be mid-copy (copier-1, without aborts,
            # copies faster and may be done before round 2).
            copying = [c.processed() < c.total for c in copiers]
            assert copying[0] and (round_ > 1 or copying[1]), \
                f"round {round_}: the copy was over before the kill ({progress(copiers)}): seed more records"
            print(f"round {round_}: kill -9 of broker {victim}, {role} (leads {led}); {progress(copiers)}")
            cluster[victim].kill9()
            killed = time.monotonic()
            victims.append(victim)
            moved = watch.failed_over(victim)
            leaders = {p: moved[(OUTPUT, p)][0] for p in range(OUTPUT_PARTITIONS)}
            print(f"round {round_}: broker {victim} fenced, leaderships moved {time.monotonic() - killed:.1f} s "
                  f"after the kill; leaders of {OUTPUT} {leaders}")
            # Both copiers commit transactions with the victim dead (or finish their copy).
            at_failover = [c.processed() for c in copiers]
            wait_for(lambda: alive() and all(c.processed() > a or c.done() for c, a in zip(copiers, at_failover)),
                     f"round {round_}: both copiers committing with broker {victim} dead", timeout=60)
            print(f"round {round_}: both copiers committed with broker {victim} dead, "
                  f"{time.monotonic() - killed:.1f} s after the kill: {progress(copiers)}")
            cluster[victim].start()
            parts = watch.full_isr(f"round {round_}: broker {victim} back in every ISR")
            print(f"round {round_}: broker {victim} restarted and in every ISR {time.monotonic() - killed:.1f} s "
                  f"after the kill; {progress(copiers)}")
            alive()

        wait_for(lambda: alive() and all(c.done() for c in copiers), "both copiers done", timeout=120)
        print(f"copy done {time.monotonic() - t_copy:.1f} s after the copiers' start")
        for c in copiers:
            last = c.status()[-1]
            assert last.get("stage") == "ShutdownComplete" and last["totalProcessed"] == c.total \
                and last["remaining"] == 0, f"{c.transactional_id}: {last}"

        # ---- read the output back
        hw = high_watermarks(servers, OUTPUT, OUTPUT_PARTITIONS)
        def read_back(isolation: str) -> dict[int, list]:
            rows = read_all(servers, OUTPUT, hw, isolation, timeout=60)
            return {p: [(o, v.decode()) for o, v in records] for p, records in rows.items()}
        uncommitted = read_back("read_uncommitted")
        committed = read_back("read_committed")
        print(f"{OUTPUT}: high watermarks {hw}; read_committed {[len(v) for v in committed.values()]} records, "
              f"read_uncommitted {[len(v) for v in uncommitted.values()]}")

        def consumed_all():
            alive()
            got = {(e["partition"], e["offset"]) for e in concurrent.events("record_data")}
            return all((p, o) in got for p, rows in committed.items() for o, _ in rows)
        wait_for(consumed_all, "the concurrent consumer to read every committed record", timeout=60)
        rc = concurrent.stop(timeout=60)
        assert rc != -signal.SIGKILL, "the concurrent consumer did not stop within 60 s of SIGTERM"

        # ---- exactly once: read_committed holds the seeded values, each once, in input order
        values = Counter(v for rows in committed.values() for _, v in rows)
        expected = {str(i) for i in range(n)}
        twice = sorted((v for v, k in values.items() if k > 1), key=int)
        missing = sorted(expected - set(values), key=int)
        extra = sorted(set(values) - expected)
        assert not twice, f"{len(twice)} values committed more than once, e.g. {twice[:20]}"
        assert not missing, f"{len(missing)} seeded values not in the committed output, e.g. {missing[:20]}"
        assert not extra, f"{len(extra)} committed values never seeded, e.g. {extra[:20]}"
        for p in range(OUTPUT_PARTITIONS):
            got = [v for _, v in committed[p]]
            want = inputs.get(p, [])
            first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            assert got == want, (f"output partition {p} is not input partition {p} in order: {len(got)} records "
                                 f"for {len(want)}, first difference at index {first}")

        # ---- aborted transactions: visible read_uncommitted, never read_committed
        aborted = {}
        for p in range(OUTPUT_PARTITIONS):
            at_committed = dict(committed[p])
            at_uncommitted = dict(uncommitted[p])
            differ = {o: (v, at_uncommitted.get(o)) for o, v in at_committed.items() if at_uncommitted.get(o) != v}
            assert not differ, \
                f"partition {p}: committed records read differently read_uncommitted: {list(differ.items())[:5]}"
            aborted[p] = [(o, v) for o, v in uncommitted[p] if o not in at_committed]
            copied = set(inputs.get(p, []))
            stray = [(o, v) for o, v in aborted[p] if v not in copied]
            assert not stray, f"partition {p}: aborted records that copy no input record of partition {p}: {stray[:10]}"
        for c in copiers:
            count, errors = c.aborts()
            print(f"{c.transactional_id} (random aborts {c.random_aborts}): the producer aborted {count} transactions"
                  f" (abortable errors {dict(errors)}); {len(aborted[c.partition])} aborted records in "
                  f"{OUTPUT}-{c.partition}")
            if c.random_aborts:
                assert aborted[c.partition], f"random aborts but no aborted record in {OUTPUT}-{c.partition}"
                assert count > 0, f"{c.transactional_id}: aborted records but its producer aborted nothing"
            else:
                assert not aborted[c.partition] or count > 0, \
                    (f"{len(aborted[c.partition])} aborted records in {OUTPUT}-{c.partition} though "
                     f"{c.transactional_id} has no random aborts and aborted no transaction: "
                     f"{aborted[c.partition][:10]}")
        assert not uncommitted[2], f"records in {OUTPUT}-2, which no copier writes: {uncommitted[2][:10]}"

        # ---- the concurrent read_committed consumer saw committed records only, each once
        records = concurrent.events("record_data")
        committed_at = {(p, o): v for p, rows in committed.items() for o, v in rows}
        wrong = [e for e in records if committed_at.get((e["partition"], e["offset"])) != e["value"]]
        assert not wrong, (f"{len(wrong)} records consumed read_committed that are not committed there "
                           f"(aborted or uncommitted), e.g. {wrong[:5]}")
        read_twice = Counter(e["value"] for e in records)
        dups = sorted((v for v, k in read_twice.items() if k > 1), key=int)
        assert not dups, f"the concurrent consumer read {len(dups)} values twice, e.g. {dups[:20]}"
        print(f"victims {victims}; the whole test {time.monotonic() - t_start:.1f} s after the cluster was up")
    finally:
        for c in copiers:
            if c.tool.alive():
                c.tool.kill()
            print(f"{c.transactional_id}: stdout {c.tool.stdout_path}, stderr {c.tool.stderr_path}")
        if concurrent is not None:
            if concurrent.alive():
                concurrent.kill()
            print(f"concurrent consumer: stdout {concurrent.stdout_path}, stderr {concurrent.stderr_path}")
