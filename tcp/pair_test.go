package tcp_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/fault"
	"github.com/gonetstack/gonet/link/pcap"
	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/tcp"
)

var (
	addrA = netip.MustParsePrefix("10.0.0.1/24")
	addrB = netip.MustParsePrefix("10.0.0.2/24")
)

// pair returns two stacks joined by an in-memory wire, optionally through a
// fault-injecting link on a's side, and checks at the end that both gave
// back every buffer and every goroutine.
func pair(t *testing.T, cfg stack.Config, faults *fault.Config) (a, b *stack.Stack) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	ea, eb := pipe.New(1500, net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2})
	var epA link.Endpoint = ea
	if faults != nil {
		epA = fault.New(ea, *faults)
	}
	if path := os.Getenv("GONET_TEST_PCAP"); path != "" {
		pc, err := pcap.Create(epA, path)
		if err != nil {
			t.Fatal(err)
		}
		epA = pc
	}
	a, b = stack.New(cfg), stack.New(cfg)
	for _, x := range []struct {
		s    *stack.Stack
		ep   link.Endpoint
		addr netip.Prefix
	}{{a, epA, addrA}, {b, eb, addrB}} {
		if err := x.s.AddNIC("eth0", x.ep); err != nil {
			t.Fatal(err)
		}
		if err := x.s.AddAddress("eth0", x.addr); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, s := range []*stack.Stack{a, b} {
			if err := s.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			if n := s.Pool().Outstanding(); n != 0 {
				t.Errorf("%d buffers not returned to the pool", n)
			}
			if u := s.Budget().Used(); u != 0 {
				t.Errorf("%d bytes of budget still reserved", u)
			}
		}
		goleak.VerifyNone(t, ignore)
	})
	return a, b
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
				s.WriteCounters(&sb)
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
