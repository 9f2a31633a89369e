package services

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/gonetstack/gonet/clock"
)

// TCP forms of the services. Each runs an accept loop on a net.Listener and
// one goroutine per connection, so a client that stops reading (or sending)
// holds up only its own connection.

// lingerTimeout bounds how long a service that has said all it will say
// keeps reading, after its FIN, to let the client's own FIN arrive.
const lingerTimeout = 5 * time.Second

// chargenChunk is how much of the pattern chargen hands to one Write: 64
// KiB, a super-segment's worth, so that one Write wakes the connection
// for as much as it can send at once. With 8 KiB the daemon's chargen
// sent 26.1 Gbit/s where the bench's source, writing 128 KiB, sent 29.6.
const chargenChunk = 64 << 10

// Accept back-off, as net/http's server does it: a listener that fails
// temporarily (the kernel's, out of descriptors) is retried after a pause
// that doubles up to a second, rather than ending the service.
const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// serveTCP runs the accept loop shared by the TCP services, calling handle
// on its own goroutine for each connection; handle need not close the
// connection. It returns nil when ctx is done, after closing ln, closing
// every live connection and waiting for their handlers to return. It
// returns an error, naming the service and the address, when ln fails or is
// closed by someone else; it closes the live connections and waits for
// them then too.
func serveTCP(ctx context.Context, name string, ln net.Listener, handle func(net.Conn)) error {
	// Closing is the one way to interrupt Accept that every net.Listener
	// supports.
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	var backoff time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil && isTemporary(err) {
				backoff = min(max(2*backoff, acceptBackoffMin), acceptBackoffMax)
				if clock.Sleep(ctx, clock.Real{}, backoff) {
					continue
				}
			}
			// Every accepted connection is in conns by now, since
			// only this goroutine adds to it.
			mu.Lock()
			for c := range conns {
				c.Close()
			}
			mu.Unlock()
			wg.Wait()
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("services: %s on %v: %w", name, ln.Addr(), err)
		}
		backoff = 0
		mu.Lock()
		conns[conn] = struct{}{}
		mu.Unlock()
		wg.Go(func() {
			defer func() {
				mu.Lock()
				delete(conns, conn)
				mu.Unlock()
				conn.Close()
			}()
			handle(conn)
		})
	}
}

// isTemporary reports whether a listener's error says to try again. The
// Temporary method is deprecated for most errors, but it is still how the
// kernel's listener reports EMFILE and ENFILE, and net/http relies on it.
func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// lingeringClose ends a connection the server has finished sending on:
// it sends FIN, then reads and throws away what the client still sends
// until the client's FIN or lingerTimeout. Closing at once with unread data
// would make the kernel send RST (RFC 1122 section 4.2.2.13), which may
// destroy the answer before the client has read it. Connections that cannot
// half-close are simply closed by the caller.
func lingeringClose(c net.Conn) {
	hc, ok := c.(interface{ CloseWrite() error })
	if !ok || hc.CloseWrite() != nil {
		return
	}
	if c.SetReadDeadline(time.Now().Add(lingerTimeout)) != nil {
		return
	}
	io.Copy(io.Discard, c)
}

// ServeEchoTCP runs the TCP echo service (RFC 862) on ln: whatever a client
// sends is sent back, until the client closes. A client that only closes
// its sending side (a half-close) gets the rest of its echo, then the
// server's FIN. It returns nil when ctx is done, after closing ln and every
// connection; it returns an error when ln fails or is closed by someone
// else.
func ServeEchoTCP(ctx context.Context, ln net.Listener) error {
	return serveTCP(ctx, "echo", ln, func(c net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if _, werr := c.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				// On io.EOF everything received has been sent
				// back: the close that follows is the FIN.
				return
			}
		}
	})
}

// ServeDiscardTCP runs the TCP discard service (RFC 863) on ln: what a
// client sends is read and thrown away, and nothing is sent back, until the
// client closes. It returns as ServeEchoTCP does.
func ServeDiscardTCP(ctx context.Context, ln net.Listener) error {
	return serveTCP(ctx, "discard", ln, func(c net.Conn) {
		io.Copy(io.Discard, c)
	})
}

// ServeChargenTCP runs the TCP character generator service (RFC 864) on
// ln: each connection receives the pattern, from line 0, without end, and
// what the client sends is thrown away. The stream stops when a write
// fails, which is how a server learns that a client has closed; a client
// that merely half-closes keeps receiving. A client that stops reading
// stalls only its own connection. It returns as ServeEchoTCP does.
func ServeChargenTCP(ctx context.Context, ln net.Listener) error {
	return serveTCP(ctx, "chargen", ln, func(c net.Conn) {
		// RFC 864: "Any data received is thrown away." Reading it also
		// keeps the client's window open, so a client that sends while
		// it reads cannot deadlock against us.
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			io.Copy(io.Discard, c)
		}()
		defer func() {
			c.Close() // ends the drain when the write side stopped first
			<-drained
		}()
		var gen Chargen
		buf := make([]byte, chargenChunk)
		for {
			gen.Read(buf)
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
}

// ServeTCP runs the TCP daytime service (RFC 867) on ln: each connection
// receives DaytimeLine of the current time and is then closed; what the
// client sends is thrown away. It returns as ServeEchoTCP does.
func (d Daytime) ServeTCP(ctx context.Context, ln net.Listener) error {
	now := d.Now
	if now == nil {
		now = time.Now
	}
	return serveTCP(ctx, "daytime", ln, func(c net.Conn) {
		if _, err := io.WriteString(c, DaytimeLine(now())); err != nil {
			return
		}
		lingeringClose(c)
	})
}

// ServeDaytimeTCP runs the TCP daytime service on ln with the wall clock;
// see Daytime.ServeTCP.
func ServeDaytimeTCP(ctx context.Context, ln net.Listener) error {
	return Daytime{}.ServeTCP(ctx, ln)
}
