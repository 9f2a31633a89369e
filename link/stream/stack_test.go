package stream_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/link/stream"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/stats"
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
		if t.Failed() {
			for name, s := range map[string]*stack.Stack{"A": a, "B": b} {
				var sb strings.Builder
				stats.Write(&sb, s.Counters(), false)
				t.Logf("stack %s counters:\n%s", name, sb.String())
			}
			t.Logf("A's link: %+v", linkCounters(ea))
			t.Logf("B's link: %+v", linkCounters(eb))
		}
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

func linkCounters(e *stream.Endpoint) map[string]int64 {
	m := map[string]int64{}
	stats.Walk("", e.Stats(), func(n string, v int64) { m[n] = v })
	return m
}

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

			ln, err := b.ListenTCP(netip.AddrPortFrom(netip.IPv4Unspecified(), 7))
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				io.Copy(c, c) // echo until A's FIN
			}()
			c, err := a.DialTCP(ctx, netip.AddrPortFrom(stacktest.AddrB.Addr(), 7))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			const size = 10 << 20
			data := make([]byte, size)
			rand.Read(data)
			want := sha256.Sum256(data)
			written := make(chan error, 1)
			go func() {
				_, err := c.Write(data)
				if err == nil {
					err = c.CloseWrite()
				}
				written <- err
			}()
			c.SetReadDeadline(time.Now().Add(60 * time.Second))
			h := sha256.New()
			n, err := io.Copy(h, c)
			if err != nil {
				t.Fatalf("reading the echo after %d bytes: %v", n, err)
			}
			if err := <-written; err != nil {
				t.Fatalf("writing: %v", err)
			}
			if n != size || [32]byte(h.Sum(nil)) != want {
				t.Fatalf("echo of %d bytes came back as %d bytes, SHA-256 equal %v", size, n, [32]byte(h.Sum(nil)) == want)
			}
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
