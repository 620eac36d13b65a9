// Command groupprobe checks the classic consumer group protocol request by
// request (raw kmsg requests sent straight to the group coordinator with
// franz-go, at the versions the broker and franz-go negotiate), with the exact
// error codes and fields Apache Kafka 4.1 answers: the member-id round of
// JoinGroup, the join barrier (a second member's JoinGroup parks until the
// first rejoins), generation / member id / protocol checks of SyncGroup,
// Heartbeat and OffsetCommit, commits while a rebalance is prepared and while
// it completes, OffsetFetch with several groups, DescribeGroups and ListGroups
// fields and filters, LeaveGroup of unknown members, DeleteGroups and
// OffsetDelete preconditions, session timeout bounds.
//
// Every check prints "ok   <what> = <value>" or "MISMATCH <what>: got ..,
// want ..". The run goes on after a mismatch where it can, so one run lists
// every difference; it ends with "PASS", or "FAIL: n mismatches" and exit 1.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

var (
	flagBrokers = flag.String("brokers", "127.0.0.1:9092", "comma-separated seed brokers")
	flagTimeout = flag.Duration("timeout", 90*time.Second, "overall deadline")
	flagDebug   = flag.Bool("debug", false, "franz-go debug logging to stderr")
)

type fatal struct{ msg string }

func fatalf(format string, args ...any) { panic(fatal{fmt.Sprintf(format, args...)}) }

var start = time.Now()
var mismatches []string

func stamp() string { return fmt.Sprintf("%6.2fs", time.Since(start).Seconds()) }

// expect compares the printed forms of got and want.
func expect(what string, got, want any) bool {
	g, w := fmt.Sprint(got), fmt.Sprint(want)
	if g == w {
		fmt.Printf("ok   %s  %s = %s\n", stamp(), what, g)
		return true
	}
	m := fmt.Sprintf("%s: got %s, want %s", what, g, w)
	mismatches = append(mismatches, m)
	fmt.Printf("MISMATCH %s  %s\n", stamp(), m)
	return false
}

func note(format string, args ...any) {
	fmt.Printf("     %s  %s\n", stamp(), fmt.Sprintf(format, args...))
}

// ec names an error code: NONE, or e.g. MEMBER_ID_REQUIRED(79).
func ec(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		if ke, ok := err.(*kerr.Error); ok {
			return fmt.Sprintf("%s(%d)", ke.Message, code)
		}
	}
	return fmt.Sprintf("UNKNOWN(%d)", code)
}

func str(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

func sp(s string) *string { return &s }

var ctx context.Context

func newClient(opts ...kgo.Opt) *kgo.Client {
	base := []kgo.Opt{kgo.SeedBrokers(strings.Split(*flagBrokers, ",")...), kgo.ClientID("ketch-groupprobe"),
		kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	if *flagDebug {
		base = append(base, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		fatalf("new client: %v", err)
	}
	return cl
}

// send issues a request to the given broker (no routing, no retries).
func send[R kmsg.Response](b *kgo.Broker, req kmsg.Request) R {
	resp, err := b.Request(ctx, req)
	if err != nil {
		fatalf("%T: %v", req, err)
	}
	return resp.(R)
}

type member struct {
	id    string
	gen   int32
	meta  []byte
	asgmt []byte
}

func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = 0
	m.Topics = topics
	return m.AppendTo(nil)
}

func consumerAssignment(topic string, parts ...int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Version = 0
	t := kmsg.NewConsumerMemberAssignmentTopic()
	t.Topic = topic
	t.Partitions = parts
	a.Topics = append(a.Topics, t)
	return a.AppendTo(nil)
}

func joinReq(group, memberID, protocolType string, protocols map[string][]byte, session int32) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Group = group
	r.MemberID = memberID
	r.SessionTimeoutMillis = session
	r.RebalanceTimeoutMillis = 15000
	r.ProtocolType = protocolType
	names := make([]string, 0, len(protocols))
	for n := range protocols {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = n
		p.Metadata = protocols[n]
		r.Protocols = append(r.Protocols, p)
	}
	r.Reason = sp("groupprobe")
	return r
}

func syncReq(group string, gen int32, memberID, protocol string, assignments map[string][]byte) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Group = group
	r.Generation = gen
	r.MemberID = memberID
	r.ProtocolType = sp("consumer")
	r.Protocol = sp(protocol)
	ids := make([]string, 0, len(assignments))
	for id := range assignments {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID = id
		a.MemberAssignment = assignments[id]
		r.GroupAssignment = append(r.GroupAssignment, a)
	}
	return r
}

func heartbeat(b *kgo.Broker, group string, gen int32, memberID string) int16 {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Group = group
	r.Generation = gen
	r.MemberID = memberID
	return send[*kmsg.HeartbeatResponse](b, r).ErrorCode
}

type commitPart struct {
	topic     string
	partition int32
	offset    int64
	epoch     int32
	meta      *string
}

