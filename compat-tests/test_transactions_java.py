"""Transactions with the Java client (kafka-clients 4.1) and Kafka's TransactionalMessageCopier.

The client scenarios live in compat-tests/java (ketch.compat.TxnScenario) and check themselves
(exit 1 with MISMATCH: on a wrong result). Run by hand:
    java -cp compat-tests/.cache/java-build/ketch-compat-java.jar ketch.compat.TxnScenario \
        127.0.0.1:PORT commit-abort|fence <topic>

`protocol`: "advertised" uses whatever the broker advertises (Kafka 4.1 and Ketch finalize
transaction.version=2, KIP-890: no AddPartitionsToTxn from the client, Produce v12+ adds the
partition, EndTxn v5 bumps the epoch); "tv1" first downgrades transaction.version to 1 (Admin
updateFeatures) so the same client uses the classic protocol (AddPartitionsToTxn v3,
AddOffsetsToTxn + TxnOffsetCommit, EndTxn v4, Produce v11).
"""

import json
import re
import time
import uuid

import pytest

from conftest import kafka_cds_options
from txn_support import (
    TXN_PROTOCOLS,
    apply_txn_protocol,
    assert_values,
    java_dump,
    java_txn,
    proxied_broker,  # noqa: F401  (fixture)
    watched,  # noqa: F401  (fixture)
)


@pytest.mark.parametrize("protocol", TXN_PROTOCOLS)
def test_java_txn_commit_abort(broker, java_compat_jar, protocol):
    """7 transactions (commit, abort, abort, commit, commit on 2 of the 3 partitions, abort,
    commit) of 20 records per partition: read_committed sees exactly the committed records in
    order, read_uncommitted every data record (no control record), end offsets = records + one
    marker per transaction per partition it wrote to. Then a transaction left open on partition 0
    followed by non-transactional records: ListOffsets(latest, read_committed) and the
    read_committed consumer stop at the last stable offset (the open transaction's first offset),
    read_uncommitted reads to the high watermark; after the commit everything is visible."""
    apply_txn_protocol(java_compat_jar, broker, protocol)
    topic = f"java-txn-{uuid.uuid4().hex[:8]}"
    r = java_txn(java_compat_jar, broker.bootstrap, "commit-abort", topic)
    assert "commit-abort ok" in r.stdout


@pytest.mark.parametrize("protocol", TXN_PROTOCOLS)
def test_java_txn_fencing(broker, java_compat_jar, protocol):
    """A second producer with the same transactional.id fences the first: (1) with a transaction
    open, the new producer's initTransactions aborts it (Kafka answers InitProducerId with
    CONCURRENT_TRANSACTIONS until the abort is done; the client retries) and the zombie's
    commitTransaction fails with ProducerFencedException (EndTxn: PRODUCER_FENCED); (2) between
    transactions, the zombie's next send/commit fails: ProducerFencedException directly
    (classic protocol: AddPartitionsToTxn answers PRODUCER_FENCED) or first the abortable
    InvalidProducerEpochException (transaction.version 2: Produce answers INVALID_PRODUCER_EPOCH)
    and then ProducerFencedException from abortTransaction (EndTxn: PRODUCER_FENCED). The zombie's
    records are never visible to read_committed."""
    apply_txn_protocol(java_compat_jar, broker, protocol)
    topic = f"java-fence-{uuid.uuid4().hex[:8]}"
    r = java_txn(java_compat_jar, broker.bootstrap, "fence", topic)
    assert "fence ok" in r.stdout


