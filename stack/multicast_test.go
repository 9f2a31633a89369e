package stack_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/logtest"
	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/udp"
)

// recvWithin reads one datagram from c, failing the test after d.
func recvWithin(t *testing.T, c *udp.Conn, d time.Duration) (string, netip.AddrPort) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 100)
	n, from, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatalf("%v: no datagram: %v", c.LocalAddr(), err)
	}
	return string(buf[:n]), from
}

// nothingWithin checks that c receives nothing within d.
func nothingWithin(t *testing.T, c *udp.Conn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 100)
	if n, from, err := c.ReadFromUDPAddrPort(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("%v received %q from %v (err %v), want nothing", c.LocalAddr(), buf[:n], from, err)
	}
}

func TestUDPMulticastBetweenStacks(t *testing.T) {
	tests := []struct {
		name     string
		group    string
		wildcard netip.Addr
		src      netip.Addr
	}{
		{"IPv4", "239.1.2.3", netip.IPv4Unspecified(), stacktest.AddrA.Addr()},
		{"IPv6", "ff02::1:3", netip.IPv6Unspecified(), netip.Addr{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := stacktest.Pair(t, stacktest.Options{IPv6: true})
			group := netip.MustParseAddr(tt.group)
			const port = 5353
			// Two listeners share the port on B and join; a third
			// shares it without joining.
			var ls [3]*udp.Conn
			for i := range ls {
				c, err := b.ListenMulticastUDP(netip.AddrPortFrom(tt.wildcard, port))
				if err != nil {
					t.Fatalf("listener %d: %v", i, err)
				}
				defer c.Close()
				ls[i] = c
			}
			for _, c := range ls[:2] {
				if err := c.JoinGroup("eth0", group); err != nil {
					t.Fatalf("join: %v", err)
				}
			}
			if err := ls[0].JoinGroup("eth0", group); !errors.Is(err, syscall.EADDRINUSE) {
				t.Errorf("second join of the same group: %v, want EADDRINUSE", err)
			}
			if got := b.Groups("eth0")[group]; got != 2 {
				t.Errorf("B's eth0 joined %v %d times, want 2", group, got)
			}
			snd, err := a.ListenUDP(netip.AddrPortFrom(tt.wildcard, 0))
			if err != nil {
				t.Fatal(err)
			}
			defer snd.Close()
			if _, err := snd.WriteToUDPAddrPort([]byte("hello"), netip.AddrPortFrom(group, port)); err != nil {
				t.Fatalf("send: %v", err)
			}
			for _, c := range ls[:2] {
				got, from := recvWithin(t, c, 5*time.Second)
				if got != "hello" || from.Port() != snd.LocalAddrPort().Port() || (tt.src.IsValid() && from.Addr() != tt.src) {
					t.Errorf("received %q from %v", got, from)
				}
			}
			nothingWithin(t, ls[2], 200*time.Millisecond)

			// Once both have left, B's NIC filters the group's
			// frames out (IPv4: IGMP's MAC goes; IPv6: MLD's).
			for _, c := range ls[:2] {
				if err := c.LeaveGroup("", group); err != nil {
					t.Fatalf("leave: %v", err)
				}
			}
			if got := len(b.Groups("eth0")); got != 0 {
				t.Errorf("B's eth0 still in %d groups", got)
			}
			if _, err := snd.WriteToUDPAddrPort([]byte("again"), netip.AddrPortFrom(group, port)); err != nil {
				t.Fatalf("send: %v", err)
			}
			nothingWithin(t, ls[0], 200*time.Millisecond)
			if c := b.Counters(); c["NIC.eth0.RxMulticastFiltered"] == 0 {
				t.Errorf("NIC.eth0.RxMulticastFiltered = 0 after the leave")
			}
			c := b.Counters()
			if tt.name == "IPv4" && (c["IGMP.eth0.OutReportsV3"] < 2 || c["IGMP.eth0.Groups"] != 0) {
				t.Errorf("IGMP.eth0.OutReportsV3 = %d, Groups = %d: want the join and the leave reported", c["IGMP.eth0.OutReportsV3"], c["IGMP.eth0.Groups"])
			}
		})
	}
}

