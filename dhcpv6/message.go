// Package dhcpv6 is GoNet's DHCPv6 client (RFC 8415). On a link whose
// routers set the Other-configuration flag of their advertisements (RFC
// 4861 section 4.2) it is stateless (section 6.1): it asks the link's
// DHCPv6 servers with an Information-request for what SLAAC does not
// give, the recursive DNS servers and the domain search list (RFC 3646),
// and asks again when the information's refresh time is over (section
// 21.23). Once they set the Managed flag it is stateful (section 6.2,
// stateful.go): it leases addresses in an IA_NA, renews and rebinds them,
// and declines one that duplicate address detection finds in use. Prefix
// delegation is not done.
//
// The client knows nothing of the stack: it is given a UDP socket bound to
// port 546 on the interface, and reports what it learns and leases through
// functions.
package dhcpv6

import (
	"encoding/binary"
	"net/netip"
	"slices"

	"github.com/gonetstack/gonet/wire"
)

// Ports and the servers' group (RFC 8415 section 7.1 and 7.2).
const (
	ClientPort = 546
	ServerPort = 547
)

// AllServers is ff02::1:2, All_DHCP_Relay_Agents_and_Servers.
var AllServers = netip.MustParseAddr("ff02::1:2")

// Message types (RFC 8415 section 7.3) the client sends or takes.
const (
	msgSolicit            = 1
	msgAdvertise          = 2
	msgRequest            = 3
	msgConfirm            = 4
	msgRenew              = 5
	msgRebind             = 6
	msgReply              = 7
	msgRelease            = 8
	msgDecline            = 9
	msgInformationRequest = 11
)

// Option codes (RFC 8415 section 21, RFC 3646 sections 3 and 4).
const (
	optClientID               = 1
	optServerID               = 2
	optIANA                   = 3
	optIAAddr                 = 5
	optORO                    = 6
	optPreference             = 7
	optElapsedTime            = 8
	optStatusCode             = 13
	optDNSServers             = 23
	optDomainList             = 24
	optInformationRefreshTime = 32
	optSolMaxRT               = 82
	optInfMaxRT               = 83
)

// Status codes (RFC 8415 section 21.13).
const (
	statusSuccess      = 0
	statusNoAddrsAvail = 2
	statusNoBinding    = 3
	statusNotOnLink    = 4
)

// Layout: msg-type, a 3-byte transaction-id, then options, each a 2-byte
// code, a 2-byte length and its data (RFC 8415 sections 8 and 21.1); an
// IA_NA's IAID, T1 and T2 before its own options (section 21.4), an
// IA Address's address and lifetimes before its own (section 21.6).
const (
	headerLen    = 4
	optHeaderLen = 4
	iaNALen      = 12
	iaAddrLen    = 24
)

// duidLL is a DUID-LL (RFC 8415 section 11.4) for an Ethernet interface:
// type 3, hardware type 1 (RFC 826), the MAC.
func duidLL(mac wire.MAC) []byte {
	return append([]byte{0, 3, 0, 1}, mac[:]...)
}

// appendOption appends an option with its data.
func appendOption(b []byte, code uint16, data []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, code)
	b = binary.BigEndian.AppendUint16(b, uint16(len(data)))
	return append(b, data...)
}

// lease is an IA_NA (RFC 8415 section 21.4): the identity association
// for non-temporary addresses, its renewal times and addresses.
type lease struct {
	iaid, t1, t2 uint32 // seconds
	addrs        []leased
	status       uint16 // the IA_NA's Status Code, Success when absent
}

// leased is an IA Address (section 21.6).
type leased struct {
	addr             netip.Addr
	preferred, valid uint32 // seconds; all ones is forever
}

// request is a message the client sends: its type, transaction and the
// time since the exchange began (hundredths of a second, section 21.9);
// the server it is for (a Request, Renew or Decline: section 18.2), and
// the IA_NA it asks about.
type request struct {
	typ      uint8
	xid      uint32
	elapsed  uint16
	serverID []byte
	ia       *lease
}

// encode writes r with our Client Identifier, so that servers tell clients
// apart, and the Option Request option naming what we want (section
// 18.2.6: an Information-request "MUST include" the Information Refresh
// Time and INF_MAX_RT options; the others SOL_MAX_RT).
func (r *request) encode(duid []byte) []byte {
	b := make([]byte, 0, 128)
	b = binary.BigEndian.AppendUint32(b, uint32(r.typ)<<24|r.xid&0xffffff)
	b = appendOption(b, optClientID, duid)
	if r.serverID != nil {
		b = appendOption(b, optServerID, r.serverID)
	}
	if r.ia != nil {
		ia := binary.BigEndian.AppendUint32(nil, r.ia.iaid)
		ia = binary.BigEndian.AppendUint32(ia, r.ia.t1)
		ia = binary.BigEndian.AppendUint32(ia, r.ia.t2)
		for _, a := range r.ia.addrs {
			d := append(a.addr.AsSlice(), 0, 0, 0, 0, 0, 0, 0, 0)
			binary.BigEndian.PutUint32(d[16:], a.preferred)
			binary.BigEndian.PutUint32(d[20:], a.valid)
			ia = appendOption(ia, optIAAddr, d)
		}
		b = appendOption(b, optIANA, ia)
	}
	oro := []uint16{optDNSServers, optDomainList, optSolMaxRT}
	if r.typ == msgInformationRequest {
		oro = []uint16{optDNSServers, optDomainList, optInformationRefreshTime, optInfMaxRT}
	}
	var codes []byte
	for _, c := range oro {
		codes = binary.BigEndian.AppendUint16(codes, c)
	}
	b = appendOption(b, optORO, codes)
	return appendOption(b, optElapsedTime, binary.BigEndian.AppendUint16(nil, r.elapsed))
}

