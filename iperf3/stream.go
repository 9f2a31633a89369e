package iperf3

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/gonetstack/gonet/clock"
)

// pacingSlack is how far ahead of its rate a sender may run before it
// sleeps: iperf3's default pacing timer, one millisecond. Sleeping for
// less than that costs more in timers than it gains in smoothness.
const pacingSlack = time.Millisecond

// pacer holds a sender to a rate in bits per second; zero is no limit.
type pacer struct {
	rate  uint64
	start time.Time
	bytes uint64
}

// sent accounts for n bytes sent and sleeps until the rate allows the
// next, returning false when ctx is done first.
func (p *pacer) sent(ctx context.Context, n int) bool {
	if p.rate == 0 {
		return ctx.Err() == nil
	}
	p.bytes += uint64(n)
	due := p.start.Add(time.Duration(float64(p.bytes*8) / float64(p.rate) * float64(time.Second)))
	ahead := time.Until(due)
	if ahead < pacingSlack {
		return ctx.Err() == nil
	}
	return clock.Sleep(ctx, clock.Real{}, ahead)
}

// stream is one data stream of a test, on either side: its id, which
// way data flows, and the counts taken while the test runs.
type stream struct {
	id     int
	sender bool // this side sends on it
	udp    bool
	wide   bool // 64-bit UDP packet counts

	mu       sync.Mutex
	counting bool   // between TEST_RUNNING and TEST_END
	sent     uint64 // bytes sent
	packets  uint64 // UDP datagrams sent
	recv     udpReceiver
	tcpBytes uint64 // bytes received on a TCP stream
}

// stop ends the counting: what arrives after TEST_END is not the test's.
func (s *stream) stop() {
	s.mu.Lock()
	s.counting = false
	s.mu.Unlock()
}

// received accounts for n bytes read from a TCP stream.
func (s *stream) received(n int) {
	s.mu.Lock()
	if s.counting {
		s.tcpBytes += uint64(n)
	}
	s.mu.Unlock()
}

// datagram accounts for a UDP datagram received at arrival; one too
// short for a header counts as bytes only, as iperf3's receiver would
// read garbage counts from it.
func (s *stream) datagram(b []byte, arrival time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.counting {
		return
	}
	d := datagram(b)
	if !d.valid(s.wide) {
		s.recv.bytes += uint64(len(b))
		return
	}
	s.recv.add(len(b), d.count(s.wide), d.sentMicros(), arrival.UnixMicro())
}

// results returns the stream's counts as iperf3 reports them to the
// peer, for a test that ran for elapsed.
func (s *stream) results(elapsed time.Duration) StreamResults {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := StreamResults{ID: s.id, Retransmits: -1, EndTime: elapsed.Seconds()}
	switch {
	case s.sender:
		r.Bytes, r.Packets = s.sent, Int(s.packets)
	case s.udp:
		r.Bytes, r.Packets = s.recv.bytes, Int(s.recv.highest)
		r.Errors, r.Jitter = Int(s.recv.lost), s.recv.Jitter().Seconds()
	default:
		r.Bytes = s.tcpBytes
	}
	return r
}

// outOfOrder returns the UDP datagrams received out of order.
func (s *stream) outOfOrder() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recv.outOfOrder
}

// sendTCP writes blocks of blockLen bytes to c, at most rate bits per
// second, until ctx is done or a write fails (the test's end closes c).
func (s *stream) sendTCP(ctx context.Context, c net.Conn, blockLen int, rate uint64) {
	block := make([]byte, blockLen)
	p := pacer{rate: rate, start: time.Now()}
	for {
		n, err := c.Write(block)
		// Every byte the stack took is counted, also after TEST_END
		// (a write the end interrupted): the receiver may yet get it.
		s.mu.Lock()
		s.sent += uint64(n)
		s.mu.Unlock()
		if err != nil || !p.sent(ctx, n) {
			return
		}
	}
}

// receiveTCP reads c until it fails or is closed.
func (s *stream) receiveTCP(c net.Conn, blockLen int) {
	buf := make([]byte, max(blockLen, 64<<10))
	for {
		n, err := c.Read(buf)
		s.received(n)
		if err != nil {
			return
		}
	}
}

// sendUDP sends datagrams of blockLen bytes with write, numbered from
// 1, at rate bits per second (iperf3's client always gives UDP one),
// until ctx is done or write fails for good. A datagram the stack cannot
// send now (its queue full) is counted as sent, as the kernel's UDP
// counts a datagram its device queue drops: the receiver counts it lost.
func (s *stream) sendUDP(ctx context.Context, write func([]byte) (int, error), blockLen int, rate uint64) {
	block := make([]byte, max(blockLen, headerLen(s.wide)))
	p := pacer{rate: rate, start: time.Now()}
	for {
		s.mu.Lock()
		s.packets++
		count := s.packets
		s.mu.Unlock()
		datagram(block).encode(time.Now(), count, s.wide)
		if _, err := write(block); err != nil && isClosed(err) {
			// Not sent: the count goes back, or the receiver
			// would be told of a datagram it could never see.
			s.mu.Lock()
			s.packets--
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		s.sent += uint64(len(block))
		s.mu.Unlock()
		if !p.sent(ctx, len(block)) {
			return
		}
	}
}

// receiveUDP reads datagrams from a connected c until it fails or is
// closed.
func (s *stream) receiveUDP(c net.Conn) {
	buf := make([]byte, maxDatagram)
	for {
		n, err := c.Read(buf)
		if err != nil {
			if isClosed(err) {
				return
			}
			continue
		}
		s.datagram(buf[:n], time.Now())
	}
}

// maxDatagram is the largest UDP payload of either family.
const maxDatagram = 65535 - 8

// isClosed reports whether err means the endpoint is done with: closed,
// or past a deadline (the test's end cuts a write short with one),
// rather than one datagram refused (an ICMP error reported on a
// connected endpoint, a full queue).
func isClosed(err error) bool {
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return true
	}
	return errors.Is(err, net.ErrClosed)
}
