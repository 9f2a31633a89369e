package dhcp_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/dhcp"
	"github.com/gonetstack/gonet/internal/testkit/rawtest"
)

// The client runs against the package's own server over an in-memory
// network (memNet) on a virtual clock; hand-built replies stand in for
// servers that NAK or misbehave. What the client sends is decoded with
// gopacket's DHCPv4 layer, independent of the encoder it shares with the
// server.

var (
	hostMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x42}
	bcast   = netip.AddrFrom4([4]byte{255, 255, 255, 255})
	t0      = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// datagram is one message on the in-memory network.
type datagram struct {
	b        []byte
	from, to netip.AddrPort
	at       time.Time
}

// memConn is one end of memNet: a dhcp.ClientConn, and the server's
// PacketConn.
type memConn struct {
	n      *memNet
	port   uint16
	in     chan datagram
	closed chan struct{}
	once   sync.Once
}

func (c *memConn) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	select {
	case d := <-c.in:
		return copy(b, d.b), d.from, nil
	case <-c.closed:
		return 0, netip.AddrPort{}, net.ErrClosed
	}
}

func (c *memConn) WriteToUDPAddrPort(b []byte, to netip.AddrPort) (int, error) {
	c.n.carry(c.port, append([]byte(nil), b...), to)
	return len(b), nil
}

func (c *memConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

// memNet carries datagrams between a client (port 68) and a server (port
// 67), and records what the client sends. cut stops anything reaching the
// server, as when it vanishes.
type memNet struct {
	clk            *clock.Virtual
	client, server *memConn
	host           *fakeHost
	sent           chan datagram // what the client sent
	replies        chan datagram // what the server sent

	mu  sync.Mutex
	cut bool
}

func newMemNet(clk *clock.Virtual, h *fakeHost) *memNet {
	n := &memNet{clk: clk, host: h, sent: make(chan datagram, 256), replies: make(chan datagram, 256)}
	n.client = &memConn{n: n, port: dhcp.ClientPort, in: make(chan datagram, 64), closed: make(chan struct{})}
	n.server = &memConn{n: n, port: dhcp.ServerPort, in: make(chan datagram, 64), closed: make(chan struct{})}
	return n
}

func (n *memNet) setCut(cut bool) {
	n.mu.Lock()
	n.cut = cut
	n.mu.Unlock()
}

func (n *memNet) carry(fromPort uint16, b []byte, to netip.AddrPort) {
	if fromPort == dhcp.ServerPort {
		d := datagram{b: b, from: netip.AddrPortFrom(server, dhcp.ServerPort), to: to}
		select {
		case n.replies <- d:
		default:
		}
		n.client.in <- d
		return
	}
	src := netip.IPv4Unspecified()
	if a, ok := n.host.addr(); ok {
		src = a.Addr()
	}
	d := datagram{b: b, from: netip.AddrPortFrom(src, dhcp.ClientPort), to: to, at: n.clk.Now()}
	n.sent <- d
	n.mu.Lock()
	cut := n.cut
	n.mu.Unlock()
	if !cut && to.Port() == dhcp.ServerPort && (to.Addr() == bcast || to.Addr() == server) {
		n.server.in <- d
	}
}

// inject delivers a hand-built reply to the client.
func (n *memNet) inject(m *dhcpv4.DHCPv4) {
	n.client.in <- datagram{b: m.ToBytes(), from: netip.AddrPortFrom(server, dhcp.ServerPort)}
}

// fakeHost is the NIC the client configures.
type fakeHost struct {
	mu      sync.Mutex
	prefix  netip.Prefix
	gateway netip.Addr   // the default route's
	routes  []dhcp.Route // every route
	dns     []netip.Addr
	search  []string
	mtu     int
	refuse  bool // AddAddress fails
}

const linkMTU = 1500

func (h *fakeHost) HardwareAddr() net.HardwareAddr { return hostMAC }

func (h *fakeHost) AddAddress(a netip.Prefix) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refuse {
		return os.ErrExist
	}
	h.prefix = a
	return nil
}

func (h *fakeHost) RemoveAddress(a netip.Addr) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.prefix.Addr() != a {
		return os.ErrNotExist
	}
	h.prefix = netip.Prefix{}
	return nil
}

func (h *fakeHost) AddRoute(dst netip.Prefix, gw netip.Addr) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := dhcp.Route{Dst: dst, Gateway: gw}
	if slices.Contains(h.routes, r) {
		return os.ErrExist
	}
	// As the stack: a router must be on-link, on the address's subnet or
	// an on-link route's.
	onLink := !gw.IsValid() || h.prefix.Contains(gw) ||
		slices.ContainsFunc(h.routes, func(o dhcp.Route) bool { return !o.Gateway.IsValid() && o.Dst.Contains(gw) })
	if !onLink {
		return os.ErrInvalid
	}
	h.routes = append(h.routes, r)
	if dst.Bits() == 0 {
		h.gateway = gw
	}
	return nil
}

func (h *fakeHost) RemoveRoute(dst netip.Prefix, gw netip.Addr) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.routes = slices.DeleteFunc(h.routes, func(r dhcp.Route) bool { return r == dhcp.Route{Dst: dst, Gateway: gw} })
	if dst.Bits() == 0 && h.gateway == gw {
		h.gateway = netip.Addr{}
	}
}

func (h *fakeHost) routeList() []dhcp.Route {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.routes)
}

func (h *fakeHost) SetMTU(mtu int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if mtu == 0 || mtu > linkMTU {
		mtu = linkMTU
	}
	h.mtu = mtu
	return mtu
}

func (h *fakeHost) SetDNS(servers []netip.Addr, search []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dns, h.search = servers, search
}

func (h *fakeHost) addr() (netip.Prefix, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.prefix, h.prefix.IsValid()
}

func (h *fakeHost) state() (netip.Prefix, netip.Addr, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.prefix, h.gateway, h.mtu
}

// cfix is a client on a memNet, with the package's server at the other
// end unless noServer.
type cfix struct {
	clk    *clock.Virtual
	net    *memNet
	host   *fakeHost
	srv    *dhcp.Server
	c      *dhcp.Client
	events chan dhcp.Event
}

type cfixOpts struct {
	noServer bool
	pool     int
	lease    time.Duration
	client   dhcp.ClientConfig
}