// commit returns "topic/partition=ERROR" strings in request order.
func commit(b *kgo.Broker, group string, gen int32, memberID string, parts ...commitPart) []string {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Group = group
	r.Generation = gen
	r.MemberID = memberID
	for _, p := range parts {
		var t *kmsg.OffsetCommitRequestTopic
		for i := range r.Topics {
			if r.Topics[i].Topic == p.topic {
				t = &r.Topics[i]
			}
		}
		if t == nil {
			r.Topics = append(r.Topics, kmsg.NewOffsetCommitRequestTopic())
			t = &r.Topics[len(r.Topics)-1]
			t.Topic = p.topic
		}
		pp := kmsg.NewOffsetCommitRequestTopicPartition()
		pp.Partition = p.partition
		pp.Offset = p.offset
		pp.LeaderEpoch = p.epoch
		pp.Metadata = p.meta
		t.Partitions = append(t.Partitions, pp)
	}
	resp := send[*kmsg.OffsetCommitResponse](b, r)
	var out []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s/%d=%s", short(t.Topic), p.Partition, ec(p.ErrorCode)))
		}
	}
	sort.Strings(out)
	return out
}

var shortNames = map[string]string{}

func short(s string) string {
	if n, ok := shortNames[s]; ok {
		return n
	}
	return s
}

func describe(b *kgo.Broker, groups ...string) map[string]kmsg.DescribeGroupsResponseGroup {
	r := kmsg.NewPtrDescribeGroupsRequest()
	r.Groups = groups
	resp := send[*kmsg.DescribeGroupsResponse](b, r)
	out := map[string]kmsg.DescribeGroupsResponseGroup{}
	for _, g := range resp.Groups {
		out[g.Group] = g
	}
	return out
}

func listGroups(b *kgo.Broker, states, types []string) map[string]string {
	r := kmsg.NewPtrListGroupsRequest()
	r.StatesFilter = states
	r.TypesFilter = types
	resp := send[*kmsg.ListGroupsResponse](b, r)
	out := map[string]string{}
	if resp.ErrorCode != 0 {
		out["<error>"] = ec(resp.ErrorCode)
	}
	for _, g := range resp.Groups {
		if _, mine := shortNames[g.Group]; mine {
			out[short(g.Group)] = fmt.Sprintf("%s/%s/%q", g.GroupState, g.GroupType, g.ProtocolType)
		}
	}
	return out
}

func main() {
	flag.Parse()
	code := 0
	func() {
		defer func() {
			if r := recover(); r != nil {
				if f, ok := r.(fatal); ok {
					fmt.Fprintln(os.Stderr, "FAIL: cannot go on: "+f.msg)
					code = 2
					return
				}
				panic(r)
			}
		}()
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), *flagTimeout)
		defer cancel()
		run()
	}()
	if len(mismatches) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d mismatches:\n  %s\n", len(mismatches), strings.Join(mismatches, "\n  "))
		if code == 0 {
			code = 1
		}
	} else if code == 0 {
		fmt.Println("PASS")
	}
	os.Exit(code)
}

