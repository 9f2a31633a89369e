package shm

import (
	"fmt"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
)

// The two ends of a ring. Each keeps its own index in private memory and
// publishes it; it reads the other's index from shared memory, where the
// peer, or anything that broke it, may have written any value. Every value
// read from shared memory is copied once, checked, and used only as
// checked: a value that breaks the protocol is a violation, which takes the
// link down. Neither end ever reads or writes outside the mapping, however
// wrong the shared memory is.

// violation is a breach of the ring protocol found in shared memory.
type violation string

func (v violation) Error() string { return string(v) }

func violationf(format string, args ...any) violation {
	return violation(fmt.Sprintf(format, args...))
}

// producer writes frames into a ring.
//
// The data area is a byte ring, not a slot per descriptor: each frame
// takes its length rounded up to a cache line, at the next free place, and
// a frame that would run past the end starts again at the beginning,
// leaving the tail unused. A 60-byte ACK takes 64 bytes and a 64 KiB
// super-segment 64 KiB, so the same area holds thousands of small frames
// or dozens of big ones, where fixed slots would need 64 KiB each (16 MiB
// for 256 descriptors) to carry super-segments at all. The consumer
// releases frames in order, so what is in use is one stretch: from where
// the oldest unconsumed frame started to where the newest ended.
type producer struct {
	r    ring
	head uint32 // frames written, published or not
	pub  uint32 // frames published: the producer index last stored
	tail uint32 // the consumer index, last read and checked
	pos  uint64 // bytes of the data area taken, padding included, since the start
	// starts[i&mask] is pos where frame i's space began (before any
	// padding): the start of what is in use while frame i is unconsumed.
	starts []uint64
}

func newProducer(r ring) producer {
	return producer{r: r, starts: make([]uint64, r.mask+1)}
}

// refresh reads the consumer index. It can only have moved forward, and
// not past what was published: anything else is a violation.
func (p *producer) refresh() error {
	c := p.r.cons.Load()
	if c-p.tail > p.pub-p.tail {
		return violationf("consumer index %d outside %d..%d", c, p.tail, p.pub)
	}
	p.tail = c
	return nil
}

// used is the bytes of the data area held by unconsumed frames.
func (p *producer) used() uint64 {
	if p.tail == p.head {
		return 0
	}
	return p.pos - p.starts[p.tail&p.r.mask]
}

// put copies a frame into the ring, unpublished, with offload metadata
// off: the frame is its pieces (buffer.Packet.Slices), copied one after
// the other. It reports false, writing nothing, when the ring has no free
// descriptor or the data area no room.
func (p *producer) put(pieces [][]byte, off buffer.Offload) bool {
	size := uint64(len(p.r.data))
	if p.head-p.tail > p.r.mask {
		return false
	}
	length := 0
	for _, b := range pieces {
		length += len(b)
	}
	n := alignUp(uint64(length))
	at := p.pos % size
	var pad uint64
	if at+n > size {
		pad = size - at
	}
	if p.used()+pad+n > size {
		return false
	}
	p.starts[p.head&p.r.mask] = p.pos
	p.pos += pad
	at = p.pos % size
	for _, b := range pieces {
		at += uint64(copy(p.r.data[at:], b))
	}
	d := descriptor{offset: uint32(p.pos % size), length: uint32(length), offload: off}
	slot := (p.head & p.r.mask) * descSize
	d.encode(p.r.desc[slot : slot+descSize])
	p.pos += n
	p.head++
	return true
}

// publish makes the frames put so far visible to the consumer. It reports
// whether the consumer asked to be woken: the flag is read after the
// index is stored, and both are sequentially consistent atomics, so a
// consumer that set its flag and then found the ring empty is seen
// sleeping here (the store-load pairing of Dekker's algorithm). Clearing
// the flag as it is read means one wake-up per sleep, however many
// batches arrive before the consumer runs.
func (p *producer) publish() (wake bool) {
	if p.pub == p.head {
		return false
	}
	p.r.prod.Store(p.head)
	p.pub = p.head
	return p.r.sleeping.CompareAndSwap(1, 0)
}

