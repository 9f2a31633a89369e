package tcp_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// SYN cookies: RFC 4987 section 3.6.

// cookieSYN sends the peer's SYN with p.opts and returns the SYN-ACK,
// which it checks acknowledges the SYN; p learns the stack's ISS.
func (p *peer) cookieSYN() rawtest.TCPSegment {
	p.t.Helper()
	s := p.seg(S, nil)
	s.Ack = 0
	s.Opts = p.opts
	p.inject(s)
	p.nxt++
	sa := p.nextSeg()
	if sa.Flags != S|A || sa.Ack != p.nxt || sa.Src != p.stack || sa.Dst != p.addr {
		p.t.Fatalf("SYN-ACK %v, want one acknowledging %d", sa, p.nxt)
	}
	p.iss, p.rcv = sa.Seq, sa.Seq+1
	return sa
}

// cookieACK is the peer's ACK of the SYN-ACK sa: timestamps echo sa's when
// the SYN offered them.
func (p *peer) cookieACK(sa rawtest.TCPSegment) rawtest.TCPSegment {
	s := p.seg(A, nil)
	if p.opts.HasTimestamp {
		s.Opts = rawtest.TCPOpts{HasTimestamp: true, TSVal: p.opts.TSVal + 1, TSEcr: sa.Opts.TSVal}
	}
	return s
}

// noConn fails the test if the stack has a connection with p.
func (p *peer) noConn() {
	p.t.Helper()
	p.settle()
	if st := p.state(); st != "" {
		p.t.Fatalf("connection with %v in state %s, want none", p.addr, st)
	}
}

func (r *rig) counters(names ...string) map[string]int64 {
	m := map[string]int64{}
	for _, n := range names {
		m[n] = r.counter(n)
	}
	return m
}

func (r *rig) wantCounters(want map[string]int64) {
	r.t.Helper()
	for n, v := range want {
		if got := r.counter(n); got != v {
			r.t.Errorf("%s = %d, want %d", n, got, v)
		}
	}
}

// A SYN to a listener whose backlog is full of half-open connections gets
// a SYN-ACK with a cookie, and no state; the ACK that returns it makes an
// established connection that Accept returns, with the options the SYN
// offered: MSS, window scale (applied to the peer's windows) and
// SACK-permitted, and timestamps on.
func TestSynCookieWhenTheBacklogIsFull(t *testing.T) {
	r := newRig(t, tcp.Config{})
	l := r.listen(1)
	r.synAckISN(41000) // half-open: the backlog is full
	opts := allOpts
	opts.SACKPermitted = true
	p := r.synPeer(peerPort, peerISN, opts)
	sa := p.cookieSYN()
	want := rawtest.TCPOpts{MSS: stackMSS, HasWScale: true, WScale: stackWScale, SACKPermitted: true, HasTimestamp: true, TSEcr: opts.TSVal}
	if !sameOpts(sa.Opts, want) || sa.Window != 65535 {
		t.Errorf("SYN-ACK %v, want window 65535, options %v", sa, want)
	}
	p.noConn()
	r.wantCounters(map[string]int64{"SynCookiesSent": 1, "ListenOverflows": 0, "PassiveOpens": 1})

	p.inject(p.cookieACK(sa))
	c := acceptOne(t, l)
	if c.RemoteAddr().String() != p.addr.String() {
		t.Fatalf("accepted %v, want %v", c.RemoteAddr(), p.addr)
	}
	r.nothing()
	r.wantCounters(map[string]int64{"SynCookiesValidated": 1, "SynCookiesFailed": 0, "PassiveOpens": 2, "CurrEstab": 1})
	ci := p.info()
	if ci.State != "ESTABLISHED" || ci.MSS != 1460-12 || ci.SendWindow != 65535<<opts.WScale {
		t.Errorf("connection %+v\nwant ESTABLISHED, MSS %d (1460 less timestamps), send window %d (scaled by %d)",
			ci, 1460-12, 65535<<opts.WScale, opts.WScale)
	}

	// Data both ways: our window is scaled, timestamps run on from the
	// SYN-ACK's (the peer's PAWS would drop anything older) and echo the
	// peer's.
	write(t, c, []byte("hello"))
	d := p.expectData(5, true)
	if d.Window != (128<<10)>>stackWScale || !d.Opts.HasTimestamp || d.Opts.TSEcr != opts.TSVal+1 ||
		int32(d.Opts.TSVal-sa.Opts.TSVal) < 0 {
		t.Errorf("data segment %v\nwant window %d, timestamps echoing %d and not older than the SYN-ACK's %d",
			d, (128<<10)>>stackWScale, opts.TSVal+1, sa.Opts.TSVal)
	}
	s := p.seg(P|A, []byte("world"))
	s.Opts = rawtest.TCPOpts{HasTimestamp: true, TSVal: opts.TSVal + 2, TSEcr: d.Opts.TSVal}
	p.inject(s)
	p.nxt += s.Len()
	checkData(t, readAll(t, c, 5), []byte("world"))

	// SACK is on: data beyond a hole is reported in a SACK block.
	s = p.seg(P|A, []byte("later"))
	s.Seq += 100
	s.Opts = rawtest.TCPOpts{HasTimestamp: true, TSVal: opts.TSVal + 3, TSEcr: d.Opts.TSVal}
	p.inject(s)
	dup := p.expectACK()
	if dup.Opts.NumSACK != 1 || dup.Opts.SACK[0] != [2]uint32{s.Seq, s.Seq + 5} {
		t.Errorf("duplicate ACK %v, want the SACK block %d-%d", dup, s.Seq, s.Seq+5)
	}
}

