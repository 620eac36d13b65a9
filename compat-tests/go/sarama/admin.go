// The admin and topic-configs scenarios of the sarama check: ClusterAdmin topic,
// config, partition and record calls.

package main

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

func scenarioAdmin() {
	admin, err := sarama.NewClusterAdmin(brokers(), newConfig())
	check(err, "NewClusterAdmin")
	defer admin.Close()

	bs, ctrl, err := admin.DescribeCluster()
	check(err, "DescribeCluster")
	if len(bs) != 1 {
		failf("DescribeCluster: %d brokers, want 1", len(bs))
	}
	id := bs[0].ID()
	if ctrl != id {
		// a single node: the controller the client sees is the broker itself
		failf("DescribeCluster: controller %d, broker %d", ctrl, id)
	}
	okf("DescribeCluster: broker %d at %s, controller %d", id, bs[0].Addr(), ctrl)

	topic := "sarama-admin-" + runID
	configs := map[string]*string{
		"retention.ms":      strp("3600000"),
		"max.message.bytes": strp("2000000"),
		"cleanup.policy":    strp("delete"),
	}
	// validateOnly creates nothing
	err = admin.CreateTopic(topic+"-v", &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1, ConfigEntries: configs}, true)
	check(err, "CreateTopic validateOnly")
	createTopic(admin, topic, 2, configs)
	expectKError(admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false),
		sarama.ErrTopicAlreadyExists, "CreateTopic of an existing topic")
	expectKError(admin.CreateTopic(topic+"-badcfg", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.ms": strp("not-a-number")}}, false),
		sarama.ErrInvalidConfig, "CreateTopic with retention.ms=not-a-number")
	expectKError(admin.CreateTopic(topic+"-rf3", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 3}, false),
		sarama.ErrInvalidReplicationFactor, "CreateTopic with replication factor 3 on one broker")
	okf("CreateTopic %s with configs %v; validateOnly, duplicate, bad config and replication factor 3 refused as Kafka does",
		topic, keys(configs))

	// ListTopics
	lt, err := admin.ListTopics()
	check(err, "ListTopics")
	for _, bad := range []string{topic + "-v", topic + "-badcfg", topic + "-rf3"} {
		if _, ok := lt[bad]; ok {
			failf("ListTopics lists %s, which must not have been created", bad)
		}
	}
	td, ok := lt[topic]
	if !ok {
		failf("ListTopics does not list %s (%v)", topic, keys(lt))
	}
	if td.NumPartitions != 2 || td.ReplicationFactor != 1 || len(td.ReplicaAssignment) != 2 {
		failf("ListTopics %s: %d partitions RF %d assignment %v, want 2, 1, 2 entries", topic, td.NumPartitions,
			td.ReplicationFactor, td.ReplicaAssignment)
	}
	for p, r := range td.ReplicaAssignment {
		if len(r) != 1 || r[0] != id {
			failf("ListTopics %s: partition %d replicas %v, want [%d]", topic, p, r, id)
		}
	}
	gotCfg := map[string]string{}
	for k, v := range td.ConfigEntries {
		gotCfg[k] = *v
	}
	for k, v := range configs {
		if gotCfg[k] != *v {
			failf("ListTopics %s: non-default configs %v, want %s=%s among them", topic, gotCfg, k, *v)
		}
	}
	okf("ListTopics: %s with 2 partitions, RF 1, replicas [%d], non-default configs %v", topic, id, gotCfg)

	// DescribeTopics
	md, err := admin.DescribeTopics([]string{topic, topic + "-missing"})
	check(err, "DescribeTopics")
	byName := map[string]*sarama.TopicMetadata{}
	for _, t := range md {
		byName[t.Name] = t
	}
	if t := byName[topic+"-missing"]; t == nil || t.Err != sarama.ErrUnknownTopicOrPartition {
		failf("DescribeTopics of a missing topic: %+v, want UNKNOWN_TOPIC_OR_PARTITION", t)
	}
	checkTopicMD := func(t *sarama.TopicMetadata, n int) {
		if t == nil || t.Err != sarama.ErrNoError || t.IsInternal || len(t.Partitions) != n {
			failf("DescribeTopics %s: %+v, want %d partitions and no error", topic, t, n)
		}
		seen := map[int32]bool{}
		for _, p := range t.Partitions {
			seen[p.ID] = true
			if p.Err != sarama.ErrNoError || p.Leader != id || !sameParts(p.Replicas, []int32{id}) || !sameParts(p.Isr, []int32{id}) {
				failf("DescribeTopics %s partition %d: err %v leader %d replicas %v isr %v, want leader/replica/isr %d",
					topic, p.ID, p.Err, p.Leader, p.Replicas, p.Isr, id)
			}
		}
		for p := int32(0); p < int32(n); p++ {
			if !seen[p] {
				failf("DescribeTopics %s: partition %d missing", topic, p)
			}
		}
	}
	checkTopicMD(byName[topic], 2)
	okf("DescribeTopics: 2 partitions led by broker %d (replicas, ISR); a missing topic is UNKNOWN_TOPIC_OR_PARTITION (not auto-created)", id)

	// DescribeConfig
	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	check(err, "DescribeConfig topic")
	byCfg := map[string]sarama.ConfigEntry{}
	for _, e := range entries {
		byCfg[e.Name] = e
	}
	for k, v := range configs {
		e, ok := byCfg[k]
		if !ok || e.Value != *v || e.Default || e.ReadOnly || e.Source != sarama.SourceTopic {
			failf("DescribeConfig %s: %s = %+v, want value %s, not default, not read-only, source topic", topic, k, e, *v)
		}
	}
	// (min.insync.replicas is not among them: Kafka 4.x's controller sets it as a cluster-level
	// dynamic default, so its source is not DEFAULT_CONFIG there)
	for k, v := range map[string]string{"compression.type": "producer", "message.timestamp.type": "CreateTime"} {
		e, ok := byCfg[k]
		if !ok || e.Value != v || !e.Default || e.Source != sarama.SourceDefault {
			failf("DescribeConfig %s: %s = %+v, want the default %q with source default", topic, k, e, v)
		}
	}
	// the core ones every client reads (the complete list is the topic-configs scenario)
	for _, k := range []string{"segment.bytes", "segment.ms", "retention.bytes", "min.insync.replicas", "delete.retention.ms",
		"min.compaction.lag.ms", "max.compaction.lag.ms", "min.cleanable.dirty.ratio"} {
		if _, ok := byCfg[k]; !ok {
			failf("DescribeConfig %s: no %s entry", topic, k)
		}
	}
	filtered, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic,
		ConfigNames: []string{"retention.ms", "compression.type"}})
	check(err, "DescribeConfig topic filtered")
	if len(filtered) != 2 {
		names := []string{}
		for _, e := range filtered {
			names = append(names, e.Name)
		}
		failf("DescribeConfig with ConfigNames [retention.ms compression.type]: %v", names)
	}
	brokerCfg, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.BrokerResource, Name: strconv.Itoa(int(id))})
	check(err, "DescribeConfig broker")
	var np *sarama.ConfigEntry
	for i := range brokerCfg {
		if brokerCfg[i].Name == "num.partitions" {
			np = &brokerCfg[i]
		}
	}
	if np == nil {
		failf("DescribeConfig broker %d: no num.partitions among %d entries", id, len(brokerCfg))
	}
	if _, err := strconv.Atoi(np.Value); err != nil {
		failf("DescribeConfig broker %d: num.partitions = %q", id, np.Value)
	}
	okf("DescribeConfig: %d topic entries (ours from the topic, defaults flagged), ConfigNames filter, broker %d (%d entries, num.partitions=%s)",
		len(entries), id, len(brokerCfg), np.Value)

	// CreatePartitions
	check(admin.CreatePartitions(topic, 4, nil, false), "CreatePartitions 2 -> 4")
	waitFor("4 partitions", func() bool {
		md, err := admin.DescribeTopics([]string{topic})
		return err == nil && len(md) == 1 && len(md[0].Partitions) == 4
	})
	md, err = admin.DescribeTopics([]string{topic})
	check(err, "DescribeTopics")
	checkTopicMD(md[0], 4)
	check(admin.CreatePartitions(topic, 6, nil, true), "CreatePartitions validateOnly 4 -> 6")
	expectKError(admin.CreatePartitions(topic, 3, nil, false), sarama.ErrInvalidPartitions, "CreatePartitions 4 -> 3")
	expectKError(admin.CreatePartitions(topic, 4, nil, false), sarama.ErrInvalidPartitions, "CreatePartitions 4 -> 4")
	expectKError(admin.CreatePartitions(topic+"-missing", 4, nil, false), sarama.ErrUnknownTopicOrPartition, "CreatePartitions of a missing topic")
	md, err = admin.DescribeTopics([]string{topic})
	check(err, "DescribeTopics")
	checkTopicMD(md[0], 4)
	okf("CreatePartitions 2 -> 4 (new partitions led by %d); validateOnly to 6 changes nothing; 4 -> 3, 4 -> 4 and a missing topic refused", id)

	// DeleteRecords
	cfg := newConfig()
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	prod, err := sarama.NewSyncProducer(brokers(), cfg)
	check(err, "NewSyncProducer")
	recs := map[int32][]*rec{}
	for _, p := range []int32{0, 3} {
		for i := 0; i < 10; i++ {
			r := makeRec(fmt.Sprintf("del-p%d", p), i)
			m := r.message(topic)
			m.Partition = p
			_, off, err := prod.SendMessage(m)
			check(err, "SendMessage")
			if off != int64(i) {
				failf("partition %d: record %d acked at offset %d", p, i, off)
			}
			recs[p] = append(recs[p], r)
		}
	}
	check(prod.Close(), "SyncProducer.Close")
	check(admin.DeleteRecords(topic, map[int32]int64{0: 4, 3: 10}), "DeleteRecords p0 < 4, p3 < 10")
	err = admin.DeleteRecords(topic, map[int32]int64{1: 1})
	expectKError(err, sarama.ErrOffsetOutOfRange, "DeleteRecords beyond the high watermark")
	lo, err := admin.ListOffsets(map[string]map[int32]int64{topic: {0: sarama.OffsetOldest, 3: sarama.OffsetOldest, 1: sarama.OffsetOldest}}, nil)
	check(err, "ListOffsets oldest")
	hi, err := admin.ListOffsets(map[string]map[int32]int64{topic: {0: sarama.OffsetNewest, 3: sarama.OffsetNewest}}, nil)
	check(err, "ListOffsets newest")
	for p, want := range map[int32]int64{0: 4, 3: 10, 1: 0} {
		r := lo[topic][p]
		if r == nil || (r.Err != nil && !errors.Is(r.Err, sarama.ErrNoError)) || r.Offset != want {
			failf("ListOffsets oldest partition %d: %+v, want %d", p, r, want)
		}
	}
	for p, want := range map[int32]int64{0: 10, 3: 10} {
		r := hi[topic][p]
		if r == nil || (r.Err != nil && !errors.Is(r.Err, sarama.ErrNoError)) || r.Offset != want {
			failf("ListOffsets newest partition %d: %+v, want %d", p, r, want)
		}
	}
	ccfg := newConfig()
	ccfg.Consumer.Return.Errors = true
	cons, err := sarama.NewConsumer(brokers(), ccfg)
	check(err, "NewConsumer")
	pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
	check(err, "ConsumePartition(0, OffsetOldest)")
	for o := int64(4); o < 10; o++ {
		select {
		case m := <-pc.Messages():
			if m.Offset != o {
				failf("after DeleteRecords: partition 0 consumed offset %d, want %d", m.Offset, o)
			}
			if d := recs[0][o].diff(m); d != "" {
				failf("after DeleteRecords: partition 0 offset %d: %s", o, d)
			}
		case e := <-pc.Errors():
			failf("after DeleteRecords: consumer error %v", e)
		case <-time.After(*flagStep):
			failf("after DeleteRecords: no record at offset %d", o)
		}
	}
	check(pc.Close(), "PartitionConsumer.Close")
	_, err = cons.ConsumePartition(topic, 0, 2)
	expectKError(err, sarama.ErrOffsetOutOfRange, "ConsumePartition at offset 2, below the log start offset 4")
	check(cons.Close(), "Consumer.Close")
	okf("DeleteRecords: log start 0 -> 4 (p0), 10 = high watermark (p3); beyond the high watermark refused; ListOffsets and the consumer agree, offset 2 out of range")

	// DeleteTopic
	check(admin.DeleteTopic(topic), "DeleteTopic")
	waitFor("the topic to disappear from ListTopics", func() bool {
		lt, err := admin.ListTopics()
		check(err, "ListTopics")
		_, ok := lt[topic]
		return !ok
	})
	md, err = admin.DescribeTopics([]string{topic})
	check(err, "DescribeTopics after delete")
	if len(md) != 1 || md[0].Err != sarama.ErrUnknownTopicOrPartition {
		failf("DescribeTopics after delete: %+v, want UNKNOWN_TOPIC_OR_PARTITION", md)
	}
	expectKError(admin.DeleteTopic(topic), sarama.ErrUnknownTopicOrPartition, "DeleteTopic of a deleted topic")
	okf("DeleteTopic: gone from ListTopics and DescribeTopics; deleting it again is UNKNOWN_TOPIC_OR_PARTITION")
	fmt.Println("PASS")
}

