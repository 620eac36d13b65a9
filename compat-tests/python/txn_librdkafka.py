#!/usr/bin/env python3
"""librdkafka (confluent-kafka) transactional producer scenarios against a Kafka-compatible broker.

Subcommands (each prints ``ok ...`` per step, ``FAIL: ...`` on stderr and exit 1 on the first
mismatch, ``PASS`` at the end):

  commit-abort  transactions committed and aborted across 3 partitions (init_transactions,
                begin_transaction, produce, commit_transaction / abort_transaction); a read_committed
                consumer sees exactly the committed records in order, a read_uncommitted one every
                data record; end offsets account for one control record per transaction and partition.
  fence         a second producer with the same transactional.id fences the first: with a
                transaction open (the zombie's commit fails with a fatal fenced error) and between
                transactions (the zombie's next transaction fails, fatally fenced).
  ctp           consume-transform-produce in a consumer group (subscribe, read_committed):
                produce the transformed batch, send_offsets_to_transaction(positions,
                consumer_group_metadata()), commit -- every third transaction aborted and the
                consumer rewound to its committed offsets; the output (read_committed) must hold
                every input record exactly once, in order, and the group's offsets the input's end.
  dump          print {"end":{..}} and one {"p","o","k","v"} JSON line per record (--isolation).

Usage: txn_librdkafka.py --bootstrap 127.0.0.1:9092 <subcommand> [--topic T] [--debug eos,protocol]
"""

import argparse
import json
import sys
import time
import traceback
import uuid

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 3
T0 = time.monotonic()


class Fail(Exception):
    pass


def ok(msg):
    print(f"ok   {time.monotonic() - T0:6.2f}s  {msg}", flush=True)


def fail(msg):
    raise Fail(msg)


def check(cond, msg):
    if not cond:
        fail(msg)


class Errors:
    """error_cb: client-level errors are printed; the scenario decides what is acceptable."""

    def __init__(self, name):
        self.name = name
        self.seen = []

    def __call__(self, err):
        self.seen.append(err)
        print(f"note {self.name} client error: {err}", file=sys.stderr, flush=True)


def conf(args, name, **extra):
    c = {
        "bootstrap.servers": args.bootstrap,
        "client.id": f"ketch-compat-librdkafka-{name}",
        "error_cb": Errors(name),
        "socket.timeout.ms": 10000,
    }
    if args.debug:
        c["debug"] = args.debug
    c.update(extra)
    return c


def txn_producer(args, name, tid):
    return Producer(conf(args, name, **{
        "transactional.id": tid,
        "transaction.timeout.ms": 60000,
        "linger.ms": 5,
        "message.timeout.ms": 60000,
    }))


def create_topic(args, topic, partitions):
    admin = AdminClient(conf(args, "admin"))
    fut = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                              operation_timeout=30, request_timeout=30)[topic]
    try:
        fut.result(timeout=60)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            fail(f"create topic {topic}: {e.args[0]}")
    deadline = time.time() + 60
    while True:
        md = admin.list_topics(topic=topic, timeout=10)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
                p.leader >= 0 and p.error is None for p in t.partitions.values()):
            break
        check(time.time() < deadline, f"topic {topic} not ready in metadata")
        time.sleep(0.1)
    ok(f"topic {topic} with {partitions} partitions")


def await_stable(args, topic, partitions, seconds=15):
    """Wait until the last stable offsets equal the high watermarks (bounded): EndTxn is answered before
    the markers are written, so right after a commit the LSO may lag a moment."""
    deadline = time.time() + seconds
    while True:
        lso = watermarks(args, topic, partitions, "read_committed")
        hw = watermarks(args, topic, partitions, "read_uncommitted")
        if lso == hw:
            return
        check(time.time() < deadline, f"{topic}: last stable offsets {lso} still below the high watermarks {hw} "
                                      f"{seconds}s after the last transaction ended")
        time.sleep(0.05)


