"""The container image with a real client in a container: kcat (librdkafka) in a Debian image made
locally (ketch-local/debian:bookworm, scripts/docker-base-images) talks to Ketch in the image
scripts/docker-image builds (ketch:dev; KETCH_IMAGE names another), over a Docker network.

Checks what the image promises: configured by KETCH_* variables, data in the volume
/var/lib/ketch (kept across a new container), HEALTHCHECK reports healthy, `docker stop` ends it
quickly with exit code 0, the port is published on 127.0.0.1 only, runs as uid 65532, at most
40 MB. Needs a Docker engine (scripts/test starts one) and the images (scripts/test builds them);
only meaningful for the Ketch target.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid

import pytest

from conftest import TARGET

IMAGE = os.environ.get("KETCH_IMAGE", "ketch:dev")
CLIENT_IMAGE = "ketch-local/debian:bookworm"
MAX_IMAGE_BYTES = 40 * 1000 * 1000
STOP_SECONDS = 5

pytestmark = pytest.mark.skipif(TARGET != "ketch", reason="tests Ketch's container image")


def docker(*args, check=True, timeout=120, input=None):
    r = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, input=input)
    if check and r.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


@pytest.fixture(scope="module")
def engine():
    if shutil.which("docker") is None:
        pytest.fail("no docker client (scripts/install-test-deps installs docker.io)", pytrace=False)
    if docker("version", check=False, timeout=30).returncode != 0:
        pytest.fail("no Docker engine answers (scripts/test starts dockerd)", pytrace=False)
    for image in (IMAGE, CLIENT_IMAGE):
        if docker("image", "inspect", image, check=False).returncode != 0:
            pytest.fail(f"image {image} missing: run scripts/docker-image", pytrace=False)


@pytest.fixture
def names(engine):
    """A network and a volume of its own for the test, removed with whatever used them."""
    suffix = uuid.uuid4().hex[:8]
    n = {"network": f"ketch-test-{suffix}", "volume": f"ketch-test-{suffix}", "broker": f"ketch-{suffix}"}
    docker("network", "create", n["network"])
    docker("volume", "create", n["volume"])
    yield n
    docker("rm", "-f", n["broker"], check=False)
    docker("network", "rm", n["network"], check=False)
    docker("volume", "rm", "-f", n["volume"], check=False)


def start_broker(n):
    return docker(
        "run", "-d", "--name", n["broker"], "--network", n["network"],
        "-v", f"{n['volume']}:/var/lib/ketch",
        "-p", "127.0.0.1::9092",
        "-e", f"KETCH_ADVERTISED_LISTENERS=PLAINTEXT://{n['broker']}:9092",
        "-e", "KETCH_NUM_PARTITIONS=2",
        IMAGE,
    ).stdout.strip()


def kcat(n, *args, input=None, check=True, timeout=60):
    """kcat in a throwaway container on the test's network."""
    return docker(
        "run", "--rm", "-i", "--network", n["network"], CLIENT_IMAGE,
        "kcat", "-b", f"{n['broker']}:9092", "-m", "10", "-X", "socket.timeout.ms=10000", *args,
        input=input, check=check, timeout=timeout,
    )


def consume(n, topic, partition):
    r = kcat(n, "-C", "-t", topic, "-p", str(partition), "-o", "beginning", "-e", "-f", "%k=%s\\n")
    return r.stdout.splitlines()


def inspect(container, fmt):
    return docker("inspect", "-f", fmt, container).stdout.strip()


def logs(container):
    r = docker("logs", container, check=False)
    return r.stdout + r.stderr


def test_kcat_in_a_container_against_the_image(names):
    n = names
    size = int(docker("image", "inspect", "-f", "{{.Size}}", IMAGE).stdout)
    assert size <= MAX_IMAGE_BYTES, f"{IMAGE} is {size} bytes"

    started = time.monotonic()
    container = start_broker(n)
    assert inspect(container, "{{.Config.User}}") == "65532:65532"
    published = json.loads(inspect(container, "{{json .NetworkSettings.Ports}}"))["9092/tcp"]
    assert published and all(p["HostIp"] == "127.0.0.1" for p in published), published

    # First produce acknowledged by all in-sync replicas: retried until the broker is up.
    records = "k0:v0\nk1:v1\nk2:v2\n"
    deadline = started + 60
    while True:
        r = kcat(n, "-P", "-t", "orders", "-p", "0", "-K", ":", "-X", "acks=all",
                 "-X", "message.timeout.ms=10000", input=records, check=False)
        if r.returncode == 0:
            break
        assert time.monotonic() < deadline, f"no produce acknowledged in 60 s: {r.stderr}\n{logs(container)}"
        time.sleep(0.2)
    first_ack = time.monotonic() - started
    print(f"container start to first acknowledged produce (kcat container included): {first_ack:.2f} s")

    # KETCH_NUM_PARTITIONS reached the broker: the auto-created topic has 2 partitions.
    meta = json.loads(kcat(n, "-L", "-J", "-t", "orders").stdout)
    [topic] = meta["topics"]
    assert len(topic["partitions"]) == 2, meta
    assert meta["brokers"][0]["name"] == f"{n['broker']}:9092", meta
    assert consume(n, "orders", 0) == ["k0=v0", "k1=v1", "k2=v2"]

    # HEALTHCHECK (interval 5 s) turns healthy.
    deadline = time.monotonic() + 30
    while (health := inspect(container, "{{.State.Health.Status}}")) != "healthy":
        assert health in ("starting", "healthy"), f"health {health}\n{logs(container)}"
        assert time.monotonic() < deadline, "not healthy in 30 s"
        time.sleep(0.5)

    # docker stop: SIGTERM, a clean and quick exit with code 0.
    t = time.monotonic()
    docker("stop", "-t", "30", container)
    stop_seconds = time.monotonic() - t
    print(f"docker stop: {stop_seconds:.2f} s")
    assert inspect(container, "{{.State.ExitCode}}") == "0", logs(container)
    assert stop_seconds < STOP_SECONDS, f"docker stop took {stop_seconds:.1f} s"
    assert "panicked" not in logs(container)

    # The data is in the volume: a new container on it serves the same records, and appends.
    docker("rm", container)
    container = start_broker(n)
    deadline = time.monotonic() + 60
    while (r := kcat(n, "-P", "-t", "orders", "-p", "0", "-K", ":", input="k3:v3\n", check=False)).returncode != 0:
        assert time.monotonic() < deadline, f"restarted broker does not accept produce: {r.stderr}\n{logs(container)}"
        time.sleep(0.2)
    assert consume(n, "orders", 0) == ["k0=v0", "k1=v1", "k2=v2", "k3=v3"]
    docker("stop", "-t", "30", container)
    assert inspect(container, "{{.State.ExitCode}}") == "0", logs(container)
