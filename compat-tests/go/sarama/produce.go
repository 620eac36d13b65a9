// The produce scenario of the sarama check: the records it sends, the sync and
// async producers, the ack log, and reading everything back with the partition
// Consumer.

package main

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

type rec struct {
	idx       int
	key       []byte // nil: null key
	value     []byte // nil: null value
	headers   []sarama.RecordHeader
	ts        time.Time
	partition int32
	offset    int64
	acked     bool
}

var tsBase = time.Now().Add(-time.Minute).Truncate(time.Millisecond)

// makeRec builds record i of a phase: varied sizes (some 8 KiB, compressible and
// not), null and empty keys, values and header values, explicit timestamps.
func makeRec(phase string, i int) *rec {
	r := &rec{idx: i, ts: tsBase.Add(time.Duration(i) * time.Millisecond)}
	switch {
	case i%17 == 3:
		r.key = nil
	case i%17 == 4:
		r.key = []byte{}
	default:
		r.key = []byte(fmt.Sprintf("%s-key-%05d", phase, i))
	}
	size := 20 + (i*37)%700
	if i%10 == 0 {
		size = 8192
	}
	v := make([]byte, 0, size)
	head := fmt.Sprintf("%s-value-%05d|", phase, i)
	x := uint32(i*2654435761 + 1)
	for len(v) < size {
		if len(v)%64 < 40 { // compressible text ...
			v = append(v, head...)
		} else { // ... and pseudo-random bytes
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			v = append(v, byte(x))
		}
	}
	r.value = v[:size]
	switch i % 13 {
	case 5:
		r.value = nil
	case 6:
		r.value = []byte{}
	}
	if i%7 != 0 {
		r.headers = []sarama.RecordHeader{
			{Key: []byte("idx"), Value: []byte(strconv.Itoa(i))},
			{Key: []byte("phase"), Value: []byte(phase)},
		}
		if i%11 == 1 {
			r.headers = append(r.headers, sarama.RecordHeader{Key: []byte("nil"), Value: nil},
				sarama.RecordHeader{Key: []byte("empty"), Value: []byte{}},
				sarama.RecordHeader{Key: []byte("idx"), Value: []byte("dup")})
		}
	}
	return r
}

func (r *rec) message(topic string) *sarama.ProducerMessage {
	m := &sarama.ProducerMessage{Topic: topic, Headers: r.headers, Timestamp: r.ts, Metadata: r}
	if r.key != nil {
		m.Key = sarama.ByteEncoder(r.key)
	}
	if r.value != nil {
		m.Value = sarama.ByteEncoder(r.value)
	}
	return m
}

func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func showBytes(b []byte) string {
	if b == nil {
		return "<null>"
	}
	if len(b) > 40 {
		return fmt.Sprintf("%q...(%d bytes)", b[:40], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// diff compares a consumed message with the record acked at its offset.
func (r *rec) diff(m *sarama.ConsumerMessage) string {
	var d []string
	if !sameBytes(r.key, m.Key) {
		d = append(d, fmt.Sprintf("key %s, want %s", showBytes(m.Key), showBytes(r.key)))
	}
	if !sameBytes(r.value, m.Value) {
		d = append(d, fmt.Sprintf("value %s, want %s", showBytes(m.Value), showBytes(r.value)))
	}
	if len(m.Headers) != len(r.headers) {
		d = append(d, fmt.Sprintf("%d headers, want %d", len(m.Headers), len(r.headers)))
	} else {
		for i, h := range m.Headers {
			w := r.headers[i]
			if !sameBytes(h.Key, w.Key) || !sameBytes(h.Value, w.Value) {
				d = append(d, fmt.Sprintf("header %d %s=%s, want %s=%s", i, showBytes(h.Key), showBytes(h.Value),
					showBytes(w.Key), showBytes(w.Value)))
			}
		}
	}
	if !m.Timestamp.Equal(r.ts) {
		d = append(d, fmt.Sprintf("timestamp %v, want %v", m.Timestamp.UnixMilli(), r.ts.UnixMilli()))
	}
	return strings.Join(d, "; ")
}

// log of acked records: partition -> offset -> record
type ackLog struct {
	mu   sync.Mutex
	recs map[int32]map[int64]*rec
	next map[int32]int64 // next expected offset per partition, in ack order per producer
}

func newAckLog() *ackLog {
	return &ackLog{recs: map[int32]map[int64]*rec{}, next: map[int32]int64{}}
}

func (a *ackLog) add(r *rec) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.recs[r.partition] == nil {
		a.recs[r.partition] = map[int64]*rec{}
	}
	if old := a.recs[r.partition][r.offset]; old != nil {
		failf("offset %d of partition %d acked twice (records %d and %d)", r.offset, r.partition, old.idx, r.idx)
	}
	a.recs[r.partition][r.offset] = r
}

func (a *ackLog) ends() map[int32]int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[int32]int64{}
	for p, m := range a.recs {
		out[p] = int64(len(m))
	}
	return out
}

func (a *ackLog) total() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, m := range a.recs {
		n += len(m)
	}
	return n
}

