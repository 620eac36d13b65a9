// Command txnprobe drives the transactional protocol with raw requests (franz-go's kmsg, each
// pinned to an explicit version, one plain TCP connection to a single-node broker that is also
// the transaction and group coordinator) and checks every answer against what Apache Kafka 4.1
// returns. It proves transaction protocol version 2 (KIP-890 part 2: Produce v12 adds the
// partition implicitly, EndTxn v5 bumps the epoch, TxnOffsetCommit v5 adds __consumer_offsets)
// and contrasts it with protocol 1 (AddPartitionsToTxn v3, Produce v11, EndTxn v4).
//
// Record batches are built by hand: magic 2, attributes 0x0010 (transactional), producer id,
// epoch and first sequence set, Length and CRC-32C patched after kmsg.RecordBatch.AppendTo.
//
// Output: one JSON line per checked step,
//
//	{"step": "late-txn1-write", "api": "Produce", "version": 12, "ok": false,
//	 "want": {"code": 47}, "got": {"code": 0, "offset": 3, ...}}
//
// ("want" lists only the checked keys; "got" may carry more, for information; a value
// {"any_of": [...]} accepts any of them), then {"done": "<scenario>"} at the end, or
// {"fatal": "..."} when the scenario cannot go on. The program keeps going after a mismatch,
// using the producer ids and epochs Kafka would have returned, so one run lists every
// difference. Exit code 0 when every check passed, 1 otherwise. test_txn_v2.py runs it.
//
// Usage: txnprobe -brokers HOST:PORT -scenario NAME [-timeout 60s]
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	flagBrokers  = flag.String("brokers", "127.0.0.1:9092", "the broker HOST:PORT")
	flagScenario = flag.String("scenario", "", "one of: "+strings.Join(scenarioNames(), ", "))
	flagTimeout  = flag.Duration("timeout", 60*time.Second, "overall deadline")
)

// Kafka error codes used below.
const (
	errNone                 = 0
	errOutOfOrderSeq        = 45
	errInvalidProducerEpoch = 47
	errInvalidTxnState      = 48
	errInvalidPIDMapping    = 49
	errConcurrentTxns       = 51
	errProducerFenced       = 90
	errTxnAbortable         = 120
)

// ---------------------------------------------------------------------------------------------
// connection
// ---------------------------------------------------------------------------------------------

type probe struct {
	addr     string
	deadline time.Time
	c        net.Conn
	format   *kmsg.RequestFormatter
	corr     int32
	failed   int
}

func (p *probe) dial() error {
	nc, err := net.DialTimeout("tcp", p.addr, 10*time.Second)
	if err != nil {
		return err
	}
	nc.SetDeadline(p.deadline)
	p.c = nc
	return nil
}

