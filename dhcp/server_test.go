package dhcp_test

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/dhcp"
	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/stats"
)

// The server runs on a stack on a raw wire (rawtest: the stack is 10.1.0.2
// on 10.1.0.0/24); the tests speak for clients with messages gopacket
// builds, and decode the replies with gopacket's DHCPv4 layer, independent
// of the encoder the server uses.

var (
	server   = rawtest.StackAddr
	dnsAddr  = netip.MustParseAddr("10.1.0.3")
	first    = netip.MustParseAddr("10.1.0.100")
	second   = netip.MustParseAddr("10.1.0.101")
	anyAddr  = netip.IPv4Unspecified()
	otherSrv = netip.MustParseAddr("10.1.0.9")
)

const (
	mtu       = 1400
	leaseTime = time.Hour
)

// testConfig is the server's configuration on rawtest's subnet, with a pool
// of size addresses.
func testConfig(size int) dhcp.Config {
	return dhcp.Config{
		Network:    rawtest.Prefix.Masked(),
		Server:     server,
		DNS:        []netip.Addr{dnsAddr},
		FirstLease: first,
		PoolSize:   size,
		LeaseTime:  leaseTime,
		MTU:        mtu,
	}
}

// fixture is a server on a stack on a raw wire.
type fixture struct {
	h   *rawtest.Host
	srv *dhcp.Server
}

func newFixture(t *testing.T, cfg dhcp.Config) *fixture {
	return newFixtureOn(t, cfg, stack.Config{})
}

