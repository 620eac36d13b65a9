// Command admindiff sends a fixed sequence of raw admin requests (franz-go's kmsg, each pinned
// to an explicit version, over a plain TCP connection: no version negotiation, so the same
// request bytes reach every broker) and prints every decoded response as one JSON line:
//
//	{"step": "create-topics-ok", "api": "CreateTopics", "key": 19, "version": 7, "response": {...}}
//
// or {"step": ..., "error": "..."} when the broker closed the connection or the response did not
// decode. test_admin_differential.py runs it against Ketch and against Apache Kafka 4.1 and
// compares the two outputs field by field.
//
// JSON keeps what clients see: a null nullable string is null, an empty one "", a null array
// null; enums are printed as numbers; unknown tagged fields as {"tag": "hex"}; UUIDs as text.
// Wait steps (metadata propagation, coordinator loading) are not printed.
//
// Usage: admindiff -brokers HOST:PORT [-scenario all|apiversions|topics|configs|data|cluster|groups|txn|delete]
// (scenarios after "topics" expect the state the earlier ones leave: run "all" for a comparison).
package main

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	flagBrokers  = flag.String("brokers", "127.0.0.1:9092", "the broker (HOST:PORT); only the first of a list is used")
	flagScenario = flag.String("scenario", "all", "all, or one of: "+strings.Join(scenarioNames, ", "))
	flagTimeout  = flag.Duration("timeout", 60*time.Second, "overall deadline")
)

var scenarioNames = []string{"apiversions", "topics", "configs", "data", "cluster", "groups", "txn", "delete"}

// Fixed names and timestamps: responses carry them, so they must be the same on both brokers.
const (
	clientID = "admindiff"
	tA       = "adiff-a"      // 3 partitions, grown to 5; data, groups, transactions
	tB       = "adiff-b"      // default partitions; AlterConfigs; deleted by name
	tAssign  = "adiff-assign" // manual replica assignment
	tV4      = "adiff-v4"     // created with CreateTopics v4; deleted by topic id
	tMissing = "adiff-missing"
	group1   = "adiff-g1" // offsets committed by an admin (generation -1), no members
	group2   = "adiff-g2" // one consumer member
	group3   = "adiff-g3" // offsets committed in a transaction
	groupNo  = "adiff-nogroup"
	txnID    = "adiff-txn"
	ts0      = int64(1_700_000_000_000) // first record timestamp
)

// ---------------------------------------------------------------------------------------------
// raw connection
// ---------------------------------------------------------------------------------------------

type conn struct {
	addr     string
	deadline time.Time
	c        net.Conn
	format   *kmsg.RequestFormatter
	corr     int32
}

func (c *conn) dial() error {
	if c.c != nil {
		c.c.Close()
	}
	nc, err := net.DialTimeout("tcp", c.addr, 10*time.Second)
	if err != nil {
		return err
	}
	nc.SetDeadline(c.deadline)
	c.c = nc
	return nil
}

