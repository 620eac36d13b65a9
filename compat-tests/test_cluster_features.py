"""Feature levels of a cluster (KIP-584) through its brokers, under both controllers: `[kafka]` an
Apache Kafka 4.1 controller (the reference), `[ketch]` Ketch's own (`process.roles=controller`).
Two brokers of the target kind; the controller formatted with `--feature transaction.version=1`
(`kafka-storage format` / `ketch format`: the level goes into the cluster's bootstrap metadata).

`kafka-features --bootstrap-server` (org.apache.kafka.tools.FeatureCommand from Kafka 4.1's jars):
a) `describe` on either broker shows the levels the controller bootstrapped: transaction.version 1
   (formatted), group.version 1, eligible.leader.replicas.version 1, metadata.version 4.1-IV1;
b) `upgrade --feature transaction.version=2` through broker 1 (forwarded to the controller) is
   seen from broker 2, at a higher epoch;
c) refusals are the controller's, with Kafka's messages: transaction.version 3 (unsupported) and a
   metadata.version downgrade past 4.0-IV1 (it changed the metadata records); nothing changes;
d) `downgrade --feature transaction.version=1` through broker 2 is seen from broker 1;
e) metadata.version down to 4.0-IV3 (Kafka 4.1 allows it: no record changed since) and back up.

And `--add-scram` at format time: the credentials are in the cluster's metadata, as Kafka brokers
read them (`kafka-configs --describe --entity-type users` through a broker: a Ketch broker of a
cluster reads UserScramCredentialRecords from its metadata image, as Kafka's).
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from cluster import CONTROLLER_ID, wait_for
from conftest import TARGET
from kafka_tools import KafkaTools

pytestmark = pytest.mark.timeout(300)

FEATURES = "org.apache.kafka.tools.FeatureCommand"
TV = "transaction.version"


def describe(kt: KafkaTools, server: str) -> dict[str, dict[str, str]]:
    """`kafka-features --bootstrap-server server describe`: {feature: {field: value}}."""
    out = kt.run(FEATURES, "--bootstrap-server", server, "describe").stdout
    rows = {}
    for line in out.splitlines():
        fields = dict(f.split(": ", 1) for f in line.strip().split("\t") if ": " in f)
        if "Feature" in fields:
            rows[fields.pop("Feature")] = fields
    return rows


def level_seen(kt: KafkaTools, server: str, level: str, feature: str = TV) -> dict[str, str]:
    """Waits until `server` shows `feature` finalized at `level` (brokers apply the controller's
    records asynchronously); its describe row."""
    return wait_for(lambda: (r := describe(kt, server).get(feature, {})).get("FinalizedVersionLevel") == level and r,
                    f"{feature} at {level} seen from {server}", timeout=30)


@pytest.mark.parametrize("controller", ["kafka", "ketch"])
def test_kafka_features_through_brokers_changes_the_cluster(start_cluster, kafka_libs, tmp_path, controller):
    c = start_cluster({1: (TARGET, {}), 2: (TARGET, {})}, parallel=True, kill=True, controller=controller,
                      controller_features={TV: 1})
    c.wait_registered(AdminClient({"bootstrap.servers": c.bootstrap()}), timeout=60)
    kt = KafkaTools(kafka_libs, c.brokers[1], tmp_path)
    b1, b2 = c.brokers[1].bootstrap, c.brokers[2].bootstrap

    # a) the bootstrapped levels, from both brokers.
    first = level_seen(kt, b1, "1")
    assert (first["SupportedMinVersion"], first["SupportedMaxVersion"]) == ("0", "2"), first
    rows = describe(kt, b2)
    finalized = {name: row["FinalizedVersionLevel"] for name, row in rows.items()}
    assert {n: finalized.get(n) for n in (TV, "group.version", "eligible.leader.replicas.version",
                                          "metadata.version")} == \
        {TV: "1", "group.version": "1", "eligible.leader.replicas.version": "1", "metadata.version": "4.1-IV1"}, rows

    # b) an upgrade through broker 1, seen from broker 2.
    up = kt.run(FEATURES, "--bootstrap-server", b1, "upgrade", "--feature", f"{TV}=2")
    assert up.stdout.strip() == f"{TV} was upgraded to 2.", up.out
    after_up = level_seen(kt, b2, "2")
    assert int(after_up["Epoch"]) > int(first["Epoch"]), (first, after_up)

    # c) refusals: the controller's reasons, nothing changed.
    refused = kt.run(FEATURES, "--bootstrap-server", b2, "upgrade", "--feature", f"{TV}=3", check=False)
    assert refused.returncode != 0, refused.out
    assert f"Could not upgrade {TV} to 3. The update failed for all features since the following feature had an " \
           f"error: Invalid update version 3 for feature {TV}. Local controller {CONTROLLER_ID} only supports " \
           "versions 0-2" in refused.out, refused.out
    mv_down = kt.run(FEATURES, "--bootstrap-server", b1, "downgrade", "--feature", "metadata.version=22",
                     check=False)
    assert mv_down.returncode != 0, mv_down.out
    assert "Invalid metadata.version 22. Refusing to perform the requested downgrade because it might delete " \
           "metadata information." in mv_down.out, mv_down.out
    still = describe(kt, b1)
    assert (still[TV]["FinalizedVersionLevel"], still["metadata.version"]["FinalizedVersionLevel"]) == \
        ("2", "4.1-IV1"), still

    # d) a downgrade through broker 2, seen from broker 1.
    down = kt.run(FEATURES, "--bootstrap-server", b2, "downgrade", "--feature", f"{TV}=1")
    assert down.stdout.strip() == f"{TV} was downgraded to 1.", down.out
    after_down = level_seen(kt, b1, "1")
    assert int(after_down["Epoch"]) > int(after_up["Epoch"]), (after_up, after_down)

    # e) a metadata.version downgrade Kafka 4.1 allows (no metadata record changed since 4.0-IV3)
    # through broker 1, seen from broker 2; and back up.
    mv_down = kt.run(FEATURES, "--bootstrap-server", b1, "downgrade", "--feature", "metadata.version=25")
    assert mv_down.stdout.strip() == "metadata.version was downgraded to 25.", mv_down.out
    level_seen(kt, b2, "4.0-IV3", "metadata.version")
    mv_up = kt.run(FEATURES, "--bootstrap-server", b2, "upgrade", "--feature", "metadata.version=27")
    assert mv_up.stdout.strip() == "metadata.version was upgraded to 27.", mv_up.out
    level_seen(kt, b1, "4.1-IV1", "metadata.version")


CONFIG_CMD = "kafka.admin.ConfigCommand"  # kafka_2.13 (Scala); kafka-tools 4.1 has no ConfigCommand


@pytest.mark.parametrize("controller", ["kafka", "ketch"])
def test_formatted_scram_credentials_are_cluster_metadata(start_cluster, kafka_libs, tmp_path, controller):
    c = start_cluster({1: (TARGET, {})}, kill=True, controller=controller,
                      controller_scram=["SCRAM-SHA-256=[name=alice,iterations=8192,password=alice-secret]",
                                        "SCRAM-SHA-512=[name=bob,password=bob-secret]"])
    c.wait_registered(AdminClient({"bootstrap.servers": c.bootstrap()}), timeout=60)
    kt = KafkaTools(kafka_libs, c.brokers[1], tmp_path)
    out = kt.run(CONFIG_CMD, "--bootstrap-server", c.brokers[1].bootstrap, "--describe", "--entity-type",
                 "users").out
    assert "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192" in out, out
    assert "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=4096" in out, out