// newFixtureOn is newFixture on a stack configured by scfg.
func newFixtureOn(t *testing.T, cfg dhcp.Config, scfg stack.Config) *fixture {
	t.Helper()
	h := rawtest.New(t, scfg)
	cfg.Clock = h.Clock
	srv, err := dhcp.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.S.ListenUDP(netip.AddrPortFrom(anyAddr, dhcp.ServerPort))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(c) }()
	t.Cleanup(func() {
		c.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &fixture{h: h, srv: srv}
}

// client is a DHCP client the test speaks for.
type client struct {
	mac net.HardwareAddr
	id  []byte // client identifier (option 61), none when nil
	xid uint32
}

func newClient(n byte) *client {
	return &client{mac: net.HardwareAddr{0x02, 0xc1, 0, 0, 0, n}, xid: 0x1000 * uint32(n)}
}

// msg returns a message of type typ from the client, with ciaddr and more
// options.
func (c *client) msg(typ layers.DHCPMsgType, ciaddr netip.Addr, opts ...layers.DHCPOption) *layers.DHCPv4 {
	c.xid++
	m := &layers.DHCPv4{
		Operation:    layers.DHCPOpRequest,
		HardwareType: layers.LinkTypeEthernet,
		Xid:          c.xid,
		ClientIP:     ciaddr.AsSlice(),
		YourClientIP: net.IPv4zero.To4(),
		NextServerIP: net.IPv4zero.To4(),
		RelayAgentIP: net.IPv4zero.To4(),
		ClientHWAddr: c.mac,
		Options:      []layers.DHCPOption{layers.NewDHCPOption(layers.DHCPOptMessageType, []byte{byte(typ)})},
	}
	if c.id != nil {
		m.Options = append(m.Options, layers.NewDHCPOption(layers.DHCPOptClientID, c.id))
	}
	m.Options = append(m.Options, opts...)
	return m
}

func requestIP(a netip.Addr) layers.DHCPOption {
	return layers.NewDHCPOption(layers.DHCPOptRequestIP, a.AsSlice())
}

func serverID(a netip.Addr) layers.DHCPOption {
	return layers.NewDHCPOption(layers.DHCPOptServerID, a.AsSlice())
}

// send sends m from the client as a broadcast from 0.0.0.0 (src invalid),
// or from src to dst.
func (f *fixture) send(t *testing.T, c *client, m *layers.DHCPv4, src, dst netip.Addr) {
	t.Helper()
	if !src.IsValid() {
		src, dst = anyAddr, rawtest.LimitedBroadcast
	}
	dstMAC := rawtest.StackMAC
	if dst == rawtest.LimitedBroadcast {
		dstMAC = rawtest.BroadcastMAC
	}
	ip := rawtest.IPv4Header(src, dst, layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: dhcp.ClientPort, DstPort: dhcp.ServerPort}
	if err := u.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	f.h.Inject(rawtest.Serialize(t, rawtest.Ethernet(c.mac, dstMAC, layers.EthernetTypeIPv4), ip, u, m))
}

// broadcast sends m from the client as a broadcast from 0.0.0.0.
func (f *fixture) broadcast(t *testing.T, c *client, m *layers.DHCPv4) {
	t.Helper()
	f.send(t, c, m, netip.Addr{}, netip.Addr{})
}

// reply is a message from the server and how it was sent.
type reply struct {
	eth *layers.Ethernet
	ip  *layers.IPv4
	udp *layers.UDP
	m   *layers.DHCPv4
}

// expect reads the server's next message, checking that it comes from the
// server's port and address, to the client port.
func (f *fixture) expect(t *testing.T) reply {
	t.Helper()
	fr := f.h.Expect(t, rawtest.Timeout)
	ip, u := rawtest.UDPOf(t, fr)
	m, ok := rawtest.Decode(t, fr).Layer(layers.LayerTypeDHCPv4).(*layers.DHCPv4)
	if !ok {
		t.Fatalf("expected a DHCP message, got %s", rawtest.Describe(fr))
	}
	if rawtest.Addr(ip.SrcIP) != server || u.SrcPort != dhcp.ServerPort {
		t.Errorf("reply from %v:%d, want %v:67", ip.SrcIP, u.SrcPort, server)
	}
	if m.Operation != layers.DHCPOpReply {
		t.Errorf("op %v, want BOOTREPLY", m.Operation)
	}
	return reply{eth: rawtest.EthernetOf(t, fr), ip: ip, udp: u, m: m}
}

func opt(m *layers.DHCPv4, code layers.DHCPOpt) []byte {
	for _, o := range m.Options {
		if o.Type == code {
			return o.Data
		}
	}
	return nil
}

func (r reply) typ() layers.DHCPMsgType {
	if d := opt(r.m, layers.DHCPOptMessageType); len(d) == 1 {
		return layers.DHCPMsgType(d[0])
	}
	return layers.DHCPMsgTypeUnspecified
}

func (r reply) yiaddr() netip.Addr { return rawtest.Addr(r.m.YourClientIP) }

// to reports where the reply went.
func (r reply) to() (net.HardwareAddr, netip.AddrPort) {
	return r.eth.DstMAC, netip.AddrPortFrom(rawtest.Addr(r.ip.DstIP), uint16(r.udp.DstPort))
}

// checkBroadcast checks that the reply went to 255.255.255.255:68 at the
// Ethernet broadcast address.
func (r reply) checkBroadcast(t *testing.T) {
	t.Helper()
	mac, to := r.to()
	if !bytes.Equal(mac, rawtest.BroadcastMAC) || to != netip.AddrPortFrom(rawtest.LimitedBroadcast, dhcp.ClientPort) {
		t.Errorf("%v sent to %v at %v, want 255.255.255.255:68 at the broadcast MAC", r.typ(), to, mac)
	}
}

// checkConfig checks the options of an OFFER or ACK (RFC 2132).
func (r reply) checkConfig(t *testing.T, lease bool) {
	t.Helper()
	u32 := func(b []byte) uint32 {
		if len(b) != 4 {
			return 0
		}
		return binary.BigEndian.Uint32(b)
	}
	m := r.m
	checks := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"server identifier", opt(m, layers.DHCPOptServerID), server.AsSlice()},
		{"subnet mask", opt(m, layers.DHCPOptSubnetMask), []byte{255, 255, 255, 0}},
		{"router", opt(m, layers.DHCPOptRouter), server.AsSlice()},
		{"DNS", opt(m, layers.DHCPOptDNS), dnsAddr.AsSlice()},
		{"interface MTU", opt(m, layers.DHCPOptInterfaceMTU), []byte{mtu >> 8, mtu & 0xff}},
		{"broadcast address", opt(m, layers.DHCPOptBroadcastAddr), rawtest.SubnetBroadcast.AsSlice()},
	}
	for _, c := range checks {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%v: %s %v, want %v", r.typ(), c.name, c.got, c.want)
		}
	}
	lt, t1, t2 := u32(opt(m, layers.DHCPOptLeaseTime)), u32(opt(m, layers.DHCPOptT1)), u32(opt(m, layers.DHCPOptT2))
	if !lease {
		if lt != 0 || t1 != 0 || t2 != 0 {
			t.Errorf("%v: lease time %d, T1 %d, T2 %d; want none", r.typ(), lt, t1, t2)
		}
		return
	}
	if lt != 3600 || t1 != 1800 || t2 != 3150 {
		t.Errorf("%v: lease time %d, T1 %d, T2 %d; want 3600, 1800, 3150", r.typ(), lt, t1, t2)
	}
}

