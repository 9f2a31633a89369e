// Package buffer holds GoNet's packet buffers: pooled byte slices with
// headroom in front, so that each layer on the way out can prepend its header
// without copying the payload, and with one owner at a time.
//
// A Packet is taken from a Pool with Get and handed back with Release. The
// goroutine that holds a Packet owns it; passing it through a channel passes
// ownership. Each Pool counts the packets it has lent and not seen again, so
// that tests can assert a leak count of zero.
package buffer

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Headroom is the space kept in front of a fresh packet's data: enough for a
// virtio-net header, Ethernet, IPv4 with options and a TCP header with options.
const Headroom = 160

// classes are the capacities the pools hand out. Frames fit the first; UDP
// datagrams and reassembled datagrams of either family fit the last.
var classes = [...]int{2048, 16384, MaxSize + Headroom}

// MaxSize is the largest data size Get can serve: the largest IPv6
// datagram, 40 bytes of fixed header and the 65535 of payload its 16-bit
// length allows (RFC 8200 section 3), rounded up to 64 bytes. IPv4's
// largest, 65535 bytes in all, fits with room to spare.
const MaxSize = 65536 + 64

// Offload is the per-packet offload metadata of the virtio-net header
// (virtio spec 1.1 section 5.1.6, struct virtio_net_hdr). It travels with the
// packet so that checksum offload and TSO/GSO can be switched on without
// changing the link interface.
type Offload struct {
	Flags      uint8  // NeedsCsum, DataValid
	GSOType    uint8  // GSONone, GSOTCPv4, GSOUDP, GSOTCPv6
	HdrLen     uint16 // length of the headers to copy onto every segment
	GSOSize    uint16 // payload bytes per segment
	CsumStart  uint16 // where checksumming starts, from the frame's start
	CsumOffset uint16 // where to store the checksum, from CsumStart
}

// Offload flags and GSO types, with the values of linux/virtio_net.h.
const (
	NeedsCsum = 1 // checksum is partial: the receiver (or device) must finish it
	DataValid = 2 // checksum already checked by the device

	GSONone  = 0
	GSOTCPv4 = 1
	GSOUDP   = 3 // UDP fragmentation offload (UFO), which no Linux since 4.14 makes
	GSOTCPv6 = 4
	// GSOUDPL4 is UDP segmentation offload (Linux's SKB_GSO_UDP_L4):
	// datagrams of GSOSize payload bytes, each with its own headers.
	GSOUDPL4 = 5
)

// ChecksumVerified reports whether the link vouches for the transport
// checksum of a packet received: a partial checksum (the sender left it to
// a device, and the frame never crossed a wire: the local kernel's, on a
// TAP device) or one the device has checked. Only a link with
// link.Capabilities.RxChecksum sets these flags.
func (o Offload) ChecksumVerified() bool { return o.Flags&(NeedsCsum|DataValid) != 0 }

// Prepended accounts for a header of n bytes that a layer put in front of
// the packet after the layer above set a partial checksum or a super-
// segment: CsumStart and HdrLen count from the start of the frame (as in
// the virtio-net header), so each layer below the transport adds its own
// header on the way out (IPv4 its header, the NIC the Ethernet header).
func (o *Offload) Prepended(n int) {
	if o.Flags&NeedsCsum != 0 {
		o.CsumStart += uint16(n)
	}
	if o.GSOType != GSONone {
		o.HdrLen += uint16(n)
	}
}

// Packet is a packet buffer: data in buf[off:end], headroom in buf[:off].
// The data's last `borrowed` bytes may be loans, still in their lender's
// memory (Borrow).
type Packet struct {
	buf      []byte
	off, end int
	class    int8
	pool     *Pool
	borrowed int
	loans    []loan

	// Offload is the packet's virtio-net metadata, zero when unused.
	Offload Offload
}