// The options a cookie carries, for each combination the SYN may offer.
// Without timestamps there are no low bits to carry window scale and SACK:
// the SYN-ACK offers neither, and the connection has neither.
func TestSynCookieKeepsTheOptions(t *testing.T) {
	tests := []struct {
		name   string
		offer  rawtest.TCPOpts
		synAck rawtest.TCPOpts // TSVal not compared
		mss    int             // the connection's, timestamps deducted
		sndWnd int             // the peer's 65535, scaled or not
		window uint16          // the window field of the stack's data
	}{
		{"none", rawtest.TCPOpts{},
			rawtest.TCPOpts{MSS: stackMSS}, 536, 65535, 65535},
		{"MSS between table entries", rawtest.TCPOpts{MSS: 1450},
			rawtest.TCPOpts{MSS: stackMSS}, 1440, 65535, 65535},
		{"MSS below the table", rawtest.TCPOpts{MSS: 1000},
			rawtest.TCPOpts{MSS: stackMSS}, 536, 65535, 65535},
		{"jumbo MSS: ours bounds it", rawtest.TCPOpts{MSS: 8960},
			rawtest.TCPOpts{MSS: stackMSS}, stackMSS, 65535, 65535},
		{"window scale and SACK without timestamps", rawtest.TCPOpts{MSS: 1400, HasWScale: true, WScale: 5, SACKPermitted: true},
			rawtest.TCPOpts{MSS: stackMSS}, 1400, 65535, 65535},
		{"timestamps", rawtest.TCPOpts{MSS: 1300, HasTimestamp: true, TSVal: 5},
			rawtest.TCPOpts{MSS: stackMSS, HasTimestamp: true, TSEcr: 5}, 1300 - 12, 65535, 65535},
		{"timestamps, window scale 0", rawtest.TCPOpts{MSS: 1460, HasWScale: true, HasTimestamp: true, TSVal: 5},
			rawtest.TCPOpts{MSS: stackMSS, HasWScale: true, WScale: stackWScale, HasTimestamp: true, TSEcr: 5}, 1448, 65535, (128 << 10) >> stackWScale},
		{"timestamps, window scale 14", rawtest.TCPOpts{MSS: 1460, HasWScale: true, WScale: 14, HasTimestamp: true, TSVal: 5},
			rawtest.TCPOpts{MSS: stackMSS, HasWScale: true, WScale: stackWScale, HasTimestamp: true, TSEcr: 5}, 1448, 65535 << 14, (128 << 10) >> stackWScale},
		{"timestamps and SACK", rawtest.TCPOpts{MSS: 1460, SACKPermitted: true, HasTimestamp: true, TSVal: 5},
			rawtest.TCPOpts{MSS: stackMSS, SACKPermitted: true, HasTimestamp: true, TSEcr: 5}, 1448, 65535, 65535},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{SynCookies: tcp.SynCookiesAlways})
			l := r.listen(0)
			p := r.synPeer(peerPort, peerISN, tt.offer)
			sa := p.cookieSYN()
			if !sameOpts(sa.Opts, tt.synAck) {
				t.Errorf("SYN-ACK options %v, want %v", sa.Opts, tt.synAck)
			}
			p.noConn()
			p.inject(p.cookieACK(sa))
			c := acceptOne(t, l)
			if tt.offer.HasWScale && tt.offer.HasTimestamp {
			}
			r.nothing()
			if ci := p.info(); ci.MSS != tt.mss || ci.SendWindow != tt.sndWnd {
				t.Errorf("MSS %d, send window %d; want %d, %d", ci.MSS, ci.SendWindow, tt.mss, tt.sndWnd)
			}
			write(t, c, []byte("x"))
			d := p.expectData(1, true)
			if d.Window != tt.window || d.Opts.HasTimestamp != tt.offer.HasTimestamp {
				t.Errorf("data segment %v, want window %d, timestamps %v", d, tt.window, tt.offer.HasTimestamp)
			}
			r.wantCounters(map[string]int64{"SynCookiesSent": 1, "SynCookiesValidated": 1, "SynCookiesFailed": 0})
		})
	}
}

