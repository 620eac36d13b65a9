"""The fault suite's history and checker (issue 15): what a workload under faults did, and which of
the anomaly classes of the Jepsen analyses of Kafka, Redpanda and Bufstream it shows.

A history is a list of events (kept as JSON lines next to the run's logs, so a run can be checked
again, or by hand, without rerunning it):

- ``{"type": "send", "producer": P, "value": V, "partition": p, "status": S, "offset": o, "t": ms}``:
  one produce. ``ok``: acknowledged at offset ``o``; ``fail``: definitely not written (an error the
  client knows was not appended, e.g. a refused request); ``info``: indeterminate (a timeout, a lost
  connection: it may or may not be in the log).
- ``{"type": "txn", "txn": id, "writes": [[p, V], ...], "status": "commit" | "abort" | "info"}``:
  one transaction's writes and its outcome (``info``: the commit's answer was lost).
- ``{"type": "poll", "consumer": C, "session": s, "records": [[p, o, V], ...], "isolation": I}``:
  what one poll of consumer C returned; a session ends at a rebalance, a seek or a restart (within
  one, positions only move forward).
- ``{"type": "read", "partition": p, "records": [[o, V], ...]}``: the final read of a whole
  partition, from its start, after the faults stopped (read_committed).
- ``{"type": "fault", "fault": F, "node": n, "from_ms": a, "to_ms": b}``: a fault the nemesis held
  from ``a`` to ``b``; ``note`` and ``error`` events carry what a worker said.

Values are unique per history (a producer id and a counter): where a value sits tells everything.

Anomalies reported (each a list of examples):

- ``lost``: an acknowledged value not in the final read.
- ``moved``: an acknowledged value read at another offset (or partition) than acknowledged.
- ``duplicated``: a value at two offsets of the final read (an idempotent producer never makes one).
- ``nonmonotonic``: within one consumer session, a partition's offsets going back or repeating.
- ``skipped``: within one consumer session, a record of the log between two consecutive offsets a
  consumer got from a partition (it was never returned to that session; transaction markers
  and aborted records excepted under read_committed).
- ``aborted_read``: a read_committed poll, or the final read, returning a write of an aborted
  transaction.
- ``torn``: a committed transaction some of whose writes are in the final read and others not, or a
  committed transaction's write missing altogether.
- ``phantom``: a value in the final read that no send or transaction wrote (or a failed send's).

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


def check(events: list[dict], gap_ms: int = 1000) -> dict:
    sends = [e for e in events if e["type"] == "send"]
    txns = [e for e in events if e["type"] == "txn"]
    polls = [e for e in events if e["type"] == "poll"]
    reads = {e["partition"]: [tuple(r) for r in e["records"]] for e in events if e["type"] == "read"}

    where: dict[str, list[tuple[int, int]]] = defaultdict(list)  # value -> [(partition, offset)]
    for p, records in reads.items():
        for offset, value in records:
            where[value].append((p, offset))
    found = {"lost": [], "moved": [], "duplicated": [], "nonmonotonic": [], "skipped": [], "aborted_read": [],
             "torn": [], "phantom": []}

    for value, places in where.items():
        if len(places) > 1:
            found["duplicated"].append({"value": value, "at": sorted(places)})
    for s in sends:
        if s["status"] != "ok":
            continue
        places = where.get(s["value"], [])
        if not places:
            found["lost"].append({"value": s["value"], "partition": s["partition"], "offset": s["offset"]})
        elif (s["partition"], s["offset"]) not in places:
            found["moved"].append({"value": s["value"], "acked": [s["partition"], s["offset"]], "read": sorted(places)})

    aborted = {v for t in txns if t["status"] == "abort" for _, v in t["writes"]}
    for t in txns:
        present = [v for _, v in t["writes"] if v in where]
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

    # Consumers: per (consumer, session, partition) the offsets in the order they were returned.
    seen: dict[tuple, list[int]] = defaultdict(list)
    for poll in polls:
        committed_only = poll.get("isolation", "read_committed") == "read_committed"
        for p, offset, value in poll["records"]:
            seen[(poll["consumer"], poll["session"], p)].append(offset)
            if committed_only and value in aborted:
                found["aborted_read"].append({"value": value, "in": f"consumer {poll['consumer']}",
                                              "at": [p, offset]})
    # What a session may step over: offsets holding no record of the final read (markers,
    # aborted records, a compacted or truncated gap).
    held = {p: {o for o, _ in records} for p, records in reads.items()}
    aborted_at = {(p, o) for p, records in reads.items() for o, v in records if v in aborted}
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
    return {
        "anomalies": {k: v for k, v in found.items() if v},
        "counts": {
            "sends_ok": sum(s["status"] == "ok" for s in sends),
            "sends_failed": sum(s["status"] == "fail" for s in sends),
            "sends_indeterminate": sum(s["status"] == "info" for s in sends),
            "txns_committed": sum(t["status"] == "commit" for t in txns),
            "txns_aborted": sum(t["status"] == "abort" for t in txns),
            "txns_indeterminate": sum(t["status"] == "info" for t in txns),
            "polled_records": sum(len(p["records"]) for p in polls),
            "final_records": sum(len(r) for r in reads.values()),
        },
        "unavailable": gaps,
    }


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
