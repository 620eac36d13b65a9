"""The three-broker clusters of scripts/bench's `cluster` workload: a controller-only node (node id
3000, `process.roles=controller`, the only voter of its quorum) and brokers 1, 2 and 3
(`process.roles=broker`) under it, all on loopback with ephemeral ports, of one kind: Ketch under
a Ketch controller, or Apache Kafka under a Kafka controller. The `controller-failover` workload
runs three controllers (3000-3002, a static KRaft quorum: `controller.quorum.voters` naming all
three, Kafka's default election and fetch timeouts on both systems) instead of one.

The settings are those of compat-tests/cluster.py (KetchController, KetchBrokerUnder,
KafkaController, KafkaBrokerUnder, THREE_BROKER_SETTINGS), repeated here so that benchlib stays
self-contained: the same broker.session.timeout.ms (controller) and broker.heartbeat.interval.ms
(brokers) for both systems. Every node's data directory is formatted first, with the cluster's id
(`ketch format -t`, Kafka's StorageTool), as an operator would. Processes are children of the
benchmark (proc.spawn: they die with it).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .config import JAVA, KAFKA_BROKER_JVM
from .proc import RunFailed, free_port, reap, run, spawn

CONTROLLER_ID = 3000
BROKER_IDS = [1, 2, 3]
SESSION_TIMEOUT_MS = "3000"  # controller: a broker without heartbeat for this long is fenced
HEARTBEAT_MS = "500"  # brokers
# compat-tests/cluster.py THREE_BROKER_SETTINGS: RF 3 everywhere, min.insync.replicas=2
THREE_BROKER_SETTINGS = {
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "6",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "6",
    "group.initial.rebalance.delay.ms": "0",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
}


def new_cluster_id() -> str:
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


class Node:
    """One process of a cluster: its settings, work directory, log and port."""

    def __init__(self, workdir: Path, node_id: int, settings: dict[str, str], port: int):
        self.workdir = workdir
        self.node_id = node_id
        self.settings = settings
        self.port = port
        self.data = workdir / "data"
        self.log_path = workdir / "node.log"
        self.proc: subprocess.Popen | None = None
        workdir.mkdir(parents=True, exist_ok=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Cluster:
    """A controller and brokers 1-3 of one system ("kafka", "ketch" or "ketch-nofsync")."""

    ready_marker = b""

    def __init__(self, system: str, root: Path, controllers: int = 1):
        self.system = system
        self.root = root
        self.cluster_id = new_cluster_id()
        ports = {CONTROLLER_ID + i: free_port() for i in range(controllers)}
        while len(set(ports.values())) < controllers:
            ports = {CONTROLLER_ID + i: free_port() for i in range(controllers)}
        voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in ports.items())
        self.controllers = [Node(root / ("controller" if n == CONTROLLER_ID else f"controller{n}"), n, {
            "process.roles": "controller",
            "node.id": str(n),
            "controller.quorum.voters": voters,
            "listeners": f"CONTROLLER://127.0.0.1:{p}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
            "broker.session.timeout.ms": SESSION_TIMEOUT_MS,
        }, p) for n, p in ports.items()]
        self.controller = self.controllers[0]
        self.brokers: dict[int, Node] = {}
        used = set(ports.values())
        for n in BROKER_IDS:
            port = free_port()
            while port in used:
                port = free_port()
            used.add(port)
            self.brokers[n] = Node(root / f"broker{n}", n, {
                "process.roles": "broker",
                "node.id": str(n),
                "controller.quorum.voters": voters,
                "controller.listener.names": "CONTROLLER",
                "broker.heartbeat.interval.ms": HEARTBEAT_MS,
                "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                **THREE_BROKER_SETTINGS,
            }, port)
        for node in self.nodes:
            node.settings["log.dirs"] = str(node.data)

    @property
    def nodes(self) -> list[Node]:
        return [*self.controllers, *self.brokers.values()]

    def active_controller(self, timeout: float = 60) -> Node:
        """The controller leading the quorum: the leader that a majority of the controllers'
        `quorum-state` files (Kafka's and Ketch's, the same JSON) name in their latest epoch."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            named: dict[tuple[int, int], int] = {}
            for n in self.controllers:
                try:
                    state = json.loads((n.data / "__cluster_metadata-0" / "quorum-state").read_text())
                except (OSError, ValueError):
                    continue
                key = (state.get("leaderEpoch", -1), state.get("leaderId", -1))
                named[key] = named.get(key, 0) + 1
            if named:
                (epoch, leader), votes = max(named.items())
                if leader >= 0 and votes > len(self.controllers) // 2:
                    node = next((n for n in self.controllers if n.node_id == leader), None)
                    if node is not None and node.alive():
                        return node
            time.sleep(0.05)
        raise RunFailed(f"{self.system}: no controller named leader by a majority within {timeout:.0f}s")

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers.values())

    def pids(self) -> list[int]:
        return [n.pid for n in self.nodes if n.alive()]

    # to be provided by the subclasses
    def format(self, node: Node) -> None:
        raise NotImplementedError

    def command(self, node: Node) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = 240) -> "Cluster":
        """Formats every node (in parallel), starts the controller, then the three brokers at once;
        returns when every node is listening (the caller waits for the brokers' registration)."""
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(self.format, self.nodes))
        for ctl in self.controllers:
            self._spawn(ctl)
        deadline = time.monotonic() + timeout
        for ctl in self.controllers:
            self._wait(ctl, deadline)
        for b in self.brokers.values():
            self._spawn(b)
        deadline = time.monotonic() + timeout
        for b in self.brokers.values():
            self._wait(b, deadline)
        return self

    def _spawn(self, node: Node) -> None:
        logf = open(node.log_path, "ab")
        node.proc = spawn(self.command(node), stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                          cwd=node.workdir, env=dict(os.environ, NO_COLOR="1"))
        logf.close()

    def _wait(self, node: Node, deadline: float) -> None:
        while time.monotonic() < deadline:
            if node.proc.poll() is not None:
                raise RunFailed(f"{self.system} node {node.node_id} exited with {node.proc.returncode}; "
                                f"log: {node.log_path}")
            if self.ready_marker in node.log_path.read_bytes()[-200000:]:
                try:
                    socket.create_connection(("127.0.0.1", node.port), timeout=1).close()
                    return
                except OSError:
                    pass
            time.sleep(0.05)
        raise RunFailed(f"{self.system} node {node.node_id} not ready in time; log: {node.log_path}")

    def stop(self) -> None:
        """Everything killed (the cluster's data is thrown away): brokers, then the controllers."""
        for node in [*self.brokers.values(), *self.controllers]:
            if node.proc is not None:
                reap(node.proc, signal.SIGKILL, 30)


