package ipv6

import (
	"net/netip"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/reassembly"
	"github.com/gonetstack/gonet/wire"
)

// Reassembly (RFC 8200 section 4.5), by the reassembly package that IPv4
// shares: a goroutine per datagram with its timer, the limits, eviction of
// the oldest, and overlapping fragments discarding the datagram (RFC 5722).
// What is IPv6's own is here: the key, the unfragmentable part the whole
// datagram keeps, and the walk of the whole datagram's chain, which the
// fragments' walks could not see past their Fragment header.

// fragKey identifies a datagram (RFC 8200 section 4.5: source, destination
// and identification). Link-local addresses carry their zone, so that two
// links' datagrams are never mixed.
type fragKey struct {
	src, dst netip.Addr
	id       uint32
}

// maxDatagram is the longest datagram reassembly builds: the fixed header
// and a payload length of 65535, which the stack's buffers hold. The chain
// walk already refuses a fragment that would end past it (Parameter
// Problem, RFC 8200 section 4.5); the bound stays as reassembly's own
// guard, counted as oversize.
var maxDatagram = min(wire.IPv6HeaderLen+wire.IPv6MaxPayloadLen, buffer.MaxSize)

// newReassembler returns the IPv6 layer's reassembly state, counted in its
// Reasm counters.
func (p *Protocol) newReassembler() *reassembly.Reassembler[fragKey] {
	s := &p.Stats
	return reassembly.New(reassembly.Config{
		Timeout:      p.cfg.ReassemblyTimeout,
		MaxDatagrams: p.cfg.MaxReassemblies,
		MaxBytes:     p.cfg.MaxReassemblyBytes,
		MaxLen:       maxDatagram,
	}, p.env, reassembly.Counters{
		Reqds: &s.ReasmReqds, OKs: &s.ReasmOKs, Fails: &s.ReasmFails,
		Timeouts: &s.ReasmTimeout, Overlaps: &s.ReasmOverlaps, Oversize: &s.ReasmOversize,
		Malformed: &s.ReasmMalformed, Duplicates: &s.ReasmDuplicates, Limit: &s.ReasmLimit,
		Evictions: &s.ReasmEvictions, Active: &s.ReasmActive, Bytes: &s.ReasmBytes,
	}, reasmFamily{p})
}

// reassemble hands a fragment, walked as c, to its datagram's assembler.
// The part before the Fragment header is the unfragmentable part, which
// the whole datagram takes from the first fragment.
func (p *Protocol) reassemble(pk *buffer.Packet, h wire.IPv6, c Chain, in *Interface) {
	f := reassembly.Fragment{
		Pkt:    pk,
		Head:   c.Frag.At,
		Data:   c.Frag.At + wire.IPv6FragmentLen,
		Offset: c.Frag.Offset,
		More:   c.Frag.More,
	}
	if in != nil {
		f.In = in.name
	}
	p.reasm.Add(fragKey{zoned(h.Src(), in), zoned(h.Dst(), in), c.Frag.ID}, f)
}

// reasmFamily is IPv6's side of reassembly.
type reasmFamily struct{ p *Protocol }

// Rebuild makes the first fragment's unfragmentable part, head bytes, the
// whole datagram's header (RFC 8200 section 4.5): its payload length
// covers what follows, and the Next Header field that named the Fragment
// header, in the fixed header or the unfragmentable part's last extension
// header, names what the Fragment header named.
func (reasmFamily) Rebuild(b []byte, head int, first []byte) {
	at, off := ipv6NextHeaderField, wire.IPv6HeaderLen
	for next := b[at]; off < head; next = b[at] {
		// The first fragment's walk checked these headers; an atomic
		// Fragment header (RFC 6946) may be among them, whose length is
		// fixed rather than in its second byte.
		n := wire.IPv6FragmentLen
		if next != wire.ProtoFragment {
			n = wire.IPv6ExtHdr(b[off:]).Len()
		}
		at, off = off, off+n
	}
	b[at] = wire.IPv6Fragment(first[head:]).NextHeader()
	n := len(b) - wire.IPv6HeaderLen
	b[ipv6PayloadLenField], b[ipv6PayloadLenField+1] = byte(n>>8), byte(n)
}

// Reassembled walks the whole datagram's chain again, from its first
// header, and deals with it as with one that came whole.
func (f reasmFamily) Reassembled(k fragKey, dg *buffer.Packet, in string) {
	iface, ok := f.p.Interface(in)
	if !ok {
		iface = f.p.zoneIface(k.dst, k.src)
	}
	f.p.dispatch(dg, wire.IPv6(dg.Bytes()), iface, true)
}

// TimedOut answers a datagram whose fragments did not all come with Time
// Exceeded code 1 quoting the first fragment, when that came (RFC 8200
// section 4.5, RFC 4443 section 3.3).
func (f reasmFamily) TimedOut(k fragKey, first *buffer.Packet) {
	f.p.logReasmTimeout(k)
	if first == nil {
		return
	}
	f.p.sendError(ICMPError{
		Type: wire.ICMPv6TimeExceeded, Code: wire.ICMPv6CodeReassemblyTime,
		Orig: wire.IPv6(first.Bytes()), In: f.p.zoneIface(k.dst, k.src),
	})
	first.Release()
}

// zoneIface returns the interface the first zoned address names, nil when
// neither has a zone.
func (p *Protocol) zoneIface(addrs ...netip.Addr) *Interface {
	t := p.tables.load()
	for _, a := range addrs {
		if z := a.Zone(); z != "" {
			return t.iface(z)
		}
	}
	return nil
}
