package tcp_test

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// The socket API behaves as the standard library's *net.TCPConn does:
// errors are *net.OpError wrapping what errors.Is expects, deadlines run on
// the stack's clock.

// Deadlines expire on the virtual clock and report a timeout as package
// net does: os.ErrDeadlineExceeded, and a net.Error whose Timeout is true.
func TestDeadlines(t *testing.T) {
	const d = time.Second
	tests := []struct {
		name string
		// start sets the deadline and starts the call that waits for it.
		start func(t *testing.T, r *rig, c *tcp.Conn, p *peer, l *tcp.Listener) <-chan ioResult
		n     int // bytes the call reports done
	}{
		{"read", func(t *testing.T, r *rig, c *tcp.Conn, p *peer, l *tcp.Listener) <-chan ioResult {
			c.SetReadDeadline(r.h.Clock.Now().Add(d))
			return readAsync(c, 10)
		}, 0},
		{"two reads, the deadline ends both", func(t *testing.T, r *rig, c *tcp.Conn, p *peer, l *tcp.Listener) <-chan ioResult {
			c.SetReadDeadline(r.h.Clock.Now().Add(d))
			first, second := readAsync(c, 10), readAsync(c, 10)
			ch := make(chan ioResult, 1)
			go func() {
				a, b := <-first, <-second
				if a.err == nil {
					a = b
				}
				if b.err == nil {
					a = ioResult{err: errors.New("a read ended without an error")}
				}
				ch <- a
			}()
			return ch
		}, 0},
		{"write into a closed window", func(t *testing.T, r *rig, c *tcp.Conn, p *peer, l *tcp.Listener) <-chan ioResult {
			c.SetWriteBuffer(1000)
			p.wnd = 0
			p.ack()
			p.settle()
			c.SetDeadline(r.h.Clock.Now().Add(d))
			ch := writeAsync(c, pattern(5000))
			// Wait for the Write to fill the buffer and block.
			waitFor(t, "the Write to fill the send buffer", func() bool { return p.info().SendQueue == 1000 })
			return ch
		}, 1000},
		{"accept", func(t *testing.T, r *rig, c *tcp.Conn, p *peer, l *tcp.Listener) <-chan ioResult {
			l.SetDeadline(r.h.Clock.Now().Add(d))
			ch := make(chan ioResult, 1)
			go func() {
				_, err := l.Accept()
				ch <- ioResult{err: err}
			}()
			return ch
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// No retransmission or probe comes before the deadline.
			r := newRig(t, tcp.Config{RTOMin: 10 * time.Second})
			l := r.listen(0)
			p := r.synPeer(peerPort, peerISN, rawtest.TCPOpts{})
			p.handshake()
			c := acceptOne(t, l)
			ch := tt.start(t, r, c, p, l)
			r.advance(d - time.Millisecond)
			r.settle()
			blocked(t, ch)
			r.advance(time.Millisecond)
			res := wait(t, ch)
			var ne net.Error
			if !errors.Is(res.err, os.ErrDeadlineExceeded) || !errors.As(res.err, &ne) || !ne.Timeout() {
				t.Errorf("error %v, want a timeout wrapping os.ErrDeadlineExceeded", res.err)
			}
			if res.n != tt.n {
				t.Errorf("n = %d, want %d", res.n, tt.n)
			}
			// A deadline in the past fails at once; none means none.
			if tt.name == "read" {
				p.send(P|A, []byte("data"))
				p.settle()
				if res := wait(t, readAsync(c, 10)); !errors.Is(res.err, os.ErrDeadlineExceeded) {
					t.Errorf("read past the deadline: %d, %v", res.n, res.err)
				}
				c.SetReadDeadline(time.Time{})
				if res := wait(t, readAsync(c, 10)); res.err != nil || string(res.b) != "data" {
					t.Errorf("read without a deadline: %q, %v", res.b, res.err)
				}
			}
		})
	}
}