// Bytes returns the packet's data, copying any loans into place first
// (Borrow). The slice is valid until the packet changes or is released.
func (p *Packet) Bytes() []byte {
	if p.borrowed != 0 {
		p.own()
	}
	return p.buf[p.off:p.end]
}

// Len returns the data length.
func (p *Packet) Len() int { return p.end - p.off }

// Headroom returns the free space in front of the data.
func (p *Packet) Headroom() int { return p.off }

// Cap returns the most data the packet can hold without its headroom.
func (p *Packet) Cap() int { return len(p.buf) - p.off }

// Prepend grows the data by n bytes at the front and returns them. It panics
// when the headroom is too small: headers are bounded, so that is a bug.
func (p *Packet) Prepend(n int) []byte {
	if n > p.off {
		panic(fmt.Sprintf("buffer: prepend %d bytes with %d of headroom", n, p.off))
	}
	p.off -= n
	return p.buf[p.off : p.off+n]
}

// TrimFront drops n bytes from the front, as a layer does with its header
// on the way in.
func (p *Packet) TrimFront(n int) {
	if n > p.Len()-p.borrowed {
		p.own()
	}
	if n > p.Len() {
		panic(fmt.Sprintf("buffer: trim %d bytes of %d", n, p.Len()))
	}
	p.off += n
}

// SetLen sets the data length, keeping the front; it trims padding (an
// Ethernet frame's tail beyond the IP total length) or grows into capacity.
func (p *Packet) SetLen(n int) {
	if p.borrowed != 0 {
		p.own()
	}
	if n < 0 || p.off+n > len(p.buf) {
		panic(fmt.Sprintf("buffer: length %d out of capacity %d", n, p.Cap()))
	}
	p.end = p.off + n
}

// Reset empties the packet and restores the standard headroom (or all the
// space, when the buffer is smaller), ready for reuse by its owner.
func (p *Packet) Reset() {
	h := Headroom
	if h > len(p.buf) {
		h = 0
	}
	p.returnLoans()
	p.off, p.end = h, h
	p.Offload = Offload{}
}

// Release hands the packet back to its pool. The caller must not touch it
// afterwards.
func (p *Packet) Release() {
	pool := p.pool
	if pool == nil {
		panic("buffer: release of a packet twice or not from a pool")
	}
	p.returnLoans()
	p.pool = nil
	pool.lent.Add(-1)
	pool.classes[p.class].Put(p)
}

// Loans. A packet's data may end in bytes it borrows rather than holds: a
// TCP segment's payload can stay in the connection's send buffer until a
// link that gathers (link.Capabilities.TxGather) writes the frame from its
// pieces in one system call (writev(2)), which saves a copy of every byte
// sent. The packet keeps room for the borrowed bytes all the same, so that
// whoever reads its data with Bytes gets them copied into place and the
// loans returned: a packet with loans goes anywhere a packet goes, and
// costs the copy only where something looks at its payload.

// A Lender owns bytes a packet borrows. Return is called once for each
// Borrow, when the packet no longer needs them; the lender must not
// change the bytes before then.
type Lender interface{ Return() }

type loan struct {
	b    []byte
	from Lender
}

// Borrow makes b, owned by from, the next of the data's borrowed bytes: a
// packet's loans stand, in the order borrowed, for the last bytes of its
// data, whose room it keeps unwritten. It panics when the loans would
// outgrow the data: the caller sized the packet for them.
func (p *Packet) Borrow(b []byte, from Lender) {
	if p.borrowed+len(b) > p.Len() {
		panic(fmt.Sprintf("buffer: borrow %d bytes beyond %d of data with %d borrowed", len(b), p.Len(), p.borrowed))
	}
	p.loans = append(p.loans, loan{b, from})
	p.borrowed += len(b)
}

// Borrowed returns how many of the data's last bytes are loans.
func (p *Packet) Borrowed() int { return p.borrowed }

// Head returns the data the packet holds itself: all of it but the
// loans. A reader of headers uses it to leave the loans where they are.
func (p *Packet) Head() []byte { return p.buf[p.off : p.end-p.borrowed] }

