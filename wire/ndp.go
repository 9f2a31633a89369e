package wire

import "net/netip"

// Neighbour discovery messages (RFC 4861 section 4) are ICMPv6 messages: the
// views below are of the whole message, ICMPv6 header first, and their
// encoders write that header too (code 0, checksum zero). A message is
// built in three steps: EncodeX writes b[:XLen], the options are encoded
// after it with the EncodeND* option encoders, and SetICMPv6Checksum
// completes the message. Parsing checks lengths, the type and that every
// option is well formed; the validity checks of RFC 4861 sections 6.1 and
// 7.1 (hop limit 255, code 0, checksum, target not multicast) belong to the
// neighbour discovery layer.

// Lengths of the messages' fixed parts, ICMPv6 header included, where their
// options start (RFC 4861 sections 4.1-4.5).
const (
	RouterSolicitationLen    = 8
	RouterAdvertisementLen   = 16
	NeighborSolicitationLen  = 24
	NeighborAdvertisementLen = 24
	RedirectLen              = 40
)

// Message layouts (RFC 4861 section 4): offsets within the ICMPv6 message.
const (
	raCurHopLimit    = 4  // 1 byte
	raFlags          = 5  // M, O, then the preference (RFC 4191), 1 byte
	raRouterLifetime = 6  // seconds, 2 bytes
	raReachableTime  = 8  // milliseconds, 4 bytes
	raRetransTimer   = 12 // milliseconds, 4 bytes

	naFlags     = 4  // R, S, O in the high bits, 1 byte
	ndTarget    = 8  // target address of NS, NA and Redirect, 16 bytes
	redirectDst = 24 // destination address, 16 bytes
)

// Router Advertisement flags (RFC 4861 section 4.2; the preference from
// RFC 4191 section 2.2).
const (
	raFlagManaged   = 0x80
	raFlagOther     = 0x40
	raPrefShift     = 3
	raPrefMask      = 0x3 << raPrefShift
	naFlagRouter    = 0x80
	naFlagSolicited = 0x40
	naFlagOverride  = 0x20
)

// RouterPreference is a Router Advertisement's default router preference,
// the two bits of RFC 4191 section 2.1 as sent.
type RouterPreference uint8

// The preferences; a receiver treats the reserved value as medium (RFC 4191
// section 2.2), which is the ND layer's to do.
const (
	RouterPrefMedium   RouterPreference = 0
	RouterPrefHigh     RouterPreference = 1
	RouterPrefReserved RouterPreference = 2
	RouterPrefLow      RouterPreference = 3
)

// parseND checks that b is an ICMPv6 message of type typ with a fixed part
// of n bytes and well-formed options after it.
func parseND(b []byte, typ uint8, n int) bool {
	if len(b) < n || b[icmpv6Type] != typ {
		return false
	}
	_, ok := ParseNDOptions(b[n:])
	return ok
}

func encodeNDHeader(b []byte, typ uint8) {
	b[icmpv6Type], b[icmpv6Code] = typ, 0
	b[icmpv6Checksum], b[icmpv6Checksum+1] = 0, 0
	// The word after the checksum is reserved in every ND message but the
	// Router and Neighbor Advertisements, whose encoders overwrite it.
	be.PutUint32(b[icmpv6Rest:icmpv6Rest+4], 0)
}

func addr16(b []byte, off int) netip.Addr { return netip.AddrFrom16([16]byte(b[off : off+16])) }

func putAddr16(b []byte, off int, a netip.Addr) {
	s := a.As16()
	copy(b[off:off+16], s[:])
}

// RouterSolicitation is a view of a Router Solicitation (RFC 4861 section
// 4.1).
type RouterSolicitation []byte

// ParseRouterSolicitation checks that b is a Router Solicitation with
// well-formed options.
func ParseRouterSolicitation(b []byte) (RouterSolicitation, bool) {
	if !parseND(b, ICMPv6RouterSolicitation, RouterSolicitationLen) {
		return nil, false
	}
	return RouterSolicitation(b), true
}