// checkAnswers checks that the reply answers m from c.
func (r reply) checkAnswers(t *testing.T, c *client, m *layers.DHCPv4) {
	t.Helper()
	if r.m.Xid != m.Xid || !bytes.Equal(r.m.ClientHWAddr, c.mac) {
		t.Errorf("%v: xid %#x chaddr %v, want %#x and %v", r.typ(), r.m.Xid, r.m.ClientHWAddr, m.Xid, c.mac)
	}
}

// lease runs DISCOVER, OFFER, REQUEST, ACK for c and returns its address.
func (f *fixture) lease(t *testing.T, c *client) netip.Addr {
	t.Helper()
	f.broadcast(t, c, c.msg(layers.DHCPMsgTypeDiscover, anyAddr))
	offer := f.expect(t)
	if offer.typ() != layers.DHCPMsgTypeOffer {
		t.Fatalf("answer to DISCOVER: %v, want OFFER", offer.typ())
	}
	a := offer.yiaddr()
	f.broadcast(t, c, c.msg(layers.DHCPMsgTypeRequest, anyAddr, requestIP(a), serverID(server)))
	ack := f.expect(t)
	if ack.typ() != layers.DHCPMsgTypeAck || ack.yiaddr() != a {
		t.Fatalf("answer to REQUEST for %v: %v of %v, want ACK", a, ack.typ(), ack.yiaddr())
	}
	return a
}

// waitStat waits, on the wall clock, for the server's goroutine to bring a
// counter to want.
func waitStat(t *testing.T, name string, c *stats.Counter, want uint64) {
	t.Helper()
	deadline := time.Now().Add(rawtest.Timeout)
	for c.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %d, want %d", name, c.Load(), want)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func TestDiscoverOfferRequestAck(t *testing.T) {
	f := newFixture(t, testConfig(8))
	c := newClient(1)
	disc := c.msg(layers.DHCPMsgTypeDiscover, anyAddr)
	f.broadcast(t, c, disc)
	offer := f.expect(t)
	if offer.typ() != layers.DHCPMsgTypeOffer || offer.yiaddr() != first {
		t.Fatalf("answer to DISCOVER: %v of %v, want OFFER of %v", offer.typ(), offer.yiaddr(), first)
	}
	offer.checkAnswers(t, c, disc)
	offer.checkBroadcast(t)
	offer.checkConfig(t, true)

	req := c.msg(layers.DHCPMsgTypeRequest, anyAddr, requestIP(first), serverID(server))
	f.broadcast(t, c, req)
	ack := f.expect(t)
	if ack.typ() != layers.DHCPMsgTypeAck || ack.yiaddr() != first {
		t.Fatalf("answer to REQUEST: %v of %v, want ACK of %v", ack.typ(), ack.yiaddr(), first)
	}
	ack.checkAnswers(t, c, req)
	ack.checkBroadcast(t)
	ack.checkConfig(t, true)

	leases := f.srv.Leases()
	if len(leases) != 1 || leases[0].Addr != first || !bytes.Equal(leases[0].HardwareAddr, c.mac) || !leases[0].Expiry.Equal(rawtest.Start.Add(leaseTime)) {
		t.Errorf("leases %+v, want %v for %v until %v", leases, first, c.mac, rawtest.Start.Add(leaseTime))
	}
	s := &f.srv.Stats
	if s.InDiscovers.Load() != 1 || s.InRequests.Load() != 1 || s.OutOffers.Load() != 1 || s.OutAcks.Load() != 1 || s.OutNaks.Load() != 0 {
		t.Errorf("counters: %d DISCOVER, %d REQUEST in; %d OFFER, %d ACK, %d NAK out; want 1, 1, 1, 1, 0",
			s.InDiscovers.Load(), s.InRequests.Load(), s.OutOffers.Load(), s.OutAcks.Load(), s.OutNaks.Load())
	}
}

