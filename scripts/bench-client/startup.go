// The startup mode of bench-client: spawn a broker command and time spawn -> TCP port open ->
// first acked record (acks=all, topic auto-created), then stop the broker.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func runStartup(args []string) (map[string]any, error) {
	fs := flag.NewFlagSet("startup", flag.ExitOnError)
	var c common
	c.register(fs)
	logPath := fs.String("log", "", "file for the broker's stdout+stderr (default: discarded)")
	keep := fs.Bool("keep", false, "leave the broker running (default: SIGTERM it, SIGKILL after 30s)")
	c.topic = ""
	parse(fs, args)
	cmdArgs := fs.Args()
	if len(cmdArgs) == 0 {
		return nil, errors.New("usage: bench-client startup -brokers HOST:PORT [-topic T] -- command args...")
	}
	topic := c.topic
	if topic == "" {
		topic = fmt.Sprintf("startup-%d", time.Now().UnixNano())
	}
	cmd := exec.Command(cmdArgs[0], cmdArgs[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{}) // closed when the broker has exited; waitErr is then set
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	stop := func() {
		if *keep {
			return
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}
	defer stop()

	var portOpen time.Duration
	for { // tight loop on the TCP port
		conn, err := net.DialTimeout("tcp", c.brokers, 100*time.Millisecond)
		if err == nil {
			conn.Close()
			portOpen = time.Since(start)
			break
		}
		select {
		case <-exited:
			return nil, fmt.Errorf("broker exited before opening its port: %v", waitErr)
		case <-ctx.Done():
			return nil, errors.New("port not open before the timeout")
		case <-time.After(time.Millisecond):
		}
	}
	attempts := 0
	var lastErr error
	for { // tight produce retry loop: a fresh client each attempt, 2 ms backoffs inside
		attempts++
		cl, err := kgo.NewClient(append(c.opts(), kgo.AllowAutoTopicCreation(), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.MetadataMinAge(10*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 2 * time.Millisecond }),
			kgo.ProducerLinger(0), kgo.DefaultProduceTopic(topic))...)
		if err != nil {
			return nil, err
		}
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		err = cl.ProduceSync(actx, &kgo.Record{Value: []byte("first")}).FirstErr()
		acancel()
		cl.Close()
		if err == nil {
			break
		}
		lastErr = err
		select {
		case <-exited:
			return nil, fmt.Errorf("broker exited before the first produce: %v (last produce error %v)", waitErr, lastErr)
		case <-ctx.Done():
			return nil, fmt.Errorf("no acked record before the timeout (last error %v)", lastErr)
		case <-time.After(time.Millisecond):
		}
	}
	first := time.Since(start)
	return map[string]any{"pid": cmd.Process.Pid, "port_open_ms": float64(portOpen.Microseconds()) / 1000,
		"first_produce_ms": float64(first.Microseconds()) / 1000, "attempts": attempts, "topic": topic}, nil
}
