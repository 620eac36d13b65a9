"""SCRAM credentials are cluster metadata (Kafka 4.1 KRaft): under either controller (`[kafka]`
Apache Kafka 4.1's, `[ketch]` Ketch's), `kafka-configs --alter --add-config 'SCRAM-SHA-256=[...]'
--entity-type users` (Kafka's ConfigCommand) through broker 1 is forwarded to the controller,
which writes a UserScramCredentialRecord; broker 2, on its SASL_PLAINTEXT listener, then
authenticates a client with that credential (it reads it from its metadata image), a wrong
password is refused, and after `--delete-config` the login is refused too. Brokers of the target
kind (KETCH_COMPAT_TARGET=kafka: Kafka's).
"""

from __future__ import annotations

import pytest
import confluent_kafka as ck
from confluent_kafka.admin import AdminClient

from cluster import wait_for
from conftest import TARGET, free_port
from kafka_tools import KafkaTools

CONFIG_CMD = "kafka.admin.ConfigCommand"  # kafka_2.13 (Scala); kafka-tools 4.1 has no ConfigCommand
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def sasl_broker(port: int) -> dict:
    return {
        "extra_listeners": {"SASL_PLAINTEXT": ("SASL_PLAINTEXT", port)},
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": f"{SCRAM_MODULE} required;",
    }


def login(port: int, user: str, password: str) -> str | None:
    """None when the client authenticates (and lists the cluster's topics), else the error."""
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": password})
    try:
        admin.list_topics(timeout=5)
        return None
    except ck.KafkaException as e:
        return str(e)


@pytest.mark.parametrize("controller", ["kafka", "ketch"])
def test_credentials_altered_through_one_broker_authenticate_on_another(start_cluster, kafka_libs, tmp_path,
                                                                         controller):
    port = free_port()
    c = start_cluster({1: (TARGET, {}), 2: (TARGET, sasl_broker(port))}, kill=True, controller=controller)
    c.wait_registered(AdminClient({"bootstrap.servers": c.bootstrap()}), timeout=60)
    assert login(port, "alice", "alice-secret") is not None, "no credential yet"
    kt = KafkaTools(kafka_libs, c.brokers[1], tmp_path)
    b1 = c.brokers[1].bootstrap
    out = kt.run(CONFIG_CMD, "--bootstrap-server", b1, "--alter", "--add-config",
                 "SCRAM-SHA-256=[iterations=8192,password=alice-secret]", "--entity-type", "users",
                 "--entity-name", "alice").out
    assert "Completed updating config for user alice." in out, out
    wait_for(lambda: login(port, "alice", "alice-secret") is None, "alice logs in on broker 2", timeout=30)
    assert login(port, "alice", "wrong") is not None, "a wrong password is refused"
    described = kt.run(CONFIG_CMD, "--bootstrap-server", c.brokers[2].bootstrap, "--describe", "--entity-type",
                       "users").out
    assert "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192" in described
    out = kt.run(CONFIG_CMD, "--bootstrap-server", b1, "--alter", "--delete-config", "SCRAM-SHA-256",
                 "--entity-type", "users", "--entity-name", "alice").out
    assert "Completed updating config for user alice." in out, out
    wait_for(lambda: login(port, "alice", "alice-secret") is not None, "alice's login refused once deleted",
             timeout=30)
