package stack_test

import (
	"log/slog"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/internal/logs"
	"github.com/gonetstack/gonet/internal/testkit/logtest"
	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/stack"
)

// What the stack logs (stack.Config.Logger): its NICs and addresses
// coming and going, and its links failing, each an event with the NIC's
// name; a failure that repeats is a rate-limited warning.

func TestStackLogsItsNICsAndAddresses(t *testing.T) {
	log, events := logtest.New(slog.LevelInfo)
	s := stack.New(stack.Config{Logger: log})
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 7}
	ep, peer := pipe.New(1500, mac, nil)
	defer peer.Close()
	if err := s.AddNIC("tap7", ep); err != nil {
		t.Fatal(err)
	}
	if err := s.AddAddress("tap7", netip.MustParsePrefix("10.9.0.2/24")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range events.Events(t) {
		got = append(got, e.Str("msg"))
		if e.Str("level") != "INFO" || e.Str("nic") != "tap7" {
			t.Errorf("event %v: want level INFO, nic tap7", e)
		}
		switch e.Str("msg") {
		case "NIC up":
			if e.Str("mac") != mac.String() || e.Num("mtu") != 1500 {
				t.Errorf("event %v: want mac %v, mtu 1500", e, mac)
			}
		case "address added":
			if e.Str("addr") != "10.9.0.2/24" {
				t.Errorf("event %v: want addr 10.9.0.2/24", e)
			}
		}
	}
	if want := []string{"NIC up", "address added", "NIC down"}; !equal(got, want) {
		t.Errorf("logged %q, want %q", got, want)
	}
}

// A stack configured without a logger logs nothing anywhere: a library
// does not write to stderr unasked. (slog.Default would.)
func TestStackWithoutALoggerIsSilent(t *testing.T) {
	log, events := logtest.New(slog.LevelDebug)
	old := slog.Default()
	slog.SetDefault(log)
	defer slog.SetDefault(old)
	s := stack.New(stack.Config{})
	ep, peer := pipe.New(1500, net.HardwareAddr{2, 0, 0, 0, 0, 7}, nil)
	defer peer.Close()
	if err := s.AddNIC("tap7", ep); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if e := events.Events(t); len(e) != 0 {
		t.Errorf("a stack without a logger logged on slog.Default: %v", e)
	}
}

