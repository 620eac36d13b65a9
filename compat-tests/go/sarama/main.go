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
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
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
	go func() {
		defer wg.Done()
		for m := range p.Successes() {
			r := m.Metadata.(*rec)
			r.partition, r.offset, r.acked = m.Partition, m.Offset, true
			acks.add(r)
		}
	}()
	go func() {
		defer wg.Done()
		for e := range p.Errors() {
			mu.Lock()
			errs = append(errs, e)
			mu.Unlock()
		}
	}()
	for _, r := range recs {
		p.Input() <- r.message(topic)
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

type consumed struct {
	member    string
	session   int
	partition int32
	offset    int64
	msg       *sarama.ConsumerMessage
}

type member struct {
	name  string
	topic string
	group sarama.ConsumerGroup

	mu         sync.Mutex
	sessions   int
	generation int32
	memberID   string
	claims     []int32
	active     bool
	firsts     map[int32]int64 // session-local first offset consumed per partition
	initials   map[int32]int64 // InitialOffset of each claim of the current session
	got        []consumed

	cancel context.CancelFunc
	done   chan struct{}
}

func (m *member) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sessions++
	m.generation = s.GenerationID()
	m.memberID = s.MemberID()
	m.claims = append([]int32(nil), s.Claims()[m.topic]...)
	sort.Slice(m.claims, func(i, j int) bool { return m.claims[i] < m.claims[j] })
	m.active = true
	m.firsts = map[int32]int64{}
	m.initials = map[int32]int64{}
	event("[%s] session %d: generation %d member %s claims %v", m.name, m.sessions, m.generation, m.memberID, m.claims)
	return nil
}

func (m *member) Cleanup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.active = false
	event("[%s] session %d (generation %d) cleanup", m.name, m.sessions, s.GenerationID())
	return nil
}

func (m *member) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	m.mu.Lock()
	session := m.sessions
	m.initials[c.Partition()] = c.InitialOffset()
	m.mu.Unlock()
	event("[%s] session %d: claim partition %d from initial offset %d", m.name, session, c.Partition(), c.InitialOffset())
	for {
		select {
		case msg, ok := <-c.Messages():
			if !ok {
				return nil
			}
			m.mu.Lock()
			if _, seen := m.firsts[msg.Partition]; !seen {
				m.firsts[msg.Partition] = msg.Offset
			}
			// content is checked later (checkGroupRecords): the ack may not be logged yet
			m.got = append(m.got, consumed{m.name, session, msg.Partition, msg.Offset, msg})
			m.mu.Unlock()
			s.MarkMessage(msg, "meta-"+m.name)
		case <-s.Context().Done():
			return nil
		}
	}
}

var groupAcks = newAckLog()

// checkGroupRecords compares everything the members consumed with the acks.
func checkGroupRecords(ms ...*member) {
	groupAcks.mu.Lock()
	defer groupAcks.mu.Unlock()
	for _, m := range ms {
		m.mu.Lock()
		for _, c := range m.got {
			r := groupAcks.recs[c.partition][c.offset]
			if r == nil {
				failf("[%s] consumed partition %d offset %d, which was never acked", m.name, c.partition, c.offset)
			}
			if d := r.diff(c.msg); d != "" {
				failf("[%s] partition %d offset %d: %s", m.name, c.partition, c.offset, d)
			}
		}
		m.mu.Unlock()
	}
}

func (m *member) snapshot() (sessions int, generation int32, id string, claims []int32, active bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sessions, m.generation, m.memberID, append([]int32(nil), m.claims...), m.active
}

func groupConfig() *sarama.Config {
	cfg := newConfig()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Return.Errors = true
	return cfg
}

func startMember(name, groupID, topic string) *member {
	g, err := sarama.NewConsumerGroup(brokers(), groupID, groupConfig())
	check(err, "NewConsumerGroup "+name)
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{name: name, topic: topic, group: g, cancel: cancel, done: make(chan struct{})}
	go func() {
		for e := range g.Errors() {
			event("[%s] group error: %v", name, e)
		}
	}()
	go func() {
		defer close(m.done)
		for {
			err := g.Consume(ctx, []string{topic}, m)
			if err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				event("[%s] Consume: %v", name, err)
				time.Sleep(100 * time.Millisecond)
			}
			if ctx.Err() != nil {
				return
			}
		}
	}()
	return m
}

