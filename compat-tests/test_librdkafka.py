"""librdkafka (confluent-kafka from PyPI) against the broker under test.

The client program is compat-tests/python/roundtrip_librdkafka.py: AdminClient create/delete
topic, Producer with compression.type none/gzip/snappy/lz4/zstd (acks=all,
enable.idempotence=false), Consumer with assign() (no subscribe, no commits), seek(),
offsets_for_times(), watermarks. It prints `ok ...` per step and `FAIL: ...` on the first
mismatch; run it by hand with `python compat-tests/python/roundtrip_librdkafka.py
--bootstrap 127.0.0.1:PORT [--debug protocol,broker]`.
"""

import sys

import pytest

from conftest import COMPAT_DIR, run_logged


SCRIPT = COMPAT_DIR / "python" / "roundtrip_librdkafka.py"
RUN_TIMEOUT = 180


def roundtrip(broker, *args):
    r = run_logged([sys.executable, SCRIPT, "--bootstrap", broker.bootstrap, *args], timeout=RUN_TIMEOUT,
                   what=f"librdkafka roundtrip {' '.join(args)}")
    print(r.stdout)
    if r.stderr.strip():
        print("--- stderr ---\n" + r.stderr[-5000:])
    assert r.stdout.rstrip().endswith("PASS"), r.stdout
    return r


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_librdkafka_roundtrip_codec(broker, codec):
    roundtrip(broker, "--codecs", codec, "--records", "300")


def test_librdkafka_roundtrip_all_codecs_one_topic(broker):
    roundtrip(broker, "--records", "200")
