package icmpv6_test

import (
	"bytes"
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/ip6defrag"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/budget"
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/icmpv6"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/wire"
)

// These tests run ICMPv6 on the real IPv6 layer, directly: what
// the layer's link output gets is what would go on the wire.

type linkOut struct {
	mu  sync.Mutex
	out [][]byte
}

func (l *linkOut) Output(nextHop netip.Addr, pkt *buffer.Packet) {
	l.mu.Lock()
	l.out = append(l.out, bytes.Clone(pkt.Bytes()))
	l.mu.Unlock()
	pkt.Release()
}

// wait returns the first n datagrams the link got, waiting for them
// (reassembly runs in goroutines of its own).
func (l *linkOut) wait(t *testing.T, n int) [][]byte {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l.mu.Lock()
		if len(l.out) >= n {
			out := l.out[:n]
			l.out = l.out[n:]
			l.mu.Unlock()
			return out
		}
		l.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("the link got fewer than %d datagrams", n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

type stack6 struct {
	env  *env.Env
	ip   *ipv6.Protocol
	eth0 *ipv6.Interface
	link *linkOut
	p    *icmpv6.Protocol
}

func newStack6(t *testing.T) *stack6 {
	t.Helper()
	s := &stack6{link: &linkOut{}}
	s.env = &env.Env{Clock: clock.NewVirtual(time.Unix(1e9, 0)), Rand: env.NewRand(nil), Pool: buffer.NewPool(), Budget: budget.New(64 << 20)}
	s.ip = ipv6.New(ipv6.Config{}, s.env)
	var err error
	if s.eth0, err = s.ip.AddInterface(zone, 1500, link.Capabilities{}, s.link); err != nil {
		t.Fatal(err)
	}
	for _, a := range []netip.Prefix{netip.PrefixFrom(ourAddr, 64), netip.PrefixFrom(ourLL, 64)} {
		if err := s.ip.AddAddress(s.eth0, a, ipv6.Preferred); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ip.AddRoute(ipv6.Route{Dst: netip.MustParsePrefix("::/0"), Gateway: peerLL, Iface: s.eth0}); err != nil {
		t.Fatal(err)
	}
	s.p = icmpv6.New(s.ip, icmpv6.Config{}, s.env)
	s.ip.Start()
	t.Cleanup(func() {
		s.p.Close()
		s.ip.Close()
		if n := s.env.Pool.Outstanding(); n != 0 {
			t.Errorf("%d packets not released", n)
		}
	})
	return s
}

func (s *stack6) inject(t *testing.T, dgs ...[]byte) {
	t.Helper()
	b := buffer.GetBatch()
	for _, d := range dgs {
		pk := s.env.Pool.Get(len(d))
		copy(pk.Bytes(), d)
		b.Pkts = append(b.Pkts, pk)
	}
	s.eth0.Deliver(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.ip.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

// fragments cuts d's payload into fragments of size bytes, by gopacket.
func fragments(t *testing.T, d []byte, size int) [][]byte {
	g := wire.IPv6(d)
	payload := g.Payload()
	var out [][]byte
	for off := 0; off < len(payload); off += size {
		end := min(off+size, len(payload))
		out = append(out, serialize(t, ipHeader(g.Src(), g.Dst(), layers.IPProtocolIPv6Fragment),
			&layers.IPv6Fragment{NextHeader: layers.IPProtocol(g.NextHeader()), FragmentOffset: uint16(off / 8), MoreFragments: end < len(payload), Identification: 77},
			gopacket.Payload(payload[off:end])))
	}
	return out
}

func TestOnIPv6AFragmentedEchoIsAnsweredInFragments(t *testing.T) {
	s := newStack6(t)
	req := echo(t, farAddr, ourAddr, wire.ICMPv6EchoRequest, 9, 10, data(65000))
	frags := fragments(t, req, 1448)
	s.inject(t, frags...)
	out := s.link.wait(t, len(frags))
	d := ip6defrag.NewIPv6Defragmenter()
	for i, b := range out {
		pk := gopacket.NewPacket(b, layers.LayerTypeIPv6, gopacket.Default)
		ipl, _ := pk.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
		fr, _ := pk.Layer(layers.LayerTypeIPv6Fragment).(*layers.IPv6Fragment)
		if ipl == nil || fr == nil || len(b) > 1500 {
			t.Fatalf("datagram %d of %d bytes is no IPv6 fragment", i, len(b))
		}
		whole := d.DefragIPv6(ipl, fr)
		if whole == nil {
			continue
		}
		rebuilt := serialize(t, whole, gopacket.Payload(whole.Payload))
		dec := decode(t, sent{b: rebuilt})
		if dec.m.TypeCode.Type() != wire.ICMPv6EchoReply || !bytes.Equal(dec.body, data(65000)) || addr(whole.SrcIP) != ourAddr || addr(whole.DstIP) != farAddr {
			t.Errorf("reply type %v %v > %v with %d bytes", dec.m.TypeCode, whole.SrcIP, whole.DstIP, len(dec.body))
		}
		return
	}
	t.Fatal("gopacket could not reassemble the reply")
}

func TestOnIPv6AnUnknownNextHeaderIsAnsweredWithParameterProblem(t *testing.T) {
	s := newStack6(t)
	orig := serialize(t, ipHeader(peerAddr, ourAddr, 253), gopacket.Payload(data(2000)))
	s.inject(t, orig)
	out := s.link.wait(t, 1)
	d := decode(t, sent{b: out[0]})
	if d.m.TypeCode.Type() != wire.ICMPv6ParamProblem || d.m.TypeCode.Code() != wire.ICMPv6CodeUnrecognizedNext || d.rest != 6 {
		t.Errorf("sent %v pointer %d, want parameter problem code 1 pointing at the next header", d.m.TypeCode, d.rest)
	}
	if len(out[0]) != wire.IPv6MinMTU || !bytes.Equal(d.body, orig[:wire.ICMPv6MaxErrorQuote]) {
		t.Errorf("error of %d bytes quotes %d, want 1280 and 1232", len(out[0]), len(d.body))
	}
	if addr(d.ip.SrcIP) != ourAddr || addr(d.ip.DstIP) != peerAddr {
		t.Errorf("error %v > %v", d.ip.SrcIP, d.ip.DstIP)
	}
}

func TestOnIPv6PacketTooBigLowersThePathMTUAndNeverRaisesIt(t *testing.T) {
	s := newStack6(t)
	ours := udpDatagram(t, ourAddr, farAddr, 1, 2, 1452)
	steps := []struct {
		name string
		mtu  uint32
		orig []byte
		want int
	}{
		{"lowered", 1400, ours, 1400},
		{"not raised", 1450, ours, 1400},
		{"a forged one about another host's datagram changes nothing", 1300, udpDatagram(t, peerAddr, farAddr, 1, 2, 1452), 1400},
		{"below 1280 counts as 1280", 600, ours, 1280},
	}
	for _, st := range steps {
		s.inject(t, errorAbout(t, peerLL, ourAddr, wire.ICMPv6PacketTooBig, 0, st.mtu, st.orig))
		r, err := s.ip.Route(farAddr)
		if err != nil {
			t.Fatal(err)
		}
		if r.MTU != st.want {
			t.Errorf("%s: path MTU %d, want %d", st.name, r.MTU, st.want)
		}
	}
}

func TestOnIPv6PingGoesOutAndReturns(t *testing.T) {
	s := newStack6(t)
	// To ourselves: the layer loops request and reply back.
	if _, err := s.p.Ping(context.Background(), ourAddr, 3000); err != nil {
		t.Fatalf("ping to our own address: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.p.Ping(context.Background(), peerLL.WithZone(zone), 56)
		done <- err
	}()
	req := decode(t, sent{b: s.link.wait(t, 1)[0]})
	if addr(req.ip.SrcIP) != ourLL || req.echo == nil {
		t.Fatalf("request from %v: %+v", req.ip.SrcIP, req.echo)
	}
	s.inject(t, echo(t, peerLL, ourLL, wire.ICMPv6EchoReply, req.echo.Identifier, req.echo.SeqNumber, req.body))
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ping: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ping still waiting")
	}
}