// Slices appends to dst the data as pieces, the head first and then each
// loan, for a write that gathers them, and returns it.
func (p *Packet) Slices(dst [][]byte) [][]byte {
	dst = append(dst, p.Head())
	for _, l := range p.loans {
		dst = append(dst, l.b)
	}
	return dst
}

// own copies the loans into their room and returns them.
func (p *Packet) own() {
	at := p.end - p.borrowed
	for _, l := range p.loans {
		at += copy(p.buf[at:], l.b)
	}
	p.returnLoans()
}

// returnLoans gives every loan back to its lender.
func (p *Packet) returnLoans() {
	for i := range p.loans {
		p.loans[i].from.Return()
	}
	clear(p.loans)
	p.loans = p.loans[:0]
	p.borrowed = 0
}

// Pool lends packets of the size classes above. The zero value is not
// usable; call NewPool.
type Pool struct {
	classes [len(classes)]sync.Pool
	lent    atomic.Int64
}

// NewPool returns an empty pool.
func NewPool() *Pool {
	p := &Pool{}
	for i := range classes {
		size := classes[i]
		class := int8(i)
		p.classes[i].New = func() any {
			return &Packet{buf: make([]byte, size), class: class}
		}
	}
	return p
}

// Get returns a packet with n bytes of data (contents unspecified) and at
// least Headroom bytes in front. It panics for n > MaxSize.
func (p *Pool) Get(n int) *Packet {
	for i, c := range classes {
		if Headroom+n <= c {
			pk := p.classes[i].Get().(*Packet)
			pk.pool = p
			pk.off = Headroom
			pk.end = Headroom + n
			pk.Offload = Offload{}
			p.lent.Add(1)
			return pk
		}
	}
	panic(fmt.Sprintf("buffer: packet of %d bytes exceeds %d", n, MaxSize))
}

// SizeClass returns the size of the buffer that Get(n) lends, so that a
// holder of a large buffer can tell whether a copy would hold less memory.
// It returns 0 for n > MaxSize.
func SizeClass(n int) int {
	for _, c := range classes {
		if Headroom+n <= c {
			return c
		}
	}
	return 0
}

// Outstanding returns how many packets are lent and not yet released. Tests
// assert it is zero once a stack has shut down.
func (p *Pool) Outstanding() int64 { return p.lent.Load() }

// Clone returns a copy of pk from pool, with the same offload metadata.
func (p *Pool) Clone(pk *Packet) *Packet {
	c := p.Get(pk.Len())
	copy(c.Bytes(), pk.Bytes())
	c.Offload = pk.Offload
	return c
}

// Batch is a bounded group of packets that travels through a channel as one
// message, so that a dealer pays one channel operation for many packets.
type Batch struct {
	Pkts []*Packet
	// From says who dealt the batch, for a receiver fed by several
	// (IPv4: the interface it arrived on); nil when unused.
	From any
}

// MaxBatch bounds a batch: enough to amortise a channel hop, small enough to
// keep latency and per-batch memory low.
const MaxBatch = 64

var batches = sync.Pool{New: func() any { return &Batch{Pkts: make([]*Packet, 0, MaxBatch)} }}

// GetBatch returns an empty batch.
func GetBatch() *Batch { return batches.Get().(*Batch) }

// Full reports whether the batch has reached MaxBatch.
func (b *Batch) Full() bool { return len(b.Pkts) >= MaxBatch }

// Release releases every packet of the batch and returns the batch for
// reuse: what a dealer does with a batch it drops.
func (b *Batch) Release() {
	for _, p := range b.Pkts {
		p.Release()
	}
	b.Put()
}

// Put returns the batch (not its packets) for reuse.
func (b *Batch) Put() {
	clear(b.Pkts)
	b.Pkts = b.Pkts[:0]
	b.From = nil
	batches.Put(b)
}
