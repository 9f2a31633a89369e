package stack_test

import (
	"context"
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/wire"
)

// The whole host against a hostile neighbour: each layer's own fuzz target
// feeds that layer, FuzzFrames feeds the NIC, so that what one layer makes
// of a frame meets the next (a reassembled datagram meets a listener, an
// ICMP error quotes a fragment, neighbour discovery meets a multicast
// filter).

var (
	fuzzAddr6   = netip.MustParsePrefix("2001:db8:1::2/64")
	fuzzPeer6   = netip.MustParseAddr("2001:db8:1::1")
	fuzzPeerLL  = netip.MustParseAddr("fe80::1")
	fuzzPort    = uint16(53)
	fuzzTCPPort = uint16(80)
)

// FuzzFrames feeds frames to a dual-stack host with a UDP socket and a TCP
// listener open, time moving on between them. Each op of the input is a
// control byte, a 16-bit length and that many bytes (the frame after its
// Ethernet header), or the control byte 0xff and a byte counting tenths of
// a second to advance the clock. The control byte's bits:
//
//	0-1  the EtherType: IPv4, IPv6, ARP, or the first two bytes'
//	2-3  the destination MAC: ours, broadcast, our solicited-node group's,
//	     another host's
//	4    the addresses filled in: from the peer, to the destination that
//	     bits 5-6 pick (ours; link-local or limited broadcast; all nodes or
//	     the subnet's broadcast; our solicited-node group or all systems)
//	7    the lengths, the hop limit of neighbour discovery and the
//	     checksums made right, so that the frame gets past validation
//
// Whatever comes, the host must not crash; what it sends must decode
// (gopacket), come from its own MAC and never from a multicast or a
// peer's address; and once closed it must give back every buffer, every
// byte of its budget and every goroutine (rawtest checks).
func FuzzFrames(f *testing.F) {
	const (
		eIPv4, eIPv6, eARP = 0, 1, 2
		toUs, toBcast      = 0 << 2, 1 << 2
		fill, fix          = 1 << 4, 1 << 7
	)
	op := func(ctl byte, body []byte) []byte {
		return append([]byte{ctl, byte(len(body) >> 8), byte(len(body))}, body...)
	}
	ipv4 := func(proto byte, frag uint16, rest []byte) []byte {
		h := make([]byte, 20)
		h[0], h[8], h[9] = 0x45, 64, proto
		binary.BigEndian.PutUint16(h[6:], frag)
		return append(h, rest...)
	}
	ipv6h := func(next byte, rest []byte) []byte {
		h := make([]byte, 40)
		h[0], h[6], h[7] = 0x60, next, 64
		return append(h, rest...)
	}
	udpTo := func(port uint16, n int) []byte {
		b := make([]byte, 8+n)
		binary.BigEndian.PutUint16(b[0:], 40000)
		binary.BigEndian.PutUint16(b[2:], port)
		return b
	}
	syn := make([]byte, 20)
	binary.BigEndian.PutUint16(syn[0:], 40000)
	binary.BigEndian.PutUint16(syn[2:], fuzzTCPPort)
	syn[12], syn[13] = 5<<4, 0x02
	binary.BigEndian.PutUint16(syn[14:], 65535)
	echo6 := []byte{128, 0, 0, 0, 0, 1, 0, 1, 'p', 'i', 'n', 'g'}
	ns := append([]byte{135, 0, 0, 0, 0, 0, 0, 0}, fuzzAddr6.Addr().AsSlice()...)
	ns = append(ns, 1, 1, 2, 0, 0, 0, 0, 1) // source link-layer address
	fragHdr := func(next byte, off uint16, more bool, id uint32, rest []byte) []byte {
		b := []byte{next, 0, 0, 0, 0, 0, 0, 0}
		v := off << 3
		if more {
			v |= 1
		}
		binary.BigEndian.PutUint16(b[2:], v)
		binary.BigEndian.PutUint32(b[4:], id)
		return append(b, rest...)
	}
	f.Add(op(eIPv4|toUs|fill|fix, ipv4(17, 0, udpTo(fuzzPort, 10))))
	f.Add(op(eIPv6|toUs|fill|fix, ipv6h(17, udpTo(fuzzPort, 10))))
	f.Add(op(eIPv4|toUs|fill|fix, ipv4(6, 0, syn)))
	f.Add(append(op(eIPv6|toUs|fill|fix, ipv6h(6, syn)), 0xff, 20))
	f.Add(op(eIPv6|toUs|fill|fix, ipv6h(58, echo6)))
	f.Add(op(eIPv6|2<<2|fill|3<<5|fix, ipv6h(58, ns)))
	f.Add(append(append( // a datagram in two fragments, the second overlapping the first
		op(eIPv6|toUs|fill|fix, ipv6h(44, fragHdr(17, 0, true, 7, udpTo(fuzzPort, 24)))),
		op(eIPv6|toUs|fill|fix, ipv6h(44, fragHdr(17, 2, false, 7, make([]byte, 16))))...),
		0xff, 80))
	f.Add(append(op(eIPv4|toUs|fill|fix, ipv4(17, 0x2000, udpTo(fuzzPort, 24))), 0xff, 255)) // a first fragment, left to time out
	f.Add(op(eIPv4|toBcast|fill|1<<5|fix, ipv4(1, 0, []byte{8, 0, 0, 0, 0, 1, 0, 1})))
	f.Add(op(eARP|toBcast, []byte{0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 1, 0, 1, 0, 0, 0, 0, 0, 0, 10, 1, 0, 2}))
	// Echo requests with Record Route and Timestamp, which the reply
	// carries back, and a datagram with a source route, which is refused.
	ipv4o := func(proto byte, opts, rest []byte) []byte {
		h := ipv4(proto, 0, nil)
		h[0] = 0x40 | byte((len(h)+len(opts))/4)
		return append(append(h, opts...), rest...)
	}
	rr := append([]byte{7, 19, 4}, make([]byte, 17)...) // four slots and an EOL
	ts := append([]byte{68, 20, 5, 1}, make([]byte, 16)...)
	lsrr := []byte{131, 7, 4, 10, 1, 0, 2, 0}
	f.Add(op(eIPv4|toUs|fill|fix, ipv4o(1, rr, []byte{8, 0, 0, 0, 0, 1, 0, 1})))
	f.Add(op(eIPv4|toUs|fill|fix, ipv4o(1, ts, []byte{8, 0, 0, 0, 0, 1, 0, 1})))
	f.Add(op(eIPv4|toUs|fill|fix, ipv4o(17, lsrr, udpTo(fuzzPort, 10))))
	f.Fuzz(func(t *testing.T, input []byte) {
		const maxOps = 32
		h := newFuzzHost(t)
		for i := 0; i < maxOps && len(input) >= 2; i++ {
			if input[0] == 0xff {
				settleFuzzHost(t, h)
				h.Clock.Advance(time.Duration(input[1]) * 100 * time.Millisecond)
				input = input[2:]
				continue
			}
			if len(input) < 3 {
				break
			}
			n := min(int(binary.BigEndian.Uint16(input[1:]))%1500, len(input)-3)
			if fr := fuzzFrame(input[0], input[3:3+n]); fr != nil {
				h.Inject(fr)
			}
			input = input[3+n:]
		}
		settleFuzzHost(t, h)
	})
}

