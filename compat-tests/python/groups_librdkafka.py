#!/usr/bin/env python3
"""librdkafka (confluent-kafka) consumer group scenario against a Kafka-compatible broker.

Two consumers (``subscribe()``, classic group protocol, one process, polled in turn) in one group
on a 4-partition topic:

1. they split the partitions (disjoint, 2 each, same generation) and consume the first records,
   committing synchronously after each batch (and in ``on_revoke``);
2. the second one leaves (``close()``: LeaveGroup); the first gets all four partitions (with
   cooperative-sticky it keeps its own without any revocation), records produced meanwhile and
   afterwards are all consumed, none twice;
3. committed offsets (``committed()``: OffsetFetch) equal the end offsets (watermarks);
4. the group is described (AdminClient ``describe_consumer_groups``: state, members, assignor) and
   listed (``list_consumer_groups``);
5. after everybody closed, a new consumer in the same group starts exactly at the committed
   offsets (new records only, first offset per partition = old end offset).

Prints one ``ok ...`` line per step; on the first mismatch prints ``FAIL: ...`` to stderr and exits 1.

Usage: groups_librdkafka.py --bootstrap 127.0.0.1:9092 --assignor range|roundrobin|cooperative-sticky
       [--debug cgrp,protocol]
"""

import argparse
import sys
import time
import traceback
import uuid

from confluent_kafka import Consumer, ConsumerGroupState, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 4
STEP_TIMEOUT = 45.0
T0 = time.monotonic()


class Fail(Exception):
    pass


def ok(msg):
    print(f"ok   {time.monotonic() - T0:6.2f}s  {msg}", flush=True)


def fail(msg):
    raise Fail(msg)


def parts(tps):
    return sorted(tp.partition for tp in tps)


class Member:
    """A subscribed consumer; poll() consumes a batch, remembers it and commits it synchronously."""

    def __init__(self, name, args, group, topic, errors):
        self.name = name
        self.topic = topic
        self.events = []
        self.consumed = []  # (partition, offset, index)
        self.revoked = []  # (phase, [partitions])
        self.lost = []
        self.phase = "start"
        self.pending = {}  # partition -> next offset to commit
        self.commit_errors = []
        self.closed = False
        conf = {
            "bootstrap.servers": args.bootstrap,
            "group.id": group,
            "client.id": f"ketch-compat-rdkafka-{name}",
            "partition.assignment.strategy": args.assignor,
            "group.protocol": "classic",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500,
            "fetch.wait.max.ms": 100,
            "error_cb": errors,
        }
        if args.debug:
            conf["debug"] = args.debug
        self.c = Consumer(conf)
        self.c.subscribe([topic], on_assign=self.on_assign, on_revoke=self.on_revoke, on_lost=self.on_lost)

    def event(self, msg):
        self.events.append(f"{time.monotonic() - T0:7.2f}s [{self.phase}] {msg}")

    # rebalance callbacks (served from poll()/consume()/close()); the library performs the (incremental)
    # assign/unassign itself after the callback
    def on_assign(self, c, tps):
        self.event(f"on_assign {parts(tps)}")

    def on_revoke(self, c, tps):
        if tps:
            self.revoked.append((self.phase, parts(tps)))
        self.event(f"on_revoke {parts(tps)}")
        self.commit([tp.partition for tp in tps], "in on_revoke")

    def on_lost(self, c, tps):
        self.lost.append((self.phase, parts(tps)))
        self.event(f"on_lost {parts(tps)}")
        for tp in tps:
            self.pending.pop(tp.partition, None)

    def commit(self, only, why):
        offs = [TopicPartition(self.topic, p, o) for p, o in self.pending.items() if only is None or p in only]
        if not offs:
            return
        try:
            res = self.c.commit(offsets=offs, asynchronous=False)
        except KafkaException as e:
            err = e.args[0]
            self.commit_errors.append(f"{why}: {err}")
            self.event(f"commit {why} failed: {err} (will retry)")
            return
        for tp in res or []:
            if tp.error is not None:
                self.commit_errors.append(f"{why}: p{tp.partition}: {tp.error}")
                self.event(f"commit {why}: partition {tp.partition}: {tp.error}")
                return
        for tp in offs:
            if self.pending.get(tp.partition) == tp.offset:
                del self.pending[tp.partition]

    def poll(self, timeout=0.05):
        if self.closed:
            return
        msgs = self.c.consume(num_messages=500, timeout=timeout)
        for m in msgs:
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                self.event(f"consume error: {m.error()}")
                if m.error().fatal():
                    fail(f"{self.name}: fatal consume error {m.error()}")
                continue
            self.consumed.append((m.partition(), m.offset(), int(m.value().decode().split("|")[0])))
            self.pending[m.partition()] = m.offset() + 1
        self.commit(None, "after consume")

    def assignment(self):
        return parts(self.c.assignment()) if not self.closed else []

    def close(self):
        self.commit(None, "before close")
        self.event("close()")
        self.c.close()
        self.closed = True

    def state(self):
        tail = "\n      ".join(self.events[-15:])
        return (f"  {self.name}: assignment={self.assignment()} consumed={len(self.consumed)} pending={self.pending} "
                f"commit errors={len(self.commit_errors)} closed={self.closed}\n      {tail}")


