package stack

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"

	"github.com/gonetstack/gonet/tcp"
	"github.com/gonetstack/gonet/udp"
)

// The socket API: what a Go program that uses package net expects, on
// GoNet. Listen and DialContext take the same network and address strings
// as net.Listen and net.Dialer.DialContext, so a *Stack's DialContext can be
// an http.Transport's.

// ListenTCP opens a TCP listener on laddr (port 0: an ephemeral port).
func (s *Stack) ListenTCP(laddr netip.AddrPort) (*tcp.Listener, error) {
	return s.tcp.Listen(laddr, 0)
}

// Listen opens a listener on address ("host:port"; an empty host means all
// addresses) for network "tcp" or "tcp4", as net.Listen does.
func (s *Stack) Listen(network, address string) (net.Listener, error) {
	ap, err := s.resolve("listen", network, address, true)
	if err != nil {
		return nil, err
	}
	switch network {
	case "tcp", "tcp4":
		return s.ListenTCP(ap)
	}
	return nil, &net.OpError{Op: "listen", Net: network, Err: net.UnknownNetworkError(network)}
}

// ListenPacket opens a UDP endpoint on address, as net.ListenPacket does.
func (s *Stack) ListenPacket(network, address string) (net.PacketConn, error) {
	ap, err := s.resolve("listen", network, address, true)
	if err != nil {
		return nil, err
	}
	switch network {
	case "udp", "udp4":
		return s.ListenUDP(ap)
	}
	return nil, &net.OpError{Op: "listen", Net: network, Err: net.UnknownNetworkError(network)}
}

// DialTCP opens a TCP connection to raddr.
func (s *Stack) DialTCP(ctx context.Context, raddr netip.AddrPort) (*tcp.Conn, error) {
	return s.tcp.Dial(ctx, netip.AddrPort{}, raddr)
}

// DialUDP returns a UDP endpoint connected to raddr: Read and Write use
// raddr, and datagrams from elsewhere are dropped.
func (s *Stack) DialUDP(raddr netip.AddrPort) (*udp.Connected, error) {
	c, err := s.udp.Listen(netip.AddrPort{})
	if err != nil {
		return nil, err
	}
	return c.Connect(raddr)
}

// DialContext connects to address on network "tcp", "tcp4", "udp" or
// "udp4", as net.Dialer.DialContext does. Addresses must be numeric: the
// stack has no resolver.
func (s *Stack) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	ap, err := s.resolve("dial", network, address, false)
	if err != nil {
		return nil, err
	}
	switch network {
	case "tcp", "tcp4":
		return s.DialTCP(ctx, ap)
	case "udp", "udp4":
		return s.DialUDP(ap)
	}
	return nil, &net.OpError{Op: "dial", Net: network, Err: net.UnknownNetworkError(network)}
}

// resolve parses a numeric "host:port".
func (s *Stack) resolve(op, network, address string, listen bool) (netip.AddrPort, error) {
	bad := func(err error) error {
		return &net.OpError{Op: op, Net: network, Err: &net.AddrError{Err: err.Error(), Addr: address}}
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return netip.AddrPort{}, bad(err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, bad(fmt.Errorf("invalid port %q", port))
	}
	var a netip.Addr
	switch {
	case host == "" && listen:
		a = netip.IPv4Unspecified()
	case host == "localhost":
		return netip.AddrPort{}, &net.OpError{Op: op, Net: network, Err: fmt.Errorf("%q: GoNet has no loopback interface: %w", address, syscall.EADDRNOTAVAIL)}
	default:
		if a, err = netip.ParseAddr(host); err != nil {
			return netip.AddrPort{}, bad(fmt.Errorf("GoNet takes numeric IPv4 addresses only: %v", err))
		}
	}
	if !a.Unmap().Is4() {
		return netip.AddrPort{}, &net.OpError{Op: op, Net: network, Err: fmt.Errorf("%q: %w", address, syscall.EAFNOSUPPORT)}
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(p)), nil
}

// Connections returns the TCP connection table.
func (s *Stack) Connections() []tcp.ConnInfo { return s.tcp.Connections() }

// TCP returns the TCP layer.
func (s *Stack) TCP() *tcp.Protocol { return s.tcp }
