package icmp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/ip4defrag"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/icmp"
	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/wire"
)

func data(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*13 + i>>8)
	}
	return b
}

// datagram reads and reassembles the stack's next datagram.
func datagram(t *testing.T, h *rawtest.Host) *layers.IPv4 {
	t.Helper()
	d := ip4defrag.NewIPv4Defragmenter()
	for {
		out, err := d.DefragIPv4(rawtest.IPv4Of(t, h.Expect(t, rawtest.Timeout)))
		if err != nil {
			t.Fatalf("gopacket rejects the stack's fragment: %v", err)
		}
		if out != nil {
			return out
		}
	}
}

// icmpIn decodes and checks the ICMP message a whole datagram carries.
func icmpIn(t *testing.T, ip *layers.IPv4) *layers.ICMPv4 {
	t.Helper()
	m, ok := gopacket.NewPacket(ip.Payload, layers.LayerTypeICMPv4, gopacket.Default).Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if !ok {
		t.Fatalf("expected ICMP, got %x", ip.Payload)
	}
	if _, v := m.VerifyChecksum(); !v.Valid {
		t.Errorf("ICMP checksum %#04x, want %#04x", v.Actual, v.Correct)
	}
	return m
}

func TestEchoReplySwapsAddressesAndReturnsTheDataWhole(t *testing.T) {
	tests := []struct {
		size       int
		fragmented bool // the request arrives in fragments of 1480 bytes
	}{
		{0, false}, {1, false}, {56, false}, {1472, false},
		{1473, true}, {3000, true}, {65507, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.size), func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			h.LearnPeer(t)
			hdr := rawtest.IPv4Header(rawtest.PeerAddr, rawtest.StackAddr, layers.IPProtocolICMPv4)
			hdr.TOS = 0x28
			hdr.Id = 321
			msg := rawtest.EchoBytes(t, 8, 0x1234, 0x5678, data(tt.size))
			if tt.fragmented {
				h.Inject(h.Fragments(t, hdr, msg, 1480)...)
			} else {
				h.Inject(h.IPFrame(t, hdr, rawtest.Payload(msg)))
			}
			ip := datagram(t, h)
			m := icmpIn(t, ip)
			if rawtest.Addr(ip.SrcIP) != rawtest.StackAddr || rawtest.Addr(ip.DstIP) != rawtest.PeerAddr {
				t.Errorf("reply %v > %v, want %v > %v", ip.SrcIP, ip.DstIP, rawtest.StackAddr, rawtest.PeerAddr)
			}
			if m.TypeCode != layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoReply, 0) || m.Id != 0x1234 || m.Seq != 0x5678 {
				t.Errorf("reply %v id %#x seq %#x", m.TypeCode, m.Id, m.Seq)
			}
			if !bytes.Equal(m.Payload, data(tt.size)) {
				t.Errorf("reply carries %d bytes, not the %d sent (RFC 1122 section 3.2.2.6)", len(m.Payload), tt.size)
			}
			if ip.TOS != 0x28 || ip.TTL != 64 {
				t.Errorf("reply TOS %#x TTL %d, want the request's TOS and the default TTL", ip.TOS, ip.TTL)
			}
			if got := h.Counter(t, "ICMP.OutEchoReps"); got != 1 {
				t.Errorf("OutEchoReps = %d", got)
			}
		})
	}
}

func TestEchoToBroadcast(t *testing.T) {
	for _, answer := range []bool{false, true} {
		// All-systems (224.0.0.1) is a group every host is in, and
		// icmp_echo_ignore_broadcasts covers it too.
		for _, dst := range []netip.Addr{rawtest.SubnetBroadcast, rawtest.LimitedBroadcast, netip.MustParseAddr("224.0.0.1")} {
			t.Run(fmt.Sprintf("%v answered %v", dst, answer), func(t *testing.T) {
				h := rawtest.New(t, stack.Config{ICMP: icmp.Config{EchoBroadcast: answer}})
				h.LearnPeer(t)
				h.Inject(h.IPFrame(t, rawtest.IPv4Header(rawtest.PeerAddr, dst, layers.IPProtocolICMPv4),
					rawtest.Payload(rawtest.EchoBytes(t, 8, 1, 2, data(16)))))
				if !answer {
					// Ignored by default, as Linux's icmp_echo_ignore_broadcasts.
					h.WaitCounter(t, "ICMP.InEchoIgnored", 1)
					h.ExpectNothing(t)
					return
				}
				ip, m := rawtest.ICMPOf(t, h.Expect(t, rawtest.Timeout))
				// The reply comes from our unicast address, not the broadcast.
				if rawtest.Addr(ip.SrcIP) != rawtest.StackAddr || rawtest.Addr(ip.DstIP) != rawtest.PeerAddr || m.TypeCode.Type() != 0 {
					t.Errorf("reply %v > %v type %v", ip.SrcIP, ip.DstIP, m.TypeCode)
				}
			})
		}
	}
}