// informationRequest encodes an Information-request (RFC 8415 section
// 18.2.6).
func informationRequest(xid uint32, duid []byte, elapsed uint16) []byte {
	return (&request{typ: msgInformationRequest, xid: xid, elapsed: elapsed}).encode(duid)
}

// reply is what an Advertise or Reply to us carries.
type reply struct {
	typ      uint8
	serverID []byte
	// preference is the Preference option's (section 21.8), 0 when
	// absent; status the message's Status Code, Success when absent.
	preference uint8
	status     uint16
	ia         *lease // our IA_NA, when the message has one
	servers    []netip.Addr
	search     []string
	// refresh is the Information Refresh Time in seconds, 0 when
	// absent; infMaxRT and solMaxRT the INF_MAX_RT and SOL_MAX_RT
	// options', 0 when absent.
	refresh, infMaxRT, solMaxRT uint32
}

// parseReply reads b as an Advertise or Reply in the exchange xid, for the
// client duid whose IA_NA is iaid. It reports false for anything else:
// another type or transaction, a truncated option, no Server Identifier
// (section 16.3 and 16.10: "MUST discard"), or a Client Identifier other
// than ours. A malformed DNS option is left out, an IA Address whose
// preferred lifetime exceeds its valid one too (section 18.2.10.1), the
// rest kept; the caller judges the status codes.
func parseReply(b []byte, xid uint32, duid []byte, iaid uint32) (reply, bool) {
	var r reply
	if len(b) < headerLen || (b[0] != msgReply && b[0] != msgAdvertise) || binary.BigEndian.Uint32(b)&0xffffff != xid&0xffffff {
		return r, false
	}
	r.typ = b[0]
	ok := eachOption(b[headerLen:], func(code uint16, data []byte) bool {
		switch code {
		case optServerID:
			r.serverID = slices.Clone(data)
		case optClientID:
			return string(data) == string(duid)
		case optPreference:
			if len(data) == 1 {
				r.preference = data[0]
			}
		case optStatusCode:
			if len(data) < 2 {
				return false
			}
			r.status = binary.BigEndian.Uint16(data)
		case optIANA:
			if len(data) >= iaNALen && binary.BigEndian.Uint32(data) == iaid {
				ia, ok := parseIANA(data)
				if !ok {
					return false
				}
				r.ia = ia
			}
		case optDNSServers:
			if len(data)%16 != 0 {
				return true // RFC 3646 section 3: a multiple of 16
			}
			for i := 0; i < len(data); i += 16 {
				a := netip.AddrFrom16([16]byte(data[i : i+16]))
				if !a.IsUnspecified() && !a.IsMulticast() && !a.IsLoopback() && !a.Is4In6() {
					r.servers = append(r.servers, a)
				}
			}
		case optDomainList:
			if names, ok := wire.DomainNames(data); ok {
				r.search = names
			}
		case optInformationRefreshTime:
			r.refresh = uint32Of(data)
		case optInfMaxRT:
			r.infMaxRT = uint32Of(data)
		case optSolMaxRT:
			r.solMaxRT = uint32Of(data)
		}
		return true
	})
	return r, ok && len(r.serverID) > 0
}

// parseIANA reads an IA_NA's fields and its IA Addresses.
func parseIANA(data []byte) (*lease, bool) {
	ia := &lease{iaid: binary.BigEndian.Uint32(data), t1: binary.BigEndian.Uint32(data[4:]), t2: binary.BigEndian.Uint32(data[8:])}
	ok := eachOption(data[iaNALen:], func(code uint16, d []byte) bool {
		switch code {
		case optStatusCode:
			if len(d) < 2 {
				return false
			}
			ia.status = binary.BigEndian.Uint16(d)
		case optIAAddr:
			if len(d) < iaAddrLen {
				return false
			}
			a := leased{addr: netip.AddrFrom16([16]byte(d[:16])), preferred: binary.BigEndian.Uint32(d[16:]), valid: binary.BigEndian.Uint32(d[20:])}
			if a.preferred <= a.valid && !a.addr.IsMulticast() && !a.addr.IsUnspecified() && !a.addr.IsLoopback() && !a.addr.IsLinkLocalUnicast() && !a.addr.Is4In6() {
				ia.addrs = append(ia.addrs, a)
			}
		}
		return true
	})
	return ia, ok
}

// eachOption calls f with each option of b, stopping at the first f
// refuses; it reports false for a truncated option or a refusal.
func eachOption(b []byte, f func(code uint16, data []byte) bool) bool {
	for len(b) > 0 {
		if len(b) < optHeaderLen {
			return false
		}
		code, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if optHeaderLen+n > len(b) {
			return false
		}
		if !f(code, b[optHeaderLen:optHeaderLen+n]) {
			return false
		}
		b = b[optHeaderLen+n:]
	}
	return true
}

func uint32Of(d []byte) uint32 {
	if len(d) != 4 {
		return 0
	}
	return binary.BigEndian.Uint32(d)
}
