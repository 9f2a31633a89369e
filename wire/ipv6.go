package wire

import (
	"net/netip"
	"strconv"
)

// IPv6 header constants (RFC 8200 section 3) and the next-header values of
// the extension headers (RFC 8200 section 4) and ICMPv6 (RFC 4443).
const (
	IPv6HeaderLen     = 40
	IPv6MaxPayloadLen = 65535

	ProtoHopByHop = 0
	ProtoRouting  = 43
	ProtoFragment = 44
	ProtoICMPv6   = 58
	ProtoNoNext   = 59
	ProtoDestOpts = 60
)

// IPv6 header layout (RFC 8200 section 3): the offset of each field.
const (
	ipv6VerTCFlow   = 0  // version (4 bits), traffic class (8), flow label (20): 4 bytes
	ipv6PayloadLen  = 4  // payload length, 2 bytes
	ipv6NextHeader  = 6  // next header, 1 byte
	ipv6HopLimit    = 7  // hop limit, 1 byte
	ipv6Src         = 8  // source address, 16 bytes
	ipv6Dst         = 24 // destination address, 16 bytes
	ipv6FlowMask    = 0xfffff
	ipv6TCShift     = 20
	ipv6VersionBits = 28
)

// IPv6 is a view of an IPv6 packet, fixed header first.
type IPv6 []byte

// IPv6Error says why a packet failed validation, as IPv4Error does for
// IPv4: the IPv6 layer counts each reason apart.
type IPv6Error uint8

// Validation failures, in the order ParseIPv6 checks for them.
const (
	IPv6OK IPv6Error = iota
	IPv6Truncated
	IPv6BadVersion
	IPv6BadPayloadLen
)

var ipv6ErrorText = [...]string{"ok", "shorter than the 40-byte header", "version not 6", "payload length past the end of the packet"}

// String names the reason; values outside the list print as a number
// rather than panic.
func (e IPv6Error) String() string {
	if int(e) < len(ipv6ErrorText) {
		return ipv6ErrorText[e]
	}
	return "IPv6Error(" + strconv.Itoa(int(e)) + ")"
}

// ParseIPv6 validates b as an RFC 8200 section 3 packet (a whole fixed
// header, version 6, the payload length within what arrived) and returns
// the packet trimmed to its payload length, dropping link-layer padding. A
// zero payload length is taken as it stands: a jumbogram (RFC 2675) would
// need a Hop-by-Hop option the stack does not support.
func ParseIPv6(b []byte) (IPv6, IPv6Error) {
	if len(b) < IPv6HeaderLen {
		return nil, IPv6Truncated
	}
	h := IPv6(b)
	if h.version() != 6 {
		return nil, IPv6BadVersion
	}
	end := IPv6HeaderLen + h.PayloadLen()
	if end > len(b) {
		return nil, IPv6BadPayloadLen
	}
	return h[:end], IPv6OK
}

func (h IPv6) version() uint8 { return h[ipv6VerTCFlow] >> 4 }

func (h IPv6) firstWord() uint32 { return be.Uint32(h[ipv6VerTCFlow : ipv6VerTCFlow+4]) }

// TrafficClass returns the traffic class (DSCP and ECN, RFC 2474, RFC 3168).
func (h IPv6) TrafficClass() uint8 { return uint8(h.firstWord() >> ipv6TCShift) }

// FlowLabel returns the 20-bit flow label (RFC 6437).
func (h IPv6) FlowLabel() uint32 { return h.firstWord() & ipv6FlowMask }

// PayloadLen returns the payload length: the bytes after the fixed header,
// extension headers included.
func (h IPv6) PayloadLen() int { return int(be.Uint16(h[ipv6PayloadLen : ipv6PayloadLen+2])) }

// NextHeader returns the type of the header after the fixed one.
func (h IPv6) NextHeader() uint8 { return h[ipv6NextHeader] }

// HopLimit returns the hop limit.
func (h IPv6) HopLimit() uint8 { return h[ipv6HopLimit] }

// Src returns the source address.
func (h IPv6) Src() netip.Addr { return netip.AddrFrom16([16]byte(h[ipv6Src : ipv6Src+16])) }

// Dst returns the destination address.
func (h IPv6) Dst() netip.Addr { return netip.AddrFrom16([16]byte(h[ipv6Dst : ipv6Dst+16])) }

// Payload returns the bytes after the fixed header, up to the payload
// length: extension headers, then the upper-layer packet.
func (h IPv6) Payload() []byte { return h[IPv6HeaderLen : IPv6HeaderLen+h.PayloadLen()] }

// SetHopLimit sets the hop limit; IPv6 has no header checksum to update.
func (h IPv6) SetHopLimit(l uint8) { h[ipv6HopLimit] = l }

