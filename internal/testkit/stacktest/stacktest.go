// Package stacktest sets up whole GoNet stacks for tests: two stacks joined
// by an in-memory wire, and the end-of-test checks every test of a stack
// makes (every buffer back in the pool, the memory budget back to zero, no
// goroutine left behind).
package stacktest

import (
	"net"
	"net/netip"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/pcap"
	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/stack"
)

// The addresses and hardware addresses of a pair's two stacks, on NIC "eth0".
var (
	AddrA = netip.MustParsePrefix("10.0.0.1/24")
	AddrB = netip.MustParsePrefix("10.0.0.2/24")
	// AddrA6 and AddrB6 are the stacks' IPv6 addresses, when the pair
	// is made with Options.IPv6.
	AddrA6 = netip.MustParsePrefix("fd00::1/64")
	AddrB6 = netip.MustParsePrefix("fd00::2/64")
	MACA   = net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	MACB   = net.HardwareAddr{0x02, 0, 0, 0, 0, 2}
)

// Options shape a pair.
type Options struct {
	// MTU of the wire; 1500 when zero.
	MTU int
	// Config of both stacks.
	Config stack.Config
	// WrapA wraps stack A's end of the wire (a fault-injecting link, say).
	WrapA func(link.Endpoint) link.Endpoint
	// IPv6 gives the stacks AddrA6 and AddrB6 as well, without duplicate
	// address detection, so that they are usable when Pair returns.
	IPv6 bool
}

// Pair returns stacks A and B joined by an in-memory wire. When the
// environment variable GONET_TEST_PCAP names a file, A's end is captured
// to it. At the end of the test both are closed and checked with Closed,
// and no goroutine started since Pair may remain.
func Pair(t testing.TB, o Options) (a, b *stack.Stack) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	if o.MTU == 0 {
		o.MTU = 1500
	}
	ea, eb := pipe.New(o.MTU, MACA, MACB)
	var epA link.Endpoint = ea
	if o.WrapA != nil {
		epA = o.WrapA(ea)
	}
	if path := os.Getenv("GONET_TEST_PCAP"); path != "" {
		pc, err := pcap.Create(epA, path)
		if err != nil {
			t.Fatal(err)
		}
		epA = pc
	}
	if o.IPv6 {
		o.Config.NDP.NoDAD = true
	}
	a, b = stack.New(o.Config), stack.New(o.Config)
	t.Cleanup(func() {
		Closed(t, a)
		Closed(t, b)
		goleak.VerifyNone(t, ignore)
	})
	for _, x := range []struct {
		s     *stack.Stack
		ep    link.Endpoint
		addrs []netip.Prefix
	}{{a, epA, []netip.Prefix{AddrA, AddrA6}}, {b, eb, []netip.Prefix{AddrB, AddrB6}}} {
		if err := x.s.AddNIC("eth0", x.ep); err != nil {
			t.Fatal(err)
		}
		if !o.IPv6 {
			x.addrs = x.addrs[:1]
		}
		for _, addr := range x.addrs {
			if err := x.s.AddAddress("eth0", addr); err != nil {
				t.Fatal(err)
			}
		}
	}
	return a, b
}

// Closed closes s and reports a buffer not returned to the pool or budget
// left reserved: the leak count every test of a stack ends with.
func Closed(t testing.TB, s *stack.Stack) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Errorf("close stack: %v", err)
	}
	if n := s.Pool().Outstanding(); n != 0 {
		t.Errorf("%d buffers not returned to the pool", n)
	}
	if u := s.Budget().Used(); u != 0 {
		t.Errorf("%d bytes of the memory budget still reserved", u)
	}
}
