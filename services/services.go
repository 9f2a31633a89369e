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
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"

	"github.com/gonetstack/gonet/udp"
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

	rw := newReplier(conn)
	buf := make([]byte, maxDatagram)
	for {
		n, from, err := rw.read(buf)
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
		_ = rw.reply(reply)
	}
}

// infoConn is a PacketConn that tells where each datagram was sent to and
// sends from a source of its caller's: GoNet's *udp.Conn (its packet
// information, as Linux's IP_PKTINFO).
type infoConn interface {
	ReadMsg(b []byte) (int, netip.AddrPort, udp.PacketInfo, error)
	WriteMsg(b []byte, to netip.AddrPort, info udp.PacketInfo) (int, error)
}

// replier reads requests and answers the last one read: from the address
// it was sent to when conn can tell it (infoConn), as RFC 1122 section
// 4.1.3.5 asks of a reply, so that a service on a wildcard address of a
// host with several answers a client connected to any of them; from the
// route's source otherwise (the kernel's UDP sockets through package net,
// which would need IP_PKTINFO's control messages for it).
type replier struct {
	conn net.PacketConn
	info infoConn // nil when conn is not one

	from net.Addr       // the last request's source
	peer netip.AddrPort // the same, with info
	dst  netip.Addr     // where the last request was sent, with info
}

func newReplier(conn net.PacketConn) *replier {
	ic, _ := conn.(infoConn)
	return &replier{conn: conn, info: ic}
}

func (r *replier) read(b []byte) (int, net.Addr, error) {
	if r.info == nil {
		n, from, err := r.conn.ReadFrom(b)
		r.from = from
		return n, from, err
	}
	n, from, info, err := r.info.ReadMsg(b)
	if err != nil {
		return 0, nil, err
	}
	r.peer, r.dst = from, info.Addr
	return n, net.UDPAddrFromAddrPort(from), nil
}

func (r *replier) reply(b []byte) error {
	if r.info == nil {
		_, err := r.conn.WriteTo(b, r.from)
		return err
	}
	if !r.dst.IsMulticast() {
		_, err := r.info.WriteMsg(b, r.peer, udp.PacketInfo{Addr: r.dst})
		if !errors.Is(err, syscall.EINVAL) {
			return err
		}
		// Not an address to send from: a broadcast one.
	}
	// A request to a broadcast address or a group is answered from the
	// route's source, the section's "specific address" of the host.
	_, err := r.info.WriteMsg(b, r.peer, udp.PacketInfo{})
	return err
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
