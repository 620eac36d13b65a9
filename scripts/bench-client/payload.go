// The record payloads of bench-client: a pool of text-like bytes that every mode slices its
// record values from, and the payload mode (the same payloads as lines, for
// ProducerPerformance --payload-file).

package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
)

// payloadPool is 4 MiB of text-like bytes (words from a small vocabulary, log-line shaped):
// compressible about 2-3x with lz4, never the same record twice in a row. A record of size S
// is pool[off:off+S] with a moving offset.
var payloadPool []byte

var payloadPoolOnce = sync.OnceValue(func() []byte {
	words := strings.Fields(`the a of to and in is for on that with as by at from this be are was it or an
		request response broker topic partition offset leader replica consumer producer group commit fetch
		produce batch record header key value timestamp error retry timeout session epoch sequence
		user order payment invoice account event click view session device region status ok failed
		pending shipped 200 404 500 GET POST PUT us-east-1 eu-west-1 true false null id ts msg level info`)
	r := rand.New(rand.NewSource(42))
	var sb strings.Builder
	for sb.Len() < 4<<20 {
		fmt.Fprintf(&sb, `{"ts":%d,"level":"%s","id":"%08x","msg":"`, 1700000000000+r.Int63n(1e9),
			[]string{"info", "warn", "debug"}[r.Intn(3)], r.Uint32())
		for n := 5 + r.Intn(20); n > 0; n-- {
			sb.WriteString(words[r.Intn(len(words))])
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, `","n":%d}`+"\n", r.Intn(100000))
	}
	return []byte(sb.String())
})

func payload(i, size int) []byte {
	if payloadPool == nil {
		payloadPool = payloadPoolOnce()
	}
	if size > len(payloadPool)/2 {
		b := make([]byte, size)
		for j := range b {
			b[j] = payloadPool[j%len(payloadPool)]
		}
		return b
	}
	off := (i * 7919) % (len(payloadPool) - size)
	return payloadPool[off : off+size]
}

func runPayload(args []string) error {
	fs := flag.NewFlagSet("payload", flag.ExitOnError)
	size := fs.Int("size", 1024, "bytes per line (without the newline)")
	lines := fs.Int("lines", 4096, "lines")
	parse(fs, args)
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for i := 0; i < *lines; i++ {
		line := []byte(string(payload(i*131, *size)))
		for j, b := range line {
			if b == '\n' || b == '\r' {
				line[j] = ' '
			}
		}
		w.Write(line)
		w.WriteByte('\n')
	}
	return nil
}
