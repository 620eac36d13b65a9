#!/usr/bin/env python3
"""librdkafka (confluent-kafka) round trip against a Kafka-compatible broker.

Creates a 3-partition topic with the AdminClient, produces keyed records with
headers and explicit timestamps with every compression codec (acks=all, no
idempotence), reads them back with a group-less consumer (``assign()`` only:
no subscribe, no commits), checks keys, values, headers, timestamps,
per-partition order and contiguous offsets, seeks / assigns at explicit
offsets, looks offsets up by timestamp (``offsets_for_times``), and deletes
the topic.

Prints one ``ok ...`` line per step; on the first mismatch prints
``FAIL: ...`` to stderr and exits 1.

Usage: roundtrip_librdkafka.py --bootstrap 127.0.0.1:9092 [--records 200]
"""

import argparse
import sys
import time
import traceback

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TIMESTAMP_CREATE_TIME,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 3
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


class Fail(Exception):
    pass


def ok(msg):
    print("ok   " + msg, flush=True)


def fail(msg):
    raise Fail(msg)


class Expected:
    __slots__ = ("key", "value", "headers", "ts", "codec", "partition", "offset")

    def __init__(self, key, value, headers, ts, codec):
        self.key, self.value, self.headers, self.ts, self.codec = key, value, headers, ts, codec
        self.partition = self.offset = None


class Errors:
    """Collects client-level errors (error_cb); they are reported, and fatal ones fail the run."""

    def __init__(self):
        self.seen = []

    def __call__(self, err):
        self.seen.append(err)
        print(f"note client error: {err}", file=sys.stderr, flush=True)
        if err.fatal():
            fail(f"fatal client error: {err}")


def common_conf(args, errors):
    conf = {
        "bootstrap.servers": args.bootstrap,
        "client.id": "ketch-compat-librdkafka",
        "error_cb": errors,
        # Keep metadata/refresh chatter modest and failures quick.
        "socket.timeout.ms": 10000,
    }
    if args.debug:
        conf["debug"] = args.debug
    return conf


def wait_future(fut, what, timeout):
    try:
        return fut.result(timeout=timeout)
    except KafkaException as e:
        fail(f"{what}: {e.args[0]}")


def wait_topic(admin, topic, deadline):
    while True:
        md = admin.list_topics(topic=topic, timeout=10)
        t = md.topics.get(topic)
        why = None
        if t is None:
            why = "not in metadata"
        elif t.error is not None:
            why = str(t.error)
        elif len(t.partitions) != PARTITIONS:
            why = f"{len(t.partitions)} partitions"
        else:
            for p in t.partitions.values():
                if p.error is not None or p.leader < 0:
                    why = f"partition {p.id}: leader {p.leader} err {p.error}"
        if why is None:
            return md
        if time.time() > deadline:
            fail(f"topic {topic} not ready in metadata: {why}")
        time.sleep(0.1)