// settleFuzzHost waits until the host has dealt with every frame injected
// and checks what it sent meanwhile.
func settleFuzzHost(t *testing.T, h *rawtest.Host) {
	t.Helper()
	sent := h.Barrier(t) // the NIC has handed every frame before it to a dealer
	ctx, cancel := context.WithTimeout(context.Background(), rawtest.Timeout)
	defer cancel()
	if err := h.S.Sync(ctx); err != nil { // and every dealer has dealt with them
		t.Fatalf("sync: %v", err)
	}
	for _, fr := range append(append(sent, h.Barrier(t)...), h.Pending()...) {
		checkSent(t, fr)
	}
}

// newFuzzHost is a dual-stack host, fuzzAddr6 and rawtest's IPv4 address
// on its NIC, with a UDP socket on fuzzPort and a TCP listener on
// fuzzTCPPort whose readers take whatever comes until the test ends.
func newFuzzHost(t *testing.T) *rawtest.Host {
	h := rawtest.New(t, stack.Config{
		ARP: arp.Config{CacheTTL: time.Hour},
		NDP: ndp.Config{NoDAD: true, NoRouterSolicitation: true},
	}, rawtest.IPv6())
	if err := h.S.AddAddress(rawtest.NIC, fuzzAddr6); err != nil {
		t.Fatal(err)
	}
	u, err := h.S.ListenUDP(netip.AddrPortFrom(netip.IPv6Unspecified(), fuzzPort))
	if err != nil {
		t.Fatal(err)
	}
	l, err := h.S.ListenTCP(netip.AddrPortFrom(netip.IPv6Unspecified(), fuzzTCPPort))
	if err != nil {
		t.Fatal(err)
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		b := make([]byte, 2048)
		for {
			if _, _, err := u.ReadFrom(b); err != nil {
				return
			}
		}
	}()
	go func() {
		defer readers.Done()
		for {
			c, err := l.AcceptTCP()
			if err != nil {
				return
			}
			c.SetLinger(0)
			c.Close()
		}
	}()
	t.Cleanup(func() { // before rawtest's, which checks for leaks
		u.Close()
		l.Close()
		readers.Wait()
	})
	return h
}

