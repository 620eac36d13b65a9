package main

// The scenarios. Every expected value is what Apache Kafka 4.1 answered (single node, transaction
// protocol 2 finalized); P is the producer id of the scenario's first InitProducerId.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

var scenarios = map[string]func(p *probe, name string){
	"hanging-tv2":            hangingTV2,
	"late-write-tv1":         lateWriteTV1,
	"endtxn-v5":              endTxnV5,
	"produce-v12-errors":     produceV12Errors,
	"txn-offset-commit":      txnOffsetCommit,
	"init-after-lost-endtxn": initAfterLostEndTxn,
	"api-versions":           apiVersions,
	"timeout-tv2":            timeoutTV2,
}

func code(c int) kv                     { return kv{"code": c} }
func codePE(c int, pid int64, e int) kv { return kv{"code": c, "pid": pid, "epoch": e} }
func noPE(c int) kv                     { return kv{"code": c, "pid": -1, "epoch": -1} }
func produced(c int, offset int64) kv   { return kv{"code": c, "offset": offset} }

func state(s string, pid int64, e int, parts ...string) kv {
	if parts == nil {
		parts = []string{}
	}
	return kv{"code": 0, "state": s, "pid": pid, "epoch": e, "partitions": parts}
}

// 1. KIP-890 part 2's hanging transaction (tv2-spec §5): a write of transaction 1 delayed past
// its commit must not land in transaction 2, nor outside any transaction. Produce v12 adds the
// partition, EndTxn v5 bumps the epoch, and the marker at the bumped epoch fences the late
// batch (INVALID_PRODUCER_EPOCH).
func hangingTV2(p *probe, name string) {
	topic, txn, tx := name, name, sp(name)
	p.createTopic(topic, 1)
	P := p.initTxn("init", txn, 60000)
	p.check("txn1-produce", "Produce", 12, produced(0, 0), p.produce(12, tx, topic, 0, P, 0, 0, "txn1"))
	p.describeUntil("txn1-ongoing", txn, state("Ongoing", P, 0, topic+"/0"))
	p.check("txn1-commit", "EndTxn", 5, codePE(0, P, 1), p.endTxn(5, txn, P, 0, true, true))
	p.check("txn1-commit-retry-same-epoch", "EndTxn", 5, codePE(0, P, 1), p.endTxn(5, txn, P, 0, true, true))
	p.describeUntil("txn1-complete", txn, state("CompleteCommit", P, 1))
	p.check("txn2-produce", "Produce", 12, produced(0, 2), p.produce(12, tx, topic, 0, P, 1, 0, "txn2"))
	p.describeUntil("txn2-ongoing", txn, state("Ongoing", P, 1, topic+"/0"))
	p.check("late-txn1-write-during-txn2", "Produce", 12, code(errInvalidProducerEpoch),
		p.produce(12, tx, topic, 0, P, 0, 1, "late-txn1"))
	p.check("txn2-abort", "EndTxn", 5, codePE(0, P, 2), p.endTxn(5, txn, P, 1, false, true))
	p.describeUntil("txn2-complete", txn, state("CompleteAbort", P, 2))
	p.check("late-txn1-write-no-txn", "Produce", 12, code(errInvalidProducerEpoch),
		p.produce(12, tx, topic, 0, P, 0, 1, "late-txn1"))
	p.check("stale-commit-epoch0", "EndTxn", 5, noPE(errProducerFenced), p.endTxn(5, txn, P, 0, true, false))
	p.check("empty-abort", "EndTxn", 5, codePE(0, P, 3), p.endTxn(5, txn, P, 2, false, true))
	p.describeUntil("empty-abort-complete", txn, state("CompleteAbort", P, 3))
	p.check("read-committed", "Fetch", 12, kv{"hw": 4, "lso": 4,
		"log":     []string{"0:txn1@e0", "1:COMMIT@e1", "2:txn2@e1", "3:ABORT@e2"},
		"aborted": []string{"P@2"}, "committed": []string{"txn1"}}, p.readCommitted(topic, P))
}

