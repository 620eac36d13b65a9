// Consumer groups, transactions and topic deletion steps.

package main

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerBytes encodes a consumer-protocol subscription or assignment (version 0, null user
// data): subscription = topics; assignment = topic with partitions.
func consumerBytes(topic string, partitions []int32) []byte {
	b := []byte{0, 0, 0, 0, 0, 1}
	b = binary.BigEndian.AppendUint16(b, uint16(len(topic)))
	b = append(b, topic...)
	if partitions != nil {
		b = binary.BigEndian.AppendUint32(b, uint32(len(partitions)))
		for _, p := range partitions {
			b = binary.BigEndian.AppendUint32(b, uint32(p))
		}
	}
	return binary.BigEndian.AppendUint32(b, 0xffffffff) // null user data
}

func offsetCommit(group string, generation int32, member string, topic string, offsets map[int32]*string) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID, req.RetentionTimeMillis = group, generation, member, -1
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	for p := int32(0); p < 16; p++ {
		if meta, ok := offsets[p]; ok {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, int64(p)+5, -1, meta
			t.Partitions = append(t.Partitions, rp)
		}
	}
	req.Topics = append(req.Topics, t)
	return req
}

// offsetFetchGroups: v8+ shape; topics nil means all topics.
func offsetFetchGroups(group string, topics ...tp) kmsg.OffsetFetchRequestGroup {
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group, g.MemberEpoch = group, -1
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = t.topic, t.partitions
		g.Topics = append(g.Topics, rt)
	}
	return g
}