def read_all(args, topic, isolation, partitions, linger=0.3, stable=True):
    """Read every partition from the beginning to its end (partition EOF: the high watermark for
    read_uncommitted, the last stable offset for read_committed). Returns ({p: [(o,k,v)]}, {p: eof}).
    stable: no transaction is open, wait for the LSO to reach the high watermark first."""
    if stable and isolation == "read_committed":
        await_stable(args, topic, partitions)
    c = Consumer(conf(args, isolation, **{
        "group.id": f"ketch-compat-reader-{uuid.uuid4().hex[:8]}",  # never joins: assign() only
        "enable.auto.commit": False,
        "isolation.level": isolation,
        "enable.partition.eof": True,
        "fetch.wait.max.ms": 100,
    }))
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got = {p: [] for p in range(partitions)}
        eof = {}
        deadline = time.time() + 60
        while len(eof) < partitions:
            check(time.time() < deadline, f"{isolation}: no end of partition for {sorted(set(range(partitions)) - set(eof))} "
                                          f"within 60s; read {[len(v) for v in got.values()]}")
            for m in c.consume(num_messages=500, timeout=0.5):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        eof[m.partition()] = m.offset()
                        continue
                    fail(f"{isolation} consumer error: {m.error()}")
                got[m.partition()].append((m.offset(), m.key(), m.value()))
                eof.pop(m.partition(), None)
        end = time.time() + linger
        while time.time() < end:
            for m in c.consume(num_messages=500, timeout=0.1):
                if not m.error():
                    got[m.partition()].append((m.offset(), m.key(), m.value()))
        return got, eof
    finally:
        c.close()


def watermarks(args, topic, partitions, isolation="read_uncommitted"):
    c = Consumer(conf(args, "watermarks", **{"group.id": "ketch-compat-unused", "isolation.level": isolation}))
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=20, cached=False)
                for p in range(partitions)}
    finally:
        c.close()


def expect_values(what, p, have, want):
    offs = [o for o, _, _ in have]
    check(offs == sorted(set(offs)), f"{what} partition {p}: offsets not increasing: {offs[:40]}")
    hv = [v.decode() if v is not None else None for _, _, v in have]
    if hv != want:
        i = 0
        while i < len(hv) and i < len(want) and hv[i] == want[i]:
            i += 1
        fail(f"{what} partition {p}: read {len(hv)} records, expected {len(want)}; first difference at #{i}: "
             f"read {hv[i] if i < len(hv) else '<end>'!r} (offset {offs[i] if i < len(offs) else '-'}), "
             f"expected {want[i] if i < len(want) else '<end>'!r}; read {list(zip(offs, hv))[:60]}")


def produce_all(p, topic, recs, what):
    """Produce (partition, key, value) triples, flush, fail on any delivery error."""
    errs = []

    def dr(err, msg):
        if err is not None:
            errs.append(err)

    for part, k, v in recs:
        while True:
            try:
                p.produce(topic, key=k, value=v, partition=part, on_delivery=dr)
                break
            except BufferError:
                p.poll(0.05)
    left = p.flush(60)
    check(left == 0, f"{what}: {left} records not delivered within 60s")
    return errs


# ------------------------------------------------------------------------------------------------
# commit-abort
# ------------------------------------------------------------------------------------------------


