package tcp

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gonetstack/gonet/budget"
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/seqnum"
)

// sendBuffer holds the bytes the application wrote and the peer has not
// acknowledged: a queue of fixed-size chunks, so it grows with the data in
// it and costs nothing when idle. Each chunk is reserved from the stack's
// memory budget while the buffer holds it.
type sendBuffer struct {
	chunks []*chunk
	head   int // offset of the first byte in chunks[0]
	n      int // bytes held
}

const chunkSize = 16 << 10

// fillSpace is fill's list of the free space it hands a reader: 64 KiB
// and the tail of a partly filled chunk at most. Pooled, so that a fill
// allocates none and a connection carries none while it does not fill.
type fillSpace [5][]byte

var fillSpaces = sync.Pool{New: func() any { return new(fillSpace) }}

// A chunk is a piece of send buffer, which segments may also borrow
// (lendTo) until their frames are written: it goes back to chunkPool when
// the buffer and every segment have done with it. Its bytes do not change
// meanwhile, since the buffer only appends after them.
type chunk struct {
	b    [chunkSize]byte
	refs atomic.Int32
}

var chunkPool = sync.Pool{New: func() any { return new(chunk) }}

// Return drops a reference; the last one puts the chunk back in the pool.
func (c *chunk) Return() {
	if c.refs.Add(-1) == 0 {
		chunkPool.Put(c)
	}
}

// room returns how many bytes can be appended without a new chunk.
func (s *sendBuffer) room() int { return len(s.chunks)*chunkSize - s.head - s.n }

// write appends as much of b as the budget allows, and returns how much.
func (s *sendBuffer) write(b []byte, bud *budget.Budget) int {
	written := 0
	for len(b) > 0 {
		if s.room() == 0 {
			if !bud.Reserve(chunkSize) {
				break
			}
			c := chunkPool.Get().(*chunk)
			c.refs.Store(1)
			if len(s.chunks) == 0 {
				s.head = lineOffset(b, c.b[:])
			}
			s.chunks = append(s.chunks, c)
		}
		end := s.head + s.n
		c := s.chunks[end/chunkSize]
		k := copy(c.b[end%chunkSize:], b)
		s.n += k
		written += k
		b = b[k:]
	}
	return written
}

// lineOffset is where in its chunk an empty buffer starts: at src's
// offset from dst's in a cache line, so that the copy's source and
// destination are aligned alike. A writer the buffer drained under (its
// peer acknowledged everything mid-Write) goes on from the middle of its
// own buffer, at a sum of what the acknowledgments freed, multiples of the
// MSS. Started at the chunk's first byte, IPv6's 1428 put the source 4
// bytes off an 8-byte boundary against the destination, the case in which
// Intel Xeon's memmove of an L1-resident 16 KiB runs at a seventh of its
// aligned speed (26 against 205 GB/s; 8 bytes off, as IPv4's 1448 keeps
// it, 165). GoNet's bulk over IPv6 towards the kernel took 0.943 of its
// IPv4 twin's rate without this and 0.973 with it (medians of 12 pairs,
// Intel Xeon). It costs at most a line of the chunk.
func lineOffset(src, dst []byte) int {
	const line = 64
	return int((uintptr(unsafe.Pointer(unsafe.SliceData(src))) - uintptr(unsafe.Pointer(unsafe.SliceData(dst)))) % line)
}

// fill appends up to limit bytes that read puts straight into the buffer:
// it reserves the chunks they need from the budget (as many as it allows),
// hands read their free space, keeps what read reports it put at the front
// of it, and gives back the chunks left empty, so that a read that found
// nothing leaves no memory held. It reports how many bytes read put, and
// whether read ran (not when the budget allowed no room at all).
func (s *sendBuffer) fill(limit int, bud *budget.Budget, read func(space [][]byte) int) (int, bool) {
	fs := fillSpaces.Get().(*fillSpace)
	defer fillSpaces.Put(fs)
	for s.room() < limit && len(s.chunks) < len(fs)+s.needed() {
		if !bud.Reserve(chunkSize) {
			break
		}
		c := chunkPool.Get().(*chunk)
		c.refs.Store(1)
		s.chunks = append(s.chunks, c)
	}
	room := min(s.room(), limit)
	if room == 0 {
		return 0, false
	}
	space, free := fs[:0], 0
	for pos := s.head + s.n; free < room && len(space) < cap(space); {
		b := s.chunks[pos/chunkSize].b[pos%chunkSize:]
		b = b[:min(len(b), room-free)]
		space = append(space, b)
		free += len(b)
		pos += len(b)
	}
	k := min(max(read(space), 0), free)
	clear(space) // no reference to chunks the buffer may give back
	s.n += k
	for len(s.chunks) > s.needed() {
		last := len(s.chunks) - 1
		s.chunks[last].Return()
		s.chunks[last] = nil
		s.chunks = s.chunks[:last]
		bud.Release(chunkSize)
	}
	if len(s.chunks) == 0 {
		s.head = 0
	}
	return k, true
}

