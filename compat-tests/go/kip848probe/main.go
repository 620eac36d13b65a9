// Command kip848probe checks the KIP-848 consumer group protocol request by
// request (raw kmsg ConsumerGroupHeartbeat / ConsumerGroupDescribe and the
// group APIs around them, sent to the coordinator with franz-go), with the
// error codes, messages and fields Apache Kafka 4.1 answers: invalid first
// heartbeats, unknown groups, epochs (join, fencing, revocation before
// hand-over), ConsumerGroupDescribe, DescribeGroups and ListGroups on a
// consumer group, OffsetCommit / OffsetFetch v9 member epochs, a classic group
// id refused to consumer members, the group size limit, leave, static members,
// an offsets-only group taken over, DeleteGroups.
//
// Expects a broker with group.consumer.max.size=3 and
// group.consumer.heartbeat.interval.ms=500. Every check prints "ok ..." or
// "MISMATCH <what>: got .., want .."; the run ends with "PASS", or
// "FAIL: n mismatches" and exit 1.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	flagBrokers = flag.String("brokers", "127.0.0.1:9092", "comma-separated seed brokers")
	flagTimeout = flag.Duration("timeout", 90*time.Second, "overall deadline")
)

type fatal struct{ msg string }

func fatalf(format string, args ...any) { panic(fatal{fmt.Sprintf(format, args...)}) }

var (
	start      = time.Now()
	mismatches []string
	ctx        context.Context
	names      = map[string]string{}
)

func expect(what string, got, want any) {
	g, w := fmt.Sprint(got), fmt.Sprint(want)
	if g == w {
		fmt.Printf("ok   %6.2fs  %s = %s\n", time.Since(start).Seconds(), what, g)
		return
	}
	m := fmt.Sprintf("%s: got %s, want %s", what, g, w)
	mismatches = append(mismatches, m)
	fmt.Printf("MISMATCH %6.2fs  %s\n", time.Since(start).Seconds(), m)
}

func ec(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		if ke, ok := err.(*kerr.Error); ok {
			return ke.Message
		}
	}
	return fmt.Sprintf("UNKNOWN(%d)", code)
}

// short replaces the run's unique names by their placeholders in messages.
func short(s string) string {
	for long, n := range names {
		s = strings.ReplaceAll(s, long, n)
	}
	return s
}

func str(s *string) string {
	if s == nil {
		return "<null>"
	}
	return short(*s)
}

func sp(s string) *string { return &s }

func send[R kmsg.Response](b *kgo.Broker, req kmsg.Request) R {
	resp, err := b.Request(ctx, req)
	if err != nil {
		fatalf("%T: %v", req, err)
	}
	return resp.(R)
}

var coord *kgo.Broker

type hb struct {
	group, member string
	epoch         int32
	instance      *string
	rebalance     int32
	topics        []string
	regex         *string
	assignor      *string
	owned         map[[16]byte][]int32 // nil: not sent
}

type answer struct {
	err     string
	msg     string
	member  string
	epoch   int32
	iv      int32
	assign  map[[16]byte][]int32 // nil: no assignment in the response
	nParts  int
	hasAsgn bool
}

func heartbeat(h hb) answer {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Group = h.group
	r.MemberID = h.member
	r.MemberEpoch = h.epoch
	r.InstanceID = h.instance
	r.RebalanceTimeoutMillis = h.rebalance
	r.SubscribedTopicNames = h.topics
	r.SubscribedTopicRegex = h.regex
	r.ServerAssignor = h.assignor
	if h.owned != nil {
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for id, ps := range h.owned {
			t := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			t.TopicID = id
			t.Partitions = ps
			r.Topics = append(r.Topics, t)
		}
	}
	resp := send[*kmsg.ConsumerGroupHeartbeatResponse](coord, r)
	a := answer{err: ec(resp.ErrorCode), msg: str(resp.ErrorMessage), member: str(resp.MemberID), epoch: resp.MemberEpoch,
		iv: resp.HeartbeatIntervalMillis}
	if resp.Assignment != nil {
		a.hasAsgn = true
		a.assign = map[[16]byte][]int32{}
		for _, t := range resp.Assignment.Topics {
			a.assign[t.TopicID] = append(a.assign[t.TopicID], t.Partitions...)
			a.nParts += len(t.Partitions)
		}
	}
	return a
}

func join(group, member string, topics ...string) hb {
	return hb{group: group, member: member, rebalance: 30000, topics: topics, owned: map[[16]byte][]int32{}}
}

