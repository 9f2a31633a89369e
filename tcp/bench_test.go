package tcp_test

import (
	"io"
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/internal/stacktest"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/tcp"
)

// benchPair returns an established connection from stack A to an echo
// server on stack B, the two joined by the in-memory wire, with both
// stacks' goroutines running as they do in production.
func benchPair(b *testing.B) *tcp.Conn {
	b.Helper()
	sa, sb := stacktest.Pair(b, stacktest.Options{Config: stack.Config{}})
	l, err := sb.ListenTCP(netip.AddrPortFrom(netip.IPv4Unspecified(), 7))
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	b.Cleanup(func() { l.Close() })
	c, err := sa.DialTCP(b.Context(), netip.AddrPortFrom(stacktest.AddrB.Addr(), 7))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkTCPRequestResponse measures a 1-byte transaction on an
// established connection: a write on A, its segment through both stacks to
// the echo server's read and write on B, and the echo back to A's read. One
// op is one transaction, two data segments and the ACKs they carry or
// provoke; in the steady state it must not allocate.
func BenchmarkTCPRequestResponse(b *testing.B) {
	c := benchPair(b)
	req, resp := []byte{'x'}, make([]byte, 1)
	once := func() {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, resp); err != nil {
			b.Fatal(err)
		}
	}
	for range 1000 { // warm the pools and grow the queues
		once()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		once()
	}
}

// BenchmarkTCPBulk measures a 64 KiB write echoed back and read on the same
// connection: about 45 full-sized segments each way at an MTU of 1500.
// One op is one 64 KiB write; allocs/op divided by the segments both ways
// is the cost per segment.
func BenchmarkTCPBulk(b *testing.B) {
	c := benchPair(b)
	const size = 64 << 10
	out, in := make([]byte, size), make([]byte, size)
	// One reader for the whole run: a goroutine started per op would
	// allocate and be counted against the stack.
	start, done := make(chan struct{}), make(chan error)
	go func() {
		for range start {
			_, err := io.ReadFull(c, in)
			done <- err
		}
	}()
	b.Cleanup(func() { close(start) })
	once := func() {
		start <- struct{}{}
		if _, err := c.Write(out); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	for range 20 {
		once()
	}
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		once()
	}
}
