// Command txn checks franz-go's transactions against a Kafka-compatible broker.
//
// Modes (-mode):
//
//	commit-abort  transactions committed and aborted across 3 partitions (TransactionalID,
//	              BeginTransaction, ProduceSync, EndTransaction TryCommit/TryAbort); a read_committed
//	              consumer sees exactly the committed records in order, a read_uncommitted one every
//	              data record; ListEndOffsets / ListCommittedOffsets (the LSO) with a transaction open.
//	fence         a second client with the same transactional id fences the first, with a transaction
//	              open and between transactions; the zombie's records never become visible.
//	etl           GroupTransactSession: group consumer (read_committed, require stable offsets) copies an
//	              input topic to an output topic, every third transaction ended with TryAbort (the session
//	              rewinds to the committed offsets); the output holds each input record exactly once.
//
// Every step prints one "ok ..." line; on the first mismatch it prints "FAIL: ..." to stderr and
// exits 1. The last line is "PASS".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	flagBrokers = flag.String("brokers", "127.0.0.1:9092", "comma-separated seed brokers")
	flagMode    = flag.String("mode", "commit-abort", "commit-abort | fence | etl")
	flagTopic   = flag.String("topic", "", "topic name (default: a fresh random name)")
	flagTimeout = flag.Duration("timeout", 120*time.Second, "overall deadline")
	flagDebug   = flag.Bool("debug", false, "franz-go debug logging to stderr")
)

const partitions = 3

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

func suffix() string { return fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffff) }

func baseOpts() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*flagBrokers, ",")...),
		kgo.RequestTimeoutOverhead(10 * time.Second),
		kgo.RetryTimeout(60 * time.Second),
	}
	if *flagDebug {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
	}
	return opts
}

func txnClient(tid string, extra ...kgo.Opt) *kgo.Client {
	opts := append(baseOpts(),
		kgo.ClientID("ketch-compat-franz-txn"),
		kgo.TransactionalID(tid),
		kgo.TransactionTimeout(60*time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond),
	)
	cl, err := kgo.NewClient(append(opts, extra...)...)
	check(err, "new transactional client")
	return cl
}

func createTopic(ctx context.Context, adm *kadm.Client, topic string, n int32) {
	resp, err := adm.CreateTopics(ctx, n, 1, nil, topic)
	check(err, "create topic")
	for _, r := range resp {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			failf("create topic %s: %v", r.Topic, r.Err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			if t, ok := md.Topics[topic]; ok && t.Err == nil && len(t.Partitions) == int(n) {
				ready := true
				for _, p := range t.Partitions {
					if p.Leader < 0 || p.Err != nil {
						ready = false
					}
				}
				if ready {
					okf("topic %s with %d partitions", topic, n)
					return
				}
			}
		}
		if time.Now().After(deadline) {
			failf("topic %s not ready in metadata (err %v)", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type rec struct {
	offset int64
	value  string
}

// readAll consumes every partition from the start with the isolation level until it has at least
// `want` records in total (or 20 s pass), then keeps polling for `linger` to catch extra records.
func readAll(ctx context.Context, topic string, n int32, committed bool, want int, linger time.Duration) map[int32][]rec {
	offs := map[int32]kgo.Offset{}
	for p := int32(0); p < n; p++ {
		offs[p] = kgo.NewOffset().AtStart()
	}
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl, err := kgo.NewClient(append(baseOpts(),
		kgo.ClientID("ketch-compat-franz-reader"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchIsolationLevel(iso),
		kgo.FetchMaxWait(200*time.Millisecond),
	)...)
	check(err, "new consumer")
	defer cl.Close()
	got := map[int32][]rec{}
	total := 0
	deadline := time.Now().Add(20 * time.Second)
	var lingerUntil time.Time
	for {
		now := time.Now()
		if total >= want && lingerUntil.IsZero() {
			lingerUntil = now.Add(linger)
		}
		if (!lingerUntil.IsZero() && now.After(lingerUntil)) || now.After(deadline) {
			return got
		}
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				failf("fetch %s/%d: %v", t, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], rec{r.Offset, string(r.Value)})
			total++
		})
	}
}

func expectValues(what string, p int32, have []rec, want []string) {
	var last int64 = -1
	for _, r := range have {
		if r.offset <= last {
			failf("%s partition %d: offset %d after %d", what, p, r.offset, last)
		}
		last = r.offset
	}
	i := 0
	for i < len(have) && i < len(want) && have[i].value == want[i] {
		i++
	}
	if i == len(have) && i == len(want) {
		return
	}
	h, w := "<end>", "<end>"
	if i < len(have) {
		h = fmt.Sprintf("%q at offset %d", have[i].value, have[i].offset)
	}
	if i < len(want) {
		w = fmt.Sprintf("%q", want[i])
	}
	show := have
	if len(show) > 60 {
		show = show[:60]
	}
	failf("%s partition %d: read %d records, expected %d; first difference at #%d: read %s, expected %s; read %v",
		what, p, len(have), len(want), i, h, w, show)
}

func produceSync(ctx context.Context, cl *kgo.Client, rs []*kgo.Record, what string) {
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		failf("%s: produce: %v", what, err)
	}
}

func offsetsOf(lo kadm.ListedOffsets, topic string) map[int32]int64 {
	out := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) {
		if o.Topic == topic {
			if o.Err != nil {
				failf("list offsets %s/%d: %v", o.Topic, o.Partition, o.Err)
			}
			out[o.Partition] = o.Offset
		}
	})
	return out
}

