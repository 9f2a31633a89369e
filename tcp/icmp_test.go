package tcp_test

import (
	"context"
	"encoding/binary"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/tcp"
	"github.com/gonetstack/gonet/wire"
)

// ICMP errors about the stack's segments: path MTU discovery (RFC 1191
// section 6.4), validated as RFC 5927 section 4.1 says, and soft and hard
// errors (RFC 1122 section 4.2.3.9).

var _ ip.ErrorHandler = (*tcp.Protocol)(nil)

// routerAddr is a router on the path to the peer that reports errors; it
// speaks from the peer's MAC address, as a router in front of it would.
var routerAddr = netip.MustParseAddr("10.1.0.77")

// icmpAbout returns a frame carrying an ICMP error of typ and code from
// routerAddr about the datagram in frame (an Ethernet frame the stack
// sent), quoting its IP header and 8 bytes of TCP header as RFC 792 asks;
// edit may change the quote first.
func (r *rig) icmpAbout(frame []byte, typ, code uint8, rest uint32, edit func(quote []byte)) []byte {
	r.t.Helper()
	ip := frame[14:]
	quote := append([]byte(nil), ip[:int(ip[0]&0xf)*4+8]...)
	if edit != nil {
		edit(quote)
	}
	return r.h.IPFrame(r.t, rawtest.IPv4Header(routerAddr, rawtest.StackAddr, layers.IPProtocolICMPv4),
		rawtest.Payload(rawtest.ICMPBytes(r.t, typ, code, rest, quote)))
}

// sendFull writes n segments of 1460 bytes on a connection dialed with MSS
// 1460 and returns the frames that carried them, checking that each has DF.
func sendFull(t *testing.T, r *rig, c *tcp.Conn, p *peer, n int) [][]byte {
	t.Helper()
	write(t, c, pattern(n*1460))
	var frames [][]byte
	for i := range n {
		f := r.next()
		s := rawtest.SegmentOf(t, f)
		if s.Seq != p.rcv+uint32(i*1460) || len(s.Payload) != 1460 {
			t.Fatalf("segment %d: %v, want 1460 bytes at %d", i, s, p.rcv+uint32(i*1460))
		}
		if ip := rawtest.IPv4Of(t, f); ip.Flags&layers.IPv4DontFragment == 0 {
			t.Fatalf("segment %d sent without DF (flags %v)", i, ip.Flags)
		}
		frames = append(frames, f)
	}
	return frames
}

// A "fragmentation needed" about a segment in flight lowers the route's path
// MTU and the connection's MSS, and what was in flight goes again at once
// in segments that fit, with the congestion window untouched. A report of
// MTU zero, from a router older than RFC 1191, takes the plateau below the
// datagram's size (section 7). Reports about the other segments of the same
// flight change nothing more.
func TestFragNeededResendsInSmallerSegments(t *testing.T) {
	for _, tc := range []struct {
		name       string
		nextHopMTU uint32
		wantMTU    int
	}{
		{"next-hop MTU reported", 1280, 1280},
		{"zero: RFC 1191 plateau", 0, 1492},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{})
			c, p := r.dialed(rawtest.TCPOpts{MSS: 1460})
			frames := sendFull(t, r, c, p, 3)
			cwnd := p.info().CWnd
			r.h.Inject(r.icmpAbout(frames[0], wire.ICMPDestUnreach, wire.ICMPCodeFragNeeded, tc.nextHopMTU, nil))
			mss := tc.wantMTU - 40
			left := 3 * 1460
			for left > 0 {
				n := min(left, mss)
				f := r.next()
				if ip := rawtest.IPv4Of(t, f); int(ip.Length) > tc.wantMTU || ip.Flags&layers.IPv4DontFragment == 0 {
					t.Fatalf("resent datagram of %d bytes, flags %v: want at most %d with DF", ip.Length, ip.Flags, tc.wantMTU)
				}
				s := rawtest.SegmentOf(t, f)
				if s.Seq != p.rcv || len(s.Payload) != n {
					t.Fatalf("resent %v, want %d bytes at %d", s, n, p.rcv)
				}
				p.take(s)
				left -= n
			}
			// The rest of the flight draws the same report: nothing more.
			r.h.Inject(r.icmpAbout(frames[1], wire.ICMPDestUnreach, wire.ICMPCodeFragNeeded, tc.nextHopMTU, nil),
				r.icmpAbout(frames[2], wire.ICMPDestUnreach, wire.ICMPCodeFragNeeded, tc.nextHopMTU, nil))
			r.nothing()
			ci := p.info()
			if ci.MSS != mss || ci.CWnd != cwnd {
				t.Errorf("MSS %d, cwnd %d; want MSS %d and cwnd %d as before", ci.MSS, ci.CWnd, mss, cwnd)
			}
			ri, err := r.h.S.IPv4().Route(rawtest.PeerAddr)
			if err != nil || ri.MTU != tc.wantMTU {
				t.Errorf("route MTU %d (%v), want %d", ri.MTU, err, tc.wantMTU)
			}
			for name, want := range map[string]int64{"TCP.PMTUReductions": 1, "TCP.PMTURetransmits": 1,
				"IPv4.PMTUUpdates": 1, "IPv4.PMTUIgnored": 2, "TCP.OutOfWindowIcmps": 0} {
				if got := r.h.Counter(t, name); got != want {
					t.Errorf("%s = %d, want %d", name, got, want)
				}
			}
			// Acknowledged, the connection goes on in the new size.
			p.ack()
			write(t, c, pattern(2000))
			p.expectData(mss, false)
			p.expectData(2000-mss, true)
		})
	}
}

