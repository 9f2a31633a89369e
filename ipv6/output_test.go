package ipv6_test

import (
	"bytes"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/ip6defrag"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/wire"
)

// send sends payload to dst under protoTest with sp's other fields.
func (h *harness) send(t testing.TB, payload []byte, sp ip.SendParams) error {
	t.Helper()
	pk := h.env.Pool.Get(len(payload))
	copy(pk.Bytes(), payload)
	if sp.Proto == 0 {
		sp.Proto = protoTest
	}
	return h.p.Send(pk, sp)
}

// decoded is a datagram the layer sent, as gopacket reads it.
type decoded struct {
	ip   *layers.IPv6
	frag *layers.IPv6Fragment // nil when not a fragment
}

func decode(t *testing.T, b []byte) decoded {
	t.Helper()
	// The upper layer, protoTest, is one gopacket does not know: only
	// the IPv6 layers must decode.
	p := gopacket.NewPacket(b, layers.LayerTypeIPv6, gopacket.Default)
	ip, ok := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	if !ok {
		t.Fatalf("gopacket cannot decode the layer's datagram: %v", p.ErrorLayer())
	}
	d := decoded{ip: ip}
	if f, ok := p.Layer(layers.LayerTypeIPv6Fragment).(*layers.IPv6Fragment); ok {
		d.frag = f
	}
	return d
}

func TestSendFragmentsToTheRouteMTU(t *testing.T) {
	tests := []struct {
		name      string
		size      int
		pmtu      int // a Packet Too Big reported first; 0 none
		wantFrags int // 0: sent whole
		wantMax   int // the longest datagram allowed on the path
	}{
		{"fits the link exactly", mtu - 40, 0, 0, mtu},
		{"one byte over", mtu - 39, 0, 2, mtu},
		{"4000 bytes", 4000, 0, 3, mtu},
		{"the largest payload", 65535, 0, 46, mtu},
		{"to a path MTU of 1280", 4000, 1280, 4, 1280},
		{"a report below 1280 lowers to 1280 only, and no atomic fragment goes (RFC 8021)", 1000, 600, 0, 1280},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, ipv6.Config{})
			if tt.pmtu > 0 {
				h.p.UpdatePMTU(farAddr, tt.pmtu, 0)
			}
			payload := data(tt.size)
			must(t, h.send(t, payload, ip.SendParams{Dst: farAddr, TOS: 0x10, FlowLabel: 0x12345}))
			out := h.takeSent()
			want := max(tt.wantFrags, 1)
			if len(out) != want {
				t.Fatalf("sent %d datagrams, want %d", len(out), want)
			}
			d := ip6defrag.NewIPv6Defragmenter()
			var id uint32
			reassembled := false
			for i, s := range out {
				if s.iface != "eth0" || s.nextHop != router {
					t.Errorf("datagram %d to %v on %s, want the router on eth0", i, s.nextHop, s.iface)
				}
				if len(s.b) > tt.wantMax {
					t.Errorf("datagram %d of %d bytes exceeds %d", i, len(s.b), tt.wantMax)
				}
				g := decode(t, s.b)
				if got := netip.MustParseAddr(g.ip.SrcIP.String()); got != ourAddr {
					t.Errorf("source %v, want %v", got, ourAddr)
				}
				if g.ip.HopLimit != 64 || g.ip.TrafficClass != 0x10 || g.ip.FlowLabel != 0x12345 {
					t.Errorf("hop limit %d, traffic class %#x, flow label %#x", g.ip.HopLimit, g.ip.TrafficClass, g.ip.FlowLabel)
				}
				if tt.wantFrags == 0 {
					if g.frag != nil || !bytes.Equal(g.ip.Payload, payload) || g.ip.NextHeader != protoTest {
						t.Fatalf("a datagram that fits went as a fragment, or altered")
					}
					return
				}
				if g.frag == nil {
					t.Fatalf("datagram %d is not a fragment", i)
				}
				if i == 0 {
					id = g.frag.Identification
				} else if g.frag.Identification != id {
					t.Errorf("fragment %d has identification %#x, want %#x", i, g.frag.Identification, id)
				}
				if n := len(g.frag.Payload); g.frag.MoreFragments && n%8 != 0 {
					t.Errorf("fragment %d carries %d bytes, not a multiple of 8", i, n)
				}
				if whole := d.DefragIPv6(g.ip, g.frag); whole != nil {
					reassembled = true
					if i != len(out)-1 {
						t.Errorf("gopacket reassembled the datagram at fragment %d of %d", i, len(out))
					}
					if whole.NextHeader != protoTest || !bytes.Equal(whole.Payload, payload) {
						t.Errorf("gopacket reassembles next header %d and %d bytes, want %d and the payload", whole.NextHeader, len(whole.Payload), protoTest)
					}
				}
			}
			if !reassembled {
				t.Error("gopacket did not reassemble the fragments")
			}
			if c := h.counters(); c["FragOKs"] != 1 || c["FragCreates"] != int64(tt.wantFrags) {
				t.Errorf("FragOKs = %d, FragCreates = %d", c["FragOKs"], c["FragCreates"])
			}
		})
	}
}

