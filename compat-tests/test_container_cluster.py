"""A Ketch cluster in containers, from docker/compose.yaml (a controller and three brokers from
the ketch:dev image, each formatting its volume at its first start for CLUSTER_ID, as Apache
Kafka's image does), with the kill test: librdkafka producers write with acks=all and
idempotence to a topic of three replicas (min.insync.replicas=2) while the container of a
partition leader is killed (SIGKILL) and started again; every acknowledged record is read back
exactly once, and the killed broker is back in every ISR. Needs a Docker engine, docker-compose
(scripts/install-test-deps installs Debian's) and the image (scripts/test builds it); only
meaningful for the Ketch target.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from conftest import TARGET, free_port

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

COMPOSE = Path(__file__).resolve().parent.parent / "docker" / "compose.yaml"
IMAGE = os.environ.get("KETCH_IMAGE", "ketch:dev")
TOPIC = "kill-test"

pytestmark = pytest.mark.skipif(TARGET != "ketch", reason="tests Ketch's container image")


def compose_command() -> list[str]:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    pytest.fail("no docker-compose (scripts/install-test-deps installs it)", pytrace=False)


@pytest.fixture
def cluster():
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode != 0:
        pytest.fail(f"image {IMAGE} missing: run scripts/docker-image", pytrace=False)
    project = f"ketch-{uuid.uuid4().hex[:8]}"
    ports = {}
    for n in (1, 2, 3):
        port = free_port()
        while port in ports.values():
            port = free_port()
        ports[n] = port
    env = {**os.environ, "KETCH_IMAGE": IMAGE, **{f"BROKER{n}_PORT": str(p) for n, p in ports.items()}}
    base = [*compose_command(), "-f", str(COMPOSE), "-p", project]

    def run(*args, check=True, timeout=120):
        r = subprocess.run([*base, *args], env=env, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    run("up", "-d")
    try:
        yield run, ports
    finally:
        # (Shown by pytest for a failed test: its captured output.)
        print(run("logs", "--no-color", "--tail", "60", check=False).stdout[-30000:])
        run("down", "-v", "--timeout", "5", check=False)


def wait_for(check, what, timeout):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception as e:  # noqa: BLE001 (the cluster may still be starting)
            last = e
        time.sleep(0.5)
    raise AssertionError(f"{what} not within {timeout} s (last error: {last})")


def test_a_broker_container_killed_under_acks_all_loses_nothing(cluster):
    run, ports = cluster
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait_for(lambda: sorted(admin.list_topics(timeout=5).brokers) == [1, 2, 3], "three brokers registered", 90)
    futures = admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=3)])
    futures[TOPIC].result(30)

    def isr_of_all(expected: set[int]) -> bool:
        t = admin.list_topics(TOPIC, timeout=5).topics[TOPIC]
        return len(t.partitions) == 3 and all(set(p.isrs) == expected for p in t.partitions.values())

    wait_for(lambda: isr_of_all({1, 2, 3}), "every ISR full", 60)

    acked: list[bytes] = []
    errors: list[str] = []
    stop = threading.Event()

    def produce():
        p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "message.timeout.ms": 60000})
        i = 0
        while not stop.is_set():
            value = b"v%06d" % i
            i += 1

            def done(err, m, value=value):
                if err is None:
                    acked.append(value)
                else:
                    errors.append(str(err))

            while True:
                try:
                    p.produce(TOPIC, value=value, on_delivery=done)
                    break
                except BufferError:
                    p.poll(0.1)
            p.poll(0)
            time.sleep(0.002)
        p.flush(90)

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        wait_for(lambda: len(acked) >= 500, "500 acknowledged records", 60)
        leader = admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions[0].leader
        run("kill", "-s", "SIGKILL", f"broker{leader}")
        before = len(acked)
        wait_for(lambda: len(acked) >= before + 500, "writes acknowledged after the kill", 60)
        run("start", f"broker{leader}")
        wait_for(lambda: isr_of_all({1, 2, 3}), f"broker {leader} back in every ISR", 90)
        after = len(acked)
        wait_for(lambda: len(acked) >= after + 200, "writes acknowledged after the restart", 60)
    finally:
        stop.set()
        writer.join(120)
    assert not errors, errors[:5]

    # Every acknowledged record, exactly once (idempotence: no duplicates from retries).
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([TOPIC])
    seen: dict[bytes, int] = {}
    wanted = set(acked)
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline and not wanted.issubset(seen):
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                seen[m.value()] = seen.get(m.value(), 0) + 1
    finally:
        c.close()
    missing = wanted - set(seen)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
    duplicated = [v for v, n in seen.items() if n > 1]
    assert not duplicated, f"{len(duplicated)} records duplicated, e.g. {duplicated[:5]}"
    print(f"{len(acked)} records acknowledged through the kill of broker {leader}, all read back once")