// IPv6Fields describes an IPv6 fixed header to encode.
type IPv6Fields struct {
	TrafficClass uint8
	FlowLabel    uint32 // the low 20 bits are sent
	PayloadLen   int
	NextHeader   uint8
	HopLimit     uint8
	Src, Dst     netip.Addr // IPv6 addresses; an IPv4 one is sent mapped
}

// EncodeIPv6 writes the header f describes into b[:IPv6HeaderLen].
func EncodeIPv6(b []byte, f *IPv6Fields) {
	be.PutUint32(b[ipv6VerTCFlow:ipv6VerTCFlow+4], 6<<ipv6VersionBits|uint32(f.TrafficClass)<<ipv6TCShift|f.FlowLabel&ipv6FlowMask)
	be.PutUint16(b[ipv6PayloadLen:ipv6PayloadLen+2], uint16(f.PayloadLen))
	b[ipv6NextHeader] = f.NextHeader
	b[ipv6HopLimit] = f.HopLimit
	s, d := f.Src.As16(), f.Dst.As16()
	copy(b[ipv6Src:ipv6Src+16], s[:])
	copy(b[ipv6Dst:ipv6Dst+16], d[:])
}

// PseudoHeaderSum6 is the sum of the IPv6 pseudo-header of RFC 8200
// section 8.1 that upper-layer checksums (TCP, UDP, ICMPv6) cover: source,
// destination, the upper-layer packet length as 32 bits, three zero bytes
// and the next header. length is the upper layer's, not the payload
// length, when extension headers come between.
func PseudoHeaderSum6(src, dst netip.Addr, nextHeader uint8, length int) uint32 {
	s, d := src.As16(), dst.As16()
	var sum uint32
	for i := 0; i < 16; i += 2 {
		sum += uint32(be.Uint16(s[i:])) + uint32(be.Uint16(d[i:]))
	}
	return sum + uint32(length>>16)&0xffff + uint32(length)&0xffff + uint32(nextHeader)
}

// Extension headers (RFC 8200 section 4). All but the Fragment header
// share a first word of next header and length; the Fragment header is 8
// bytes with a reserved byte where the length would be.
const (
	IPv6ExtHdrUnit    = 8 // the length field counts 8-octet units beyond the first
	IPv6FragmentLen   = 8
	ipv6ExtNextHeader = 0 // 1 byte
	ipv6ExtLen        = 1 // hdr ext len, 1 byte
	ipv6ExtOptions    = 2 // options of Hop-by-Hop and Destination Options

	ipv6FragNextHeader = 0 // 1 byte
	ipv6FragReserved   = 1 // 1 byte
	ipv6FragOffM       = 2 // offset in 8-octet units (13 bits), res (2), M (1): 2 bytes
	ipv6FragID         = 4 // identification, 4 bytes
	ipv6FragOffMask    = 0xfff8
	ipv6FragM          = 0x0001
)

// IPv6ExtHdr is a view of a generic extension header (RFC 8200 section 4):
// Hop-by-Hop Options, Routing, Destination Options, and others that follow
// the same layout (RFC 8200 section 4.8).
type IPv6ExtHdr []byte

// ParseIPv6ExtHdr checks that b starts with a whole extension header, by
// its length field, and returns the view trimmed to that header.
func ParseIPv6ExtHdr(b []byte) (IPv6ExtHdr, bool) {
	if len(b) < IPv6ExtHdrUnit {
		return nil, false
	}
	n := (int(b[ipv6ExtLen]) + 1) * IPv6ExtHdrUnit
	if n > len(b) {
		return nil, false
	}
	return IPv6ExtHdr(b[:n]), true
}

// NextHeader returns the type of the header that follows.
func (x IPv6ExtHdr) NextHeader() uint8 { return x[ipv6ExtNextHeader] }

// Len returns the header's length in bytes: (hdr ext len + 1) * 8.
func (x IPv6ExtHdr) Len() int { return (int(x[ipv6ExtLen]) + 1) * IPv6ExtHdrUnit }

// Data returns the bytes after next header and length: the options of a
// Hop-by-Hop or Destination Options header (RFC 8200 section 4.3, 4.6),
// the routing type and what follows of a Routing header.
func (x IPv6ExtHdr) Data() []byte { return x[ipv6ExtOptions:x.Len()] }

// IPv6Fragment is a view of a Fragment header (RFC 8200 section 4.5).
type IPv6Fragment []byte

// ParseIPv6Fragment checks that b starts with a whole Fragment header and
// returns the view of its 8 bytes.
func ParseIPv6Fragment(b []byte) (IPv6Fragment, bool) {
	if len(b) < IPv6FragmentLen {
		return nil, false
	}
	return IPv6Fragment(b[:IPv6FragmentLen]), true
}

// NextHeader returns the type of the fragmentable part's first header.
func (x IPv6Fragment) NextHeader() uint8 { return x[ipv6FragNextHeader] }