// Each client gets its own address, and the same one when it asks again
// (RFC 2131 section 4.3.1), keyed by its client identifier when it sends
// one.
func TestEachClientKeepsItsAddress(t *testing.T) {
	f := newFixture(t, testConfig(8))
	a, b := newClient(1), newClient(2)
	b.id = []byte("\x00client-b")
	if got := f.lease(t, a); got != first {
		t.Errorf("first client got %v, want %v", got, first)
	}
	if got := f.lease(t, b); got != second {
		t.Errorf("second client got %v, want %v", got, second)
	}
	if got := f.lease(t, a); got != first {
		t.Errorf("first client again got %v, want %v", got, first)
	}
	// The same identifier from another MAC is the same client.
	moved := newClient(3)
	moved.id = b.id
	if got := f.lease(t, moved); got != second {
		t.Errorf("second client on a new MAC got %v, want %v", got, second)
	}
}

// A client that asks for a free address gets it (RFC 2131 section 4.3.1).
func TestDiscoverWithRequestedAddress(t *testing.T) {
	f := newFixture(t, testConfig(8))
	c := newClient(1)
	want := netip.MustParseAddr("10.1.0.105")
	f.broadcast(t, c, c.msg(layers.DHCPMsgTypeDiscover, anyAddr, requestIP(want)))
	if r := f.expect(t); r.yiaddr() != want {
		t.Errorf("offered %v, want the requested %v", r.yiaddr(), want)
	}
	// Outside the pool: the server picks.
	d := newClient(2)
	f.broadcast(t, d, d.msg(layers.DHCPMsgTypeDiscover, anyAddr, requestIP(server)))
	if r := f.expect(t); r.yiaddr() != first {
		t.Errorf("asking for the server's address, offered %v, want %v", r.yiaddr(), first)
	}
}

// RENEWING: at T1 the client unicasts a REQUEST with ciaddr; the ACK goes
// back to ciaddr and extends the lease. REBINDING is the same broadcast.
func TestRenewingAndRebindingExtendTheLease(t *testing.T) {
	for _, tt := range []struct {
		name    string
		after   time.Duration
		unicast bool
	}{
		{"renewing at T1", leaseTime / 2, true},
		{"rebinding at T2", leaseTime * 7 / 8, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testConfig(8))
			c := newClient(1)
			a := f.lease(t, c)
			f.h.Clock.Advance(tt.after)
			f.h.Learn(t, a, c.mac) // the client has its address now
			req := c.msg(layers.DHCPMsgTypeRequest, a)
			if tt.unicast {
				f.send(t, c, req, a, server)
			} else {
				f.broadcast(t, c, req)
			}
			ack := f.expect(t)
			if ack.typ() != layers.DHCPMsgTypeAck || ack.yiaddr() != a || rawtest.Addr(ack.m.ClientIP) != a {
				t.Fatalf("answer: %v of %v ciaddr %v, want ACK of %v", ack.typ(), ack.yiaddr(), ack.m.ClientIP, a)
			}
			ack.checkConfig(t, true)
			if mac, to := ack.to(); !bytes.Equal(mac, c.mac) || to != netip.AddrPortFrom(a, dhcp.ClientPort) {
				t.Errorf("ACK sent to %v at %v, want %v:68 at %v", to, mac, a, c.mac)
			}
			want := rawtest.Start.Add(tt.after + leaseTime)
			if l := f.srv.Leases(); len(l) != 1 || !l[0].Expiry.Equal(want) {
				t.Errorf("leases %+v, want one until %v", l, want)
			}
		})
	}
}

