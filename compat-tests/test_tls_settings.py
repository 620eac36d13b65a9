"""TLS and SASL listener settings as Kafka names them, seen by real clients (also run against Kafka
4.1):

- `ssl.enabled.protocols` and `ssl.cipher.suites` (IANA names, as Java writes them; rustls spells
  the TLS 1.3 suites differently, and a Kafka file listing them once stopped Ketch's start): a
  TLSv1.2-only listener with one ECDHE suite, a TLSv1.3-only listener with ChaCha20-Poly1305;
  Python's `ssl` (OpenSSL) negotiates exactly those and is refused outside them; librdkafka
  lists topics over both.
- An inline PEM keystore (`ssl.keystore.key` and `ssl.keystore.certificate.chain` in the
  properties, one line each): librdkafka produces and consumes over it.
- `connection.failed.authentication.delay.ms`: a wrong PLAIN password's SASL_AUTHENTICATION_FAILED
  answer comes after the delay (1.5 s here), a right one's at once.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time

import pytest

from conftest import free_port
from test_tls import pki  # noqa: F401 (CA, the broker's certificate for 127.0.0.1 and localhost)

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient  # noqa: E402

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def handshake(port: int, ca: str, minimum=None, maximum=None):
    """(TLS version, cipher) a Python client negotiates with the listener, None when refused."""
    ctx = ssl.create_default_context(cafile=ca)
    if minimum is not None:
        ctx.minimum_version = minimum
    if maximum is not None:
        ctx.maximum_version = maximum
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        try:
            with ctx.wrap_socket(s, server_hostname="localhost") as t:
                return t.version(), t.cipher()[0]
        except (ssl.SSLError, OSError):
            return None


def lists_topics(conf: dict) -> bool:
    try:
        AdminClient({**conf, "socket.timeout.ms": 5000}).list_topics(timeout=10)
        return True
    except ck.KafkaException:
        return False


def test_enabled_protocols_and_cipher_suites_by_iana_name(start_broker, pki):  # noqa: F811
    tls12, tls13 = free_port(), free_port()  # (never the same port twice)
    start_broker({
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki["broker"],
        "listener.name.tls12.ssl.enabled.protocols": "TLSv1.2",
        "listener.name.tls12.ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "listener.name.tls13.ssl.enabled.protocols": "TLSv1.3",
        "listener.name.tls13.ssl.cipher.suites": "TLS_CHACHA20_POLY1305_SHA256",
    }, extra_listeners={"TLS12": ("SSL", tls12), "TLS13": ("SSL", tls13)})
    assert handshake(tls12, pki["ca"]) == ("TLSv1.2", "ECDHE-RSA-AES256-GCM-SHA384")
    assert handshake(tls12, pki["ca"], minimum=ssl.TLSVersion.TLSv1_3) is None
    assert handshake(tls13, pki["ca"]) == ("TLSv1.3", "TLS_CHACHA20_POLY1305_SHA256")
    assert handshake(tls13, pki["ca"], maximum=ssl.TLSVersion.TLSv1_2) is None
    for port in (tls12, tls13):
        conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL", "ssl.ca.location": pki["ca"]}
        assert lists_topics(conf), port


def test_inline_pem_keystore(start_broker, pki):  # noqa: F811
    port = free_port()
    text = open(pki["broker"]).read()
    key = text[:text.index("-----END PRIVATE KEY-----") + len("-----END PRIVATE KEY-----")]
    # The leaf alone: Kafka's PEM pattern (greedy within a line) merges several certificates on
    # one line.
    end = "-----END CERTIFICATE-----"
    chain = text[len(key):text.index(end) + len(end)]
    start_broker({
        "ssl.keystore.type": "PEM",
        # One line each, as KIP-651 writes them in a properties file (" \\" continuations).
        "listener.name.ssl.ssl.keystore.key": key.replace("\n", " "),
        "listener.name.ssl.ssl.keystore.certificate.chain": chain.replace("\n", " "),
    }, extra_listeners={"SSL": ("SSL", port)})
    conf = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL", "ssl.ca.location": pki["ca"]}
    p = ck.Producer({**conf, "acks": "all"})
    for i in range(10):
        p.produce("inline-pem", value=b"r%d" % i)
    assert p.flush(30) == 0
    c = ck.Consumer({**conf, "group.id": "inline-pem", "auto.offset.reset": "earliest"})
    c.subscribe(["inline-pem"])
    seen = []
    deadline = time.monotonic() + 30
    while len(seen) < 10 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            seen.append(m.value())
    c.close()
    assert seen == [b"r%d" % i for i in range(10)]


def raw_request(sock: socket.socket, api_key: int, version: int, body: bytes, flexible: bool) -> bytes:
    """One request (header v1, or v2 when `flexible`) and its response body after the length."""
    client = b"delay-probe"
    header = struct.pack(">hhih", api_key, version, 7, len(client)) + client + (b"\x00" if flexible else b"")
    frame = header + body
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    size = sock.recv(4, socket.MSG_WAITALL)
    if len(size) < 4:
        return b""
    return sock.recv(struct.unpack(">i", size)[0], socket.MSG_WAITALL)


def _authenticate(port: int, password: str) -> tuple[int, float]:
    """(SaslAuthenticate error code, seconds its answer took) of a PLAIN login as alice."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        mechanism = b"PLAIN"
        answer = raw_request(s, 17, 1, struct.pack(">h", len(mechanism)) + mechanism, flexible=False)
        assert answer[4:6] == b"\x00\x00", answer  # SaslHandshake: no error
        token = b"\x00alice\x00" + password.encode()
        assert len(token) + 1 < 128
        body = bytes([len(token) + 1]) + token + b"\x00"  # compact bytes, no tagged fields
        started = time.monotonic()
        answer = raw_request(s, 36, 2, body, flexible=True)
        took = time.monotonic() - started
        # response header v1: correlation id, tagged fields; then error_code
        return struct.unpack(">h", answer[5:7])[0], took


def test_failed_authentication_delay(start_broker):
    port = free_port()
    start_broker({
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": f'{PLAIN_MODULE} required user_alice="alice-secret";',
        "connection.failed.authentication.delay.ms": "1500",
    }, extra_listeners={"SASL_PLAINTEXT": ("SASL_PLAINTEXT", port)})
    code, right = _authenticate(port, "alice-secret")
    assert code == 0 and right < 1.0, (code, right)
    code, wrong = _authenticate(port, "wrong")
    assert code == 58 and wrong >= 1.4, (code, wrong)
    print(f"right password answered in {right * 1000:.0f} ms; a wrong one after {wrong * 1000:.0f} ms")
