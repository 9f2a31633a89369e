package tcp_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// Time bounds (timeouts.go): the user timeout of RFC 5482, an orphan's
// zero-window probes, half-open connections and an orphaned FIN-WAIT-2.

// Data unacknowledged for the user timeout aborts the connection with a
// reset and ETIMEDOUT, on time although the next retransmission was due
// later; whether the timeout came from the Config or from SetUserTimeout.
func TestUserTimeoutAbortsUnacknowledgedData(t *testing.T) {
	const ut = 2 * time.Second
	tests := []struct {
		name string
		cfg  tcp.Config
		set  time.Duration
	}{
		{"Config.UserTimeout", tcp.Config{UserTimeout: ut}, 0},
		{"SetUserTimeout", tcp.Config{}, ut},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.cfg)
			c, p := r.accepted(rawtest.TCPOpts{})
			if tt.set != 0 {
				if err := c.SetUserTimeout(tt.set); err != nil {
					t.Fatal(err)
				}
			}
			read := readAsync(c, 10)
			write(t, c, pattern(100))
			una := p.rcv
			p.expectData(100, true)
			// Retransmissions after 200, 400 and 800 ms (1.4 s); the next
			// would come at 3 s, after the user timeout.
			for _, d := range []time.Duration{rtoMin, 2 * rtoMin, 4 * rtoMin} {
				p.expectAfter(d, una, 100)
			}
			p.advance(ut - 7*rtoMin - time.Millisecond)
			p.nothing()
			blocked(t, read)
			p.advance(time.Millisecond)
			p.expect(R|A, una+100, p.nxt, 0)
			if res := wait(t, read); !isErr(res.err, syscall.ETIMEDOUT) {
				t.Errorf("read: %v, want ETIMEDOUT", res.err)
			}
			p.waitState("")
			r.wantCounters(map[string]int64{"UserTimeoutAborts": 1, "TimeoutAborts": 0})
		})
	}
}

// An ACK that takes the outstanding data stops the user timeout's clock:
// data written later has the whole timeout again.
func TestUserTimeoutRestartsWhenDataIsAcknowledged(t *testing.T) {
	const ut = time.Second
	r := newRig(t, tcp.Config{UserTimeout: ut})
	c, p := r.accepted(rawtest.TCPOpts{})
	write(t, c, pattern(10))
	una := p.rcv
	p.expectData(10, true)
	p.expectAfter(rtoMin, una, 10) // the RTO is now 400 ms
	p.ack()
	p.settle()
	start := r.h.Clock.Now()
	write(t, c, pattern(10))
	una = p.rcv
	p.expectData(10, true)
	p.expectAfter(2*rtoMin, una, 10) // the next would be 800 ms later
	left := ut - 2*rtoMin
	p.advance(left - time.Millisecond)
	p.nothing()
	p.advance(time.Millisecond)
	p.expect(R|A, una+10, p.nxt, 0)
	if d := r.h.Clock.Now().Sub(start); d != ut {
		t.Errorf("aborted %v after the second write, want %v", d, ut)
	}
	r.wantCounters(map[string]int64{"UserTimeoutAborts": 1})
}

// A peer that answers every zero-window probe but never opens its window
// keeps a connection for ever under Retries; the user timeout bounds it.
func TestUserTimeoutBoundsAClosedWindow(t *testing.T) {
	const ut = time.Second
	r := newRig(t, tcp.Config{UserTimeout: ut})
	c, p := r.accepted(rawtest.TCPOpts{})
	p.wnd = 0
	p.ack()
	p.settle()
	write(t, c, pattern(100))
	una := p.rcv
	p.expectAfter(rtoMin, una, 1)
	p.ack()
	p.expectAfter(2*rtoMin, una, 1)
	p.ack()
	p.advance(ut - 3*rtoMin - time.Millisecond) // the next probe was due at 1.4 s
	p.nothing()
	p.advance(time.Millisecond)
	p.expect(R|A, una, p.nxt, 0) // the closed window's edge: the probe's byte is not the peer's
	p.waitState("")
	r.wantCounters(map[string]int64{"UserTimeoutAborts": 1, "PersistProbes": 2})
}

// No one waits for a connection the application has closed: one stuck
// with unsent data behind a closed window is aborted after OrphanRetries
// probes even though the peer answers them; an open one is probed on.
func TestOrphanBehindAClosedWindowIsAbortedAfterOrphanRetries(t *testing.T) {
	const retries = 2
	tests := []struct {
		name   string
		closed bool
	}{
		{"closed by the application", true},
		{"still open", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{OrphanRetries: retries})
			c, p := r.accepted(rawtest.TCPOpts{})
			p.wnd = 0
			p.ack()
			p.settle()
			write(t, c, pattern(100))
			if tt.closed {
				c.Close()
			}
			una := p.rcv
			next := rtoMin
			for range retries {
				p.expectAfter(next, una, 1)
				p.ack()
				next *= 2
			}
			if !tt.closed {
				p.expectAfter(next, una, 1)
				r.wantCounters(map[string]int64{"OrphanAborts": 0, "PersistProbes": retries + 1})
				return
			}
			p.advance(next)
			p.expect(R|A, una, p.nxt, 0) // the closed window's edge: the probe's byte is not the peer's
			p.waitState("")
			r.wantCounters(map[string]int64{"OrphanAborts": 1, "PersistProbes": retries, "TimeoutAborts": 0})
		})
	}
}