// A lease not renewed expires: its address goes to the next client that
// needs one, and its old holder is NAKed when it asks for it again.
func TestLeaseExpiresOnTheClock(t *testing.T) {
	f := newFixture(t, testConfig(1))
	a, b := newClient(1), newClient(2)
	addr := f.lease(t, a)
	f.broadcast(t, b, b.msg(layers.DHCPMsgTypeDiscover, anyAddr))
	waitStat(t, "PoolExhausted", &f.srv.Stats.PoolExhausted, 1)
	f.h.ExpectNothing(t)

	f.h.Clock.Advance(leaseTime - time.Second)
	if len(f.srv.Leases()) != 1 {
		t.Fatalf("lease gone a second before it expires")
	}
	f.h.Clock.Advance(time.Second)
	if l := f.srv.Leases(); len(l) != 0 {
		t.Fatalf("leases %+v after the lease time, want none", l)
	}
	if got := f.lease(t, b); got != addr {
		t.Errorf("after the lease expired the second client got %v, want %v", got, addr)
	}
	// INIT-REBOOT by the first client: its address is the second's now.
	f.broadcast(t, a, a.msg(layers.DHCPMsgTypeRequest, anyAddr, requestIP(addr)))
	nak := f.expect(t)
	if nak.typ() != layers.DHCPMsgTypeNak {
		t.Errorf("answer to a request for a lost address: %v, want NAK", nak.typ())
	}
}

// A REQUEST for an address the client may not have is NAKed, by broadcast
// and without an address or configuration (RFC 2131 section 4.3.2, table 3).
func TestWrongRequestedAddressIsNaked(t *testing.T) {
	for _, tt := range []struct {
		name string
		req  func(c *client, held netip.Addr) *layers.DHCPv4
	}{
		{"init-reboot off the network", func(c *client, _ netip.Addr) *layers.DHCPv4 {
			return c.msg(layers.DHCPMsgTypeRequest, anyAddr, requestIP(netip.MustParseAddr("192.168.1.50")))
		}},
		{"init-reboot outside the pool", func(c *client, _ netip.Addr) *layers.DHCPv4 {
			return c.msg(layers.DHCPMsgTypeRequest, anyAddr, requestIP(netip.MustParseAddr("10.1.0.50")))
		}},
		{"init-reboot for the server's address", func(c *client, _ netip.Addr) *layers.DHCPv4 {
			return c.msg(layers.DHCPMsgTypeRequest, anyAddr, requestIP(server))
		}},
		{"init-reboot for another client's lease", func(c *client, held netip.Addr) *layers.DHCPv4 {
			return c.msg(layers.DHCPMsgTypeRequest, anyAddr, requestIP(held))
		}},
		{"selecting an address not offered", func(c *client, held netip.Addr) *layers.DHCPv4 {
			return c.msg(layers.DHCPMsgTypeRequest, anyAddr, requestIP(held), serverID(server))
		}},
		{"renewing another client's lease", func(c *client, held netip.Addr) *layers.DHCPv4 {
			return c.msg(layers.DHCPMsgTypeRequest, held)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testConfig(8))
			held := f.lease(t, newClient(9))
			c := newClient(1)
			req := tt.req(c, held)
			f.broadcast(t, c, req)
			nak := f.expect(t)
			if nak.typ() != layers.DHCPMsgTypeNak {
				t.Fatalf("answer: %v, want NAK", nak.typ())
			}
			nak.checkAnswers(t, c, req)
			nak.checkBroadcast(t)
			if nak.yiaddr() != anyAddr || opt(nak.m, layers.DHCPOptLeaseTime) != nil || opt(nak.m, layers.DHCPOptRouter) != nil {
				t.Errorf("NAK carries yiaddr %v and options %v", nak.yiaddr(), nak.m.Options)
			}
			if !bytes.Equal(opt(nak.m, layers.DHCPOptServerID), server.AsSlice()) {
				t.Errorf("NAK server identifier %v, want %v", opt(nak.m, layers.DHCPOptServerID), server)
			}
			if n := f.srv.Stats.OutNaks.Load(); n != 1 {
				t.Errorf("OutNaks = %d, want 1", n)
			}
			if l := f.srv.Leases(); len(l) != 1 || l[0].Addr != held {
				t.Errorf("leases %+v, want only the other client's %v", l, held)
			}
		})
	}
}