// RFC 5927 section 4.1: an ICMP error counts only if the sequence number it
// quotes is one in flight, SND.UNA =< SEQ < SND.NXT; others, which a blind
// attacker could forge to shrink segments or reset connections, are
// dropped and counted, before they reach the path MTU cache.
func TestICMPQuotingSequenceOutsideFlightIgnored(t *testing.T) {
	for _, tc := range []struct {
		name string
		seq  func(p *peer) uint32 // the quoted sequence number
	}{
		{"beyond SND.NXT", func(p *peer) uint32 { return p.rcv + 3*1460 }},
		{"far ahead", func(p *peer) uint32 { return p.rcv + 1<<30 }},
		{"before SND.UNA", func(p *peer) uint32 { return p.rcv - 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{})
			c, p := r.dialed(rawtest.TCPOpts{MSS: 1460})
			frames := sendFull(t, r, c, p, 3)
			seq := tc.seq(p)
			for _, e := range []struct{ typ, code uint8 }{
				{wire.ICMPDestUnreach, wire.ICMPCodeFragNeeded},
				{wire.ICMPDestUnreach, 1}, // host unreachable: a soft error
			} {
				r.h.Inject(r.icmpAbout(frames[0], e.typ, e.code, 1280, func(q []byte) {
					binary.BigEndian.PutUint32(q[20+4:], seq)
				}))
			}
			r.nothing()
			if ci := p.info(); ci.MSS != 1460 {
				t.Errorf("MSS %d, want 1460 still", ci.MSS)
			}
			if ri, _ := r.h.S.IPv4().Route(rawtest.PeerAddr); ri.MTU != 1500 {
				t.Errorf("route MTU %d, want 1500 still", ri.MTU)
			}
			for name, want := range map[string]int64{"TCP.OutOfWindowIcmps": 2, "TCP.PMTUReductions": 0,
				"TCP.ICMPSoftErrors": 0, "IPv4.PMTUUpdates": 0} {
				if got := r.h.Counter(t, name); got != want {
					t.Errorf("%s = %d, want %d", name, got, want)
				}
			}
		})
	}
}

