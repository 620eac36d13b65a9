// The request sequence. Every step pins its version explicitly; the versions are within what
// both Ketch and Apache Kafka 4.1 advertise (the test checks that against both ApiVersions).

package main

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ---------------------------------------------------------------------------------------------
// request builders
// ---------------------------------------------------------------------------------------------

// ctTopic: a CreateTopics entry; cfg holds name, value pairs.
func ctTopic(name string, partitions int32, rf int16, cfg ...string) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, partitions, rf
	for i := 0; i+1 < len(cfg); i += 2 {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = cfg[i], sp(cfg[i+1])
		t.Configs = append(t.Configs, c)
	}
	return t
}

func ctAssigned(name string, replicas ...[]int32) kmsg.CreateTopicsRequestTopic {
	t := ctTopic(name, -1, -1)
	for i, r := range replicas {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(i), r
		t.ReplicaAssignment = append(t.ReplicaAssignment, a)
	}
	return t
}

func createTopics(validateOnly bool, topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Topics, req.TimeoutMillis, req.ValidateOnly = topics, 30000, validateOnly
	return req
}

// dcRes: a DescribeConfigs resource; no names means all configs (null).
func dcRes(typ kmsg.ConfigResourceType, name string, names ...string) kmsg.DescribeConfigsRequestResource {
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, name
	if len(names) > 0 {
		r.ConfigNames = names
	}
	return r
}

func describeConfigs(synonyms, docs bool, res ...kmsg.DescribeConfigsRequestResource) *kmsg.DescribeConfigsRequest {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.Resources, req.IncludeSynonyms, req.IncludeDocumentation = res, synonyms, docs
	return req
}

// alterConfigs: one resource, name=value pairs ("name=" with no "=" value means null).
func alterConfigs(validateOnly bool, typ kmsg.ConfigResourceType, name string, kv ...string) *kmsg.AlterConfigsRequest {
	req := kmsg.NewPtrAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, name
	for _, s := range kv {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		k, v, ok := strings.Cut(s, "=")
		c.Name = k
		if ok {
			c.Value = sp(v)
		}
		r.Configs = append(r.Configs, c)
	}
	req.Resources = append(req.Resources, r)
	return req
}

type incOp struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp
	value *string
}

func incAlter(validateOnly bool, typ kmsg.ConfigResourceType, name string, ops ...incOp) *kmsg.IncrementalAlterConfigsRequest {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, name
	for _, o := range ops {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = o.name, o.op, o.value
		r.Configs = append(r.Configs, c)
	}
	req.Resources = append(req.Resources, r)
	return req
}

func createPartitions(validateOnly bool, topic string, count int32, assignment ...[]int32) *kmsg.CreatePartitionsRequest {
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis, req.ValidateOnly = 30000, validateOnly
	t := kmsg.NewCreatePartitionsRequestTopic()
	t.Topic, t.Count = topic, count
	for _, a := range assignment {
		ra := kmsg.NewCreatePartitionsRequestTopicAssignment()
		ra.Replicas = a
		t.Assignment = append(t.Assignment, ra)
	}
	req.Topics = append(req.Topics, t)
	return req
}

func metadataReq(authorizedOps bool, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.IncludeTopicAuthorizedOperations = authorizedOps
	if len(topics) == 0 {
		req.Topics = nil // all topics
		return req
	}
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = sp(t)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// listOffsets: one timestamp for each given partition of topic.
func listOffsets(isolation int8, topic string, ts int64, partitions ...int32) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID, req.IsolationLevel, req.TimeoutMillis = -1, isolation, 10000
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = topic
	for _, p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch, rp.MaxNumOffsets = p, ts, -1, 1
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	return req
}

// tp: a topic and some of its partitions (the kmsg "Topic + []int32" shapes).
type tp struct {
	topic      string
	partitions []int32
}

// ---------------------------------------------------------------------------------------------
// scenarios
// ---------------------------------------------------------------------------------------------

func (s *state) apiVersions() {
	for _, v := range []int16{0, 3, 4} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "admindiff", "1.0"
		s.step("api-versions", v, req)
	}
	// KIP-511: an ApiVersions version the broker does not know is answered with a v0 body
	// (UNSUPPORTED_VERSION and the version table).
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "admindiff", "1.0"
	s.stepDecodeAt("api-versions-unsupported-v5", 5, 0, req)
	s.step("metadata-all-empty-broker", 12, metadataReq(false))
	s.features()
}

