package stream

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/stats"
)

// chunkReader returns data in pieces of at most size bytes (at least one),
// as a socket returns what has arrived so far.
type chunkReader struct {
	data []byte
	size int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.size)], c.data)
	c.data = c.data[n:]
	return n, nil
}

// parsed is what a stream holds, by a parser written apart from the
// endpoint's: the frames, the runts skipped, and how the stream ends.
type parsed struct {
	frames [][]byte
	runts  int
	end    string // "eof", "truncated" or "framing"
}

func parse(data []byte, maxFrame int) parsed {
	var p parsed
	for {
		switch {
		case len(data) == 0:
			p.end = "eof"
			return p
		case len(data) < PrefixLen:
			p.end = "truncated"
			return p
		}
		size := binary.BigEndian.Uint32(data)
		data = data[PrefixLen:]
		switch {
		case size == 0 || size > uint32(maxFrame):
			p.end = "framing"
			return p
		case uint32(len(data)) < size:
			p.end = "truncated"
			return p
		case size < link.EthernetHeaderLen:
			p.runts++
		default:
			p.frames = append(p.frames, data[:size])
		}
		data = data[size:]
	}
}

// FuzzReadFrames feeds the frame reader any byte stream, arriving in
// pieces of any size, and checks it against parse: the same frames in
// order, the runts counted, and the right reason for the end. A MTU from
// the input's range keeps the length limit in play.
func FuzzReadFrames(f *testing.F) {
	good := make([]byte, 60)
	f.Add(framed(good, good), uint8(1), uint16(1500))
	f.Add(framed(good, good), uint8(200), uint16(1500))
	f.Add(framed([]byte{1, 2, 3}, good), uint8(3), uint16(1500))
	f.Add(append(framed(good), 0, 0, 0, 0), uint8(7), uint16(1500))
	f.Add(append(framed(good), 0, 0, 0x05, 0xdd), uint8(64), uint16(1500)) // 1501 bytes claimed, the stream ends first
	f.Add(append(framed(good), 0, 0, 0x05, 0xeb), uint8(64), uint16(1500)) // 1515 bytes: one over link.MaxFrame(1500)
	f.Add(append(framed(good), 0, 0, 0, 60, 1, 2), uint8(5), uint16(1500))
	f.Add([]byte{0, 0}, uint8(1), uint16(68))
	f.Add(framed(make([]byte, 82)), uint8(255), uint16(68))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8, mtu uint16) {
		mtu = MinMTU + mtu%(1600-MinMTU)
		maxFrame := link.MaxFrame(int(mtu))
		var runts stats.Counter
		r := reader{
			br:       bufio.NewReaderSize(&chunkReader{data: data, size: int(chunk) + 1}, 4096),
			maxFrame: maxFrame,
			runts:    &runts,
		}
		pool := buffer.NewPool()
		pkts := make([]*buffer.Packet, 8)
		for i := range pkts {
			pkts[i] = pool.Get(maxFrame)
		}
		var got [][]byte
		var err error
		for err == nil {
			var n int
			n, _, err = r.readFrames(pkts)
			for _, p := range pkts[:n] {
				got = append(got, bytes.Clone(p.Bytes()))
				p.SetLen(p.Cap())
			}
		}
		want := parse(data, maxFrame)
		var end string
		var framing errFraming
		switch {
		case err == io.EOF:
			end = "eof"
		case err == errTruncated:
			end = "truncated"
		case errors.As(err, &framing):
			end = "framing"
		default:
			t.Fatalf("reader ended with %v", err)
		}
		if end != want.end {
			t.Errorf("stream ended as %s (%v), want %s", end, err, want.end)
		}
		if len(got) != len(want.frames) {
			t.Fatalf("read %d frames, want %d", len(got), len(want.frames))
		}
		for i := range got {
			if !bytes.Equal(got[i], want.frames[i]) {
				t.Fatalf("frame %d: %x, want %x", i, got[i], want.frames[i])
			}
		}
		if int(runts.Load()) != want.runts {
			t.Errorf("%d runts counted, want %d", runts.Load(), want.runts)
		}
		for _, p := range pkts {
			p.Release()
		}
	})
}
