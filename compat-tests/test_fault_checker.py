"""The fault suite's checker (fault_checker.py) on made-up histories: a clean one passes, and each
anomaly class is found where it was planted (so a run that reports none could have reported one).
Also fault_workload.replica_records on made-up segment files. No broker is started."""

from __future__ import annotations

import copy
import struct

import pytest

from fault_checker import check, load, save, summary
from fault_workload import crc32c, replica_records


def clean() -> list[dict]:
    return [
        {"type": "send", "producer": 1, "value": "1-0", "partition": 0, "status": "ok", "offset": 0, "t": 0},
        {"type": "send", "producer": 1, "value": "1-1", "partition": 0, "status": "ok", "offset": 1, "t": 10},
        {"type": "send", "producer": 1, "value": "1-2", "partition": 0, "status": "info", "offset": -1, "t": 20},
        {"type": "send", "producer": 1, "value": "1-3", "partition": 0, "status": "fail", "offset": -1, "t": 30},
        {"type": "send", "producer": 1, "value": "1-4", "partition": 0, "status": "ok", "offset": 3, "t": 2500},
        {"type": "txn", "txn": "t1", "writes": [[0, "x-0"], [1, "x-1"]], "status": "commit"},
        {"type": "txn", "txn": "t2", "writes": [[0, "y-0"], [1, "y-1"]], "status": "abort"},
        # Offsets 4 and 6 of partition 0: the aborted write and a marker, stepped over by readers.
        {"type": "poll", "consumer": "c1", "session": 0, "records": [[0, 0, "1-0"], [0, 1, "1-1"]]},
        {"type": "poll", "consumer": "c1", "session": 0, "records": [[0, 2, "1-2"], [0, 3, "1-4"], [0, 5, "x-0"]]},
        {"type": "poll", "consumer": "c1", "session": 1, "records": [[0, 3, "1-4"]]},
        {"type": "read", "partition": 0, "records": [[0, "1-0"], [1, "1-1"], [2, "1-2"], [3, "1-4"], [5, "x-0"]]},
        {"type": "read", "partition": 1, "records": [[0, "x-1"]]},
    ]


def anomalies(events) -> dict:
    return check(events)["anomalies"]


def test_a_clean_history_has_no_anomaly_and_its_gap_is_reported(tmp_path):
    report = check(clean())
    assert report["anomalies"] == {}, report
    assert report["counts"]["sends_ok"] == 3 and report["counts"]["sends_indeterminate"] == 1
    assert [g["ms"] for g in report["unavailable"]] == [2490]
    assert report["unavailable"][0]["during"] == []
    faulted = clean() + [{"type": "fault", "fault": "kill leader", "node": 2, "from_ms": 100, "to_ms": 400}]
    assert check(faulted)["unavailable"][0]["during"] == ["kill leader 2"]
    assert "anomalies: none" in summary(report)
    save(tmp_path / "h.jsonl", clean())
    assert load(tmp_path / "h.jsonl") == clean()


def test_every_anomaly_class_is_found_where_it_was_planted():
    h = copy.deepcopy(clean())
    h[-2]["records"].remove([1, "1-1"])  # an acknowledged write gone
    assert set(anomalies(h)) == {"lost"}

    h = copy.deepcopy(clean())
    h[-2]["records"] = [[0, "1-0"], [1, "1-1"], [2, "1-2"], [4, "1-4"], [5, "x-0"]]
    assert "moved" in anomalies(h)

    h = copy.deepcopy(clean())
    h[-2]["records"].append([7, "1-1"])
    assert "duplicated" in anomalies(h)

    h = copy.deepcopy(clean())
    h[8]["records"] = [[0, 1, "1-1"], [0, 0, "1-0"]]
    assert "nonmonotonic" in anomalies(h)

    h = copy.deepcopy(clean())
    h[8]["records"] = [[0, 3, "1-4"]]  # offset 2 (in the log) never returned to session 0
    assert "skipped" in anomalies(h)

    h = copy.deepcopy(clean())
    h[8]["records"].append([0, 4, "y-0"])
    assert "aborted_read" in anomalies(h)

    h = copy.deepcopy(clean())
    h[-1]["records"] = []  # the committed transaction's second write gone
    assert "torn" in anomalies(h)

    h = copy.deepcopy(clean())
    h[-2]["records"].append([6, "1-3"])  # a write the client was told failed
    assert "phantom" in anomalies(h)