// 2. The same late write under protocol 1 (AddPartitionsToTxn v3, Produce v11, EndTxn v4): the
// epoch never changes, so the late batch is absorbed into the next transaction (the gap TV2
// closes). Produce v11/v10 to a partition not added: verify-only, 120 / 48.
func lateWriteTV1(p *probe, name string) {
	topic, txn, tx := name, name, sp(name)
	p.createTopic(topic, 2)
	P := p.initTxn("init", txn, 60000)
	add := func(step string) {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = txn, P, 0
		req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: []int32{0}}}
		got := kv{}
		if resp, err := p.rt(3, req); err != nil {
			got["error"] = err.Error()
		} else if r := resp.(*kmsg.AddPartitionsToTxnResponse); len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
			got["code"] = r.Topics[0].Partitions[0].ErrorCode
		} else {
			got["error"] = "malformed AddPartitionsToTxn response"
		}
		p.check(step, "AddPartitionsToTxn", 3, code(0), got)
	}
	add("txn1-add-partition")
	p.check("txn1-produce", "Produce", 11, produced(0, 0), p.produce(11, tx, topic, 0, P, 0, 0, "txn1"))
	p.check("txn1-abort", "EndTxn", 4, code(0), p.endTxn(4, txn, P, 0, false, true))
	p.describeUntil("txn1-complete", txn, state("CompleteAbort", P, 0))
	add("txn2-add-partition")
	p.check("txn2-produce", "Produce", 11, produced(0, 2), p.produce(11, tx, topic, 0, P, 0, 1, "txn2"))
	p.check("late-txn1-write-accepted", "Produce", 11, produced(0, 3), p.produce(11, tx, topic, 0, P, 0, 2, "late-txn1"))
	p.check("not-added-partition-v11", "Produce", 11, code(errTxnAbortable), p.produce(11, tx, topic, 1, P, 0, 0, "x"))
	p.check("not-added-partition-v10", "Produce", 10, code(errInvalidTxnState), p.produce(10, tx, topic, 1, P, 0, 0, "x"))
	p.describeUntil("txn2-ongoing", txn, state("Ongoing", P, 0, topic+"/0"))
	p.check("txn2-commit", "EndTxn", 4, code(0), p.endTxn(4, txn, P, 0, true, true))
	p.describeUntil("txn2-complete", txn, state("CompleteCommit", P, 0))
	p.check("txn2-commit-retry", "EndTxn", 4, code(0), p.endTxn(4, txn, P, 0, true, true))
	p.check("read-committed", "Fetch", 12, kv{"hw": 5, "lso": 5,
		"log":     []string{"0:txn1@e0", "1:ABORT@e0", "2:txn2@e0", "3:late-txn1@e0", "4:COMMIT@e0"},
		"aborted": []string{"P@0"}, "committed": []string{"txn2", "late-txn1"}}, p.readCommitted(topic, P))
}

