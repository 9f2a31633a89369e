package icmpv6_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/icmpv6"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/wire"
)

// The harness drives ICMPv6 alone over a fake network: datagrams built by
// gopacket go in through HandleIP as the IPv6 dealer would hand them, what
// ICMPv6 sends comes out of the fake's SendRoute with an IPv6 header put
// in front, for gopacket to decode and check, and the errors it hands on
// come out of fake transports.

var (
	ourAddr   = netip.MustParseAddr("2001:db8:1::2")
	ourOther  = netip.MustParseAddr("2001:db8:2::2") // a second address of ours
	peerAddr  = netip.MustParseAddr("2001:db8:1::1")
	farAddr   = netip.MustParseAddr("2001:db8:9::9")
	ourLL     = netip.MustParseAddr("fe80::2")
	peerLL    = netip.MustParseAddr("fe80::1")
	allNodes  = netip.MustParseAddr("ff02::1")
	errNoPath = fmt.Errorf("fake: no route: %w", syscall.ENETUNREACH)
)

const (
	zone     = "eth0"
	protoUDP = 17
	protoTCP = 6
)

// sent is a datagram ICMPv6 sent, as the fake network put it on the wire.
type sent struct {
	sp ip.SendParams
	r  ip.Route
	b  []byte // the IPv6 header and the message
}

type pmtuReport struct {
	dst            netip.Addr
	mtu, quotedLen int
}

// fakeNet is the IPv6 layer as ICMPv6 sees it. Routes: the host's own
// addresses are local; link-scoped destinations go out of eth0 from
// fe80::2; the rest from 2001:db8:1::2, unless noRoute.
type fakeNet struct {
	transports [256]ip.Transport

	mu      sync.Mutex
	errors  ipv6.ErrorSender
	noRoute bool
	out     []sent
	pmtu    []pmtuReport
}

func (n *fakeNet) Register(proto uint8, t ip.Transport) { n.transports[proto] = t }
func (n *fakeNet) Transport(proto uint8) ip.Transport   { return n.transports[proto] }
func (n *fakeNet) SetErrorSender(e ipv6.ErrorSender)    { n.errors = e }
func (n *fakeNet) IsLocal(a netip.Addr) bool            { return isOurs(a.WithZone("")) }
func (n *fakeNet) IsHostDst(a netip.Addr) bool {
	a = a.WithZone("")
	return isOurs(a) || a.IsMulticast() || a.IsLoopback()
}
func isOurs(a netip.Addr) bool { return a == ourAddr || a == ourOther || a == ourLL }
func linkScoped(a netip.Addr) bool {
	s := ipv6.AddrScope(a)
	return s == ipv6.ScopeLinkLocal || s == ipv6.ScopeInterfaceLocal
}
func (n *fakeNet) setNoRoute(v bool) { n.mu.Lock(); n.noRoute = v; n.mu.Unlock() }
func (n *fakeNet) UpdatePMTU(dst netip.Addr, mtu, quotedLen int) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pmtu = append(n.pmtu, pmtuReport{dst, mtu, quotedLen})
	return mtu
}

func (n *fakeNet) Route(dst netip.Addr) (ip.Route, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	a := dst.WithZone("")
	switch {
	case n.noRoute:
		return ip.Route{}, errNoPath
	case isOurs(a):
		return ip.Route{Src: a, NextHop: a, Local: true, MTU: 65575}, nil
	case linkScoped(a):
		return ip.Route{Src: ourLL, NextHop: a, MTU: 1500, Iface: zone}, nil
	}
	return ip.Route{Src: ourAddr, NextHop: peerLL, MTU: 1500, Iface: zone}, nil
}

// SendRoute puts the IPv6 header on, keeps the datagram and, for a
// local route, hands it back to ICMPv6 as the layer's loopback would.
func (n *fakeNet) SendRoute(pkt *buffer.Packet, sp ip.SendParams, r ip.Route) error {
	hop := sp.TTL
	if hop == 0 {
		hop = 64
	}
	f := wire.IPv6Fields{TrafficClass: sp.TOS, PayloadLen: pkt.Len(), NextHeader: sp.Proto, HopLimit: hop, Src: sp.Src.WithZone(""), Dst: sp.Dst.WithZone("")}
	b := make([]byte, wire.IPv6HeaderLen+pkt.Len())
	wire.EncodeIPv6(b, &f)
	copy(b[wire.IPv6HeaderLen:], pkt.Bytes())
	n.mu.Lock()
	n.out = append(n.out, sent{sp, r, b})
	n.mu.Unlock()
	if r.Local {
		copy(pkt.Prepend(wire.IPv6HeaderLen), b)
		n.transports[wire.ProtoICMPv6].HandleIP(pkt, ip.Header{
			Src: zonedIn(f.Src), Dst: zonedIn(f.Dst), TTL: hop, TOS: sp.TOS, Off: wire.IPv6HeaderLen,
		})
		return nil
	}
	pkt.Release()
	return nil
}

