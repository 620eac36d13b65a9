"""Per-record produce errors (KIP-467): a batch holding invalid records is refused whole, with
the partition error (INVALID_RECORD, or INVALID_TIMESTAMP as soon as one record has a bad
timestamp), `record_errors` (batch index + message, one per invalid record: Kafka validates every
record of the batch) and `error_message`, and clients fail exactly the invalid records with
their own error and the others of the batch with a generic one.

Kafka 4.1 (storage/.../log/LogValidator.java validateKey / validateTimestamp / processRecordErrors,
kafka.server.ReplicaManager appendToLocalLog, clients/.../producer/internals/Sender.failBatch)
and the clients, as they really behave:

* librdkafka (confluent-kafka): with two or more record errors the invalid records get
  INVALID_RECORD (even for timestamps) and the others _INVALID_DIFFERENT_RECORD; with exactly one,
  every record of the batch gets the partition error (rd_kafka_dr_msgq0 forces it on the whole
  queue through the on_acknowledgement interceptor step). The per-record strings are not exposed
  by confluent-kafka, so they are checked through the Java clients.
* Java producer: one record error -> that record gets the partition error's exception
  (InvalidRecordException / InvalidTimestampException); several -> InvalidRecordException for
  each; the others a KafkaException "... one more more invalid records" (Kafka's typo). The
  exception messages are the record errors' messages.
* a hand-made Produce request (Java `RecordErrors raw`) shows the response fields as they are.

Nothing of a refused batch is in the log (no offset used) and a valid batch appends afterwards.
Records with timestamp -1 (NO_TIMESTAMP) are not checked against message.timestamp.*.max.ms,
nor is any record on a LogAppendTime topic. Passes against Apache Kafka 4.1
(KETCH_COMPAT_TARGET=kafka). Java program: java/src/main/java/ketch/compat/RecordErrors.java.
"""

from __future__ import annotations

import logging
import re
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import run_logged

JAVA_TIMEOUT = 180  # seconds per JVM run (RecordErrors' own watchdog: 150 s)
BEFORE_MS = 3_600_000  # message.timestamp.before.max.ms of the timestamp topics
AFTER_MS = 3_600_000  # Kafka 4.x default of message.timestamp.after.max.ms
DAY_MS = 86_400_000
HOUR_MS = 3_600_000

COMPACT = {"cleanup.policy": "compact"}
BEFORE = {"message.timestamp.before.max.ms": str(BEFORE_MS)}

INVALID_RECORD = KafkaError.INVALID_RECORD  # 87
INVALID_TIMESTAMP = KafkaError.INVALID_TIMESTAMP  # 32
INVALID_DIFFERENT_RECORD = KafkaError._INVALID_DIFFERENT_RECORD  # -138, librdkafka only

# Sender.failBatch (Java) and rd_kafka_msgbatch_handle_Produce_result_record_errors, typo included
OTHERS_MESSAGE = "Failed to append record because it was part of a batch which had one more more invalid records"
TIMESTAMP_TOP_MESSAGE = "One or more records have been rejected due to invalid timestamp"
TS_RE = re.compile(r"Timestamp (-?\d+) of message with offset (-?\d+) is out of range\. "
                   r"The timestamp should be within \[(-?\d+), (-?\d+)\]")

JAVA_INVALID_RECORD = "org.apache.kafka.common.InvalidRecordException"
JAVA_INVALID_TIMESTAMP = "org.apache.kafka.common.errors.InvalidTimestampException"
JAVA_KAFKA_EXCEPTION = "org.apache.kafka.common.KafkaException"

# Spec tokens, one per record: k keyed at the current time; n no key, o two days old,
# f two hours ahead, x no timestamp (-1). Expected: index -> "key" | "ts" (the record's error).
SCENARIOS = {
    "keyless3": (COMPACT, "k,k,n,k,k,n,k,n,k,k", {2: "key", 5: "key", 7: "key"}),
    "keyless1": (COMPACT, "k,k,k,k,n,k,k,k,k,k", {4: "key"}),
    "old3": (BEFORE, "k,o,k,o,k,k,k,k,o,k", {1: "ts", 3: "ts", 8: "ts"}),
    "old1": (BEFORE, "k,k,k,k,k,k,o,k,k,k", {6: "ts"}),
    "future2": (BEFORE, "f,k,k,k,k,k,k,k,k,f", {0: "ts", 9: "ts"}),
    # the key is checked before the timestamp: a keyless old record fails for its key
    "mixed": ({**COMPACT, **BEFORE}, "k,k,n,k,o,k,no,k,k,k", {2: "key", 4: "ts", 6: "key"}),
}
NO_TIMESTAMP_SCENARIOS = {  # the Java producer cannot send timestamp -1
    "notimestamp": (BEFORE, "k,x,k,x,k,k,k,k,k,k", {}),
    "notimestamp_old": (BEFORE, "k,x,k,o,k,o,k,k,k,k", {3: "ts", 5: "ts"}),
}
RAW_SCENARIOS = {
    "keyless4": (COMPACT, "k,k,n,k,k,n,k,n,k,n", {2: "key", 5: "key", 7: "key", 9: "key"}),
    "keyless1": SCENARIOS["keyless1"],
    "old_future": (BEFORE, "k,o,k,o,k,k,k,k,f,k", {1: "ts", 3: "ts", 8: "ts"}),
    "old1": SCENARIOS["old1"],
    "mixed": SCENARIOS["mixed"],
    "notimestamp": (BEFORE, "x,x,k,x,k", {}),
    "notimestamp_old": (BEFORE, "k,x,k,o,k", {3: "ts"}),
    "logappendtime": ({**BEFORE, "message.timestamp.type": "LogAppendTime"}, "k,o,o,f", {}),
}


