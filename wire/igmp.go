package wire

import (
	"net/netip"
	"time"
)

// The Internet Group Management Protocol (IGMP), the messages a host
// receives and sends: the Membership Query of every version (RFC 1112
// appendix I, RFC 2236 section 2, RFC 3376 section 4.1), the version 1
// and 2 Membership Reports and the Leave Group message (RFC 2236 section
// 2), and the version 3 Membership Report (RFC 3376 section 4.2). The
// views cover the whole IGMP message, the IP payload; the encoders write
// the checksum.

// ProtoIGMP is IGMP's IPv4 protocol number (RFC 1112 appendix I).
const ProtoIGMP = 2

// IGMP message types (RFC 3376 section 4 and appendix, RFC 2236 section 2).
const (
	IGMPQuery    = 0x11
	IGMPv1Report = 0x12
	IGMPv2Report = 0x16
	IGMPv2Leave  = 0x17
	IGMPv3Report = 0x22
)

// Message lengths.
const (
	// IGMPv2Len is the length of every version 1 and 2 message (RFC 2236
	// section 2), and so of the queries of those versions, which a
	// version 3 host tells apart by it (RFC 3376 section 7.1).
	IGMPv2Len = 8
	// IGMPv3QueryLen is the fixed part of a version 3 Query (RFC 3376
	// section 4.1), before its source addresses.
	IGMPv3QueryLen = 12
	// IGMPv3ReportLen is the fixed part of a version 3 Report (RFC 3376
	// section 4.2), before its group records.
	IGMPv3ReportLen = 8
	// IGMPv3RecordLen is the fixed part of a group record (RFC 3376
	// section 4.2.4), before its sources and auxiliary data.
	IGMPv3RecordLen = 8
)

// Layout, as offsets within the message (RFC 3376 sections 4.1 and 4.2).
const (
	igmpType        = 0
	igmpMaxResp     = 1 // Max Resp Code (v3), Max Resp Time (v2), unused (v1)
	igmpChecksum    = 2 // 2 bytes
	igmpGroup       = 4 // 4 bytes
	igmpQRVFlags    = 8 // Resv (4 bits), S (1), QRV (3)
	igmpQQIC        = 9
	igmpNumSources  = 10 // 2 bytes
	igmpQRVMask     = 0x07
	igmpSFlag       = 0x08
	igmpNumRecords  = 6 // 2 bytes, after 2 reserved ones (v3 report)
	igmpRecType     = 0
	igmpRecAuxLen   = 1 // in 32-bit words
	igmpRecNumSrc   = 2 // 2 bytes
	igmpRecGroup    = 4 // 4 bytes
	igmpMaxRespUnit = 100 * time.Millisecond
)

// IGMPv3RecordType is a group record's type (RFC 3376 section 4.2.12).
type IGMPv3RecordType uint8

// Group record types: current-state records answer queries; filter-mode
// change and source-list change records report a change of state.
const (
	IGMPModeIsInclude   IGMPv3RecordType = 1
	IGMPModeIsExclude   IGMPv3RecordType = 2
	IGMPChangeToInclude IGMPv3RecordType = 3
	IGMPChangeToExclude IGMPv3RecordType = 4
	IGMPAllowNewSources IGMPv3RecordType = 5
	IGMPBlockOldSources IGMPv3RecordType = 6
)

// igmpRecordSourceSize is a source address's size in a group record.
const igmpRecordSourceSize = 4

// IGMPError says why a message failed validation; the igmp package counts
// each reason on its own.
type IGMPError uint8

// Validation failures, in the order ParseIGMP checks for them.
const (
	IGMPOK IGMPError = iota
	// IGMPTruncated: shorter than a version 1 or 2 message.
	IGMPTruncated
	// IGMPBadChecksum: the message's checksum is wrong.
	IGMPBadChecksum
	// IGMPBadLength: a query of 9 to 11 bytes, which RFC 3376 section
	// 7.1 says to ignore, or one whose sources run past its end, or a
	// version 3 report whose records do.
	IGMPBadLength
)

// IGMP is a view of an IGMP message of any version.
type IGMP []byte

// ParseIGMP checks that b is an IGMP message of a length its type allows,
// with a valid checksum over all of it (RFC 3376 section 4.1.2: "the
// checksum is the 16-bit one's complement of the one's complement sum of
// the whole IGMP message (the entire IP payload)").
func ParseIGMP(b []byte) (IGMP, IGMPError) {
	if len(b) < IGMPv2Len {
		return nil, IGMPTruncated
	}
	if Checksum(b, 0) != 0 {
		return nil, IGMPBadChecksum
	}
	m := IGMP(b)
	switch m.Type() {
	case IGMPQuery:
		// RFC 3376 section 7.1: "Query messages that do not match any
		// of the above conditions (e.g., a Query of length 10 octets)
		// MUST be silently ignored."
		if len(b) != IGMPv2Len && len(b) < IGMPv3QueryLen {
			return nil, IGMPBadLength
		}
		if len(b) >= IGMPv3QueryLen && IGMPv3QueryLen+4*m.NumSources() > len(b) {
			return nil, IGMPBadLength
		}
	case IGMPv3Report:
		if _, ok := m.records(); !ok {
			return nil, IGMPBadLength
		}
	}
	return m, IGMPOK
}

