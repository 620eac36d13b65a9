"""KIP-853 dynamic quorums (issue 15): controllers formatted with `--initial-controllers` (or
`--standalone`) instead of listing `controller.quorum.voters`.

- `ketch format --initial-controllers id@host:port:directory-id,...` writes the bootstrap
  checkpoint (`__cluster_metadata-0/00000000000000000000-0000000000.checkpoint`) record for record
  as Apache Kafka 4.1's `kafka-storage format` does (Kafka's DumpLogSegments decodes both: the
  header, KRaftVersion 1, the voters with their directory ids and controller endpoints, the
  footer; only the CRCs and timestamps differ), and gives the metadata directory the voter's
  directory id; `--standalone` makes this controller the only voter; with
  `controller.quorum.voters` set both are refused with Kafka's message.
- Three Ketch controllers formatted so, started with `controller.quorum.bootstrap.servers` only,
  elect a leader, which writes the initial voters into the metadata log (KRaftVersion and
  KRaftVoters control records, decoded by DumpLogSegments); `kafka-metadata-quorum describe
  --status` shows the three voters; a Ketch and an Apache Kafka 4.1 broker (bootstrap servers
  only) join, a topic is created and written through both; the leader is killed (-9), another is
  elected and a new topic is created and written.
- A mixed dynamic quorum: two Ketch controllers and an Apache Kafka 4.1 one, all formatted with the
  same `--initial-controllers` (Kafka's by its own StorageTool), a Ketch and a Kafka broker; the
  leader is killed (-9) and restarted until a leader of each kind was killed; after every kill a
  topic is created under the new leader and written through both brokers, nothing acknowledged
  lost. (Before voters sent their directory ids, Kafka's leader took a Ketch voter for an observer
  and never committed; before a new leader answered -1 for a high watermark it did not have yet,
  Kafka's broker halted on a high watermark going back.)

- Combined nodes (`process.roles=broker,controller`) of a dynamic quorum: node 1 formatted
  `--standalone`, nodes 2 and 3 `--no-initial-controllers`. Before they are voters, the
  controllers of 2 and 3 observe the quorum (`describe --status` lists them as observers) and
  their broker halves register with node 1's controller: a topic with replication factor 3 is
  created and written. `kafka-metadata-quorum add-controller` (their properties) makes them
  voters; node 1 is killed (-9): 2 and 3 elect a leader, their brokers find it (its endpoint is
  the one the VotersRecord gave) and a new topic is created and written.

Ketch only (KETCH_COMPAT_TARGET=kafka skips: Kafka's own dynamic quorum is its test suite's).
"""

from __future__ import annotations

from pathlib import Path

import os
import re
import subprocess

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import bootstrap, broker_under, create_topic, kafka_storage_format, new_cluster_id, wait_for, wait_for_isr
from conftest import REPO_ROOT, TARGET, free_port
from kafka_tools import KafkaTools
from test_cluster_under_kafka_controller import assert_log_is, produce_all
from test_combined_quorum import CombinedVoter, registered
from test_controller_quorum_snapshots import SNAPSHOT_EVERY_COMMIT, log_start
from test_controller_quorum import QUORUM, VOTERS, KafkaVoter, Quorum, Voter, ids, leader_of, quorum_status, running

pytestmark = pytest.mark.skipif(TARGET != "ketch", reason="dynamic quorums of Ketch controllers")

DUMP_LOG = "kafka.tools.DumpLogSegments"
KETCH = Path(os.environ.get("KETCH_BIN") or REPO_ROOT / "target/release/ketch")
CHECKPOINT = "__cluster_metadata-0/00000000000000000000-0000000000.checkpoint"
# Two printed Kafka Uuids (directory ids).
DIRS = {1: "MvDxzVmcRsaTz33bUuRU6A", 2: "07R5amHmR32VDA6jHkGbTA", 3: "b1Hh0P1DR3yQWnJ5yT8i0w"}


def initial_controllers(ports: dict[int, int]) -> str:
    return ",".join(f"{n}@127.0.0.1:{p}:{DIRS[n]}" for n, p in ports.items())


class DynamicVoter(Voter):
    """A Ketch controller of a dynamic quorum: no controller.quorum.voters; bootstrap servers; its
    directory formatted with `--initial-controllers`."""

    def __init__(self, workdir, node_id, ports, cluster_id):
        super().__init__(workdir, node_id, ports, cluster_id)
        self.servers = ",".join(f"127.0.0.1:{p}" for p in ports.values())
        self.format_args = ["--initial-controllers", initial_controllers(ports)]

    def settings(self) -> dict[str, str]:
        props = super().settings()
        del props["controller.quorum.voters"]
        props["controller.quorum.bootstrap.servers"] = self.servers
        return props


