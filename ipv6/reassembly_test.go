package ipv6_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/wire"
)

// wantDelivered fails unless the transport got exactly want, with its
// header at off.
func wantDelivered(t *testing.T, h *harness, want []byte, off int) {
	t.Helper()
	got := h.tr.take()
	if len(got) != 1 {
		t.Fatalf("delivered %d datagrams, want 1", len(got))
	}
	if !bytes.Equal(got[0].b, want) {
		t.Errorf("delivered %d bytes differing from the %d expected", len(got[0].b), len(want))
	}
	if got[0].h.Off != off {
		t.Errorf("transport header at %d, want %d", got[0].h.Off, off)
	}
}

func TestReassemblesFragmentsInAnyOrder(t *testing.T) {
	payload := data(3000)
	tests := []struct {
		name  string
		next  uint8  // what the Fragment header names
		ext   []byte // extension headers in the fragmentable part
		order []int
		off   int // where the transport header is in the whole datagram
	}{
		{"in order", protoTest, nil, []int{0, 1, 2}, 40},
		{"reversed", protoTest, nil, []int{2, 1, 0}, 40},
		{"first last", protoTest, nil, []int{1, 2, 0}, 40},
		{"last first", protoTest, nil, []int{2, 0, 1}, 40},
		{"with a first fragment repeated", protoTest, nil, []int{0, 0, 2, 1}, 40},
		{"destination options in the fragmentable part", wire.ProtoDestOpts, padded(protoTest), []int{1, 0, 2}, 48},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, ipv6.Config{})
			fs := frags(t, peerAddr, ourAddr, tt.next, 0xdeadbeef, tt.ext, payload, 1232)
			for _, i := range tt.order {
				h.inject(t, h.eth0, fs[i])
			}
			h.waitCounter(t, "ReasmOKs", 1)
			// The whole datagram is what the sender would have sent
			// unfragmented: gopacket's, with the same extension headers.
			want := whole(t, peerAddr, ourAddr, tt.next, append(bytes.Clone(tt.ext), payload...))
			wantDelivered(t, h, want, tt.off)
			dups := int64(len(tt.order) - 3)
			checkCounters(t, h.counters(), map[string]int64{"ReasmReqds": int64(len(tt.order)), "ReasmDuplicates": dups, "InDelivers": 1})
		})
	}
}

// The unfragmentable part the whole datagram keeps is the first
// fragment's, whose last header's Next Header then names what the
// Fragment header named (RFC 8200 section 4.5).
func TestReassemblyKeepsTheUnfragmentablePart(t *testing.T) {
	h := newHarness(t, ipv6.Config{})
	payload := data(2000)
	dg := func(parts ...[]byte) []byte {
		b := []byte(datagram(ourAddr, wire.ProtoHopByHop, parts...))
		return b
	}
	h.inject(t, h.eth0,
		dg(padded(wire.ProtoFragment), fragment(protoTest, 1000, false, 7), payload[1000:]),
		dg(padded(wire.ProtoFragment), fragment(protoTest, 0, true, 7), payload[:1000]))
	h.waitCounter(t, "ReasmOKs", 1)
	wantDelivered(t, h, dg(padded(protoTest), payload), 48)
}

func TestOverlappingFragmentDiscardsTheDatagram(t *testing.T) {
	h := newHarness(t, ipv6.Config{})
	p := data(64)
	h.inject(t, h.eth0,
		frag(t, peerAddr, ourAddr, protoTest, 9, 0, true, p[:32]),
		frag(t, peerAddr, ourAddr, protoTest, 9, 24, false, p[24:64])) // overlaps 24..32
	h.waitCounter(t, "ReasmOverlaps", 1)
	checkCounters(t, h.counters(), map[string]int64{"ReasmOverlaps": 1, "ReasmFails": 1, "InDelivers": 0})
	// The rest of the datagram starts over and never completes it.
	h.inject(t, h.eth0, frag(t, peerAddr, ourAddr, protoTest, 9, 32, false, p[32:]))
	h.sync(t)
	if got := h.tr.take(); len(got) != 0 {
		t.Errorf("delivered %d datagrams after an overlap", len(got))
	}
}