class KetchCluster(Cluster):
    ready_marker = b"listening on"

    def broker_overrides(self) -> dict[str, str]:
        return {"ketch.acks.all.fsync": "false"} if self.system == "ketch-nofsync" else {}

    def __init__(self, system: str, root: Path, binary: Path, controllers: int = 1):
        super().__init__(system, root, controllers)
        self.binary = binary
        for b in self.brokers.values():
            b.settings.update(self.broker_overrides())

    def _args(self, node: Node) -> list[str]:
        return [a for k, v in node.settings.items() for a in ("--override", f"{k}={v}")]

    def format(self, node: Node) -> None:
        node.data.mkdir(parents=True, exist_ok=True)
        run([self.binary, "format", "-t", self.cluster_id, *self._args(node)], 60, f"ketch format node {node.node_id}")

    def command(self, node: Node) -> list[str]:
        return [str(self.binary), *self._args(node)]


class KafkaCluster(Cluster):
    ready_marker = b"Kafka Server started"

    def __init__(self, system: str, root: Path, libs: Path, controllers: int = 1):
        super().__init__(system, root, controllers)
        self.libs = libs
        for b in self.brokers.values():
            b.settings.update({"advertised.listeners": b.settings["listeners"], "inter.broker.listener.name": "PLAINTEXT"})

    def props(self, node: Node) -> Path:
        p = node.workdir / "server.properties"
        if not p.exists():
            p.write_text("".join(f"{k}={v}\n" for k, v in node.settings.items()))
        return p

    def format(self, node: Node) -> None:
        run([JAVA, f"-Dlog4j2.configurationFile={self.libs / 'log4j2.properties'}", "-cp", f"{self.libs}/*",
             "kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", self.props(node)], 180,
            f"kafka StorageTool format node {node.node_id}")

    def command(self, node: Node) -> list[str]:
        # kafka-server-start.sh's JVM options for every node, controller included
        return [JAVA, *KAFKA_BROKER_JVM, f"-Dlog4j2.configurationFile={self.libs / 'log4j2.properties'}",
                "-cp", f"{self.libs}/*", "kafka.Kafka", str(self.props(node))]
