package tcp_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/internal/testkit/v6test"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/tcp"
)

// TCP over IPv6, on two hosts whose IPv6 layers are joined by v6test's
// link: everything TCP does over IPv4 works over IPv6, and the sockets
// take both families as Go's net does.

// echo6 accepts on l and echoes each connection until EOF.
func echo6(t *testing.T, l *tcp.Listener) {
	t.Helper()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { l.Close() })
}

func listen6(t *testing.T, h *v6test.Host, addr string) *tcp.Listener {
	t.Helper()
	l, err := h.TCP.Listen(netip.MustParseAddrPort(addr), 0)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func dial6(t *testing.T, h *v6test.Host, addr string) *tcp.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := h.TCP.Dial(ctx, netip.AddrPort{}, netip.MustParseAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEchoOverIPv6(t *testing.T) {
	a, b := v6test.Pair(t, v6test.Options{})
	echo6(t, listen6(t, b, "[::]:7"))
	for _, size := range []int{1, 1440, 64 << 10, 1 << 20, 4 << 20} {
		c := dial6(t, a, "[2001:db8:1::2]:7")
		transfer(t, c, size)
		c.Close()
	}
}

// tcpSeen is a TCP segment the link carried, as gopacket decodes it.
type tcpSeen struct {
	fromA  bool
	ipLen  int // the datagram's length
	tcp    *layers.TCP
	tclass uint8
	o      buffer.Offload
	at     time.Time // when the link carried it (virtual within synctest)
}

// tapTCP collects the TCP segments the link carries.
type tapTCP struct {
	mu   sync.Mutex
	segs []tcpSeen
}

func (tp *tapTCP) tap(fromA bool, b []byte, o buffer.Offload) {
	p := gopacket.NewPacket(b, layers.LayerTypeIPv6, gopacket.Default)
	ip6, _ := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	th, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if !ok || ip6 == nil {
		return
	}
	tp.mu.Lock()
	tp.segs = append(tp.segs, tcpSeen{fromA, len(b), th, ip6.TrafficClass, o, time.Now()})
	tp.mu.Unlock()
}

func (tp *tapTCP) seen() []tcpSeen {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]tcpSeen(nil), tp.segs...)
}

func mssOption(th *layers.TCP) int {
	for _, o := range th.Options {
		if o.OptionType == layers.TCPOptionKindMSS && len(o.OptionData) == 2 {
			return int(o.OptionData[0])<<8 | int(o.OptionData[1])
		}
	}
	return -1
}

// RFC 9293 section 3.7.1 and RFC 8200 section 8.3: the MSS a host
// announces is its MTU less the fixed IPv6 and TCP headers, 1500 - 40 - 20.
func TestSYNCarriesTheIPv6MSS(t *testing.T) {
	for _, mtu := range []int{1500, 1280, 9000} {
		var tp tapTCP
		a, b := v6test.Pair(t, v6test.Options{MTU: mtu, Tap: tp.tap})
		echo6(t, listen6(t, b, "[::]:7"))
		c := dial6(t, a, "[2001:db8:1::2]:7")
		transfer(t, c, 3*mtu)
		c.Close()
		want := mtu - 40 - 20
		var syns int
		for _, s := range tp.seen() {
			if s.tcp.SYN {
				syns++
				if got := mssOption(s.tcp); got != want {
					t.Errorf("MTU %d: SYN (ACK %v) from A %v announces MSS %d, want %d", mtu, s.tcp.ACK, s.fromA, got, want)
				}
			} else if s.ipLen > mtu {
				t.Errorf("MTU %d: a datagram of %d bytes", mtu, s.ipLen)
			}
		}
		if syns != 2 {
			t.Errorf("MTU %d: saw %d SYNs, want the SYN and the SYN-ACK", mtu, syns)
		}
		if got := a.TCP.Connections(); len(got) > 0 && got[0].Local.Addr() != v6test.AddrA {
			t.Errorf("connection from %v", got[0].Local)
		}
	}
}

