package ping_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/ping"
	"github.com/gonetstack/gonet/stats"
)

const ident = 0x4242

type request struct {
	dst  netip.Addr
	seq  uint16
	size int
}

// client is a Client whose requests come out on a channel, timed on a
// virtual clock.
type client struct {
	*ping.Client
	clk      *clock.Virtual
	sent     chan request
	sendErr  error
	counters struct {
		outstanding      stats.Gauge
		unknown, corrupt stats.Counter
	}
}

func newClient(t *testing.T) *client {
	c := &client{clk: clock.NewVirtual(time.Unix(1000, 0)), sent: make(chan request, 16)}
	c.Client = ping.New("test", ident, c.clk, func(dst netip.Addr, seq uint16, size int) error {
		c.sent <- request{dst, seq, size}
		return c.sendErr
	}, ping.Counters{Outstanding: &c.counters.outstanding, Unknown: &c.counters.unknown, Corrupt: &c.counters.corrupt})
	t.Cleanup(c.Close)
	return c
}

type result struct {
	rtt time.Duration
	err error
}

// start runs a ping in the background and returns its request.
func (c *client) start(t *testing.T, ctx context.Context, dst netip.Addr, size int) (request, <-chan result) {
	t.Helper()
	done := make(chan result, 1)
	go func() {
		rtt, err := c.Ping(ctx, dst, size)
		done <- result{rtt, err}
	}()
	select {
	case r := <-c.sent:
		return r, done
	case <-time.After(5 * time.Second):
		t.Fatal("no request sent")
	}
	return request{}, nil
}

func wait(t *testing.T, done <-chan result) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("ping still waiting")
	}
	return result{}
}

func data(size int, seq uint16) []byte {
	b := make([]byte, size)
	ping.Fill(b, seq)
	return b
}

var (
	peer   = netip.MustParseAddr("2001:db8::1")
	peerLL = netip.MustParseAddr("fe80::1")
)

func TestReplyEndsThePingWithTheRoundTripTime(t *testing.T) {
	c := newClient(t)
	req, done := c.start(t, context.Background(), peer, 56)
	if req.dst != peer || req.size != 56 {
		t.Fatalf("request %+v", req)
	}
	c.clk.Advance(3 * time.Millisecond)
	c.Reply(ident, req.seq, peer, data(56, req.seq))
	r := wait(t, done)
	if r.err != nil || r.rtt != 3*time.Millisecond {
		t.Errorf("ping = %v, %v; want 3ms", r.rtt, r.err)
	}
	if c.counters.outstanding.Load() != 0 {
		t.Errorf("%d outstanding after the reply", c.counters.outstanding.Load())
	}
}

func TestRepliesThatAnswerNoPingAreCounted(t *testing.T) {
	tests := []struct {
		name    string
		ident   uint16
		seqOff  uint16
		from    netip.Addr
		data    func(seq uint16) []byte
		unknown bool // else corrupt
	}{
		{"another identifier", ident + 1, 0, peer, func(s uint16) []byte { return data(8, s) }, true},
		{"another sequence number", ident, 1, peer, func(s uint16) []byte { return data(8, s) }, true},
		{"another host", ident, 0, netip.MustParseAddr("2001:db8::2"), func(s uint16) []byte { return data(8, s) }, true},
		{"shorter data", ident, 0, peer, func(s uint16) []byte { return data(7, s) }, false},
		{"other data", ident, 0, peer, func(s uint16) []byte { return data(8, s+1) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t)
			ctx, cancel := context.WithCancel(context.Background())
			req, done := c.start(t, ctx, peer, 8)
			c.Reply(tt.ident, req.seq+tt.seqOff, tt.from, tt.data(req.seq))
			if got := c.counters.unknown.Load(); got != map[bool]uint64{true: 1}[tt.unknown] {
				t.Errorf("unknown = %d", got)
			}
			if got := c.counters.corrupt.Load(); got != map[bool]uint64{false: 1}[tt.unknown] {
				t.Errorf("corrupt = %d", got)
			}
			cancel()
			if r := wait(t, done); !errors.Is(r.err, context.Canceled) {
				t.Errorf("ping ended with %v, want its context's end", r.err)
			}
		})
	}
}

func TestReplyFromAZonedAddressAnswersAPingWithoutZone(t *testing.T) {
	tests := []struct {
		dst, from netip.Addr
		answers   bool
	}{
		{peerLL, peerLL.WithZone("eth0"), true},
		{peerLL.WithZone("eth0"), peerLL.WithZone("eth0"), true},
		{peerLL.WithZone("eth0"), peerLL.WithZone("eth1"), false},
	}
	for _, tt := range tests {
		t.Run(tt.dst.String()+" from "+tt.from.String(), func(t *testing.T) {
			c := newClient(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, done := c.start(t, ctx, tt.dst, 0)
			c.Reply(ident, req.seq, tt.from, nil)
			if !tt.answers {
				cancel()
			}
			r := wait(t, done)
			if (r.err == nil) != tt.answers {
				t.Errorf("ping = %v", r.err)
			}
		})
	}
}

func TestFailEndsThePingWithTheError(t *testing.T) {
	c := newClient(t)
	req, done := c.start(t, context.Background(), peer, 0)
	if c.Fail(ident+1, req.seq, syscall.EHOSTUNREACH) {
		t.Error("Fail of another identifier found a ping")
	}
	if !c.Fail(ident, req.seq, syscall.EHOSTUNREACH) {
		t.Error("Fail found no ping")
	}
	if r := wait(t, done); !errors.Is(r.err, syscall.EHOSTUNREACH) {
		t.Errorf("ping ended with %v", r.err)
	}
}

func TestSendFailureEndsThePing(t *testing.T) {
	c := newClient(t)
	c.sendErr = syscall.ENETUNREACH
	_, done := c.start(t, context.Background(), peer, 0)
	if r := wait(t, done); !errors.Is(r.err, syscall.ENETUNREACH) {
		t.Errorf("ping ended with %v", r.err)
	}
}

func TestCloseEndsOutstandingAndLaterPings(t *testing.T) {
	c := newClient(t)
	_, done := c.start(t, context.Background(), peer, 0)
	c.Close()
	if r := wait(t, done); !errors.Is(r.err, net.ErrClosed) {
		t.Errorf("outstanding ping ended with %v", r.err)
	}
	if _, err := c.Ping(context.Background(), peer, 0); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ping after Close = %v", err)
	}
}

func TestConcurrentPingsTakeDistinctSequenceNumbers(t *testing.T) {
	c := newClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := map[uint16]bool{}
	var dones []<-chan result
	for range 10 {
		req, done := c.start(t, ctx, peer, 0)
		if seen[req.seq] {
			t.Fatalf("sequence number %d given twice", req.seq)
		}
		seen[req.seq] = true
		dones = append(dones, done)
	}
	if got := c.counters.outstanding.Load(); got != 10 {
		t.Errorf("%d outstanding, want 10", got)
	}
	cancel()
	for _, d := range dones {
		wait(t, d)
	}
}
