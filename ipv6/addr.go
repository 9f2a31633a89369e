package ipv6

// This file holds the address arithmetic the layer and neighbour discovery
// build on, as pure functions: interface identifiers from a MAC (RFC 4291
// section 2.5.1 and appendix A) or stable and opaque (RFC 7217), the
// link-local and SLAAC addresses formed from them (RFC 4862 section 5.3 and
// 5.5.3), the multicast groups a node joins and their Ethernet addresses
// (RFC 4291 section 2.7, RFC 2464 section 7), and the scope and source
// checks of RFC 4291.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"

	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/wire"
)

// IIDLen is the length in bytes of an interface identifier: 64 bits for
// every unicast address outside ::/3 (RFC 4291 section 2.5.1).
const IIDLen = 8

// IID is an interface identifier, the low 64 bits of a unicast address.
type IID [IIDLen]byte

// String formats the identifier as four colon-separated groups of four hex
// digits, the way it appears in the low half of an address.
func (i IID) String() string {
	var b [4*4 + 3]byte
	for g := range 4 {
		if g > 0 {
			b[g*5-1] = ':'
		}
		hex.Encode(b[g*5:g*5+4], i[g*2:g*2+2])
	}
	return string(b[:])
}

// euiUniversal is the universal/local bit of the first octet of an IEEE
// identifier: RFC 4291 section 2.5.1 inverts it so that hand-written
// identifiers such as ::1 need not set it.
const euiUniversal = 0x02

// EUI64 is the modified EUI-64 interface identifier of a 48-bit MAC (RFC
// 4291 appendix A): 0xfffe goes between the company id and the extension
// id, and the universal/local bit is inverted. The group bit stays as it is.
func EUI64(mac wire.MAC) IID {
	return IID{mac[0] ^ euiUniversal, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]}
}

// IsReserved reports whether i is one of the reserved interface identifiers
// that RFC 7217 section 5 says a generated identifier must be compared
// against ([RFC5453] and the IANA registry "Reserved IPv6 Interface
// Identifiers"), any of which would make an address that is not ours alone:
//   - 0000:0000:0000:0000, the subnet-router anycast address (RFC 4291
//     section 2.6.1);
//   - fdff:ffff:ffff:ff80 to fdff:ffff:ffff:ffff, the reserved subnet
//     anycast addresses (RFC 2526 section 2);
//   - 0200:5eff:fe00:0000 to 0200:5eff:feff:ffff, the modified EUI-64 of
//     IANA's Ethernet block 00:00:5e (the registry, citing RFC 4291 and, for
//     0200:5eff:fe00:5213, Proxy Mobile IPv6 in RFC 6543).
func (i IID) IsReserved() bool {
	v := binary.BigEndian.Uint64(i[:])
	switch {
	case v == 0:
		return true
	case v&^0x7f == 0xfdff_ffff_ffff_ff80: // the low 7 bits are the anycast ID
		return true
	case v>>24 == 0x0200_5eff_fe:
		return true
	}
	return false
}

// MinSecretKeyLen is the shortest secret key StableIID takes: "The
// secret_key SHOULD be of at least 128 bits" (RFC 7217 section 5).
const MinSecretKeyLen = 16

// NewSecretKey draws a secret key for StableIID from the stack's random
// source, which is ChaCha8 seeded from crypto/rand unless a test seeded it.
// RFC 7217 section 5 has the key made once, at installation, and kept: the
// caller stores it (the daemon in its state) so that the addresses stay the
// same across restarts, which is their point.
func NewSecretKey(r *env.Rand) []byte {
	key := make([]byte, MinSecretKeyLen)
	binary.BigEndian.PutUint64(key[:8], r.Uint64())
	binary.BigEndian.PutUint64(key[8:], r.Uint64())
	return key
}

// StableIIDInputs are the inputs of RFC 7217 section 5's function F other
// than the DAD counter: the same inputs give the same identifier on every
// boot, and a different prefix a different one, so the address is stable
// on a network yet cannot be correlated across networks.
type StableIIDInputs struct {
	// Prefix is the /64 the address is formed in: fe80::/64 for the
	// link-local address, the advertised prefix for SLAAC.
	Prefix netip.Prefix
	// NetIface identifies the interface stably (its name, index or MAC):
	// RFC 7217 section 5's Net_Iface.
	NetIface []byte
	// NetworkID names the network attached (an SSID, say); it may be
	// empty: RFC 7217 section 5's optional Network_ID.
	NetworkID []byte
	// SecretKey is the node's secret, at least MinSecretKeyLen bytes,
	// kept across reboots by the caller (RFC 7217 section 5 secret_key).
	SecretKey []byte
}