func describe(groups ...string) map[string]kmsg.ConsumerGroupDescribeResponseGroup {
	r := kmsg.NewPtrConsumerGroupDescribeRequest()
	r.Groups = groups
	resp := send[*kmsg.ConsumerGroupDescribeResponse](coord, r)
	out := map[string]kmsg.ConsumerGroupDescribeResponseGroup{}
	for _, g := range resp.Groups {
		out[g.Group] = g
	}
	return out
}

func commit(group, member string, epoch int32, topic string) string {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Group = group
	r.Generation = epoch
	r.MemberID = member
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition = 0
	p.Offset = 3
	p.LeaderEpoch = -1
	t.Partitions = append(t.Partitions, p)
	r.Topics = append(r.Topics, t)
	resp := send[*kmsg.OffsetCommitResponse](coord, r)
	return ec(resp.Topics[0].Partitions[0].ErrorCode)
}

// fetch: the group's error, and partition 0's committed offset.
func fetch(group string, member *string, epoch int32, topic string) string {
	r := kmsg.NewPtrOffsetFetchRequest()
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	g.MemberID = member
	g.MemberEpoch = epoch
	t := kmsg.NewOffsetFetchRequestGroupTopic()
	t.Topic = topic
	t.Partitions = []int32{0}
	g.Topics = append(g.Topics, t)
	r.Groups = append(r.Groups, g)
	resp := send[*kmsg.OffsetFetchResponse](coord, r)
	if len(resp.Groups) != 1 {
		return fmt.Sprintf("%d groups", len(resp.Groups))
	}
	rg := resp.Groups[0]
	off := int64(-2)
	if len(rg.Topics) == 1 && len(rg.Topics[0].Partitions) == 1 {
		off = rg.Topics[0].Partitions[0].Offset
	}
	return fmt.Sprintf("%s offset=%d", ec(rg.ErrorCode), off)
}