// rt sends req at version and decodes the response; on a broken connection the next call
// reconnects (brokers close the connection on a version they do not serve).
func (p *probe) rt(version int16, req kmsg.Request) (kmsg.Response, error) {
	req.SetVersion(version)
	if p.c == nil {
		if err := p.dial(); err != nil {
			return nil, err
		}
	}
	p.corr++
	if _, err := p.c.Write(p.format.AppendRequest(nil, req, p.corr)); err != nil {
		p.drop()
		return nil, fmt.Errorf("write: %w", err)
	}
	var size [4]byte
	if _, err := io.ReadFull(p.c, size[:]); err != nil {
		p.drop()
		return nil, fmt.Errorf("read: %w (connection closed by the broker?)", err)
	}
	n := int(int32(binary.BigEndian.Uint32(size[:])))
	if n < 4 || n > 64<<20 {
		p.drop()
		return nil, fmt.Errorf("response of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(p.c, body); err != nil {
		p.drop()
		return nil, fmt.Errorf("read: %w", err)
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != p.corr {
		p.drop()
		return nil, fmt.Errorf("correlation id %d, want %d", corr, p.corr)
	}
	body = body[4:]
	if req.IsFlexible() && req.Key() != 18 { // ApiVersions responses never have header tags
		if len(body) == 0 || body[0] != 0 {
			return nil, fmt.Errorf("response header with tagged fields or empty")
		}
		body = body[1:]
	}
	resp := req.ResponseKind()
	resp.SetVersion(version)
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s v%d response: %w", kmsg.NameForKey(req.Key()), version, err)
	}
	return resp, nil
}

func (p *probe) drop() {
	if p.c != nil {
		p.c.Close()
		p.c = nil
	}
}

// ---------------------------------------------------------------------------------------------
// checks and output
// ---------------------------------------------------------------------------------------------

type kv = map[string]any

// anyOf in a want accepts any of its values (races the test cannot pin down).
type anyOf []any

func (a anyOf) MarshalJSON() ([]byte, error) { return json.Marshal(map[string]any{"any_of": []any(a)}) }

type fatalErr struct{ msg string }

func fatalf(format string, args ...any) { panic(fatalErr{fmt.Sprintf(format, args...)}) }

func emit(line kv) {
	b, err := json.Marshal(line)
	if err != nil {
		b, _ = json.Marshal(kv{"fatal": "json: " + err.Error()})
	}
	fmt.Println(string(b))
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func matches(want, got kv) bool {
	if _, broken := got["error"]; broken {
		return false
	}
	for k, w := range want {
		g := jsonText(got[k])
		if alts, ok := w.(anyOf); ok {
			hit := false
			for _, a := range alts {
				hit = hit || jsonText(a) == g
			}
			if !hit {
				return false
			}
		} else if jsonText(w) != g {
			return false
		}
	}
	return true
}

// check prints one step line and counts a mismatch.
func (p *probe) check(step, api string, version int16, want, got kv) bool {
	ok := matches(want, got)
	if !ok {
		p.failed++
	}
	emit(kv{"step": step, "api": api, "version": version, "ok": ok, "want": want, "got": got})
	return ok
}

// ---------------------------------------------------------------------------------------------
// requests
// ---------------------------------------------------------------------------------------------

func sp(s string) *string { return &s }

func str(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// batch is a one-record transactional batch (magic 2, uncompressed).
func batch(pid int64, epoch int16, seq int32, value string) []byte {
	var body []byte
	body = append(body, 0)               // record attributes
	body = binary.AppendVarint(body, 0)  // timestamp delta
	body = binary.AppendVarint(body, 0)  // offset delta
	body = binary.AppendVarint(body, -1) // null key
	body = binary.AppendVarint(body, int64(len(value)))
	body = append(body, value...)
	body = binary.AppendVarint(body, 0) // no headers
	records := binary.AppendVarint(nil, int64(len(body)))
	records = append(records, body...)
	ts := time.Now().UnixMilli()
	b := kmsg.RecordBatch{FirstOffset: 0, PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x0010,
		LastOffsetDelta: 0, FirstTimestamp: ts, MaxTimestamp: ts, ProducerID: pid, ProducerEpoch: epoch,
		FirstSequence: seq, NumRecords: 1, Records: records}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

// produce sends one transactional batch; got: code, offset, message.
func (p *probe) produce(version int16, txn *string, topic string, part int32, pid int64, epoch int16, seq int32,
	value string) kv {
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = txn, -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = part, batch(pid, epoch, seq, value)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := p.rt(version, req)
	if err != nil {
		return kv{"error": err.Error()}
	}
	r := resp.(*kmsg.ProduceResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return kv{"error": fmt.Sprintf("malformed response: %d topics", len(r.Topics))}
	}
	pr := r.Topics[0].Partitions[0]
	return kv{"code": pr.ErrorCode, "offset": pr.BaseOffset, "message": str(pr.ErrorMessage)}
}

// initPID sends InitProducerId, retrying on COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE
// and NOT_COORDINATOR (and CONCURRENT_TRANSACTIONS when retry51) for up to 30 s.
func (p *probe) initPID(version int16, txn string, timeoutMs int32, pid int64, epoch int16, retry51 bool) kv {
	deadline := time.Now().Add(30 * time.Second)
	retries := 0
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = sp(txn), timeoutMs, pid, epoch
		resp, err := p.rt(version, req)
		if err != nil {
			return kv{"error": err.Error()}
		}
		r := resp.(*kmsg.InitProducerIDResponse)
		retriable := r.ErrorCode == 14 || r.ErrorCode == 15 || r.ErrorCode == 16 || (retry51 && r.ErrorCode == errConcurrentTxns)
		if !retriable || time.Now().After(deadline) {
			return kv{"code": r.ErrorCode, "pid": r.ProducerID, "epoch": r.ProducerEpoch, "retries": retries}
		}
		retries++
		time.Sleep(100 * time.Millisecond)
	}
}

// endTxn sends EndTxn; with retry51 it retries CONCURRENT_TRANSACTIONS for up to 10 s. got: code,
// and for v5 pid and epoch.
func (p *probe) endTxn(version int16, txn string, pid int64, epoch int16, commit, retry51 bool) kv {
	deadline := time.Now().Add(10 * time.Second)
	retries := 0
	for {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = txn, pid, epoch, commit
		resp, err := p.rt(version, req)
		if err != nil {
			return kv{"error": err.Error()}
		}
		r := resp.(*kmsg.EndTxnResponse)
		if retry51 && r.ErrorCode == errConcurrentTxns && time.Now().Before(deadline) {
			retries++
			time.Sleep(50 * time.Millisecond)
			continue
		}
		out := kv{"code": r.ErrorCode, "retries": retries}
		if version >= 5 {
			out["pid"], out["epoch"] = r.ProducerID, r.ProducerEpoch
		}
		return out
	}
}

// describe: DescribeTransactions v0 of one id; got: code, state, pid, epoch, partitions ("topic/p").
func (p *probe) describe(txn string) kv {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{txn}
	resp, err := p.rt(0, req)
	if err != nil {
		return kv{"error": err.Error()}
	}
	r := resp.(*kmsg.DescribeTransactionsResponse)
	if len(r.TransactionStates) != 1 {
		return kv{"error": fmt.Sprintf("%d transaction states", len(r.TransactionStates))}
	}
	s := r.TransactionStates[0]
	parts := []string{}
	for _, t := range s.Topics {
		for _, pt := range t.Partitions {
			parts = append(parts, fmt.Sprintf("%s/%d", t.Topic, pt))
		}
	}
	sort.Strings(parts)
	topics := []string{}
	for _, t := range s.Topics {
		topics = append(topics, t.Topic)
	}
	sort.Strings(topics)
	return kv{"code": s.ErrorCode, "state": s.State, "pid": s.ProducerID, "epoch": s.ProducerEpoch,
		"partitions": parts, "topics": topics}
}

// describeUntil polls DescribeTransactions (markers are written after EndTxn answers) until it
// matches want, for up to 5 s (10 s for a state the coordinator reaches by itself: a timeout
// abort), then checks it.
func (p *probe) describeUntil(step, txn string, want kv) {
	wait := 5 * time.Second
	if step == "aborted-by-timeout" {
		wait = 10 * time.Second
	}
	deadline := time.Now().Add(wait)
	got := p.describe(txn)
	for !matches(want, got) && time.Now().Before(deadline) {
		if _, broken := got["error"]; broken {
			break
		}
		time.Sleep(50 * time.Millisecond)
		got = p.describe(txn)
	}
	p.check(step, "DescribeTransactions", 0, want, got)
}

func (p *probe) txnOffsetCommit(version int16, txn, group string, pid int64, epoch int16, topic string, offset int64) kv {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txn, group, pid, epoch
	req.Generation, req.MemberID = -1, ""
	req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: topic,
		Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: offset, LeaderEpoch: -1}}}}
	resp, err := p.rt(version, req)
	if err != nil {
		return kv{"error": err.Error()}
	}
	r := resp.(*kmsg.TxnOffsetCommitResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return kv{"error": "malformed TxnOffsetCommit response"}
	}
	return kv{"code": r.Topics[0].Partitions[0].ErrorCode}
}

