package wire

import "net/netip"

// Multicast Listener Discovery version 2 (RFC 3810): the Query a router
// sends and the Report a host answers with; and version 1's Report and
// Done (RFC 2710 section 3), which a version 2 host sends while a version
// 1 querier is on the link (RFC 3810 section 8.2.1). Like the ND messages, the views
// and encoders cover the whole ICMPv6 message, header included; a Report is
// built by EncodeMLDv2Report followed by SetICMPv6Checksum. MLD messages go
// with a Hop-by-Hop header carrying the Router Alert option (RFC 3810
// section 5, RFC 2711), which EncodeMLDHopByHop writes.

// ICMPv6 types of MLD (RFC 2710 section 3, RFC 3810 sections 5.1 and 5.2).
const (
	ICMPv6MLDQuery    = 130
	ICMPv6MLDv1Report = 131
	ICMPv6MLDv1Done   = 132
	ICMPv6MLDv2Report = 143
)

// Message lengths.
const (
	// MLDv1QueryLen is the length of an MLDv1 Query (RFC 2710 section 3),
	// which RFC 3810 section 8.1 has a version 2 host tell apart by it.
	MLDv1QueryLen = 24
	// MLDv1Len is the length of an MLDv1 Report or Done, the Query's.
	MLDv1Len = MLDv1QueryLen
	// MLDv2QueryLen is the fixed part of an MLDv2 Query (RFC 3810 section
	// 5.1), before its source addresses.
	MLDv2QueryLen = 28
	// MLDv2ReportLen is the fixed part of a Report (RFC 3810 section 5.2),
	// before its multicast address records.
	MLDv2ReportLen = 8
	// MLDv2RecordLen is the fixed part of a multicast address record (RFC
	// 3810 section 5.2.4), before its sources and auxiliary data.
	MLDv2RecordLen = 20
	// MLDHopByHopLen is the Hop-by-Hop Options header EncodeMLDHopByHop
	// writes: the Router Alert option and two bytes of padding.
	MLDHopByHopLen = 8
)

// Query layout (RFC 3810 section 5.1): offsets within the ICMPv6 message.
const (
	mldMaxRespCode = 4  // 2 bytes
	mldGroup       = 8  // multicast address, 16 bytes
	mldQRVFlags    = 24 // Resv (4 bits), S (1), QRV (3)
	mldQQIC        = 25 // 1 byte
	mldNumSources  = 26 // 2 bytes
	mldQRVMask     = 0x07
	mldSFlag       = 0x08

	mldReportNumRecords = 6 // 2 bytes, after 2 reserved ones

	mldRecType      = 0 // 1 byte
	mldRecAuxLen    = 1 // in 32-bit words, 1 byte
	mldRecNumSource = 2 // 2 bytes
	mldRecGroup     = 4 // 16 bytes
)

// MLDQuery is a view of a Multicast Listener Query of either version.
type MLDQuery []byte

// ParseMLDQuery checks that b is a Query: of version 1 (24 bytes exactly,
// RFC 3810 section 8.1) or version 2 with all its sources within b.
func ParseMLDQuery(b []byte) (MLDQuery, bool) {
	if len(b) < MLDv1QueryLen || b[icmpv6Type] != ICMPv6MLDQuery {
		return nil, false
	}
	if len(b) == MLDv1QueryLen {
		return MLDQuery(b), true
	}
	if len(b) < MLDv2QueryLen {
		return nil, false
	}
	n := int(be.Uint16(b[mldNumSources : mldNumSources+2]))
	if MLDv2QueryLen+16*n > len(b) {
		return nil, false
	}
	return MLDQuery(b), true
}

// IsV1 reports whether the query is MLDv1's, of 24 bytes.
func (q MLDQuery) IsV1() bool { return len(q) == MLDv1QueryLen }

// MaxRespCode returns the Maximum Response Code field.
func (q MLDQuery) MaxRespCode() uint16 { return be.Uint16(q[mldMaxRespCode : mldMaxRespCode+2]) }

// MaxRespDelay returns the maximum response delay in milliseconds: the
// code as it stands below 32768, otherwise the floating-point form of RFC
// 3810 section 5.1.3. An MLDv1 query's field is always milliseconds (RFC
// 2710 section 3.4).
func (q MLDQuery) MaxRespDelay() uint32 {
	c := q.MaxRespCode()
	if c < 0x8000 || q.IsV1() {
		return uint32(c)
	}
	mant := uint32(c&0x0fff) | 0x1000
	exp := uint32(c>>12) & 0x7
	return mant << (exp + 3)
}