def commit_abort(args):
    topic = args.topic or f"rdk-txn-{uuid.uuid4().hex[:8]}"
    create_topic(args, topic, PARTITIONS)
    tid = f"ketch-rdk-txn-{uuid.uuid4().hex[:8]}"
    p = txn_producer(args, "txn", tid)
    p.init_transactions(60)
    ok(f"init_transactions ({tid})")
    plan = [True, False, False, True, True, False, True]
    per = 20
    committed = {q: [] for q in range(PARTITIONS)}
    every = {q: [] for q in range(PARTITIONS)}
    markers = {q: 0 for q in range(PARTITIONS)}
    for t, commit in enumerate(plan):
        parts = 2 if t == 4 else PARTITIONS
        p.begin_transaction()
        recs = []
        for i in range(per):
            for q in range(parts):
                v = f"txn{t}-{'commit' if commit else 'abort'}-p{q}-{i}"
                recs.append((q, f"t{t}-{i}".encode(), v.encode()))
                every[q].append(v)
                if commit:
                    committed[q].append(v)
        errs = produce_all(p, topic, recs, f"transaction {t}")
        check(not errs, f"transaction {t}: delivery errors {errs[:3]}")
        if commit:
            p.commit_transaction(60)
        else:
            p.abort_transaction(60)
        for q in range(parts):
            markers[q] += 1
        ok(f"transaction {t}: {len(recs)} records on {parts} partitions, {'committed' if commit else 'aborted'}")

    rc, rc_eof = read_all(args, topic, "read_committed", PARTITIONS)
    ru, ru_eof = read_all(args, topic, "read_uncommitted", PARTITIONS)
    wm = watermarks(args, topic, PARTITIONS)
    for q in range(PARTITIONS):
        expect_values("read_committed", q, rc[q], committed[q])
        expect_values("read_uncommitted", q, ru[q], every[q])
        hw = len(every[q]) + markers[q]
        check(wm[q] == (0, hw), f"partition {q}: watermarks {wm[q]}, expected (0, {hw}) = data records + "
                                f"{markers[q]} control records")
        check(rc_eof[q] == hw and ru_eof[q] == hw, f"partition {q}: end of partition at {rc_eof[q]} "
                                                   f"(read_committed) / {ru_eof[q]} (read_uncommitted), expected {hw}")
    ok(f"read_committed: exactly the committed records {[len(v) for v in committed.values()]}; read_uncommitted: "
       f"all data records {[len(v) for v in every.values()]}; high watermarks {[wm[q][1] for q in range(PARTITIONS)]}")

    # an open transaction holds read_committed back at the last stable offset
    lso = wm[0][1]
    p.begin_transaction()
    errs = produce_all(p, topic, [(0, b"open", f"open-p0-{i}".encode()) for i in range(5)], "open transaction")
    check(not errs, f"open transaction: delivery errors {errs[:3]}")
    plain = Producer(conf(args, "plain", **{"enable.idempotence": True, "acks": "all"}))
    errs = produce_all(plain, topic, [(0, b"plain", f"plain-p0-{i}".encode()) for i in range(5)], "plain records")
    check(not errs, f"plain records: delivery errors {errs[:3]}")
    rc, rc_eof = read_all(args, topic, "read_committed", PARTITIONS, linger=1.0, stable=False)
    expect_values("read_committed with a transaction open (must stop at the LSO)", 0, rc[0], committed[0])
    check(rc_eof[0] == lso, f"read_committed end of partition 0 at {rc_eof[0]}, expected the LSO {lso}")
    ru, ru_eof = read_all(args, topic, "read_uncommitted", PARTITIONS)
    opened = [f"open-p0-{i}" for i in range(5)]
    plains = [f"plain-p0-{i}" for i in range(5)]
    expect_values("read_uncommitted with a transaction open", 0, ru[0], every[0] + opened + plains)
    ok(f"transaction open at offset {lso}: read_committed stops there, read_uncommitted reads to {ru_eof[0]}")
    p.commit_transaction(60)
    rc, rc_eof = read_all(args, topic, "read_committed", PARTITIONS)
    expect_values("read_committed after the commit", 0, rc[0], committed[0] + opened + plains)
    ok("after the commit read_committed sees the transaction and the records after it")
    print("PASS", flush=True)


# ------------------------------------------------------------------------------------------------
# fence
# ------------------------------------------------------------------------------------------------


def describe(e):
    err = e.args[0] if isinstance(e, KafkaException) and e.args else None
    if isinstance(err, KafkaError):
        return (f"{err.name()} ({err.code()}) fatal={err.fatal()} retriable={err.retriable()} "
                f"txn_requires_abort={err.txn_requires_abort()}: {err.str()}")
    return repr(e)


FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}


def is_fenced(e):
    err = e.args[0] if isinstance(e, KafkaException) and e.args else None
    return isinstance(err, KafkaError) and err.fatal() and err.code() in FENCED