class KafkaDynamicVoter(KafkaVoter):
    """An Apache Kafka 4.1 controller of the same dynamic quorum (formatted by Kafka's StorageTool
    with the same `--initial-controllers`)."""

    def __init__(self, workdir, node_id, ports, cluster_id):
        super().__init__(workdir, node_id, ports, cluster_id)
        self.servers = ",".join(f"127.0.0.1:{p}" for p in ports.values())
        self.initial = initial_controllers(ports)

    def _write_props(self) -> None:
        super()._write_props()
        text = "".join(line + "\n" for line in self.props_path.read_text().splitlines()
                       if not line.startswith("controller.quorum.voters="))
        self.props_path.write_text(text + f"controller.quorum.bootstrap.servers={self.servers}\n")

    def _format(self) -> None:
        kafka_storage_format(self.libs, self.props_path, self.cluster_id, "--initial-controllers", self.initial)
        self.formatted = True


def dump(kafka_libs, path) -> str:
    """Kafka's DumpLogSegments of `path` (the metadata decoder), without CRCs and timestamps."""
    r = subprocess.run(["java", "-cp", str(kafka_libs / "*"), DUMP_LOG, "--cluster-metadata-decoder", "--files",
                        str(path)], capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if not line.startswith(("Dumping", "SLF4J"))]
    text = "\n".join(lines)
    text = re.sub(r"crc: \d+", "crc: _", text)
    text = re.sub(r"CreateTime: \d+", "CreateTime: _", text)
    return re.sub(r'"lastContainedLogTimestamp":\d+', '"lastContainedLogTimestamp":_', text)


def controller_props(path, node_id: int, port: int, data, extra: str = "") -> None:
    path.write_text(f"process.roles=controller\nnode.id={node_id}\ncontroller.listener.names=CONTROLLER\n"
                    f"listeners=CONTROLLER://127.0.0.1:{port}\nlistener.security.protocol.map=CONTROLLER:PLAINTEXT\n"
                    f"log.dirs={data}\n{extra}")


