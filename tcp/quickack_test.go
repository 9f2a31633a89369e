package tcp_test

import (
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// Quick ACKs (quickack.go): a young connection, or one whose data paused
// for longer than the RTO, acknowledges data at once, until it has sent
// its quick ACKs or its replies show it interactive.
func TestQuickAcks(t *testing.T) {
	// request sends a small segment of data, as the first half of a
	// request written by a Nagle sender is.
	request := func(p *peer) { p.send(P|A, []byte("request")) }
	// delayed checks that the ACK of what the peer sent waits for the
	// delayed-ACK timer.
	delayed := func(t *testing.T, r *rig, p *peer) {
		t.Helper()
		r.nothing()
		p.advance(delayedAck)
		p.expectACK()
	}
	// quickThenDelayed checks that n requests are acknowledged at once
	// and the next is not.
	quickThenDelayed := func(t *testing.T, r *rig, p *peer, n int) {
		t.Helper()
		for range n {
			request(p)
			p.expectACK()
		}
		request(p)
		delayed(t, r, p)
	}
	// reply reads the request and answers it at once: the answer
	// carries the ACK.
	reply := func(t *testing.T, c *tcp.Conn, p *peer) {
		t.Helper()
		readAll(t, c, len("request"))
		write(t, c, []byte("answer"))
		p.expectData(len("answer"), true)
	}
	tests := []struct {
		name        string
		cfg         tcp.Config
		run         func(t *testing.T, r *rig, c *tcp.Conn, p *peer)
		delayedAcks int64 // ACKs the timer sent
	}{
		{name: "a young connection acknowledges its first data at once",
			run: func(t *testing.T, r *rig, c *tcp.Conn, p *peer) {
				request(p)
				p.expectACK()
			}},
		{name: "quick ACKs run out after QuickAcks", cfg: tcp.Config{QuickAcks: 3}, delayedAcks: 1,
			run: func(t *testing.T, r *rig, c *tcp.Conn, p *peer) { quickThenDelayed(t, r, p, 3) }},
		{name: "a window of less than four segments allows two", cfg: tcp.Config{ReceiveBuffer: 2000, ReceiveBufferMax: 2000}, delayedAcks: 1,
			run: func(t *testing.T, r *rig, c *tcp.Conn, p *peer) { quickThenDelayed(t, r, p, 2) }},
		{name: "a reply makes the connection interactive: the next request's ACK rides on its reply",
			run: func(t *testing.T, r *rig, c *tcp.Conn, p *peer) {
				request(p)
				p.expectACK() // quick: no reply yet to tell
				reply(t, c, p)
				request(p)
				r.nothing()
				reply(t, c, p)
			}},
		{name: "a delayed ACK that had to go alone ends interactive mode", delayedAcks: 1,
			run: func(t *testing.T, r *rig, c *tcp.Conn, p *peer) {
				request(p)
				p.expectACK()
				reply(t, c, p)
				request(p)
				delayed(t, r, p) // no reply came
				request(p)
				p.expectACK() // quick again
			}},
		{name: "a pause longer than the RTO starts quick ACKs again", cfg: tcp.Config{QuickAcks: 1}, delayedAcks: 1,
			run: func(t *testing.T, r *rig, c *tcp.Conn, p *peer) {
				request(p)
				p.expectACK()
				request(p)
				delayed(t, r, p)
				p.advance(3 * time.Second) // the initial RTO is 1 s
				request(p)
				p.expectACK()
			}},
		{name: "none when QuickAcks is negative", cfg: tcp.Config{QuickAcks: -1}, delayedAcks: 1,
			run: func(t *testing.T, r *rig, c *tcp.Conn, p *peer) {
				request(p)
				delayed(t, r, p)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if cfg.QuickAcks == 0 {
				cfg.QuickAcks = 16 // the default, which newRig would turn off
			}
			r := newRig(t, cfg)
			c, p := r.accepted(rawtest.TCPOpts{})
			tt.run(t, r, c, p)
			r.nothing()
			if n := r.counter("DelayedACKs"); n != tt.delayedAcks {
				t.Errorf("DelayedACKs = %d, want %d", n, tt.delayedAcks)
			}
		})
	}
}
