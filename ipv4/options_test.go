package ipv4_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/wire"
)

// IPv4 options at a host (RFC 1122 section 3.2.1.8): recorded in, echoed
// back, refused when malformed or source-routed.

// withOptions returns ip with the options opts, each whole from its type
// byte, as gopacket lays them out.
func withOptions(ip *layers.IPv4, opts ...[]byte) *layers.IPv4 {
	c := *ip
	for _, o := range opts {
		c.Options = append(c.Options, layers.IPv4Option{OptionType: o[0], OptionLength: o[1], OptionData: o[2:]})
	}
	return &c
}

// recordRoute is a Record Route option of n slots, the first holding
// first (the sender's entry, as Linux's ping -R makes it).
func recordRoute(n int, first netip.Addr) []byte {
	o := append([]byte{wire.IPv4OptRecordRoute, byte(3 + 4*n), 8}, make([]byte, 4*n)...)
	copy(o[3:], first.AsSlice())
	return o
}

// timestamps is a Timestamp option of n entries with flag (0: times, 1:
// addresses and times).
func timestamps(n int, flag byte) []byte {
	entry := 4
	if flag != 0 {
		entry = 8
	}
	return append([]byte{wire.IPv4OptTimestamp, byte(4 + entry*n), 5, flag}, make([]byte, entry*n)...)
}

// optionOf returns the reply's option of type typ, failing without one.
func optionOf(t *testing.T, ip *layers.IPv4, typ uint8) layers.IPv4Option {
	t.Helper()
	for _, o := range ip.Options {
		if o.OptionType == typ {
			return o
		}
	}
	t.Fatalf("the reply carries no option of type %d: %+v", typ, ip.Options)
	return layers.IPv4Option{}
}

func TestEchoReplyCarriesRecordRouteBack(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	req := withOptions(echoHeader(1), recordRoute(9, rawtest.PeerAddr))
	h.Inject(h.IPFrame(t, req, rawtest.Payload(rawtest.EchoBytes(t, 8, 3, 4, data(56)))))
	ip, m := echoReply(t, h)
	if m.Id != 3 || m.Seq != 4 {
		t.Fatalf("reply id %d seq %d, want 3 and 4", m.Id, m.Seq)
	}
	// The route as Linux would have it, ping -R's output: the sender,
	// the stack as the request arrived, and as the reply left.
	rr := optionOf(t, ip, wire.IPv4OptRecordRoute)
	var route []netip.Addr
	for i := 1; i+4 <= int(rr.OptionData[0])-1; i += 4 {
		a, _ := netip.AddrFromSlice(rr.OptionData[i : i+4])
		route = append(route, a)
	}
	want := []netip.Addr{rawtest.PeerAddr, rawtest.StackAddr, rawtest.StackAddr}
	if len(route) != len(want) || route[0] != want[0] || route[1] != want[1] || route[2] != want[2] {
		t.Fatalf("recorded route %v (pointer %d), want %v", route, rr.OptionData[0], want)
	}
}

func TestEchoReplyCarriesTimestampsBack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flag  byte
		entry int
	}{{"timestamps only", 0, 4}, {"addresses and timestamps", 1, 8}} {
		t.Run(tc.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			// The stack's virtual clock, at midnight, moved on to a
			// time the entries must hold, before the peer's address is
			// learnt, which would not last so long.
			h.Clock.Advance(12*time.Hour + 34567*time.Millisecond)
			now := wire.MillisSinceMidnightUT(h.Clock.Now().UnixMilli())
			h.LearnPeer(t)
			req := withOptions(echoHeader(1), timestamps(4, tc.flag))
			h.Inject(h.IPFrame(t, req, rawtest.Payload(rawtest.EchoBytes(t, 8, 1, 1, data(8)))))
			ip, _ := echoReply(t, h)
			ts := optionOf(t, ip, wire.IPv4OptTimestamp)
			// Two entries, the request's arrival and the reply's leaving.
			if ptr := int(ts.OptionData[0]); ptr != 5+2*tc.entry {
				t.Fatalf("pointer %d after the stack's entries, want %d", ptr, 5+2*tc.entry)
			}
			for i := range 2 {
				e := ts.OptionData[2+i*tc.entry:]
				if tc.flag == 1 {
					if a, _ := netip.AddrFromSlice(e[:4]); a != rawtest.StackAddr {
						t.Errorf("entry %d from %v, want the stack's %v", i, a, rawtest.StackAddr)
					}
					e = e[4:]
				}
				if v := binary.BigEndian.Uint32(e); v != now {
					t.Errorf("entry %d: %d ms since midnight, want %d", i, v, now)
				}
			}
		})
	}
}

