package ndp_test

import (
	"context"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"go.uber.org/goleak"

	"github.com/gonetstack/gonet/budget"
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ethernet"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/route"
	"github.com/gonetstack/gonet/wire"
)

// The harness: ndp on a NIC at one end of an in-memory pipe; the test
// reads what it sends at the other end and decodes it with gopacket, and
// hands it messages through Handle as the IPv6 layer would. The clock is
// virtual; frames are awaited on the wall clock only for their arrival.

var (
	start     = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	stackMAC  = wire.MAC{0x02, 0, 0, 0, 0, 1}
	peerMAC   = wire.MAC{0x02, 0, 0, 0, 0, 2}
	routerMAC = wire.MAC{0x02, 0, 0, 0, 0, 0xfe}
	peerLL    = netip.MustParseAddr("fe80::2")
	routerLL  = netip.MustParseAddr("fe80::fe")
	// stackLL is the EUI-64 link-local address of stackMAC.
	stackLL = netip.MustParseAddr("fe80::ff:fe00:1")
)

const timeout = 5 * time.Second

type harness struct {
	t      testing.TB
	clk    *clock.Virtual
	pool   *buffer.Pool
	nic    *ethernet.NIC
	p      *ndp.Protocol
	host   *fakeHost
	peer   *pipe.Endpoint
	frames chan []byte
}

func newHarness(t testing.TB, cfg ndp.Config) *harness {
	t.Helper()
	a, b := pipe.New(1500, net.HardwareAddr(stackMAC[:]), net.HardwareAddr(peerMAC[:]))
	pool := buffer.NewPool()
	nic, err := ethernet.NewNIC("eth0", a, pool)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewVirtual(start)
	e := &env.Env{Clock: clk, Rand: env.NewRand(rand.NewPCG(1, 2)), Pool: pool, Budget: budget.New(1 << 20)}
	h := &harness{t: t, clk: clk, pool: pool, nic: nic, peer: b, host: newFakeHost(), frames: make(chan []byte, 256)}
	h.p = ndp.New(nic, cfg, e)
	if err := h.p.Start(h.host); err != nil {
		t.Fatal(err)
	}
	nic.Start()
	go h.read()
	h.sync()
	t.Cleanup(func() {
		nic.StopReceive()
		h.p.Close()
		nic.Close()
		b.Close()
	})
	return h
}

func (h *harness) read() {
	rx := buffer.NewPool()
	pkts := []*buffer.Packet{rx.Get(1600)}
	for {
		pkts[0].Reset()
		pkts[0].SetLen(1514)
		n, err := h.peer.ReadBatch(pkts)
		if err != nil {
			return
		}
		if n == 1 {
			h.frames <- append([]byte(nil), pkts[0].Bytes()...)
		}
	}
}

// frame is a decoded frame the stack sent.
type frame struct {
	raw  []byte
	eth  *layers.Ethernet
	ip6  *layers.IPv6
	icmp *layers.ICMPv6
	pkt  gopacket.Packet
}

func decode(raw []byte) *frame {
	pk := gopacket.NewPacket(raw, layers.LayerTypeEthernet, gopacket.Default)
	f := &frame{raw: raw, pkt: pk}
	f.eth, _ = pk.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	f.ip6, _ = pk.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	f.icmp, _ = pk.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6)
	return f
}

func (f *frame) typ() uint8 {
	if f.icmp == nil {
		return 0
	}
	return f.icmp.TypeCode.Type()
}

// next returns the next frame the stack sends that is an ICMPv6 message of
// type typ, skipping others (MLD reports and solicitations sent by the
// stack's own timers).
func (h *harness) next(typ uint8) *frame {
	h.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case raw := <-h.frames:
			if f := decode(raw); f.typ() == typ {
				return f
			}
		case <-deadline:
			h.t.Fatalf("no ICMPv6 type %d sent within %v", typ, timeout)
			return nil
		}
	}
}

