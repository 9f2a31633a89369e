package tcp_test

import (
	"testing"
	"time"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/tcp"
)

// Segmentation offload (gso.go): on a link with TSO the sender hands over
// super-segments of whole MSS-sized pieces, which the link (here the
// harness, in software, as the kernel does for a TAP) cuts into the
// segments the wire carries.

// newOffloadRig is newRig on a link with checksum offload and TSO.
func newOffloadRig(t testing.TB, cfg tcp.Config) *rig {
	t.Helper()
	h := rawtest.New(t, stack.Config{TCP: cfg, ARP: arp.Config{CacheTTL: 10000 * time.Hour}}, rawtest.Offload())
	h.LearnPeer(t)
	return &rig{t: t, h: h}
}

const tsoMSS = 1460 // the MSS the peer announces: no timestamps

// TestTSOSuperSegmentSizes pins down how much one super-segment carries:
// whole segments within the windows, a short tail only when it is the end
// of the data (or with Nagle off), a FIN on the last piece.
func TestTSOSuperSegmentSizes(t *testing.T) {
	tests := []struct {
		name     string
		peerWnd  uint16
		write    int
		closeWr  bool
		wantSegs []int // the data of each segment on the wire, in order
		wantLast uint8 // flags of the last segment
	}{
		{"the initial window in one super-segment", 65535, 100 << 10, false,
			[]int{1460, 1460, 1460, 1460, 1460, 1460, 1460, 1460, 1460, 1460}, rawtest.ACK},
		{"the peer's window ends it at a whole segment", 5000, 100 << 10, false,
			[]int{1460, 1460, 1460}, rawtest.ACK},
		{"the end of the data goes as a short last piece", 65535, 3*1460 + 100, false,
			[]int{1460, 1460, 1460, 100}, rawtest.ACK | rawtest.PSH},
		{"the FIN rides on the last piece", 65535, 2*1460 + 7, true,
			[]int{1460, 1460, 7}, rawtest.ACK | rawtest.PSH | rawtest.FIN},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newOffloadRig(t, tcp.Config{})
			c, p := r.accepted(rawtest.TCPOpts{MSS: tsoMSS})
			defer c.Close()
			p.wnd = tt.peerWnd
			if tt.closeWr {
				// Hold the data until the FIN is due too, so that they
				// leave together whatever the goroutines' timing.
				p.wnd = 0
			}
			p.ack() // the window the test wants
			r.settle()
			before := r.counter("OutSegs")
			write(t, c, pattern(tt.write))
			if tt.closeWr {
				c.CloseWrite()
				r.settle()
				if segs := r.sent(); len(segs) != 0 {
					t.Fatalf("sent %v into a zero window", segs)
				}
				p.wnd = tt.peerWnd
				p.ack()
			}
			r.settle()
			segs := r.sent()
			if len(segs) != len(tt.wantSegs) {
				t.Fatalf("sent %d segments: %v; want %d", len(segs), segs, len(tt.wantSegs))
			}
			seq := p.rcv
			for i, s := range segs {
				if len(s.Payload) != tt.wantSegs[i] || s.Seq != seq {
					t.Fatalf("segment %d: %v, want %d bytes at %d", i, s, tt.wantSegs[i], seq)
				}
				want := uint8(rawtest.ACK)
				if i == len(segs)-1 {
					want = tt.wantLast
				}
				if s.Flags != want {
					t.Errorf("segment %d: flags [%s], want [%s]", i, rawtest.FlagString(s.Flags), rawtest.FlagString(want))
				}
				seq += s.Len()
			}
			supers := r.h.SuperSegments()
			if len(supers) != 1 {
				t.Fatalf("%d super-segments sent (%+v), want 1", len(supers), supers)
			}
			want := rawtest.SuperSegment{
				Len: 14 + 20 + 20 + seqSpanData(tt.wantSegs), HdrLen: 14 + 20 + 20, GSOSize: tsoMSS,
				CsumStart: 14 + 20, CsumOffset: 16, NeedsCsum: true, Segments: len(tt.wantSegs),
			}
			if supers[0] != want {
				t.Errorf("super-segment %+v, want %+v", supers[0], want)
			}
			if got := r.counter("OutSegs") - before; got != int64(len(tt.wantSegs)) {
				t.Errorf("TCP.OutSegs grew by %d, want %d: one per piece", got, len(tt.wantSegs))
			}
			// One retransmission-queue record per piece.
			recs := tcp.SentRecords(c)
			if len(recs) != len(segs) {
				t.Fatalf("retransmission queue %v, want one record per segment (%d)", recs, len(segs))
			}
			for i, s := range segs {
				if recs[i] != [2]uint32{s.Seq, s.Seq + s.Len()} {
					t.Errorf("record %d: %v, want [%d, %d)", i, recs[i], s.Seq, s.Seq+s.Len())
				}
			}
		})
	}
}

func seqSpanData(segs []int) int {
	n := 0
	for _, s := range segs {
		n += s
	}
	return n
}

// TestTSONagleHoldsTheShortTail: with Nagle on and data in flight, a
// super-segment ends at a whole segment and the short rest waits for the
// ACK (RFC 9293 3.7.4), as Linux's tcp_mss_split_point.
func TestTSONagleHoldsTheShortTail(t *testing.T) {
	r := newOffloadRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{MSS: tsoMSS})
	defer c.Close()
	c.SetNoDelay(false)
	write(t, c, pattern(10))
	p.expectData(10, true) // nothing in flight: Nagle lets it go
	write(t, c, pattern(3*1460+100))
	r.settle()
	segs := r.sent()
	if len(segs) != 3 {
		t.Fatalf("sent %v, want the 3 whole segments and the 100-byte rest held", segs)
	}
	for _, s := range segs {
		p.take(s)
	}
	p.ack()
	p.expectData(100, true)
}

// TestTSORetransmitsSingleSegments: a piece of a super-segment that is lost
// is repaired alone, by fast retransmit, as a plain segment of one MSS.
func TestTSORetransmitsSingleSegments(t *testing.T) {
	r := newOffloadRig(t, tcp.Config{})
	c, p := r.accepted(rawtest.TCPOpts{MSS: tsoMSS})
	defer c.Close()
	write(t, c, pattern(10*1460))
	r.settle()
	segs := r.sent()
	if len(segs) != 10 || len(r.h.SuperSegments()) != 1 {
		t.Fatalf("sent %d segments in %d super-segments, want 10 in 1", len(segs), len(r.h.SuperSegments()))
	}
	// The second piece is lost: the peer acknowledges the first, then
	// sends three duplicates for the pieces after the hole.
	p.take(segs[0])
	for range 4 {
		p.ack()
	}
	r.settle()
	re := r.sent()
	if len(re) == 0 || re[0].Seq != segs[1].Seq || len(re[0].Payload) != 1460 {
		t.Fatalf("after three duplicate ACKs: %v, want the second segment (%d) retransmitted", re, segs[1].Seq)
	}
	if n := len(r.h.SuperSegments()); n != 1 {
		t.Errorf("%d super-segments after the retransmission, want still 1", n)
	}
	if got := r.counter("FastRetrans"); got != 1 {
		t.Errorf("TCP.FastRetrans = %d, want 1", got)
	}
	// The link reads into 64 KiB buffers: the NIC copied each ACK out of
	// its buffer rather than hand the buffer over.
	if got := r.h.Counter(t, "NIC."+rawtest.NIC+".RxCopied"); got < 5 {
		t.Errorf("NIC RxCopied = %d, want the 5 ACKs at least", got)
	}
}
