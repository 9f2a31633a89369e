package ipv6_test

import (
	"bytes"
	"context"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/budget"
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/stats"
)

// The harness drives one IPv6 layer alone, since the stack does not wire
// IPv6 yet: datagrams built with gopacket go in through an Interface's
// Deliver, as a NIC would hand them; what the layer sends comes out of a
// fake link output, what it delivers out of fake transports, and the
// errors it asks for out of a fake ICMPv6.

var (
	ourAddr  = netip.MustParseAddr("2001:db8:1::2")
	peerAddr = netip.MustParseAddr("2001:db8:1::1")
	farAddr  = netip.MustParseAddr("2001:db8:9::9")
	ourLL    = netip.MustParseAddr("fe80::2")
	peerLL   = netip.MustParseAddr("fe80::1")
	router   = netip.MustParseAddr("fe80::ff")
)

const (
	protoUDP  = 17
	protoTest = 253 // RFC 3692's experimental number, as a transport
	mtu       = 1500
)

// sent is a datagram the layer gave a link.
type sent struct {
	iface   string
	nextHop netip.Addr
	b       []byte
}

// fakeLink is an interface's link output.
type fakeLink struct {
	name string
	h    *harness
}

func (l *fakeLink) Output(nextHop netip.Addr, pkt *buffer.Packet) {
	l.h.mu.Lock()
	l.h.out = append(l.h.out, sent{l.name, nextHop, bytes.Clone(pkt.Bytes())})
	l.h.mu.Unlock()
	pkt.Release()
}

// delivered is a datagram a transport took.
type delivered struct {
	b []byte
	h ip.Header
}

type fakeTransport struct {
	mu  sync.Mutex
	got []delivered
}

func (t *fakeTransport) HandleIP(pkt *buffer.Packet, h ip.Header) {
	t.mu.Lock()
	t.got = append(t.got, delivered{bytes.Clone(pkt.Bytes()), h})
	t.mu.Unlock()
	pkt.Release()
}

func (t *fakeTransport) take() []delivered {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.got
	t.got = nil
	return g
}

type fakeICMP struct {
	mu   sync.Mutex
	errs []ipv6.ICMPError
}

func (f *fakeICMP) SendError(e ipv6.ICMPError) {
	e.Orig = bytes.Clone(e.Orig)
	f.mu.Lock()
	f.errs = append(f.errs, e)
	f.mu.Unlock()
}

func (f *fakeICMP) take() []ipv6.ICMPError {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.errs
	f.errs = nil
	return e
}

type harness struct {
	clk        *clock.Virtual
	env        *env.Env
	p          *ipv6.Protocol
	eth0, eth1 *ipv6.Interface
	tr         *fakeTransport // for protoTest and protoUDP
	icmp       *fakeICMP

	mu  sync.Mutex
	out []sent
}

