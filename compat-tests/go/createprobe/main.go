// createprobe: CreateTopics sent to one broker, then at once, to that same broker, a Metadata
// request for the new topic and a Fetch of its partitions by topic id. Prints a line per round
// where the broker did not serve the topic yet (UNKNOWN_TOPIC_OR_PARTITION in the Metadata, a
// partition without leader, UNKNOWN_TOPIC_ID in the Fetch), then "SUMMARY rounds=N lagging=M".
// Usage: createprobe <bootstrap host:port,...> <rounds> <partitions> <replication factor>
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func main() {
	rounds, _ := strconv.Atoi(os.Args[2])
	partitions, _ := strconv.Atoi(os.Args[3])
	rf, _ := strconv.Atoi(os.Args[4])
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(os.Args[1], ",")...))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		panic(err)
	}
	var ids []int32
	for _, b := range meta.Brokers {
		ids = append(ids, b.NodeID)
	}
	lagging := 0
	for r := 0; r < rounds; r++ {
		viaID := ids[r%len(ids)]
		via := cl.Broker(int(viaID))
		name := fmt.Sprintf("probe-%d-%d", time.Now().UnixNano(), r)
		create := kmsg.NewPtrCreateTopicsRequest()
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = name, int32(partitions), int16(rf)
		create.Topics = append(create.Topics, t)
		create.TimeoutMillis = 30000
		start := time.Now()
		resp, err := create.RequestWith(ctx, via)
		if err != nil {
			panic(err)
		}
		took := time.Since(start)
		if code := resp.Topics[0].ErrorCode; code != 0 {
			fmt.Println("create", name, "error", code)
			os.Exit(1)
		}
		m := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(name)
		m.Topics = append(m.Topics, mt)
		mr, err := m.RequestWith(ctx, via)
		if err != nil {
			panic(err)
		}
		metaCode, noLeader := mr.Topics[0].ErrorCode, 0
		for _, p := range mr.Topics[0].Partitions {
			if p.Leader < 0 || p.ErrorCode != 0 {
				noLeader++
			}
		}
		f := kmsg.NewPtrFetchRequest()
		f.ReplicaID, f.MaxWaitMillis, f.MaxBytes = -1, 0, 1<<20
		ft := kmsg.NewFetchRequestTopic()
		ft.TopicID = resp.Topics[0].TopicID
		for p := 0; p < partitions; p++ {
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = int32(p), 1<<20, -1
			ft.Partitions = append(ft.Partitions, fp)
		}
		f.Topics = append(f.Topics, ft)
		fr, err := f.RequestWith(ctx, via)
		if err != nil {
			panic(err)
		}
		fetchCode := fr.ErrorCode
		for _, t := range fr.Topics {
			for _, p := range t.Partitions {
				// UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID (NOT_LEADER from a follower is fine)
				if p.ErrorCode == 3 || p.ErrorCode == 100 {
					fetchCode = p.ErrorCode
				}
			}
		}
		if metaCode != 0 || noLeader > 0 || fetchCode != 0 {
			lagging++
			fmt.Printf("round %d via broker %d (CreateTopics took %v): metadata error %d, %d partitions without leader, fetch error %d\n",
				r, viaID, took, metaCode, noLeader, fetchCode)
		}
	}
	fmt.Printf("SUMMARY rounds=%d lagging=%d\n", rounds, lagging)
}
