package wire

import "net/netip"

// ICMPv6 message types (RFC 4443 section 2.1; neighbour discovery's from
// RFC 4861 section 4).
const (
	ICMPv6DestUnreach           = 1
	ICMPv6PacketTooBig          = 2
	ICMPv6TimeExceeded          = 3
	ICMPv6ParamProblem          = 4
	ICMPv6EchoRequest           = 128
	ICMPv6EchoReply             = 129
	ICMPv6RouterSolicitation    = 133
	ICMPv6RouterAdvertisement   = 134
	ICMPv6NeighborSolicitation  = 135
	ICMPv6NeighborAdvertisement = 136
	ICMPv6Redirect              = 137
)

// Destination Unreachable codes (RFC 4443 section 3.1).
const (
	ICMPv6CodeNoRoute          = 0
	ICMPv6CodeAdminProhibited  = 1
	ICMPv6CodeBeyondScope      = 2
	ICMPv6CodeAddrUnreach      = 3
	ICMPv6CodePortUnreach      = 4
	ICMPv6CodeSrcPolicyFailed  = 5
	ICMPv6CodeRejectRoute      = 6
	ICMPv6CodeHopLimitExceeded = 0 // Time Exceeded (RFC 4443 section 3.3)
	ICMPv6CodeReassemblyTime   = 1 // Time Exceeded: fragment reassembly time exceeded
)

// Parameter Problem codes (RFC 4443 section 3.4; code 3 from RFC 7112
// section 6).
const (
	ICMPv6CodeErroneousHeader  = 0
	ICMPv6CodeUnrecognizedNext = 1
	ICMPv6CodeUnrecognizedOpt  = 2
	ICMPv6CodeIncompleteChain  = 3
)

const (
	// ICMPv6HeaderLen is the length of the header every message starts
	// with, the type-specific word included.
	ICMPv6HeaderLen = 8
	// IPv6MinMTU is the MTU every IPv6 link carries (RFC 8200 section 5).
	IPv6MinMTU = 1280
	// ICMPv6MaxErrorQuote is how much of the invoking packet an error may
	// carry: "as much of invoking packet as possible without the ICMPv6
	// packet exceeding the minimum IPv6 MTU" (RFC 4443 section 3.1).
	ICMPv6MaxErrorQuote = IPv6MinMTU - IPv6HeaderLen - ICMPv6HeaderLen

	icmpv6ErrorTypeLimit = 128 // types below are errors (RFC 4443 section 2.1)
)

// ICMPv6 header layout (RFC 4443 section 2.1): type, code, checksum, then a
// word whose meaning depends on the type (unused, MTU, pointer, echo
// identifier and sequence number, the first word of an ND message).
const (
	icmpv6Type     = 0 // 1 byte
	icmpv6Code     = 1 // 1 byte
	icmpv6Checksum = 2 // 2 bytes
	icmpv6Rest     = 4 // 4 bytes
	icmpv6Ident    = 4 // echo identifier, 2 bytes
	icmpv6Seq      = 6 // echo sequence number, 2 bytes
)

// ICMPv6 is a view of an ICMPv6 message.
type ICMPv6 []byte

// ParseICMPv6 checks that b holds the 8-byte header every ICMPv6 message
// of RFC 4443 and RFC 4861 starts with. The checksum needs the addresses of
// the IPv6 header: ChecksumValid verifies it.
func ParseICMPv6(b []byte) (ICMPv6, bool) {
	if len(b) < ICMPv6HeaderLen {
		return nil, false
	}
	return ICMPv6(b), true
}

// Type returns the message type.
func (m ICMPv6) Type() uint8 { return m[icmpv6Type] }

// Code returns the message code.
func (m ICMPv6) Code() uint8 { return m[icmpv6Code] }

// Checksum returns the checksum field.
func (m ICMPv6) Checksum() uint16 { return be.Uint16(m[icmpv6Checksum : icmpv6Checksum+2]) }

// IsError reports whether the type is an error message: the high bit of
// the type is clear (RFC 4443 section 2.1).
func (m ICMPv6) IsError() bool { return m.Type() < icmpv6ErrorTypeLimit }

// RestOfHeader returns the header's last word.
func (m ICMPv6) RestOfHeader() uint32 { return be.Uint32(m[icmpv6Rest : icmpv6Rest+4]) }

// Ident returns an echo message's identifier (RFC 4443 section 4).
func (m ICMPv6) Ident() uint16 { return be.Uint16(m[icmpv6Ident : icmpv6Ident+2]) }

// Seq returns an echo message's sequence number.
func (m ICMPv6) Seq() uint16 { return be.Uint16(m[icmpv6Seq : icmpv6Seq+2]) }

// MTU returns a Packet Too Big message's MTU (RFC 4443 section 3.2).
func (m ICMPv6) MTU() uint32 { return m.RestOfHeader() }

// Pointer returns a Parameter Problem message's pointer: the offset in the
// invoking packet of the octet in error (RFC 4443 section 3.4).
func (m ICMPv6) Pointer() uint32 { return m.RestOfHeader() }

// Payload returns what follows the 8-byte header: echo data, the invoking
// packet an error quotes, or the rest of an ND message.
func (m ICMPv6) Payload() []byte { return m[ICMPv6HeaderLen:] }

// ChecksumValid reports whether the checksum over the pseudo-header of src
// and dst (RFC 4443 section 2.3, next header 58) and the message is right.
// Unlike UDP's, a zero checksum is not "none".
func (m ICMPv6) ChecksumValid(src, dst netip.Addr) bool {
	return Checksum(m, PseudoHeaderSum6(src, dst, ProtoICMPv6, len(m))) == 0
}

// ICMPv6Fields describes an ICMPv6 header to encode.
type ICMPv6Fields struct {
	Type, Code uint8
	Rest       uint32 // the rest of the header: EchoRest for echo, the MTU, the pointer
}

// EncodeICMPv6 writes the header f describes into b[:ICMPv6HeaderLen] with a
// zero checksum; SetICMPv6Checksum completes it once the body is in place.
func EncodeICMPv6(b []byte, f *ICMPv6Fields) {
	b[icmpv6Type], b[icmpv6Code] = f.Type, f.Code
	b[icmpv6Checksum], b[icmpv6Checksum+1] = 0, 0
	be.PutUint32(b[icmpv6Rest:icmpv6Rest+4], f.Rest)
}

// SetICMPv6Checksum computes the checksum of the message b over the IPv6
// pseudo-header of src and dst (RFC 4443 section 2.3) and stores it.
func SetICMPv6Checksum(b []byte, src, dst netip.Addr) {
	b[icmpv6Checksum], b[icmpv6Checksum+1] = 0, 0
	be.PutUint16(b[icmpv6Checksum:icmpv6Checksum+2], Checksum(b, PseudoHeaderSum6(src, dst, ProtoICMPv6, len(b))))
}