// contiguous: each partition's acked offsets are exactly 0..n-1.
func (a *ackLog) contiguous(what string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for p, m := range a.recs {
		for o := int64(0); o < int64(len(m)); o++ {
			if m[o] == nil {
				failf("%s: partition %d: %d records acked but offset %d missing (offsets not contiguous from 0)", what, p, len(m), o)
			}
		}
	}
}

// checkSendOrder: within each partition, records sent in order got increasing
// offsets with no gap between successive ones of this producer.
func checkSendOrder(what string, recs []*rec) {
	last := map[int32]*rec{}
	for _, r := range recs {
		if !r.acked {
			failf("%s: record %d never acked", what, r.idx)
		}
		if prev := last[r.partition]; prev != nil && r.offset != prev.offset+1 {
			failf("%s: partition %d: record %d at offset %d follows record %d at offset %d (want %d)", what,
				r.partition, r.idx, r.offset, prev.idx, prev.offset, prev.offset+1)
		}
		last[r.partition] = r
	}
}

// ---------------------------------------------------------------------------------------------
// produce scenario

func producerConfig(codec string) *sarama.Config {
	cfg := newConfig()
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Compression = codecOf(codec)
	cfg.Producer.Return.Successes = true
	if *flagIdempotent {
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
	}
	return cfg
}

func syncProduce(topic, codec, phase string, n int, acks *ackLog) []*rec {
	cfg := producerConfig(codec)
	p, err := sarama.NewSyncProducer(brokers(), cfg)
	check(err, "NewSyncProducer "+codec)
	recs := make([]*rec, n)
	for i := range recs {
		recs[i] = makeRec(phase, i)
	}
	// first half one by one
	half := n / 2
	for _, r := range recs[:half] {
		part, off, err := p.SendMessage(r.message(topic))
		check(err, fmt.Sprintf("SyncProducer(%s).SendMessage record %d", codec, r.idx))
		r.partition, r.offset, r.acked = part, off, true
		acks.add(r)
	}
	// the rest as SendMessages batches of 100
	for i := half; i < n; i += 100 {
		j := min(i+100, n)
		msgs := make([]*sarama.ProducerMessage, 0, j-i)
		for _, r := range recs[i:j] {
			msgs = append(msgs, r.message(topic))
		}
		if err := p.SendMessages(msgs); err != nil {
			var pe sarama.ProducerErrors
			if errors.As(err, &pe) && len(pe) > 0 {
				failf("SyncProducer(%s).SendMessages: %d errors, first: %v", codec, len(pe), pe[0].Err)
			}
			check(err, fmt.Sprintf("SyncProducer(%s).SendMessages", codec))
		}
		for _, m := range msgs {
			r := m.Metadata.(*rec)
			r.partition, r.offset, r.acked = m.Partition, m.Offset, true
			acks.add(r)
		}
	}
	check(p.Close(), "SyncProducer.Close")
	checkSendOrder(fmt.Sprintf("SyncProducer(%s)", codec), recs)
	return recs
}