// Options returns the options.
func (m RouterSolicitation) Options() NDOptions { return NDOptions(m[RouterSolicitationLen:]) }

// EncodeRouterSolicitation writes a Router Solicitation's fixed part into
// b[:RouterSolicitationLen].
func EncodeRouterSolicitation(b []byte) { encodeNDHeader(b, ICMPv6RouterSolicitation) }

// RouterAdvertisement is a view of a Router Advertisement (RFC 4861 section
// 4.2).
type RouterAdvertisement []byte

// ParseRouterAdvertisement checks that b is a Router Advertisement with
// well-formed options.
func ParseRouterAdvertisement(b []byte) (RouterAdvertisement, bool) {
	if !parseND(b, ICMPv6RouterAdvertisement, RouterAdvertisementLen) {
		return nil, false
	}
	return RouterAdvertisement(b), true
}

// CurHopLimit returns the hop limit hosts should use; zero means
// unspecified.
func (m RouterAdvertisement) CurHopLimit() uint8 { return m[raCurHopLimit] }

// Managed reports whether addresses are available by DHCPv6 (the M flag).
func (m RouterAdvertisement) Managed() bool { return m[raFlags]&raFlagManaged != 0 }

// Other reports whether other configuration is available by DHCPv6 (the O
// flag).
func (m RouterAdvertisement) Other() bool { return m[raFlags]&raFlagOther != 0 }

// Preference returns the default router preference bits (RFC 4191).
func (m RouterAdvertisement) Preference() RouterPreference {
	return RouterPreference(m[raFlags] & raPrefMask >> raPrefShift)
}

// Flags returns the whole flags byte, the bits other RFCs define
// (RFC 6275's home agent, RFC 4389's proxy) included.
func (m RouterAdvertisement) Flags() uint8 { return m[raFlags] }

// RouterLifetime returns the router lifetime in seconds; zero means the
// router is not a default router.
func (m RouterAdvertisement) RouterLifetime() uint16 {
	return be.Uint16(m[raRouterLifetime : raRouterLifetime+2])
}

// ReachableTime returns the reachable time in milliseconds; zero means
// unspecified.
func (m RouterAdvertisement) ReachableTime() uint32 {
	return be.Uint32(m[raReachableTime : raReachableTime+4])
}

// RetransTimer returns the retransmission timer in milliseconds; zero
// means unspecified.
func (m RouterAdvertisement) RetransTimer() uint32 {
	return be.Uint32(m[raRetransTimer : raRetransTimer+4])
}

// Options returns the options.
func (m RouterAdvertisement) Options() NDOptions { return NDOptions(m[RouterAdvertisementLen:]) }

// RouterAdvertisementFields describes a Router Advertisement's fixed part.
type RouterAdvertisementFields struct {
	CurHopLimit    uint8
	Managed, Other bool
	Preference     RouterPreference
	RouterLifetime uint16 // seconds
	ReachableTime  uint32 // milliseconds
	RetransTimer   uint32 // milliseconds
}

// EncodeRouterAdvertisement writes the fixed part f describes into
// b[:RouterAdvertisementLen], reserved bits zero.
func EncodeRouterAdvertisement(b []byte, f *RouterAdvertisementFields) {
	encodeNDHeader(b, ICMPv6RouterAdvertisement)
	b[raCurHopLimit] = f.CurHopLimit
	flags := uint8(f.Preference) << raPrefShift & raPrefMask
	if f.Managed {
		flags |= raFlagManaged
	}
	if f.Other {
		flags |= raFlagOther
	}
	b[raFlags] = flags
	be.PutUint16(b[raRouterLifetime:raRouterLifetime+2], f.RouterLifetime)
	be.PutUint32(b[raReachableTime:raReachableTime+4], f.ReachableTime)
	be.PutUint32(b[raRetransTimer:raRetransTimer+4], f.RetransTimer)
}