// 3. EndTxn v5 (tv2-spec §3.4): commit and abort on Empty, retries at the old epoch, requests at
// the new epoch during and after the commit, fenced and unknown producers; v4 on Empty.
func endTxnV5(p *probe, name string) {
	topic, txn, tx := name, name, sp(name)
	p.createTopic(topic, 1)
	P := p.initTxn("init", txn, 60000)
	p.check("empty-commit-v5", "EndTxn", 5, noPE(errInvalidTxnState), p.endTxn(5, txn, P, 0, true, false))
	p.check("empty-commit-v4", "EndTxn", 4, code(errInvalidTxnState), p.endTxn(4, txn, P, 0, true, false))
	p.check("empty-abort-v4", "EndTxn", 4, code(errInvalidTxnState), p.endTxn(4, txn, P, 0, false, false))
	p.check("empty-abort-v5-bumps", "EndTxn", 5, codePE(0, P, 1), p.endTxn(5, txn, P, 0, false, true))
	p.describeUntil("empty-abort-complete", txn, state("CompleteAbort", P, 1))
	p.check("empty-abort-v5-retry", "EndTxn", 5, codePE(0, P, 1), p.endTxn(5, txn, P, 0, false, true))
	p.check("produce", "Produce", 12, produced(0, 0), p.produce(12, tx, topic, 0, P, 1, 0, "a"))
	p.check("commit", "EndTxn", 5, codePE(0, P, 2), p.endTxn(5, txn, P, 1, true, true))
	// Sent at once: Kafka answers EndTxn before its markers are written, so this usually meets
	// PrepareCommit (PRODUCER_FENCED); a broker that completes first answers as after (48).
	p.check("commit-new-epoch-during", "EndTxn", 5, kv{"code": anyOf{errProducerFenced, errConcurrentTxns, errInvalidTxnState}},
		p.endTxn(5, txn, P, 2, true, false))
	p.describeUntil("commit-complete", txn, state("CompleteCommit", P, 2))
	p.check("commit-retry-old-epoch", "EndTxn", 5, codePE(0, P, 2), p.endTxn(5, txn, P, 1, true, true))
	p.check("commit-new-epoch-after", "EndTxn", 5, noPE(errInvalidTxnState), p.endTxn(5, txn, P, 2, true, false))
	p.check("abort-old-epoch-after-commit", "EndTxn", 5, noPE(errInvalidTxnState), p.endTxn(5, txn, P, 1, false, false))
	p.check("abort-new-epoch-after-commit-bumps", "EndTxn", 5, codePE(0, P, 3), p.endTxn(5, txn, P, 2, false, true))
	p.describeUntil("abort-complete", txn, state("CompleteAbort", P, 3))
	p.check("abort-retry-old-epoch", "EndTxn", 5, codePE(0, P, 3), p.endTxn(5, txn, P, 2, false, true))
	p.check("commit-old-epoch-after-abort", "EndTxn", 5, noPE(errInvalidTxnState), p.endTxn(5, txn, P, 2, true, false))
	p.check("abort-two-epochs-behind", "EndTxn", 5, noPE(errProducerFenced), p.endTxn(5, txn, P, 1, false, false))
	p.check("wrong-producer-id", "EndTxn", 5, noPE(errInvalidPIDMapping), p.endTxn(5, txn, P+1000, 3, false, false))
	p.check("unknown-transactional-id", "EndTxn", 5, noPE(errInvalidPIDMapping),
		p.endTxn(5, txn+"-unknown", P, 3, false, false))
	p.describeUntil("final-state", txn, state("CompleteAbort", P, 3))
}

