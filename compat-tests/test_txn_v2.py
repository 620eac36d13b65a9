"""Transaction protocol version 2 (KIP-890 part 2), request by request, with Kafka 4.1's exact
answers.

What this proves, with raw requests (`go/txnprobe`, franz-go's kmsg, each request pinned to a
version, hand-built transactional record batches, one connection to the single node):

- hanging-tv2: a write of transaction 1 delayed past its commit (Produce v12 at the old epoch)
  is refused with INVALID_PRODUCER_EPOCH both during transaction 2 and outside any
  transaction; EndTxn v5 bumps the epoch and returns it; a read_committed Fetch shows only
  transaction 1's record, with the markers at the bumped epochs.
- late-write-tv1: the same late write under protocol 1 (AddPartitionsToTxn v3, Produce v11,
  EndTxn v4) is accepted and committed with transaction 2 (the gap TV2 closes); Produce v11 /
  v10 to a partition not added: TRANSACTION_ABORTABLE / INVALID_TXN_STATE.
- endtxn-v5: EndTxn v5 on Empty (commit 48, abort bumps), v4 on Empty (48), retries at the old
  epoch (NONE with the current producer id and epoch), the new epoch during and after a commit,
  fenced, wrong and unknown producers. "During" races Kafka's markers: it accepts 51 (what
  Kafka 4.1 answered in every run: the CompleteCommit append was in flight), 90 (PrepareCommit)
  or 48 (already complete, what a broker that writes its markers before answering gives).
- produce-v12-errors: first batch with sequence != 0 (45), epoch above the coordinator's (47),
  wrong producer id or unknown transactional id (49); sequences restart at 0 after a marker.
- txn-offset-commit: TxnOffsetCommit v5 without AddOffsetsToTxn adds __consumer_offsets to
  the transaction; v4 answers 120 and v3 48; offsets visible after commit, not after abort.
- init-after-lost-endtxn: InitProducerId with the epoch an EndTxn v5 already bumped is a retry
  (same producer id, the bumped epoch, no PRODUCER_FENCED); stale epochs and fencing an
  ongoing transaction.
- api-versions: ApiVersions v3/v4 finalize transaction.version 2 and advertise Produce >= 12,
  EndTxn >= 5, TxnOffsetCommit >= 5.
- late-txn-offset-commit: a TxnOffsetCommit after its transaction was aborted is refused (v3
  48, v4 120 under protocol 1; v5 47 at the epoch the abort bumped) and never published: the
  producer's next transaction commits only its own offset.
- produce-retry-after-marker: a retried batch (same producer id, epoch, sequence) is answered
  with its original offset in its open transaction and, under protocol 1, in the producer's next
  transaction once the partition is added again (Kafka's duplicate lookup comes before the log's
  transaction check); after the marker with no transaction the coordinator refuses it (120 at
  v11, 48 at v10); under protocol 2 the bumped epoch fences it (47). The retry in the next
  transaction leaves its verification behind: the next sequence is refused (45), as in Kafka.
- timeout-tv2: a transaction past transaction.timeout.ms is aborted at the fenced epoch; the old
  producer's abort is answered as a retry and it goes on.

Every expected value is in go/txnprobe/scenarios.go and was measured on Kafka 4.1
(`KETCH_COMPAT_TARGET=kafka`). A failure lists every mismatched step: its name, API and
version, the expected and the received values. By hand:

    compat-tests/.cache/go/txnprobe -brokers 127.0.0.1:PORT -scenario hanging-tv2

About 2 s per scenario when every answer matches (plus a broker start on Kafka, ~75 s in all
there); a mismatching DescribeTransactions step waits 5 s for the expected state.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import go_build

SCENARIOS = [
    "hanging-tv2",
    "late-write-tv1",
    "endtxn-v5",
    "produce-v12-errors",
    "txn-offset-commit",
    "init-after-lost-endtxn",
    "api-versions",
    "late-txn-offset-commit",
    "produce-retry-after-marker",
]

RUN_TIMEOUT = 90  # seconds per scenario (the program's own deadline is 60 s)


def _show(value) -> str:
    return json.dumps(value, sort_keys=True)


def _same(want, got) -> bool:
    if isinstance(want, dict) and set(want) == {"any_of"}:
        return any(_show(a) == _show(got) for a in want["any_of"])
    return _show(want) == _show(got)


def run_scenario(broker, scenario: str) -> list[dict]:
    """Runs one txnprobe scenario; fails listing every step whose answer is not Kafka's."""
    binary = go_build("txnprobe")
    cmd = [str(binary), "-brokers", broker.bootstrap, "-scenario", scenario, "-timeout", "60s"]
    try:
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        out = [x.decode(errors="replace") if isinstance(x, bytes) else (x or "") for x in (e.stdout, e.stderr)]
        pytest.fail(f"txnprobe {scenario} timed out after {RUN_TIMEOUT}s\n{out[0]}\n{out[1]}", pytrace=False)
    steps, problems = [], []
    done = False
    for line in r.stdout.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            problems.append(f"unparsable output line: {line!r}")
            continue
        if "fatal" in item:
            problems.append(f"scenario stopped: {item['fatal']}")
        elif "done" in item:
            done = True
        else:
            steps.append(item)
            if not item["ok"]:
                got = item["got"]
                where = f"step {item['step']} ({item['api']} v{item['version']})"
                if "error" in got:
                    problems.append(f"{where}: no answer, {got['error']} (a version the broker does not serve "
                                    f"closes the connection); expected {_show(item['want'])}")
                    continue
                detail = "; ".join(f"{k}: expected {_show(w)}, got {_show(got.get(k))}"
                                   for k, w in item["want"].items() if not _same(w, got.get(k)))
                problems.append(f"{where}: {detail}\n      full answer: {_show(got)}")
    if not done and not any(p.startswith("scenario stopped") for p in problems):
        problems.append(f"txnprobe exited {r.returncode} before the end of the scenario")
    if r.returncode not in (0, 1):
        problems.append(f"txnprobe exited {r.returncode}: {r.stderr[-3000:]}")
    if problems:
        pytest.fail(f"{scenario} against {broker.target}: {len(problems)} problem(s) "
                    f"({len(steps)} steps checked)\n  - " + "\n  - ".join(problems), pytrace=False)
    return steps


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_txn_v2(broker, scenario):
    run_scenario(broker, scenario)


# Kafka checks for timed-out transactions every 10 s by default; 500 ms keeps this test short.
@pytest.mark.broker_config(**{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
def test_txn_v2_timeout(broker):
    run_scenario(broker, "timeout-tv2")