// Type returns the message type.
func (m IGMP) Type() uint8 { return m[igmpType] }

// Group returns the Group Address: zero in a general query.
func (m IGMP) Group() netip.Addr { return netip.AddrFrom4([4]byte(m[igmpGroup : igmpGroup+4])) }

// QueryVersion is the version of a Query, by RFC 3376 section 7.1's
// rules: "IGMPv1 Query: length = 8 octets AND Max Resp Code field is zero;
// IGMPv2 Query: length = 8 octets AND Max Resp Code field is non-zero;
// IGMPv3 Query: length >= 12 octets".
func (m IGMP) QueryVersion() int {
	switch {
	case len(m) >= IGMPv3QueryLen:
		return 3
	case m[igmpMaxResp] == 0:
		return 1
	}
	return 2
}

// MaxResp is the longest a host may wait before it answers the query: a
// version 3 query's Max Resp Code (DecodeIGMPCode); a version 2 one's Max
// Resp Time in tenths of a second; for a version 1 query, 10 seconds
// (RFC 2236 section 4: "the IGMPv1 router will send General Queries with
// the Max Response Time set to 0. This MUST be interpreted as a value of
// 100 (10 seconds)").
func (m IGMP) MaxResp() time.Duration {
	switch m.QueryVersion() {
	case 1:
		return 10 * time.Second
	case 2:
		return time.Duration(m[igmpMaxResp]) * igmpMaxRespUnit
	}
	return DecodeIGMPCode(m[igmpMaxResp]) * igmpMaxRespUnit
}

// QRV is a version 3 query's Querier's Robustness Variable.
func (m IGMP) QRV() int { return int(m[igmpQRVFlags] & igmpQRVMask) }

// SuppressRouterProcessing is a version 3 query's S flag.
func (m IGMP) SuppressRouterProcessing() bool { return m[igmpQRVFlags]&igmpSFlag != 0 }

// QQI is a version 3 query's Querier's Query Interval (RFC 3376 section
// 4.1.7), decoded from its QQIC.
func (m IGMP) QQI() time.Duration { return DecodeIGMPCode(m[igmpQQIC]) * time.Second }

// NumSources is a version 3 query's Number of Sources.
func (m IGMP) NumSources() int { return int(be.Uint16(m[igmpNumSources : igmpNumSources+2])) }

// Sources returns a version 3 query's Source Addresses (RFC 3376 section
// 4.1.9): those a group-and-source-specific query asks about, none in a
// general or group-specific one, nor in a version 1 or 2 query, which has
// no such field. ParseIGMP has checked that they fit; a count that runs
// past the end is cut to what the message holds.
func (m IGMP) Sources() []netip.Addr {
	if len(m) < IGMPv3QueryLen {
		return nil
	}
	n := min(m.NumSources(), (len(m)-IGMPv3QueryLen)/igmpRecordSourceSize)
	if n == 0 {
		return nil
	}
	out := make([]netip.Addr, n)
	for i := range out {
		o := IGMPv3QueryLen + igmpRecordSourceSize*i
		out[i] = netip.AddrFrom4([4]byte(m[o : o+igmpRecordSourceSize]))
	}
	return out
}

// DecodeIGMPCode decodes a Max Resp Code or QQIC (RFC 3376 sections 4.1.1
// and 4.1.7) to its value in the field's units: below 128 the code is the
// value; from 128 on it is a floating-point value,
//
//	 0 1 2 3 4 5 6 7
//	+-+-+-+-+-+-+-+-+
//	|1| exp | mant  |
//	+-+-+-+-+-+-+-+-+
//
// worth (mant | 0x10) << (exp + 3).
func DecodeIGMPCode(code uint8) time.Duration {
	if code < 128 {
		return time.Duration(code)
	}
	exp, mant := (code>>4)&0x07, code&0x0f
	return time.Duration(int(mant|0x10) << (exp + 3))
}

// EncodeIGMPCode is DecodeIGMPCode's inverse, rounding down a value the
// floating-point form cannot hold exactly and saturating at its largest,
// 31744.
func EncodeIGMPCode(v int) uint8 {
	if v < 128 {
		return uint8(max(v, 0))
	}
	for exp := 7; exp >= 0; exp-- {
		if mant := v >> (exp + 3); mant >= 0x10 {
			return 0x80 | uint8(exp)<<4 | uint8(min(mant, 0x1f)&0x0f)
		}
	}
	return 0x7f // unreachable: v >= 128 has mant >= 0x10 at exp 0
}

// IGMPv3Record is a group record of a version 3 report (RFC 3376 section
// 4.2.4).
type IGMPv3Record struct {
	Type    IGMPv3RecordType
	Group   netip.Addr
	Sources []netip.Addr
}