def fence(args):
    topic = args.topic or f"rdk-fence-{uuid.uuid4().hex[:8]}"
    create_topic(args, topic, PARTITIONS)
    committed, every = [], []

    # case 1: transaction open when the new producer initializes
    tid = f"ketch-rdk-fence-{uuid.uuid4().hex[:8]}"
    zombie = txn_producer(args, "zombie", tid)
    zombie.init_transactions(60)
    zombie.begin_transaction()
    errs = produce_all(zombie, topic, [(0, b"z", f"zombie-open-{i}".encode()) for i in range(3)], "zombie")
    check(not errs, f"zombie produce: {errs}")
    every += [f"zombie-open-{i}" for i in range(3)]
    fresh = txn_producer(args, "fresh", tid)
    t = time.monotonic()
    fresh.init_transactions(60)
    ok(f"producer 2 with the same transactional.id initialized in {time.monotonic() - t:.2f}s")
    try:
        zombie.commit_transaction(30)
        fail("the fenced producer's commit_transaction succeeded")
    except KafkaException as e:
        ok(f"fenced producer commit_transaction: {describe(e)}")
        check(is_fenced(e), f"fenced producer's commit failed with {describe(e)}, expected a fatal fenced error "
                            f"(_FENCED / PRODUCER_FENCED / INVALID_PRODUCER_EPOCH)")
    fresh.begin_transaction()
    errs = produce_all(fresh, topic, [(0, b"f", f"fresh-{i}".encode()) for i in range(3)], "fresh")
    check(not errs, f"fresh produce: {errs}")
    fresh.commit_transaction(60)
    committed += [f"fresh-{i}" for i in range(3)]
    every += [f"fresh-{i}" for i in range(3)]
    ok("producer 2 committed 3 records")

    # case 2: fenced between transactions
    tid2 = tid + "-b"
    zombie2 = txn_producer(args, "zombie2", tid2)
    zombie2.init_transactions(60)
    zombie2.begin_transaction()
    errs = produce_all(zombie2, topic, [(0, b"z2", b"zombie2-committed")], "zombie2")
    check(not errs, f"zombie2 produce: {errs}")
    zombie2.commit_transaction(60)
    committed.append("zombie2-committed")
    every.append("zombie2-committed")
    fresh2 = txn_producer(args, "fresh2", tid2)
    fresh2.init_transactions(60)
    ok("producer 3 committed one record, then producer 4 with the same transactional.id initialized")
    outcome = []
    fenced = False
    try:
        zombie2.begin_transaction()
        errs = produce_all(zombie2, topic, [(0, b"z2", b"zombie2-late")], "zombie2 late")
        outcome.append(f"delivery errors: {[str(e) for e in errs]}")
        zombie2.commit_transaction(30)
        outcome.append("commit ok")
    except KafkaException as e:
        outcome.append(f"raised {describe(e)}")
        fenced = is_fenced(e)
        if not fenced and e.args[0].txn_requires_abort():
            try:
                zombie2.abort_transaction(30)
                outcome.append("abort ok")
            except KafkaException as e2:
                outcome.append(f"abort raised {describe(e2)}")
                fenced = is_fenced(e2)
    ok(f"fenced producer 3's next transaction: {'; '.join(outcome)}")
    check(fenced, f"producer 3 was not reported fenced (fatal _FENCED/PRODUCER_FENCED): {'; '.join(outcome)}")
    fresh2.begin_transaction()
    errs = produce_all(fresh2, topic, [(0, b"f2", b"fresh2")], "fresh2")
    check(not errs, f"fresh2 produce: {errs}")
    fresh2.commit_transaction(60)
    committed.append("fresh2")
    every.append("fresh2")

    rc, _ = read_all(args, topic, "read_committed", PARTITIONS, linger=0.5)
    expect_values("read_committed after fencing", 0, rc[0], committed)
    ru, _ = read_all(args, topic, "read_uncommitted", PARTITIONS)
    have = [v.decode() for _, _, v in ru[0]]
    check([v for v in have if v != "zombie2-late"] == every,
          f"read_uncommitted after fencing: {have}, expected {every} (plus possibly zombie2-late)")
    ok(f"read_committed: {committed}")
    print("PASS", flush=True)


# ------------------------------------------------------------------------------------------------
# ctp: consume-transform-produce in a group
# ------------------------------------------------------------------------------------------------


