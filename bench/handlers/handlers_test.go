package handlers

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// serve runs h on a loopback listener and returns its address.
func serve(t *testing.T, h Handler, n *Counters) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go Serve(l, h, n)
	return l.Addr().String()
}

func dial(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c.(*net.TCPConn)
}

func TestEcho(t *testing.T) {
	var n Counters
	c := dial(t, serve(t, Echo, &n))
	msg := bytes.Repeat([]byte("gonet"), 300) // more than Echo's buffer
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("echo changed the bytes")
	}
}

func TestDiscardClosesAfterEOF(t *testing.T) {
	var n Counters
	c := dial(t, serve(t, Discard, &n))
	c.Write(make([]byte, 100000))
	c.CloseWrite()
	if m, err := io.Copy(io.Discard, c); err != nil || m != 0 {
		t.Fatalf("read %d, %v after half-close; want EOF", m, err)
	}
	if got := n.BytesIn.Load(); got != 100000 {
		t.Fatalf("counted %d bytes in, want 100000", got)
	}
}

func TestSource(t *testing.T) {
	var n Counters
	c := dial(t, serve(t, Source, &n))
	if _, err := io.ReadFull(c, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
}

func TestRR(t *testing.T) {
	var n Counters
	c := dial(t, serve(t, RR, &n))
	for i := range 100 {
		if _, err := c.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		var b [1]byte
		if _, err := io.ReadFull(c, b[:]); err != nil || b[0] != byte(i) {
			t.Fatalf("exchange %d: got %d, %v", i, b[0], err)
		}
	}
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for n.Exchanges.Load() != 100 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := n.Exchanges.Load(); got != 100 {
		t.Fatalf("%d exchanges counted, want 100", got)
	}
}

func TestUDPSink(t *testing.T) {
	var s UDPSink
	now := time.Now()
	b := make([]byte, 64)
	// Flow 1: three datagrams, the third reordered; constant transit
	// but for 16 µs more on the last, so jitter is 16/16 µs.
	for i, seq := range []uint64{0, 2, 1} {
		PutUDPHeader(b, 1, seq, now.Add(time.Duration(i)*time.Millisecond))
		at := now.Add(time.Duration(i)*time.Millisecond + 100*time.Microsecond)
		if i == 2 {
			at = at.Add(16 * time.Microsecond)
		}
		s.record(b, at.UnixNano())
	}
	f := s.Flow()
	if f.Flow != 1 || f.Datagrams != 3 || f.Bytes != 192 || f.Reordered != 1 {
		t.Fatalf("flow %+v", f)
	}
	if f.JitterUS < 0.99 || f.JitterUS > 1.01 {
		t.Fatalf("jitter %v µs, want 1", f.JitterUS)
	}
	// A new flow starts afresh.
	PutUDPHeader(b, 2, 0, now)
	s.record(b, now.UnixNano())
	if f := s.Flow(); f.Flow != 2 || f.Datagrams != 1 || f.JitterUS != 0 {
		t.Fatalf("new flow %+v", f)
	}
}

// A paced sender's schedule counts the datagram whose time has come and
// all before it; an unpaced one is never ahead.
func TestPaceDue(t *testing.T) {
	start := time.Unix(100, 0)
	p := Pace{Start: start, Gap: time.Millisecond}
	for _, c := range []struct {
		at   time.Duration
		want int64
	}{{0, 1}, {999 * time.Microsecond, 1}, {time.Millisecond, 2}, {10500 * time.Microsecond, 11}} {
		if got := p.Due(start.Add(c.at)); got != c.want {
			t.Errorf("at %v: %d due, want %d", c.at, got, c.want)
		}
	}
	if got := (Pace{Start: start}).Due(start); got < 1<<40 {
		t.Errorf("unpaced: %d due, want no bound", got)
	}
}
