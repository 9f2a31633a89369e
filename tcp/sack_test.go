package tcp_test

import (
	"testing"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// sackBlocks returns the SACK blocks of a segment, as offsets from base.
func sackBlocks(s rawtest.TCPSegment, base uint32) [][2]uint32 {
	var out [][2]uint32
	for i := range s.Opts.NumSACK {
		out = append(out, [2]uint32{s.Opts.SACK[i][0] - base, s.Opts.SACK[i][1] - base})
	}
	return out
}

func equalBlocks(a, b [][2]uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// RFC 2018 section 2: SACK-permitted on the SYN-ACK only when the SYN
// carried it.
func TestSACKPermittedOnlyWhenOffered(t *testing.T) {
	for _, offered := range []bool{false, true} {
		r := newRig(t, tcp.Config{})
		l := r.listen(0)
		p := r.synPeer(peerPort, peerISN, rawtest.TCPOpts{MSS: 1460, SACKPermitted: offered})
		sa := p.handshake()
		acceptOne(t, l)
		if sa.Opts.SACKPermitted != offered {
			t.Errorf("SYN offered SACK %v: SYN-ACK options %v", offered, sa.Opts)
		}
	}
}

// RFC 2018 section 4 with many holes: however many ranges the receiver
// holds, the one with the latest arrival comes first, then the highest.
// A receiver that reported only its lowest ranges would leave the sender
// to take everything it received above them for lost (a burst of tail
// drops at a bottleneck makes hundreds of holes).
func TestSACKBlocksReportTheLatestArrivalBeyondManyHoles(t *testing.T) {
	r := newRig(t, tcp.Config{})
	_, p := r.accepted(rawtest.TCPOpts{MSS: 1460, SACKPermitted: true})
	base := p.nxt
	const ranges = 40
	block := func(k uint32) [2]uint32 {
		if k >= ranges { // in the hole before range k-ranges
			return [2]uint32{100*(2*(k-ranges)+1) - 100, 100 * (2*(k-ranges) + 1)}
		}
		return [2]uint32{100 * (2*k + 1), 100 * (2*k + 2)}
	}
	// Every other 100 bytes, in order, as after a burst of drops; then
	// one in a hole among the lowest.
	var order []uint32
	for k := range uint32(ranges) {
		order = append(order, k)
	}
	order = append(order, ranges+5)
	var a rawtest.TCPSegment
	for _, k := range order {
		s := p.seg(rawtest.ACK, pattern(100))
		s.Seq = base + block(k)[0]
		p.inject(s)
		a = p.nextSeg()
		got := sackBlocks(a, base)
		if a.Ack != base || len(got) == 0 || got[0][0] > block(k)[0] || got[0][1] < block(k)[1] {
			t.Fatalf("after [%d,%d): ack %d, blocks %v; want the range holding it first", block(k)[0], block(k)[1], a.Ack-base, got)
		}
	}
	// The hole before range 5 filled: ranges 4 and 5 merge, first.
	want := [][2]uint32{{block(4)[0], block(5)[1]}, block(ranges - 1), block(ranges - 2), block(ranges - 3)}
	if got := sackBlocks(a, base); !equalBlocks(got, want) {
		t.Errorf("with %d ranges held, blocks %v, want the latest then the highest: %v", ranges, got, want)
	}
}

// RFC 2018 section 4: data beyond a hole is reported in SACK blocks, the
// block with the latest arrival first; RFC 2883: a duplicate is reported
// once in a D-SACK block in front.
func TestSACKBlocksDescribeHeldData(t *testing.T) {
	r := newRig(t, tcp.Config{})
	_, p := r.accepted(rawtest.TCPOpts{MSS: 1460, SACKPermitted: true})
	base := p.nxt
	seg := func(off, n uint32) rawtest.TCPSegment {
		s := p.seg(rawtest.ACK, pattern(int(n)))
		s.Seq = base + off
		return s
	}
	// Hole at [0,100); data at [100,200) then [300,400).
	p.inject(seg(100, 100))
	a := p.nextSeg()
	if a.Ack != base || !equalBlocks(sackBlocks(a, base), [][2]uint32{{100, 200}}) {
		t.Fatalf("after [100,200): %v, blocks %v", a, sackBlocks(a, base))
	}
	p.inject(seg(300, 100))
	a = p.nextSeg()
	if want := [][2]uint32{{300, 400}, {100, 200}}; !equalBlocks(sackBlocks(a, base), want) {
		t.Fatalf("after [300,400): blocks %v, want %v", sackBlocks(a, base), want)
	}
	// A duplicate of held data: D-SACK first, then the blocks.
	p.inject(seg(100, 100))
	a = p.nextSeg()
	if want := [][2]uint32{{100, 200}, {300, 400}, {100, 200}}; !equalBlocks(sackBlocks(a, base), want) {
		t.Fatalf("after a duplicate: blocks %v, want %v", sackBlocks(a, base), want)
	}
	// The hole filled: everything up to 200 acknowledged, [300,400) left.
	p.inject(seg(0, 100))
	a = p.nextSeg()
	if a.Ack != base+200 || !equalBlocks(sackBlocks(a, base), [][2]uint32{{300, 400}}) {
		t.Fatalf("after filling the hole: %v, blocks %v", a, sackBlocks(a, base))
	}
	// A duplicate below RCV.NXT: a D-SACK block alone.
	p.inject(seg(0, 100))
	a = p.nextSeg()
	if want := [][2]uint32{{0, 100}, {300, 400}}; !equalBlocks(sackBlocks(a, base), want) {
		t.Fatalf("after an old duplicate: blocks %v, want %v", sackBlocks(a, base), want)
	}
}