// An ACK whose cookie is wrong makes no connection: it is counted and
// answered as any ACK in LISTEN, with <SEQ=SEG.ACK><CTL=RST> (as Linux
// does). A legitimate client whose cookie was lost or expired learns at
// once; a forger learns nothing it could not from a closed port. So is an
// ACK that changes the MSS index or the option bits the timestamp echo
// carries back, which the cookie's hash covers.
func TestSynCookieWrong(t *testing.T) {
	opts := allOpts
	opts.SACKPermitted = true
	tests := []struct {
		name   string
		tamper func(s *rawtest.TCPSegment)
	}{
		{"cookie off by one", func(s *rawtest.TCPSegment) { s.Ack++ }},
		{"hash bits", func(s *rawtest.TCPSegment) { s.Ack ^= 1 << 20 }},
		{"MSS index", func(s *rawtest.TCPSegment) { s.Ack ^= 1 }},
		{"client ISN", func(s *rawtest.TCPSegment) { s.Seq++ }},
		{"window scale in the echo", func(s *rawtest.TCPSegment) { s.Opts.TSEcr ^= 1 }},
		{"SACK bit in the echo", func(s *rawtest.TCPSegment) { s.Opts.TSEcr ^= 1 << 4 }},
		{"timestamps dropped", func(s *rawtest.TCPSegment) { s.Opts = rawtest.TCPOpts{} }},
		{"another port", func(s *rawtest.TCPSegment) {
			s.Src = netip.AddrPortFrom(s.Src.Addr(), s.Src.Port()+1)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{SynCookies: tcp.SynCookiesAlways})
			r.listen(0)
			p := r.synPeer(peerPort, peerISN, opts)
			sa := p.cookieSYN()
			ack := p.cookieACK(sa)
			ack.Src, ack.Dst = p.addr, p.stack
			tt.tamper(&ack)
			p.inject(ack)
			rst := p.nextSeg()
			if rst.Flags != R || rst.Seq != ack.Ack || rst.Dst != ack.Src {
				t.Errorf("answer %v, want Flags [R] seq %d to %v", rst, ack.Ack, ack.Src)
			}
			r.nothing()
			if rows := r.h.S.Connections(); len(rows) != 1 {
				t.Errorf("connection table %+v, want the listener alone", rows)
			}
			r.wantCounters(map[string]int64{"SynCookiesFailed": 1, "SynCookiesValidated": 0, "PassiveOpens": 0, "OutRsts": 1})
			// The genuine ACK still works.
			p.inject(p.cookieACK(sa))
			p.settle()
			if st := p.state(); st != "ESTABLISHED" {
				t.Errorf("after the genuine ACK: state %q, want ESTABLISHED", st)
			}
		})
	}
}

