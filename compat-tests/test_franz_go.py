"""franz-go (github.com/twmb/franz-go pkg/kgo + pkg/kadm) against the broker under test.

The client program lives in compat-tests/go (command `roundtrip`); it is built once per
session into compat-tests/.cache/go/. Each run creates a 3-partition topic with kadm, produces
keyed records with headers and explicit timestamps, consumes them back without a consumer
group (ConsumeTopics without a group, ConsumePartitions at explicit offsets), checks keys,
values, headers, timestamps, per-partition order and contiguous offsets, lists offsets
(earliest, latest, by timestamp) and deletes the topic. It prints one `ok ...` line per step
and `FAIL: ...` on the first mismatch; run it by hand with
`compat-tests/.cache/go/roundtrip -brokers 127.0.0.1:PORT [-debug]`.

The producer runs with DisableIdempotentWrite (the broker has no InitProducerId yet).
"""

from pathlib import Path

import pytest

from conftest import go_build, run_logged

RUN_TIMEOUT = 180  # seconds per client run (the program's own deadline is 90 s)


@pytest.fixture(scope="session")
def franz_roundtrip() -> Path:
    """Build compat-tests/go ./roundtrip once per session."""
    return go_build("roundtrip")


def roundtrip(binary, broker, *args):
    r = run_logged([binary, "-brokers", broker.bootstrap, *args], timeout=RUN_TIMEOUT,
                   what=f"franz-go roundtrip {' '.join(args)}")
    print(r.stdout)
    if r.stderr.strip():
        print("--- stderr ---\n" + r.stderr[-5000:])
    assert r.stdout.rstrip().endswith("PASS"), r.stdout
    return r


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_franz_go_roundtrip_codec(broker, franz_roundtrip, codec):
    """acks=all produce with one codec; full read-back and offset checks."""
    roundtrip(franz_roundtrip, broker, "-codecs", codec, "-records", "300")


def test_franz_go_roundtrip_all_codecs_one_topic(broker, franz_roundtrip):
    """Batches of all five codecs interleaved in the same partitions."""
    roundtrip(franz_roundtrip, broker, "-records", "200")


@pytest.mark.parametrize("acks", ["leader", "none"])
def test_franz_go_roundtrip_acks(broker, franz_roundtrip, acks):
    """acks=1, and acks=0 (the broker must not answer Produce at all, and must keep the
    connection usable for the following requests)."""
    roundtrip(franz_roundtrip, broker, "-acks", acks, "-codecs", "lz4", "-records", "300")
