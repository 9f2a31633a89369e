package tcp_test

import (
	"fmt"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/fault"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/tcp"
)

// echoSetup shapes echoPair's connection.
type echoSetup struct {
	// deadlines makes the server set a read and a write deadline before
	// each read, as net/http's server does per request.
	deadlines bool
	// loss is the probability a frame from A to B is dropped, for the
	// paths of recovery: SACK, the scoreboard, retransmissions, RACK.
	loss float64
	// ipv6 runs the connection over IPv6 instead of IPv4.
	ipv6 bool
}

// echoPair returns an established connection from stack A to an echo
// server on stack B, the two joined by the in-memory wire, with both
// stacks' goroutines running as they do in production.
func echoPair(tb testing.TB, setup echoSetup) *tcp.Conn {
	tb.Helper()
	o := stacktest.Options{Config: stack.Config{}, IPv6: setup.ipv6}
	if setup.loss > 0 {
		o.WrapA = func(ep link.Endpoint) link.Endpoint {
			return fault.New(ep, fault.Config{Loss: setup.loss, Seed: 1})
		}
	}
	sa, sb := stacktest.Pair(tb, o)
	any, dst := netip.IPv4Unspecified(), stacktest.AddrB.Addr()
	if setup.ipv6 {
		any, dst = netip.IPv6Unspecified(), stacktest.AddrB6.Addr()
	}
	l, err := sb.ListenTCP(netip.AddrPortFrom(any, 7))
	if err != nil {
		tb.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 32<<10)
				for {
					if setup.deadlines {
						c.SetDeadline(time.Now().Add(time.Minute))
					}
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
			}()
		}
	}()
	tb.Cleanup(func() { l.Close() })
	c, err := sa.DialTCP(tb.Context(), netip.AddrPortFrom(dst, 7))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// transaction returns a function making one 1-byte request-response
// transaction on c, setting deadlines on c first when asked.
func transaction(tb testing.TB, c *tcp.Conn, deadlines bool) func() {
	req, resp := []byte{'x'}, make([]byte, 1)
	return func() {
		if deadlines {
			c.SetDeadline(time.Now().Add(time.Minute))
		}
		if _, err := c.Write(req); err != nil {
			tb.Fatal(err)
		}
		if _, err := io.ReadFull(c, resp); err != nil {
			tb.Fatal(err)
		}
	}
}

// bulkEcho returns a function writing size bytes to c and reading their
// echo back, with one reader goroutine for all calls: a goroutine started
// per call would allocate and be counted against the stack.
func bulkEcho(tb testing.TB, c *tcp.Conn, size int) func() {
	out, in := make([]byte, size), make([]byte, size)
	start, done := make(chan struct{}), make(chan error)
	go func() {
		for range start {
			_, err := io.ReadFull(c, in)
			done <- err
		}
	}()
	tb.Cleanup(func() { close(start) })
	return func() {
		start <- struct{}{}
		if _, err := c.Write(out); err != nil {
			tb.Fatal(err)
		}
		if err := <-done; err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkTCPRequestResponse measures a 1-byte transaction on an
// established connection: a write on A, its segment through both stacks to
// the echo server's read and write on B, and the echo back to A's read. One
// op is one transaction: two data segments and the ACKs they carry or
// provoke, both stacks' work counted. With deadlines, both ends set a read
// and a write deadline per transaction. In the steady state it must not
// allocate.
func BenchmarkTCPRequestResponse(b *testing.B) {
	for _, family := range families {
		for _, deadlines := range []bool{false, true} {
			name := family.name + "/plain"
			if deadlines {
				name = family.name + "/deadlines"
			}
			b.Run(name, func(b *testing.B) {
				c := echoPair(b, echoSetup{deadlines: deadlines, ipv6: family.ipv6})
				once := transaction(b, c, deadlines)
				for range 1000 { // warm the pools and grow the queues
					once()
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					once()
				}
			})
		}
	}
}

// families are the network layers the benchmarks run over, so that IPv6's
// cost is read against IPv4's in the same run.
var families = []struct {
	name string
	ipv6 bool
}{{"ipv4", false}, {"ipv6", true}}

// BenchmarkTCPBulk measures a 64 KiB write echoed back and read on the same
// connection: 46 full-sized segments each way at an MTU of 1500, both
// stacks' work counted. One op is one 64 KiB write; allocs/op divided by
// the 92 data segments is the cost per segment. With loss, 1% of the
// frames from A to B are dropped, and the segments recovered count too.
func BenchmarkTCPBulk(b *testing.B) {
	const size = 64 << 10
	for _, family := range families {
		for _, loss := range []float64{0, 0.01} {
			b.Run(fmt.Sprintf("%s/loss=%g%%", family.name, loss*100), func(b *testing.B) {
				once := bulkEcho(b, echoPair(b, echoSetup{loss: loss, ipv6: family.ipv6}), size)
				for range 20 {
					once()
				}
				b.SetBytes(size)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					once()
				}
			})
		}
	}
}
