package stream

import (
	"encoding/binary"
	"net"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
)

// writer is WriteBatch's state, kept from call to call so that a batch
// allocates nothing: the prefixes, and the list of slices that interleaves
// them with the frames for one writev.
type writer struct {
	prefixes [][PrefixLen]byte
	slices   [][]byte
	// out is what WriteTo consumes; it lives here rather than on the
	// stack because WriteTo's pointer receiver would move it to the heap.
	out net.Buffers
}

// WriteBatch sends the frames in pkts, each behind its length prefix, in
// one write call where the connection gathers (writev on a socket). A
// malformed frame is counted in TxErrors and skipped. With no peer
// connected the frames are dropped and counted in TxDropped, as on a link
// whose carrier is down; so are those of a write that fails, which also
// drops the connection, since a partial write has broken its framing.
// Either way they are taken: the result is len(pkts) unless the endpoint is
// closed.
func (e *Endpoint) WriteBatch(pkts []*buffer.Packet) (int, error) {
	if e.isClosed.Load() {
		return 0, link.ErrClosed
	}
	w := &e.wr
	if len(w.prefixes) < len(pkts) {
		w.prefixes = make([][PrefixLen]byte, len(pkts))
	}
	w.slices = w.slices[:0]
	var frames, bytes int
	for i, p := range pkts {
		size := p.Len()
		if size < link.EthernetHeaderLen || size > link.MaxFrame(e.mtu) {
			e.stats.TxErrors.Inc()
			continue
		}
		binary.BigEndian.PutUint32(w.prefixes[i][:], uint32(size))
		w.slices = append(w.slices, w.prefixes[i][:], p.Bytes())
		frames++
		bytes += size
	}
	if frames == 0 {
		return len(pkts), nil
	}
	conn := e.current()
	if conn == nil {
		e.stats.TxDropped.Add(uint64(frames))
		return len(pkts), nil
	}
	w.out = w.slices
	_, err := w.out.WriteTo(conn)
	clear(w.slices) // keep no reference to the caller's packets
	w.out = nil
	if err != nil {
		e.stats.TxDropped.Add(uint64(frames))
		if e.isClosed.Load() {
			return len(pkts), link.ErrClosed
		}
		e.drop(conn)
		return len(pkts), nil
	}
	e.stats.TxFrames.Add(uint64(frames))
	e.stats.TxBytes.Add(uint64(bytes))
	return len(pkts), nil
}
