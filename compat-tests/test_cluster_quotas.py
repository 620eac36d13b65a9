"""Client quotas are cluster metadata (Kafka 4.1 KRaft): under either controller (`[kafka]`
Apache Kafka 4.1's, `[ketch]` Ketch's), `kafka-configs --alter --add-config producer_byte_rate=...
--entity-type clients` (Kafka's ConfigCommand) through broker 1 is forwarded to the controller,
which writes a ClientQuotaRecord; broker 2 describes it from its metadata image and holds a
producer of that client id writing to a partition it leads at the quota (never above it by more
than 10%); after `--delete-config` the quota is gone from broker 2's answer. Brokers of the target
kind (KETCH_COMPAT_TARGET=kafka: Kafka's).

The controller mutation quota (`controller_mutation_rate`, KIP-599) is the controller's: brokers
forward CreateTopics and DeleteTopics in Kafka's Envelope, with the client's principal and client
id, and the controller holds each client to its own bucket (test_quotas.py's checks, here through
a broker of a cluster).
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import wait_for
from conftest import TARGET
from kafka_tools import KafkaTools
from test_quotas import (MEASURED_FROM_S, QUOTA_BYTES_PER_S, RUN_S, SHORT_WINDOW, check_mutation_quota, described,
                         per_second, probe_mutations, produce_flat_out, rate_between)

CONFIG_CMD = "kafka.admin.ConfigCommand"  # kafka_2.13 (Scala); kafka-tools 4.1 has no ConfigCommand


@pytest.mark.parametrize("controller", ["kafka", "ketch"])
def test_a_quota_set_through_one_broker_throttles_on_another(start_cluster, kafka_libs, tmp_path, controller):
    c = start_cluster({1: (TARGET, SHORT_WINDOW), 2: (TARGET, SHORT_WINDOW)}, kill=True, controller=controller)
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    c.wait_registered(admin, timeout=60)
    admin.create_topics([NewTopic("quota-writes", num_partitions=1, replication_factor=-1, replica_assignment=[[2]])])["quota-writes"].result(30)
    kt = KafkaTools(kafka_libs, c.brokers[1], tmp_path)
    b1, b2 = c.brokers[1].bootstrap, c.brokers[2].bootstrap
    out = kt.run(CONFIG_CMD, "--bootstrap-server", b1, "--alter", "--add-config",
                 f"producer_byte_rate={QUOTA_BYTES_PER_S}", "--entity-type", "clients", "--entity-name",
                 "slow-writer").out
    assert "Completed updating config for client slow-writer." in out, out
    want = {f"client-id 'slow-writer': producer_byte_rate={float(QUOTA_BYTES_PER_S)}"}
    wait_for(lambda: described(kt, b2, "--entity-type", "clients", "--entity-name", "slow-writer") == want,
             "broker 2 describes the quota", timeout=30)

    stamps = produce_flat_out(b2, "quota-writes", "slow-writer", RUN_S)
    steady = rate_between(stamps, MEASURED_FROM_S, RUN_S)
    assert 0.5 * QUOTA_BYTES_PER_S <= steady <= 1.1 * QUOTA_BYTES_PER_S, \
        f"{steady:.0f} B/s; kB per second: {per_second(stamps)}"

    kt.run(CONFIG_CMD, "--bootstrap-server", b1, "--alter", "--delete-config", "producer_byte_rate",
           "--entity-type", "clients", "--entity-name", "slow-writer")
    wait_for(lambda: described(kt, b2, "--entity-type", "clients", "--entity-name", "slow-writer") == set(),
             "the quota is gone from broker 2", timeout=30)


# The controller's bucket: 2 windows of 1 s (test_quotas.py's single node has the same).
MUTATION_WINDOW = {"controller.quota.window.num": "2", "controller.quota.window.size.seconds": "1"}


@pytest.mark.parametrize("controller", ["kafka", "ketch"])
def test_the_controller_holds_forwarded_clients_to_their_mutation_quota(start_cluster, kafka_libs, tmp_path,
                                                                         controller):
    c = start_cluster({1: (TARGET, None), 2: (TARGET, None)}, MUTATION_WINDOW, kill=True, controller=controller)
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    c.wait_registered(admin, timeout=60)
    kt = KafkaTools(kafka_libs, c.brokers[1], tmp_path)
    b1, b2 = c.brokers[1].bootstrap, c.brokers[2].bootstrap
    out = kt.run(CONFIG_CMD, "--bootstrap-server", b1, "--alter", "--add-config", "controller_mutation_rate=1",
                 "--entity-type", "clients", "--entity-name", "mutator").out
    assert "Completed updating config for client mutator." in out, out
    want = {"client-id 'mutator': controller_mutation_rate=1.0"}
    wait_for(lambda: described(kt, b2, "--entity-type", "clients", "--entity-name", "mutator") == want,
             "broker 2 describes the quota", timeout=30)
    # Through broker 2: its forwarding carries the client id to the controller.
    check_mutation_quota(lambda client_id, prefix: probe_mutations(b2, client_id, prefix))
