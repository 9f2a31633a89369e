package fault

import (
	"encoding/binary"

	"github.com/gonetstack/gonet/link"
)

// Congestion Experienced marks, as an ECN-capable router sets them instead
// of dropping (RFC 3168 section 5): Config.CE is the probability that an
// IPv4 packet whose ECN field says ECT(0) or ECT(1) leaves marked CE. Other
// frames are never touched, as a router marks only what the sender
// declared ECN-capable.

const (
	etherTypeIPv4 = 0x0800
	ecnCE         = 3
)

// markCE sets the CE codepoint on frame if it carries an ECN-capable IPv4
// packet, fixing the header checksum, and reports whether it did.
func markCE(frame []byte) bool {
	if len(frame) < link.EthernetHeaderLen+20 || binary.BigEndian.Uint16(frame[12:14]) != etherTypeIPv4 {
		return false
	}
	ip := frame[link.EthernetHeaderLen:]
	if ip[0]>>4 != 4 || ip[1]&ecnCE == 0 || ip[1]&ecnCE == ecnCE {
		return false
	}
	// RFC 1624 equation 3: HC' = ~(~HC + ~m + m'), for the 16-bit word
	// holding the version, header length and TOS.
	old := binary.BigEndian.Uint16(ip[0:2])
	ip[1] |= ecnCE
	sum := uint32(^binary.BigEndian.Uint16(ip[10:12])) + uint32(^old) + uint32(binary.BigEndian.Uint16(ip[0:2]))
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:12], ^uint16(sum))
	return true
}