// NeighborSolicitation is a view of a Neighbor Solicitation (RFC 4861
// section 4.3).
type NeighborSolicitation []byte

// ParseNeighborSolicitation checks that b is a Neighbor Solicitation with
// well-formed options.
func ParseNeighborSolicitation(b []byte) (NeighborSolicitation, bool) {
	if !parseND(b, ICMPv6NeighborSolicitation, NeighborSolicitationLen) {
		return nil, false
	}
	return NeighborSolicitation(b), true
}

// Target returns the address whose link-layer address is sought.
func (m NeighborSolicitation) Target() netip.Addr { return addr16(m, ndTarget) }

// Options returns the options.
func (m NeighborSolicitation) Options() NDOptions { return NDOptions(m[NeighborSolicitationLen:]) }

// EncodeNeighborSolicitation writes a Neighbor Solicitation's fixed part
// for target into b[:NeighborSolicitationLen].
func EncodeNeighborSolicitation(b []byte, target netip.Addr) {
	encodeNDHeader(b, ICMPv6NeighborSolicitation)
	putAddr16(b, ndTarget, target)
}

// NeighborAdvertisement is a view of a Neighbor Advertisement (RFC 4861
// section 4.4).
type NeighborAdvertisement []byte

// ParseNeighborAdvertisement checks that b is a Neighbor Advertisement with
// well-formed options.
func ParseNeighborAdvertisement(b []byte) (NeighborAdvertisement, bool) {
	if !parseND(b, ICMPv6NeighborAdvertisement, NeighborAdvertisementLen) {
		return nil, false
	}
	return NeighborAdvertisement(b), true
}

// Router reports whether the sender is a router (the R flag).
func (m NeighborAdvertisement) Router() bool { return m[naFlags]&naFlagRouter != 0 }

// Solicited reports whether the advertisement answers a solicitation (the
// S flag).
func (m NeighborAdvertisement) Solicited() bool { return m[naFlags]&naFlagSolicited != 0 }

// Override reports whether the advertisement should override a cached
// link-layer address (the O flag).
func (m NeighborAdvertisement) Override() bool { return m[naFlags]&naFlagOverride != 0 }

// Target returns the address the advertisement is about.
func (m NeighborAdvertisement) Target() netip.Addr { return addr16(m, ndTarget) }

// Options returns the options.
func (m NeighborAdvertisement) Options() NDOptions { return NDOptions(m[NeighborAdvertisementLen:]) }

// NeighborAdvertisementFields describes a Neighbor Advertisement's fixed
// part.
type NeighborAdvertisementFields struct {
	Router, Solicited, Override bool
	Target                      netip.Addr
}

// EncodeNeighborAdvertisement writes the fixed part f describes into
// b[:NeighborAdvertisementLen], reserved bits zero.
func EncodeNeighborAdvertisement(b []byte, f *NeighborAdvertisementFields) {
	encodeNDHeader(b, ICMPv6NeighborAdvertisement)
	var flags uint8
	if f.Router {
		flags |= naFlagRouter
	}
	if f.Solicited {
		flags |= naFlagSolicited
	}
	if f.Override {
		flags |= naFlagOverride
	}
	b[naFlags] = flags
	putAddr16(b, ndTarget, f.Target)
}

// Redirect is a view of a Redirect message (RFC 4861 section 4.5).
type Redirect []byte

// ParseRedirect checks that b is a Redirect with well-formed options.
func ParseRedirect(b []byte) (Redirect, bool) {
	if !parseND(b, ICMPv6Redirect, RedirectLen) {
		return nil, false
	}
	return Redirect(b), true
}

// Target returns the better first hop for the destination.
func (m Redirect) Target() netip.Addr { return addr16(m, ndTarget) }