// records returns the report's group records, and false when they run
// past its end.
func (m IGMP) records() ([]IGMPv3Record, bool) {
	if len(m) < IGMPv3ReportLen {
		return nil, false
	}
	n := int(be.Uint16(m[igmpNumRecords : igmpNumRecords+2]))
	b := m[IGMPv3ReportLen:]
	var out []IGMPv3Record
	for range n {
		if len(b) < IGMPv3RecordLen {
			return nil, false
		}
		nsrc := int(be.Uint16(b[igmpRecNumSrc : igmpRecNumSrc+2]))
		l := IGMPv3RecordLen + igmpRecordSourceSize*nsrc + 4*int(b[igmpRecAuxLen])
		if l > len(b) {
			return nil, false
		}
		r := IGMPv3Record{Type: IGMPv3RecordType(b[igmpRecType]), Group: netip.AddrFrom4([4]byte(b[igmpRecGroup : igmpRecGroup+4]))}
		for i := range nsrc {
			o := IGMPv3RecordLen + 4*i
			r.Sources = append(r.Sources, netip.AddrFrom4([4]byte(b[o:o+4])))
		}
		out = append(out, r)
		b = b[l:]
	}
	return out, true
}

// Records returns a version 3 report's group records (ParseIGMP has
// checked that they fit).
func (m IGMP) Records() []IGMPv3Record {
	r, _ := m.records()
	return r
}

// EncodeIGMPv2 writes a version 1 or 2 message of type typ (a report, a
// leave, or a query) about group into b[:IGMPv2Len], checksum included.
// maxResp is a query's Max Resp Time in tenths of a second, zero otherwise
// (RFC 2236 section 2.2: "in all other messages, it is set to zero by the
// sender").
func EncodeIGMPv2(b []byte, typ, maxResp uint8, group netip.Addr) {
	b = b[:IGMPv2Len]
	b[igmpType], b[igmpMaxResp] = typ, maxResp
	b[igmpChecksum], b[igmpChecksum+1] = 0, 0
	g := group.As4()
	copy(b[igmpGroup:], g[:])
	be.PutUint16(b[igmpChecksum:], Checksum(b, 0))
}

// IGMPv3ReportLenOf is the length of a version 3 report of recs.
func IGMPv3ReportLenOf(recs []IGMPv3Record) int {
	n := IGMPv3ReportLen
	for _, r := range recs {
		n += IGMPv3RecordLen + 4*len(r.Sources)
	}
	return n
}

// EncodeIGMPv3Report writes a version 3 report of recs into
// b[:IGMPv3ReportLenOf(recs)], checksum included; the reserved fields and
// every record's Aux Data Len are zero (RFC 3376 section 4.2.6: "IGMPv3
// hosts... MUST set it to zero").
func EncodeIGMPv3Report(b []byte, recs []IGMPv3Record) {
	b = b[:IGMPv3ReportLenOf(recs)]
	clear(b)
	b[igmpType] = IGMPv3Report
	be.PutUint16(b[igmpNumRecords:], uint16(len(recs)))
	o := IGMPv3ReportLen
	for _, r := range recs {
		b[o+igmpRecType] = uint8(r.Type)
		be.PutUint16(b[o+igmpRecNumSrc:], uint16(len(r.Sources)))
		g := r.Group.As4()
		copy(b[o+igmpRecGroup:], g[:])
		o += IGMPv3RecordLen
		for _, s := range r.Sources {
			a := s.As4()
			copy(b[o:], a[:])
			o += 4
		}
	}
	be.PutUint16(b[igmpChecksum:], Checksum(b, 0))
}

// IGMPv3QueryFields describe a version 3 query to encode: for tests, which
// play the router.
type IGMPv3QueryFields struct {
	MaxRespCode uint8
	Group       netip.Addr // zero or invalid: a general query
	S           bool
	QRV         uint8
	QQIC        uint8
	Sources     []netip.Addr
}

// EncodeIGMPv3Query writes the query f describes into
// b[:IGMPv3QueryLen+4*len(f.Sources)], checksum included.
func EncodeIGMPv3Query(b []byte, f *IGMPv3QueryFields) {
	b = b[:IGMPv3QueryLen+4*len(f.Sources)]
	clear(b)
	b[igmpType], b[igmpMaxResp] = IGMPQuery, f.MaxRespCode
	if f.Group.Is4() {
		g := f.Group.As4()
		copy(b[igmpGroup:], g[:])
	}
	b[igmpQRVFlags] = f.QRV & igmpQRVMask
	if f.S {
		b[igmpQRVFlags] |= igmpSFlag
	}
	b[igmpQQIC] = f.QQIC
	be.PutUint16(b[igmpNumSources:], uint16(len(f.Sources)))
	for i, s := range f.Sources {
		a := s.As4()
		copy(b[IGMPv3QueryLen+4*i:], a[:])
	}
	be.PutUint16(b[igmpChecksum:], Checksum(b, 0))
}

// IPv4 option Router Alert (RFC 2113 section 2.1): type 148 (copied flag
// set, option 20), length 4, value 0, "Router shall examine packet". Every
// IGMP message carries it (RFC 3376 section 4, RFC 2236 section 2).
var IPv4RouterAlert = [4]byte{0x94, 0x04, 0x00, 0x00}