// 4. Produce v12 errors (tv2-spec §4.1, §4.2).
func produceV12Errors(p *probe, name string) {
	topic, txn, tx := name, name, sp(name)
	p.createTopic(topic, 1)
	P := p.initTxn("init", txn, 60000)
	p.check("first-batch-seq3", "Produce", 12, code(errOutOfOrderSeq), p.produce(12, tx, topic, 0, P, 0, 3, "bad-seq"))
	// the partition was added before the append failed
	p.describeUntil("added-despite-seq-error", txn, state("Ongoing", P, 0, topic+"/0"))
	p.check("epoch-above-coordinator", "Produce", 12, code(errInvalidProducerEpoch), p.produce(12, tx, topic, 0, P, 1, 0, "e1"))
	p.check("wrong-producer-id", "Produce", 12, code(errInvalidPIDMapping), p.produce(12, tx, topic, 0, P+1000, 0, 0, "pid"))
	p.check("unknown-transactional-id", "Produce", 12, code(errInvalidPIDMapping),
		p.produce(12, sp(txn+"-unknown"), topic, 0, P, 0, 0, "unknown"))
	p.check("first-batch-seq0", "Produce", 12, produced(0, 0), p.produce(12, tx, topic, 0, P, 0, 0, "a0"))
	p.check("second-batch-seq1", "Produce", 12, produced(0, 1), p.produce(12, tx, topic, 0, P, 0, 1, "a1"))
	p.check("abort", "EndTxn", 5, codePE(0, P, 1), p.endTxn(5, txn, P, 0, false, true))
	p.describeUntil("abort-complete", txn, state("CompleteAbort", P, 1))
	// the marker at epoch 1 cleared the partition's batches: the next transaction starts at 0
	p.check("next-txn-seq2", "Produce", 12, code(errOutOfOrderSeq), p.produce(12, tx, topic, 0, P, 1, 2, "b-bad"))
	p.check("next-txn-seq0", "Produce", 12, produced(0, 3), p.produce(12, tx, topic, 0, P, 1, 0, "b0"))
	p.check("commit", "EndTxn", 5, codePE(0, P, 2), p.endTxn(5, txn, P, 1, true, true))
	p.describeUntil("commit-complete", txn, state("CompleteCommit", P, 2))
	p.check("read-committed", "Fetch", 12, kv{"hw": 5, "lso": 5,
		"log":     []string{"0:a0@e0", "1:a1@e0", "2:ABORT@e1", "3:b0@e1", "4:COMMIT@e2"},
		"aborted": []string{"P@0"}, "committed": []string{"b0"}}, p.readCommitted(topic, P))
}

// 5. TxnOffsetCommit v5 adds __consumer_offsets itself (tv2-spec §4.3); v4 and v3 need
// AddOffsetsToTxn first. The group has no members (generation -1, empty member id).
func txnOffsetCommit(p *probe, name string) {
	topic, txn, group := name, name, name+"-group"
	p.createTopic(topic, 1)
	p.findCoordinator(group, 0)
	P := p.initTxn("init", txn, 60000)
	p.check("v3-without-add-offsets", "TxnOffsetCommit", 3, code(errInvalidTxnState), p.txnOffsetCommit(3, txn, group, P, 0, topic, 41))
	p.check("v4-without-add-offsets", "TxnOffsetCommit", 4, code(errTxnAbortable), p.txnOffsetCommit(4, txn, group, P, 0, topic, 41))
	p.describeUntil("still-empty", txn, state("Empty", P, 0))
	p.check("v5-epoch-above-coordinator", "TxnOffsetCommit", 5, code(errInvalidProducerEpoch),
		p.txnOffsetCommit(5, txn, group, P, 1, topic, 41))
	p.check("v5-implicit-add", "TxnOffsetCommit", 5, code(0), p.txnOffsetCommit(5, txn, group, P, 0, topic, 42))
	p.describeUntil("ongoing-with-offsets-topic", txn, kv{"code": 0, "state": "Ongoing", "pid": P, "epoch": 0,
		"topics": []string{"__consumer_offsets"}})
	p.check("commit", "EndTxn", 5, codePE(0, P, 1), p.endTxn(5, txn, P, 0, true, true))
	p.describeUntil("commit-complete", txn, state("CompleteCommit", P, 1))
	p.check("offset-fetch-committed", "OffsetFetch", 8, kv{"code": 0, "offset": 42}, p.offsetFetch(group, topic))
	p.check("v5-stale-epoch", "TxnOffsetCommit", 5, code(errInvalidProducerEpoch), p.txnOffsetCommit(5, txn, group, P, 0, topic, 40))
	p.check("v5-next-txn", "TxnOffsetCommit", 5, code(0), p.txnOffsetCommit(5, txn, group, P, 1, topic, 43))
	p.check("abort", "EndTxn", 5, codePE(0, P, 2), p.endTxn(5, txn, P, 1, false, true))
	p.describeUntil("abort-complete", txn, state("CompleteAbort", P, 2))
	p.check("offset-fetch-after-abort", "OffsetFetch", 8, kv{"code": 0, "offset": 42}, p.offsetFetch(group, topic))
}