def produce(args, errors, topic, codec, base_ms, seq0):
    conf = common_conf(args, errors)
    conf.update(
        {
            "compression.type": codec,
            "acks": "all",
            # librdkafka's producer is not idempotent by default, but say it:
            # Ketch does not implement InitProducerId / idempotence yet.
            "enable.idempotence": False,
            # Let several records share a batch (compression, mid-batch offsets).
            "linger.ms": 5,
            "message.timeout.ms": 30000,
        }
    )
    p = Producer(conf)
    recs = []
    delivery_errors = []

    def on_delivery(e, err, msg):
        if err is not None:
            delivery_errors.append(f"{codec} seq {e.key!r}: {err}")
            return
        e.partition, e.offset = msg.partition(), msg.offset()

    for i in range(args.records):
        n = seq0 + i
        key = f"key-{n % 17}".encode()
        if i == 3:
            value = None  # tombstone: null must stay null
        elif i == 4:
            value = b""  # empty, not null
        elif i % 50 == 7:
            value = (f"big-{codec}-{n}|".encode()) * (64 * 1024 // 16)  # ~64 KiB, compressible
        else:
            value = f'value {n} codec={codec} {{"n":{n},"pad":"{"x" * (n % 40)}"}}'.encode()
        headers = [("codec", codec.encode()), ("seq", str(n).encode())]
        if i % 5 == 0:
            headers.append(("empty", b""))
        if i % 7 == 0:
            headers += [("dup", b"a"), ("dup", b"b")]
        if i % 11 == 0:
            headers.append(("null", None))
        e = Expected(key, value, headers, base_ms + n, codec)
        recs.append(e)
        while True:
            try:
                p.produce(
                    topic,
                    key=key,
                    value=value,
                    headers=headers,
                    timestamp=e.ts,
                    on_delivery=lambda err, msg, e=e: on_delivery(e, err, msg),
                )
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    remaining = p.flush(30)
    if remaining:
        fail(f"produce with {codec}: {remaining} records not delivered after 30s")
    if delivery_errors:
        fail(f"produce with {codec}: {len(delivery_errors)} delivery errors, first: {delivery_errors[0]}")
    key_part = {}
    for e in recs:
        if key_part.setdefault(e.key, e.partition) != e.partition:
            fail(f"key {e.key!r} went to partitions {key_part[e.key]} and {e.partition}")
    ok(f"produced {len(recs)} records with {codec} compression")
    return recs


def norm_headers(h):
    return [(k, v) for k, v in (h or [])]


def compare(what, msg, want):
    where = f"{what} p{msg.partition()}@{msg.offset()} ({want.codec})"
    if msg.partition() != want.partition or msg.offset() != want.offset:
        fail(f"{what}: got p{msg.partition()}@{msg.offset()}, want p{want.partition}@{want.offset}")
    if msg.key() != want.key:
        fail(f"{where}: key {msg.key()!r}, want {want.key!r}")
    if (msg.value() is None) != (want.value is None):
        fail(f"{where}: value is None={msg.value() is None}, want None={want.value is None}")
    if msg.value() != want.value:
        v = msg.value() or b""
        fail(f"{where}: value mismatch (len {len(v)}, want {len(want.value)}; got prefix {v[:40]!r})")
    got_h = norm_headers(msg.headers())
    if got_h != want.headers:
        fail(f"{where}: headers {got_h!r}, want {want.headers!r}")
    tstype, ts = msg.timestamp()
    if tstype != TIMESTAMP_CREATE_TIME or ts != want.ts:
        fail(f"{where}: timestamp ({tstype}, {ts}), want (CreateTime, {want.ts})")


def new_consumer(args, errors):
    conf = common_conf(args, errors)
    conf.update(
        {
            # librdkafka requires a group.id for a Consumer, but we never
            # subscribe or commit: partitions are assign()ed explicitly, so no
            # JoinGroup/SyncGroup/OffsetCommit is needed. (librdkafka may still
            # look the group coordinator up in the background.)
            "group.id": "ketch-compat-librdkafka-unused",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 200,
        }
    )
    return Consumer(conf)


def consume_n(c, what, n, timeout):
    """Consume until n messages arrived; returns them. Fails on message errors."""
    got = []
    deadline = time.time() + timeout
    while len(got) < n and time.time() < deadline:
        for m in c.consume(num_messages=min(500, n - len(got)), timeout=0.5):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                fail(f"{what}: consume error on {m.topic()}[{m.partition()}]: {m.error()}")
            got.append(m)
    return got


def consume_quiet(c, what, seconds):
    """Consume for a while; any real message is returned (expected: none)."""
    got = []
    deadline = time.time() + seconds
    while time.time() < deadline:
        for m in c.consume(num_messages=100, timeout=0.2):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                fail(f"{what}: consume error: {m.error()}")
            got.append(m)
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", default=None)
    ap.add_argument("--records", type=int, default=200, help="records per codec")
    ap.add_argument("--codecs", default=",".join(CODECS))
    ap.add_argument("--debug", default="", help="librdkafka debug contexts, e.g. protocol,broker")
    ap.add_argument("--keep-topic", action="store_true")
    args = ap.parse_args()
    try:
        run(args)
    except Fail as e:
        print(f"FAIL: {e}", file=sys.stderr, flush=True)
        return 1
    except KafkaException as e:
        traceback.print_exc()
        print(f"FAIL: client error: {e.args[0] if e.args else e}", file=sys.stderr, flush=True)
        return 1
    print("PASS", flush=True)
    return 0


def run(args):
    errors = Errors()
    topic = args.topic or f"ketch-compat-rdkafka-{time.time_ns()}"
    aconf = common_conf(args, errors)
    # The AdminClient is a producer-type handle; librdkafka lets producer
    # metadata requests auto-create topics by default. Switch that off so
    # checking a deleted topic does not bring it back.
    aconf["allow.auto.create.topics"] = False
    admin = AdminClient(aconf)

    md = admin.list_topics(timeout=10)
    if not md.brokers:
        fail("metadata lists no brokers")
    b = next(iter(md.brokers.values()))
    ok(f"metadata: {len(md.brokers)} broker(s), first {b.id} at {b.host}:{b.port}, controller {md.controller_id}")

    futs = admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)], operation_timeout=10)
    wait_future(futs[topic], f"CreateTopics {topic}", 30)
    wait_topic(admin, topic, time.time() + 20)
    ok(f"created topic {topic} with {PARTITIONS} partitions")

    futs = admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
    try:
        futs[topic].result(timeout=30)
        fail("second CreateTopics succeeded, want TOPIC_ALREADY_EXISTS")
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            fail(f"second CreateTopics: {e.args[0]}, want TOPIC_ALREADY_EXISTS")
    ok("second create answered TOPIC_ALREADY_EXISTS")

    # Explicit CreateTime timestamps, increasing in produce order, starting
    # ten minutes in the past.
    base_ms = int(time.time() * 1000) - 10 * 60 * 1000
    all_recs = []
    for codec in args.codecs.split(","):
        all_recs += produce(args, errors, topic, codec, base_ms, len(all_recs))
    ok(f"produced {len(all_recs)} records ({args.codecs}), acks=all")

    by_part = {p: [] for p in range(PARTITIONS)}
    for e in all_recs:
        by_part[e.partition].append(e)
    for p, recs in by_part.items():
        recs.sort(key=lambda e: e.offset)
        for i, e in enumerate(recs):
            if e.offset != i:
                fail(f"produce acks for partition {p}: offsets not contiguous from 0 (index {i} has offset {e.offset})")
    if any(not r for r in by_part.values()):
        fail(f"keyed records did not reach every partition: {[len(r) for r in by_part.values()]}")
    counts = " ".join(f"p{p}={len(r)}" for p, r in by_part.items())
    ok(f"produce acks: contiguous offsets per partition ({counts})")

    c = new_consumer(args, errors)
    try:
        # Watermarks (ListOffsets earliest/latest).
        for p in range(PARTITIONS):
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            if (lo, hi) != (0, len(by_part[p])):
                fail(f"watermarks p{p}: ({lo}, {hi}), want (0, {len(by_part[p])})")
        ok("watermark offsets (ListOffsets earliest/latest) match")

        # Consume everything from the beginning with assign().
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got = consume_n(c, "consume from beginning", len(all_recs), 30)
        if len(got) != len(all_recs):
            fail(f"consume from beginning: got {len(got)} records, want {len(all_recs)}")
        nxt = {p: 0 for p in range(PARTITIONS)}
        for m in got:
            p = m.partition()
            if m.topic() != topic:
                fail(f"record from topic {m.topic()}")
            if nxt[p] >= len(by_part[p]):
                fail(f"extra record p{p}@{m.offset()}")
            compare("consume from beginning", m, by_part[p][nxt[p]])
            nxt[p] += 1
        extra = consume_quiet(c, "consume past end", 1.5)
        if extra:
            fail(f"{len(extra)} unexpected extra records (first p{extra[0].partition()}@{extra[0].offset()})")
        ok(f"consumed all {len(all_recs)} records from the beginning with assign(): keys, values, headers, timestamps, order, offsets match")

        # seek() on the assigned consumer to a middle offset of every partition.
        for p in range(PARTITIONS):
            off = len(by_part[p]) // 2
            c.seek(TopicPartition(topic, p, off))
            want = by_part[p][off:]
            got = consume_n(c, f"after seek p{p} to {off}", len(want), 20)
            if len(got) != len(want):
                fail(f"after seek p{p} to {off}: got {len(got)} records, want {len(want)}")
            for m, w in zip(got, want):
                compare(f"after seek p{p} to {off}", m, w)
        ok("seek() to the middle of each partition re-reads exactly the tail")
    finally:
        c.close()

    # assign() at explicit offsets (1 and last) on a fresh consumer.
    for p in range(PARTITIONS):
        for off in (1, len(by_part[p]) - 1):
            c = new_consumer(args, errors)
            try:
                c.assign([TopicPartition(topic, p, off)])
                want = by_part[p][off:]
                got = consume_n(c, f"assign p{p} at {off}", len(want), 20)
                if len(got) != len(want):
                    fail(f"assign p{p} at {off}: got {len(got)} records, want {len(want)}")
                for m, w in zip(got, want):
                    compare(f"assign p{p} at {off}", m, w)
            finally:
                c.close()
    ok("assign() at explicit offsets (1, last) matches")

    # offsets_for_times (ListOffsets by timestamp).
    first, last = all_recs[0].ts, all_recs[-1].ts
    probes = [first - 3600_000, first, all_recs[len(all_recs) // 3].ts, all_recs[2 * len(all_recs) // 3].ts, last, last + 60_000]
    c = new_consumer(args, errors)
    try:
        for ts in probes:
            res = c.offsets_for_times([TopicPartition(topic, p, ts) for p in range(PARTITIONS)], timeout=10)
            for tp in res:
                if tp.error:
                    fail(f"offsets_for_times {ts} p{tp.partition}: {tp.error}")
                want = next((e.offset for e in by_part[tp.partition] if e.ts >= ts), -1)  # -1: no such record (OFFSET_END)
                if tp.offset != want:
                    fail(f"offsets_for_times {ts} p{tp.partition}: offset {tp.offset}, want {want}")
    finally:
        c.close()
    ok(f"offsets_for_times: {len(probes)} probes x {PARTITIONS} partitions match")

    if args.keep_topic:
        ok(f"kept topic {topic}")
        return
    futs = admin.delete_topics([topic], operation_timeout=10)
    wait_future(futs[topic], f"DeleteTopics {topic}", 30)
    deadline = time.time() + 20
    while True:
        md = admin.list_topics(timeout=10)
        if topic not in md.topics:
            break
        if time.time() > deadline:
            fail(f"topic {topic} still listed 20s after DeleteTopics")
        time.sleep(0.2)
    ok(f"deleted topic {topic}; no longer listed")
    if errors.seen:
        # Not a failure by itself (e.g. a connection closed while idle), but
        # worth seeing next to the result.
        ok(f"note: {len(errors.seen)} client-level error(s) reported via error_cb (see stderr)")


if __name__ == "__main__":
    sys.exit(main())
