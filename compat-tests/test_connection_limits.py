"""Connection limits, as Kafka's `ConnectionQuotas` applies them, set with `kafka-configs` (Kafka
4.1's ConfigCommand, unchanged) or in the broker's properties:

- `max.connections.per.ip` and `max.connections.per.ip.overrides` (dynamic, cluster default): a
  connection beyond its address's limit is closed at once, before any request is read;
- `max.connections`: a connection beyond it is not served until another one closes;
- `connections.max.idle.ms`: a connection idle that long is closed by the broker;
- the IP quota `connection_creation_rate` (`--entity-type ips`): a connection over the rate is
  held without an answer, then closed; removing the quota lets every connection in again.
- `max.connection.creation.rate` (broker-wide): a burst over it is accepted at the rate (8 at 2/s:
  about 3 s on both), none refused.

Each connection is a plain TCP socket sending ApiVersions v0 (the first request of every
client), so what is observed is the broker's accept path alone. Passes on Ketch and on Apache
Kafka 4.1 (KETCH_COMPAT_TARGET=kafka).
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

from kafka_tools import KafkaTools
from test_acls_tool import until  # (Kafka brokers apply dynamic configs and quotas asynchronously)

CONFIG_CMD = "kafka.admin.ConfigCommand"
ANSWERED, CLOSED, SILENT = "answered", "closed", "silent"


def api_versions_frame(correlation_id: int) -> bytes:
    client_id = b"limits-test"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def ask(sock: socket.socket, timeout: float, correlation_id: int = 1) -> str:
    """Sends ApiVersions v0 and says whether the broker answered it, closed the connection, or
    stayed silent for `timeout` seconds."""
    sock.settimeout(timeout)
    try:
        sock.sendall(api_versions_frame(correlation_id))
        head = b""
        while len(head) < 8:
            chunk = sock.recv(8 - len(head))
            if not chunk:
                return CLOSED
            head += chunk
    except socket.timeout:
        return SILENT
    except (ConnectionResetError, BrokenPipeError):
        return CLOSED
    size, got_id = struct.unpack(">ii", head)
    assert got_id == correlation_id and size > 4, head
    rest = size - 4
    while rest > 0:
        chunk = sock.recv(min(rest, 65536))
        assert chunk, "closed in the middle of a response"
        rest -= len(chunk)
    return ANSWERED


def connect(broker) -> socket.socket:
    return socket.create_connection((broker.host, broker.port), timeout=10)


def configs(kt, bs, *args, check=True):
    return kt.run(CONFIG_CMD, "--bootstrap-server", bs, *args, check=check)


def set_cluster_default(kt, broker, config: str):
    configs(kt, broker.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config", config)


def answered_before_refusal(broker, most: int) -> int:
    """Opens connections one by one, each asking ApiVersions, until one is refused (closed) or
    `most` are answered; returns how many were answered (all closed afterwards)."""
    held = []
    try:
        while len(held) < most:
            sock = connect(broker)
            outcome = ask(sock, timeout=10)
            if outcome != ANSWERED:
                assert outcome == CLOSED, outcome
                sock.close()
                break
            held.append(sock)
        return len(held)
    finally:
        for sock in held:
            sock.close()
        # (The broker sees the closes asynchronously.)
        time.sleep(0.5)


def test_max_connections_per_ip_and_its_overrides(broker, kafka_libs, tmp_path):
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    assert answered_before_refusal(broker, 8) == 8
    set_cluster_default(kt, broker, "max.connections.per.ip=3")
    got = until(lambda: answered_before_refusal(broker, 8), lambda n: n == 3)
    assert got == 3, f"{got} connections from one address answered with max.connections.per.ip=3"
    # An override for this address takes precedence over the default.
    set_cluster_default(kt, broker, "max.connections.per.ip.overrides=[127.0.0.1:5]")
    got = until(lambda: answered_before_refusal(broker, 8), lambda n: n == 5)
    assert got == 5, f"{got} connections answered with an override of 5 for 127.0.0.1"
    configs(kt, broker.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default", "--delete-config",
            "max.connections.per.ip,max.connections.per.ip.overrides")
    got = until(lambda: answered_before_refusal(broker, 8), lambda n: n == 8)
    assert got == 8, f"{got} connections answered after the limits were removed"
    # Kafka's rule: 0 only with overrides.
    r = configs(kt, broker.bootstrap, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
                "max.connections.per.ip=0", check=False)
    assert r.returncode != 0 and "can be set to zero only if" in r.out, r.out


@pytest.mark.broker_config(**{"max.connections": "2"})
def test_beyond_max_connections_a_connection_waits_for_a_slot(broker):
    time.sleep(1)  # whatever the start-up probe opened is closed by now
    first, second = connect(broker), connect(broker)
    assert ask(first, timeout=10) == ANSWERED
    assert ask(second, timeout=10) == ANSWERED
    third = connect(broker)  # the kernel completes the handshake; the broker does not serve it
    assert ask(third, timeout=2) == SILENT, "a third connection was served with max.connections=2"
    first.close()
    # Its request was sent: once a slot is free the broker reads it and answers.
    head = b""
    third.settimeout(20)
    while len(head) < 8:
        chunk = third.recv(8 - len(head))
        assert chunk, "closed instead of served once a slot was free"
        head += chunk
    assert struct.unpack(">ii", head)[1] == 1
    second.close()
    third.close()


@pytest.mark.broker_config(**{"connections.max.idle.ms": "3000"})
def test_an_idle_connection_is_closed_by_the_broker(broker):
    sock = connect(broker)
    assert ask(sock, timeout=10, correlation_id=1) == ANSWERED
    time.sleep(1)
    assert ask(sock, timeout=10, correlation_id=2) == ANSWERED, "closed before connections.max.idle.ms"
    started = time.monotonic()
    sock.settimeout(30)
    try:
        closed = sock.recv(1) == b""
    except ConnectionResetError:
        closed = True
    except socket.timeout:
        closed = False
    assert closed, "an idle connection stayed open 30 s with connections.max.idle.ms=3000"
    assert time.monotonic() - started > 1.5, "closed well before it was idle for connections.max.idle.ms"
    sock.close()


def burst(broker, n: int) -> list[str]:
    """Opens `n` connections at once, then asks ApiVersions on each."""
    socks = [connect(broker) for _ in range(n)]
    try:
        return [ask(s, timeout=10, correlation_id=i + 1) for i, s in enumerate(socks)]
    finally:
        for s in socks:
            s.close()


# A rate over 2 windows of 1 s: a connection counts for a second at most.
@pytest.mark.broker_config(**{"quota.window.num": "2", "quota.window.size.seconds": "1"})
def test_an_ip_over_its_connection_creation_rate_is_throttled(broker, kafka_libs, tmp_path):
    kt = KafkaTools(kafka_libs, broker, tmp_path)
    ip = ["--entity-type", "ips", "--entity-name", "127.0.0.1"]
    assert burst(broker, 5) == [ANSWERED] * 5
    configs(kt, broker.bootstrap, "--alter", "--add-config", "connection_creation_rate=1", *ip)
    out = until(lambda: configs(kt, broker.bootstrap, "--describe", *ip).stdout,
                lambda out: "connection_creation_rate=1" in out)
    assert "connection_creation_rate=1" in out, out

    def throttled_burst():
        time.sleep(2.5)  # the tool's own connections are out of the rate's window
        return burst(broker, 5)

    got = until(throttled_burst, lambda got: CLOSED in got)
    # The first connection is within the rate; those over it get no answer and are closed.
    assert got[0] == ANSWERED and CLOSED in got and SILENT not in got, got
    configs(kt, broker.bootstrap, "--alter", "--delete-config", "connection_creation_rate", *ip)
    got = until(throttled_burst, lambda got: got == [ANSWERED] * 5)
    assert got == [ANSWERED] * 5, got


# The broker-wide rate, over 2 windows of 1 s.
@pytest.mark.broker_config(**{"quota.window.num": "2", "quota.window.size.seconds": "1",
                              "max.connection.creation.rate": "2"})
def test_over_max_connection_creation_rate_accepts_are_paced(broker):
    time.sleep(2.5)  # the start-up probe's connections are out of the rate's window
    started = time.monotonic()
    got = burst(broker, 8)
    took = time.monotonic() - started
    print(f"8 connections at max.connection.creation.rate=2: all answered after {took:.1f} s")
    # Not refused: the acceptor waits until the rate allows the next one (Kafka's throttle).
    assert got == [ANSWERED] * 8, got
    assert took >= 1.5, f"8 connections served in {took:.2f} s at 2 per second"


def test_a_controller_listener_has_the_limits_too(start_cluster):
    """A controller-only node (of the target's kind, no broker) with `max.connections.per.ip=3`:
    the fourth connection from one address is closed, as on a broker listener."""
    from types import SimpleNamespace

    from conftest import TARGET

    c = start_cluster({}, controller_overrides={"max.connections.per.ip": "3"}, controller=TARGET)
    listener = SimpleNamespace(host="127.0.0.1", port=c.ctl.port)
    # (Kafka's controller holds one connection from 127.0.0.1 itself: its registration with the
    # active controller, itself, KIP-919. Ketch's registers no controller.)
    expected = 3 if TARGET == "ketch" else 2
    got = until(lambda: answered_before_refusal(listener, 6), lambda n: n == expected)
    assert got == expected, f"{got} connections to the controller answered with max.connections.per.ip=3"