// closedPortFrame is a UDP datagram from the peer to a port nobody bound.
func closedPortFrame(t *testing.T, h *rawtest.Host, seq int) []byte {
	return h.UDPFrame(t, netip.AddrPortFrom(rawtest.PeerAddr, uint16(1000+seq)), netip.AddrPortFrom(rawtest.StackAddr, 9999), []byte("x"))
}

func TestErrorRateLimit(t *testing.T) {
	for _, burst := range []int{1, 3, 10} {
		t.Run(fmt.Sprintf("burst %d", burst), func(t *testing.T) {
			h := rawtest.New(t, stack.Config{ICMP: icmp.Config{ErrorBurst: float64(burst), ErrorRate: 2}})
			h.LearnPeer(t)
			seq := 0
			unreachables := func(n int) {
				t.Helper()
				for range n {
					h.Inject(closedPortFrame(t, h, seq))
					seq++
				}
				h.WaitCounter(t, "UDP.NoPorts", int64(seq))
			}
			// burst+1 errors in the same virtual instant: the last is
			// suppressed.
			unreachables(burst + 1)
			if got := len(h.Barrier(t)); got != burst {
				t.Errorf("%d errors sent, want %d", got, burst)
			}
			if got := h.Counter(t, "ICMP.OutRateLimited"); got != 1 {
				t.Errorf("OutRateLimited = %d, want 1", got)
			}
			// At 2 a second, 499ms refill less than a token...
			h.Clock.Advance(499 * time.Millisecond)
			unreachables(1)
			if got := len(h.Barrier(t)); got != 0 {
				t.Errorf("%d errors sent before a token refilled", got)
			}
			// ...and 500ms one.
			h.Clock.Advance(time.Millisecond)
			unreachables(2)
			if got := len(h.Barrier(t)); got != 1 {
				t.Errorf("%d errors sent with one token, want 1", got)
			}
			// A long wait refills to the burst, not beyond.
			h.Clock.Advance(time.Hour)
			h.LearnPeer(t) // the ARP entry expired meanwhile
			unreachables(burst + 2)
			sent := h.Barrier(t)
			if len(sent) != burst {
				t.Errorf("%d frames sent after an hour, want the burst of %d errors", len(sent), burst)
			}
			for _, f := range sent {
				if _, m := rawtest.ICMPOf(t, f); m.TypeCode != layers.CreateICMPv4TypeCode(3, 3) {
					t.Errorf("sent %v, want port unreachable", m.TypeCode)
				}
			}
			if got := h.Counter(t, "ICMP.OutRateLimited"); got != 1+1+1+2 {
				t.Errorf("OutRateLimited = %d, want 5", got)
			}
		})
	}
}

