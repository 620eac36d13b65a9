// rawConn: the connection consume-raw fetches over. Requests are encoded and responses decoded
// by franz-go's kmsg (no codec of our own); what differs from kgo's broker connection is that
// each response is read into a buffer the caller passes and reuses, so fetching 6 MiB responses
// makes the load generator allocate (and zero) nothing per fetch. One request is in flight at a
// time, as with kgo's Broker.Request.

package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

type rawConn struct {
	conn   net.Conn
	format *kmsg.RequestFormatter
	corr   int32
	out    []byte
	// Highest version the broker accepts, per API key (from ApiVersions).
	maxVersions map[int16]int16
}

func dialRaw(ctx context.Context, addr string) (*rawConn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if deadline, ok := ctx.Deadline(); ok {
		conn.SetDeadline(deadline) // the run's -timeout bounds every read and write
	}
	c := &rawConn{conn: conn, format: kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench-client")),
		maxVersions: map[int16]int16{}}
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName = "bench-client"
	req.ClientSoftwareVersion = "1"
	resp := kmsg.NewPtrApiVersionsResponse()
	var buf []byte
	if err := c.roundTrip(req, resp, &buf); err != nil {
		conn.Close()
		return nil, fmt.Errorf("api versions: %w", err)
	}
	if resp.ErrorCode != 0 {
		conn.Close()
		return nil, fmt.Errorf("api versions: error code %d", resp.ErrorCode)
	}
	for _, k := range resp.ApiKeys {
		c.maxVersions[k.ApiKey] = k.MaxVersion
	}
	return c, nil
}

// version is the highest version of req that both kmsg and the broker know (-1: none).
func (c *rawConn) version(req kmsg.Request) int16 {
	broker, ok := c.maxVersions[req.Key()]
	if !ok {
		return -1
	}
	return min(broker, req.MaxVersion())
}

func (c *rawConn) Close() error { return c.conn.Close() }

// roundTrip sends req at its set version and decodes the response into resp, reading it into
// *buf (grown when too small). The byte fields of resp (record batches) point into *buf.
func (c *rawConn) roundTrip(req kmsg.Request, resp kmsg.Response, buf *[]byte) error {
	c.corr++
	c.out = c.format.AppendRequest(c.out[:0], req, c.corr)
	if _, err := c.conn.Write(c.out); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		return err
	}
	n := int(int32(binary.BigEndian.Uint32(size[:])))
	if n < 4 {
		return fmt.Errorf("response of %d bytes", n)
	}
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	body := (*buf)[:n]
	if _, err := io.ReadFull(c.conn, body); err != nil {
		return err
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != c.corr {
		return fmt.Errorf("correlation id %d, want %d", corr, c.corr)
	}
	body = body[4:]
	resp.SetVersion(req.GetVersion())
	// Flexible responses carry a tag section after the correlation id; ApiVersions never does.
	if req.IsFlexible() && req.Key() != 18 {
		if len(body) == 0 || body[0] != 0 {
			return fmt.Errorf("response header with tagged fields")
		}
		body = body[1:]
	}
	return resp.ReadFrom(body)
}
