// The failover mode of bench-client: kill -9 one broker of a cluster and time, for every
// partition it led, how long after the kill a write to that partition is acknowledged again.
//
// Before the kill (not timed): the Metadata answer gives the partitions the broker leads, and one
// record is produced to every partition of the topic, so connections, producer id and metadata
// are in place, then -pause of idle time (the warm-up's load is over). Then SIGKILL (sent by this process, so the kill and the acknowledgements are timed
// on one clock), and one goroutine per led partition produces a record to it, again and again,
// until one is acknowledged. The client retries in a tight loop: metadata refreshed at most every
// 10 ms, 10 ms backoff between retries (franz-go's defaults would add up to 5 s of metadata age).

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func runFailover(args []string) (map[string]any, error) {
	fs := flag.NewFlagSet("failover", flag.ExitOnError)
	var c common
	c.register(fs)
	node := fs.Int("node", -1, "node id of the broker to kill (required)")
	pid := fs.Int("kill-pid", 0, "pid of that broker's process (required): it gets SIGKILL")
	acks := fs.String("acks", "all", "all or 1")
	size := fs.Int("size", 1024, "record size")
	pause := fs.Duration("pause", 2*time.Second, "idle time between the warm-up and the kill")
	parse(fs, args)
	if *node < 0 || *pid <= 0 {
		return nil, errors.New("-node and -kill-pid are required")
	}
	ao, err := acksOpts(*acks)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	tight := func(int) time.Duration { return 10 * time.Millisecond }
	cl, err := kgo.NewClient(append(append(c.opts(), ao...), kgo.DefaultProduceTopic(c.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(c.timeout), kgo.RetryBackoffFn(tight), kgo.MetadataMinAge(10*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		// UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION from a broker that has not applied the
		// topic (or a leadership) yet: retried like any other error, not failed after 4 tries.
		kgo.UnknownTopicRetries(-1))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(ctx, c.topic)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	td, ok := md.Topics[c.topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("topic %s not in the metadata (%v)", c.topic, td.Err)
	}
	var led, all []int32
	for _, p := range td.Partitions {
		all = append(all, p.Partition)
		if p.Leader == int32(*node) {
			led = append(led, p.Partition)
		}
	}
	if len(led) == 0 {
		return nil, fmt.Errorf("broker %d leads no partition of %s", *node, c.topic)
	}
	// Warm-up: one record to every partition, acknowledged (again while any fails: a broker may
	// not host a just-created topic yet). Its duration is reported: from a created topic to every
	// partition accepting writes.
	warm0 := time.Now()
	for {
		warm := make([]*kgo.Record, len(all))
		for i, p := range all {
			warm[i] = &kgo.Record{Partition: p, Value: payload(i, *size)}
		}
		err := cl.ProduceSync(ctx, warm...).FirstErr()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("warm-up produce: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	warmMs := float64(time.Since(warm0).Microseconds()) / 1000
	time.Sleep(*pause)

	if err := syscall.Kill(*pid, syscall.SIGKILL); err != nil {
		return nil, fmt.Errorf("kill %d: %w", *pid, err)
	}
	killed := time.Now()
	ms := make([]float64, len(led))
	attempts := make([]int, len(led))
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	for i, p := range led {
		wg.Add(1)
		go func(i int, p int32) {
			defer wg.Done()
			for {
				attempts[i]++
				err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: payload(i, *size)}).FirstErr()
				if err == nil {
					ms[i] = float64(time.Since(killed).Microseconds()) / 1000
					return
				}
				if ctx.Err() != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("partition %d: no acknowledged write within %v (last error %v)", p, c.timeout, err)
					}
					mu.Unlock()
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}(i, p)
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	per := map[string]float64{}
	retried := 0
	for i, p := range led {
		per[fmt.Sprint(p)] = ms[i]
		if attempts[i] > 1 {
			retried++
		}
	}
	sorted := append([]float64(nil), ms...)
	sort.Float64s(sorted)
	return map[string]any{
		"node": *node, "partitions": len(all), "led": len(led), "acks": *acks,
		"first_ms": sorted[0], "p50_ms": percentile(sorted, 50), "all_ms": sorted[len(sorted)-1],
		"produce_calls_failed_then_retried": retried,
		"warmup_all_acked_ms":               warmMs, "killed_at_unix_ms": killed.UnixMilli(), "per_partition_ms": per,
	}, nil
}
