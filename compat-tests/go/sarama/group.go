// The group scenario of the sarama check: ConsumerGroup members, rebalances,
// committed offsets and the group admin calls.

package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

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
	waitConsumed("A to consume the 400 records", a)
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
	waitConsumed("A and B to consume phase b", a, b)
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
	waitConsumed("A to consume phase c", a, b)
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

// waitConsumed waits until members ms together consumed exactly the acked offsets; on timeout
// it says which partitions differ (acked offsets not consumed, consumed offsets never acked:
// a record in the log twice, say) before failing.
func waitConsumed(what string, ms ...*member) {
	deadline := time.Now().Add(*flagStep)
	for groupAcks.total() != countConsumed(ms...) {
		if time.Now().After(deadline) {
			all := allConsumed(ms)
			groupAcks.mu.Lock()
			for p := int32(0); p < int32(len(groupAcks.recs)) || p < int32(len(all)); p++ {
				var missing, unacked []int64
				for o := range groupAcks.recs[p] {
					if all[p][o] == 0 {
						missing = append(missing, o)
					}
				}
				for o := range all[p] {
					if groupAcks.recs[p][o] == nil {
						unacked = append(unacked, o)
					}
				}
				sort.Slice(missing, func(i, j int) bool { return missing[i] < missing[j] })
				sort.Slice(unacked, func(i, j int) bool { return unacked[i] < unacked[j] })
				event("partition %d: %d acked, %d consumed; acked not consumed %v; consumed never acked %v",
					p, len(groupAcks.recs[p]), len(all[p]), head(missing), head(unacked))
			}
			groupAcks.mu.Unlock()
			failf("timed out after %v waiting for %s (%d acked, %d consumed)", *flagStep, what, groupAcks.total(), countConsumed(ms...))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// head: at most the first 20 offsets of a list (for a message).
func head(offsets []int64) []int64 {
	if len(offsets) > 20 {
		return offsets[:20]
	}
	return offsets
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