func TestNoErrorAbout(t *testing.T) {
	// RFC 1122 section 3.2.2: no error about an ICMP error, a datagram to a
	// broadcast or multicast address, a non-initial fragment, or one whose
	// source is not a single host. Each case goes through ReportError, the
	// way IPv4 and UDP report drops.
	hdr := func(src, dst string, proto uint8, fragOff int, body []byte) wire.IPv4 {
		b := make([]byte, 20+len(body))
		wire.EncodeIPv4(b, &wire.IPv4Fields{TotalLen: len(b), TTL: 64, Protocol: proto, FragOff: fragOff,
			Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst)})
		copy(b[20:], body)
		return b
	}
	icmpMsg := func(typ uint8) []byte {
		b := make([]byte, 8+28)
		wire.EncodeICMP(b, &wire.ICMPFields{Type: typ})
		return b
	}
	udp := make([]byte, 8)
	tests := []struct {
		name string
		orig wire.IPv4
		sent bool
	}{
		{"a UDP datagram (control)", hdr("10.1.0.1", "10.1.0.2", 17, 0, udp), true},
		{"an echo request (a query)", hdr("10.1.0.1", "10.1.0.2", 1, 0, icmpMsg(8)), true},
		{"a timestamp request (a query)", hdr("10.1.0.1", "10.1.0.2", 1, 0, icmpMsg(13)), true},
		{"a first fragment", hdr("10.1.0.1", "10.1.0.2", 17, 0, udp), true},
		{"a destination unreachable", hdr("10.1.0.1", "10.1.0.2", 1, 0, icmpMsg(3)), false},
		{"a source quench", hdr("10.1.0.1", "10.1.0.2", 1, 0, icmpMsg(4)), false},
		{"a redirect", hdr("10.1.0.1", "10.1.0.2", 1, 0, icmpMsg(5)), false},
		{"a time exceeded", hdr("10.1.0.1", "10.1.0.2", 1, 0, icmpMsg(11)), false},
		{"a parameter problem", hdr("10.1.0.1", "10.1.0.2", 1, 0, icmpMsg(12)), false},
		{"an ICMP message without a type", hdr("10.1.0.1", "10.1.0.2", 1, 0, nil), false},
		{"a non-initial fragment", hdr("10.1.0.1", "10.1.0.2", 17, 1480, udp), false},
		{"a datagram to the subnet broadcast", hdr("10.1.0.1", "10.1.0.255", 17, 0, udp), false},
		{"a datagram to the limited broadcast", hdr("10.1.0.1", "255.255.255.255", 17, 0, udp), false},
		{"a datagram to a multicast group", hdr("10.1.0.1", "224.0.0.9", 17, 0, udp), false},
		{"a datagram from 0.0.0.0", hdr("0.0.0.0", "10.1.0.2", 17, 0, udp), false},
		{"a datagram from a multicast address", hdr("224.0.0.1", "10.1.0.2", 17, 0, udp), false},
		{"a datagram from the subnet broadcast", hdr("10.1.0.255", "10.1.0.2", 17, 0, udp), false},
		{"a datagram from loopback", hdr("127.0.0.1", "10.1.0.2", 17, 0, udp), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			h.LearnPeer(t)
			h.S.IPv4().ReportError(tt.orig, ip.PortUnreachable)
			if !tt.sent {
				if got := h.Counter(t, "ICMP.OutSuppressed"); got != 1 {
					t.Errorf("OutSuppressed = %d, want 1", got)
				}
				h.ExpectNothing(t)
				return
			}
			f := h.Expect(t, rawtest.Timeout)
			ip, m := rawtest.ICMPOf(t, f)
			if m.TypeCode != layers.CreateICMPv4TypeCode(3, 3) || rawtest.Addr(ip.DstIP) != rawtest.PeerAddr || !bytes.Equal(m.Payload, tt.orig) {
				t.Errorf("got %s quoting %x", rawtest.Describe(f), m.Payload)
			}
		})
	}
}

func TestNoErrorAboutABroadcastOnTheWire(t *testing.T) {
	for _, dst := range []netip.Addr{rawtest.SubnetBroadcast, rawtest.LimitedBroadcast} {
		t.Run(dst.String(), func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			h.LearnPeer(t)
			h.Inject(h.UDPFrame(t, netip.AddrPortFrom(rawtest.PeerAddr, 68), netip.AddrPortFrom(dst, 67), []byte("discover")))
			h.WaitCounter(t, "UDP.NoPorts", 1)
			h.ExpectNothing(t)
			if got := h.Counter(t, "ICMP.OutSuppressed"); got != 1 {
				t.Errorf("OutSuppressed = %d", got)
			}
		})
	}
}