// Errors of reads and writes, after each way a connection can end.
func TestSocketErrors(t *testing.T) {
	readOp := func(c *tcp.Conn) ioResult { return <-readAsync(c, 10) }
	writeOp := func(c *tcp.Conn) ioResult { return <-writeAsync(c, []byte("x")) }
	// Fill fails as Write does, without reading.
	fillOp := func(c *tcp.Conn) ioResult {
		n, err := c.Fill(1, func([][]byte) int {
			panic("Fill read on a connection that cannot send")
		})
		return ioResult{n: n, err: err}
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, c *tcp.Conn, p *peer)
		op    func(c *tcp.Conn) ioResult
		want  error // nil: io.EOF exactly
	}{
		{"read after data and FIN, once the data is read", func(t *testing.T, c *tcp.Conn, p *peer) {
			p.send(F|P|A, []byte("last words"))
			p.expectACK()
			checkData(t, readAll(t, c, 10), []byte("last words"))
		}, readOp, nil},
		{"read after the peer's FIN", func(t *testing.T, c *tcp.Conn, p *peer) {
			p.send(F|A, nil)
			p.expectACK()
		}, readOp, nil},
		{"read after a reset", func(t *testing.T, c *tcp.Conn, p *peer) {
			p.send(R, nil)
			p.waitState("")
		}, readOp, syscall.ECONNRESET},
		{"write after a reset", func(t *testing.T, c *tcp.Conn, p *peer) {
			p.send(R, nil)
			p.waitState("")
		}, writeOp, syscall.ECONNRESET},
		{"read after Close", func(t *testing.T, c *tcp.Conn, p *peer) { c.Close() }, readOp, net.ErrClosed},
		{"write after Close", func(t *testing.T, c *tcp.Conn, p *peer) { c.Close() }, writeOp, net.ErrClosed},
		{"write after CloseWrite", func(t *testing.T, c *tcp.Conn, p *peer) { c.CloseWrite() }, writeOp, syscall.EPIPE},
		{"fill after a reset", func(t *testing.T, c *tcp.Conn, p *peer) {
			p.send(R, nil)
			p.waitState("")
		}, fillOp, syscall.ECONNRESET},
		{"fill after Close", func(t *testing.T, c *tcp.Conn, p *peer) { c.Close() }, fillOp, net.ErrClosed},
		{"fill after CloseWrite", func(t *testing.T, c *tcp.Conn, p *peer) { c.CloseWrite() }, fillOp, syscall.EPIPE},
		{"read after CloseRead", func(t *testing.T, c *tcp.Conn, p *peer) { c.CloseRead() }, readOp, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{})
			c, p := r.accepted(rawtest.TCPOpts{})
			tt.setup(t, c, p)
			res := tt.op(c)
			if tt.want == nil {
				if res.err != io.EOF {
					t.Errorf("error %v, want io.EOF", res.err)
				}
				return
			}
			var oe *net.OpError
			if !errors.As(res.err, &oe) || !errors.Is(res.err, tt.want) {
				t.Errorf("error %#v, want a *net.OpError wrapping %v", res.err, tt.want)
			}
			if res.n != 0 {
				t.Errorf("n = %d", res.n)
			}
		})
	}
}

func TestZeroLengthWriteSendsNothing(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, _ := r.accepted(rawtest.TCPOpts{})
	if n, err := c.Write(nil); n != 0 || err != nil {
		t.Errorf("Write(nil) = %d, %v; want 0, nil", n, err)
	}
	r.nothing()
}

func TestAddressesPrintAsTheStandardLibrary(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, _ := r.accepted(rawtest.TCPOpts{})
	for _, x := range []struct {
		a    net.Addr
		want string
	}{{c.LocalAddr(), "10.1.0.2:7"}, {c.RemoteAddr(), "10.1.0.1:40000"}} {
		if _, ok := x.a.(*net.TCPAddr); !ok || x.a.String() != x.want || x.a.Network() != "tcp" {
			t.Errorf("%T %q network %q, want *net.TCPAddr %q tcp", x.a, x.a, x.a.Network(), x.want)
		}
	}
}

func TestListenOnAPortInUse(t *testing.T) {
	r := newRig(t, tcp.Config{})
	r.listen(0)
	tests := []struct {
		name string
		addr netip.AddrPort
	}{
		{"the same wildcard", netip.AddrPortFrom(netip.IPv4Unspecified(), stackPort)},
		{"a specific address under a wildcard", stackAP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := r.h.S.ListenTCP(tt.addr)
			if err == nil {
				l.Close()
			}
			var oe *net.OpError
			if !errors.As(err, &oe) || !errors.Is(err, syscall.EADDRINUSE) {
				t.Errorf("listen %v: %v, want a *net.OpError wrapping EADDRINUSE", tt.addr, err)
			}
		})
	}
}

// Urgent data (RFC 9293 3.8.5, RFC 6093) is delivered inline, in order with
// the rest, and the connection goes on.
func TestUrgentDataIsDeliveredInline(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{})
	s := p.seg(U|P|A, []byte("urgent!"))
	s.Urgent = 3
	p.inject(s)
	p.nxt += s.Len()
	p.send(P|A, []byte(" and more"))
	p.expectACK()
	checkData(t, readAll(t, c, 16), []byte("urgent! and more"))
	write(t, c, []byte("reply"))
	p.expectData(5, true)
}