// A half-open connection whose client never completes the handshake is
// reaped after SynAckRetries retransmissions of the SYN-ACK (1, 2, 4, 8
// and 16 s, then 32 s for the last answer): it leaves the table, the
// backlog and the memory budget.
func TestHalfOpenConnectionIsReapedAfterSynAckRetries(t *testing.T) {
	r := newRig(t, tcp.Config{})
	r.listen(1)
	_, p := r.synAckISN(peerPort)
	d := time.Second
	for range 5 {
		if s := p.expectAfter(d, p.iss, 0); s.Flags != S|A {
			t.Fatalf("retransmission %v, want the SYN-ACK", s)
		}
		d *= 2
	}
	p.advance(d - time.Millisecond)
	if st := p.state(); st != "SYN-RECEIVED" {
		t.Fatalf("state %q before the last timeout, want SYN-RECEIVED", st)
	}
	p.advance(time.Millisecond)
	p.waitState("")
	r.nothing()
	waitFor(t, "the budget back to zero", func() bool { return r.h.S.Budget().Used() == 0 })
	r.wantCounters(map[string]int64{"AttemptFails": 1, "Timeouts": 5})
	r.synAckISN(peerPort + 1) // the backlog's place is free again
}

// FIN-WAIT-2 is bounded for an orphan (FinTimeout, 60 s by default, as
// tcp_fin_timeout) but not for a connection that only shut its sending
// side, whose application still reads (RFC 9293 puts no bound on it).
func TestFinWait2IsBoundedForOrphansOnly(t *testing.T) {
	const finTimeout = 60 * time.Second
	tests := []struct {
		name  string
		close func(c *tcp.Conn) error
		ends  bool
	}{
		{"Close: an orphan", (*tcp.Conn).Close, true},
		{"CloseWrite: still read", (*tcp.Conn).CloseWrite, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{})
			c, p := r.accepted(rawtest.TCPOpts{})
			if err := tt.close(c); err != nil {
				t.Fatal(err)
			}
			p.expect(F|A, p.rcv, p.nxt, 0)
			p.ack()
			p.waitState("FIN-WAIT-2")
			p.advance(finTimeout - time.Millisecond)
			p.nothing()
			if st := p.state(); st != "FIN-WAIT-2" {
				t.Fatalf("state %q before FinTimeout, want FIN-WAIT-2", st)
			}
			p.advance(time.Millisecond)
			if tt.ends {
				p.waitState("")
				r.nothing()
				waitFor(t, "the budget back to zero", func() bool { return r.h.S.Budget().Used() == 0 })
				return
			}
			p.advance(10 * time.Hour)
			r.nothing()
			if st := p.state(); st != "FIN-WAIT-2" {
				t.Errorf("state %q long after CloseWrite, want FIN-WAIT-2", st)
			}
			p.send(F|A, nil) // the peer's FIN still completes the close
			p.expectACK()
			p.waitState("TIME-WAIT")
		})
	}
}

// An orphan whose data goes unacknowledged is aborted after OrphanRetries
// retransmissions, before Retries, which still bounds a connection whose
// application waits.
func TestOrphanRetransmissionsAreBoundedByOrphanRetries(t *testing.T) {
	const orphanRetries, retries = 2, 4
	tests := []struct {
		name    string
		closed  bool
		resends int
		counter string
	}{
		{"closed by the application", true, orphanRetries, "OrphanAborts"},
		{"still open", false, retries, "TimeoutAborts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{OrphanRetries: orphanRetries, Retries: retries})
			c, p := r.accepted(rawtest.TCPOpts{})
			write(t, c, pattern(100))
			una := p.rcv
			p.expectData(100, true)
			if tt.closed {
				c.Close()
				p.expect(F|A, una+100, p.nxt, 0) // the FIN follows the data
			}
			next := rtoMin
			for range tt.resends {
				p.advance(next - time.Millisecond)
				p.nothing()
				p.advance(time.Millisecond)
				// The data again, and the FIN with it after Close.
				if s := p.nextSeg(); s.Seq != una || len(s.Payload) != 100 || (s.Flags&F != 0) != tt.closed {
					t.Fatalf("after %v: %v, want the 100 bytes at %d again", next, s, una)
				}
				next *= 2
			}
			p.advance(next)
			if s := p.nextSeg(); s.Flags != R|A {
				t.Fatalf("after %d retransmissions: %v, want a reset", tt.resends, s)
			}
			p.waitState("")
			r.wantCounters(map[string]int64{tt.counter: 1, "Timeouts": int64(tt.resends)})
		})
	}
}
