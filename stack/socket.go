package stack

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"

	"github.com/gonetstack/gonet/tcp"
	"github.com/gonetstack/gonet/udp"
)

// The socket API: what a Go program that uses package net expects, on
// GoNet. Listen and DialContext take the same network and address strings
// as net.Listen and net.Dialer.DialContext, so a *Stack's DialContext can be
// an http.Transport's.

// The networks are Go's: "tcp" and "udp" take either family, "tcp4",
// "udp4", "tcp6" and "udp6" one. Listening on the wildcard address with
// "tcp" or "udp" (an empty host, or "::") takes both families, as Go's
// net does through a Linux socket on :: with IPV6_V6ONLY off, when the
// stack runs IPv6; IPv4 peers of such a listener appear with their plain
// IPv4 addresses, as Go shows them. "tcp6" and "udp6" on the wildcard
// take IPv6 only (IPV6_V6ONLY on), so that the port can carry a separate
// IPv4 listener. An explicit 0.0.0.0 is IPv4's wildcard, whatever the
// network: a program that writes it asks for IPv4 (Go's net makes it
// dual-stack, an artefact of how it picks a socket family). Link-local
// addresses carry their zone ("[fe80::1%eth0]:80"), and addresses report
// it (*net.TCPAddr and *net.UDPAddr's Zone).

// ListenTCP opens a TCP listener on laddr (port 0: an ephemeral port); on
// :: it takes both families (tcp.Protocol.Listen).
func (s *Stack) ListenTCP(laddr netip.AddrPort) (*tcp.Listener, error) {
	return s.tcp.Listen(laddr, 0)
}

// Listen opens a listener on address ("host:port"; an empty host means all
// addresses) for network "tcp", "tcp4" or "tcp6", as net.Listen does.
func (s *Stack) Listen(network, address string) (net.Listener, error) {
	if !isNetwork(network, "tcp") {
		return nil, &net.OpError{Op: "listen", Net: network, Err: net.UnknownNetworkError(network)}
	}
	sa, err := s.resolve("listen", network, address, true)
	if err != nil {
		return nil, err
	}
	var l *tcp.Listener
	if sa.v6only {
		l, err = s.tcp.ListenV6Only(sa.ap, 0)
	} else {
		l, err = s.tcp.Listen(sa.ap, 0)
	}
	if err != nil {
		return nil, withNet(err, network)
	}
	return l, nil
}

// ListenPacket opens a UDP endpoint on address for network "udp", "udp4"
// or "udp6", as net.ListenPacket does.
func (s *Stack) ListenPacket(network, address string) (net.PacketConn, error) {
	if !isNetwork(network, "udp") {
		return nil, &net.OpError{Op: "listen", Net: network, Err: net.UnknownNetworkError(network)}
	}
	sa, err := s.resolve("listen", network, address, true)
	if err != nil {
		return nil, err
	}
	var c *udp.Conn
	if sa.v6only {
		c, err = s.udp.ListenV6Only(sa.ap)
	} else {
		c, err = s.udp.Listen(sa.ap)
	}
	if err != nil {
		return nil, withNet(err, network)
	}
	return c, nil
}

// DialTCP opens a TCP connection to raddr.
func (s *Stack) DialTCP(ctx context.Context, raddr netip.AddrPort) (*tcp.Conn, error) {
	return s.tcp.Dial(ctx, netip.AddrPort{}, raddr)
}

// DialUDP returns a UDP endpoint connected to raddr: Read and Write use
// raddr, and datagrams from elsewhere are dropped.
func (s *Stack) DialUDP(raddr netip.AddrPort) (*udp.Connected, error) {
	var wild netip.Addr // the wildcard of raddr's family
	if raddr.Addr().Is6() {
		wild = netip.IPv6Unspecified()
	}
	c, err := s.udp.Listen(netip.AddrPortFrom(wild, 0))
	if err != nil {
		return nil, err
	}
	return c.Connect(raddr)
}

// DialContext connects to address on network "tcp", "tcp4", "tcp6", "udp",
// "udp4" or "udp6", as net.Dialer.DialContext does. A host name is
// resolved over the stack (Resolver, with the stack's search list), and
// its addresses are tried in the order the resolver sorted them (RFC
// 6724) until one connects.
func (s *Stack) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if !isNetwork(network, "tcp") && !isNetwork(network, "udp") {
		return nil, &net.OpError{Op: "dial", Net: network, Err: net.UnknownNetworkError(network)}
	}
	if host, port, err := net.SplitHostPort(address); err == nil && isName(host) {
		return s.dialName(ctx, network, host, port)
	}
	sa, err := s.resolve("dial", network, address, false)
	if err != nil {
		return nil, err
	}
	var c net.Conn
	if isNetwork(network, "tcp") {
		c, err = s.DialTCP(ctx, sa.ap)
	} else {
		c, err = s.DialUDP(sa.ap)
	}
	if err != nil {
		return nil, withNet(err, network)
	}
	return c, nil
}

