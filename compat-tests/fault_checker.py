"""The fault suite's history and checker (issue 15): what a workload under faults did, and which of
the anomaly classes of the Jepsen analyses of Kafka, Redpanda and Bufstream it shows.

A history is a list of events (kept as JSON lines next to the run's logs, so a run can be checked
again, or by hand, without rerunning it):

- ``{"type": "send", "producer": P, "value": V, "partition": p, "status": S, "offset": o, "t": ms}``:
  one produce. ``ok``: acknowledged at offset ``o``; ``fail``: definitely not written (an error the
  client knows was not appended, e.g. a refused request); ``info``: indeterminate (a timeout, a lost
  connection: it may or may not be in the log).
  A send may also carry ``"key"`` (its record's key), ``"timestamp": [type, ms]`` (what the
  delivery report said: for a LogAppendTime topic the leader's append time from the produce
  response; types as confluent-kafka's, 1 CreateTime, 2 LogAppendTime), and ``"sent_ms"`` /
  ``"report_ms"`` (wall-clock time of the produce call and of the report).
- ``{"type": "txn", "txn": id, "writes": [[p, V], ...], "status": "commit" | "abort" | "info"}``:
  one transaction's writes and its outcome (``info``: the commit's answer was lost).
- ``{"type": "poll", "consumer": C, "session": s, "records": [[p, o, V], ...], "isolation": I}``:
  what one poll of consumer C returned; a session ends at a rebalance, a seek or a restart (within
  one, positions only move forward). A record may go on with ``K, type, ms``: its key and
  timestamp.
- ``{"type": "read", "partition": p, "records": [[o, V], ...]}``: the final read of a whole
  partition, from its start, after the faults stopped (read_committed); a record may go on with
  ``K, type, ms`` as in a poll.
- ``{"type": "topic", "topic": T, "partitions": n, "config": {...}}``: a topic's configs, for
  partitions named ``T:<n>``: ``cleanup.policy`` with ``compact`` (the cleaner may remove a
  record once a later one has its key) and ``message.timestamp.type`` change what is checked.
- ``{"type": "fault", "fault": F, "node": n, "from_ms": a, "to_ms": b}``: a fault the nemesis held
  from ``a`` to ``b``; ``note`` and ``error`` events carry what a worker said.

Values are unique per history (a producer id and a counter): where a value sits tells everything.

Anomalies reported (each a list of examples):

- ``lost``: an acknowledged value not in the final read (not for a compacted topic: see ``lost_key``).
- ``lost_key``: on a compacted topic, a key whose latest acknowledged write is not in the final
  read, nor superseded there by a later write of the key (the cleaner keeps each key's latest
  record: the last record of the key in the final read must be at or after the latest offset
  acknowledged for it).
- ``moved``: an acknowledged value read (finally or by a consumer) at another offset (or partition)
  than acknowledged (an acknowledgement without an offset: at another partition; they are counted).
- ``wrong_key``: a record read with another key than it was written with.
- ``duplicated``: a value at two offsets of the final read (an idempotent producer never makes one).
- ``nonmonotonic``: within one consumer session, a partition's offsets going back or repeating; in
  the final read, a partition's offsets not strictly increasing.
- ``skipped``: within one consumer session, a record of the log between two consecutive offsets a
  consumer got from a partition (it was never returned to that session; transaction markers
  and aborted records excepted under read_committed).
- ``aborted_read``: a read_committed poll, or the final read, returning a write of an aborted
  transaction.
- ``torn``: a committed transaction some of whose writes are in the final read and others not, or a
  committed transaction's write missing altogether.
- ``phantom``: a value in the final read or consumed that no send or transaction wrote (or a
  failed send's).
- ``timestamp``: on a LogAppendTime topic, a record read with another timestamp type, a record
  whose timestamp differs between two reads (replicas must keep the leader's append time), or
  from the append time its acknowledgement reported, or outside the time between its produce
  call and its acknowledgement (same clock: the test and the brokers run on one machine), or an
  acknowledgement without a LogAppendTime; on another topic named by a ``topic`` event, a record
  read with a LogAppendTime.

Also reported: counts, and unavailability windows (gaps of at least ``gap_ms`` between consecutive
acknowledgements, with their start and end, and the faults held during them).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def save(path: Path, events: list[dict]) -> None:
    path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events))


# Slack on the wall-clock window a LogAppendTime must fall in (the test's and the brokers' clocks are
# one; this only absorbs rounding and the time librdkafka takes to stamp a message).
APPEND_TIME_SLACK_MS = 1000
LOG_APPEND_TIME = 2  # confluent_kafka.TIMESTAMP_LOG_APPEND_TIME
NO_KEY = object()  # a record kept without its key (an older history)


def _topic_of(partition) -> str:
    return str(partition).rsplit(":", 1)[0]


def _observations(polls: list[dict], reads: dict) -> list[tuple]:
    """Every record read, finally or by a consumer: (where, partition, offset, value, key, timestamp
    type, timestamp); key NO_KEY and timestamps None when the history did not keep them."""
    out = []
    for p, records in reads.items():
        for r in records:
            out.append(("final read", p, r[0], r[1], r[2] if len(r) > 2 else NO_KEY,
                        r[3] if len(r) > 3 else None, r[4] if len(r) > 4 else None))
    for poll in polls:
        for r in poll["records"]:
            out.append((f"consumer {poll['consumer']}", r[0], r[1], r[2], r[3] if len(r) > 3 else NO_KEY,
                        r[4] if len(r) > 4 else None, r[5] if len(r) > 5 else None))
    return out


def check(events: list[dict], gap_ms: int = 1000) -> dict:
    sends = [e for e in events if e["type"] == "send"]
    txns = [e for e in events if e["type"] == "txn"]
    polls = [e for e in events if e["type"] == "poll"]
    reads = {e["partition"]: [list(r) for r in e["records"]] for e in events if e["type"] == "read"}
    topics = {e["topic"]: e.get("config", {}) for e in events if e["type"] == "topic"}

    def compacted(p) -> bool:
        return "compact" in topics.get(_topic_of(p), {}).get("cleanup.policy", "")

    def log_append_time(p) -> bool | None:
        """True / False for a partition of a topic the history describes, else None."""
        if _topic_of(p) not in topics:
            return None
        return topics[_topic_of(p)].get("message.timestamp.type") == "LogAppendTime"

    where: dict[str, list[tuple[int, int]]] = defaultdict(list)  # value -> [(partition, offset)]
    for p, records in reads.items():
        for r in records:
            where[r[1]].append((p, r[0]))
    found = {"lost": [], "lost_key": [], "moved": [], "wrong_key": [], "duplicated": [], "nonmonotonic": [],
             "skipped": [], "aborted_read": [], "torn": [], "phantom": [], "timestamp": []}
    observed = _observations(polls, reads)
    sent = {s["value"]: s for s in sends}

    for value, places in where.items():
        if len(places) > 1:
            found["duplicated"].append({"value": value, "at": sorted(places)})
    for s in sends:
        if s["status"] != "ok":
            continue
        places = where.get(s["value"], [])
        if not places:
            if not compacted(s["partition"]):
                found["lost"].append({"value": s["value"], "partition": s["partition"], "offset": s["offset"]})
        elif not at_acked_place(s, places):
            found["moved"].append({"value": s["value"], "acked": [s["partition"], s["offset"]], "read": sorted(places)})
    for source, p, offset, value, key, _, _ in observed:
        s = sent.get(value)
        if s is None:
            continue
        if source != "final read" and s["status"] == "ok" and not at_acked_place(s, [(p, offset)]):
            found["moved"].append({"value": value, "acked": [s["partition"], s["offset"]], "read": [p, offset],
                                   "in": source})
        if key is not NO_KEY and key != s.get("key"):
            found["wrong_key"].append({"value": value, "written_with": s.get("key"), "read_with": key,
                                       "at": [p, offset], "in": source})

    # Compacted partitions: per key, the last record of the final read at or after the latest
    # acknowledged offset (a later write of the key, acknowledged or not, may have superseded it).
    latest_acked: dict[tuple, dict] = {}
    for s in sends:
        if s["status"] == "ok" and compacted(s["partition"]) and "key" in s:
            k = (s["partition"], s["key"])
            if k not in latest_acked or s["offset"] > latest_acked[k]["offset"]:
                latest_acked[k] = s
    last_read: dict[tuple, list] = {}
    for p, records in reads.items():
        if not compacted(p):
            continue
        for r in records:
            key = r[2] if len(r) > 2 else sent.get(r[1], {}).get("key")
            if (p, key) not in last_read or r[0] > last_read[(p, key)][0]:
                last_read[(p, key)] = r
    for (p, key), s in sorted(latest_acked.items()):
        r = last_read.get((p, key))
        if r is None or r[0] < s["offset"]:
            found["lost_key"].append({"partition": p, "key": key, "acked": [s["offset"], s["value"]],
                                      "read": None if r is None else [r[0], r[1]]})

    aborted = {v for t in txns if t["status"] == "abort" for _, v in t["writes"]}
    for t in txns:
        # A write on a compacted topic may be gone for a later write of its key: counted as present.
        present = [v for p, v in t["writes"] if v in where or compacted(p)]
        if t["status"] == "commit" and len(present) < len(t["writes"]):
            found["torn"].append({"txn": t["txn"], "present": len(present), "writes": len(t["writes"])})
        elif t["status"] == "info" and 0 < len(present) < len(t["writes"]):
            found["torn"].append({"txn": t["txn"], "present": len(present), "writes": len(t["writes"]),
                                  "outcome": "unknown"})
    for value in where.keys() & aborted:
        found["aborted_read"].append({"value": value, "in": "final read", "at": sorted(where[value])})

    written = {s["value"] for s in sends if s["status"] != "fail"} | {v for t in txns for _, v in t["writes"]}
    for value in where.keys() - written:
        found["phantom"].append({"value": value, "at": sorted(where[value])})
    for source, p, offset, value, _, _, _ in observed:
        if source != "final read" and value not in written:
            found["phantom"].append({"value": value, "at": [p, offset], "in": source})

    # LogAppendTime: what every read saw, against each other and against the acknowledgement.
    stamps: dict[tuple, set] = defaultdict(set)
    for source, p, offset, value, _, ts_type, ts in observed:
        lat = log_append_time(p)
        if ts_type is None or lat is None:
            continue
        if lat and ts_type != LOG_APPEND_TIME:
            found["timestamp"].append({"problem": "not a LogAppendTime", "at": [p, offset], "value": value,
                                       "timestamp": [ts_type, ts], "in": source})
        elif not lat and ts_type == LOG_APPEND_TIME:
            found["timestamp"].append({"problem": "a LogAppendTime on a CreateTime topic", "at": [p, offset],
                                       "value": value, "in": source})
        if lat:
            stamps[(p, offset)].add(ts)
            s = sent.get(value)
            if s is None or s["status"] != "ok":
                continue
            acked = s.get("timestamp")
            if acked is not None and acked[0] == LOG_APPEND_TIME and acked[1] != ts:
                found["timestamp"].append({"problem": "read with another time than acknowledged", "at": [p, offset],
                                           "value": value, "acked": acked[1], "read": ts, "in": source})
            if "sent_ms" in s and not (s["sent_ms"] - APPEND_TIME_SLACK_MS <= ts
                                       <= s["report_ms"] + APPEND_TIME_SLACK_MS):
                found["timestamp"].append({"problem": "outside its produce call and acknowledgement",
                                           "at": [p, offset], "value": value, "read": ts,
                                           "window": [s["sent_ms"], s["report_ms"]], "in": source})
    for (p, offset), seen_ts in sorted(stamps.items()):
        if len(seen_ts) > 1:
            found["timestamp"].append({"problem": "different times in different reads", "at": [p, offset],
                                       "read": sorted(seen_ts)})
    for s in sends:
        if s["status"] == "ok" and log_append_time(s["partition"]) and "timestamp" in s \
                and s["timestamp"][0] != LOG_APPEND_TIME:
            found["timestamp"].append({"problem": "acknowledged without a LogAppendTime", "value": s["value"],
                                       "acked": [s["partition"], s["offset"]], "timestamp": s["timestamp"]})

    for p, records in reads.items():
        for before, after in zip(records, records[1:]):
            if after[0] <= before[0]:
                found["nonmonotonic"].append({"in": "final read", "partition": p, "offsets": [before[0], after[0]]})

    # Consumers: per (consumer, session, partition) the offsets in the order they were returned.
    seen: dict[tuple, list[int]] = defaultdict(list)
    for poll in polls:
        committed_only = poll.get("isolation", "read_committed") == "read_committed"
        for r in poll["records"]:
            p, offset, value = r[0], r[1], r[2]
            seen[(poll["consumer"], poll["session"], p)].append(offset)
            if committed_only and value in aborted:
                found["aborted_read"].append({"value": value, "in": f"consumer {poll['consumer']}",
                                              "at": [p, offset]})
    # What a session may step over: offsets holding no record of the final read (markers,
    # aborted records, a compacted or truncated gap).
    held = {p: {r[0] for r in records} for p, records in reads.items()}
    aborted_at = {(p, r[0]) for p, records in reads.items() for r in records if r[1] in aborted}
    for (consumer, session, p), offsets in seen.items():
        for before, after in zip(offsets, offsets[1:]):
            if after <= before:
                found["nonmonotonic"].append({"consumer": consumer, "session": session, "partition": p,
                                              "offsets": [before, after]})
            else:
                missed = [o for o in range(before + 1, after) if o in held.get(p, ()) and (p, o) not in aborted_at]
                if missed:
                    found["skipped"].append({"consumer": consumer, "session": session, "partition": p,
                                             "between": [before, after], "missed": missed[:10]})

    acked_t = sorted(s["t"] for s in sends if s["status"] == "ok" and "t" in s)
    faults = [e for e in events if e["type"] == "fault"]
    gaps = [{"from_ms": a, "to_ms": b, "ms": b - a,
             "during": [f"{f['fault']} {f['node']}" for f in faults if f["from_ms"] < b and f["to_ms"] > a]}
            for a, b in zip(acked_t, acked_t[1:]) if b - a >= gap_ms]
    counts = {
        "sends_ok": sum(s["status"] == "ok" for s in sends),
        "sends_failed": sum(s["status"] == "fail" for s in sends),
        "sends_indeterminate": sum(s["status"] == "info" for s in sends),
        "txns_committed": sum(t["status"] == "commit" for t in txns),
        "txns_aborted": sum(t["status"] == "abort" for t in txns),
        "txns_indeterminate": sum(t["status"] == "info" for t in txns),
        "polled_records": sum(len(p["records"]) for p in polls),
        "final_records": sum(len(r) for r in reads.values()),
        "acked_without_offset": sum(s["status"] == "ok" and s["offset"] is None for s in sends),
    }
    if latest_acked:
        counts["keys_checked"] = len(latest_acked)
        counts["acked_compacted_away"] = sum(s["status"] == "ok" and compacted(s["partition"])
                                             and s["value"] not in where for s in sends)
    if stamps:
        counts["log_append_time_records_checked"] = len(stamps)
    return {"anomalies": {k: v for k, v in found.items() if v}, "counts": counts, "unavailable": gaps}


def at_acked_place(send: dict, places) -> bool:
    """Whether one of `places` ((partition, offset) pairs) is where `send` was acknowledged. An
    acknowledgement without an offset (librdkafka reports a batch it learned was persisted from a
    later answer, e.g. a retry's sequence error, as delivered with offset unknown) names only the
    partition; the value must still be there exactly once (`lost`, `duplicated`)."""
    if send["offset"] is None:
        return any(p == send["partition"] for p, _ in places)
    return (send["partition"], send["offset"]) in places


def summary(report: dict) -> str:
    """A few lines for the test's output: counts, anomalies (with up to 3 examples each), gaps."""
    lines = ["history: " + ", ".join(f"{k} {v}" for k, v in report["counts"].items())]
    if not report["anomalies"]:
        lines.append("anomalies: none")
    for kind, examples in report["anomalies"].items():
        lines.append(f"ANOMALY {kind}: {len(examples)}, e.g. {examples[:3]}")
    longest = max((g["ms"] for g in report["unavailable"]), default=0)
    lines.append(f"unavailability: {len(report['unavailable'])} gaps between acknowledgements, longest {longest} ms")
    for g in report["unavailable"]:
        during = ", ".join(g["during"]) or "no fault"
        lines.append(f"  {g['from_ms'] / 1000:.1f}-{g['to_ms'] / 1000:.1f} s: {g['ms']} ms ({during})")
    return "\n".join(lines)


if __name__ == "__main__":  # python3 fault_checker.py history.jsonl: a kept history checked again
    import sys

    result = check(load(Path(sys.argv[1])))
    print(summary(result))
    sys.exit(1 if result["anomalies"] else 0)
