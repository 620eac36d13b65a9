"""Consumer groups with franz-go (kgo.ConsumerGroup, classic protocol, kgo.Balancers(...)), and a
request-level probe of the classic group protocol (compat-tests/go/groupprobe).

compat-tests/go/groups (built once per session into .cache/go/groups): two members split a
4-partition topic, each consumes and commits (BlockRebalanceOnPoll + CommitUncommittedOffsets)
its own partitions; kadm DescribeGroups matches them (protocol type, protocol, per-member
assignment); one leaves (Close -> LeaveGroup) and the other gets every partition
(cooperative-sticky: without revoking its own), continuing from the departed member's commits:
every acked record consumed exactly once; committed offsets (OffsetFetch) = end offsets; the
group is Empty (DescribeGroups, ListGroups); a new member starts exactly at the committed
offsets. By hand: `compat-tests/.cache/go/groups -brokers 127.0.0.1:PORT -balancer range [-debug]`.
"""

import subprocess
from pathlib import Path

import pytest

from conftest import _set_pdeathsig, go_build, run_logged

RUN_TIMEOUT = 180  # the program's own overall deadline is 120 s


@pytest.fixture(scope="session")
def franz_groups() -> Path:
    return go_build("groups")


@pytest.fixture(scope="session")
def franz_groupprobe() -> Path:
    return go_build("groupprobe")


@pytest.mark.broker_config(**{"group.initial.rebalance.delay.ms": "0"})
@pytest.mark.parametrize("balancer", ["cooperative-sticky", "range"])
def test_franz_go_group_split_leave_resume(broker, franz_groups, balancer):
    r = run_logged([franz_groups, "-brokers", broker.bootstrap, "-balancer", balancer], timeout=RUN_TIMEOUT,
                   what=f"franz-go groups -balancer {balancer}")
    print(r.stdout)
    if r.stderr.strip():
        print("--- stderr ---\n" + r.stderr[-5000:])
    assert r.stdout.rstrip().endswith("PASS"), r.stdout
    assert "0 duplicates" in r.stdout


@pytest.mark.broker_config(**{"group.initial.rebalance.delay.ms": "0"})
def test_group_protocol_probe(broker, franz_groupprobe):
    """The classic group protocol request by request (compat-tests/go/groupprobe: raw kmsg requests
    to the coordinator), with the exact error codes and fields Kafka 4.1 answers; see the program's
    doc comment. It lists every mismatch in one run (`MISMATCH <what>: got .., want ..`)."""
    try:
        r = subprocess.run([str(franz_groupprobe), "-brokers", broker.bootstrap], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=RUN_TIMEOUT, preexec_fn=_set_pdeathsig)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"group protocol probe timed out after {RUN_TIMEOUT}s\n{e.stdout}\n{e.stderr}", pytrace=False)
    print(r.stdout)
    if r.stderr.strip():
        print("--- stderr ---\n" + r.stderr[-5000:])
    if r.returncode != 0 or not r.stdout.rstrip().endswith("PASS"):
        mism = [l for l in r.stdout.splitlines() if l.startswith("MISMATCH")]
        pytest.fail(f"group protocol probe: exit {r.returncode}, {len(mism)} mismatches:\n" + "\n".join(mism)
                    + f"\n{r.stderr[-3000:]}", pytrace=False)
