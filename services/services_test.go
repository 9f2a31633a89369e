package services

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// watchedConn wraps the server's conn to tell the test what the service did
// without sleeping: reads reports each entry into ReadFrom (the service
// handles datagrams one at a time, so by the (k+1)th entry it has finished
// with k datagrams), and writes counts the replies it sent.
type watchedConn struct {
	net.PacketConn
	reads  chan int
	mu     sync.Mutex
	nread  int
	writes int
}

func (c *watchedConn) ReadFrom(p []byte) (int, net.Addr, error) {
	c.mu.Lock()
	c.nread++
	n := c.nread
	c.mu.Unlock()
	select {
	case c.reads <- n:
	default:
	}
	return c.PacketConn.ReadFrom(p)
}

func (c *watchedConn) WriteTo(p []byte, addr net.Addr) (int, error) {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return c.PacketConn.WriteTo(p, addr)
}

// waitHandled blocks until the service has handled k datagrams.
func (c *watchedConn) waitHandled(t *testing.T, k int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case n := <-c.reads:
			if n > k {
				return
			}
		case <-timeout:
			t.Fatalf("service did not handle %d datagrams within 10s", k)
		}
	}
}

// server is one service running on a loopback socket for a test.
type server struct {
	conn *watchedConn
	addr net.Addr
	done chan error
	stop context.CancelFunc
}

// startServer runs serve on a fresh 127.0.0.1 UDP socket. The service is
// stopped, and its return checked, when the test ends.
func startServer(t *testing.T, serve func(context.Context, net.PacketConn) error) *server {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{
		conn: &watchedConn{PacketConn: pc, reads: make(chan int, 64)},
		addr: pc.LocalAddr(),
		done: make(chan error, 1),
		stop: cancel,
	}
	go func() { s.done <- serve(ctx, s.conn) }()
	t.Cleanup(func() { returnsOnCancel(t, cancel, s.done) })
	return s
}

// returnsOnCancel cancels a service's context and checks that the
// service then returns nil (on done) within 10 s.
func returnsOnCancel(t *testing.T, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("service returned %v after its context was cancelled, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("service did not return within 10s of its context being cancelled")
	}
}

// client returns a loopback UDP socket closed when the test ends.
func client(t *testing.T) net.PacketConn {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}

// exchange sends req to addr and returns the answer.
func exchange(t *testing.T, c net.PacketConn, addr net.Addr, req []byte) []byte {
	t.Helper()
	if _, err := c.WriteTo(req, addr); err != nil {
		t.Fatalf("sending %d bytes to %v: %v", len(req), addr, err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 70000)
	n, from, err := c.ReadFrom(buf)
	if err != nil {
		t.Fatalf("waiting for the answer to %d bytes sent to %v: %v", len(req), addr, err)
	}
	if from.String() != addr.String() {
		t.Errorf("answer came from %v, want %v", from, addr)
	}
	return buf[:n]
}

// pattern returns a recognisable payload of n bytes.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

func TestEchoUDPReturnsEachDatagramUnchanged(t *testing.T) {
	tests := []struct {
		name string
		size int
	}{
		{"empty datagram gets an empty answer", 0},
		{"one byte", 1},
		{"a full Ethernet payload", 1472},
		{"needs IPv4 fragmentation on Ethernet", 8000},
		{"the largest IPv4 UDP payload", 65535 - 20 - 8},
	}
	srv := startServer(t, ServeEchoUDP)
	c := client(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := pattern(tt.size)
			if got := exchange(t, c, srv.addr, req); !bytes.Equal(got, req) {
				t.Errorf("echo of %d bytes came back as %d bytes that differ", len(req), len(got))
			}
		})
	}
}

func TestEchoUDPAnswersEachClient(t *testing.T) {
	srv := startServer(t, ServeEchoUDP)
	a, b := client(t), client(t)
	if got := exchange(t, a, srv.addr, []byte("from a")); string(got) != "from a" {
		t.Errorf("client a got %q, want %q", got, "from a")
	}
	if got := exchange(t, b, srv.addr, []byte("from b")); string(got) != "from b" {
		t.Errorf("client b got %q, want %q", got, "from b")
	}
}

func TestDiscardUDPSendsNothingBack(t *testing.T) {
	for _, size := range []int{0, 1, 1472, 30000} {
		t.Run(fmt.Sprintf("%d bytes", size), func(t *testing.T) {
			srv := startServer(t, ServeDiscardUDP)
			c := client(t)
			if _, err := c.WriteTo(pattern(size), srv.addr); err != nil {
				t.Fatal(err)
			}
			srv.conn.waitHandled(t, 1)
			srv.conn.mu.Lock()
			defer srv.conn.mu.Unlock()
			if srv.conn.writes != 0 {
				t.Errorf("discard sent %d datagrams, want none", srv.conn.writes)
			}
		})
	}
}

