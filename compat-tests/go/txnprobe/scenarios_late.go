package main

// Late and retried transactional writes (KIP-890): a TxnOffsetCommit whose transaction is no
// longer ongoing, and a retried Produce batch after its transaction's marker. Every expected
// value is what Apache Kafka 4.1 answered (single node); P is the scenario's producer id.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	scenarios["late-txn-offset-commit"] = lateTxnOffsetCommit
	scenarios["produce-retry-after-marker"] = produceRetryAfterMarker
}

// addPartition sends AddPartitionsToTxn v3 for partition 0 of topic; got: code.
func (p *probe) addPartition(txn string, pid int64, epoch int16, topic string) kv {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = txn, pid, epoch
	req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: []int32{0}}}
	resp, err := p.rt(3, req)
	if err != nil {
		return kv{"error": err.Error()}
	}
	if r := resp.(*kmsg.AddPartitionsToTxnResponse); len(r.Topics) == 1 && len(r.Topics[0].Partitions) == 1 {
		return kv{"code": r.Topics[0].Partitions[0].ErrorCode}
	}
	return kv{"error": "malformed AddPartitionsToTxn response"}
}

// addOffsets sends AddOffsetsToTxn v3 (transaction protocol 1's way to put the group's
// __consumer_offsets partition in the transaction); got: code.
func (p *probe) addOffsets(txn string, pid int64, epoch int16, group string) kv {
	req := kmsg.NewPtrAddOffsetsToTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = txn, pid, epoch, group
	resp, err := p.rt(3, req)
	if err != nil {
		return kv{"error": err.Error()}
	}
	return kv{"code": resp.(*kmsg.AddOffsetsToTxnResponse).ErrorCode}
}

// 9. A TxnOffsetCommit arriving after its transaction ended is refused and never published by
// a later marker. Protocol 1 (AddOffsetsToTxn v3, EndTxn v4, same epoch throughout): after the
// abort, v3 answers INVALID_TXN_STATE and v4 TRANSACTION_ABORTABLE; the producer's next
// transaction commits only its own offset. Protocol 2 (TxnOffsetCommit v5, EndTxn v5): the
// abort bumped the epoch, so the late commit at the old epoch is INVALID_PRODUCER_EPOCH.
func lateTxnOffsetCommit(p *probe, name string) {
	topic, txn, group := name, name, name+"-group"
	p.createTopic(topic, 1)
	p.findCoordinator(group, 0)
	P := p.initTxn("init", txn, 60000)
	p.check("txn1-add-offsets", "AddOffsetsToTxn", 3, code(0), p.addOffsets(txn, P, 0, group))
	p.check("txn1-offsets", "TxnOffsetCommit", 3, code(0), p.txnOffsetCommit(3, txn, group, P, 0, topic, 41))
	p.check("txn1-abort", "EndTxn", 4, code(0), p.endTxn(4, txn, P, 0, false, true))
	p.describeUntil("txn1-aborted", txn, state("CompleteAbort", P, 0))
	p.check("late-offsets-v3", "TxnOffsetCommit", 3, code(errInvalidTxnState), p.txnOffsetCommit(3, txn, group, P, 0, topic, 42))
	p.check("late-offsets-v4", "TxnOffsetCommit", 4, code(errTxnAbortable), p.txnOffsetCommit(4, txn, group, P, 0, topic, 42))
	p.describeUntil("still-aborted", txn, state("CompleteAbort", P, 0))
	p.check("after-abort", "OffsetFetch", 8, kv{"code": 0, "offset": -1}, p.offsetFetch(group, topic))
	p.check("txn2-add-offsets", "AddOffsetsToTxn", 3, code(0), p.addOffsets(txn, P, 0, group))
	p.check("txn2-offsets", "TxnOffsetCommit", 3, code(0), p.txnOffsetCommit(3, txn, group, P, 0, topic, 43))
	p.check("txn2-commit", "EndTxn", 4, code(0), p.endTxn(4, txn, P, 0, true, true))
	p.describeUntil("txn2-committed", txn, state("CompleteCommit", P, 0))
	p.check("txn2-committed-only-its-offset", "OffsetFetch", 8, kv{"code": 0, "offset": 43}, p.offsetFetch(group, topic))
	p.check("late-offsets-after-commit", "TxnOffsetCommit", 4, code(errTxnAbortable),
		p.txnOffsetCommit(4, txn, group, P, 0, topic, 44))
	p.check("still-43", "OffsetFetch", 8, kv{"code": 0, "offset": 43}, p.offsetFetch(group, topic))

	txn2 := name + "-tv2"
	Q := p.initTxn("init-tv2", txn2, 60000)
	p.check("tv2-offsets", "TxnOffsetCommit", 5, code(0), p.txnOffsetCommit(5, txn2, group, Q, 0, topic, 50))
	p.check("tv2-abort", "EndTxn", 5, codePE(0, Q, 1), p.endTxn(5, txn2, Q, 0, false, true))
	p.describeUntil("tv2-aborted", txn2, state("CompleteAbort", Q, 1))
	p.check("tv2-late-offsets-old-epoch", "TxnOffsetCommit", 5, code(errInvalidProducerEpoch),
		p.txnOffsetCommit(5, txn2, group, Q, 0, topic, 51))
	p.describeUntil("tv2-still-aborted", txn2, state("CompleteAbort", Q, 1))
	p.check("tv2-nothing-published", "OffsetFetch", 8, kv{"code": 0, "offset": 43}, p.offsetFetch(group, topic))
}