func (s *state) groups() {
	s.waitCoordinator(group1, 0)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{group1, group2}
	s.step("find-coordinator-groups", 6, fc)
	fc3 := kmsg.NewPtrFindCoordinatorRequest()
	fc3.CoordinatorKey = group1
	s.step("find-coordinator-group-v3", 3, fc3)
	s.step("find-coordinator-group-v0", 0, fc3)
	fcBad := kmsg.NewPtrFindCoordinatorRequest()
	fcBad.CoordinatorKeys, fcBad.CoordinatorType = []string{group1}, 5
	s.step("find-coordinator-invalid-type", 6, fcBad)

	s.step("offset-commit-admin", 9, offsetCommit(group1, -1, "", tA, map[int32]*string{0: sp("m0"), 1: nil, 2: sp("")}))
	s.step("offset-commit-admin-unknown-topic", 9, offsetCommit(group1, -1, "", tMissing, map[int32]*string{0: nil}))
	s.step("offset-commit-admin-unknown-partition", 9, offsetCommit(group1, -1, "", tA, map[int32]*string{9: nil}))
	s.step("offset-commit-v2", 2, offsetCommit(group1, -1, "", tA, map[int32]*string{3: sp("v2")}))
	ofAll := kmsg.NewPtrOffsetFetchRequest()
	ofAll.Groups = []kmsg.OffsetFetchRequestGroup{offsetFetchGroups(group1), offsetFetchGroups(groupNo)}
	s.step("offset-fetch-all", 9, ofAll)
	ofSome := kmsg.NewPtrOffsetFetchRequest()
	ofSome.Groups = []kmsg.OffsetFetchRequestGroup{offsetFetchGroups(group1, tp{tA, []int32{0, 1, 4, 9}}, tp{tMissing, []int32{0}})}
	s.step("offset-fetch-topics", 9, ofSome)
	of7 := kmsg.NewPtrOffsetFetchRequest()
	of7.Group, of7.Topics = group1, nil
	s.step("offset-fetch-v7-all", 7, of7)
	of1 := kmsg.NewPtrOffsetFetchRequest()
	of1.Group = group1
	of1.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: tA, Partitions: []int32{0, 1, 4}}}
	s.step("offset-fetch-v1", 1, of1)

	// one consumer member in group2
	join := func(member string, protocolType string) *kmsg.JoinGroupRequest {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = group2, 30000, 60000
		req.MemberID, req.ProtocolType, req.Reason = member, protocolType, sp("admindiff")
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", consumerBytes(tA, nil)
		req.Protocols = append(req.Protocols, p)
		return req
	}
	member := ""
	if r, ok := s.step("join-group-member-id-required", 9, join("", "consumer")).(*kmsg.JoinGroupResponse); ok {
		member = r.MemberID
	}
	generation := int32(-1)
	if r, ok := s.step("join-group", 9, join(member, "consumer")).(*kmsg.JoinGroupResponse); ok {
		generation = r.Generation
	}
	sg := kmsg.NewPtrSyncGroupRequest()
	sg.Group, sg.Generation, sg.MemberID, sg.ProtocolType, sg.Protocol = group2, generation, member, sp("consumer"), sp("range")
	sg.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: member, MemberAssignment: consumerBytes(tA, []int32{0, 1})}}
	s.step("sync-group", 5, sg)
	hb := func(gen int32, m string) *kmsg.HeartbeatRequest {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.Generation, req.MemberID = group2, gen, m
		return req
	}
	s.step("heartbeat", 4, hb(generation, member))
	s.step("heartbeat-illegal-generation", 4, hb(generation+5, member))
	s.step("heartbeat-unknown-member", 4, hb(generation, "adiff-nobody"))
	s.step("join-group-inconsistent-protocol", 9, join("", "other"))
	s.step("offset-commit-member", 9, offsetCommit(group2, generation, member, tA, map[int32]*string{0: nil}))
	s.step("offset-commit-member-illegal-generation", 9, offsetCommit(group2, generation+5, member, tA, map[int32]*string{0: nil}))
	// A member's commit to a group that does not exist: GROUP_ID_NOT_FOUND since v9, ILLEGAL_GENERATION before.
	s.step("offset-commit-unknown-group", 9, offsetCommit(groupNo, 3, "adiff-nobody", tA, map[int32]*string{0: nil}))
	s.step("offset-commit-unknown-group-v8", 8, offsetCommit(groupNo, 3, "adiff-nobody", tA, map[int32]*string{0: nil}))
	// No generation to a group with members: with a member id it is checked as a member's.
	s.step("offset-commit-no-generation-member", 9, offsetCommit(group2, -1, member, tA, map[int32]*string{0: nil}))
	s.step("offset-commit-no-generation-active-group", 9, offsetCommit(group2, -1, "", tA, map[int32]*string{0: nil}))

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups, dg.IncludeAuthorizedOperations = []string{group1, group2, groupNo}, true
	s.step("describe-groups", 5, dg)
	s.step("describe-groups-v6", 6, dg)
	s.step("describe-groups-v0", 0, dg)
	cgd := kmsg.NewPtrConsumerGroupDescribeRequest()
	cgd.Groups, cgd.IncludeAuthorizedOperations = []string{group1, group2, groupNo}, true
	s.optStep("consumer-group-describe", 0, cgd) // the 4.x admin client tries it first
	lg := func(states, types []string) *kmsg.ListGroupsRequest {
		req := kmsg.NewPtrListGroupsRequest()
		req.StatesFilter, req.TypesFilter = states, types
		return req
	}
	s.step("list-groups", 5, lg(nil, nil))
	s.step("list-groups-stable", 5, lg([]string{"Stable"}, nil))
	s.step("list-groups-empty-state", 5, lg([]string{"empty"}, nil))
	s.step("list-groups-classic", 5, lg(nil, []string{"classic"}))
	s.step("list-groups-consumer-type", 5, lg(nil, []string{"consumer"}))
	s.step("list-groups-v0", 0, lg(nil, nil))

	delGroups := func(groups ...string) *kmsg.DeleteGroupsRequest {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = groups
		return req
	}
	s.step("delete-groups-non-empty-and-unknown", 2, delGroups(group2, groupNo))
	od := func(group, topic string, partitions ...int32) *kmsg.OffsetDeleteRequest {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = group
		t := kmsg.NewOffsetDeleteRequestTopic()
		t.Topic = topic
		for _, p := range partitions {
			t.Partitions = append(t.Partitions, kmsg.OffsetDeleteRequestTopicPartition{Partition: p})
		}
		req.Topics = append(req.Topics, t)
		return req
	}
	s.step("offset-delete", 0, od(group1, tA, 1, 9))
	s.step("offset-delete-subscribed", 0, od(group2, tA, 0))
	s.step("offset-delete-unknown-group", 0, od(groupNo, tA, 0))
	s.step("offset-delete-unknown-topic", 0, od(group1, tMissing, 0))
	s.step("offset-fetch-after-offset-delete", 9, ofAll)

	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Group = group2
	lv.Members = []kmsg.LeaveGroupRequestMember{{MemberID: member, Reason: sp("done")}, {MemberID: "adiff-nobody"}}
	s.step("leave-group", 5, lv)
	s.step("describe-groups-after-leave", 5, dg)
	s.step("delete-groups", 2, delGroups(group1, group2))
	s.step("delete-groups-v0-unknown", 0, delGroups(groupNo))
	s.step("list-groups-after-delete", 5, lg(nil, nil))
}