func TestNoErrorAboutAnICMPErrorThatTimedOutInReassembly(t *testing.T) {
	// The only error the stack raises about an ICMP message it received is
	// a reassembly timeout: about a fragmented echo request it reports, about
	// a fragmented error it must not.
	for _, typ := range []uint8{layers.ICMPv4TypeEchoRequest, layers.ICMPv4TypeDestinationUnreachable} {
		t.Run(fmt.Sprint(typ), func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			h.LearnPeer(t)
			hdr := rawtest.IPv4Header(rawtest.PeerAddr, rawtest.StackAddr, layers.IPProtocolICMPv4)
			msg := rawtest.ICMPBytes(t, typ, 0, 0, data(2000))
			h.Inject(h.Fragments(t, hdr, msg, 1480)[0])
			h.WaitCounter(t, "IPv4.ReasmReqds", 1)
			h.Advance(t, 1, 30*time.Second)
			h.WaitCounter(t, "IPv4.ReasmTimeouts", 1)
			if typ == layers.ICMPv4TypeEchoRequest {
				if _, m := rawtest.ICMPOf(t, h.Expect(t, rawtest.Timeout)); m.TypeCode.Type() != layers.ICMPv4TypeTimeExceeded {
					t.Errorf("got %v, want time exceeded", m.TypeCode)
				}
				return
			}
			h.WaitCounter(t, "ICMP.OutSuppressed", 1)
			h.ExpectNothing(t)
		})
	}
}

func TestErrorQuoteIsLimitedTo576Bytes(t *testing.T) {
	tests := []struct {
		payload   int
		wantQuote int
	}{
		{0, 28},
		{10, 38},
		{520, 548},
		{521, 548},
		{1400, 548},
		{1472, 548},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.payload), func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			h.LearnPeer(t)
			f := h.UDPFrame(t, netip.AddrPortFrom(rawtest.PeerAddr, 5555), netip.AddrPortFrom(rawtest.StackAddr, 9), data(tt.payload))
			h.Inject(f)
			ip, m := rawtest.ICMPOf(t, h.Expect(t, rawtest.Timeout))
			if m.TypeCode != layers.CreateICMPv4TypeCode(3, 3) {
				t.Fatalf("got %v, want port unreachable", m.TypeCode)
			}
			if len(m.Payload) != tt.wantQuote || !bytes.Equal(m.Payload, f[14:14+tt.wantQuote]) {
				t.Errorf("quote of %d bytes, want the datagram's first %d", len(m.Payload), tt.wantQuote)
			}
			if int(ip.Length) != 20+8+tt.wantQuote || ip.Length > 576 {
				t.Errorf("error of %d bytes", ip.Length)
			}
		})
	}
}

// pinger runs one Ping in a goroutine.
type pinger struct {
	done chan struct{}
	rtt  time.Duration
	err  error
}

func ping(h *rawtest.Host, ctx context.Context, dst netip.Addr, size int) *pinger {
	p := &pinger{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.rtt, p.err = h.S.Ping(ctx, dst, size)
	}()
	return p
}

func (p *pinger) wait(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(rawtest.Timeout):
		t.Fatal("Ping did not return")
	}
}

func (p *pinger) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// request reads the echo request a ping sent and returns its frame and
// message.
func request(t *testing.T, h *rawtest.Host) ([]byte, *layers.ICMPv4) {
	t.Helper()
	f := h.Expect(t, rawtest.Timeout)
	ip, m := rawtest.ICMPOf(t, f)
	if m.TypeCode.Type() != layers.ICMPv4TypeEchoRequest || rawtest.Addr(ip.DstIP) != rawtest.PeerAddr || rawtest.Addr(ip.SrcIP) != rawtest.StackAddr {
		t.Fatalf("got %s, want an echo request to the peer", rawtest.Describe(f))
	}
	return f, m
}

func (h *replyBuilder) frame(t *testing.T) []byte {
	return h.h.IPFrame(t, rawtest.IPv4Header(h.src, rawtest.StackAddr, layers.IPProtocolICMPv4),
		rawtest.Payload(rawtest.EchoBytes(t, 0, h.id, h.seq, h.data)))
}

type replyBuilder struct {
	h       *rawtest.Host
	src     netip.Addr
	id, seq uint16
	data    []byte
}