// StableIID is the stable opaque interface identifier of RFC 7217 section
// 5 for the inputs and DAD counter, and the DAD counter that produced it:
// an identifier that is reserved (IID.IsReserved) is handled as RFC 7217
// section 6 handles a duplicate address, by incrementing the counter and
// computing F again, so the counter returned can be larger than the one
// given. After a DAD failure the caller asks again with that counter plus
// one, within RFC 7217 section 6's IDGEN_RETRIES.
//
// F is SHA-256, as section 5 suggests, over the inputs in the RFC's order,
// and the identifier is the digest's least significant 64 bits (section 5,
// step 2). The variable-length inputs are each preceded by their length,
// two bytes big-endian, so that two different pairs of Net_Iface and
// Network_ID cannot hash the same bytes. The encoding is part of the
// contract: changing it would change every stable address a node has.
func StableIID(in *StableIIDInputs, dadCounter uint8) (IID, uint8, error) {
	if len(in.SecretKey) < MinSecretKeyLen {
		return IID{}, 0, fmt.Errorf("ipv6: stable interface identifier: secret key of %d bytes, want at least %d (RFC 7217 section 5)", len(in.SecretKey), MinSecretKeyLen)
	}
	if err := checkSLAACPrefix(in.Prefix); err != nil {
		return IID{}, 0, fmt.Errorf("ipv6: stable interface identifier: %w", err)
	}
	if len(in.NetIface) > 0xffff || len(in.NetworkID) > 0xffff {
		return IID{}, 0, fmt.Errorf("ipv6: stable interface identifier: Net_Iface of %d bytes or Network_ID of %d bytes is over 65535", len(in.NetIface), len(in.NetworkID))
	}
	iid, counter, ok := firstUnreserved(dadCounter, func(c uint8) IID { return stableRID(in, c) })
	if !ok {
		return IID{}, 0, fmt.Errorf("ipv6: stable interface identifier: every DAD counter from %d to 255 gives a reserved identifier", dadCounter)
	}
	return iid, counter, nil
}

// firstUnreserved tries F with counters from start upward until it gives
// an identifier that is not reserved; it is apart from StableIID so that a
// test can give it an F whose first answers are reserved, which SHA-256
// does with odds of about 2^-40.
func firstUnreserved(start uint8, f func(dadCounter uint8) IID) (IID, uint8, bool) {
	for c := int(start); c <= 0xff; c++ {
		if iid := f(uint8(c)); !iid.IsReserved() {
			return iid, uint8(c), true
		}
	}
	return IID{}, 0, false
}

// stableRID is F(Prefix, Net_Iface, Network_ID, DAD_Counter, secret_key)
// truncated to its least significant 64 bits (RFC 7217 section 5).
func stableRID(in *StableIIDInputs, dadCounter uint8) IID {
	h := sha256.New()
	prefix := in.Prefix.Masked().Addr().As16()
	h.Write(prefix[:IIDLen])
	writeLenPrefixed(h, in.NetIface)
	writeLenPrefixed(h, in.NetworkID)
	h.Write([]byte{dadCounter})
	h.Write(in.SecretKey)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return IID(sum[sha256.Size-IIDLen:])
}

func writeLenPrefixed(h interface{ Write([]byte) (int, error) }, b []byte) {
	var n [2]byte
	binary.BigEndian.PutUint16(n[:], uint16(len(b)))
	h.Write(n[:])
	h.Write(b)
}

// linkLocalPrefix is fe80::/64, the prefix of the link-local addresses a
// node forms itself (RFC 4291 section 2.5.6, RFC 4862 section 5.3): the
// 54 bits after fe80::/10 are zero.
var linkLocalPrefix = netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfe, 0x80}), 64)

// LinkLocalPrefix is fe80::/64, for StableIIDInputs.Prefix when forming
// the link-local address.
func LinkLocalPrefix() netip.Prefix { return linkLocalPrefix }

// LinkLocal is the link-local address of an interface identifier, fe80::/64
// followed by it (RFC 4862 section 5.3).
func LinkLocal(iid IID) netip.Addr {
	a := linkLocalPrefix.Addr().As16()
	copy(a[IIDLen:], iid[:])
	return netip.AddrFrom16(a)
}