func (n *fakeNet) takeSent() []sent {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.out
	n.out = nil
	return s
}

func (n *fakeNet) takePMTU() []pmtuReport {
	n.mu.Lock()
	defer n.mu.Unlock()
	r := n.pmtu
	n.pmtu = nil
	return r
}

// fakeTransport takes datagrams and the errors about them.
type fakeTransport struct {
	mu   sync.Mutex
	errs []ip.ICMPError
}

func (t *fakeTransport) HandleIP(pkt *buffer.Packet, h ip.Header) { pkt.Release() }

func (t *fakeTransport) HandleICMPError(e ip.ICMPError) {
	e.Transport = bytes.Clone(e.Transport)
	t.mu.Lock()
	t.errs = append(t.errs, e)
	t.mu.Unlock()
}

func (t *fakeTransport) take() []ip.ICMPError {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.errs
	t.errs = nil
	return e
}

type harness struct {
	clk *clock.Virtual
	env *env.Env
	net *fakeNet
	p   *icmpv6.Protocol
	udp *fakeTransport
	tcp *fakeTransport
}

func newHarness(t testing.TB, cfg icmpv6.Config) *harness {
	t.Helper()
	h := &harness{clk: clock.NewVirtual(time.Unix(1e9, 0)), net: &fakeNet{}, udp: &fakeTransport{}, tcp: &fakeTransport{}}
	h.env = &env.Env{Clock: h.clk, Rand: env.NewRand(nil), Pool: buffer.NewPool()}
	h.net.Register(protoUDP, h.udp)
	h.net.Register(protoTCP, h.tcp)
	h.p = icmpv6.New(h.net, cfg, h.env)
	if h.net.transports[wire.ProtoICMPv6] != h.p || h.net.errors != h.p {
		t.Fatal("New did not register ICMPv6 as next header 58 and the error sender")
	}
	t.Cleanup(func() {
		h.p.Close()
		if n := h.env.Pool.Outstanding(); n != 0 {
			t.Errorf("%d packets not released", n)
		}
	})
	return h
}

// inject hands ICMPv6 the datagram d as the dealer would after taking it
// on eth0: link-scoped addresses zoned, the header's fields read, Off
// past the extension headers.
func (h *harness) inject(t testing.TB, d []byte) {
	t.Helper()
	h.injectOffload(t, d, buffer.Offload{})
}

func (h *harness) injectOffload(t testing.TB, d []byte, o buffer.Offload) {
	t.Helper()
	g, verr := wire.ParseIPv6(d)
	if verr != wire.IPv6OK {
		t.Fatalf("injected datagram: %v", verr)
	}
	c := ipv6.WalkChain(g)
	if c.Verdict != ipv6.Deliver || c.Proto != wire.ProtoICMPv6 {
		t.Fatalf("injected datagram walks to %v of %d", c.Verdict, c.Proto)
	}
	pk := h.env.Pool.Get(len(d))
	copy(pk.Bytes(), d)
	pk.Offload = o
	h.p.HandleIP(pk, ip.Header{
		Src: zonedIn(g.Src()), Dst: zonedIn(g.Dst()),
		TOS: g.TrafficClass(), TTL: g.HopLimit(), Off: c.Offset,
	})
}

func zonedIn(a netip.Addr) netip.Addr {
	if linkScoped(a) {
		return a.WithZone(zone)
	}
	return a
}

// counters returns ICMPv6's counters by name.
func (h *harness) counters() map[string]int64 { return stats.Map("", &h.p.Stats) }

// checkCounters fails unless the named counters have the values given.
func checkCounters(t *testing.T, h *harness, want map[string]int64) {
	t.Helper()
	c := h.counters()
	for name, w := range want {
		if got, ok := c[name]; !ok {
			t.Errorf("no counter %s", name)
		} else if got != w {
			t.Errorf("%s = %d, want %d", name, got, w)
		}
	}
}

// serialize builds a packet of the layers given with gopacket, lengths
// and checksums computed.
func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return slices.Clone(buf.Bytes())
}

func ipHeader(src, dst netip.Addr, next layers.IPProtocol) *layers.IPv6 {
	return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: next, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
}