// ---------------------------------------------------------------------------------------------
// setup: topics and coordinators
// ---------------------------------------------------------------------------------------------

func (p *probe) waitUntil(what string, cond func() bool) {
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *probe) createTopic(topic string, partitions int32) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, partitions, 1
	req.Topics = append(req.Topics, t)
	resp, err := p.rt(7, req)
	if err != nil {
		fatalf("CreateTopics %s: %v", topic, err)
	}
	if code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 && code != 36 {
		fatalf("CreateTopics %s: error %d", topic, code)
	}
	p.waitUntil("leaders of "+topic, func() bool {
		mr := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = sp(topic)
		mr.Topics = append(mr.Topics, mt)
		resp, err := p.rt(12, mr)
		if err != nil {
			return false
		}
		m := resp.(*kmsg.MetadataResponse)
		if len(m.Topics) != 1 || m.Topics[0].ErrorCode != 0 || len(m.Topics[0].Partitions) != int(partitions) {
			return false
		}
		for _, pt := range m.Topics[0].Partitions {
			if pt.ErrorCode != 0 || pt.Leader < 0 {
				return false
			}
		}
		return true
	})
	// Metadata may name the leader before the partition serves (NOT_LEADER_OR_FOLLOWER on the
	// first Produce): wait until ListOffsets answers for every partition.
	p.waitUntil("partitions of "+topic+" serving", func() bool {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = topic
		for i := int32(0); i < partitions; i++ {
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Partition, lp.CurrentLeaderEpoch, lp.Timestamp = i, -1, -1
			lt.Partitions = append(lt.Partitions, lp)
		}
		req.Topics = append(req.Topics, lt)
		resp, err := p.rt(7, req)
		if err != nil {
			return false
		}
		r := resp.(*kmsg.ListOffsetsResponse)
		if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != int(partitions) {
			return false
		}
		for _, pt := range r.Topics[0].Partitions {
			if pt.ErrorCode != 0 {
				return false
			}
		}
		return true
	})
}

