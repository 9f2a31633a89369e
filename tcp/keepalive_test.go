package tcp_test

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// Keepalive (RFC 9293 3.8.4, RFC 1122 4.2.3.6): off unless the application
// asks; a probe is a segment the peer has already acknowledged, SEQ =
// SND.UNA-1, which it must answer with an ACK.

func TestKeepaliveIsOffByDefault(t *testing.T) {
	r := newRig(t, tcp.Config{})
	_, p := r.accepted(rawtest.TCPOpts{})
	p.advance(5 * time.Hour)
	r.nothing()
	if st := p.state(); st != "ESTABLISHED" {
		t.Errorf("state %q, want ESTABLISHED", st)
	}
	if n := r.counter("KeepaliveProbes"); n != 0 {
		t.Errorf("KeepaliveProbes = %d", n)
	}
}

// expectProbe checks for a keepalive probe: no data, SEQ = SND.UNA-1.
func (p *peer) expectProbe(after time.Duration) {
	p.t.Helper()
	p.advance(after - time.Millisecond)
	p.nothing()
	p.advance(time.Millisecond)
	p.expect(A, p.rcv-1, p.nxt, 0)
}

func TestKeepaliveProbesAnIdleConnection(t *testing.T) {
	const period = 30 * time.Second
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{})
	c.SetKeepAlive(true)
	c.SetKeepAlivePeriod(period)
	for range 3 {
		p.expectProbe(period)
		p.ack() // the answer restarts the idle time
	}
	r.nothing()
	if st := p.state(); st != "ESTABLISHED" {
		t.Errorf("state %q, want ESTABLISHED", st)
	}
	if n := r.counter("KeepaliveProbes"); n != 3 {
		t.Errorf("KeepaliveProbes = %d, want 3", n)
	}
}

func TestKeepaliveUnansweredTimesOut(t *testing.T) {
	const idle, interval = 10 * time.Second, 5 * time.Second
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{})
	read := readAsync(c, 10)
	c.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: idle, Interval: interval, Count: 3})
	p.expectProbe(idle)
	p.expectProbe(interval)
	p.expectProbe(interval)
	blocked(t, read)
	p.advance(interval)
	p.expect(R|A, p.rcv, p.nxt, 0)
	if res := wait(t, read); !isErr(res.err, syscall.ETIMEDOUT) {
		t.Errorf("read: %v, want ETIMEDOUT", res.err)
	}
	p.waitState("")
	r.nothing()
	if n := r.counter("KeepaliveAborts"); n != 1 {
		t.Errorf("KeepaliveAborts = %d, want 1", n)
	}
}

// With data in flight the retransmission timer watches the peer: no
// keepalive probe is sent then (as Linux's keepalive timer skips one).
func TestKeepaliveSkippedWhileDataIsInFlight(t *testing.T) {
	const period = 3 * time.Second
	r := newRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{})
	c.SetKeepAlive(true)
	c.SetKeepAlivePeriod(period)
	write(t, c, pattern(100))
	p.expectData(100, true)
	// Unacknowledged: the RTO (1 s, then 2 s, ...) retransmits; the
	// keepalive deadline passes in between without a probe.
	r.advance(4 * period)
	for _, s := range r.sent() {
		if len(s.Payload) == 0 && s.Seq == p.iss {
			t.Errorf("keepalive probe %v sent with data in flight", s)
		}
	}
	if n := r.counter("KeepaliveProbes"); n != 0 {
		t.Errorf("KeepaliveProbes = %d, want 0", n)
	}
	if n := r.counter("RetransSegs"); n == 0 {
		t.Errorf("no retransmission in %v with data in flight", 4*period)
	}
}