// FromPrefix is the address SLAAC forms from an advertised prefix and an
// interface identifier (RFC 4862 section 5.5.3 d). The identifiers here
// are 64 bits long, as RFC 2464 section 4 fixes them for Ethernet, so only
// a /64 makes an address; any other length is an error, for RFC 4862
// section 5.5.3 d says such a prefix option is ignored.
func FromPrefix(prefix netip.Prefix, iid IID) (netip.Addr, error) {
	if err := checkSLAACPrefix(prefix); err != nil {
		return netip.Addr{}, fmt.Errorf("ipv6: address from prefix: %w", err)
	}
	a := prefix.Masked().Addr().As16()
	copy(a[IIDLen:], iid[:])
	return netip.AddrFrom16(a), nil
}

func checkSLAACPrefix(p netip.Prefix) error {
	switch {
	case !p.IsValid():
		return fmt.Errorf("invalid prefix %v", p)
	case !p.Addr().Is6():
		return fmt.Errorf("prefix %v is not IPv6", p)
	case p.Bits() != 128-8*IIDLen:
		return fmt.Errorf("prefix %v: length %d plus a 64-bit interface identifier is not 128 bits (RFC 4862 section 5.5.3 d)", p, p.Bits())
	}
	return nil
}

// The multicast groups every IPv6 node or router joins or sends to, by name
// rather than by literal.
var (
	// AllNodes is ff02::1, the link-local all-nodes group (RFC 4291
	// section 2.7.1), which every node joins.
	AllNodes = netip.AddrFrom16([16]byte{0xff, 0x02, 15: 0x01})
	// AllRouters is ff02::2, the link-local all-routers group (RFC 4291
	// section 2.7.1), where router solicitations go.
	AllRouters = netip.AddrFrom16([16]byte{0xff, 0x02, 15: 0x02})
	// AllMLDv2Routers is ff02::16, where MLDv2 reports go (RFC 3810
	// section 5.2.14).
	AllMLDv2Routers = netip.AddrFrom16([16]byte{0xff, 0x02, 15: 0x16})
)

// solicitedNodePrefix is the first 13 bytes of ff02::1:ff00:0/104 (RFC
// 4291 section 2.7.1).
var solicitedNodePrefix = [13]byte{0xff, 0x02, 11: 0x01, 12: 0xff}

// SolicitedNode is the solicited-node multicast group of a unicast or
// anycast address, ff02::1:ff00:0/104 followed by the address's low 24
// bits (RFC 4291 section 2.7.1): a node joins it for each of its addresses,
// and neighbour solicitations for the address are sent to it.
func SolicitedNode(a netip.Addr) netip.Addr {
	b := a.As16()
	copy(b[:len(solicitedNodePrefix)], solicitedNodePrefix[:])
	return netip.AddrFrom16(b)
}

// IsSolicitedNode reports whether a is a solicited-node multicast address,
// in ff02::1:ff00:0/104 (RFC 4291 section 2.7.1).
func IsSolicitedNode(a netip.Addr) bool {
	if !a.Is6() {
		return false
	}
	b := a.As16()
	return [13]byte(b[:13]) == solicitedNodePrefix
}

// MulticastMAC is the Ethernet destination of an IPv6 multicast address:
// 33:33 followed by the address's low 32 bits (RFC 2464 section 7). It
// reports false for an address that is not IPv6 multicast, which has no
// such mapping.
func MulticastMAC(group netip.Addr) (wire.MAC, bool) {
	b := group.As16()
	if !group.Is6() || !isMulticast(&b) {
		return wire.MAC{}, false
	}
	return wire.MAC{0x33, 0x33, b[12], b[13], b[14], b[15]}, true
}

// Scope is an address's scope, the span of the topology within which it is
// unique, with the values of the multicast scope field (RFC 4291 section
// 2.7, RFC 7346 section 2): a larger value is a wider scope (RFC 4007
// section 5), which source address selection compares.
type Scope uint8

// Scopes of RFC 4291 section 2.7 and RFC 7346 section 2. ScopeNone is the
// reserved value 0, given here to the unspecified address and to addresses
// that are not IPv6, which have no scope.
const (
	ScopeNone              Scope = 0x0
	ScopeInterfaceLocal    Scope = 0x1
	ScopeLinkLocal         Scope = 0x2
	ScopeRealmLocal        Scope = 0x3
	ScopeAdminLocal        Scope = 0x4
	ScopeSiteLocal         Scope = 0x5
	ScopeOrganizationLocal Scope = 0x8
	ScopeGlobal            Scope = 0xe
)

