"""Migration with MirrorMaker 2: a workload moves from Apache Kafka 4.1 to Ketch (and back).

test_migrate_with_mm2[kafka-to-ketch] starts a real Apache Kafka 4.1 broker as the SOURCE cluster
(the way conftest starts the Kafka target, whatever KETCH_COMPAT_TARGET says) and a Ketch broker
as the TARGET; [ketch-to-kafka] is the way back; with KETCH_COMPAT_TARGET=kafka the only case is
[kafka-to-kafka], so every expectation below is first checked against Kafka alone.

On the source: a producer writes keyed records to `orders-*` (2 partitions, retention.ms set) and
to `ledger-*` (compacted: cleanup.policy=compact, segment.ms, min.cleanable.dirty.ratio; several
rounds per key, compacted on the source before the mirror starts, so its offsets have gaps); a
consumer group (subscribe, poll, commit) has read all of orders[0], the first CONSUMED records of
orders[1] and all of ledger[0].

MirrorMaker 2 (connect-mirror 4.1, `org.apache.kafka.connect.mirror.MirrorMaker`, as in
test_frameworks_mirror.py) with the IdentityReplicationPolicy (topic names kept, as a migration
wants) copies records, topic configs and the group's offsets. The test proves:
- the target has both topics under the same names and partition counts; orders: the same
  (offset, key, value) per partition; ledger: the same (key, value) sequence as the compacted
  source (dense offsets on the target: MM2 does not keep offset gaps);
- topic configs synced: retention.ms, cleanup.policy=compact, segment.ms, min.cleanable.dirty.ratio;
- the group's offsets translated (sync.group.offsets.enabled): exactly for caught-up partitions
  (orders[0]; ledger[0] although its source offsets have gaps: source end -> target end); for
  orders[1], 1..CONSUMED: MM2 translates a lagging commit to the offset after the nearest older
  offset sync it still holds (offset syncs are sparse: one per offset.lag.max=100 records at most,
  and the OffsetSyncStore keeps an exponentially spaced subset of them, KAFKA-14666), so the moved
  consumer re-reads `CONSUMED - translated` records: at-least-once, never a skipped record;
- cut-over (MM2 stopped): a producer continues on the target; a consumer of the same group on
  the target (auto.offset.reset=error) starts exactly at the translated offsets, reads every
  mirrored record after them and then the new ones, without a gap, and commits there;
- the compacted topic is compacted on the target: new values for ledger keys make the mirrored
  ones superseded, and the target's cleaner removes them (latest value per key kept, offsets kept).
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from conftest import TARGET, _reap
from frameworks_support import (committed, create_topics, mirror_maker_props, produce_all, read_to_end,
                                start_mirror_maker, topic_config, topics)

pytestmark = pytest.mark.timeout(600)  # pytest-timeout (requirements.txt)

PARTS, PER_PART, CONSUMED = 2, 500, 300
KEYS, ROUNDS, SEGMENT_MS = 20, 5, 700
NEW = 10  # records per orders partition written on the target after the cut-over
CLEANER = {"log.cleaner.backoff.ms": "500"}
LEDGER_CONFIG = {"cleanup.policy": "compact", "segment.ms": str(SEGMENT_MS), "min.cleanable.dirty.ratio": "0.01"}
ORDERS_CONFIG = {"retention.ms": "7200000"}

DIRECTIONS = [("kafka", "kafka")] if TARGET == "kafka" else [("kafka", "ketch"), ("ketch", "kafka")]


def wait_for(pred, timeout: float, what, fail, proc=None, every: float = 1.0):
    """Polls pred() (returns a truthy value when done) until timeout; fail(what()) otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline or (proc is not None and proc.poll() is not None):
            fail(what() if callable(what) else what)
        time.sleep(every)


def write_ledger_rounds(bootstrap: str, topic: str, rounds: range) -> None:
    """Round r writes value `<key>-r<r>` for every key; rounds are segment.ms apart (each its own
    segment), then a `roll` record closes the last round's segment so the cleaner may clean it."""
    for r in rounds:
        produce_all(bootstrap, topic, [(f"key{k}", f"key{k}-r{r}") for k in range(KEYS)])
        time.sleep(SEGMENT_MS * 1.5 / 1000)
    produce_all(bootstrap, topic, [("roll", f"roll-{rounds.stop}")])


def compacted(records, last_round: int) -> bool:
    """No value older than round `last_round` is left for any key."""
    return all(k == "roll" or v.endswith(f"-r{last_round}") for _, k, v in records)


