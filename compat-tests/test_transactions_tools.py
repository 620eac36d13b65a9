"""Kafka's `kafka-transactions` tool (org.apache.kafka.tools.TransactionsCommand, kafka-tools 4.1)
against an open transaction: ListTransactions, DescribeTransactions, DescribeProducers (and
find-hanging, which combines them with Metadata), then again once the transaction is aborted,
with ListTransactions v2's transactional id pattern (a regex matching the whole id, as Kafka).

The open transaction comes from `TxnScenario open-txn` (Java): initTransactions, begin, 3 records
to partition 0, then it waits for a release file and aborts.
"""

import time
import uuid

from conftest import kafka_cds_options, run_logged
from txn_support import java_cmd, watched  # noqa: F401  (fixture)

TOOL = "org.apache.kafka.tools.TransactionsCommand"


def tool(kafka_libs, broker, *args):
    cmd = ["java", "-Xmx256m", *kafka_cds_options(kafka_libs),
           f"-Dlog4j2.configurationFile={kafka_libs / 'log4j2.properties'}",
           "-cp", f"{kafka_libs}/*", TOOL, "--bootstrap-server", broker.bootstrap, *args]
    t0 = time.monotonic()
    r = run_logged(cmd, timeout=90, what=f"kafka-transactions {' '.join(args)}")
    print(f"--- kafka-transactions {' '.join(args)} ({time.monotonic() - t0:.1f}s) ---\n{r.stdout}")
    return r.stdout


def table(out: str) -> list[dict[str, str]]:
    """The tool's tab-separated table (header line first) as a list of rows."""
    lines = [l for l in out.splitlines() if "\t" in l]
    if not lines:
        return []
    header = [c.strip() for c in lines[0].split("\t")]
    rows = []
    for l in lines[1:]:
        cells = [c.strip() for c in l.split("\t")]
        rows.append(dict(zip(header, cells)))
    return rows


def one(rows, what, **match):
    hits = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    assert len(hits) == 1, f"{what}: expected one row with {match}, got {rows}"
    return hits[0]


def test_kafka_transactions_tool(broker, java_compat_jar, kafka_libs, watched, tmp_path):
    topic = f"tools-txn-{uuid.uuid4().hex[:8]}"
    tid = f"ketch-tools-txn-{uuid.uuid4().hex[:8]}"
    release = tmp_path / "release"
    holder = watched(java_cmd(java_compat_jar, broker.bootstrap, "open-txn", topic, 0, tid, release), "open-txn")
    line = holder.wait_line(lambda l: l.startswith("open first-offset="), 90, "an open transaction")
    first = int(line.split("=")[1])
    try:
        # ---- list: the transaction is Ongoing
        rows = table(tool(kafka_libs, broker, "list"))
        row = one(rows, "list", TransactionalId=tid)
        assert row["TransactionState"] == "Ongoing", f"list: {row}"
        pid = row["ProducerId"]
        coordinator = row["Coordinator"]
        assert int(pid) >= 0 and int(coordinator) >= 0, f"list: {row}"

        # ---- describe: state, producer, timeout, partitions
        rows = table(tool(kafka_libs, broker, "describe", "--transactional-id", tid))
        row = one(rows, "describe", TransactionalId=tid)
        assert row["TransactionState"] == "Ongoing", f"describe: {row}"
        assert row["ProducerId"] == pid, f"describe: producer id {row['ProducerId']}, list said {pid}"
        assert row["CoordinatorId"] == coordinator, f"describe: {row}"
        assert row["TransactionTimeoutMs"] == "60000", f"describe: {row}"
        assert row["TopicPartitions"] == f"{topic}-0", f"describe: partitions {row['TopicPartitions']!r}, " \
                                                       f"expected {topic}-0"
        start = int(row["CurrentTransactionStartTimeMs"])
        assert abs(start - time.time() * 1000) < 120_000, f"describe: transaction start time {start}"
        assert int(row["TransactionDurationMs"]) >= 0, f"describe: {row}"

        # ---- describe-producers: the partition's producer state, with the open transaction's first offset
        rows = table(tool(kafka_libs, broker, "describe-producers", "--topic", topic, "--partition", "0"))
        row = one(rows, "describe-producers", ProducerId=pid)
        assert row["CurrentTransactionStartOffset"] == str(first), \
            f"describe-producers: {row}, expected CurrentTransactionStartOffset {first}"
        assert row["LastSequence"] == "2", f"describe-producers: {row} (3 records sent: last sequence 2)"
        assert row["ProducerEpoch"].lstrip("-").isdigit(), f"describe-producers: {row}"

        # ---- find-hanging: the transaction is younger than its timeout, so not hanging
        out = tool(kafka_libs, broker, "find-hanging", "--broker-id", coordinator)
        assert not [r for r in table(out) if r.get("ProducerId") == pid], f"find-hanging reports ours: {out}"
    finally:
        release.write_text("abort")
    holder.wait_line(lambda l: l.startswith("ended"), 60, "the transaction aborted")
    assert holder.wait(30) == 0, holder.output()

    # ---- after the abort
    rows = table(tool(kafka_libs, broker, "describe", "--transactional-id", tid))
    row = one(rows, "describe after abort", TransactionalId=tid)
    assert row["TransactionState"] == "CompleteAbort", f"describe after abort: {row}"
    assert row["TopicPartitions"] == "", f"describe after abort: partitions {row['TopicPartitions']!r}"
    rows = table(tool(kafka_libs, broker, "describe-producers", "--topic", topic, "--partition", "0"))
    row = one(rows, "describe-producers after abort", ProducerId=pid)
    assert row["CurrentTransactionStartOffset"] == "None", f"describe-producers after abort: {row}"
    # ListTransactions v2 (KIP-1152): the pattern is a Java regex that must match the whole id
    rows = table(tool(kafka_libs, broker, "list", "--transactional-id-pattern", "ketch-tools-txn-.*"))
    row = one(rows, "list --transactional-id-pattern 'ketch-tools-txn-.*' after abort", TransactionalId=tid)
    assert row["TransactionState"] == "CompleteAbort", f"list after abort: {row}"
    rows = table(tool(kafka_libs, broker, "list", "--transactional-id-pattern", "tools-txn"))
    assert not [r for r in rows if r.get("TransactionalId") == tid], \
        f"list --transactional-id-pattern 'tools-txn' lists {tid}: Kafka matches the whole id (Matcher.matches), " \
        f"not a substring: {rows}"
