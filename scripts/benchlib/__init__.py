"""The code behind scripts/bench (Ketch side by side with Apache Kafka); scripts/bench is the entry
point and holds the user documentation (its --help text).

Modules:
  config                settings from the environment, systems, workloads, JVM options, log()
  proc                  spawning, reaping and killing child processes; /proc sampling (RSS, CPU, fds)
  brokers               the brokers under test: Broker, Ketch, Kafka (start, stop, readiness)
  bench                 Bench: setup, recording, the measured-run helpers and the run order
  workloads_throughput  warm-up, produce, producer-perf, consume and e2e workloads (a Bench mixin)
  workloads_footprint   startup, idle, conns and scale workloads (a Bench mixin)
  cluster               three brokers under a controller, Ketch or Kafka (settings of compat-tests/cluster.py)
  workloads_cluster     the cluster workload: RF 3 produce, e2e latency and failover (a Bench mixin)
  report                results.md, results.json, ratios.png and the number formatting
  cli                   command-line parsing and the process-wide setup (signals, open-files limit)
"""
