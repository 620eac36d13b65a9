// The produce mode of bench-client: produce N records (or for a fixed duration) as fast as
// possible; records/s, MB/s and ack latency percentiles.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

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