// roundTrip sends req at its version and decodes the response at decodeVersion.
func (c *conn) roundTrip(req kmsg.Request, decodeVersion int16) (kmsg.Response, error) {
	if c.c == nil {
		if err := c.dial(); err != nil {
			return nil, err
		}
	}
	c.corr++
	out := c.format.AppendRequest(nil, req, c.corr)
	if _, err := c.c.Write(out); err != nil {
		c.c.Close()
		c.c = nil
		return nil, fmt.Errorf("write: %w", err)
	}
	body, err := c.readFrame()
	if err != nil {
		c.c.Close()
		c.c = nil // the next request reconnects
		return nil, err
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != c.corr {
		return nil, fmt.Errorf("correlation id %d, want %d", corr, c.corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(decodeVersion)
	// Flexible responses have a tag section after the correlation id; ApiVersions never does.
	if req.IsFlexible() && req.Key() != 18 {
		if len(body) == 0 || body[0] != 0 {
			return nil, fmt.Errorf("response header with tagged fields or empty: % x", body[:min(len(body), 8)])
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s v%d response (%d bytes): %w", kmsg.NameForKey(req.Key()), decodeVersion, len(body), err)
	}
	return resp, nil
}

func (c *conn) readFrame() ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c.c, size[:]); err != nil {
		return nil, fmt.Errorf("read: %w (connection closed by the broker?)", err)
	}
	n := int(int32(binary.BigEndian.Uint32(size[:])))
	if n < 4 || n > 64<<20 {
		return nil, fmt.Errorf("response of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.c, body); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return body, nil
}

// step sends req pinned at version, prints the response (or the error) as one JSON line and
// returns the response (nil on error).
func (c *conn) step(name string, version int16, req kmsg.Request) kmsg.Response {
	return c.stepDecodeAt(name, version, version, req)
}

func (c *conn) stepDecodeAt(name string, version, decodeVersion int16, req kmsg.Request) kmsg.Response {
	req.SetVersion(version)
	line := map[string]any{"step": name, "api": kmsg.NameForKey(req.Key()), "key": req.Key(), "version": version}
	resp, err := c.roundTrip(req, decodeVersion)
	if err != nil {
		line["error"] = err.Error()
	} else {
		line["response"] = jsonable(reflect.ValueOf(resp))
	}
	b, jerr := json.Marshal(line)
	if jerr != nil {
		fatalf("json: %v", jerr)
	}
	fmt.Println(string(b))
	return resp
}

// optStep is step for an API the broker may not serve yet: when it does not advertise the
// version, the step prints {"step", ..., "skipped": "not advertised"} instead of sending it.
func (s *state) optStep(name string, version int16, req kmsg.Request) kmsg.Response {
	if r, ok := s.advertised[req.Key()]; !ok || version < r[0] || version > r[1] {
		b, _ := json.Marshal(map[string]any{"step": name, "api": kmsg.NameForKey(req.Key()), "key": req.Key(),
			"version": version, "skipped": "not advertised"})
		fmt.Println(string(b))
		return nil
	}
	return s.step(name, version, req)
}

// quiet sends req without printing (wait loops); nil on error.
func (c *conn) quiet(version int16, req kmsg.Request) kmsg.Response {
	req.SetVersion(version)
	resp, err := c.roundTrip(req, version)
	if err != nil {
		return nil
	}
	return resp
}

var tagsType = reflect.TypeOf(kmsg.Tags{})

// jsonable turns a kmsg struct into plain JSON values, keeping nil pointers and nil slices null.
func jsonable(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return jsonable(v.Elem())
	case reflect.Struct:
		if v.Type() == tagsType {
			tags := map[string]string{}
			if v.CanAddr() {
				v.Addr().Interface().(*kmsg.Tags).Each(func(k uint32, b []byte) { tags[fmt.Sprint(k)] = hex.EncodeToString(b) })
			}
			return tags
		}
		m := map[string]any{}
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			val := jsonable(v.Field(i))
			if f.Type == tagsType && len(val.(map[string]string)) == 0 {
				continue // no unknown tags: leave the noise out
			}
			m[f.Name] = val
		}
		return m
	case reflect.Slice:
		if v.IsNil() {
			return nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return hex.EncodeToString(v.Bytes())
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = jsonable(v.Index(i))
		}
		return out
	case reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 && v.Len() == 16 {
			b := make([]byte, 16)
			reflect.Copy(reflect.ValueOf(b), v)
			h := hex.EncodeToString(b)
			return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = jsonable(v.Index(i))
		}
		return out
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() // the number, not an enum's String()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint()
	case reflect.Bool:
		return v.Bool()
	case reflect.String:
		return v.String()
	case reflect.Float32, reflect.Float64:
		return v.Float()
	}
	return fmt.Sprintf("<%s>", v.Kind())
}

type fatal struct{ msg string }

func fatalf(format string, args ...any) { panic(fatal{fmt.Sprintf(format, args...)}) }

func main() {
	flag.Parse()
	valid := *flagScenario == "all"
	for _, s := range scenarioNames {
		valid = valid || s == *flagScenario
	}
	if !valid {
		fmt.Fprintf(os.Stderr, "unknown scenario %q\n", *flagScenario)
		os.Exit(2)
	}
	c := &conn{addr: strings.Split(*flagBrokers, ",")[0], deadline: time.Now().Add(*flagTimeout),
		format: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}
	code := 0
	func() {
		defer func() {
			if r := recover(); r != nil {
				if f, ok := r.(fatal); ok {
					fmt.Fprintln(os.Stderr, "FAIL: "+f.msg)
					code = 1
					return
				}
				panic(r)
			}
		}()
		if err := c.dial(); err != nil {
			fatalf("connect %s: %v", c.addr, err)
		}
		s := &state{conn: c, advertised: map[int16][2]int16{}}
		av := kmsg.NewPtrApiVersionsRequest()
		av.ClientSoftwareName, av.ClientSoftwareVersion = "admindiff", "1.0"
		if r, ok := s.quiet(3, av).(*kmsg.ApiVersionsResponse); ok {
			for _, k := range r.ApiKeys {
				s.advertised[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
			}
		}
		runs := map[string]func(){
			"apiversions": s.apiVersions, "topics": s.topics, "configs": s.configs, "data": s.data,
			"cluster": s.cluster, "groups": s.groups, "txn": s.txn, "delete": s.deleteTopics,
		}
		for _, name := range scenarioNames {
			if *flagScenario == "all" || *flagScenario == name {
				runs[name]()
			}
		}
	}()
	os.Exit(code)
}

// ---------------------------------------------------------------------------------------------
// small constructors
// ---------------------------------------------------------------------------------------------

func sp(s string) *string { return &s }

type state struct {
	*conn
	advertised    map[int16][2]int16 // ApiVersions of the broker: key -> min, max
	producerID    int64              // idempotent producer
	txnProducerID int64
	txnEpoch      int16
}

// waitUntil polls cond (unprinted requests) every 50 ms until it holds.
func (s *state) waitUntil(what string, cond func() bool) {
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metadata returns the broker's view of topics (unprinted), nil on error.
func (s *state) metadata(topics ...string) *kmsg.MetadataResponse {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = sp(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, _ := s.quiet(12, req).(*kmsg.MetadataResponse)
	return resp
}

// waitTopics waits until every topic has the given partition count, all with a leader
// (partitions < 0: waits until the topic is unknown).
func (s *state) waitTopics(partitions int, topics ...string) {
	s.waitUntil(fmt.Sprintf("topics %v with %d partitions", topics, partitions), func() bool {
		m := s.metadata(topics...)
		if m == nil {
			return false
		}
		for _, t := range m.Topics {
			if partitions < 0 {
				if t.ErrorCode != 3 { // UNKNOWN_TOPIC_OR_PARTITION
					return false
				}
				continue
			}
			if t.ErrorCode != 0 || len(t.Partitions) != partitions {
				return false
			}
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 || p.Leader < 0 {
					return false
				}
			}
		}
		return true
	})
}

// waitConfig waits until DescribeConfigs shows the topic config with the given value
// (nil: back to its default).
func (s *state) waitConfig(topic, name string, value *string) {
	s.waitUntil(fmt.Sprintf("%s %s=%v", topic, name, value), func() bool {
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{name}
		req.Resources = append(req.Resources, r)
		resp, _ := s.quiet(4, req).(*kmsg.DescribeConfigsResponse)
		if resp == nil || len(resp.Resources) != 1 || len(resp.Resources[0].Configs) != 1 {
			return false
		}
		cfg := resp.Resources[0].Configs[0]
		if value == nil {
			return cfg.Source == kmsg.ConfigSourceDefaultConfig || cfg.Source == kmsg.ConfigSourceStaticBrokerConfig
		}
		return cfg.Value != nil && *cfg.Value == *value
	})
}

// waitCoordinator waits until FindCoordinator answers without error for key.
func (s *state) waitCoordinator(key string, keyType int8) {
	s.waitUntil("coordinator of "+key, func() bool {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKeys = keyType, []string{key}
		resp, _ := s.quiet(6, req).(*kmsg.FindCoordinatorResponse)
		if resp == nil || len(resp.Coordinators) != 1 || resp.Coordinators[0].ErrorCode != 0 {
			return false
		}
		// a coordinator found may still be loading its partition: ask it something harmless
		if keyType == 1 {
			dt := kmsg.NewPtrDescribeTransactionsRequest()
			dt.TransactionalIDs = []string{key}
			r, _ := s.quiet(0, dt).(*kmsg.DescribeTransactionsResponse)
			return r != nil && len(r.TransactionStates) == 1 && r.TransactionStates[0].ErrorCode == 105 // TRANSACTIONAL_ID_NOT_FOUND
		}
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Groups = []string{key}
		r, _ := s.quiet(5, dg).(*kmsg.DescribeGroupsResponse)
		return r != nil && len(r.Groups) == 1 && r.Groups[0].ErrorCode == 0
	})
}

// ---------------------------------------------------------------------------------------------
// record batches (magic 2, uncompressed) for Produce
// ---------------------------------------------------------------------------------------------

type rec struct {
	key, value string
	ts         int64
}

func batch(producerID int64, epoch int16, baseSeq int32, transactional bool, recs []rec) []byte {
	var records []byte
	for i, r := range recs {
		var body []byte
		body = append(body, 0) // attributes
		body = binary.AppendVarint(body, r.ts-recs[0].ts)
		body = binary.AppendVarint(body, int64(i))
		if r.key == "" {
			body = binary.AppendVarint(body, -1)
		} else {
			body = binary.AppendVarint(body, int64(len(r.key)))
			body = append(body, r.key...)
		}
		body = binary.AppendVarint(body, int64(len(r.value)))
		body = append(body, r.value...)
		body = binary.AppendVarint(body, 0) // headers
		records = binary.AppendVarint(records, int64(len(body)))
		records = append(records, body...)
	}
	var attrs int16
	if transactional {
		attrs |= 0x10
	}
	maxTs := recs[0].ts
	for _, r := range recs {
		maxTs = max(maxTs, r.ts)
	}
	b := kmsg.RecordBatch{FirstOffset: 0, PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs,
		LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: recs[0].ts, MaxTimestamp: maxTs,
		ProducerID: producerID, ProducerEpoch: epoch, FirstSequence: baseSeq, NumRecords: int32(len(recs)),
		Records: records}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[17:], crc32.Checksum(out[21:], crc32.MakeTable(crc32.Castagnoli)))
	return out
}

func recs(prefix string, n int, ts int64) []rec {
	out := make([]rec, n)
	for i := range out {
		out[i] = rec{key: fmt.Sprintf("%s-k%d", prefix, i), value: fmt.Sprintf("%s-v%d", prefix, i), ts: ts + int64(i)*1000}
	}
	return out
}

func produceReq(txn *string, parts map[int32][]byte, topic string) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = txn, -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < 16; p++ {
		if b, ok := parts[p]; ok {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, b
			rt.Partitions = append(rt.Partitions, rp)
		}
	}
	req.Topics = append(req.Topics, rt)
	return req
}