// A cookie is taken while the minute counter has moved at most once since
// it was made, one to two minutes; after that it fails.
func TestSynCookieExpires(t *testing.T) {
	tests := []struct {
		name  string
		after time.Duration
		ok    bool
	}{
		{"at once", 0, true},
		{"59 s", 59 * time.Second, true},
		{"the next minute", 61 * time.Second, true},
		{"two minutes", 2 * time.Minute, false},
		{"an hour", time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{SynCookies: tcp.SynCookiesAlways})
			l := r.listen(0)
			p := r.synPeer(peerPort, peerISN, tsOnly)
			sa := p.cookieSYN()
			r.advance(tt.after)
			// Another SYN keeps the listener looking for cookies, as a
			// flood would (it looks only within two minutes of the last
			// cookie it sent).
			r.synPeer(peerPort+1, peerISN, rawtest.TCPOpts{}).cookieSYN()
			ack := p.cookieACK(sa)
			p.inject(ack)
			if tt.ok {
				c := acceptOne(t, l)
				c.Close()
				r.wantCounters(map[string]int64{"SynCookiesValidated": 1, "SynCookiesFailed": 0})
				return
			}
			p.expect(R, ack.Ack, 0, 0)
			p.noConn()
			r.wantCounters(map[string]int64{"SynCookiesValidated": 0, "SynCookiesFailed": 1})
		})
	}
}

// A listener that has sent no cookie lately does not look for one: a stray
// ACK gets its reset and counts no failure, as Linux's
// tcp_synq_no_recent_overflow.
func TestSynCookieOnlyAfterOverflow(t *testing.T) {
	r := newRig(t, tcp.Config{SynCookies: tcp.SynCookiesAlways})
	r.listen(0)
	p := r.synPeer(peerPort, peerISN, rawtest.TCPOpts{})
	sa := p.cookieSYN()
	r.advance(2 * time.Minute)
	ack := p.cookieACK(sa)
	p.inject(ack)
	p.expect(R, ack.Ack, 0, 0)
	r.nothing()
	r.wantCounters(map[string]int64{"SynCookiesValidated": 0, "SynCookiesFailed": 0, "OutRsts": 1})
}

// With the accept queue full too, a SYN gets no cookie (it is dropped, as
// Linux drops it), and an ACK with a good cookie is dropped without a
// reset: the client's next segment carries the cookie again, and makes
// the connection once Accept has made room, with the data it carries.
func TestSynCookieAcceptQueueFull(t *testing.T) {
	r := newRig(t, tcp.Config{SynCookies: tcp.SynCookiesAlways})
	l := r.listen(1)
	a := r.synPeer(peerPort, peerISN, tsOnly)
	b := r.synPeer(peerPort+1, peerISN, tsOnly)
	saA, saB := a.cookieSYN(), b.cookieSYN()
	a.inject(a.cookieACK(saA))
	a.settle()
	if st := a.state(); st != "ESTABLISHED" {
		t.Fatalf("a: state %q, want ESTABLISHED", st)
	}
	// The accept queue (backlog 1) holds a.
	before := r.counters("ListenOverflows", "ListenDrops")
	b.inject(b.cookieACK(saB))
	b.noConn()
	q := r.synPeer(peerPort+2, peerISN, rawtest.TCPOpts{})
	s := q.seg(S, nil)
	s.Ack = 0
	q.inject(s)
	r.nothing()
	r.wantCounters(map[string]int64{
		"ListenOverflows": before["ListenOverflows"] + 2, "ListenDrops": before["ListenDrops"] + 2,
		"SynCookiesSent": 2, "SynCookiesValidated": 2,
	})
	c := acceptOne(t, l)
	if c.RemoteAddr().String() != a.addr.String() {
		t.Fatalf("accepted %v, want %v", c.RemoteAddr(), a.addr)
	}
	// b sends data: the segment still carries the cookie.
	d := b.cookieACK(saB)
	d.Flags, d.Payload = P|A, []byte("hello")
	b.inject(d)
	b.nxt += d.Len()
	cb := acceptOne(t, l)
	if cb.RemoteAddr().String() != b.addr.String() {
		t.Fatalf("accepted %v, want %v", cb.RemoteAddr(), b.addr)
	}
	checkData(t, readAll(t, cb, 5), []byte("hello"))
	r.wantCounters(map[string]int64{"SynCookiesValidated": 3})
}