// An offer is held for OfferHold; a full pool frees it after that, and at
// once when the client takes another server's offer.
func TestOfferHoldAndAnotherServersOffer(t *testing.T) {
	f := newFixture(t, testConfig(1))
	a, b := newClient(1), newClient(2)
	f.broadcast(t, a, a.msg(layers.DHCPMsgTypeDiscover, anyAddr))
	f.expect(t)
	f.broadcast(t, b, b.msg(layers.DHCPMsgTypeDiscover, anyAddr))
	waitStat(t, "PoolExhausted", &f.srv.Stats.PoolExhausted, 1)
	f.h.Clock.Advance(time.Minute)
	f.broadcast(t, b, b.msg(layers.DHCPMsgTypeDiscover, anyAddr))
	if r := f.expect(t); r.typ() != layers.DHCPMsgTypeOffer || r.yiaddr() != first {
		t.Fatalf("after the offer hold: %v of %v, want OFFER of %v", r.typ(), r.yiaddr(), first)
	}
	// b takes another server's offer: silence, and the address is free.
	f.broadcast(t, b, b.msg(layers.DHCPMsgTypeRequest, anyAddr, requestIP(otherSrv), serverID(otherSrv)))
	waitStat(t, "InOtherServer", &f.srv.Stats.InOtherServer, 1)
	f.h.ExpectNothing(t)
	if got := f.lease(t, a); got != first {
		t.Errorf("after the other client went elsewhere, got %v, want %v", got, first)
	}
}

// RELEASE frees the address at once; the client gets it back next time.
func TestReleaseFreesTheAddress(t *testing.T) {
	f := newFixture(t, testConfig(1))
	a, b := newClient(1), newClient(2)
	addr := f.lease(t, a)
	f.send(t, a, a.msg(layers.DHCPMsgTypeRelease, addr, serverID(server)), addr, server)
	waitStat(t, "InReleases", &f.srv.Stats.InReleases, 1)
	f.h.ExpectNothing(t)
	if l := f.srv.Leases(); len(l) != 0 {
		t.Errorf("leases %+v after RELEASE, want none", l)
	}
	if got := f.lease(t, a); got != addr {
		t.Errorf("after RELEASE the client got %v, want its %v", got, addr)
	}
	// A RELEASE from someone else, or for another server, changes nothing.
	f.send(t, b, b.msg(layers.DHCPMsgTypeRelease, addr, serverID(server)), addr, server)
	f.send(t, a, a.msg(layers.DHCPMsgTypeRelease, addr, serverID(otherSrv)), addr, server)
	waitStat(t, "InReleases", &f.srv.Stats.InReleases, 3)
	if f.srv.Stats.InNotOurs.Load() != 1 || f.srv.Stats.InOtherServer.Load() != 1 {
		t.Errorf("InNotOurs = %d, InOtherServer = %d, want 1 and 1", f.srv.Stats.InNotOurs.Load(), f.srv.Stats.InOtherServer.Load())
	}
	if l := f.srv.Leases(); len(l) != 1 {
		t.Errorf("leases %+v, want the client's still", l)
	}
}

// DECLINE takes the address out of the pool for DeclineHold (RFC 2131
// section 4.3.3); the client gets another.
func TestDeclineTakesTheAddressOut(t *testing.T) {
	cfg := testConfig(2)
	cfg.DeclineHold = 10 * time.Minute
	f := newFixture(t, cfg)
	c := newClient(1)
	addr := f.lease(t, c)
	f.broadcast(t, c, c.msg(layers.DHCPMsgTypeDecline, anyAddr, requestIP(addr), serverID(server)))
	waitStat(t, "InDeclines", &f.srv.Stats.InDeclines, 1)
	f.h.ExpectNothing(t)
	if got := f.lease(t, c); got != second {
		t.Errorf("after DECLINE the client got %v, want %v", got, second)
	}
	d := newClient(2)
	f.broadcast(t, d, d.msg(layers.DHCPMsgTypeDiscover, anyAddr))
	waitStat(t, "PoolExhausted", &f.srv.Stats.PoolExhausted, 1)
	f.h.Clock.Advance(cfg.DeclineHold)
	if got := f.lease(t, d); got != addr {
		t.Errorf("after the decline hold another client got %v, want %v", got, addr)
	}
}

