"""The brokers scripts/bench measures: Broker (a process with a work and data directory and a
loopback port), Ketch (its binary with overrides) and Kafka (a KRaft single node from the Maven
jars: server.properties, a formatted data directory, JVM command), each with start and stop.
A broker given `security` (Security: a PEM keystore) also has a SASL_SSL listener with
SCRAM-SHA-512, under the same Kafka property names for both systems (security_props).
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

from .config import JAVA, KAFKA_BROKER_JVM
from .proc import RunFailed, free_port, reap, run, spawn


class Security:
    """The SASL_SSL listener's material: a CA (what clients trust) and the broker's PEM keystore
    (PKCS#8 key + certificate for 127.0.0.1, signed by the CA), made with openssl; the SCRAM
    user the clients log in as (created by the benchmark through AlterUserScramCredentials)."""

    USER, PASSWORD, MECHANISM = "bench", "bench-secret", "SCRAM-SHA-512"

    def __init__(self, root: Path):
        root.mkdir(parents=True, exist_ok=True)
        self.ca, self.keystore = root / "ca.pem", root / "broker.pem"
        ca_key, key, csr, cert, ext = (root / n for n in ("ca.key", "broker.key", "broker.csr", "broker.crt", "ext.cnf"))
        ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        ossl = lambda *a: run(["openssl", *map(str, a)], 60, "openssl " + str(a[0]))
        ossl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", ca_key)
        ossl("req", "-x509", "-new", "-key", ca_key, "-subj", "/CN=ketch bench CA", "-days", "30", "-out", self.ca)
        ossl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", key)
        ossl("req", "-new", "-key", key, "-subj", "/CN=broker", "-out", csr)
        ossl("x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", ca_key, "-CAcreateserial", "-days", "30",
             "-extfile", ext, "-out", cert)
        self.keystore.write_bytes(key.read_bytes() + cert.read_bytes() + self.ca.read_bytes())

    def client_flags(self) -> list[str]:
        return ["-tls-ca", str(self.ca), "-sasl-mechanism", self.MECHANISM, "-sasl-user", self.USER,
                "-sasl-password", self.PASSWORD]


def security_props(sec: Security) -> dict[str, str]:
    """The SASL_SSL listener's settings (besides `listeners`), Kafka's names, for both systems."""
    return {
        "sasl.enabled.mechanisms": Security.MECHANISM,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
        "listener.name.sasl_ssl.ssl.keystore.location": str(sec.keystore),
    }


class Broker:
    def __init__(self, system: str, workdir: Path, security: Security | None = None):
        self.system = system
        self.security = security
        self.sasl_port: int | None = None
        self.workdir = workdir
        self.data = workdir / "data"
        self.log_path = workdir / "broker.log"
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        workdir.mkdir(parents=True, exist_ok=True)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 60) -> float:
        t = time.monotonic()
        if self.proc is not None:
            reap(self.proc, signal.SIGTERM, timeout)
        return time.monotonic() - t


class Ketch(Broker):
    def __init__(self, system, workdir, binary: Path, security: Security | None = None):
        super().__init__(system, workdir, security)
        self.binary = binary
        self.data.mkdir(parents=True, exist_ok=True)

    def command(self, port: int) -> list[str]:
        listeners = f"PLAINTEXT://127.0.0.1:{port}"
        extra = {}
        if self.security is not None:
            listeners += f",SASL_SSL://127.0.0.1:{self.sasl_port}"
            extra = security_props(self.security)
        cmd = [str(self.binary), "--override", f"listeners={listeners}", "--override", f"log.dirs={self.data}"]
        for k, v in extra.items():
            cmd += ["--override", f"{k}={v}"]
        if self.system == "ketch-nofsync":
            cmd += ["--override", "ketch.acks.all.fsync=false"]
        return cmd

    def start(self, timeout: float = 60) -> "Ketch":
        self.port = free_port()
        self.sasl_port = free_port()
        logf = open(self.log_path, "ab")
        env = dict(os.environ, NO_COLOR="1")
        self.proc = spawn(self.command(self.port), stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, env=env)
        logf.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RunFailed(f"ketch exited with {self.proc.returncode}; log: {self.log_path}")
            if b"listening on" in self.log_path.read_bytes()[-100000:]:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    return self
                except OSError:
                    pass
            time.sleep(0.02)
        reap(self.proc, signal.SIGKILL)
        raise RunFailed(f"ketch not ready within {timeout}s; log: {self.log_path}")


class Kafka(Broker):
    template: Path | None = None

    def __init__(self, system, workdir, libs: Path, security: Security | None = None):
        super().__init__(system, workdir, security)
        self.libs = libs
        self.props = workdir / "server.properties"

    @classmethod
    def format_template(cls, libs: Path, root: Path) -> Path:
        """A KRaft data dir formatted once (meta.properties + bootstrap checkpoint), copied per broker."""
        if cls.template is not None:
            return cls.template
        d = root / "kafka-format"
        (d / "data").mkdir(parents=True)
        ctl = free_port()
        props = d / "server.properties"
        props.write_text(
            "process.roles=broker,controller\nnode.id=1\n"
            f"controller.quorum.voters=1@127.0.0.1:{ctl}\n"
            f"listeners=PLAINTEXT://127.0.0.1:{free_port()},CONTROLLER://127.0.0.1:{ctl}\n"
            f"controller.listener.names=CONTROLLER\nlog.dirs={d / 'data'}\n")
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        while cid.startswith("-"):
            cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        run([JAVA, f"-Dlog4j2.configurationFile={libs / 'log4j2.properties'}", "-cp", f"{libs}/*",
             "kafka.tools.StorageTool", "format", "-t", cid, "-c", props], 180, "kafka StorageTool format")
        cls.template = d / "data"
        return cls.template

    def prepare(self) -> None:
        """Fresh ports, server.properties, formatted data dir (if empty)."""
        self.port = free_port()
        ctl = free_port()
        while ctl == self.port:
            ctl = free_port()
        props = {
            # what a single KRaft node needs; everything else is Kafka's default
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{ctl}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{ctl}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data),
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            # Not a performance setting: how often Kafka's background task removes the files of
            # deleted topics (default 60 s, whatever a topic's file.delete.delay.ms says). With the
            # default, the 600 MB of a run's topic were freed 60 s later, in the middle of some other
            # system's run, and the discards stalled it (the benchmark waits for the removal
            # after every deletion instead, see Bench._delete_topic).
            "log.segment.delete.delay.ms": "1000",
        }
        if self.security is not None:
            self.sasl_port = free_port()
            props["listeners"] += f",SASL_SSL://127.0.0.1:{self.sasl_port}"
            props["advertised.listeners"] += f",SASL_SSL://127.0.0.1:{self.sasl_port}"
            props["listener.security.protocol.map"] += ",SASL_SSL:SASL_SSL"
            props["inter.broker.listener.name"] = "PLAINTEXT"
            props.update(security_props(self.security))
        if self.system == "kafka-fsync":
            # Ketch's durability: every append fsynced before it is acknowledged.
            props["log.flush.interval.messages"] = "1"
        self.props.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        if not self.data.exists() or not any(self.data.iterdir()):
            shutil.copytree(Kafka.template, self.data, dirs_exist_ok=True)

    def command(self) -> list[str]:
        return [JAVA, *KAFKA_BROKER_JVM, f"-Dlog4j2.configurationFile={self.libs / 'log4j2.properties'}",
                "-cp", f"{self.libs}/*", "kafka.Kafka", str(self.props)]

    def start(self, timeout: float = 180) -> "Kafka":
        self.prepare()
        start_off = self.log_path.stat().st_size if self.log_path.exists() else 0
        logf = open(self.log_path, "ab")
        self.proc = spawn(self.command(), stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, cwd=self.workdir)
        logf.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RunFailed(f"kafka exited with {self.proc.returncode}; log: {self.log_path}")
            with open(self.log_path, "rb") as f:
                f.seek(start_off)
                if b"Kafka Server started" in f.read():
                    try:
                        socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                        return self
                    except OSError:
                        pass
            time.sleep(0.1)
        reap(self.proc, signal.SIGKILL)
        raise RunFailed(f"kafka not ready within {timeout}s; log: {self.log_path}")