// none fails if the stack sends an ICMPv6 message of type typ within a
// short wall-clock wait, skipping others.
func (h *harness) none(typ uint8) {
	h.t.Helper()
	deadline := time.After(50 * time.Millisecond)
	for {
		select {
		case raw := <-h.frames:
			if f := decode(raw); f.typ() == typ {
				h.t.Fatalf("unexpected ICMPv6 type %d: %v", typ, f.pkt)
			}
		case <-deadline:
			return
		}
	}
}

// drain discards the frames sent so far.
func (h *harness) drain() {
	for {
		select {
		case <-h.frames:
		case <-time.After(20 * time.Millisecond):
			return
		}
	}
}

// message builds an IPv6 datagram carrying an ICMPv6 message of type typ
// whose body (after the 4-byte type, code, checksum) gopacket serializes,
// with a correct checksum unless badSum.
type msg struct {
	src, dst netip.Addr
	hops     uint8
	code     uint8
	badSum   bool
	frag     bool
}

func ipOf(a netip.Addr) net.IP { return net.IP(a.AsSlice()) }

// inject hands the stack an ICMPv6 message as the IPv6 layer would.
func (h *harness) inject(m msg, typ uint8, body ...gopacket.SerializableLayer) {
	h.t.Helper()
	if m.hops == 0 {
		m.hops = 255
	}
	ipl := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolICMPv6, HopLimit: m.hops, SrcIP: ipOf(m.src), DstIP: ipOf(m.dst)}
	ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, m.code)}
	if err := ic.SetNetworkLayerForChecksum(ipl); err != nil {
		h.t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}, append([]gopacket.SerializableLayer{ipl, ic}, body...)...); err != nil {
		h.t.Fatal(err)
	}
	b := buf.Bytes()
	if m.badSum {
		b[wire.IPv6HeaderLen+2] ^= 0xff
	}
	pkt := h.pool.Get(len(b))
	copy(pkt.Bytes(), b)
	// As the IPv6 layer hands them: link-scoped addresses zoned with the
	// interface they came in on.
	h.p.Handle(pkt, ip.Header{Src: linkZoned(m.src), Dst: linkZoned(m.dst), TTL: m.hops, Off: wire.IPv6HeaderLen, In: "eth0"}, m.frag)
}

// linkZoned is a with eth0's zone when it is link-local or a link-scoped
// group.
func linkZoned(a netip.Addr) netip.Addr {
	if a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() {
		return a.WithZone("eth0")
	}
	return a
}

func llOpt(typ layers.ICMPv6Opt, mac wire.MAC) layers.ICMPv6Option {
	return layers.ICMPv6Option{Type: typ, Data: append([]byte(nil), mac[:]...)}
}

func (h *harness) injectNS(m msg, target netip.Addr, opts ...layers.ICMPv6Option) {
	h.t.Helper()
	h.inject(m, layers.ICMPv6TypeNeighborSolicitation, &layers.ICMPv6NeighborSolicitation{TargetAddress: ipOf(target), Options: opts})
}

func (h *harness) injectNA(m msg, target netip.Addr, flags uint8, opts ...layers.ICMPv6Option) {
	h.t.Helper()
	h.inject(m, layers.ICMPv6TypeNeighborAdvertisement, &layers.ICMPv6NeighborAdvertisement{Flags: flags, TargetAddress: ipOf(target), Options: opts})
}

// NA flags as gopacket holds them.
const (
	naRouter    = 0x80
	naSolicited = 0x40
	naOverride  = 0x20
)

// datagram returns an IPv6 datagram from src to dst (a UDP-less payload:
// next header 59) for Output.
func (h *harness) datagram(src, dst netip.Addr, payload string) *buffer.Packet {
	pkt := h.pool.Get(wire.IPv6HeaderLen + len(payload))
	b := pkt.Bytes()
	wire.EncodeIPv6(b, &wire.IPv6Fields{PayloadLen: len(payload), NextHeader: wire.ProtoNoNext, HopLimit: 64, Src: src, Dst: dst})
	copy(b[wire.IPv6HeaderLen:], payload)
	return pkt
}

