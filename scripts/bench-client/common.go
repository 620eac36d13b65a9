// Flags and helpers every mode of bench-client shares: the common flags (-brokers, -topic,
// -timeout, -debug, -broker-pid, and the security of a SASL_SSL / SSL listener: -tls-ca,
// -sasl-mechanism, -sasl-user, -sasl-password), the measured window (wall time, this process's and the
// broker's CPU time), the franz-go options for -acks and -compression, and percentiles.

package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

type common struct {
	brokers   string
	topic     string
	timeout   time.Duration
	debug     bool
	brokerPid int
	tlsCA     string
	saslMech  string
	saslUser  string
	saslPass  string
	w0        time.Time
	b0, c0    float64
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.brokers, "brokers", "127.0.0.1:9092", "comma-separated seed brokers")
	fs.StringVar(&c.topic, "topic", "bench", "topic name")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "fail the run after this long")
	fs.BoolVar(&c.debug, "debug", false, "franz-go debug logging to stderr")
	fs.IntVar(&c.brokerPid, "broker-pid", 0, "pid of the broker: report its CPU time during the measured window")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "connect over TLS, trusting the CA certificates of this PEM file")
	fs.StringVar(&c.saslMech, "sasl-mechanism", "", "authenticate with SASL: SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN")
	fs.StringVar(&c.saslUser, "sasl-user", "", "SASL user")
	fs.StringVar(&c.saslPass, "sasl-password", "", "SASL password")
}

// securityOpts: TLS and SASL as the flags say; a bad flag ends the process (exit 2).
func (c *common) securityOpts() []kgo.Opt {
	var o []kgo.Opt
	fail := func(format string, args ...any) []kgo.Opt {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
		os.Exit(2)
		return nil
	}
	if c.tlsCA != "" {
		pem, err := os.ReadFile(c.tlsCA)
		if err != nil {
			return fail("-tls-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fail("-tls-ca %s: no PEM certificate", c.tlsCA)
		}
		o = append(o, kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	}
	switch c.saslMech {
	case "":
	case "SCRAM-SHA-256":
		o = append(o, kgo.SASL(scram.Auth{User: c.saslUser, Pass: c.saslPass}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		o = append(o, kgo.SASL(scram.Auth{User: c.saslUser, Pass: c.saslPass}.AsSha512Mechanism()))
	case "PLAIN":
		o = append(o, kgo.SASL(plain.Auth{User: c.saslUser, Pass: c.saslPass}.AsMechanism()))
	default:
		return fail("-sasl-mechanism %q: SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN", c.saslMech)
	}
	return o
}

// windowStart / windowEnd bracket the measured part of a run: its wall time, this process's CPU
// time and (with -broker-pid) the broker's CPU time over exactly that window.
func (c *common) windowStart() {
	c.w0, c.b0, c.c0 = time.Now(), procCPU(c.brokerPid), selfCPU()
}

func (c *common) windowEnd(out map[string]any) {
	w := time.Since(c.w0).Seconds()
	out["window_s"] = w
	out["client_window_cpu_s"] = selfCPU() - c.c0
	if c.brokerPid > 0 {
		out["broker_window_cpu_s"] = procCPU(c.brokerPid) - c.b0
	}
}

func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return tvSec(ru.Utime) + tvSec(ru.Stime)
}

// procCPU is utime+stime of a process in seconds (from /proc/PID/stat; USER_HZ assumed 100).
func procCPU(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	var ut, st float64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return (ut + st) / 100
}

func (c *common) opts() []kgo.Opt {
	o := []kgo.Opt{kgo.SeedBrokers(strings.Split(c.brokers, ",")...), kgo.ClientID("ketch-bench")}
	o = append(o, c.securityOpts()...)
	if c.debug {
		o = append(o, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug,
			func() string { return time.Now().UTC().Format("15:04:05.000000 ") })))
	}
	return o
}

func parse(fs *flag.FlagSet, args []string) {
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
}

func acksOpts(acks string) ([]kgo.Opt, error) {
	switch acks {
	case "all", "-1":
		return []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}, nil
	// Without idempotence franz-go allows 1 produce request in flight per broker by default; the
	// Java client allows 5 (max.in.flight.requests.per.connection), as franz-go does with
	// idempotence (acks=all): use 5 everywhere so acks=1 is not latency-bound by the client.
	case "1", "leader":
		return []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
			kgo.MaxProduceRequestsInflightPerBroker(5)}, nil
	case "0", "none":
		return []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite(),
			kgo.MaxProduceRequestsInflightPerBroker(5)}, nil
	}
	return nil, fmt.Errorf("bad -acks %q (all, 1 or 0)", acks)
}

func codec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none", "":
		return kgo.NoCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("bad -compression %q", name)
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	idx := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	if idx < 0 {
		idx = 0
	}
	if idx >= len(sorted) {
		idx = len(sorted) - 1
	}
	return sorted[idx]
}
