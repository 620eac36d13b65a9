"""Clusters for the compat tests: an Apache Kafka 4.1 KRaft controller on its own
(`process.roles=controller`, from the Maven jars) and brokers of either kind
(`process.roles=broker`) attached to it.

    ctl = KafkaController(tmp_path / "ctl").start()
    b = broker_under(ctl, tmp_path / "b2", node_id=2, kind="ketch").start()
    ...
    b.close(); ctl.close()

or, for a whole cluster in a test, the `start_cluster` fixture (a plugin of conftest.py: every test
module has it):

    c = start_cluster({1: ("kafka", {}), 2: ("ketch", {...})}, parallel=True)   # a started Cluster
    c.ctl, c.brokers[2], c.bootstrap()

with helpers to wait for the cluster's state: wait_for, partition_states / cluster_states (one
Metadata request), wait_for_leader / wait_for_isr (polled until leaders / ISR reach a set),
create_topic (asked again while the brokers are not all registered), group_offsets, and to read a
topic back: read_all (every record up to given ends, at a chosen isolation level).

A Ketch broker is formatted with `ketch format -t <the controller's cluster id>`, a Kafka broker
with Kafka's StorageTool, as an operator would.
"""

from __future__ import annotations

import base64
import os
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import (OFFSET_BEGINNING, Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import TARGET, BrokerStartError, KafkaBroker, KetchBroker, free_port

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

    def __init__(self, workdir: Path, overrides=None, features: dict[str, int] | None = None,
                 scram: list[str] | None = None):
        super().__init__(workdir, overrides)
        self.cluster_id = new_cluster_id()
        # Finalized at format time (`kafka-storage format --feature name=level`), and SCRAM
        # credentials (`--add-scram`): the cluster's bootstrap metadata.
        self.features = dict(features or {})
        self.scram = list(scram or [])
        # Fixed for the controller's life: brokers are configured with it.
        self.port = free_port()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def voter(self) -> str:
        """This controller as `controller.quorum.voters` names it (`id@host:port`)."""
        return f"{CONTROLLER_ID}@{self.bootstrap}"

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
        extra += [a for spec in self.scram for a in ("--add-scram", spec)]
        kafka_storage_format(self.libs, self.props_path, self.cluster_id, *extra)
        self.formatted = True

    def _pick_ports(self) -> None:
        pass  # the port chosen at creation: brokers are configured with it


class KetchController(KetchBroker):
    """A controller-only Ketch node (`process.roles=controller`, the only voter of its quorum),
    formatted with `ketch format -t <cluster id>` as an operator would."""

    def __init__(self, workdir: Path, overrides=None, features: dict[str, int] | None = None,
                 scram: list[str] | None = None):
        super().__init__(workdir, overrides)
        self.cluster_id = new_cluster_id()
        # Finalized at format time (`ketch format --feature name=level`), and SCRAM credentials
        # (`--add-scram`): the cluster's bootstrap metadata.
        self.features = dict(features or {})
        self.scram = list(scram or [])
        # Fixed for the controller's life: brokers are configured with it.
        self.port = free_port()
        self.formatted = False
        # More `ketch format` arguments (e.g. `--initial-controllers ...`).
        self.format_args: list[str] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def voter(self) -> str:
        """This controller as `controller.quorum.voters` names it (`id@host:port`)."""
        return f"{CONTROLLER_ID}@{self.bootstrap}"

    def settings(self) -> dict[str, str]:
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
        return props

    def command(self) -> list[str]:
        return [str(self.binary), *(a for k, v in self.settings().items() for a in ("--override", f"{k}={v}"))]

    def start(self) -> "KetchController":
        if not self.formatted:
            cmd = [str(self.binary), "format", "-t", self.cluster_id]
            cmd += [a for k, v in self.settings().items() for a in ("--override", f"{k}={v}")]
            cmd += [a for name, level in self.features.items() for a in ("--feature", f"{name}={level}")]
            cmd += [a for spec in self.scram for a in ("--add-scram", spec)]
            cmd += self.format_args
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                raise BrokerStartError(f"ketch format failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
            self.formatted = True
        super().start()
        return self


def new_controller(workdir: Path, kind: str, overrides=None, features: dict[str, int] | None = None,
                   scram: list[str] | None = None):
    """A controller of `kind` ("kafka" or "ketch"), formatted with `features` (name: level) and
    `scram` (`--add-scram` specs)."""
    if kind == "ketch":
        return KetchController(workdir, overrides, features, scram)
    return KafkaController(workdir, overrides, features, scram)


def controller_settings(ctl: KafkaController, node_id: int) -> dict[str, str]:
    """What a broker of either kind needs to join `ctl`'s cluster (Kafka's names)."""
    return {
        "process.roles": "broker",
        "node.id": str(node_id),
        "controller.quorum.voters": ctl.voter,
        "controller.listener.names": "CONTROLLER",
        "broker.heartbeat.interval.ms": "500",
    }


class KetchBrokerUnder(KetchBroker):
    """A Ketch broker (`process.roles=broker`) of a Kafka controller's cluster."""

    def __init__(self, workdir: Path, ctl: KafkaController, node_id: int, overrides=None, extra_listeners=None):
        settings = controller_settings(ctl, node_id)
        settings["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT" + "".join(
            f",{n}:{proto}" for n, (proto, _) in (extra_listeners or {}).items())
        settings.update(overrides or {})
        super().__init__(workdir, settings, extra_listeners=extra_listeners)
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

    def __init__(self, workdir: Path, ctl: KafkaController, node_id: int, overrides=None, extra_listeners=None):
        super().__init__(workdir, overrides)
        self.ctl = ctl
        self.node_id = node_id
        self.extra = dict(extra_listeners or {})

    def _write_props(self) -> None:
        extra = "".join(f",{n}://127.0.0.1:{port}" for n, (_, port) in self.extra.items())
        props = {
            **controller_settings(self.ctl, self.node_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}" + extra,
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}" + extra,
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT" + "".join(
                f",{n}:{proto}" for n, (proto, _) in self.extra.items()),
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
    """`overrides` may name `extra_listeners` ({name: (security protocol, port)}): listeners besides
    PLAINTEXT (as conftest's start_broker)."""
    workdir.mkdir(parents=True, exist_ok=True)
    overrides = dict(overrides or {})
    extra = overrides.pop("extra_listeners", None)
    if kind == "kafka":
        return KafkaBrokerUnder(workdir, ctl, node_id, overrides, extra)
    return KetchBrokerUnder(workdir, ctl, node_id, overrides, extra)


# ---------------------------------------------------------------------------------------------
# a controller and its brokers, started and stopped together
# ---------------------------------------------------------------------------------------------


def bootstrap(brokers) -> str:
    """"host:port,host:port" of `brokers` (their current addresses)."""
    return ",".join(b.bootstrap for b in brokers)


class Cluster:
    """A KafkaController and brokers under it: `nodes` is {node id: (kind, broker overrides)},
    started in that order (`parallel=True`: all at once, about 15 s instead of 22 s for three on
    2 cores). `brokers` is {node id: broker}; `processes` lists the controller and the brokers (their
    logs go into a failing test's report: conftest's report hook reads `item._compat_brokers`)."""

    def __init__(self, root: Path, nodes: dict, controller_overrides=None, controller: str = "kafka",
                 controller_features: dict[str, int] | None = None, controller_scram: list[str] | None = None):
        (root / "controller").mkdir(parents=True, exist_ok=True)
        self.ctl = new_controller(root / "controller", controller, controller_overrides, controller_features,
                                  controller_scram)
        self.brokers = {n: broker_under(self.ctl, root / f"broker{n}", n, kind, overrides)
                        for n, (kind, overrides) in nodes.items()}
        self._pool: ThreadPoolExecutor | None = None

    @property
    def processes(self) -> list:
        return [self.ctl, *self.brokers.values()]

    def bootstrap(self) -> str:
        return bootstrap(self.brokers.values())

    def start(self, parallel: bool = False) -> "Cluster":
        self.ctl.start()
        if parallel:
            # By threads that live until stop(): conftest's children get SIGKILL when the THREAD that
            # spawned them exits (PR_SET_PDEATHSIG).
            self._pool = ThreadPoolExecutor(len(self.brokers))
            list(self._pool.map(lambda b: b.start(), self.brokers.values()))
        else:
            for b in self.brokers.values():
                b.start()
        return self

    def wait_registered(self, admin, timeout: float = 30) -> None:
        """Until `admin`'s Metadata answer names every broker of the cluster (registered and unfenced)."""
        nodes = sorted(self.brokers)

        def registered():
            try:
                return sorted(admin.list_topics(timeout=10).brokers) == nodes
            except KafkaException:
                # e.g. librdkafka's _PARTIAL ("Partial response") while the brokers start serving
                return False

        wait_for(registered, f"brokers {nodes} in the Metadata", timeout=timeout)

    def stop(self, kill: bool = False) -> None:
        """Brokers first, last started first (kill=True: kill -9, for a throwaway cluster; else a
        graceful close), then the controller."""
        try:
            for b in reversed(list(self.brokers.values())):
                if kill:
                    b.kill9()
                else:
                    b.close()
        finally:
            self.ctl.close()
            if self._pool is not None:
                self._pool.shutdown()


THREE_NODES = [1, 2, 3]
# Three brokers with Kafka's replication-test settings: replication factor 3 for the topics,
# `__consumer_offsets` (6 partitions) and the transaction log, min.insync.replicas=2.
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


def three_broker_cluster(start_cluster, controller: str = "kafka") -> dict:
    """Brokers 1, 2 and 3 of the target kind (THREE_BROKER_SETTINGS) under a fresh controller of kind
    `controller` ("kafka" or "ketch"), started in parallel and killed (-9, a throwaway cluster: no
    controlled shutdown to wait for) at the test's end; returns {node id: broker} once all three are
    in the Metadata."""
    c = start_cluster({n: (TARGET, THREE_BROKER_SETTINGS) for n in THREE_NODES}, parallel=True, kill=True,
                      controller=controller)
    c.wait_registered(AdminClient({"bootstrap.servers": c.bootstrap()}), timeout=60)
    return c.brokers


@pytest.fixture
def start_cluster(request, tmp_path):
    """Factory: start_cluster(nodes, controller_overrides=None, parallel=False, kill=False,
    controller="kafka", controller_features=None, controller_scram=None, before_start=None) -> a started
    Cluster (see there) under a controller of that kind (formatted with `controller_features`, name:
    level, and `controller_scram`, `--add-scram` specs), stopped at the test's end (kill: the brokers
    with kill -9); `before_start(cluster)` is called before anything starts (e.g. to set a process's
    environment)."""
    started: list[tuple[Cluster, bool]] = []

    def factory(nodes: dict, controller_overrides=None, parallel: bool = False, kill: bool = False,
                controller: str = "kafka", controller_features: dict[str, int] | None = None,
                controller_scram: list[str] | None = None, before_start=None) -> Cluster:
        c = Cluster(tmp_path / f"cluster{len(started)}", nodes, controller_overrides, controller,
                    controller_features, controller_scram)
        started.append((c, kill))
        request.node._compat_brokers = [p for c_, _ in started for p in c_.processes]
        if before_start is not None:
            before_start(c)
        return c.start(parallel)

    yield factory
    # Checked before the stop: a node that exited by itself, or any Ketch node that panicked.
    problems = [p for c, _ in started for node in c.processes for p in node.health_problems()]
    for c, kill in reversed(started):
        c.stop(kill)
    if problems:
        raise RuntimeError("cluster teardown found: " + "; ".join(problems))


# ---------------------------------------------------------------------------------------------
# waiting for the cluster's state
# ---------------------------------------------------------------------------------------------


def wait_for(check, what: str, timeout: float = 30, interval: float = 0.5):
    """Calls `check` every `interval` s until it returns something true, and returns that; fails the
    test after `timeout` s with its last answer."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def partition_states(admin, topic: str):
    """({partition: (leader, sorted ISR)} of `topic`, sorted ids of the brokers in the answer) from
    one Metadata request for `topic`, or None while the topic or the answer is not there."""
    try:
        md = admin.list_topics(topic, timeout=5)
    except KafkaException:
        return None
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p: (pm.leader, sorted(pm.isrs)) for p, pm in t.partitions.items()}, sorted(md.brokers)


def cluster_states(admin):
    """({(topic, partition): (leader, sorted ISR)} of every topic answered without an error, sorted
    ids of the brokers in the answer) from one Metadata request for every topic, or None."""
    try:
        md = admin.list_topics(timeout=5)
    except KafkaException:
        return None
    parts = {}
    for t, tm in md.topics.items():
        if tm.error is None:  # a topic with an error (e.g. no leader yet) is left out
            parts.update({(t, p): (pm.leader, sorted(pm.isrs)) for p, pm in tm.partitions.items()})
    return parts, sorted(md.brokers)


def describe_partitions(admin, topic):
    """`topic` a name: partition_states (keys: partition numbers); a list of names: cluster_states
    restricted to them, None unless each has a partition in the answer; None: cluster_states."""
    if isinstance(topic, str):
        return partition_states(admin, topic)
    s = cluster_states(admin)
    if s is None or topic is None:
        return s
    parts = {tp: st for tp, st in s[0].items() if tp[0] in topic}
    if not all(any(t == name for t, _ in parts) for name in topic):
        return None
    return parts, s[1]


def wait_for_partitions(admin, topic, *, leaders=None, isr=None, count=None, only=None, brokers=None,
                        absent=(), what: str, timeout: float = 30):
    """Polls describe_partitions(admin, topic) until its answer has: every partition considered (all,
    or the keys in `only`) led by a broker in `leaders` and with the ISR `isr` (each when given),
    `count` partitions (an int; for a list of topics {topic: partitions}), exactly the `brokers`
    (sorted ids, when given) and none of `absent`. Returns that answer: (states, brokers)."""
    leaders = None if leaders is None else set(leaders)
    isr = None if isr is None else sorted(isr)

    def ok():
        s = describe_partitions(admin, topic)
        if not s:
            return None
        states, ids = s
        if brokers is not None and ids != sorted(brokers):
            return None
        if any(n in ids for n in absent):
            return None
        if isinstance(count, int) and len(states) != count:
            return None
        if isinstance(count, dict) and any(sum(t == name for t, _ in states) != n for name, n in count.items()):
            return None
        keys = list(states) if only is None else list(only)
        if any(k not in states for k in keys):
            return None
        if leaders is not None and any(states[k][0] not in leaders for k in keys):
            return None
        if isr is not None and any(states[k][1] != isr for k in keys):
            return None
        return s

    return wait_for(ok, what, timeout=timeout)


def wait_for_leader(admin, topic, leaders, *, what: str | None = None, **kw):
    """Until every partition of `topic` (or each key in `only`) is led by a broker in `leaders`
    (see wait_for_partitions for the other conditions); returns (states, brokers)."""
    return wait_for_partitions(admin, topic, leaders=leaders,
                               what=what or f"{topic} led by one of {sorted(leaders)}", **kw)


def wait_for_isr(admin, topic, isr, *, what: str | None = None, **kw):
    """Until every partition of `topic` (or each key in `only`) has the ISR `isr` (see
    wait_for_partitions for the other conditions); returns (states, brokers)."""
    return wait_for_partitions(admin, topic, isr=isr, what=what or f"the ISR {sorted(isr)} of {topic}", **kw)


def create_topic(admin, new, not_yet: int, what: str | None = None, timeout: float = 30) -> None:
    """CreateTopics for `new` (a NewTopic), asked again while it fails with `not_yet` (right after the
    brokers start the controller may not have them all registered and unfenced yet: Kafka answers
    INVALID_REPLICA_ASSIGNMENT to an assignment naming one, INVALID_REPLICATION_FACTOR to a
    replication factor above the brokers it has)."""
    def created():
        try:
            admin.create_topics([new])[new.topic].result(timeout=30)
            return True
        except KafkaException as e:
            if e.args[0].code() != not_yet:
                raise
            return False

    wait_for(created, what or f"{new.topic} created", timeout=timeout)


def create_three_way_topic(admin, topic: str, partitions: int) -> dict:
    """`topic` with replication factor 3 and min.insync.replicas=2 on a three_broker_cluster; waits
    until every partition has a leader and the ISR [1, 2, 3]. Returns {partition: (leader, ISR)}."""
    new = NewTopic(topic, num_partitions=partitions, replication_factor=3, config={"min.insync.replicas": "2"})
    # INVALID_REPLICATION_FACTOR: a broker not unfenced yet
    create_topic(admin, new, KafkaError.INVALID_REPLICATION_FACTOR, f"{topic} created with replication factor 3")
    return wait_for_isr(admin, topic, THREE_NODES, leaders=THREE_NODES, count=partitions,
                        what=f"every partition of {topic} with ISR {THREE_NODES}", timeout=60)[0]


def read_all(servers: str, topic: str, ends: dict[int, int], isolation: str | None = None,
             timeout: float = 30, record_of=lambda msg: (msg.offset(), msg.value()),
             group: str = "cluster-check") -> dict[int, list]:
    """Every record a consumer at `isolation` (isolation.level; None: librdkafka's default) reads
    from the beginning of each partition until its position reaches ends[partition] (for
    read_committed: until the last stable offset has reached it): {partition: [record_of(message)]},
    by default (offset, value). Fetch only: confluent-kafka wants a group.id (`group`), but nothing
    is committed or fetched from the group."""
    config = {"bootstrap.servers": servers, "group.id": group, "enable.auto.commit": False,
              "enable.partition.eof": True}
    if isolation is not None:
        config["isolation.level"] = isolation
    consumer = Consumer(config)
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        seen: dict[int, list] = {p: [] for p in ends}
        at_end: dict[int, int] = {}
        deadline = time.monotonic() + timeout
        while any(at_end.get(p, -1) < end for p, end in ends.items()):
            assert time.monotonic() < deadline, \
                f"{isolation or 'default isolation'}: reading {topic} timed out at {at_end}, want {ends}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(msg.error())
                at_end[msg.partition()] = msg.offset()
                continue
            seen[msg.partition()].append(record_of(msg))
        return seen
    finally:
        consumer.close()


def group_offsets(admin, group: str, timeout: float = 60) -> dict:
    """{(topic, partition): committed offset} of `group` (ListConsumerGroupOffsets), asked again while
    it fails (e.g. a new coordinator still loading the group's partition)."""
    def ask():
        try:
            res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=15)
            return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions}
        except KafkaException as e:
            print(f"list_consumer_group_offsets: {e}")
            return None
    return wait_for(ask, f"the committed offsets of {group}", timeout=timeout)
