package wire

import "net/netip"

// UDPHeaderLen is the length of a UDP header (RFC 768).
const UDPHeaderLen = 8

// UDP header layout (RFC 768, "Format"): the offset of each field, each
// 2 bytes.
const (
	udpSrcPort  = 0
	udpDstPort  = 2
	udpLength   = 4
	udpChecksum = 6
)

// UDP is a view of a UDP datagram, header first.
type UDP []byte

// ParseUDP checks the UDP length field against what arrived and returns the
// datagram trimmed to that length.
func ParseUDP(b []byte) (UDP, bool) {
	if len(b) < UDPHeaderLen {
		return nil, false
	}
	l := UDP(b).Length()
	if l < UDPHeaderLen || l > len(b) {
		return nil, false
	}
	return UDP(b[:l]), true
}

// SrcPort returns the source port.
func (u UDP) SrcPort() uint16 { return be.Uint16(u[udpSrcPort : udpSrcPort+2]) }

// DstPort returns the destination port.
func (u UDP) DstPort() uint16 { return be.Uint16(u[udpDstPort : udpDstPort+2]) }

// Length returns the length field.
func (u UDP) Length() int { return int(be.Uint16(u[udpLength : udpLength+2])) }

// Checksum returns the checksum field; zero means none was computed.
func (u UDP) Checksum() uint16 { return be.Uint16(u[udpChecksum : udpChecksum+2]) }

// Payload returns the data after the header.
func (u UDP) Payload() []byte { return u[UDPHeaderLen:u.Length()] }

// ChecksumValid reports whether the checksum over the pseudo-header of
// src's family is right, or absent over IPv4 (RFC 768: "an all zero
// transmitted checksum value means that the transmitter generated no
// checksum"); over IPv6 it is mandatory (RFC 8200 section 8.1).
func (u UDP) ChecksumValid(src, dst netip.Addr) bool {
	if u.Checksum() == 0 {
		return src.Is4()
	}
	return Checksum(u, PseudoHeaderSum(src, dst, ProtoUDP, len(u))) == 0
}

// UDPFields describes a UDP header to encode. The length is the datagram's.
type UDPFields struct {
	SrcPort, DstPort uint16
}

// EncodeUDP writes the header f describes into b[:UDPHeaderLen], b being the
// whole datagram, with a length of len(b) and a zero checksum: "no checksum"
// (RFC 768) until SetUDPChecksum or SetUDPPartialChecksum sets one.
func EncodeUDP(b []byte, f *UDPFields) {
	be.PutUint16(b[udpSrcPort:udpSrcPort+2], f.SrcPort)
	be.PutUint16(b[udpDstPort:udpDstPort+2], f.DstPort)
	be.PutUint16(b[udpLength:udpLength+2], uint16(len(b)))
	b[udpChecksum], b[udpChecksum+1] = 0, 0
}

// SetUDPChecksum computes the checksum of the datagram b, header and
// payload, over the pseudo-header of src and dst (IPv4's or IPv6's, by
// their family), and stores it.
func SetUDPChecksum(b []byte, src, dst netip.Addr) {
	b[udpChecksum], b[udpChecksum+1] = 0, 0
	c := Checksum(b, PseudoHeaderSum(src, dst, ProtoUDP, len(b)))
	if c == 0 {
		c = 0xffff // RFC 768: a computed zero is sent as all ones
	}
	be.PutUint16(b[udpChecksum:udpChecksum+2], c)
}
