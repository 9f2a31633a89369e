package tcp_test

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/tcp"
)

// Initial sequence numbers (RFC 6528), ephemeral ports (RFC 6056) and the
// listen backlog.

// synAckISN sends a SYN from port and returns the stack's ISN.
func (r *rig) synAckISN(port uint16) (uint32, *peer) {
	r.t.Helper()
	p := r.synPeer(port, peerISN, rawtest.TCPOpts{})
	s := p.seg(S, nil)
	p.inject(s)
	p.nxt++
	sa := p.nextSeg()
	if sa.Flags != S|A || sa.Ack != p.nxt {
		r.t.Fatalf("SYN-ACK %v", sa)
	}
	p.iss, p.rcv = sa.Seq, sa.Seq+1
	return sa.Seq, p
}

func dist(a, b uint32) uint32 {
	d := a - b
	if int32(d) < 0 {
		d = -d
	}
	return d
}

// RFC 6528: ISN = M + F(4-tuple, secret). Connections that differ in a port
// get unrelated numbers; so does the same 4-tuple on a stack with another
// secret.
func TestISNsAreUnrelatedAcrossConnections(t *testing.T) {
	r := newRig(t, tcp.Config{})
	r.listen(0)
	a, _ := r.synAckISN(40000)
	b, _ := r.synAckISN(40001)
	if d := dist(a, b); d < 1<<20 {
		t.Errorf("ISNs %d and %d for neighbouring ports are %d apart: predictable", a, b, d)
	}
	h := rawtest.New(t, stack.Config{Rand: rand.NewPCG(3, 4), ARP: arp.Config{CacheTTL: 10000 * time.Hour}})
	h.LearnPeer(t)
	r2 := &rig{t: t, h: h}
	r2.listen(0)
	c, _ := r2.synAckISN(40000)
	if d := dist(a, c); d < 1<<20 {
		t.Errorf("ISNs %d and %d for the same 4-tuple on stacks with different secrets are %d apart", a, c, d)
	}
}

// The same 4-tuple later gets a larger ISN: M ticks every 4 microseconds
// (RFC 6528 section 3, RFC 9293 3.4.1).
func TestISNGrowsWithTheClock(t *testing.T) {
	r := newRig(t, tcp.Config{})
	r.listen(0)
	first, p := r.synAckISN(40000)
	p.send(R, nil)
	p.waitState("")
	p.advance(time.Second)
	second, _ := r.synAckISN(40000)
	if d := second - first; d != 250000 {
		t.Errorf("ISN %d one second after %d: %d later, want 250000 (1 s / 4 µs)", second, first, d)
	}
}

// RFC 6056 3.3.1: the ephemeral port of an active open is chosen at random
// in the range, not in sequence.
func TestEphemeralPortsAreRandomInTheRange(t *testing.T) {
	const lo, hi = 50000, 50099
	r := newRig(t, tcp.Config{EphemeralLow: lo, EphemeralHigh: hi})
	var ports []uint16
	for i := range 12 {
		ctx, cancel := context.WithCancel(context.Background())
		ch := r.dial(ctx, netip.AddrPortFrom(rawtest.PeerAddr, uint16(80+i)))
		syn := r.nextSeg()
		cancel()
		if res := waitDial(t, ch); res.err == nil {
			t.Fatal("dial succeeded without a SYN-ACK")
		}
		port := syn.Src.Port()
		if port < lo || port > hi {
			t.Errorf("ephemeral port %d outside %d-%d", port, lo, hi)
		}
		ports = append(ports, port)
	}
	sequential := true
	distinct := map[uint16]bool{}
	for i, p := range ports {
		distinct[p] = true
		if i > 0 && p != ports[i-1]+1 {
			sequential = false
		}
	}
	if sequential || len(distinct) < len(ports)/2 {
		t.Errorf("ports %v: want them scattered over the range", ports)
	}
}

// The backlog bounds half-open and established-but-unaccepted
// connections together; without SYN cookies (syncookie_test.go) a SYN
// beyond it is dropped (the client retries) and counted in ListenOverflows.
func TestListenBacklog(t *testing.T) {
	r := newRig(t, tcp.Config{SynCookies: tcp.SynCookiesNever})
	l := r.listen(2)
	_, p1 := r.synAckISN(40001)
	r.synAckISN(40002)
	syn := func(port uint16) {
		q := r.synPeer(port, peerISN, rawtest.TCPOpts{})
		q.inject(q.seg(S, nil))
	}
	syn(40003)
	r.nothing()
	if n := r.counter("ListenOverflows"); n != 1 {
		t.Errorf("ListenOverflows = %d, want 1", n)
	}
	// One handshake completes; unaccepted, it still takes its place.
	p1.ack()
	p1.waitState("ESTABLISHED")
	syn(40004)
	r.nothing()
	if n := r.counter("ListenOverflows"); n != 2 {
		t.Errorf("ListenOverflows = %d, want 2", n)
	}
	// Accept frees a place.
	c := acceptOne(t, l)
	if c.RemoteAddr().String() != p1.addr.String() {
		t.Errorf("accepted %v, want %v", c.RemoteAddr(), p1.addr)
	}
	r.synAckISN(40005)
	r.nothing()
}
