"""A broker of the target kind under an Apache Kafka 4.1 controller (`process.roles=broker` with
`controller.quorum.bootstrap.servers`): it registers (BrokerRegistration), heartbeats, replicates
the metadata log as an observer (Fetch of `__cluster_metadata`), is unfenced once caught up, and
leaves with a controlled shutdown. Kafka's own tools, asked of the controller, show it:
`kafka-metadata-quorum --bootstrap-controller ... describe --replication` (an observer with no lag)
and `kafka-cluster`-style DescribeCluster through `kafka-broker-api-versions`-free admin calls.
Passes with a Ketch broker and with a Kafka 4.1 broker (KETCH_COMPAT_TARGET=kafka).
"""

from __future__ import annotations

import json
import re
import time

import pytest

from cluster import CONTROLLER_ID, KafkaController, broker_under
from conftest import TARGET
from kafka_tools import KafkaTools

QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
NODE = 2


@pytest.fixture
def controller(tmp_path):
    # group.version=0: Ketch does not serve KIP-848 groups yet, and Kafka's controller refuses a
    # broker that does not support a finalized level (UNSUPPORTED_VERSION), as it should.
    ctl = KafkaController(tmp_path / "controller", features={"group.version": 0})
    ctl.start()
    yield ctl
    ctl.close()


def replication_rows(kt: KafkaTools, ctl) -> dict[str, dict[str, str]]:
    """`describe --replication` as {node id: {column: value}}."""
    r = kt.run(QUORUM, "--bootstrap-controller", ctl.bootstrap, "describe", "--replication", timeout=60)
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    header = re.split(r"\s{2,}|\t", lines[0].strip())
    rows = {}
    for line in lines[1:]:
        cells = re.split(r"\s{2,}|\t", line.strip())
        rows[cells[0]] = dict(zip(header, cells))
    return rows


def wait_for(check, what: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def test_broker_registers_replicates_metadata_and_is_unfenced(controller, kafka_libs, tmp_path):
    broker = broker_under(controller, tmp_path / "broker", NODE, TARGET)
    try:
        broker.start()
        kt = KafkaTools(kafka_libs, controller, tmp_path)

        def observer_caught_up():
            rows = replication_rows(kt, controller)
            row = rows.get(str(NODE))
            return row if row and row.get("Status") == "Observer" and row.get("Lag") == "0" else None

        wait_for(observer_caught_up, "the broker as a caught-up observer")
        assert rows_has_leader(replication_rows(kt, controller))
        port = broker.port

        def unfenced():
            records = controller_records(kt, controller)
            return records if any(r["type"] == "BROKER_REGISTRATION_CHANGE_RECORD" and r["data"]["brokerId"] == NODE
                                  and r["data"].get("fenced") == -1 for r in records) else None

        records = wait_for(unfenced, "the broker unfenced by the controller")
        registered = [r["data"] for r in records if r["type"] == "REGISTER_BROKER_RECORD"]
        assert [r["brokerId"] for r in registered] == [NODE], registered
        reg = registered[0]
        assert [(e["name"], e["host"], e["port"], e["securityProtocol"]) for e in reg["endPoints"]] == \
            [("PLAINTEXT", "127.0.0.1", port, 0)], reg
        assert reg["fenced"] is True and len(reg["logDirs"]) == 1, reg
        features = {f["name"]: (f["minSupportedVersion"], f["maxSupportedVersion"]) for f in reg["features"]}
        assert features["metadata.version"][1] >= 27 and features["transaction.version"] == (0, 2), features

        broker.stop()  # a controlled shutdown: the controller lets the broker go
        assert broker.proc.returncode in (0, 143), broker.proc.returncode  # 143: the JVM after SIGTERM
        after = controller_records(kt, controller)
        changes = [r["data"] for r in after[len(records):] if r["data"].get("brokerId") == NODE]
        assert any(c.get("inControlledShutdown") == 1 or c.get("fenced") == 1 for c in changes), after[len(records):]
    finally:
        broker.close()


def controller_records(kt: KafkaTools, ctl) -> list[dict]:
    """The controller's metadata log, decoded by Kafka's DumpLogSegments."""
    segments = sorted((ctl.data_dir / "__cluster_metadata-0").glob("*.log"))
    r = kt.run("kafka.tools.DumpLogSegments", "--cluster-metadata-decoder", "--files",
               ",".join(map(str, segments)), timeout=90)
    found = []
    for line in r.stdout.splitlines():
        m = re.search(r"payload: (\{.*\})\s*$", line)
        if m:
            found.append(json.loads(m.group(1)))
    return found


def rows_has_leader(rows) -> bool:
    return rows.get(str(CONTROLLER_ID), {}).get("Status") == "Leader"