func (p *probe) offsetFetch(group, topic string) kv {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.RequireStable = true
	req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group,
		Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: topic, Partitions: []int32{0}}}}}
	resp, err := p.rt(8, req)
	if err != nil {
		return kv{"error": err.Error()}
	}
	r := resp.(*kmsg.OffsetFetchResponse)
	if len(r.Groups) != 1 || len(r.Groups[0].Topics) != 1 || len(r.Groups[0].Topics[0].Partitions) != 1 {
		return kv{"error": "malformed OffsetFetch response"}
	}
	pt := r.Groups[0].Topics[0].Partitions[0]
	c := pt.ErrorCode
	if c == 0 {
		c = r.Groups[0].ErrorCode
	}
	return kv{"code": c, "offset": pt.Offset}
}

// 6. InitProducerId after an EndTxn v5 whose response was lost (tv2-spec §3.2): the client still
// holds the old epoch, and the coordinator accepts it as a retry. Also the epoch checks of v3-v5
// and the fencing of an ongoing transaction (CONCURRENT_TRANSACTIONS, then a second bump).
func initAfterLostEndTxn(p *probe, name string) {
	topic, txn, tx := name, name, sp(name)
	p.createTopic(topic, 1)
	P := p.initTxn("init", txn, 60000)
	p.check("produce", "Produce", 12, produced(0, 0), p.produce(12, tx, topic, 0, P, 0, 0, "a"))
	p.check("commit-response-lost", "EndTxn", 5, codePE(0, P, 1), p.endTxn(5, txn, P, 0, true, true))
	p.describeUntil("commit-complete", txn, state("CompleteCommit", P, 1))
	p.check("init-with-old-epoch-v5", "InitProducerId", 5, codePE(0, P, 1), p.initPID(5, txn, 60000, P, 0, true))
	p.describeUntil("after-init-retry", txn, state("Empty", P, 1))
	p.check("init-with-current-epoch-v4", "InitProducerId", 4, codePE(0, P, 2), p.initPID(4, txn, 60000, P, 1, true))
	p.check("init-with-stale-epoch-v4", "InitProducerId", 4, codePE(errProducerFenced, -1, -1), p.initPID(4, txn, 60000, P, 0, true))
	p.check("init-with-stale-epoch-v3", "InitProducerId", 3, codePE(errInvalidProducerEpoch, -1, -1), p.initPID(3, txn, 60000, P, 0, true))
	p.check("init-with-wrong-pid-v5", "InitProducerId", 5, codePE(errProducerFenced, -1, -1), p.initPID(5, txn, 60000, P+1000, 2, true))
	p.describeUntil("still-empty", txn, state("Empty", P, 2))
	p.check("produce-e2", "Produce", 12, produced(0, 2), p.produce(12, tx, topic, 0, P, 2, 0, "b"))
	p.check("init-fences-ongoing", "InitProducerId", 5, codePE(errConcurrentTxns, -1, -1), p.initPID(5, txn, 60000, -1, -1, false))
	p.describeUntil("fenced-txn-aborted", txn, state("CompleteAbort", P, 3))
	p.check("init-after-fence", "InitProducerId", 5, codePE(0, P, 4), p.initPID(5, txn, 60000, -1, -1, true))
	p.check("read-committed", "Fetch", 12, kv{"hw": 4, "lso": 4,
		"log":     []string{"0:a@e0", "1:COMMIT@e1", "2:b@e2", "3:ABORT@e3"},
		"aborted": []string{"P@2"}, "committed": []string{"a"}}, p.readCommitted(topic, P))
}

