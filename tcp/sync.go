package tcp

import (
	"context"
)

// Sync: an explicit "every connection has handled what it was given", for
// tests and tools (stack.Stack.Sync). A marker travels through each
// connection's mailbox behind the segments queued before it, so it is
// ordered with them by the same queue rather than inferred from a side
// effect; run answers it once the event that took it has sent its output.

// Sync returns once every connection's goroutine has handled what was
// queued for it when Sync was called (segments, the application's requests,
// timer expiries already due) and sent what that called for, or has ended.
// Segments still in the IPv4 dealer are not covered: stack.Stack.Sync syncs
// the dealers first. Sync returns ctx's error if ctx ends first.
func (p *Protocol) Sync(ctx context.Context) error {
	p.mu.RLock()
	conns := make([]*Conn, 0, len(p.conns))
	for _, c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.RUnlock()
	for _, c := range conns {
		if err := c.sync(ctx); err != nil {
			return err
		}
	}
	return nil
}

// sync queues a marker behind c's segments and waits for run to answer it.
func (c *Conn) sync(ctx context.Context) error {
	synced := make(chan struct{})
	if !c.in.putMarker(synced) {
		return nil // run has exited: nothing is queued
	}
	select {
	case <-synced:
		return nil
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// takeMarker holds a Sync marker from the mailbox until the event that took
// it is over; run owns syncs.
func (c *Conn) takeMarker(seg *segment) {
	c.syncs = append(c.syncs, seg.synced)
}

// answerSyncs returns the Sync markers the event took, to answer once mu
// is released (and, if the connection ended, after exit). The event that
// took a marker has also handled the timer if due and the application's
// requests (event), and sent their output, so nothing queued before the
// marker is left behind it.
func (c *Conn) answerSyncs() []chan struct{} {
	syncs := c.syncs
	c.syncs = nil
	return syncs
}

// answer closes the Sync markers' channels.
func answer(syncs []chan struct{}) {
	for _, s := range syncs {
		close(s)
	}
}