func TestSendTooLongIsEMSGSIZE(t *testing.T) {
	h := newHarness(t, ipv6.Config{})
	err := h.send(t, data(2000), ip.SendParams{Dst: farAddr, DF: true})
	if !errors.Is(err, syscall.EMSGSIZE) || !ipv6.IsMessageTooLong(err) {
		t.Errorf("DontFragment over the MTU: %v, want EMSGSIZE", err)
	}
	if err := h.send(t, data(65536), ip.SendParams{Dst: farAddr}); !ipv6.IsMessageTooLong(err) {
		t.Errorf("payload of 65536 bytes: %v, want EMSGSIZE", err)
	}
	if len(h.takeSent()) != 0 {
		t.Error("sent something")
	}
	if c := h.counters(); c["FragFails"] != 1 {
		t.Errorf("FragFails = %d, want 1", c["FragFails"])
	}
}

func TestSendChoosesHopLimitSourceAndLink(t *testing.T) {
	tests := []struct {
		name    string
		sp      ip.SendParams
		err     error
		iface   string
		nextHop netip.Addr
		src     netip.Addr
		hop     uint8
	}{
		{name: "to a neighbour on-link", sp: ip.SendParams{Dst: peerAddr},
			iface: "eth0", nextHop: peerAddr, src: ourAddr, hop: 64},
		{name: "to a link-local neighbour with its zone", sp: ip.SendParams{Dst: peerLL.WithZone("eth0")},
			iface: "eth0", nextHop: peerLL, src: ourLL, hop: 64},
		{name: "to a link-local neighbour without a zone, two interfaces", sp: ip.SendParams{Dst: peerLL},
			err: ipv6.ErrZoneNeeded},
		{name: "to a zone that is no interface", sp: ip.SendParams{Dst: peerLL.WithZone("eth9")},
			err: ipv6.ErrZoneNeeded},
		{name: "to all-nodes: hop limit 1", sp: ip.SendParams{Dst: ipv6.AllNodes.WithZone("eth0")},
			iface: "eth0", nextHop: ipv6.AllNodes, src: ourLL, hop: 1},
		{name: "neighbour discovery's hop limit 255", sp: ip.SendParams{Dst: ipv6.AllNodes.WithZone("eth0"), TTL: 255},
			iface: "eth0", nextHop: ipv6.AllNodes, src: ourLL, hop: 255},
		{name: "DAD from the unspecified address", sp: ip.SendParams{Src: netip.IPv6Unspecified(), Dst: ipv6.SolicitedNode(tentative).WithZone("eth0"), TTL: 255},
			iface: "eth0", nextHop: ipv6.SolicitedNode(tentative), src: netip.IPv6Unspecified(), hop: 255},
		{name: "from an address not the host's", sp: ip.SendParams{Src: netip.MustParseAddr("2001:db8:1::99"), Dst: peerAddr},
			err: ipv6.ErrNoSource},
		{name: "from a tentative address", sp: ip.SendParams{Src: tentative, Dst: peerAddr},
			err: ipv6.ErrNoSource},
		{name: "out of an interface with no address", sp: ip.SendParams{Dst: peerLL.WithZone("eth1")},
			err: ipv6.ErrNoSource},
		{name: "an IPv4 destination", sp: ip.SendParams{Dst: netip.MustParseAddr("10.0.0.1")},
			err: ipv6.ErrNoRoute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, ipv6.Config{})
			must(t, h.p.AddAddress(h.eth0, netip.PrefixFrom(tentative, 64), ipv6.Tentative))
			err := h.send(t, data(8), tt.sp)
			out := h.takeSent()
			if tt.err != nil {
				if !errors.Is(err, tt.err) || len(out) != 0 {
					t.Fatalf("got %v and %d datagrams, want %v", err, len(out), tt.err)
				}
				return
			}
			must(t, err)
			if len(out) != 1 {
				t.Fatalf("sent %d datagrams", len(out))
			}
			g := decode(t, out[0].b)
			src := netip.MustParseAddr(g.ip.SrcIP.String())
			if out[0].iface != tt.iface || out[0].nextHop != tt.nextHop || src != tt.src || g.ip.HopLimit != tt.hop {
				t.Errorf("out of %s to %v from %v hop limit %d, want %s, %v, %v, %d",
					out[0].iface, out[0].nextHop, src, g.ip.HopLimit, tt.iface, tt.nextHop, tt.src, tt.hop)
			}
		})
	}
}