// newHarness returns a started layer with two interfaces: eth0 with
// 2001:db8:1::2/64 and fe80::2/64 and a default route through fe80::ff,
// eth1 with no address.
func newHarness(t testing.TB, cfg ipv6.Config) *harness {
	t.Helper()
	h := &harness{clk: clock.NewVirtual(time.Unix(1e9, 0)), tr: &fakeTransport{}, icmp: &fakeICMP{}}
	h.env = &env.Env{Clock: h.clk, Rand: env.NewRand(nil), Pool: buffer.NewPool(), Budget: budget.New(64 << 20)}
	h.p = ipv6.New(cfg, h.env)
	var err error
	if h.eth0, err = h.p.AddInterface("eth0", mtu, link.Capabilities{}, &fakeLink{name: "eth0", h: h}); err != nil {
		t.Fatal(err)
	}
	if h.eth1, err = h.p.AddInterface("eth1", mtu, link.Capabilities{}, &fakeLink{name: "eth1", h: h}); err != nil {
		t.Fatal(err)
	}
	must(t, h.p.AddAddress(h.eth0, netip.PrefixFrom(ourAddr, 64), ipv6.Preferred))
	must(t, h.p.AddAddress(h.eth0, netip.PrefixFrom(ourLL, 64), ipv6.Preferred))
	must(t, h.p.AddRoute(ipv6.Route{Dst: netip.MustParsePrefix("::/0"), Gateway: router, Iface: h.eth0}))
	h.p.Register(protoTest, h.tr)
	h.p.Register(protoUDP, h.tr)
	h.p.SetErrorSender(h.icmp)
	h.p.Start()
	t.Cleanup(func() {
		h.p.Close()
		if n := h.env.Pool.Outstanding(); n != 0 {
			t.Errorf("%d packets not released after Close", n)
		}
	})
	return h
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// inject delivers datagrams on iface as one batch and waits until the
// dealer has dealt with them.
func (h *harness) inject(t testing.TB, iface *ipv6.Interface, dgs ...[]byte) {
	t.Helper()
	b := buffer.GetBatch()
	for _, d := range dgs {
		pk := h.env.Pool.Get(len(d))
		copy(pk.Bytes(), d)
		b.Pkts = append(b.Pkts, pk)
	}
	iface.Deliver(b)
	h.sync(t)
}

func (h *harness) sync(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	must(t, h.p.Sync(ctx))
}

// counters returns the layer's counters by name.
func (h *harness) counters() map[string]int64 { return stats.Map("", &h.p.Stats) }

// waitCounter waits for a counter that a goroutine other than the dealer
// (an assembler, through the dealer) brings to want.
func (h *harness) waitCounter(t testing.TB, name string, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := h.counters()[name]
		if got == want {
			h.sync(t)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %d, want %d", name, got, want)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// takeSent returns what the layer has sent since the last call.
func (h *harness) takeSent() []sent {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.out
	h.out = nil
	return s
}

// checkCounters fails unless the named counters have the values given and
// every other In/Reasm drop counter is zero.
func checkCounters(t *testing.T, c map[string]int64, want map[string]int64) {
	t.Helper()
	for name, w := range want {
		if c[name] != w {
			t.Errorf("%s = %d, want %d", name, c[name], w)
		}
	}
	drops := []string{"InHdrErrors", "InShortHeader", "InBadVersion", "InMartians", "InExtTruncated", "InBadOptions",
		"InExtHdrLimit", "InHopByHopNotFirst", "InUnknownRouting", "InUnknownOptions", "InIncompleteChain",
		"InBadFragments", "InFragmentedND", "InTruncatedPkts", "InAddrErrors", "InNoGroup", "InUnknownProtos", "InDiscards",
		"ReasmFails", "ReasmOverlaps", "ReasmMalformed", "ReasmLimit", "ReasmOversize", "ReasmNested", "ErrorsSuppressed"}
	for _, d := range drops {
		if _, ok := want[d]; !ok && c[d] != 0 {
			t.Errorf("%s = %d, want 0", d, c[d])
		}
	}
}

// data returns n bytes of a recognisable pattern.
func data(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

// serialize builds a datagram of the layers given with gopacket, lengths
// filled in.
func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return slices.Clone(buf.Bytes())
}

func ipHeader(src, dst netip.Addr, next layers.IPProtocol) *layers.IPv6 {
	return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: next, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
}

// whole is a whole datagram from src to dst carrying payload under
// protocol next.
func whole(t testing.TB, src, dst netip.Addr, next uint8, payload []byte) []byte {
	return serialize(t, ipHeader(src, dst, layers.IPProtocol(next)), gopacket.Payload(payload))
}

// frags cuts payload, with the extension headers ext in its
// fragmentable part before it, into fragments of at most size bytes of
// fragment data (a multiple of 8 but for the last), built by gopacket.
func frags(t testing.TB, src, dst netip.Addr, next uint8, id uint32, ext, payload []byte, size int) [][]byte {
	t.Helper()
	whole := append(slices.Clone(ext), payload...)
	var out [][]byte
	for off := 0; off < len(whole); off += size {
		end := min(off+size, len(whole))
		out = append(out, frag(t, src, dst, next, id, off, end < len(whole), whole[off:end]))
	}
	return out
}

// frag is one fragment at byte offset off.
func frag(t testing.TB, src, dst netip.Addr, next uint8, id uint32, off int, more bool, b []byte) []byte {
	return serialize(t, ipHeader(src, dst, layers.IPProtocolIPv6Fragment),
		&layers.IPv6Fragment{NextHeader: layers.IPProtocol(next), FragmentOffset: uint16(off / 8), MoreFragments: more, Identification: id},
		gopacket.Payload(b))
}
