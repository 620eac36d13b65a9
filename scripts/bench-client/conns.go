// The conns mode of bench-client: open many concurrent clients (each its own connections),
// hold them, then produce from all of them at once.

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

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
