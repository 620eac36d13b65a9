// Command groups is a franz-go consumer group (kgo.ConsumerGroup, classic
// protocol) compatibility check for a Kafka-compatible broker.
//
// Two group members (two kgo clients in one process, one goroutine each) on a
// 4-partition topic, with the balancer given by -balancer:
//
//  1. they split the partitions (disjoint, 2 each, same generation) and each
//     consumes its own partitions, committing synchronously after every poll
//     (BlockRebalanceOnPoll + CommitUncommittedOffsets + AllowRebalance);
//  2. the second member leaves (Close: LeaveGroup); the first gets all four
//     partitions (cooperative-sticky: without any revocation) and consumes the
//     records produced meanwhile from the departed member's commits: no record
//     lost, none consumed twice;
//  3. the committed offsets (kadm FetchOffsets: OffsetFetch) equal the end
//     offsets, DescribeGroups agrees with the members (protocol, assignments),
//     ListGroups lists the group;
//  4. after everybody closed (group Empty), a new member starts exactly at the
//     committed offsets.
//
// Every step prints one "ok ..." line; on the first mismatch the program prints
// "FAIL: ..." (with the members' recent events) to stderr and exits 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const partitions = 4

var (
	flagBrokers  = flag.String("brokers", "127.0.0.1:9092", "comma-separated seed brokers")
	flagBalancer = flag.String("balancer", "cooperative-sticky", "cooperative-sticky, range, roundrobin or sticky")
	flagTimeout  = flag.Duration("timeout", 120*time.Second, "overall deadline")
	flagStep     = flag.Duration("step-timeout", 45*time.Second, "deadline of each waiting step")
	flagDebug    = flag.Bool("debug", false, "franz-go debug logging to stderr")
)

type fail struct{ msg string }

func failf(format string, args ...any) { panic(fail{fmt.Sprintf(format, args...)}) }

func check(err error, what string) {
	if err != nil {
		failf("%s: %v", what, err)
	}
}

var start = time.Now()

func okf(format string, args ...any) {
	fmt.Printf("ok   %6.2fs  "+format+"\n", append([]any{time.Since(start).Seconds()}, args...)...)
}

func balancer(name string) kgo.GroupBalancer {
	switch name {
	case "cooperative-sticky":
		return kgo.CooperativeStickyBalancer()
	case "range":
		return kgo.RangeBalancer()
	case "roundrobin":
		return kgo.RoundRobinBalancer()
	case "sticky":
		return kgo.StickyBalancer()
	}
	failf("unknown balancer %q", name)
	return nil
}

type consumed struct {
	member    string
	partition int32
	offset    int64
	index     int
}

type member struct {
	name   string
	cl     *kgo.Client
	topic  string
	mu     sync.Mutex
	owned  map[int32]bool
	events []string
	recs   []consumed
	// phase -> revoked partitions (non-empty revocations only)
	revoked map[string][][]int32
	lost    [][]int32
	phase   string
	err     error
	stop    chan struct{}
	done    chan struct{}
}

func (m *member) event(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, fmt.Sprintf("%7.2fs [%s] %s", time.Since(start).Seconds(), m.phase, fmt.Sprintf(format, args...)))
}

func (m *member) setPhase(p string) {
	m.mu.Lock()
	m.phase = p
	m.mu.Unlock()
}

func sortedParts(ps []int32) []int32 {
	out := append([]int32(nil), ps...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (m *member) assignment() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int32
	for p, ok := range m.owned {
		if ok {
			out = append(out, p)
		}
	}
	return sortedParts(out)
}

func (m *member) state() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var owned []int32
	for p, ok := range m.owned {
		if ok {
			owned = append(owned, p)
		}
	}
	memberID, gen := m.cl.GroupMetadata()
	ev := m.events
	if len(ev) > 15 {
		ev = ev[len(ev)-15:]
	}
	return fmt.Sprintf("  %s: owned=%v generation=%d member=%s consumed=%d err=%v\n      %s", m.name,
		sortedParts(owned), gen, memberID, len(m.recs), m.err, strings.Join(ev, "\n      "))
}