// fu: one UpdateFeatures entry (upgrade type 1 upgrade, 2 safe downgrade, 3 unsafe downgrade).
func fu(name string, level int16, upgradeType int8) kmsg.UpdateFeaturesRequestFeatureUpdate {
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = name, level, upgradeType
	u.AllowDowngrade = upgradeType != 1
	return u
}

func updateFeatures(validateOnly bool, updates ...kmsg.UpdateFeaturesRequestFeatureUpdate) *kmsg.UpdateFeaturesRequest {
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.TimeoutMillis, req.ValidateOnly, req.FeatureUpdates = 30000, validateOnly, updates
	return req
}

// transactionVersion: the finalized level of transaction.version in ApiVersions (unprinted).
func (s *state) transactionVersion() int16 {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "admindiff", "1.0"
	r, ok := s.quiet(4, req).(*kmsg.ApiVersionsResponse)
	if !ok {
		return -1
	}
	for _, f := range r.FinalizedFeatures {
		if f.Name == "transaction.version" {
			return f.MaxVersionLevel
		}
	}
	return 0
}

// features: UpdateFeatures refusals (one bad update refuses the request, with Kafka's
// messages), validate-only, then a real downgrade of transaction.version to 1 and back to 2.
func (s *state) features() {
	const tv = "transaction.version"
	s.step("update-features-validate-only", 2, updateFeatures(true, fu(tv, 1, 2)))
	s.step("update-features-downgrade-as-upgrade", 2, updateFeatures(false, fu(tv, 1, 1)))
	s.step("update-features-v0-downgrade-not-allowed", 0, updateFeatures(false, fu(tv, 1, 1)))
	s.step("update-features-unknown-feature", 2, updateFeatures(false, fu("no.such.feature", 1, 1)))
	s.step("update-features-beyond-supported", 2, updateFeatures(false, fu(tv, 3, 1)))
	s.step("update-features-negative", 2, updateFeatures(false, fu(tv, -1, 2)))
	s.step("update-features-upgrade-as-downgrade", 2, updateFeatures(false, fu(tv, 2, 2)))
	s.step("update-features-bad-upgrade-type", 2, updateFeatures(false, fu(tv, 1, 9)))
	s.step("update-features-one-bad-refuses-all", 2, updateFeatures(false, fu(tv, 1, 2), fu("no.such.feature", 1, 1)))
	s.step("update-features-unchanged-v1", 1, updateFeatures(false, fu(tv, 2, 1)))
	s.step("update-features-downgrade-v1", 1, updateFeatures(false, fu(tv, 1, 2)))
	s.waitUntil("transaction.version 1 in ApiVersions", func() bool { return s.transactionVersion() == 1 })
	s.step("update-features-upgrade-v2", 2, updateFeatures(false, fu(tv, 2, 1)))
	s.waitUntil("transaction.version 2 in ApiVersions", func() bool { return s.transactionVersion() == 2 })
}