// Dst returns the destination being redirected.
func (m Redirect) Dst() netip.Addr { return addr16(m, redirectDst) }

// Options returns the options.
func (m Redirect) Options() NDOptions { return NDOptions(m[RedirectLen:]) }

// EncodeRedirect writes a Redirect's fixed part into b[:RedirectLen].
func EncodeRedirect(b []byte, target, dst netip.Addr) {
	encodeNDHeader(b, ICMPv6Redirect)
	putAddr16(b, ndTarget, target)
	putAddr16(b, redirectDst, dst)
}

// ND option types (RFC 4861 section 4.6).
const (
	NDOptSourceLinkAddr   = 1
	NDOptTargetLinkAddr   = 2
	NDOptPrefixInfo       = 3
	NDOptRedirectedHeader = 4
	NDOptMTU              = 5
	NDOptNonce            = 14 // Nonce (RFC 3971 section 5.3.2), DAD's loopback check (RFC 7527)
	NDOptRouteInfo        = 24 // Route Information (RFC 4191 section 2.3)
	NDOptRDNSS            = 25 // Recursive DNS Server (RFC 8106 section 5.1)
	NDOptDNSSL            = 31 // DNS Search List (RFC 8106 section 5.2)
)

// ND option layout (RFC 4861 section 4.6): type, length in units of 8
// octets covering type and length, then the option's own fields.
const (
	NDOptUnit    = 8
	ndOptType    = 0
	ndOptLength  = 1
	ndOptBody    = 2
	ndOptMinSize = 2

	// NDLinkLayerAddrLen is a link-layer address option's length on
	// Ethernet (RFC 2464 section 6): a 6-byte address fills one unit.
	NDLinkLayerAddrLen = 8
	ndLinkLayerAddr    = 2

	NDPrefixInfoLen       = 32 // RFC 4861 section 4.6.2: length 4
	ndPrefixLen           = 2  // prefix length in bits, 1 byte
	ndPrefixFlags         = 3  // L, A, 1 byte
	ndPrefixValidLife     = 4  // seconds, 4 bytes
	ndPrefixPreferredLife = 8  // seconds, 4 bytes
	ndPrefixReserved2     = 12 // 4 bytes
	ndPrefix              = 16 // 16 bytes
	ndPrefixFlagOnLink    = 0x80
	ndPrefixFlagAuto      = 0x40

	NDMTULen       = 8 // RFC 4861 section 4.6.4: length 1
	ndMTUReserved  = 2 // 2 bytes
	ndMTU          = 4 // 4 bytes
	ndRedirHdrData = 8 // RFC 4861 section 4.6.3: six reserved bytes, then the packet

	// NDNonceLen is the length of a Nonce option of NDNonceSize bytes,
	// the size Linux sends and RFC 7527 section 4.1 asks for ("at least
	// 6 bytes"), filling one unit.
	NDNonceLen  = 8
	NDNonceSize = 6
	ndNonce     = 2

	// NDInfiniteLifetime is the lifetime of all ones that means forever
	// (RFC 4861 section 4.6.2).
	NDInfiniteLifetime = 0xffffffff
)

// NDOptions is a view of the options of an ND message, well formed as
// ParseNDOptions checks.
type NDOptions []byte

// ParseNDOptions checks that every option in b has a nonzero length within
// b. RFC 4861 section 4.6: "Nodes MUST silently discard an ND packet that
// contains an option with length zero"; a length past the end is as fatal,
// since the options after it cannot be found.
func ParseNDOptions(b []byte) (NDOptions, bool) {
	for o := b; len(o) > 0; {
		if len(o) < ndOptMinSize {
			return nil, false
		}
		n := int(o[ndOptLength]) * NDOptUnit
		if n == 0 || n > len(o) {
			return nil, false
		}
		o = o[n:]
	}
	return NDOptions(b), true
}

