// Record batches built once, before a broker-bound run: the v2 batch format (KIP-98) written
// by hand here, in the load generator only, so that sending costs the client no per-record
// work (franz-go's producer spends a core compressing lz4 at a few hundred MB/s, which caps
// what a broker can be shown to take). The brokers assign offsets, so one batch can be sent
// again and again; producer id -1 means no idempotence, no sequence checks.

package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/pierrec/lz4/v4"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Byte offsets in a v2 batch header.
const (
	batchLengthAt   = 8  // int32, bytes after this field
	batchCrcAt      = 17 // uint32 CRC-32C of everything after it
	batchAttrsAt    = 21 // int16: compression codec in the low 3 bits
	batchLastDelta  = 23 // int32 last offset delta
	batchCountAt    = 57 // int32 record count
	batchHeaderSize = 61
)

// buildBatch returns one batch of n records of `size` value bytes (no key, no headers), the
// values taken from payload(first+i, size), compressed with codec ("none" or "lz4").
func buildBatch(first, n, size int, codec string) ([]byte, error) {
	var recs []byte
	for i := 0; i < n; i++ {
		value := payload(first+i, size)
		var body []byte
		body = append(body, 0)                        // attributes
		body = binary.AppendVarint(body, 0)           // timestamp delta
		body = binary.AppendVarint(body, int64(i))    // offset delta
		body = binary.AppendVarint(body, -1)          // key: null
		body = binary.AppendVarint(body, int64(size)) // value length
		body = append(body, value...)
		body = binary.AppendVarint(body, 0) // headers
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	var attrs int16
	switch codec {
	case "none":
	case "lz4":
		attrs = 3
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		if _, err := w.Write(recs); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		recs = buf.Bytes()
	default:
		return nil, fmt.Errorf("raw batches: compression %q not supported (none, lz4)", codec)
	}
	now := time.Now().UnixMilli()
	b := make([]byte, batchHeaderSize, batchHeaderSize+len(recs))
	binary.BigEndian.PutUint64(b[0:], 0)                                                // base offset (the broker assigns)
	binary.BigEndian.PutUint32(b[batchLengthAt:], uint32(batchHeaderSize-12+len(recs))) // length
	binary.BigEndian.PutUint32(b[12:], 0xffffffff)                                      // partition leader epoch -1
	b[16] = 2                                                                           // magic
	binary.BigEndian.PutUint16(b[batchAttrsAt:], uint16(attrs))
	binary.BigEndian.PutUint32(b[batchLastDelta:], uint32(n-1))
	binary.BigEndian.PutUint64(b[27:], uint64(now)) // base timestamp
	binary.BigEndian.PutUint64(b[35:], uint64(now)) // max timestamp
	binary.BigEndian.PutUint64(b[43:], ^uint64(0))  // producer id -1
	binary.BigEndian.PutUint16(b[51:], 0xffff)      // producer epoch -1
	binary.BigEndian.PutUint32(b[53:], 0xffffffff)  // base sequence -1
	binary.BigEndian.PutUint32(b[batchCountAt:], uint32(n))
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[batchCrcAt:], crc32.Checksum(b[batchAttrsAt:], castagnoli))
	return b, nil
}

// batchSummary is what a consumer needs from one stored batch.
type batchSummary struct {
	lastOffset int64
	records    int
}

// walkBatches checks the CRC of every whole batch in a fetched records blob (a trailing
// partial batch is allowed, as in Kafka) and returns them in order.
func walkBatches(blob []byte) ([]batchSummary, error) {
	var out []batchSummary
	for len(blob) >= batchHeaderSize {
		total := 12 + int(int32(binary.BigEndian.Uint32(blob[batchLengthAt:])))
		if total < batchHeaderSize {
			return nil, fmt.Errorf("batch length %d is too small", total)
		}
		if total > len(blob) {
			break // partial batch at the end of the response
		}
		want := binary.BigEndian.Uint32(blob[batchCrcAt:])
		if got := crc32.Checksum(blob[batchAttrsAt:total], castagnoli); got != want {
			return nil, fmt.Errorf("batch CRC %08x, computed %08x", want, got)
		}
		base := int64(binary.BigEndian.Uint64(blob[0:]))
		last := base + int64(int32(binary.BigEndian.Uint32(blob[batchLastDelta:])))
		attrs := binary.BigEndian.Uint16(blob[batchAttrsAt:])
		n := int(int32(binary.BigEndian.Uint32(blob[batchCountAt:])))
		if attrs&0x20 != 0 { // control batch (transaction marker): no data records
			n = 0
		}
		out = append(out, batchSummary{lastOffset: last, records: n})
		blob = blob[total:]
	}
	return out, nil
}
