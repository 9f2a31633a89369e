package stream_test

import (
	"context"
	"net/netip"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/link/stream"
	"github.com/gonetstack/gonet/stack"
)

// streamPair returns two stacks joined by a stream link over a UNIX socket
// in a temporary directory: B listens, as a gateway for a VM does, and A
// dials, as QEMU with server=off does. Both are closed and checked for
// leaks when the test ends.
func streamPair(t *testing.T, mtu int) (a, b *stack.Stack, ea, eb *stream.Endpoint) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vm.sock")
	eb, err := stream.Listen(path, stream.Options{MTU: mtu, MAC: stacktest.MACB})
	if err != nil {
		t.Fatal(err)
	}
	ea, err = stream.Dial(path, stream.Options{MTU: mtu, MAC: stacktest.MACA})
	if err != nil {
		eb.Close()
		t.Fatal(err)
	}
	// IPv4 only: an IPv6 host sends at start (MLD, DAD), and the
	// listening end, with no peer yet, would drop and count it, where
	// the test wants no drop at all.
	a, b = stack.New(stack.Config{NoIPv6: true}), stack.New(stack.Config{NoIPv6: true})
	t.Cleanup(func() {
		stacktest.LogCountersOnFailure(t, map[string]*stack.Stack{"A": a, "B": b}, map[string]any{"A": ea.Stats(), "B": eb.Stats()})
		stacktest.Closed(t, a)
		stacktest.Closed(t, b)
	})
	for _, x := range []struct {
		s  *stack.Stack
		ep *stream.Endpoint
	}{{a, ea}, {b, eb}} {
		if err := x.s.AddNIC("eth0", x.ep); err != nil {
			x.ep.Close()
			t.Fatal(err)
		}
	}
	// B's NIC reader accepts A's connection; frames B sent before that
	// (the gratuitous ARP of AddAddress) would be dropped, as on a link
	// whose carrier is not up yet.
	for deadline := time.Now().Add(5 * time.Second); !eb.Connected(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("B's link did not accept A's connection in 5s")
		}
	}
	for _, x := range []struct {
		s    *stack.Stack
		addr netip.Prefix
	}{{a, stacktest.AddrA}, {b, stacktest.AddrB}} {
		if err := x.s.AddAddress("eth0", x.addr); err != nil {
			t.Fatal(err)
		}
	}
	return a, b, ea, eb
}

func linkCounters(e *stream.Endpoint) map[string]int64 { return stacktest.LinkCounters(e.Stats()) }

// Two GoNet stacks ping each other over the stream link and move 10 MiB
// each way over TCP, checked by SHA-256.
func TestStacksTalkOverAUnixSocket(t *testing.T) {
	for _, mtu := range []int{1500, 65520} {
		t.Run("mtu"+strconv.Itoa(mtu), func(t *testing.T) {
			a, b, ea, eb := streamPair(t, mtu)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for _, p := range []struct {
				from *stack.Stack
				to   netip.Addr
			}{{a, stacktest.AddrB.Addr()}, {b, stacktest.AddrA.Addr()}} {
				if _, err := p.from.Ping(ctx, p.to, 1000); err != nil {
					t.Fatalf("ping %v: %v", p.to, err)
				}
			}

			const size = 10 << 20
			stacktest.EchoIntact(t, a, b, size, 60*time.Second)
			for name, e := range map[string]*stream.Endpoint{"A": ea, "B": eb} {
				s := e.Stats()
				if s.FramingErrors.Load() != 0 || s.RxErrors.Load() != 0 || s.TxErrors.Load() != 0 || s.TxDropped.Load() != 0 {
					t.Errorf("%s's link: %v", name, linkCounters(e))
				}
				if s.TxBytes.Load() < size {
					t.Errorf("%s's link sent %d bytes, less than the transfer", name, s.TxBytes.Load())
				}
			}
		})
	}
}