func states(ms ...*member) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.state())
	}
	return strings.Join(s, "\n")
}

func newMember(name, group, topic, bal string) *member {
	m := &member{name: name, topic: topic, owned: map[int32]bool{}, revoked: map[string][][]int32{}, phase: "start",
		stop: make(chan struct{}), done: make(chan struct{})}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*flagBrokers, ",")...),
		kgo.ClientID("ketch-compat-franz-" + name),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.Balancers(balancer(bal)),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(10 * time.Second),
		kgo.HeartbeatInterval(500 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			for _, p := range a[topic] {
				m.owned[p] = true
			}
			m.mu.Unlock()
			m.event("OnPartitionsAssigned %v", sortedParts(a[topic]))
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
			m.mu.Lock()
			for _, p := range r[topic] {
				delete(m.owned, p)
			}
			if len(r[topic]) > 0 {
				m.revoked[m.phase] = append(m.revoked[m.phase], sortedParts(r[topic]))
			}
			m.mu.Unlock()
			m.event("OnPartitionsRevoked %v", sortedParts(r[topic]))
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				m.event("commit in OnPartitionsRevoked: %v", err)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
			m.mu.Lock()
			for _, p := range l[topic] {
				delete(m.owned, p)
			}
			m.lost = append(m.lost, sortedParts(l[topic]))
			m.mu.Unlock()
			m.event("OnPartitionsLost %v", sortedParts(l[topic]))
		}),
	}
	if *flagDebug {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, func() string {
			return "[" + name + "] "
		})))
	}
	cl, err := kgo.NewClient(opts...)
	check(err, "new group client "+name)
	m.cl = cl
	go m.run()
	return m
}

func (m *member) run() {
	defer close(m.done)
	for {
		select {
		case <-m.stop:
			m.cl.AllowRebalance()
			m.event("Close (LeaveGroup)")
			m.cl.Close()
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		fs := m.cl.PollRecords(ctx, 1000)
		cancel()
		for _, fe := range fs.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
				continue
			}
			m.event("fetch error %s/%d: %v", fe.Topic, fe.Partition, fe.Err)
			if errors.Is(fe.Err, kgo.ErrClientClosed) {
				m.mu.Lock()
				m.err = fe.Err
				m.mu.Unlock()
			}
		}
		var batch []consumed
		fs.EachRecord(func(r *kgo.Record) {
			s := string(r.Value)
			if i := strings.IndexByte(s, '|'); i >= 0 {
				s = s[:i]
			}
			idx, err := strconv.Atoi(s)
			if err != nil {
				m.event("unexpected value %q", r.Value)
				idx = -1
			}
			batch = append(batch, consumed{m.name, r.Partition, r.Offset, idx})
		})
		m.mu.Lock()
		m.recs = append(m.recs, batch...)
		m.mu.Unlock()
		if len(batch) > 0 {
			cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := m.cl.CommitUncommittedOffsets(cctx); err != nil {
				m.event("commit after poll: %v", err)
			}
			ccancel()
		}
		m.cl.AllowRebalance()
	}
}

func (m *member) close() {
	close(m.stop)
	select {
	case <-m.done:
	case <-time.After(40 * time.Second):
		failf("member %s did not close within 40s\n%s", m.name, m.state())
	}
}