// icmpv6Datagram is an ICMPv6 message of type and code from src to dst
// whose body (the rest of the header on) is body, checksummed by gopacket.
func icmpv6Datagram(t testing.TB, src, dst netip.Addr, typ, code uint8, body []byte) []byte {
	t.Helper()
	ipl := ipHeader(src, dst, layers.IPProtocolICMPv6)
	m := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, code)}
	if err := m.SetNetworkLayerForChecksum(ipl); err != nil {
		t.Fatal(err)
	}
	return serialize(t, ipl, m, gopacket.Payload(body))
}

// echo is an echo request or reply with data, built by gopacket.
func echo(t testing.TB, src, dst netip.Addr, typ uint8, id, seq uint16, data []byte) []byte {
	t.Helper()
	ipl := ipHeader(src, dst, layers.IPProtocolICMPv6)
	m := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, 0)}
	if err := m.SetNetworkLayerForChecksum(ipl); err != nil {
		t.Fatal(err)
	}
	return serialize(t, ipl, m, &layers.ICMPv6Echo{Identifier: id, SeqNumber: seq}, gopacket.Payload(data))
}

// udpDatagram is a UDP datagram from src:sport to dst:dport, built by
// gopacket: what an error quotes.
func udpDatagram(t testing.TB, src, dst netip.Addr, sport, dport uint16, n int) []byte {
	t.Helper()
	ipl := ipHeader(src, dst, layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	if err := u.SetNetworkLayerForChecksum(ipl); err != nil {
		t.Fatal(err)
	}
	return serialize(t, ipl, u, gopacket.Payload(data(n)))
}

// errorAbout is an ICMPv6 error of type and code with the 32-bit param
// from src to dst quoting orig (cut to what fits 1280 bytes).
func errorAbout(t testing.TB, src, dst netip.Addr, typ, code uint8, param uint32, orig []byte) []byte {
	t.Helper()
	body := append([]byte{byte(param >> 24), byte(param >> 16), byte(param >> 8), byte(param)}, orig[:min(len(orig), wire.ICMPv6MaxErrorQuote)]...)
	return icmpv6Datagram(t, src, dst, typ, code, body)
}

// decoded is what gopacket reads of a datagram ICMPv6 sent.
type decoded struct {
	ip   *layers.IPv6
	m    *layers.ICMPv6
	echo *layers.ICMPv6Echo // for echo messages
	// rest is the header's last word and body the rest: for an error,
	// the quote; for echo, the data.
	rest uint32
	body []byte
}

// decode checks with gopacket that s is an IPv6 datagram carrying an
// ICMPv6 message with a right checksum.
func decode(t testing.TB, s sent) decoded {
	t.Helper()
	pk := gopacket.NewPacket(s.b, layers.LayerTypeIPv6, gopacket.Default)
	if e := pk.ErrorLayer(); e != nil {
		t.Fatalf("gopacket cannot decode what ICMPv6 sent: %v", e.Error())
	}
	var d decoded
	var ok bool
	if d.ip, ok = pk.Layer(layers.LayerTypeIPv6).(*layers.IPv6); !ok {
		t.Fatal("not IPv6")
	}
	if d.m, ok = pk.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6); !ok {
		t.Fatalf("not ICMPv6: next header %d", d.ip.NextHeader)
	}
	if err := d.m.SetNetworkLayerForChecksum(d.ip); err != nil {
		t.Fatal(err)
	}
	if err, v := d.m.VerifyChecksum(); err != nil || !v.Valid {
		t.Errorf("ICMPv6 checksum %#04x, want %#04x (%v)", v.Actual, v.Correct, err)
	}
	p := d.m.LayerPayload()
	if len(p) < 4 {
		t.Fatalf("ICMPv6 message of %d bytes", len(p)+4)
	}
	d.rest = uint32(p[0])<<24 | uint32(p[1])<<16 | uint32(p[2])<<8 | uint32(p[3])
	d.body = p[4:]
	d.echo, _ = pk.Layer(layers.LayerTypeICMPv6Echo).(*layers.ICMPv6Echo)
	return d
}

func addr(b []byte) netip.Addr { a, _ := netip.AddrFromSlice(b); return a }

// data returns n bytes of a recognisable pattern.
func data(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

// an interface of a real IPv6 layer, for ipv6.ICMPError's In, which only
// that layer makes.
func newInterface(t testing.TB, name string) *ipv6.Interface {
	t.Helper()
	p := ipv6.New(ipv6.Config{}, &env.Env{Clock: clock.Real{}, Rand: env.NewRand(nil), Pool: buffer.NewPool()})
	i, err := p.AddInterface(name, 1500, link.Capabilities{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return i
}