func TestUDPMulticastLoopback(t *testing.T) {
	tests := []struct {
		name  string
		group string
		any   netip.Addr
	}{
		{"IPv4", "239.9.9.9", netip.IPv4Unspecified()},
		{"IPv6", "ff02::9:9", netip.IPv6Unspecified()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := stacktest.Pair(t, stacktest.Options{IPv6: true})
			group := netip.MustParseAddr(tt.group)
			own, err := a.ListenMulticastUDP(netip.AddrPortFrom(tt.any, 7000))
			if err != nil {
				t.Fatal(err)
			}
			defer own.Close()
			peer, err := b.ListenMulticastUDP(netip.AddrPortFrom(tt.any, 7000))
			if err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			for _, c := range []*udp.Conn{own, peer} {
				if err := c.JoinGroup("", group); err != nil {
					t.Fatalf("join: %v", err)
				}
			}
			// Loopback is on by default, as Linux has it.
			if _, err := own.WriteToUDPAddrPort([]byte("loop"), netip.AddrPortFrom(group, 7000)); err != nil {
				t.Fatal(err)
			}
			if got, _ := recvWithin(t, own, 5*time.Second); got != "loop" {
				t.Errorf("own copy %q", got)
			}
			if got, _ := recvWithin(t, peer, 5*time.Second); got != "loop" {
				t.Errorf("peer got %q", got)
			}
			own.SetMulticastLoopback(false)
			if _, err := own.WriteToUDPAddrPort([]byte("no loop"), netip.AddrPortFrom(group, 7000)); err != nil {
				t.Fatal(err)
			}
			if got, _ := recvWithin(t, peer, 5*time.Second); got != "no loop" {
				t.Errorf("peer got %q", got)
			}
			nothingWithin(t, own, 200*time.Millisecond)
		})
	}
}

// hub returns B on two links, with bAddrs on its eth0 and eth1, A on the
// first (10.0.0.1/24) and C on the second (10.0.1.1/24), each on its eth0.
func hub(t *testing.T, bAddrs [2]string) (a, b, c *stack.Stack) {
	t.Helper()
	cfg := stack.Config{}
	cfg.NDP.NoDAD = true
	a, b, c = stack.New(cfg), stack.New(cfg), stack.New(cfg)
	t.Cleanup(func() {
		for _, s := range []*stack.Stack{a, b, c} {
			stacktest.Closed(t, s)
		}
	})
	aEnd, bEnd0 := pipe.New(1500, stacktest.MACA, stacktest.MACB)
	cEnd, bEnd1 := pipe.New(1500, net.HardwareAddr{0x02, 0, 0, 0, 0, 3}, net.HardwareAddr{0x02, 0, 0, 0, 0, 4})
	for _, nic := range []struct {
		s    *stack.Stack
		name string
		ep   link.Endpoint
		addr string
	}{{a, "eth0", aEnd, "10.0.0.1/24"}, {b, "eth0", bEnd0, bAddrs[0]}, {b, "eth1", bEnd1, bAddrs[1]}, {c, "eth0", cEnd, "10.0.1.1/24"}} {
		if err := nic.s.AddNIC(nic.name, nic.ep); err != nil {
			t.Fatal(err)
		}
		if err := nic.s.AddAddress(nic.name, netip.MustParsePrefix(nic.addr)); err != nil {
			t.Fatal(err)
		}
	}
	// The link-local addresses, which ndp hands the IPv6 layer in a
	// goroutine of its own: a link-scoped group's datagram is sent from
	// one, and under load it was once not there yet.
	for _, s := range []*stack.Stack{a, b, c} {
		if err := s.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return a, b, c
}

// A join takes the group's datagrams from its interface alone: B, on two
// links (hub), has a listener joined on each; what A sends to the group
// reaches the one joined on the link A is on.
func TestUDPMulticastIsTakenOnTheInterfaceJoined(t *testing.T) {
	tests := []struct {
		name  string
		group string
		any   netip.Addr
		addrs [2]string // B's addresses on eth0 and eth1
	}{
		{"IPv4", "239.1.2.3", netip.IPv4Unspecified(), [2]string{"10.0.0.2/24", "10.0.1.2/24"}},
		{"IPv6, a link-scoped group", "ff02::1:3", netip.IPv6Unspecified(), [2]string{"fd00::2/64", "fd01::2/64"}},
		{"IPv6, a global group", "ff0e::1:3", netip.IPv6Unspecified(), [2]string{"fd00::2/64", "fd01::2/64"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b, _ := hub(t, tt.addrs)
			group := netip.MustParseAddr(tt.group)
			var ls [2]*udp.Conn
			for i, nic := range []string{"eth0", "eth1"} {
				c, err := b.ListenMulticastUDP(netip.AddrPortFrom(tt.any, 7000))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if err := c.JoinGroup(nic, group); err != nil {
					t.Fatalf("join on %s: %v", nic, err)
				}
				ls[i] = c
			}
			snd, err := a.ListenUDP(netip.AddrPortFrom(tt.any, 0))
			if err != nil {
				t.Fatal(err)
			}
			defer snd.Close()
			snd.SetMulticastInterface("eth0")
			dst := netip.AddrPortFrom(group, 7000)
			if group.Is6() {
				dst = netip.AddrPortFrom(group.WithZone("eth0"), 7000)
			}
			if _, err := snd.WriteToUDPAddrPort([]byte("on eth0"), dst); err != nil {
				t.Fatal(err)
			}
			if got, _ := recvWithin(t, ls[0], 5*time.Second); got != "on eth0" {
				t.Errorf("the listener joined on eth0 got %q", got)
			}
			nothingWithin(t, ls[1], 200*time.Millisecond)
			// A datagram in fragments comes in on the interface its
			// first fragment did.
			big := append([]byte("in fragments"), make([]byte, 4000)...)
			if _, err := snd.WriteToUDPAddrPort(big, dst); err != nil {
				t.Fatal(err)
			}
			if got, _ := recvWithin(t, ls[0], 5*time.Second); !strings.HasPrefix(got, "in fragments") {
				t.Errorf("the listener joined on eth0 got %.20q", got)
			}
			nothingWithin(t, ls[1], 200*time.Millisecond)
		})
	}
}

func TestJoinGroupRefusesWhatIsNoGroup(t *testing.T) {
	a, _ := stacktest.Pair(t, stacktest.Options{})
	c, err := a.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), 9000))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, g := range []string{"10.0.0.9", "ff02::1:3"} {
		if err := c.JoinGroup("eth0", netip.MustParseAddr(g)); err == nil {
			t.Errorf("an IPv4 endpoint joined %s", g)
		}
	}
	if err := c.JoinGroup("nosuch", netip.MustParseAddr("239.1.1.1")); err == nil {
		t.Error("joined on a NIC that does not exist")
	}
	if err := c.SetMulticastTTL(0); err == nil {
		t.Error("TTL 0 taken")
	}
	if err := c.LeaveGroup("", netip.MustParseAddr("239.1.1.1")); !errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Errorf("leave of a group not joined: %v", err)
	}
}

