package dhcp

import (
	"net"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// The messages a client sends, with the fields and options RFC 2131
// section 4.4.1's table 5 gives each: which carry ciaddr, the requested
// address (option 50) and the server identifier (option 54).

// requested are the options the client asks for (option 55, RFC 2132
// section 9.8): those it applies or keeps.
var requested = []dhcpv4.OptionCode{
	dhcpv4.OptionSubnetMask,
	// RFC 3442 section 4: a client that takes classless static routes
	// asks for them before the Router option.
	dhcpv4.OptionClasslessStaticRoute,
	dhcpv4.OptionRouter,
	dhcpv4.OptionDomainNameServer,
	dhcpv4.OptionDomainName,
	dhcpv4.OptionInterfaceMTU,
	dhcpv4.OptionIPAddressLeaseTime,
	dhcpv4.OptionRenewTimeValue,
	dhcpv4.OptionRebindingTimeValue,
	dhcpv4.OptionDNSDomainSearchList,
}

// maxMessageSize is the longest message the client takes (option 57, RFC
// 2132 section 9.10): an Ethernet frame's worth, as its receive buffer
// holds.
const maxMessageSize = 1500

// msgFields are what differs between the client's messages.
type msgFields struct {
	typ       dhcpv4.MessageType
	xid       dhcpv4.TransactionID
	secs      time.Duration // since the exchange began (RFC 2131 section 2)
	ciaddr    netip.Addr    // the client's address, when it holds one
	requested netip.Addr    // option 50
	server    netip.Addr    // option 54
	message   string        // option 56: why (DECLINE)
}

// message builds a client message (RFC 2131 section 4.4.1, table 5).
func (c *Client) message(f msgFields) *dhcpv4.DHCPv4 {
	m := &dhcpv4.DHCPv4{
		OpCode:         dhcpv4.OpcodeBootRequest,
		HWType:         iana.HWTypeEthernet,
		HopCount:       0,
		TransactionID:  f.xid,
		NumSeconds:     uint16(min(f.secs/time.Second, 0xffff)),
		ClientIPAddr:   net.IPv4zero.To4(),
		YourIPAddr:     net.IPv4zero.To4(),
		ServerIPAddr:   net.IPv4zero.To4(),
		GatewayIPAddr:  net.IPv4zero.To4(),
		ClientHWAddr:   c.hw,
		ServerHostName: "",
		BootFileName:   "",
		Options:        dhcpv4.Options{},
	}
	asks := f.typ == dhcpv4.MessageTypeDiscover || f.typ == dhcpv4.MessageTypeRequest
	if f.ciaddr.IsValid() {
		m.ClientIPAddr = ip(f.ciaddr)
	} else if asks {
		// Section 4.1: a client that cannot take unicast datagrams before
		// its address is configured asks for broadcast replies. GoNet's
		// IPv4 takes datagrams only for addresses it holds.
		m.SetBroadcast()
	}
	m.Options.Update(dhcpv4.OptMessageType(f.typ))
	m.Options.Update(dhcpv4.OptClientIdentifier(c.id))
	if f.requested.IsValid() {
		m.Options.Update(dhcpv4.OptRequestedIPAddress(ip(f.requested)))
	}
	if f.server.IsValid() {
		m.Options.Update(dhcpv4.OptServerIdentifier(ip(f.server)))
	}
	if f.message != "" {
		m.Options.Update(dhcpv4.OptMessage(f.message))
	}
	// Table 5: parameters are asked for in DISCOVER and REQUEST only,
	// and so is a host name.
	if asks {
		m.Options.Update(dhcpv4.OptParameterRequestList(requested...))
		m.Options.Update(dhcpv4.OptMaxMessageSize(maxMessageSize))
		if c.cfg.Hostname != "" {
			m.Options.Update(dhcpv4.OptHostName(c.cfg.Hostname))
		}
	}
	return m
}

// defaultClientID is RFC 2132 section 9.14's identifier made of the
// hardware type and address, as the server's clientKey forms it too.
func defaultClientID(hw net.HardwareAddr) []byte {
	return append([]byte{byte(iana.HWTypeEthernet)}, hw...)
}
