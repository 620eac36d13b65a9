"""kafka-acls (org.apache.kafka.tools.AclCommand, unchanged from Kafka 4.1's jars) against a broker
with Kafka's StandardAuthorizer configured (`authorizer.class.name`, `super.users=User:ANONYMOUS`
since these connections are unauthenticated): ACLs are added (literal and prefixed, allow and
deny), listed per resource and by principal, kept across a broker restart, removed by filter;
an invalid one is refused with Kafka's message. Without an authorizer the tool is told
SECURITY_DISABLED. Passes on Ketch and on Apache Kafka 4.1 (KETCH_COMPAT_TARGET=kafka).
Their enforcement on the other APIs, with TLS client certificates as principals, is
`test_authorization.py`.
"""

from __future__ import annotations

import re
import time

import pytest

from kafka_tools import KafkaTools

ACLS = "org.apache.kafka.tools.AclCommand"
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}


def acl_lines(out: str) -> set[str]:
    """The `(principal=..., host=..., operation=..., permissionType=...)` entries printed."""
    return set(re.findall(r"\(principal=[^)]*\)", out))


def listed(kt, bs, *args) -> str:
    return kt.run(ACLS, "--bootstrap-server", bs, "--list", *args).stdout


def until(f, want, timeout=20.0):
    """Kafka applies ACL changes to the broker's metadata asynchronously."""
    deadline = time.monotonic() + timeout
    while True:
        got = f()
        if want(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.3)


@pytest.mark.broker_config(**AUTHORIZER)
def test_kafka_acls_add_list_remove(broker, kafka_libs, tmp_path):
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    bs = broker.bootstrap
    kt.run(ACLS, "--bootstrap-server", bs, "--add", "--allow-principal", "User:alice", "--operation", "Read",
           "--operation", "Describe", "--topic", "orders")
    kt.run(ACLS, "--bootstrap-server", bs, "--add", "--allow-principal", "User:bob", "--operation", "Write",
           "--topic", "pay-", "--resource-pattern-type", "prefixed")
    kt.run(ACLS, "--bootstrap-server", bs, "--add", "--deny-principal", "User:*", "--deny-host", "10.0.0.9",
           "--operation", "All", "--group", "audit")
    want = {
        "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
        "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)",
        "(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW)",
        "(principal=User:*, host=10.0.0.9, operation=ALL, permissionType=DENY)",
    }
    out = until(lambda: listed(kt, bs), lambda o: acl_lines(o) == want)
    assert acl_lines(out) == want, out
    assert "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)" in out, out
    assert "ResourcePattern(resourceType=TOPIC, name=pay-, patternType=PREFIXED)" in out, out
    assert "ResourcePattern(resourceType=GROUP, name=audit, patternType=LITERAL)" in out, out
    just_alice = listed(kt, bs, "--principal", "User:alice")
    assert acl_lines(just_alice) == {l for l in want if "alice" in l}, just_alice
    topic_only = listed(kt, bs, "--topic", "orders")
    assert acl_lines(topic_only) == {l for l in want if "alice" in l}, topic_only

    broker.restart()
    bs = broker.bootstrap
    out = until(lambda: listed(kt, bs), lambda o: acl_lines(o) == want)
    assert acl_lines(out) == want, f"after a restart:\n{out}"

    kt.run(ACLS, "--bootstrap-server", bs, "--remove", "--force", "--allow-principal", "User:alice",
           "--operation", "Read", "--topic", "orders")
    rest = want - {"(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"}
    out = until(lambda: listed(kt, bs), lambda o: acl_lines(o) == rest)
    assert acl_lines(out) == rest, out
    kt.run(ACLS, "--bootstrap-server", bs, "--remove", "--force", "--topic", "pay-", "--resource-pattern-type",
           "prefixed")
    kt.run(ACLS, "--bootstrap-server", bs, "--remove", "--force", "--group", "audit")
    kt.run(ACLS, "--bootstrap-server", bs, "--remove", "--force", "--topic", "orders")
    out = until(lambda: listed(kt, bs), lambda o: not acl_lines(o))
    assert not acl_lines(out), out


def test_kafka_acls_without_an_authorizer_is_security_disabled(broker, kafka_libs, tmp_path):
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    r = kt.run(ACLS, "--bootstrap-server", broker.bootstrap, "--list", check=False)
    assert "SecurityDisabledException" in r.out and "No Authorizer is configured" in r.out, r.out
