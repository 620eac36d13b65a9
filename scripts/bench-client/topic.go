// The topic mode of bench-client: create topics (and wait until every partition has a leader)
// or delete them.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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
	resps, err := adm.CreateTopics(ctx, int32(*partitions), 1, cfgs, topics...)
	if err != nil {
		return nil, err
	}
	for _, r := range resps {
		if r.Err != nil {
			return nil, fmt.Errorf("create %s: %v %s", r.Topic, r.Err, r.ErrMessage)
		}
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
					if p.Leader < 0 || p.Err != nil {
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
	return map[string]any{"created": topics, "partitions": *partitions, "acked_s": acked.Seconds(),
		"seconds": time.Since(start).Seconds()}, nil
}
