"""SSL listeners next to PLAINTEXT on one broker, with real clients (also run against Kafka 4.1).

The broker has three listeners: PLAINTEXT, SSL (no client certificate asked) and MTLS (an SSL
listener with `listener.name.mtls.ssl.client.auth=required`), PEM keystore and truststore made
here with Python's `cryptography` (a CA, the broker's certificate for 127.0.0.1 / localhost, a
client certificate). librdkafka (confluent-kafka) produces and consumes 20 MB (records of
100 KB) over SSL and over mutual TLS while another producer writes over PLAINTEXT at the same
time; the Java client (ProducerPerformance / ConsumerPerformance from kafka-tools, with
`ssl.truststore.type=PEM`) does the same over SSL; a client without a certificate is refused on
MTLS, one that does not trust the CA is refused on SSL, and the broker serves on.
"""

from __future__ import annotations

import datetime
import ipaddress
import subprocess
from pathlib import Path
import threading
import time
import uuid

import pytest

from conftest import TARGET, free_port, go_build
from kafka_tools import KafkaTools

ck = pytest.importorskip("confluent_kafka")
x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import rsa  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

RECORD = 100 * 1024
COUNT = 200  # 20 MB


def _cert(cn: str, key, issuer_name, issuer_key, ca: bool = False, sans=()):
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
        .issuer_name(issuer_name or x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return b.sign(issuer_key or key, hashes.SHA256())


def _key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _pem_cert(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@pytest.fixture
def pki(tmp_path):
    """Files: ca.pem, broker.pem (key + chain), client.pem / client.key, other-ca.pem."""
    ca_key = _key()
    ca = _cert("ketch compat CA", ca_key, None, None, ca=True)
    broker_key = _key()
    broker = _cert("broker", broker_key, ca.subject, ca_key,
                   sans=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    client_key = _key()
    client = _cert("client-1", client_key, ca.subject, ca_key)
    other_key = _key()
    other = _cert("another CA", other_key, None, None, ca=True)
    files = {
        "ca": _pem_cert(ca),
        "broker": _pem_key(broker_key) + _pem_cert(broker) + _pem_cert(ca),
        "client": _pem_cert(client),
        "client_key": _pem_key(client_key),
        "other_ca": _pem_cert(other),
    }
    paths = {}
    for name, data in files.items():
        p = tmp_path / f"{name}.pem"
        p.write_bytes(data)
        paths[name] = str(p)
    return paths


def _produce(conf: dict, topic: str, count: int, tag: bytes) -> None:
    p = ck.Producer({**conf, "linger.ms": 5, "message.max.bytes": 1_000_000, "acks": "all"})
    errors = []
    payload = tag * (RECORD // len(tag))

    def report(err, _msg):
        if err is not None:
            errors.append(err)

    for i in range(count):
        while True:
            try:
                p.produce(topic, key=str(i).encode(), value=payload, on_delivery=report)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    assert p.flush(60) == 0, "undelivered records"
    assert not errors, errors[:3]


def _consume(conf: dict, topic: str, count: int, tag: bytes) -> None:
    c = ck.Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    c.subscribe([topic])
    seen = set()
    deadline = time.monotonic() + 90
    try:
        while len(seen) < count and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            assert m.error() is None, m.error()
            assert len(m.value()) == RECORD - RECORD % len(tag) and m.value().startswith(tag)
            seen.add(int(m.key()))
    finally:
        c.close()
    assert seen == set(range(count)), f"consumed {len(seen)} of {count}"


def _refused(conf: dict) -> bool:
    """True when a client with `conf` cannot even list topics (handshake refused)."""
    from confluent_kafka.admin import AdminClient

    a = AdminClient({**conf, "socket.timeout.ms": 5000})
    try:
        a.list_topics(timeout=5)
        return False
    except ck.KafkaException:
        return True


def test_ssl_and_mtls_next_to_plaintext(start_broker, kafka_libs, pki, tmp_path):
    ssl_port, mtls_port = free_port(), free_port()
    while mtls_port == ssl_port:
        mtls_port = free_port()
    broker = start_broker(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": pki["broker"],
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": pki["ca"],
            "listener.name.mtls.ssl.client.auth": "required",
            "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
            "message.max.bytes": "2000000",
        },
        extra_listeners={"SSL": ("SSL", ssl_port), "MTLS": ("SSL", mtls_port)},
    )
    plain = {"bootstrap.servers": broker.bootstrap}
    ssl = {"bootstrap.servers": f"127.0.0.1:{ssl_port}", "security.protocol": "SSL", "ssl.ca.location": pki["ca"]}
    mtls = {**ssl, "bootstrap.servers": f"127.0.0.1:{mtls_port}", "ssl.certificate.location": pki["client"],
            "ssl.key.location": pki["client_key"]}

    # librdkafka over SSL and mutual TLS while PLAINTEXT carries its own traffic.
    background = threading.Thread(target=_produce, args=(plain, "plain", COUNT, b"p"))
    background.start()
    _produce(ssl, "over-ssl", COUNT, b"s")
    _produce(mtls, "over-mtls", COUNT // 4, b"m")
    background.join(120)
    assert not background.is_alive()
    _consume(ssl, "over-ssl", COUNT, b"s")
    _consume(mtls, "over-mtls", COUNT // 4, b"m")
    _consume(plain, "plain", COUNT, b"p")
    _consume(ssl, "plain", COUNT, b"p")  # what PLAINTEXT wrote, read over SSL

    # Refusals: no certificate on MTLS, a CA the broker's certificate does not chain to, a
    # plaintext client on the SSL port. The broker serves on.
    assert _refused({**ssl, "bootstrap.servers": f"127.0.0.1:{mtls_port}"})
    assert _refused({**ssl, "ssl.ca.location": pki["other_ca"]})
    assert _refused({"bootstrap.servers": f"127.0.0.1:{ssl_port}"})
    assert broker.is_running()

    # franz-go over mutual TLS (its client certificate), and refused on MTLS without one.
    franz = [str(go_build("roundtrip")), "-brokers", f"127.0.0.1:{mtls_port}", "-tls-ca", pki["ca"],
             "-codecs", "none,zstd", "-records", "50", "-timeout", "40s"]
    r = subprocess.run(franz + ["-tls-cert", pki["client"], "-tls-key", pki["client_key"]], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    r = subprocess.run(franz[:-2] + ["10s"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, r.stdout[-2000:]

    # The Java client over SSL with a PEM truststore: 20 MB in, 20 MB out.
    props = tmp_path / "java-ssl.properties"
    props.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={pki['ca']}\n")
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    ssl_bootstrap = f"127.0.0.1:{ssl_port}"
    r = kt.run("org.apache.kafka.tools.ProducerPerformance", "--topic", "java-ssl", "--num-records", COUNT,
               "--record-size", RECORD, "--throughput", "-1", "--producer.config", props, "--producer-props",
               f"bootstrap.servers={ssl_bootstrap}", "acks=all", "max.request.size=2000000", timeout=180)
    assert f"{COUNT} records sent" in r.out, r.out
    r = kt.run("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", ssl_bootstrap, "--topic",
               "java-ssl", "--messages", COUNT, "--consumer.config", props, "--timeout", "60000", timeout=180)
    # The data line: start, end, MB, MB/s, messages, ...
    data = [line for line in r.stdout.splitlines() if line[:1].isdigit()]
    assert data and int(data[-1].split(",")[4].strip()) >= COUNT, r.out
    # What Java wrote over SSL, read by librdkafka over PLAINTEXT.
    c = ck.Consumer({**plain, "group.id": "java-check", "auto.offset.reset": "earliest"})
    c.subscribe(["java-ssl"])
    got, deadline = 0, time.monotonic() + 60
    while got < COUNT and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            assert len(m.value()) == RECORD
            got += 1
    c.close()
    assert got == COUNT

    # The Java client over mutual TLS (a PEM keystore: its key and certificate in one file), and
    # refused there without one.
    keystore = tmp_path / "java-client.pem"
    keystore.write_text(Path(pki["client_key"]).read_text() + Path(pki["client"]).read_text())
    mtls_props = tmp_path / "java-mtls.properties"
    mtls_props.write_text(props.read_text() + f"ssl.keystore.type=PEM\nssl.keystore.location={keystore}\n")
    mtls_bootstrap = f"127.0.0.1:{mtls_port}"
    r = kt.run("org.apache.kafka.tools.ProducerPerformance", "--topic", "java-mtls", "--num-records", 100,
               "--record-size", 1000, "--throughput", "-1", "--producer.config", mtls_props, "--producer-props",
               f"bootstrap.servers={mtls_bootstrap}", "acks=all", timeout=120)
    assert "100 records sent" in r.out, r.out
    r = kt.run("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", mtls_bootstrap, "--topic",
               "java-mtls", "--messages", 100, "--consumer.config", mtls_props, "--timeout", "30000", timeout=120)
    data = [line for line in r.stdout.splitlines() if line[:1].isdigit()]
    assert data and int(data[-1].split(",")[4].strip()) >= 100, r.out
    r = kt.run("org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", mtls_bootstrap, "--topic",
               "java-mtls", "--messages", 100, "--consumer.config", props, "--timeout", "10000", timeout=120,
               check=False)
    assert "SslAuthenticationException" in r.out or r.returncode != 0, r.out


def _stores(pki, tmp_path) -> dict:
    """The PEM pki as PKCS12 (openssl) and JKS (keytool) keystores and truststores: keystore
    password `store-secret`, the JKS key's own `key-secret`, truststores `trust-secret`."""
    import subprocess

    def run(*cmd):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"{cmd}: {r.stdout}{r.stderr}"

    out = {k: str(tmp_path / k) for k in ("broker.p12", "broker.jks", "trust.p12", "trust.jks")}
    run("openssl", "pkcs12", "-export", "-in", pki["broker"], "-inkey", pki["broker"], "-name", "broker",
        "-out", out["broker.p12"], "-passout", "pass:store-secret")
    run("keytool", "-importkeystore", "-noprompt", "-srckeystore", out["broker.p12"], "-srcstoretype", "PKCS12",
        "-srcstorepass", "store-secret", "-srcalias", "broker", "-destkeystore", out["broker.jks"],
        "-deststoretype", "JKS", "-deststorepass", "store-secret", "-destkeypass", "key-secret")
    for kind in ("p12", "jks"):
        run("keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", pki["ca"], "-keystore",
            out[f"trust.{kind}"], "-storetype", "PKCS12" if kind == "p12" else "JKS", "-storepass", "trust-secret")
    # PEM with the key encrypted (PKCS#8 PBES2, AES-256), then the chain: ssl.key.password.
    key = tmp_path / "broker-key-encrypted.pem"
    run("openssl", "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", pki["broker"], "-out", str(key),
        "-passout", "pass:key-secret")
    chain = open(pki["broker"]).read()
    chain = chain[chain.index("-----BEGIN CERTIFICATE-----"):]
    out["broker.pem"] = str(tmp_path / "broker-encrypted.pem")
    open(out["broker.pem"], "w").write(key.read_text() + chain)
    out["trust.pem"] = pki["ca"]
    # EC keys as Java writes them (PKCS#8 without the public key): keytool's own key pairs,
    # P-256 in a PKCS12 keystore and P-384 in a JKS one, self-signed (clients trust the cert).
    for ext, curve, storetype, key_pass in (("p12", "secp256r1", "PKCS12", "store-secret"),
                                            ("jks", "secp384r1", "JKS", "key-secret")):
        store = out[f"broker-ec.{ext}"] = str(tmp_path / f"broker-ec.{ext}")
        run("keytool", "-genkeypair", "-keyalg", "EC", "-groupname", curve, "-alias", "broker", "-dname",
            "CN=broker", "-ext", "SAN=ip:127.0.0.1,dns:localhost", "-validity", "30", "-keystore", store,
            "-storetype", storetype, "-storepass", "store-secret", "-keypass", key_pass)
        out[f"broker-ec.{ext}.cert"] = str(tmp_path / f"broker-ec-{ext}.pem")
        run("keytool", "-exportcert", "-rfc", "-alias", "broker", "-keystore", store, "-storepass", "store-secret",
            "-file", out[f"broker-ec.{ext}.cert"])
    return out


@pytest.mark.parametrize("kind", ["PKCS12", "JKS", "PEM", "PKCS12-EC", "JKS-EC"])
def test_pkcs12_and_jks_keystores_and_truststores(start_broker, pki, tmp_path, kind):
    """Kafka's usual stores: a keystore and a truststore of `kind` on an mTLS listener
    (ssl.client.auth=required), with their passwords (and the JKS key's own ssl.key.password;
    PEM: an encrypted key, ssl.key.password; -EC: keytool's own EC key pair)."""
    if kind == "PEM" and TARGET == "kafka":
        pytest.skip("Kafka on Java 17 cannot read a PBES2-encrypted PEM key (PBES2 SecretKeyFactory not available)")
    stores = _stores(pki, tmp_path)
    kind, ec = kind.removesuffix("-EC"), kind.endswith("-EC")
    ext = {"PKCS12": "p12", "JKS": "jks", "PEM": "pem"}[kind]
    keystore = stores[f"broker-ec.{ext}" if ec else f"broker.{ext}"]
    port = free_port()
    broker = start_broker(
        {
            "ssl.keystore.type": kind,
            "ssl.keystore.location": keystore,
            **({"ssl.keystore.password": "store-secret"} if kind != "PEM" else {}),
            **({"ssl.key.password": "key-secret"} if kind in ("JKS", "PEM") else {}),
            "ssl.truststore.type": kind,
            "ssl.truststore.location": stores[f"trust.{ext}"],
            **({"ssl.truststore.password": "trust-secret"} if kind != "PEM" else {}),
            "ssl.client.auth": "required",
        },
        extra_listeners={"SSL": ("SSL", port)},
    )
    server_ca = stores[f"broker-ec.{ext}.cert"] if ec else pki["ca"]
    mtls = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL", "ssl.ca.location": server_ca,
            "ssl.certificate.location": pki["client"], "ssl.key.location": pki["client_key"]}
    topic = f"stores-{ext}{'-ec' if ec else ''}"
    _produce(mtls, topic, 20, b"k")
    _consume(mtls, topic, 20, b"k")
    # No client certificate, or a CA the broker's certificate does not chain to: refused.
    no_cert = {k: v for k, v in mtls.items() if k not in ("ssl.certificate.location", "ssl.key.location")}
    assert _refused(no_cert)
    assert _refused({**mtls, "ssl.ca.location": pki["other_ca"]})
    assert broker.is_running()


def test_ssl_principal_mapping_rules_name_the_acl_principal(start_broker, kafka_libs, pki, tmp_path):
    """ssl.principal.mapping.rules: the client certificate CN=client-1 becomes User:SVC-1 (what
    the ACLs name); a certificate no rule applies to is refused, as Kafka refuses it."""
    # A second client, CN=intruder, from the same CA (the pki fixture keeps the CA key in memory
    # only, so this test makes its own CA and clients).
    ca_key = _key()
    ca = _cert("mapping CA", ca_key, None, None, ca=True)
    files = {"ca": _pem_cert(ca)}
    for cn in ("client-1", "intruder"):
        key = _key()
        files[cn] = _pem_cert(_cert(cn, key, ca.subject, ca_key))
        files[f"{cn}-key"] = _pem_key(key)
    paths = {}
    for name, data in files.items():
        paths[name] = tmp_path / f"mapping-{name}.pem"
        paths[name].write_bytes(data)
    port = free_port()
    broker = start_broker(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": pki["broker"],
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(paths["ca"]),
            "ssl.client.auth": "required",
            "ssl.principal.mapping.rules": "RULE:^CN=client-([0-9]+)$/svc-$1/U",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
        },
        extra_listeners={"SSL": ("SSL", port)},
    )
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    kt.run("org.apache.kafka.tools.AclCommand", "--bootstrap-server", broker.bootstrap, "--add",
           "--allow-principal", "User:SVC-1", "--operation", "All", "--topic", "mapped")
    conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL", "ssl.ca.location": pki["ca"]}
    client = {**conf, "ssl.certificate.location": str(paths["client-1"]),
              "ssl.key.location": str(paths["client-1-key"])}
    deadline = time.monotonic() + 20
    while True:
        p = ck.Producer({**client, "message.timeout.ms": 8000})
        results = []
        p.produce("mapped", b"x", on_delivery=lambda err, _m: results.append(err))
        p.flush(12)
        if results == [None] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert results == [None], results
    intruder = {**conf, "ssl.certificate.location": str(paths["intruder"]),
                "ssl.key.location": str(paths["intruder-key"])}
    assert _refused(intruder)
    assert broker.is_running()


def test_keystore_rotation_by_kafka_configs(start_broker, kafka_libs, pki, tmp_path):
    """Kafka's certificate rotation: `kafka-configs --alter` of the SSL listener's
    `listener.name.ssl.ssl.keystore.location` to a new keystore (new key, same subject and names,
    from another CA the clients also trust); the listener's next connections get the new
    certificate, and clients go on."""
    import ssl as pyssl

    port = free_port()
    broker = start_broker(
        {"ssl.keystore.type": "PEM", "ssl.keystore.location": pki["broker"]},
        extra_listeners={"SSL": ("SSL", port)},
    )
    new_ca_key = _key()
    new_ca = _cert("rotation CA", new_ca_key, None, None, ca=True)
    new_key = _key()
    new_cert = _cert("broker", new_key, new_ca.subject, new_ca_key,
                     sans=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    rotated = tmp_path / "broker-rotated.pem"
    rotated.write_bytes(_pem_key(new_key) + _pem_cert(new_cert) + _pem_cert(new_ca))
    both_cas = tmp_path / "both-cas.pem"
    both_cas.write_bytes(open(pki["ca"], "rb").read() + _pem_cert(new_ca))

    def served() -> bytes:
        return pyssl.DER_cert_to_PEM_cert(pyssl.PEM_cert_to_DER_cert(
            pyssl.get_server_certificate(("127.0.0.1", port)))).encode()

    first = x509.load_pem_x509_certificate(served())
    assert first.issuer.rfc4514_string() == "CN=ketch compat CA", first.issuer
    conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL", "ssl.ca.location": str(both_cas)}
    _produce(conf, "rotation", 10, b"r")

    kt = KafkaTools(kafka_libs, broker, tmp_path)

    def alter(location, check=True):
        return kt.run("kafka.admin.ConfigCommand", "--bootstrap-server", broker.bootstrap, "--entity-type",
                      "brokers", "--entity-name", "1", "--alter", "--add-config",
                      f"listener.name.ssl.ssl.keystore.location={location}", check=check)

    # Refused as Kafka's SslFactory refuses them (INVALID_REQUEST, the old keystore stays): a
    # keystore that does not load, and one whose certificate names another subject.
    impostor = tmp_path / "impostor.pem"
    impostor_cert = _cert("impostor", new_key, new_ca.subject, new_ca_key, sans=[x509.DNSName("localhost")])
    impostor.write_bytes(_pem_key(new_key) + _pem_cert(impostor_cert) + _pem_cert(new_ca))
    for location, why in [(tmp_path / "missing.pem", "Validation of dynamic config update of SSLFactory failed"),
                          (impostor, "Keystore DistinguishedName does not match")]:
        r = alter(location, check=False)
        assert r.returncode != 0 and "InvalidRequestException" in r.out and why in r.out, r.out
        assert x509.load_pem_x509_certificate(served()).issuer.rfc4514_string() == "CN=ketch compat CA"
    r = alter(rotated)
    assert "Completed updating config for broker 1." in r.out, r.out
    deadline = time.monotonic() + 20
    while x509.load_pem_x509_certificate(served()).issuer.rfc4514_string() != "CN=rotation CA":
        assert time.monotonic() < deadline, "the listener still serves the old certificate"
        time.sleep(0.5)
    _produce(conf, "rotation-after", 10, b"r")
    _consume(conf, "rotation", 10, b"r")
    _consume(conf, "rotation-after", 10, b"r")
