"""A schema registry that keeps its schemas in Kafka, unchanged, on the broker: Apicurio Registry
3.3.3 (`io.apicurio:apicurio-registry-app:3.3.3:tar.gz:all` from Maven Central, the runnable
Quarkus app its container image is made of) with its `kafkasql` storage, and confluent-kafka's
Schema Registry client and Avro serializer talking to its Confluent-compatible API
(`/apis/ccompat/v7`).

- The registry creates its topics on the broker (`kafkasql-journal`, `kafkasql-snapshots`,
  `registry-events`: `cleanup.policy=delete`, infinite retention, checked through DescribeConfigs
  before it starts) and comes up once its consumer has read its own bootstrap marker back.
- An Avro producer registers `users-value` v1 as it serializes 100 records into `users`; v2 (a
  field added with a default) is registered beside it; registering v1 again gives its id back.
- The registry is killed (-9) and so is the broker (its data kept), both are started again: the new
  registry replays its journal from the broker, and names the same subjects, versions and ids; a
  consumer deserializes every record with the schema fetched by the id in each record.

Also passes against Apache Kafka 4.1 (KETCH_COMPAT_TARGET=kafka). Apicurio 3.x needs Java 21 or
newer: `JAVA21_HOME`, or the first of /usr/lib/jvm/*-2[1-9]* / *-3[0-9]*; skipped (with the reason)
where there is none.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from conftest import CACHE_DIR, _reap, _spawn, free_port
from frameworks_support import topic_config

pytestmark = pytest.mark.timeout(480)

APICURIO = "io.apicurio:apicurio-registry-app:3.3.3:tar.gz:all"
USER_V1 = ('{"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}')
USER_V2 = ('{"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}, '
           '{"name": "age", "type": "int", "default": 0}]}')


def java21() -> Path | None:
    """A java of version 21 or newer."""
    home = os.environ.get("JAVA21_HOME")
    candidates = [Path(home)] if home else sorted(Path("/usr/lib/jvm").glob("*-[23][0-9]*"))
    for c in candidates:
        if (c / "bin/java").is_file():
            return c / "bin/java"
    return None


@pytest.fixture(scope="module")
def apicurio() -> Path:
    """The unpacked app (fetched from Maven Central once into compat-tests/.cache)."""
    dest = CACHE_DIR / "apicurio-registry-3.3.3"
    if not (dest / "quarkus-run.jar").is_file():
        download = CACHE_DIR / "apicurio-download"
        r = subprocess.run(["mvn", "-q", "-B", "dependency:copy", f"-Dartifact={APICURIO}",
                            f"-DoutputDirectory={download}"], capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, f"mvn dependency:copy {APICURIO} failed:\n{r.stdout}\n{r.stderr}"
        part = dest.with_suffix(".part")
        with tarfile.open(next(download.glob("*.tar.gz"))) as tar:
            tar.extractall(part)
        part.rename(dest)
    return dest


class Registry:
    """Apicurio Registry with kafkasql storage on `bootstrap`, its REST API on an ephemeral port."""

    def __init__(self, app: Path, java: Path, bootstrap: str, workdir: Path):
        self.http, self.management = free_port(), free_port()
        self.log = workdir / "apicurio.log"
        cmd = [str(java), "-Xmx512m", "-Dapicurio.storage.kind=kafkasql",
               f"-Dapicurio.kafkasql.bootstrap.servers={bootstrap}",
               "-Dquarkus.http.host=127.0.0.1", f"-Dquarkus.http.port={self.http}",
               "-Dquarkus.management.host=127.0.0.1", f"-Dquarkus.management.port={self.management}",
               f"-Dapicurio.storage.snapshot.location={workdir}", "-jar", str(app / "quarkus-run.jar")]
        with open(self.log, "ab") as f:
            self.proc = _spawn(cmd, cwd=workdir, stdin=subprocess.DEVNULL, stdout=f, stderr=f)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http}/apis/ccompat/v7"

    def wait_ready(self, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"the registry exited:\n{self.log.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.management}/health/ready", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(1)
        raise AssertionError(f"the registry was not ready within {timeout} s:\n{self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        _reap(self.proc, 9, 30)


def produce_users(bootstrap: str, registry: str, count: int) -> None:
    serialize = AvroSerializer(SchemaRegistryClient({"url": registry}), USER_V1)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    errors = []
    for i in range(count):
        value = serialize({"name": f"user-{i}"}, SerializationContext("users", MessageField.VALUE))
        producer.produce("users", value=value, partition=0,
                         on_delivery=lambda err, _m: errors.append(err) if err else None)
    assert producer.flush(60) == 0 and not errors, errors


def read_users(bootstrap: str, registry: str, count: int) -> list[dict]:
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry}))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "users-check", "auto.offset.reset": "earliest"})
    consumer.subscribe(["users"])
    users, deadline = [], time.monotonic() + 60
    try:
        while len(users) < count and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is None or msg.error():
                continue
            users.append(deserialize(msg.value(), SerializationContext("users", MessageField.VALUE)))
    finally:
        consumer.close()
    return users


def test_apicurio_registry_keeps_its_schemas_in_the_broker(broker, apicurio, tmp_path):
    java = java21()
    if java is None:
        pytest.skip("Apicurio Registry 3.x needs Java 21 or newer: none in /usr/lib/jvm and JAVA21_HOME unset")
    registry = Registry(apicurio, java, broker.bootstrap, tmp_path)
    try:
        registry.wait_ready()
        for topic in ("kafkasql-journal", "kafkasql-snapshots", "registry-events"):
            config = topic_config(broker.bootstrap, topic)
            assert (config["cleanup.policy"], config["retention.ms"]) == ("delete", "-1"), (topic, config)

        produce_users(broker.bootstrap, registry.url, 100)
        client = SchemaRegistryClient({"url": registry.url})
        assert client.get_subjects() == ["users-value"]
        v1 = client.get_latest_version("users-value")
        v2_id = client.register_schema("users-value", Schema(USER_V2, "AVRO"))
        assert client.get_versions("users-value") == [1, 2]
        assert v2_id != v1.schema_id
        assert client.register_schema("users-value", Schema(USER_V1, "AVRO")) == v1.schema_id

        # Both killed; the broker's data is all the registry has.
        registry.kill()
        broker.kill9()
        broker.start()
        registry = Registry(apicurio, java, broker.bootstrap, tmp_path)
        registry.wait_ready()
        client = SchemaRegistryClient({"url": registry.url})
        assert client.get_subjects() == ["users-value"]
        assert client.get_versions("users-value") == [1, 2]
        assert client.get_version("users-value", 2).schema_id == v2_id
        users = read_users(broker.bootstrap, registry.url, 100)
        assert [u["name"] for u in users] == [f"user-{i}" for i in range(100)]
    finally:
        registry.kill()
