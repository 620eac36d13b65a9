// Command sarama is a compatibility check of the Go client Sarama
// (github.com/IBM/sarama) against a Kafka-compatible broker. It uses Sarama's
// own defaults except where a step needs otherwise (acks=all, compression,
// idempotence, OffsetOldest), with Config.Version given by -version ("default"
// keeps sarama.DefaultVersion, which pins older request versions).
//
// Scenarios (-scenario):
//
//	produce  a 3-partition topic; for each codec of -codecs a SyncProducer
//	         (SendMessage one by one, then SendMessages batches) and an
//	         AsyncProducer (batched by Flush settings, some batches above the
//	         64 KiB lz4 block size), acks=all, optionally idempotent
//	         (-idempotent: Producer.Idempotent, Net.MaxOpenRequests=1). Every
//	         ack must carry the next offset of its partition in send order.
//	         Then the partition Consumer reads every partition from
//	         OffsetOldest: offsets contiguous from 0, and key, value (nil vs
//	         empty kept), headers (in order, nil values kept) and timestamp of
//	         the record at each offset equal to what was acked there.
//	group    a ConsumerGroup (range strategy, auto-commit with MarkMessage
//	         metadata) on a 4-partition topic: member A alone, member B joins
//	         (rebalance: disjoint claims of one generation), ClusterAdmin
//	         ListConsumerGroups / DescribeConsumerGroups (Stable, both members
//	         and their assignments) / ListConsumerGroupOffsets (offsets and
//	         metadata), B leaves (A gets everything back), every record
//	         consumed exactly once with the right content and in offset order
//	         per claim; after A closed the group is Empty with its offsets
//	         kept, a new member resumes exactly at the committed offsets, and
//	         DeleteConsumerGroup removes the group.
//	topic-configs  DescribeConfig of a topic lists every topic config Kafka 4.1
//	         lists (names only; values of the ones set are checked by admin).
//	admin    ClusterAdmin: DescribeCluster, CreateTopic with configs (plus
//	         validateOnly, duplicate, bad config and replication factor
//	         refusals), ListTopics, DescribeTopics, DescribeConfig (topic,
//	         filtered, broker), CreatePartitions (grow, validateOnly, refused
//	         shrink), DeleteRecords (log start offset moves, consumer and
//	         ListOffsets agree, out-of-range refused), DeleteTopic.
//
// Every step prints one "ok ..." line and the run ends with "PASS". On the
// first mismatch it prints "FAIL: ..." and exits 1; on its own deadline it
// prints "TIMEOUT: ..." and exits 3. Sarama's log goes to stderr.
//
// This file holds the flags, the reporting helpers and main; the scenarios are in
// produce.go (records, producers, the partition consumer), group.go and admin.go.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

var (
	flagBrokers    = flag.String("brokers", "127.0.0.1:9092", "comma-separated seed brokers")
	flagScenario   = flag.String("scenario", "produce", "produce | group | admin | topic-configs")
	flagVersion    = flag.String("version", "4.1.0", "sarama Config.Version as a Kafka version, or 'default' (sarama.DefaultVersion) or 'max' (sarama.MaxVersion)")
	flagCodecs     = flag.String("codecs", "none", "produce: comma-separated codecs (none, gzip, snappy, lz4, zstd), one producer pair each")
	flagIdempotent = flag.Bool("idempotent", false, "produce: Producer.Idempotent=true, Net.MaxOpenRequests=1")
	flagRecords    = flag.Int("records", 600, "produce: records per producer (sync and async each)")
	flagTimeout    = flag.Duration("timeout", 100*time.Second, "overall deadline")
	flagStep       = flag.Duration("step-timeout", 40*time.Second, "deadline of each waiting step")
	flagDebug      = flag.Bool("debug", false, "sarama DebugLogger to stderr too")
)

var start = time.Now()

func okf(format string, args ...any) {
	fmt.Printf("ok   %6.2fs  "+format+"\n", append([]any{time.Since(start).Seconds()}, args...)...)
}

var failMu sync.Mutex

// failf ends the program at once (from any goroutine).
func failf(format string, args ...any) {
	failMu.Lock()
	fmt.Printf("FAIL: "+format+"\n", args...)
	dumpEvents()
	os.Exit(1)
}

func check(err error, what string) {
	if err != nil {
		failf("%s: %v", what, err)
	}
}

var (
	eventsMu sync.Mutex
	events   []string
)

func event(format string, args ...any) {
	eventsMu.Lock()
	defer eventsMu.Unlock()
	events = append(events, fmt.Sprintf("%7.2fs %s", time.Since(start).Seconds(), fmt.Sprintf(format, args...)))
}

func dumpEvents() {
	eventsMu.Lock()
	defer eventsMu.Unlock()
	if len(events) == 0 {
		return
	}
	fmt.Println("--- events (last 60) ---")
	from := 0
	if len(events) > 60 {
		from = len(events) - 60
	}
	for _, e := range events[from:] {
		fmt.Println(e)
	}
}

func waitFor(what string, cond func() bool) {
	deadline := time.Now().Add(*flagStep)
	for !cond() {
		if time.Now().After(deadline) {
			failf("timed out after %v waiting for %s", *flagStep, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func brokers() []string { return strings.Split(*flagBrokers, ",") }

var runID = strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36)

func kafkaVersion() sarama.KafkaVersion {
	switch *flagVersion {
	case "default", "":
		return sarama.DefaultVersion
	case "max":
		return sarama.MaxVersion
	}
	v, err := sarama.ParseKafkaVersion(*flagVersion)
	check(err, "-version")
	return v
}

func newConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "ketch-compat-sarama"
	cfg.Version = kafkaVersion()
	return cfg
}

func codecOf(name string) sarama.CompressionCodec {
	switch name {
	case "none":
		return sarama.CompressionNone
	case "gzip":
		return sarama.CompressionGZIP
	case "snappy":
		return sarama.CompressionSnappy
	case "lz4":
		return sarama.CompressionLZ4
	case "zstd":
		return sarama.CompressionZSTD
	}
	failf("unknown codec %q", name)
	return 0
}

// ---------------------------------------------------------------------------------------------
// records

func main() {
	flag.Parse()
	sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Ltime|log.Lmicroseconds)
	if *flagDebug {
		sarama.DebugLogger = log.New(os.Stderr, "[sarama debug] ", log.Ltime|log.Lmicroseconds)
	}
	time.AfterFunc(*flagTimeout, func() {
		failMu.Lock()
		fmt.Printf("TIMEOUT: %s scenario did not finish within %v\n", *flagScenario, *flagTimeout)
		failMu.Unlock()
		dumpEvents()
		os.Exit(3)
	})
	fmt.Printf("sarama scenario=%s version=%s (Config.Version %s) codecs=%s idempotent=%v\n",
		*flagScenario, *flagVersion, kafkaVersion(), *flagCodecs, *flagIdempotent)
	switch *flagScenario {
	case "produce":
		scenarioProduce()
	case "group":
		scenarioGroup()
	case "admin":
		scenarioAdmin()
	case "topic-configs":
		scenarioTopicConfigs()
	default:
		failf("unknown -scenario %q", *flagScenario)
	}
}
