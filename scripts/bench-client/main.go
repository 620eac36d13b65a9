// Command bench-client is the native (non-JVM) load generator of scripts/bench.
//
// It drives any Kafka-compatible broker with franz-go and prints exactly one JSON object on
// stdout per run (progress and errors go to stderr), so the numbers can be compared with the
// JVM tools (ProducerPerformance, ConsumerPerformance) without the client being the bottleneck.
//
//	bench-client topic    create|delete  -brokers B -topic T[,T2...] [-partitions P]
//	bench-client produce  -brokers B -topic T -records N -size S -acks 1|all|0 -compression none|lz4|... [-spread]
//	bench-client consume  -brokers B -topic T -records N
//	bench-client e2e      -brokers B -topic T -rate R -duration D -warmup W -size S -acks all
//	bench-client startup  -brokers HOST:PORT [-topic T] -- broker command and arguments...
//	bench-client conns    -brokers B -topic T -clients N -records-per-client M -size S -hold D
//	bench-client payload  -size S -lines N   (payload lines for ProducerPerformance --payload-file)
//
// Sizes are in bytes, rates in records/s, MB means 2^20 bytes (as in Kafka's perf tools).
// Every mode has -timeout: past it the run fails (exit 1) instead of hanging.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const mb = 1 << 20

func usage() {
	fmt.Fprint(os.Stderr, `usage: bench-client MODE [flags]
modes:
  topic create|delete  create topics (waits until every partition has a leader) / delete them
  produce              produce N records as fast as possible; records/s and MB/s
  consume              read N records from the beginning (no group); records/s and MB/s
  e2e                  produce at a fixed rate and consume in the same process; latency percentiles in µs
  startup              spawn a broker command, time spawn -> port open -> first acked record (acks=all)
  conns                open N clients (connections), hold them, then produce from all at once
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
	case "e2e":
		out, err = runE2E(args)
	case "startup":
		out, err = runStartup(args)
	case "conns":
		out, err = runConns(args)
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

// ---------------------------------------------------------------------------------------------
// common flags and helpers
// ---------------------------------------------------------------------------------------------

type common struct {
	brokers   string
	topic     string
	timeout   time.Duration
	debug     bool
	brokerPid int
	w0        time.Time
	b0, c0    float64
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.brokers, "brokers", "127.0.0.1:9092", "comma-separated seed brokers")
	fs.StringVar(&c.topic, "topic", "bench", "topic name")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "fail the run after this long")
	fs.BoolVar(&c.debug, "debug", false, "franz-go debug logging to stderr")
	fs.IntVar(&c.brokerPid, "broker-pid", 0, "pid of the broker: report its CPU time during the measured window")
}

// windowStart / windowEnd bracket the measured part of a run: its wall time, this process's CPU
// time and (with -broker-pid) the broker's CPU time over exactly that window.
func (c *common) windowStart() {
	c.w0, c.b0, c.c0 = time.Now(), procCPU(c.brokerPid), selfCPU()
}

func (c *common) windowEnd(out map[string]any) {
	w := time.Since(c.w0).Seconds()
	out["window_s"] = w
	out["client_window_cpu_s"] = selfCPU() - c.c0
	if c.brokerPid > 0 {
		out["broker_window_cpu_s"] = procCPU(c.brokerPid) - c.b0
	}
}

func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return tvSec(ru.Utime) + tvSec(ru.Stime)
}

// procCPU is utime+stime of a process in seconds (from /proc/PID/stat; USER_HZ assumed 100).
func procCPU(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	var ut, st float64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return (ut + st) / 100
}

func (c *common) opts() []kgo.Opt {
	o := []kgo.Opt{kgo.SeedBrokers(strings.Split(c.brokers, ",")...), kgo.ClientID("ketch-bench")}
	if c.debug {
		o = append(o, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
	}
	return o
}

func parse(fs *flag.FlagSet, args []string) {
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
}

func acksOpts(acks string) ([]kgo.Opt, error) {
	switch acks {
	case "all", "-1":
		return []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}, nil
	// Without idempotence franz-go allows 1 produce request in flight per broker by default; the
	// Java client allows 5 (max.in.flight.requests.per.connection), as franz-go does with
	// idempotence (acks=all): use 5 everywhere so acks=1 is not latency-bound by the client.
	case "1", "leader":
		return []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
			kgo.MaxProduceRequestsInflightPerBroker(5)}, nil
	case "0", "none":
		return []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite(),
			kgo.MaxProduceRequestsInflightPerBroker(5)}, nil
	}
	return nil, fmt.Errorf("bad -acks %q (all, 1 or 0)", acks)
}

func codec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none", "":
		return kgo.NoCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("bad -compression %q", name)
}

// payloadPool is 4 MiB of text-like bytes (words from a small vocabulary, log-line shaped):
// compressible about 2-3x with lz4, never the same record twice in a row. A record of size S
// is pool[off:off+S] with a moving offset.
var payloadPool []byte

var payloadPoolOnce = sync.OnceValue(func() []byte {
	words := strings.Fields(`the a of to and in is for on that with as by at from this be are was it or an
		request response broker topic partition offset leader replica consumer producer group commit fetch
		produce batch record header key value timestamp error retry timeout session epoch sequence
		user order payment invoice account event click view session device region status ok failed
		pending shipped 200 404 500 GET POST PUT us-east-1 eu-west-1 true false null id ts msg level info`)
	r := rand.New(rand.NewSource(42))
	var sb strings.Builder
	for sb.Len() < 4<<20 {
		fmt.Fprintf(&sb, `{"ts":%d,"level":"%s","id":"%08x","msg":"`, 1700000000000+r.Int63n(1e9),
			[]string{"info", "warn", "debug"}[r.Intn(3)], r.Uint32())
		for n := 5 + r.Intn(20); n > 0; n-- {
			sb.WriteString(words[r.Intn(len(words))])
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, `","n":%d}`+"\n", r.Intn(100000))
	}
	return []byte(sb.String())
})

