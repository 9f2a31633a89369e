// Package wire holds GoNet's wire formats: Ethernet II, ARP, IPv4, ICMPv4,
// UDP and TCP; and for IPv6, its header and extension headers (ipv6.go),
// ICMPv6 (icmpv6.go) and neighbour discovery's messages and options
// (ndp.go). For each protocol X there are
//
//   - a view, type X []byte, whose accessors read the header's fields in
//     place, without copying;
//   - ParseX(b []byte) (X, bool), which checks that b holds a header of X
//     the stack can read (its length fields within what arrived, and what
//     else its doc lists) and returns the view, trimmed to the length the
//     header gives where it gives one. ParseIPv4 and ParseIPv6 return an
//     IPv4Error or IPv6Error in place of the bool, because the IP layers
//     count each reason for a drop apart;
//   - an XFields struct and EncodeX(b []byte, f *XFields), which writes the
//     header f describes at the front of b. b must have room for the
//     header; f is only read, and does not escape.
//
// Views assume the caller checked the length with the protocol's Parse
// function (or wrote the header with its encoder). Parse functions never
// panic, whatever the input: the fuzz targets pin that down.
//
// Each header's layout is written once, as unexported constants named after
// the RFC's fields (tcpSeq, ipv4TTL, arpSha), and views and encoders both
// use them.
//
// Checksums: EncodeIPv4 computes the header checksum and EncodeICMP the
// message's, over all of b, so an ICMP payload must be in place first.
// TCP's and UDP's checksums cover a pseudo-header and the payload:
// EncodeTCP and EncodeUDP leave them zero, and SetTCPChecksum and
// SetUDPChecksum, or SetTCPPartialChecksum and SetUDPPartialChecksum for a
// device that finishes the sum (offload.go), complete the segment once its
// payload is in place. ParseIPv4 and ParseICMP verify their checksums;
// TCP.ChecksumValid and UDP.ChecksumValid verify the others, given the
// addresses. TCP options have their own pair, ParseTCPOptions and
// EncodeTCPOptions, around a TCPOptions struct.
package wire

import (
	"encoding/binary"
	"fmt"
)

// MAC is an IEEE 802 hardware address.
type MAC [macLen]byte

const macLen = 6

// Broadcast is the Ethernet broadcast address.
var Broadcast = MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// IsMulticast reports whether the group bit is set (broadcast included).
func (m MAC) IsMulticast() bool { return m[0]&1 == 1 }

// String formats m as six colon-separated hex bytes.
func (m MAC) String() string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}

var be = binary.BigEndian
