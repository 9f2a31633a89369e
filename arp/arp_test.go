package arp_test

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
)

var (
	otherAddr = netip.MustParseAddr("10.1.0.7")
	zeroMAC   = net.HardwareAddr{0, 0, 0, 0, 0, 0}
)

// checkARP fails the test unless frame is the ARP packet described, sent
// from the stack's MAC to ethDst.
func checkARP(t *testing.T, frame []byte, ethDst net.HardwareAddr, op uint16, sha net.HardwareAddr, spa netip.Addr, tha net.HardwareAddr, tpa netip.Addr) {
	t.Helper()
	eth, a := rawtest.ARPOf(t, frame)
	if !bytes.Equal(eth.SrcMAC, rawtest.StackMAC) || !bytes.Equal(eth.DstMAC, ethDst) || eth.EthernetType != layers.EthernetTypeARP {
		t.Errorf("Ethernet %v > %v type %v, want %v > %v ARP", eth.SrcMAC, eth.DstMAC, eth.EthernetType, rawtest.StackMAC, ethDst)
	}
	if a.AddrType != layers.LinkTypeEthernet || a.Protocol != layers.EthernetTypeIPv4 || a.HwAddressSize != 6 || a.ProtAddressSize != 4 {
		t.Errorf("ARP header: hardware %v protocol %v sizes %d/%d", a.AddrType, a.Protocol, a.HwAddressSize, a.ProtAddressSize)
	}
	if a.Operation != op || !bytes.Equal(a.SourceHwAddress, sha) || rawtest.Addr(a.SourceProtAddress) != spa ||
		!bytes.Equal(a.DstHwAddress, tha) || rawtest.Addr(a.DstProtAddress) != tpa {
		t.Errorf("got %s, want op %d %v/%v > %v/%v", rawtest.Describe(frame), op, sha, spa, tha, tpa)
	}
	// RFC 894 frames carry at least 46 bytes of payload.
	if len(frame) != 60 {
		t.Errorf("frame of %d bytes, want 60 (padded to the Ethernet minimum)", len(frame))
	}
}

func checkRequestFor(t *testing.T, frame []byte, target netip.Addr) {
	t.Helper()
	checkARP(t, frame, rawtest.BroadcastMAC, layers.ARPRequest, rawtest.StackMAC, rawtest.StackAddr, zeroMAC, target)
}