func (s *state) topics() {
	s.step("create-topics-ok", 7, createTopics(false,
		ctTopic(tA, 3, 1, "retention.ms", "3600000", "max.message.bytes", "2000000"),
		ctTopic(tB, -1, -1),
		ctAssigned(tAssign, []int32{1}, []int32{1})))
	s.waitTopics(3, tA)
	s.waitTopics(1, tB)
	s.waitTopics(2, tAssign)
	s.step("create-topics-ok-v4", 4, createTopics(false, ctTopic(tV4, 2, 1, "cleanup.policy", "compact")))
	s.waitTopics(2, tV4)
	s.step("create-topics-duplicate", 7, createTopics(false, ctTopic(tA, 3, 1)))
	s.step("create-topics-duplicate-v4", 4, createTopics(false, ctTopic(tA, 3, 1)))
	s.step("create-topics-same-name-twice", 7, createTopics(false, ctTopic("adiff-twice", 1, 1), ctTopic("adiff-twice", 1, 1)))
	s.dropTopics("adiff-twice") // Kafka creates nothing here: keep the later listings comparable
	for _, c := range []struct {
		name string
		t    kmsg.CreateTopicsRequestTopic
	}{
		{"invalid-config-value", ctTopic("adiff-badcfg", 1, 1, "retention.ms", "abc")},
		{"unknown-config", ctTopic("adiff-unkcfg", 1, 1, "no.such.config", "1")},
		{"null-config-value", func() kmsg.CreateTopicsRequestTopic {
			t := ctTopic("adiff-nullcfg", 1, 1, "retention.ms", "1")
			t.Configs[0].Value = nil
			return t
		}()},
		{"zero-partitions", ctTopic("adiff-zero", 0, 1)},
		{"negative-partitions", ctTopic("adiff-neg", -5, 1)},
		{"replication-factor-3", ctTopic("adiff-rf3", 1, 3)},
		{"replication-factor-0", ctTopic("adiff-rf0", 1, 0)},
		{"invalid-name-slash", ctTopic("bad/name", 1, 1)},
		{"invalid-name-dot", ctTopic(".", 1, 1)},
		{"invalid-name-empty", ctTopic("", 1, 1)},
		{"invalid-name-too-long", ctTopic("adiff-"+strings.Repeat("x", 244), 1, 1)},
		{"assignment-unknown-broker", ctAssigned("adiff-badassign", []int32{2})},
		{"assignment-duplicate-replica", ctAssigned("adiff-dupassign", []int32{1, 1})},
		{"assignment-and-partitions", func() kmsg.CreateTopicsRequestTopic {
			t := ctAssigned("adiff-both", []int32{1})
			t.NumPartitions = 1
			return t
		}()},
		{"invalid-min-insync", ctTopic("adiff-minisr", 1, 1, "min.insync.replicas", "0")},
	} {
		s.step("create-topics-"+c.name, 7, createTopics(false, c.t))
	}
	s.step("create-topics-invalid-config-v4", 4, createTopics(false, ctTopic("adiff-badcfg", 1, 1, "retention.ms", "abc")))
	s.step("create-topics-validate-only", 7, createTopics(true,
		ctTopic("adiff-validate", 4, 1, "cleanup.policy", "compact"), ctTopic("adiff-validate-default", -1, -1)))
	s.step("create-topics-validate-only-errors", 7, createTopics(true,
		ctTopic(tA, 1, 1), ctTopic("adiff-validate-zero", 0, 1), ctTopic("adiff-validate-badcfg", 1, 1, "retention.ms", "x")))
	s.step("metadata-topics", 12, metadataReq(false, tA, tB, tAssign, tV4, "adiff-validate", tMissing))
	s.step("metadata-topics-authorized-ops", 12, metadataReq(true, tA))
	s.step("metadata-topics-v4", 4, metadataReq(false, tA, tMissing))
	s.step("metadata-topics-v1", 1, metadataReq(false, tB))
	s.step("metadata-all", 12, metadataReq(false))

	dtp := func(limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor, topics ...string) *kmsg.DescribeTopicPartitionsRequest {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		req.ResponsePartitionLimit, req.Cursor = limit, cursor
		for _, t := range topics {
			rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
			rt.Topic = t
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	s.step("describe-topic-partitions", 0, dtp(2000, nil, tA, tMissing))
	s.step("describe-topic-partitions-limit", 0, dtp(2, nil, tA, tB))
	s.step("describe-topic-partitions-cursor", 0, dtp(2000, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: tA, Partition: 2}, tA, tB))
	s.step("describe-topic-partitions-all", 0, dtp(2000, nil))

	// CreatePartitions
	s.step("create-partitions-ok", 3, createPartitions(false, tA, 5))
	s.waitTopics(5, tA)
	s.step("create-partitions-shrink", 3, createPartitions(false, tA, 2))
	s.step("create-partitions-same-count", 3, createPartitions(false, tA, 5))
	s.step("create-partitions-unknown-topic", 3, createPartitions(false, tMissing, 2))
	s.step("create-partitions-validate-only", 3, createPartitions(true, tB, 4))
	// requests Kafka refuses, on a topic of their own (dropped after them), so that a broker
	// that grows it anyway does not change later steps
	const tCP = "adiff-cp"
	s.quiet(7, createTopics(false, ctTopic(tCP, 1, 1)))
	s.waitTopics(1, tCP)
	s.step("create-partitions-assignment-count-mismatch", 3, createPartitions(false, tCP, 3, []int32{1}))
	s.step("create-partitions-assignment-unknown-broker", 3, createPartitions(false, tCP, 2, []int32{2}))
	dup := createPartitions(false, tCP, 2)
	dup.Topics = append(dup.Topics, dup.Topics[0])
	s.step("create-partitions-duplicate-topic", 3, dup)
	s.dropTopics(tCP)
	s.step("create-partitions-ok-v0", 0, createPartitions(false, tAssign, 3))
	s.waitTopics(3, tAssign)
	s.step("metadata-after-create-partitions", 12, metadataReq(false, tA, tB, tAssign))
}

func (s *state) configs() {
	T, B := kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker
	s.step("describe-configs-topic-all", 4, describeConfigs(true, true, dcRes(T, tA)))
	s.step("describe-configs-topic-all-no-synonyms", 4, describeConfigs(false, false, dcRes(T, tV4)))
	s.step("describe-configs-topic-keys", 4, describeConfigs(true, false,
		dcRes(T, tA, "retention.ms", "max.message.bytes", "cleanup.policy", "no.such.config")))
	s.step("describe-configs-topic-keys-v1", 1, describeConfigs(true, false, dcRes(T, tA, "retention.ms", "cleanup.policy", "segment.bytes")))
	// Documentation exists from v3 (Kafka fills it only when asked); v2 has neither the request
	// flag nor the response field.
	s.step("describe-configs-topic-keys-docs-v3", 3, describeConfigs(false, true, dcRes(T, tA, "retention.ms", "cleanup.policy")))
	s.step("describe-configs-topic-keys-docs-v2", 2, describeConfigs(false, true, dcRes(T, tA, "retention.ms", "cleanup.policy")))
	s.step("describe-configs-unknown-topic", 4, describeConfigs(false, false, dcRes(T, tMissing)))
	s.step("describe-configs-invalid-topic-name", 4, describeConfigs(false, false, dcRes(T, "bad/name")))
	s.step("describe-configs-broker-keys", 4, describeConfigs(true, true, dcRes(B, "1",
		"num.partitions", "log.retention.hours", "log.retention.ms", "message.max.bytes", "auto.create.topics.enable",
		"log.segment.bytes", "default.replication.factor", "min.insync.replicas", "compression.type", "no.such.config")))
	s.step("describe-configs-broker-all", 4, describeConfigs(false, false, dcRes(B, "1")))
	s.step("describe-configs-broker-default", 4, describeConfigs(false, false, dcRes(B, "", "num.partitions", "log.retention.ms")))
	s.step("describe-configs-other-broker", 4, describeConfigs(false, false, dcRes(B, "2", "num.partitions")))
	s.step("describe-configs-broker-not-a-number", 4, describeConfigs(false, false, dcRes(B, "abc", "num.partitions")))
	s.step("describe-configs-broker-logger", 4, describeConfigs(false, false, dcRes(kmsg.ConfigResourceTypeBrokerLogger, "1", "kafka.server.KafkaApis")))
	s.step("describe-configs-two-resources", 4, describeConfigs(false, false,
		dcRes(T, tB, "retention.ms"), dcRes(B, "1", "num.partitions"), dcRes(T, tMissing, "retention.ms")))

	// AlterConfigs (replaces every dynamic config of the resource)
	s.step("alter-configs-ok", 2, alterConfigs(false, T, tB, "retention.ms=7200000", "cleanup.policy=compact"))
	s.waitConfig(tB, "retention.ms", sp("7200000"))
	s.step("alter-configs-invalid-value", 2, alterConfigs(false, T, tB, "retention.ms=abc"))
	s.step("alter-configs-invalid-enum-value", 2, alterConfigs(false, T, tB, "cleanup.policy=sometimes"))
	s.step("alter-configs-unknown-topic", 2, alterConfigs(false, T, tMissing, "retention.ms=1000"))
	s.step("alter-configs-unknown-config", 2, alterConfigs(false, T, tB, "no.such.config=1"))
	s.step("alter-configs-null-value", 2, alterConfigs(false, T, tB, "retention.ms"))
	s.step("alter-configs-validate-only", 2, alterConfigs(true, T, tB, "segment.ms=100000"))
	s.step("alter-configs-broker-validate-only", 2, alterConfigs(true, B, "1", "log.cleaner.threads=2"))
	s.step("alter-configs-broker-read-only", 2, alterConfigs(true, B, "1", "broker.id=5"))
	s.step("alter-configs-ok-v0", 0, alterConfigs(false, T, tB, "retention.ms=7300000", "cleanup.policy=compact"))
	s.waitConfig(tB, "retention.ms", sp("7300000"))
	s.step("describe-configs-after-alter", 4, describeConfigs(true, false, dcRes(T, tB, "retention.ms", "cleanup.policy", "segment.ms")))

	// IncrementalAlterConfigs
	set, del, app, sub := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete,
		kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract
	s.step("incremental-alter-ok", 1, incAlter(false, T, tA,
		incOp{"retention.ms", set, sp("1000000")}, incOp{"max.message.bytes", del, nil}, incOp{"cleanup.policy", app, sp("compact")}))
	s.waitConfig(tA, "retention.ms", sp("1000000"))
	s.waitConfig(tA, "cleanup.policy", sp("delete,compact"))
	s.step("describe-configs-after-incremental", 4, describeConfigs(true, false, dcRes(T, tA, "retention.ms", "max.message.bytes", "cleanup.policy")))
	s.step("incremental-alter-subtract", 1, incAlter(false, T, tA, incOp{"cleanup.policy", sub, sp("compact")}))
	s.waitConfig(tA, "cleanup.policy", sp("delete"))
	s.step("incremental-alter-invalid-value", 1, incAlter(false, T, tA, incOp{"retention.ms", set, sp("abc")}))
	s.step("incremental-alter-unknown-topic", 1, incAlter(false, T, tMissing, incOp{"retention.ms", set, sp("1")}))
	s.step("incremental-alter-unknown-config", 1, incAlter(false, T, tA, incOp{"no.such.config", set, sp("1")}))
	s.step("incremental-alter-validate-only", 1, incAlter(true, T, tA, incOp{"segment.ms", set, sp("100000")}))
	s.step("incremental-alter-append-non-list", 1, incAlter(false, T, tA, incOp{"retention.ms", app, sp("5")}))
	s.step("incremental-alter-set-null", 1, incAlter(false, T, tA, incOp{"retention.ms", set, nil}))
	s.step("incremental-alter-unknown-op", 1, incAlter(false, T, tA, incOp{"retention.ms", 7, sp("5")}))
	s.step("incremental-alter-duplicate-key", 1, incAlter(false, T, tA,
		incOp{"retention.ms", set, sp("5000")}, incOp{"retention.ms", set, sp("6000")}))
	s.quiet(1, incAlter(false, T, tA, incOp{"retention.ms", set, sp("1000000")})) // in case it was applied
	s.waitConfig(tA, "retention.ms", sp("1000000"))
	s.step("incremental-alter-broker-validate-only", 1, incAlter(true, B, "1", incOp{"log.cleaner.threads", set, sp("2")}))
	s.step("incremental-alter-broker-read-only", 1, incAlter(true, B, "1", incOp{"broker.id", set, sp("5")}))
	s.step("incremental-alter-ok-v0", 0, incAlter(false, T, tA, incOp{"segment.ms", set, sp("86400000")}))
	s.waitConfig(tA, "segment.ms", sp("86400000"))
	s.step("incremental-alter-delete-v0", 0, incAlter(false, T, tA, incOp{"segment.ms", del, nil}))
	s.waitConfig(tA, "segment.ms", nil)
	s.step("describe-configs-topic-all-after-alters", 4, describeConfigs(false, false, dcRes(T, tA)))
}

func (s *state) data() {
	s.step("produce-plain", 11, produceReq(nil, map[int32][]byte{
		0: batch(-1, -1, -1, false, recs("p0", 10, ts0)),
		1: batch(-1, -1, -1, false, recs("p1", 5, ts0+100_000)),
	}, tA))
	s.step("produce-unknown-partition", 11, produceReq(nil, map[int32][]byte{9: batch(-1, -1, -1, false, recs("x", 1, ts0))}, tA))
	s.step("produce-unknown-topic", 11, produceReq(nil, map[int32][]byte{0: batch(-1, -1, -1, false, recs("x", 1, ts0))}, tMissing))
	// an idempotent producer (DescribeProducers shows it)
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionTimeoutMillis, ip.ProducerID, ip.ProducerEpoch = 60000, -1, -1
	// Kafka answers COORDINATOR_LOAD_IN_PROGRESS until its first block of producer ids arrives
	s.waitUntil("producer ids", func() bool {
		r, _ := s.quiet(5, ip).(*kmsg.InitProducerIDResponse)
		return r != nil && r.ErrorCode == 0
	})
	if r, ok := s.step("init-producer-id-idempotent", 5, ip).(*kmsg.InitProducerIDResponse); ok {
		s.producerID = r.ProducerID
	}
	s.step("produce-idempotent", 11, produceReq(nil, map[int32][]byte{3: batch(s.producerID, 0, 0, false, recs("i3", 3, ts0+200_000))}, tA))
	s.step("produce-idempotent-out-of-order", 11, produceReq(nil, map[int32][]byte{3: batch(s.producerID, 0, 7, false, recs("i3x", 1, ts0))}, tA))

	all := []int32{0, 1, 2, 3, 4}
	for _, c := range []struct {
		name string
		ts   int64
	}{{"earliest", -2}, {"latest", -1}, {"max-timestamp", -3}, {"earliest-local", -4}, {"latest-tiered", -5},
		{"by-timestamp", ts0 + 3500}, {"by-timestamp-after-all", ts0 + 10_000_000}} {
		s.step("list-offsets-"+c.name, 10, listOffsets(0, tA, c.ts, all...))
	}
	s.step("list-offsets-v1", 1, listOffsets(0, tA, -1, 0, 1))
	s.step("list-offsets-v5-by-timestamp", 5, listOffsets(0, tA, ts0+3500, 0))
	s.step("list-offsets-unknown-partition", 10, listOffsets(0, tA, -1, 0, 9))
	s.step("list-offsets-unknown-topic", 10, listOffsets(0, tMissing, -1, 0))
	dupLO := listOffsets(0, tA, -1, 0, 0)
	s.step("list-offsets-duplicate-partition", 10, dupLO)

	ofle := func(current, epoch int32, topic string, partitions ...int32) *kmsg.OffsetForLeaderEpochRequest {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1
		t := kmsg.NewOffsetForLeaderEpochRequestTopic()
		t.Topic = topic
		for _, p := range partitions {
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = p, current, epoch
			t.Partitions = append(t.Partitions, rp)
		}
		req.Topics = append(req.Topics, t)
		return req
	}
	s.step("offset-for-leader-epoch", 4, ofle(-1, 0, tA, 0, 1, 2))
	s.step("offset-for-leader-epoch-future-epoch", 4, ofle(-1, 5, tA, 0))
	s.step("offset-for-leader-epoch-fenced", 4, ofle(7, 0, tA, 0))
	s.step("offset-for-leader-epoch-unknown-partition", 4, ofle(-1, 0, tA, 9))
	s.step("offset-for-leader-epoch-unknown-topic", 4, ofle(-1, 0, tMissing, 0))
	s.step("offset-for-leader-epoch-v2", 2, ofle(-1, 0, tA, 0))

	delRecords := func(topic string, offsets map[int32]int64) *kmsg.DeleteRecordsRequest {
		req := kmsg.NewPtrDeleteRecordsRequest()
		req.TimeoutMillis = 10000
		t := kmsg.NewDeleteRecordsRequestTopic()
		t.Topic = topic
		for p := int32(0); p < 16; p++ {
			if o, ok := offsets[p]; ok {
				rp := kmsg.NewDeleteRecordsRequestTopicPartition()
				rp.Partition, rp.Offset = p, o
				t.Partitions = append(t.Partitions, rp)
			}
		}
		req.Topics = append(req.Topics, t)
		return req
	}
	s.step("delete-records", 2, delRecords(tA, map[int32]int64{0: 3, 2: -1}))
	s.step("delete-records-beyond-high-watermark", 2, delRecords(tA, map[int32]int64{1: 100}))
	s.step("delete-records-unknown-partition", 2, delRecords(tA, map[int32]int64{9: 0}))
	s.step("delete-records-unknown-topic", 2, delRecords(tMissing, map[int32]int64{0: 0}))
	s.step("delete-records-v0", 0, delRecords(tA, map[int32]int64{1: 1}))
	s.step("list-offsets-earliest-after-delete-records", 10, listOffsets(0, tA, -2, all...))

	dld := func(topics ...tp) *kmsg.DescribeLogDirsRequest {
		req := kmsg.NewPtrDescribeLogDirsRequest()
		for _, t := range topics {
			rt := kmsg.NewDescribeLogDirsRequestTopic()
			rt.Topic, rt.Partitions = t.topic, t.partitions
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	all4 := dld()
	all4.Topics = nil
	s.step("describe-log-dirs-all", 4, all4)
	s.step("describe-log-dirs-topic", 4, dld(tp{tA, []int32{0, 1, 9}}, tp{tMissing, []int32{0}}))
	s.step("describe-log-dirs-topic-v1", 1, dld(tp{tA, []int32{0}}))

	// AlterReplicaLogDirs: the broker's own (only) log dir, as DescribeLogDirs reports it.
	dir := ""
	if r, ok := s.quiet(4, all4).(*kmsg.DescribeLogDirsResponse); ok && len(r.Dirs) > 0 {
		dir = r.Dirs[0].Dir
	}
	ard := func(path string, topic string, partition int32) *kmsg.AlterReplicaLogDirsRequest {
		req := kmsg.NewPtrAlterReplicaLogDirsRequest()
		d := kmsg.NewAlterReplicaLogDirsRequestDir()
		d.Dir = path
		t := kmsg.NewAlterReplicaLogDirsRequestDirTopic()
		t.Topic, t.Partitions = topic, []int32{partition}
		d.Topics = append(d.Topics, t)
		req.Dirs = append(req.Dirs, d)
		return req
	}
	s.optStep("alter-replica-log-dirs-same-dir", 2, ard(dir, tA, 0))
	s.optStep("alter-replica-log-dirs-same-dir-v1", 1, ard(dir, tA, 1))
	s.optStep("alter-replica-log-dirs-unknown-dir", 2, ard("/no/such/log/dir", tA, 0))
	s.optStep("alter-replica-log-dirs-unknown-dir-unknown-topic", 2, ard("/no/such/log/dir", tMissing, 0))
	s.optStep("alter-replica-log-dirs-trailing-slash", 2, ard(dir+"/", tA, 0))
	s.optStep("alter-replica-log-dirs-unknown-partition", 2, ard(dir, tA, 9))
	s.optStep("alter-replica-log-dirs-unknown-topic", 2, ard(dir, tMissing, 0))
}

func (s *state) cluster() {
	dc := func(endpointType int8, ops bool) *kmsg.DescribeClusterRequest {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.EndpointType, req.IncludeClusterAuthorizedOperations = endpointType, ops
		return req
	}
	s.step("describe-cluster", 2, dc(1, false))
	s.step("describe-cluster-authorized-ops", 2, dc(1, true))
	s.step("describe-cluster-controllers", 2, dc(2, false))
	s.step("describe-cluster-v0", 0, dc(1, false))

	elect := func(typ int8, topics ...tp) *kmsg.ElectLeadersRequest {
		req := kmsg.NewPtrElectLeadersRequest()
		req.ElectionType, req.TimeoutMillis = typ, 10000
		for _, t := range topics {
			rt := kmsg.NewElectLeadersRequestTopic()
			rt.Topic, rt.Partitions = t.topic, t.partitions
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	s.step("elect-leaders-preferred", 2, elect(0, tp{tA, []int32{0, 1}}))
	s.step("elect-leaders-unclean", 2, elect(1, tp{tA, []int32{0}}))
	s.step("elect-leaders-unknown-topic", 2, elect(0, tp{tMissing, []int32{0}}))
	s.step("elect-leaders-unknown-partition", 2, elect(0, tp{tA, []int32{9}}))
	allElect := elect(0)
	allElect.Topics = nil
	s.step("elect-leaders-all", 2, allElect)
	s.step("elect-leaders-v0", 0, elect(0, tp{tA, []int32{0}}))

	apr := func(topic string, partition int32, replicas []int32) *kmsg.AlterPartitionAssignmentsRequest {
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		req.TimeoutMillis = 10000
		t := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		t.Topic = topic
		p := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		p.Partition, p.Replicas = partition, replicas
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		return req
	}
	s.step("alter-partition-reassignments-same-replicas", 0, apr(tA, 0, []int32{1}))
	s.step("alter-partition-reassignments-cancel-none", 0, apr(tA, 1, nil))
	s.step("alter-partition-reassignments-unknown-broker", 0, apr(tA, 0, []int32{2}))
	s.step("alter-partition-reassignments-duplicate-replica", 0, apr(tA, 0, []int32{1, 1}))
	s.step("alter-partition-reassignments-empty", 0, apr(tA, 0, []int32{}))
	s.step("alter-partition-reassignments-unknown-topic", 0, apr(tMissing, 0, []int32{1}))
	s.step("alter-partition-reassignments-unknown-partition", 0, apr(tA, 9, []int32{1}))
	lpr := kmsg.NewPtrListPartitionReassignmentsRequest()
	lpr.TimeoutMillis, lpr.Topics = 10000, nil
	s.step("list-partition-reassignments-all", 0, lpr)
	lpr2 := kmsg.NewPtrListPartitionReassignmentsRequest()
	lpr2.TimeoutMillis = 10000
	for _, t := range []tp{{tA, []int32{0, 9}}, {tMissing, []int32{0}}} {
		rt := kmsg.NewListPartitionReassignmentsRequestTopic()
		rt.Topic, rt.Partitions = t.topic, t.partitions
		lpr2.Topics = append(lpr2.Topics, rt)
	}
	s.step("list-partition-reassignments-topics", 0, lpr2)

	// Admin APIs Ketch may not serve yet (only compared once it advertises them)
	dq := kmsg.NewPtrDescribeClientQuotasRequest()
	dq.Components = []kmsg.DescribeClientQuotasRequestComponent{}
	s.optStep("describe-client-quotas", 1, dq)
	aq := kmsg.NewPtrAlterClientQuotasRequest()
	aq.ValidateOnly = true
	aq.Entries = []kmsg.AlterClientQuotasRequestEntry{{
		Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: sp("alice")}},
		Ops:    []kmsg.AlterClientQuotasRequestEntryOp{{Key: "consumer_byte_rate", Value: 1024}}}}
	s.optStep("alter-client-quotas-validate-only", 1, aq)
	ds := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	ds.Users = nil // all users
	s.optStep("describe-user-scram-credentials", 0, ds)
	// ListConfigResources (KIP-1142): each resource type alone, all of them, and v0 (client
	// metrics only); 1 is not a config resource type.
	for _, types := range [][]int8{{2, 4, 16}, {}, {2}, {4}, {8}, {16}, {32}, {1}} {
		lcr := kmsg.NewPtrListConfigResourcesRequest()
		lcr.ResourceTypes = types
		s.optStep(fmt.Sprintf("list-config-resources-%v", types), 1, lcr)
	}
	s.optStep("list-config-resources-v0", 0, kmsg.NewPtrListConfigResourcesRequest())

	// ACLs: no authorizer on either broker
	da := kmsg.NewPtrDescribeACLsRequest()
	da.ResourceType, da.ResourcePatternType, da.Operation, da.PermissionType = kmsg.ACLResourceTypeAny,
		kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	s.step("describe-acls", 3, da)
	s.step("describe-acls-v1", 1, da)
	ca := kmsg.NewPtrCreateACLsRequest()
	cc := kmsg.NewCreateACLsRequestCreation()
	cc.ResourceType, cc.ResourceName, cc.ResourcePatternType = kmsg.ACLResourceTypeTopic, tA, kmsg.ACLResourcePatternTypeLiteral
	cc.Principal, cc.Host, cc.Operation, cc.PermissionType = "User:alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	ca.Creations = append(ca.Creations, cc)
	s.step("create-acls", 3, ca)
	dla := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, sp(tA), kmsg.ACLResourcePatternTypeLiteral
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dla.Filters = append(dla.Filters, f)
	s.step("delete-acls", 3, dla)
}
