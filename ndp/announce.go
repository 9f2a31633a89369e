package ndp

import (
	"context"
	"sync"

	"github.com/gonetstack/gonet/dealer"
)

// The announcer: one goroutine per Protocol that carries out, in order,
// what the critical sections under p.mu decided: sending messages (which
// may go through Output, which takes p.mu) and telling Host (which may
// call back into ndp). A section queues such work with later; unlock
// appends it to the announcer's queue before releasing p.mu, so the queue
// holds the work of successive sections in the order they ran.

// announcer is the queue of work and the wake-up of its goroutine.
type announcer struct {
	mu   sync.Mutex
	work []func()
	wake chan struct{} // capacity one: a token means work may be queued
}

// later queues f to run on the announcer once p.mu is released; p.mu is
// held. Nothing is queued once ndp is closed.
func (p *Protocol) later(f func()) {
	if !p.closed {
		p.pending = append(p.pending, f)
	}
}

// unlock hands the work queued under p.mu to the announcer and releases
// p.mu.
func (p *Protocol) unlock() {
	if len(p.pending) == 0 {
		p.mu.Unlock()
		return
	}
	p.out.mu.Lock()
	p.out.work = append(p.out.work, p.pending...)
	p.out.mu.Unlock()
	clear(p.pending)
	p.pending = p.pending[:0]
	p.mu.Unlock()
	select {
	case p.out.wake <- struct{}{}:
	default:
	}
}

// announce runs the queued work until ndp closes; what is queued by then
// still runs (sends on a closing NIC are dropped and counted there), so
// that no packet is stranded in a closure.
func (p *Protocol) announce() {
	defer p.wg.Done()
	var work []func()
	for {
		select {
		case <-p.out.wake:
		case <-p.done:
			p.runQueued(work)
			return
		}
		work = p.runQueued(work)
	}
}

// runQueued runs everything queued, batch after batch, and returns the
// emptied slice for reuse.
func (p *Protocol) runQueued(work []func()) []func() {
	for {
		p.out.mu.Lock()
		work, p.out.work = p.out.work, work[:0]
		p.out.mu.Unlock()
		if len(work) == 0 {
			return work
		}
		for i, f := range work {
			f()
			work[i] = nil
		}
	}
}

// Sync returns once ndp has carried out what the messages handled, the
// timers fired and the calls made before it asked for: messages queued on
// the NIC, Host told. It does not wait for what resolutions, DAD and router
// solicitation, which run on goroutines of their own, do next. It returns
// ctx's error if ctx ends first, and dealer.ErrClosed once ndp is closed.
func (p *Protocol) Sync(ctx context.Context) error {
	done := make(chan struct{})
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return dealer.ErrClosed
	}
	p.pending = append(p.pending, func() { close(done) })
	p.unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