func run() {
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1_000_000_000)
	topic := "probe-" + suffix
	g := "probe-group-" + suffix        // the group the members use
	g2 := "probe-commit-only-" + suffix // only standalone commits
	never := "probe-never-" + suffix    // never used
	shortNames[topic] = "T"
	shortNames[g] = "G"
	shortNames[g2] = "G2"
	shortNames[never] = "NEVER"
	shortNames["no-such-topic-"+suffix] = "NOTOPIC"
	note("topic T=%s, group G=%s, G2=%s, NEVER=%s", topic, g, g2, never)

	cl := newClient()
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ct, err := adm.CreateTopic(ctx, 3, 1, nil, topic)
	if err == nil {
		err = ct.Err
	}
	if err != nil {
		fatalf("CreateTopic: %v", err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		md, err := adm.Metadata(ctx, topic)
		if err == nil && md.Topics[topic].Err == nil && len(md.Topics[topic].Partitions) == 3 {
			break
		}
		if time.Now().After(deadline) {
			fatalf("topic %s not in metadata", topic)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var rs []*kgo.Record
	for p := int32(0); p < 3; p++ {
		for i := 0; i < 10; i++ {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")})
		}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		fatalf("produce: %v", err)
	}

	// ---- FindCoordinator, several keys in one request (v4+)
	var coordID int32 = -1
	var firstErrs []string
	for deadline := time.Now().Add(30 * time.Second); ; {
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.CoordinatorKeys = []string{g, g2}
		resp, err := r.RequestWith(ctx, cl)
		if err != nil {
			fatalf("FindCoordinator: %v", err)
		}
		okAll := len(resp.Coordinators) == 2
		for _, c := range resp.Coordinators {
			if c.ErrorCode != 0 {
				okAll = false
				firstErrs = append(firstErrs, ec(c.ErrorCode))
			}
		}
		if okAll {
			keys := []string{short(resp.Coordinators[0].Key), short(resp.Coordinators[1].Key)}
			sort.Strings(keys) // Kafka answers the keys in any order
			expect("FindCoordinator[G,G2] v"+fmt.Sprint(resp.Version)+" keys", keys, []string{"G", "G2"})
			expect("FindCoordinator both keys on the same node", resp.Coordinators[0].NodeID == resp.Coordinators[1].NodeID, true)
			coordID = resp.Coordinators[0].NodeID
			break
		}
		if time.Now().After(deadline) {
			fatalf("FindCoordinator: no coordinator within 30s: %v", firstErrs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(firstErrs) > 0 {
		note("FindCoordinator answered %v before the coordinator was ready (Kafka: COORDINATOR_NOT_AVAILABLE while __consumer_offsets is created)", firstErrs[0])
	}
	coord := cl.Broker(int(coordID))
	// Every member gets its own client (connections): a parked JoinGroup or SyncGroup holds up the
	// requests queued behind it on the same connection (Kafka answers a connection's requests in order).
	clA, clB := newClient(), newClient()
	defer clA.Close()
	defer clB.Close()
	coordA, coordB := clA.Broker(int(coordID)), clB.Broker(int(coordID))
	avr := kmsg.NewPtrApiVersionsRequest()
	avr.ClientSoftwareName = "ketch-groupprobe"
	avr.ClientSoftwareVersion = "1"
	vs, err := coord.Request(ctx, avr)
	if err == nil {
		var used []string
		for _, k := range vs.(*kmsg.ApiVersionsResponse).ApiKeys {
			switch k.ApiKey {
			case 10, 11, 12, 13, 14, 8, 9, 15, 16, 42, 47:
				used = append(used, fmt.Sprintf("%s v%d-%d", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion))
			}
		}
		note("coordinator %d advertises %s", coordID, strings.Join(used, ", "))
	}

	metaA := consumerMeta(topic)
	protos := map[string][]byte{"range": metaA}

	// ---- JoinGroup: member id round (KIP-394), then the real join
	j := send[*kmsg.JoinGroupResponse](coordA, joinReq(g, "", "consumer", protos, 10000))
	expect("JoinGroup G (empty member id) error", ec(j.ErrorCode), ec(kerr.MemberIDRequired.Code))
	expect("JoinGroup G (empty member id) returns a member id", j.MemberID != "", true)
	expect("JoinGroup G (empty member id) generation", j.Generation, -1)
	a := member{id: j.MemberID, meta: metaA}
	j = send[*kmsg.JoinGroupResponse](coordA, joinReq(g, a.id, "consumer", protos, 10000))
	expect("JoinGroup G (A) error", ec(j.ErrorCode), "NONE")
	expect("JoinGroup G (A) generation", j.Generation, 1)
	expect("JoinGroup G (A) leader is A", j.LeaderID == a.id, true)
	expect("JoinGroup G (A) member id echoed", j.MemberID == a.id, true)
	expect("JoinGroup G (A) protocol type/name", fmt.Sprintf("%s/%s", str(j.ProtocolType), str(j.Protocol)), "consumer/range")
	expect("JoinGroup G (A) skip_assignment", j.SkipAssignment, false)
	if expect("JoinGroup G (A) members (leader sees all)", len(j.Members), 1) {
		expect("JoinGroup G (A) member metadata echoed byte for byte", bytes.Equal(j.Members[0].ProtocolMetadata, metaA), true)
	}
	a.gen = j.Generation

	// ---- other protocol / type than the group's, session timeout bounds
	j = send[*kmsg.JoinGroupResponse](coord, joinReq(g, "", "connect", map[string][]byte{"range": metaA}, 10000))
	expect("JoinGroup G with protocol type 'connect' (group is 'consumer')", ec(j.ErrorCode), ec(kerr.InconsistentGroupProtocol.Code))
	j = send[*kmsg.JoinGroupResponse](coord, joinReq(g, "", "consumer", map[string][]byte{"roundrobin": metaA}, 10000))
	expect("JoinGroup G with no protocol in common (roundrobin vs range)", ec(j.ErrorCode), ec(kerr.InconsistentGroupProtocol.Code))
	j = send[*kmsg.JoinGroupResponse](coord, joinReq("probe-st-"+suffix, "", "consumer", protos, 1000))
	expect("JoinGroup session.timeout 1000 ms (< group.min.session.timeout.ms 6000)", ec(j.ErrorCode), ec(kerr.InvalidSessionTimeout.Code))
	j = send[*kmsg.JoinGroupResponse](coord, joinReq("probe-st-"+suffix, "", "consumer", protos, 3_600_000))
	expect("JoinGroup session.timeout 1 h (> group.max.session.timeout.ms 30 min)", ec(j.ErrorCode), ec(kerr.InvalidSessionTimeout.Code))

	// ---- SyncGroup checks, then the leader's assignment
	asgA := consumerAssignment(topic, 0, 1, 2)
	s := send[*kmsg.SyncGroupResponse](coordA, syncReq(g, a.gen, a.id, "roundrobin", map[string][]byte{a.id: asgA}))
	expect("SyncGroup G with protocol name 'roundrobin' (group chose range)", ec(s.ErrorCode), ec(kerr.InconsistentGroupProtocol.Code))
	s = send[*kmsg.SyncGroupResponse](coordA, syncReq(g, a.gen+1, a.id, "range", map[string][]byte{a.id: asgA}))
	expect("SyncGroup G with generation+1", ec(s.ErrorCode), ec(kerr.IllegalGeneration.Code))
	s = send[*kmsg.SyncGroupResponse](coord, syncReq(g, a.gen, "nobody", "range", nil))
	expect("SyncGroup G unknown member", ec(s.ErrorCode), ec(kerr.UnknownMemberID.Code))
	s = send[*kmsg.SyncGroupResponse](coordA, syncReq(g, a.gen, a.id, "range", map[string][]byte{a.id: asgA}))
	expect("SyncGroup G (leader A) error", ec(s.ErrorCode), "NONE")
	expect("SyncGroup G (leader A) protocol type/name", fmt.Sprintf("%s/%s", str(s.ProtocolType), str(s.Protocol)), "consumer/range")
	expect("SyncGroup G (leader A) gets its assignment byte for byte", bytes.Equal(s.MemberAssignment, asgA), true)
	a.asgmt = asgA

	// ---- Heartbeat
	expect("Heartbeat G (A, current generation)", ec(heartbeat(coordA, g, a.gen, a.id)), "NONE")
	expect("Heartbeat G (A, generation+1)", ec(heartbeat(coordA, g, a.gen+1, a.id)), ec(kerr.IllegalGeneration.Code))
	expect("Heartbeat G unknown member", ec(heartbeat(coord, g, a.gen, "nobody")), ec(kerr.UnknownMemberID.Code))
	expect("Heartbeat NEVER (no such group)", ec(heartbeat(coord, never, 1, "nobody")), ec(kerr.UnknownMemberID.Code))

	// ---- OffsetCommit
	long := strings.Repeat("x", 5000)
	res := commit(coordA, g, a.gen, a.id,
		commitPart{topic, 0, 5, 0, sp("m0")},
		commitPart{topic, 1, 7, -1, sp("")},
		commitPart{topic, 2, 9, 0, &long},
		commitPart{"no-such-topic-" + suffix, 0, 1, -1, nil})
	expect("OffsetCommit G (A): p0, p1, p2 with 5000-byte metadata, unknown topic", res,
		[]string{"NOTOPIC/0=" + ec(kerr.UnknownTopicOrPartition.Code), "T/0=NONE", "T/1=NONE", "T/2=" + ec(kerr.OffsetMetadataTooLarge.Code)})
	expect("OffsetCommit G generation+1", commit(coordA, g, a.gen+1, a.id, commitPart{topic, 0, 6, -1, nil}),
		[]string{"T/0=" + ec(kerr.IllegalGeneration.Code)})
	expect("OffsetCommit G unknown member", commit(coord, g, a.gen, "nobody", commitPart{topic, 0, 6, -1, nil}),
		[]string{"T/0=" + ec(kerr.UnknownMemberID.Code)})
	expect("OffsetCommit G generation -1, no member id, group has members", commit(coord, g, -1, "", commitPart{topic, 0, 6, -1, nil}),
		[]string{"T/0=" + ec(kerr.UnknownMemberID.Code)})
	expect("OffsetCommit G2 generation -1, no member id (standalone commit, creates the group)",
		commit(coord, g2, -1, "", commitPart{topic, 0, 3, -1, sp("standalone")}), []string{"T/0=NONE"})

	// ---- OffsetFetch, several groups in one request (v8+)
	of := kmsg.NewPtrOffsetFetchRequest()
	of.RequireStable = true
	for _, spec := range []struct {
		group string
		parts []int32
	}{{g, nil}, {g2, []int32{0, 1}}, {never, nil}, {"probe-never2-" + suffix, []int32{0}}} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = spec.group
		if spec.parts != nil {
			t := kmsg.NewOffsetFetchRequestGroupTopic()
			t.Topic = topic
			t.Partitions = spec.parts
			rg.Topics = append(rg.Topics, t)
		}
		of.Groups = append(of.Groups, rg)
	}
	shortNames["probe-never2-"+suffix] = "NEVER2"
	ofr := send[*kmsg.OffsetFetchResponse](coord, of)
	got := map[string]string{}
	for _, rg := range ofr.Groups {
		var ps []string
		for _, t := range rg.Topics {
			for _, p := range t.Partitions {
				ps = append(ps, fmt.Sprintf("%s/%d@%d epoch %d meta %q %s", short(t.Topic), p.Partition, p.Offset, p.LeaderEpoch, str(p.Metadata), ec(p.ErrorCode)))
			}
		}
		sort.Strings(ps)
		got[short(rg.Group)] = fmt.Sprintf("%s %v", ec(rg.ErrorCode), ps)
	}
	expect(fmt.Sprintf("OffsetFetch v%d [G all, G2 p0+p1, NEVER all, NEVER2 p0]", ofr.Version), got, map[string]string{
		"G":      `NONE [T/0@5 epoch 0 meta "m0" NONE T/1@7 epoch -1 meta "" NONE]`,
		"G2":     `NONE [T/0@3 epoch -1 meta "standalone" NONE T/1@-1 epoch -1 meta "" NONE]`,
		"NEVER":  `NONE []`,
		"NEVER2": `NONE [T/0@-1 epoch -1 meta "" NONE]`,
	})

	// ---- DescribeGroups (v6: an unknown group is GROUP_ID_NOT_FOUND with a message)
	d := describe(coord, g, g2, never)
	dg := d[g]
	expect("DescribeGroups G error/state/type/protocol", fmt.Sprintf("%s/%s/%s/%s", ec(dg.ErrorCode), dg.State, dg.ProtocolType, dg.Protocol), "NONE/Stable/consumer/range")
	if expect("DescribeGroups G members", len(dg.Members), 1) {
		m := dg.Members[0]
		expect("DescribeGroups G member id, client id, host", fmt.Sprintf("%v/%s/%s", m.MemberID == a.id, m.ClientID, m.ClientHost), "true/ketch-groupprobe//127.0.0.1")
		expect("DescribeGroups G member metadata and assignment byte for byte", fmt.Sprint(bytes.Equal(m.ProtocolMetadata, metaA), bytes.Equal(m.MemberAssignment, asgA)), "true true")
	}
	expect("DescribeGroups G2 (commits only) error/state/type/protocol/members", fmt.Sprintf("%s/%s/%q/%q/%d", ec(d[g2].ErrorCode), d[g2].State, d[g2].ProtocolType, d[g2].Protocol, len(d[g2].Members)), `NONE/Empty/""/""/0`)
	expect("DescribeGroups NEVER error/state", fmt.Sprintf("%s/%s", ec(d[never].ErrorCode), d[never].State), ec(kerr.GroupIDNotFound.Code)+"/Dead")
	cl5 := newClient(kgo.MaxVersions(func() *kversion.Versions { v := kversion.Stable(); v.SetMaxKeyVersion(15, 5); return v }()))
	defer cl5.Close()
	d5 := describe(cl5.Broker(int(coordID)), never)
	expect("DescribeGroups v5 NEVER error/state", fmt.Sprintf("%s/%s", ec(d5[never].ErrorCode), d5[never].State), "NONE/Dead")

	// ---- ListGroups (v4 states filter, v5 types filter)
	expect("ListGroups (no filter): state/type/protocol type", listGroups(coord, nil, nil), map[string]string{"G": `Stable/classic/"consumer"`, "G2": `Empty/classic/""`})
	expect("ListGroups states=[Empty]", listGroups(coord, []string{"Empty"}, nil), map[string]string{"G2": `Empty/classic/""`})
	expect("ListGroups states=[stable] (case-insensitive)", listGroups(coord, []string{"stable"}, nil), map[string]string{"G": `Stable/classic/"consumer"`})
	expect("ListGroups types=[classic]", listGroups(coord, nil, []string{"classic"}), map[string]string{"G": `Stable/classic/"consumer"`, "G2": `Empty/classic/""`})
	expect("ListGroups types=[consumer] (KIP-848 groups only)", listGroups(coord, nil, []string{"consumer"}), map[string]string{})

	// ---- DeleteGroups / OffsetDelete preconditions
	dr := kmsg.NewPtrDeleteGroupsRequest()
	dr.Groups = []string{g, never}
	drr := send[*kmsg.DeleteGroupsResponse](coord, dr)
	dres := map[string]string{}
	for _, x := range drr.Groups {
		dres[short(x.Group)] = ec(x.ErrorCode)
	}
	expect("DeleteGroups [G (has a member), NEVER]", dres, map[string]string{"G": ec(kerr.NonEmptyGroup.Code), "NEVER": ec(kerr.GroupIDNotFound.Code)})
	offsetDelete := func(group string) string {
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = group
		t := kmsg.NewOffsetDeleteRequestTopic()
		t.Topic = topic
		p := kmsg.NewOffsetDeleteRequestTopicPartition()
		p.Partition = 0
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		resp := send[*kmsg.OffsetDeleteResponse](coord, r)
		var ps []string
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				ps = append(ps, fmt.Sprintf("%s/%d=%s", short(t.Topic), p.Partition, ec(p.ErrorCode)))
			}
		}
		return fmt.Sprintf("%s %v", ec(resp.ErrorCode), ps)
	}
	expect("OffsetDelete G T/0 (a member subscribes to T)", offsetDelete(g), "NONE [T/0="+ec(kerr.GroupSubscribedToTopic.Code)+"]")
	expect("OffsetDelete NEVER T/0", offsetDelete(never), ec(kerr.GroupIDNotFound.Code)+" []")

	// ---- a second member: the join barrier
	j = send[*kmsg.JoinGroupResponse](coordB, joinReq(g, "", "consumer", protos, 10000))
	expect("JoinGroup G (B, empty member id)", ec(j.ErrorCode), ec(kerr.MemberIDRequired.Code))
	b := member{id: j.MemberID, meta: metaA}
	bJoin := make(chan *kmsg.JoinGroupResponse, 1)
	go func() {
		resp, err := coordB.Request(ctx, joinReq(g, b.id, "consumer", protos, 10000))
		if err != nil {
			note("B's JoinGroup failed: %v", err)
			bJoin <- nil
			return
		}
		bJoin <- resp.(*kmsg.JoinGroupResponse)
	}()
	var hb int16
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if hb = heartbeat(coordA, g, a.gen, a.id); hb != 0 {
			break
		}
	}
	expect("Heartbeat G (A) while B's JoinGroup waits", ec(hb), ec(kerr.RebalanceInProgress.Code))
	select {
	case <-bJoin:
		expect("B's JoinGroup waits for A to rejoin", "answered early", "still waiting")
	default:
		expect("B's JoinGroup waits for A to rejoin", "still waiting", "still waiting")
	}
	expect("DescribeGroups G state while B waits", describe(coord, g)[g].State, "PreparingRebalance")
	expect("OffsetCommit G (A, old generation) while the rebalance is prepared", commit(coordA, g, a.gen, a.id, commitPart{topic, 0, 6, 0, sp("m0b")}), []string{"T/0=NONE"})
	ja := send[*kmsg.JoinGroupResponse](coordA, joinReq(g, a.id, "consumer", protos, 10000))
	var jb *kmsg.JoinGroupResponse
	select {
	case jb = <-bJoin:
	case <-time.After(15 * time.Second):
	}
	expect("JoinGroup G (A rejoins) error/generation", fmt.Sprintf("%s/%d", ec(ja.ErrorCode), ja.Generation), fmt.Sprintf("NONE/%d", a.gen+1))
	if jb == nil {
		expect("B's JoinGroup answered once A rejoined", "no answer within 15s", "answered")
	} else {
		expect("JoinGroup G (B) error/generation", fmt.Sprintf("%s/%d", ec(jb.ErrorCode), jb.Generation), fmt.Sprintf("NONE/%d", a.gen+1))
		expect("JoinGroup G: A and B see the same leader", ja.LeaderID == jb.LeaderID, true)
		leader, follower := ja, jb
		if jb.LeaderID == b.id {
			leader, follower = jb, ja
		}
		expect("JoinGroup G: the leader is A or B", leader.LeaderID == a.id || leader.LeaderID == b.id, true)
		expect("JoinGroup G: leader gets 2 members, follower none", fmt.Sprint(len(leader.Members), len(follower.Members)), "2 0")
		a.gen, b.gen = ja.Generation, jb.Generation
		expect("Heartbeat G (A) after the join, before the sync (CompletingRebalance)", ec(heartbeat(coordA, g, a.gen, a.id)), "NONE")
		expect("DescribeGroups G state after the join", describe(coord, g)[g].State, "CompletingRebalance")
		expect("OffsetCommit G (A, new generation) before the sync", commit(coordA, g, a.gen, a.id, commitPart{topic, 0, 6, 0, nil}), []string{"T/0=" + ec(kerr.RebalanceInProgress.Code)})
		// the follower's SyncGroup waits for the leader's
		leaderID, followerID := leader.LeaderID, a.id
		leaderCoord, followerCoord := coordB, coordA
		if followerID == leaderID {
			followerID = b.id
			leaderCoord, followerCoord = coordA, coordB
		}
		fSync := make(chan *kmsg.SyncGroupResponse, 1)
		go func() {
			resp, err := followerCoord.Request(ctx, syncReq(g, a.gen, followerID, "range", nil))
			if err != nil {
				fSync <- nil
				return
			}
			fSync <- resp.(*kmsg.SyncGroupResponse)
		}()
		time.Sleep(300 * time.Millisecond)
		select {
		case <-fSync:
			expect("follower's SyncGroup waits for the leader's", "answered early", "still waiting")
		default:
			expect("follower's SyncGroup waits for the leader's", "still waiting", "still waiting")
		}
		asgL, asgF := consumerAssignment(topic, 0, 1), consumerAssignment(topic, 2)
		sl := send[*kmsg.SyncGroupResponse](leaderCoord, syncReq(g, a.gen, leaderID, "range", map[string][]byte{leaderID: asgL, followerID: asgF}))
		expect("SyncGroup G (leader) error / own assignment", fmt.Sprintf("%s %v", ec(sl.ErrorCode), bytes.Equal(sl.MemberAssignment, asgL)), "NONE true")
		var sf *kmsg.SyncGroupResponse
		select {
		case sf = <-fSync:
		case <-time.After(10 * time.Second):
		}
		if sf == nil {
			expect("follower's SyncGroup answered after the leader's", "no answer within 10s", "answered")
		} else {
			expect("SyncGroup G (follower) error / its assignment", fmt.Sprintf("%s %v", ec(sf.ErrorCode), bytes.Equal(sf.MemberAssignment, asgF)), "NONE true")
		}
		expect("DescribeGroups G state after the sync", describe(coord, g)[g].State, "Stable")
		expect("OffsetCommit G (A, generation before the rebalance)", commit(coordA, g, a.gen-1, a.id, commitPart{topic, 0, 6, 0, nil}), []string{"T/0=" + ec(kerr.IllegalGeneration.Code)})
	}

	// ---- LeaveGroup: unknown member, then both; the group becomes Empty
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Group = g
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = "nobody"
	lr.Members = append(lr.Members, lm)
	lrr := send[*kmsg.LeaveGroupResponse](coord, lr)
	var lms []string
	for _, m := range lrr.Members {
		lms = append(lms, fmt.Sprintf("%s=%s", m.MemberID, ec(m.ErrorCode)))
	}
	expect(fmt.Sprintf("LeaveGroup v%d G [nobody]", lrr.Version), fmt.Sprintf("%s %v", ec(lrr.ErrorCode), lms), "NONE [nobody="+ec(kerr.UnknownMemberID.Code)+"]")
	lr = kmsg.NewPtrLeaveGroupRequest()
	lr.Group = g
	for _, id := range []string{a.id, b.id} {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = id
		m.Reason = sp("groupprobe done")
		lr.Members = append(lr.Members, m)
	}
	lrr = send[*kmsg.LeaveGroupResponse](coord, lr)
	lms = nil
	for _, m := range lrr.Members {
		lms = append(lms, ec(m.ErrorCode))
	}
	expect("LeaveGroup G [A, B]", fmt.Sprintf("%s %v", ec(lrr.ErrorCode), lms), "NONE [NONE NONE]")
	dg = describe(coord, g)[g]
	expect("DescribeGroups G after everyone left: state/protocol type/protocol/members (the protocol type stays)",
		fmt.Sprintf("%s/%q/%q/%d", dg.State, dg.ProtocolType, dg.Protocol, len(dg.Members)), `Empty/"consumer"/""/0`)
	expect("ListGroups states=[Empty] after everyone left", listGroups(coord, []string{"Empty"}, nil), map[string]string{"G": `Empty/classic/"consumer"`, "G2": `Empty/classic/""`})
	expect("OffsetDelete G T/0 (group Empty)", offsetDelete(g), "NONE [T/0=NONE]")
	of = kmsg.NewPtrOffsetFetchRequest()
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = g
	of.Groups = append(of.Groups, rg)
	ofr = send[*kmsg.OffsetFetchResponse](coord, of)
	var left []string
	for _, x := range ofr.Groups {
		for _, t := range x.Topics {
			for _, p := range t.Partitions {
				left = append(left, fmt.Sprintf("%s/%d@%d", short(t.Topic), p.Partition, p.Offset))
			}
		}
	}
	sort.Strings(left)
	expect("OffsetFetch G after OffsetDelete T/0", left, []string{"T/1@7"})

	// ---- static membership (KIP-345) and the static leader's rejoin (KIP-814)
	gs := "probe-static-" + suffix
	shortNames[gs] = "GS"
	staticJoin := func(b *kgo.Broker, memberID string, meta []byte) *kmsg.JoinGroupResponse {
		r := joinReq(gs, memberID, "consumer", map[string][]byte{"range": meta}, 10000)
		r.InstanceID = sp("i1")
		return send[*kmsg.JoinGroupResponse](b, r)
	}
	j = staticJoin(coordA, "", metaA)
	expect("JoinGroup GS static member i1 (empty member id): no MEMBER_ID_REQUIRED round", fmt.Sprintf("%s/%d/%v", ec(j.ErrorCode), j.Generation, j.LeaderID == j.MemberID && j.MemberID != ""), "NONE/1/true")
	s1 := member{id: j.MemberID, gen: j.Generation}
	sr := syncReq(gs, s1.gen, s1.id, "range", map[string][]byte{s1.id: asgA})
	sr.InstanceID = sp("i1")
	s = send[*kmsg.SyncGroupResponse](coordA, sr)
	expect("SyncGroup GS (i1)", fmt.Sprintf("%s %v", ec(s.ErrorCode), bytes.Equal(s.MemberAssignment, asgA)), "NONE true")
	// the restarted member's subscription metadata differs in its user data (as a restarted Java
	// consumer's does: no owned partitions, generation -1): the protocol stays range, so Kafka does
	// not rebalance
	meta2 := func() []byte {
		m := kmsg.NewConsumerMemberMetadata()
		m.Topics = []string{topic}
		m.UserData = []byte("restarted")
		return m.AppendTo(nil)
	}()
	j = staticJoin(coordB, "", meta2)
	s2 := member{id: j.MemberID, gen: j.Generation}
	expect("JoinGroup GS i1 again (restarted, empty member id, other metadata bytes): error/generation/new member id", fmt.Sprintf("%s/%d/%v", ec(j.ErrorCode), j.Generation, s2.id != "" && s2.id != s1.id), "NONE/1/true")
	expect("JoinGroup GS i1 again: the replaced leader stays leader, told to skip the assignment (KIP-814)", fmt.Sprintf("leader=%v skip_assignment=%v", j.LeaderID == s2.id, j.SkipAssignment), "leader=true skip_assignment=true")
	if expect("JoinGroup GS i1 again: members listed", len(j.Members), 1) {
		expect("JoinGroup GS i1 again: member / instance id", fmt.Sprintf("%v/%s", j.Members[0].MemberID == s2.id, str(j.Members[0].InstanceID)), "true/i1")
	}
	hbr := kmsg.NewPtrHeartbeatRequest()
	hbr.Group, hbr.Generation, hbr.MemberID, hbr.InstanceID = gs, s1.gen, s1.id, sp("i1")
	expect("Heartbeat GS from the replaced member (old member id, i1)", ec(send[*kmsg.HeartbeatResponse](coordA, hbr).ErrorCode), ec(kerr.FencedInstanceID.Code))
	ocr := kmsg.NewPtrOffsetCommitRequest()
	ocr.Group, ocr.Generation, ocr.MemberID, ocr.InstanceID = gs, s1.gen, s1.id, sp("i1")
	oct := kmsg.NewOffsetCommitRequestTopic()
	oct.Topic = topic
	ocp := kmsg.NewOffsetCommitRequestTopicPartition()
	ocp.Offset = 1
	oct.Partitions = append(oct.Partitions, ocp)
	ocr.Topics = append(ocr.Topics, oct)
	ocres := send[*kmsg.OffsetCommitResponse](coordA, ocr)
	expect("OffsetCommit GS from the replaced member", ec(ocres.Topics[0].Partitions[0].ErrorCode), ec(kerr.FencedInstanceID.Code))
	sr = syncReq(gs, s2.gen, s2.id, "range", nil)
	sr.InstanceID = sp("i1")
	s = send[*kmsg.SyncGroupResponse](coordB, sr)
	expect("SyncGroup GS (new i1 member, no assignments sent): gets the stored assignment", fmt.Sprintf("%s %v", ec(s.ErrorCode), bytes.Equal(s.MemberAssignment, asgA)), "NONE true")
	dg = describe(coord, gs)[gs]
	if expect("DescribeGroups GS: state / members", fmt.Sprintf("%s/%d", dg.State, len(dg.Members)), "Stable/1") {
		expect("DescribeGroups GS member: id / instance id", fmt.Sprintf("%v/%s", dg.Members[0].MemberID == s2.id, str(dg.Members[0].InstanceID)), "true/i1")
	}
	lr = kmsg.NewPtrLeaveGroupRequest()
	lr.Group = gs
	lm = kmsg.NewLeaveGroupRequestMember()
	lm.InstanceID = sp("i1") // leave by instance id, member id unknown (KIP-345 batch leave)
	lr.Members = append(lr.Members, lm)
	lrr = send[*kmsg.LeaveGroupResponse](coord, lr)
	lms = nil
	for _, m := range lrr.Members {
		lms = append(lms, fmt.Sprintf("%s=%s", str(m.InstanceID), ec(m.ErrorCode)))
	}
	expect("LeaveGroup GS [instance i1, no member id]", fmt.Sprintf("%s %v", ec(lrr.ErrorCode), lms), "NONE [i1=NONE]")
	expect("DescribeGroups GS after the leave", describe(coord, gs)[gs].State, "Empty")

	dr = kmsg.NewPtrDeleteGroupsRequest()
	dr.Groups = []string{g, g2, gs}
	drr = send[*kmsg.DeleteGroupsResponse](coord, dr)
	dres = map[string]string{}
	for _, x := range drr.Groups {
		dres[short(x.Group)] = ec(x.ErrorCode)
	}
	expect("DeleteGroups [G, G2, GS] (all Empty)", dres, map[string]string{"G": "NONE", "G2": "NONE", "GS": "NONE"})
	expect("ListGroups after DeleteGroups", listGroups(coord, nil, nil), map[string]string{})
	d = describe(coord, g)
	expect("DescribeGroups G after DeleteGroups", fmt.Sprintf("%s/%s", ec(d[g].ErrorCode), d[g].State), ec(kerr.GroupIDNotFound.Code)+"/Dead")
	of = kmsg.NewPtrOffsetFetchRequest()
	rg = kmsg.NewOffsetFetchRequestGroup()
	rg.Group = g
	of.Groups = append(of.Groups, rg)
	ofr = send[*kmsg.OffsetFetchResponse](coord, of)
	n := 0
	for _, x := range ofr.Groups {
		for _, t := range x.Topics {
			n += len(t.Partitions)
		}
	}
	expect("OffsetFetch G after DeleteGroups: committed partitions", n, 0)
}