// Next returns the first option and the options after it; o must be
// non-empty and well formed.
func (o NDOptions) Next() (NDOption, NDOptions) {
	n := int(o[ndOptLength]) * NDOptUnit
	return NDOption(o[:n]), o[n:]
}

// NDOption is a view of one ND option, type and length included.
type NDOption []byte

// Type returns the option type.
func (p NDOption) Type() uint8 { return p[ndOptType] }

// Len returns the option's length in bytes.
func (p NDOption) Len() int { return len(p) }

// Body returns what follows the type and length.
func (p NDOption) Body() []byte { return p[ndOptBody:] }

// LinkLayerAddr returns the address of a Source or Target Link-Layer
// Address option (RFC 4861 section 4.6.1), if p is one with an Ethernet
// address.
func (p NDOption) LinkLayerAddr() (MAC, bool) {
	if (p.Type() != NDOptSourceLinkAddr && p.Type() != NDOptTargetLinkAddr) || len(p) != NDLinkLayerAddrLen {
		return MAC{}, false
	}
	return MAC(p[ndLinkLayerAddr : ndLinkLayerAddr+macLen]), true
}

// PrefixInfo returns p as a Prefix Information option (RFC 4861 section
// 4.6.2), if it is one of the right length.
func (p NDOption) PrefixInfo() (NDPrefixInfo, bool) {
	if p.Type() != NDOptPrefixInfo || len(p) != NDPrefixInfoLen {
		return nil, false
	}
	return NDPrefixInfo(p), true
}

// MTU returns the MTU of an MTU option (RFC 4861 section 4.6.4), if p is
// one of the right length.
func (p NDOption) MTU() (uint32, bool) {
	if p.Type() != NDOptMTU || len(p) != NDMTULen {
		return 0, false
	}
	return be.Uint32(p[ndMTU : ndMTU+4]), true
}

// Nonce returns the nonce of a Nonce option (RFC 3971 section 5.3.2),
// if p is one: the bytes after type and length, of any size.
func (p NDOption) Nonce() ([]byte, bool) {
	if p.Type() != NDOptNonce {
		return nil, false
	}
	return p[ndNonce:], true
}

// RedirectedHeader returns the quoted packet, padding included, of a
// Redirected Header option (RFC 4861 section 4.6.3), if p is one.
func (p NDOption) RedirectedHeader() ([]byte, bool) {
	if p.Type() != NDOptRedirectedHeader || len(p) < ndRedirHdrData {
		return nil, false
	}
	return p[ndRedirHdrData:], true
}

// NDPrefixInfo is a view of a Prefix Information option.
type NDPrefixInfo []byte

// PrefixLen returns the prefix length field, which may exceed 128 in a
// malformed option.
func (p NDPrefixInfo) PrefixLen() uint8 { return p[ndPrefixLen] }

// Prefix returns the prefix; it is invalid if PrefixLen exceeds 128.
func (p NDPrefixInfo) Prefix() netip.Prefix {
	return netip.PrefixFrom(addr16(p, ndPrefix), int(p.PrefixLen()))
}

// OnLink reports whether the prefix is on-link (the L flag).
func (p NDPrefixInfo) OnLink() bool { return p[ndPrefixFlags]&ndPrefixFlagOnLink != 0 }

// Autonomous reports whether the prefix may be used for SLAAC (the A
// flag, RFC 4862 section 5.5.3).
func (p NDPrefixInfo) Autonomous() bool { return p[ndPrefixFlags]&ndPrefixFlagAuto != 0 }

// ValidLifetime returns the valid lifetime in seconds; NDInfiniteLifetime
// is forever.
func (p NDPrefixInfo) ValidLifetime() uint32 {
	return be.Uint32(p[ndPrefixValidLife : ndPrefixValidLife+4])
}

// PreferredLifetime returns the preferred lifetime in seconds;
// NDInfiniteLifetime is forever.
func (p NDPrefixInfo) PreferredLifetime() uint32 {
	return be.Uint32(p[ndPrefixPreferredLife : ndPrefixPreferredLife+4])
}