// findCoordinator waits until FindCoordinator answers (this also creates the internal topic).
func (p *probe) findCoordinator(key string, keyType int8) {
	p.waitUntil(fmt.Sprintf("coordinator of %s (type %d)", key, keyType), func() bool {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKeys = keyType, []string{key}
		resp, err := p.rt(4, req)
		if err != nil {
			return false
		}
		r := resp.(*kmsg.FindCoordinatorResponse)
		return len(r.Coordinators) == 1 && r.Coordinators[0].ErrorCode == 0
	})
}

// initTxn finds the coordinator and runs the first InitProducerId (v5) of txn, which must give
// epoch 0: it returns the producer id, or stops the scenario.
func (p *probe) initTxn(step, txn string, timeoutMs int32) int64 {
	p.findCoordinator(txn, 1)
	got := p.initPID(5, txn, timeoutMs, -1, -1, false)
	if !p.check(step, "InitProducerId", 5, kv{"code": errNone, "epoch": 0}, got) {
		fatalf("%s: no producer id, cannot go on", step)
	}
	return got["pid"].(int64)
}

// ---------------------------------------------------------------------------------------------
// read_committed fetch
// ---------------------------------------------------------------------------------------------

// readCommitted fetches partition 0 of topic from offset 0 with isolation level 1 (polling until
// the last stable offset reaches the high watermark, up to 10 s) and describes the log:
//
//	hw, lso; log: one "offset:what@e<epoch>" per batch (what = the record value, COMMIT or
//	ABORT; "pid!=P" appended when the producer id is not pid); aborted: "P@firstOffset" per
//	aborted transaction; committed: the values a read_committed consumer returns.
func (p *probe) readCommitted(topic string, pid int64) kv {
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := p.fetchOnce(topic, pid)
		if _, broken := got["error"]; broken || jsonText(got["lso"]) == jsonText(got["hw"]) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *probe) fetchOnce(topic string, pid int64) kv {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.IsolationLevel = 10, 0, 1<<20, 1
	req.SessionID, req.SessionEpoch = 0, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.CurrentLeaderEpoch, fp.FetchOffset, fp.LastFetchedEpoch = 0, -1, 0, -1
	fp.LogStartOffset, fp.PartitionMaxBytes = -1, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp, err := p.rt(12, req)
	if err != nil {
		return kv{"error": err.Error()}
	}
	r := resp.(*kmsg.FetchResponse)
	if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		return kv{"error": fmt.Sprintf("fetch: error %d, %d topics", r.ErrorCode, len(r.Topics))}
	}
	fpr := r.Topics[0].Partitions[0]
	if fpr.ErrorCode != 0 {
		return kv{"error": fmt.Sprintf("fetch: partition error %d", fpr.ErrorCode)}
	}
	who := func(id int64) string {
		if id == pid {
			return "P"
		}
		return fmt.Sprintf("pid%d", id)
	}
	type abortedTxn struct {
		pid   int64
		first int64
	}
	var aborted []abortedTxn
	abortedDesc := []string{}
	for _, a := range fpr.AbortedTransactions {
		aborted = append(aborted, abortedTxn{a.ProducerID, a.FirstOffset})
		abortedDesc = append(abortedDesc, fmt.Sprintf("%s@%d", who(a.ProducerID), a.FirstOffset))
	}
	sort.Slice(aborted, func(i, j int) bool { return aborted[i].first < aborted[j].first })
	logDesc, committed := []string{}, []string{}
	open := map[int64]bool{} // producers whose current transaction was aborted
	buf := fpr.RecordBatches
	for len(buf) >= 12 {
		total := 12 + int(int32(binary.BigEndian.Uint32(buf[8:])))
		if total > len(buf) {
			break // partial batch at the end of the response
		}
		var b kmsg.RecordBatch
		if err := b.ReadFrom(buf[:total]); err != nil {
			return kv{"error": "record batch: " + err.Error()}
		}
		buf = buf[total:]
		last := b.FirstOffset + int64(b.LastOffsetDelta)
		for len(aborted) > 0 && aborted[0].first <= last {
			open[aborted[0].pid] = true
			aborted = aborted[1:]
		}
		var values []string
		rb := b.Records
		for i := int32(0); i < b.NumRecords && len(rb) > 0; i++ {
			n, k := binary.Varint(rb)
			if k <= 0 || int(n)+k > len(rb) {
				return kv{"error": "record: bad length"}
			}
			var rec kmsg.Record
			if err := rec.ReadFrom(rb[:k+int(n)]); err != nil {
				return kv{"error": "record: " + err.Error()}
			}
			rb = rb[k+int(n):]
			if b.Attributes&0x20 != 0 { // control batch: key = version int16, type int16
				kind := "CONTROL?"
				if len(rec.Key) >= 4 {
					switch binary.BigEndian.Uint16(rec.Key[2:]) {
					case 0:
						kind = "ABORT"
					case 1:
						kind = "COMMIT"
					}
				}
				values = append(values, kind)
			} else {
				values = append(values, string(rec.Value))
			}
		}
		desc := fmt.Sprintf("%d:%s@e%d", b.FirstOffset, strings.Join(values, ","), b.ProducerEpoch)
		if b.ProducerID != pid {
			desc += " pid!=P"
		}
		logDesc = append(logDesc, desc)
		if b.Attributes&0x20 != 0 {
			if len(values) == 1 && values[0] == "ABORT" {
				delete(open, b.ProducerID)
			}
			continue
		}
		if b.Attributes&0x10 != 0 && open[b.ProducerID] {
			continue
		}
		committed = append(committed, values...)
	}
	return kv{"hw": fpr.HighWatermark, "lso": fpr.LastStableOffset, "log": logDesc, "aborted": abortedDesc,
		"committed": committed}
}

// ---------------------------------------------------------------------------------------------

func main() {
	flag.Parse()
	run, ok := scenarios[*flagScenario]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown scenario %q (one of: %s)\n", *flagScenario, strings.Join(scenarioNames(), ", "))
		os.Exit(2)
	}
	p := &probe{addr: strings.Split(*flagBrokers, ",")[0], deadline: time.Now().Add(*flagTimeout),
		format: kmsg.NewRequestFormatter(kmsg.FormatterClientID("txnprobe"))}
	code := 0
	func() {
		defer func() {
			if r := recover(); r != nil {
				f, isFatal := r.(fatalErr)
				if !isFatal {
					f = fatalErr{fmt.Sprint("panic: ", r)}
				}
				emit(kv{"fatal": f.msg})
				code = 1
			}
		}()
		// topic and transactional id: unique per run, so the program can be rerun on one broker
		run(p, fmt.Sprintf("tp-%s-%d", *flagScenario, time.Now().UnixMilli()%1_000_000))
		emit(kv{"done": *flagScenario})
	}()
	if p.failed > 0 {
		code = 1
	}
	os.Exit(code)
}

func scenarioNames() []string {
	var out []string
	for name := range scenarios {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