// 10. A retried Produce batch (same producer id, epoch and sequence as a batch already written)
// is answered with the original batch's offset whenever its transaction checks pass, Kafka's
// duplicate lookup coming before the log's transaction check: in its open transaction, and in
// the producer's next transaction (protocol 1, same epoch) once the partition is added again.
// The retry in the next transaction leaves its verification behind (a duplicate writes
// nothing), so the next sequence is OUT_OF_ORDER_SEQUENCE_NUMBER until it goes. After the
// marker with no transaction, the coordinator's verification refuses the retry first (120 at
// v11, 48 at v10); under protocol 2 the marker's bumped epoch fences it (47).
func produceRetryAfterMarker(p *probe, name string) {
	topic, txn, tx := name, name, sp(name)
	p.createTopic(topic, 1)
	P := p.initTxn("init", txn, 60000)
	p.check("txn1-add-partition", "AddPartitionsToTxn", 3, code(0), p.addPartition(txn, P, 0, topic))
	p.check("txn1-produce", "Produce", 11, produced(0, 0), p.produce(11, tx, topic, 0, P, 0, 0, "a"))
	p.check("txn1-retry-open", "Produce", 11, produced(0, 0), p.produce(11, tx, topic, 0, P, 0, 0, "a"))
	p.check("txn1-commit", "EndTxn", 4, code(0), p.endTxn(4, txn, P, 0, true, true))
	p.describeUntil("txn1-committed", txn, state("CompleteCommit", P, 0))
	p.check("retry-after-marker-v11", "Produce", 11, code(errTxnAbortable), p.produce(11, tx, topic, 0, P, 0, 0, "a"))
	p.check("retry-after-marker-v10", "Produce", 10, code(errInvalidTxnState), p.produce(10, tx, topic, 0, P, 0, 0, "a"))
	p.check("txn2-add-partition", "AddPartitionsToTxn", 3, code(0), p.addPartition(txn, P, 0, topic))
	p.check("txn2-retry-of-txn1-batch", "Produce", 11, produced(0, 0), p.produce(11, tx, topic, 0, P, 0, 0, "a"))
	// The retry's verification (lowest sequence 0) is still there, the duplicate wrote nothing:
	// the next sequence may not overtake it (Kafka's VerificationStateEntry).
	p.check("txn2-next-seq-behind-the-retry", "Produce", 11, code(errOutOfOrderSeq), p.produce(11, tx, topic, 0, P, 0, 1, "b"))
	p.check("txn2-commit", "EndTxn", 4, code(0), p.endTxn(4, txn, P, 0, true, true))
	p.describeUntil("txn2-committed", txn, state("CompleteCommit", P, 0))

	txn2, tx2 := name+"-tv2", sp(name+"-tv2")
	Q := p.initTxn("init-tv2", txn2, 60000)
	p.check("tv2-produce", "Produce", 12, produced(0, 3), p.produce(12, tx2, topic, 0, Q, 0, 0, "c"))
	p.check("tv2-retry-open", "Produce", 12, produced(0, 3), p.produce(12, tx2, topic, 0, Q, 0, 0, "c"))
	p.check("tv2-commit", "EndTxn", 5, codePE(0, Q, 1), p.endTxn(5, txn2, Q, 0, true, true))
	p.describeUntil("tv2-committed", txn2, state("CompleteCommit", Q, 1))
	p.check("tv2-retry-after-marker", "Produce", 12, code(errInvalidProducerEpoch), p.produce(12, tx2, topic, 0, Q, 0, 0, "c"))
	p.check("read-committed", "Fetch", 12, kv{"hw": 5, "lso": 5,
		"log":     []string{"0:a@e0", "1:COMMIT@e0", "2:COMMIT@e0", "3:c@e0 pid!=P", "4:COMMIT@e1 pid!=P"},
		"aborted": []string{}, "committed": []string{"a", "c"}}, p.readCommitted(topic, P))
}