// EncodeNDLinkLayerAddr writes a Source or Target Link-Layer Address
// option (typ NDOptSourceLinkAddr or NDOptTargetLinkAddr) for an Ethernet
// address into b[:NDLinkLayerAddrLen].
func EncodeNDLinkLayerAddr(b []byte, typ uint8, mac MAC) {
	b[ndOptType], b[ndOptLength] = typ, NDLinkLayerAddrLen/NDOptUnit
	copy(b[ndLinkLayerAddr:NDLinkLayerAddrLen], mac[:])
}

// NDPrefixInfoFields describes a Prefix Information option.
type NDPrefixInfoFields struct {
	Prefix             netip.Prefix
	OnLink, Autonomous bool
	ValidLifetime      uint32 // seconds
	PreferredLifetime  uint32 // seconds
}

// EncodeNDPrefixInfo writes the option f describes into
// b[:NDPrefixInfoLen], reserved fields zero. The prefix is sent as given:
// RFC 4861 section 4.6.2 asks the bits after the prefix length be zero,
// which f.Prefix.Masked() ensures.
func EncodeNDPrefixInfo(b []byte, f *NDPrefixInfoFields) {
	b[ndOptType], b[ndOptLength] = NDOptPrefixInfo, NDPrefixInfoLen/NDOptUnit
	b[ndPrefixLen] = uint8(f.Prefix.Bits())
	var flags uint8
	if f.OnLink {
		flags |= ndPrefixFlagOnLink
	}
	if f.Autonomous {
		flags |= ndPrefixFlagAuto
	}
	b[ndPrefixFlags] = flags
	be.PutUint32(b[ndPrefixValidLife:ndPrefixValidLife+4], f.ValidLifetime)
	be.PutUint32(b[ndPrefixPreferredLife:ndPrefixPreferredLife+4], f.PreferredLifetime)
	be.PutUint32(b[ndPrefixReserved2:ndPrefixReserved2+4], 0)
	putAddr16(b, ndPrefix, f.Prefix.Addr())
}

// EncodeNDNonce writes a Nonce option of nonce into b[:NDNonceLen].
func EncodeNDNonce(b []byte, nonce [NDNonceSize]byte) {
	b[ndOptType], b[ndOptLength] = NDOptNonce, NDNonceLen/NDOptUnit
	copy(b[ndNonce:NDNonceLen], nonce[:])
}

// EncodeNDMTU writes an MTU option into b[:NDMTULen].
func EncodeNDMTU(b []byte, mtu uint32) {
	b[ndOptType], b[ndOptLength] = NDOptMTU, NDMTULen/NDOptUnit
	b[ndMTUReserved], b[ndMTUReserved+1] = 0, 0
	be.PutUint32(b[ndMTU:ndMTU+4], mtu)
}

// Recursive DNS Server option layout (RFC 8106 section 5.1): two reserved
// bytes, the lifetime in seconds, then the servers' addresses.
const (
	ndRDNSSReserved = 2 // 2 bytes
	ndRDNSSLifetime = 4 // seconds, 4 bytes
	ndRDNSSAddrs    = 8 // 16 bytes each
)

// NDRDNSSLen returns the length of a Recursive DNS Server option naming n
// servers: a unit of fixed fields and two per address.
func NDRDNSSLen(n int) int { return ndRDNSSAddrs + 16*n }

// EncodeNDRDNSS writes a Recursive DNS Server option (RFC 8106 section
// 5.1) naming servers, valid for lifetime seconds, into
// b[:NDRDNSSLen(len(servers))].
func EncodeNDRDNSS(b []byte, lifetime uint32, servers []netip.Addr) {
	n := NDRDNSSLen(len(servers))
	b[ndOptType], b[ndOptLength] = NDOptRDNSS, uint8(n/NDOptUnit)
	b[ndRDNSSReserved], b[ndRDNSSReserved+1] = 0, 0
	be.PutUint32(b[ndRDNSSLifetime:ndRDNSSLifetime+4], lifetime)
	for i, a := range servers {
		putAddr16(b, ndRDNSSAddrs+16*i, a)
	}
}

