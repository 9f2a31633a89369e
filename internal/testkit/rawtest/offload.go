package rawtest

import (
	"encoding/binary"
	"net/netip"
	"sync"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/wire"
)

// Offload gives the stack's NIC a link that offers checksum offload and
// TSO, and takes super-segments in, as a TAP device with offloads does. The harness does the device's
// part in software, as the kernel does for a TAP: it finishes partial
// checksums and cuts each super-segment into segments of its GSO size,
// copying the headers onto each with the IPv4 length, ID and checksum and
// the TCP sequence number fixed and FIN and PSH kept for the last (Linux's
// inet_gso_segment and tcp_gso_segment). The test reads the segments a
// wire would carry, their checksums checked by gopacket as usual, and
// SuperSegments tells what the stack handed over.
func Offload() Option { return func(o *options) { o.offload = true } }

// SuperSegment is the offload metadata of a super-segment the stack sent.
type SuperSegment struct {
	Len                   int // frame length
	HdrLen, GSOSize       int
	CsumStart, CsumOffset int
	NeedsCsum             bool
	Segments              int // what the harness cut it into
}

// offloadLink is the stack's end of the pipe with the device's offloads.
type offloadLink struct {
	*pipe.Endpoint
	pool *buffer.Pool

	mu     sync.Mutex
	supers []SuperSegment
	out    []*buffer.Packet
}

// Capabilities claims the receive offloads too, so that the NIC reads
// into 64 KiB buffers and copies frames out of them (its copybreak);
// frames injected carry no offload metadata and are checked as ever.
func (l *offloadLink) Capabilities() link.Capabilities {
	return link.Capabilities{TxChecksum: true, TSO: true, RxChecksum: true, RxGSO: true}
}

// WriteBatch finishes and cuts up what the stack wrote, then writes it to
// the pipe.
func (l *offloadLink) WriteBatch(pkts []*buffer.Packet) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range pkts {
		o := p.Offload
		switch {
		case o.GSOType == buffer.GSOTCPv4:
			segs := l.segment(p)
			l.supers = append(l.supers, SuperSegment{
				Len: p.Len(), HdrLen: int(o.HdrLen), GSOSize: int(o.GSOSize),
				CsumStart: int(o.CsumStart), CsumOffset: int(o.CsumOffset),
				NeedsCsum: o.Flags&buffer.NeedsCsum != 0, Segments: len(segs),
			})
			l.out = append(l.out, segs...)
		case o.Flags&buffer.NeedsCsum != 0:
			q := l.pool.Clone(p)
			wire.FinishChecksum(q.Bytes(), int(o.CsumStart), int(o.CsumOffset))
			q.Offload = buffer.Offload{}
			l.out = append(l.out, q)
		default:
			l.out = append(l.out, l.pool.Clone(p))
		}
	}
	_, err := l.Endpoint.WriteBatch(l.out)
	for _, q := range l.out {
		q.Release()
	}
	clear(l.out)
	l.out = l.out[:0]
	if err != nil {
		return 0, err
	}
	return len(pkts), nil
}

// segment cuts a TCP/IPv4 super-segment (an Ethernet frame) into frames
// of at most GSOSize bytes of data each.
func (l *offloadLink) segment(p *buffer.Packet) []*buffer.Packet {
	f, o := p.Bytes(), p.Offload
	be := binary.BigEndian
	const ipOff = link.EthernetHeaderLen
	tcpOff := ipOff + int(f[ipOff]&0xf)*4
	hl, mss := int(o.HdrLen), int(o.GSOSize)
	src, dst := netip.AddrFrom4([4]byte(f[ipOff+12:])), netip.AddrFrom4([4]byte(f[ipOff+16:]))
	id, seq, flags := be.Uint16(f[ipOff+4:]), be.Uint32(f[tcpOff+4:]), f[tcpOff+13]
	data := f[hl:]
	var segs []*buffer.Packet
	for i, off := 0, 0; off < len(data); i, off = i+1, off+mss {
		n := min(mss, len(data)-off)
		q := l.pool.Get(hl + n)
		b := q.Bytes()
		copy(b, f[:hl])
		copy(b[hl:], data[off:off+n])
		be.PutUint16(b[ipOff+2:], uint16(hl-ipOff+n))
		be.PutUint16(b[ipOff+4:], id+uint16(i))
		be.PutUint16(b[ipOff+10:], 0)
		be.PutUint16(b[ipOff+10:], wire.Checksum(b[ipOff:tcpOff], 0))
		be.PutUint32(b[tcpOff+4:], seq+uint32(off))
		if off+n < len(data) {
			b[tcpOff+13] = flags &^ (FIN | PSH)
		}
		be.PutUint16(b[tcpOff+16:], wire.PartialChecksum(src, dst, wire.ProtoTCP, len(b)-tcpOff))
		wire.FinishChecksum(b, int(o.CsumStart), int(o.CsumOffset))
		segs = append(segs, q)
	}
	return segs
}

// SuperSegments returns the super-segments the stack has sent so far; nil
// without the Offload option.
func (h *Host) SuperSegments() []SuperSegment {
	if h.offload == nil {
		return nil
	}
	h.offload.mu.Lock()
	defer h.offload.mu.Unlock()
	return append([]SuperSegment(nil), h.offload.supers...)
}