// consumer takes frames out of a ring.
type consumer struct {
	r    ring
	tail uint32 // frames taken: the consumer index, kept privately
	// maxFrame is the longest frame accepted; mtuFrame the longest that
	// is not a super-segment (link.MaxFrame of the MTU).
	maxFrame, mtuFrame int
	// offload is whether the link agreed on offloads; without, a frame
	// must carry no offload metadata.
	offload bool
}

// available returns how many frames are published and not yet taken.
func (c *consumer) available() (uint32, error) {
	p := c.r.prod.Load()
	n := p - c.tail
	if n > c.r.mask+1 {
		return 0, violationf("producer index %d outside %d..%d", p, c.tail, c.tail+c.r.mask+1)
	}
	return n, nil
}

// take copies up to len(pkts) frames into pkts, which must have room for
// maxFrame bytes each, and releases their space to the producer. It
// returns the frames taken and their bytes; on a violation, err and the
// frames taken before it.
func (c *consumer) take(pkts []*buffer.Packet) (n, bytes int, err error) {
	avail, err := c.available()
	if err != nil {
		return 0, 0, err
	}
	k := min(int(avail), len(pkts))
	var raw [descSize]byte
	for ; n < k; n++ {
		slot := ((c.tail + uint32(n)) & c.r.mask) * descSize
		copy(raw[:], c.r.desc[slot:slot+descSize])
		d := decodeDescriptor(&raw)
		if err = c.check(d); err != nil {
			break
		}
		p := pkts[n]
		p.SetLen(int(d.length))
		copy(p.Bytes(), c.r.data[d.offset:d.offset+d.length])
		p.Offload = d.offload
		bytes += int(d.length)
	}
	c.tail += uint32(n)
	c.r.cons.Store(c.tail)
	return n, bytes, err
}

// check reports a descriptor whose frame is not within the data area, or
// whose length or offload metadata the link cannot carry. The frame's
// bytes are the producer's business, as on any wire; its bounds are the
// consumer's.
func (c *consumer) check(d descriptor) error {
	switch {
	case d.length < link.EthernetHeaderLen || int(d.length) > c.maxFrame:
		return violationf("frame of %d bytes outside %d..%d", d.length, link.EthernetHeaderLen, c.maxFrame)
	case uint64(d.offset)+uint64(d.length) > uint64(len(c.r.data)):
		return violationf("frame at %d+%d beyond the data area of %d bytes", d.offset, d.length, len(c.r.data))
	}
	o := d.offload
	if !c.offload {
		if o != (buffer.Offload{}) {
			return violationf("offload metadata %+v on a link without offloads", o)
		}
		return nil
	}
	return checkOffload(o, int(d.length), c.mtuFrame)
}

// checkOffload reports offload metadata that does not describe a frame of
// n bytes: an unknown flag or GSO type, a checksum to store beyond the
// frame, headers longer than it, or a frame over the MTU (mtuFrame) that
// is not a super-segment. A layer that finishes a checksum or cuts a
// super-segment (ipv4/offload.go) indexes the frame with these.
func checkOffload(o buffer.Offload, n, mtuFrame int) error {
	switch {
	case o.Flags&^(buffer.NeedsCsum|buffer.DataValid) != 0:
		return violationf("offload flags %#x", o.Flags)
	case o.Flags&buffer.NeedsCsum != 0 && int(o.CsumStart)+int(o.CsumOffset)+2 > n:
		return violationf("checksum at %d+%d beyond the frame of %d bytes", o.CsumStart, o.CsumOffset, n)
	}
	switch o.GSOType {
	case buffer.GSONone:
		if n > mtuFrame {
			return violationf("frame of %d bytes over the MTU's %d and not a super-segment", n, mtuFrame)
		}
	case buffer.GSOTCPv4, buffer.GSOTCPv6, buffer.GSOUDP:
		if o.GSOSize == 0 || int(o.HdrLen) > n {
			return violationf("super-segment of %d bytes with segments of %d and headers of %d", n, o.GSOSize, o.HdrLen)
		}
	default:
		return violationf("GSO type %d", o.GSOType)
	}
	return nil
}