func asyncProduce(topic, codec, phase string, n int, acks *ackLog) []*rec {
	cfg := producerConfig(codec)
	cfg.Producer.Return.Errors = true
	// batch: up to 256 KiB or 200 records, or what 5 ms gathers
	cfg.Producer.Flush.Bytes = 256 * 1024
	cfg.Producer.Flush.Messages = 200
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	p, err := sarama.NewAsyncProducer(brokers(), cfg)
	check(err, "NewAsyncProducer "+codec)
	recs := make([]*rec, n)
	for i := range recs {
		recs[i] = makeRec(phase, i)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	var mu sync.Mutex
	var errs []error
	// One token per record answered (acked or failed).
	answered := make(chan struct{}, n)
	go func() {
		defer wg.Done()
		for m := range p.Successes() {
			r := m.Metadata.(*rec)
			r.partition, r.offset, r.acked = m.Partition, m.Offset, true
			acks.add(r)
			answered <- struct{}{}
		}
	}()
	go func() {
		defer wg.Done()
		for e := range p.Errors() {
			mu.Lock()
			errs = append(errs, e)
			mu.Unlock()
			answered <- struct{}{}
		}
	}()
	for _, r := range recs {
		p.Input() <- r.message(topic)
	}
	// Close only once every record is answered: sarama fails the retries of a producer that is
	// shutting down ("in process of shutting down"), so closing right after the last Input turns
	// a connection it re-opens during a retry into lost records (a client race, not the broker's).
	deadline := time.After(*flagStep)
wait:
	for i := 0; i < n; i++ {
		select {
		case <-answered:
		case <-deadline:
			break wait
		}
	}
	p.AsyncClose()
	wg.Wait()
	if len(errs) > 0 {
		failf("AsyncProducer(%s): %d errors, first: %v", codec, len(errs), errs[0])
	}
	checkSendOrder(fmt.Sprintf("AsyncProducer(%s)", codec), recs)
	return recs
}

// consumeAll reads every partition from OffsetOldest with the partition
// Consumer and checks it against the acks.
func consumeAll(topic string, partitions int32, acks *ackLog, what string) {
	cfg := newConfig()
	cfg.Consumer.Return.Errors = true
	c, err := sarama.NewConsumer(brokers(), cfg)
	check(err, "NewConsumer")
	defer c.Close()
	ends := acks.ends()
	total := 0
	for p := int32(0); p < partitions; p++ {
		want := ends[p]
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		check(err, fmt.Sprintf("ConsumePartition(%d, OffsetOldest)", p))
		next := int64(0)
		deadline := time.After(*flagStep)
		for next < want {
			select {
			case m := <-pc.Messages():
				if m.Offset != next {
					failf("%s: partition %d: consumed offset %d, want %d (offsets must be contiguous from 0)", what, p, m.Offset, next)
				}
				r := acks.recs[p][m.Offset]
				if d := r.diff(m); d != "" {
					failf("%s: partition %d offset %d (record %d): %s", what, p, m.Offset, r.idx, d)
				}
				next++
			case e := <-pc.Errors():
				failf("%s: partition %d: consumer error: %v", what, p, e)
			case <-deadline:
				failf("%s: partition %d: consumed %d of %d records within %v", what, p, next, want, *flagStep)
			}
		}
		// nothing beyond the acked records
		select {
		case m := <-pc.Messages():
			failf("%s: partition %d: unexpected record at offset %d beyond the %d acked", what, p, m.Offset, want)
		case <-time.After(200 * time.Millisecond):
		}
		if hw := pc.HighWaterMarkOffset(); hw != want {
			failf("%s: partition %d: high watermark %d, want %d", what, p, hw, want)
		}
		check(pc.Close(), "PartitionConsumer.Close")
		total += int(want)
	}
	okf("%s: partition Consumer from OffsetOldest read all %d records, %d partitions, content and order checked", what, total, partitions)
}

func createTopic(admin sarama.ClusterAdmin, topic string, partitions int32, configs map[string]*string) {
	err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1, ConfigEntries: configs}, false)
	check(err, "CreateTopic "+topic)
	// wait until the topic's leaders are known (Kafka creates asynchronously)
	waitFor("topic "+topic+" metadata", func() bool {
		md, err := admin.DescribeTopics([]string{topic})
		if err != nil || len(md) != 1 || md[0].Err != sarama.ErrNoError || len(md[0].Partitions) != int(partitions) {
			return false
		}
		for _, p := range md[0].Partitions {
			if p.Err != sarama.ErrNoError || p.Leader < 0 {
				return false
			}
		}
		return true
	})
}

func scenarioProduce() {
	codecs := strings.Split(*flagCodecs, ",")
	const partitions = 3
	topic := "sarama-produce-" + runID
	admin, err := sarama.NewClusterAdmin(brokers(), newConfig())
	check(err, "NewClusterAdmin")
	createTopic(admin, topic, partitions, nil)
	okf("created topic %s (%d partitions)", topic, partitions)

	acks := newAckLog()
	n := *flagRecords
	for _, codec := range codecs {
		syncProduce(topic, codec, "sync-"+codec, n, acks)
		okf("SyncProducer codec=%s acks=all idempotent=%v: %d records acked, per-partition offsets consecutive in send order", codec, *flagIdempotent, n)
		asyncProduce(topic, codec, "async-"+codec, n, acks)
		okf("AsyncProducer codec=%s acks=all idempotent=%v: %d records acked, per-partition offsets consecutive in send order", codec, *flagIdempotent, n)
	}
	acks.contiguous("producers")
	ends := acks.ends()
	okf("acked offsets contiguous from 0 in every partition: %v", ends)
	if int32(len(ends)) != partitions {
		failf("records landed in %d partitions, want %d", len(ends), partitions)
	}

	// ListOffsets agrees
	client, err := sarama.NewClient(brokers(), newConfig())
	check(err, "NewClient")
	for p := int32(0); p < partitions; p++ {
		newest, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		check(err, "GetOffset newest")
		oldest, err := client.GetOffset(topic, p, sarama.OffsetOldest)
		check(err, "GetOffset oldest")
		if newest != ends[p] || oldest != 0 {
			failf("partition %d: GetOffset oldest/newest = %d/%d, want 0/%d", p, oldest, newest, ends[p])
		}
	}
	client.Close()
	okf("GetOffset (ListOffsets) oldest/newest agree with the acks")

	consumeAll(topic, partitions, acks, "read-back")
	check(admin.Close(), "admin.Close")
	fmt.Println("PASS")
}

// ---------------------------------------------------------------------------------------------
// group scenario