func (s *state) txn() {
	s.waitCoordinator(txnID, 1)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorType, fc.CoordinatorKeys = 1, []string{txnID}
	s.step("find-coordinator-transaction", 6, fc)

	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis, ip.ProducerID, ip.ProducerEpoch = sp(txnID), 60000, -1, -1
	if r, ok := s.step("init-producer-id-transactional", 5, ip).(*kmsg.InitProducerIDResponse); ok {
		s.txnProducerID, s.txnEpoch = r.ProducerID, r.ProducerEpoch
	}
	ipBad := kmsg.NewPtrInitProducerIDRequest()
	ipBad.TransactionalID, ipBad.TransactionTimeoutMillis, ipBad.ProducerID, ipBad.ProducerEpoch = sp("adiff-txn-2"), 86_400_001, -1, -1
	s.step("init-producer-id-timeout-too-large", 5, ipBad)

	apt := func(epoch int16, topic string, partitions ...int32) *kmsg.AddPartitionsToTxnRequest {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = txnID, s.txnProducerID, epoch
		req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: topic, Partitions: partitions}}
		return req
	}
	s.step("add-partitions-to-txn", 3, apt(s.txnEpoch, tA, 2))
	s.step("add-partitions-to-txn-unknown-topic", 3, apt(s.txnEpoch, tMissing, 0))
	s.step("add-partitions-to-txn-wrong-epoch", 3, apt(s.txnEpoch+3, tA, 2))
	s.step("produce-transactional", 11, produceReq(sp(txnID),
		map[int32][]byte{2: batch(s.txnProducerID, s.txnEpoch, 0, true, recs("t2", 4, ts0+300_000))}, tA))
	// A partition not added to the transaction (KIP-890 part 1 verification): refused, with
	// TRANSACTION_ABORTABLE from Produce v11 and INVALID_TXN_STATE before.
	notAdded := func() *kmsg.ProduceRequest {
		return produceReq(sp(txnID), map[int32][]byte{1: batch(s.txnProducerID, s.txnEpoch, 0, true, recs("t1", 1, ts0+300_000))}, tA)
	}
	s.step("produce-transactional-not-added", 11, notAdded())
	s.step("produce-transactional-not-added-v10", 10, notAdded())

	// Ending a transaction that never started (protocol 1): refused, commit or abort.
	ipEmpty := kmsg.NewPtrInitProducerIDRequest()
	ipEmpty.TransactionalID, ipEmpty.TransactionTimeoutMillis, ipEmpty.ProducerID, ipEmpty.ProducerEpoch = sp("adiff-txn-3"), 60000, -1, -1
	if r, ok := s.step("init-producer-id-empty-txn", 5, ipEmpty).(*kmsg.InitProducerIDResponse); ok {
		for _, commit := range []bool{false, true} {
			etEmpty := kmsg.NewPtrEndTxnRequest()
			etEmpty.TransactionalID, etEmpty.ProducerID, etEmpty.ProducerEpoch, etEmpty.Commit = "adiff-txn-3", r.ProducerID, r.ProducerEpoch, commit
			s.step(fmt.Sprintf("end-txn-empty-commit-%v", commit), 4, etEmpty)
		}
	}

	// transactional offsets of a consumer group (send_offsets_to_transaction)
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = txnID, s.txnProducerID, s.txnEpoch, group3
	s.step("add-offsets-to-txn", 4, ao)
	toc := func(topic string) *kmsg.TxnOffsetCommitRequest {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txnID, group3, s.txnProducerID, s.txnEpoch
		req.Generation, req.MemberID = -1, ""
		req.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{
			{Partition: 0, Offset: 4, LeaderEpoch: -1, Metadata: sp("txn")}, {Partition: 1, Offset: 2, LeaderEpoch: -1}}}}
		return req
	}
	s.step("txn-offset-commit", 4, toc(tA))
	s.step("txn-offset-commit-unknown-topic", 4, toc(tMissing))
	of3 := kmsg.NewPtrOffsetFetchRequest()
	of3.Groups, of3.RequireStable = []kmsg.OffsetFetchRequestGroup{offsetFetchGroups(group3)}, false
	s.step("offset-fetch-open-txn", 9, of3)

	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{txnID, "adiff-notxn"}
	s.step("describe-transactions-ongoing", 0, dt)
	lt := func(states []string, pids []int64, pattern *string) *kmsg.ListTransactionsRequest {
		req := kmsg.NewPtrListTransactionsRequest()
		req.StateFilters, req.ProducerIDFilters, req.DurationFilterMillis, req.TransactionalIDPattern = states, pids, -1, pattern
		return req
	}
	s.step("list-transactions", 2, lt(nil, nil, nil))
	s.step("list-transactions-ongoing", 2, lt([]string{"Ongoing"}, nil, nil))
	s.step("list-transactions-unknown-state", 2, lt([]string{"NoSuchState"}, nil, nil))
	s.step("list-transactions-producer-id", 2, lt(nil, []int64{s.txnProducerID}, nil))
	s.step("list-transactions-pattern", 2, lt(nil, nil, sp("adiff-.*")))
	s.step("list-transactions-invalid-pattern", 2, lt(nil, nil, sp("adiff-(")))
	s.step("list-transactions-v0", 0, lt(nil, nil, nil))
	dp := kmsg.NewPtrDescribeProducersRequest()
	dp.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: tA, Partitions: []int32{0, 2, 3, 9}}, {Topic: tMissing, Partitions: []int32{0}}}
	s.step("describe-producers", 0, dp)
	s.step("list-offsets-read-committed-open-txn", 10, listOffsets(1, tA, -1, 2))
	s.step("list-offsets-read-uncommitted-open-txn", 10, listOffsets(0, tA, -1, 2))

	et := kmsg.NewPtrEndTxnRequest()
	et.TransactionalID, et.ProducerID, et.ProducerEpoch, et.Commit = txnID, s.txnProducerID, s.txnEpoch, true
	s.step("end-txn-commit", 4, et)
	s.waitUntil("transaction committed", func() bool {
		r, _ := s.quiet(0, dt).(*kmsg.DescribeTransactionsResponse)
		return r != nil && len(r.TransactionStates) > 0 && r.TransactionStates[0].State == "CompleteCommit"
	})
	s.waitUntil("last stable offset", func() bool {
		r, _ := s.quiet(10, listOffsets(1, tA, -1, 2)).(*kmsg.ListOffsetsResponse)
		return r != nil && len(r.Topics) == 1 && r.Topics[0].Partitions[0].Offset == 5
	})
	s.step("describe-transactions-committed", 0, dt)
	s.step("list-transactions-after-commit", 2, lt(nil, nil, nil))
	s.step("end-txn-commit-again", 4, et)
	etAbort := *et
	etAbort.Commit = false
	s.step("end-txn-abort-after-commit", 4, &etAbort)
	s.step("list-offsets-read-committed-after-commit", 10, listOffsets(1, tA, -1, 2))
	s.step("offset-fetch-after-commit", 9, of3)
	s.step("describe-producers-after-commit", 0, dp)
}