def partition_error(expected: dict) -> int:
    if not expected:
        return 0
    return INVALID_TIMESTAMP if "ts" in expected.values() else INVALID_RECORD


def key_message(topic: str) -> str:
    return f"Compacted topic cannot accept message without key in topic partition {topic}-0"


def create_topics(bootstrap: str, scenarios: dict, prefix: str) -> dict:
    """One fresh single-partition topic per scenario: {scenario: topic}."""
    run = uuid.uuid4().hex[:6]
    names = {name: f"rec-{prefix}-{name.replace('_', '-')}-{run}" for name in scenarios}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(names[n], num_partitions=1, replication_factor=1, config=cfg)
                                   for n, (cfg, _, _) in scenarios.items()])
    for f in futures.values():
        f.result(timeout=30)
    return names


def end_offset(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rec-{uuid.uuid4().hex[:6]}"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=20)[1]
    finally:
        c.close()


class _LogLines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def rdk_produce(bootstrap: str, topic: str, spec: str, codec: str = "none"):
    """librdkafka: the spec's records to partition 0 in one batch (linger.ms 5 s, flush); returns
    per record the error code or ("ok", offset), and how many Produce batches librdkafka sent
    (from its `debug=msg` log: once in a while it sends the first record alone)."""
    log = logging.getLogger(f"rdk-{uuid.uuid4().hex}")
    log.propagate = False
    log.setLevel(logging.DEBUG)
    lines = _LogLines()
    log.addHandler(lines)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False,
                         "linger.ms": 5000, "batch.num.messages": 10000, "batch.size": 1_000_000,
                         "compression.codec": codec, "message.timeout.ms": 30000,
                         "debug": "msg", "logger": log})
    producer.list_topics(topic, timeout=10)  # partition leader known before the first record
    now = int(time.time() * 1000)
    results: list = [None] * len(spec.split(","))

    def report(i):
        def cb(err, msg):
            results[i] = err.code() if err else ("ok", msg.offset())
        return cb

    for i, token in enumerate(spec.split(",")):
        ts = now - 2 * DAY_MS if "o" in token else now + 2 * HOUR_MS if "f" in token else -1 if "x" in token else 0
        producer.produce(topic, key=None if "n" in token else f"k{i}", value=f"v{i}", partition=0,
                         timestamp=ts, on_delivery=report(i))
    assert producer.flush(60) == 0, f"{topic}: records left undelivered"
    producer.poll(0)
    batches = sum(1 for line in lines.lines if "Produce MessageSet with" in line and f" {topic} [0]" in line)
    return results, batches


def check_appends_after(bootstrap: str, topic: str, expected_end: int, problems: list, what: str) -> None:
    """The refused batch used no offset: the log ends where it did; a valid batch appends there."""
    end = end_offset(bootstrap, topic)
    if end != expected_end:
        problems.append(f"{what}: log end offset {end} after the refused batch, expected {expected_end}")
        return
    got, _ = rdk_produce(bootstrap, topic, "k,k,k")
    if got != [("ok", end + i) for i in range(3)]:
        problems.append(f"{what}: a valid batch afterwards gave {got}, expected offsets {end}..{end + 2}")


