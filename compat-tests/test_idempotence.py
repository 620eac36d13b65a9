"""Idempotent producers (enable.idempotence=true, acks=all, retries, 5 requests in flight) whose
requests are retried: the broker must deduplicate the retried batches (same producer id, epoch
and sequence numbers) and must not open gaps.

Every record carries its partition and a per-partition sequence number in its value
("p<partition>-<n>"); the producer (ketch.compat.TxnScenario seq-produce) checks that record n
of partition p was acknowledged at offset n, and a consumer then checks that each partition holds
exactly p-0, p-1, ... at offsets 0, 1, ... (a duplicate or a gap shows as the first difference).

Clients reach the broker through a TCP proxy (txn_support.TcpProxy, advertised by the broker) so
that the test can lose responses, cut connections and restart the broker (new port) under a
running producer.
"""

import re
import time
import uuid

from txn_support import (
    Dump,
    assert_values,
    java_cmd,
    java_dump,
    proxied_broker,  # noqa: F401  (fixture)
    watched,  # noqa: F401  (fixture)
)

PARTITIONS = 3


def acked(line: str) -> int:
    m = re.search(r"acked=(\d+)", line)
    return int(m.group(1)) if m else -1


def check_log(jar, bootstrap, topic, count):
    """Every partition holds exactly its sequence 0..n-1 at offsets 0..n-1."""
    per = {p: len(range(p, count, PARTITIONS)) for p in range(PARTITIONS)}
    d: Dump = java_dump(jar, bootstrap, topic, "read_uncommitted")
    for p in range(PARTITIONS):
        assert_values(d, p, [f"p{p}-{n}" for n in range(per[p])], "log after retries (duplicates or gaps?)")
        assert d.offsets(p) == list(range(per[p])), f"partition {p}: offsets are not 0..{per[p] - 1}"
        assert d.end[p] == per[p], f"partition {p}: end offset {d.end[p]}, expected {per[p]}"


def retries_of(out: str) -> int:
    m = re.search(r"record-retry-total=(-?\d+)", out)
    return int(m.group(1)) if m else -1


def test_idempotent_producer_lost_responses(proxied_broker, java_compat_jar, watched):
    """Twice while the producer runs, the proxy swallows the broker's responses for 1.5 s (the
    requests are written to the log) and then cuts every connection: the producer resends the
    unacknowledged batches with their original sequence numbers, and the broker must answer them
    as duplicates (success, original offsets) instead of appending them again."""
    proxy, broker = proxied_broker
    topic = f"idem-lost-acks-{uuid.uuid4().hex[:8]}"
    count = 24000
    p = watched(java_cmd(java_compat_jar, proxy.address, "seq-produce", topic, PARTITIONS, count, 4000),
                "seq-produce")
    for threshold in (3000, 12000):
        p.wait_line(lambda l: acked(l) >= threshold, 90, f"progress acked>={threshold}")
        proxy.drop_responses = True
        time.sleep(1.5)
        n = proxy.cut()
        proxy.drop_responses = False
        print(f"dropped responses for 1.5 s, then cut {n} connections; {proxy.stats()}")
    rc = p.wait(150)
    out = p.output()
    print(out[-3000:])
    assert rc == 0, f"seq-produce exited {rc}\n{out}"
    assert "seq-produce ok" in out, out
    assert proxy.dropped_bytes > 0, "no response was dropped: the scenario did not exercise retries"
    assert retries_of(out) > 0, f"the producer reports no retried record (record-retry-total): {out[-2000:]}"
    check_log(java_compat_jar, proxy.address, topic, count)


def test_idempotent_producer_across_broker_kill9(proxied_broker, java_compat_jar, watched):
    """The broker is killed (SIGKILL) under a running idempotent producer (its responses swallowed
    for 0.7 s before) and restarted on the same data dir: batches in flight at the kill are retried against the restarted broker, which
    must have rebuilt its producer state (ids, epochs, last sequences) from the log and answer
    the batches it already has as duplicates; nothing may be lost or duplicated."""
    proxy, broker = proxied_broker
    topic = f"idem-kill9-{uuid.uuid4().hex[:8]}"
    count = 20000
    p = watched(java_cmd(java_compat_jar, proxy.address, "seq-produce", topic, PARTITIONS, count, 3000, 1),
                "seq-produce")
    p.wait_line(lambda l: acked(l) >= 4000, 90, "progress acked>=4000")
    # swallow responses for a moment first: batches are then certainly written but unacknowledged
    # when the broker dies, and their retries hit the restarted broker
    proxy.drop_responses = True
    time.sleep(0.7)
    broker.kill9()
    proxy.drop_responses = False
    proxy.set_upstream(None)
    proxy.cut()
    t0 = time.monotonic()
    broker.restart()
    proxy.set_upstream(broker.bootstrap)
    print(f"broker killed and restarted in {time.monotonic() - t0:.1f}s (now {broker.bootstrap}); {proxy.stats()}")
    rc = p.wait(170)
    out = p.output()
    print(out[-3000:])
    assert rc == 0, f"seq-produce exited {rc}\n{out}"
    assert "seq-produce ok" in out, out
    assert retries_of(out) > 0, f"the producer reports no retried record (record-retry-total): {out[-2000:]}"
    check_log(java_compat_jar, proxy.address, topic, count)