// Group returns the Multicast Address field: unspecified in a General
// Query, the group asked about otherwise (RFC 3810 section 5.1.5).
func (q MLDQuery) Group() netip.Addr { return addr16(q, mldGroup) }

// NumSources returns the number of sources of an MLDv2 query, zero for
// MLDv1.
func (q MLDQuery) NumSources() int {
	if q.IsV1() {
		return 0
	}
	return int(be.Uint16(q[mldNumSources : mldNumSources+2]))
}

// Source returns the i-th source address of an MLDv2 query.
func (q MLDQuery) Source(i int) netip.Addr { return addr16(q, MLDv2QueryLen+16*i) }

// QRV returns the Querier's Robustness Variable of an MLDv2 query.
func (q MLDQuery) QRV() uint8 {
	if q.IsV1() {
		return 0
	}
	return q[mldQRVFlags] & mldQRVMask
}

// MLDv2QueryFields describes an MLDv2 Query, for tests and a future
// querier.
type MLDv2QueryFields struct {
	MaxRespCode uint16
	Group       netip.Addr // unspecified for a General Query
	SFlag       bool
	QRV         uint8
	QQIC        uint8
	Sources     []netip.Addr
}

// MLDv2QueryLenOf returns the length of a Query with n sources.
func MLDv2QueryLenOf(n int) int { return MLDv2QueryLen + 16*n }

// EncodeMLDv2Query writes the Query f describes into
// b[:MLDv2QueryLenOf(len(f.Sources))] with a zero checksum.
func EncodeMLDv2Query(b []byte, f *MLDv2QueryFields) {
	b[icmpv6Type], b[icmpv6Code] = ICMPv6MLDQuery, 0
	b[icmpv6Checksum], b[icmpv6Checksum+1] = 0, 0
	be.PutUint16(b[mldMaxRespCode:mldMaxRespCode+2], f.MaxRespCode)
	b[6], b[7] = 0, 0
	group := f.Group
	if !group.IsValid() {
		group = netip.IPv6Unspecified()
	}
	putAddr16(b, mldGroup, group)
	flags := f.QRV & mldQRVMask
	if f.SFlag {
		flags |= mldSFlag
	}
	b[mldQRVFlags] = flags
	b[mldQQIC] = f.QQIC
	be.PutUint16(b[mldNumSources:mldNumSources+2], uint16(len(f.Sources)))
	for i, s := range f.Sources {
		putAddr16(b, MLDv2QueryLen+16*i, s)
	}
}

// MLDv2RecordType is a multicast address record's type (RFC 3810 section
// 5.2.12).
type MLDv2RecordType uint8

// The record types: current state (answers to queries), filter mode change
// and source list change (state change reports, RFC 3810 section 6.1).
const (
	MLDv2ModeIsInclude   MLDv2RecordType = 1
	MLDv2ModeIsExclude   MLDv2RecordType = 2
	MLDv2ChangeToInclude MLDv2RecordType = 3
	MLDv2ChangeToExclude MLDv2RecordType = 4
	MLDv2AllowNewSources MLDv2RecordType = 5
	MLDv2BlockOldSources MLDv2RecordType = 6
)

// MLDv2Record describes one multicast address record of a Report, with no
// auxiliary data (RFC 3810 section 5.2.6: none is defined).
type MLDv2Record struct {
	Type    MLDv2RecordType
	Group   netip.Addr
	Sources []netip.Addr
}

// MLDv2ReportLenOf returns the length of a Report carrying recs.
func MLDv2ReportLenOf(recs []MLDv2Record) int {
	n := MLDv2ReportLen
	for _, r := range recs {
		n += MLDv2RecordLen + 16*len(r.Sources)
	}
	return n
}

// EncodeMLDv2Report writes a Report of recs into
// b[:MLDv2ReportLenOf(recs)], checksum and reserved fields zero.
func EncodeMLDv2Report(b []byte, recs []MLDv2Record) {
	b[icmpv6Type], b[icmpv6Code] = ICMPv6MLDv2Report, 0
	b[icmpv6Checksum], b[icmpv6Checksum+1] = 0, 0
	b[4], b[5] = 0, 0
	be.PutUint16(b[mldReportNumRecords:mldReportNumRecords+2], uint16(len(recs)))
	off := MLDv2ReportLen
	for _, r := range recs {
		rec := b[off:]
		rec[mldRecType] = uint8(r.Type)
		rec[mldRecAuxLen] = 0
		be.PutUint16(rec[mldRecNumSource:mldRecNumSource+2], uint16(len(r.Sources)))
		putAddr16(rec, mldRecGroup, r.Group)
		for i, s := range r.Sources {
			putAddr16(rec, MLDv2RecordLen+16*i, s)
		}
		off += MLDv2RecordLen + 16*len(r.Sources)
	}
}

