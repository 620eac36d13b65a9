"""Transactions with librdkafka (confluent-kafka): compat-tests/python/txn_librdkafka.py.

Each subcommand checks itself (``FAIL: ...`` and exit 1 on a mismatch, ``PASS`` at the end); run
by hand with `python compat-tests/python/txn_librdkafka.py --bootstrap 127.0.0.1:PORT
commit-abort|fence|ctp [--debug eos,protocol]`. The commit/abort topic is also read back by the
Java client (read_committed), as a second opinion on what the broker returns.
"""

import sys
import uuid

from conftest import COMPAT_DIR, run_logged
from txn_support import assert_values, java_dump

SCRIPT = COMPAT_DIR / "python" / "txn_librdkafka.py"
RUN_TIMEOUT = 180


def rdk(broker, *args):
    r = run_logged([sys.executable, SCRIPT, "--bootstrap", broker.bootstrap, *args], timeout=RUN_TIMEOUT,
                   what=f"librdkafka txn {' '.join(args)}")
    print(r.stdout)
    if r.stderr.strip():
        print("--- stderr ---\n" + r.stderr[-5000:])
    assert r.stdout.rstrip().endswith("PASS"), r.stdout
    return r


def test_librdkafka_txn_commit_abort(broker, java_compat_jar):
    """init_transactions / begin / produce / commit or abort across 3 partitions; read_committed
    and read_uncommitted consumers, watermarks (records + control records), the LSO with a
    transaction open; then the Java client reads the same topic read_committed."""
    topic = f"rdk-txn-{uuid.uuid4().hex[:8]}"
    rdk(broker, "commit-abort", "--topic", topic)
    plan = [True, False, False, True, True, False, True]
    d = java_dump(java_compat_jar, broker.bootstrap, topic, "read_committed")
    for q in range(3):
        want = [f"txn{t}-commit-p{q}-{i}" for t, c in enumerate(plan) if c and not (t == 4 and q == 2)
                for i in range(20)]
        if q == 0:
            want += [f"open-p0-{i}" for i in range(5)] + [f"plain-p0-{i}" for i in range(5)]
        assert_values(d, q, want, "Java read_committed consumer of the librdkafka transactions")


def test_librdkafka_txn_fencing(broker):
    """A second producer with the same transactional.id: the first one's commit_transaction fails
    with a fatal _FENCED error (transaction open), and so does its next transaction (between
    transactions); read_committed never sees the zombie's records."""
    rdk(broker, "fence")


def test_librdkafka_consume_transform_produce(broker):
    """Group consumer (subscribe, read_committed) + transactional producer:
    send_offsets_to_transaction(positions, consumer_group_metadata()) then commit, every third
    transaction aborted and the consumer rewound to its committed offsets (OffsetFetch with
    require_stable); the output holds each input record exactly once, the group's offsets end at
    the input's end."""
    rdk(broker, "ctp")
