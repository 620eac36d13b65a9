// The e2e mode of bench-client: produce at a fixed rate (open loop) and consume in the same
// process; end-to-end latency percentiles in µs from the scheduled send time.

package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

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
