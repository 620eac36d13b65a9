"""Delegation tokens (KIP-48, KIP-373) with Kafka's own tool and real clients; also run against
Kafka 4.1 (KETCH_COMPAT_TARGET=kafka).

`kafka-delegation-tokens` (DelegationTokenCommand) creates, describes, renews and expires tokens
over SASL_PLAINTEXT as SCRAM users, with the StandardAuthorizer on; franz-go (`IsToken`) and the
Java producer log in with a token (SCRAM with `tokenauth=true`: the token id as user, its HMAC as
password) and act as the token's owner (its topic ACLs apply). Checked: the owner, requester and
renewers each token shows; a renewer renews, a stranger cannot (DELEGATION_TOKEN_OWNER_MISMATCH)
and sees no token; a token for another owner needs CREATE_TOKENS on that user; token requests
over PLAINTEXT and from a token-authenticated connection are refused
(DELEGATION_TOKEN_REQUEST_NOT_ALLOWED); tokens survive a restart; an expired token logs in no
more; without `delegation.token.secret.key` tokens are off (DELEGATION_TOKEN_AUTH_DISABLED).
In a cluster the changes go through the controller (Ketch's or Kafka's) and the brokers
authenticate tokens from the metadata log: a Ketch broker under Kafka's controller, a Kafka
broker under Ketch's, and Ketch only.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import TARGET, free_port, go_build
from kafka_tools import KafkaTools
from test_sasl import add_scram, pki, sasl_config, start  # noqa: F401 (pki: the CA and broker certificate)

TOKENS = "org.apache.kafka.tools.DelegationTokenCommand"
ACLS = "org.apache.kafka.tools.AclCommand"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
SECRET = {"delegation.token.secret.key": "ketch-delegation-secret"}
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    # The PLAINTEXT listener (the tools' bootstrap, and Kafka's own controller connection).
    "super.users": "User:admin;User:ANONYMOUS",
}
NOT_ALLOWED = "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels"


def login(tmp_path: Path, name: str, user: str, password: str, token: bool = False,
          mechanism: str = "SCRAM-SHA-512") -> Path:
    """A client properties file logging in over SASL_PLAINTEXT with SCRAM (a token's with `token`)."""
    p = tmp_path / f"{name}.properties"
    extra = ' tokenauth="true"' if token else ""
    p.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n"
                 f'sasl.jaas.config={SCRAM_MODULE} required username="{user}" password="{password}"{extra};\n')
    return p


def tokens(kt, bootstrap, config, *args, check=True):
    return kt.run(TOKENS, "--bootstrap-server", bootstrap, "--command-config", config, *args, check=check)


def listed(out: str) -> list[dict]:
    """The tokens the tool printed: id, hmac, owner, requester, renewers."""
    rows = []
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.split()[:2] == ["TOKENID", "HMAC"]:
            for row in lines[i + 1:]:
                f = row.split()
                if len(f) >= 8 and f[4].startswith("["):
                    rows.append({"id": f[0], "hmac": f[1], "owner": f[2], "requester": f[3],
                                 "renewers": f[4].strip("[]").split(",") if f[4] != "[]" else []})
            break
    return rows


def created(kt, bootstrap, config, *args) -> dict:
    r = tokens(kt, bootstrap, config, "--create", "--max-life-time-period", "-1", *args)
    found = listed(r.out)
    assert "Created delegation token with tokenId" in r.out and len(found) == 1, r.out
    return found[0]


def franz(port: int, token: dict, timeout: str = "40s", topic: str = "tok-franz") -> subprocess.CompletedProcess:
    """franz-go's round trip (produce, consume back, delete the topic) logged in with `token`."""
    return subprocess.run([str(go_build("roundtrip")), "-brokers", f"127.0.0.1:{port}", "-topic", topic,
                           "-sasl-mechanism", "SCRAM-SHA-256", "-sasl-user", token["id"], "-sasl-password",
                           token["hmac"], "-sasl-token", "-codecs", "none,lz4", "-records", "30",
                           "-timeout", timeout], capture_output=True, text=True, timeout=120)


