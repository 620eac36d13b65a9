// The broker-bound modes of bench-client: produce-raw and consume-raw send Produce and Fetch
// requests themselves (franz-go's kmsg types over its connection) so that the client does
// almost no work and the broker, not the load generator, sets the pace:
//
//   - produce-raw sends batches built once before the run (rawbatch.go): no per-record work,
//     no compression during the run. -inflight requests are in flight on one connection.
//   - consume-raw fetches from the start with Kafka's consumer defaults (1 MiB per
//     partition, 50 MiB per response, one fetch in flight), checks every batch's CRC-32C (as
//     Java's consumer does with check.crcs=true) and counts records from the batch headers,
//     without decoding records one by one. Every response is read into one reused buffer
//     (rawconn.go), so the client allocates nothing per fetch.
//
// MB/s counts record values (records x -size), like the produce and consume modes.

package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawTopic is what the raw modes learn from Metadata: the (single) broker to send requests
// to, and the topic's id (Produce v13+ and Fetch v13+ name topics by id) and partition count.
type rawTopic struct {
	broker     *kgo.Broker
	addr       string
	id         [16]byte
	partitions int
}

func rawBroker(ctx context.Context, c *common, extra ...kgo.Opt) (*kgo.Client, rawTopic, error) {
	cl, err := kgo.NewClient(append(c.opts(), extra...)...)
	if err != nil {
		return nil, rawTopic{}, err
	}
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(c.topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		cl.Close()
		return nil, rawTopic{}, fmt.Errorf("metadata: %w", err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Brokers) == 0 {
		cl.Close()
		return nil, rawTopic{}, fmt.Errorf("metadata for %q: %+v", c.topic, resp.Topics)
	}
	t0 := resp.Topics[0]
	b := resp.Brokers[0]
	addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	return cl, rawTopic{cl.Broker(int(b.NodeID)), addr, t0.TopicID, len(t0.Partitions)}, nil
}

func runProduceRaw(args []string) (map[string]any, error) {
	fs := flag.NewFlagSet("produce-raw", flag.ExitOnError)
	var c common
	c.register(fs)
	records := fs.Int("records", 100000, "records to produce (rounded up to whole requests)")
	size := fs.Int("size", 1024, "record value size in bytes (no key)")
	acks := fs.String("acks", "all", "all or 1")
	comp := fs.String("compression", "none", "none or lz4")
	perBatch := fs.Int("batch-records", 64, "records per batch (one batch per partition per request)")
	inflight := fs.Int("inflight", 5, "produce requests in flight")
	distinct := fs.Int("distinct", 16, "distinct batches built per partition (then reused)")
	parse(fs, args)
	ackVal := map[string]int16{"all": -1, "1": 1}[*acks]
	if ackVal == 0 {
		return nil, fmt.Errorf("-acks must be all or 1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	// franz-go stamps its configured acks on every ProduceRequest it sends, raw ones included.
	ao, err := acksOpts(*acks)
	if err != nil {
		return nil, err
	}
	cl, rt, err := rawBroker(ctx, &c, ao...)
	if err != nil {
		return nil, err
	}
	broker, partitions := rt.broker, rt.partitions
	defer cl.Close()
	// Build every request before the run.
	reqs := make([]*kmsg.ProduceRequest, *distinct)
	next := 0
	for d := range reqs {
		req := kmsg.NewPtrProduceRequest()
		req.Acks = ackVal
		req.TimeoutMillis = 30000
		topic := kmsg.NewProduceRequestTopic()
		topic.Topic = c.topic
		topic.TopicID = rt.id
		for p := 0; p < partitions; p++ {
			batch, err := buildBatch(next, *perBatch, *size, *comp)
			if err != nil {
				return nil, err
			}
			next += *perBatch
			part := kmsg.NewProduceRequestTopicPartition()
			part.Partition = int32(p)
			part.Records = batch
			topic.Partitions = append(topic.Partitions, part)
		}
		req.Topics = append(req.Topics, topic)
		reqs[d] = req
	}
	perReq := *perBatch * partitions
	total := (*records + perReq - 1) / perReq
	var sent, acked atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	c.windowStart()
	start := time.Now()
	for w := 0; w < *inflight; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := sent.Add(1) - 1
				if i >= int64(total) || firstErr.Load() != nil {
					return
				}
				resp, err := broker.Request(ctx, reqs[i%int64(len(reqs))])
				if err == nil {
					err = produceError(resp.(*kmsg.ProduceResponse))
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				acked.Add(int64(perReq))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	if e := firstErr.Load(); e != nil {
		return nil, e.(error)
	}
	out := map[string]any{}
	c.windowEnd(out)
	done := acked.Load()
	for k, v := range map[string]any{
		"records": done, "size": *size, "acks": *acks, "compression": *comp, "seconds": el,
		"records_per_s": float64(done) / el, "mb_per_s": float64(done) * float64(*size) / mb / el,
		"batch_records": *perBatch, "inflight": *inflight,
	} {
		out[k] = v
	}
	return out, nil
}

func produceError(resp *kmsg.ProduceResponse) error {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return fmt.Errorf("produce %s[%d]: error code %d", t.Topic, p.Partition, p.ErrorCode)
			}
		}
	}
	return nil
}

func runConsumeRaw(args []string) (map[string]any, error) {
	fs := flag.NewFlagSet("consume-raw", flag.ExitOnError)
	var c common
	c.register(fs)
	records := fs.Int64("records", 100000, "records to read (the run ends when this many were read)")
	size := fs.Int("size", 1024, "record value size of the topic's records (for MB/s)")
	partMax := fs.Int("partition-max-bytes", 1<<20, "max bytes per partition per fetch (Kafka's default 1 MiB)")
	maxBytes := fs.Int("max-bytes", 50<<20, "max bytes per fetch response (Kafka's default 50 MiB)")
	parse(fs, args)
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	cl, rt, err := rawBroker(ctx, &c)
	if err != nil {
		return nil, err
	}
	cl.Close()
	conn, err := dialRaw(ctx, rt.addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	version := conn.version(kmsg.NewPtrFetchRequest())
	if version < 13 {
		return nil, fmt.Errorf("broker %s: Fetch up to v%d, consume-raw needs v13+ (topic ids)", rt.addr, version)
	}
	partitions := rt.partitions
	offsets := make([]int64, partitions)
	var n, fetches int64
	var first time.Time
	var buf []byte // every response is read into it (nothing of a response is kept)
	c.windowStart()
	start := time.Now()
	for n < *records {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("read %d of %d records before the timeout", n, *records)
		}
		req := kmsg.NewPtrFetchRequest()
		req.Version = version
		req.ReplicaID = -1
		req.MaxWaitMillis = 500
		req.MinBytes = 1
		req.MaxBytes = int32(*maxBytes)
		req.SessionEpoch = -1 // no fetch session: every request names every partition
		topic := kmsg.NewFetchRequestTopic()
		topic.Topic = c.topic
		topic.TopicID = rt.id
		for p := 0; p < partitions; p++ {
			part := kmsg.NewFetchRequestTopicPartition()
			part.Partition = int32(p)
			part.FetchOffset = offsets[p]
			part.PartitionMaxBytes = int32(*partMax)
			part.CurrentLeaderEpoch = -1
			part.LogStartOffset = -1
			topic.Partitions = append(topic.Partitions, part)
		}
		req.Topics = append(req.Topics, topic)
		resp := kmsg.NewPtrFetchResponse()
		if err := conn.roundTrip(req, resp, &buf); err != nil {
			return nil, fmt.Errorf("fetch: %w", err)
		}
		fetches++
		if resp.ErrorCode != 0 {
			return nil, fmt.Errorf("fetch: error code %d", resp.ErrorCode)
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return nil, fmt.Errorf("fetch %s[%d]: error code %d", c.topic, p.Partition, p.ErrorCode)
				}
				batches, err := walkBatches(p.RecordBatches)
				if err != nil {
					return nil, fmt.Errorf("fetch %s[%d]: %w", c.topic, p.Partition, err)
				}
				for _, b := range batches {
					if n == 0 && b.records > 0 {
						first = time.Now()
					}
					n += int64(b.records)
					offsets[p.Partition] = b.lastOffset + 1
				}
			}
		}
	}
	el := time.Since(start).Seconds()
	bytes := float64(n) * float64(*size)
	out := map[string]any{
		"records": n, "bytes": bytes, "seconds": el, "records_per_s": float64(n) / el,
		"mb_per_s": bytes / mb / el, "first_record_s": first.Sub(start).Seconds(), "fetches": fetches,
	}
	c.windowEnd(out)
	return out, nil
}