// needed is how many chunks the buffer's bytes occupy.
func (s *sendBuffer) needed() int {
	if s.n == 0 {
		return 0
	}
	return (s.head + s.n + chunkSize - 1) / chunkSize
}

// copyAt copies len(dst) bytes starting off bytes into the buffer.
func (s *sendBuffer) copyAt(dst []byte, off int) {
	pos := s.head + off
	for len(dst) > 0 {
		c := s.chunks[pos/chunkSize]
		k := copy(dst, c.b[pos%chunkSize:])
		dst = dst[k:]
		pos += k
	}
}

// lendTo lends pk the n bytes starting off bytes into the buffer, in
// place of a copy (buffer.Packet.Borrow): pk's last n bytes of data.
func (s *sendBuffer) lendTo(pk *buffer.Packet, off, n int) {
	pos := s.head + off
	for n > 0 {
		c := s.chunks[pos/chunkSize]
		b := c.b[pos%chunkSize:]
		b = b[:min(len(b), n)]
		c.refs.Add(1)
		pk.Borrow(b, c)
		n -= len(b)
		pos += len(b)
	}
}

// discard drops n bytes from the front, freeing emptied chunks. A segment
// still waiting to be written may hold one a little longer (lendTo); its
// budget is given back now, since the buffer no longer counts it.
func (s *sendBuffer) discard(n int, bud *budget.Budget) {
	s.head += n
	s.n -= n
	for s.head >= chunkSize || (s.n == 0 && len(s.chunks) > 0) {
		s.chunks[0].Return()
		// Shift rather than reslice: a slice that slides forward makes
		// append reallocate it every cap(chunks) chunks, an allocation
		// per 16 KiB-chunk or so in a bulk transfer; copying at most a
		// few hundred pointers per 16 KiB sent costs less.
		n := copy(s.chunks, s.chunks[1:])
		s.chunks[n] = nil
		s.chunks = s.chunks[:n]
		bud.Release(chunkSize)
		if s.head >= chunkSize {
			s.head -= chunkSize
		} else {
			s.head = 0
		}
	}
	if len(s.chunks) == 0 {
		// Keep the emptied list: a request-response connection drains
		// its buffer after every reply, and dropping the list made the
		// next Write allocate a new one. It is a few pointers.
		s.head = 0
	}
}

// rcvSeg is received data waiting for the application: a view into the
// packet that carried it, which the queue owns.
type rcvSeg struct {
	pk   *buffer.Packet
	data []byte
}

// oooSeg is data that arrived ahead of a hole (RFC 9293 3.10.7.4: "segments
// with higher beginning sequence numbers SHOULD be held for later
// processing").
type oooSeg struct {
	seq  seqnum.Value
	pk   *buffer.Packet
	data []byte
	fin  bool
}

func (o *oooSeg) end() seqnum.Value {
	e := o.seq.Add(seqnum.Size(len(o.data)))
	if o.fin {
		e++
	}
	return e
}

// rcvQueue is the in-order data waiting for Read.
type rcvQueue struct {
	segs []rcvSeg
	n    int
}

func (q *rcvQueue) push(pk *buffer.Packet, data []byte) {
	q.segs = append(q.segs, rcvSeg{pk, data})
	q.n += len(data)
}

// read copies into b from the front, releasing emptied packets, and returns
// the bytes copied.
func (q *rcvQueue) read(b []byte) int {
	done := 0
	i := 0
	for ; i < len(q.segs) && done < len(b); i++ {
		s := &q.segs[i]
		k := copy(b[done:], s.data)
		done += k
		s.data = s.data[k:]
		if len(s.data) > 0 {
			break
		}
		s.pk.Release()
		s.pk = nil
	}
	// Drop the released packets from the front.
	n := copy(q.segs, q.segs[i:])
	clear(q.segs[n:])
	q.segs = q.segs[:n]
	q.n -= done
	return done
}

// take moves every queued segment to dst, emptied first, and returns it:
// the caller owns their packets and bytes from then on.
func (q *rcvQueue) take(dst []rcvSeg) []rcvSeg {
	dst = append(dst[:0], q.segs...)
	clear(q.segs)
	q.segs = q.segs[:0]
	q.n = 0
	return dst
}

// clear releases everything queued and returns the bytes dropped.
func (q *rcvQueue) clear() int {
	for _, s := range q.segs {
		if s.pk != nil {
			s.pk.Release()
		}
	}
	n := q.n
	q.segs = nil
	q.n = 0
	return n
}
