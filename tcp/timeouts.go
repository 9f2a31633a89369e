package tcp

import (
	"syscall"
	"time"
)

// Time bounds beyond the retransmission count: the user timeout of RFC
// 5482 and the limits on an orphaned connection's retransmissions and
// zero-window probes. (The others: SynAckRetries reaps half-open
// connections, FinTimeout an orphaned FIN-WAIT-2, and TIME-WAIT lasts
// 2*MSL.)
//
// RFC 5482 section 1: the user timeout "controls how long transmitted
// data may remain unacknowledged before a connection is forcefully
// closed" (RFC 9293 3.8.3's USER TIMEOUT). As Linux's TCP_USER_TIMEOUT,
// the clock starts when data is outstanding, sent or waiting behind a
// closed window, and restarts when an ACK takes some of it; a peer that
// answers zero-window probes but never opens its window runs it out too.
// The option itself (RFC 5482 section 3) is not sent: it is advisory, and
// Linux does not implement it on the wire either.

// SetUserTimeout sets the user timeout (RFC 5482; Linux's
// TCP_USER_TIMEOUT): once data has been left unacknowledged that long the
// connection is aborted, and Read and Write fail with ETIMEDOUT. Zero (the
// default unless Config.UserTimeout says otherwise) leaves the bound to
// the retransmission count, Config.Retries.
func (c *Conn) SetUserTimeout(d time.Duration) error {
	if d < 0 {
		return c.opError("set", syscall.EINVAL)
	}
	c.mu.Lock()
	c.sock.userTimeout = d
	c.mu.Unlock()
	c.wake()
	return nil
}

// noteOutstanding starts the user timeout's clock, if it is not running,
// as the retransmission or persist timer is armed; mu is held.
func (c *Conn) noteOutstanding(now time.Time) {
	if c.timers.stallSince.IsZero() && c.state.synchronized() {
		c.timers.stallSince = now
	}
}

// noteProgress is told that an ACK took new data: the user timeout's
// clock restarts, or stops if nothing is left to send, and an orphan's
// probe count starts again.
func (c *Conn) noteProgress(now time.Time) {
	c.timers.orphanProbes = 0
	if c.snd.una == c.snd.max && c.sock.sndBuf.n <= int(c.snd.max.Sub(c.snd.bufSeq)) && !c.finPending() {
		c.timers.stallSince = noTime
		return
	}
	c.timers.stallSince = now
}

// userDeadline brings the retransmission timer forward to the user
// timeout's end, so that the abort comes on time rather than up to an
// RTO late (as Linux's tcp_clamp_rto_to_user_timeout).
func (c *Conn) userDeadline(at time.Time) time.Time {
	if c.sock.userTimeout <= 0 || c.timers.stallSince.IsZero() {
		return at
	}
	if end := c.timers.stallSince.Add(c.sock.userTimeout); end.Before(at) {
		return end
	}
	return at
}

// userTimedOut aborts the connection with ETIMEDOUT if its data has been
// unacknowledged for the user timeout, and reports whether it did.
func (c *Conn) userTimedOut(now time.Time) bool {
	if c.sock.userTimeout <= 0 || c.timers.stallSince.IsZero() || now.Before(c.timers.stallSince.Add(c.sock.userTimeout)) {
		return false
	}
	c.p.Stats.UserTimeoutAborts.Inc()
	c.reset(errTimedOut)
	return true
}

// orphanOutOfRetries aborts a connection the application has closed once
// its retransmissions pass OrphanRetries, fewer than Retries by default:
// no one waits for its data, and its peer may be gone (Linux's
// tcp_orphan_retries in tcp_write_timeout). It reports whether it did.
func (c *Conn) orphanOutOfRetries() bool {
	if !c.sock.closed || c.snd.backoff <= c.p.cfg.OrphanRetries || c.snd.backoff > c.p.cfg.Retries {
		return false
	}
	c.p.Stats.OrphanAborts.Inc()
	c.reset(errTimedOut)
	return true
}

// orphanGivesUp counts a zero-window probe of a connection the application
// has closed, and aborts it after OrphanRetries. Answered probes reset
// the count of a connection whose application may still be waiting, but
// no one waits for an orphan: a peer that holds its window closed
// forever would keep it, and its unsent data, for good (Linux's
// tcp_orphan_retries in tcp_probe_timer).
func (c *Conn) orphanGivesUp() bool {
	if !c.sock.closed {
		return false
	}
	c.timers.orphanProbes++
	if c.timers.orphanProbes <= c.p.cfg.OrphanRetries {
		return false
	}
	c.p.Stats.OrphanAborts.Inc()
	c.reset(errTimedOut)
	return true
}