// RDNSS returns the lifetime and servers of a Recursive DNS Server option;
// false for another option, or one whose length is not a unit and two per
// server (RFC 8106 section 5.3.1: the Length "is greater than or equal to
// the minimum value (3) and satisfies the requirement that (Length - 1) %
// 2 == 0").
func (p NDOption) RDNSS() (lifetime uint32, servers []netip.Addr, ok bool) {
	if p.Type() != NDOptRDNSS || len(p) < NDRDNSSLen(1) || (len(p)-ndRDNSSAddrs)%16 != 0 {
		return 0, nil, false
	}
	for off := ndRDNSSAddrs; off+16 <= len(p); off += 16 {
		servers = append(servers, addr16(p, off))
	}
	return be.Uint32(p[ndRDNSSLifetime : ndRDNSSLifetime+4]), servers, true
}

// Route Information option layout (RFC 4191 section 2.3): the prefix
// length, the preference in bits 3-4 of the next byte, the route lifetime
// in seconds, then as many bytes of the prefix as the length holds.
const (
	ndRIOPrefixLen = 2 // 1 byte
	ndRIOFlags     = 3 // Prf << 3
	ndRIOLifetime  = 4 // 4 bytes
	ndRIOPrefix    = 8 // 0, 8 or 16 bytes
	ndRIOPrfShift  = 3
)

// NDRouteInfo is a Route Information option as RouteInfo reads it.
type NDRouteInfo struct {
	Prefix     netip.Prefix // masked: the bits past the length are ignored
	Preference RouterPreference
	Lifetime   uint32 // seconds; NDInfiniteLifetime is forever
}

// RouteInfo returns a Route Information option; false for another option,
// one whose prefix length exceeds 128 or what its length holds ("If the
// Prefix Length is greater than 64, then Length must be 3. If the Prefix
// Length is greater than 0, then Length must be 2 or 3"), or one with the
// reserved preference, which "MUST" be ignored (RFC 4191 section 2.3).
func (p NDOption) RouteInfo() (NDRouteInfo, bool) {
	if p.Type() != NDOptRouteInfo || len(p) < NDOptUnit || len(p) > 3*NDOptUnit {
		return NDRouteInfo{}, false
	}
	bits := int(p[ndRIOPrefixLen])
	prf := RouterPreference(p[ndRIOFlags]>>ndRIOPrfShift) & 3
	if bits > 128 || bits > 8*(len(p)-ndRIOPrefix) || prf == RouterPrefReserved {
		return NDRouteInfo{}, false
	}
	var a [16]byte
	copy(a[:], p[ndRIOPrefix:])
	prefix := netip.PrefixFrom(netip.AddrFrom16(a), bits).Masked()
	return NDRouteInfo{Prefix: prefix, Preference: prf, Lifetime: be.Uint32(p[ndRIOLifetime : ndRIOLifetime+4])}, true
}

// NDRouteInfoLen returns the length of a Route Information option for a
// prefix of bits: the fewest units that hold it.
func NDRouteInfoLen(bits int) int {
	switch {
	case bits == 0:
		return NDOptUnit
	case bits <= 64:
		return 2 * NDOptUnit
	}
	return 3 * NDOptUnit
}

