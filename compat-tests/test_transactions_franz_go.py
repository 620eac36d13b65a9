"""Transactions with franz-go (pkg/kgo): compat-tests/go/txn, built once per session into
compat-tests/.cache/go/txn. Each mode checks itself (``FAIL: ...`` and exit 1 on a mismatch,
``PASS`` at the end); run by hand with
`compat-tests/.cache/go/txn -brokers 127.0.0.1:PORT -mode commit-abort|fence|etl [-debug]`.

franz-go uses KIP-890 part 2 when the broker finalizes transaction.version >= 2 (as Kafka 4.1
does): no AddPartitionsToTxn / AddOffsetsToTxn from the client, EndTxn v5; otherwise the classic
protocol. The commit/abort topic is also read back by the Java client (read_committed).
"""

import uuid
from pathlib import Path

import pytest

from conftest import go_build, run_logged
from txn_support import TXN_PROTOCOLS, apply_txn_protocol, assert_values, java_dump

RUN_TIMEOUT = 180  # the program's own deadline is 120 s


@pytest.fixture(scope="session")
def franz_txn() -> Path:
    return go_build("txn")


def franz(binary, broker, *args):
    r = run_logged([binary, "-brokers", broker.bootstrap, *args], timeout=RUN_TIMEOUT,
                   what=f"franz-go txn {' '.join(args)}")
    print(r.stdout)
    if r.stderr.strip():
        print("--- stderr ---\n" + r.stderr[-5000:])
    assert r.stdout.rstrip().endswith("PASS"), r.stdout
    return r


def test_franz_go_txn_commit_abort(broker, franz_txn, java_compat_jar):
    """BeginTransaction / ProduceSync / EndTransaction(TryCommit|TryAbort) across 3 partitions;
    read_committed / read_uncommitted consumers; ListEndOffsets (HW) and ListCommittedOffsets
    (read_committed ListOffsets: the LSO) with and without an open transaction."""
    topic = f"franz-txn-{uuid.uuid4().hex[:8]}"
    franz(franz_txn, broker, "-mode", "commit-abort", "-topic", topic)
    plan = [True, False, False, True, True, False, True]
    d = java_dump(java_compat_jar, broker.bootstrap, topic, "read_committed")
    for q in range(3):
        want = [f"txn{t}-commit-p{q}-{i}" for t, c in enumerate(plan) if c and not (t == 4 and q == 2)
                for i in range(20)]
        if q == 0:
            want += [f"open-p0-{i}" for i in range(5)] + [f"plain-p0-{i}" for i in range(5)]
        assert_values(d, q, want, "Java read_committed consumer of the franz-go transactions")


@pytest.mark.parametrize("protocol", TXN_PROTOCOLS)
def test_franz_go_txn_fencing(broker, franz_txn, java_compat_jar, protocol):
    """A second client with the same transactional id fences the first (with a transaction open,
    and between transactions): PRODUCER_FENCED / INVALID_PRODUCER_EPOCH.
    (protocol: see test_transactions_java.py)"""
    apply_txn_protocol(java_compat_jar, broker, protocol)
    franz(franz_txn, broker, "-mode", "fence")


def test_franz_go_group_transact_session(broker, franz_txn):
    """GroupTransactSession ETL: group consumer (read_committed, RequireStableFetchOffsets) copies
    2 x 1500 records to an output topic, 100 per transaction, every third ended with TryAbort
    (the session rewinds to the committed offsets); the output must hold each input record exactly
    once in order, the group's offsets must end at the input's end, and the output high
    watermarks must add up to committed + aborted records + one marker per transaction and
    partition. (Also passes on Kafka with transaction.version=1; not parametrized to keep the run
    short.)"""
    franz(franz_txn, broker, "-mode", "etl")