func (s *state) deleteTopics() {
	ids := map[string][16]byte{}
	if m := s.metadata(tV4, tAssign); m != nil {
		for _, t := range m.Topics {
			ids[*t.Topic] = t.TopicID
		}
	}
	dt := func(names ...string) *kmsg.DeleteTopicsRequest {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TimeoutMillis, req.TopicNames = 30000, names
		for _, n := range names {
			t := kmsg.NewDeleteTopicsRequestTopic()
			t.Topic = sp(n)
			req.Topics = append(req.Topics, t)
		}
		return req
	}
	byID := func(name *string, id [16]byte) *kmsg.DeleteTopicsRequest {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TimeoutMillis = 30000
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.Topic, t.TopicID = name, id
		req.Topics = append(req.Topics, t)
		return req
	}
	s.step("delete-topics", 6, dt(tB))
	s.waitTopics(-1, tB)
	s.step("delete-topics-unknown", 6, dt(tMissing))
	s.step("delete-topics-by-id", 6, byID(nil, ids[tV4]))
	s.waitTopics(-1, tV4)
	unknownID := [16]byte{0xad, 0xd1, 0xff, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
	s.step("delete-topics-unknown-id", 6, byID(nil, unknownID))
	// requests Kafka refuses whole: on their own topics, so that a broker that deletes
	// something here does not change the steps after them
	s.quiet(7, createTopics(false, ctTopic("adiff-del1", 1, 1), ctTopic("adiff-del2", 1, 1)))
	s.waitTopics(1, "adiff-del1", "adiff-del2")
	if m := s.metadata("adiff-del1"); m != nil && len(m.Topics) == 1 {
		ids["adiff-del1"] = m.Topics[0].TopicID
	}
	s.step("delete-topics-name-and-id", 6, byID(sp("adiff-del1"), ids["adiff-del1"]))
	s.step("delete-topics-neither-name-nor-id", 6, byID(nil, [16]byte{}))
	s.step("delete-topics-same-name-twice", 6, dt("adiff-del2", "adiff-del2"))
	s.dropTopics("adiff-del1", "adiff-del2")
	s.step("delete-topics-v4", 4, dt(tAssign))
	s.waitTopics(-1, tAssign)
	s.step("delete-topics-v1-unknown", 1, dt(tMissing))
	s.step("delete-topics-internal", 6, dt("__consumer_offsets"))
	s.step("delete-topics-last", 6, dt(tA))
	s.waitTopics(-1, tA)
	s.step("metadata-all-at-end", 12, metadataReq(false))
}

// dropTopics deletes topics if they exist (unprinted) and waits until they are gone.
func (s *state) dropTopics(names ...string) {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis, req.TopicNames = 30000, names
	for _, n := range names {
		t := kmsg.NewDeleteTopicsRequestTopic()
		t.Topic = sp(n)
		req.Topics = append(req.Topics, t)
	}
	s.quiet(6, req)
	s.waitTopics(-1, names...)
}