// nextData returns the next frame that is not ICMPv6.
func (h *harness) nextData() *frame {
	h.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case raw := <-h.frames:
			if f := decode(raw); f.icmp == nil {
				return f
			}
		case <-deadline:
			h.t.Fatalf("no datagram sent within %v", timeout)
			return nil
		}
	}
}

// eventually polls cond on the wall clock: for effects of goroutines the
// test does not synchronise with.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// sync waits for ndp to have carried out what it decided so far.
func (h *harness) sync() {
	h.t.Helper()
	if err := h.p.Sync(context.Background()); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) state(addr netip.Addr) ndp.State {
	n, ok := h.p.Neighbor(addr)
	if !ok {
		return 0
	}
	return n.State
}

func (h *harness) addrState(addr netip.Addr) ndp.AddrState {
	for _, a := range h.p.Addresses() {
		if a.Prefix.Addr() == addr {
			return a.State
		}
	}
	return 0
}

// fakeHost records what ndp tells the IPv6 layer.
type fakeHost struct {
	mu          sync.Mutex
	addrs       map[netip.Addr]ndp.AddrState
	onLink      map[netip.Prefix]time.Duration
	routers     map[netip.Addr]route.Preference
	mtu         int
	hopLimit    uint8
	nextHop     map[netip.Addr]netip.Addr
	redirects   map[netip.Addr]netip.Addr
	unreachable []netip.Addr
	dns         ndp.DNS
	dnsCalls    int
	temporary   []netip.Addr                // the temporary addresses added, in order
	routes      map[string]route.Preference // "PREFIX via ROUTER"
	configFlags [2]bool                     // Managed, Other
}

func newFakeHost() *fakeHost {
	return &fakeHost{
		addrs:     map[netip.Addr]ndp.AddrState{},
		onLink:    map[netip.Prefix]time.Duration{},
		routers:   map[netip.Addr]route.Preference{},
		nextHop:   map[netip.Addr]netip.Addr{},
		redirects: map[netip.Addr]netip.Addr{},
		routes:    map[string]route.Preference{},
	}
}

func (f *fakeHost) AddAddress(a netip.Prefix, s ndp.AddrState, temporary bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addrs[a.Addr()] = s
	if temporary {
		f.temporary = append(f.temporary, a.Addr())
	}
}

func (f *fakeHost) SetAddressState(a netip.Addr, s ndp.AddrState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addrs[a] = s
}

func (f *fakeHost) RemoveAddress(a netip.Addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.addrs, a)
}

func (f *fakeHost) SetOnLink(p netip.Prefix, l time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l == 0 {
		delete(f.onLink, p)
		return
	}
	f.onLink[p] = l
}

func (f *fakeHost) SetDefaultRouter(r netip.Addr, pref route.Preference, l time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l == 0 {
		delete(f.routers, r)
		return
	}
	f.routers[r] = pref
}

func (f *fakeHost) SetConfigFlags(managed, other bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.configFlags = [2]bool{managed, other}
}

func (f *fakeHost) SetRoute(prefix netip.Prefix, router netip.Addr, pref route.Preference, l time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := prefix.String() + " via " + router.String()
	if l == 0 {
		if f.routes[k] == pref {
			delete(f.routes, k)
		}
		return
	}
	f.routes[k] = pref
}

func (f *fakeHost) SetLinkMTU(mtu int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mtu = mtu
}

func (f *fakeHost) SetHopLimit(n uint8) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hopLimit = n
}

func (f *fakeHost) NextHop(dst netip.Addr) (netip.Addr, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, ok := f.nextHop[dst]
	return h, ok
}

func (f *fakeHost) Redirect(dst, target netip.Addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.redirects[dst] = target
}

func (f *fakeHost) SetDNS(d ndp.DNS) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dns = d
	f.dnsCalls++
}

func (f *fakeHost) Unreachable(nextHop netip.Addr, pkt *buffer.Packet) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unreachable = append(f.unreachable, nextHop)
	pkt.Release()
}

func (f *fakeHost) addr(a netip.Addr) (ndp.AddrState, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.addrs[a]
	return s, ok
}

func (f *fakeHost) with(fn func(f *fakeHost)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