// SynCookiesNever keeps the old behaviour: a SYN beyond the backlog is
// dropped (TestListenBacklog), and no ACK is taken for a cookie.
func TestSynCookiesNever(t *testing.T) {
	r := newRig(t, tcp.Config{SynCookies: tcp.SynCookiesNever})
	r.listen(1)
	r.synAckISN(41000)
	p := r.synPeer(peerPort, peerISN, rawtest.TCPOpts{})
	s := p.seg(S, nil)
	s.Ack = 0
	p.inject(s)
	r.nothing()
	r.wantCounters(map[string]int64{"SynCookiesSent": 0, "ListenOverflows": 1})
}

// A cookie remembers an answered ECN-setup SYN (RFC 3168 6.1.1) in its
// timestamp bits, as the other options: the SYN-ACK has ECE and the
// connection sends ECT(0) data. Without timestamps there is no room, and
// the SYN-ACK declines; ECNOff declines too.
func TestSynCookieKeepsECN(t *testing.T) {
	ts := rawtest.TCPOpts{MSS: 1460, HasTimestamp: true, TSVal: 5}
	tests := []struct {
		name  string
		mode  tcp.ECNMode
		offer rawtest.TCPOpts
		syn   uint8 // ECE and CWR on the SYN
		ecn   bool
	}{
		{"timestamps, setup SYN", tcp.ECNPassive, ts, ECE | CWR, true},
		{"timestamps, plain SYN", tcp.ECNPassive, ts, 0, false},
		{"timestamps, ECE alone", tcp.ECNPassive, ts, ECE, false},
		{"timestamps, setup SYN, ECN off", tcp.ECNOff, ts, ECE | CWR, false},
		{"no timestamps, setup SYN", tcp.ECNPassive, rawtest.TCPOpts{MSS: 1460}, ECE | CWR, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{SynCookies: tcp.SynCookiesAlways, ECN: tt.mode})
			l := r.listen(0)
			p := r.synPeer(peerPort, peerISN, tt.offer)
			s := p.seg(S|tt.syn, nil)
			s.Ack, s.Opts = 0, p.opts
			p.inject(s)
			p.nxt++
			sa := p.nextSeg()
			p.iss, p.rcv = sa.Seq, sa.Seq+1
			if want := S | A | uint8(b2i(tt.ecn))*ECE; sa.Flags != want {
				t.Fatalf("SYN-ACK %v, want flags [%s]", sa, rawtest.FlagString(want))
			}
			p.inject(p.cookieACK(sa))
			c := acceptOne(t, l)
			write(t, c, []byte("x"))
			d := p.expectData(1, true)
			if want := uint8(b2i(tt.ecn)) * ect0; d.TOS&3 != want {
				t.Errorf("data %v with ECN field %d, want %d", d, d.TOS&3, want)
			}
			r.wantCounters(map[string]int64{"SynCookiesValidated": 1, "ECNNegotiated": int64(b2i(tt.ecn))})
		})
	}
}