// kafkaTopicConfigs: the topic configs Apache Kafka 4.1 lists in DescribeConfigs for a topic.
var kafkaTopicConfigs = []string{
	"cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
	"compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
	"follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
	"local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
	"message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.type",
	"min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
	"remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes",
	"retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
	"unclean.leader.election.enable",
}

// scenarioTopicConfigs: DescribeConfig of a topic lists every topic config Kafka 4.1 lists
// (Sarama's ListTopics and tools that diff a topic's configs read them all).
func scenarioTopicConfigs() {
	admin, err := sarama.NewClusterAdmin(brokers(), newConfig())
	check(err, "NewClusterAdmin")
	defer admin.Close()
	topic := "sarama-topic-configs-" + runID
	createTopic(admin, topic, 1, map[string]*string{"retention.ms": strp("3600000")})
	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	check(err, "DescribeConfig topic")
	got := map[string]sarama.ConfigEntry{}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		got[e.Name] = e
		names = append(names, fmt.Sprintf("%s=%s(source %d)", e.Name, e.Value, e.Source))
	}
	sort.Strings(names)
	fmt.Printf("info DescribeConfig %s: %d entries: %s\n", topic, len(entries), strings.Join(names, " "))
	want := map[string]bool{}
	var missing []string
	for _, k := range kafkaTopicConfigs {
		want[k] = true
		if _, ok := got[k]; !ok {
			missing = append(missing, k)
		}
	}
	var extra []string
	for k := range got {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		fmt.Printf("info entries Kafka 4.1 does not list: %v\n", extra)
	}
	if len(missing) > 0 {
		failf("DescribeConfig %s: %d of Kafka 4.1's %d topic configs missing: %v", topic, len(missing),
			len(kafkaTopicConfigs), missing)
	}
	okf("DescribeConfig %s lists all %d topic configs of Kafka 4.1", topic, len(kafkaTopicConfigs))
	fmt.Println("PASS")
}
