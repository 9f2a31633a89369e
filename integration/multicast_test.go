package integration

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/udp"
)

// Multicast against the kernel (igmp, ipv4/multicast.go, udp/multicast.go):
// the kernel in the namespace joins a group GoNet sends to, and sends to a
// group GoNet joined, over the TAP; and a Linux bridge with IGMP snooping
// learns GoNet's membership from its reports and forgets it at its leave.
// Every group is an administratively scoped one (RFC 2365) or link-scoped,
// and no packet leaves the namespace.

var mcastGroup4 = netip.MustParseAddr("239.77.1.2")

// kernelRecv4 has socat in the namespace join group on the TAP and print
// what it receives on port; it returns once the kernel is a member (ip
// maddr shows it), with a function that waits for a line of output.
func (h *host) kernelRecv4(t *testing.T, group netip.Addr, port int) func(time.Duration) (string, error) {
	t.Helper()
	netnstest.RequireTool(t, "socat")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := h.ns.Command(ctx, "socat", "-u",
		fmt.Sprintf("UDP4-RECV:%d,ip-add-membership=%v:%s", port, group, h.dev), "STDOUT")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	waitFor(t, "the kernel's membership of "+group.String(), 5*time.Second, func() bool {
		return strings.Contains(h.run(t, 5*time.Second, "ip", "maddr", "show", "dev", h.dev), group.String())
	})
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return func(d time.Duration) (string, error) {
		select {
		case l, ok := <-lines:
			if !ok {
				return "", fmt.Errorf("socat ended")
			}
			return l, nil
		case <-time.After(d):
			return "", fmt.Errorf("nothing within %v", d)
		}
	}
}

// snoopingBridge puts GoNet's TAP on a bridge with multicast snooping
// and a querier, its intervals short (a query every 3 s, a leaving member
// asked about twice, 0.5 s apart), with opts added to its settings (the
// protocols' versions, say); the TAP's port floods no unknown group. A
// veth from the bridge leads to a namespace of its own, the sender, whose
// end has senderAddr. It returns the bridge's name, the sender and its
// end's name, the bridge up.
func (h *host) snoopingBridge(t *testing.T, senderAddr netip.Prefix, opts ...string) (br string, sender *netns.NS, senderDev string) {
	t.Helper()
	sfx := h.dev[len(h.dev)-min(len(h.dev), 8):]
	br, vb, vk := "br"+sfx, "vb"+sfx, "vk"+sfx
	args := append([]string{"link", "add", br, "type", "bridge", "mcast_snooping", "1",
		"mcast_query_interval", "300", "mcast_last_member_interval", "50", "mcast_last_member_count", "2",
		"mcast_startup_query_interval", "100", "mcast_query_response_interval", "100"}, opts...)
	h.run(t, 5*time.Second, "ip", args...)
	// The querier after the intervals: it waits a query response
	// interval before the bridge forwards by its database, the one in
	// force when it was turned on.
	h.run(t, 5*time.Second, "ip", "link", "set", br, "type", "bridge", "mcast_querier", "1")
	h.run(t, 5*time.Second, "ip", "link", "set", h.dev, "master", br)
	h.run(t, 5*time.Second, "bridge", "link", "set", "dev", h.dev, "mcast_flood", "off")
	sender = netnstest.New(t)
	if err := h.ns.AddVeth(vb, sender, vk); err != nil {
		t.Fatal(err)
	}
	h.run(t, 5*time.Second, "ip", "link", "set", vb, "master", br)
	h.run(t, 5*time.Second, "ip", "link", "set", vb, "up")
	if err := sender.ConfigureLink(vk, senderAddr, 0); err != nil {
		t.Fatal(err)
	}
	h.run(t, 5*time.Second, "ip", "link", "set", br, "up")
	return br, sender, vk
}

func TestKernelReceivesGoNetsMulticast(t *testing.T) {
	h := newHost(t, options{})
	recv := h.kernelRecv4(t, mcastGroup4, 5400)
	c, err := h.stack.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WriteToUDPAddrPort([]byte("hello from gonet\n"), netip.AddrPortFrom(mcastGroup4, 5400)); err != nil {
		t.Fatal(err)
	}
	if got, err := recv(5 * time.Second); err != nil || got != "hello from gonet" {
		t.Fatalf("the kernel received %q (%v)", got, err)
	}
	if n := h.stack.Counters()["IPv4.OutMcastPkts"]; n != 1 {
		t.Errorf("IPv4.OutMcastPkts = %d, want 1", n)
	}
}

