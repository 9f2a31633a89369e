package dns

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	mdns "github.com/miekg/dns"
)

// The host side: each query goes to an upstream resolver over a socket of
// the host's own (package net), one socket per attempt, so the kernel
// picks a fresh random source port each time (RFC 5452 section 9.2) and a
// stray answer to an earlier attempt cannot be taken for this one's.

// errTimeout is an upstream that did not answer in time.
var errTimeout = errors.New("no answer in time")

// udpBuffers holds the buffers UDP answers from upstream are read into:
// as large as any datagram, since the query's EDNS0 size, not ours, tells
// the upstream how large an answer may be.
var udpBuffers = sync.Pool{New: func() any { b := make([]byte, maxMessage); return &b }}

// exchange asks upstream up q's question, over TCP when tcp is set, and
// returns its answer with q's own ID. Upstream the query carries a random
// ID of its own (RFC 5452 section 4.3), so a guest's predictable IDs do not
// make the forwarder easier to spoof. A timeout returns an error wrapping
// errTimeout; ctx's end returns ctx's error.
func (f *Forwarder) exchange(ctx context.Context, up netip.AddrPort, q *query, tcp bool) (*mdns.Msg, []byte, error) {
	network := "udp"
	if tcp {
		network = "tcp"
	}
	deadline := time.Now().Add(f.cfg.Timeout)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	conn, err := f.cfg.Dialer.DialContext(dctx, network, up.String())
	if err != nil {
		return nil, nil, f.upstreamError(ctx, err)
	}
	defer conn.Close()
	// The deadline bounds each read and write; closing on ctx's end
	// interrupts them when the forwarder stops.
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	id := uint16(rand.Uint32())
	msg := append([]byte(nil), q.raw...)
	setID(msg, id)
	var m *mdns.Msg
	var answer []byte
	if tcp {
		m, answer, err = exchangeTCP(conn, msg, q, id)
	} else {
		m, answer, err = exchangeUDP(conn, msg, q, id)
	}
	if err != nil {
		return nil, nil, f.upstreamError(ctx, err)
	}
	setID(answer, q.id)
	m.Id = q.id
	return m, answer, nil
}

// upstreamError names what went wrong with an attempt: ctx's end, a
// timeout, or the error itself.
func (f *Forwarder) upstreamError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", errTimeout, err)
	}
	return err
}

// exchangeUDP sends msg and reads datagrams until one answers it (RFC 5452
// section 9.1: others are discarded) or the deadline passes. A connected
// socket takes datagrams from the upstream's address alone, and ICMP port
// unreachable from it fails the read with ECONNREFUSED.
func exchangeUDP(conn net.Conn, msg []byte, q *query, id uint16) (*mdns.Msg, []byte, error) {
	if _, err := conn.Write(msg); err != nil {
		return nil, nil, err
	}
	bp := udpBuffers.Get().(*[]byte)
	defer udpBuffers.Put(bp)
	buf := *bp
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return nil, nil, err
		}
		m, err := checkAnswer(buf[:n], q, id)
		if err != nil {
			continue
		}
		return m, append([]byte(nil), buf[:n]...), nil
	}
}

// exchangeTCP sends msg with its two-byte length (RFC 1035 4.2.2) and
// reads one answer; on a connection of its own anything else is an error.
func exchangeTCP(conn net.Conn, msg []byte, q *query, id uint16) (*mdns.Msg, []byte, error) {
	// One write, so the length and the message leave in one segment
	// (RFC 7766 section 8).
	framed := make([]byte, 2+len(msg))
	binary.BigEndian.PutUint16(framed, uint16(len(msg)))
	copy(framed[2:], msg)
	if _, err := conn.Write(framed); err != nil {
		return nil, nil, err
	}
	answer, err := readFramed(conn, nil)
	if err != nil {
		return nil, nil, err
	}
	m, err := checkAnswer(answer, q, id)
	if err != nil {
		return nil, nil, err
	}
	return m, answer, nil
}

// readFramed reads one length-prefixed message (RFC 1035 4.2.2) into buf,
// grown as needed. A connection closed between messages returns io.EOF;
// one closed inside a message, io.ErrUnexpectedEOF.
func readFramed(r io.Reader, buf []byte) ([]byte, error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(l[:]))
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf, nil
}