func equal(a, b []string) bool {
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

// failingLink is a link whose reads fail with the errors a test sends (nil:
// a read of nothing),
// and then with ErrClosed when the test closes vanish, as a TAP device
// removed under the stack.
type failingLink struct {
	errs   chan error
	vanish chan struct{}
	closed chan struct{}
}

func newFailingLink() *failingLink {
	return &failingLink{errs: make(chan error), vanish: make(chan struct{}), closed: make(chan struct{})}
}

func (l *failingLink) ReadBatch([]*buffer.Packet) (int, error) {
	select {
	case err := <-l.errs:
		return 0, err
	case <-l.vanish:
		return 0, link.ErrClosed
	case <-l.closed:
		return 0, link.ErrClosed
	}
}

func (l *failingLink) WriteBatch(p []*buffer.Packet) (int, error) { return len(p), nil }
func (l *failingLink) MTU() int                                   { return 1500 }
func (l *failingLink) MAC() net.HardwareAddr                      { return net.HardwareAddr{2, 0, 0, 0, 0, 9} }
func (l *failingLink) Capabilities() link.Capabilities            { return link.Capabilities{} }
func (l *failingLink) Close() error                               { close(l.closed); return nil }

const readFailedMsg = "link read failed"

// A link whose reads keep failing is logged once, with the NIC, the error
// and the counter, and after the interval once more with how many failures
// were left out.
func TestLinkReadFailuresAreLoggedOnceAnInterval(t *testing.T) {
	log, events := logtest.New(slog.LevelInfo)
	clk := clock.NewVirtual(time.Unix(1e9, 0))
	s := stack.New(stack.Config{Logger: log, Clock: clk})
	defer s.Close()
	l := newFailingLink()
	if err := s.AddNIC("tap9", l); err != nil {
		t.Fatal(err)
	}
	const n = 100
	// A read that returns nothing is handed over only once the NIC has
	// dealt with the failure before it.
	for range n {
		l.errs <- syscall.EIO
	}
	l.errs <- nil
	clk.Advance(logs.DefaultInterval)
	l.errs <- syscall.EIO
	l.errs <- nil
	got := events.Messages(t, readFailedMsg)
	if len(got) != 2 {
		t.Fatalf("%d warnings for %d failed reads, want 2:\n%s", len(got), n+1, events)
	}
	first, second := got[0], got[1]
	if first.Str("level") != "WARN" || first.Str("nic") != "tap9" || first.Str("err") != syscall.EIO.Error() ||
		first.Str("counter") != "NIC.tap9.RxLinkErrors" || first.Num("value") != 1 || first.Num("suppressed") != -1 {
		t.Errorf("first warning %v\nwant WARN, nic tap9, err %q, counter NIC.tap9.RxLinkErrors 1", first, syscall.EIO.Error())
	}
	if second.Num("suppressed") != n-1 || second.Num("value") != n+1 {
		t.Errorf("second warning %v\nwant %d suppressed, value %d", second, n-1, n+1)
	}
}

// A link that closes under the NIC, not by the stack's doing, is an
// error: nothing more will arrive on it.
func TestALinkClosedUnderTheNICIsAnError(t *testing.T) {
	log, events := logtest.New(slog.LevelInfo)
	s := stack.New(stack.Config{Logger: log})
	l := newFailingLink()
	if err := s.AddNIC("tap9", l); err != nil {
		t.Fatal(err)
	}
	close(l.vanish)
	deadline := time.Now().Add(5 * time.Second)
	for len(events.Messages(t, "link closed: the NIC receives nothing more")) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	s.Close()
	got := events.Messages(t, "link closed: the NIC receives nothing more")
	if len(got) != 1 || got[0].Str("level") != "ERROR" || got[0].Str("nic") != "tap9" {
		t.Errorf("events %v, want one ERROR naming nic tap9:\n%s", got, events)
	}
}

// The stack's own close is no error.
func TestClosingTheStackIsNotALinkError(t *testing.T) {
	log, events := logtest.New(slog.LevelInfo)
	s := stack.New(stack.Config{Logger: log})
	if err := s.AddNIC("tap9", newFailingLink()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, e := range events.Events(t) {
		if e.Str("level") != "INFO" {
			t.Errorf("closing the stack logged %v", e)
		}
	}
}

const conflictMsg = "address conflict: another station claims our address"

// Another station's ARP packets giving our address as their sender's are
// a conflict (RFC 5227 section 2.4): logged once with the address and the
// other station's MAC, not once per packet.
func TestAnAddressConflictIsLoggedOnce(t *testing.T) {
	log, events := logtest.New(slog.LevelInfo)
	h := rawtest.New(t, stack.Config{Logger: log})
	for range 5 {
		h.Inject(h.ARPFrame(t, 2, rawtest.PeerMAC, rawtest.StackAddr, rawtest.StackMAC, rawtest.StackAddr))
	}
	h.WaitCounter(t, "ARP."+rawtest.NIC+".InReplies", 5)
	if err := h.S.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := events.Messages(t, conflictMsg)
	if len(got) != 1 || got[0].Str("level") != "WARN" || got[0].Str("nic") != rawtest.NIC ||
		got[0].Str("addr") != rawtest.StackAddr.String() || got[0].Str("mac") != rawtest.PeerMAC.String() {
		t.Errorf("warnings %v\nwant one WARN with nic %s, addr %v, mac %v:\n%s", got, rawtest.NIC, rawtest.StackAddr, rawtest.PeerMAC, events)
	}
}

// The peer's own address is no conflict.
func TestAPeersARPIsNoConflict(t *testing.T) {
	log, events := logtest.New(slog.LevelDebug)
	h := rawtest.New(t, stack.Config{Logger: log})
	h.LearnPeer(t)
	if got := events.Messages(t, conflictMsg); len(got) != 0 {
		t.Errorf("the peer's ARP logged %v", got)
	}
}

// A router's advertisements renew its lifetime every few minutes: the
// default router is news when it first advertises, not at each renewal.
func TestStackLogsADefaultRouterOnce(t *testing.T) {
	log, events := logtest.New(slog.LevelInfo)
	s := stack.New(stack.Config{Logger: log, NDP: ndp.Config{NoDAD: true, NoRouterSolicitation: true, NoSLAAC: true}})
	defer s.Close()
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 7}
	routerMAC := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	ep, peer := pipe.New(1500, mac, routerMAC)
	defer peer.Close()
	if err := s.AddNIC("tap7", ep); err != nil {
		t.Fatal(err)
	}
	router := netip.MustParseAddr("fe80::1")
	ra := routerAdvertisement(t, routerMAC, router)
	nd, err := s.NeighborDiscovery("tap7")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		pk := buffer.NewPool().Get(len(ra))
		copy(pk.Bytes(), ra)
		if _, err := peer.WriteBatch([]*buffer.Packet{pk}); err != nil {
			t.Fatal(err)
		}
		pk.Release()
		waitCount(t, s, "NDP.tap7.InRouterAdvertisements", int64(i+1))
		// What the advertisement decided reaches the stack on ndp's
		// own goroutine.
		if err := nd.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	waitRoute(t, s, router)
	n := 0
	for _, e := range events.Events(t) {
		if e.Str("msg") == "default router" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("logged \"default router\" %d times for three advertisements, want once", n)
	}
}

// routerAdvertisement is an Ethernet frame with a Router Advertisement from
// router (RFC 4861 section 4.2): lifetime 1800 s, no options.
func routerAdvertisement(t *testing.T, mac net.HardwareAddr, router netip.Addr) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: mac, DstMAC: net.HardwareAddr{0x33, 0x33, 0, 0, 0, 1}, EthernetType: layers.EthernetTypeIPv6}
	ip6 := &layers.IPv6{Version: 6, HopLimit: 255, NextHeader: layers.IPProtocolICMPv6,
		SrcIP: router.AsSlice(), DstIP: net.ParseIP("ff02::1")}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeRouterAdvertisement, 0)}
	icmp.SetNetworkLayerForChecksum(ip6)
	ra := &layers.ICMPv6RouterAdvertisement{HopLimit: 64, RouterLifetime: 1800}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip6, icmp, ra); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// waitCount waits for s's counter name to reach want.
func waitCount(t *testing.T, s *stack.Stack, name string, want int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if s.Counters()[name] >= want {
			return
		}
	}
	t.Fatalf("%s = %d, want %d", name, s.Counters()[name], want)
}

// waitRoute waits for s's default route through router.
func waitRoute(t *testing.T, s *stack.Stack, router netip.Addr) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, r := range s.Routes6() {
			if r.Gateway == router && r.Dst.Bits() == 0 {
				return
			}
		}
	}
	t.Fatalf("no default route through %v", router)
}