def compacted_history() -> list[dict]:
    """Topic `c` (compacted, CreateTime) and topic `t` (LogAppendTime), as fault_workload writes them:
    keys and timestamps in sends, polls and the final read. On c:0 the cleaner has removed the
    records of k1 and k2 that later ones superseded (offsets 0-2); k3's latest write was never
    acknowledged (status info) but is in the log, superseding its acknowledged one at 3."""
    def send(value, p, offset, key=None, status="ok", ts=None, sent=1000, report=1050):
        e = {"type": "send", "producer": value.split("-")[0], "value": value, "partition": p, "status": status,
             "sent_ms": sent, "report_ms": report, "t": offset * 10}
        if key is not None:
            e["key"] = key
        if status == "ok":
            e.update(offset=offset, timestamp=ts or [1, sent])
        return e

    return [
        {"type": "topic", "topic": "c", "partitions": 1,
         "config": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}},
        {"type": "topic", "topic": "t", "partitions": 1, "config": {"message.timestamp.type": "LogAppendTime"}},
        send("a-0", "c:0", 0, "k1"),
        send("a-1", "c:0", 1, "k2"),
        send("a-2", "c:0", 2, "k1"),
        send("a-3", "c:0", 3, "k3"),
        send("a-4", "c:0", 4, "k2"),
        send("a-5", "c:0", 5, "k1"),
        send("a-6", "c:0", 6, "k3", status="info"),
        send("b-0", "t:0", 0, ts=[2, 1020]),
        send("b-1", "t:0", 1, ts=[2, 1030]),
        {"type": "poll", "consumer": "r1", "session": 1,
         "records": [["c:0", 0, "a-0", "k1", 1, 1000], ["c:0", 2, "a-2", "k1", 1, 1000],
                     ["t:0", 0, "b-0", None, 2, 1020]]},
        {"type": "poll", "consumer": "r1", "session": 1,
         "records": [["c:0", 3, "a-3", "k3", 1, 1000], ["c:0", 4, "a-4", "k2", 1, 1000],
                     ["t:0", 1, "b-1", None, 2, 1030]]},
        {"type": "read", "partition": "c:0",
         "records": [[3, "a-3", "k3", 1, 1000], [4, "a-4", "k2", 1, 1000], [5, "a-5", "k1", 1, 1000],
                     [6, "a-6", "k3", 1, 1000]]},
        {"type": "read", "partition": "t:0", "records": [[0, "b-0", None, 2, 1020], [1, "b-1", None, 2, 1030]]},
    ]


def final_read(h, partition):
    return next(e for e in h if e["type"] == "read" and e["partition"] == partition)


def test_a_compacted_topic_loses_superseded_records_but_no_key():
    report = check(compacted_history())
    assert report["anomalies"] == {}, report
    assert report["counts"]["keys_checked"] == 3 and report["counts"]["acked_compacted_away"] == 3
    assert report["counts"]["log_append_time_records_checked"] == 2

    h = compacted_history()  # k1's latest acknowledged value gone, nothing of k1 left
    final_read(h, "c:0")["records"].remove([5, "a-5", "k1", 1, 1000])
    found = anomalies(h)
    assert set(found) == {"lost_key"}, found
    assert found["lost_key"] == [{"partition": "c:0", "key": "k1", "acked": [5, "a-5"], "read": None}]

    h = compacted_history()  # k1 read back with an older value than its latest acknowledged one
    final_read(h, "c:0")["records"][2] = [2, "a-2", "k1", 1, 1000]
    found = anomalies(h)
    assert set(found) == {"lost_key", "nonmonotonic"}, found  # and offset 2 after 4
    assert found["lost_key"][0]["read"] == [2, "a-2"]

    h = compacted_history()  # k3's never-acknowledged later write gone: its acknowledged one must stay
    final_read(h, "c:0")["records"] = [r for r in final_read(h, "c:0")["records"] if r[0] != 3]
    assert set(anomalies(h)) == set()  # 6 (a later write of k3) supersedes 3
    final_read(h, "c:0")["records"] = [r for r in final_read(h, "c:0")["records"] if r[0] != 6]
    assert set(anomalies(h)) == {"lost_key"}

    h = compacted_history()  # the same history without the topic event: every superseded record is lost
    assert set(anomalies(h[1:])) == {"lost"}

    h = compacted_history()
    final_read(h, "c:0")["records"][1][2] = "k9"
    assert set(anomalies(h)) == {"wrong_key", "lost_key"}  # k2's latest now reads as k9's

    h = compacted_history()  # consumed, never written
    h.append({"type": "poll", "consumer": "r1", "session": 2, "records": [["c:0", 7, "a-99", "k1", 1, 1000]]})
    assert set(anomalies(h)) == {"phantom"}

    h = compacted_history()
    h[-3]["records"][1][1] = 5  # a-4 consumed at another offset than acknowledged (so 4 skipped)
    assert set(anomalies(h)) == {"moved", "skipped"}

    h = compacted_history()
    rows = final_read(h, "c:0")["records"]
    rows[1], rows[2] = rows[2], rows[1]  # the final read's offsets must only go up
    assert set(anomalies(h)) == {"nonmonotonic"}


