// Package dhcpv6 is GoNet's stateless DHCPv6 client (RFC 8415 section
// 6.1): on a link whose routers set the Other-configuration or Managed
// flag of their advertisements (RFC 4861 section 4.2), it asks the
// link's DHCPv6 servers with an Information-request for what SLAAC does not
// give, the recursive DNS servers and the domain search list (RFC 3646),
// and asks again when the information's refresh time is over (RFC 8415
// section 21.23). Addresses by DHCPv6 (IA_NA) and prefix delegation are not
// done: the host's addresses come from SLAAC.
//
// The client knows nothing of the stack: it is given a UDP socket bound to
// port 546 on the interface, and reports what it learns through a
// function.
package dhcpv6

import (
	"encoding/binary"
	"net/netip"

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
	msgReply              = 7
	msgInformationRequest = 11
)

// Option codes (RFC 8415 section 21, RFC 3646 sections 3 and 4).
const (
	optClientID               = 1
	optServerID               = 2
	optORO                    = 6
	optElapsedTime            = 8
	optStatusCode             = 13
	optDNSServers             = 23
	optDomainList             = 24
	optInformationRefreshTime = 32
	optInfMaxRT               = 83
)

// statusSuccess is the Status Code option's Success (RFC 8415 section
// 21.13).
const statusSuccess = 0

// Layout: msg-type, a 3-byte transaction-id, then options, each a 2-byte
// code, a 2-byte length and its data (RFC 8415 sections 8 and 21.1).
const (
	headerLen    = 4
	optHeaderLen = 4
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

// informationRequest encodes an Information-request (RFC 8415 section
// 18.2.6): our Client Identifier, so that servers can tell clients apart;
// the Option Request option naming what we want (section 18.2.6: it "MUST
// include" the Information Refresh Time and INF_MAX_RT options); and the
// time since the exchange began, in hundredths of a second (section
// 21.9).
func informationRequest(xid uint32, duid []byte, elapsed uint16) []byte {
	b := make([]byte, 0, 64)
	b = binary.BigEndian.AppendUint32(b, msgInformationRequest<<24|xid&0xffffff)
	b = appendOption(b, optClientID, duid)
	var oro []byte
	for _, code := range []uint16{optDNSServers, optDomainList, optInformationRefreshTime, optInfMaxRT} {
		oro = binary.BigEndian.AppendUint16(oro, code)
	}
	b = appendOption(b, optORO, oro)
	return appendOption(b, optElapsedTime, binary.BigEndian.AppendUint16(nil, elapsed))
}

// reply is what a Reply to our Information-request carries for us.
type reply struct {
	servers []netip.Addr
	search  []string
	// refresh is the Information Refresh Time in seconds, 0 when
	// absent; infMaxRT the INF_MAX_RT option's, 0 when absent.
	refresh, infMaxRT uint32
}

// parseReply reads b as a Reply to the exchange xid for the client duid.
// It reports false for anything else: another type or transaction, a
// truncated option, no Server Identifier (section 16.10: "MUST discard"),
// a Client Identifier other than ours, or a Status Code other than
// Success. A malformed DNS option is left out, the rest kept.
func parseReply(b []byte, xid uint32, duid []byte) (reply, bool) {
	var r reply
	if len(b) < headerLen || b[0] != msgReply || binary.BigEndian.Uint32(b)&0xffffff != xid&0xffffff {
		return r, false
	}
	serverID := false
	for o := b[headerLen:]; len(o) > 0; {
		if len(o) < optHeaderLen {
			return r, false
		}
		code, n := binary.BigEndian.Uint16(o), int(binary.BigEndian.Uint16(o[2:]))
		if optHeaderLen+n > len(o) {
			return r, false
		}
		data := o[optHeaderLen : optHeaderLen+n]
		o = o[optHeaderLen+n:]
		switch code {
		case optServerID:
			serverID = n > 0
		case optClientID:
			if string(data) != string(duid) {
				return r, false
			}
		case optStatusCode:
			if n < 2 || binary.BigEndian.Uint16(data) != statusSuccess {
				return r, false
			}
		case optDNSServers:
			if n%16 != 0 {
				continue // RFC 3646 section 3: a multiple of 16
			}
			for i := 0; i < n; i += 16 {
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
			if n == 4 {
				r.refresh = binary.BigEndian.Uint32(data)
			}
		case optInfMaxRT:
			if n == 4 {
				r.infMaxRT = binary.BigEndian.Uint32(data)
			}
		}
	}
	return r, serverID
}