func (m *member) close() {
	m.cancel()
	<-m.done
	check(m.group.Close(), m.name+" Close")
	event("[%s] closed", m.name)
}

func sameParts(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func allConsumed(ms []*member) map[int32]map[int64]int {
	out := map[int32]map[int64]int{}
	for _, m := range ms {
		m.mu.Lock()
		for _, c := range m.got {
			if out[c.partition] == nil {
				out[c.partition] = map[int64]int{}
			}
			out[c.partition][c.offset]++
		}
		m.mu.Unlock()
	}
	return out
}

// produceGroup produces n records of a phase with a SyncProducer (SendMessages).
func produceGroup(topic, phase string, n int) {
	cfg := producerConfig("none")
	p, err := sarama.NewSyncProducer(brokers(), cfg)
	check(err, "NewSyncProducer")
	var msgs []*sarama.ProducerMessage
	for i := 0; i < n; i++ {
		msgs = append(msgs, makeRec(phase, i).message(topic))
	}
	check(p.SendMessages(msgs), "SendMessages "+phase)
	for _, m := range msgs {
		r := m.Metadata.(*rec)
		r.partition, r.offset, r.acked = m.Partition, m.Offset, true
		groupAcks.add(r)
	}
	check(p.Close(), "SyncProducer.Close")
}

func committed(admin sarama.ClusterAdmin, groupID, topic string, partitions int32) (map[int32]int64, map[int32]string) {
	parts := make([]int32, partitions)
	for i := range parts {
		parts[i] = int32(i)
	}
	resp, err := admin.ListConsumerGroupOffsets(groupID, map[string][]int32{topic: parts})
	check(err, "ListConsumerGroupOffsets")
	offs, metas := map[int32]int64{}, map[int32]string{}
	for _, p := range parts {
		b := resp.GetBlock(topic, p)
		if b == nil {
			failf("ListConsumerGroupOffsets: no block for partition %d", p)
		}
		if b.Err != sarama.ErrNoError {
			failf("ListConsumerGroupOffsets: partition %d: %v", p, b.Err)
		}
		offs[p], metas[p] = b.Offset, b.Metadata
	}
	return offs, metas
}

func sameOffsets(a, b map[int32]int64, partitions int32) bool {
	for p := int32(0); p < partitions; p++ {
		if a[p] != b[p] {
			return false
		}
	}
	return true
}

func waitCommitted(admin sarama.ClusterAdmin, groupID, topic string, partitions int32, what string) map[int32]string {
	want := groupAcks.ends()
	var got map[int32]int64
	var metas map[int32]string
	waitFor(fmt.Sprintf("committed offsets %v (%s)", want, what), func() bool {
		got, metas = committed(admin, groupID, topic, partitions)
		return sameOffsets(got, want, partitions)
	})
	return metas
}

func describeGroup(admin sarama.ClusterAdmin, groupID string) *sarama.GroupDescription {
	ds, err := admin.DescribeConsumerGroups([]string{groupID})
	check(err, "DescribeConsumerGroups")
	if len(ds) != 1 {
		failf("DescribeConsumerGroups: %d groups, want 1", len(ds))
	}
	d := ds[0]
	if d.Err != sarama.ErrNoError {
		failf("DescribeConsumerGroups: %v", d.Err)
	}
	if d.GroupId != groupID {
		failf("DescribeConsumerGroups: group %q, want %q", d.GroupId, groupID)
	}
	return d
}

func scenarioGroup() {
	const partitions = 4
	topic := "sarama-group-" + runID
	groupID := "sarama-group-" + runID
	admin, err := sarama.NewClusterAdmin(brokers(), newConfig())
	check(err, "NewClusterAdmin")
	createTopic(admin, topic, partitions, nil)
	produceGroup(topic, "a", 400)
	okf("created %s (%d partitions), produced 400 records: %v", topic, partitions, groupAcks.ends())

	// 1. member A alone
	a := startMember("A", groupID, topic)
	waitFor("A to consume the 400 records", func() bool { return groupAcks.total() == countConsumed(a) })
	_, genA, idA, claimsA, _ := a.snapshot()
	if !sameParts(claimsA, []int32{0, 1, 2, 3}) {
		failf("A alone claims %v, want [0 1 2 3]", claimsA)
	}
	metas := waitCommitted(admin, groupID, topic, partitions, "A alone, auto-commit")
	for p, md := range metas {
		if md != "meta-A" {
			failf("committed metadata of partition %d is %q, want %q (MarkMessage metadata)", p, md, "meta-A")
		}
	}
	okf("member A (generation %d, %s) consumed everything from OffsetOldest and auto-committed offsets with metadata", genA, idA)

	// 2. member B joins: rebalance
	b := startMember("B", groupID, topic)
	var gen int32
	waitFor("A and B to share the partitions in one generation", func() bool {
		_, ga, _, ca, aa := a.snapshot()
		_, gb, _, cb, ab := b.snapshot()
		if !aa || !ab || ga != gb || ga <= genA || len(ca) != 2 || len(cb) != 2 {
			return false
		}
		u := append(append([]int32(nil), ca...), cb...)
		sort.Slice(u, func(i, j int) bool { return u[i] < u[j] })
		gen = ga
		return sameParts(u, []int32{0, 1, 2, 3})
	})
	_, _, idA, claimsA, _ = a.snapshot()
	_, _, idB, claimsB, _ := b.snapshot()
	okf("rebalance: generation %d, A claims %v, B claims %v", gen, claimsA, claimsB)

	// admin view of the live group
	groups, err := admin.ListConsumerGroups()
	check(err, "ListConsumerGroups")
	if pt, ok := groups[groupID]; !ok || pt != "consumer" {
		failf("ListConsumerGroups: group %s -> %q (listed %v), want \"consumer\"", groupID, pt, ok)
	}
	d := describeGroup(admin, groupID)
	if d.State != "Stable" || d.ProtocolType != "consumer" || d.Protocol != "range" || len(d.Members) != 2 {
		failf("DescribeConsumerGroups: state %q protocolType %q protocol %q %d members, want Stable consumer range 2",
			d.State, d.ProtocolType, d.Protocol, len(d.Members))
	}
	for id, want := range map[string][]int32{idA: claimsA, idB: claimsB} {
		md, ok := d.Members[id]
		if !ok {
			failf("DescribeConsumerGroups: member %s missing (members %v)", id, keys(d.Members))
		}
		asg, err := md.GetMemberAssignment()
		check(err, "GetMemberAssignment")
		got := append([]int32(nil), asg.Topics[topic]...)
		sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
		if !sameParts(got, want) {
			failf("DescribeConsumerGroups: member %s assignment %v, want %v", id, got, want)
		}
		meta, err := md.GetMemberMetadata()
		check(err, "GetMemberMetadata")
		if len(meta.Topics) != 1 || meta.Topics[0] != topic {
			failf("DescribeConsumerGroups: member %s subscription %v, want [%s]", id, meta.Topics, topic)
		}
		if md.ClientId != "ketch-compat-sarama" {
			failf("DescribeConsumerGroups: member %s client id %q", id, md.ClientId)
		}
	}
	okf("ListConsumerGroups lists it as \"consumer\"; DescribeConsumerGroups: Stable, range, 2 members with their assignments and subscriptions")

	// 3. both consume new records from their own partitions
	produceGroup(topic, "b", 400)
	waitFor("A and B to consume phase b", func() bool { return groupAcks.total() == countConsumed(a, b) })
	owners := map[int32]string{}
	for _, p := range claimsA {
		owners[p] = "A"
	}
	for _, p := range claimsB {
		owners[p] = "B"
	}
	for _, m := range []*member{a, b} {
		m.mu.Lock()
		for _, c := range m.got {
			if c.session == m.sessions && owners[c.partition] != m.name {
				failf("%s consumed partition %d, owned by %s", m.name, c.partition, owners[c.partition])
			}
		}
		m.mu.Unlock()
	}
	waitCommitted(admin, groupID, topic, partitions, "A and B")
	okf("A and B consumed phase b from their own partitions and committed: %v", groupAcks.ends())

	// 4. B leaves: A gets everything back
	sessA, _, _, _, _ := a.snapshot()
	b.close()
	waitFor("A to get all partitions after B left", func() bool {
		s, _, _, c, act := a.snapshot()
		return act && s > sessA && sameParts(c, []int32{0, 1, 2, 3})
	})
	_, genA2, _, _, _ := a.snapshot()
	produceGroup(topic, "c", 400)
	waitFor("A to consume phase c", func() bool { return groupAcks.total() == countConsumed(a, b) })
	okf("B left (LeaveGroup); A got all 4 partitions (generation %d) and consumed phase c", genA2)

	// exactly once, in order per claim
	all := allConsumed([]*member{a, b})
	ends := groupAcks.ends()
	dups := 0
	for p := int32(0); p < partitions; p++ {
		for o := int64(0); o < ends[p]; o++ {
			switch n := all[p][o]; {
			case n == 0:
				failf("partition %d offset %d never consumed", p, o)
			case n > 1:
				dups += n - 1
			}
		}
	}
	if dups > 0 {
		failf("%d records consumed more than once across the rebalances (every record was marked before its session ended)", dups)
	}
	for _, m := range []*member{a, b} {
		m.mu.Lock()
		last := map[[2]int64]int64{}
		for _, c := range m.got {
			k := [2]int64{int64(c.session), int64(c.partition)}
			if prev, ok := last[k]; ok && c.offset != prev+1 {
				m.mu.Unlock()
				failf("%s session %d partition %d: offset %d after %d", m.name, c.session, c.partition, c.offset, prev)
			}
			last[k] = c.offset
		}
		m.mu.Unlock()
	}
	checkGroupRecords(a, b)
	okf("every record consumed exactly once (%d), contiguous offsets per claim, content checked", groupAcks.total())

	// 5. A closes: group Empty, offsets kept
	waitCommitted(admin, groupID, topic, partitions, "A after B left")
	a.close()
	waitFor("the group to be Empty", func() bool {
		d := describeGroup(admin, groupID)
		return d.State == "Empty" && len(d.Members) == 0
	})
	offs, _ := committed(admin, groupID, topic, partitions)
	if !sameOffsets(offs, groupAcks.ends(), partitions) {
		failf("committed offsets after close %v, want %v", offs, groupAcks.ends())
	}
	okf("A closed: DescribeConsumerGroups Empty with no members; ListConsumerGroupOffsets %v", offs)

	// 6. restart: a new member resumes at the committed offsets
	before := groupAcks.ends()
	produceGroup(topic, "d", 200)
	c := startMember("C", groupID, topic)
	waitFor("C to consume phase d", func() bool { return countConsumed(c) >= 200 })
	time.Sleep(300 * time.Millisecond) // anything more would show up now
	c.mu.Lock()
	if len(c.got) != 200 {
		c.mu.Unlock()
		failf("C consumed %d records, want the 200 produced after the commits", len(c.got))
	}
	for p := int32(0); p < partitions; p++ {
		if init, ok := c.initials[p]; !ok || init != before[p] {
			c.mu.Unlock()
			failf("C's claim of partition %d starts at %d (claimed %v), want the committed offset %d", p, init, ok, before[p])
		}
		if f, ok := c.firsts[p]; ok && f != before[p] {
			c.mu.Unlock()
			failf("C's first record of partition %d is at offset %d, want the committed offset %d", p, f, before[p])
		}
	}
	c.mu.Unlock()
	checkGroupRecords(c)
	waitCommitted(admin, groupID, topic, partitions, "C")
	c.close()
	okf("restarted group: new member C resumed exactly at the committed offsets %v and consumed only the 200 new records", before)

	// 7. DeleteConsumerGroup
	waitFor("the group to be Empty again", func() bool { return describeGroup(admin, groupID).State == "Empty" })
	check(admin.DeleteConsumerGroup(groupID), "DeleteConsumerGroup")
	groups, err = admin.ListConsumerGroups()
	check(err, "ListConsumerGroups")
	if _, ok := groups[groupID]; ok {
		failf("ListConsumerGroups still lists %s after DeleteConsumerGroup", groupID)
	}
	okf("DeleteConsumerGroup: the group is no longer listed")
	check(admin.Close(), "admin.Close")
	fmt.Println("PASS")
}

func countConsumed(ms ...*member) int {
	all := allConsumed(ms)
	n := 0
	for _, m := range all {
		n += len(m)
	}
	return n
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ---------------------------------------------------------------------------------------------
// admin scenario

func strp(s string) *string { return &s }

func expectKError(err error, want sarama.KError, what string) {
	if err == nil {
		failf("%s: no error, want %v", what, want)
	}
	if !errors.Is(err, want) {
		failf("%s: error %v, want %v", what, err, want)
	}
}

func scenarioAdmin() {
	admin, err := sarama.NewClusterAdmin(brokers(), newConfig())
	check(err, "NewClusterAdmin")
	defer admin.Close()

	bs, ctrl, err := admin.DescribeCluster()
	check(err, "DescribeCluster")
	if len(bs) != 1 {
		failf("DescribeCluster: %d brokers, want 1", len(bs))
	}
	id := bs[0].ID()
	if ctrl != id {
		// a single node: the controller the client sees is the broker itself
		failf("DescribeCluster: controller %d, broker %d", ctrl, id)
	}
	okf("DescribeCluster: broker %d at %s, controller %d", id, bs[0].Addr(), ctrl)

	topic := "sarama-admin-" + runID
	configs := map[string]*string{
		"retention.ms":      strp("3600000"),
		"max.message.bytes": strp("2000000"),
		"cleanup.policy":    strp("delete"),
	}
	// validateOnly creates nothing
	err = admin.CreateTopic(topic+"-v", &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1, ConfigEntries: configs}, true)
	check(err, "CreateTopic validateOnly")
	createTopic(admin, topic, 2, configs)
	expectKError(admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false),
		sarama.ErrTopicAlreadyExists, "CreateTopic of an existing topic")
	expectKError(admin.CreateTopic(topic+"-badcfg", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.ms": strp("not-a-number")}}, false),
		sarama.ErrInvalidConfig, "CreateTopic with retention.ms=not-a-number")
	expectKError(admin.CreateTopic(topic+"-rf3", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 3}, false),
		sarama.ErrInvalidReplicationFactor, "CreateTopic with replication factor 3 on one broker")
	okf("CreateTopic %s with configs %v; validateOnly, duplicate, bad config and replication factor 3 refused as Kafka does",
		topic, keys(configs))

	// ListTopics
	lt, err := admin.ListTopics()
	check(err, "ListTopics")
	for _, bad := range []string{topic + "-v", topic + "-badcfg", topic + "-rf3"} {
		if _, ok := lt[bad]; ok {
			failf("ListTopics lists %s, which must not have been created", bad)
		}
	}
	td, ok := lt[topic]
	if !ok {
		failf("ListTopics does not list %s (%v)", topic, keys(lt))
	}
	if td.NumPartitions != 2 || td.ReplicationFactor != 1 || len(td.ReplicaAssignment) != 2 {
		failf("ListTopics %s: %d partitions RF %d assignment %v, want 2, 1, 2 entries", topic, td.NumPartitions,
			td.ReplicationFactor, td.ReplicaAssignment)
	}
	for p, r := range td.ReplicaAssignment {
		if len(r) != 1 || r[0] != id {
			failf("ListTopics %s: partition %d replicas %v, want [%d]", topic, p, r, id)
		}
	}
	gotCfg := map[string]string{}
	for k, v := range td.ConfigEntries {
		gotCfg[k] = *v
	}
	for k, v := range configs {
		if gotCfg[k] != *v {
			failf("ListTopics %s: non-default configs %v, want %s=%s among them", topic, gotCfg, k, *v)
		}
	}
	okf("ListTopics: %s with 2 partitions, RF 1, replicas [%d], non-default configs %v", topic, id, gotCfg)

	// DescribeTopics
	md, err := admin.DescribeTopics([]string{topic, topic + "-missing"})
	check(err, "DescribeTopics")
	byName := map[string]*sarama.TopicMetadata{}
	for _, t := range md {
		byName[t.Name] = t
	}
	if t := byName[topic+"-missing"]; t == nil || t.Err != sarama.ErrUnknownTopicOrPartition {
		failf("DescribeTopics of a missing topic: %+v, want UNKNOWN_TOPIC_OR_PARTITION", t)
	}
	checkTopicMD := func(t *sarama.TopicMetadata, n int) {
		if t == nil || t.Err != sarama.ErrNoError || t.IsInternal || len(t.Partitions) != n {
			failf("DescribeTopics %s: %+v, want %d partitions and no error", topic, t, n)
		}
		seen := map[int32]bool{}
		for _, p := range t.Partitions {
			seen[p.ID] = true
			if p.Err != sarama.ErrNoError || p.Leader != id || !sameParts(p.Replicas, []int32{id}) || !sameParts(p.Isr, []int32{id}) {
				failf("DescribeTopics %s partition %d: err %v leader %d replicas %v isr %v, want leader/replica/isr %d",
					topic, p.ID, p.Err, p.Leader, p.Replicas, p.Isr, id)
			}
		}
		for p := int32(0); p < int32(n); p++ {
			if !seen[p] {
				failf("DescribeTopics %s: partition %d missing", topic, p)
			}
		}
	}
	checkTopicMD(byName[topic], 2)
	okf("DescribeTopics: 2 partitions led by broker %d (replicas, ISR); a missing topic is UNKNOWN_TOPIC_OR_PARTITION (not auto-created)", id)

	// DescribeConfig
	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	check(err, "DescribeConfig topic")
	byCfg := map[string]sarama.ConfigEntry{}
	for _, e := range entries {
		byCfg[e.Name] = e
	}
	for k, v := range configs {
		e, ok := byCfg[k]
		if !ok || e.Value != *v || e.Default || e.ReadOnly || e.Source != sarama.SourceTopic {
			failf("DescribeConfig %s: %s = %+v, want value %s, not default, not read-only, source topic", topic, k, e, *v)
		}
	}
	// (min.insync.replicas is not among them: Kafka 4.x's controller sets it as a cluster-level
	// dynamic default, so its source is not DEFAULT_CONFIG there)
	for k, v := range map[string]string{"compression.type": "producer", "message.timestamp.type": "CreateTime"} {
		e, ok := byCfg[k]
		if !ok || e.Value != v || !e.Default || e.Source != sarama.SourceDefault {
			failf("DescribeConfig %s: %s = %+v, want the default %q with source default", topic, k, e, v)
		}
	}
	// the core ones every client reads (the complete list is the topic-configs scenario)
	for _, k := range []string{"segment.bytes", "segment.ms", "retention.bytes", "min.insync.replicas", "delete.retention.ms",
		"min.compaction.lag.ms", "max.compaction.lag.ms", "min.cleanable.dirty.ratio"} {
		if _, ok := byCfg[k]; !ok {
			failf("DescribeConfig %s: no %s entry", topic, k)
		}
	}
	filtered, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic,
		ConfigNames: []string{"retention.ms", "compression.type"}})
	check(err, "DescribeConfig topic filtered")
	if len(filtered) != 2 {
		names := []string{}
		for _, e := range filtered {
			names = append(names, e.Name)
		}
		failf("DescribeConfig with ConfigNames [retention.ms compression.type]: %v", names)
	}
	brokerCfg, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.BrokerResource, Name: strconv.Itoa(int(id))})
	check(err, "DescribeConfig broker")
	var np *sarama.ConfigEntry
	for i := range brokerCfg {
		if brokerCfg[i].Name == "num.partitions" {
			np = &brokerCfg[i]
		}
	}
	if np == nil {
		failf("DescribeConfig broker %d: no num.partitions among %d entries", id, len(brokerCfg))
	}
	if _, err := strconv.Atoi(np.Value); err != nil {
		failf("DescribeConfig broker %d: num.partitions = %q", id, np.Value)
	}
	okf("DescribeConfig: %d topic entries (ours from the topic, defaults flagged), ConfigNames filter, broker %d (%d entries, num.partitions=%s)",
		len(entries), id, len(brokerCfg), np.Value)

	// CreatePartitions
	check(admin.CreatePartitions(topic, 4, nil, false), "CreatePartitions 2 -> 4")
	waitFor("4 partitions", func() bool {
		md, err := admin.DescribeTopics([]string{topic})
		return err == nil && len(md) == 1 && len(md[0].Partitions) == 4
	})
	md, err = admin.DescribeTopics([]string{topic})
	check(err, "DescribeTopics")
	checkTopicMD(md[0], 4)
	check(admin.CreatePartitions(topic, 6, nil, true), "CreatePartitions validateOnly 4 -> 6")
	expectKError(admin.CreatePartitions(topic, 3, nil, false), sarama.ErrInvalidPartitions, "CreatePartitions 4 -> 3")
	expectKError(admin.CreatePartitions(topic, 4, nil, false), sarama.ErrInvalidPartitions, "CreatePartitions 4 -> 4")
	expectKError(admin.CreatePartitions(topic+"-missing", 4, nil, false), sarama.ErrUnknownTopicOrPartition, "CreatePartitions of a missing topic")
	md, err = admin.DescribeTopics([]string{topic})
	check(err, "DescribeTopics")
	checkTopicMD(md[0], 4)
	okf("CreatePartitions 2 -> 4 (new partitions led by %d); validateOnly to 6 changes nothing; 4 -> 3, 4 -> 4 and a missing topic refused", id)

	// DeleteRecords
	cfg := newConfig()
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	prod, err := sarama.NewSyncProducer(brokers(), cfg)
	check(err, "NewSyncProducer")
	recs := map[int32][]*rec{}
	for _, p := range []int32{0, 3} {
		for i := 0; i < 10; i++ {
			r := makeRec(fmt.Sprintf("del-p%d", p), i)
			m := r.message(topic)
			m.Partition = p
			_, off, err := prod.SendMessage(m)
			check(err, "SendMessage")
			if off != int64(i) {
				failf("partition %d: record %d acked at offset %d", p, i, off)
			}
			recs[p] = append(recs[p], r)
		}
	}
	check(prod.Close(), "SyncProducer.Close")
	check(admin.DeleteRecords(topic, map[int32]int64{0: 4, 3: 10}), "DeleteRecords p0 < 4, p3 < 10")
	err = admin.DeleteRecords(topic, map[int32]int64{1: 1})
	expectKError(err, sarama.ErrOffsetOutOfRange, "DeleteRecords beyond the high watermark")
	lo, err := admin.ListOffsets(map[string]map[int32]int64{topic: {0: sarama.OffsetOldest, 3: sarama.OffsetOldest, 1: sarama.OffsetOldest}}, nil)
	check(err, "ListOffsets oldest")
	hi, err := admin.ListOffsets(map[string]map[int32]int64{topic: {0: sarama.OffsetNewest, 3: sarama.OffsetNewest}}, nil)
	check(err, "ListOffsets newest")
	for p, want := range map[int32]int64{0: 4, 3: 10, 1: 0} {
		r := lo[topic][p]
		if r == nil || (r.Err != nil && !errors.Is(r.Err, sarama.ErrNoError)) || r.Offset != want {
			failf("ListOffsets oldest partition %d: %+v, want %d", p, r, want)
		}
	}
	for p, want := range map[int32]int64{0: 10, 3: 10} {
		r := hi[topic][p]
		if r == nil || (r.Err != nil && !errors.Is(r.Err, sarama.ErrNoError)) || r.Offset != want {
			failf("ListOffsets newest partition %d: %+v, want %d", p, r, want)
		}
	}
	ccfg := newConfig()
	ccfg.Consumer.Return.Errors = true
	cons, err := sarama.NewConsumer(brokers(), ccfg)
	check(err, "NewConsumer")
	pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
	check(err, "ConsumePartition(0, OffsetOldest)")
	for o := int64(4); o < 10; o++ {
		select {
		case m := <-pc.Messages():
			if m.Offset != o {
				failf("after DeleteRecords: partition 0 consumed offset %d, want %d", m.Offset, o)
			}
			if d := recs[0][o].diff(m); d != "" {
				failf("after DeleteRecords: partition 0 offset %d: %s", o, d)
			}
		case e := <-pc.Errors():
			failf("after DeleteRecords: consumer error %v", e)
		case <-time.After(*flagStep):
			failf("after DeleteRecords: no record at offset %d", o)
		}
	}
	check(pc.Close(), "PartitionConsumer.Close")
	_, err = cons.ConsumePartition(topic, 0, 2)
	expectKError(err, sarama.ErrOffsetOutOfRange, "ConsumePartition at offset 2, below the log start offset 4")
	check(cons.Close(), "Consumer.Close")
	okf("DeleteRecords: log start 0 -> 4 (p0), 10 = high watermark (p3); beyond the high watermark refused; ListOffsets and the consumer agree, offset 2 out of range")

	// DeleteTopic
	check(admin.DeleteTopic(topic), "DeleteTopic")
	waitFor("the topic to disappear from ListTopics", func() bool {
		lt, err := admin.ListTopics()
		check(err, "ListTopics")
		_, ok := lt[topic]
		return !ok
	})
	md, err = admin.DescribeTopics([]string{topic})
	check(err, "DescribeTopics after delete")
	if len(md) != 1 || md[0].Err != sarama.ErrUnknownTopicOrPartition {
		failf("DescribeTopics after delete: %+v, want UNKNOWN_TOPIC_OR_PARTITION", md)
	}
	expectKError(admin.DeleteTopic(topic), sarama.ErrUnknownTopicOrPartition, "DeleteTopic of a deleted topic")
	okf("DeleteTopic: gone from ListTopics and DescribeTopics; deleting it again is UNKNOWN_TOPIC_OR_PARTITION")
	fmt.Println("PASS")
}