// Loss on the IPv6 link is repaired by SACK recovery as on IPv4's.
func TestSACKRepairsLossOverIPv6(t *testing.T) {
	var tp tapTCP
	a, b := v6test.Pair(t, v6test.Options{
		TCP:  tcp.Config{RTOMin: 20 * time.Millisecond, RTOInitial: 100 * time.Millisecond},
		Drop: func(n int, _ []byte) bool { return n > 3 && n%40 == 0 },
		Tap:  tp.tap,
	})
	echo6(t, listen6(t, b, "[::]:7"))
	c := dial6(t, a, "[2001:db8:1::2]:7")
	transfer(t, c, 4<<20)
	c.Close()
	if a.TCP.Stats.RetransSegs.Load() == 0 {
		t.Error("no retransmission after loss")
	}
	sackOK := false
	for _, s := range tp.seen() {
		for _, o := range s.tcp.Options {
			if !s.fromA && o.OptionType == layers.TCPOptionKindSACK {
				sackOK = true
			}
		}
	}
	if !sackOK {
		t.Error("B never sent a SACK block")
	}
	t.Logf("A: retrans %d, SACK recoveries %d, SACK retrans %d, RACK losses %d",
		a.TCP.Stats.RetransSegs.Load(), a.TCP.Stats.SACKRecovery.Load(), a.TCP.Stats.SACKRetrans.Load(), a.TCP.Stats.RACKLoss.Load())
}

