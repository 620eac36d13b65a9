// The consume mode of bench-client: read N records from the beginning without a group;
// records/s and MB/s.

package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

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
