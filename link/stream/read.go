package stream

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/stats"
)

// PrefixLen is the length of the prefix in front of every frame: a 32-bit
// big-endian byte count of the frame that follows.
const PrefixLen = 4

// reader is ReadBatch's state: the connection it reads and the buffer in
// front of it, reset (not reallocated) for each new connection.
type reader struct {
	conn     net.Conn // nil between connections
	br       *bufio.Reader
	maxFrame int
	runts    *stats.Counter // the endpoint's RxErrors
}

// errFraming is a length prefix the framing cannot have: 0, or over the
// frame size the MTU allows.
type errFraming struct{ size, max int }

func (e errFraming) Error() string {
	return fmt.Sprintf("frame length %d outside 1..%d: framing lost", e.size, e.max)
}

// errTruncated marks a frame the end of the connection cut short.
var errTruncated = errors.New("frame cut short by the end of the connection")

// ReadBatch blocks until a frame has arrived, then fills pkts with it and
// with every further frame already buffered, without blocking again. Each
// packet needs room for link.MaxFrame(MTU()) bytes. On a Listen endpoint it
// first waits for a peer; when a connection ends, or breaks the framing and
// is dropped, the frames read before that are returned and the next call
// waits for the next peer.
func (e *Endpoint) ReadBatch(pkts []*buffer.Packet) (int, error) {
	if err := e.checkRoom(pkts); err != nil {
		return 0, err
	}
	if len(pkts) == 0 {
		return 0, nil
	}
	r := &e.rd
	for {
		if e.isClosed.Load() {
			return 0, link.ErrClosed
		}
		if r.conn == nil {
			if err := e.nextConn(); err != nil {
				return 0, err
			}
		}
		n, bytes, err := r.readFrames(pkts)
		e.stats.RxFrames.Add(uint64(n))
		e.stats.RxBytes.Add(uint64(bytes))
		if err != nil {
			e.endConn(err)
		}
		if n > 0 {
			return n, nil
		}
	}
}

// endConn ends the reader's connection after err, counting why.
func (e *Endpoint) endConn(err error) {
	var framing errFraming
	switch {
	case errors.As(err, &framing):
		e.stats.FramingErrors.Inc()
	case err == errTruncated:
		e.stats.RxErrors.Inc()
	}
	if !e.isClosed.Load() { // Close's own ending is no disconnect
		e.stats.Disconnects.Inc()
	}
	e.drop(e.rd.conn)
	e.rd.conn = nil
	e.rd.br.Reset(nil) // hold no reference to the connection
}

// readFrames reads one frame into pkts[0], blocking until it is whole,
// then more while whole frames are buffered. It returns the frames read
// and their bytes; err ends the connection: io.EOF at a frame's boundary,
// errTruncated within one, errFraming, or the connection's error.
func (r *reader) readFrames(pkts []*buffer.Packet) (n, bytes int, err error) {
	for n < len(pkts) {
		if n > 0 && r.br.Buffered() < PrefixLen {
			return n, bytes, nil
		}
		prefix, err := r.br.Peek(PrefixLen)
		if err != nil {
			if len(prefix) > 0 || r.br.Buffered() > 0 {
				err = errTruncated
			}
			return n, bytes, err
		}
		size := binary.BigEndian.Uint32(prefix)
		if size == 0 || size > uint32(r.maxFrame) {
			return n, bytes, errFraming{int(size), r.maxFrame}
		}
		if n > 0 && r.br.Buffered() < PrefixLen+int(size) {
			return n, bytes, nil // the next frame is not all here: do not wait for it
		}
		r.br.Discard(PrefixLen)
		if size < link.EthernetHeaderLen {
			// A runt keeps the framing: skip it, counted.
			if _, err := r.br.Discard(int(size)); err != nil {
				return n, bytes, errTruncated
			}
			r.runts.Inc()
			continue
		}
		p := pkts[n]
		p.SetLen(int(size))
		if _, err := io.ReadFull(r.br, p.Bytes()); err != nil {
			p.SetLen(0)
			return n, bytes, errTruncated
		}
		p.Offload = buffer.Offload{}
		n++
		bytes += int(size)
	}
	return n, bytes, nil
}

// checkRoom reports a packet too small for a frame, before any frame is
// taken, so that a caller's mistake loses nothing.
func (e *Endpoint) checkRoom(pkts []*buffer.Packet) error {
	size := link.MaxFrame(e.mtu)
	for i, p := range pkts {
		if p.Cap() < size {
			return fmt.Errorf("%s: ReadBatch: packet %d has room for %d bytes, frames need %d", e.name, i, p.Cap(), size)
		}
	}
	return nil
}