def ketch_format(props, cluster_id, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([str(KETCH), "format", "-t", cluster_id, "-c", str(props), *extra],
                          capture_output=True, text=True, timeout=60)


def test_format_writes_the_bootstrap_checkpoint_kafkas_formatter_writes(kafka_libs, tmp_path):
    ports = {1: free_port(), 2: free_port(), 3: free_port()}
    spec = initial_controllers(ports)
    servers = ",".join(f"127.0.0.1:{p}" for p in ports.values())
    cluster_id = new_cluster_id()
    for kind in ("kafka", "ketch"):
        props = tmp_path / f"{kind}.properties"
        controller_props(props, 2, ports[2], tmp_path / kind, f"controller.quorum.bootstrap.servers={servers}\n")
        if kind == "kafka":
            kafka_storage_format(kafka_libs, props, cluster_id, "--initial-controllers", spec)
        else:
            r = ketch_format(props, cluster_id, "--initial-controllers", spec)
            assert r.returncode == 0, r.stderr
    kafka, ketch = dump(kafka_libs, tmp_path / "kafka" / CHECKPOINT), dump(kafka_libs, tmp_path / "ketch" / CHECKPOINT)
    assert "KRaftVersion {\"version\":0,\"kRaftVersion\":1}" in ketch, ketch
    assert ketch.count("\"voterId\":") == 3 and f"\"voterDirectoryId\":\"{DIRS[3]}\"" in ketch, ketch
    assert ketch == kafka
    meta = (tmp_path / "ketch" / "meta.properties").read_text()
    assert f"directory.id={DIRS[2]}" in meta, meta

    # --standalone: this controller alone, on its controller listener.
    props = tmp_path / "standalone.properties"
    controller_props(props, 5, ports[1], tmp_path / "standalone",
                     f"controller.quorum.bootstrap.servers=127.0.0.1:{ports[1]}\n")
    r = ketch_format(props, cluster_id, "--standalone")
    assert r.returncode == 0, r.stderr
    alone = dump(kafka_libs, tmp_path / "standalone" / CHECKPOINT)
    assert alone.count("\"voterId\":") == 1 and "\"voterId\":5" in alone, alone
    assert f"\"host\":\"127.0.0.1\",\"port\":{ports[1]}" in alone, alone

    # Static voters and a dynamic quorum do not mix (Kafka's refusal).
    props = tmp_path / "static.properties"
    controller_props(props, 1, ports[1], tmp_path / "static", f"controller.quorum.voters=1@127.0.0.1:{ports[1]}\n")
    r = ketch_format(props, cluster_id, "--standalone")
    assert r.returncode != 0 and "You cannot specify controller.quorum.voters" in r.stderr, r.stderr
    assert not (tmp_path / "static" / "meta.properties").exists()


def dynamic_quorum(tmp_path, kafka_voters=()) -> tuple[dict, dict]:
    """Three controllers of one dynamic quorum (Apache Kafka's for the ids in `kafka_voters`), a
    Ketch broker 11 and a Kafka broker 12, all with bootstrap servers only (not started)."""
    ports = {n: free_port() for n in VOTERS}
    cluster_id = new_cluster_id()
    voters = {}
    for n in VOTERS:
        (tmp_path / f"c{n}").mkdir()
        kind = KafkaDynamicVoter if n in kafka_voters else DynamicVoter
        voters[n] = kind(tmp_path / f"c{n}", n, ports, cluster_id)
    quorum = Quorum(voters)
    dynamic = {"controller.quorum.voters": "", "controller.quorum.bootstrap.servers": voters[1].servers}
    brokers = {11: broker_under(quorum, tmp_path / "b11", 11, "ketch", dynamic),
               12: broker_under(quorum, tmp_path / "b12", 12, "kafka", dynamic)}
    return voters, brokers


@pytest.fixture
def dynamic_cluster(tmp_path):
    voters, brokers = dynamic_quorum(tmp_path)
    with running([*voters.values(), *brokers.values()]):
        yield voters, brokers


def test_three_ketch_controllers_formatted_with_initial_controllers_run_a_cluster(dynamic_cluster, kafka_libs,
                                                                                tmp_path):
    voters, brokers = dynamic_cluster
    kt = KafkaTools(kafka_libs, brokers[11], tmp_path)
    leader, status = leader_of(kt, voters.values())
    assert ids(status["CurrentVoters"]) == set(VOTERS), status

    # The first leader wrote the initial voters into the metadata log.
    def voters_in_log():
        segments = sorted((voters[leader].data_dir / "__cluster_metadata-0").glob("*.log"))
        text = "\n".join(dump(kafka_libs, s) for s in segments)
        return text if "KRaftVoters" in text else None
    text = wait_for(voters_in_log, "the initial voters in the leader's metadata log", timeout=30)
    assert "KRaftVersion {\"version\":0,\"kRaftVersion\":1}" in text, text
    assert all(f"\"voterDirectoryId\":\"{DIRS[n]}\"" in text for n in VOTERS), text

    servers = bootstrap(brokers.values())
    admin = AdminClient({"bootstrap.servers": servers})
    new = NewTopic("before", num_partitions=2, replication_factor=2)
    create_topic(admin, new, KafkaError.INVALID_REPLICATION_FACTOR, "before created with replication factor 2")
    wait_for_isr(admin, "before", [11, 12], count=2, timeout=60)
    first = produce_all(servers, "before", [b"a%d" % i for i in range(100)], 2)

    voters[leader].kill9()
    new_leader, status = leader_of(kt, [v for n, v in voters.items() if n != leader], not_=leader)
    assert new_leader != leader
    new = NewTopic("after", num_partitions=2, replication_factor=2)
    create_topic(admin, new, KafkaError.INVALID_REPLICATION_FACTOR, "after created under the new controller",
                 timeout=60)
    wait_for_isr(admin, "after", [11, 12], count=2, timeout=60)
    second = produce_all(servers, "after", [b"b%d" % i for i in range(100)], 2)
    assert_log_is(servers, "before", first, 2)
    assert_log_is(servers, "after", second, 2)


def test_a_mixed_dynamic_quorum_elects_either_kind_and_survives_the_kill_of_its_leaders(kafka_libs, tmp_path):
    voters, brokers = dynamic_quorum(tmp_path, kafka_voters=(3,))
    with running([*voters.values(), *brokers.values()]):
        kt = KafkaTools(kafka_libs, brokers[11], tmp_path)
        servers = bootstrap(brokers.values())
        admin = AdminClient({"bootstrap.servers": servers})
        killed: set[str] = set()
        leader, status = leader_of(kt, voters.values())
        assert ids(status["CurrentVoters"]) == set(VOTERS), status
        for round_ in range(4):
            topic = f"t{round_}"
            new = NewTopic(topic, num_partitions=2, replication_factor=2)
            create_topic(admin, new, KafkaError.INVALID_REPLICATION_FACTOR, f"{topic} created", timeout=60)
            wait_for_isr(admin, topic, [11, 12], count=2, timeout=60)
            acked = produce_all(servers, topic, [b"v%d" % i for i in range(50)], 2)
            assert_log_is(servers, topic, acked, 2)
            if killed == {"kafka", "ketch"}:
                break
            kind = "kafka" if leader == 3 else "ketch"
            print(f"round {round_}: leader {leader} ({kind}) killed")
            killed.add(kind)
            voters[leader].kill9()
            others = [v for n, v in voters.items() if n != leader]
            new_leader, _ = leader_of(kt, others, not_=leader)
            voters[leader].start()
            leader = new_leader
        assert killed == {"kafka", "ketch"}, killed


class KafkaObserverController(KafkaDynamicVoter):
    """An Apache Kafka 4.1 controller to be added to a running dynamic quorum: formatted with
    `--no-initial-controllers`, it starts as an observer of the quorum at `servers`."""

    def __init__(self, workdir, node_id, ports, cluster_id, servers: str):
        super().__init__(workdir, node_id, ports, cluster_id)
        self.servers = servers

    def _format(self) -> None:
        kafka_storage_format(self.libs, self.props_path, self.cluster_id, "--no-initial-controllers")
        self.formatted = True


def quorum_tool(kt, servers: str, *args, config=None):
    """kafka-metadata-quorum against the controllers at `servers` (the new controller's
    properties as --command-config for add-controller)."""
    extra = ["--command-config", str(config)] if config else []
    return kt.run(QUORUM, "--bootstrap-controller", servers, *extra, *args, timeout=90, check=False)


def test_kafka_metadata_quorum_adds_a_kafka_controller_to_a_ketch_quorum_and_removes_the_ketch_leader(
        kafka_libs, tmp_path):
    """A dynamic quorum of one Ketch controller (formatted --initial-controllers with itself) and
    a Ketch broker; the Ketch controller snapshots at every commit and keeps no log below its
    newest snapshot, so an Apache Kafka 4.1 controller formatted --no-initial-controllers joins as
    an observer from that snapshot (FetchSnapshot: Kafka reads the voters Ketch wrote into it);
    `kafka-metadata-quorum add-controller` (Kafka's tool, the new controller's
    properties) makes it a voter through the Ketch leader (AddRaftVoter, answered once the
    VotersRecord commits; refused while that controller is down: the leader could not reach it
    for its ApiVersions); adding it again is DUPLICATE_VOTER; `remove-controller` of the Ketch
    leader itself (RemoveRaftVoter) leaves the Kafka controller the only voter and leader; the
    Ketch controller goes on as an observer, and Kafka's leader adds it back (add-controller with
    its properties); the broker goes on: a topic is created and written."""
    ports = {1: free_port(), 2: free_port(), 3: free_port()}
    cluster_id = new_cluster_id()
    for n in ports:
        (tmp_path / f"c{n}").mkdir()
    ketch = DynamicVoter(tmp_path / "c1", 1, {1: ports[1]}, cluster_id)
    # A Ketch controller joining later: formatted --no-initial-controllers, every controller as
    # its bootstrap servers.
    joining = DynamicVoter(tmp_path / "c3", 3, ports, cluster_id)
    joining.format_args = ["--no-initial-controllers"]
    ketch.overrides.update(SNAPSHOT_EVERY_COMMIT)
    kafka = KafkaObserverController(tmp_path / "c2", 2, {1: ports[1], 2: ports[2]}, cluster_id, ketch.servers)
    quorum = Quorum({1: ketch})
    dynamic = {"controller.quorum.voters": "", "controller.quorum.bootstrap.servers": ketch.servers}
    broker = broker_under(quorum, tmp_path / "b11", 11, "ketch", dynamic)
    both = f"{ketch.servers},127.0.0.1:{ports[2]}"
    with running([ketch, broker]):
        kt = KafkaTools(kafka_libs, broker, tmp_path)
        servers = bootstrap([broker])
        admin = AdminClient({"bootstrap.servers": servers})
        # (librdkafka sends CreateTopics to the controller its metadata names, and waits while it
        # names none: a broker not yet unfenced lists no controller.)
        wait_for(lambda: admin.list_topics(timeout=10).controller_id == 11, "the broker serving as controller")
        create_topic(admin, NewTopic("one", num_partitions=1, replication_factor=1),
                     KafkaError.INVALID_REPLICATION_FACTOR, "one created")
        first = produce_all(servers, "one", [b"a%d" % i for i in range(50)], 1)
        wait_for(lambda: log_start(ketch) > 0, "the Ketch controller's log cleaned below a snapshot", timeout=30)
        # The leader asks a controller to add for its ApiVersions first (Kafka's AddVoterHandler):
        # while the Kafka controller is formatted but down, add-controller is refused.
        kafka._pick_ports()
        kafka._write_props()
        kafka._format()
        down = quorum_tool(kt, ketch.servers, "add-controller", config=kafka.props_path)
        assert down.returncode != 0, down
        assert "API_VERSIONS returned an error BROKER_NOT_AVAILABLE" in down.stdout + down.stderr, down
        with running([kafka]):
            joined(kt, ketch, kafka, both, admin, servers, first)
            with running([joining]):
                third(kt, ketch, kafka, joining, admin, servers)


def add_controller(kt, servers: str, node) -> None:
    """kafka-metadata-quorum add-controller of `node` (with a properties file of its settings)."""
    props = node.workdir / "controller.properties"
    if not props.exists():
        props.write_text("".join(f"{k}={v}\n" for k, v in node.settings().items()))
    r = quorum_tool(kt, servers, "add-controller", config=props)
    assert r.returncode == 0, r.stdout + r.stderr


def voters_are(kt, nodes, voters: set[int]):
    def check():
        status = quorum_status(kt, nodes)
        ok = ids(status.get("CurrentVoters", "[]")) == voters and status.get("MaxFollowerLag") == "0"
        return status if ok and not voters & ids(status.get("CurrentObservers", "[]")) else None
    return wait_for(check, f"voters {sorted(voters)}, caught up", timeout=60)


def third(kt, ketch, kafka, joining, admin, servers):
    """A Ketch controller formatted --no-initial-controllers joins as an observer, is added by
    the Kafka leader, and after kill -9 of that leader a Ketch controller leads the rest."""
    def observes():
        status = quorum_status(kt, [kafka])
        return status if 3 in ids(status.get("CurrentObservers", "[]")) else None
    wait_for(observes, "the new Ketch controller fetching as an observer", timeout=60)
    add_controller(kt, kafka.bootstrap, joining)
    voters_are(kt, [kafka], {1, 2, 3})
    kafka.kill9()
    leader, status = leader_of(kt, [ketch, joining], not_=2)
    assert leader in (1, 3) and ids(status["CurrentVoters"]) == {1, 2, 3}, status
    create_topic(admin, NewTopic("three", num_partitions=1, replication_factor=1),
                 KafkaError.INVALID_REPLICATION_FACTOR, "three created under a Ketch leader", timeout=60)
    acked = produce_all(servers, "three", [b"c%d" % i for i in range(50)], 1)
    assert_log_is(servers, "three", acked, 1)


def joined(kt, ketch, kafka, both, admin, servers, first):
    """The test above, once the Kafka controller runs: added, then the Ketch leader removed."""
    def observer_caught_up():
        status = quorum_status(kt, [ketch])
        return status if 2 in ids(status.get("CurrentObservers", "[]")) else None
    wait_for(observer_caught_up, "the Kafka controller fetching as an observer", timeout=60)

    r = quorum_tool(kt, ketch.servers, "add-controller", config=kafka.props_path)
    assert r.returncode == 0, r.stdout + r.stderr
    leader, status = leader_of(kt, [ketch])
    assert leader == 1 and ids(status["CurrentVoters"]) == {1, 2}, status
    assert 2 not in ids(status["CurrentObservers"]), status
    again = quorum_tool(kt, ketch.servers, "add-controller", config=kafka.props_path)
    assert again.returncode != 0 and "DuplicateVoterException" in again.stdout + again.stderr, again

    r = quorum_tool(kt, both, "remove-controller", "--controller-id", "1", "--controller-directory-id", DIRS[1])
    assert r.returncode == 0, r.stdout + r.stderr

    def kafka_leads_alone():
        status = quorum_status(kt, [kafka])
        voters = ids(status.get("CurrentVoters", "[]"))
        return status if status.get("LeaderId") == "2" and voters == {2} else None
    status = wait_for(kafka_leads_alone, "the Kafka controller the only voter and leader", timeout=60)

    def ketch_observes():  # the removed Ketch controller follows the new leader as an observer
        status = quorum_status(kt, [kafka])
        return status if 1 in ids(status.get("CurrentObservers", "[]")) else None
    wait_for(ketch_observes, "the removed Ketch controller fetching from the Kafka leader", timeout=60)

    # Kafka's leader adds the Ketch controller back (AddRaftVoter to Kafka, which asks the Ketch
    # controller's ApiVersions for its kraft.version range and waits for it to catch up).
    add_controller(kt, kafka.bootstrap, ketch)
    voters_are(kt, [kafka], {1, 2})
    create_topic(admin, NewTopic("two", num_partitions=1, replication_factor=1),
                 KafkaError.INVALID_REPLICATION_FACTOR, "two created under the Kafka controller", timeout=60)
    second = produce_all(servers, "two", [b"b%d" % i for i in range(50)], 1)
    assert_log_is(servers, "one", first, 1)
    assert_log_is(servers, "two", second, 1)


class DynamicCombined(CombinedVoter):
    """A combined Ketch node of a dynamic quorum: no controller.quorum.voters, every node's
    controller listener as bootstrap servers, formatted with `format_args`."""

    def __init__(self, workdir, node_id, ports, cluster_id, format_args):
        super().__init__(workdir, node_id, ports, cluster_id)
        self.servers = ",".join(f"127.0.0.1:{p}" for p in ports.values())
        self.format_args = format_args

    def settings(self) -> dict[str, str]:
        props = super().settings()
        del props["controller.quorum.voters"]
        props["controller.quorum.bootstrap.servers"] = self.servers
        return props


def test_combined_nodes_formatted_without_initial_controllers_serve_as_brokers_and_are_added_as_voters(
        kafka_libs, tmp_path):
    ports = {n: free_port() for n in VOTERS}
    cluster_id = new_cluster_id()
    nodes = {}
    for n in VOTERS:
        (tmp_path / f"n{n}").mkdir()
        fmt = ["--standalone"] if n == 1 else ["--no-initial-controllers"]
        nodes[n] = DynamicCombined(tmp_path / f"n{n}", n, ports, cluster_id, fmt)
    with running(list(nodes.values())):
        kt = KafkaTools(kafka_libs, nodes[1], tmp_path)
        servers = bootstrap(nodes.values())
        admin = AdminClient({"bootstrap.servers": servers})

        def observed():
            status = quorum_status(kt, [nodes[1].controller])
            ok = ids(status.get("CurrentVoters", "[]")) == {1} and {2, 3} <= ids(status.get("CurrentObservers", "[]"))
            return status if ok else None
        wait_for(observed, "nodes 2 and 3 observing a quorum of node 1", timeout=60)
        wait_for(lambda: registered(admin, set(VOTERS)), "the three broker halves registered and unfenced",
                 timeout=60)
        create_topic(admin, NewTopic("before", num_partitions=3, replication_factor=3),
                     KafkaError.INVALID_REPLICATION_FACTOR, "before created")
        wait_for_isr(admin, "before", list(VOTERS), count=3, timeout=60)
        first = produce_all(servers, "before", [b"a%d" % i for i in range(100)], 3)

        for n in (2, 3):
            add_controller(kt, nodes[1].controller.bootstrap, nodes[n])
            voters_are(kt, [nodes[1].controller], set(range(1, n + 1)))

        nodes[1].kill9()
        survivors = {n: v for n, v in nodes.items() if n != 1}
        leader, status = leader_of(kt, [v.controller for v in survivors.values()], not_=1)
        assert leader in (2, 3) and ids(status["CurrentVoters"]) == set(VOTERS), status
        servers = bootstrap(survivors.values())
        admin = AdminClient({"bootstrap.servers": servers})
        # (Node 1's broker is fenced once its session lapses; a topic created before may be placed on it.)
        wait_for(lambda: registered(admin, set(survivors)), "node 1's broker fenced", timeout=60)
        create_topic(admin, NewTopic("after", num_partitions=2, replication_factor=2),
                     KafkaError.INVALID_REPLICATION_FACTOR, "after created under a new leader", timeout=60)
        wait_for_isr(admin, "after", sorted(survivors), count=2, timeout=60)
        second = produce_all(servers, "after", [b"b%d" % i for i in range(100)], 2)
        assert_log_is(servers, "before", first, 3)
        assert_log_is(servers, "after", second, 2)
