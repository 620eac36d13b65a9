"""Requests that would make the broker build more than Kafka's controller allows at once
(issue 38): Kafka bounds the metadata records one request may write (`QuorumController`'s
MAX_RECORDS_PER_USER_OP, 10,000: a TopicRecord, a ConfigRecord per config and a PartitionRecord
per partition of each topic), so

- a CreateTopics asking for more than 10,000 partitions in all (`ReplicationControlManager`'s
  MAX_PARTITIONS_PER_BATCH, checked first) is refused whole: every topic POLICY_VIOLATION
  "Excessively large number of partitions per request.", none created;
- one within that but over the record bound (its configs count) is refused whole: POLICY_VIOLATION
  "Unable to perform excessively large batch operation.";
- a CreatePartitions adding more than it to a topic answers that topic UNKNOWN_SERVER_ERROR (Kafka
  4.1's controller has then made 10,000 of them anyway; Ketch makes none: the test asserts
  neither), and the topic still grows within the bound.

Both bounds are checked before any placement or partition is made, so a topic of 2^31-1
partitions is refused at once (the partition bound) and the broker stays up.
Each on a single node and on a cluster whose controller is Ketch's (one broker of the target
kind forwarding to it). Everything else also against Kafka (KETCH_COMPAT_TARGET=kafka).

Also Kafka's memory pool for requests (`queued.max.request.bytes`): while it is used up by one
client's half-sent frame no other connection's request is read.
"""

from __future__ import annotations

import socket
import struct
import time

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

import pytest

from conftest import TARGET


@pytest.fixture(params=["single", "ketch-controller"])
def servers(request, start_cluster):
    """A single node (the `broker` fixture), or broker 1 under a Ketch controller."""
    if request.param == "single":
        return request.getfixturevalue("broker").bootstrap
    c = start_cluster({1: (TARGET, {})}, controller="ketch")
    c.wait_registered(AdminClient({"bootstrap.servers": c.bootstrap()}), timeout=60)
    return c.bootstrap()

MESSAGE = "Unable to perform excessively large batch operation."
PARTITIONS_MESSAGE = "Excessively large number of partitions per request."


def outcome(future):
    try:
        future.result(timeout=60)
        return None
    except KafkaException as e:
        return e.args[0].code(), e.args[0].str()


def test_create_topics_over_kafkas_record_bound_is_refused_whole(servers):
    admin = AdminClient({"bootstrap.servers": servers})
    # 3 x 4,000 partitions: over 10,000 together, each under it alone.
    topics = [NewTopic(f"big-{i}", num_partitions=4000, replication_factor=1) for i in range(3)]
    answers = {t: outcome(f) for t, f in admin.create_topics(topics).items()}
    assert answers == {f"big-{i}": (KafkaError.POLICY_VIOLATION, PARTITIONS_MESSAGE) for i in range(3)}, answers
    listed = set(admin.list_topics(timeout=30).topics)
    assert not listed & {"big-0", "big-1", "big-2"}, "nothing created"
    # One topic of 9,999 partitions is 10,000 records: created.
    assert outcome(admin.create_topics([NewTopic("at-bound", num_partitions=9999, replication_factor=1)])["at-bound"]) \
        is None
    # Its configs count too.
    over = NewTopic("with-configs", num_partitions=9999, replication_factor=1, config={"retention.ms": "1000"})
    assert outcome(admin.create_topics([over])["with-configs"]) == (KafkaError.POLICY_VIOLATION, MESSAGE)