def test_log_append_time_is_what_the_leader_stamped_in_every_read():
    h = compacted_history()
    final_read(h, "t:0")["records"][0][3] = 1  # read as a CreateTime
    found = anomalies(h)
    assert set(found) == {"timestamp"} and found["timestamp"][0]["problem"] == "not a LogAppendTime", found

    h = compacted_history()  # a replica that restamped the record: its read differs from the poll's
    final_read(h, "t:0")["records"][1][4] = 1040
    problems = {a["problem"] for a in anomalies(h)["timestamp"]}
    assert problems == {"read with another time than acknowledged", "different times in different reads"}

    h = compacted_history()
    for e in h:  # consistent everywhere, but stamped long after the acknowledgement
        if e["type"] == "send" and e["value"] == "b-1":
            e["timestamp"] = [2, 9000]
    h[-3]["records"][2][5] = 9000  # the second poll's
    final_read(h, "t:0")["records"][1][4] = 9000
    problems = {a["problem"] for a in anomalies(h)["timestamp"]}
    assert problems == {"outside its produce call and acknowledgement"}

    h = compacted_history()
    next(e for e in h if e.get("value") == "b-0")["timestamp"] = [1, 1000]
    assert {a["problem"] for a in anomalies(h)["timestamp"]} == {"acknowledged without a LogAppendTime"}

    h = compacted_history()
    final_read(h, "c:0")["records"][0][3] = 2  # a LogAppendTime on the CreateTime topic
    assert {a["problem"] for a in anomalies(h)["timestamp"]} == {"a LogAppendTime on a CreateTime topic"}


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _batch(base_offset: int, records: list[tuple[int, str | None, str]], base_ts: int, append_time: bool) -> bytes:
    """A Kafka v2 record batch, uncompressed: records are (offset delta, key, value), each with a
    timestamp delta equal to its offset delta."""
    body = b""
    for delta, key, value in records:
        fields = b"\x00" + _zigzag(delta) + _zigzag(delta)  # attributes, timestamp delta, offset delta
        fields += _zigzag(-1) if key is None else _zigzag(len(key)) + key.encode()
        fields += _zigzag(len(value)) + value.encode() + _zigzag(0)
        body += _zigzag(len(fields)) + fields
    attributes = 0x08 if append_time else 0
    last_delta = records[-1][0]
    after_crc = struct.pack(">hiqqqhii", attributes, last_delta, base_ts, base_ts + 500, 7, 0, 0, len(records)) + body
    head = struct.pack(">qiib", base_offset, 4 + 1 + 4 + len(after_crc), 0, 2)
    return head + struct.pack(">I", crc32c(after_crc)) + after_crc


def test_a_replica_copy_is_read_from_its_segment_files(tmp_path):
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    part = tmp_path / "t-0"
    part.mkdir()
    first = _batch(0, [(0, "k1", "a-0"), (2, "k2", "a-2")], 1000, append_time=False)  # offset 1 compacted away
    second = _batch(5, [(0, None, "b-5")], 2000, append_time=True)
    (part / "00000000000000000000.log").write_bytes(first)
    (part / "00000000000000000005.log").write_bytes(second + second[:30])  # a torn write at the end
    (part / "cleaning").mkdir()  # an uncommitted cleaner pass: ignored
    (part / "cleaning" / "00000000000000000000.log").write_bytes(b"junk")
    assert replica_records(part) == [[0, "a-0", "k1", 1, 1000], [2, "a-2", "k2", 1, 1002],
                                     [5, "b-5", None, 2, 2500]]

    swap = part / "swap-0-5"  # a committed pass, not moved in yet, replaces the segments in [0, 5)
    swap.mkdir()
    (swap / "00000000000000000000.log").write_bytes(_batch(0, [(2, "k2", "a-2")], 1000, append_time=False))
    assert [r[0] for r in replica_records(part)] == [2, 5]

    corrupt = bytearray(second)
    corrupt[-3] ^= 1
    (part / "00000000000000000005.log").write_bytes(bytes(corrupt))
    with pytest.raises(AssertionError, match="CRC mismatch"):
        replica_records(part)


def test_an_acknowledgement_without_an_offset_names_only_its_partition():
    """librdkafka may report a batch delivered with its offset unknown: read once in its partition it
    is no anomaly (and is counted), read in another partition it moved, never read it is lost."""
    events = [e for e in clean() if e["type"] != "read"] + [
        {"type": "send", "producer": 1, "value": "1-5", "partition": 0, "status": "ok", "offset": None, "t": 2600},
        {"type": "send", "producer": 1, "value": "1-6", "partition": 0, "status": "ok", "offset": None, "t": 2700},
        {"type": "send", "producer": 1, "value": "1-7", "partition": 0, "status": "ok", "offset": None, "t": 2800},
        {"type": "poll", "consumer": "c1", "session": 2, "records": [[0, 7, "1-5"]]},
        # The clean history's final reads, with 1-5 after them in partition 0 and 1-6 in partition 1.
        {"type": "read", "partition": 0, "records": [[0, "1-0"], [1, "1-1"], [2, "1-2"], [3, "1-4"], [5, "x-0"],
                                                      [7, "1-5"]]},
        {"type": "read", "partition": 1, "records": [[0, "x-1"], [1, "1-6"]]},
    ]
    report = check(events)
    assert report["counts"]["acked_without_offset"] == 3
    found = report["anomalies"]
    assert [m["value"] for m in found.get("moved", [])] == ["1-6"], found
    assert [m["value"] for m in found.get("lost", [])] == ["1-7"], found