func TestPingMatchesTheReplyByIdentAndSeq(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	p := ping(h, context.Background(), rawtest.PeerAddr, 56)
	_, req := request(t, h)
	if len(req.Payload) != 56 {
		t.Fatalf("request carries %d bytes, want 56", len(req.Payload))
	}
	good := replyBuilder{h, rawtest.PeerAddr, req.Id, req.Seq, req.Payload}
	wrong := []struct {
		name    string
		r       replyBuilder
		counter string
	}{
		{"another ident", replyBuilder{h, rawtest.PeerAddr, req.Id + 1, req.Seq, req.Payload}, "InEchoRepUnknown"},
		{"another seq", replyBuilder{h, rawtest.PeerAddr, req.Id, req.Seq + 1, req.Payload}, "InEchoRepUnknown"},
		{"another source", replyBuilder{h, rawtest.BarrierAddr, req.Id, req.Seq, req.Payload}, "InEchoRepUnknown"},
		{"data changed", replyBuilder{h, rawtest.PeerAddr, req.Id, req.Seq, append(bytes.Clone(req.Payload[:55]), req.Payload[55]^1)}, "InEchoRepCorrupt"},
		{"data cut short", replyBuilder{h, rawtest.PeerAddr, req.Id, req.Seq, req.Payload[:55]}, "InEchoRepCorrupt"},
		{"data longer", replyBuilder{h, rawtest.PeerAddr, req.Id, req.Seq, append(bytes.Clone(req.Payload), 0)}, "InEchoRepCorrupt"},
	}
	want := map[string]int64{}
	for _, w := range wrong {
		h.Inject(w.r.frame(t))
		want[w.counter]++
		h.WaitCounter(t, "ICMP."+w.counter, want[w.counter])
		if !p.running() {
			t.Fatalf("a reply with %s ended the ping: %v", w.name, p.err)
		}
	}
	// A corrupt checksum is dropped before matching.
	bad := good.frame(t)
	bad[len(bad)-1] ^= 0xff
	h.Inject(bad)
	h.WaitCounter(t, "ICMP.InCsumErrors", 1)
	if !p.running() {
		t.Fatalf("a reply with a bad checksum ended the ping: %v", p.err)
	}
	h.Clock.Advance(7 * time.Millisecond)
	h.Inject(good.frame(t))
	p.wait(t)
	if p.err != nil || p.rtt != 7*time.Millisecond {
		t.Errorf("Ping = %v, %v; want 7ms on the virtual clock", p.rtt, p.err)
	}
	// A duplicate of the right reply matches nothing once the ping has
	// let go of its sequence number.
	h.WaitCounter(t, "ICMP.PingsOutstanding", 0)
	h.Inject(good.frame(t))
	h.WaitCounter(t, "ICMP.InEchoRepUnknown", want["InEchoRepUnknown"]+1)
}

func TestPingFailsOnAnErrorQuotingItsRequest(t *testing.T) {
	tests := []struct {
		name      string
		typ, code uint8
		want      error
	}{
		{"host unreachable", layers.ICMPv4TypeDestinationUnreachable, layers.ICMPv4CodeHost, syscall.EHOSTUNREACH},
		{"net unreachable", layers.ICMPv4TypeDestinationUnreachable, layers.ICMPv4CodeNet, syscall.EHOSTUNREACH},
		{"TTL exceeded", layers.ICMPv4TypeTimeExceeded, layers.ICMPv4CodeTTLExceeded, syscall.ETIMEDOUT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			h.LearnPeer(t)
			p := ping(h, context.Background(), rawtest.PeerAddr, 100)
			f, req := request(t, h)
			datagram := f[14:]
			// An error about another ping's request changes nothing.
			other := bytes.Clone(datagram[:28])
			other[27]++ // seq
			router := netip.MustParseAddr("10.1.0.100")
			errFrame := func(quote []byte) []byte {
				return h.IPFrame(t, rawtest.IPv4Header(router, rawtest.StackAddr, layers.IPProtocolICMPv4),
					rawtest.Payload(rawtest.ICMPBytes(t, tt.typ, tt.code, 0, quote)))
			}
			h.Inject(errFrame(other))
			h.ExpectNothing(t)
			if !p.running() {
				t.Fatalf("an error about seq %d ended the ping of seq %d: %v", req.Seq+1, req.Seq, p.err)
			}
			// RFC 792: the quote is the header and the first 8 bytes.
			h.Inject(errFrame(datagram[:28]))
			p.wait(t)
			if !errors.Is(p.err, tt.want) {
				t.Errorf("Ping = %v, want %v", p.err, tt.want)
			}
		})
	}
}