func listGroups(types ...string) map[string]string {
	r := kmsg.NewPtrListGroupsRequest()
	r.TypesFilter = types
	resp := send[*kmsg.ListGroupsResponse](coord, r)
	out := map[string]string{}
	for _, g := range resp.Groups {
		if n, mine := names[g.Group]; mine {
			out[n] = fmt.Sprintf("%s/%s/%q", g.GroupState, g.GroupType, g.ProtocolType)
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
	topic, g, classic, offsetsOnly, never := "kip848-"+suffix, "cg-"+suffix, "classic-"+suffix, "offsets-"+suffix, "never-"+suffix
	names[topic], names[g], names[classic], names[offsetsOnly], names[never] = "T", "G", "CLASSIC", "OFFSETS", "NEVER"
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*flagBrokers, ",")...), kgo.ClientID("kip848probe"))
	if err != nil {
		fatalf("client: %v", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if ct, err := adm.CreateTopic(ctx, 4, 1, nil, topic); err != nil || ct.Err != nil {
		fatalf("CreateTopic: %v %v", err, ct.Err)
	}
	var topicID [16]byte
	for deadline := time.Now().Add(20 * time.Second); ; {
		md, err := adm.Metadata(ctx, topic)
		if err == nil && md.Topics[topic].Err == nil && len(md.Topics[topic].Partitions) == 4 {
			topicID = md.Topics[topic].ID
			break
		}
		if time.Now().After(deadline) {
			fatalf("topic not in metadata")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.CoordinatorKeys = []string{g}
		resp, err := r.RequestWith(ctx, cl)
		if err != nil {
			fatalf("FindCoordinator: %v", err)
		}
		if len(resp.Coordinators) == 1 && resp.Coordinators[0].ErrorCode == 0 {
			coord = cl.Broker(int(resp.Coordinators[0].NodeID))
			break
		}
		if time.Now().After(deadline) {
			fatalf("no coordinator")
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The coordinator may still be loading its __consumer_offsets partition (Kafka answers
	// COORDINATOR_LOAD_IN_PROGRESS meanwhile): wait until a heartbeat to NEVER reaches it.
	for deadline := time.Now().Add(30 * time.Second); ; {
		a := heartbeat(hb{group: never, member: "x", epoch: 1, rebalance: -1})
		if a.err != "COORDINATOR_LOAD_IN_PROGRESS" && a.err != "NOT_COORDINATOR" && a.err != "COORDINATOR_NOT_AVAILABLE" {
			expect("heartbeat to NEVER", a.err+" / "+a.msg, "GROUP_ID_NOT_FOUND / Consumer group NEVER not found.")
			break
		}
		if time.Now().After(deadline) {
			fatalf("coordinator still loading after 30s: %s", a.err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// ---- invalid first heartbeats
	bad := func(what string, h hb, wantErr, wantMsg string) {
		a := heartbeat(h)
		expect("invalid: "+what, a.err+" / "+a.msg, wantErr+" / "+wantMsg)
	}
	bad("empty group id", join("", "m0", topic), "INVALID_REQUEST", "GroupId can't be empty.")
	h := join(g, "m0", topic)
	h.rebalance = -1
	bad("no rebalance timeout", h, "INVALID_REQUEST", "RebalanceTimeoutMs must be provided in first request.")
	h = join(g, "m0", topic)
	h.owned = nil
	bad("owned partitions not sent", h, "INVALID_REQUEST", "TopicPartitions must be empty when (re-)joining.")
	h = join(g, "m0")
	h.topics = nil
	bad("no subscription", h, "INVALID_REQUEST", "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
	h = join(g, "m0", topic)
	h.epoch = -3
	bad("epoch -3", h, "INVALID_REQUEST", "MemberEpoch is invalid.")
	bad("no member id", join(g, "", topic), "INVALID_REQUEST", "MemberId can't be empty.")
	h = join(g, "m0", topic)
	h.assignor = sp("sticky")
	bad("unknown assignor", h, "UNSUPPORTED_ASSIGNOR", "ServerAssignor sticky is not supported. Supported assignors: uniform, range.")
	var a answer
	h = join(g, "m0", topic)
	h.epoch = 1
	bad("heartbeat to an unknown group", h, "GROUP_ID_NOT_FOUND", "Consumer group G not found.")
	expect("ConsumerGroupDescribe NEVER", func() string {
		d := describe(never)[never]
		return ec(d.ErrorCode) + " / " + str(d.ErrorMessage)
	}(), "GROUP_ID_NOT_FOUND / Group NEVER not found.")

	// ---- two members: join, revocation before hand-over
	m1 := join(g, "m1", topic)
	a1 := heartbeat(m1)
	expect("m1 joins", fmt.Sprintf("%s epoch=%d interval=%d parts=%d", a1.err, a1.epoch, a1.iv, a1.nParts), "NONE epoch=1 interval=500 parts=4")
	expect("m1 member id", a1.member, "m1")
	h = join(g, "m0")
	h.topics = nil
	h.regex = sp("(")
	a = heartbeat(h)
	expect("invalid: bad regex", a.err, "INVALID_REGULAR_EXPRESSION")
	a2 := heartbeat(join(g, "m2", topic))
	expect("m2 joins: nothing until m1 revokes", fmt.Sprintf("%s epoch=%d parts=%d", a2.err, a2.epoch, a2.nParts), "NONE epoch=2 parts=0")
	fenced := hb{group: g, member: "m1", epoch: 5, rebalance: -1}
	a = heartbeat(fenced)
	expect("m1 with a future epoch", a.err+" / "+a.msg, "FENCED_MEMBER_EPOCH / The consumer group member has a greater member epoch (5) than the one known by the group coordinator (1). The member must abandon all its partitions and rejoin.")
	a = heartbeat(hb{group: g, member: "nobody", epoch: 1, rebalance: -1})
	expect("unknown member", a.err+" / "+a.msg, "UNKNOWN_MEMBER_ID / Member nobody is not a member of group G.")
	a = heartbeat(hb{group: g, member: "m1", epoch: 1, rebalance: -1, owned: a1.assign})
	expect("m1 told to revoke", fmt.Sprintf("%s epoch=%d parts=%d", a.err, a.epoch, a.nParts), "NONE epoch=1 parts=2")
	kept := a.assign
	expect("describe while reconciling", describe(g)[g].State, "Reconciling")
	a = heartbeat(hb{group: g, member: "m2", epoch: 2, rebalance: -1, owned: map[[16]byte][]int32{}})
	expect("m2 before the revocation", fmt.Sprintf("%s epoch=%d assignment=%v", a.err, a.epoch, a.hasAsgn), "NONE epoch=2 assignment=false")
	a = heartbeat(hb{group: g, member: "m1", epoch: 1, rebalance: -1, owned: kept})
	expect("m1 revoked", fmt.Sprintf("%s epoch=%d", a.err, a.epoch), "NONE epoch=2")
	a = heartbeat(hb{group: g, member: "m2", epoch: 2, rebalance: -1, owned: map[[16]byte][]int32{}})
	expect("m2 gets the released partitions", fmt.Sprintf("%s epoch=%d parts=%d", a.err, a.epoch, a.nParts), "NONE epoch=2 parts=2")
	m2owned := a.assign

	// ---- describe, list
	d := describe(g)[g]
	expect("ConsumerGroupDescribe G", fmt.Sprintf("%s state=%s epoch=%d assignment=%d assignor=%s members=%d",
		ec(d.ErrorCode), d.State, d.Epoch, d.AssignmentEpoch, d.AssignorName, len(d.Members)), "NONE state=Stable epoch=2 assignment=2 assignor=uniform members=2")
	for _, m := range d.Members {
		n := 0
		for _, t := range m.Assignment.TopicPartitions {
			n += len(t.Partitions)
			expect("described topic name", short(t.Topic), "T")
		}
		expect("member "+m.MemberID, fmt.Sprintf("epoch=%d parts=%d topics=%v type=%d client=%s", m.MemberEpoch, n, short(strings.Join(m.SubscribedTopics, ",")), m.MemberType, m.ClientID),
			"epoch=2 parts=2 topics=T type=1 client=kip848probe")
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{g}
	dgr := send[*kmsg.DescribeGroupsResponse](coord, dg)
	expect("DescribeGroups on a consumer group", fmt.Sprintf("%s / %s / %s", ec(dgr.Groups[0].ErrorCode), str(dgr.Groups[0].ErrorMessage), dgr.Groups[0].State),
		"GROUP_ID_NOT_FOUND / Group G is not a classic group. / Dead")
	expect("ListGroups types=consumer", listGroups("consumer")["G"], `Stable/consumer/"consumer"`)
	expect("ListGroups types=classic leaves it out", listGroups("classic")["G"], "")

	// ---- offsets with member epochs
	expect("OffsetCommit m1 at epoch 2", commit(g, "m1", 2, topic), "NONE")
	expect("OffsetCommit m1 at epoch 1", commit(g, "m1", 1, topic), "STALE_MEMBER_EPOCH")
	expect("OffsetCommit unknown member", commit(g, "nobody", 2, topic), "UNKNOWN_MEMBER_ID")
	expect("OffsetCommit without member", commit(g, "", -1, topic), "UNKNOWN_MEMBER_ID")
	expect("OffsetFetch m1 epoch 1", fetch(g, sp("m1"), 1, topic), "STALE_MEMBER_EPOCH offset=-2")
	expect("OffsetFetch m1 epoch 2", fetch(g, sp("m1"), 2, topic), "NONE offset=3")
	expect("OffsetFetch admin (no member)", fetch(g, nil, -1, topic), "NONE offset=3")
	expect("OffsetFetch unknown member", fetch(g, sp("nobody"), 2, topic), "UNKNOWN_MEMBER_ID offset=-2")

	// ---- classic group ids are not consumer groups
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group = classic
	jg.SessionTimeoutMillis = 30000
	jg.RebalanceTimeoutMillis = 30000
	// Not "consumer": Kafka 4.1 would upgrade a classic consumer group online (Ketch does not).
	jg.ProtocolType = "connect"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = "range"
	p.Metadata = []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	jg.Protocols = append(jg.Protocols, p)
	jr := send[*kmsg.JoinGroupResponse](coord, jg)
	jg.MemberID = jr.MemberID
	jr = send[*kmsg.JoinGroupResponse](coord, jg)
	expect("classic member joined", ec(jr.ErrorCode), "NONE")
	a = heartbeat(join(classic, "m9", topic))
	expect("consumer member into a classic group", a.err+" / "+a.msg, "GROUP_ID_NOT_FOUND / Cannot upgrade classic group CLASSIC to consumer group because the group does not use the consumer embedded protocol.")
	dc := describe(classic)[classic]
	expect("ConsumerGroupDescribe of a classic group", ec(dc.ErrorCode)+" / "+str(dc.ErrorMessage), "GROUP_ID_NOT_FOUND / Group CLASSIC is not a consumer group.")
	// An offsets-only group (an empty classic group) is taken over; its offsets stay.
	expect("standalone commit", commit(offsetsOnly, "", -1, topic), "NONE")
	a = heartbeat(join(offsetsOnly, "o1", topic))
	expect("consumer member takes an offsets-only group", fmt.Sprintf("%s epoch=%d", a.err, a.epoch), "NONE epoch=1")
	expect("its offsets stay", fetch(offsetsOnly, nil, -1, topic), "NONE offset=3")
	heartbeat(hb{group: offsetsOnly, member: "o1", epoch: -1})

	// ---- group size (group.consumer.max.size=3)
	a3 := heartbeat(join(g, "m3", topic))
	expect("third member", a3.err, "NONE")
	a = heartbeat(join(g, "m4", topic))
	expect("fourth member", a.err+" / "+a.msg, "GROUP_MAX_SIZE_REACHED / The consumer group has reached its maximum capacity of 3 members.")
	a = heartbeat(hb{group: g, member: "m3", epoch: -1})
	expect("m3 leaves", fmt.Sprintf("%s epoch=%d", a.err, a.epoch), "NONE epoch=-1")

	// ---- static members
	s1 := join(g, "s1", topic)
	s1.instance = sp("inst")
	a = heartbeat(s1)
	expect("static s1 joins", a.err, "NONE")
	s2 := join(g, "s2", topic)
	s2.instance = sp("inst")
	a = heartbeat(s2)
	expect("s2 in a full group", a.err, "GROUP_MAX_SIZE_REACHED")
	a = heartbeat(hb{group: g, member: "m2", epoch: -1})
	expect("m2 leaves", a.err, "NONE")
	a = heartbeat(s2)
	expect("s2 with s1's instance id", a.err+" / "+a.msg, "UNRELEASED_INSTANCE_ID / Static member s2 with instance id inst cannot join the group because the instance id is owned by s1 member.")
	a = heartbeat(hb{group: g, member: "s1", epoch: -2, instance: sp("inst")})
	expect("s1 leaves for now", fmt.Sprintf("%s epoch=%d", a.err, a.epoch), "NONE epoch=-2")
	before := describe(g)[g].Epoch
	a = heartbeat(s2)
	expect("s2 replaces s1", a.err, "NONE")
	expect("no epoch bump for a static replacement", describe(g)[g].Epoch, before)
	a = heartbeat(hb{group: g, member: "s1", epoch: 1, instance: sp("inst"), rebalance: -1})
	expect("the replaced s1", a.err+" / "+a.msg, "FENCED_INSTANCE_ID / Static member s1 with instance id inst was fenced by member s2.")

	// ---- everyone leaves; DeleteGroups
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{g}
	expect("DeleteGroups with members", ec(send[*kmsg.DeleteGroupsResponse](coord, del).Groups[0].ErrorCode), "NON_EMPTY_GROUP")
	for _, m := range []string{"m1", "s2"} {
		h := hb{group: g, member: m, epoch: -1}
		if m == "s2" {
			h.instance = sp("inst")
		}
		a = heartbeat(h)
		expect(m+" leaves", a.err, "NONE")
	}
	_ = m2owned
	expect("ConsumerGroupDescribe after all left", describe(g)[g].State, "Empty")
	expect("ListGroups types=consumer (empty)", listGroups("consumer")["G"], `Empty/consumer/"consumer"`)
	expect("DeleteGroups empty", ec(send[*kmsg.DeleteGroupsResponse](coord, del).Groups[0].ErrorCode), "NONE")
	expect("ConsumerGroupDescribe after delete", ec(describe(g)[g].ErrorCode), "GROUP_ID_NOT_FOUND")
	_ = topicID

	// ---- regex subscription (Kafka resolves it asynchronously: poll until it converges)
	rg := "regex-" + suffix
	names[rg] = "RG"
	r1 := join(rg, "r1")
	r1.topics = nil
	r1.regex = sp("kip848-" + suffix + ".*")
	a = heartbeat(r1)
	expect("regex member joins", a.err, "NONE")
	poll := func(what string, want int) {
		owned := a.assign
		for deadline := time.Now().Add(40 * time.Second); ; {
			n := 0
			for _, ps := range owned {
				n += len(ps)
			}
			if n == want || time.Now().After(deadline) {
				expect(what, n, want)
				return
			}
			time.Sleep(250 * time.Millisecond)
			b := heartbeat(hb{group: rg, member: "r1", epoch: a.epoch, rebalance: -1, owned: owned})
			if b.err != "NONE" {
				expect(what+": heartbeat", b.err, "NONE")
				return
			}
			a.epoch = b.epoch
			if b.hasAsgn {
				owned = b.assign
			}
		}
	}
	poll("regex matches T", 4)
	epochBefore := describe(rg)[rg].Epoch
	newTopic := "kip848-" + suffix + "-more"
	names[newTopic] = "T2"
	if ct, err := adm.CreateTopic(ctx, 2, 1, nil, newTopic); err != nil || ct.Err != nil {
		fatalf("CreateTopic: %v %v", err, ct.Err)
	}
	poll("a new topic matching the regex is assigned", 6)
	expect("the new topic bumped the group epoch", describe(rg)[rg].Epoch > epochBefore, true)
	d = describe(rg)[rg]
	expect("described regex", str(d.Members[0].SubscribedTopicRegex), "T.*")
}