def test_tokens_with_the_tool_franz_go_and_the_java_producer(start_broker, kafka_libs, pki, tmp_path):  # noqa: F811
    broker, ports = start(start_broker, pki, {**AUTHORIZER, **SECRET})
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    for user in ("alice", "bob", "carol"):
        add_scram(kt, broker.bootstrap, user, f"SCRAM-SHA-512=[password={user}-secret]")
    # alice may use the tok- topics and groups; bob and carol nothing.
    for resource in (["--topic", "tok-"], ["--group", "tok-"]):
        kt.run(ACLS, "--bootstrap-server", broker.bootstrap, "--add", "--allow-principal", "User:alice",
               "--operation", "All", *resource, "--resource-pattern-type", "prefixed")
    sasl = f"127.0.0.1:{ports['SASL_PLAINTEXT']}"
    alice, bob, carol = (login(tmp_path, u, u, f"{u}-secret") for u in ("alice", "bob", "carol"))

    token = created(kt, sasl, alice, "--renewer-principal", "User:bob")
    assert (token["owner"], token["requester"], token["renewers"]) == ("User:alice", "User:alice", ["User:bob"])

    # The token logs in as alice: franz-go produces and consumes the tok- topic (over both mechanisms'
    # credentials: SCRAM-SHA-256 here, SHA-512 for the Java producer).
    r = franz(ports["SASL_PLAINTEXT"], token)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    as_token = login(tmp_path, "token", token["id"], token["hmac"], token=True)
    r = kt.run("org.apache.kafka.tools.ProducerPerformance", "--topic", "tok-java", "--num-records", 50,
               "--record-size", 100, "--throughput", -1, "--producer.config", as_token, "--producer-props",
               f"bootstrap.servers={sasl}", "acks=all", timeout=90)
    assert "50 records sent" in r.out, r.out
    # ... and is held to alice's ACLs: not a topic outside tok-.
    r = franz(ports["SASL_PLAINTEXT"], token, timeout="10s", topic="other-franz")
    assert r.returncode != 0 and "TOPIC_AUTHORIZATION_FAILED" in r.stdout + r.stderr, r.stdout[-2000:] + r.stderr[-2000:]

    # Not over PLAINTEXT, and not from a token's connection.
    plaintext = tmp_path / "plaintext.properties"
    plaintext.write_text("security.protocol=PLAINTEXT\n")
    r = tokens(kt, broker.bootstrap, plaintext, "--create", "--max-life-time-period", "-1", check=False)
    assert NOT_ALLOWED in r.out, r.out
    for args in (["--create", "--max-life-time-period", "-1"], ["--describe", "--owner-principal", "User:alice"]):
        r = tokens(kt, sasl, as_token, *args, check=False)
        assert NOT_ALLOWED in r.out, r.out

    # Another owner: CREATE_TOKENS on that user first.
    r = tokens(kt, sasl, alice, "--create", "--max-life-time-period", "-1", "--owner-principal", "User:dave",
               check=False)
    assert "DelegationTokenAuthorizationException" in r.out, r.out
    kt.run(ACLS, "--bootstrap-server", broker.bootstrap, "--add", "--allow-principal", "User:alice",
           "--operation", "CreateTokens", "--user-principal", "User:dave")
    for_dave = created(kt, sasl, alice, "--owner-principal", "User:dave")
    assert (for_dave["owner"], for_dave["requester"]) == ("User:dave", "User:alice")

    # Describing: owners, requesters and renewers see a token; a stranger does not. (An owner asked
    # for matches a token it owns, requested or may renew: Kafka's ownerOrRenewer.)
    def described(config, owner):
        r = tokens(kt, sasl, config, "--describe", "--owner-principal", owner)
        return sorted(t["id"] for t in listed(r.out))

    assert described(alice, "User:alice") == sorted([token["id"], for_dave["id"]])
    assert described(alice, "User:dave") == [for_dave["id"]]
    assert described(bob, "User:alice") == [token["id"]]
    assert described(carol, "User:alice") == []
    # ... unless an ACL lets it: DESCRIBE on the DELEGATION_TOKEN, or DESCRIBE_TOKENS on its owner.
    kt.run(ACLS, "--bootstrap-server", broker.bootstrap, "--add", "--allow-principal", "User:carol",
           "--operation", "Describe", "--delegation-token", token["id"])
    assert described(carol, "User:alice") == [token["id"]]
    assert described(carol, "User:dave") == []
    kt.run(ACLS, "--bootstrap-server", broker.bootstrap, "--add", "--allow-principal", "User:carol",
           "--operation", "DescribeTokens", "--user-principal", "User:dave")
    assert described(carol, "User:dave") == [for_dave["id"]]
    # The HMAC a describe shows is the one the creation gave.
    r = tokens(kt, sasl, bob, "--describe", "--owner-principal", "User:alice")
    assert listed(r.out)[0]["hmac"] == token["hmac"], r.out

    # Renewing: the renewer may, a stranger may not; an unknown HMAC is not found.
    r = tokens(kt, sasl, bob, "--renew", "--hmac", token["hmac"], "--renew-time-period", "3600000")
    assert "Completed renew operation" in r.out, r.out
    r = tokens(kt, sasl, carol, "--renew", "--hmac", token["hmac"], "--renew-time-period", "3600000", check=False)
    assert "DelegationTokenOwnerMismatchException" in r.out, r.out
    r = tokens(kt, sasl, alice, "--renew", "--hmac", "AAAA", "--renew-time-period", "1000", check=False)
    assert "DelegationTokenNotFoundException" in r.out, r.out

    # Tokens survive a restart; expired at once, a token logs in no more and is gone.
    broker.restart()
    r = franz(ports["SASL_PLAINTEXT"], token)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    r = tokens(kt, sasl, alice, "--expire", "--hmac", token["hmac"], "--expiry-time-period", "-1")
    assert "Completed expire operation" in r.out, r.out
    assert described(alice, "User:alice") == [for_dave["id"]]
    r = franz(ports["SASL_PLAINTEXT"], token, timeout="10s")
    assert r.returncode != 0 and "SASL_AUTHENTICATION_FAILED" in r.stdout + r.stderr, r.stdout[-2000:] + r.stderr[-2000:]
    assert described(alice, "User:dave") == [for_dave["id"]]
    # Neither the key nor a token's HMAC (its password) is in the broker's log.
    log = "\n".join(line for line in broker.log_path.read_text(errors="replace").splitlines()
                    if not line.startswith("===== [compat-harness"))
    for secret in (SECRET["delegation.token.secret.key"], token["hmac"], for_dave["hmac"]):
        assert secret not in log, secret