func waitFor(what string, cond func() bool, ms ...*member) {
	deadline := time.Now().Add(*flagStep)
	for !cond() {
		if time.Now().After(deadline) {
			failf("timed out after %v waiting for: %s\n%s", *flagStep, what, states(ms...))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// balanced: disjoint, covering, sizes within one, everyone at the same generation.
func balanced(ms ...*member) bool {
	seen := map[int32]bool{}
	total, minN, maxN := 0, 1<<30, 0
	gens := map[int32]bool{}
	for _, m := range ms {
		a := m.assignment()
		for _, p := range a {
			seen[p] = true
		}
		total += len(a)
		minN = min(minN, len(a))
		maxN = max(maxN, len(a))
		_, g := m.cl.GroupMetadata()
		gens[g] = true
	}
	return total == partitions && len(seen) == partitions && maxN-minN <= 1 && minN > 0 && len(gens) == 1 && !gens[-1]
}

func consumedSet(ms ...*member) map[int]bool {
	s := map[int]bool{}
	for _, m := range ms {
		m.mu.Lock()
		for _, c := range m.recs {
			s[c.index] = true
		}
		m.mu.Unlock()
	}
	return s
}

type producer struct {
	cl    *kgo.Client
	topic string
	next  int
	acked map[int][2]int64 // index -> partition, offset
}

func (p *producer) produce(ctx context.Context, n int) []int {
	var idx []int
	var rs []*kgo.Record
	for k := 0; k < n; k++ {
		i := p.next
		p.next++
		idx = append(idx, i)
		rs = append(rs, &kgo.Record{Topic: p.topic, Partition: int32(i % partitions), Key: []byte("k" + strconv.Itoa(i)),
			Value: []byte(fmt.Sprintf("%d|value-%d", i, i))})
	}
	res := p.cl.ProduceSync(ctx, rs...)
	for _, r := range res { // results come in completion order, not in input order
		check(r.Err, "produce")
		v := string(r.Record.Value)
		i, err := strconv.Atoi(v[:strings.IndexByte(v, '|')])
		check(err, "produced value")
		p.acked[i] = [2]int64{int64(r.Record.Partition), r.Record.Offset}
	}
	if len(p.acked) != p.next {
		failf("produce: %d of %d records acked", len(p.acked), p.next)
	}
	return idx
}

func main() {
	flag.Parse()
	code := 0
	func() {
		defer func() {
			if r := recover(); r != nil {
				if f, ok := r.(fail); ok {
					fmt.Fprintln(os.Stderr, "FAIL: "+f.msg)
					code = 1
					return
				}
				panic(r)
			}
		}()
		run()
	}()
	os.Exit(code)
}

func run() {
	ctx, cancel := context.WithTimeout(context.Background(), *flagTimeout)
	defer cancel()
	go func() {
		<-ctx.Done()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			fmt.Fprintf(os.Stderr, "FAIL: overall deadline %v exceeded\n", *flagTimeout)
			os.Exit(3)
		}
	}()
	bal := *flagBalancer
	suffix := strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36)
	topic := "grp-franz-" + bal + "-" + suffix
	group := "group-franz-" + bal + "-" + suffix

	admCl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*flagBrokers, ",")...),
		kgo.ClientID("ketch-compat-franz-admin"), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	check(err, "new admin client")
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	check(err, "CreateTopic")
	check(resp.Err, "CreateTopic "+topic)
	waitFor("topic "+topic+" in metadata with leaders", func() bool {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false
		}
		t, ok := md.Topics[topic]
		if !ok || t.Err != nil || len(t.Partitions) != partitions {
			return false
		}
		for _, p := range t.Partitions {
			if p.Leader < 0 || p.Err != nil {
				return false
			}
		}
		return true
	})
	okf("topic %s (%d partitions), group %s, balancer %s", topic, partitions, group, bal)
	prod := &producer{cl: admCl, topic: topic, acked: map[int][2]int64{}}

	m1 := newMember("m1", group, topic, bal)
	m2 := newMember("m2", group, topic, bal)
	everyone := []*member{m1, m2}
	defer func() {
		for _, m := range everyone {
			select {
			case <-m.stop:
			default:
				close(m.stop)
			}
		}
	}()
	waitFor("two members share 4 partitions (disjoint, 2 each, same generation)", func() bool { return balanced(m1, m2) }, m1, m2)
	first := prod.produce(ctx, 400)
	okf("both members in; produced %d records", len(first))
	waitFor("the first 400 records consumed", func() bool {
		got := consumedSet(everyone...)
		for _, i := range first {
			if !got[i] {
				return false
			}
		}
		return true
	}, m1, m2)
	time.Sleep(300 * time.Millisecond)
	if !balanced(m1, m2) {
		failf("assignment changed after it looked stable\n%s", states(m1, m2))
	}
	_, gen := m1.cl.GroupMetadata()
	okf("two members at generation %d: m1=%v m2=%v", gen, m1.assignment(), m2.assignment())
	for _, m := range everyone {
		owned := map[int32]bool{}
		for _, p := range m.assignment() {
			owned[p] = true
		}
		m.mu.Lock()
		n := len(m.recs)
		for _, c := range m.recs {
			if !owned[c.partition] {
				m.mu.Unlock()
				failf("%s owns %v but consumed p%d/%d", m.name, m.assignment(), c.partition, c.offset)
			}
		}
		m.mu.Unlock()
		if n == 0 {
			failf("%s consumed nothing from its partitions %v\n%s", m.name, m.assignment(), m.state())
		}
	}

	// DescribeGroups agrees with the members
	dg, err := adm.DescribeGroups(ctx, group)
	check(err, "DescribeGroups")
	d := dg[group]
	check(d.Err, "DescribeGroups "+group)
	byID := map[string][]int32{}
	for _, dm := range d.Members {
		var ps []int32
		if c, ok := dm.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				if t.Topic == topic {
					ps = append(ps, t.Partitions...)
				}
			}
		}
		byID[dm.MemberID] = sortedParts(ps)
	}
	okf("DescribeGroups: state %s protocol type %q protocol %q members %v", d.State, d.ProtocolType, d.Protocol, byID)
	if d.State != "Stable" || d.ProtocolType != "consumer" || d.Protocol != bal || len(d.Members) != 2 {
		failf("DescribeGroups: state %q protocolType %q protocol %q with %d members; expected Stable, consumer, %q, 2",
			d.State, d.ProtocolType, d.Protocol, len(d.Members), bal)
	}
	for _, m := range everyone {
		id, _ := m.cl.GroupMetadata()
		if fmt.Sprint(byID[id]) != fmt.Sprint(m.assignment()) {
			failf("DescribeGroups: member %s (%s) assigned %v, but it owns %v", m.name, id, byID[id], m.assignment())
		}
	}

	// m2 leaves
	before := m1.assignment()
	m1.setPhase("leave")
	m2.setPhase("leave")
	prod.produce(ctx, 80)
	m2.close()
	okf("m2 closed (LeaveGroup); m1 had %v", before)
	waitFor("m1 owns all 4 partitions", func() bool {
		return fmt.Sprint(m1.assignment()) == "[0 1 2 3]" && balanced(m1)
	}, m1)
	m1.mu.Lock()
	rev := m1.revoked["leave"]
	lost := m1.lost
	m1.mu.Unlock()
	_, gen2 := m1.cl.GroupMetadata()
	okf("m1 owns %v at generation %d; its revocations during the leave: %v", m1.assignment(), gen2, rev)
	if gen2 <= gen {
		failf("generation %d after the leave, was %d", gen2, gen)
	}
	if bal == "cooperative-sticky" && len(rev) > 0 {
		failf("cooperative-sticky: m1 had partitions revoked when m2 left: %v\n%s", rev, m1.state())
	}
	if len(lost) > 0 {
		failf("m1 lost partitions: %v\n%s", lost, m1.state())
	}

	prod.produce(ctx, 200)
	m1.setPhase("after")
	waitFor("every acked record consumed", func() bool {
		got := consumedSet(everyone...)
		for i := range prod.acked {
			if !got[i] {
				return false
			}
		}
		return true
	}, m1)
	seen := map[int]consumed{}
	var dups []string
	for _, m := range everyone {
		m.mu.Lock()
		for _, c := range m.recs {
			if prev, ok := seen[c.index]; ok {
				dups = append(dups, fmt.Sprintf("%d (p%d/%d by %s and %s)", c.index, c.partition, c.offset, prev.member, c.member))
			}
			seen[c.index] = c
			if a := prod.acked[c.index]; a != [2]int64{int64(c.partition), c.offset} {
				m.mu.Unlock()
				failf("record %d consumed at p%d/%d but acked at p%d/%d", c.index, c.partition, c.offset, a[0], a[1])
			}
		}
		m.mu.Unlock()
	}
	okf("no record lost: %d acked, %d distinct consumed, %d duplicates", len(prod.acked), len(seen), len(dups))
	if len(dups) > 0 {
		if len(dups) > 10 {
			dups = dups[:10]
		}
		failf("records consumed twice (commits not honoured across the rebalance?): %v\n%s", dups, states(everyone...))
	}

	// committed == end offsets
	ends, err := adm.ListEndOffsets(ctx, topic)
	check(err, "ListEndOffsets")
	want := map[int32]int64{}
	var sum int64
	ends.Each(func(o kadm.ListedOffset) {
		check(o.Err, "ListEndOffsets partition")
		want[o.Partition] = o.Offset
		sum += o.Offset
	})
	if sum != int64(len(prod.acked)) {
		failf("end offsets %v add up to %d, expected %d", want, sum, len(prod.acked))
	}
	var last map[int32]int64
	waitFor("committed offsets == end offsets", func() bool {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		last = map[int32]int64{}
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Topic == topic && o.Err == nil {
				last[o.Partition] = o.At
			}
		})
		return fmt.Sprint(last) == fmt.Sprint(want)
	}, m1)
	okf("committed offsets = end offsets %v", want)

	m1.close()
	waitFor("group Empty after every member closed", func() bool {
		dg, err := adm.DescribeGroups(ctx, group)
		return err == nil && dg[group].Err == nil && dg[group].State == "Empty" && len(dg[group].Members) == 0
	})
	lg, err := adm.ListGroups(ctx)
	check(err, "ListGroups")
	if g, ok := lg[group]; !ok || g.State != "Empty" || g.ProtocolType != "consumer" {
		failf("ListGroups: %+v, expected %s Empty consumer", lg, group)
	}
	okf("all closed: group Empty (DescribeGroups, ListGroups)")

	// a new member resumes after the commits
	newFirst := prod.next
	fresh := prod.produce(ctx, 40)
	m3 := newMember("m3", group, topic, bal)
	everyone = append(everyone, m3)
	m3.setPhase("resume")
	waitFor("the resumed member consumes the 40 new records", func() bool {
		got := consumedSet(m3)
		for _, i := range fresh {
			if !got[i] {
				return false
			}
		}
		return true
	}, m3)
	time.Sleep(500 * time.Millisecond)
	firsts := map[int32]int64{}
	m3.mu.Lock()
	n := len(m3.recs)
	for _, c := range m3.recs {
		if c.index < newFirst {
			m3.mu.Unlock()
			failf("resumed member re-read record %d at p%d/%d; committed offset was %d", c.index, c.partition, c.offset, want[c.partition])
		}
		if _, ok := firsts[c.partition]; !ok {
			firsts[c.partition] = c.offset
		}
	}
	m3.mu.Unlock()
	if n != len(fresh) {
		failf("resumed member consumed %d records, expected %d", n, len(fresh))
	}
	if fmt.Sprint(firsts) != fmt.Sprint(want) {
		failf("resumed member started at %v, expected the committed offsets %v", firsts, want)
	}
	m3.close()
	okf("a new member resumed exactly at the committed offsets %v", firsts)
	fmt.Println("PASS")
}