// fuzzFrame builds the frame ctl describes around body (FuzzFrames), or
// returns nil when body is too short to name its EtherType.
func fuzzFrame(ctl byte, body []byte) []byte {
	body = append([]byte(nil), body...)
	var typ layers.EthernetType
	switch ctl & 3 {
	case 0:
		typ = layers.EthernetTypeIPv4
	case 1:
		typ = layers.EthernetTypeIPv6
	case 2:
		typ = layers.EthernetTypeARP
	default:
		if len(body) < 2 {
			return nil
		}
		typ, body = layers.EthernetType(binary.BigEndian.Uint16(body)), body[2:]
	}
	solicited, _ := ipv6.MulticastMAC(ipv6.SolicitedNode(fuzzAddr6.Addr()))
	dst := [][]byte{rawtest.StackMAC, rawtest.BroadcastMAC, solicited[:], {2, 0, 0, 0, 0, 9}}[ctl>>2&3]
	to := int(ctl >> 5 & 3)
	switch {
	case typ == layers.EthernetTypeIPv4 && len(body) >= wire.IPv4MinHeaderLen:
		fuzzIPv4(body, ctl&(1<<4) != 0, to, ctl&(1<<7) != 0)
	case typ == layers.EthernetTypeIPv6 && len(body) >= wire.IPv6HeaderLen:
		fuzzIPv6(body, ctl&(1<<4) != 0, to, ctl&(1<<7) != 0)
	case typ == layers.EthernetTypeARP && len(body) >= 28 && ctl&(1<<4) != 0:
		copy(body[14:18], rawtest.PeerAddr.AsSlice())
		copy(body[24:28], rawtest.StackAddr.AsSlice())
	}
	fr := make([]byte, 14, 14+len(body))
	copy(fr[0:6], dst)
	copy(fr[6:12], rawtest.PeerMAC)
	binary.BigEndian.PutUint16(fr[12:], uint16(typ))
	return append(fr, body...)
}

