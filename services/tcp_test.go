package services

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// tcpServer is one TCP service running on a loopback listener for a test.
type tcpServer struct {
	ln   *watchedListener
	addr string
	done chan error
	stop context.CancelFunc
}

// watchedListener tells the test when the service has closed a connection
// it accepted: closed receives the server side's local-remote pair.
type watchedListener struct {
	net.Listener
	closed chan string
}

func (l *watchedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &watchedConnTCP{Conn: c, closed: l.closed}, nil
}

// watchedConnTCP reports its first Close. It keeps CloseWrite reachable,
// as the services look for it.
type watchedConnTCP struct {
	net.Conn
	closed chan string
	once   sync.Once
}

func (c *watchedConnTCP) Close() error {
	c.once.Do(func() {
		select {
		case c.closed <- c.RemoteAddr().String():
		default:
		}
	})
	return c.Conn.Close()
}

func (c *watchedConnTCP) CloseWrite() error { return c.Conn.(*net.TCPConn).CloseWrite() }

// startTCP runs serve on a fresh 127.0.0.1 listener. The service is
// stopped, and its return checked, when the test ends.
func startTCP(t *testing.T, serve func(context.Context, net.Listener) error) *tcpServer {
	t.Helper()
	return startTCPWrapped(t, serve, func(ln net.Listener) net.Listener { return ln })
}

// startTCPWrapped is startTCP with the listener wrapped as wrap says.
func startTCPWrapped(t *testing.T, serve func(context.Context, net.Listener) error, wrap func(net.Listener) net.Listener) *tcpServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &tcpServer{
		ln:   &watchedListener{Listener: ln, closed: make(chan string, 64)},
		addr: ln.Addr().String(),
		done: make(chan error, 1),
		stop: cancel,
	}
	go func() { s.done <- serve(ctx, wrap(s.ln)) }()
	t.Cleanup(func() { returnsOnCancel(t, cancel, s.done) })
	return s
}

// waitClosed waits until the service has closed the connection whose
// client end is c.
func (s *tcpServer) waitClosed(t *testing.T, c net.Conn) {
	t.Helper()
	want := c.LocalAddr().String()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-s.ln.closed:
			if got == want {
				return
			}
		case <-timeout:
			t.Fatalf("the service did not close the connection from %s within 10s", want)
		}
	}
}

// dialTCP connects to addr; the connection is closed when the test ends.
func dialTCP(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return c.(*net.TCPConn)
}

func TestEchoTCPReturnsEverythingThenClosesAfterTheClientsHalfClose(t *testing.T) {
	tests := []struct {
		name string
		size int
	}{
		{"nothing at all", 0},
		{"one byte", 1},
		{"one segment's worth", 1460},
		{"more than the socket buffers hold", 8 << 20},
	}
	srv := startTCP(t, ServeEchoTCP)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialTCP(t, srv.addr)
			req := pattern(tt.size)
			// The client sends everything, then half-closes, while it
			// reads: a client that did not read would stall the echo
			// once the buffers are full, as with any TCP echo server.
			sent := make(chan error, 1)
			go func() {
				_, err := c.Write(req)
				if err == nil {
					err = c.CloseWrite()
				}
				sent <- err
			}()
			got, err := io.ReadAll(c) // to the server's FIN
			if err != nil {
				t.Fatalf("reading the echo: %v", err)
			}
			if err := <-sent; err != nil {
				t.Fatalf("sending: %v", err)
			}
			if !bytes.Equal(got, req) {
				t.Errorf("sent %d bytes, echo brought back %d bytes that differ", len(req), len(got))
			}
			srv.waitClosed(t, c)
		})
	}
}

func TestEchoTCPAnswersEachExchangeAsItComes(t *testing.T) {
	srv := startTCP(t, ServeEchoTCP)
	a, b := dialTCP(t, srv.addr), dialTCP(t, srv.addr)
	for i, msg := range []string{"first\n", "second, longer\n", "x"} {
		for _, c := range []net.Conn{a, b} {
			if _, err := io.WriteString(c, msg); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatalf("exchange %d: %v", i, err)
			}
			if string(got) != msg {
				t.Errorf("exchange %d: echo %q, want %q", i, got, msg)
			}
		}
	}
}

func TestDiscardTCPSendsNothingAndClosesAfterTheClient(t *testing.T) {
	srv := startTCP(t, ServeDiscardTCP)
	c := dialTCP(t, srv.addr)
	if _, err := c.Write(pattern(1 << 20)); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil || len(got) != 0 {
		t.Errorf("discard sent back %d bytes and ended with %v; want nothing, then FIN", len(got), err)
	}
	srv.waitClosed(t, c)
}

func TestChargenTCPSendsThePatternFromLineZero(t *testing.T) {
	srv := startTCP(t, ServeChargenTCP)
	for _, n := range []int{1, ChargenLineLen, 3*chargenChunk + 17, 1 << 20} {
		c := dialTCP(t, srv.addr)
		got := make([]byte, n)
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("reading %d bytes: %v", n, err)
		}
		if want := wantStream(0, n); !bytes.Equal(got, want) {
			t.Errorf("the first %d bytes are not the RFC 864 pattern from line 0", n)
		}
		c.Close()
	}
}

func TestChargenTCPStopsWhenTheClientCloses(t *testing.T) {
	srv := startTCP(t, ServeChargenTCP)
	c := dialTCP(t, srv.addr)
	if _, err := io.ReadFull(c, make([]byte, 10000)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	srv.waitClosed(t, c)
}

func TestChargenTCPKeepsSendingAfterAHalfCloseAndThrowsInputAway(t *testing.T) {
	srv := startTCP(t, ServeChargenTCP)
	c := dialTCP(t, srv.addr)
	// Input is read and thrown away, however much of it there is.
	if _, err := c.Write(pattern(1 << 20)); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 200000)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("reading after the half-close: %v", err)
	}
	if !bytes.Equal(got, wantStream(0, len(got))) {
		t.Error("the stream after the half-close is not the pattern")
	}
}