func sum(m map[int32][]string) int {
	n := 0
	for _, v := range m {
		n += len(v)
	}
	return n
}

// ---------------------------------------------------------------------------------------------

func commitAbort(ctx context.Context, adm *kadm.Client) {
	topic := *flagTopic
	if topic == "" {
		topic = "franz-txn-" + suffix()
	}
	createTopic(ctx, adm, topic, partitions)
	tid := "ketch-franz-txn-" + suffix()
	cl := txnClient(tid, kgo.DefaultProduceTopic(topic))
	defer cl.Close()
	plan := []bool{true, false, false, true, true, false, true}
	const per = 20
	committed := map[int32][]string{}
	all := map[int32][]string{}
	markers := map[int32]int64{}
	for t, commit := range plan {
		parts := int32(partitions)
		if t == 4 {
			parts = 2
		}
		check(cl.BeginTransaction(), "begin transaction")
		var rs []*kgo.Record
		for i := 0; i < per; i++ {
			for p := int32(0); p < parts; p++ {
				word := "abort"
				if commit {
					word = "commit"
				}
				v := fmt.Sprintf("txn%d-%s-p%d-%d", t, word, p, i)
				rs = append(rs, &kgo.Record{Partition: p, Key: []byte(fmt.Sprintf("t%d-%d", t, i)), Value: []byte(v)})
				all[p] = append(all[p], v)
				if commit {
					committed[p] = append(committed[p], v)
				}
			}
		}
		produceSync(ctx, cl, rs, fmt.Sprintf("transaction %d", t))
		check(cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)), fmt.Sprintf("end transaction %d (commit=%v)", t, commit))
		for p := int32(0); p < parts; p++ {
			markers[p]++
		}
		okf("transaction %d: %d records on %d partitions, commit=%v", t, len(rs), parts, commit)
	}

	rc := readAll(ctx, topic, partitions, true, sum(committed), 300*time.Millisecond)
	ru := readAll(ctx, topic, partitions, false, sum(all), 300*time.Millisecond)
	ends, err := adm.ListEndOffsets(ctx, topic)
	check(err, "ListEndOffsets")
	lsos, err := adm.ListCommittedOffsets(ctx, topic)
	check(err, "ListCommittedOffsets")
	hw, lso := offsetsOf(ends, topic), offsetsOf(lsos, topic)
	for p := int32(0); p < partitions; p++ {
		expectValues("read_committed", p, rc[p], committed[p])
		expectValues("read_uncommitted", p, ru[p], all[p])
		want := int64(len(all[p])) + markers[p]
		if hw[p] != want || lso[p] != want {
			failf("partition %d: high watermark %d, last stable offset %d, expected both %d = data records + %d control records",
				p, hw[p], lso[p], want, markers[p])
		}
	}
	okf("read_committed: exactly the committed records; read_uncommitted: all data records; end offsets %v", hw)

	// an open transaction holds the LSO back
	check(cl.BeginTransaction(), "begin open transaction")
	var open, plain []string
	var rs []*kgo.Record
	for i := 0; i < 5; i++ {
		v := fmt.Sprintf("open-p0-%d", i)
		open = append(open, v)
		rs = append(rs, &kgo.Record{Partition: 0, Value: []byte(v)})
	}
	produceSync(ctx, cl, rs, "open transaction")
	pl, err := kgo.NewClient(append(baseOpts(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	check(err, "plain producer")
	rs = nil
	for i := 0; i < 5; i++ {
		v := fmt.Sprintf("plain-p0-%d", i)
		plain = append(plain, v)
		rs = append(rs, &kgo.Record{Partition: 0, Value: []byte(v)})
	}
	produceSync(ctx, pl, rs, "plain records")
	pl.Close()
	first := hw[0]
	ends, err = adm.ListEndOffsets(ctx, topic)
	check(err, "ListEndOffsets")
	lsos, err = adm.ListCommittedOffsets(ctx, topic)
	check(err, "ListCommittedOffsets")
	hw2, lso2 := offsetsOf(ends, topic), offsetsOf(lsos, topic)
	if lso2[0] != first || hw2[0] != first+10 {
		failf("transaction open on partition 0 from offset %d: ListCommittedOffsets (read_committed) %d, expected %d; "+
			"ListEndOffsets %d, expected %d", first, lso2[0], first, hw2[0], first+10)
	}
	rc = readAll(ctx, topic, partitions, true, sum(committed), time.Second) // then nothing more may come
	expectValues("read_committed with a transaction open (must stop at the LSO)", 0, rc[0], committed[0])
	ru = readAll(ctx, topic, partitions, false, sum(all)+10, 300*time.Millisecond)
	expectValues("read_uncommitted with a transaction open", 0, ru[0], append(append(append([]string{}, all[0]...), open...), plain...))
	okf("LSO %d while the transaction is open (HW %d); read_committed stops there", lso2[0], hw2[0])
	check(cl.EndTransaction(ctx, kgo.TryCommit), "commit the open transaction")
	committed[0] = append(append(committed[0], open...), plain...)
	rc = readAll(ctx, topic, partitions, true, sum(committed), 300*time.Millisecond)
	expectValues("read_committed after the commit", 0, rc[0], committed[0])
	okf("after the commit read_committed sees the transaction and the records after it")
}

func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

func fence(ctx context.Context, adm *kadm.Client) {
	topic := "franz-fence-" + suffix()
	createTopic(ctx, adm, topic, partitions)
	var committed, all []string
	r := func(v string) *kgo.Record { return &kgo.Record{Partition: 0, Value: []byte(v)} }

	// case 1: transaction open when the second client initializes its producer id
	tid := "ketch-franz-fence-" + suffix()
	zombie := txnClient(tid, kgo.DefaultProduceTopic(topic))
	defer zombie.Close()
	check(zombie.BeginTransaction(), "zombie begin")
	produceSync(ctx, zombie, []*kgo.Record{r("zombie-open-0"), r("zombie-open-1")}, "zombie")
	all = append(all, "zombie-open-0", "zombie-open-1")
	fresh := txnClient(tid, kgo.DefaultProduceTopic(topic))
	defer fresh.Close()
	check(fresh.BeginTransaction(), "fresh begin")
	t0 := time.Now()
	produceSync(ctx, fresh, []*kgo.Record{r("fresh-0")}, "fresh (its InitProducerId fences the zombie)")
	okf("second client with the same transactional id produced in %v (InitProducerId aborted the zombie's transaction)",
		time.Since(t0).Round(time.Millisecond))
	err := zombie.EndTransaction(ctx, kgo.TryCommit)
	okf("zombie EndTransaction(TryCommit): %v", err)
	if err == nil {
		failf("the fenced client's commit succeeded")
	}
	if !isFenced(err) {
		failf("the fenced client's commit failed with %v, expected PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	check(fresh.EndTransaction(ctx, kgo.TryCommit), "fresh commit")
	committed = append(committed, "fresh-0")
	all = append(all, "fresh-0")

	// case 2: fenced between transactions
	tid2 := tid + "-b"
	z2 := txnClient(tid2, kgo.DefaultProduceTopic(topic))
	defer z2.Close()
	check(z2.BeginTransaction(), "zombie2 begin")
	produceSync(ctx, z2, []*kgo.Record{r("zombie2-committed")}, "zombie2")
	check(z2.EndTransaction(ctx, kgo.TryCommit), "zombie2 commit")
	committed = append(committed, "zombie2-committed")
	all = append(all, "zombie2-committed")
	f2 := txnClient(tid2, kgo.DefaultProduceTopic(topic))
	defer f2.Close()
	check(f2.BeginTransaction(), "fresh2 begin")
	produceSync(ctx, f2, []*kgo.Record{r("fresh2")}, "fresh2")
	check(f2.EndTransaction(ctx, kgo.TryCommit), "fresh2 commit")
	committed = append(committed, "fresh2")
	all = append(all, "fresh2")
	okf("client 3 committed, then client 4 with the same id produced and committed")
	var outcome []string
	fenced := false
	if err := z2.BeginTransaction(); err != nil {
		outcome = append(outcome, fmt.Sprintf("begin: %v", err))
		fenced = isFenced(err)
	} else {
		perr := z2.ProduceSync(ctx, r("zombie2-late")).FirstErr()
		outcome = append(outcome, fmt.Sprintf("produce: %v", perr))
		fenced = perr != nil && isFenced(perr)
		how := kgo.TryCommit
		if perr != nil {
			how = kgo.TryAbort
		}
		eerr := z2.EndTransaction(ctx, how)
		outcome = append(outcome, fmt.Sprintf("EndTransaction(commit=%v): %v", bool(how), eerr))
		if perr == nil && eerr == nil {
			failf("the fenced client 3 produced and committed: %v", outcome)
		}
		fenced = fenced || (eerr != nil && isFenced(eerr))
	}
	okf("fenced client 3's next transaction: %s", strings.Join(outcome, "; "))
	if !fenced {
		failf("client 3 not reported fenced (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH): %s", strings.Join(outcome, "; "))
	}

	rc := readAll(ctx, topic, partitions, true, len(committed), 500*time.Millisecond)
	expectValues("read_committed after fencing", 0, rc[0], committed)
	ru := readAll(ctx, topic, partitions, false, len(all), 300*time.Millisecond)
	var have []rec
	for _, x := range ru[0] {
		if x.value != "zombie2-late" {
			have = append(have, x)
		}
	}
	expectValues("read_uncommitted after fencing (apart from a possible zombie2-late)", 0, have, all)
	okf("read_committed: %v", committed)
}

func etl(ctx context.Context, adm *kadm.Client) {
	s := suffix()
	src, dst, group := "franz-etl-in-"+s, "franz-etl-out-"+s, "franz-etl-group-"+s
	const parts, per = 2, 1500
	createTopic(ctx, adm, src, parts)
	createTopic(ctx, adm, dst, parts)
	in, err := kgo.NewClient(append(baseOpts(), kgo.DefaultProduceTopic(src), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	check(err, "input producer")
	var rs []*kgo.Record
	for n := 0; n < per; n++ {
		for p := int32(0); p < parts; p++ {
			rs = append(rs, &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("in-p%d-%d", p, n))})
		}
	}
	produceSync(ctx, in, rs, "input")
	in.Close()
	okf("%d input records", len(rs))

	sess, err := kgo.NewGroupTransactSession(append(baseOpts(),
		kgo.ClientID("ketch-compat-franz-etl"),
		kgo.TransactionalID("ketch-franz-etl-"+s),
		kgo.TransactionTimeout(60*time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(src),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.SessionTimeout(10*time.Second),
	)...)
	check(err, "NewGroupTransactSession")
	defer sess.Close()
	txns, commits, aborts, copied, abortedRecs, markers := 0, 0, 0, 0, 0, 0
	deadline := time.Now().Add(90 * time.Second)
	for copied < parts*per {
		if time.Now().After(deadline) {
			failf("ETL not done within 90s: %d records committed, %d commits, %d aborts", copied, commits, aborts)
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := sess.PollRecords(pctx, 100) // about 30 transactions
		cancel()
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				failf("fetch %s/%d: %v", t, p, err)
			}
		})
		var out []*kgo.Record
		touched := map[int32]bool{}
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, &kgo.Record{Topic: dst, Partition: r.Partition, Value: append([]byte("x:"), r.Value...)})
			touched[r.Partition] = true
		})
		if len(out) == 0 {
			continue
		}
		check(sess.Begin(), "session begin")
		if err := sess.ProduceSync(ctx, out...).FirstErr(); err != nil {
			failf("transaction %d: produce: %v", txns, err)
		}
		try := kgo.TryCommit
		if txns%3 == 2 {
			try = kgo.TryAbort
		}
		ok, err := sess.End(ctx, try)
		check(err, fmt.Sprintf("session end (transaction %d, commit=%v)", txns, bool(try)))
		markers += len(touched)
		switch {
		case ok && bool(try):
			commits++
			copied += len(out)
		case !ok:
			aborts++
			abortedRecs += len(out)
			if bool(try) {
				// a commit turned into an abort (e.g. a rebalance): the session rewound
				fmt.Printf("note transaction %d: wanted to commit, the session aborted it\n", txns)
			}
		default:
			failf("transaction %d: End(TryAbort) reports committed", txns)
		}
		txns++
	}
	okf("%d transactions committed (%d records), %d aborted and re-consumed", commits, copied, aborts)
	// RequireStable: wait for the last transaction's offsets (EndTxn is answered before the markers land)
	for fdeadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		offs, err := adm.FetchOffsets(kadm.RequireStable(ctx), group)
		bad := ""
		if err != nil {
			bad = err.Error()
		} else {
			for p := int32(0); p < parts; p++ {
				o, found := offs.Lookup(src, p)
				if !found || o.Err != nil || o.At != per {
					bad += fmt.Sprintf(" %s/%d: %+v (found %v);", src, p, o, found)
				}
			}
		}
		if bad == "" {
			break
		}
		if time.Now().After(fdeadline) {
			failf("group %s committed offsets, expected %d on each input partition:%s", group, per, bad)
		}
	}
	rc := readAll(ctx, dst, parts, true, parts*per, 500*time.Millisecond)
	for p := int32(0); p < parts; p++ {
		var want []string
		for n := 0; n < per; n++ {
			want = append(want, fmt.Sprintf("x:in-p%d-%d", p, n))
		}
		expectValues("output read_committed (each input record exactly once, in order)", p, rc[p], want)
	}
	ends, err := adm.ListEndOffsets(ctx, dst)
	check(err, "ListEndOffsets")
	var hw int64
	for _, v := range offsetsOf(ends, dst) {
		hw += v
	}
	if aborts == 0 {
		failf("no transaction was aborted: the scenario did not exercise aborts")
	}
	if want := int64(parts*per + abortedRecs + markers); hw != want {
		failf("output high watermarks add up to %d, expected %d = %d committed + %d aborted records + %d control records "+
			"(one per transaction and partition written)", hw, want, parts*per, abortedRecs, markers)
	}
	okf("output: each input record exactly once (read_committed); high watermarks add up to %d = records + %d markers", hw, markers)
}

func main() {
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *flagTimeout)
	defer cancel()
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
		go func() {
			<-ctx.Done()
			time.Sleep(5 * time.Second)
			fmt.Fprintf(os.Stderr, "FAIL: overall deadline %v exceeded\n", *flagTimeout)
			os.Exit(3)
		}()
		cl, err := kgo.NewClient(baseOpts()...)
		check(err, "admin client")
		defer cl.Close()
		adm := kadm.NewClient(cl)
		switch *flagMode {
		case "commit-abort":
			commitAbort(ctx, adm)
		case "fence":
			fence(ctx, adm)
		case "etl":
			etl(ctx, adm)
		default:
			fmt.Fprintln(os.Stderr, "unknown -mode")
			code = 2
			return
		}
		fmt.Println("PASS")
	}()
	os.Exit(code)
}