func TestGoNetReceivesKernelsMulticast(t *testing.T) {
	netnstest.RequireTool(t, "socat")
	h := newHost(t, options{})
	c, err := h.stack.ListenMulticastUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), 5401))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.JoinGroup(h.dev, mcastGroup4); err != nil {
		t.Fatal(err)
	}
	h.run(t, 5*time.Second, "sh", "-c", fmt.Sprintf("echo hello from the kernel | socat -u STDIN UDP4-DATAGRAM:%v:5401,ip-multicast-if=%v", mcastGroup4, kernelAddr.Addr()))
	got, from := readUDP(t, c, 5*time.Second)
	if got != "hello from the kernel\n" || from.Addr() != kernelAddr.Addr() {
		t.Errorf("received %q from %v", got, from)
	}
	c2 := h.stack.Counters()
	if c2["IGMP."+h.dev+".OutReportsV3"] == 0 {
		t.Error("no IGMPv3 report sent for the join")
	}
	// Once left, the group's frames stop at the NIC's filter.
	if err := c.LeaveGroup("", mcastGroup4); err != nil {
		t.Fatal(err)
	}
	before := h.stack.Counters()["NIC."+h.dev+".RxMulticastFiltered"]
	h.run(t, 5*time.Second, "sh", "-c", fmt.Sprintf("echo again | socat -u STDIN UDP4-DATAGRAM:%v:5401,ip-multicast-if=%v", mcastGroup4, kernelAddr.Addr()))
	waitFor(t, "the frame filtered out", 5*time.Second, func() bool {
		return h.stack.Counters()["NIC."+h.dev+".RxMulticastFiltered"] > before
	})
}

// readUDP reads one datagram from c within d.
func readUDP(t *testing.T, c *udp.Conn, d time.Duration) (string, netip.AddrPort) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 1500)
	n, from, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatalf("no datagram: %v", err)
	}
	return string(buf[:n]), from
}

