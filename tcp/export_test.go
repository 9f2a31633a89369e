package tcp

import (
	"testing"
	"time"

	"github.com/gonetstack/gonet/buffer"
)

// Settle waits until every connection's goroutine has handled what was
// queued for it when Settle was called (segments, the application's
// requests, expired timers) and sent what that called for. With
// rawtest's Barrier before it (so the dealer has delivered every injected
// segment) and after it (so every frame sent has been read), a test can
// say the stack sent nothing.
//
// It queues a marker behind the segments, a segment with no TCP header,
// which run releases without effect, and then waits for run to let
// go of the connection's mutex, which it holds until the output of that
// event is sent. A wake-up or a timer expiry already queued is let through
// first, since select would pick between it and the marker at random.
func Settle(tb testing.TB, p *Protocol) {
	tb.Helper()
	p.mu.RLock()
	conns := make([]*Conn, 0, len(p.conns))
	for _, c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.RUnlock()
	for _, c := range conns {
		c.settle(tb)
	}
}

func (c *Conn) settle(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	wait := func(what string, busy func() bool) bool {
		for busy() {
			select {
			case <-c.done:
				return false
			default:
			}
			if time.Now().After(deadline) {
				tb.Fatalf("tcp: Settle: %v: %s", c.id, what)
			}
			time.Sleep(20 * time.Microsecond)
		}
		return true
	}
	now := c.p.env.Clock.Now()
	if !wait("a request or a timer expiry stays queued", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.wakeup) > 0 || !c.timers.armedAt.IsZero() && !c.timers.armedAt.After(now)
	}) {
		return
	}
	pool := buffer.NewPool()
	// A segment without a header: input releases it unread.
	marker := segment{pk: pool.Get(20)}
	pk := marker.pk
	for !c.in.put(&marker) {
		// A full mailbox has room once run takes its batch; a closed
		// one means the goroutine has ended.
		select {
		case <-c.done:
			pk.Release()
			return
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("tcp: Settle: %v: the mailbox stays full", c.id)
		}
		time.Sleep(20 * time.Microsecond)
	}
	if !wait("the marker stays queued", func() bool { return pool.Outstanding() != 0 }) {
		// The goroutine ended; closing its mailbox released the marker.
		return
	}
	// Wait for run's critical section, which lasts until the output of
	// the marker's batch is sent.
	c.mu.Lock()
	_ = c.state
	c.mu.Unlock()
}

// RecoverPoint is the connection's "recover" (RFC 6582).
func RecoverPoint(c *Conn) uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return uint32(c.snd.recover)
}

// InQueueLen is the bound on a connection's mailbox, in segments.
const InQueueLen = inQueueLen

// Hold takes c's mutex, as run does while it works, so that segments wait
// in its mailbox; the function returned lets go.
func Hold(c *Conn) (release func()) {
	c.mu.Lock()
	return c.mu.Unlock
}
