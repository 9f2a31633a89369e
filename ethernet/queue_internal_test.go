package ethernet

import (
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/wire"
)

// flow describes a frame for flowQueue: its family and transport, and
// for IPv4 whether it is a fragment after the first.
type flow struct {
	src, dst     netip.Addr
	proto        uint8
	sport, dport uint16
	fragOff      int
}

// frame builds an Ethernet frame of f carrying payload bytes after the
// transport header.
func (f flow) frame(payload int) []byte {
	l4 := make([]byte, wire.TCPMinHeaderLen+payload)
	switch f.proto {
	case wire.ProtoTCP:
		wire.EncodeTCP(l4, &wire.TCPFields{SrcPort: f.sport, DstPort: f.dport, Seq: uint32(payload)})
	case wire.ProtoUDP:
		wire.EncodeUDP(l4, &wire.UDPFields{SrcPort: f.sport, DstPort: f.dport})
	}
	var ip []byte
	typ := uint16(wire.EtherTypeIPv4)
	if f.src.Is4() {
		ip = make([]byte, wire.IPv4MinHeaderLen+len(l4))
		var flags uint16
		if f.fragOff == 0 && f.proto == wire.ProtoUDP && payload > 1000 {
			flags = wire.IPv4FlagMF // the first fragment of a long datagram
		}
		wire.EncodeIPv4(ip, &wire.IPv4Fields{TotalLen: len(ip), Flags: flags, FragOff: f.fragOff, TTL: 64, Protocol: f.proto, Src: f.src, Dst: f.dst})
		if f.fragOff != 0 {
			// A later fragment carries data where the ports were.
			for i := range l4 {
				l4[i] = byte(i)
			}
		}
	} else {
		typ = wire.EtherTypeIPv6
		ip = make([]byte, wire.IPv6HeaderLen+len(l4))
		wire.EncodeIPv6(ip, &wire.IPv6Fields{PayloadLen: len(l4), NextHeader: f.proto, HopLimit: 64, Src: f.src, Dst: f.dst})
	}
	copy(ip[len(ip)-len(l4):], l4)
	b := make([]byte, wire.EthernetHeaderLen+len(ip))
	wire.EncodeEthernet(b, &wire.EthernetFields{Dst: wire.MAC{2, 0, 0, 0, 0, 2}, Src: wire.MAC{2, 0, 0, 0, 0, 1}, Type: typ})
	copy(b[wire.EthernetHeaderLen:], ip)
	return b
}

var (
	host4, peer4 = netip.MustParseAddr("10.77.0.2"), netip.MustParseAddr("10.77.0.1")
	host6, peer6 = netip.MustParseAddr("fd77::2"), netip.MustParseAddr("fd77::1")
)

func TestFlowQueueKeepsAFlowOnOneQueue(t *testing.T) {
	tests := []struct {
		name  string
		a, b  []byte // two frames that must share a queue
		queue int    // -1: any, so long as they share it
	}{
		{"a TCP flow's segments, whatever their length",
			flow{host4, peer4, wire.ProtoTCP, 5201, 40000, 0}.frame(0), flow{host4, peer4, wire.ProtoTCP, 5201, 40000, 0}.frame(1448), -1},
		{"an IPv6 TCP flow's segments",
			flow{host6, peer6, wire.ProtoTCP, 5201, 40000, 0}.frame(0), flow{host6, peer6, wire.ProtoTCP, 5201, 40000, 0}.frame(1448), -1},
		{"a UDP flow's datagrams",
			flow{host4, peer4, wire.ProtoUDP, 53, 40000, 0}.frame(10), flow{host4, peer4, wire.ProtoUDP, 53, 40000, 0}.frame(500), -1},
		{"an IPv4 datagram's fragments, the first and a later one",
			flow{host4, peer4, wire.ProtoUDP, 53, 40000, 0}.frame(1400), flow{host4, peer4, wire.ProtoUDP, 53, 40000, 1480}.frame(1400), -1},
		{"an ARP frame goes to the first queue",
			arpFrame(), arpFrame(), 0},
		{"a runt goes to the first queue",
			[]byte{1, 2, 3}, []byte{1, 2, 3}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for queues := 2; queues <= 16; queues++ {
				qa, qb := flowQueue(tt.a, queues), flowQueue(tt.b, queues)
				if qa != qb || tt.queue >= 0 && qa != tt.queue || qa < 0 || qa >= queues {
					t.Fatalf("of %d queues: %d and %d, want one queue (%d if not -1)", queues, qa, qb, tt.queue)
				}
			}
		})
	}
}

// arpFrame is a broadcast ARP frame: no flow of IP's.
func arpFrame() []byte {
	b := make([]byte, wire.EthernetHeaderLen+28)
	wire.EncodeEthernet(b, &wire.EthernetFields{Dst: wire.MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, Src: wire.MAC{2, 0, 0, 0, 0, 1}, Type: wire.EtherTypeARP})
	return b
}

// Flows spread over every queue: 64 connections' worth from one port, as
// a server's, and the IPv4 fragments' hash of addresses alone counts
// too.
func TestFlowQueueSpreadsFlows(t *testing.T) {
	for _, queues := range []int{2, 4, 16} {
		seen := make([]int, queues)
		for port := uint16(40000); port < 40000+64*uint16(queues); port++ {
			seen[flowQueue(flow{host4, peer4, wire.ProtoTCP, 5201, port, 0}.frame(0), queues)]++
		}
		for q, n := range seen {
			// 64 a queue on average; a fair hash leaves none below
			// half of it.
			if n < 32 {
				t.Errorf("of %d queues, queue %d took %d of %d flows", queues, q, n, 64*queues)
			}
		}
	}
}

func BenchmarkFlowQueue(b *testing.B) {
	f := flow{host4, peer4, wire.ProtoTCP, 5201, 40000, 0}.frame(1448)
	b.ReportAllocs()
	for b.Loop() {
		sink += flowQueue(f, 2)
	}
}