func TestMalformedFragmentsDiscardTheDatagram(t *testing.T) {
	p := data(128)
	tests := []struct {
		name    string
		frags   [][3]int // offset, length, more
		counter string
	}{
		{"two different ends", [][3]int{{16, 8, 0}, {32, 8, 0}}, "ReasmMalformed"},
		{"a fragment past the end", [][3]int{{16, 8, 0}, {24, 8, 1}}, "ReasmMalformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, ipv6.Config{})
			for _, f := range tt.frags {
				b := make([]byte, f[1])
				copy(b, p)
				h.inject(t, h.eth0, frag(t, peerAddr, ourAddr, protoTest, 4, f[0], f[2] == 1, b))
			}
			h.waitCounter(t, tt.counter, 1)
			h.waitCounter(t, "ReasmFails", 1)
		})
	}
}

func TestReassemblyTimeout(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration // configured; 0 the default, 60 s
		sent    []int
		// wantQuote: Time Exceeded code 1 quoting fragment 0 is asked for.
		wantQuote bool
	}{
		{"first fragment arrived", 0, []int{0}, true},
		{"first and last arrived, configured timeout", 5 * time.Second, []int{0, 2}, true},
		{"first fragment missing", 0, []int{1, 2}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, ipv6.Config{ReassemblyTimeout: tt.timeout})
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 60 * time.Second
			}
			fs := frags(t, peerLL, ourLL, protoTest, 77, nil, data(3000), 1232)
			for _, i := range tt.sent {
				h.inject(t, h.eth0, fs[i])
			}
			h.waitCounter(t, "ReasmReqds", int64(len(tt.sent)))
			h.clk.WaitPending(1)
			h.clk.Advance(timeout - time.Nanosecond)
			h.sync(t)
			if c := h.counters(); c["ReasmTimeout"] != 0 {
				t.Fatalf("timed out before %v", timeout)
			}
			h.clk.Advance(time.Nanosecond)
			h.waitCounter(t, "ReasmTimeout", 1)
			h.waitCounter(t, "ReasmBytes", 0)
			errs := h.icmp.take()
			if !tt.wantQuote {
				if len(errs) != 0 {
					t.Errorf("asked for %+v, want nothing without the first fragment", errs)
				}
				return
			}
			if len(errs) != 1 {
				t.Fatalf("asked for %d errors, want 1", len(errs))
			}
			e := errs[0]
			if e.Type != wire.ICMPv6TimeExceeded || e.Code != wire.ICMPv6CodeReassemblyTime {
				t.Errorf("type %d code %d, want Time Exceeded, reassembly", e.Type, e.Code)
			}
			if !bytes.Equal(e.Orig, fs[0]) {
				t.Errorf("quotes %d bytes, not the first fragment", len(e.Orig))
			}
			if e.In != h.eth0 {
				t.Errorf("error out of %v, want eth0, where the link-local source is", e.In)
			}
		})
	}
}

func TestMaxReassembliesEvictsTheOldestDatagram(t *testing.T) {
	h := newHarness(t, ipv6.Config{MaxReassemblies: 2})
	var sets [3][][]byte
	for i := range sets {
		sets[i] = frags(t, peerAddr, ourAddr, protoTest, uint32(100+i), nil, data(2000+i), 1232)
		h.inject(t, h.eth0, sets[i][0])
	}
	h.waitCounter(t, "ReasmEvictions", 1)
	for _, set := range sets[1:] {
		h.inject(t, h.eth0, set[1])
	}
	h.waitCounter(t, "ReasmOKs", 2)
	got := h.tr.take()
	if len(got) != 2 {
		t.Fatalf("delivered %d datagrams, want 2", len(got))
	}
	for _, d := range got {
		if len(d.b) == 40+2000 {
			t.Errorf("the evicted datagram was delivered")
		}
	}
	if c := h.counters(); c["ReasmLimit"] != 0 {
		t.Errorf("ReasmLimit = %d, want 0: no fragment refused", c["ReasmLimit"])
	}
}

// RFC 7112 section 5: a first fragment without the whole chain through the
// upper-layer header is dropped with Parameter Problem code 3, pointer 0.
func TestFirstFragmentWithoutTheWholeChainIsRefused(t *testing.T) {
	h := newHarness(t, ipv6.Config{})
	dg := frag(t, peerAddr, ourAddr, wire.ProtoDestOpts, 5, 0, true, padded(protoUDP))
	h.inject(t, h.eth0, dg)
	checkCounters(t, h.counters(), map[string]int64{"InHdrErrors": 1, "InIncompleteChain": 1, "ReasmReqds": 0})
	errs := h.icmp.take()
	if len(errs) != 1 || errs[0].Type != wire.ICMPv6ParamProblem || errs[0].Code != wire.ICMPv6CodeIncompleteChain || errs[0].Param != 0 {
		t.Errorf("asked for %+v, want Parameter Problem code 3 pointer 0", errs)
	}
}