// isName reports whether host is a name to resolve rather than an
// address (or the wildcard, or localhost, which the stack answers itself).
func isName(host string) bool {
	if host == "" || host == "localhost" {
		return false
	}
	_, err := netip.ParseAddr(host)
	return err != nil
}

// dialName resolves host and dials its addresses, returning the first
// connection made or the first address's error: over TCP racing them, the
// families interleaved (Happy Eyeballs, RFC 8305: addrselect.go); over
// UDP, whose dial sends nothing, in turn until one has a route.
func (s *Stack) dialName(ctx context.Context, network, host, port string) (net.Conn, error) {
	fail := func(err error) error { return &net.OpError{Op: "dial", Net: network, Err: err} }
	p, err := s.Resolver().LookupPort(ctx, network, port)
	if err != nil {
		return nil, fail(err)
	}
	addrs, err := s.LookupNetIP(ctx, network, host)
	if err != nil {
		return nil, fail(err)
	}
	if isNetwork(network, "tcp") && len(addrs) > 1 {
		aps := make([]netip.AddrPort, 0, len(addrs))
		for _, a := range interleave(addrs) {
			aps = append(aps, netip.AddrPortFrom(a, uint16(p)))
		}
		return s.dialRace(ctx, network, aps)
	}
	var first error
	for _, a := range addrs {
		c, err := s.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(p)).String())
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if first == nil {
		first = fail(&net.AddrError{Err: errNoSuitableAddress, Addr: host})
	}
	return nil, first
}

// isNetwork reports whether network is proto ("tcp", "udp") of either
// family or of one.
func isNetwork(network, proto string) bool {
	return network == proto || network == proto+"4" || network == proto+"6"
}

// withNet names the network the caller asked for in err, as Go's net
// does: the transports say "tcp" or "udp" alone.
func withNet(err error, network string) error {
	if oe, ok := err.(*net.OpError); ok {
		oe.Net = network
	}
	return err
}

// sockAddr is an address parsed for a socket: the address and port, and
// for a wildcard IPv6 one whether it takes IPv6 only.
type sockAddr struct {
	ap     netip.AddrPort
	v6only bool
}

// errNoSuitableAddress is Go's net's word for an address of the family a
// network excludes ("tcp4" with an IPv6 address).
const errNoSuitableAddress = "no suitable address found"

// resolve parses a numeric "host:port" for network.
func (s *Stack) resolve(op, network, address string, listen bool) (sockAddr, error) {
	fail := func(err error) error { return &net.OpError{Op: op, Net: network, Err: err} }
	bad := func(err error) error { return fail(&net.AddrError{Err: err.Error(), Addr: address}) }
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return sockAddr{}, bad(err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return sockAddr{}, bad(fmt.Errorf("invalid port %q", port))
	}
	only4, only6 := strings.HasSuffix(network, "4"), strings.HasSuffix(network, "6")
	var a netip.Addr
	switch {
	case host == "" && listen:
		// The wildcard of the families the network takes: both when
		// the stack runs IPv6 ("tcp"), or the one it names.
		switch {
		case only6:
			a = netip.IPv6Unspecified()
		case only4 || s.nets.V6 == nil:
			a = netip.IPv4Unspecified()
		default:
			a = netip.IPv6Unspecified()
		}
	case host == "localhost":
		return sockAddr{}, fail(fmt.Errorf("%q: GoNet has no loopback interface: %w", address, syscall.EADDRNOTAVAIL))
	default:
		if a, err = netip.ParseAddr(host); err != nil {
			return sockAddr{}, bad(fmt.Errorf("GoNet takes numeric addresses only: %v", err))
		}
		// An IPv4-mapped address names an IPv4 node (RFC 4291 section
		// 2.5.5.2), as Go's net treats it.
		if a.Is4In6() {
			a = a.Unmap()
		}
	}
	if (only4 && !a.Is4()) || (only6 && !a.Is6()) {
		return sockAddr{}, fail(&net.AddrError{Err: errNoSuitableAddress, Addr: host})
	}
	if _, err := s.nets.For(a); err != nil {
		return sockAddr{}, fail(fmt.Errorf("%q: %w", address, err))
	}
	return sockAddr{ap: netip.AddrPortFrom(a, uint16(p)), v6only: only6 && a.IsUnspecified()}, nil
}

// Connections returns the TCP connection table.
func (s *Stack) Connections() []tcp.ConnInfo { return s.tcp.Connections() }

// TCP returns the TCP layer.
func (s *Stack) TCP() *tcp.Protocol { return s.tcp }