// A group joined and left is one debug event each, with the NIC and the
// group, for either family; a second socket's join of the same group is
// none, since the NIC is in the group already.
func TestJoinAndLeaveAreLoggedAtDebug(t *testing.T) {
	log, events := logtest.New(slog.LevelDebug)
	a, _ := stacktest.Pair(t, stacktest.Options{IPv6: true, Config: stack.Config{Logger: log}})
	for _, g := range []netip.Addr{netip.MustParseAddr("239.4.4.4"), netip.MustParseAddr("ff05::4:4")} {
		for range 2 {
			if err := a.JoinGroup("eth0", g); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			if err := a.LeaveGroup("eth0", g); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := a.LeaveGroup("eth0", netip.MustParseAddr("239.4.4.4")); err == nil {
		t.Error("a leave more than the joins succeeded")
	}
	var got []string
	for _, e := range events.Events(t) {
		if m := e.Str("msg"); strings.HasPrefix(m, "multicast group") {
			if e.Str("level") != "DEBUG" || e.Str("nic") != "eth0" {
				t.Errorf("event %v: want level DEBUG, nic eth0", e)
			}
			got = append(got, m+" "+e.Str("group"))
		}
	}
	want := []string{"multicast group joined 239.4.4.4", "multicast group left 239.4.4.4", "multicast group joined ff05::4:4", "multicast group left ff05::4:4"}
	if !slices.Equal(got, want) {
		t.Errorf("logged %q, want %q", got, want)
	}
}

// Endpoints bound to an interface from the start (ListenUDPOn, Linux's
// SO_BINDTODEVICE before bind) share a port across interfaces, each taking
// what comes in on its own; on one interface, or beside an endpoint bound
// to none, the port is taken.
func TestUDPEndpointsBoundToInterfacesShareAPort(t *testing.T) {
	a, b, c := hub(t, [2]string{"10.0.0.2/24", "10.0.1.2/24"})
	any68 := netip.AddrPortFrom(netip.IPv4Unspecified(), 68)
	var on [2]*udp.Conn
	for i, nic := range []string{"eth0", "eth1"} {
		l, err := b.ListenUDPOn(nic, any68)
		if err != nil {
			t.Fatalf("bound to %s: %v", nic, err)
		}
		defer l.Close()
		on[i] = l
	}
	if l, err := b.ListenUDPOn("eth0", any68); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("a second endpoint bound to eth0: %v, want EADDRINUSE", err)
		if err == nil {
			l.Close()
		}
	}
	if l, err := b.ListenUDP(any68); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("an endpoint bound to no interface: %v, want EADDRINUSE", err)
		if err == nil {
			l.Close()
		}
	}
	for i, sender := range []struct {
		s  *stack.Stack
		to string
	}{{a, "10.0.0.2:68"}, {c, "10.0.1.2:68"}} {
		snd, err := sender.s.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), 0))
		if err != nil {
			t.Fatal(err)
		}
		defer snd.Close()
		if _, err := snd.WriteToUDPAddrPort([]byte("hello"), netip.MustParseAddrPort(sender.to)); err != nil {
			t.Fatal(err)
		}
		if got, _ := recvWithin(t, on[i], 5*time.Second); got != "hello" {
			t.Errorf("the endpoint on eth%d got %q", i, got)
		}
		nothingWithin(t, on[1-i], 200*time.Millisecond)
	}
}