func TestMulticastIPv6WithTheKernel(t *testing.T) {
	h := newHost6(t, options{}, false)
	group := netip.MustParseAddr("ff02::77:1")
	// The kernel joins; GoNet sends.
	var kc *net.UDPConn
	err := h.ns.Do(func() error {
		ifi, err := net.InterfaceByName(h.dev)
		if err != nil {
			return err
		}
		kc, err = net.ListenMulticastUDP("udp6", ifi, &net.UDPAddr{IP: group.AsSlice(), Port: 5402})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	snd, err := h.stack.ListenUDP(netip.AddrPortFrom(netip.IPv6Unspecified(), 0))
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	if _, err := snd.WriteToUDPAddrPort([]byte("to the kernel"), netip.AddrPortFrom(group.WithZone(h.dev), 5402)); err != nil {
		t.Fatal(err)
	}
	kc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 100)
	n, from, err := kc.ReadFromUDPAddrPort(buf)
	if err != nil || string(buf[:n]) != "to the kernel" || from.Addr().WithZone("") != h.gonetLL.WithZone("") {
		t.Fatalf("the kernel received %q from %v (%v)", buf[:n], from, err)
	}
	// GoNet joins; the kernel sends.
	c, err := h.stack.ListenMulticastUDP(netip.AddrPortFrom(netip.IPv6Unspecified(), 5403))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.JoinGroup(h.dev, group); err != nil {
		t.Fatal(err)
	}
	kd, err := h.ns.DialUDP(fmt.Sprintf("[%v%%%s]:5403", group, h.dev))
	if err != nil {
		t.Fatal(err)
	}
	defer kd.Close()
	if _, err := kd.Write([]byte("to gonet")); err != nil {
		t.Fatal(err)
	}
	got, from6 := readUDP(t, c, 5*time.Second)
	if got != "to gonet" || from6.Addr().WithZone("") != h.kernelLL.WithZone("") {
		t.Errorf("GoNet received %q from %v", got, from6)
	}
}

// A bridge with IGMP snooping and a querier, with GoNet's TAP as a port
// and a veth to a second namespace, where the kernel sends to a group:
// the bridge's multicast database lists GoNet's group from its report, the
// bridge forwards the kernel's datagrams to GoNet's port for it alone (the
// port floods no unknown group), and drops the group after GoNet's leave.
// The bridge's querier speaks IGMPv2 (Linux's default), so GoNet answers
// in its compatibility mode.
func TestSnoopingBridgeLearnsGoNetsMembership(t *testing.T) {
	netnstest.RequireTool(t, "bridge")
	netnstest.RequireTool(t, "socat")
	h := newHost(t, options{})
	br, sender, _ := h.snoopingBridge(t, netip.MustParsePrefix("10.99.0.3/24"))
	mdb := func() string { return h.run(t, 5*time.Second, "bridge", "mdb", "show", "dev", br) }
	c, err := h.stack.ListenMulticastUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), 5404))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.JoinGroup(h.dev, mcastGroup4); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the bridge to learn "+mcastGroup4.String(), 15*time.Second, func() bool {
		out := mdb()
		return strings.Contains(out, "port "+h.dev) && strings.Contains(out, mcastGroup4.String())
	})
	// The bridge forwards by its database only once it knows a querier
	// (its own, a query response interval after it was turned on): until
	// then it floods, and not to GoNet's port. So the kernel sends until
	// GoNet hears.
	send := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if out, err := sender.Run(ctx, "sh", "-c", fmt.Sprintf("echo through the bridge | socat -u STDIN UDP4-DATAGRAM:%v:5404,ip-multicast-if=10.99.0.3", mcastGroup4)); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	buf := make([]byte, 100)
	deadline := time.Now().Add(15 * time.Second)
	for {
		send()
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err == nil {
			if got := string(buf[:n]); got != "through the bridge\n" || from.Addr() != netip.MustParseAddr("10.99.0.3") {
				t.Errorf("GoNet received %q from %v", got, from)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bridge never forwarded the group to GoNet:\n%s", mdb())
		}
	}
	// The bridge's queries are answered, in IGMPv2 from the first one
	// on (RFC 3376 section 7.2.1).
	waitFor(t, "an answer to the bridge's query", 15*time.Second, func() bool {
		c := h.stack.Counters()
		return c["IGMP."+h.dev+".InQueriesV2"] > 0 && c["IGMP."+h.dev+".OutReportsV2"] > 0
	})
	if m := h.stack.Counters()["IGMP."+h.dev+".Mode"]; m != 2 {
		t.Errorf("IGMP mode %d behind an IGMPv2 querier, want 2", m)
	}
	if err := c.LeaveGroup(h.dev, mcastGroup4); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the bridge to forget "+mcastGroup4.String(), 15*time.Second, func() bool {
		return !strings.Contains(mdb(), mcastGroup4.String())
	})
	if n := h.stack.Counters()["IGMP."+h.dev+".OutLeaves"]; n != 1 {
		t.Errorf("IGMP.%s.OutLeaves = %d, want the one IGMPv2 leave", h.dev, n)
	}
}