func (x IPv6Fragment) offM() uint16 { return be.Uint16(x[ipv6FragOffM : ipv6FragOffM+2]) }

// Offset returns the fragment offset in bytes.
func (x IPv6Fragment) Offset() int { return int(x.offM() & ipv6FragOffMask) }

// MoreFragments reports whether the M flag is set.
func (x IPv6Fragment) MoreFragments() bool { return x.offM()&ipv6FragM != 0 }

// ID returns the identification.
func (x IPv6Fragment) ID() uint32 { return be.Uint32(x[ipv6FragID : ipv6FragID+4]) }

// IsAtomic reports whether the header is an atomic fragment: offset zero
// and M clear, a whole datagram (RFC 6946).
func (x IPv6Fragment) IsAtomic() bool { return x.offM()&(ipv6FragOffMask|ipv6FragM) == 0 }

// IPv6FragmentFields describes a Fragment header to encode.
type IPv6FragmentFields struct {
	NextHeader    uint8
	Offset        int // in bytes, a multiple of 8
	MoreFragments bool
	ID            uint32
}

// EncodeIPv6Fragment writes the header f describes into
// b[:IPv6FragmentLen], reserved fields zero (RFC 8200 section 4.5:
// "Initialized to zero for transmission").
func EncodeIPv6Fragment(b []byte, f *IPv6FragmentFields) {
	b[ipv6FragNextHeader] = f.NextHeader
	b[ipv6FragReserved] = 0
	om := uint16(f.Offset) & ipv6FragOffMask
	if f.MoreFragments {
		om |= ipv6FragM
	}
	be.PutUint16(b[ipv6FragOffM:ipv6FragOffM+2], om)
	be.PutUint32(b[ipv6FragID:ipv6FragID+4], f.ID)
}

// Options of Hop-by-Hop and Destination Options headers (RFC 8200 section
// 4.2): Pad1 is a single zero byte; every other option is type, data
// length (not counting type and length), data.
const (
	IPv6OptPad1 = 0
	IPv6OptPadN = 1

	ipv6OptType    = 0
	ipv6OptDataLen = 1
	ipv6OptData    = 2
)

// IPv6OptAction is what RFC 8200 section 4.2 asks of a node that does not
// recognize an option, from the two high bits of its type.
type IPv6OptAction uint8

// The actions, in the order of their encoding.
const (
	IPv6OptSkip               IPv6OptAction = 0 // skip over the option
	IPv6OptDiscard            IPv6OptAction = 1 // discard the packet silently
	IPv6OptDiscardICMP        IPv6OptAction = 2 // discard, send Parameter Problem code 2
	IPv6OptDiscardICMPUnicast IPv6OptAction = 3 // the same, unless the destination was multicast
)

// ipv6OptChange is the third-highest type bit: the option's data may
// change en route (RFC 8200 section 4.2).
const ipv6OptChange = 0x20

// IPv6Options is a view of the options area of a Hop-by-Hop or
// Destination Options header, as IPv6ExtHdr.Data returns it.
type IPv6Options []byte

// ParseIPv6Options checks that every option in b fits in b, so that Next
// can walk them.
func ParseIPv6Options(b []byte) (IPv6Options, bool) {
	for o := b; len(o) > 0; {
		if o[ipv6OptType] == IPv6OptPad1 {
			o = o[1:]
			continue
		}
		if len(o) < ipv6OptData {
			return nil, false
		}
		n := ipv6OptData + int(o[ipv6OptDataLen])
		if n > len(o) {
			return nil, false
		}
		o = o[n:]
	}
	return IPv6Options(b), true
}

// Next returns the first option and the options after it; o must be
// non-empty and come from ParseIPv6Options.
func (o IPv6Options) Next() (IPv6Option, IPv6Options) {
	n := 1
	if o[ipv6OptType] != IPv6OptPad1 {
		n = ipv6OptData + int(o[ipv6OptDataLen])
	}
	return IPv6Option(o[:n]), o[n:]
}

// IPv6Option is a view of one option, Pad1 included.
type IPv6Option []byte

// Type returns the option type.
func (p IPv6Option) Type() uint8 { return p[ipv6OptType] }

// Data returns the option data, empty for Pad1.
func (p IPv6Option) Data() []byte {
	if len(p) < ipv6OptData {
		return nil
	}
	return p[ipv6OptData:]
}

// Len returns the option's length in bytes, type and length included.
func (p IPv6Option) Len() int { return len(p) }

// Action returns what a node that does not recognize the option must do.
func (p IPv6Option) Action() IPv6OptAction { return IPv6OptAction(p.Type() >> 6) }

// MayChange reports whether the option's data may change en route, which
// the Authentication Header treats as zero (RFC 8200 section 4.2).
func (p IPv6Option) MayChange() bool { return p.Type()&ipv6OptChange != 0 }