def test_create_partitions_over_kafkas_record_bound_fails_that_topic(servers):
    admin = AdminClient({"bootstrap.servers": servers})
    assert outcome(admin.create_topics([NewTopic("grow", num_partitions=1, replication_factor=1)])["grow"]) is None
    answers = admin.create_partitions([NewPartitions("grow", 1 + 10_001)])
    assert outcome(answers["grow"])[0] == KafkaError.UNKNOWN, "Kafka: an unexpected error, no message"
    # Within the bound it grows, from what it has once that settles (see the module's notes).
    counts = []
    while len(counts) < 4 or len(set(counts[-4:])) > 1:
        counts.append(len(admin.list_topics("grow", timeout=30).topics["grow"].partitions))
        assert len(counts) < 120, f"the partition count of grow did not settle: {counts[-8:]}"
        time.sleep(0.5)
    now = counts[-1]
    assert outcome(admin.create_partitions([NewPartitions("grow", now + 100)])["grow"]) is None


def create_topic_raw(bootstrap: str, name: str, partitions: int) -> tuple[int, str | None]:
    """CreateTopics v4 for one topic of `partitions` (librdkafka refuses more than 100,000 before
    sending): (error code, error message) of its answer."""
    host, port = bootstrap.rsplit(":", 1)
    client = b"limits"
    topic = name.encode()
    body = struct.pack(">hhih", 19, 4, 7, len(client)) + client
    body += struct.pack(">ih", 1, len(topic)) + topic + struct.pack(">ihii", partitions, 1, 0, 0)
    body += struct.pack(">ib", 60_000, 0)
    with socket.create_connection((host, int(port)), timeout=60) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", recv_exactly(s, 4))[0]
        answer = recv_exactly(s, size)
    correlation, _throttle, count = struct.unpack(">iii", answer[:12])
    assert (correlation, count) == (7, 1), (correlation, count)
    at = 12
    (n,) = struct.unpack(">h", answer[at:at + 2])
    at += 2 + n
    error, message_len = struct.unpack(">hh", answer[at:at + 4])
    at += 4
    message = answer[at:at + message_len].decode() if message_len >= 0 else None
    return error, message


def recv_exactly(s, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        assert chunk, "connection closed"
        out += chunk
    return out


def test_a_topic_of_two_billion_partitions_is_refused_before_anything_is_made(servers, request):
    admin = AdminClient({"bootstrap.servers": servers})
    started = time.monotonic()
    error, message = create_topic_raw(servers.split(",")[0], "huge", 2**31 - 1)
    assert (error, message) == (KafkaError.POLICY_VIOLATION, PARTITIONS_MESSAGE)
    assert time.monotonic() - started < 5, "refused before any placement"
    # The broker still serves.
    assert outcome(admin.create_topics([NewTopic("after", num_partitions=1, replication_factor=1)])["after"]) is None
    assert "huge" not in admin.list_topics(timeout=30).topics


def api_versions_frame(correlation_id: int) -> bytes:
    """ApiVersions v0 (no body): length prefix + header."""
    client = b"limits"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client)) + client
    return struct.pack(">i", len(body)) + body


def answered(s: socket.socket, wait: float) -> bool:
    s.settimeout(wait)
    try:
        return len(recv_exactly(s, 4)) == 4
    except (socket.timeout, TimeoutError):
        return False


def test_a_used_up_request_memory_pool_holds_back_other_connections(start_broker):
    """queued.max.request.bytes (Kafka's memory pool): a frame's buffer is taken as its length
    arrives; while the pool is used up no connection's next request is read, and reading goes on
    once the buffer comes back."""
    pool = 1_048_576
    broker = start_broker({"socket.request.max.bytes": str(pool), "queued.max.request.bytes": str(pool)})
    host, port = broker.bootstrap.rsplit(":", 1)
    # The pool is fine for a request at a time.
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(api_versions_frame(1))
        assert answered(s, 10)
    slow = socket.create_connection((host, int(port)), timeout=10)
    slow.sendall(struct.pack(">i", pool) + b"\0" * (pool // 2))
    time.sleep(0.5)
    other = socket.create_connection((host, int(port)), timeout=10)
    other.sendall(api_versions_frame(2))
    assert not answered(other, 2), "the pool is used up: nothing is read"
    slow.close()
    assert answered(other, 20), "read once the slow frame's buffer came back"
    other.close()
