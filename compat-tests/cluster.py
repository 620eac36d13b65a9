"""Clusters for the compat tests: an Apache Kafka 4.1 KRaft controller on its own
(`process.roles=controller`, from the Maven jars) and brokers of either kind
(`process.roles=broker`) attached to it.

    ctl = KafkaController(tmp_path / "ctl").start()
    b = broker_under(ctl, tmp_path / "b2", node_id=2, kind="ketch").start()
    ...
    b.close(); ctl.close()

A Ketch broker is formatted with `ketch format -t <the controller's cluster id>`, a Kafka broker
with Kafka's StorageTool, as an operator would.
"""

from __future__ import annotations

import base64
import os
import subprocess
import uuid
from pathlib import Path

from conftest import (REPO_ROOT, BrokerStartError, KafkaBroker, KetchBroker, free_port, kafka_libs_dir)

CONTROLLER_ID = 3000


def new_cluster_id() -> str:
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def kafka_storage_format(libs: Path, props: Path, cluster_id: str, *extra: str) -> None:
    cmd = [os.environ.get("JAVA", "java"), f"-Dlog4j2.configurationFile={libs / 'log4j2.properties'}",
           "-cp", str(libs / "*"), "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props), *extra]
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise BrokerStartError(f"kafka StorageTool format failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")


class KafkaController(KafkaBroker):
    """A controller-only Apache Kafka 4.1 node (the only voter of its quorum)."""

    def __init__(self, workdir: Path, overrides=None, features: dict[str, int] | None = None):
        super().__init__(workdir, overrides)
        self.cluster_id = new_cluster_id()
        # Finalized at format time (`kafka-storage format --feature name=level`).
        self.features = dict(features or {})
        # Fixed for the controller's life: brokers are configured with it.
        self.port = free_port()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _write_props(self) -> None:
        props = {
            "process.roles": "controller",
            "node.id": str(CONTROLLER_ID),
            "controller.quorum.voters": f"{CONTROLLER_ID}@127.0.0.1:{self.port}",
            "listeners": f"CONTROLLER://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "broker.session.timeout.ms": "3000",
        }
        props.update(self.overrides)
        self.props_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def _format(self) -> None:
        extra = [a for name, level in self.features.items() for a in ("--feature", f"{name}={level}")]
        kafka_storage_format(self.libs, self.props_path, self.cluster_id, *extra)
        self.formatted = True

    def _pick_ports(self) -> None:
        pass  # the port chosen at creation: brokers are configured with it


def controller_settings(ctl: KafkaController, node_id: int) -> dict[str, str]:
    """What a broker of either kind needs to join `ctl`'s cluster (Kafka's names)."""
    return {
        "process.roles": "broker",
        "node.id": str(node_id),
        "controller.quorum.voters": f"{CONTROLLER_ID}@{ctl.bootstrap}",
        "controller.listener.names": "CONTROLLER",
        "broker.heartbeat.interval.ms": "500",
    }


class KetchBrokerUnder(KetchBroker):
    """A Ketch broker (`process.roles=broker`) of a Kafka controller's cluster."""

    def __init__(self, workdir: Path, ctl: KafkaController, node_id: int, overrides=None):
        settings = controller_settings(ctl, node_id)
        settings["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
        settings.update(overrides or {})
        super().__init__(workdir, settings)
        self.ctl = ctl
        self.formatted = False

    def start(self) -> "KetchBrokerUnder":
        if not self.formatted:
            cmd = [str(self.binary), "format", "-t", self.ctl.cluster_id]
            for k, v in self.command_settings().items():
                cmd += ["--override", f"{k}={v}"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                raise BrokerStartError(f"ketch format failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
            self.formatted = True
        return super().start()

    def command_settings(self) -> dict[str, str]:
        args = self.command()[1:]
        return dict(a.split("=", 1) for a in args[1::2])


class KafkaBrokerUnder(KafkaBroker):
    """An Apache Kafka 4.1 broker (`process.roles=broker`) of a Kafka controller's cluster."""

    def __init__(self, workdir: Path, ctl: KafkaController, node_id: int, overrides=None):
        super().__init__(workdir, overrides)
        self.ctl = ctl
        self.node_id = node_id

    def _write_props(self) -> None:
        props = {
            **controller_settings(self.ctl, self.node_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        props.update(self.overrides)
        self.props_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def _format(self) -> None:
        kafka_storage_format(self.libs, self.props_path, self.ctl.cluster_id)
        self.formatted = True


def broker_under(ctl: KafkaController, workdir: Path, node_id: int, kind: str, overrides=None):
    workdir.mkdir(parents=True, exist_ok=True)
    if kind == "kafka":
        return KafkaBrokerUnder(workdir, ctl, node_id, overrides)
    return KetchBrokerUnder(workdir, ctl, node_id, overrides)
