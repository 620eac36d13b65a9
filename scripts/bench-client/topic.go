// The topic mode of bench-client: create topics (and wait until every partition has a leader
// and, with -rf > 1, a full ISR) or delete them. With -wait-brokers N the creation waits until
// the Metadata answer lists N brokers (a fresh cluster whose brokers are still registering).

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func runTopic(args []string) (map[string]any, error) {
	if len(args) < 1 || (args[0] != "create" && args[0] != "delete") {
		return nil, errors.New("usage: bench-client topic create|delete -brokers B -topic T[,T2...] [-partitions P]")
	}
	action := args[0]
	fs := flag.NewFlagSet("topic "+action, flag.ExitOnError)
	var c common
	c.register(fs)
	partitions := fs.Int("partitions", 6, "partitions per topic (create)")
	configs := fs.String("configs", "", "topic configs k=v,k=v (create)")
	rf := fs.Int("rf", 1, "replication factor (create)")
	waitBrokers := fs.Int("wait-brokers", 0, "before creating, wait until the Metadata answer lists this many brokers")
	parse(fs, args[1:])
	topics := strings.Split(c.topic, ",")
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	cl, err := kgo.NewClient(append(c.opts(), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(c.timeout.Milliseconds()))
	start := time.Now()
	if action == "delete" {
		resps, err := adm.DeleteTopics(ctx, topics...)
		if err != nil {
			return nil, err
		}
		for _, r := range resps {
			if r.Err != nil {
				return nil, fmt.Errorf("delete %s: %v", r.Topic, r.Err)
			}
		}
		return map[string]any{"deleted": topics, "seconds": time.Since(start).Seconds()}, nil
	}
	cfgs := map[string]*string{}
	if *configs != "" {
		for _, kv := range strings.Split(*configs, ",") {
			k, v, _ := strings.Cut(kv, "=")
			v2 := v
			cfgs[k] = &v2
		}
	}
	for *waitBrokers > 0 {
		// A new client each time: franz-go answers a repeated all-brokers Metadata request from
		// its cache, which would keep showing the brokers registered at the first request.
		n, err := brokerCount(ctx, c.opts())
		if err == nil && n >= *waitBrokers {
			break
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%d brokers not in the metadata within %v (last error %v)", *waitBrokers, c.timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		resps, err := adm.CreateTopics(ctx, int32(*partitions), int16(*rf), cfgs, topics...)
		if err != nil {
			return nil, err
		}
		var failed error
		for _, r := range resps {
			if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
				failed = fmt.Errorf("create %s: %v %s", r.Topic, r.Err, r.ErrMessage)
				// A broker that registers late: the controller does not count it yet.
				if errors.Is(r.Err, kerr.InvalidReplicationFactor) && ctx.Err() == nil {
					continue
				}
				return nil, failed
			}
		}
		if failed == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	acked := time.Since(start)
	// Ready = the metadata shows a leader for every partition of every topic.
	for {
		md, err := adm.Metadata(ctx, topics...)
		ready := err == nil
		if ready {
			for _, t := range topics {
				td, ok := md.Topics[t]
				if !ok || td.Err != nil || len(td.Partitions) != *partitions {
					ready = false
					break
				}
				for _, p := range td.Partitions {
					if p.Leader < 0 || p.Err != nil || len(p.ISR) < *rf {
						ready = false
						break
					}
				}
			}
		}
		if ready {
			break
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("topics not ready within %v (last error %v)", c.timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return map[string]any{"created": topics, "partitions": *partitions, "rf": *rf, "acked_s": acked.Seconds(),
		"seconds": time.Since(start).Seconds()}, nil
}

func brokerCount(ctx context.Context, opts []kgo.Opt) (int, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return 0, err
	}
	return len(md.Brokers), nil
}