// RFC 8201: a Packet Too Big about a segment in flight lowers the path MTU
// and the MSS, and the connection goes on in smaller segments. The link
// plays a router whose next hop carries 1280 bytes: it drops A's longer
// datagrams and reports each, as ICMPv6 would hand the report to TCP.
func TestPacketTooBigLowersTheMSSOverIPv6(t *testing.T) {
	const pathMTU = 1280
	var (
		tp      tapTCP
		a       *v6test.Host
		narrow  sync.Mutex
		reports = make(chan ip.ICMPError, 1024)
	)
	a, b := v6test.Pair(t, v6test.Options{
		TCP: tcp.Config{RTOMin: 20 * time.Millisecond, RTOInitial: 100 * time.Millisecond},
		Tap: tp.tap,
		Drop: func(n int, d []byte) bool {
			narrow.Lock()
			defer narrow.Unlock()
			if len(d) <= pathMTU {
				return false
			}
			quote := append([]byte(nil), d[:min(len(d), 1232)]...)
			select {
			case reports <- ip.ICMPError{Kind: ip.PacketTooBig, MTU: pathMTU, Src: v6test.AddrA, Dst: v6test.AddrB,
				QuotedLen: len(d), DF: true, Transport: quote[40:]}:
			default:
			}
			return true
		},
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range reports {
			a.TCP.HandleICMPError(e)
		}
	}()
	t.Cleanup(func() { close(reports); <-done })
	echo6(t, listen6(t, b, "[::]:7"))
	c := dial6(t, a, "[2001:db8:1::2]:7")
	transfer(t, c, 1<<20)
	info := c.Info()
	c.Close()
	if got := a.TCP.Stats.PMTUReductions.Load(); got == 0 {
		t.Error("no MSS reduction")
	}
	if info.MSS > pathMTU-40-20 {
		t.Errorf("SND.MSS %d after the report, want at most %d", info.MSS, pathMTU-60)
	}
	r, err := a.IPv6.Route(v6test.AddrB)
	if err != nil || r.MTU != pathMTU {
		t.Errorf("route to B: MTU %d (%v), want the path MTU %d", r.MTU, err, pathMTU)
	}
}

// A wildcard listener on :: takes both families (Linux's bindv6only=0, Go's
// "tcp"); its IPv4 peers appear with plain IPv4 addresses.
func TestDualStackListenerTakesBothFamilies(t *testing.T) {
	a, b := v6test.Pair(t, v6test.Options{IPv4: true})
	l := listen6(t, b, "[::]:80")
	if got := l.Addr().String(); got != "[::]:80" {
		t.Errorf("listener address %s", got)
	}
	for _, tt := range []struct{ dial, wantRemote string }{
		{"10.0.0.2:80", "10.0.0.1"},
		{"[2001:db8:1::2]:80", "2001:db8:1::1"},
	} {
		c := dial6(t, a, tt.dial)
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		ra := s.RemoteAddr().(*net.TCPAddr)
		if got := ra.AddrPort().Addr().String(); got != tt.wantRemote {
			t.Errorf("dialled %s: accepted from %s, want %s", tt.dial, got, tt.wantRemote)
		}
		if ra.IP.To4() == nil != (netip.MustParseAddr(tt.wantRemote).Is6()) {
			t.Errorf("dialled %s: remote IP %v of the wrong length", tt.dial, ra.IP)
		}
		s.Close()
		c.Close()
	}
}

// A V6Only listener on :: refuses IPv4 (IPV6_V6ONLY, Go's "tcp6"), and
// the port rules are Linux's: an IPv4 wildcard and an IPv6-only one share
// a port; a dual-stack wildcard conflicts with both.
func TestV6OnlyListenerRefusesIPv4(t *testing.T) {
	a, b := v6test.Pair(t, v6test.Options{IPv4: true})
	l6, err := b.TCP.ListenV6Only(netip.MustParseAddrPort("[::]:80"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l6.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := a.TCP.Dial(ctx, netip.AddrPort{}, netip.MustParseAddrPort("10.0.0.2:80")); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial IPv4 to a tcp6 listener: %v, want ECONNREFUSED", err)
	}
	c := dial6(t, a, "[2001:db8:1::2]:80")
	c.Close()
	if _, err := b.TCP.Listen(netip.MustParseAddrPort("[::]:80"), 0); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("a dual-stack wildcard beside a tcp6 one: %v, want EADDRINUSE", err)
	}
	l4, err := b.TCP.Listen(netip.MustParseAddrPort("0.0.0.0:80"), 0)
	if err != nil {
		t.Fatalf("an IPv4 wildcard beside a tcp6 one: %v", err)
	}
	defer l4.Close()
	c = dial6(t, a, "10.0.0.2:80")
	c.Close()
}

func TestListenErrorsOverIPv6(t *testing.T) {
	_, b := v6test.Pair(t, v6test.Options{})
	tests := []struct {
		addr string
		want error
	}{
		{"[2001:db8:1::99]:80", syscall.EADDRNOTAVAIL}, // not the host's
		{"[fe80::2%eth9]:80", syscall.EADDRNOTAVAIL},   // no such interface
		{"10.0.0.2:80", syscall.EAFNOSUPPORT},          // no IPv4 on this host
	}
	for _, tt := range tests {
		if _, err := b.TCP.Listen(netip.MustParseAddrPort(tt.addr), 0); !errors.Is(err, tt.want) {
			t.Errorf("listen %s: %v, want %v", tt.addr, err, tt.want)
		}
	}
}

// Link-local addresses carry their zone: in the dial, in both ends'
// addresses, and when the dial leaves it out on a host with one link.
func TestLinkLocalDialWithZone(t *testing.T) {
	a, b := v6test.Pair(t, v6test.Options{})
	l := listen6(t, b, "[fe80::2%eth0]:7")
	for _, addr := range []string{"[fe80::2%eth0]:7", "[fe80::2]:7"} {
		c := dial6(t, a, addr)
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range []struct {
			what string
			got  net.Addr
			want string
		}{
			{"dialler's remote", c.RemoteAddr(), "[fe80::2%eth0]:7"},
			{"acceptor's remote", s.RemoteAddr(), "fe80::1%eth0"},
			{"acceptor's local", s.LocalAddr(), "[fe80::2%eth0]:7"},
			{"dialler's local", c.LocalAddr(), "fe80::1%eth0"},
		} {
			ta := x.got.(*net.TCPAddr)
			if ta.Zone != "eth0" {
				t.Errorf("dial %s: %s %v has zone %q, want eth0", addr, x.what, ta, ta.Zone)
			}
			if want := x.want; want[0] == '[' && ta.String() != want {
				t.Errorf("dial %s: %s %v, want %s", addr, x.what, ta, want)
			}
		}
		transfer1(t, c, s)
		s.Close()
		c.Close()
	}
}

// transfer1 writes a byte each way between two ends of a connection.
func transfer1(t *testing.T, x, y net.Conn) {
	t.Helper()
	for _, p := range [][2]net.Conn{{x, y}, {y, x}} {
		if _, err := p[0].Write([]byte{42}); err != nil {
			t.Fatal(err)
		}
		p[1].SetReadDeadline(time.Now().Add(5 * time.Second))
		var b [1]byte
		if _, err := io.ReadFull(p[1], b[:]); err != nil || b[0] != 42 {
			t.Fatalf("read %v, %v", b, err)
		}
	}
}

// RFC 3168 section 5 over IPv6: the ECN field is the traffic class's two
// low bits; a connection that negotiated ECN marks its data ECT(0), and a
// CE mark the link sets reaches the sender as ECE.
func TestECNInTheTrafficClass(t *testing.T) {
	var tp tapTCP
	a, b := v6test.Pair(t, v6test.Options{
		TCP: tcp.Config{ECN: tcp.ECNOn},
		Tap: tp.tap,
		Drop: func(n int, d []byte) bool {
			// Mark every 20th datagram CE, as a congested router
			// would (the traffic class straddles bytes 0 and 1).
			if n%20 == 0 && d[1]>>4&3 != 0 {
				d[1] |= 3 << 4
			}
			return false
		},
	})
	echo6(t, listen6(t, b, "[::]:7"))
	c := dial6(t, a, "[2001:db8:1::2]:7")
	transfer(t, c, 1<<20)
	c.Close()
	if a.TCP.Stats.ECNNegotiated.Load() == 0 {
		t.Fatal("ECN not negotiated")
	}
	ect := 0
	for _, s := range tp.seen() {
		if s.fromA && len(s.tcp.Payload) > 0 && s.tclass&3 == 2 {
			ect++
		}
	}
	if ect == 0 {
		t.Error("no data segment from A marked ECT(0) in its traffic class")
	}
	if b.TCP.Stats.ECNCEReceived.Load() == 0 || a.TCP.Stats.ECNEchoReceived.Load() == 0 {
		t.Errorf("CE received by B %d, ECE received by A %d; want both", b.TCP.Stats.ECNCEReceived.Load(), a.TCP.Stats.ECNEchoReceived.Load())
	}
}

// RFC 4987 section 3.6 over IPv6: the cookie hashes the 4-tuple's 128-bit
// addresses, and a connection made from one carries data both ways.
func TestSYNCookiesOverIPv6(t *testing.T) {
	a, b := v6test.Pair(t, v6test.Options{TCP: tcp.Config{SynCookies: tcp.SynCookiesAlways}})
	echo6(t, listen6(t, b, "[::]:7"))
	for range 3 {
		c := dial6(t, a, "[2001:db8:1::2]:7")
		transfer(t, c, 256<<10)
		c.Close()
	}
	if got := b.TCP.Stats.SynCookiesValidated.Load(); got != 3 {
		t.Errorf("%d cookies validated, want 3", got)
	}
}

// RFC 9293 section 3.10.7.1 over IPv6: a SYN to a closed port draws a
// RST/ACK addressed back by the v6 4-tuple, which ends the dial.
func TestResetFromAClosedIPv6Port(t *testing.T) {
	a, b := v6test.Pair(t, v6test.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := a.TCP.Dial(ctx, netip.AddrPort{}, netip.MustParseAddrPort("[2001:db8:1::2]:9")); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial a closed port: %v, want ECONNREFUSED", err)
	}
	if got := b.TCP.Stats.OutRsts.Load(); got != 1 {
		t.Errorf("B sent %d resets, want 1", got)
	}
}

// A host's connections to its own IPv6 addresses, ::1 included, go through
// the layer's loopback with segments as large as its MTU allows.
func TestEchoToOwnIPv6Address(t *testing.T) {
	a, _ := v6test.Pair(t, v6test.Options{})
	echo6(t, listen6(t, a, "[::]:7"))
	for _, to := range []string{"[2001:db8:1::1]:7", "[::1]:7"} {
		c := dial6(t, a, to)
		transfer(t, c, 1<<20)
		if got := c.Info().MSS; got < 60000 {
			t.Errorf("to %s: MSS %d, want the loopback's", to, got)
		}
		c.Close()
	}
}

// Over a link with TSO, TCP hands IPv6 super-segments marked for IPv6
// segmentation (GSOTCPv6, the virtio-net header's), of whole segments of
// SND.MSS, whose payload with the TCP header fits IPv6's 65535 bytes; the
// link hands them on whole, as a TAP device does.
func TestSuperSegmentsOverIPv6(t *testing.T) {
	var tp tapTCP
	a, b := v6test.Pair(t, v6test.Options{Caps: link.Capabilities{TxChecksum: true, TSO: true}, Tap: tp.tap})
	echo6(t, listen6(t, b, "[::]:7"))
	c := dial6(t, a, "[2001:db8:1::2]:7")
	transfer(t, c, 4<<20)
	c.Close()
	supers := 0
	for _, s := range tp.seen() {
		if s.o.GSOType == buffer.GSONone {
			if s.ipLen > 1500 {
				t.Errorf("a datagram of %d bytes not marked for segmentation", s.ipLen)
			}
			continue
		}
		supers++
		if s.o.GSOType != buffer.GSOTCPv6 {
			t.Errorf("super-segment of GSO type %d, want GSOTCPv6", s.o.GSOType)
		}
		if payload := s.ipLen - 40; payload > 65535 {
			t.Errorf("super-segment with an IPv6 payload of %d bytes", payload)
		}
		if mss := int(s.o.GSOSize); mss > 1500-40-20 || len(s.tcp.Payload) <= mss {
			t.Errorf("super-segment of %d bytes cut at %d", len(s.tcp.Payload), mss)
		}
	}
	if supers == 0 {
		t.Error("no super-segment sent")
	}
	if a.IPv6.Stats.OutGSO.Load() == 0 || a.IPv6.Stats.OutGSOFallbacks.Load() != 0 {
		t.Errorf("IPv6 OutGSO %d, fallbacks %d", a.IPv6.Stats.OutGSO.Load(), a.IPv6.Stats.OutGSOFallbacks.Load())
	}
}

// A super-segment of one full-sized segment and a runt, a write of one and
// a half segments, is less than the two full-sized segments an ACK is owed
// for at once (RFC 5681 section 4.2): it is acknowledged RuntAckDelay after
// it arrives, not after the delayed-ACK timeout, and when the next
// super-segment comes sooner, one ACK at once answers both.
func TestRuntOfASuperSegmentWaitsBrieflyForTheNext(t *testing.T) {
	tests := []struct {
		name     string
		writes   int
		wantWait time.Duration
	}{
		{"alone: acknowledged after RuntAckDelay", 1, tcp.RuntAckDelay},
		{"followed by another: one ACK for both at once", 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var tp tapTCP
				a, b := v6test.Pair(t, v6test.Options{Caps: link.Capabilities{TxChecksum: true, TSO: true}, Tap: tp.tap,
					TCP: tcp.Config{QuickAcks: -1}}) // a bulk receiver past its quick ACKs
				l := listen6(t, b, "[::]:7")
				defer l.Close()
				go func() {
					c, err := l.Accept()
					if err != nil {
						return
					}
					defer c.Close()
					io.Copy(io.Discard, c)
				}()
				c := dial6(t, a, "[2001:db8:1::2]:7")
				defer c.Close()
				synctest.Wait()
				from := len(tp.seen())
				for range tt.writes {
					if _, err := c.Write(make([]byte, 2000)); err != nil {
						t.Fatal(err)
					}
					synctest.Wait() // sent and taken, no time passed
				}
				time.Sleep(time.Second) // past any delayed ACK
				synctest.Wait()
				var data, acks []tcpSeen
				for _, s := range tp.seen()[from:] {
					switch {
					case s.fromA && len(s.tcp.Payload) > 0:
						data = append(data, s)
					case !s.fromA:
						acks = append(acks, s)
					}
				}
				if len(data) != tt.writes {
					t.Fatalf("%d segments of data, want %d super-segments", len(data), tt.writes)
				}
				for _, d := range data {
					if size := int(d.o.GSOSize); d.o.GSOType != buffer.GSOTCPv6 || len(d.tcp.Payload)/size != 1 || len(d.tcp.Payload)%size == 0 {
						t.Fatalf("sent %d bytes with GSO type %d, size %d; want one full-sized segment and a runt", len(d.tcp.Payload), d.o.GSOType, size)
					}
				}
				if len(acks) != 1 {
					t.Fatalf("%d ACKs, want 1", len(acks))
				}
				last := data[len(data)-1]
				if want := last.tcp.Seq + uint32(len(last.tcp.Payload)); acks[0].tcp.Ack != want {
					t.Errorf("ACK %d, want %d (all the data)", acks[0].tcp.Ack, want)
				}
				if wait := acks[0].at.Sub(last.at); wait != tt.wantWait {
					t.Errorf("ACK %v after the last data, want %v", wait, tt.wantWait)
				}
			})
		})
	}
}