def test_tokens_are_off_without_a_secret_key(start_broker, kafka_libs, pki, tmp_path):  # noqa: F811
    broker, ports = start(start_broker, pki)
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    add_scram(kt, broker.bootstrap, "alice", "SCRAM-SHA-512=[password=alice-secret]")
    alice = login(tmp_path, "alice", "alice", "alice-secret")
    sasl = f"127.0.0.1:{ports['SASL_PLAINTEXT']}"
    for args in (["--create", "--max-life-time-period", "-1"], ["--describe", "--owner-principal", "User:alice"]):
        r = tokens(kt, sasl, alice, *args, check=False)
        assert "DelegationTokenDisabledException" in r.out, r.out


CLUSTERS = [("ketch", "ketch"), ("kafka", "ketch"), ("ketch", "kafka")]
if TARGET == "kafka":
    CLUSTERS = [("kafka", "kafka")]


@pytest.mark.parametrize("controller,kind", CLUSTERS, ids=lambda v: v)
def test_a_clusters_tokens_go_through_its_controller(start_cluster, kafka_libs, tmp_path, controller, kind):
    """A token created through a broker (forwarded to the controller, which writes it into the
    metadata log with its own secret key) logs in on the broker, which authenticates it from its
    metadata image; renewed and expired the same way."""
    import time

    from confluent_kafka.admin import AdminClient

    port = free_port()
    broker = {
        **SECRET,
        "extra_listeners": {"SASL_PLAINTEXT": ("SASL_PLAINTEXT", port)},
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": f"{SCRAM_MODULE} required;",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": f"{SCRAM_MODULE} required;",
        "offsets.topic.replication.factor": "1",
    }
    c = start_cluster({1: (kind, broker)}, controller_overrides=SECRET, controller=controller, kill=True,
                      controller_scram=["SCRAM-SHA-512=[name=alice,password=alice-secret]",
                                        "SCRAM-SHA-512=[name=bob,password=bob-secret]"])
    c.wait_registered(AdminClient({"bootstrap.servers": c.bootstrap()}), timeout=60)
    kt = KafkaTools(kafka_libs, c.brokers[1], tmp_path)
    sasl = f"127.0.0.1:{port}"
    alice, bob = login(tmp_path, "alice", "alice", "alice-secret"), login(tmp_path, "bob", "bob", "bob-secret")
    token = created(kt, sasl, alice, "--renewer-principal", "User:bob")
    assert (token["owner"], token["renewers"]) == ("User:alice", ["User:bob"])

    def logs_in(expected: bool, within: float = 20) -> None:
        deadline = time.monotonic() + within
        while True:
            r = franz(port, token, timeout="10s")
            if (r.returncode == 0) == expected or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert (r.returncode == 0) == expected, r.stdout[-2000:] + r.stderr[-2000:]
        if not expected:
            assert "SASL_AUTHENTICATION_FAILED" in r.stdout + r.stderr, r.stdout[-2000:] + r.stderr[-2000:]

    logs_in(True)
    r = tokens(kt, sasl, alice, "--describe", "--owner-principal", "User:alice")
    assert [(t["id"], t["hmac"]) for t in listed(r.out)] == [(token["id"], token["hmac"])], r.out
    r = tokens(kt, sasl, bob, "--renew", "--hmac", token["hmac"], "--renew-time-period", "3600000")
    assert "Completed renew operation" in r.out, r.out
    r = tokens(kt, sasl, bob, "--expire", "--hmac", token["hmac"], "--expiry-time-period", "-1")
    assert "Completed expire operation" in r.out, r.out
    logs_in(False)
