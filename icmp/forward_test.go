package icmp_test

import (
	"bytes"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/icmp"
	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/wire"
)

// The echo forwarder (forward.go): echo requests to a foreign address on a
// forwarding NIC go to a hook, which answers them from that address.

var foreignAddr = netip.MustParseAddr("192.0.2.1")

func foreignEcho(t *testing.T, h *rawtest.Host, id, seq uint16, data []byte) []byte {
	return h.IPFrame(t, rawtest.IPv4Header(rawtest.PeerAddr, foreignAddr, layers.IPProtocolICMPv4), rawtest.Payload(rawtest.EchoBytes(t, 8, id, seq, data)))
}

func forwardingHost(t *testing.T) (*rawtest.Host, chan *icmp.EchoRequest) {
	t.Helper()
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	if err := h.S.SetForwarding(rawtest.NIC, true); err != nil {
		t.Fatal(err)
	}
	reqs := make(chan *icmp.EchoRequest, 4)
	h.S.SetEchoForwarder(func(r *icmp.EchoRequest) { reqs <- r })
	return h, reqs
}

func nextEcho(t *testing.T, reqs chan *icmp.EchoRequest) *icmp.EchoRequest {
	t.Helper()
	select {
	case r := <-reqs:
		return r
	case <-time.After(rawtest.Timeout):
		t.Fatal("the echo forwarder hook was not called")
		return nil
	}
}

func TestEchoForwarderRepliesFromTheAddressPinged(t *testing.T) {
	h, reqs := forwardingHost(t)
	h.Inject(foreignEcho(t, h, 0x1234, 7, data(100)))
	r := nextEcho(t, reqs)
	if r.Src != rawtest.PeerAddr || r.Dst != foreignAddr || r.Ident != 0x1234 || r.Seq != 7 || !bytes.Equal(r.Payload, data(100)) {
		t.Fatalf("request %v -> %v id %#x seq %d, %d bytes: not the one sent", r.Src, r.Dst, r.Ident, r.Seq, len(r.Payload))
	}
	h.ExpectNothing(t) // the stack does not answer for the address itself
	// The hook answers later, from a goroutine of its own.
	go r.Reply()
	ip, m := rawtest.ICMPOf(t, h.Expect(t, rawtest.Timeout))
	if m.TypeCode.Type() != layers.ICMPv4TypeEchoReply || rawtest.Addr(ip.SrcIP) != foreignAddr || rawtest.Addr(ip.DstIP) != rawtest.PeerAddr ||
		m.Id != 0x1234 || m.Seq != 7 || !bytes.Equal(m.Payload, data(100)) {
		t.Errorf("got %v from %v id %#x seq %d, want the echo reply from %v", m.TypeCode, ip.SrcIP, m.Id, m.Seq, foreignAddr)
	}
	if n := h.Counter(t, "ICMP.EchoForwarded"); n != 1 {
		t.Errorf("ICMP.EchoForwarded = %d, want 1", n)
	}
}

func TestEchoForwarderErrorQuotesTheRequest(t *testing.T) {
	h, reqs := forwardingHost(t)
	h.Inject(foreignEcho(t, h, 0x1234, 8, data(16)))
	nextEcho(t, reqs).Error(wire.ICMPDestUnreach, wire.ICMPCodeHostUnrch)
	ip, m := rawtest.ICMPOf(t, h.Expect(t, rawtest.Timeout))
	if m.TypeCode != layers.CreateICMPv4TypeCode(3, wire.ICMPCodeHostUnrch) || rawtest.Addr(ip.SrcIP) != rawtest.StackAddr {
		t.Fatalf("got %v from %v, want host unreachable from the host's address", m.TypeCode, ip.SrcIP)
	}
	q := gopacket.NewPacket(m.Payload, layers.LayerTypeIPv4, gopacket.Default)
	qe, _ := q.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if qe == nil || qe.Id != 0x1234 || qe.Seq != 8 {
		t.Errorf("the error does not quote the request: %v", q)
	}
}

func TestEchoToForeignAddressWithoutHookIsDropped(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	if err := h.S.SetForwarding(rawtest.NIC, true); err != nil {
		t.Fatal(err)
	}
	h.Inject(foreignEcho(t, h, 1, 1, nil))
	h.ExpectNothing(t)
	if n := h.Counter(t, "ICMP.InEchoForeign"); n != 1 {
		t.Errorf("ICMP.InEchoForeign = %d, want 1", n)
	}
}

func TestEchoToForeignAddressOnNonForwardingNICIsNotTaken(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	var called atomic.Bool
	h.S.SetEchoForwarder(func(*icmp.EchoRequest) { called.Store(true) })
	h.Inject(foreignEcho(t, h, 1, 1, nil))
	h.ExpectNothing(t)
	if called.Load() {
		t.Error("the hook was called on a NIC that does not forward")
	}
	// The host's own address answers as before, without the hook.
	h.Inject(h.EchoFrame(t, 2, 2, []byte("x")))
	if _, m := rawtest.ICMPOf(t, h.Expect(t, rawtest.Timeout)); m.TypeCode.Type() != layers.ICMPv4TypeEchoReply || m.Seq != 2 {
		t.Errorf("got %v, want the host's echo reply", m.TypeCode)
	}
}