// The IPv6 twin, over a bridge whose querier speaks MLDv1 (Linux's
// default, mcast_mld_version 1): GoNet answers in MLDv1 compatibility mode
// (RFC 3810 section 8.2.1), the bridge's database lists GoNet's group from
// its MLDv1 Reports, and drops it after GoNet's Done.
func TestSnoopingBridgeLearnsGoNetsMembershipOverMLDv1(t *testing.T) {
	netnstest.RequireTool(t, "bridge")
	h := newHost(t, options{})
	br := "br" + h.dev[len(h.dev)-min(len(h.dev), 8):]
	h.run(t, 5*time.Second, "ip", "link", "add", br, "type", "bridge",
		"mcast_snooping", "1", "mcast_mld_version", "1",
		"mcast_query_interval", "300", "mcast_last_member_interval", "50", "mcast_last_member_count", "2",
		"mcast_startup_query_interval", "100", "mcast_query_response_interval", "100")
	h.run(t, 5*time.Second, "ip", "link", "set", br, "type", "bridge", "mcast_querier", "1")
	h.run(t, 5*time.Second, "ip", "link", "set", h.dev, "master", br)
	h.run(t, 5*time.Second, "ip", "link", "set", br, "up")
	mdb := func() string { return h.run(t, 5*time.Second, "bridge", "mdb", "show", "dev", br) }
	counter := func(name string) int64 { return int64(h.stack.Counters()["NDP."+h.dev+"."+name]) }

	group := netip.MustParseAddr("ff05::1:3")
	c, err := h.stack.ListenMulticastUDP(netip.AddrPortFrom(netip.IPv6Unspecified(), 5405))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.JoinGroup(h.dev, group); err != nil {
		t.Fatal(err)
	}
	// The bridge queries from its link-local address once that has
	// passed DAD, every 3 s.
	waitFor(t, "GoNet to answer the bridge's MLDv1 query in MLDv1", 20*time.Second, func() bool {
		return counter("MLDMode") == 1 && counter("OutGroupMembResponses") > 0
	})
	waitFor(t, "the bridge to learn "+group.String(), 15*time.Second, func() bool {
		out := mdb()
		return strings.Contains(out, "port "+h.dev) && strings.Contains(out, group.String())
	})
	if err := c.LeaveGroup(h.dev, group); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the bridge to forget "+group.String(), 15*time.Second, func() bool {
		return !strings.Contains(mdb(), group.String())
	})
	if n := counter("OutGroupMembReductions"); n != 1 {
		t.Errorf("NDP.%s.OutGroupMembReductions = %d, want the one MLDv1 Done", h.dev, n)
	}
}