func TestDatagramsToOurselvesLoopBack(t *testing.T) {
	for _, dst := range []netip.Addr{ourAddr, netip.IPv6Loopback(), ourLL.WithZone("eth0")} {
		t.Run(dst.String(), func(t *testing.T) {
			h := newHarness(t, ipv6.Config{})
			// A partial checksum is finished before looping back.
			pk := h.env.Pool.Get(8)
			copy(pk.Bytes(), []byte{1, 2, 3, 4, 0, 0, 0, 0})
			pk.Offload = buffer.Offload{Flags: buffer.NeedsCsum, CsumStart: 0, CsumOffset: 6}
			must(t, h.p.Send(pk, ip.SendParams{Dst: dst, Proto: protoUDP}))
			h.sync(t)
			got := h.tr.take()
			if len(got) != 1 {
				t.Fatalf("delivered %d datagrams, want 1", len(got))
			}
			if got[0].h.Dst != dst || got[0].h.Src != dst {
				t.Errorf("delivered %v > %v, want %v both", got[0].h.Src, got[0].h.Dst, dst)
			}
			if c := wire.Checksum(got[0].b[40:], 0); c != 0 {
				t.Errorf("checksum not finished: the bytes sum to %#x", c)
			}
			if len(h.takeSent()) != 0 {
				t.Error("a datagram to ourselves went to a link")
			}
			if c := h.counters(); c["InLoopback"] != 1 {
				t.Errorf("InLoopback = %d", c["InLoopback"])
			}
		})
	}
}

// The layer reassembles what it fragments, up to the largest datagram IPv6
// carries, a payload of 65535 bytes, though RFC 8200 section 5 asks for
// 1500 only.
func TestOwnFragmentsReassemble(t *testing.T) {
	for _, tt := range []struct {
		size        int
		reassembled bool
	}{{1500, true}, {65535, true}} {
		tx, rx := newHarness(t, ipv6.Config{}), newHarness(t, ipv6.Config{})
		must(t, rx.p.AddAddress(rx.eth0, netip.PrefixFrom(farAddr, 64), ipv6.Preferred))
		payload := data(tt.size)
		must(t, tx.send(t, payload, ip.SendParams{Dst: farAddr}))
		var fs [][]byte
		for _, s := range tx.takeSent() {
			fs = append(fs, s.b)
		}
		rx.inject(t, rx.eth0, fs[len(fs)/2:]...)
		rx.inject(t, rx.eth0, fs[:len(fs)/2]...)
		if !tt.reassembled {
			rx.waitCounter(t, "ReasmOversize", 1)
			continue
		}
		rx.waitCounter(t, "ReasmOKs", 1)
		got := rx.tr.take()
		if len(got) != 1 || !bytes.Equal(got[0].b[40:], payload) || got[0].h.Src != ourAddr {
			t.Fatalf("delivered %d datagrams, not the payload from %v", len(got), ourAddr)
		}
	}
}

