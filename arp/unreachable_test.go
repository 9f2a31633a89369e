package arp_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/udp"
)

// TestForwardedDatagramWhoseNextHopNeverAnswersIsReportedToItsSource pins
// RFC 1122 section 2.3.2.2 (and RFC 1812 section 4.3.3.1's host
// unreachable) for a datagram the host sends on another's behalf: a
// gateway's reply from a foreign address, to a guest that went away, is
// answered with ICMP host unreachable to that foreign source, out of its
// route.
func TestForwardedDatagramWhoseNextHopNeverAnswersIsReportedToItsSource(t *testing.T) {
	guest := netip.MustParseAddrPort("10.1.0.99:4000")
	remote := netip.MustParseAddrPort("198.51.100.7:53")
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	if err := h.S.SetDefaultGateway(rawtest.PeerAddr, rawtest.NIC); err != nil {
		t.Fatal(err)
	}
	if err := h.S.SetForwarding(rawtest.NIC, true); err != nil {
		t.Fatal(err)
	}
	replied := make(chan error, 1)
	h.S.SetUDPForwarder(func(r *udp.ForwardRequest) {
		c, err := r.Open()
		if err == nil {
			// The relay's answer, from the foreign address.
			_, err = c.Write([]byte("answer"))
			c.Close()
		}
		replied <- err
	})
	h.Inject(h.UDPFrame(t, guest, remote, []byte("query")))
	if err := <-replied; err != nil {
		t.Fatal(err)
	}
	for range 3 {
		checkRequestFor(t, h.Expect(t, rawtest.Timeout), guest.Addr())
		h.Advance(t, 1, time.Second)
	}
	f := h.Expect(t, rawtest.Timeout)
	ip, m := rawtest.ICMPOf(t, f)
	eth := rawtest.EthernetOf(t, f)
	if m.TypeCode != layers.CreateICMPv4TypeCode(layers.ICMPv4TypeDestinationUnreachable, layers.ICMPv4CodeHost) ||
		rawtest.Addr(ip.DstIP) != remote.Addr() || rawtest.Addr(ip.SrcIP) != rawtest.StackAddr || eth.DstMAC.String() != rawtest.PeerMAC.String() {
		t.Fatalf("got %s, want ICMP host unreachable from %v to %v through the gateway", rawtest.Describe(f), rawtest.StackAddr, remote.Addr())
	}
	// It quotes the datagram that did not go: from the foreign address to
	// the guest.
	var quoted layers.IPv4
	if err := quoted.DecodeFromBytes(m.Payload, gopacket.NilDecodeFeedback); err != nil ||
		rawtest.Addr(quoted.SrcIP) != remote.Addr() || rawtest.Addr(quoted.DstIP) != guest.Addr() || quoted.Protocol != layers.IPProtocolUDP {
		t.Errorf("quote %x (%v), want the UDP datagram from %v to %v", m.Payload, err, remote.Addr(), guest.Addr())
	}
	h.WaitCounter(t, "ARP.eth0.UnresolvedDrops", 1)
	h.WaitCounter(t, "ICMP.OutDestUnreachs", 1)
}

// TestEveryWaitingDatagramIsReported pins that each datagram that waited
// on a failed resolution draws its own host unreachable, more than the
// ICMP rate limit's burst (50): errors to the host itself are not
// rate-limited, as Linux spares its loopback.
func TestEveryWaitingDatagramIsReported(t *testing.T) {
	const n = 60
	h := rawtest.New(t, stack.Config{})
	for range n {
		send(t, h, rawtest.PeerAddr, "x")
	}
	checkRequestFor(t, h.Expect(t, rawtest.Timeout), rawtest.PeerAddr)
	for range 2 {
		h.Advance(t, 1, time.Second)
		checkRequestFor(t, h.Expect(t, rawtest.Timeout), rawtest.PeerAddr)
	}
	h.Advance(t, 1, time.Second)
	h.WaitCounter(t, "ARP.eth0.UnresolvedDrops", n)
	h.WaitCounter(t, "ICMP.InDestUnreachs", n)
	if got := h.Counter(t, "ICMP.OutRateLimited"); got != 0 {
		t.Errorf("OutRateLimited = %d, want 0", got)
	}
	h.ExpectNothing(t)
}
