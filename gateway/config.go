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

// guestMayHold reports whether a guest may hold a: an address of the
// subnet other than its first and last (the network's and the broadcast)
// and the gateway's own.
func (n Network) guestMayHold(a netip.Addr) bool {
	last := nthAddr(n.Subnet, 1<<(32-n.Subnet.Bits())-1)
	return n.Subnet.Contains(a) && a != n.Subnet.Addr() && a != last && a != n.Gateway && a != n.DNS
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

// guestMayHold reports whether a guest may hold a: an address of the
// prefix other than the gateway's own and the Subnet-Router anycast
// address (RFC 4291 section 2.6.1).
func (n Network6) guestMayHold(a netip.Addr) bool {
	return n.Prefix.Contains(a) && a != n.Prefix.Addr() && a != n.Gateway && a != n.DNS
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
// arriving from the gateway's address in the guest address's family. The
// host's family and the guest's need not match: a forward from [::1]
// reaches a guest that serves IPv4 alone, as most do.
type Forward struct {
	Proto     Proto
	Host      netip.AddrPort // 0.0.0.0 when the spec names no address, as slirp4netns
	Guest     netip.Addr     // unset: the guest's IPv4 address, Network.Guest
	GuestPort uint16
}

func (f Forward) String() string {
	guest := strconv.Itoa(int(f.GuestPort))
	if f.Guest.IsValid() {
		guest = netip.AddrPortFrom(f.Guest, f.GuestPort).String()
	}
	return fmt.Sprintf("%s:%s:%s", f.Proto, f.Host, guest)
}

// ParseForward parses PROTO:[HOSTADDR:]HOSTPORT:[GUESTADDR:]GUESTPORT, as
// in tcp:8080:80, udp:127.0.0.1:5353:53 or tcp:[::1]:8080:[fd00::100]:80:
// an IPv6 address in brackets, as in a URL.
func ParseForward(s string) (Forward, error) {
	bad := func(why string) (Forward, error) {
		return Forward{}, fmt.Errorf("gateway: forward %q: %s; want PROTO:[HOSTADDR:]HOSTPORT:[GUESTADDR:]GUESTPORT, as in tcp:8080:80", s, why)
	}
	parts, err := splitForward(s)
	if err != nil {
		return bad(err.Error())
	}
	if len(parts) < 3 || len(parts) > 5 {
		return bad("wrong number of fields")
	}
	f := Forward{Proto: Proto(parts[0])}
	if f.Proto != TCP && f.Proto != UDP {
		return bad("protocol is not tcp or udp")
	}
	// Which of the fields are addresses: a port never parses as one.
	hostAddr, guestAddr := "", ""
	switch fields := parts[1:]; len(fields) {
	case 4:
		hostAddr, guestAddr = fields[0], fields[2]
		parts = []string{fields[1], fields[3]}
	case 3:
		if _, err := parsePort(fields[0]); err != nil {
			hostAddr, parts = fields[0], fields[1:]
		} else {
			guestAddr, parts = fields[1], []string{fields[0], fields[2]}
		}
	default:
		parts = fields
	}
	host := netip.IPv4Unspecified()
	if hostAddr != "" {
		if host, err = parseForwardAddr(hostAddr); err != nil {
			return bad("host address: " + err.Error())
		}
	}
	if guestAddr != "" {
		if f.Guest, err = parseForwardAddr(guestAddr); err != nil {
			return bad("guest address: " + err.Error())
		}
		if f.Guest.Zone() != "" {
			return bad("guest address: a zone, which only a link-local address has")
		}
	}
	hostPort, err := parsePort(parts[0])
	if err != nil {
		return bad("host port: " + err.Error())
	}
	f.GuestPort, err = parsePort(parts[1])
	if err != nil {
		return bad("guest port: " + err.Error())
	}
	f.Host = netip.AddrPortFrom(host, hostPort)
	return f, nil
}

// splitForward splits a forward's spec at its colons, but for those
// inside an IPv6 address's brackets, which it takes away.
func splitForward(s string) ([]string, error) {
	var fields []string
	for {
		if rest, ok := strings.CutPrefix(s, "["); ok {
			addr, after, ok := strings.Cut(rest, "]")
			if !ok {
				return nil, errors.New("a '[' without its ']'")
			}
			if after != "" && after[0] != ':' {
				return nil, errors.New("']' not followed by ':'")
			}
			fields = append(fields, "["+addr+"]")
			if after == "" {
				return fields, nil
			}
			s = after[1:]
			continue
		}
		field, rest, more := strings.Cut(s, ":")
		fields = append(fields, field)
		if !more {
			return fields, nil
		}
		s = rest
	}
}

// parseForwardAddr parses an address of a forward's spec: IPv4 as it is,
// IPv6 only in brackets (its colons would be the spec's).
func parseForwardAddr(s string) (netip.Addr, error) {
	inner, bracketed := strings.CutPrefix(s, "[")
	if bracketed {
		inner = strings.TrimSuffix(inner, "]")
	}
	a, err := netip.ParseAddr(inner)
	switch {
	case err != nil:
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", inner)
	case a.Is4In6():
		return netip.Addr{}, fmt.Errorf("%v is IPv4-mapped: write it as IPv4", a)
	case a.Is4() && bracketed:
		return netip.Addr{}, fmt.Errorf("brackets around IPv4 %v: only IPv6 takes them", a)
	case a.Is6() && !bracketed:
		return netip.Addr{}, fmt.Errorf("IPv6 %v without brackets", a)
	}
	return a, nil
}

var errPort = errors.New("not a port from 1 to 65535")

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, errPort
	}
	return uint16(n), nil
}
