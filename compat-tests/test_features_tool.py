"""kafka-features (org.apache.kafka.tools.FeatureCommand, unchanged from Kafka 4.1's jars) against
the broker: `describe` shows transaction.version supported 0-2 and finalized at 2 on a new
cluster; `downgrade` / `upgrade` change it (UpdateFeatures), `--dry-run` changes nothing, and
refused updates print Kafka's reasons. Between the changes, what clients are told changes too:
the finalized level and a growing epoch (Java clients re-read features only when it grows).
Passes on Ketch and on Apache Kafka 4.1 (KETCH_COMPAT_TARGET=kafka).
"""

from __future__ import annotations

import re
import time

import pytest

from kafka_tools import KafkaTools

FEATURES = "org.apache.kafka.tools.FeatureCommand"


def tv_line(out: str) -> dict[str, str]:
    """The describe line of transaction.version as a dict of its fields."""
    for line in out.splitlines():
        if line.startswith("Feature: transaction.version"):
            return dict(re.findall(r"(\w+): (\S+)", line))
    raise AssertionError(f"no transaction.version line in:\n{out}")


def describe_until(kt, bootstrap, level: str, timeout: float = 20) -> dict[str, str]:
    """Kafka applies a feature change to the broker's metadata image asynchronously."""
    deadline = time.monotonic() + timeout
    while True:
        line = tv_line(kt.run(FEATURES, "--bootstrap-server", bootstrap, "describe").stdout)
        if line["FinalizedVersionLevel"] == level or time.monotonic() > deadline:
            return line
        time.sleep(0.2)


def test_kafka_features_describe_downgrade_upgrade(broker, kafka_libs, tmp_path):
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    bs = broker.bootstrap
    first = describe_until(kt, bs, "2")
    assert (first["SupportedMinVersion"], first["SupportedMaxVersion"], first["FinalizedVersionLevel"]) == \
        ("0", "2", "2"), first

    dry = kt.run(FEATURES, "--bootstrap-server", bs, "downgrade", "--feature", "transaction.version=1", "--dry-run")
    assert dry.stdout.strip() == "transaction.version can be downgraded to 1.", dry.out
    assert tv_line(kt.run(FEATURES, "--bootstrap-server", bs, "describe").stdout)["FinalizedVersionLevel"] == "2"

    refused = kt.run(FEATURES, "--bootstrap-server", bs, "upgrade", "--feature", "transaction.version=3",
                     check=False)
    assert refused.returncode != 0, refused.out
    assert "Could not upgrade transaction.version to 3. The update failed for all features since the following " \
           "feature had an error: Invalid update version 3 for feature transaction.version. Local controller 1 " \
           "only supports versions 0-2" in refused.out, refused.out

    down = kt.run(FEATURES, "--bootstrap-server", bs, "downgrade", "--feature", "transaction.version=1")
    assert down.stdout.strip() == "transaction.version was downgraded to 1.", down.out
    after_down = describe_until(kt, bs, "1")
    assert after_down["FinalizedVersionLevel"] == "1", after_down
    assert int(after_down["Epoch"]) > int(first["Epoch"]), (first, after_down)

    up = kt.run(FEATURES, "--bootstrap-server", bs, "upgrade", "--feature", "transaction.version=2")
    assert up.stdout.strip() == "transaction.version was upgraded to 2.", up.out
    after_up = describe_until(kt, bs, "2")
    assert after_up["FinalizedVersionLevel"] == "2", after_up
    assert int(after_up["Epoch"]) > int(after_down["Epoch"]), (after_down, after_up)


def test_finalized_level_survives_a_restart(broker, kafka_libs, tmp_path):
    """The level is cluster metadata: a restarted broker keeps the downgrade."""
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    kt.run(FEATURES, "--bootstrap-server", broker.bootstrap, "downgrade", "--feature", "transaction.version=1")
    describe_until(kt, broker.bootstrap, "1")
    broker.restart()
    line = describe_until(kt, broker.bootstrap, "1")
    assert line["FinalizedVersionLevel"] == "1", line
