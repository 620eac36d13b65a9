"""SASL/OAUTHBEARER with real clients (also run against Kafka 4.1: KETCH_COMPAT_TARGET=kafka).

The broker has a SASL_PLAINTEXT listener with Kafka's default validator for unsecured tokens
(alg "none", for development; `unsecuredValidatorRequiredScope="kafka"` in its JAAS line) and a
SASL_SSL listener with `OAuthBearerValidatorCallbackHandler`: signed JWTs checked against a JWKS
file (`sasl.oauthbearer.jwks.endpoint.url=file:...`) with an expected audience and issuer. The
identity provider is this test: an RSA key (Python's cryptography) signs RS256 tokens.

Checked, each with the Java client (kafka-clients 4.1), librdkafka (confluent-kafka) and franz-go
where the client can do it: unsecured and signed tokens produce and consume; tokens signed by
another key, for another audience, expired, or lacking the required scope are refused with
Kafka's JSON status as the authentication error; the principal ACLs see is `User:<sub>`; a token's
expiry is the session lifetime (KIP-368), so librdkafka re-authenticates on its connections; a
rotated JWKS file is read again (Kafka 4.1 does too). The JWKS also comes from an https endpoint
(this test's server, trusted through the JAAS line's `ssl.truststore.*` options): fetched at the
start, and again when a token names a key id the broker does not know.
"""

from __future__ import annotations

import base64
import http.server
import json
import logging
import ssl
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import free_port, go_build
from kafka_tools import KafkaTools