// ParseMLDv2Report returns the multicast address records of the Report b
// (RFC 3810 section 5.2): every record and each of its sources within b,
// auxiliary data skipped (section 5.2.10: "MLDv2 receivers MUST ignore
// any auxiliary data"). Bytes past the last record are ignored. It is
// EncodeMLDv2Report's inverse.
func ParseMLDv2Report(b []byte) ([]MLDv2Record, bool) {
	if len(b) < MLDv2ReportLen || b[icmpv6Type] != ICMPv6MLDv2Report {
		return nil, false
	}
	n := int(be.Uint16(b[mldReportNumRecords : mldReportNumRecords+2]))
	recs := make([]MLDv2Record, 0, min(n, (len(b)-MLDv2ReportLen)/MLDv2RecordLen))
	off := MLDv2ReportLen
	for range n {
		if len(b)-off < MLDv2RecordLen {
			return nil, false
		}
		rec := b[off:]
		ns := int(be.Uint16(rec[mldRecNumSource : mldRecNumSource+2]))
		size := MLDv2RecordLen + 16*ns + 4*int(rec[mldRecAuxLen])
		if len(rec) < size {
			return nil, false
		}
		r := MLDv2Record{Type: MLDv2RecordType(rec[mldRecType]), Group: addr16(rec, mldRecGroup)}
		if ns > 0 {
			r.Sources = make([]netip.Addr, ns)
			for i := range r.Sources {
				r.Sources[i] = addr16(rec, MLDv2RecordLen+16*i)
			}
		}
		recs = append(recs, r)
		off += size
	}
	return recs, true
}

// EncodeMLDv1 writes an MLDv1 Report or Done (typ ICMPv6MLDv1Report or
// ICMPv6MLDv1Done) naming group into b[:MLDv1Len]: the Query's layout,
// with the Maximum Response Delay, reserved and checksum fields zero (RFC
// 2710 section 3.4: "set to zero by the sender" in both).
func EncodeMLDv1(b []byte, typ uint8, group netip.Addr) {
	b[icmpv6Type], b[icmpv6Code] = typ, 0
	clear(b[icmpv6Checksum:mldGroup])
	putAddr16(b, mldGroup, group)
}

// MLDv1 is a view of an MLDv1 Report or Done.
type MLDv1 []byte

// ParseMLDv1 checks that b is an MLDv1 Report or Done of at least its
// 24 bytes (RFC 2710 section 3: longer ones are taken, the rest ignored).
func ParseMLDv1(b []byte) (MLDv1, bool) {
	if len(b) < MLDv1Len || (b[icmpv6Type] != ICMPv6MLDv1Report && b[icmpv6Type] != ICMPv6MLDv1Done) {
		return nil, false
	}
	return MLDv1(b[:MLDv1Len]), true
}

// Group returns the Multicast Address field: the group reported or left.
func (m MLDv1) Group() netip.Addr { return addr16(m, mldGroup) }

// IPv6OptRouterAlert is the Router Alert option's type (RFC 2711 section
// 2.1), and IPv6RouterAlertMLD its value for MLD messages.
const (
	IPv6OptRouterAlert  = 5
	IPv6RouterAlertMLD  = 0
	ipv6RouterAlertSize = 4 // type, length 2, value
)

// EncodeMLDHopByHop writes into b[:MLDHopByHopLen] the Hop-by-Hop Options
// header every MLD message carries (RFC 3810 section 5): the Router Alert
// option with value 0 (RFC 2711 section 2.1), padded with a PadN option to
// 8 bytes, next header ICMPv6.
func EncodeMLDHopByHop(b []byte) {
	b[ipv6ExtNextHeader] = ProtoICMPv6
	b[ipv6ExtLen] = 0
	o := b[ipv6ExtOptions:]
	o[ipv6OptType], o[ipv6OptDataLen] = IPv6OptRouterAlert, 2
	be.PutUint16(o[ipv6OptData:ipv6OptData+2], IPv6RouterAlertMLD)
	o = o[ipv6RouterAlertSize:]
	o[ipv6OptType], o[ipv6OptDataLen] = IPv6OptPadN, 0
}