func newCfix(t *testing.T, o cfixOpts) *cfix {
	t.Helper()
	f := &cfix{clk: clock.NewVirtual(t0), host: &fakeHost{mtu: linkMTU}, events: make(chan dhcp.Event, 32)}
	f.net = newMemNet(f.clk, f.host)
	if !o.noServer {
		cfg := testConfig(max(o.pool, 4))
		if o.lease != 0 {
			cfg.LeaseTime = o.lease
		}
		cfg.Clock = f.clk
		srv, err := dhcp.NewServer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		f.srv = srv
		done := make(chan error, 1)
		go func() { done <- srv.Serve(f.net.server) }()
		t.Cleanup(func() {
			f.net.server.Close()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	cfg := o.client
	cfg.Clock = f.clk
	cfg.Rand = rand.NewPCG(1, 2)
	cfg.Notify = func(e dhcp.Event) { f.events <- e }
	ctx, cancel := context.WithCancel(context.Background())
	f.c = dhcp.StartClient(ctx, f.net.client, f.host, cfg)
	t.Cleanup(func() {
		cancel()
		<-f.c.Done()
	})
	return f
}

const waitLimit = 5 * time.Second

// next returns the next message the client sent, decoded by gopacket.
func (f *cfix) next(t *testing.T) (*layers.DHCPv4, datagram) {
	t.Helper()
	select {
	case d := <-f.net.sent:
		m := &layers.DHCPv4{}
		if err := m.DecodeFromBytes(d.b, gopacket.NilDecodeFeedback); err != nil {
			t.Fatalf("gopacket cannot decode what the client sent: %v", err)
		}
		if m.Operation != layers.DHCPOpRequest {
			t.Fatalf("op %v, want BOOTREQUEST", m.Operation)
		}
		return m, d
	case <-time.After(waitLimit):
		t.Fatal("the client sent nothing")
	}
	return nil, datagram{}
}

// expectMsg is next, checking the message's type.
func (f *cfix) expectMsg(t *testing.T, typ layers.DHCPMsgType) (*layers.DHCPv4, datagram) {
	t.Helper()
	m, d := f.next(t)
	if got := msgType(m); got != typ {
		t.Fatalf("client sent %v, want %v", got, typ)
	}
	return m, d
}

func (f *cfix) event(t *testing.T, kind dhcp.EventKind) dhcp.Event {
	t.Helper()
	select {
	case e := <-f.events:
		if e.Kind != kind {
			t.Fatalf("event %v, want %v", e.Kind, kind)
		}
		return e
	case <-time.After(waitLimit):
		t.Fatalf("no %v event", kind)
	}
	return dhcp.Event{}
}

// waitState waits, on the wall clock, for the client's goroutine to reach
// s and arm its timer.
func (f *cfix) waitState(t *testing.T, states ...dhcp.ClientState) dhcp.ClientState {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		if s := f.c.State(); slices.Contains(states, s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("client in %v, want %v", f.c.State(), states)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// advanceTo moves the clock to the client's next timer after waiting for
// it to be armed, and returns its time. It is for the moments when the
// client's one timer is not pending: it has just fired (the clock takes a
// timer off its list as it fires it, and the client re-arms it after
// acting) or the client stopped it (an ACK's lease). After a message the
// client sent on anything else (a reply, LinkUp, Conflict) the timer it
// had may still be pending at its old time for a moment, before the client
// re-arms it: advanceWithin, then.
func (f *cfix) advanceTo(t *testing.T) time.Time {
	t.Helper()
	f.clk.WaitPending(1)
	at, _ := f.clk.NextDeadline()
	f.clk.Set(at)
	return at
}

// retransmitMax is the longest a REQUEST waits for its retransmission:
// RFC 2131 section 4.1's 64 s, and its second of randomization.
const retransmitMax = 65 * time.Second

// advanceWithin is advanceTo for a timer due within d: it waits, on the
// wall clock, for the client to arm one, since the lease's own timer, due
// later, may be the only one pending for a moment after a message is
// sent (advanceTo would then jump to it, past the retransmission).
func (f *cfix) advanceWithin(t *testing.T, d time.Duration) time.Time {
	t.Helper()
	limit := time.Now().Add(waitLimit)
	for {
		f.clk.WaitPending(1)
		if at, ok := f.clk.NextDeadline(); ok && at.Sub(f.clk.Now()) <= d {
			f.clk.Set(at)
			return at
		}
		if time.Now().After(limit) {
			t.Fatalf("no timer due within %v", d)
		}
		time.Sleep(time.Millisecond)
	}
}

// fireDueUntil fires what is due at the clock's time, without moving it,
// until the client is in one of states: for a timer the client arms in the
// past, which is due at once.
func (f *cfix) fireDueUntil(t *testing.T, states ...dhcp.ClientState) {
	t.Helper()
	limit := time.Now().Add(waitLimit)
	for !slices.Contains(states, f.c.State()) {
		if time.Now().After(limit) {
			t.Fatalf("client in %v with the clock at %v, want %v", f.c.State(), f.clk.Now(), states)
		}
		f.clk.Set(f.clk.Now())
		time.Sleep(100 * time.Microsecond)
	}
}

func msgType(m *layers.DHCPv4) layers.DHCPMsgType {
	if d := opt(m, layers.DHCPOptMessageType); len(d) == 1 {
		return layers.DHCPMsgType(d[0])
	}
	return layers.DHCPMsgTypeUnspecified
}

func optAddr(m *layers.DHCPv4, code layers.DHCPOpt) netip.Addr {
	a, _ := netip.AddrFromSlice(opt(m, code))
	return a
}

func ipAddr(b net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(b.To4())
	return a
}

// bind runs DISCOVER, OFFER, REQUEST, ACK against the server and returns
// the lease.
func (f *cfix) bind(t *testing.T) dhcp.ClientLease {
	t.Helper()
	f.expectMsg(t, layers.DHCPMsgTypeDiscover)
	f.expectMsg(t, layers.DHCPMsgTypeRequest)
	e := f.event(t, dhcp.LeaseBound)
	f.waitState(t, dhcp.Bound)
	return e.Lease
}

func TestClientObtainsLeaseAndAppliesIt(t *testing.T) {
	f := newCfix(t, cfixOpts{client: dhcp.ClientConfig{Hostname: "gonet"}})
	disc, d := f.expectMsg(t, layers.DHCPMsgTypeDiscover)
	if d.to != netip.AddrPortFrom(bcast, dhcp.ServerPort) || d.from.Addr() != netip.IPv4Unspecified() {
		t.Errorf("DISCOVER from %v to %v, want 0.0.0.0:68 to 255.255.255.255:67", d.from, d.to)
	}
	if disc.Flags&0x8000 == 0 {
		t.Error("DISCOVER without the broadcast flag (RFC 2131 section 4.1)")
	}
	if !bytes.Equal(disc.ClientHWAddr, hostMAC) || disc.HardwareType != layers.LinkTypeEthernet || disc.HardwareLen != 6 {
		t.Errorf("chaddr %v type %v len %d", disc.ClientHWAddr, disc.HardwareType, disc.HardwareLen)
	}
	if got, want := opt(disc, layers.DHCPOptClientID), append([]byte{1}, hostMAC...); !bytes.Equal(got, want) {
		t.Errorf("client identifier %x, want %x", got, want)
	}
	if got := string(opt(disc, layers.DHCPOptHostname)); got != "gonet" {
		t.Errorf("host name %q", got)
	}
	params := opt(disc, layers.DHCPOptParamsRequest)
	for _, want := range []layers.DHCPOpt{layers.DHCPOptSubnetMask, layers.DHCPOptRouter, layers.DHCPOptDNS, layers.DHCPOptInterfaceMTU, layers.DHCPOptDomainSearch} {
		if !bytes.Contains(params, []byte{byte(want)}) {
			t.Errorf("parameter request list %v lacks %v", params, want)
		}
	}
	if opt(disc, layers.DHCPOptServerID) != nil || !ipAddr(disc.ClientIP).IsUnspecified() {
		t.Error("DISCOVER with a server identifier or ciaddr (table 5)")
	}

	req, d := f.expectMsg(t, layers.DHCPMsgTypeRequest)
	if req.Xid != disc.Xid {
		t.Errorf("REQUEST xid %#x, want the DISCOVER's %#x (section 4.4.1)", req.Xid, disc.Xid)
	}
	if d.to.Addr() != bcast || req.Flags&0x8000 == 0 || !ipAddr(req.ClientIP).IsUnspecified() {
		t.Errorf("REQUEST to %v flags %#x ciaddr %v: want broadcast, broadcast flag, no ciaddr", d.to, req.Flags, req.ClientIP)
	}
	if got := optAddr(req, layers.DHCPOptRequestIP); got != first {
		t.Errorf("requested address %v, want %v", got, first)
	}
	if got := optAddr(req, layers.DHCPOptServerID); got != server {
		t.Errorf("server identifier %v, want %v", got, server)
	}

	l := f.event(t, dhcp.LeaseBound).Lease
	f.waitState(t, dhcp.Bound)
	if l.Addr != netip.PrefixFrom(first, 24) || l.Server != server || l.LeaseTime != leaseTime ||
		l.T1 != leaseTime/2 || l.T2 != leaseTime*7/8 || l.MTU != mtu || len(l.DNS) != 1 || l.DNS[0] != dnsAddr {
		t.Errorf("lease %+v", l)
	}
	prefix, gw, m := f.host.state()
	if prefix != netip.PrefixFrom(first, 24) || gw != server || m != mtu {
		t.Errorf("host has %v via %v MTU %d; want %v/24 via %v MTU %d", prefix, gw, m, first, server, mtu)
	}
	f.host.mu.Lock()
	if !slices.Equal(f.host.dns, []netip.Addr{dnsAddr}) {
		t.Errorf("host DNS %v, want %v", f.host.dns, dnsAddr)
	}
	f.host.mu.Unlock()
	if got, ok := f.c.Lease(); !ok || got.Addr != l.Addr {
		t.Errorf("Lease() = %v, %v", got, ok)
	}
	if s := f.srv.Leases(); len(s) != 1 || s[0].Addr != first {
		t.Errorf("server's leases %v", s)
	}
}

// TestClientRetransmitsWithBackoff pins RFC 2131 section 4.1's
// schedule: 4, 8, 16, 32 and then 64 seconds between DISCOVERs, each
// within a second either way, with secs counting up.
func TestClientRetransmitsWithBackoff(t *testing.T) {
	f := newCfix(t, cfixOpts{noServer: true})
	_, prev := f.expectMsg(t, layers.DHCPMsgTypeDiscover)
	var xid uint32
	for i, base := range []time.Duration{4, 8, 16, 32, 64, 64} {
		base *= time.Second
		f.advanceTo(t)
		m, d := f.expectMsg(t, layers.DHCPMsgTypeDiscover)
		if i == 0 {
			xid = m.Xid
		} else if m.Xid != xid {
			t.Errorf("retransmission %d changed xid", i)
		}
		if gap := d.at.Sub(prev.at); gap < base-time.Second || gap > base+time.Second {
			t.Errorf("retransmission %d after %v, want %v ± 1 s", i+1, gap, base)
		}
		if want := uint16(d.at.Sub(t0) / time.Second); m.Secs != want {
			t.Errorf("secs %d, want %d", m.Secs, want)
		}
		prev = d
	}
	if got := f.c.Stats.Retransmits.Load(); got != 6 {
		t.Errorf("Retransmits = %d, want 6", got)
	}
}

func TestClientRenewsAtT1ByUnicast(t *testing.T) {
	f := newCfix(t, cfixOpts{lease: 10 * time.Minute})
	l := f.bind(t)
	at := f.advanceTo(t)
	if want := l.Start.Add(5 * time.Minute); !at.Equal(want) {
		t.Errorf("renewal at %v, want T1 %v", at, want)
	}
	req, d := f.expectMsg(t, layers.DHCPMsgTypeRequest)
	if d.to != netip.AddrPortFrom(server, dhcp.ServerPort) || d.from.Addr() != first {
		t.Errorf("renewal from %v to %v, want %v unicast to the server", d.from, d.to, first)
	}
	if ipAddr(req.ClientIP) != first || opt(req, layers.DHCPOptServerID) != nil || opt(req, layers.DHCPOptRequestIP) != nil {
		t.Errorf("renewal: ciaddr %v, server id %v, requested %v: want ciaddr only (table 5)", req.ClientIP,
			opt(req, layers.DHCPOptServerID), opt(req, layers.DHCPOptRequestIP))
	}
	e := f.event(t, dhcp.LeaseRenewed)
	if !e.Lease.Start.Equal(at) || e.Lease.Addr.Addr() != first {
		t.Errorf("renewed lease %+v, want one from %v", e.Lease, at)
	}
	f.waitState(t, dhcp.Bound)
	if f.c.Stats.Renewed.Load() != 1 {
		t.Errorf("Renewed = %d", f.c.Stats.Renewed.Load())
	}
}

func TestClientRebindsAtT2ByBroadcast(t *testing.T) {
	f := newCfix(t, cfixOpts{lease: 16 * time.Minute})
	l := f.bind(t)
	f.net.setCut(true)
	f.advanceTo(t) // T1
	f.expectMsg(t, layers.DHCPMsgTypeRequest)
	// Renewals until T2, at least a minute apart (section 4.4.5).
	var last time.Time
	for {
		at := f.advanceTo(t)
		m, d := f.expectMsg(t, layers.DHCPMsgTypeRequest)
		if d.to.Addr() == bcast {
			if want := l.RebindAt(); !at.Equal(want) {
				t.Errorf("rebinding at %v, want T2 %v", at, want)
			}
			// Section 2: secs counts from the start of the
			// renewal process, T1.
			if want := uint16((l.T2 - l.T1) / time.Second); m.Secs != want {
				t.Errorf("rebinding secs %d, want %d, the seconds since T1", m.Secs, want)
			}
			break
		}
		if !last.IsZero() && at.Sub(last) < time.Minute {
			t.Errorf("renewals %v apart, want at least a minute", at.Sub(last))
		}
		last = at
	}
	f.waitState(t, dhcp.Rebinding)
	f.net.setCut(false)
	f.advanceTo(t)
	req, _ := f.expectMsg(t, layers.DHCPMsgTypeRequest)
	if ipAddr(req.ClientIP) != first {
		t.Errorf("rebinding ciaddr %v", req.ClientIP)
	}
	f.event(t, dhcp.LeaseRenewed)
	f.waitState(t, dhcp.Bound)
}

func TestClientLeaseExpiryRemovesAddress(t *testing.T) {
	f := newCfix(t, cfixOpts{lease: 4 * time.Minute})
	l := f.bind(t)
	f.net.setCut(true)
	for f.c.State() != dhcp.Init && f.c.State() != dhcp.Selecting {
		f.advanceTo(t)
		f.next(t)
	}
	e := f.event(t, dhcp.LeaseLost)
	if e.Lease.Addr != l.Addr {
		t.Errorf("lost %v, want %v", e.Lease.Addr, l.Addr)
	}
	if now := f.clk.Now(); !now.Equal(l.Expiry()) {
		t.Errorf("lost at %v, want the expiry %v", now, l.Expiry())
	}
	prefix, gw, m := f.host.state()
	if prefix.IsValid() || gw.IsValid() || m != linkMTU {
		t.Errorf("host keeps %v via %v MTU %d after expiry", prefix, gw, m)
	}
	f.host.mu.Lock()
	if f.host.dns != nil {
		t.Errorf("host keeps DNS %v after expiry", f.host.dns)
	}
	f.host.mu.Unlock()
	if _, ok := f.c.Lease(); ok {
		t.Error("Lease() still reports the expired lease")
	}
	if f.c.Stats.Expired.Load() != 1 {
		t.Errorf("Expired = %d", f.c.Stats.Expired.Load())
	}
}

// nakFor builds a server's DHCPNAK answering m.
func nakFor(m *layers.DHCPv4) *dhcpv4.DHCPv4 {
	r := replyTo(m, dhcpv4.MessageTypeNak)
	r.Options.Update(dhcpv4.OptMessage("wrong network"))
	return r
}

// replyTo builds the start of a reply to m from server.
func replyTo(m *layers.DHCPv4, typ dhcpv4.MessageType) *dhcpv4.DHCPv4 {
	var xid dhcpv4.TransactionID
	xid[0], xid[1], xid[2], xid[3] = byte(m.Xid>>24), byte(m.Xid>>16), byte(m.Xid>>8), byte(m.Xid)
	r := &dhcpv4.DHCPv4{
		OpCode: dhcpv4.OpcodeBootReply, HWType: 1, TransactionID: xid,
		ClientIPAddr: net.IPv4zero.To4(), YourIPAddr: net.IPv4zero.To4(), ServerIPAddr: net.IPv4zero.To4(),
		GatewayIPAddr: net.IPv4zero.To4(), ClientHWAddr: m.ClientHWAddr, Options: dhcpv4.Options{},
	}
	r.Options.Update(dhcpv4.OptMessageType(typ))
	r.Options.Update(dhcpv4.OptServerIdentifier(server.AsSlice()))
	return r
}

// ackFor builds an ACK of a to m, with the options given.
func ackFor(m *layers.DHCPv4, a netip.Addr, opts ...dhcpv4.Option) *dhcpv4.DHCPv4 {
	r := replyTo(m, dhcpv4.MessageTypeAck)
	r.YourIPAddr = a.AsSlice()
	for _, o := range opts {
		r.Options.Update(o)
	}
	return r
}

func TestClientNakReturnsToInit(t *testing.T) {
	f := newCfix(t, cfixOpts{noServer: true})
	disc, _ := f.expectMsg(t, layers.DHCPMsgTypeDiscover)
	offer := replyTo(disc, dhcpv4.MessageTypeOffer)
	offer.YourIPAddr = first.AsSlice()
	f.net.inject(offer)
	req, _ := f.expectMsg(t, layers.DHCPMsgTypeRequest)
	f.net.inject(nakFor(req))
	again, _ := f.expectMsg(t, layers.DHCPMsgTypeDiscover)
	if again.Xid == req.Xid {
		t.Error("the DISCOVER after a NAK reuses the xid")
	}
	if f.c.Stats.InNaks.Load() != 1 {
		t.Errorf("InNaks = %d", f.c.Stats.InNaks.Load())
	}
}

func TestClientInitRebootWithRememberedLease(t *testing.T) {
	tests := []struct {
		name       string
		remembered netip.Addr
		want       netip.Addr
		nak        bool
	}{
		{"the address is the server's to give", second, second, false},
		{"a wrong address is NAKed: DISCOVER follows", netip.MustParseAddr("192.168.7.7"), first, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newCfix(t, cfixOpts{client: dhcp.ClientConfig{Remembered: &dhcp.ClientLease{Addr: netip.PrefixFrom(tt.remembered, 24)}}})
			req, d := f.expectMsg(t, layers.DHCPMsgTypeRequest)
			if d.to.Addr() != bcast || optAddr(req, layers.DHCPOptRequestIP) != tt.remembered ||
				opt(req, layers.DHCPOptServerID) != nil || !ipAddr(req.ClientIP).IsUnspecified() {
				t.Errorf("INIT-REBOOT REQUEST to %v requests %v, server id %v, ciaddr %v (table 5: broadcast, requested, no server id, no ciaddr)",
					d.to, optAddr(req, layers.DHCPOptRequestIP), opt(req, layers.DHCPOptServerID), req.ClientIP)
			}
			if tt.nak {
				f.expectMsg(t, layers.DHCPMsgTypeDiscover)
				f.expectMsg(t, layers.DHCPMsgTypeRequest)
			}
			l := f.event(t, dhcp.LeaseBound).Lease
			if l.Addr.Addr() != tt.want {
				t.Errorf("bound to %v, want %v", l.Addr, tt.want)
			}
		})
	}
}

func TestClientDeclinesAddressInUse(t *testing.T) {
	var mu sync.Mutex
	var probed []netip.Addr
	probe := func(_ context.Context, a netip.Addr) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		probed = append(probed, a)
		return a == first, nil
	}
	f := newCfix(t, cfixOpts{client: dhcp.ClientConfig{Probe: probe}})
	f.expectMsg(t, layers.DHCPMsgTypeDiscover)
	f.expectMsg(t, layers.DHCPMsgTypeRequest)
	dec, d := f.expectMsg(t, layers.DHCPMsgTypeDecline)
	if optAddr(dec, layers.DHCPOptRequestIP) != first || optAddr(dec, layers.DHCPOptServerID) != server ||
		!ipAddr(dec.ClientIP).IsUnspecified() || d.to.Addr() != bcast {
		t.Errorf("DECLINE to %v: requested %v, server %v, ciaddr %v", d.to, optAddr(dec, layers.DHCPOptRequestIP),
			optAddr(dec, layers.DHCPOptServerID), dec.ClientIP)
	}
	f.event(t, dhcp.AddressDeclined)
	if p, _, _ := f.host.state(); p.IsValid() {
		t.Errorf("declined address %v applied", p)
	}
	f.waitState(t, dhcp.Init)
	at := f.advanceTo(t)
	if wait := at.Sub(d.at); wait != 10*time.Second {
		t.Errorf("restarted %v after DECLINE, want 10 s (RFC 2131 section 3.1)", wait)
	}
	f.expectMsg(t, layers.DHCPMsgTypeDiscover)
	f.expectMsg(t, layers.DHCPMsgTypeRequest)
	l := f.event(t, dhcp.LeaseBound).Lease
	if l.Addr.Addr() != second {
		t.Errorf("bound to %v after declining %v, want %v", l.Addr, first, second)
	}
	if f.c.Stats.Conflicts.Load() != 1 || f.srv.Stats.InDeclines.Load() != 1 {
		t.Errorf("Conflicts = %d, server's InDeclines = %d", f.c.Stats.Conflicts.Load(), f.srv.Stats.InDeclines.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(probed) != 2 {
		t.Errorf("probed %v", probed)
	}
}

func TestClientReleaseGivesLeaseBack(t *testing.T) {
	f := newCfix(t, cfixOpts{})
	f.bind(t)
	if err := f.c.Release(); err != nil {
		t.Fatal(err)
	}
	rel, d := f.expectMsg(t, layers.DHCPMsgTypeRelease)
	if d.to != netip.AddrPortFrom(server, dhcp.ServerPort) || ipAddr(rel.ClientIP) != first ||
		optAddr(rel, layers.DHCPOptServerID) != server || opt(rel, layers.DHCPOptRequestIP) != nil {
		t.Errorf("RELEASE to %v ciaddr %v server %v (section 4.4.6: unicast, ciaddr, server id)", d.to, rel.ClientIP,
			optAddr(rel, layers.DHCPOptServerID))
	}
	f.event(t, dhcp.LeaseReleased)
	if p, gw, _ := f.host.state(); p.IsValid() || gw.IsValid() {
		t.Errorf("host keeps %v via %v after Release", p, gw)
	}
	waitStat(t, "server InReleases", &f.srv.Stats.InReleases, 1)
	// The server counts a RELEASE as it takes it, then frees the lease.
	deadline := time.Now().Add(rawtest.Timeout)
	for l := f.srv.Leases(); len(l) != 0; l = f.srv.Leases() {
		if time.Now().After(deadline) {
			t.Fatalf("server still leases %v", l)
		}
		time.Sleep(100 * time.Microsecond)
	}
	if f.c.State() != dhcp.Stopped || f.c.Release() == nil {
		t.Error("client not stopped after Release")
	}
}

// TestClientDropsRepliesNotForIt sends the client, in REQUESTING, replies
// it must ignore; each is counted under its reason and the client stays
// where it was.
func TestClientDropsRepliesNotForIt(t *testing.T) {
	f := newCfix(t, cfixOpts{noServer: true})
	disc, _ := f.expectMsg(t, layers.DHCPMsgTypeDiscover)
	offer := replyTo(disc, dhcpv4.MessageTypeOffer)
	offer.YourIPAddr = first.AsSlice()
	f.net.inject(offer)
	req, _ := f.expectMsg(t, layers.DHCPMsgTypeRequest)
	f.waitState(t, dhcp.Requesting)
	lease := dhcpv4.OptIPAddressLeaseTime(time.Hour)
	tests := []struct {
		name  string
		reply func() *dhcpv4.DHCPv4
		stat  func(*dhcp.ClientStats) uint64
	}{
		{"another transaction", func() *dhcpv4.DHCPv4 {
			m := ackFor(req, first, lease)
			m.TransactionID[0]++
			return m
		}, func(s *dhcp.ClientStats) uint64 { return s.InBadXID.Load() }},
		{"another client's hardware address", func() *dhcpv4.DHCPv4 {
			m := ackFor(req, first, lease)
			m.ClientHWAddr = net.HardwareAddr{2, 0, 0, 0, 0, 0x43}
			return m
		}, func(s *dhcp.ClientStats) uint64 { return s.InOtherClient.Load() }},
		{"another client's identifier", func() *dhcpv4.DHCPv4 {
			return ackFor(req, first, lease, dhcpv4.OptClientIdentifier([]byte{1, 2, 3}))
		}, func(s *dhcp.ClientStats) uint64 { return s.InOtherClient.Load() }},
		{"a request, not a reply", func() *dhcpv4.DHCPv4 {
			m := ackFor(req, first, lease)
			m.OpCode = dhcpv4.OpcodeBootRequest
			return m
		}, func(s *dhcp.ClientStats) uint64 { return s.InNotReply.Load() }},
		{"an ACK without a lease time", func() *dhcpv4.DHCPv4 { return ackFor(req, first) },
			func(s *dhcp.ClientStats) uint64 { return s.InBadAck.Load() }},
		{"an ACK for broadcast", func() *dhcpv4.DHCPv4 { return ackFor(req, bcast, lease) },
			func(s *dhcp.ClientStats) uint64 { return s.InBadAck.Load() }},
		{"an ACK from a server not asked", func() *dhcpv4.DHCPv4 {
			m := ackFor(req, first, lease)
			m.Options.Update(dhcpv4.OptServerIdentifier(otherSrv.AsSlice()))
			return m
		}, func(s *dhcp.ClientStats) uint64 { return s.InOtherServer.Load() }},
		{"an OFFER while requesting", func() *dhcpv4.DHCPv4 {
			m := replyTo(req, dhcpv4.MessageTypeOffer)
			m.YourIPAddr = first.AsSlice()
			return m
		}, func(s *dhcp.ClientStats) uint64 { return s.InUnexpected.Load() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.stat(&f.c.Stats)
			f.net.inject(tt.reply())
			deadline := time.Now().Add(waitLimit)
			for tt.stat(&f.c.Stats) != before+1 {
				if time.Now().After(deadline) {
					t.Fatal("not counted")
				}
				time.Sleep(100 * time.Microsecond)
			}
			if s := f.c.State(); s != dhcp.Requesting {
				t.Errorf("state %v after it, want REQUESTING", s)
			}
		})
	}
	// And a malformed datagram: not a DHCP message at all.
	f.net.client.in <- datagram{b: []byte{2, 1, 6}}
	waitStat(t, "InMalformed", &f.c.Stats.InMalformed, 1)
	// The ACK itself, with hand-picked options, is taken as they say.
	f.net.inject(ackFor(req, first, dhcpv4.OptIPAddressLeaseTime(time.Hour), dhcpv4.OptSubnetMask(net.CIDRMask(20, 32)),
		dhcpv4.OptRouter(net.IP(otherSrv.AsSlice())), dhcpv4.OptDomainName("example.test"),
		dhcpv4.OptRenewTimeValue(10*time.Minute), dhcpv4.OptRebindingTimeValue(5*time.Minute)))
	l := f.event(t, dhcp.LeaseBound).Lease
	if l.Addr != netip.PrefixFrom(first, 20) || len(l.Routers) != 1 || l.Routers[0] != otherSrv ||
		len(l.Search) != 1 || l.Search[0] != "example.test" {
		t.Errorf("lease %+v", l)
	}
	// T1 after T2 is out of order: both take section 4.4.5's defaults.
	if l.T1 != 30*time.Minute || l.T2 != 52*time.Minute+30*time.Second {
		t.Errorf("T1 %v, T2 %v; want the defaults 30m, 52m30s", l.T1, l.T2)
	}
}

func TestLeaseFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lease.json")
	want := dhcp.ClientLease{Addr: netip.MustParsePrefix("10.1.0.100/24"), Server: server, Routers: []netip.Addr{server},
		DNS: []netip.Addr{dnsAddr}, Search: []string{"example.test"}, MTU: 1400, Start: t0, LeaseTime: time.Hour,
		T1: 30 * time.Minute, T2: 52*time.Minute + 30*time.Second}
	if err := dhcp.SaveLease(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := dhcp.LoadLease(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Addr != want.Addr || !got.Start.Equal(want.Start) || got.T2 != want.T2 || got.Search[0] != "example.test" {
		t.Errorf("loaded %+v, want %+v", got, want)
	}
	if _, err := dhcp.LoadLease(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("loading a missing file succeeded")
	}
}

// TestLongLeaseTimesDoNotOverflow: a lease of a hundred years (within RFC
// 2132's 2^32-2 seconds) has its T2 at seven eighths, on the server's side
// and the client's, where seven times it in nanoseconds overflows.
func TestLongLeaseTimesDoNotOverflow(t *testing.T) {
	long := 100 * 365 * 24 * time.Hour
	f := newCfix(t, cfixOpts{lease: long})
	l := f.bind(t)
	var ack *layers.DHCPv4
	for ack == nil || msgType(ack) != layers.DHCPMsgTypeAck {
		var d datagram
		select {
		case d = <-f.net.replies:
		case <-time.After(waitLimit):
			t.Fatal("no ACK among the server's replies")
		}
		ack = &layers.DHCPv4{}
		if err := ack.DecodeFromBytes(d.b, gopacket.NilDecodeFeedback); err != nil {
			t.Fatal(err)
		}
	}
	t2 := opt(ack, layers.DHCPOptT2)
	if got := time.Duration(uint32(t2[0])<<24|uint32(t2[1])<<16|uint32(t2[2])<<8|uint32(t2[3])) * time.Second; got != (long - long/8).Truncate(time.Second) {
		t.Errorf("the server's T2 is %v", got)
	}
	if l.LeaseTime != long || l.T1 != long/2 || l.T2 != (long-long/8).Truncate(time.Second) {
		t.Errorf("lease %v, T1 %v, T2 %v; want %v, %v, %v", l.LeaseTime, l.T1, l.T2, long, long/2, long-long/8)
	}
}

// TestClientProbeOutcomes pins what the client does with each verdict of
// the address probe: free or unable to tell, the address is used (the
// latter counted); in use, declined (TestClientDeclinesAddressInUse).
func TestClientProbeOutcomes(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		probeError uint64
	}{
		{"the address is free", nil, 0},
		{"the probe cannot tell: the address is used", os.ErrDeadlineExceeded, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			probe := func(context.Context, netip.Addr) (bool, error) { return false, tt.err }
			f := newCfix(t, cfixOpts{client: dhcp.ClientConfig{Probe: probe}})
			l := f.bind(t)
			if l.Addr.Addr() != first {
				t.Errorf("bound to %v", l.Addr)
			}
			if got := f.c.Stats.ProbeErrors.Load(); got != tt.probeError {
				t.Errorf("ProbeErrors = %d, want %d", got, tt.probeError)
			}
		})
	}
}

// TestClientStartsOverWhenTheHostRefusesTheAddress: an address the stack
// will not take (another NIC holds it) is as good as in use: no lease, and
// a new DISCOVER ten seconds later.
func TestClientStartsOverWhenTheHostRefusesTheAddress(t *testing.T) {
	f := newCfix(t, cfixOpts{})
	f.host.mu.Lock()
	f.host.refuse = true
	f.host.mu.Unlock()
	f.expectMsg(t, layers.DHCPMsgTypeDiscover)
	_, req := f.expectMsg(t, layers.DHCPMsgTypeRequest)
	waitStat(t, "ConfigErrors", &f.c.Stats.ConfigErrors, 1)
	f.waitState(t, dhcp.Init)
	if _, ok := f.c.Lease(); ok {
		t.Error("a lease the host refused is reported")
	}
	f.host.mu.Lock()
	f.host.refuse = false
	f.host.mu.Unlock()
	at := f.advanceTo(t)
	if wait := at.Sub(req.at); wait != 10*time.Second {
		t.Errorf("started over after %v, want 10 s", wait)
	}
	f.bind(t)
}

// TestClientWaitsBeforeItsFirstDiscover: with InitWait, the first
// DISCOVER waits a random time below it (RFC 2131 section 4.4.1).
func TestClientWaitsBeforeItsFirstDiscover(t *testing.T) {
	f := newCfix(t, cfixOpts{client: dhcp.ClientConfig{InitWait: 10 * time.Second}})
	f.waitState(t, dhcp.Init)
	select {
	case d := <-f.net.sent:
		t.Fatalf("sent %d bytes before the wait", len(d.b))
	default:
	}
	at := f.advanceTo(t)
	if wait := at.Sub(t0); wait < 0 || wait >= 10*time.Second {
		t.Errorf("first DISCOVER after %v, want under 10 s", wait)
	}
	f.bind(t)
}

// TestClientInstallsClasslessStaticRoutes: option 121 (RFC 3442) replaces
// the Router option: its routes are installed, on-link ones first so that
// a router off the subnet is reachable, the default route among them; a
// renewal with other routes swaps them, and expiry removes them.
func TestClientInstallsClasslessStaticRoutes(t *testing.T) {
	f := newCfix(t, cfixOpts{noServer: true})
	disc, _ := f.expectMsg(t, layers.DHCPMsgTypeDiscover)
	if params := opt(disc, layers.DHCPOptParamsRequest); !bytes.Contains(params, []byte{121}) {
		t.Errorf("option 121 not asked for: %v", params)
	}
	offer := replyTo(disc, dhcpv4.MessageTypeOffer)
	offer.YourIPAddr = first.AsSlice()
	f.net.inject(offer)
	req, _ := f.expectMsg(t, layers.DHCPMsgTypeRequest)
	far := netip.MustParseAddr("192.168.9.1")
	opt121 := []byte{
		0, 192, 168, 9, 1, // default via 192.168.9.1, reached through the last
		12, 172, 16, 10, 1, 0, 3, // 172.16.0.0/12 via 10.1.0.3
		24, 192, 168, 9, 0, 0, 0, 0, // 192.168.9.0/24 on-link
	}
	f.net.inject(ackFor(req, first, dhcpv4.OptIPAddressLeaseTime(time.Hour), dhcpv4.OptSubnetMask(net.CIDRMask(24, 32)),
		dhcpv4.OptRouter(net.IP(server.AsSlice())), dhcpv4.OptGeneric(dhcpv4.OptionClasslessStaticRoute, opt121)))
	l := f.event(t, dhcp.LeaseBound).Lease
	onLink := dhcp.Route{Dst: netip.MustParsePrefix("192.168.9.0/24")}
	def := dhcp.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: far}
	private := dhcp.Route{Dst: netip.MustParsePrefix("172.16.0.0/12"), Gateway: dnsAddr}
	if want := []dhcp.Route{def, private, onLink}; !slices.Equal(l.Routes, want) {
		t.Errorf("lease routes %v, want %v", l.Routes, want)
	}
	if got, want := f.host.routeList(), []dhcp.Route{onLink, def, private}; !slices.Equal(got, want) {
		t.Errorf("host routes %v, want %v (the Router option ignored)", got, want)
	}
	f.waitState(t, dhcp.Bound)
	f.advanceTo(t) // T1
	renew, _ := f.expectMsg(t, layers.DHCPMsgTypeRequest)
	f.net.inject(ackFor(renew, first, dhcpv4.OptIPAddressLeaseTime(time.Hour), dhcpv4.OptSubnetMask(net.CIDRMask(24, 32)),
		dhcpv4.OptRouter(net.IP(server.AsSlice()))))
	f.event(t, dhcp.LeaseRenewed)
	if got, want := f.host.routeList(), []dhcp.Route{{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gateway: server}}; !slices.Equal(got, want) {
		t.Errorf("after a renewal without option 121: routes %v, want %v", got, want)
	}
}

func TestClasslessRoutesMalformedIgnoredWhole(t *testing.T) {
	for name, v := range map[string][]byte{
		"a width over 32":        {33, 1, 2, 3, 4, 5, 10, 0, 0, 1},
		"cut short":              {24, 192, 168, 9, 10, 0, 0},
		"a second route cut off": {0, 10, 0, 0, 1, 8, 10},
	} {
		t.Run(name, func(t *testing.T) {
			f := newCfix(t, cfixOpts{noServer: true})
			disc, _ := f.expectMsg(t, layers.DHCPMsgTypeDiscover)
			offer := replyTo(disc, dhcpv4.MessageTypeOffer)
			offer.YourIPAddr = first.AsSlice()
			f.net.inject(offer)
			req, _ := f.expectMsg(t, layers.DHCPMsgTypeRequest)
			f.net.inject(ackFor(req, first, dhcpv4.OptIPAddressLeaseTime(time.Hour), dhcpv4.OptSubnetMask(net.CIDRMask(24, 32)),
				dhcpv4.OptRouter(net.IP(server.AsSlice())), dhcpv4.OptGeneric(dhcpv4.OptionClasslessStaticRoute, v)))
			l := f.event(t, dhcp.LeaseBound).Lease
			if len(l.Routes) != 0 || l.Routers[0] != server {
				t.Errorf("routes %v, routers %v: want none, and the Router option used", l.Routes, l.Routers)
			}
		})
	}
}

// TestClientDeclinesAnAddressTakenAfterBinding: address conflict detection
// gave the bound address up to another host (Conflict, RFC 5227 section
// 2.4): the lease is lost, the server told with a DECLINE, and the client
// gets another address after ten seconds.
func TestClientDeclinesAnAddressTakenAfterBinding(t *testing.T) {
	f := newCfix(t, cfixOpts{})
	f.bind(t)
	f.host.mu.Lock()
	f.host.prefix = netip.Prefix{} // the stack removed it
	f.host.mu.Unlock()
	f.c.Conflict(first)
	if e := f.event(t, dhcp.LeaseLost); e.Lease.Addr.Addr() != first {
		t.Errorf("lost %v", e.Lease.Addr)
	}
	dec, d := f.expectMsg(t, layers.DHCPMsgTypeDecline)
	if optAddr(dec, layers.DHCPOptRequestIP) != first || optAddr(dec, layers.DHCPOptServerID) != server {
		t.Errorf("DECLINE of %v to %v", optAddr(dec, layers.DHCPOptRequestIP), optAddr(dec, layers.DHCPOptServerID))
	}
	f.event(t, dhcp.AddressDeclined)
	f.waitState(t, dhcp.Init)
	if _, gw, _ := f.host.state(); gw.IsValid() {
		t.Errorf("default route via %v kept", gw)
	}
	// T1, half an hour off, stays pending until the client re-arms its
	// timer for the restart, after the DECLINE went out and INIT was
	// entered: advanceTo could jump to it.
	if at := f.advanceWithin(t, time.Minute); at.Sub(d.at) != 10*time.Second {
		t.Errorf("started over %v after the DECLINE, want 10 s", at.Sub(d.at))
	}
	if l := f.bind(t); l.Addr.Addr() != second {
		t.Errorf("bound to %v after losing %v, want %v", l.Addr, first, second)
	}
	if n := f.c.Stats.ConfigErrors.Load(); n != 0 {
		t.Errorf("ConfigErrors = %d: the address the stack removed was removed again", n)
	}
}

// TestClientUsesARememberedLeaseNoServerAnswers pins RFC 2131 section 3.2
// step 2: an INIT-REBOOT nobody answers falls back to the remembered lease
// while it has not expired, and to DISCOVER once it has.
func TestClientUsesARememberedLeaseNoServerAnswers(t *testing.T) {
	tests := []struct {
		name  string
		start time.Time // the remembered lease's, of an hour
		use   bool
	}{
		{"half an hour left: used", t0.Add(-30 * time.Minute), true},
		{"expired: DISCOVER", t0.Add(-2 * time.Hour), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := dhcp.ClientLease{Addr: netip.PrefixFrom(second, 24), Server: server, Routers: []netip.Addr{server},
				Start: tt.start, LeaseTime: time.Hour, T1: 30 * time.Minute, T2: 52*time.Minute + 30*time.Second}
			f := newCfix(t, cfixOpts{noServer: true, client: dhcp.ClientConfig{Remembered: &r}})
			for range 4 {
				f.expectMsg(t, layers.DHCPMsgTypeRequest)
				f.advanceTo(t)
			}
			if !tt.use {
				f.expectMsg(t, layers.DHCPMsgTypeDiscover)
				return
			}
			l := f.event(t, dhcp.LeaseBound).Lease
			if l.Addr != r.Addr || !l.Start.Equal(r.Start) {
				t.Errorf("bound to %v from %v, want the remembered %v from %v", l.Addr, l.Start, r.Addr, r.Start)
			}
			if p, gw, _ := f.host.state(); p != r.Addr || gw != server {
				t.Errorf("host has %v via %v", p, gw)
			}
			// T1 passed already: a renewal is due at once, unicast, the
			// clock where it stands. The client armed T1 in the past as
			// it bound: the last advance may have fired it (the clock
			// fires what comes due while it moves), or it is fired here.
			// Not advanceTo: with T1 fired and not yet acted on, the
			// next timer is the renewal's retransmission.
			f.fireDueUntil(t, dhcp.Renewing)
			req, d := f.expectMsg(t, layers.DHCPMsgTypeRequest)
			if d.to != netip.AddrPortFrom(server, dhcp.ServerPort) || ipAddr(req.ClientIP) != second {
				t.Errorf("renewal to %v with ciaddr %v", d.to, req.ClientIP)
			}
		})
	}
}

// The link coming up (LinkUp) may mean another network: a bound client
// verifies its lease with an INIT-REBOOT REQUEST (RFC 2131 section 3.2),
// keeping the address meanwhile; the server's ACK renews it, its NAK ends
// it, and silence leaves the lease standing to its end.
func TestClientVerifiesItsLeaseWhenTheLinkComesUp(t *testing.T) {
	for _, tt := range []struct {
		name   string
		answer string // "ack", "nak" or "none"
	}{
		{"the server acknowledges: renewed", "ack"},
		{"the server refuses: the lease is lost, discovery follows", "nak"},
		{"no server answers: the lease stands", "none"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newCfix(t, cfixOpts{lease: time.Hour})
			f.bind(t)
			if tt.answer != "ack" {
				f.net.setCut(true) // the server hears nothing: this test answers
			}
			f.c.LinkUp()
			req, d := f.expectMsg(t, layers.DHCPMsgTypeRequest)
			if d.to.Addr() != bcast || optAddr(req, layers.DHCPOptRequestIP) != first ||
				opt(req, layers.DHCPOptServerID) != nil || !ipAddr(req.ClientIP).IsUnspecified() {
				t.Errorf("REQUEST to %v requests %v, server id %v, ciaddr %v: want INIT-REBOOT's (table 5)",
					d.to, optAddr(req, layers.DHCPOptRequestIP), opt(req, layers.DHCPOptServerID), req.ClientIP)
			}
			if a, ok := f.host.addr(); !ok || a.Addr() != first {
				t.Errorf("the address %v (%v) while the lease is verified, want %v kept", a, ok, first)
			}
			switch tt.answer {
			case "ack":
				if e := f.event(t, dhcp.LeaseRenewed); e.Lease.Addr.Addr() != first {
					t.Errorf("renewed %v", e.Lease.Addr)
				}
				f.waitState(t, dhcp.Bound)
			case "nak":
				f.net.inject(nakFor(req))
				f.event(t, dhcp.LeaseLost)
				f.expectMsg(t, layers.DHCPMsgTypeDiscover)
				if a, ok := f.host.addr(); ok {
					t.Errorf("the address %v kept after a NAK", a)
				}
			case "none":
				for range 3 { // the retransmissions of section 4.1
					f.advanceWithin(t, retransmitMax)
					f.expectMsg(t, layers.DHCPMsgTypeRequest)
				}
				f.advanceWithin(t, retransmitMax)
				f.waitState(t, dhcp.Bound)
				if a, ok := f.host.addr(); !ok || a.Addr() != first {
					t.Errorf("the address %v (%v) after an unanswered verification, want %v", a, ok, first)
				}
			}
			if n := f.c.Stats.LinkUps.Load(); n != 1 {
				t.Errorf("LinkUps = %d", n)
			}
		})
	}
}
