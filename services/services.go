// Package services holds the classic small Internet services, over UDP and
// TCP: echo (RFC 862), discard (RFC 863), character generator (RFC 864) and
// daytime (RFC 867); and a web server (RFC 9110, over TCP) that serves a
// directory or, without one, a stack's counters and connection table. They
// are written against the standard library's interfaces (net.PacketConn,
// net.Listener, net.Conn), so they run on any stack: GoNet's, whose
// *udp.Conn and TCP listener implement them, or the kernel's through package
// net, which is how this package is tested.
//
// The services count nothing themselves: the stack underneath already counts
// every datagram in and out.
package services

import (
	"context"
	"fmt"
	"net"
	"sync"
)

// maxDatagram is the largest UDP payload a datagram of either family can
// carry: an IPv6 one's, 65535 (the payload length, which counts no IPv6
// header, RFC 8200 section 3) - 8 (UDP header); IPv4's total length counts
// its header too, leaving 65507. A read buffer this size never truncates a
// request, so echo returns exactly what it was sent.
const maxDatagram = 65535 - 8

// handler answers one request datagram: it returns the reply, or nil to send
// none. The request is only valid during the call.
type handler func(req []byte, from net.Addr) (reply []byte)

// serveUDP runs the read-answer loop shared by the UDP services until ctx is
// done (it then closes conn to interrupt the blocked read, and returns nil)
// or the conn fails or is closed by someone else (it returns that error,
// naming the service and the address).
func serveUDP(ctx context.Context, name string, conn net.PacketConn, h handler) error {
	// Closing is the one way to interrupt ReadFrom that every
	// net.PacketConn supports; a deadline would do too, but the caller may
	// be using deadlines for its own purposes.
	var closeOnce sync.Once
	stop := context.AfterFunc(ctx, func() { closeOnce.Do(func() { conn.Close() }) })
	defer stop()

	buf := make([]byte, maxDatagram)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("services: %s on %v: %w", name, conn.LocalAddr(), err)
		}
		reply := h(buf[:n], from)
		if reply == nil {
			continue
		}
		// A reply that cannot be sent is dropped, as any host drops a
		// datagram it cannot route: UDP promises no delivery, and one
		// unreachable client must not stop the service for the others.
		// A closed conn shows up on the next read.
		_, _ = conn.WriteTo(reply, from)
	}
}

// ServeEchoUDP runs the UDP echo service (RFC 862) on conn: each datagram
// received is sent back to its source unchanged. It returns nil when ctx is
// done, after closing conn; it returns an error when conn fails or is closed
// by someone else.
func ServeEchoUDP(ctx context.Context, conn net.PacketConn) error {
	return serveUDP(ctx, "echo", conn, func(req []byte, _ net.Addr) []byte {
		// RFC 862: "the data from the datagram is sent back in an answering
		// datagram". An empty datagram gets an empty answer, not silence:
		// req is never nil.
		return req
	})
}

// ServeDiscardUDP runs the UDP discard service (RFC 863) on conn: datagrams
// are read and thrown away, and nothing is sent back. It returns as
// ServeEchoUDP does.
func ServeDiscardUDP(ctx context.Context, conn net.PacketConn) error {
	return serveUDP(ctx, "discard", conn, func([]byte, net.Addr) []byte { return nil })
}
