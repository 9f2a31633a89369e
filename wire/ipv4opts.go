package wire

import (
	"encoding/binary"
	"net/netip"
)

// IPv4 options a host acts on (RFC 791 section 3.1, RFC 1122 section
// 3.2.1.8): it records its address and the time in Record Route and
// Timestamp, refuses source routes (as Linux does unless
// accept_source_route is set), and reflects Record Route and Timestamp in
// an echo reply (RFC 1122 section 3.2.2.6). Each option's pointer counts
// from 1 at its type byte; the smallest legal pointer is 4 (the first
// slot after type, length and pointer), 5 for Timestamp, whose fourth
// byte holds the overflow count and the flag.
const (
	IPv4MaxOptionsLen = 40 // the header's 60 bytes at most, less its fixed 20

	IPv4OptRecordRoute = 7
	IPv4OptTimestamp   = 68
	IPv4OptLSRR        = 131 // loose source and record route
	IPv4OptSSRR        = 137 // strict source and record route

	ipv4OptPointer = 2 // the pointer byte of a route or timestamp option
	ipv4OptTSFlags = 3 // a timestamp's overflow (high nibble) and flag (low)
)

// The Timestamp option's flags (RFC 791 section 3.1).
const (
	tsOnly         = 0 // timestamps alone
	tsAndAddr      = 1 // each module's address, then its timestamp
	tsPrespecified = 3 // timestamps from the addresses the sender listed
)

// IPv4OptionsCheck is what CheckOptions found.
type IPv4OptionsCheck struct {
	// Bad is the offset, in the header, of the first byte in error:
	// ICMP Parameter Problem's pointer (RFC 1122 section 3.2.2.5). Zero
	// when the options are well formed (the header's first byte is never
	// an option's).
	Bad int
	// SourceRouted says a loose or strict source route is present.
	SourceRouted bool
}

// CheckOptions validates h's options as RFC 791 section 3.1 lays them out:
// each option's length within the header; a route's pointer at the start
// of a slot, a timestamp's at the start of an entry, its flag one of 0, 1
// and 3; no option of those twice. An option with no room for a whole
// entry at its pointer is full, as RFC 791's pointer past the length is
// (Linux calls a partial one an error, and takes a pointer into the middle
// of a slot, which leaves the next host a partial one). A full Timestamp
// whose overflow count is at 15 cannot count another module, which RFC
// 791 calls an error. Other options are taken as they come.
func (h IPv4) CheckOptions() IPv4OptionsCheck {
	var c IPv4OptionsCheck
	var seen [256]bool
	bad := walkIPv4Options(h.Options(), func(off int, opt []byte) int {
		t := opt[0]
		switch t {
		case IPv4OptRecordRoute, IPv4OptTimestamp, IPv4OptLSRR, IPv4OptSSRR:
			if seen[t] {
				return off
			}
			seen[t] = true
		}
		switch t {
		case IPv4OptRecordRoute, IPv4OptLSRR, IPv4OptSSRR:
			if len(opt) < 3 {
				return off + ipv4OptLength
			}
			if p := int(opt[ipv4OptPointer]); p < 4 || (p-4)%4 != 0 {
				return off + ipv4OptPointer
			}
			c.SourceRouted = c.SourceRouted || t != IPv4OptRecordRoute
		case IPv4OptTimestamp:
			if len(opt) < 4 {
				return off + ipv4OptLength
			}
			entry := 8
			switch opt[ipv4OptTSFlags] & 0xf {
			case tsOnly:
				entry = 4
			case tsAndAddr, tsPrespecified:
			default:
				return off + ipv4OptTSFlags
			}
			p := int(opt[ipv4OptPointer])
			if p < 5 || (p-5)%entry != 0 {
				return off + ipv4OptPointer
			}
			if p+entry-1 > len(opt) && opt[ipv4OptTSFlags]>>4 == 0xf {
				// Full, and the overflow count cannot count us: RFC
				// 791 calls the datagram in error.
				return off + ipv4OptTSFlags
			}
		}
		return -1
	})
	if bad >= 0 {
		c.Bad = ipv4Options + bad
	}
	return c
}