// fuzzIPv4 fills in an IPv4 datagram's addresses and makes its lengths and
// checksums right, as asked.
func fuzzIPv4(b []byte, fill bool, to int, fix bool) {
	if fill {
		copy(b[12:16], rawtest.PeerAddr.AsSlice())
		dst := []netip.Addr{rawtest.StackAddr, rawtest.LimitedBroadcast, rawtest.SubnetBroadcast, netip.MustParseAddr("224.0.0.1")}[to]
		copy(b[16:20], dst.AsSlice())
	}
	if !fix {
		return
	}
	b[0] = 0x40 | max(b[0]&0xf, 5)
	hl := int(b[0]&0xf) * 4
	if hl > len(b) {
		b[0], hl = 0x45, wire.IPv4MinHeaderLen
	}
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	b[10], b[11] = 0, 0
	binary.BigEndian.PutUint16(b[10:], wire.Checksum(b[:hl], 0))
	if frag := binary.BigEndian.Uint16(b[6:]); frag&0x3fff != 0 {
		return // a fragment's transport checksum covers the whole datagram
	}
	src, dst := netip.AddrFrom4([4]byte(b[12:16])), netip.AddrFrom4([4]byte(b[16:20]))
	fixTransport(b[9], b[hl:], src, dst)
}

// fuzzIPv6 is fuzzIPv4 for IPv6; fixing sets the hop limit to 255, as
// neighbour discovery wants it.
func fuzzIPv6(b []byte, fill bool, to int, fix bool) {
	if fill {
		src := fuzzPeer6
		if to == 1 || to == 3 {
			src = fuzzPeerLL
		}
		copy(b[8:24], src.AsSlice())
		dst := []netip.Addr{fuzzAddr6.Addr(), netip.MustParseAddr("fe80::2"), ipv6.AllNodes, ipv6.SolicitedNode(fuzzAddr6.Addr())}[to]
		copy(b[24:40], dst.AsSlice())
	}
	if !fix {
		return
	}
	b[0] = 0x60 | b[0]&0xf
	b[7] = 255
	binary.BigEndian.PutUint16(b[4:], uint16(len(b)-wire.IPv6HeaderLen))
	src, dst := netip.AddrFrom16([16]byte(b[8:24])), netip.AddrFrom16([16]byte(b[24:40]))
	fixTransport(b[6], b[wire.IPv6HeaderLen:], src, dst)
}

// fixTransport sets the checksum of a TCP, UDP, ICMP or ICMPv6 message
// right behind the IP header.
func fixTransport(proto byte, b []byte, src, dst netip.Addr) {
	switch {
	case proto == wire.ProtoTCP && len(b) >= wire.TCPMinHeaderLen:
		wire.SetTCPChecksum(b, src, dst)
	case proto == wire.ProtoUDP && len(b) >= wire.UDPHeaderLen:
		binary.BigEndian.PutUint16(b[4:], uint16(len(b)))
		wire.SetUDPChecksum(b, src, dst)
	case proto == wire.ProtoICMP && len(b) >= wire.ICMPHeaderLen:
		b[2], b[3] = 0, 0
		binary.BigEndian.PutUint16(b[2:], wire.Checksum(b, 0))
	case proto == wire.ProtoICMPv6 && len(b) >= wire.ICMPv6HeaderLen:
		wire.SetICMPv6Checksum(b, src, dst)
	}
}

// checkSent fails the test for a frame the host should not have sent.
func checkSent(t *testing.T, fr []byte) {
	t.Helper()
	p := gopacket.NewPacket(fr, layers.LayerTypeEthernet, gopacket.Default)
	if e := p.ErrorLayer(); e != nil {
		t.Errorf("sent a frame gopacket cannot decode (%v): %s", e.Error(), rawtest.Describe(fr))
	}
	eth, ok := p.LinkLayer().(*layers.Ethernet)
	if !ok || string(eth.SrcMAC) != string(rawtest.StackMAC) {
		t.Errorf("sent a frame from another MAC: %s", rawtest.Describe(fr))
	}
	var src netip.Addr
	switch n := p.NetworkLayer().(type) {
	case *layers.IPv4:
		src, _ = netip.AddrFromSlice(n.SrcIP)
	case *layers.IPv6:
		src, _ = netip.AddrFromSlice(n.SrcIP)
	default:
		return
	}
	if src.IsMulticast() || src == rawtest.PeerAddr || src == fuzzPeer6 || src == fuzzPeerLL || src == rawtest.LimitedBroadcast || src == rawtest.SubnetBroadcast {
		t.Errorf("sent a datagram from %v: %s", src, rawtest.Describe(fr))
	}
}