func TestChargenUDPAnswersWithUpTo512PatternCharacters(t *testing.T) {
	tests := []struct {
		name string
		req  []byte
	}{
		{"empty request", nil},
		{"the request's content is ignored", []byte("please send 100000 characters")},
		{"a large request", pattern(4000)},
	}
	srv := startServer(t, ServeChargenUDP)
	c := client(t)
	line := 0 // answers start on successive lines
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Several rounds, so the random length varies and the
			// starting line advances.
			for range 20 {
				got := exchange(t, c, srv.addr, tt.req)
				if len(got) > chargenMaxUDP {
					t.Fatalf("answer is %d characters, RFC 864 allows at most %d", len(got), chargenMaxUDP)
				}
				if want := wantStream(line, len(got)); !bytes.Equal(got, want) {
					t.Fatalf("answer %q is not the pattern from line %d: %q", got, line, want)
				}
				line++
			}
		})
	}
}

func TestChargenUDPLengthVaries(t *testing.T) {
	srv := startServer(t, ServeChargenUDP)
	c := client(t)
	lengths := map[int]bool{}
	for range 50 {
		lengths[len(exchange(t, c, srv.addr, nil))] = true
	}
	// 50 draws from 513 lengths all equal has probability 513^-49.
	if len(lengths) < 2 {
		t.Errorf("50 answers all had the same length %v; RFC 864 asks for a random length", lengths)
	}
}

func TestDaytimeUDPAnswersWithTheTimeOnOneLine(t *testing.T) {
	tests := []struct {
		name string
		now  time.Time
		want string
	}{
		{"UTC", time.Date(2009, 11, 10, 23, 0, 0, 0, time.UTC),
			"Tue, 10 Nov 2009 23:00:00 UTC\r\n"},
		{"another zone keeps its abbreviation", time.Date(1983, 5, 1, 12, 30, 5, 0, time.FixedZone("PDT", -7*3600)),
			"Sun, 01 May 1983 12:30:05 PDT\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Daytime{Now: func() time.Time { return tt.now }}
			srv := startServer(t, d.ServeUDP)
			c := client(t)
			got := string(exchange(t, c, srv.addr, []byte("what time is it?")))
			if got != tt.want {
				t.Errorf("daytime answered %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDaytimeUDPUsesTheWallClockByDefault(t *testing.T) {
	srv := startServer(t, ServeDaytimeUDP)
	c := client(t)
	before := time.Now().Truncate(time.Second)
	got := string(exchange(t, c, srv.addr, nil))
	after := time.Now()
	if !strings.HasSuffix(got, "\r\n") || strings.Count(got, "\n") != 1 {
		t.Fatalf("daytime answered %q, want one line ended by CRLF", got)
	}
	at, err := time.Parse(time.RFC1123, strings.TrimSuffix(got, "\r\n"))
	if err != nil {
		t.Fatalf("daytime answer %q is not RFC 1123: %v", got, err)
	}
	if at.Before(before.Add(-time.Second)) || at.After(after.Add(time.Second)) {
		t.Errorf("daytime said %v, want a time between %v and %v", at, before, after)
	}
}

func TestServeUDPStopsWhenContextIsDone(t *testing.T) {
	services := map[string]func(context.Context, net.PacketConn) error{
		"echo":    ServeEchoUDP,
		"discard": ServeDiscardUDP,
		"chargen": ServeChargenUDP,
		"daytime": ServeDaytimeUDP,
	}
	for name, serve := range services {
		t.Run(name, func(t *testing.T) {
			pc, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- serve(ctx, pc) }()
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s returned %v when its context was cancelled, want nil", name, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s did not return within 10s of its context being cancelled", name)
			}
			// The service closed the conn to interrupt its read.
			if _, err := pc.WriteTo([]byte("x"), pc.LocalAddr()); !errors.Is(err, net.ErrClosed) {
				t.Errorf("after %s returned, writing on its conn gave %v, want net.ErrClosed", name, err)
			}
		})
	}
}

func TestServeUDPReturnsAnErrorWhenTheConnIsClosedUnderIt(t *testing.T) {
	services := map[string]func(context.Context, net.PacketConn) error{
		"echo":    ServeEchoUDP,
		"discard": ServeDiscardUDP,
		"chargen": ServeChargenUDP,
		"daytime": ServeDaytimeUDP,
	}
	for name, serve := range services {
		t.Run(name, func(t *testing.T) {
			pc, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			wc := &watchedConn{PacketConn: pc, reads: make(chan int, 1)}
			done := make(chan error, 1)
			go func() { done <- serve(context.Background(), wc) }()
			wc.waitHandled(t, 0) // the service is reading
			pc.Close()
			select {
			case err := <-done:
				if !errors.Is(err, net.ErrClosed) {
					t.Errorf("%s returned %v, want an error wrapping net.ErrClosed", name, err)
				}
				if err != nil && !strings.Contains(err.Error(), name) {
					t.Errorf("error %q does not name the service %q", err, name)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s did not return within 10s of its conn being closed", name)
			}
		})
	}
}
