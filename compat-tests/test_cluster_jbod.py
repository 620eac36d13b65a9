"""A Kafka 4.1 broker with two log directories in a cluster, one of them failing: the controller must
know which directory holds each replica (the broker's AssignReplicasToDirs, Kafka's
`ReplicationControlManager.handleAssignReplicasToDirs`) to move leadership and ISR membership off
exactly the partitions of the failed directory when the broker reports it offline in its heartbeats
(`handleDirectoriesOffline`). A replica the controller believes UNASSIGNED stays led from the dead
disk.

Broker 1 is always an Apache Kafka 4.1 broker (Ketch's cluster brokers keep their replicas in their
first log directory) with `log.dirs` = a plain directory and a 2 MiB tmpfs (skipped where mounting
is not allowed); broker 2 is of the target kind; the controller is Ketch's (default target) or
Kafka's (KETCH_COMPAT_TARGET=kafka, the spec). Topic with two partitions on [1, 2], one in each of
broker 1's directories (Kafka places a new partition in the directory with the fewest). Records
written to the partition on the tmpfs fill it: broker 1 takes that directory offline; the
controller moves that partition's leadership to broker 2 (ISR [2]) and leaves the other led by
broker 1 with ISR [1, 2]; both partitions then take acks=all writes.
"""

from __future__ import annotations

import subprocess
import uuid

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import create_topic, partition_states, wait_for, wait_for_partitions
from conftest import TARGET


def test_a_failed_log_dir_of_a_kafka_broker_moves_only_its_partitions(start_cluster, tmp_path):
    d0, d1 = tmp_path / "disk0", tmp_path / "disk1"
    d0.mkdir(parents=True)
    d1.mkdir(parents=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(d1)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        controller = "kafka" if TARGET == "kafka" else "ketch"
        common = {"min.insync.replicas": "1", "offsets.topic.replication.factor": "1"}
        c = start_cluster({1: ("kafka", {**common, "log.dirs": f"{d0},{d1}"}), 2: (TARGET, common)},
                          controller=controller, kill=True)
        admin = AdminClient({"bootstrap.servers": c.bootstrap()})
        c.wait_registered(admin, timeout=60)
        topic = f"jbod-{uuid.uuid4().hex[:8]}"
        new = NewTopic(topic, num_partitions=2, replication_factor=-1, replica_assignment=[[1, 2], [1, 2]])
        create_topic(admin, new, KafkaError.INVALID_REPLICA_ASSIGNMENT)
        wait_for_partitions(admin, topic, leaders=[1], isr=[1, 2], count=2,
                            what=f"{topic} led by 1 with ISR [1, 2]", timeout=60)
        on_tmpfs = wait_for(lambda: [int(p.name.rsplit("-", 1)[1]) for p in d1.glob(f"{topic}-*")] or None,
                            f"a partition of {topic} in {d1}")
        assert len(on_tmpfs) == 1 and list(d0.glob(f"{topic}-*")), (on_tmpfs, list(d0.iterdir()))
        full, ok = on_tmpfs[0], 1 - on_tmpfs[0]

        # Until the directory fails and the partition moves (the producer's retries then go to
        # broker 2, which has room).
        producer = Producer({"bootstrap.servers": c.bootstrap(), "acks": "1", "linger.ms": 0,
                             "message.timeout.ms": 8000, "batch.size": 200_000})
        for _ in range(60):
            producer.produce(topic, value=b"x" * 100_000, partition=full)
            producer.flush(10)
            states = partition_states(admin, topic)
            if states and states[0][full][0] != 1:
                break
        else:
            pytest.fail("6 MB written to a partition in a 2 MiB directory and it is still led by broker 1")
        states, _ = wait_for_partitions(admin, topic, count=2, what="only the failed directory's partition moved",
                                        timeout=30, only=[full], leaders=[2], isr=[2])
        assert states[ok] == (1, [1, 2]), states
        delivered = {}
        for p in (full, ok):
            producer = Producer({"bootstrap.servers": c.bootstrap(), "acks": "all", "message.timeout.ms": 15000})
            producer.produce(topic, value=f"after-{p}".encode(), partition=p,
                             on_delivery=lambda err, m, p=p: delivered.__setitem__(p, (err, m.offset())))
            producer.flush(20)
        assert all(err is None for err, _ in delivered.values()) and len(delivered) == 2, delivered
    finally:
        subprocess.run(["umount", "-l", str(d1)])
