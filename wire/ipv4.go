package wire

import (
	"net/netip"
	"strconv"
)

// IPv4 header constants (RFC 791 section 3.1).
const (
	IPv4MinHeaderLen = 20
	IPv4MaxHeaderLen = 60
	IPv4MaxTotalLen  = 65535

	// Flags in the fragment field.
	IPv4FlagDF = 0x4000 // don't fragment
	IPv4FlagMF = 0x2000 // more fragments
	ipv4OffMsk = 0x1fff

	ProtoICMP = 1
	ProtoTCP  = 6
	ProtoUDP  = 17
)

// IPv4 header layout (RFC 791 section 3.1): the offset of each field.
const (
	ipv4VerIHL   = 0  // version (high 4 bits), IHL in 32-bit words (low 4 bits)
	ipv4TOS      = 1  // type of service, 1 byte
	ipv4TotalLen = 2  // total length, 2 bytes
	ipv4ID       = 4  // identification, 2 bytes
	ipv4FragOff  = 6  // flags (high 3 bits), fragment offset in 8-byte units, 2 bytes
	ipv4TTL      = 8  // time to live, 1 byte
	ipv4Protocol = 9  // protocol, 1 byte
	ipv4Checksum = 10 // header checksum, 2 bytes
	ipv4Src      = 12 // source address, 4 bytes
	ipv4Dst      = 16 // destination address, 4 bytes
	ipv4Options  = IPv4MinHeaderLen
)

// IPv4 options (RFC 791 section 3.1, "Options"): EOL and NOP are a type
// byte alone; every other option is a type byte, whose high bit is the
// copied flag, a length byte counting type and length, and data.
const (
	ipv4OptEOL    = 0
	ipv4OptNOP    = 1
	ipv4OptCopied = 0x80
	ipv4OptLength = 1
)

// IPv4 is a view of an IPv4 datagram, header first.
type IPv4 []byte

// IPv4Error says why a datagram failed validation; each reason has its own
// counter in the IPv4 layer.
type IPv4Error uint8

// Validation failures, in the order ParseIPv4 checks for them.
const (
	IPv4OK IPv4Error = iota
	IPv4Truncated
	IPv4BadVersion
	IPv4BadIHL
	IPv4BadTotalLen
	IPv4BadChecksum
)

var ipv4ErrorText = [...]string{"ok", "truncated", "version not 4", "header length out of range", "total length out of range", "bad header checksum"}

// String names the reason; values outside the list print as a number
// rather than panic.
func (e IPv4Error) String() string {
	if int(e) < len(ipv4ErrorText) {
		return ipv4ErrorText[e]
	}
	return "IPv4Error(" + strconv.Itoa(int(e)) + ")"
}

// ParseIPv4 validates b as RFC 791 and RFC 1122 section 3.2.1.1-3.2.1.2 ask
// (version, header length, total length against what arrived, header
// checksum) and returns the datagram trimmed to its total length, dropping
// link-layer padding.
func ParseIPv4(b []byte) (IPv4, IPv4Error) {
	if len(b) < IPv4MinHeaderLen {
		return nil, IPv4Truncated
	}
	h := IPv4(b)
	if h.version() != 4 {
		return nil, IPv4BadVersion
	}
	ihl := h.HeaderLen()
	if ihl < IPv4MinHeaderLen || ihl > len(b) {
		return nil, IPv4BadIHL
	}
	total := h.TotalLen()
	if total < ihl || total > len(b) {
		return nil, IPv4BadTotalLen
	}
	if Checksum(b[:ihl], 0) != 0 {
		return nil, IPv4BadChecksum
	}
	return h[:total], IPv4OK
}

func (h IPv4) version() uint8 { return h[ipv4VerIHL] >> 4 }

// HeaderLen returns the header length in bytes.
func (h IPv4) HeaderLen() int { return int(h[ipv4VerIHL]&0xf) * 4 }

// TOS returns the type-of-service byte (DSCP and ECN).
func (h IPv4) TOS() uint8 { return h[ipv4TOS] }

// TotalLen returns the total length field.
func (h IPv4) TotalLen() int { return int(be.Uint16(h[ipv4TotalLen : ipv4TotalLen+2])) }

// ID returns the identification field.
func (h IPv4) ID() uint16 { return be.Uint16(h[ipv4ID : ipv4ID+2]) }

// Flags returns the DF and MF bits in their field positions.
func (h IPv4) Flags() uint16 { return be.Uint16(h[ipv4FragOff:ipv4FragOff+2]) &^ ipv4OffMsk }

// MoreFragments reports whether MF is set.
func (h IPv4) MoreFragments() bool { return h.Flags()&IPv4FlagMF != 0 }

// DontFragment reports whether DF is set.
func (h IPv4) DontFragment() bool { return h.Flags()&IPv4FlagDF != 0 }

// FragmentOffset returns the fragment offset in bytes.
func (h IPv4) FragmentOffset() int {
	return int(be.Uint16(h[ipv4FragOff:ipv4FragOff+2])&ipv4OffMsk) * 8
}

