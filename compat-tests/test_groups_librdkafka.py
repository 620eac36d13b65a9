"""Consumer groups with librdkafka (confluent-kafka `subscribe()`, classic protocol).

compat-tests/python/groups_librdkafka.py: two members split a 4-partition topic, each consumes and
commits its own partitions; describe_consumer_groups matches them; one leaves (close ->
LeaveGroup) and the other gets every partition (cooperative-sticky: without revoking its own),
continuing from the departed member's commits: every acked record consumed exactly once;
committed() = end offsets; the group is Empty (describe and list_consumer_groups); a new member
starts exactly at the committed offsets. By hand:
`python compat-tests/python/groups_librdkafka.py --bootstrap 127.0.0.1:PORT --assignor range [--debug cgrp,protocol]`.
"""

import sys

import pytest

from conftest import COMPAT_DIR, run_logged

SCRIPT = COMPAT_DIR / "python" / "groups_librdkafka.py"
RUN_TIMEOUT = 180


@pytest.mark.broker_config(**{"group.initial.rebalance.delay.ms": "0"})
@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_librdkafka_group_split_leave_resume(broker, assignor):
    r = run_logged([sys.executable, SCRIPT, "--bootstrap", broker.bootstrap, "--assignor", assignor],
                   timeout=RUN_TIMEOUT, what=f"librdkafka groups --assignor {assignor}")
    print(r.stdout)
    if r.stderr.strip():
        print("--- stderr ---\n" + r.stderr[-5000:])
    assert r.stdout.rstrip().endswith("PASS"), r.stdout
    assert "0 duplicates" in r.stdout