// RFC 6946 section 4: an atomic fragment is a whole datagram, delivered at
// once and never mixed with a reassembly of the same identification.
func TestAtomicFragmentIsDeliveredAtOnce(t *testing.T) {
	h := newHarness(t, ipv6.Config{})
	h.inject(t, h.eth0, frag(t, peerAddr, ourAddr, protoTest, 42, 0, true, data(16)))
	atomic := frag(t, peerAddr, ourAddr, protoTest, 42, 0, false, data(24))
	h.inject(t, h.eth0, atomic)
	wantDelivered(t, h, atomic, 48)
	checkCounters(t, h.counters(), map[string]int64{"InAtomicFragments": 1, "ReasmReqds": 1, "InDelivers": 1})
}

// A Fragment header in a reassembled datagram's fragmentable part would
// make it a fragment again: no sender makes one.
func TestFragmentOfAFragmentIsDropped(t *testing.T) {
	h := newHarness(t, ipv6.Config{})
	inner := append(fragment(protoTest, 8, true, 9), data(8)...)
	h.inject(t, h.eth0, frags(t, peerAddr, ourAddr, wire.ProtoFragment, 1, inner, data(2000), 1232)...)
	h.waitCounter(t, "ReasmNested", 1)
	if got := h.tr.take(); len(got) != 0 {
		t.Errorf("delivered %d datagrams", len(got))
	}
}

// An atomic fragment's header in the unfragmentable part is skipped by its
// fixed length, whatever its reserved byte holds (RFC 6946 section 4).
func TestReassemblyPastAnAtomicFragmentHeader(t *testing.T) {
	h := newHarness(t, ipv6.Config{})
	payload := data(2000)
	atomic := func(next uint8) []byte {
		b := fragment(next, 0, false, 1)
		b[1] = 0xff // reserved
		return b
	}
	dg := func(parts ...[]byte) []byte { return []byte(datagram(ourAddr, wire.ProtoFragment, parts...)) }
	h.inject(t, h.eth0,
		dg(atomic(wire.ProtoFragment), fragment(protoTest, 0, true, 8), payload[:1000]),
		dg(atomic(wire.ProtoFragment), fragment(protoTest, 1000, false, 8), payload[1000:]))
	h.waitCounter(t, "ReasmOKs", 1)
	wantDelivered(t, h, dg(atomic(protoTest), payload), 48)
}

// RFC 6980 section 5: neighbour discovery that came in fragments, or in an
// atomic fragment, is dropped; other ICMPv6 is not.
func TestFragmentedNeighbourDiscoveryIsDropped(t *testing.T) {
	ns := append([]byte{wire.ICMPv6NeighborSolicitation, 0, 0, 0, 0, 0, 0, 0}, data(1400)...)
	echo := append([]byte{wire.ICMPv6EchoRequest, 0, 0, 0, 0, 0, 0, 0}, data(1400)...)
	h := newHarness(t, ipv6.Config{})
	h.p.Register(wire.ProtoICMPv6, h.tr)
	h.inject(t, h.eth0, frags(t, peerLL, ourLL, wire.ProtoICMPv6, 1, nil, ns, 1232)...)
	h.waitCounter(t, "InFragmentedND", 1)
	h.inject(t, h.eth0, frag(t, peerLL, ourLL, wire.ProtoICMPv6, 2, 0, false, ns[:32]))
	h.waitCounter(t, "InFragmentedND", 2)
	h.inject(t, h.eth0, frags(t, peerLL, ourLL, wire.ProtoICMPv6, 3, nil, echo, 1232)...)
	h.waitCounter(t, "ReasmOKs", 2)
	h.inject(t, h.eth0, whole(t, peerLL, ourLL, wire.ProtoICMPv6, ns[:32]))
	if got := h.tr.take(); len(got) != 2 || got[0].b[40] != wire.ICMPv6EchoRequest || got[1].b[40] != wire.ICMPv6NeighborSolicitation {
		t.Errorf("delivered %d datagrams, want the echo request and the whole solicitation", len(got))
	}
}