// IsFragment reports whether the datagram is a fragment of a larger one.
func (h IPv4) IsFragment() bool { return h.MoreFragments() || h.FragmentOffset() != 0 }

// TTL returns the time to live.
func (h IPv4) TTL() uint8 { return h[ipv4TTL] }

// Protocol returns the protocol number.
func (h IPv4) Protocol() uint8 { return h[ipv4Protocol] }

// Src returns the source address.
func (h IPv4) Src() netip.Addr { return netip.AddrFrom4([4]byte(h[ipv4Src : ipv4Src+4])) }

// Dst returns the destination address.
func (h IPv4) Dst() netip.Addr { return netip.AddrFrom4([4]byte(h[ipv4Dst : ipv4Dst+4])) }

// Options returns the option bytes, if any.
func (h IPv4) Options() []byte { return h[ipv4Options:h.HeaderLen()] }

// Payload returns the bytes after the header, up to the total length.
func (h IPv4) Payload() []byte { return h[h.HeaderLen():h.TotalLen()] }

// SetTTL sets the TTL and updates the checksum incrementally (RFC 1624).
func (h IPv4) SetTTL(ttl uint8) {
	// The checksum sums 16-bit words: the TTL's is the one it shares with
	// the protocol.
	old := be.Uint16(h[ipv4TTL : ipv4TTL+2])
	h[ipv4TTL] = ttl
	h.updateChecksum(old, be.Uint16(h[ipv4TTL:ipv4TTL+2]))
}

// SetChecksum computes the header checksum anew, after a change of
// several fields (a total length and an identification of a datagram
// cut from another).
func (h IPv4) SetChecksum() {
	h[ipv4Checksum], h[ipv4Checksum+1] = 0, 0
	be.PutUint16(h[ipv4Checksum:ipv4Checksum+2], Checksum(h[:h.HeaderLen()], 0))
}

func (h IPv4) updateChecksum(old, new uint16) {
	// RFC 1624 equation 3: HC' = ~(~HC + ~m + m').
	s := uint32(^be.Uint16(h[ipv4Checksum:ipv4Checksum+2])) + uint32(^old) + uint32(new)
	be.PutUint16(h[ipv4Checksum:ipv4Checksum+2], ^Fold(s))
}

// IPv4Fields describes an IPv4 header to encode.
type IPv4Fields struct {
	TOS      uint8
	TotalLen int
	ID       uint16
	Flags    uint16 // IPv4FlagDF, IPv4FlagMF
	FragOff  int    // in bytes, a multiple of 8
	TTL      uint8
	Protocol uint8
	Src, Dst netip.Addr
	Options  []byte // a multiple of 4 bytes, at most IPv4MaxOptionsLen
}

// HeaderLen returns the length of the header f describes.
func (f *IPv4Fields) HeaderLen() int { return IPv4MinHeaderLen + len(f.Options) }

// EncodeIPv4 writes the header f describes into b[:f.HeaderLen()], checksum
// included.
func EncodeIPv4(b []byte, f *IPv4Fields) {
	hl := f.HeaderLen()
	b[ipv4VerIHL] = 4<<4 | uint8(hl/4)
	b[ipv4TOS] = f.TOS
	be.PutUint16(b[ipv4TotalLen:ipv4TotalLen+2], uint16(f.TotalLen))
	be.PutUint16(b[ipv4ID:ipv4ID+2], f.ID)
	be.PutUint16(b[ipv4FragOff:ipv4FragOff+2], f.Flags|uint16(f.FragOff/8)&ipv4OffMsk)
	b[ipv4TTL] = f.TTL
	b[ipv4Protocol] = f.Protocol
	b[ipv4Checksum], b[ipv4Checksum+1] = 0, 0
	s, d := f.Src.As4(), f.Dst.As4()
	copy(b[ipv4Src:], s[:])
	copy(b[ipv4Dst:], d[:])
	copy(b[ipv4Options:hl], f.Options)
	be.PutUint16(b[ipv4Checksum:ipv4Checksum+2], Checksum(b[:hl], 0))
}

// CopiedOptions returns the options of h that RFC 791 says every fragment
// must carry (those with the copied flag set), padded to a multiple of four
// bytes, appended to dst. Malformed options end the scan.
func (h IPv4) CopiedOptions(dst []byte) []byte { return CopiedIPv4Options(dst, h.Options()) }

// CopiedIPv4Options is CopiedOptions of a header's options, opts.
func CopiedIPv4Options(dst, opts []byte) []byte {
	return appendIPv4Options(dst, opts, func(typ byte) bool { return typ&ipv4OptCopied != 0 })
}

// appendIPv4Options appends to dst the options of opts whose type keep
// takes, padded to a multiple of four bytes, and returns it.
func appendIPv4Options(dst, opts []byte, keep func(typ byte) bool) []byte {
	start := len(dst)
	walkIPv4Options(opts, func(_ int, opt []byte) int {
		if keep(opt[0]) {
			dst = append(dst, opt...)
		}
		return -1
	})
	for (len(dst)-start)%4 != 0 {
		dst = append(dst, ipv4OptEOL)
	}
	return dst
}