// The path MTU learnt holds for PMTUExpiry (RFC 1191 section 6.3: 10
// minutes), then the route's own MTU is tried again: a new connection
// announces, and uses, the full MSS.
func TestPathMTUExpires(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, p := r.dialed(rawtest.TCPOpts{MSS: 1460})
	frames := sendFull(t, r, c, p, 1)
	r.h.Inject(r.icmpAbout(frames[0], wire.ICMPDestUnreach, wire.ICMPCodeFragNeeded, 1280, nil))
	p.expectData(1240, false)
	p.expectData(220, true)
	p.ack()
	r.settle()
	route := func() int {
		ri, err := r.h.S.IPv4().Route(rawtest.PeerAddr)
		if err != nil {
			t.Fatal(err)
		}
		return ri.MTU
	}
	r.advance(10*time.Minute - time.Millisecond)
	if got := route(); got != 1280 {
		t.Fatalf("path MTU %d just before expiry, want 1280", got)
	}
	r.advance(time.Millisecond)
	if got := route(); got != 1500 {
		t.Fatalf("path MTU %d after 10 minutes, want 1500", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := r.dial(ctx, netip.AddrPortFrom(rawtest.PeerAddr, 81))
	syn := r.nextSeg()
	cancel()
	waitDial(t, ch)
	if syn.Flags != rawtest.SYN || syn.Opts.MSS != 1460 {
		t.Fatalf("SYN %v, want MSS 1460", syn)
	}
	c.Close()
}

// RFC 1122 4.2.3.9: port unreachable is a hard error; in SYN-SENT it ends
// the attempt at once with ECONNREFUSED, as Linux. Host unreachable is
// soft: recorded, and reported if the connection then times out.
func TestICMPErrorsDuringConnect(t *testing.T) {
	for _, tc := range []struct {
		name    string
		code    uint8
		want    syscall.Errno
		timeout bool // the error shows only when the SYNs time out
	}{
		{"port unreachable aborts", wire.ICMPCodePortUnrch, syscall.ECONNREFUSED, false},
		{"host unreachable is soft", 1, syscall.EHOSTUNREACH, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{SynRetries: 1})
			ch := r.dial(context.Background(), netip.AddrPortFrom(rawtest.PeerAddr, 80))
			syn := r.next()
			r.h.Inject(r.icmpAbout(syn, wire.ICMPDestUnreach, tc.code, 0, nil))
			if tc.timeout {
				r.settle()
				select {
				case res := <-ch:
					t.Fatalf("dial returned on a soft error: %v", res.err)
				default:
				}
				r.advance(time.Second)
				r.next() // the SYN again
				r.advance(2 * time.Second)
			}
			res := waitDial(t, ch)
			if !isErr(res.err, tc.want) {
				t.Fatalf("dial: %v, want %v", res.err, tc.want)
			}
		})
	}
}

// A soft error on an established connection is reported if the connection
// then times out, instead of ETIMEDOUT; an acknowledgement of new data in
// between shows the path works, and the timeout is then a timeout.
func TestSoftErrorReportedOnTimeoutUnlessPathWorked(t *testing.T) {
	for _, tc := range []struct {
		name     string
		progress bool
		want     syscall.Errno
	}{
		{"no progress: host unreachable", false, syscall.EHOSTUNREACH},
		{"progress in between: timed out", true, syscall.ETIMEDOUT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{Retries: 2})
			c, p := r.dialed(rawtest.TCPOpts{MSS: 1460})
			frames := sendFull(t, r, c, p, 2)
			r.h.Inject(r.icmpAbout(frames[0], wire.ICMPDestUnreach, 1, 0, nil))
			r.settle()
			if got := r.counter("ICMPSoftErrors"); got != 1 {
				t.Fatalf("ICMPSoftErrors = %d, want 1", got)
			}
			if tc.progress {
				s := p.seg(A, nil)
				s.Ack = p.rcv + 1460 // the first segment only
				p.inject(s)
			}
			for i := 0; i < 50 && p.state() != ""; i++ {
				r.advance(200 * time.Millisecond)
				r.sent()
			}
			_, err := c.Read(make([]byte, 1))
			if !isErr(err, tc.want) {
				t.Fatalf("read after the connection timed out: %v, want %v", err, tc.want)
			}
		})
	}
}

// A report below the floor (ipv4.Config.MinPMTU, 552 as Linux's min_pmtu)
// lowers the path MTU to the floor only, and the segments then go without
// DF, for routers to fragment: with DF, no segment of the floor's size
// would pass the link that reported less.
func TestFragNeededBelowFloorTurnsDFOff(t *testing.T) {
	r := newRig(t, tcp.Config{})
	c, p := r.dialed(rawtest.TCPOpts{MSS: 1460})
	frames := sendFull(t, r, c, p, 1)
	r.h.Inject(r.icmpAbout(frames[0], wire.ICMPDestUnreach, wire.ICMPCodeFragNeeded, 300, nil))
	for _, n := range []int{512, 512, 436} {
		f := r.next()
		s := rawtest.SegmentOf(t, f)
		if s.Seq != p.rcv || len(s.Payload) != n {
			t.Fatalf("resent %v, want %d bytes at %d", s, n, p.rcv)
		}
		if ip := rawtest.IPv4Of(t, f); ip.Flags&layers.IPv4DontFragment != 0 {
			t.Errorf("%v sent with DF below the floor", s)
		}
		p.take(s)
	}
	if got := r.h.Counter(t, "IPv4.PMTUClamped"); got != 1 {
		t.Errorf("IPv4.PMTUClamped = %d, want 1", got)
	}
}