// 7. ApiVersions v3/v4 advertise transaction.version 2 (tv2-spec §1).
func apiVersions(p *probe, _ string) {
	for _, v := range []int16{3, 4} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "txnprobe", "1.0"
		resp, err := p.rt(v, req)
		got := kv{}
		if err != nil {
			got["error"] = err.Error()
		} else {
			r := resp.(*kmsg.ApiVersionsResponse)
			got["code"], got["finalized_features_epoch"] = r.ErrorCode, r.FinalizedFeaturesEpoch
			got["finalized_features_epoch_nonnegative"] = r.FinalizedFeaturesEpoch >= 0
			got["finalized_transaction_version"], got["supported_transaction_version"] = "absent", "absent"
			for _, f := range r.FinalizedFeatures {
				if f.Name == "transaction.version" {
					got["finalized_transaction_version"] = kv{"min": f.MinVersionLevel, "max": f.MaxVersionLevel}
				}
			}
			for _, f := range r.SupportedFeatures {
				if f.Name == "transaction.version" {
					got["supported_transaction_version"] = kv{"min": f.MinVersion, "max": f.MaxVersion}
				}
			}
			maxOf := map[int16]int16{}
			for _, k := range r.ApiKeys {
				maxOf[k.ApiKey] = k.MaxVersion
			}
			got["produce_max"], got["end_txn_max"], got["txn_offset_commit_max"] = maxOf[0], maxOf[26], maxOf[28]
			got["produce_max_ge_12"], got["end_txn_max_ge_5"], got["txn_offset_commit_max_ge_5"] =
				maxOf[0] >= 12, maxOf[26] >= 5, maxOf[28] >= 5
		}
		want := kv{"code": 0, "finalized_features_epoch_nonnegative": true,
			"finalized_transaction_version": kv{"min": 2, "max": 2},
			"produce_max_ge_12":             true, "end_txn_max_ge_5": true, "txn_offset_commit_max_ge_5": true}
		if v >= 4 {
			want["supported_transaction_version"] = kv{"min": 0, "max": 2}
		} else { // KAFKA-17011: v3 leaves out supported features whose min is 0
			want["supported_transaction_version"] = "absent"
		}
		p.check("api-versions", "ApiVersions", v, want, got)
	}
}

// 8. A transaction that outlives transaction.timeout.ms (1 s) under TV2 (tv2-spec §3.6): the
// coordinator fences e0 -> e1 and aborts with markers at e1; the old producer's late write is
// fenced, its commit refused, its abort answered as a retry with (P, 1), and it goes on at e1.
// The broker must run with transaction.abort.timed.out.transaction.cleanup.interval.ms=500.
func timeoutTV2(p *probe, name string) {
	topic, txn, tx := name, name, sp(name)
	p.createTopic(topic, 1)
	P := p.initTxn("init", txn, 1000)
	p.check("produce", "Produce", 12, produced(0, 0), p.produce(12, tx, topic, 0, P, 0, 0, "doomed"))
	p.describeUntil("aborted-by-timeout", txn, state("CompleteAbort", P, 1))
	p.check("late-write-old-epoch", "Produce", 12, code(errInvalidProducerEpoch), p.produce(12, tx, topic, 0, P, 0, 1, "late"))
	p.check("commit-old-epoch", "EndTxn", 5, noPE(errInvalidTxnState), p.endTxn(5, txn, P, 0, true, false))
	p.check("abort-old-epoch-is-retry", "EndTxn", 5, codePE(0, P, 1), p.endTxn(5, txn, P, 0, false, true))
	p.check("next-txn-produce", "Produce", 12, produced(0, 2), p.produce(12, tx, topic, 0, P, 1, 0, "recovered"))
	p.check("next-txn-commit", "EndTxn", 5, codePE(0, P, 2), p.endTxn(5, txn, P, 1, true, true))
	p.describeUntil("next-txn-complete", txn, state("CompleteCommit", P, 2))
	p.check("read-committed", "Fetch", 12, kv{"hw": 4, "lso": 4,
		"log":     []string{"0:doomed@e0", "1:ABORT@e1", "2:recovered@e1", "3:COMMIT@e2"},
		"aborted": []string{"P@0"}, "committed": []string{"recovered"}}, p.readCommitted(topic, P))
}
