package tcp_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/tcp"
)

// Memory bounds (memory.go): each connection and every byte it holds come
// out of the stack's memory budget; at its limit the stack refuses new
// connections and narrows windows, and the connections it has keep working.

// newBudgetRig is newRig with a memory budget of limit bytes.
func newBudgetRig(t *testing.T, cfg tcp.Config, limit int) *rig {
	t.Helper()
	h := rawtest.New(t, stack.Config{TCP: rawConfig(cfg), MemoryLimit: int64(limit), ARP: arp.Config{CacheTTL: 10000 * time.Hour}})
	h.LearnPeer(t)
	return &rig{t: t, h: h}
}

// A listener makes half-open connections while they leave half the budget
// free; a SYN beyond that is dropped (without SYN cookies) and counted, the
// connections already made carry data both ways, and once one of them ends
// the refused client's retransmitted SYN gets through.
func TestASmallBudgetRefusesNewConnectionsAndKeepsTheAccepted(t *testing.T) {
	const fit = 3
	r := newBudgetRig(t, tcp.Config{SynCookies: tcp.SynCookiesNever}, 2*fit*tcp.ConnMemory)
	l := r.listen(0)
	conns := make([]*tcp.Conn, fit)
	peers := make([]*peer, fit)
	for i := range fit {
		peers[i] = r.synPeer(uint16(41000+i), peerISN, rawtest.TCPOpts{})
		peers[i].handshake()
		conns[i] = acceptOne(t, l)
	}
	refused := r.synPeer(41000+fit, peerISN, rawtest.TCPOpts{})
	syn := refused.seg(S, nil)
	syn.Ack = 0
	refused.inject(syn)
	r.nothing()
	r.wantCounters(map[string]int64{"MemoryRefusals": 1, "ListenDrops": 1, "ListenOverflows": 0, "PassiveOpens": fit})

	for i, p := range peers {
		p.send(A|P, []byte("ping"))
		checkData(t, readAll(t, conns[i], 4), []byte("ping"))
		write(t, conns[i], []byte("pong"))
		p.expect(A|P, p.rcv, p.nxt, 4)
		p.ack()
	}
	r.nothing()

	peers[0].send(R, nil)
	peers[0].waitState("")
	conns[0].Close()
	refused.inject(syn) // the client's retransmission
	if sa := refused.nextSeg(); sa.Flags != S|A || sa.Ack != syn.Seq+1 {
		t.Fatalf("answer to the retransmitted SYN %v, want a SYN-ACK", sa)
	}
	r.wantCounters(map[string]int64{"MemoryRefusals": 1, "PassiveOpens": fit + 1})
}

// An active open that would leave less than half the budget free for data
// fails at once with ENOBUFS in a *net.OpError, sends nothing, and is
// counted; the memory a connection held is free again when it ends.
func TestDialBeyondTheBudgetFailsWithENOBUFS(t *testing.T) {
	r := newBudgetRig(t, tcp.Config{}, 2*tcp.ConnMemory)
	raddr := peerAP
	ctx, cancel := context.WithCancel(context.Background())
	first := r.dial(ctx, raddr)
	if s := r.nextSeg(); s.Flags != S {
		t.Fatalf("first dial sent %v, want a SYN", s)
	}
	res := waitDial(t, r.dial(context.Background(), raddr))
	var oe *net.OpError
	if !errors.As(res.err, &oe) || oe.Op != "dial" || !errors.Is(res.err, syscall.ENOBUFS) {
		t.Fatalf("second dial: %v, want a dial *net.OpError wrapping ENOBUFS", res.err)
	}
	r.nothing()
	r.wantCounters(map[string]int64{"MemoryRefusals": 1, "ActiveOpens": 1})

	cancel()
	waitDial(t, first)
	waitFor(t, "the budget back to zero", func() bool { return r.h.S.Budget().Used() == 0 })
	third := r.dial(ctx, raddr) // ctx is done: the SYN goes, then the dial gives up
	if s := r.nextSeg(); s.Flags != S {
		t.Fatalf("third dial sent %v, want a SYN", s)
	}
	waitDial(t, third)
}

// A connection offers no more window than the budget can back, far less
// than its 4 MiB buffer here: the right edge stops where the budget ends
// (never moving left, RFC 9293 3.8.6.2.2), data sent within it is all
// taken, data beyond it is not, and reading opens the window again.
func TestTheWindowShrinksToWhatTheBudgetCanBack(t *testing.T) {
	// Half the budget must be free for the connection to be made; what
	// is left after it is its window.
	const room = tcp.ConnMemory + 4000
	r := newBudgetRig(t, tcp.Config{}, tcp.ConnMemory+room)
	c, p := r.dialed(rawtest.TCPOpts{})
	edge := p.nxt + uint32(room)
	check := func(what string, wantWindow uint16) {
		t.Helper()
		p.advance(delayedAck)
		acks := p.sent()
		if len(acks) == 0 {
			t.Fatalf("%s: no ACK", what)
		}
		for _, s := range acks {
			if e := s.Ack + uint32(s.Window); int32(e-edge) < 0 {
				t.Errorf("%s: %v moves the right edge left of %d", what, s, edge)
			} else {
				edge = e
			}
		}
		if last := acks[len(acks)-1]; last.Ack != p.nxt || last.Window != wantWindow {
			t.Errorf("%s: last ACK %v, want ack %d window %d", what, last, p.nxt, wantWindow)
		}
	}
	p.send(A, pattern(1400))
	p.send(A, pattern(1400))
	check("2800 bytes queued", uint16(room-2800))
	for left := room - 2800; left > 0; left -= 1400 {
		p.send(A, pattern(min(left, 1400)))
	}
	check("the budget spent", 0)
	p.inject(p.seg(A, pattern(100))) // beyond the window: not taken
	check("data beyond the window", 0)
	r.wantCounters(map[string]int64{"MemoryPressures": 1, "RcvBufDrops": 0})

	readAll(t, c, room)
	if s := p.expectACK(); s.Window != uint16(room) {
		t.Errorf("window update %v, want window %d", s, room)
	}
	r.nothing()
}

// A Write the budget cannot back waits, sending nothing, and goes on as
// soon as memory is released anywhere in the stack, although nothing of
// its own connection is in flight to be acknowledged.
func TestWriteWaitsForTheBudgetAndResumesWhenMemoryIsFreed(t *testing.T) {
	r := newBudgetRig(t, tcp.Config{}, 2*tcp.ConnMemory+64<<10)
	c, p := r.dialed(rawtest.TCPOpts{})
	bud := r.h.S.Budget()
	held := int(bud.Available())
	if !bud.Reserve(held) { // another layer takes the rest
		t.Fatal("could not take the rest of the budget")
	}
	w := writeAsync(c, pattern(100))
	r.nothing()
	blocked(t, w)
	bud.Release(held)
	if res := wait(t, w); res.err != nil || res.n != 100 {
		t.Fatalf("write: %d, %v", res.n, res.err)
	}
	p.expectData(100, true)
}
