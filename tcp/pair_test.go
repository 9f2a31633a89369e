package tcp_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	mrand "math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/fault"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/tcp"
)

var (
	addrA = stacktest.AddrA
	addrB = stacktest.AddrB
)

// pair returns two stacks joined by an in-memory wire, through a
// fault-injecting link on a's side when faults is not nil.
func pair(t *testing.T, cfg stack.Config, faults *fault.Config) (a, b *stack.Stack) {
	t.Helper()
	o := stacktest.Options{Config: cfg}
	if faults != nil {
		o.WrapA = func(ep link.Endpoint) link.Endpoint { return fault.New(ep, *faults) }
	}
	return stacktest.Pair(t, o)
}

// echoServer accepts on b:7 and echoes each connection until EOF, then
// closes its side.
func echoServer(t *testing.T, b *stack.Stack) *tcp.Listener {
	t.Helper()
	l, err := b.ListenTCP(netip.AddrPortFrom(netip.IPv4Unspecified(), 7))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if n, err := io.Copy(c, c); err != nil {
					t.Logf("echo server: copied %d bytes: %v", n, err)
				}
			}()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return l
}

func dial(t *testing.T, a *stack.Stack, port uint16) *tcp.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := a.DialTCP(ctx, netip.AddrPortFrom(addrB.Addr(), port))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// transfer sends size random bytes through the echo server, writing and
// reading at once, and checks the SHA-256 of what came back.
func transfer(t *testing.T, c *tcp.Conn, size int, stacks ...*stack.Stack) {
	t.Helper()
	defer func() {
		if t.Failed() {
			for i, s := range stacks {
				for _, ci := range s.Connections() {
					t.Logf("stack %d: %+v", i, ci)
				}
				var sb strings.Builder
				stats.Write(&sb, s.Counters(), false)
				t.Logf("stack %d counters:\n%s", i, sb.String())
			}
		}
	}()
	data := make([]byte, size)
	rand.Read(data)
	want := sha256.Sum256(data)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		if err == nil {
			err = c.CloseWrite()
		}
		errc <- err
	}()
	h := sha256.New()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var got bytes.Buffer
	n, err := io.Copy(io.MultiWriter(h, &got), c)
	if n != int64(size) {
		g := got.Bytes()
		i := 0
		for i < len(g) && g[i] == data[i] {
			i++
		}
		// Where does the received tail come from in the sent data?
		tail := g[i:min(len(g), i+64)]
		t.Logf("first difference at byte %d of %d received; the next 64 bytes received are sent bytes at %d", i, len(g), bytes.Index(data, tail))
	}
	if err != nil {
		t.Fatalf("read after %d bytes: %v", n, err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
	if n != int64(size) || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("echo of %d bytes came back as %d bytes, sha256 equal=%v", size, n, bytes.Equal(h.Sum(nil), want[:]))
	}
}

// Fill, which reads straight into the send buffer, carries a transfer as
// Write does: 8 MiB through the echo server, each fill putting a random
// share of the space it is handed, none at times (a relay's socket with
// nothing to read).
func TestFillCarriesATransfer(t *testing.T) {
	a, b := pair(t, stack.Config{}, nil)
	echoServer(t, b)
	c := dial(t, a, 7)
	defer c.Close()
	data := make([]byte, 8<<20)
	rand.Read(data)
	errc := make(chan error, 1)
	go func() {
		r := mrand.New(mrand.NewPCG(1, 2))
		left := data
		for len(left) > 0 {
			n, err := c.Fill(1+r.IntN(100<<10), func(space [][]byte) int {
				k := 0
				for _, b := range space[:r.IntN(len(space)+1)] {
					k += copy(b, left[k:])
				}
				return k - r.IntN(k/2+1)
			})
			if err != nil {
				errc <- err
				return
			}
			left = left[n:]
		}
		errc <- c.CloseWrite()
	}()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read after %d bytes: %v", len(got), err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("fill: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("%d bytes sent by Fill came back as %d bytes, equal=%v", len(data), len(got), bytes.Equal(got, data))
	}
}

func TestEchoOverPipe(t *testing.T) {
	a, b := pair(t, stack.Config{}, nil)
	echoServer(t, b)
	for _, size := range []int{1, 64 << 10, 8 << 20, 32 << 20} {
		c := dial(t, a, 7)
		transfer(t, c, size)
		c.Close()
	}
}

func TestEchoThroughFaults(t *testing.T) {
	for _, spec := range []string{"loss=0.01,reorder=0.01,dup=0.01,seed=1", "loss=0.05,reorder=0.02,dup=0.02,corrupt=0.01,seed=2"} {
		t.Run(spec, func(t *testing.T) {
			cfg, err := fault.ParseSpec(spec)
			if err != nil {
				t.Fatal(err)
			}
			a, b := pair(t, stack.Config{TCP: tcp.Config{RTOMin: 20 * time.Millisecond, RTOInitial: 100 * time.Millisecond}}, &cfg)
			echoServer(t, b)
			c := dial(t, a, 7)
			transfer(t, c, 4<<20, a, b)
			c.Close()
			ca := a.Counters()
			t.Logf("a: retrans %d fast %d timeouts %d; b: retrans %d fast %d timeouts %d",
				ca["TCP.RetransSegs"], ca["TCP.FastRetrans"], ca["TCP.Timeouts"],
				b.Counters()["TCP.RetransSegs"], b.Counters()["TCP.FastRetrans"], b.Counters()["TCP.Timeouts"])
		})
	}
}