// send has the stack send a UDP datagram to dst:9 from a fresh socket.
func send(t *testing.T, h *rawtest.Host, dst netip.Addr, data string) {
	t.Helper()
	c, err := h.S.ListenUDP(netip.AddrPort{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WriteToUDPAddrPort([]byte(data), netip.AddrPortFrom(dst, 9)); err != nil {
		t.Fatalf("write to %v: %v", dst, err)
	}
}

// checkDatagram fails the test unless frame is a UDP datagram to dst at
// dstMAC carrying data.
func checkDatagram(t *testing.T, frame []byte, dstMAC net.HardwareAddr, dst netip.Addr, data string) {
	t.Helper()
	eth := rawtest.EthernetOf(t, frame)
	ip, u := rawtest.UDPOf(t, frame)
	if !bytes.Equal(eth.DstMAC, dstMAC) || rawtest.Addr(ip.DstIP) != dst || string(u.Payload) != data {
		t.Errorf("got %s %q, want UDP to %v at %v carrying %q", rawtest.Describe(frame), u.Payload, dst, dstMAC, data)
	}
}

func TestAnswersARequestForOurAddress(t *testing.T) {
	tests := []struct {
		name string
		tha  net.HardwareAddr // what the requester put in the target hardware field
	}{
		{"target hardware zero", nil},
		{"target hardware broadcast", rawtest.BroadcastMAC},
		{"target hardware garbage", net.HardwareAddr{1, 2, 3, 4, 5, 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			h.Inject(h.ARPFrame(t, layers.ARPRequest, rawtest.PeerMAC, rawtest.PeerAddr, tt.tha, rawtest.StackAddr))
			// RFC 826: the reply swaps sender and target and fills in our
			// hardware address; it goes to the requester alone.
			checkARP(t, h.Expect(t, rawtest.Timeout), rawtest.PeerMAC,
				layers.ARPReply, rawtest.StackMAC, rawtest.StackAddr, rawtest.PeerMAC, rawtest.PeerAddr)
			h.WaitCounter(t, "ARP.eth0.OutReplies", 1) // counted after the send
		})
	}
}

func TestIgnoresARequestForAnotherAddress(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	h.Inject(h.ARPFrame(t, layers.ARPRequest, rawtest.PeerMAC, rawtest.PeerAddr, nil, otherAddr))
	h.WaitCounter(t, "ARP.eth0.InRequests", 1)
	if n, _ := h.S.Neighbors(rawtest.NIC); len(n) != 0 {
		t.Errorf("learned %v from a request for another host (RFC 826 merges only known senders)", n)
	}
	h.ExpectNothing(t)
	h.WaitCounter(t, "ARP.eth0.OutReplies", 1) // the barrier's alone
}

func TestLearnsTheRequester(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	h.Inject(h.ARPFrame(t, layers.ARPRequest, rawtest.PeerMAC, rawtest.PeerAddr, nil, rawtest.StackAddr))
	h.Expect(t, rawtest.Timeout) // the reply
	n, err := h.S.Neighbors(rawtest.NIC)
	if err != nil {
		t.Fatal(err)
	}
	want := arp.Entry{IP: rawtest.PeerAddr, MAC: [6]byte(rawtest.PeerMAC), Expires: rawtest.Start.Add(60 * time.Second)}
	if len(n) != 1 || n[0] != want {
		t.Fatalf("neighbours %v, want [%v]", n, want)
	}
	// A datagram to the requester needs no resolution.
	send(t, h, rawtest.PeerAddr, "hello")
	checkDatagram(t, h.Expect(t, rawtest.Timeout), rawtest.PeerMAC, rawtest.PeerAddr, "hello")
	if got := h.Counter(t, "ARP.eth0.OutRequests"); got != 0 {
		t.Errorf("OutRequests = %d", got)
	}
}

func TestUpdatesAKnownSenderFromAnyPacket(t *testing.T) {
	// RFC 826: a known sender's entry is updated even when the packet is
	// not for us (the merge step comes before "Am I the target?").
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	moved := net.HardwareAddr{0x02, 0, 0, 0, 9, 9}
	h.Clock.Advance(10 * time.Second)
	h.Inject(h.ARPFrame(t, layers.ARPRequest, moved, rawtest.PeerAddr, nil, otherAddr))
	h.ExpectNothing(t)
	if mac, ok := neighbour(t, h, rawtest.PeerAddr); !ok || !bytes.Equal(mac.MAC[:], moved) || !mac.Expires.Equal(rawtest.Start.Add(70*time.Second)) {
		t.Errorf("peer entry %v, want %v refreshed to expire at +70s", mac, moved)
	}
}

func neighbour(t *testing.T, h *rawtest.Host, ip netip.Addr) (arp.Entry, bool) {
	t.Helper()
	n, err := h.S.Neighbors(rawtest.NIC)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range n {
		if e.IP == ip {
			return e, true
		}
	}
	return arp.Entry{}, false
}

func TestResolvesThenSendsWhatWaited(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	send(t, h, rawtest.PeerAddr, "one")
	send(t, h, rawtest.PeerAddr, "two")
	// One request for both datagrams, broadcast.
	checkRequestFor(t, h.Expect(t, rawtest.Timeout), rawtest.PeerAddr)
	if used := h.S.Budget().Used(); used != 2*(20+8+3) {
		t.Errorf("budget holds %d bytes for the queued datagrams, want %d", used, 2*(20+8+3))
	}
	h.Inject(h.ARPFrame(t, layers.ARPReply, rawtest.PeerMAC, rawtest.PeerAddr, rawtest.StackMAC, rawtest.StackAddr))
	checkDatagram(t, h.Expect(t, rawtest.Timeout), rawtest.PeerMAC, rawtest.PeerAddr, "one")
	checkDatagram(t, h.Expect(t, rawtest.Timeout), rawtest.PeerMAC, rawtest.PeerAddr, "two")
	h.WaitCounter(t, "ARP.eth0.Resolved", 1)
	if used := h.S.Budget().Used(); used != 0 {
		t.Errorf("budget holds %d bytes after the queue was sent", used)
	}
	if got := h.Counter(t, "ARP.eth0.OutRequests"); got != 1 {
		t.Errorf("OutRequests = %d, want 1", got)
	}
}

// TestRetriesEveryIntervalThenReportsTheQueueUnreachable pins RFC 1122
// section 2.3.2.1's pace and 2.3.2.2's report: each datagram that waited
// on a resolution that failed is answered with ICMP host unreachable,
// which loops back to the host that sent it and sends nothing on the wire.
func TestRetriesEveryIntervalThenReportsTheQueueUnreachable(t *testing.T) {
	tests := []struct {
		requests int
		interval time.Duration
	}{
		{1, time.Second},
		{3, time.Second},
		{5, 250 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run("", func(t *testing.T) {
			h := rawtest.New(t, stack.Config{ARP: arp.Config{Requests: tt.requests, RetryInterval: tt.interval}})
			send(t, h, rawtest.PeerAddr, "a")
			send(t, h, rawtest.PeerAddr, "b")
			checkRequestFor(t, h.Expect(t, rawtest.Timeout), rawtest.PeerAddr)
			for i := 1; i < tt.requests; i++ {
				// Just short of the interval nothing is sent...
				h.Advance(t, 1, tt.interval-time.Nanosecond)
				h.ExpectNothing(t)
				// ...and at it, the next request.
				h.Clock.Advance(time.Nanosecond)
				checkRequestFor(t, h.Expect(t, rawtest.Timeout), rawtest.PeerAddr)
			}
			h.Advance(t, 1, tt.interval)
			h.WaitCounter(t, "ARP.eth0.ResolveFailed", 1)
			h.WaitCounter(t, "ARP.eth0.UnresolvedDrops", 2)
			h.WaitCounter(t, "ICMP.OutDestUnreachs", 2)
			h.WaitCounter(t, "ICMP.InDestUnreachs", 2)
			if got := h.Counter(t, "ARP.eth0.OutRequests"); got != int64(tt.requests) {
				t.Errorf("OutRequests = %d, want %d", got, tt.requests)
			}
			h.ExpectNothing(t)
			if used := h.S.Budget().Used(); used != 0 {
				t.Errorf("budget holds %d bytes after the drop", used)
			}
			// A reply after giving up sends nothing that waited.
			h.Inject(h.ARPFrame(t, layers.ARPReply, rawtest.PeerMAC, rawtest.PeerAddr, rawtest.StackMAC, rawtest.StackAddr))
			h.ExpectNothing(t)
		})
	}
}

func TestQueueBoundDropsTheExcess(t *testing.T) {
	h := rawtest.New(t, stack.Config{ARP: arp.Config{QueueLen: 2}})
	for _, d := range []string{"1", "2", "3", "4"} {
		send(t, h, rawtest.PeerAddr, d)
	}
	if got := h.Counter(t, "ARP.eth0.QueueDrops"); got != 2 {
		t.Errorf("QueueDrops = %d, want 2", got)
	}
	checkRequestFor(t, h.Expect(t, rawtest.Timeout), rawtest.PeerAddr)
	h.Inject(h.ARPFrame(t, layers.ARPReply, rawtest.PeerMAC, rawtest.PeerAddr, rawtest.StackMAC, rawtest.StackAddr))
	// The first QueueLen waited; the rest were dropped.
	checkDatagram(t, h.Expect(t, rawtest.Timeout), rawtest.PeerMAC, rawtest.PeerAddr, "1")
	checkDatagram(t, h.Expect(t, rawtest.Timeout), rawtest.PeerMAC, rawtest.PeerAddr, "2")
	h.ExpectNothing(t)
}

func TestBudgetBoundsTheQueue(t *testing.T) {
	// Each datagram is 20+8+100 bytes; the budget holds two and a half.
	h := rawtest.New(t, stack.Config{MemoryLimit: 320})
	big := string(make([]byte, 100))
	for range 3 {
		send(t, h, rawtest.PeerAddr, big)
	}
	if got := h.Counter(t, "ARP.eth0.QueueDrops"); got != 1 {
		t.Errorf("QueueDrops = %d, want 1", got)
	}
	if got := h.S.Budget().Refused(); got != 1 {
		t.Errorf("budget refused %d, want 1", got)
	}
	checkRequestFor(t, h.Expect(t, rawtest.Timeout), rawtest.PeerAddr)
	h.Inject(h.ARPFrame(t, layers.ARPReply, rawtest.PeerMAC, rawtest.PeerAddr, rawtest.StackMAC, rawtest.StackAddr))
	h.ExpectN(t, 2)
}

func TestCacheEntryExpiresAfterTTL(t *testing.T) {
	h := rawtest.New(t, stack.Config{ARP: arp.Config{CacheTTL: 10 * time.Second}})
	h.LearnPeer(t)
	h.Clock.Advance(10*time.Second - time.Nanosecond)
	send(t, h, rawtest.PeerAddr, "fresh")
	checkDatagram(t, h.Expect(t, rawtest.Timeout), rawtest.PeerMAC, rawtest.PeerAddr, "fresh")
	h.Clock.Advance(time.Nanosecond)
	send(t, h, rawtest.PeerAddr, "stale")
	checkRequestFor(t, h.Expect(t, rawtest.Timeout), rawtest.PeerAddr)
	if got := h.Counter(t, "ARP.eth0.CacheMisses"); got != 1 {
		t.Errorf("CacheMisses = %d, want 1", got)
	}
	h.Inject(h.ARPFrame(t, layers.ARPReply, rawtest.PeerMAC, rawtest.PeerAddr, rawtest.StackMAC, rawtest.StackAddr))
	checkDatagram(t, h.Expect(t, rawtest.Timeout), rawtest.PeerMAC, rawtest.PeerAddr, "stale")
}

func TestSendsGratuitousARPOnAddAddress(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	// RFC 5227 section 3: an announcement is a request with our address as
	// both sender and target, broadcast.
	checkRequestFor(t, h.Announcement, rawtest.StackAddr)
	second := netip.MustParseAddr("10.1.0.3")
	if err := h.S.AddAddress(rawtest.NIC, netip.PrefixFrom(second, 24)); err != nil {
		t.Fatal(err)
	}
	checkARP(t, h.Expect(t, rawtest.Timeout), rawtest.BroadcastMAC, layers.ARPRequest, rawtest.StackMAC, second, zeroMAC, second)
	if got := h.Counter(t, "ARP.eth0.OutGratuitous"); got != 2 {
		t.Errorf("OutGratuitous = %d, want 2", got)
	}
	// The new address is answered for.
	h.Inject(h.ARPFrame(t, layers.ARPRequest, rawtest.PeerMAC, rawtest.PeerAddr, nil, second))
	checkARP(t, h.Expect(t, rawtest.Timeout), rawtest.PeerMAC, layers.ARPReply, rawtest.StackMAC, second, rawtest.PeerMAC, rawtest.PeerAddr)
}

func TestCountsMalformedAndBogusPackets(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	valid := h.ARPFrame(t, layers.ARPRequest, rawtest.PeerMAC, rawtest.PeerAddr, nil, rawtest.StackAddr)
	set := func(i int, v byte) []byte {
		b := bytes.Clone(valid)
		b[14+i] = v
		return b
	}
	tests := []struct {
		name    string
		frame   []byte
		counter string
	}{
		{"truncated", valid[:14+27], "InMalformed"},
		{"header only", valid[:14], "InMalformed"},
		{"hardware type IEEE 802", set(1, 6), "InMalformed"},
		{"protocol IPv6", set(2, 0x86), "InMalformed"},
		{"hardware length 8", set(4, 8), "InMalformed"},
		{"protocol length 16", set(5, 16), "InMalformed"},
		{"unknown operation", set(7, 3), "InMalformed"},
		{"operation zero", set(7, 0), "InMalformed"},
		{"multicast sender", h.ARPFrame(t, layers.ARPRequest, net.HardwareAddr{0x01, 0, 0x5e, 0, 0, 1}, rawtest.PeerAddr, nil, rawtest.StackAddr), "InBogusSender"},
		{"our own MAC as sender", h.ARPFrame(t, layers.ARPRequest, rawtest.StackMAC, rawtest.PeerAddr, nil, rawtest.StackAddr), "InBogusSender"},
	}
	want := map[string]int64{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.Inject(tt.frame)
			want[tt.counter]++
			h.WaitCounter(t, "ARP.eth0."+tt.counter, want[tt.counter])
			h.ExpectNothing(t)
			if n, _ := h.S.Neighbors(rawtest.NIC); len(n) != 1 || n[0].IP != rawtest.BarrierAddr {
				t.Errorf("neighbours %v: learned from a bad packet", n)
			}
		})
	}
}

func TestProbeFromUnspecifiedIsAnsweredButNotLearned(t *testing.T) {
	// RFC 5227 section 2.1.1: a probe has sender 0.0.0.0; the owner of the
	// target answers it, but there is no sender to learn.
	h := rawtest.New(t, stack.Config{})
	h.Inject(h.ARPFrame(t, layers.ARPRequest, rawtest.PeerMAC, netip.IPv4Unspecified(), nil, rawtest.StackAddr))
	checkARP(t, h.Expect(t, rawtest.Timeout), rawtest.PeerMAC, layers.ARPReply, rawtest.StackMAC, rawtest.StackAddr, rawtest.PeerMAC, netip.IPv4Unspecified())
	if n, _ := h.S.Neighbors(rawtest.NIC); len(n) != 0 {
		t.Errorf("learned %v from a probe", n)
	}
}

func TestUnansweredNeighbourDoesNotDelayOthers(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	send(t, h, otherAddr, "lost")
	checkRequestFor(t, h.Expect(t, rawtest.Timeout), otherAddr)
	send(t, h, rawtest.PeerAddr, "found")
	checkRequestFor(t, h.Expect(t, rawtest.Timeout), rawtest.PeerAddr)
	h.Inject(h.ARPFrame(t, layers.ARPReply, rawtest.PeerMAC, rawtest.PeerAddr, rawtest.StackMAC, rawtest.StackAddr))
	checkDatagram(t, h.Expect(t, rawtest.Timeout), rawtest.PeerMAC, rawtest.PeerAddr, "found")
}

func TestFullCacheStillAnswersButDoesNotLearn(t *testing.T) {
	h := rawtest.New(t, stack.Config{ARP: arp.Config{MaxEntries: 1, CacheTTL: 10 * time.Second}})
	h.LearnPeer(t)
	other := net.HardwareAddr{0x02, 0, 0, 0, 1, 0x07}
	h.Learn(t, otherAddr, other) // answered all the same
	h.WaitCounter(t, "ARP.eth0.CacheFull", 1)
	if _, ok := neighbour(t, h, otherAddr); ok {
		t.Error("learned beyond MaxEntries")
	}
	// Once the entry expires it is swept to make room.
	h.Clock.Advance(10 * time.Second)
	h.Learn(t, otherAddr, other)
	if _, ok := neighbour(t, h, otherAddr); !ok {
		t.Error("not learned after the full cache's entry expired")
	}
	if _, ok := neighbour(t, h, rawtest.PeerAddr); ok {
		t.Error("the expired entry was not swept")
	}
}

func TestMaxPendingBoundsConcurrentResolutions(t *testing.T) {
	h := rawtest.New(t, stack.Config{ARP: arp.Config{MaxPending: 1}})
	send(t, h, rawtest.PeerAddr, "first")
	send(t, h, otherAddr, "second")
	if got := h.Counter(t, "ARP.eth0.QueueDrops"); got != 1 {
		t.Errorf("QueueDrops = %d, want 1", got)
	}
	checkRequestFor(t, h.Expect(t, rawtest.Timeout), rawtest.PeerAddr)
	if got := h.Counter(t, "ARP.eth0.PendingResolutns"); got != 1 {
		t.Errorf("PendingResolutns = %d, want 1", got)
	}
}

func TestARequestFromTheNeighbourAlsoResolves(t *testing.T) {
	// The neighbour asking for us while we ask for it: its request teaches
	// us its address (RFC 826), which ends our resolution.
	h := rawtest.New(t, stack.Config{})
	send(t, h, rawtest.PeerAddr, "waiting")
	checkRequestFor(t, h.Expect(t, rawtest.Timeout), rawtest.PeerAddr)
	h.Inject(h.ARPFrame(t, layers.ARPRequest, rawtest.PeerMAC, rawtest.PeerAddr, nil, rawtest.StackAddr))
	var gotReply, gotDatagram bool
	for range 2 {
		f := h.Expect(t, rawtest.Timeout)
		if rawtest.EthernetOf(t, f).EthernetType == layers.EthernetTypeARP {
			checkARP(t, f, rawtest.PeerMAC, layers.ARPReply, rawtest.StackMAC, rawtest.StackAddr, rawtest.PeerMAC, rawtest.PeerAddr)
			gotReply = true
			continue
		}
		checkDatagram(t, f, rawtest.PeerMAC, rawtest.PeerAddr, "waiting")
		gotDatagram = true
	}
	if !gotReply || !gotDatagram {
		t.Errorf("reply %v, datagram %v; want both", gotReply, gotDatagram)
	}
}

func TestBroadcastsNeedNoResolution(t *testing.T) {
	for _, dst := range []netip.Addr{rawtest.SubnetBroadcast, rawtest.LimitedBroadcast} {
		t.Run(dst.String(), func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			send(t, h, dst, "to all")
			checkDatagram(t, h.Expect(t, rawtest.Timeout), rawtest.BroadcastMAC, dst, "to all")
			if got := h.Counter(t, "ARP.eth0.OutRequests"); got != 0 {
				t.Errorf("OutRequests = %d", got)
			}
		})
	}
}