def check_record_message(kind: str, msg, topic: str, index: int, ts: int, window, problems: list,
                         what: str) -> None:
    """A record error's message, as Kafka words it (the timestamp range is the broker's clock
    minus before.max.ms and plus after.max.ms, the broker's clock between the send and the answer)."""
    if kind == "key":
        if msg != key_message(topic):
            problems.append(f"{what}: record {index} message {msg!r}, expected {key_message(topic)!r}")
        return
    m = TS_RE.fullmatch(msg or "")
    if not m:
        problems.append(f"{what}: record {index} message {msg!r} is not Kafka's 'Timestamp T of message with "
                        "offset N is out of range. The timestamp should be within [LO, HI]'")
        return
    got_ts, offset, lo, hi = map(int, m.groups())
    if got_ts != ts or offset != index:
        problems.append(f"{what}: record {index} message {msg!r}: expected timestamp {ts} and offset {index}")
    if hi - lo != BEFORE_MS + AFTER_MS or not window[0] - 1000 <= lo + BEFORE_MS <= window[1] + 1000:
        problems.append(f"{what}: record {index} range [{lo}, {hi}] is not [now - {BEFORE_MS}, now + {AFTER_MS}] "
                        f"for a broker clock within {window}")


def fail_if(problems: list) -> None:
    if problems:
        pytest.fail(f"{len(problems)} mismatch(es) with Kafka:\n  " + "\n  ".join(problems), pytrace=False)


# ---------------------------------------------------------------------------------------------
# librdkafka (confluent-kafka)
# ---------------------------------------------------------------------------------------------


def librdkafka_expected(n: int, expected: dict) -> list:
    if not expected:
        return [("ok", i) for i in range(n)]
    if len(expected) == 1:  # librdkafka sets the partition error on the whole batch
        return [partition_error(expected)] * n
    return [INVALID_RECORD if i in expected else INVALID_DIFFERENT_RECORD for i in range(n)]


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_librdkafka_per_record_errors(broker, codec):
    scenarios = {**SCENARIOS, **NO_TIMESTAMP_SCENARIOS}
    topics = create_topics(broker.bootstrap, scenarios, f"rdk-{codec}")
    problems: list = []
    for name, (_, spec, expected) in scenarios.items():
        topic = topics[name]
        for attempt in range(3):
            got, batches = rdk_produce(broker.bootstrap, topic, spec, codec)
            if batches == 1:
                break
            # a client-side split (not the broker's doing): again, on a fresh topic
            print(f"{name}: librdkafka sent the records in {batches} batches; retrying on a fresh topic")
            topic = create_topics(broker.bootstrap, {name: scenarios[name]}, f"rdk-{codec}-{attempt}")[name]
        else:
            problems.append(f"{name}: librdkafka never sent the {len(got)} records in one batch")
            continue
        want = librdkafka_expected(len(got), expected)
        names = {c: KafkaError(c).name() for c in set(x for x in got + want if isinstance(x, int))}
        print(f"{name}: {[names.get(x, x) for x in got]}")
        if got != want:
            problems.append(f"{name} ({spec}): delivery reports {[names.get(x, x) for x in got]}, "
                            f"Kafka gives {[names.get(x, x) for x in want]}")
        check_appends_after(broker.bootstrap, topic, 0 if expected else len(got), problems, name)
    fail_if(problems)


# ---------------------------------------------------------------------------------------------
# Java (kafka-clients)
# ---------------------------------------------------------------------------------------------