// kafkaTopicConfigs: the topic configs Apache Kafka 4.1 lists in DescribeConfigs for a topic.
var kafkaTopicConfigs = []string{
	"cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
	"compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
	"follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
	"local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
	"message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.type",
	"min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
	"remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes",
	"retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
	"unclean.leader.election.enable",
}

// scenarioTopicConfigs: DescribeConfig of a topic lists every topic config Kafka 4.1 lists
// (Sarama's ListTopics and tools that diff a topic's configs read them all).
func scenarioTopicConfigs() {
	admin, err := sarama.NewClusterAdmin(brokers(), newConfig())
	check(err, "NewClusterAdmin")
	defer admin.Close()
	topic := "sarama-topic-configs-" + runID
	createTopic(admin, topic, 1, map[string]*string{"retention.ms": strp("3600000")})
	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	check(err, "DescribeConfig topic")
	got := map[string]sarama.ConfigEntry{}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		got[e.Name] = e
		names = append(names, fmt.Sprintf("%s=%s(source %d)", e.Name, e.Value, e.Source))
	}
	sort.Strings(names)
	fmt.Printf("info DescribeConfig %s: %d entries: %s\n", topic, len(entries), strings.Join(names, " "))
	want := map[string]bool{}
	var missing []string
	for _, k := range kafkaTopicConfigs {
		want[k] = true
		if _, ok := got[k]; !ok {
			missing = append(missing, k)
		}
	}
	var extra []string
	for k := range got {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		fmt.Printf("info entries Kafka 4.1 does not list: %v\n", extra)
	}
	if len(missing) > 0 {
		failf("DescribeConfig %s: %d of Kafka 4.1's %d topic configs missing: %v", topic, len(missing),
			len(kafkaTopicConfigs), missing)
	}
	okf("DescribeConfig %s lists all %d topic configs of Kafka 4.1", topic, len(kafkaTopicConfigs))
	fmt.Println("PASS")
}

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
