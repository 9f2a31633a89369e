package igmp

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/gonetstack/gonet/budget"
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/wire"
)

// harness drives one Protocol on a virtual clock and records what it
// sends.
type harness struct {
	t    *testing.T
	p    *Protocol
	clk  *stepClock
	pool *buffer.Pool
	mtu  int // the interface's; 1500 unless a test sets it

	mu   sync.Mutex
	sent []sentMsg
}

// sentMsg is one message IGMP sent, with the time it did.
type sentMsg struct {
	at  time.Duration // since the harness started
	dst netip.Addr
	msg wire.IGMP
}

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, clk: newStepClock(), pool: buffer.NewPool(), mtu: 1500}
	e := &env.Env{Clock: h.clk, Rand: env.NewRand(rand.NewPCG(1, 2)), Pool: h.pool, Budget: budget.New(1 << 20)}
	h.p = New("eth0", h, cfg, e)
	t.Cleanup(func() {
		h.p.Close()
		if n := h.pool.Outstanding(); n != 0 {
			t.Errorf("%d buffers outstanding", n)
		}
	})
	return h
}

// MTU is the interface's, as the harness has it.
func (h *harness) MTU() int { return h.mtu }

// SendIGMP records a message: the harness is the interface's output.
func (h *harness) SendIGMP(dst netip.Addr, pkt *buffer.Packet) {
	defer pkt.Release()
	m, verr := wire.ParseIGMP(pkt.Bytes())
	if verr != wire.IGMPOK {
		h.t.Errorf("sent an invalid message %x: %v", pkt.Bytes(), verr)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sent = append(h.sent, sentMsg{h.clk.Now().Sub(start), dst, append(wire.IGMP(nil), m...)})
}

// take returns what was sent since the last call.
func (h *harness) take() []sentMsg {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sent
	h.sent = nil
	return s
}

// receive hands the protocol a message to dst, as the IPv4 dealer does.
func (h *harness) receive(dst netip.Addr, msg []byte) {
	const hl = wire.IPv4MinHeaderLen + 4
	pk := h.pool.Get(hl + len(msg))
	copy(pk.Bytes()[hl:], msg)
	h.p.HandleIP(pk, ip.Header{Src: netip.MustParseAddr("192.0.2.254"), Dst: dst, TTL: 1, Off: hl})
}

func (h *harness) advance(d time.Duration) { h.clk.advance(d) }

// v3Query builds a version 3 query.
func v3Query(maxRespCode uint8, group netip.Addr, qrv uint8) []byte {
	b := make([]byte, wire.IGMPv3QueryLen)
	wire.EncodeIGMPv3Query(b, &wire.IGMPv3QueryFields{MaxRespCode: maxRespCode, Group: group, QRV: qrv, QQIC: 125})
	return b
}

// v3QueryAbout builds a version 3 query about group and sources: a
// group-and-source-specific one, with sources.
func v3QueryAbout(maxRespCode uint8, group netip.Addr, sources ...netip.Addr) []byte {
	b := make([]byte, wire.IGMPv3QueryLen+4*len(sources))
	wire.EncodeIGMPv3Query(b, &wire.IGMPv3QueryFields{MaxRespCode: maxRespCode, Group: group, QRV: 2, QQIC: 125, Sources: sources})
	return b
}

// v2Message builds a version 1 or 2 message.
func v2Message(typ, maxResp uint8, group netip.Addr) []byte {
	b := make([]byte, wire.IGMPv2Len)
	wire.EncodeIGMPv2(b, typ, maxResp, group)
	return b
}

// stepClock is a virtual clock whose advance returns only once every
// timer it fired has run, so a test sees what they sent.
type stepClock struct {
	*clock.Virtual
	mu     sync.Mutex
	timers map[*stepTimer]bool
}

type stepTimer struct {
	c    *stepClock
	t    clock.Timer
	when time.Time
	done chan struct{}
}

func newStepClock() *stepClock {
	return &stepClock{Virtual: clock.NewVirtual(start), timers: map[*stepTimer]bool{}}
}

func (c *stepClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	st := &stepTimer{c: c, when: c.Now().Add(d), done: make(chan struct{})}
	c.mu.Lock()
	c.timers[st] = true
	c.mu.Unlock()
	st.t = c.Virtual.AfterFunc(d, func() {
		defer close(st.done)
		f()
	})
	return st
}

func (t *stepTimer) C() <-chan time.Time { return nil }

func (t *stepTimer) Stop() bool {
	t.c.mu.Lock()
	delete(t.c.timers, t)
	t.c.mu.Unlock()
	return t.t.Stop()
}

func (t *stepTimer) Reset(time.Duration) bool { panic("igmp uses AfterFunc and Stop only") }

// advance moves the clock by d, waiting for each timer due on the way,
// those armed by timers that ran included.
func (c *stepClock) advance(d time.Duration) {
	target := c.Now().Add(d)
	for {
		c.mu.Lock()
		var due []*stepTimer
		for t := range c.timers {
			if !t.when.After(target) {
				due = append(due, t)
				delete(c.timers, t)
			}
		}
		c.mu.Unlock()
		if len(due) == 0 {
			c.Set(target)
			return
		}
		// Fire them in order of deadline: the earliest first.
		first := due[0]
		for _, t := range due {
			if t.when.Before(first.when) {
				first = t
			}
		}
		c.mu.Lock()
		for _, t := range due {
			if t != first {
				c.timers[t] = true
			}
		}
		c.mu.Unlock()
		c.Set(first.when)
		select {
		case <-first.done:
		case <-time.After(5 * time.Second):
			panic("a timer due did not run")
		}
	}
}