// EncodeNDRouteInfo writes the Route Information option r describes into
// b[:NDRouteInfoLen(r.Prefix.Bits())].
func EncodeNDRouteInfo(b []byte, r *NDRouteInfo) {
	n := NDRouteInfoLen(r.Prefix.Bits())
	b[ndOptType], b[ndOptLength] = NDOptRouteInfo, uint8(n/NDOptUnit)
	b[ndRIOPrefixLen] = uint8(r.Prefix.Bits())
	b[ndRIOFlags] = uint8(r.Preference&3) << ndRIOPrfShift
	be.PutUint32(b[ndRIOLifetime:ndRIOLifetime+4], r.Lifetime)
	a := r.Prefix.Masked().Addr().As16()
	copy(b[ndRIOPrefix:n], a[:])
}

// DNS Search List option layout (RFC 8106 section 5.2): two reserved
// bytes, the lifetime in seconds, then the domain names, each as a DNS
// message has it (RFC 1035 section 3.1) but never compressed, and zeros
// to the next multiple of 8 octets.
const (
	ndDNSSLReserved = 2 // 2 bytes
	ndDNSSLLifetime = 4 // seconds, 4 bytes
	ndDNSSLNames    = 8
)

// NDDNSSLLen returns the length of a DNS Search List option naming
// domains, which are dotted names without the trailing dot.
func NDDNSSLLen(domains []string) int {
	n := ndDNSSLNames
	for _, d := range domains {
		n += DomainNameLen(d)
	}
	return (n + NDOptUnit - 1) / NDOptUnit * NDOptUnit
}

// EncodeNDDNSSL writes a DNS Search List option (RFC 8106 section 5.2)
// naming domains, valid for lifetime seconds, into b[:NDDNSSLLen(domains)].
// Each domain is a dotted name whose labels are 1 to 63 bytes.
func EncodeNDDNSSL(b []byte, lifetime uint32, domains []string) {
	n := NDDNSSLLen(domains)
	b[ndOptType], b[ndOptLength] = NDOptDNSSL, uint8(n/NDOptUnit)
	b[ndDNSSLReserved], b[ndDNSSLReserved+1] = 0, 0
	be.PutUint32(b[ndDNSSLLifetime:ndDNSSLLifetime+4], lifetime)
	names := b[ndDNSSLNames:ndDNSSLNames]
	for _, d := range domains {
		names = AppendDomainName(names, d)
	}
	clear(b[ndDNSSLNames+len(names) : n])
}

// DNSSL returns the lifetime and domains of a DNS Search List option, each
// a dotted name without the trailing dot; false for another option, or one
// that names no domain, or one with a name DomainNames refuses (RFC 8106
// section 5.3.1: such an option "MUST" be discarded).
func (p NDOption) DNSSL() (lifetime uint32, domains []string, ok bool) {
	if p.Type() != NDOptDNSSL || len(p) < 2*NDOptUnit {
		return 0, nil, false
	}
	domains, ok = DomainNames(p[ndDNSSLNames:])
	if !ok || len(domains) == 0 {
		return 0, nil, false
	}
	return be.Uint32(p[ndDNSSLLifetime : ndDNSSLLifetime+4]), domains, true
}

// NDRedirectedHeaderLen returns the length of a Redirected Header option
// quoting n bytes: padded to a multiple of 8 octets.
func NDRedirectedHeaderLen(n int) int {
	return (ndRedirHdrData + n + NDOptUnit - 1) / NDOptUnit * NDOptUnit
}

// EncodeNDRedirectedHeader writes a Redirected Header option quoting pkt
// into b[:NDRedirectedHeaderLen(len(pkt))], padded with zeros. The caller
// truncates pkt so that the Redirect fits the minimum MTU (RFC 4861
// section 4.6.3); the option's length field limits it to 2040 bytes.
func EncodeNDRedirectedHeader(b []byte, pkt []byte) {
	n := NDRedirectedHeaderLen(len(pkt))
	b[ndOptType], b[ndOptLength] = NDOptRedirectedHeader, uint8(n/NDOptUnit)
	clear(b[ndOptBody:ndRedirHdrData])
	copy(b[ndRedirHdrData:], pkt)
	clear(b[ndRedirHdrData+len(pkt) : n])
}