// RFC 6528 over IPv6: F hashes the whole 128-bit addresses, so 4-tuples
// that differ only in an address's upper bits get unrelated ISNs.
func TestISNsHashWholeIPv6Addresses(t *testing.T) {
	var tp tapTCP
	a, b := v6test.Pair(t, v6test.Options{Tap: tp.tap, Seed: 1})
	other := netip.MustParseAddr("2002:db8:1::1") // AddrA but for its first bytes
	if err := a.IPv6.AddAddress(a.If6, netip.PrefixFrom(other, 64), ipv6.Preferred); err != nil {
		t.Fatal(err)
	}
	if err := b.IPv6.AddRoute(ipv6.Route{Dst: netip.MustParsePrefix("2002:db8:1::/64"), Iface: b.If6}); err != nil {
		t.Fatal(err)
	}
	echo6(t, listen6(t, b, "[::]:7"))
	for _, from := range []netip.Addr{v6test.AddrA, other} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := a.TCP.Dial(ctx, netip.AddrPortFrom(from, 40000), netip.MustParseAddrPort("[2001:db8:1::2]:7"))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	var isns []uint32
	for _, s := range tp.seen() {
		if s.fromA && s.tcp.SYN {
			isns = append(isns, s.tcp.Seq)
		}
	}
	if len(isns) != 2 {
		t.Fatalf("%d SYNs", len(isns))
	}
	if d := dist(isns[0], isns[1]); d < 1<<20 {
		t.Errorf("ISNs %d and %d are %d apart: the upper address bits do not count", isns[0], isns[1], d)
	}
}

