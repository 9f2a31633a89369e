package wire

import "net/netip"

// Checksum offload (virtio 1.1 section 5.1.6.2, VIRTIO_NET_HDR_F_NEEDS_CSUM).
// A sender that leaves a TCP or UDP checksum to the device stores in the
// checksum field the pseudo-header's sum, folded but not complemented, and
// tells the device where the checksummed bytes start and where the field
// is; the device sums from there to the end, the field included, and
// stores the complement. The pseudo-header's length is the whole
// segment's, also for a TCP super-segment the device will cut up: Linux's
// tcp_gso_segment adjusts it for each piece.

// PartialChecksum is the value a sender stores in the checksum field of a
// segment of length bytes (header included) whose checksum the device
// finishes.
func PartialChecksum(src, dst netip.Addr, proto uint8, length int) uint16 {
	return Fold(PseudoHeaderSum(src, dst, proto, length))
}

// SetTCPPartialChecksum is SetTCPChecksum left for the device to finish:
// FinishChecksum(b, 0, TCPChecksumOffset) completes it.
func SetTCPPartialChecksum(b []byte, src, dst netip.Addr) {
	be.PutUint16(b[tcpChecksum:tcpChecksum+2], PartialChecksum(src, dst, ProtoTCP, len(b)))
}

// SetUDPPartialChecksum is SetUDPChecksum left for the device to finish:
// FinishChecksum(b, 0, UDPChecksumOffset) completes it.
func SetUDPPartialChecksum(b []byte, src, dst netip.Addr) {
	be.PutUint16(b[udpChecksum:udpChecksum+2], PartialChecksum(src, dst, ProtoUDP, len(b)))
}

// TCPChecksumOffset and UDPChecksumOffset locate the checksum field in
// their headers: a partial checksum's csum_offset.
const (
	TCPChecksumOffset = tcpChecksum
	UDPChecksumOffset = udpChecksum
)

// FinishChecksum does what the device would with a partial checksum: it
// sums b[start:], which holds the partial sum at start+offset, and stores
// the complement there. A result of zero is stored as 0xffff, its
// equivalent in ones' complement, as Linux's skb_checksum_help does: UDP
// reserves zero for "no checksum" (RFC 768). It reports false, changing
// nothing, when the field lies outside b.
func FinishChecksum(b []byte, start, offset int) bool {
	if start < 0 || offset < 0 || start+offset+2 > len(b) {
		return false
	}
	c := Checksum(b[start:], 0)
	if c == 0 {
		c = 0xffff
	}
	be.PutUint16(b[start+offset:start+offset+2], c)
	return true
}
