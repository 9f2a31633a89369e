package stack_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/stack"
)

// dualStack returns the pair with IPv6, A and B also holding a global
// address each on 2001:db8:1::/64, and A a route to 2001:db8:2::/64 on
// the link and one to 10.9.0.0/16 through B.
func dualStack(t *testing.T) (a, b *stack.Stack) {
	t.Helper()
	a, b = stacktest.Pair(t, stacktest.Options{IPv6: true})
	for _, x := range []struct {
		s    *stack.Stack
		addr string
	}{{a, "2001:db8:1::1/64"}, {b, "2001:db8:1::2/64"}} {
		if err := x.s.AddAddress("eth0", netip.MustParsePrefix(x.addr)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.AddRoute(netip.MustParsePrefix("2001:db8:2::/64"), netip.Addr{}, "eth0"); err != nil {
		t.Fatal(err)
	}
	if err := a.AddRoute(netip.MustParsePrefix("10.9.0.0/16"), stacktest.AddrB.Addr(), "eth0"); err != nil {
		t.Fatal(err)
	}
	return a, b
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// TestLookupNetIPOrdersByRFC6724 pins destination address selection (RFC
// 6724 section 6) over GoNet's own routes, a rule per case.
func TestLookupNetIPOrdersByRFC6724(t *testing.T) {
	a, _ := dualStack(t)
	tests := []struct {
		name   string
		answer []netip.Addr
		want   []netip.Addr
	}{
		{"rule 1: a destination GoNet has no route to goes last",
			addrs("2001:db8:99::1", "10.0.0.2"), addrs("10.0.0.2", "2001:db8:99::1")},
		{"rule 6: global IPv6 (precedence 40) before IPv4 (35)",
			addrs("10.0.0.2", "2001:db8:1::2"), addrs("2001:db8:1::2", "10.0.0.2")},
		{"rule 6: IPv4 (35) before a unique local address (3)",
			addrs("fd00::2", "10.0.0.2"), addrs("10.0.0.2", "fd00::2")},
		{"rule 9: the IPv6 destination sharing the longer prefix with its source first",
			addrs("2001:db8:2::2", "2001:db8:1::2"), addrs("2001:db8:1::2", "2001:db8:2::2")},
		{"rule 10: IPv4 destinations keep their order (DNS round robin)",
			addrs("10.9.0.1", "10.0.0.2"), addrs("10.9.0.1", "10.0.0.2")},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := a.SetHosts([]stack.HostEntry{{Name: "web.test", Addrs: tt.answer}}); err != nil {
				t.Fatal(err)
			}
			got, err := a.LookupNetIP(ctx, "ip", "web.test")
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("LookupNetIP = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// TestDialRacesTheFamilies pins Happy Eyeballs (RFC 8305): a name whose
// preferred address does not answer is reached at its other one a
// Connection Attempt Delay later, not after the first's timeout; one that
// refuses hands over at once; and with every address failing the dial
// reports the first's error.
func TestDialRacesTheFamilies(t *testing.T) {
	a, b := dualStack(t)
	ln, err := b.ListenTCP(netip.AddrPortFrom(stacktest.AddrB.Addr(), 80))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	tests := []struct {
		name    string
		answer  []netip.Addr
		port    string
		within  time.Duration
		wantErr error
	}{
		// No node holds 2001:db8:1::99: its neighbour solicitations
		// go unanswered for 3 s.
		{"the IPv6 address is silent", addrs("2001:db8:1::99", "10.0.0.2"), "80", 2 * time.Second, nil},
		// B holds 2001:db8:1::2 but listens over IPv4 only: a reset.
		{"the IPv6 address refuses", addrs("2001:db8:1::2", "10.0.0.2"), "80", 2 * time.Second, nil},
		{"every address refuses", addrs("2001:db8:1::2", "10.0.0.2"), "81", 2 * time.Second, syscall.ECONNREFUSED},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := a.SetHosts([]stack.HostEntry{{Name: "web.test", Addrs: tt.answer}}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			c, err := a.DialContext(ctx, "tcp", net.JoinHostPort("web.test", tt.port))
			took := time.Since(start)
			if tt.wantErr != nil {
				var op *net.OpError
				if c != nil || !errors.Is(err, tt.wantErr) || !errors.As(err, &op) || op.Addr.String() != "[2001:db8:1::2]:81" {
					t.Fatalf("dial = %v, %v; want the first address's %v", c, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if r := c.RemoteAddr().(*net.TCPAddr).AddrPort(); r != netip.MustParseAddrPort("10.0.0.2:80") || took > tt.within {
				t.Errorf("connected to %v after %v, want 10.0.0.2:80 within %v", r, took, tt.within)
			}
		})
	}
}