// INFORM: the configuration without a lease, to ciaddr (RFC 2131 section
// 4.3.5).
func TestInformIsAckedWithoutALease(t *testing.T) {
	f := newFixture(t, testConfig(8))
	c := newClient(1)
	own := netip.MustParseAddr("10.1.0.50")
	f.h.Learn(t, own, c.mac)
	inf := c.msg(layers.DHCPMsgTypeInform, own)
	f.send(t, c, inf, own, server)
	ack := f.expect(t)
	if ack.typ() != layers.DHCPMsgTypeAck || ack.yiaddr() != anyAddr {
		t.Fatalf("answer to INFORM: %v of %v, want ACK with no address", ack.typ(), ack.yiaddr())
	}
	ack.checkAnswers(t, c, inf)
	ack.checkConfig(t, false)
	if mac, to := ack.to(); !bytes.Equal(mac, c.mac) || to != netip.AddrPortFrom(own, dhcp.ClientPort) {
		t.Errorf("ACK sent to %v at %v, want %v:68 at %v", to, mac, own, c.mac)
	}
	if l := f.srv.Leases(); len(l) != 0 {
		t.Errorf("leases %+v after INFORM, want none", l)
	}
}

// A relay agent's request is answered to the agent, on the server port
// (RFC 2131 section 4.1).
func TestRelayedRequestIsAnsweredToTheAgent(t *testing.T) {
	f := newFixture(t, testConfig(8))
	relay := rawtest.PeerAddr
	f.h.LearnPeer(t)
	c := newClient(1)
	m := c.msg(layers.DHCPMsgTypeDiscover, anyAddr)
	m.RelayAgentIP = relay.AsSlice()
	m.RelayHops = 1
	f.send(t, c, m, relay, server)
	r := f.expect(t)
	if _, to := r.to(); to != netip.AddrPortFrom(relay, dhcp.ServerPort) || rawtest.Addr(r.m.RelayAgentIP) != relay {
		t.Errorf("relayed OFFER sent to %v with giaddr %v, want %v:67", to, r.m.RelayAgentIP, relay)
	}
}

// What is not a request to a server is dropped and counted, never
// answered.
func TestDropsAreCounted(t *testing.T) {
	c := newClient(1)
	reply := c.msg(layers.DHCPMsgTypeOffer, anyAddr)
	reply.Operation = layers.DHCPOpReply
	noType := c.msg(layers.DHCPMsgTypeDiscover, anyAddr)
	noType.Options = nil // BOOTP
	for _, tt := range []struct {
		name    string
		m       *layers.DHCPv4
		counter func(*dhcp.Stats) *stats.Counter
	}{
		{"a BOOTREPLY", reply, func(s *dhcp.Stats) *stats.Counter { return &s.InNotRequest }},
		{"no message type", noType, func(s *dhcp.Stats) *stats.Counter { return &s.InUnknownType }},
		{"an OFFER from a client", c.msg(layers.DHCPMsgTypeOffer, anyAddr), func(s *dhcp.Stats) *stats.Counter { return &s.InUnknownType }},
		{"a REQUEST with no address", c.msg(layers.DHCPMsgTypeRequest, anyAddr), func(s *dhcp.Stats) *stats.Counter { return &s.InBadRequest }},
		{"a DECLINE for another server", c.msg(layers.DHCPMsgTypeDecline, anyAddr, requestIP(first), serverID(otherSrv)), func(s *dhcp.Stats) *stats.Counter { return &s.InOtherServer }},
		{"a DECLINE of an address not the client's", c.msg(layers.DHCPMsgTypeDecline, anyAddr, requestIP(first), serverID(server)), func(s *dhcp.Stats) *stats.Counter { return &s.InNotOurs }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testConfig(8))
			f.broadcast(t, c, tt.m)
			waitStat(t, tt.name, tt.counter(&f.srv.Stats), 1)
			f.h.ExpectNothing(t)
		})
	}
	t.Run("not DHCP", func(t *testing.T) {
		f := newFixture(t, testConfig(8))
		src, dst := netip.AddrPortFrom(anyAddr, 68), netip.AddrPortFrom(rawtest.LimitedBroadcast, 67)
		for _, b := range [][]byte{nil, []byte("hello"), make([]byte, 300)} {
			f.h.Inject(rawtest.Serialize(t, rawtest.Ethernet(c.mac, rawtest.BroadcastMAC, layers.EthernetTypeIPv4),
				rawtest.IPv4Header(src.Addr(), dst.Addr(), layers.IPProtocolUDP), rawtest.Payload(rawtest.UDPBytes(t, src, dst, b))))
		}
		waitStat(t, "InMalformed", &f.srv.Stats.InMalformed, 3)
		f.h.ExpectNothing(t)
	})
}

