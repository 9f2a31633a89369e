package ipv4

import (
	"net/netip"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/reassembly"
	"github.com/gonetstack/gonet/wire"
)

// Reassembly (RFC 791 section 3.2, RFC 1122 section 3.3.2, RFC 815), by the
// reassembly package that IPv6 shares: a goroutine per datagram, the
// limits, eviction of the oldest, and overlapping or oversize datagrams
// never built. What is IPv4's own is here: the key, the header the whole
// datagram gets, and what follows a whole or timed-out datagram.

// fragKey identifies a datagram (RFC 791: source, destination, protocol and
// identification).
type fragKey struct {
	src, dst netip.Addr
	id       uint16
	proto    uint8
}

// newReassembler returns the IPv4 layer's reassembly state, counted in its
// Reasm counters.
func (p *Protocol) newReassembler() *reassembly.Reassembler[fragKey] {
	s := &p.Stats
	return reassembly.New(reassembly.Config{
		Timeout:      p.cfg.ReassemblyTimeout,
		MaxDatagrams: p.cfg.MaxReassemblies,
		MaxBytes:     p.cfg.MaxReassemblyBytes,
		MaxLen:       wire.IPv4MaxTotalLen,
	}, p.env, reassembly.Counters{
		Reqds: &s.ReasmReqds, OKs: &s.ReasmOKs, Fails: &s.ReasmFails,
		Timeouts: &s.ReasmTimeouts, Overlaps: &s.ReasmOverlaps, Oversize: &s.ReasmOversize,
		Malformed: &s.ReasmMalformed, Duplicates: &s.ReasmDuplicates, Limit: &s.ReasmLimit,
		Evictions: &s.ReasmEvictions, Active: &s.ReasmActive, Bytes: &s.ReasmBytes,
	}, reasmFamily{p})
}

// reassemble hands fragment pk to its datagram's assembler. It runs in the
// dealer.
func (p *Protocol) reassemble(pk *buffer.Packet, h wire.IPv4, in *Interface) {
	hl := h.HeaderLen()
	f := reassembly.Fragment{Pkt: pk, Head: hl, Data: hl, Offset: h.FragmentOffset(), More: h.MoreFragments()}
	if in != nil {
		f.In = in.name
	}
	p.reasm.Add(fragKey{h.Src(), h.Dst(), h.ID(), h.Protocol()}, f)
}

// reasmFamily is IPv4's side of reassembly.
type reasmFamily struct{ p *Protocol }

// Rebuild gives the whole datagram the first fragment's header (RFC 791:
// options of the first fragment are those of the datagram), with its total
// length, no fragment offset or MF, and a new checksum.
func (reasmFamily) Rebuild(b []byte, hl int, _ []byte) {
	b[2], b[3] = byte(len(b)>>8), byte(len(b))
	b[6] &= 0x40 // keep DF, clear MF and the offset
	b[7] = 0
	wire.IPv4(b[:hl]).SetChecksum()
}

// Reassembled delivers a whole datagram, as from the interface its first
// fragment came in on.
func (f reasmFamily) Reassembled(_ fragKey, dg *buffer.Packet, in string) {
	iface, _ := f.p.Interface(in)
	f.p.deliver(dg, wire.IPv4(dg.Bytes()), iface)
}

// TimedOut logs the timeout and, when the first fragment came, answers
// with ICMP time exceeded quoting it.
func (f reasmFamily) TimedOut(k fragKey, first *buffer.Packet) {
	f.p.logReasmTimeout(k)
	if first == nil {
		return
	}
	if f.p.errors != nil {
		f.p.errors.SendError(wire.IPv4(first.Bytes()), wire.ICMPTimeExceeded, wire.ICMPCodeReassembly, 0)
	}
	first.Release()
}