func TestChargenTCPClientThatStopsReadingBlocksNoOther(t *testing.T) {
	srv := startTCP(t, ServeChargenTCP)
	// Several clients that never read: each fills its buffers and
	// leaves its server goroutine blocked in Write.
	for range 4 {
		dialTCP(t, srv.addr)
	}
	c := dialTCP(t, srv.addr)
	if _, err := io.ReadFull(c, make([]byte, 4<<20)); err != nil {
		t.Fatalf("a reading client next to stalled ones: %v", err)
	}
}

func TestDaytimeTCPSendsOneLineThenCloses(t *testing.T) {
	at := time.Date(2009, 11, 10, 23, 0, 0, 0, time.UTC)
	d := Daytime{Now: func() time.Time { return at }}
	srv := startTCP(t, d.ServeTCP)
	tests := []struct {
		name  string
		sends string // what the client sends first
	}{
		{"a client that sends nothing", ""},
		// Unread input must not turn the close into a reset that
		// destroys the answer.
		{"a client that sends a line first", "what time is it?\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialTCP(t, srv.addr)
			if tt.sends != "" {
				if _, err := io.WriteString(c, tt.sends); err != nil {
					t.Fatal(err)
				}
			}
			got, err := io.ReadAll(c)
			if err != nil {
				t.Fatalf("reading the answer: %v", err)
			}
			if want := "Tue, 10 Nov 2009 23:00:00 UTC\r\n"; string(got) != want {
				t.Errorf("daytime sent %q, want %q", got, want)
			}
			c.Close()
			srv.waitClosed(t, c)
		})
	}
}

func TestDaytimeTCPUsesTheWallClockByDefault(t *testing.T) {
	srv := startTCP(t, ServeDaytimeTCP)
	c := dialTCP(t, srv.addr)
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse(time.RFC1123, strings.TrimSuffix(string(got), "\r\n"))
	if err != nil {
		t.Fatalf("daytime answer %q is not RFC 1123: %v", got, err)
	}
	if d := time.Since(at); d < -2*time.Second || d > 2*time.Second {
		t.Errorf("daytime said %v, %v from now", at, d)
	}
}

var tcpServices = map[string]func(context.Context, net.Listener) error{
	"echo":    ServeEchoTCP,
	"discard": ServeDiscardTCP,
	"chargen": ServeChargenTCP,
	"daytime": ServeDaytimeTCP,
	"http":    serveHTTPDefault,
}

// The services stop with their live connections: the goroutines are
// checked by goleak when the package's tests end.
func TestServeTCPStopsWithItsConnectionsWhenContextIsDone(t *testing.T) {
	for name, serve := range tcpServices {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- serve(ctx, ln) }()
			// A client in the middle of a connection, which the
			// service has begun to serve.
			c := dialTCP(t, ln.Addr().String())
			switch name {
			case "echo":
				io.WriteString(c, "x")
			case "discard":
				io.WriteString(c, "x")
			case "http":
				// A kept-alive connection, idle after its answer.
				io.WriteString(c, "GET /status.txt HTTP/1.1\r\nHost: x\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if name != "discard" && name != "http" {
				if _, err := c.Read(make([]byte, 1)); err != nil {
					t.Fatal(err)
				}
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s returned %v when its context was cancelled, want nil", name, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s did not return within 10s of its context being cancelled", name)
			}
			if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
				t.Errorf("after %s returned, Accept on its listener gave %v, want net.ErrClosed", name, err)
			}
			// The connection was closed: the client reads to its end.
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("the client's connection did not end: %v", err)
			}
		})
	}
}

func TestServeTCPReturnsAnErrorWhenTheListenerIsClosedUnderIt(t *testing.T) {
	for name, serve := range tcpServices {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- serve(context.Background(), ln) }()
			// A connection served, then the listener gone.
			c := dialTCP(t, ln.Addr().String())
			if name == "echo" {
				io.WriteString(c, "x")
				if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
					t.Fatal(err)
				}
			}
			ln.Close()
			select {
			case err := <-done:
				if !errors.Is(err, net.ErrClosed) {
					t.Errorf("%s returned %v, want an error wrapping net.ErrClosed", name, err)
				}
				if err != nil && !strings.Contains(err.Error(), name) {
					t.Errorf("error %q does not name the service %q", err, name)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s did not return within 10s of its listener being closed", name)
			}
		})
	}
}

// flakyListener fails its first Accepts with a temporary error, as the
// kernel's listener does when the process is out of descriptors.
type flakyListener struct {
	net.Listener
	mu    sync.Mutex
	fails int
}

type temporaryError struct{}

func (temporaryError) Error() string   { return "accept: too many open files" }
func (temporaryError) Temporary() bool { return true }
func (temporaryError) Timeout() bool   { return false }

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	fail := l.fails > 0
	l.fails--
	l.mu.Unlock()
	if fail {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: temporaryError{}}
	}
	return l.Listener.Accept()
}

func TestServeTCPRidesOutTemporaryAcceptErrors(t *testing.T) {
	srv := startTCPWrapped(t, ServeEchoTCP, func(ln net.Listener) net.Listener {
		return &flakyListener{Listener: ln, fails: 3}
	})
	c := dialTCP(t, srv.addr)
	io.WriteString(c, "still here")
	got := make([]byte, len("still here"))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "still here" {
		t.Errorf("after temporary accept errors, echo gave %q, %v", got, err)
	}
}
