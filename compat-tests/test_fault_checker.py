"""The fault suite's checker (fault_checker.py) on made-up histories: a clean one passes, and each
anomaly class is found where it was planted (so a run that reports none could have reported one).
No broker is started."""

from __future__ import annotations

import copy

from fault_checker import check, load, save, summary


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
