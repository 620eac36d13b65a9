"""A broker's start never deletes data it does not understand (issue 38; Kafka 3.7+, KAFKA-16234):
a partition directory the metadata no longer wants on this broker is renamed
`<topic>-<partition>.<32 hex digits>-stray` and kept, once the broker has caught up with the
metadata log; it is never taken for the directory of a new topic of the same name
(`partition.metadata` names the topic id it belongs to).

Three brokers of the target kind under a Kafka 4.1 controller. Broker 3 is killed (-9); while it
is down, topics `t` and `u` (replicas [1, 2, 3], records written) are deleted and created again
under the same names: `t` on brokers 1 and 2 only, `u` on all three. Broker 3 restarts: its old
copies of both are renamed -stray with their data inside, `u`-0 is copied afresh from its leader
(the new topic's records only, exactly), and nothing of the old topics is served. Also against
Kafka (KETCH_COMPAT_TARGET=kafka).
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import THREE_BROKER_SETTINGS, bootstrap, create_topic, three_broker_cluster, wait_for, wait_for_isr
from test_cluster_under_kafka_controller import assert_log_is, produce_all

pytestmark = pytest.mark.timeout(240)


def create(admin, topic: str, replicas: list[int]) -> None:
    new = NewTopic(topic, num_partitions=1, replica_assignment=[replicas], config={"min.insync.replicas": "1"})
    create_topic(admin, new, KafkaError.INVALID_REPLICATION_FACTOR)


def strays(broker, prefix: str) -> list:
    return sorted(p for p in broker.data_dir.iterdir() if p.name.startswith(prefix) and p.name.endswith("-stray"))


def test_a_restarted_broker_keeps_the_directories_of_deleted_topics_as_stray(start_cluster):
    brokers = three_broker_cluster(start_cluster)
    servers = bootstrap(brokers.values())
    admin = AdminClient({"bootstrap.servers": servers})
    for topic in ("t", "u"):
        create(admin, topic, [1, 2, 3])
        wait_for_isr(admin, topic, [1, 2, 3], timeout=60)
        produce_all(servers, topic, [b"old-%d" % i for i in range(100)], 1)
    wait_for_isr(admin, "u", [1, 2, 3], timeout=30)
    old_u = brokers[3].data_dir / "u-0"
    assert old_u.is_dir() and any(f.stat().st_size > 0 for f in old_u.glob("*.log"))

    brokers[3].kill9()
    survivors = bootstrap(b for n, b in brokers.items() if n != 3)
    admin = AdminClient({"bootstrap.servers": survivors})
    wait_for_isr(admin, "u", [1, 2], timeout=60, what="broker 3 out of the ISR")
    for topic in ("t", "u"):
        admin.delete_topics([topic])[topic].result(timeout=30)
    wait_for(lambda: not {"t", "u"} & set(admin.list_topics(timeout=10).topics), "t and u deleted")
    create(admin, "t", [1, 2])
    create(admin, "u", [1, 2, 3])
    wait_for_isr(admin, "u", [1, 2], timeout=60)
    acked = produce_all(survivors, "u", [b"new-%d" % i for i in range(50)], 1)

    brokers[3].start()
    admin = AdminClient({"bootstrap.servers": servers})
    wait_for_isr(admin, "u", [1, 2, 3], timeout=90, what="broker 3 in the ISR of the new u")

    def marked():
        return (strays(brokers[3], "t-0."), strays(brokers[3], "u-0.")) if strays(brokers[3], "t-0.") and strays(
            brokers[3], "u-0.") else None
    t_strays, u_strays = wait_for(marked, "the old t-0 and u-0 of broker 3 renamed -stray", timeout=30)
    for stray in t_strays + u_strays:
        assert any(f.stat().st_size > 0 for f in stray.glob("*.log")), f"{stray} kept its data"
    assert not (brokers[3].data_dir / "t-0").exists(), "the new t has no replica on broker 3"
    # Broker 3's copy of the new u holds the new records only: it leads once the others are gone.
    brokers[1].kill9()
    brokers[2].kill9()
    only3 = bootstrap([brokers[3]])
    wait_for(lambda: (m := AdminClient({"bootstrap.servers": only3}).list_topics("u", timeout=10).topics.get("u"))
             and m.partitions[0].leader == 3, "broker 3 leading the new u", timeout=60)
    assert_log_is(only3, "u", acked, 1)
