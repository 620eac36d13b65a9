"""Settings of scripts/bench that do not change during a run: paths and programs (from the
environment), the systems and workloads by name, their labels and durability descriptions, the
JVM options of Kafka's scripts, and the benchmark's log() to stderr.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


REPO = Path(__file__).resolve().parent.parent.parent
KAFKA_VERSION = os.environ.get("KAFKA_VERSION", "4.1.0")
JAVA = os.environ.get("JAVA", "java")
GO = os.environ.get("GO", "go")
CARGO = os.environ.get("CARGO", "cargo")
SYSTEMS_ALL = ["kafka", "ketch", "ketch-nofsync", "kafka-fsync"]
# Systems that differ from another only in durability: run only where that matters (acks=all
# produce, ProducerPerformance acks=all, e2e), not for footprint, consume, conns, scale or cluster.
DURABILITY_VARIANTS = {"ketch-nofsync", "kafka-fsync"}
LABEL = {
    "kafka": f"Kafka {KAFKA_VERSION}",
    "ketch": "Ketch (default)",
    "ketch-nofsync": "Ketch (fsync off)",
    "kafka-fsync": f"Kafka {KAFKA_VERSION} (fsync)",
}
DURABILITY = {
    "kafka": "no fsync (Kafka default: page cache, flush left to the OS)",
    "ketch": "fsync before acknowledging acks=all (ketch.acks.all.fsync=true, default)",
    "ketch-nofsync": "no fsync (ketch.acks.all.fsync=false)",
    "kafka-fsync": "fsync of every append before it is acknowledged (log.flush.interval.messages=1): Ketch's "
                   "durability for acks=all",
}
WORKLOADS_ALL = ["startup", "idle", "produce", "producer-perf", "consume", "sasl-ssl", "e2e", "conns", "scale", "cluster",
                 "failover", "controller-failover"]
# run only when named in --workloads (several minutes per system and run); failover is the
# cluster workload with its failover step only; controller-failover runs 3 controllers
WORKLOADS_OPT_IN = ["cluster", "failover", "controller-failover"]
# kafka-server-start.sh / kafka-run-class.sh defaults
KAFKA_BROKER_JVM = ["-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                    "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true"]
# kafka-producer-perf-test.sh / kafka-consumer-perf-test.sh
KAFKA_TOOL_JVM = ["-Xmx512M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                  "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                  "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true"]

T0 = time.monotonic()


def log(msg: str) -> None:
    el = time.monotonic() - T0
    print(f"[bench {int(el // 60):02d}:{el % 60:04.1f}] {msg}", file=sys.stderr, flush=True)
