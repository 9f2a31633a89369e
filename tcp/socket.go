package tcp

import (
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/internal/deadline"
)

// socket is the application's side of a connection: the send buffer and
// receive queue, the shutdown and close requests, the socket options, and
// the wake-ups and deadlines Read and Write wait on. The application's
// goroutines and the connection's share it, under the connection's mu.
type socket struct {
	sndBuf     sendBuffer // data written and not yet acknowledged (buffers.go)
	sndBufSize int
	rcvBuf     rcvQueue // data received in order and not yet read (buffers.go)
	rcvBufSize int
	rcvEOF     bool  // FIN received and all data before it queued
	err        error // why the connection ended (ECONNRESET, ETIMEDOUT...)
	wrShut     bool  // CloseWrite or Close: FIN once the send buffer drains
	rdShut     bool  // CloseRead or Close
	closed     bool  // Close called
	abortReq   error // the application (or the stack) asks for a reset

	// Socket options.
	noDelay     bool
	keepalive   bool
	kaIdle      time.Duration
	kaInterval  time.Duration
	kaCount     int
	kaReset     bool          // keepalive settings changed: run restarts the idle clock
	linger      int           // seconds; -1: default (close in the background)
	userTimeout time.Duration // RFC 9293 3.8.3 (timeouts.go)

	// Wake-ups for Read and Write, and their deadlines.
	readable, writable waker
	readDL, writeDL    *deadline.Deadline
}

// socketDefaults is a socket with p's buffer sizes and keepalive settings,
// without its wake-ups and deadlines.
func socketDefaults(p *Protocol) socket {
	return socket{
		sndBufSize:  p.cfg.SendBuffer,
		rcvBufSize:  p.cfg.ReceiveBuffer,
		noDelay:     true, // as Go's net package sets TCP_NODELAY
		kaIdle:      p.cfg.KeepaliveIdle,
		kaInterval:  p.cfg.KeepaliveInterval,
		kaCount:     p.cfg.KeepaliveCount,
		linger:      -1,
		userTimeout: p.cfg.UserTimeout,
	}
}

// newSocket makes a socket with p's buffer sizes and keepalive settings.
// Its deadlines wake Read and Write through their own wake-ups, so that a
// blocked Read or Write waits on one channel.
func newSocket(p *Protocol, clk clock.Clock) socket {
	s := socketDefaults(p)
	s.readable, s.writable = newWaker(), newWaker()
	s.readDL = deadline.NewWaking(clk, s.readable.wake)
	s.writeDL = deadline.NewWaking(clk, s.writable.wake)
	return s
}
