// Command bench-client is the native (non-JVM) load generator of scripts/bench.
//
// It drives any Kafka-compatible broker with franz-go and prints exactly one JSON object on
// stdout per run (progress and errors go to stderr), so the numbers can be compared with the
// JVM tools (ProducerPerformance, ConsumerPerformance) without the client being the bottleneck.
//
//	bench-client topic    create|delete  -brokers B -topic T[,T2...] [-partitions P] [-rf R] [-wait-brokers N]
//	bench-client produce  -brokers B -topic T -records N -size S -acks 1|all|0 -compression none|lz4|... [-spread]
//	bench-client consume  -brokers B -topic T -records N
//	bench-client produce-raw  -brokers B -topic T -records N -size S -acks 1|all -compression none|lz4
//	bench-client consume-raw  -brokers B -topic T -records N -size S
//	bench-client e2e      -brokers B -topic T -rate R -duration D -warmup W -size S -acks all
//	bench-client startup  -brokers HOST:PORT [-topic T] -- broker command and arguments...
//	bench-client failover -brokers B -topic T -node N -kill-pid PID [-acks all|1]
//	bench-client conns    -brokers B -topic T -clients N -records-per-client M -size S -hold D
//	bench-client payload  -size S -lines N   (payload lines for ProducerPerformance --payload-file)
//
// Sizes are in bytes, rates in records/s, MB means 2^20 bytes (as in Kafka's perf tools).
// Every mode has -timeout: past it the run fails (exit 1) instead of hanging.
//
// This file owns the usage text, the mode dispatch and the JSON output; the flags every mode
// shares are in common.go, the payloads in payload.go, and each mode in its own file (topic.go,
// produce.go, consume.go, raw.go + rawbatch.go, e2e.go, startup.go, conns.go, failover.go).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"syscall"
)

const mb = 1 << 20

func usage() {
	fmt.Fprint(os.Stderr, `usage: bench-client MODE [flags]
modes:
  topic create|delete  create topics (waits until every partition has a leader) / delete them
  produce              produce N records as fast as possible; records/s and MB/s
  consume              read N records from the beginning (no group); records/s and MB/s
  produce-raw          broker-bound produce: batches built before the run, sent as they are
  consume-raw          broker-bound consume: fetch from the start, check batch CRCs, count from batch headers
  e2e                  produce at a fixed rate and consume in the same process; latency percentiles in µs
  startup              spawn a broker command, time spawn -> port open -> first acked record (acks=all)
  failover             kill -9 broker N, time kill -> first acknowledged write on every partition it led
  controller-failover  kill -9 the active controller, time kill -> a topic created -> its leaders elected
  conns                open N clients (connections), hold them, then produce from all at once
  scram-user           create a SCRAM user (AlterUserScramCredentials), for the SASL_SSL runs
  payload              print -lines payload lines of -size bytes (the produce payloads, for ProducerPerformance)
run "bench-client MODE -h" for the flags of a mode. Output: one JSON object on stdout.
`)
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	mode, args := os.Args[1], os.Args[2:]
	var err error
	var out map[string]any
	switch mode {
	case "topic":
		out, err = runTopic(args)
	case "produce":
		out, err = runProduce(args)
	case "consume":
		out, err = runConsume(args)
	case "produce-raw":
		out, err = runProduceRaw(args)
	case "consume-raw":
		out, err = runConsumeRaw(args)
	case "e2e":
		out, err = runE2E(args)
	case "startup":
		out, err = runStartup(args)
	case "conns":
		out, err = runConns(args)
	case "failover":
		out, err = runFailover(args)
	case "controller-failover":
		out, err = runControllerFailover(args)
	case "scram-user":
		out, err = runScramUser(args)
	case "payload":
		err = runPayload(args)
	case "-h", "--help", "help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", mode)
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench-client %s: %v\n", mode, err)
		os.Exit(1)
	}
	if out != nil {
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
			out["client_cpu_s"] = tvSec(ru.Utime) + tvSec(ru.Stime)
		}
		b, _ := json.Marshal(out)
		fmt.Println(string(b))
	}
}

func tvSec(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }
