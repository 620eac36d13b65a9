"""Consumer groups with the Java client (kafka-clients 4.x, classic group protocol).

The scenarios live in compat-tests/java (ketch.compat.GroupScenario, run as
`java -cp .cache/java-build/ketch-compat-java.jar ketch.compat.GroupScenario <bootstrap> <scenario>`);
each prints one timed line per step and exits non-zero with a MISMATCH:/ERROR:/TIMEOUT: line on
stderr (with every member's assignment, generation, member id and recent rebalance events) when
something is off.

- members <assignor>: three members (threads, one KafkaConsumer each) on a 6-partition topic;
  partitions disjoint and balanced, every member consumes (and commits) only its own partitions;
  DescribeGroups (admin describeConsumerGroups) matches the members' ids, client ids and
  assignments and names the assignor; one member leaves (close -> LeaveGroup) and its partitions
  move to the others; a new member joins; with cooperative-sticky the partitions that stay are
  never revoked (neither on leave nor on join) and keep being consumed while the rebalance is held
  up by a member sleeping 3 s in onPartitionsRevoked; a producer runs throughout: every acked
  record consumed exactly once (commits honoured across every hand-over); committed offsets
  (admin listConsumerGroupOffsets) = end offsets; after all members close the group is Empty and
  keeps its offsets; a new member starts exactly at the committed offsets.
- resume: commit chosen offsets (with metadata and leader epoch) in the middle of each partition,
  close, a new consumer in the same group starts exactly there; committed() reads them back.
- static: static membership (group.instance.id); see test_java_static_membership.
"""

import os

import pytest

from conftest import run_logged

JAVA_TIMEOUT = 200  # seconds per JVM run (the scenario's own watchdog fires at 170 s)
FAST_GROUPS = pytest.mark.broker_config(**{"group.initial.rebalance.delay.ms": "0"})


def group_scenario(jar, broker, *args, what=""):
    env = dict(os.environ)
    env.setdefault("KETCH_COMPAT_JAVA_TIMEOUT", "170")
    r = run_logged(["java", "-cp", jar, "ketch.compat.GroupScenario", broker.bootstrap, *args],
                   timeout=JAVA_TIMEOUT, env=env, what=what or f"java GroupScenario {' '.join(map(str, args))}")
    print(r.stdout)
    if r.stderr.strip():
        print("--- stderr ---\n" + r.stderr[-5000:])
    return r


@FAST_GROUPS
@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_java_group_members_leave_and_join(broker, java_compat_jar, assignor):
    r = group_scenario(java_compat_jar, broker, "members", assignor)
    assert f"members ok: assignor {assignor}" in r.stdout
    assert "no record lost" in r.stdout and "0 consumed more than once" in r.stdout
    if assignor == "cooperative-sticky":
        assert "revoked during the leave: []" in r.stdout


@FAST_GROUPS
def test_java_group_commit_resume(broker, java_compat_jar):
    r = group_scenario(java_compat_jar, broker, "resume")
    assert "resume ok" in r.stdout


@FAST_GROUPS
def test_java_static_membership(broker, java_compat_jar):
    """Static members (group.instance.id, range assignor, session.timeout.ms=30000):

    - a and b split six partitions [0,1,2] / [3,4,5] (range orders members by instance id);
    - b closes: no LeaveGroup for a static member, the group stays Stable with both members;
    - b2 starts with b's instance id: it gets [3,4,5] back at the same generation, a sees no
      rebalance (no callbacks, same generation) and b2 resumes after b's commits;
    - the leader a restarts as a2 the same way (JoinGroup v9 answers the static leader with
      skip_assignment, KIP-814): again no rebalance;
    - b3 starts with inst-b while b2 is alive: b3 takes [3,4,5] over at the same generation, b2's
      next heartbeat gets FENCED_INSTANCE_ID (poll throws FencedInstanceIdException), a2 untouched.
    """
    r = group_scenario(java_compat_jar, broker, "static")
    assert "static ok" in r.stdout
    assert "FencedInstanceIdException" in r.stdout
