package wire

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

var le = binary.LittleEndian

// Checksum is the Internet checksum of RFC 1071: the ones' complement of the
// ones' complement sum of b taken as 16-bit words, with initial (an earlier
// partial Sum, such as a pseudo-header's) folded in.
func Checksum(b []byte, initial uint32) uint16 {
	return ^Fold(Sum(b, initial))
}

// Sum adds b to the running ones' complement sum acc, without folding, so
// that a checksum can be computed over pieces. Pieces other than the last
// must have even length.
func Sum(b []byte, acc uint32) uint32 {
	// RFC 1071 section 2: the sum does not depend on byte order (2(B)) and
	// can be taken in words wider than 16 bits whose carries are added back
	// in (2(C)). So b is read as little-endian 64-bit words, one plain load
	// each on the common hosts, and added with carry; the carry out of one
	// addition goes into the next, and out of the last back into the sum.
	// Folded to 16 bits and byte-swapped, the result is the big-endian sum.
	var s, c uint64
	for len(b) >= 64 {
		s, c = bits.Add64(s, le.Uint64(b[0:8]), c)
		s, c = bits.Add64(s, le.Uint64(b[8:16]), c)
		s, c = bits.Add64(s, le.Uint64(b[16:24]), c)
		s, c = bits.Add64(s, le.Uint64(b[24:32]), c)
		s, c = bits.Add64(s, le.Uint64(b[32:40]), c)
		s, c = bits.Add64(s, le.Uint64(b[40:48]), c)
		s, c = bits.Add64(s, le.Uint64(b[48:56]), c)
		s, c = bits.Add64(s, le.Uint64(b[56:64]), c)
		b = b[64:]
	}
	for len(b) >= 8 {
		s, c = bits.Add64(s, le.Uint64(b), c)
		b = b[8:]
	}
	if len(b) >= 4 {
		s, c = bits.Add64(s, uint64(le.Uint32(b)), c)
		b = b[4:]
	}
	if len(b) >= 2 {
		s, c = bits.Add64(s, uint64(le.Uint16(b)), c)
		b = b[2:]
	}
	if len(b) == 1 {
		// A trailing odd byte is the high byte of a word padded with zero;
		// in little-endian order that is the low byte.
		s, c = bits.Add64(s, uint64(b[0]), c)
	}
	// The chain leaves a carry only with s short of all ones (s+w+c can
	// reach 2**65-1 only from s all ones with a carry pending), so adding
	// it back cannot overflow.
	s += c
	s = s&0xffffffff + s>>32
	s = s&0xffffffff + s>>32
	r := uint64(bits.ReverseBytes16(Fold(uint32(s)))) + uint64(acc)
	return uint32(r&0xffffffff + r>>32)
}

// Fold folds a 32-bit running sum into 16 bits.
func Fold(s uint32) uint16 {
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// PseudoHeaderSum is the sum of the pseudo-header that transport checksums
// cover, of src's family: IPv4's of RFC 768 and RFC 9293 section 3.1
// (addresses, protocol and the transport length), or IPv6's of RFC 8200
// section 8.1 (PseudoHeaderSum6).
func PseudoHeaderSum(src, dst netip.Addr, proto uint8, length int) uint32 {
	if !src.Is4() {
		return PseudoHeaderSum6(src, dst, proto, length)
	}
	s, d := src.As4(), dst.As4()
	return uint32(be.Uint16(s[:])) + uint32(be.Uint16(s[2:])) +
		uint32(be.Uint16(d[:])) + uint32(be.Uint16(d[2:])) +
		uint32(proto) + uint32(length)
}