// Acknowledgements of new data confirm the peer's reachability to
// neighbour discovery (RFC 4861 section 7.3.1): the sender's segments
// carry the confirmation for the peer as next hop, at most once per 100
// ms each, so that a busy connection's neighbour is never probed.
func TestForwardProgressConfirmsReachability(t *testing.T) {
	var (
		mu        sync.Mutex
		confirmed = map[bool][]netip.Addr{}
	)
	a, b := v6test.Pair(t, v6test.Options{Confirm: func(fromA bool, nextHop netip.Addr) {
		mu.Lock()
		confirmed[fromA] = append(confirmed[fromA], nextHop)
		mu.Unlock()
	}})
	echo6(t, listen6(t, b, "[::]:7"))
	start := time.Now()
	c := dial6(t, a, "[2001:db8:1::2]:7")
	transfer(t, c, 4<<20)
	c.Close()
	took := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	if len(confirmed[true]) == 0 || len(confirmed[false]) == 0 {
		t.Fatalf("confirmations from A %v, from B %v: want both, each sending data acknowledged", confirmed[true], confirmed[false])
	}
	for fromA, want := range map[bool]netip.Addr{true: b.Addr, false: a.Addr} {
		for _, got := range confirmed[fromA] {
			if got != want {
				t.Errorf("confirmed %v, want the peer %v", got, want)
			}
		}
		// One per 100 ms, and the first at once.
		if most := int(took/(100*time.Millisecond)) + 2; len(confirmed[fromA]) > most {
			t.Errorf("%d confirmations in %v, want at most %d", len(confirmed[fromA]), took, most)
		}
	}
}