// walkIPv4Options calls fn for each option of opts but EOL and NOP, with
// its offset in opts, until EOL or the end. fn returns the offset in opts
// of a byte in error, or -1. walkIPv4Options returns the first such
// offset, or that of an option whose length is missing, below 2 or beyond
// opts; -1 when there is none.
func walkIPv4Options(opts []byte, fn func(off int, opt []byte) int) int {
	for off := 0; off < len(opts); {
		switch opts[off] {
		case ipv4OptEOL:
			return -1
		case ipv4OptNOP:
			off++
			continue
		}
		// A length missing, below 2 or beyond the options: the option
		// is in error from its type byte on, where Linux points too.
		if off+ipv4OptLength >= len(opts) {
			return off
		}
		l := int(opts[off+ipv4OptLength]) // type and length bytes included
		if l < 2 || off+l > len(opts) {
			return off
		}
		if bad := fn(off, opts[off:off+l]); bad >= 0 {
			return bad
		}
		off += l
	}
	return -1
}

// RecordIPv4Options makes a host's entries in the Record Route and
// Timestamp options of opts, a header's options that CheckOptions passed,
// as the datagram reaches or leaves the host at addr (RFC 791 section
// 3.1: "inserts its own internet address"): the address in Record Route's
// next slot; in Timestamp, by its flag, the time, the address and the
// time, or the time where the next listed address is addr's. An option
// with no room left stays as it is but for Timestamp's overflow count,
// which stops at 15. now is the time in milliseconds since midnight UT,
// the option's standard value.
func RecordIPv4Options(opts []byte, addr netip.Addr, now uint32) {
	a := addr.As4()
	walkIPv4Options(opts, func(_ int, opt []byte) int {
		switch opt[0] {
		case IPv4OptRecordRoute:
			if len(opt) < 3 {
				return -1
			}
			if p := int(opt[ipv4OptPointer]); p >= 4 && p+3 <= len(opt) {
				copy(opt[p-1:], a[:])
				opt[ipv4OptPointer] += 4
			}
		case IPv4OptTimestamp:
			if len(opt) < 4 || opt[ipv4OptPointer] < 5 {
				return -1
			}
			p := int(opt[ipv4OptPointer])
			flag := opt[ipv4OptTSFlags] & 0xf
			entry := 8
			if flag == tsOnly {
				entry = 4
			}
			if p+entry-1 > len(opt) {
				if opt[ipv4OptTSFlags] < 0xf0 {
					opt[ipv4OptTSFlags] += 0x10 // the overflow count (RFC 791)
				}
				return -1
			}
			slot := opt[p-1 : p-1+entry]
			switch flag {
			case tsOnly:
				binary.BigEndian.PutUint32(slot, now)
			case tsAndAddr:
				copy(slot, a[:])
				binary.BigEndian.PutUint32(slot[4:], now)
			case tsPrespecified:
				if [4]byte(slot[:4]) != a {
					return -1 // another module's turn
				}
				binary.BigEndian.PutUint32(slot[4:], now)
			default:
				return -1
			}
			opt[ipv4OptPointer] += byte(entry)
		}
		return -1
	})
}

// ReflectedOptions appends to dst the options of h that an echo reply
// carries back (RFC 1122 section 3.2.2.6: Record Route and Timestamp,
// "updated to include the current host"), padded to a multiple of four
// bytes, and returns it.
func (h IPv4) ReflectedOptions(dst []byte) []byte {
	return appendIPv4Options(dst, h.Options(), func(typ byte) bool { return typ == IPv4OptRecordRoute || typ == IPv4OptTimestamp })
}

// MillisSinceMidnightUT is the time of day of unixMilli (milliseconds since
// the Unix epoch) in milliseconds, the value a Timestamp option's entries
// hold (RFC 791 section 3.1).
func MillisSinceMidnightUT(unixMilli int64) uint32 {
	const day = 24 * 60 * 60 * 1000
	return uint32(((unixMilli % day) + day) % day)
}
