package shm

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/stats"
)

// stackPair returns two stacks joined by a ring link, as two processes
// would be: the endpoints come from Listen and Dial over a socket in a
// temporary directory. Both are closed and checked for leaks when the
// test ends.
func stackPair(t *testing.T, o Options) (a, b *stack.Stack, ea, eb *Endpoint) {
	t.Helper()
	eb, ea = pair(t, o, o)
	a, b = stack.New(stack.Config{}), stack.New(stack.Config{})
	t.Cleanup(func() {
		if t.Failed() {
			for name, s := range map[string]*stack.Stack{"A": a, "B": b} {
				var sb strings.Builder
				stats.Write(&sb, s.Counters(), false)
				t.Logf("stack %s counters:\n%s", name, sb.String())
			}
			t.Logf("A's link: %v", counters(ea))
			t.Logf("B's link: %v", counters(eb))
		}
		stacktest.Closed(t, a)
		stacktest.Closed(t, b)
	})
	for _, x := range []struct {
		s    *stack.Stack
		ep   *Endpoint
		addr netip.Prefix
	}{{a, ea, stacktest.AddrA}, {b, eb, stacktest.AddrB}} {
		if err := x.s.AddNIC("eth0", x.ep); err != nil {
			t.Fatal(err)
		}
		if err := x.s.AddAddress("eth0", x.addr); err != nil {
			t.Fatal(err)
		}
	}
	return a, b, ea, eb
}

// Two GoNet stacks ping each other over the ring link and move 16 MiB
// each way over TCP, checked by SHA-256; with offloads on both sides, TCP
// sends 64 KiB super-segments that cross whole.
func TestStacksTalkTCPOverTheRing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		offload bool
	}{{"offloads", true}, {"no offloads", false}} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, ea, eb := stackPair(t, Options{Offload: tc.offload})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if _, err := a.Ping(ctx, stacktest.AddrB.Addr(), 1000); err != nil {
				t.Fatalf("ping: %v", err)
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
			size := 16 << 20
			if testing.Short() || raceEnabled {
				size = 2 << 20
			}
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
			if n != int64(size) || [32]byte(h.Sum(nil)) != want {
				t.Fatalf("echo of %d bytes came back as %d bytes, SHA-256 equal %v", size, n, [32]byte(h.Sum(nil)) == want)
			}
			for name, e := range map[string]*Endpoint{"A": ea, "B": eb} {
				s := e.Stats()
				if s.Garbage.Load() != 0 || s.TxErrors.Load() != 0 || s.PeerGone.Load() != 0 {
					t.Errorf("%s's link: %v", name, counters(e))
				}
				if s.TxBytes.Load() < uint64(size) {
					t.Errorf("%s's link sent %d bytes, less than the transfer", name, s.TxBytes.Load())
				}
				// A super-segment is at least two segments: with
				// offloads, frames average well over the MTU.
				avg := s.TxBytes.Load() / max(s.TxFrames.Load(), 1)
				if tc.offload && avg < 3000 {
					t.Errorf("%s's link: frames of %d bytes on average: no super-segments", name, avg)
				}
				t.Logf("%s's link: %v", name, counters(e))
			}
		})
	}
}
