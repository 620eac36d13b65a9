// The controller-failover mode of bench-client: kill -9 the active controller of a KRaft quorum
// and time how long after the kill a new topic is created (CreateTopics through a broker,
// forwarded to whichever controller is active) and how long until every partition of it has a
// leader and a full ISR in the brokers' metadata (the new controller elected the leaders and the
// brokers applied its records).
//
// Before the kill (not timed): a warm-up topic is created and seen ready, so connections and
// metadata are in place, then -pause of idle time. Then SIGKILL (sent by this process, so the
// kill and the answers are timed on one clock), and CreateTopics is sent again and again (10 ms
// apart, each with -attempt-timeout) until the topic exists; TOPIC_ALREADY_EXISTS counts as
// created (an attempt that timed out on the client may have been written).

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func runControllerFailover(args []string) (map[string]any, error) {
	fs := flag.NewFlagSet("controller-failover", flag.ExitOnError)
	var c common
	c.register(fs)
	pid := fs.Int("kill-pid", 0, "pid of the active controller (required): it gets SIGKILL")
	rf := fs.Int("rf", 3, "replication factor of the topic created after the kill")
	partitions := fs.Int("partitions", 1, "partitions of that topic")
	pause := fs.Duration("pause", 2*time.Second, "idle time between the warm-up and the kill")
	attempt := fs.Duration("attempt-timeout", 2*time.Second, "timeout of one CreateTopics attempt")
	parse(fs, args)
	if *pid <= 0 {
		return nil, errors.New("-kill-pid is required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	tight := func(int) time.Duration { return 10 * time.Millisecond }
	cl, err := kgo.NewClient(append(c.opts(), kgo.RetryBackoffFn(tight), kgo.MetadataMinAge(10*time.Millisecond))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(attempt.Milliseconds()))

	create := func(topic string) error {
		actx, acancel := context.WithTimeout(ctx, *attempt)
		defer acancel()
		resps, err := adm.CreateTopics(actx, int32(*partitions), int16(*rf), nil, topic)
		if err != nil {
			return err
		}
		r, ok := resps[topic]
		if !ok {
			return fmt.Errorf("no answer for %s", topic)
		}
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("%v %s", r.Err, r.ErrMessage)
		}
		return nil
	}
	ready := func(topic string) bool {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return false
		}
		td, ok := md.Topics[topic]
		if !ok || td.Err != nil || len(td.Partitions) != *partitions {
			return false
		}
		for _, p := range td.Partitions {
			if p.Leader < 0 || p.Err != nil || len(p.ISR) < *rf {
				return false
			}
		}
		return true
	}
	// until `done` holds, every 10 ms; the last error when the run's timeout passes
	retry := func(what string, done func() error) error {
		for {
			err := done()
			if err == nil {
				return nil
			}
			if ctx.Err() != nil {
				return fmt.Errorf("%s: not within %v (last error %v)", what, c.timeout, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	warm := c.topic + "-warm"
	notReady := errors.New("not ready")
	if err := retry("warm-up topic", func() error { return create(warm) }); err != nil {
		return nil, err
	}
	if err := retry("warm-up topic ready", func() error {
		if ready(warm) {
			return nil
		}
		return notReady
	}); err != nil {
		return nil, err
	}
	time.Sleep(*pause)

	if err := syscall.Kill(*pid, syscall.SIGKILL); err != nil {
		return nil, fmt.Errorf("kill %d: %w", *pid, err)
	}
	killed := time.Now()
	attempts := 0
	if err := retry("topic after the kill", func() error { attempts++; return create(c.topic) }); err != nil {
		return nil, err
	}
	created := time.Since(killed)
	if err := retry("topic ready after the kill", func() error {
		if ready(c.topic) {
			return nil
		}
		return notReady
	}); err != nil {
		return nil, err
	}
	leaders := time.Since(killed)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return map[string]any{
		"created_ms": ms(created), "ready_ms": ms(leaders), "create_attempts": attempts,
		"partitions": *partitions, "rf": *rf, "killed_at_unix_ms": killed.UnixMilli(),
	}, nil
}