var scopeText = [16]string{
	ScopeNone:              "none",
	ScopeInterfaceLocal:    "interface-local",
	ScopeLinkLocal:         "link-local",
	ScopeRealmLocal:        "realm-local",
	ScopeAdminLocal:        "admin-local",
	ScopeSiteLocal:         "site-local",
	ScopeOrganizationLocal: "organization-local",
	ScopeGlobal:            "global",
}

// String names the scope; unassigned values print as a number.
func (s Scope) String() string {
	if int(s) < len(scopeText) && scopeText[s] != "" {
		return scopeText[s]
	}
	return fmt.Sprintf("scope(%#x)", uint8(s))
}

// AddrScope is the scope of an IPv6 address. A multicast address carries
// its own in the scope field (RFC 4291 section 2.7). Of the unicast
// addresses, fe80::/10 is link-local (section 2.5.6) and so is the loopback
// address, which section 2.5.3 and RFC 4007 section 4 treat as the
// link-local address of an imaginary link; fec0::/10 is global, since
// section 2.5.7 says new implementations treat the deprecated site-local
// prefix as global unicast; the rest, unique local addresses among them
// (RFC 4193 section 3.3), is global.
func AddrScope(a netip.Addr) Scope {
	b := a.As16()
	switch {
	case !a.Is6() || b == [16]byte{}:
		return ScopeNone
	case isMulticast(&b):
		return Scope(b[1] & 0x0f)
	case isLinkLocalUnicast(&b) || b == loopback:
		return ScopeLinkLocal
	}
	return ScopeGlobal
}

// The predicates below look at the 16 bytes alone: netip's unmap an
// IPv4-mapped address first, which would make ::ffff:224.0.0.1 multicast.

// isMulticast: ff00::/8 (RFC 4291 section 2.7).
func isMulticast(b *[16]byte) bool { return b[0] == 0xff }

// isLinkLocalUnicast: fe80::/10 (RFC 4291 section 2.5.6).
func isLinkLocalUnicast(b *[16]byte) bool { return b[0] == 0xfe && b[1]&0xc0 == 0x80 }

// loopback is ::1 (RFC 4291 section 2.5.3).
var loopback = [16]byte{15: 1}

// SourceError says why the source address of a received packet is not
// acceptable, so that the layer can count each reason apart.
type SourceError uint8

// Source address verdicts, in the order CheckSource looks for them.
const (
	SourceOK SourceError = iota
	// SourceNotIPv6: the zero Addr or an IPv4 address, which no IPv6
	// header carries; a caller's mistake rather than a peer's.
	SourceNotIPv6
	// SourceMulticast: "Multicast addresses must not be used as source
	// addresses in IPv6 packets" (RFC 4291 section 2.7).
	SourceMulticast
	// SourceLoopback: the loopback address "must not be used as the
	// source address in IPv6 packets that are sent outside of a single
	// node" (RFC 4291 section 2.5.3), so a packet bearing it did not
	// come from a link.
	SourceLoopback
	// SourceUnspecified: :: is the source of a node that has no address
	// yet (RFC 4291 section 2.5.2). It is not an error everywhere, so
	// the caller decides: neighbour discovery accepts it in a neighbour
	// solicitation for duplicate address detection (RFC 4861 section
	// 7.1.1, RFC 4862 section 5.4.2) and in a router solicitation (RFC
	// 4861 section 6.1.1), and MLD in a report sent before the sender
	// has a link-local address (RFC 3810 section 5.2.13); nothing else
	// accepts it, and it must never be answered to.
	SourceUnspecified
)

var sourceErrorText = [...]string{
	SourceOK:          "ok",
	SourceNotIPv6:     "not an IPv6 address",
	SourceMulticast:   "multicast source",
	SourceLoopback:    "loopback source from a link",
	SourceUnspecified: "unspecified source",
}

// String names the verdict; values outside the list print as a number
// rather than panic.
func (e SourceError) String() string {
	if int(e) < len(sourceErrorText) {
		return sourceErrorText[e]
	}
	return fmt.Sprintf("SourceError(%d)", uint8(e))
}

// CheckSource says whether src may be the source address of a packet
// received from a link (RFC 4291 sections 2.5.2, 2.5.3 and 2.7). The
// unspecified address gets a verdict of its own, SourceUnspecified, which
// the caller accepts only where neighbour discovery and MLD allow it.
func CheckSource(src netip.Addr) SourceError {
	b := src.As16()
	switch {
	case !src.Is6():
		return SourceNotIPv6
	case isMulticast(&b):
		return SourceMulticast
	case b == loopback:
		return SourceLoopback
	case b == [16]byte{}:
		return SourceUnspecified
	}
	return SourceOK
}