func TestNewServerRejectsConfigsThatDoNotFit(t *testing.T) {
	bad := func(f func(*dhcp.Config)) dhcp.Config {
		c := testConfig(8)
		f(&c)
		return c
	}
	for _, tt := range []struct {
		name string
		cfg  dhcp.Config
	}{
		{"server off the network", bad(func(c *dhcp.Config) { c.Server = netip.MustParseAddr("10.2.0.1") })},
		{"pool off the network", bad(func(c *dhcp.Config) { c.FirstLease = netip.MustParseAddr("10.2.0.1") })},
		{"pool past the network", bad(func(c *dhcp.Config) { c.PoolSize = 200 })},
		{"an IPv6 network", bad(func(c *dhcp.Config) { c.Network = netip.MustParsePrefix("fd00::/64") })},
		{"an MTU below 68", bad(func(c *dhcp.Config) { c.MTU = 60 })},
		{"a lease under a second", bad(func(c *dhcp.Config) { c.LeaseTime = time.Millisecond })},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := dhcp.NewServer(tt.cfg); err == nil {
				t.Errorf("NewServer(%+v) succeeded", tt.cfg)
			} else {
				t.Log(err)
			}
		})
	}
	// The zero Config is slirp4netns's.
	if _, err := dhcp.NewServer(dhcp.Config{}); err != nil {
		t.Errorf("NewServer(Config{}): %v", err)
	}
}

func TestConfigForIsSlirp4netnsLayout(t *testing.T) {
	for _, tt := range []struct {
		network            string
		server, dns, first string
	}{
		{"10.0.2.0/24", "10.0.2.2", "10.0.2.3", "10.0.2.100"},
		{"192.168.77.0/24", "192.168.77.2", "192.168.77.3", "192.168.77.100"},
		{"10.8.0.0/16", "10.8.0.2", "10.8.0.3", "10.8.0.100"},
	} {
		t.Run(tt.network, func(t *testing.T) {
			cfg := dhcp.ConfigFor(netip.MustParsePrefix(tt.network))
			if cfg.Server.String() != tt.server || len(cfg.DNS) != 1 || cfg.DNS[0].String() != tt.dns || cfg.FirstLease.String() != tt.first {
				t.Errorf("ConfigFor(%s) = server %v, DNS %v, first lease %v; want %s, %s, %s", tt.network, cfg.Server, cfg.DNS, cfg.FirstLease, tt.server, tt.dns, tt.first)
			}
			if _, err := dhcp.NewServer(cfg); err != nil {
				t.Errorf("NewServer(ConfigFor(%s)): %v", tt.network, err)
			}
		})
	}
	if _, err := dhcp.NewServer(dhcp.ConfigFor(netip.MustParsePrefix("10.0.2.0/26"))); err == nil {
		t.Error("a /26 has no host 100, yet NewServer took ConfigFor it")
	}
}

// A pool of three serves three clients; the fourth and fifth are counted
// and get no answer, however many clients ask.
func TestPoolExhaustion(t *testing.T) {
	f := newFixture(t, testConfig(3))
	seen := map[netip.Addr]bool{}
	for i := range 5 {
		c := newClient(byte(i + 1))
		f.broadcast(t, c, c.msg(layers.DHCPMsgTypeDiscover, anyAddr))
		if i < 3 {
			r := f.expect(t)
			if a := r.yiaddr(); r.typ() != layers.DHCPMsgTypeOffer || seen[a] || a.Less(first) || !a.Less(netip.MustParseAddr("10.1.0.103")) {
				t.Errorf("client %d: %v of %v, want an OFFER of a pool address not offered yet", i+1, r.typ(), a)
			}
			seen[r.yiaddr()] = true
		}
	}
	waitStat(t, "PoolExhausted", &f.srv.Stats.PoolExhausted, 2)
	f.h.ExpectNothing(t)
	if n := f.srv.Stats.OutOffers.Load(); n != 3 {
		t.Errorf("OutOffers = %d, want 3", n)
	}
}