// Source-specific multicast through a bridge whose snooping and querier
// speak IGMPv3 and MLDv2 (mcast_igmp_version 3, mcast_mld_version 2), with
// GoNet's TAP as a port and a veth to a second namespace holding two
// sources: the bridge's database lists GoNet's filters per group, mode and
// sources (RFC 3376 section 3.2, as package sourcefilter merges them),
// keeps the sources alive through its queries (GoNet answers them with
// current-state records) and forwards a source GoNet included, not one it
// left out; a source GoNet drops is blocked (a BLOCK record) and goes.
func TestSnoopingBridgeLearnsGoNetsSourceFilters(t *testing.T) {
	netnstest.RequireTool(t, "bridge")
	netnstest.RequireTool(t, "socat")
	h := newHost(t, options{})
	src1, src2 := netip.MustParseAddr("10.99.0.3"), netip.MustParseAddr("10.99.0.4")
	// A source unreported lasts 7 s (mcast_membership_interval).
	br, sender, vk := h.snoopingBridge(t, netip.PrefixFrom(src1, 24),
		"mcast_igmp_version", "3", "mcast_mld_version", "2", "mcast_membership_interval", "700")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if out, err := sender.Run(ctx, "ip", "addr", "add", src2.String()+"/24", "dev", vk); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// mdbGroup is the bridge's line for group on GoNet's port, the
	// group's own (not one of its per-source lines, which carry "src").
	mdbGroup := func(group netip.Addr) string {
		for _, l := range strings.Split(h.run(t, 5*time.Second, "bridge", "-d", "mdb", "show", "dev", br), "\n") {
			if strings.Contains(l, "port "+h.dev+" ") && strings.Contains(l, "grp "+group.String()+" ") && !strings.Contains(l, " src ") {
				return l
			}
		}
		return ""
	}
	counter := func(name string) int64 { return int64(h.stack.Counters()[name]) }

	ssm, asm, ssm6 := netip.MustParseAddr("232.77.1.2"), netip.MustParseAddr("239.77.1.3"), netip.MustParseAddr("ff3e::8000:77")
	src6 := netip.MustParseAddr("fd00:99::3")
	listen := func(any netip.Addr, port uint16) *udp.Conn {
		c, err := h.stack.ListenMulticastUDP(netip.AddrPortFrom(any, port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	only1 := listen(netip.IPv4Unspecified(), 5406)
	if err := only1.JoinSourceGroup(h.dev, ssm, src1); err != nil {
		t.Fatal(err)
	}
	also2 := listen(netip.IPv4Unspecified(), 5406)
	if err := also2.JoinSourceGroup(h.dev, ssm, src2); err != nil {
		t.Fatal(err)
	}
	blocks := listen(netip.IPv4Unspecified(), 5407)
	if err := blocks.JoinGroup(h.dev, asm); err != nil {
		t.Fatal(err)
	}
	if err := blocks.BlockSource(h.dev, asm, src2); err != nil {
		t.Fatal(err)
	}
	only6 := listen(netip.IPv6Unspecified(), 5408)
	if err := only6.JoinSourceGroup(h.dev, ssm6, src6); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		group   netip.Addr
		mode    string
		sources []netip.Addr
	}{
		{ssm, "include", []netip.Addr{src1, src2}},
		{asm, "exclude", []netip.Addr{src2}},
		// The MLDv2 querier waits for the bridge's link-local address
		// to pass DAD; the report is learnt before.
		{ssm6, "include", []netip.Addr{src6}},
	} {
		waitFor(t, fmt.Sprintf("the bridge to learn %v %s %v", w.group, w.mode, w.sources), 15*time.Second, func() bool {
			return hasSources(mdbGroup(w.group), w.mode, w.sources...)
		})
	}

	// The bridge forwards the sources included; GoNet's filter gives
	// each endpoint its own.
	send := func(from netip.Addr, msg string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if out, err := sender.Run(ctx, "sh", "-c", fmt.Sprintf("echo %s | socat -u STDIN UDP4-DATAGRAM:%v:5406,bind=%v,ip-multicast-if=%v", msg, ssm, from, from)); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	buf := make([]byte, 100)
	deadline := time.Now().Add(15 * time.Second)
	for {
		// The bridge forwards by its database once its querier is
		// up; until then it floods, and not to GoNet's port.
		send(src1, "one")
		only1.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, from, err := only1.ReadFromUDPAddrPort(buf)
		if err == nil {
			if got := string(buf[:n]); got != "one\n" || from.Addr() != src1 {
				t.Errorf("received %q from %v, want one from %v", got, from, src1)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bridge never forwarded %v from %v to GoNet:\n%s", ssm, src1, mdbGroup(ssm))
		}
	}
	send(src2, "two")
	if got, from := readUDP(t, also2, 5*time.Second); got != "two\n" || from.Addr() != src2 {
		t.Errorf("received %q from %v, want two from %v", got, from, src2)
	}
	for _, c := range []*udp.Conn{only1, also2} {
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if n, from, err := c.ReadFromUDPAddrPort(buf); err == nil {
			t.Errorf("%v took %q from %v, another endpoint's source", c.LocalAddr(), buf[:n], from)
		}
	}

	// The sources stay through the querier's general queries, which
	// GoNet answers: one unreported lasts the membership interval, 7 s
	// here (RFC 3376 8.4's 2 queries of 3 s and a second's response
	// interval), and the bridge's timer for it shows the time left.
	queries := counter("IGMP." + h.dev + ".InQueriesV3")
	waitFor(t, "three of the bridge's IGMPv3 queries", 15*time.Second, func() bool {
		return counter("IGMP."+h.dev+".InQueriesV3") >= queries+3
	})
	if l := mdbGroup(ssm); !hasSources(l, "include", src1, src2) {
		t.Errorf("a source gone though GoNet answered the queries: %s", l)
	}

	// The second endpoint closes: its source is blocked, and the bridge,
	// having asked about it (a group-and-source-specific query GoNet
	// does not answer for a source it left), drops it and no other.
	also2.Close()
	waitFor(t, "the bridge to drop "+src2.String(), 15*time.Second, func() bool {
		return !strings.Contains(mdbGroup(ssm), src2.String()+"/")
	})
	if l := mdbGroup(ssm); !hasSources(l, "include", src1) {
		t.Errorf("the bridge dropped the source GoNet kept: %s", l)
	}
}

// hasSources reports whether a line of the bridge's database ("bridge -d
// mdb show") holds a group in mode ("include" or "exclude") with each of
// sources on its source list ("source_list 10.99.0.4/259.99,10.99.0.3/...",
// the timers after each source), in whatever order the bridge keeps them.
func hasSources(line, mode string, sources ...netip.Addr) bool {
	_, list, ok := strings.Cut(line, " source_list ")
	if !strings.Contains(line, " filter_mode "+mode+" ") || !ok {
		return false
	}
	list, _, _ = strings.Cut(list, " ")
	for _, s := range sources {
		if !strings.Contains(","+list, ","+s.String()+"/") {
			return false
		}
	}
	return true
}