def ctp(args):
    suffix = uuid.uuid4().hex[:8]
    src, dst, group = f"rdk-ctp-in-{suffix}", f"rdk-ctp-out-{suffix}", f"rdk-ctp-group-{suffix}"
    parts, per = 2, 1500
    create_topic(args, src, parts)
    create_topic(args, dst, parts)
    plain = Producer(conf(args, "input", **{"enable.idempotence": True, "acks": "all", "linger.ms": 5}))
    errs = produce_all(plain, src, [(q, None, f"in-p{q}-{n}".encode()) for n in range(per) for q in range(parts)],
                       "input")
    check(not errs, f"input: delivery errors {errs[:3]}")
    ok(f"{parts * per} input records produced")

    consumer = Consumer(conf(args, "ctp-consumer", **{
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "session.timeout.ms": 10000,
        "fetch.wait.max.ms": 100,
    }))
    producer = txn_producer(args, "ctp-producer", f"ketch-rdk-ctp-{suffix}")
    producer.init_transactions(60)
    consumer.subscribe([src])
    txns = commits = aborts = 0
    deadline = time.time() + 100
    ends = {q: per for q in range(parts)}
    done = False
    # next offset to consume per input partition, as the application tracks it (librdkafka's position()
    # is unset for a partition after a seek until a message of it is consumed)
    nxt = {}
    while not done:
        if time.time() > deadline:
            assignment = consumer.assignment()
            fail(f"consume-transform-produce not done within 100s ({commits} commits, {aborts} aborts); "
                 f"assignment {[(tp.topic, tp.partition) for tp in assignment]}, next offsets {nxt}, positions "
                 f"{[(tp.partition, tp.offset) for tp in consumer.position(assignment)]}, committed "
                 f"{[(tp.partition, tp.offset) for tp in consumer.committed(assignment, timeout=10)]}, "
                 f"input end offsets {ends}")
        msgs = consumer.consume(num_messages=100, timeout=0.5)
        msgs = [m for m in msgs if not m.error() or fail(f"consumer error: {m.error()}")]
        if not msgs:
            continue
        producer.begin_transaction()
        out = [(m.partition(), m.key(), b"x:" + m.value()) for m in msgs]
        errs = produce_all(producer, dst, out, f"transaction {txns}")
        check(not errs, f"transaction {txns}: delivery errors {errs[:3]}")
        for m in msgs:
            check(m.offset() == nxt.get(m.partition(), m.offset()),
                  f"input partition {m.partition()}: consumed offset {m.offset()}, expected {nxt.get(m.partition())}")
            nxt[m.partition()] = m.offset() + 1
        offsets = [TopicPartition(src, q, o) for q, o in sorted(nxt.items())]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
        if txns % 3 == 2:
            producer.abort_transaction(60)
            aborts += 1
            # rewind to the committed offsets: the aborted batch is consumed again
            for tp in consumer.committed(consumer.assignment(), timeout=30):
                back = tp.offset if tp.offset >= 0 else 0
                consumer.seek(TopicPartition(src, tp.partition, back))
                nxt[tp.partition] = back
        else:
            producer.commit_transaction(60)
            commits += 1
            done = all(nxt.get(q) == ends[q] for q in range(parts))
        txns += 1
    ok(f"{commits} transactions committed, {aborts} aborted (and re-consumed)")
    committed = {tp.partition: tp.offset for tp in
                 consumer.committed([TopicPartition(src, q) for q in range(parts)], timeout=30)}
    consumer.close()
    check(committed == ends, f"group {group} committed offsets {committed}, expected {ends}")
    rc, _ = read_all(args, dst, "read_committed", parts)
    ru, _ = read_all(args, dst, "read_uncommitted", parts)
    extra = 0
    for q in range(parts):
        expect_values("output read_committed (each input record exactly once, in order)", q, rc[q],
                      [f"x:in-p{q}-{n}" for n in range(per)])
        extra += len(ru[q]) - len(rc[q])
    check(extra > 0, "no aborted copies in the output log (read_uncommitted): the aborts wrote nothing?")
    ok(f"output: every input record exactly once (read_committed); {extra} aborted copies in the log")
    print("PASS", flush=True)


def dump(args):
    # number of partitions from metadata
    admin = AdminClient(conf(args, "admin"))
    md = admin.list_topics(topic=args.topic, timeout=20)
    n = len(md.topics[args.topic].partitions)
    got, eof = read_all(args, args.topic, args.isolation, n, linger=0, stable=True)
    print(json.dumps({"end": {str(p): eof[p] for p in sorted(eof)}}))
    for p in sorted(got):
        for o, k, v in got[p]:
            print(json.dumps({"p": p, "o": o, "k": k.decode() if k is not None else None,
                              "v": v.decode() if v is not None else None}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--debug", default="")
    ap.add_argument("--topic", default="")
    ap.add_argument("--isolation", default="read_committed")
    ap.add_argument("command", choices=["commit-abort", "fence", "ctp", "dump"])
    args = ap.parse_args()
    try:
        {"commit-abort": commit_abort, "fence": fence, "ctp": ctp, "dump": dump}[args.command](args)
    except Fail as e:
        print(f"FAIL: {e}", file=sys.stderr, flush=True)
        sys.exit(1)
    except KafkaException as e:
        print(f"FAIL: client exception {describe(e)}", file=sys.stderr, flush=True)
        traceback.print_exc()
        sys.exit(2)
    except Exception:
        print("FAIL: exception", file=sys.stderr, flush=True)
        traceback.print_exc()
        sys.exit(2)


if __name__ == "__main__":
    main()
