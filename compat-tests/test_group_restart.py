"""Committed offsets survive a broker restart (kill -9 and SIGTERM).

`java GroupScenario commit-meta` commits, for group 1, offsets with metadata strings (non-ASCII,
empty, 1000+ characters) and leader epochs from a subscribed member; for group 2 offsets from a
standalone consumer (assign(), no membership: OffsetCommit with generation -1 and an empty
member id, i.e. a group with protocol type ""). `check-committed` then reads them back with
admin listConsumerGroupOffsets for both groups in one call (batched FindCoordinator and
OffsetFetch) and for explicit partitions (including one that does not exist), with
KafkaConsumer.committed (OffsetFetch require_stable), checks both groups are Empty (and which is
a "simple" group), and resumes consumers at exactly those offsets. It runs before the restart (so
a failure there is not about the restart) and again after it.
"""

import os
import uuid

import pytest

from conftest import run_logged

JAVA_TIMEOUT = 200


def group_scenario(jar, broker, *args):
    env = dict(os.environ)
    env.setdefault("KETCH_COMPAT_JAVA_TIMEOUT", "170")
    r = run_logged(["java", "-cp", jar, "ketch.compat.GroupScenario", broker.bootstrap, *args],
                   timeout=JAVA_TIMEOUT, env=env, what=f"java GroupScenario {args[0]} ({broker.bootstrap})")
    print(r.stdout)
    if r.stderr.strip():
        print("--- stderr ---\n" + r.stderr[-5000:])
    return r


@pytest.mark.broker_config(**{"group.initial.rebalance.delay.ms": "0"})
@pytest.mark.parametrize("how", ["kill9", "sigterm"])
def test_committed_offsets_and_metadata_survive_restart(broker, java_compat_jar, how):
    suffix = uuid.uuid4().hex[:8]
    topic, g1, g2 = f"grp-restart-{suffix}", f"group-restart-member-{suffix}", f"group-restart-standalone-{suffix}"
    r = group_scenario(java_compat_jar, broker, "commit-meta", topic, g1, g2)
    assert "commit-meta ok" in r.stdout
    r = group_scenario(java_compat_jar, broker, "check-committed", topic, g1, g2)
    assert "check-committed ok" in r.stdout
    if how == "kill9":
        broker.kill9()
    else:
        broker.stop()
    broker.restart()
    r = group_scenario(java_compat_jar, broker, "check-committed", topic, g1, g2)
    assert "check-committed ok" in r.stdout