class Errors:
    def __init__(self):
        self.seen = []

    def __call__(self, err):
        self.seen.append(err)
        print(f"note client error: {err}", file=sys.stderr, flush=True)


class Producing:
    def __init__(self, args, topic, errors):
        self.p = Producer({"bootstrap.servers": args.bootstrap, "acks": "all", "linger.ms": 5,
                           "enable.idempotence": False, "error_cb": errors, "message.timeout.ms": 30000})
        self.topic = topic
        self.next = 0
        self.acked = {}  # index -> (partition, offset)
        self.failed = []

    def produce(self, n):
        first = self.next
        for _ in range(n):
            i = self.next
            self.next += 1

            def cb(err, msg, i=i):
                if err is not None:
                    self.failed.append((i, err))
                else:
                    self.acked[i] = (msg.partition(), msg.offset())

            self.p.produce(self.topic, value=f"{i}|value-{i}".encode(), key=f"k{i}".encode(),
                           partition=i % PARTITIONS, on_delivery=cb)
            self.p.poll(0)
        left = self.p.flush(30)
        if left or self.failed:
            fail(f"produce: {left} not delivered, failures {self.failed[:5]}")
        return list(range(first, self.next))


def wait_until(what, cond, members, timeout=STEP_TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        for m in members:
            m.poll()
        if cond():
            return
        if time.monotonic() > deadline:
            fail(f"timed out after {timeout:.0f}s waiting for: {what}\n" + "\n".join(m.state() for m in members))


def consumed_indexes(members):
    return {idx for m in members for (_, _, idx) in m.consumed}


def run(args):
    errors = Errors()
    suffix = uuid.uuid4().hex[:8]
    topic = f"grp-rdkafka-{args.assignor}-{suffix}"
    group = f"group-rdkafka-{args.assignor}-{suffix}"
    admin = AdminClient({"bootstrap.servers": args.bootstrap, "error_cb": errors})
    futs = admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)], operation_timeout=10)
    try:
        futs[topic].result(timeout=30)
    except KafkaException as e:
        fail(f"CreateTopics {topic}: {e.args[0]}")
    deadline = time.monotonic() + 20
    while True:
        t = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == PARTITIONS and all(
                p.leader >= 0 for p in t.partitions.values()):
            break
        if time.monotonic() > deadline:
            fail(f"topic {topic} not ready in metadata")
        time.sleep(0.1)
    ok(f"topic {topic} with {PARTITIONS} partitions; group {group}; assignor {args.assignor}")

    prod = Producing(args, topic, errors)

    m1 = Member("m1", args, group, topic, errors)
    m2 = Member("m2", args, group, topic, errors)
    both = [m1, m2]
    everyone = [m1, m2]
    for m in both:
        m.phase = "initial"

    def balanced(ms):
        sets = [set(m.assignment()) for m in ms]
        total = sum(len(s) for s in sets)
        union = set().union(*sets)
        sizes = [len(s) for s in sets]
        return total == PARTITIONS and len(union) == PARTITIONS and max(sizes) - min(sizes) <= 1 and min(sizes) > 0

    wait_until("two members share 4 partitions (disjoint, 2 each)", lambda: balanced(both), both)
    # produced once both are in: each member consumes (and commits) its own partitions
    first = prod.produce(400)
    ok(f"both members in; produced {len(first)} records")
    wait_until("the first 400 records consumed", lambda: consumed_indexes(everyone) >= set(first), both)
    # still balanced once everything settled
    for _ in range(5):
        for m in both:
            m.poll(0.05)
    if not balanced(both):
        fail("assignment changed after it looked stable:\n" + "\n".join(m.state() for m in both))
    ok(f"two members: m1={m1.assignment()} m2={m2.assignment()}; first records consumed "
       f"(m1 {len(m1.consumed)}, m2 {len(m2.consumed)})")
    for m in both:
        other = sorted({p for (p, _, _) in m.consumed} - set(m.assignment()))
        if other or not m.consumed:
            fail(f"{m.name} owns {m.assignment()} but consumed {len(m.consumed)} records, from partitions "
                 f"{sorted({p for (p, _, _) in m.consumed})}")

    # describe while both are members
    desc = admin.describe_consumer_groups([group])[group].result(timeout=30)
    mem = {m.client_id: m for m in desc.members}
    ok(f"describe: state {desc.state} assignor '{desc.partition_assignor}' members "
       + ", ".join(f"{cid}={sorted(tp.partition for tp in m.assignment.topic_partitions)}" for cid, m in mem.items()))
    if desc.state != ConsumerGroupState.STABLE:
        fail(f"describe_consumer_groups: state {desc.state}, expected STABLE")
    if desc.partition_assignor != args.assignor:
        fail(f"describe_consumer_groups: assignor '{desc.partition_assignor}', expected '{args.assignor}'")
    for m in both:
        d = mem.get(f"ketch-compat-rdkafka-{m.name}")
        if d is None:
            fail(f"describe_consumer_groups: no member with client id ketch-compat-rdkafka-{m.name}: {list(mem)}")
        got = sorted(tp.partition for tp in d.assignment.topic_partitions)
        if got != m.assignment():
            fail(f"describe_consumer_groups: {m.name} assigned {got}, the consumer has {m.assignment()}")

    # m2 leaves
    before1 = set(m1.assignment())
    m1.phase = m2.phase = "leave"
    prod.produce(80)
    m2.close()
    ok(f"m2 closed (LeaveGroup), it owned {sorted(set(range(PARTITIONS)) - before1)}")
    wait_until("m1 owns all 4 partitions", lambda: m1.assignment() == list(range(PARTITIONS)), [m1])
    leave_revoked = [r for r in m1.revoked if r[0] == "leave"]
    ok(f"m1 owns {m1.assignment()}; its revocations during the leave: {leave_revoked}")
    if args.assignor == "cooperative-sticky" and leave_revoked:
        fail(f"cooperative-sticky: m1 had partitions revoked when m2 left: {leave_revoked}\n{m1.state()}")
    if m1.lost:
        fail(f"m1 lost partitions: {m1.lost}\n{m1.state()}")

    prod.produce(200)
    m1.phase = "after"
    wait_until("every acked record consumed", lambda: consumed_indexes(everyone) >= set(prod.acked), [m1])

    # no loss, no duplicates, consumed where acked
    seen = {}
    dups = []
    for m in everyone:
        for (p, o, idx) in m.consumed:
            if idx in seen:
                dups.append((idx, seen[idx], (m.name, p, o)))
            seen[idx] = (m.name, p, o)
            if prod.acked.get(idx) != (p, o):
                fail(f"record {idx} consumed at p{p}/{o} but acked at {prod.acked.get(idx)}")
    ok(f"no record lost: {len(prod.acked)} acked, {len(seen)} distinct consumed, {len(dups)} duplicates")
    if dups:
        fail(f"{len(dups)} records consumed twice (commits not honoured across the rebalance?): {dups[:10]}\n"
             + "\n".join(m.state() for m in everyone))

    # committed == end offsets
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    ends = {p: m1.c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)}
    if sum(ends.values()) != len(prod.acked):
        fail(f"end offsets {ends} add up to {sum(ends.values())}, expected {len(prod.acked)}")
    deadline = time.monotonic() + 20
    while True:
        m1.poll(0.05)
        committed = {tp.partition: tp.offset for tp in m1.c.committed(tps, timeout=10)}
        if committed == ends:
            break
        if time.monotonic() > deadline:
            fail(f"committed offsets {committed} != end offsets {ends}\n{m1.state()}")
    ok(f"committed offsets = end offsets {ends}")

    m1.close()
    deadline = time.monotonic() + 20
    while True:
        desc = admin.describe_consumer_groups([group])[group].result(timeout=30)
        if desc.state == ConsumerGroupState.EMPTY and not desc.members:
            break
        if time.monotonic() > deadline:
            fail(f"group state {desc.state} with {len(desc.members)} members after every member closed, expected EMPTY")
        time.sleep(0.2)
    listed = admin.list_consumer_groups().result(timeout=30)
    mine = [g for g in listed.valid if g.group_id == group]
    if not mine or mine[0].state != ConsumerGroupState.EMPTY:
        fail(f"list_consumer_groups: {[(g.group_id, g.state) for g in listed.valid]}, expected {group} EMPTY")
    ok(f"all closed: group EMPTY (describe and list)")

    # a new member resumes after the commits
    new_first = prod.next
    new = prod.produce(40)
    m3 = Member("m3", args, group, topic, errors)
    m3.phase = "resume"
    wait_until("the resumed member consumes the 40 new records", lambda: consumed_indexes([m3]) >= set(new), [m3])
    for _ in range(10):
        m3.poll(0.05)
    firsts = {}
    for (p, o, idx) in m3.consumed:
        if idx < new_first:
            fail(f"resumed member re-read record {idx} at p{p}/{o}; committed offset was {ends[p]}")
        firsts.setdefault(p, o)
    if len(m3.consumed) != len(new):
        fail(f"resumed member consumed {len(m3.consumed)} records, expected {len(new)}")
    if firsts != ends:
        fail(f"resumed member started at {firsts}, expected the committed offsets {ends}")
    m3.close()
    ok(f"a new member resumed exactly at the committed offsets {firsts}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--assignor", default="range", choices=["range", "roundrobin", "cooperative-sticky"])
    ap.add_argument("--debug", default="", help="librdkafka debug contexts, e.g. cgrp,protocol")
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


if __name__ == "__main__":
    sys.exit(main())
