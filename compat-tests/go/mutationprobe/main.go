// mutationprobe: one CreateTopics of <topics> topics of <partitions> partitions each, then one
// DeleteTopics of the ones created, with client id <client id>, at the highest versions the
// broker and franz-go share (strict controller mutation quota: CreateTopics v6+, DeleteTopics v5+).
// Prints "create <topic> <error name>" and "delete <topic> <error name>" per topic and
// "throttle create=<ms> delete=<ms>" (the responses' throttle_time_ms).
// Usage: mutationprobe <bootstrap host:port> <client id> <topic prefix> <topics> <partitions>
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func name(code int16) string {
	if err := kerr.ErrorForCode(code); err != nil {
		return err.(*kerr.Error).Message
	}
	return "NONE"
}

func main() {
	topics, _ := strconv.Atoi(os.Args[4])
	partitions, _ := strconv.Atoi(os.Args[5])
	cl, err := kgo.NewClient(kgo.SeedBrokers(os.Args[1]), kgo.ClientID(os.Args[2]))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	ctx := context.Background()
	create := kmsg.NewPtrCreateTopicsRequest()
	create.TimeoutMillis = 30000
	for i := 0; i < topics; i++ {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = fmt.Sprintf("%s-%d", os.Args[3], i), int32(partitions), 1
		create.Topics = append(create.Topics, t)
	}
	created, err := create.RequestWith(ctx, cl)
	if err != nil {
		panic(err)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TimeoutMillis = 30000
	for _, t := range created.Topics {
		fmt.Printf("create %s %s\n", t.Topic, name(t.ErrorCode))
		if t.ErrorCode == 0 {
			dt := kmsg.NewDeleteTopicsRequestTopic()
			topic := t.Topic
			dt.Topic = &topic
			del.Topics = append(del.Topics, dt)
			del.TopicNames = append(del.TopicNames, t.Topic)
		}
	}
	deleted, err := del.RequestWith(ctx, cl)
	if err != nil {
		panic(err)
	}
	for _, t := range deleted.Topics {
		topic := ""
		if t.Topic != nil {
			topic = *t.Topic
		}
		fmt.Printf("delete %s %s\n", topic, name(t.ErrorCode))
	}
	fmt.Printf("throttle create=%d delete=%d\n", created.ThrottleMillis, deleted.ThrottleMillis)
}