ck = pytest.importorskip("confluent_kafka")
pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import padding, rsa  # noqa: E402
from test_sasl import java_clients, pki, rdkafka_auth_error, rdkafka_round_trip  # noqa: E402,F401

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
ACLS = "org.apache.kafka.tools.AclCommand"
ISSUER = "https://idp.ketch.test"
ALLOWED_URLS = "org.apache.kafka.sasl.oauthbearer.allowed.urls"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Idp:
    """The test's identity provider: RSA keys published in a JWKS file, tokens signed RS256."""

    def __init__(self, tmp_path: Path):
        self.dir = tmp_path
        self.jwks = tmp_path / "jwks.json"
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "k1"
        self.publish([(self.kid, self.key)])

    def publish(self, keys) -> None:
        out = []
        for kid, key in keys:
            n = key.public_key().public_numbers()
            out.append({"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
                        "n": b64url(n.n.to_bytes((n.n.bit_length() + 7) // 8, "big")),
                        "e": b64url(n.e.to_bytes(3, "big"))})
        tmp = self.jwks.with_suffix(".tmp")
        tmp.write_text(json.dumps({"keys": out}))
        tmp.replace(self.jwks)

    def token(self, sub: str, lifetime_s: float = 3600, aud: str = "kafka", key=None, kid=None, iat_ago: float = 5):
        now = time.time()
        claims = {"sub": sub, "iss": ISSUER, "aud": aud, "iat": int(now - iat_ago), "exp": int(now + lifetime_s),
                  "scope": "kafka"}
        header = {"alg": "RS256", "typ": "JWT", "kid": kid or self.kid}
        signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
        signature = (key or self.key).sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{b64url(signature)}"

    def token_file(self, name: str, token: str) -> str:
        p = self.dir / f"{name}.jwt"
        p.write_text(token)
        return str(p)


def start(start_broker, pki, idp: Idp, monkeypatch, extra=None, jwks_url=None):
    jwks_url = jwks_url or f"file://{idp.jwks}"
    # Kafka 4.1 reads OAuth URLs only where the JVM allows them.
    monkeypatch.setenv("KETCH_COMPAT_KAFKA_JVM_OPTS", f"-D{ALLOWED_URLS}={jwks_url}")
    conf = {
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki["broker"],
        # (Kafka's broker logs in itself at start-up, with an unsecured token for `admin`.)
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            f'{MODULE} required unsecuredValidatorRequiredScope="kafka" unsecuredLoginStringClaim_sub="admin";',
        "listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": f'{MODULE} required unsecuredLoginStringClaim_sub="admin";',
        "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "sasl.oauthbearer.jwks.endpoint.url": jwks_url,
        # Kafka 4.1's default (DefaultJwtValidator) checks no signature on a broker: it is built
        # without the JWKS key resolver and so validates as a client does. BrokerJwtValidator does.
        "sasl.oauthbearer.jwt.validator.class": "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator",
        "sasl.oauthbearer.expected.audience": "kafka",
        "sasl.oauthbearer.expected.issuer": ISSUER,
        **(extra or {}),
    }
    ports = {"SASL_PLAINTEXT": free_port(), "SASL_SSL": free_port()}
    b = start_broker(conf, extra_listeners={name: (name, port) for name, port in ports.items()})
    return b, ports


def unsecured_conf(ports, principal, scope="kafka", life_s=3600) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{ports['SASL_PLAINTEXT']}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": f"principal={principal} scope={scope} lifeSeconds={life_s}"}


def signed_conf(ports, pki, make_token) -> dict:
    """librdkafka over SASL_SSL; `make_token()` -> (token, expiry in epoch seconds) at each login."""
    return {"bootstrap.servers": f"127.0.0.1:{ports['SASL_SSL']}", "security.protocol": "SASL_SSL",
            "ssl.ca.location": pki["ca"], "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _config: make_token()}


def accepted_within(ports, pki, make_token, timeout_s: float) -> str | None:
    """Logs in with librdkafka over SASL_SSL with `make_token()` every 2 s until the broker
    accepts it (None) or `timeout_s` passes (the last authentication error)."""
    deadline = time.monotonic() + timeout_s
    while True:
        err = rdkafka_auth_error(signed_conf(ports, pki, lambda: (make_token(), time.time() + 3600)))
        if err is None or time.monotonic() > deadline:
            return err
        time.sleep(2)


def franz(ports, pki, token_file) -> subprocess.CompletedProcess:
    return subprocess.run([str(go_build("roundtrip")), "-brokers", f"127.0.0.1:{ports['SASL_SSL']}",
                           "-tls-ca", pki["ca"], "-oauth-token-file", token_file, "-codecs", "none,zstd",
                           "-records", "50", "-timeout", "40s"],
                          capture_output=True, text=True, timeout=120)


def test_oauthbearer_unsecured_and_jwks_tokens_with_real_clients(start_broker, kafka_libs, pki, tmp_path,
                                                                monkeypatch):
    idp = Idp(tmp_path)
    broker, ports = start(start_broker, pki, idp, monkeypatch)
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    # librdkafka: unsecured tokens (made by librdkafka itself) and signed ones (its oauth_cb).
    rdkafka_round_trip(unsecured_conf(ports, "alice"), "oauth-rd-unsecured")
    err = rdkafka_auth_error(unsecured_conf(ports, "alice", scope="other"))
    assert err is not None and "insufficient_scope" in err, err
    rdkafka_round_trip(signed_conf(ports, pki, lambda: (idp.token("svc-rd"), time.time() + 3600)), "oauth-rd-signed")
    for why, token in [("another key", idp.token("svc", key=stranger)),
                       ("another audience", idp.token("svc", aud="web")),
                       ("expired", idp.token("svc", lifetime_s=-120, iat_ago=600))]:
        err = rdkafka_auth_error(signed_conf(ports, pki, lambda t=token: (t, time.time() + 3600)))
        assert err is not None and "invalid_token" in err, f"{why}: {err}"

    # The Java client: unsecured (its own token), a signed token from a file, and refusals.
    good = idp.token_file("good", idp.token("svc-java"))
    forged = idp.token_file("forged", idp.token("svc-java", key=stranger))
    plain_bootstrap, ssl_bootstrap = f"127.0.0.1:{ports['SASL_PLAINTEXT']}", f"127.0.0.1:{ports['SASL_SSL']}"
    cases = [f"SASL_PLAINTEXT,OAUTHBEARER,sub=alice;scope=kafka,,{plain_bootstrap},oauth-java-unsecured,",
             f"SASL_SSL,OAUTHBEARER,file={good},,{ssl_bootstrap},oauth-java-signed,{pki['ca']}"]
    bad = [f"SASL_PLAINTEXT,OAUTHBEARER,sub=alice,,{plain_bootstrap},oauth-java-noscope,",
           f"SASL_SSL,OAUTHBEARER,file={forged},,{ssl_bootstrap},oauth-java-forged,{pki['ca']}"]
    results = java_clients(kafka_libs, *cases, *bad,
                           jvm_opts=[f"-D{ALLOWED_URLS}=file://{good},file://{forged}"])
    for c in cases:
        assert results[c].startswith("OK "), results[c]
    assert results[bad[0]].startswith("AUTH_FAILED ") and "insufficient_scope" in results[bad[0]], results[bad[0]]
    assert results[bad[1]].startswith("AUTH_FAILED ") and "invalid_token" in results[bad[1]], results[bad[1]]

    # franz-go over SASL_SSL: a signed token round-trips (topic admin, every step); an expired one is refused.
    r = franz(ports, pki, good)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    r = franz(ports, pki, idp.token_file("expired", idp.token("svc", lifetime_s=-120, iat_ago=600)))
    assert r.returncode != 0 and ("SASL_AUTHENTICATION_FAILED" in r.stderr or "invalid_token" in r.stderr), r.stderr

    # Key rotation: the JWKS file now holds only a new key; tokens it signs pass, the old key's fail.
    time.sleep(1.2)
    new_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    idp.publish([("k2", new_key)])
    err = accepted_within(ports, pki, lambda: idp.token("svc", key=new_key, kid="k2"), 60)
    assert err is None, f"a token signed by the rotated key: {err}"
    err = rdkafka_auth_error(signed_conf(ports, pki, lambda: (idp.token("svc"), time.time() + 3600)))
    assert err is not None and "invalid_token" in err, err


def test_acls_see_the_token_subject_and_its_expiry_bounds_the_session(start_broker, kafka_libs, pki, tmp_path,
                                                                      monkeypatch):
    idp = Idp(tmp_path)
    broker, ports = start(start_broker, pki, idp, monkeypatch, {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin",
    })
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    kt.run("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", broker.bootstrap, "--create", "--topic", "orders",
           "--partitions", "1", "--replication-factor", "1")

    def produce(principal: str):
        p = ck.Producer({**unsecured_conf(ports, principal), "message.timeout.ms": 8000})
        results = []
        p.produce("orders", b"x", on_delivery=lambda err, _m: results.append(err))
        p.flush(12)
        return results[0] if results else "undelivered"

    err = produce("mallory")
    assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    kt.run(ACLS, "--bootstrap-server", broker.bootstrap, "--add", "--allow-principal", "User:mallory",
           "--operation", "Write", "--topic", "orders")
    deadline = time.monotonic() + 20
    while (err := produce("mallory")) is not None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert err is None, err
    assert produce("eve") is not None

    # A token living 8 s: the broker's session lifetime is its expiry, so librdkafka must
    # re-authenticate its connections (its debug log says so) while producing for ~11 s.
    # (librdkafka writes `exp` in whole seconds and refreshes at 80% of the life: shorter lives
    # let it re-authenticate with a token already expired, against Kafka too.)
    class Capture(logging.Handler):
        lines: list[str] = []

        def emit(self, record):
            Capture.lines.append(record.getMessage())

    logger = logging.getLogger("rdkafka-oauth-reauth")
    logger.addHandler(Capture())
    logger.setLevel(logging.DEBUG)
    errors = []
    p = ck.Producer({**unsecured_conf(ports, "mallory", life_s=8), "acks": "all", "error_cb": errors.append,
                     "debug": "security", "logger": logger})
    delivered = []
    for i in range(55):
        p.produce("orders", value=b"%d" % i, on_delivery=lambda err, _m: delivered.append(err))
        p.poll(0)
        time.sleep(0.2)
    assert p.flush(30) == 0
    assert delivered == [None] * 55, delivered[:3]
    assert not [e for e in errors if e.code() == ck.KafkaError._AUTHENTICATION], errors
    assert any("Auth in state REAUTH" in line for line in Capture.lines), Capture.lines[-20:]


class JwksEndpoint:
    """The identity provider's JWKS over https (its certificate from the test CA), counting GETs."""

    def __init__(self, idp: Idp, pki):
        jwks, self.gets = idp.jwks, []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                body = jwks.read_bytes()
                JwksEndpoint.count(self.server.owner)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.owner = self
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pki["broker"])
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}/jwks.json"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def count(owner) -> None:
        owner.gets.append(time.monotonic())

    def close(self) -> None:
        self.server.shutdown()


def test_jwks_from_an_https_endpoint(start_broker, pki, tmp_path, monkeypatch):
    idp = Idp(tmp_path)
    endpoint = JwksEndpoint(idp, pki)
    try:
        jaas = (f'{MODULE} required unsecuredLoginStringClaim_sub="admin" '
                f'ssl.truststore.location="{pki["ca"]}" ssl.truststore.type="PEM";')
        broker, ports = start(start_broker, pki, idp, monkeypatch, jwks_url=endpoint.url,
                              extra={"listener.name.sasl_ssl.oauthbearer.sasl.jaas.config": jaas})
        assert endpoint.gets, "the broker did not fetch the JWKS at its start"
        rdkafka_round_trip(signed_conf(ports, pki, lambda: (idp.token("svc-https"), time.time() + 3600)),
                           "oauth-rd-https")
        stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        err = rdkafka_auth_error(signed_conf(ports, pki, lambda: (idp.token("svc", key=stranger), time.time() + 3600)))
        assert err is not None and "invalid_token" in err, err

        # A new key under a new key id: the first token naming it makes the broker fetch the
        # JWKS again (its scheduled refresh is an hour away), and a retry passes.
        fetched = len(endpoint.gets)
        new_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        idp.publish([(idp.kid, idp.key), ("k2", new_key)])
        err = accepted_within(ports, pki, lambda: idp.token("svc", key=new_key, kid="k2"), 60)
        assert err is None, f"a token signed by the new key: {err}"
        assert len(endpoint.gets) > fetched, "no JWKS fetch for the unknown key id"
    finally:
        endpoint.close()