func TestPingEndsWithItsContext(t *testing.T) {
	t.Run("cancelled", func(t *testing.T) {
		h := rawtest.New(t, stack.Config{})
		h.LearnPeer(t)
		ctx, cancel := context.WithCancel(context.Background())
		p := ping(h, ctx, rawtest.PeerAddr, 8)
		request(t, h)
		cancel()
		p.wait(t)
		if !errors.Is(p.err, context.Canceled) {
			t.Errorf("Ping = %v, want context.Canceled", p.err)
		}
		h.WaitCounter(t, "ICMP.PingsOutstanding", 0)
	})
	t.Run("deadline passed", func(t *testing.T) {
		h := rawtest.New(t, stack.Config{})
		h.LearnPeer(t)
		ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
		defer cancel()
		p := ping(h, ctx, rawtest.PeerAddr, 8)
		p.wait(t)
		if !errors.Is(p.err, context.DeadlineExceeded) {
			t.Errorf("Ping = %v, want context.DeadlineExceeded", p.err)
		}
		request(t, h) // the request still went out
	})
}

func TestPingFailsFastWithoutARoute(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	_, err := h.S.Ping(context.Background(), netip.MustParseAddr("192.0.2.1"), 8)
	if err == nil {
		t.Fatal("Ping to an unrouted address succeeded")
	}
	h.ExpectNothing(t)
}

func TestPingRejectsSizesOutOfRange(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	for _, size := range []int{-1, icmp.MaxPingSize + 1} {
		if _, err := h.S.Ping(context.Background(), rawtest.PeerAddr, size); !errors.Is(err, syscall.EMSGSIZE) {
			t.Errorf("Ping of %d bytes = %v, want EMSGSIZE", size, err)
		}
	}
}

func TestPingAfterCloseFails(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	h.S.Close()
	if _, err := h.S.Ping(context.Background(), rawtest.PeerAddr, 8); err == nil {
		t.Error("Ping on a closed stack succeeded")
	}
}

func TestMalformedAndUnknownMessages(t *testing.T) {
	tests := []struct {
		name    string
		msg     func(t *testing.T) []byte
		counter string
	}{
		{"shorter than a header", func(t *testing.T) []byte { return []byte{8, 0, 0xf7, 0xff} }, "InErrors"},
		{"bad checksum", func(t *testing.T) []byte {
			b := rawtest.EchoBytes(t, 8, 1, 1, data(10))
			b[9] ^= 0xff
			return b
		}, "InCsumErrors"},
		{"unknown type", func(t *testing.T) []byte { return rawtest.ICMPBytes(t, 42, 0, 0, data(4)) }, "InOther"},
		{"error quoting less than a header", func(t *testing.T) []byte { return rawtest.ICMPBytes(t, 3, 1, 0, data(10)) }, "InErrors"},
		{"error quoting a header but no 8 bytes", func(t *testing.T) []byte {
			q := make([]byte, 24)
			wire.EncodeIPv4(q, &wire.IPv4Fields{TotalLen: 28, TTL: 1, Protocol: 17, Src: rawtest.StackAddr, Dst: rawtest.PeerAddr})
			return rawtest.ICMPBytes(t, 3, 1, 0, q)
		}, "InErrors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			h.LearnPeer(t)
			h.Inject(h.IPFrame(t, rawtest.IPv4Header(rawtest.PeerAddr, rawtest.StackAddr, layers.IPProtocolICMPv4), rawtest.Payload(tt.msg(t))))
			h.WaitCounter(t, "ICMP."+tt.counter, 1)
			// RFC 1122 section 3.2.2: discarded silently.
			h.ExpectNothing(t)
		})
	}
}

func TestPingToOurOwnAddressLoopsBack(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	rtt, err := h.S.Ping(context.Background(), rawtest.StackAddr, 1000)
	if err != nil || rtt != 0 {
		t.Fatalf("Ping = %v, %v; want 0 on the virtual clock", rtt, err)
	}
	h.ExpectNothing(t)
	if got := h.Counter(t, "IPv4.InLoopback"); got != 2 {
		t.Errorf("InLoopback = %d, want the request and the reply", got)
	}
}

func TestStackCloseFailsAnOutstandingPing(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	p := ping(h, context.Background(), rawtest.PeerAddr, 8)
	request(t, h)
	h.S.Close()
	p.wait(t)
	if !errors.Is(p.err, net.ErrClosed) {
		t.Errorf("Ping = %v, want net.ErrClosed", p.err)
	}
}