// MLD's Router Alert (RFC 2711) goes in a Hop-by-Hop header, which stays
// in the unfragmentable part of every fragment.
func TestRouterAlertHopByHop(t *testing.T) {
	for _, size := range []int{24, 3000} {
		tx, rx := newHarness(t, ipv6.Config{}), newHarness(t, ipv6.Config{})
		must(t, rx.p.AddAddress(rx.eth0, netip.PrefixFrom(farAddr, 64), ipv6.Preferred))
		payload := data(size)
		must(t, tx.send(t, payload, ip.SendParams{Dst: farAddr, RouterAlert: true}))
		out := tx.takeSent()
		var fs [][]byte
		for i, s := range out {
			p := gopacket.NewPacket(s.b, layers.LayerTypeIPv6, gopacket.Default)
			hbh, ok := p.Layer(layers.LayerTypeIPv6HopByHop).(*layers.IPv6HopByHop)
			if !ok {
				t.Fatalf("size %d, datagram %d: no Hop-by-Hop header", size, i)
			}
			alert := false
			for _, o := range hbh.Options {
				alert = alert || (o.OptionType == 5 && bytes.Equal(o.OptionData, []byte{0, 0}))
			}
			if !alert {
				t.Errorf("size %d, datagram %d: no Router Alert of value 0 in %+v", size, i, hbh.Options)
			}
			if _, frag := p.Layer(layers.LayerTypeIPv6Fragment).(*layers.IPv6Fragment); frag != (size > mtu) {
				t.Errorf("size %d, datagram %d: fragment %v", size, i, frag)
			}
			fs = append(fs, s.b)
		}
		rx.inject(t, rx.eth0, fs...)
		if size > mtu {
			rx.waitCounter(t, "ReasmOKs", 1)
		}
		got := rx.tr.take()
		if len(got) != 1 || !bytes.Equal(got[0].b[got[0].h.Off:], payload) || got[0].h.Off != 48 {
			t.Errorf("size %d: delivered %d datagrams, not the payload after the Hop-by-Hop header", size, len(got))
		}
	}
}

// confirmLink is a link output that keeps reachability states, and records
// the confirmations it is told.
type confirmLink struct {
	fakeLink
	mu        sync.Mutex
	confirmed []netip.Addr
}

func (l *confirmLink) Confirm(nextHop netip.Addr) {
	l.mu.Lock()
	l.confirmed = append(l.confirmed, nextHop)
	l.mu.Unlock()
}

// An upper layer's confirmation of forward progress (SendParams.Confirm)
// reaches the link output as the route's next hop, the router for an
// off-link destination, and only when asked (RFC 4861 section 7.3.1).
func TestSendConfirmsTheNextHop(t *testing.T) {
	h := newHarness(t, ipv6.Config{})
	cl := &confirmLink{fakeLink: fakeLink{name: "eth2", h: h}}
	eth2, err := h.p.AddInterface("eth2", mtu, link.Capabilities{}, cl)
	must(t, err)
	must(t, h.p.AddAddress(eth2, netip.MustParsePrefix("2001:db8:2::2/64"), ipv6.Preferred))
	gw := netip.MustParseAddr("2001:db8:2::ff")
	must(t, h.p.AddRoute(ipv6.Route{Dst: netip.MustParsePrefix("2001:db8:7::/64"), Gateway: gw, Iface: eth2}))
	for _, tt := range []struct {
		dst     netip.Addr
		confirm bool
		want    []netip.Addr
	}{
		{netip.MustParseAddr("2001:db8:2::1"), false, nil},
		{netip.MustParseAddr("2001:db8:2::1"), true, []netip.Addr{netip.MustParseAddr("2001:db8:2::1")}},
		{netip.MustParseAddr("2001:db8:7::7"), true, []netip.Addr{gw}},
		{peerAddr, true, nil}, // eth0's link output keeps no states
	} {
		cl.mu.Lock()
		cl.confirmed = nil
		cl.mu.Unlock()
		must(t, h.send(t, data(100), ip.SendParams{Dst: tt.dst, Confirm: tt.confirm}))
		cl.mu.Lock()
		got := cl.confirmed
		cl.mu.Unlock()
		if !slices.Equal(got, tt.want) {
			t.Errorf("send to %v with Confirm %v: confirmed %v, want %v", tt.dst, tt.confirm, got, tt.want)
		}
	}
	h.takeSent()
}