func payload(i, size int) []byte {
	if payloadPool == nil {
		payloadPool = payloadPoolOnce()
	}
	if size > len(payloadPool)/2 {
		b := make([]byte, size)
		for j := range b {
			b[j] = payloadPool[j%len(payloadPool)]
		}
		return b
	}
	off := (i * 7919) % (len(payloadPool) - size)
	return payloadPool[off : off+size]
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	idx := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	if idx < 0 {
		idx = 0
	}
	if idx >= len(sorted) {
		idx = len(sorted) - 1
	}
	return sorted[idx]
}

// ---------------------------------------------------------------------------------------------
// topic create / delete
// ---------------------------------------------------------------------------------------------

func runTopic(args []string) (map[string]any, error) {
	if len(args) < 1 || (args[0] != "create" && args[0] != "delete") {
		return nil, errors.New("usage: bench-client topic create|delete -brokers B -topic T[,T2...] [-partitions P]")
	}
	action := args[0]
	fs := flag.NewFlagSet("topic "+action, flag.ExitOnError)
	var c common
	c.register(fs)
	partitions := fs.Int("partitions", 6, "partitions per topic (create)")
	configs := fs.String("configs", "", "topic configs k=v,k=v (create)")
	parse(fs, args[1:])
	topics := strings.Split(c.topic, ",")
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	cl, err := kgo.NewClient(append(c.opts(), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(c.timeout.Milliseconds()))
	start := time.Now()
	if action == "delete" {
		resps, err := adm.DeleteTopics(ctx, topics...)
		if err != nil {
			return nil, err
		}
		for _, r := range resps {
			if r.Err != nil {
				return nil, fmt.Errorf("delete %s: %v", r.Topic, r.Err)
			}
		}
		return map[string]any{"deleted": topics, "seconds": time.Since(start).Seconds()}, nil
	}
	cfgs := map[string]*string{}
	if *configs != "" {
		for _, kv := range strings.Split(*configs, ",") {
			k, v, _ := strings.Cut(kv, "=")
			v2 := v
			cfgs[k] = &v2
		}
	}
	resps, err := adm.CreateTopics(ctx, int32(*partitions), 1, cfgs, topics...)
	if err != nil {
		return nil, err
	}
	for _, r := range resps {
		if r.Err != nil {
			return nil, fmt.Errorf("create %s: %v %s", r.Topic, r.Err, r.ErrMessage)
		}
	}
	acked := time.Since(start)
	// Ready = the metadata shows a leader for every partition of every topic.
	for {
		md, err := adm.Metadata(ctx, topics...)
		ready := err == nil
		if ready {
			for _, t := range topics {
				td, ok := md.Topics[t]
				if !ok || td.Err != nil || len(td.Partitions) != *partitions {
					ready = false
					break
				}
				for _, p := range td.Partitions {
					if p.Leader < 0 || p.Err != nil {
						ready = false
						break
					}
				}
			}
		}
		if ready {
			break
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("topics not ready within %v (last error %v)", c.timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return map[string]any{"created": topics, "partitions": *partitions, "acked_s": acked.Seconds(),
		"seconds": time.Since(start).Seconds()}, nil
}

// ---------------------------------------------------------------------------------------------
// produce
// ---------------------------------------------------------------------------------------------

func runProduce(args []string) (map[string]any, error) {
	fs := flag.NewFlagSet("produce", flag.ExitOnError)
	var c common
	c.register(fs)
	records := fs.Int("records", 100000, "records to produce")
	size := fs.Int("size", 1024, "record value size in bytes (no key)")
	acks := fs.String("acks", "all", "all, 1 or 0")
	comp := fs.String("compression", "none", "none, lz4, zstd, snappy, gzip")
	spread := fs.Bool("spread", false, "round-robin every record over all partitions (default: franz-go's sticky uniform-bytes partitioner)")
	linger := fs.Duration("linger", -1, "producer linger (default: franz-go's default, 10ms)")
	duration := fs.Duration("duration", 0, "stop producing after this long (0: produce all -records)")
	parse(fs, args)

	opts := c.opts()
	ao, err := acksOpts(*acks)
	if err != nil {
		return nil, err
	}
	cc, err := codec(*comp)
	if err != nil {
		return nil, err
	}
	opts = append(opts, ao...)
	topics := strings.Split(c.topic, ",") // several topics: record i goes to topics[i % n]
	opts = append(opts, kgo.ProducerBatchCompression(cc), kgo.RecordDeliveryTimeout(c.timeout))
	if *spread {
		opts = append(opts, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	}
	if *linger >= 0 {
		opts = append(opts, kgo.ProducerLinger(*linger))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	// Metadata first (not timed): the run measures the data path, not the client's bootstrap.
	if err := cl.Ping(ctx); err != nil {
		return nil, fmt.Errorf("ping: %w", err)
	}
	var firstErr atomic.Value
	var failed, acked atomic.Int64
	var wg sync.WaitGroup
	lat := make([]float64, *records)
	payload(0, *size)
	c.windowStart()
	start := time.Now()
	// With -duration, records still buffered at the deadline are canceled (their context ends);
	// the rate counts the acknowledged records over the time until the last answer.
	pctx := ctx
	if *duration > 0 {
		var pcancel context.CancelFunc
		pctx, pcancel = context.WithDeadline(ctx, start.Add(*duration))
		defer pcancel()
	}
	n := 0
	for i := 0; i < *records && pctx.Err() == nil; i++ {
		wg.Add(1)
		n++
		sent := time.Now()
		idx := i
		cl.Produce(pctx, &kgo.Record{Topic: topics[i%len(topics)], Value: payload(i, *size)}, func(_ *kgo.Record, err error) {
			lat[idx] = float64(time.Since(sent).Microseconds()) / 1000
			switch {
			case err == nil:
				acked.Add(1)
			case *duration > 0 && pctx.Err() != nil && errors.Is(err, context.DeadlineExceeded):
				lat[idx] = math.NaN() // canceled at the end of the window: not an error
			default:
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	if e := firstErr.Load(); e != nil {
		return nil, fmt.Errorf("%d records failed, first: %v", failed.Load(), e)
	}
	done := int(acked.Load())
	kept := lat[:0]
	for _, l := range lat[:n] {
		if !math.IsNaN(l) {
			kept = append(kept, l)
		}
	}
	lat = kept
	out := map[string]any{}
	c.windowEnd(out)
	sort.Float64s(lat)
	bytes := float64(done) * float64(*size)
	for k, v := range map[string]any{
		"records": done, "size": *size, "acks": *acks, "compression": *comp, "seconds": el,
		"records_per_s": float64(done) / el, "mb_per_s": bytes / mb / el,
		"ack_latency_ms_p50": percentile(lat, 50), "ack_latency_ms_p99": percentile(lat, 99),
	} {
		out[k] = v
	}
	return out, nil
}

// ---------------------------------------------------------------------------------------------
// consume
// ---------------------------------------------------------------------------------------------

func runConsume(args []string) (map[string]any, error) {
	fs := flag.NewFlagSet("consume", flag.ExitOnError)
	var c common
	c.register(fs)
	records := fs.Int64("records", 100000, "records to read (the run ends when this many were read)")
	parse(fs, args)
	cl, err := kgo.NewClient(append(c.opts(), kgo.ConsumeTopics(c.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	var n, bytes int64
	var first time.Time
	c.windowStart()
	start := time.Now()
	for n < *records {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("read %d of %d records before the timeout", n, *records)
		}
		if errs := fetches.Errors(); len(errs) > 0 {
			return nil, fmt.Errorf("fetch %s[%d]: %v", errs[0].Topic, errs[0].Partition, errs[0].Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if n == 0 {
				first = time.Now()
			}
			n++
			bytes += int64(len(r.Value) + len(r.Key))
		})
	}
	el := time.Since(start).Seconds()
	out := map[string]any{
		"records": n, "bytes": bytes, "seconds": el, "records_per_s": float64(n) / el,
		"mb_per_s": float64(bytes) / mb / el, "first_record_s": first.Sub(start).Seconds(),
	}
	c.windowEnd(out)
	return out, nil
}

// ---------------------------------------------------------------------------------------------
// end-to-end latency at a fixed rate
// ---------------------------------------------------------------------------------------------

func runE2E(args []string) (map[string]any, error) {
	fs := flag.NewFlagSet("e2e", flag.ExitOnError)
	var c common
	c.register(fs)
	rate := fs.Int("rate", 5000, "records per second (open loop: the schedule does not wait for acks)")
	duration := fs.Duration("duration", 20*time.Second, "measured duration")
	warmup := fs.Duration("warmup", 2*time.Second, "duration before measuring (samples dropped)")
	size := fs.Int("size", 1024, "record size (the first 8 bytes carry the scheduled send time)")
	acks := fs.String("acks", "all", "all, 1 or 0")
	comp := fs.String("compression", "none", "compression")
	parse(fs, args)
	if *size < 8 {
		return nil, errors.New("-size must be >= 8")
	}
	ao, err := acksOpts(*acks)
	if err != nil {
		return nil, err
	}
	cc, err := codec(*comp)
	if err != nil {
		return nil, err
	}
	base := time.Now()
	prod, err := kgo.NewClient(append(append(c.opts(), ao...), kgo.ProducerBatchCompression(cc),
		kgo.ProducerLinger(0), kgo.DefaultProduceTopic(c.topic), kgo.RecordDeliveryTimeout(c.timeout))...)
	if err != nil {
		return nil, err
	}
	defer prod.Close()
	cons, err := kgo.NewClient(append(c.opts(), kgo.ConsumeTopics(c.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(time.Second))...)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if err := prod.Ping(ctx); err != nil {
		return nil, err
	}

	total := int(float64(*rate) * (warmup.Seconds() + duration.Seconds()))
	warmN := int(float64(*rate) * warmup.Seconds())
	lats := make([]float64, 0, total)
	var mu sync.Mutex
	done := make(chan error, 1)
	go func() { // consumer
		seen := 0
		for seen < total {
			f := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				done <- fmt.Errorf("consumed %d of %d before the timeout", seen, total)
				return
			}
			if errs := f.Errors(); len(errs) > 0 {
				done <- fmt.Errorf("fetch: %v", errs[0].Err)
				return
			}
			now := time.Since(base).Nanoseconds()
			mu.Lock()
			f.EachRecord(func(r *kgo.Record) {
				seen++
				sent := int64(binary.LittleEndian.Uint64(r.Value[:8]))
				seq := int(binary.LittleEndian.Uint64(r.Value[8:16]))
				if seq >= warmN {
					lats = append(lats, float64(now-sent)/1000)
				}
			})
			mu.Unlock()
		}
		done <- nil
	}()

	var prodErr atomic.Value
	interval := time.Second / time.Duration(*rate)
	maxBehind := time.Duration(0)
	payload(0, *size)
	c.windowStart()
	sendStart := time.Now()
	for i := 0; i < total; i++ {
		due := sendStart.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		} else if -d > maxBehind {
			maxBehind = -d
		}
		v := make([]byte, *size)
		copy(v[16:], payload(i, *size-16))
		binary.LittleEndian.PutUint64(v[:8], uint64(due.Sub(base).Nanoseconds()))
		binary.LittleEndian.PutUint64(v[8:16], uint64(i))
		prod.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				prodErr.CompareAndSwap(nil, err)
			}
		})
	}
	sendEl := time.Since(sendStart).Seconds()
	if err := prod.Flush(ctx); err != nil {
		return nil, err
	}
	if e := prodErr.Load(); e != nil {
		return nil, fmt.Errorf("produce: %v", e)
	}
	if err := <-done; err != nil {
		return nil, err
	}
	out := map[string]any{}
	c.windowEnd(out)
	sort.Float64s(lats)
	sum := 0.0
	for _, l := range lats {
		sum += l
	}
	for k, v := range map[string]any{
		"rate": *rate, "achieved_rate": float64(total) / sendEl, "samples": len(lats), "size": *size, "acks": *acks,
		"p50_us": percentile(lats, 50), "p99_us": percentile(lats, 99), "p999_us": percentile(lats, 99.9),
		"max_us": percentile(lats, 100), "mean_us": sum / float64(len(lats)),
		"sender_max_behind_ms": float64(maxBehind.Microseconds()) / 1000,
	} {
		out[k] = v
	}
	return out, nil
}

// ---------------------------------------------------------------------------------------------
// startup: spawn -> port open -> first acked record
// ---------------------------------------------------------------------------------------------

func runStartup(args []string) (map[string]any, error) {
	fs := flag.NewFlagSet("startup", flag.ExitOnError)
	var c common
	c.register(fs)
	logPath := fs.String("log", "", "file for the broker's stdout+stderr (default: discarded)")
	keep := fs.Bool("keep", false, "leave the broker running (default: SIGTERM it, SIGKILL after 30s)")
	c.topic = ""
	parse(fs, args)
	cmdArgs := fs.Args()
	if len(cmdArgs) == 0 {
		return nil, errors.New("usage: bench-client startup -brokers HOST:PORT [-topic T] -- command args...")
	}
	topic := c.topic
	if topic == "" {
		topic = fmt.Sprintf("startup-%d", time.Now().UnixNano())
	}
	cmd := exec.Command(cmdArgs[0], cmdArgs[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{}) // closed when the broker has exited; waitErr is then set
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	stop := func() {
		if *keep {
			return
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}
	defer stop()

	var portOpen time.Duration
	for { // tight loop on the TCP port
		conn, err := net.DialTimeout("tcp", c.brokers, 100*time.Millisecond)
		if err == nil {
			conn.Close()
			portOpen = time.Since(start)
			break
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("broker exited before opening its port: %v", waitErr)
		case <-ctx.Done():
			return nil, errors.New("port not open before the timeout")
		case <-time.After(time.Millisecond):
		}
	}
	attempts := 0
	var lastErr error
	for { // tight produce retry loop: a fresh client each attempt, 2 ms backoffs inside
		attempts++
		cl, err := kgo.NewClient(append(c.opts(), kgo.AllowAutoTopicCreation(), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.MetadataMinAge(10*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 2 * time.Millisecond }),
			kgo.ProducerLinger(0), kgo.DefaultProduceTopic(topic))...)
		if err != nil {
			return nil, err
		}
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		err = cl.ProduceSync(actx, &kgo.Record{Value: []byte("first")}).FirstErr()
		acancel()
		cl.Close()
		if err == nil {
			break
		}
		lastErr = err
		select {
		case <-exited:
			return nil, fmt.Errorf("broker exited before the first produce: %v (last produce error %v)", waitErr, lastErr)
		case <-ctx.Done():
			return nil, fmt.Errorf("no acked record before the timeout (last error %v)", lastErr)
		case <-time.After(time.Millisecond):
		}
	}
	first := time.Since(start)
	return map[string]any{"pid": cmd.Process.Pid, "port_open_ms": float64(portOpen.Microseconds()) / 1000,
		"first_produce_ms": float64(first.Microseconds()) / 1000, "attempts": attempts, "topic": topic}, nil
}

// ---------------------------------------------------------------------------------------------
// conns: many concurrent clients
// ---------------------------------------------------------------------------------------------

func runConns(args []string) (map[string]any, error) {
	fs := flag.NewFlagSet("conns", flag.ExitOnError)
	var c common
	c.register(fs)
	clients := fs.Int("clients", 1000, "concurrent clients (each holds its own connection(s))")
	perClient := fs.Int("records-per-client", 100, "records each client produces in the load phase")
	size := fs.Int("size", 1024, "record size")
	hold := fs.Duration("hold", 3*time.Second, "idle time with every connection open before the load phase")
	parse(fs, args)
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	cls := make([]*kgo.Client, *clients)
	defer func() {
		for _, cl := range cls {
			if cl != nil {
				cl.Close()
			}
		}
	}()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, *clients)
	sem := make(chan struct{}, 64)
	for i := range cls {
		cl, err := kgo.NewClient(append(c.opts(), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
			kgo.ProducerLinger(0), kgo.DefaultProduceTopic(c.topic), kgo.ConnIdleTimeout(10*time.Minute),
			kgo.ProducerBatchCompression(kgo.NoCompression()))...)
		if err != nil {
			return nil, err
		}
		cls[i] = cl
		wg.Add(1)
		go func(cl *kgo.Client, i int) { // connect = first produce (metadata + produce connection)
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: payload(i, *size)}).FirstErr(); err != nil {
				errs <- err
			}
		}(cl, i)
	}
	wg.Wait()
	connect := time.Since(start)
	select {
	case err := <-errs:
		return nil, fmt.Errorf("connect phase: %v", err)
	default:
	}
	// Tell the caller every client is connected, so it can look at the broker (RSS, sockets).
	fmt.Fprintf(os.Stderr, "CONNECTED %d %.3f\n", *clients, connect.Seconds())
	time.Sleep(*hold)

	lat := make([]float64, 0, *clients**perClient)
	var mu sync.Mutex
	c.windowStart()
	start = time.Now()
	for _, cl := range cls {
		wg.Add(1)
		go func(cl *kgo.Client) {
			defer wg.Done()
			local := make([]float64, 0, *perClient)
			var iwg sync.WaitGroup
			for j := 0; j < *perClient; j++ {
				iwg.Add(1)
				sent := time.Now()
				cl.Produce(ctx, &kgo.Record{Value: payload(j, *size)}, func(_ *kgo.Record, err error) {
					if err != nil {
						select {
						case errs <- err:
						default:
						}
					}
					mu.Lock()
					local = append(local, float64(time.Since(sent).Microseconds())/1000)
					mu.Unlock()
					iwg.Done()
				})
			}
			iwg.Wait()
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}(cl)
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	select {
	case err := <-errs:
		return nil, fmt.Errorf("load phase: %v", err)
	default:
	}
	sort.Float64s(lat)
	n := *clients * *perClient
	out := map[string]any{"clients": *clients, "connect_s": connect.Seconds(), "records": n, "seconds": el,
		"records_per_s": float64(n) / el, "mb_per_s": float64(n) * float64(*size) / mb / el,
		"ack_latency_ms_p50": percentile(lat, 50), "ack_latency_ms_p99": percentile(lat, 99)}
	c.windowEnd(out)
	return out, nil
}

// ---------------------------------------------------------------------------------------------
// payload lines
// ---------------------------------------------------------------------------------------------

func runPayload(args []string) error {
	fs := flag.NewFlagSet("payload", flag.ExitOnError)
	size := fs.Int("size", 1024, "bytes per line (without the newline)")
	lines := fs.Int("lines", 4096, "lines")
	parse(fs, args)
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for i := 0; i < *lines; i++ {
		line := []byte(string(payload(i*131, *size)))
		for j, b := range line {
			if b == '\n' || b == '\r' {
				line[j] = ' '
			}
		}
		w.Write(line)
		w.WriteByte('\n')
	}
	return nil
}