# Kafka checks for timed-out transactions every 10 s by default; 500 ms keeps this test short.
@pytest.mark.broker_config(**{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
def test_java_txn_timeout_late_write(broker, java_compat_jar):
    """A transaction left open past transaction.timeout.ms (2 s) is aborted by the coordinator
    (DescribeTransactions: CompleteAbort). The producer's next send, to the partition it already
    wrote to or to one it did not (a second producer), fails with InvalidProducerEpochException
    (Produce: INVALID_PRODUCER_EPOCH) instead of the late record opening a new transaction; its
    commitTransaction fails, abortTransaction succeeds and a new transaction commits. Neither late
    record is ever in the log (read_uncommitted), and read_committed sees only the new
    transactions' records."""
    topic = f"java-txn-timeout-{uuid.uuid4().hex[:8]}"
    r = java_txn(java_compat_jar, broker.bootstrap, "timeout-late-write", topic)
    assert "timeout-late-write ok" in r.stdout


COPIER = "org.apache.kafka.tools.TransactionalMessageCopier"


def start_copiers(broker_bootstrap, kafka_libs, watched, src, dst, group, suffix, parts):
    """One TransactionalMessageCopier per input partition, all in one consumer group."""
    copiers = []
    for p in range(parts):
        cmd = ["java", "-Xmx256m", *kafka_cds_options(kafka_libs),
               f"-Dlog4j2.configurationFile={kafka_libs / 'log4j2.properties'}",
               "-cp", f"{kafka_libs}/*", COPIER,
               "--broker-list", broker_bootstrap, "--input-topic", src, "--input-partition", str(p),
               "--output-topic", dst, "--transactional-id", f"copier-{suffix}-{p}", "--consumer-group", group,
               "--transaction-size", "100", "--transaction-timeout", "30000", "--enable-random-aborts",
               "--use-group-metadata"]
        copiers.append(watched(cmd, f"copier-{p}"))
    return copiers


def check_copiers(copiers, java_compat_jar, bootstrap, src, dst, group, parts, per_partition):
    """Every copier finished with nothing left; read_committed output = input exactly once, in
    order; aborted copies in the log; the group's offsets at the input's end."""
    for p, c in enumerate(copiers):
        rc = c.wait(150)
        out = c.output()
        # the last status line: {"stage":"ShutdownComplete",...,"remaining":0} (4.1; older: "shutdown_complete")
        done = [l for l in out.splitlines() if "ShutdownComplete" in l or "shutdown_complete" in l]
        if rc != 0 or not done or '"remaining":0' not in done[-1]:
            pytest.fail(f"TransactionalMessageCopier for partition {p} exited {rc} (expected 0 and a final status "
                        f"with remaining 0)\n{out}", pytrace=False)
        print(f"copier {p}: {done[-1]}")

    want = {p: [f"p{p}-{n}" for n in range(per_partition)] for p in range(parts)}
    rc = java_dump(java_compat_jar, bootstrap, dst, "read_committed")
    for p in range(parts):
        assert_values(rc, p, want[p], "copier output, read_committed (every input record exactly once, in order)")
    ru = java_dump(java_compat_jar, bootstrap, dst, "read_uncommitted")
    aborted = 0
    for p in range(parts):
        have = ru.values(p)
        assert set(have) == set(want[p]), f"partition {p}: read_uncommitted holds records not in the input " \
                                          f"or misses some: {sorted(set(have) ^ set(want[p]))[:20]}"
        aborted += len(have) - len(want[p])
        assert rc.end[p] == ru.end[p], f"partition {p}: LSO {rc.end[p]} != HW {ru.end[p]} with no open transaction"
    print(f"{aborted} aborted record copies in the output log")
    # P(no abort in ~40 transactions) = (2/3)^40: the copiers abort about a third of the time
    assert aborted > 0, "no aborted transaction data in the output: random aborts did not happen?"
    r = java_txn(java_compat_jar, bootstrap, "group-offsets", group)
    committed = {}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            committed[(d["t"], d["p"])] = d["o"]
    assert committed == {(src, p): per_partition for p in range(parts)}, \
        f"group {group} committed offsets {committed}, expected {per_partition} on each input partition"


def test_transactional_message_copier(broker, java_compat_jar, kafka_libs, watched):
    """Consume-transform-produce with sendOffsetsToTransaction: Kafka's own
    TransactionalMessageCopier (kafka-tools, as in Kafka's system tests) copies each of 2 input
    partitions (2000 records each, plain idempotent producer) to the same partition of an output
    topic, 100 records per transaction, randomly aborting about a third of the transactions
    (--enable-random-aborts: abortTransaction, then seek back to the committed offsets, which a
    read_committed consumer fetches with require_stable). Both copiers run at once, in one
    consumer group (--use-group-metadata: TxnOffsetCommit with the consumer's group metadata).
    The output read by read_committed must be exactly the input, in order; the aborted copies
    must be in the log (read_uncommitted) and the group's committed offsets at the input's end.
    (Also passes on Kafka with transaction.version=1; not parametrized to keep the run short.)"""
    suffix = uuid.uuid4().hex[:8]
    src, dst, group = f"copier-in-{suffix}", f"copier-out-{suffix}", f"copier-group-{suffix}"
    parts, per_partition = 2, 2000
    java_txn(java_compat_jar, broker.bootstrap, "seq-produce", src, parts, parts * per_partition)
    java_txn(java_compat_jar, broker.bootstrap, "create-topic", dst, parts)
    copiers = start_copiers(broker.bootstrap, kafka_libs, watched, src, dst, group, suffix, parts)
    check_copiers(copiers, java_compat_jar, broker.bootstrap, src, dst, group, parts, per_partition)


def test_transactional_message_copier_across_broker_kill9(proxied_broker, java_compat_jar, kafka_libs, watched):
    """The same exactly-once copy (transaction protocol as advertised: 2 on Kafka 4.1 and Ketch),
    with the broker killed (SIGKILL) once both copiers have committed transactions, and restarted
    on the same data directory. Transactions open or completing at the kill must end up either
    committed once or aborted, the coordinator must rebuild its state (__transaction_state,
    producer state of every partition, group offsets) from disk, and the copiers, retrying
    through the kill, must still produce the input exactly once in order."""
    proxy, broker = proxied_broker
    suffix = uuid.uuid4().hex[:8]
    src, dst, group = f"kcopier-in-{suffix}", f"kcopier-out-{suffix}", f"kcopier-group-{suffix}"
    parts, per_partition = 2, 3000
    java_txn(java_compat_jar, proxy.address, "seq-produce", src, parts, parts * per_partition)
    java_txn(java_compat_jar, proxy.address, "create-topic", dst, parts)
    copiers = start_copiers(proxy.address, kafka_libs, watched, src, dst, group, suffix, parts)

    def progressed(line: str) -> bool:
        m = re.search(r'"consumed":(\d+)', line)
        return m is not None and int(m.group(1)) >= 500

    for c in copiers:
        c.wait_line(progressed, 90, "copier progress consumed>=500")
    broker.kill9()
    proxy.set_upstream(None)
    proxy.cut()
    t0 = time.monotonic()
    broker.restart()
    proxy.set_upstream(broker.bootstrap)
    print(f"broker killed and restarted in {time.monotonic() - t0:.1f}s (now {broker.bootstrap}); {proxy.stats()}")
    check_copiers(copiers, java_compat_jar, proxy.address, src, dst, group, parts, per_partition)