def run_java(jar, bootstrap: str, mode: str, codec: str, pairs: list) -> dict:
    """Runs `RecordErrors <bootstrap> <mode> <codec> topic=spec...`; returns its output per topic."""
    r = run_logged(["java", "-cp", jar, "ketch.compat.RecordErrors", bootstrap, mode, codec, *pairs],
                   timeout=JAVA_TIMEOUT, what=f"java RecordErrors {mode} {codec}")
    print(r.stdout)
    out: dict = {}
    for line in r.stdout.splitlines():
        f = line.split("\t")
        if len(f) < 3:
            continue
        t = out.setdefault(f[1], {"ts": {}, "results": {}, "record_errors": []})
        value = None if f[-1] == "<null>" else f[-1]
        if f[0] == "ts":
            t["ts"][int(f[2])] = int(f[3])
        elif f[0] == "window":
            t["window"] = (int(f[2]), int(f[3]))
        elif f[0] == "result":
            t["results"][int(f[2])] = (f[3], value)
        elif f[0] == "partition":
            t["partition"] = tuple(int(x) for x in f[2:6])
        elif f[0] == "error_message":
            t["error_message"] = value
        elif f[0] == "record_error":
            t["record_errors"].append((int(f[2]), value))
    return out


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_java_producer_per_record_errors(broker, java_compat_jar, codec):
    topics = create_topics(broker.bootstrap, SCENARIOS, f"java-{codec}")
    out = run_java(java_compat_jar, broker.bootstrap, "producer", codec,
                   [f"{topics[n]}={spec}" for n, (_, spec, _) in SCENARIOS.items()])
    problems: list = []
    for name, (_, spec, expected) in SCENARIOS.items():
        topic = topics[name]
        got = out.get(topic, {})
        results = got.get("results", {})
        n = len(spec.split(","))
        if sorted(results) != list(range(n)):
            problems.append(f"{name}: callbacks for records {sorted(results)}, expected 0..{n - 1}")
            continue
        single = len(expected) == 1
        wrong_valid: dict = {}  # (class, message) -> indexes of valid records that got it
        for i in range(n):
            cls, msg = results[i]
            if i not in expected:
                if (cls, msg) != (JAVA_KAFKA_EXCEPTION, OTHERS_MESSAGE):
                    wrong_valid.setdefault((cls, msg), []).append(i)
                continue
            want_cls = JAVA_INVALID_RECORD
            if single and partition_error(expected) == INVALID_TIMESTAMP:
                want_cls = JAVA_INVALID_TIMESTAMP
            if cls != want_cls:
                problems.append(f"{name}: record {i} (invalid) failed with {cls}: {msg!r}, Kafka gives {want_cls}")
                continue
            check_record_message(expected[i], msg, topic, i, got["ts"][i], got["window"], problems, name)
        for (cls, msg), indexes in wrong_valid.items():
            problems.append(f"{name}: valid records {indexes} failed with {cls}: {msg!r}, Kafka gives "
                            f"{JAVA_KAFKA_EXCEPTION}: {OTHERS_MESSAGE!r}")
        counts: dict = {}
        for cls, _ in results.values():
            counts[cls.rsplit(".", 1)[-1]] = counts.get(cls.rsplit(".", 1)[-1], 0) + 1
        print(f"{name}: {counts}")
        check_appends_after(broker.bootstrap, topic, 0, problems, name)
    fail_if(problems)


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_produce_response_fields(broker, java_compat_jar, codec):
    """error_code, error_message, record_errors, base_offset, log_append_time_ms and
    log_start_offset of the partition response, field by field."""
    topics = create_topics(broker.bootstrap, RAW_SCENARIOS, f"raw-{codec}")
    out = run_java(java_compat_jar, broker.bootstrap, "raw", codec,
                   [f"{topics[n]}={spec}" for n, (_, spec, _) in RAW_SCENARIOS.items()])
    problems: list = []
    for name, (cfg, spec, expected) in RAW_SCENARIOS.items():
        topic = topics[name]
        got = out.get(topic)
        if not got or "partition" not in got:
            problems.append(f"{name}: no partition response for {topic}")
            continue
        code, base_offset, append_time, log_start = got["partition"]
        want_code = partition_error(expected)
        if code != want_code:
            problems.append(f"{name}: error_code {code}, Kafka gives {want_code}")
        if not expected:
            log_append = cfg.get("message.timestamp.type") == "LogAppendTime"
            time_ok = (got["window"][0] - 1000 <= append_time <= got["window"][1] + 1000) if log_append \
                else append_time == -1
            if (base_offset, log_start, got.get("error_message"), got["record_errors"]) != (0, 0, None, []) \
                    or not time_ok:
                problems.append(f"{name}: accepted batch answered {got['partition']}, error_message "
                                f"{got.get('error_message')!r}, record_errors {got['record_errors']}; Kafka: "
                                f"base_offset 0, log_append_time {'now' if log_append else -1}, log_start_offset 0, "
                                "error_message null, no record_errors")
            check_appends_after(broker.bootstrap, topic, len(spec.split(",")), problems, name)
            continue
        if (base_offset, append_time, log_start) != (-1, -1, 0):
            problems.append(f"{name}: base_offset/log_append_time_ms/log_start_offset {base_offset}/{append_time}/"
                            f"{log_start}, Kafka gives -1/-1/0")
        indexes = [i for i, _ in got["record_errors"]]
        if indexes != sorted(expected):
            problems.append(f"{name}: record_errors batch indexes {indexes}, Kafka gives {sorted(expected)} "
                            "(every invalid record of the batch, in order)")
        for i, msg in got["record_errors"]:
            if i in expected:
                check_record_message(expected[i], msg, topic, i, got["ts"][i], got["window"], problems, name)
        if want_code == INVALID_TIMESTAMP:
            want_top = TIMESTAMP_TOP_MESSAGE
        else:  # only key errors here: their messages are fixed strings
            shown = ", ".join(f"RecordError(batchIndex={i}, message='{key_message(topic)}')"
                              for i in sorted(expected)[:3])
            want_top = (f"One or more records have been rejected due to {len(expected)} record errors in total, "
                        f"and only showing the first three errors at most: [{shown}]")
        if got.get("error_message") != want_top:
            problems.append(f"{name}: error_message {got.get('error_message')!r}, Kafka gives {want_top!r}")
        check_appends_after(broker.bootstrap, topic, 0, problems, name)
    fail_if(problems)