func TestMalformedOptionsAreAnsweredWithParameterProblem(t *testing.T) {
	tests := []struct {
		name    string
		opt     []byte
		pointer uint8
	}{
		{"record route pointer below 4", []byte{wire.IPv4OptRecordRoute, 7, 3, 0, 0, 0, 0}, 22},
		{"timestamp of an unknown flag", []byte{wire.IPv4OptTimestamp, 8, 5, 2, 0, 0, 0, 0}, 23},
		{"length past the header", []byte{0x94, 9, 0, 0}, 20},
		{"a type with no length", []byte{1, 1, 1, 0x94}, 23},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			h.LearnPeer(t)
			h.Inject(optionsFrame(t, tt.opt, rawtest.EchoBytes(t, 8, 1, 1, data(8))))
			ip, _ := datagram(t, h)
			p := gopacket.NewPacket(ip.Payload, layers.LayerTypeICMPv4, gopacket.Default)
			m, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
			if !ok {
				t.Fatalf("the answer is no ICMP message: %x", ip.Payload)
			}
			if m.TypeCode.Type() != layers.ICMPv4TypeParameterProblem || m.TypeCode.Code() != 0 {
				t.Fatalf("answered with %v, want a parameter problem", m.TypeCode)
			}
			// RFC 792: the pointer is the first byte after type, code
			// and checksum.
			if p := uint8(m.Id >> 8); p != tt.pointer {
				t.Fatalf("pointer %d, want %d", p, tt.pointer)
			}
			if got := h.Counter(t, "IPv4.InBadOptions"); got != 1 {
				t.Errorf("InBadOptions = %d, want 1", got)
			}
		})
	}
}

// optionsFrame is a frame from the peer to the stack carrying an IPv4
// header with opts as they are, however malformed (padded with EOL), and
// payload.
func optionsFrame(t *testing.T, opts, payload []byte) []byte {
	t.Helper()
	for len(opts)%4 != 0 {
		opts = append(opts, 0)
	}
	b := make([]byte, wire.IPv4MinHeaderLen+len(opts)+len(payload))
	wire.EncodeIPv4(b, &wire.IPv4Fields{TotalLen: len(b), TTL: 64, Protocol: wire.ProtoICMP, Src: rawtest.PeerAddr, Dst: rawtest.StackAddr, Options: opts})
	copy(b[wire.IPv4MinHeaderLen+len(opts):], payload)
	return rawtest.Serialize(t, rawtest.Ethernet(rawtest.PeerMAC, rawtest.StackMAC, layers.EthernetTypeIPv4), rawtest.Payload(b))
}

func TestSourceRoutedDatagramsAreRefused(t *testing.T) {
	for _, typ := range []byte{wire.IPv4OptLSRR, wire.IPv4OptSSRR} {
		h := rawtest.New(t, stack.Config{})
		h.LearnPeer(t)
		// The route's last hop is the stack: the datagram is at its
		// destination, and is refused all the same.
		sr := append([]byte{typ, 7, 8}, rawtest.StackAddr.AsSlice()...)
		h.Inject(h.IPFrame(t, withOptions(echoHeader(1), sr), rawtest.Payload(rawtest.EchoBytes(t, 8, 1, 1, data(8)))))
		h.WaitCounter(t, "IPv4.InSourceRouted", 1)
		h.ExpectNothing(t)
	}
}

// RFC 791 section 3.2: the options a fragment does not copy travel in the
// first fragment alone.
func TestAFragmentedEchoReplyCarriesTheRouteInItsFirstFragment(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	msg := data(4000)
	req := withOptions(echoHeader(9), recordRoute(9, rawtest.PeerAddr))
	for _, f := range h.Fragments(t, req, rawtest.EchoBytes(t, 8, 2, 2, msg), 1440) {
		h.Inject(f)
	}
	whole, frags := datagram(t, h)
	if len(frags) < 3 {
		t.Fatalf("the reply came in %d fragments, want 3 or more", len(frags))
	}
	optionOf(t, frags[0], wire.IPv4OptRecordRoute)
	for i, f := range frags[1:] {
		if len(f.Options) != 0 {
			t.Errorf("fragment %d carries options %+v", i+1, f.Options)
		}
	}
	_, m := echoReplyIn(t, whole)
	if !bytes.Equal(m.Payload, msg) {
		t.Error("the reply's data differs from the request's")
	}
}
