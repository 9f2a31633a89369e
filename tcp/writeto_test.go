package tcp_test

import (
	"errors"
	"io"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/tcp"
)

// failingWriter takes limit bytes, then fails every write.
type failingWriter struct {
	limit, got int
}

var errWriterFull = errors.New("writer full")

func (w *failingWriter) Write(b []byte) (int, error) {
	if w.got+len(b) > w.limit {
		return 0, errWriterFull
	}
	w.got += len(b)
	return len(b), nil
}

// accept1 accepts one connection on b:port.
func accept1(t *testing.T, b *stack.Stack, port uint16) <-chan *tcp.Conn {
	t.Helper()
	l, err := b.ListenTCP(netip.AddrPortFrom(netip.IPv4Unspecified(), port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ch := make(chan *tcp.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(ch)
			return
		}
		ch <- c.(*tcp.Conn)
	}()
	return ch
}

// WriteTo is what io.Copy from a connection calls (the echo and transfer
// tests move data through it both ways); these pin down how it ends.
func TestWriteToEnds(t *testing.T) {
	tests := []struct {
		name string
		// sender acts on the connection that sends to WriteTo's.
		sender func(c *tcp.Conn)
		w      io.Writer
		check  func(t *testing.T, n int64, err error)
	}{
		{"nil at the FIN, with every byte handed to w", func(c *tcp.Conn) {
			c.Write(make([]byte, 100_000))
			c.CloseWrite()
		}, io.Discard, func(t *testing.T, n int64, err error) {
			if n != 100_000 || err != nil {
				t.Fatalf("WriteTo = %d, %v; want 100000, nil", n, err)
			}
		}},
		{"w's error as w returned it", func(c *tcp.Conn) {
			c.Write(make([]byte, 100_000))
			c.CloseWrite()
		}, &failingWriter{limit: 1000}, func(t *testing.T, n int64, err error) {
			if !errors.Is(err, errWriterFull) || n > 1000 {
				t.Fatalf("WriteTo = %d, %v; want at most 1000, %v", n, err, errWriterFull)
			}
		}},
		{"ECONNRESET after the peer's reset", func(c *tcp.Conn) {
			c.Write([]byte("data the reset discards"))
			c.SetLinger(0)
			c.Close()
		}, io.Discard, func(t *testing.T, n int64, err error) {
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("WriteTo = %d, %v; want ECONNRESET", n, err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := pair(t, stack.Config{}, nil)
			accepted := accept1(t, b, 9)
			c := dial(t, a, 9)
			defer c.Close()
			s := <-accepted
			if s == nil {
				t.Fatal("accept failed")
			}
			defer s.Close()
			go tt.sender(c)
			s.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := s.WriteTo(tt.w)
			tt.check(t, n, err)
		})
	}
}