@pytest.mark.parametrize("source_kind,target_kind", DIRECTIONS, ids=[f"{s}-to-{t}" for s, t in DIRECTIONS])
def test_migrate_with_mm2(start_broker, java_compat_jar, tmp_path, source_kind, target_kind):
    t0 = time.monotonic()
    stamp = lambda: f"{time.monotonic() - t0:.1f}s"  # noqa: E731
    source = start_broker(CLEANER, kind=source_kind)
    target = start_broker(CLEANER, kind=target_kind)
    s = uuid.uuid4().hex[:8]
    orders, ledger, group = f"orders-{s}", f"ledger-{s}", f"billing-{s}"
    create_topics(source.bootstrap, {orders: PARTS}, ORDERS_CONFIG)
    create_topics(source.bootstrap, {ledger: 1}, LEDGER_CONFIG)

    # --- the workload on the source -----------------------------------------------------------
    records = {p: [(f"o{p}-{i}", f"order{p}-{i}") for i in range(PER_PART)] for p in range(PARTS)}
    for p in range(PARTS):
        produce_all(source.bootstrap, orders, records[p], partition=p)
    write_ledger_rounds(source.bootstrap, ledger, range(ROUNDS))
    deadline = time.monotonic() + 90
    while not compacted(src_ledger := read_to_end(source.bootstrap, ledger), ROUNDS - 1):
        assert time.monotonic() < deadline, f"ledger not compacted on the {source_kind} source: {src_ledger[:5]}"
        time.sleep(1)
    ledger_end = src_ledger[-1][0] + 1
    assert len(src_ledger) == KEYS + 1 and ledger_end == KEYS * ROUNDS + 1, src_ledger
    print(f"source ({source_kind}): {PARTS}x{PER_PART} orders, ledger compacted to {len(src_ledger)} records "
          f"(end offset {ledger_end}) ({stamp()})")

    # the group reads part of the data and commits (a live member, then it leaves)
    src_commit = {(orders, 0): PER_PART, (orders, 1): CONSUMED, (ledger, 0): ledger_end}
    c = Consumer({"bootstrap.servers": source.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.subscribe([orders, ledger])
    seen: dict[tuple[str, int], int] = {}
    deadline = time.monotonic() + 60
    while any(seen.get(tp, -1) + 1 < end for tp, end in src_commit.items()):
        assert time.monotonic() < deadline, f"source consumer stuck at {seen}"
        for m in c.consume(500, timeout=0.5):
            assert not m.error(), m.error()
            seen[(m.topic(), m.partition())] = m.offset()
    c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in src_commit.items()], asynchronous=False)
    c.close()
    assert committed(source.bootstrap, group, list(src_commit)) == src_commit

    # --- MirrorMaker 2 --------------------------------------------------------------------------
    props = mirror_maker_props(source.bootstrap, target.bootstrap, f"orders-{s}|ledger-{s}", group,
                               **{"replication.policy.class":
                                  "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"})
    proc, _log, fail = start_mirror_maker(java_compat_jar, props, tmp_path)
    try:
        wait_for(lambda: (t := topics(target.bootstrap)).get(orders) == PARTS and t.get(ledger) == 1, 180,
                 lambda: f"{orders}/{ledger} not on the target: {sorted(topics(target.bootstrap))}", fail, proc)
        want_total = {(orders, p): PER_PART for p in range(PARTS)} | {(ledger, 0): len(src_ledger)}

        def mirrored():
            got = {tp: read_to_end(target.bootstrap, *tp) for tp in want_total}
            return got if all(len(got[tp]) >= n for tp, n in want_total.items()) else None

        dst = wait_for(mirrored, 180, lambda: f"records not mirrored to the {target_kind} target", fail, proc)
        for p in range(PARTS):
            want = [(i, k, v) for i, (k, v) in enumerate(records[p])]
            assert dst[(orders, p)] == want, f"{orders}[{p}] differs on the target (first 3: {dst[(orders, p)][:3]})"
        dst_ledger = dst[(ledger, 0)]
        assert [(k, v) for _, k, v in dst_ledger] == [(k, v) for _, k, v in src_ledger], \
            f"ledger differs: source {src_ledger[:3]}..., target {dst_ledger[:3]}..."
        assert [o for o, _, _ in dst_ledger] == list(range(len(src_ledger))), \
            f"target ledger offsets: {[o for o, _, _ in dst_ledger]}"
        print(f"mirrored: orders identical, ledger {len(dst_ledger)} records at offsets 0.. "
              f"(source offsets {src_ledger[0][0]}..{ledger_end - 1}) ({stamp()})")
        src_topics, dst_topics = topics(source.bootstrap), topics(target.bootstrap)
        assert "mm2-offset-syncs.target.internal" in src_topics, sorted(src_topics)
        for t in ("source.checkpoints.internal", "heartbeats"):
            assert t in dst_topics, f"{t} not on the target: {sorted(dst_topics)}"
        assert f"source.{orders}" not in dst_topics  # the identity policy keeps the names

        # topic configs synced (MM2 4.1 syncs non-default source configs every 2 s here)
        want_cfg = {orders: ORDERS_CONFIG, ledger: LEDGER_CONFIG}

        def configs_synced():
            have = {t: topic_config(target.bootstrap, t) for t in want_cfg}
            return all(have[t].get(k) == v for t, cfg in want_cfg.items() for k, v in cfg.items())

        wait_for(configs_synced, 60, lambda: "topic configs not synced: " + str(
            {t: {k: topic_config(target.bootstrap, t).get(k) for k in cfg} for t, cfg in want_cfg.items()}),
            fail, proc)

        # group offsets translated into the target
        dst_end = {(orders, p): PER_PART for p in range(PARTS)} | {(ledger, 0): len(src_ledger)}

        def translated():
            have = committed(target.bootstrap, group, list(src_commit))
            ok = (have[(orders, 0)] == PER_PART and 0 < have[(orders, 1)] <= CONSUMED
                  and have[(ledger, 0)] == dst_end[(ledger, 0)])
            return have if ok else None

        have = wait_for(translated, 120, lambda: f"group {group} on the target: "
                        f"{committed(target.bootstrap, group, list(src_commit))} (source {src_commit})", fail, proc)
        dups = CONSUMED - have[(orders, 1)]
        print(f"group offsets translated: {dict((f'{t[:6]}[{p}]', o) for (t, p), o in have.items())} "
              f"for source {dict((f'{t[:6]}[{p}]', o) for (t, p), o in src_commit.items())}: the moved consumer "
              f"re-reads {dups} records of {orders}[1] ({stamp()})")
    finally:
        _reap(proc, 15, 30)  # cut-over: the mirror stops, the source is no longer written

    # --- cut-over: the producer continues on the target ---------------------------------------
    new = {p: [(f"o{p}-{i}", f"order{p}-{i}") for i in range(PER_PART, PER_PART + NEW)] for p in range(PARTS)}
    for p in range(PARTS):
        produce_all(target.bootstrap, orders, new[p], partition=p)
    write_ledger_rounds(target.bootstrap, ledger, range(ROUNDS, ROUNDS + 1))
    ends = {(orders, p): PER_PART + NEW for p in range(PARTS)} | {(ledger, 0): len(src_ledger) + KEYS + 1}

    # --- ...and the consumer group moves: it resumes at the translated offsets -----------------
    c = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "error"})
    c.subscribe([orders, ledger])
    got: dict[tuple[str, int], list[tuple[int, str, str]]] = {tp: [] for tp in ends}
    deadline = time.monotonic() + 60
    while any((got[tp][-1][0] + 1 if got[tp] else 0) < end for tp, end in ends.items()):
        assert time.monotonic() < deadline, f"moved consumer stuck: {({tp: v[-1:] for tp, v in got.items()})}"
        for m in c.consume(500, timeout=0.5):
            assert not m.error(), f"moved consumer: {m.error()}"
            got[(m.topic(), m.partition())].append((m.offset(), m.key().decode(), m.value().decode()))
    c.commit(asynchronous=False)
    c.close()
    for p in range(PARTS):
        all_orders = records[p] + new[p]
        start = have[(orders, p)]
        want = [(i, *all_orders[i]) for i in range(start, PER_PART + NEW)]
        assert got[(orders, p)] == want, \
            f"moved consumer on {orders}[{p}]: first {got[(orders, p)][:2]}, expected from {start}: {want[:2]}"
    ledger_new = [(o, k, v) for o, k, v in read_to_end(target.bootstrap, ledger) if o >= len(src_ledger)]
    assert got[(ledger, 0)] == ledger_new and len(ledger_new) == KEYS + 1, got[(ledger, 0)][:3]
    assert committed(target.bootstrap, group, list(ends)) == ends
    print(f"moved consumer resumed at the translated offsets, read {sum(map(len, got.values()))} records "
          f"({dups} re-read), committed the new ends {sorted(ends.values())} ({stamp()})")

    # --- the compacted topic is compacted on the target ---------------------------------------
    deadline = time.monotonic() + 90
    while not compacted(dst_ledger := read_to_end(target.bootstrap, ledger), ROUNDS):
        assert time.monotonic() < deadline, \
            f"ledger not compacted on the {target_kind} target: {len(dst_ledger)} records, {dst_ledger[:3]}"
        time.sleep(1)
    kept = {k: (o, v) for o, k, v in dst_ledger}  # (the active segment's `roll` is not cleaned yet)
    assert len(kept) == len([r for r in dst_ledger if r[1] != "roll"]) + 1, f"a key kept twice: {dst_ledger}"
    for o, k, v in ledger_new:
        if k != "roll":
            assert kept[k] == (o, v), f"{k}: {kept.get(k)}, expected {(o, v)}"
    print(f"ledger compacted on the {target_kind} target: {len(dst_ledger)} records left ({stamp()})")
