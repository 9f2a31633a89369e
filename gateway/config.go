package gateway

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// The guest's network, as slirp4netns lays it out so that set-ups made for
// it carry over: in the guest's subnet, the gateway is the second address,
// the DNS forwarder the third and the guest the hundredth.
const (
	gatewayHost = 2
	dnsHost     = 3
	guestHost   = 100
)

// DefaultSubnet is slirp4netns's network, 10.0.2.0/24.
var DefaultSubnet = netip.MustParsePrefix("10.0.2.0/24")

// Network is the guest's side of the gateway: its subnet and the addresses
// in it.
type Network struct {
	Subnet  netip.Prefix // the guest's network, masked
	Gateway netip.Addr   // the guest's router, and the host's loopback
	DNS     netip.Addr   // the DNS forwarder
	Guest   netip.Addr   // the address the guest is given
}

// NewNetwork lays out subnet as slirp4netns does. The subnet must be IPv4
// and hold the hundredth address and a broadcast address above it: /25 or
// larger.
func NewNetwork(subnet netip.Prefix) (Network, error) {
	if !subnet.Addr().Is4() {
		return Network{}, fmt.Errorf("gateway: subnet %v: not IPv4", subnet)
	}
	if subnet.Bits() > 25 {
		return Network{}, fmt.Errorf("gateway: subnet %v: too small for the guest at .%d: /25 at most", subnet, guestHost)
	}
	subnet = subnet.Masked()
	return Network{
		Subnet:  subnet,
		Gateway: nthAddr(subnet, gatewayHost),
		DNS:     nthAddr(subnet, dnsHost),
		Guest:   nthAddr(subnet, guestHost),
	}, nil
}

// nthAddr returns the nth address of subnet.
func nthAddr(subnet netip.Prefix, n uint32) netip.Addr {
	b := subnet.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += n
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// DefaultPrefix6 is slirp4netns --enable-ipv6's network, fd00::/64.
var DefaultPrefix6 = netip.MustParsePrefix("fd00::/64")

// Network6 is the guest's IPv6 side of the gateway, laid out as
// slirp4netns --enable-ipv6 does: the gateway is ::2 of the prefix, the
// DNS forwarder ::3, and the guest forms its own address in the prefix by
// SLAAC (RFC 4862) from the gateway's router advertisements.
type Network6 struct {
	Prefix  netip.Prefix // the guest's /64, masked
	Gateway netip.Addr   // the gateway's address in it, and the host's loopback (::1)
	DNS     netip.Addr   // the DNS forwarder
}

// NewNetwork6 lays out prefix as slirp4netns does. The prefix must be an
// IPv6 /64 of global or unique local scope: SLAAC forms a 64-bit interface
// identifier on Ethernet (RFC 4862 section 5.5.3 d, RFC 2464 section 4),
// and routers advertise no link-local prefix (RFC 4861 section 6.2.3).
func NewNetwork6(prefix netip.Prefix) (Network6, error) {
	a := prefix.Addr()
	switch {
	case !a.Is6() || a.Is4In6():
		return Network6{}, fmt.Errorf("gateway: IPv6 prefix %v: not IPv6", prefix)
	case prefix.Bits() != 64:
		return Network6{}, fmt.Errorf("gateway: IPv6 prefix %v: not a /64, which SLAAC needs", prefix)
	case a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsLoopback() || a.IsUnspecified():
		return Network6{}, fmt.Errorf("gateway: IPv6 prefix %v: not a unicast prefix a router advertises", prefix)
	}
	prefix = prefix.Masked()
	return Network6{
		Prefix:  prefix,
		Gateway: nthAddr6(prefix, gatewayHost),
		DNS:     nthAddr6(prefix, dnsHost),
	}, nil
}

// nthAddr6 returns the nth address of a /64.
func nthAddr6(prefix netip.Prefix, n uint32) netip.Addr {
	b := prefix.Addr().As16()
	b[12], b[13], b[14], b[15] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return netip.AddrFrom16(b)
}

// Proto is a transport protocol a forward carries.
type Proto string

const (
	TCP Proto = "tcp"
	UDP Proto = "udp"
)

// Forward is an inbound port forward: the host listens on Host, and each
// connection (TCP) or flow (UDP) there is carried to the guest's GuestPort,
// arriving from the gateway's address.
type Forward struct {
	Proto     Proto
	Host      netip.AddrPort // 0.0.0.0 when the spec names no address, as slirp4netns
	GuestPort uint16
}

func (f Forward) String() string {
	return fmt.Sprintf("%s:%s:%d", f.Proto, f.Host, f.GuestPort)
}

// ParseForward parses PROTO:[HOSTADDR:]HOSTPORT:GUESTPORT, as in
// tcp:8080:80 or udp:127.0.0.1:5353:53.
func ParseForward(s string) (Forward, error) {
	bad := func(why string) (Forward, error) {
		return Forward{}, fmt.Errorf("gateway: forward %q: %s; want PROTO:[HOSTADDR:]HOSTPORT:GUESTPORT, as in tcp:8080:80", s, why)
	}
	parts := strings.Split(s, ":")
	if len(parts) != 3 && len(parts) != 4 {
		return bad("wrong number of fields")
	}
	f := Forward{Proto: Proto(parts[0])}
	if f.Proto != TCP && f.Proto != UDP {
		return bad("protocol is not tcp or udp")
	}
	addr := netip.IPv4Unspecified()
	if len(parts) == 4 {
		a, err := netip.ParseAddr(parts[1])
		if err != nil || !a.Is4() {
			return bad("host address is not an IPv4 address")
		}
		addr = a
		parts = append(parts[:1], parts[2:]...)
	}
	hostPort, err := parsePort(parts[1])
	if err != nil {
		return bad("host port: " + err.Error())
	}
	f.GuestPort, err = parsePort(parts[2])
	if err != nil {
		return bad("guest port: " + err.Error())
	}
	f.Host = netip.AddrPortFrom(addr, hostPort)
	return f, nil
}

var errPort = errors.New("not a port from 1 to 65535")

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, errPort
	}
	return uint16(n), nil
}
