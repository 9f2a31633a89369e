package stacktest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/stats"
)

// EchoIntact moves size random bytes from a to an echo service on b's
// port 7 (AddrB) and back over one TCP connection, A half-closing once it
// has written them all, and fails the test unless every byte comes back in
// order, by SHA-256, within timeout: the end-to-end check of a link that
// two stacks share.
func EchoIntact(t testing.TB, a, b *stack.Stack, size int, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
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
	c, err := a.DialTCP(ctx, netip.AddrPortFrom(AddrB.Addr(), 7))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
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
	c.SetReadDeadline(time.Now().Add(timeout))
	h := sha256.New()
	n, err := io.Copy(h, c)
	if err != nil {
		t.Fatalf("reading the echo after %d bytes: %v", n, err)
	}
	if err := <-written; err != nil {
		t.Fatalf("writing: %v", err)
	}
	if got := [32]byte(h.Sum(nil)); n != int64(size) || got != want {
		t.Fatalf("echo of %d bytes came back as %d bytes, SHA-256 equal %v", size, n, got == want)
	}
}

// LogCountersOnFailure logs every counter of each stack, by name, and
// then each link's (linkStats: an endpoint's Stats), when the test has
// failed: what a failed transfer between stacks is read from. Call it
// from a cleanup.
func LogCountersOnFailure(t testing.TB, stacks map[string]*stack.Stack, linkStats map[string]any) {
	if !t.Failed() {
		return
	}
	for name, s := range stacks {
		var sb strings.Builder
		stats.Write(&sb, s.Counters(), false)
		t.Logf("stack %s counters:\n%s", name, sb.String())
	}
	for name, l := range linkStats {
		t.Logf("%s's link: %v", name, LinkCounters(l))
	}
}

// LinkCounters are the counters of a link endpoint's Stats (a pointer to
// its struct) that are not zero, by name.
func LinkCounters(linkStats any) map[string]int64 {
	m := map[string]int64{}
	stats.Walk("", linkStats, func(n string, v int64) {
		if v != 0 {
			m[n] = v
		}
	})
	return m
}
