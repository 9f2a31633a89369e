package ipv4_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/ip4defrag"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv4"
	"github.com/gonetstack/gonet/stack"
)

// data returns n bytes of a recognisable pattern.
func data(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

// echoHeader is the IPv4 header of an echo request from the peer.
func echoHeader(id uint16) *layers.IPv4 {
	ip := rawtest.IPv4Header(rawtest.PeerAddr, rawtest.StackAddr, layers.IPProtocolICMPv4)
	ip.Id = id
	return ip
}

// datagram reads the frames of the next datagram the stack sends,
// reassembling them with gopacket's defragmenter, and returns it with its
// fragments' IPv4 headers.
func datagram(t *testing.T, h *rawtest.Host) (*layers.IPv4, []*layers.IPv4) {
	t.Helper()
	d := ip4defrag.NewIPv4Defragmenter()
	var frags []*layers.IPv4
	for {
		ip := rawtest.IPv4Of(t, h.Expect(t, rawtest.Timeout))
		frags = append(frags, ip)
		out, err := d.DefragIPv4(ip)
		if err != nil {
			t.Fatalf("gopacket rejects the stack's fragment %d: %v", len(frags), err)
		}
		if out != nil {
			return out, frags
		}
	}
}

// echoReply reads the stack's next datagram and returns the echo reply it
// carries, failing unless it is one.
func echoReply(t *testing.T, h *rawtest.Host) (*layers.IPv4, *layers.ICMPv4) {
	t.Helper()
	ip, _ := datagram(t, h)
	return echoReplyIn(t, ip)
}

// echoReplyIn returns the echo reply ip carries, failing unless it is one.
func echoReplyIn(t *testing.T, ip *layers.IPv4) (*layers.IPv4, *layers.ICMPv4) {
	t.Helper()
	p := gopacket.NewPacket(ip.Payload, layers.LayerTypeICMPv4, gopacket.Default)
	m, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if !ok || m.TypeCode.Type() != layers.ICMPv4TypeEchoReply {
		t.Fatalf("expected an echo reply, got %x", ip.Payload)
	}
	if _, v := m.VerifyChecksum(); !v.Valid {
		t.Errorf("echo reply checksum %#04x, want %#04x", v.Actual, v.Correct)
	}
	return ip, m
}

func TestCountsEachValidationFailureByReason(t *testing.T) {
	reasons := []string{"InTruncated", "InBadVersion", "InBadHeaderLen", "InBadTotalLen", "InCsumErrors"}
	tests := []struct {
		name    string
		mangle  func(ip []byte) []byte // the datagram, after the Ethernet header
		counter string
	}{
		{"shorter than a header", func(ip []byte) []byte { return ip[:19] }, "InTruncated"},
		{"empty", func(ip []byte) []byte { return ip[:0] }, "InTruncated"},
		{"version 6", func(ip []byte) []byte { ip[0] = 0x65; return ip }, "InBadVersion"},
		{"version 0", func(ip []byte) []byte { ip[0] = 0x05; return ip }, "InBadVersion"},
		{"IHL 4", func(ip []byte) []byte { ip[0] = 0x44; return ip }, "InBadHeaderLen"},
		{"IHL 0", func(ip []byte) []byte { ip[0] = 0x40; return ip }, "InBadHeaderLen"},
		{"IHL beyond the data", func(ip []byte) []byte { ip[0] = 0x4f; return ip }, "InBadHeaderLen"},
		{"total length below the header", func(ip []byte) []byte { ip[2], ip[3] = 0, 19; return ip }, "InBadTotalLen"},
		{"total length beyond the data", func(ip []byte) []byte { ip[3]++; return ip }, "InBadTotalLen"},
		{"total length 65535", func(ip []byte) []byte { ip[2], ip[3] = 0xff, 0xff; return ip }, "InBadTotalLen"},
		{"header checksum", func(ip []byte) []byte { ip[10] ^= 0x10; return ip }, "InCsumErrors"},
		{"a header bit flipped", func(ip []byte) []byte { ip[8] ^= 0x01; return ip }, "InCsumErrors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			h.LearnPeer(t)
			f := h.EchoFrame(t, 1, 1, data(8))
			// Ethernet padding is not in the datagram; keep the frame
			// exactly the mangled datagram long.
			f = append(f[:14:14], tt.mangle(bytes.Clone(f[14:14+36]))...)
			h.Inject(f)
			h.WaitCounter(t, "IPv4."+tt.counter, 1)
			h.ExpectNothing(t)
			c := h.S.Counters()
			for _, r := range reasons {
				if want := int64(0); r == tt.counter {
					continue
				} else if c["IPv4."+r] != want {
					t.Errorf("IPv4.%s = %d, want 0", r, c["IPv4."+r])
				}
			}
			if c["IPv4.InReceives"] != 2 || c["IPv4.InDelivers"] != 1 { // with the barrier's echo
				t.Errorf("InReceives = %d, InDelivers = %d, want 2 and 1", c["IPv4.InReceives"], c["IPv4.InDelivers"])
			}
		})
	}
}

func TestDropsDatagramsNotForUs(t *testing.T) {
	tests := []struct {
		name     string
		src, dst string
		counter  string
	}{
		{"another host on the subnet", "10.1.0.1", "10.1.0.9", "InAddrErrors"},
		{"another subnet", "10.1.0.1", "10.2.0.2", "InAddrErrors"},
		{"a multicast group we did not join", "10.1.0.1", "224.0.0.251", "InNoGroup"},
		{"from a multicast source", "224.0.0.1", "10.1.0.2", "InMartians"},
		{"from the limited broadcast", "255.255.255.255", "10.1.0.2", "InMartians"},
		{"from the subnet broadcast", "10.1.0.255", "10.1.0.2", "InMartians"},
		{"from our own address", "10.1.0.2", "10.1.0.2", "InMartians"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			h.LearnPeer(t)
			src, dst := netip.MustParseAddr(tt.src), netip.MustParseAddr(tt.dst)
			h.Inject(h.IPFrame(t, rawtest.IPv4Header(src, dst, layers.IPProtocolICMPv4), rawtest.Payload(rawtest.EchoBytes(t, 8, 1, 1, data(8)))))
			h.WaitCounter(t, "IPv4."+tt.counter, 1)
			h.ExpectNothing(t)
			if got := h.Counter(t, "ICMP.InMsgs"); got != 1 { // the barrier's
				t.Errorf("ICMP.InMsgs = %d: the datagram was delivered", got)
			}
		})
	}
}

func TestIgnoresLinkPaddingAfterTotalLength(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	payload := data(12)
	f := append(h.EchoFrame(t, 7, 9, payload), bytes.Repeat([]byte{0xee}, 30)...)
	h.Inject(f)
	ip, m := echoReply(t, h)
	if ip.Length != 20+8+12 || !bytes.Equal(m.Payload, payload) || m.Id != 7 || m.Seq != 9 {
		t.Errorf("reply length %d id %d seq %d data %x, want 40, 7, 9, %x", ip.Length, m.Id, m.Seq, m.Payload, payload)
	}
}

func TestReassemblesFragmentsInAnyOrder(t *testing.T) {
	echo := data(5000)
	orders := []struct {
		name  string
		order func(n int) []int
	}{
		{"in order", func(n int) []int {
			o := make([]int, n)
			for i := range o {
				o[i] = i
			}
			return o
		}},
		{"reverse", func(n int) []int {
			o := make([]int, n)
			for i := range o {
				o[i] = n - 1 - i
			}
			return o
		}},
		{"shuffled", func(n int) []int { return rand.New(rand.NewPCG(7, 11)).Perm(n) }},
		{"last first", func(n int) []int { return append([]int{n - 1}, rand.New(rand.NewPCG(3, 5)).Perm(n-1)...) }},
	}
	for _, chunk := range []int{8, 256, 1480} {
		for _, o := range orders {
			t.Run(fmt.Sprintf("%s chunks of %d", o.name, chunk), func(t *testing.T) {
				h := rawtest.New(t, stack.Config{})
				h.LearnPeer(t)
				msg := echo[:min(len(echo), chunk*40)] // at most 41 fragments
				frags := h.Fragments(t, echoHeader(77), rawtest.EchoBytes(t, 8, 5, 6, msg), chunk)
				var shuffled [][]byte
				for _, i := range o.order(len(frags)) {
					shuffled = append(shuffled, frags[i])
				}
				h.Inject(shuffled...)
				_, m := echoReply(t, h)
				if m.Id != 5 || m.Seq != 6 || !bytes.Equal(m.Payload, msg) {
					t.Errorf("reply id %d seq %d with %d bytes, want 5, 6 and the %d bytes sent", m.Id, m.Seq, len(m.Payload), len(msg))
				}
				c := h.S.Counters()
				if c["IPv4.ReasmOKs"] != 1 || c["IPv4.ReasmReqds"] != int64(len(frags)) || c["IPv4.ReasmFails"] != 0 {
					t.Errorf("ReasmOKs %d ReasmReqds %d ReasmFails %d, want 1, %d, 0", c["IPv4.ReasmOKs"], c["IPv4.ReasmReqds"], c["IPv4.ReasmFails"], len(frags))
				}
				h.WaitCounter(t, "IPv4.ReasmActive", 0)
			})
		}
	}
}

func TestToleratesDuplicateFragments(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	msg := data(3000)
	frags := h.Fragments(t, echoHeader(1), rawtest.EchoBytes(t, 8, 1, 1, msg), 1024)
	// The first fragment twice, the middle one three times.
	h.Inject(frags[0], frags[0], frags[1], frags[1], frags[1], frags[2])
	_, m := echoReply(t, h)
	if !bytes.Equal(m.Payload, msg) {
		t.Error("reply data differs")
	}
	if got := h.Counter(t, "IPv4.ReasmDuplicates"); got != 3 {
		t.Errorf("ReasmDuplicates = %d, want 3", got)
	}
	h.ExpectNothing(t)
}

func TestOverlappingFragmentDiscardsTheDatagram(t *testing.T) {
	// RFC 5722's rule, applied to IPv4 as Linux does: any overlap other
	// than an exact duplicate discards the whole datagram.
	tests := []struct {
		name string
		// offsets and lengths of the fragments sent, the last without MF
		frags [][2]int
	}{
		{"overlaps the end of the one before", [][2]int{{0, 16}, {8, 16}, {24, 8}}},
		{"overlaps the start of the one after", [][2]int{{16, 16}, {8, 16}, {0, 8}}},
		{"inside another", [][2]int{{0, 32}, {8, 8}, {32, 8}}},
		{"covers another", [][2]int{{8, 8}, {0, 32}, {32, 8}}},
		{"same offset, longer", [][2]int{{0, 8}, {0, 16}, {16, 8}}},
		{"last fragment overlaps", [][2]int{{0, 16}, {8, 16}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			h.LearnPeer(t)
			payload := rawtest.EchoBytes(t, 8, 1, 1, data(64))
			for i, f := range tt.frags {
				last := i == len(tt.frags)-1
				h.Inject(h.Fragment(t, echoHeader(3), f[0], !last, payload[f[0]:f[0]+f[1]]))
			}
			h.WaitCounter(t, "IPv4.ReasmOverlaps", 1)
			h.ExpectNothing(t)
			if got := h.Counter(t, "IPv4.ReasmOKs"); got != 0 {
				t.Errorf("ReasmOKs = %d", got)
			}
		})
	}
}

func TestDatagramOver65535BytesIsNeverBuilt(t *testing.T) {
	tests := []struct {
		name string
		// options is the first fragment's option length; the others have
		// none.
		options int
		// payload is the datagram's payload length.
		payload int
		chunk   int
	}{
		{"payload ends past 65535", 0, 65535 - 20 + 8, 1480},
		{"first fragment's options push it past 65535", 40, 65535 - 20, 1432},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			h.LearnPeer(t)
			payload := data(tt.payload)
			base := rawtest.IPv4Header(rawtest.PeerAddr, rawtest.StackAddr, layers.IPProtocolUDP)
			base.Id = 99
			withOpts := *base
			for range tt.options / 4 {
				// Router alert (RFC 2113): 4 bytes, copied into fragments.
				withOpts.Options = append(withOpts.Options, layers.IPv4Option{OptionType: 0x94, OptionLength: 4, OptionData: []byte{0, 0}})
			}
			var frames [][]byte
			for off := 0; off < len(payload); off += tt.chunk {
				end := min(off+tt.chunk, len(payload))
				hdr := base
				if off == 0 {
					hdr = &withOpts
				}
				frames = append(frames, h.Fragment(t, hdr, off, end < len(payload), payload[off:end]))
			}
			h.Inject(frames...)
			h.WaitCounter(t, "IPv4.ReasmOversize", 1)
			h.ExpectNothing(t)
			c := h.S.Counters()
			if c["IPv4.ReasmOKs"] != 0 || c["UDP.InDatagrams"]+c["UDP.NoPorts"]+c["UDP.InErrors"] != 0 {
				t.Errorf("ReasmOKs %d, UDP saw %d datagrams: an oversized datagram was built",
					c["IPv4.ReasmOKs"], c["UDP.InDatagrams"]+c["UDP.NoPorts"]+c["UDP.InErrors"])
			}
		})
	}
}

func TestReassemblyTimeout(t *testing.T) {
	msg := data(2000)
	tests := []struct {
		name    string
		timeout time.Duration // the configured reassembly timeout; 0 the default
		sent    []int         // which fragments arrive
		// wantQuote: an ICMP time exceeded quoting fragment 0 comes out
		wantQuote bool
	}{
		{"first fragment arrived", 0, []int{0}, true},
		{"first fragment arrived, configured timeout", 5 * time.Second, []int{0}, true},
		{"first and last arrived", 0, []int{0, 2}, true},
		{"first fragment missing", 0, []int{1}, false},
		{"only the last arrived", 5 * time.Second, []int{2}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{IPv4: ipv4.Config{ReassemblyTimeout: tt.timeout}})
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 30 * time.Second
			}
			h.LearnPeer(t)
			frags := h.Fragments(t, echoHeader(5), rawtest.EchoBytes(t, 8, 1, 1, msg), 800)
			for _, i := range tt.sent {
				h.Inject(frags[i])
			}
			h.WaitCounter(t, "IPv4.ReasmReqds", int64(len(tt.sent)))
			h.Advance(t, 1, timeout-time.Nanosecond)
			h.ExpectNothing(t)
			h.Clock.Advance(time.Nanosecond)
			h.WaitCounter(t, "IPv4.ReasmTimeouts", 1)
			if !tt.wantQuote {
				h.ExpectNothing(t)
				if got := h.Counter(t, "ICMP.OutTimeExcds"); got != 0 {
					t.Errorf("OutTimeExcds = %d", got)
				}
				return
			}
			f := h.Expect(t, rawtest.Timeout)
			ip, m := rawtest.ICMPOf(t, f)
			if m.TypeCode != layers.CreateICMPv4TypeCode(layers.ICMPv4TypeTimeExceeded, layers.ICMPv4CodeFragmentReassemblyTimeExceeded) {
				t.Fatalf("got %s, want time exceeded, reassembly", rawtest.Describe(f))
			}
			if rawtest.Addr(ip.SrcIP) != rawtest.StackAddr || rawtest.Addr(ip.DstIP) != rawtest.PeerAddr {
				t.Errorf("error %v > %v", ip.SrcIP, ip.DstIP)
			}
			// RFC 792: the quote is the first fragment's header and data,
			// as much as fits in 576 bytes (RFC 1812 section 4.3.2.3).
			first := frags[0][14:]
			if want := first[:576-28]; !bytes.Equal(m.Payload, want) {
				t.Errorf("quote of %d bytes differs from the first %d bytes of fragment 0", len(m.Payload), len(want))
			}
			if ip.Length != 576 {
				t.Errorf("error datagram of %d bytes, want 576", ip.Length)
			}
			h.ExpectNothing(t)
		})
	}
}

func TestMaxReassembliesEvictsTheOldestDatagram(t *testing.T) {
	h := rawtest.New(t, stack.Config{IPv4: ipv4.Config{MaxReassemblies: 2}})
	h.LearnPeer(t)
	msg := data(1500)
	var sets [3][][]byte
	for i := range sets {
		sets[i] = h.Fragments(t, echoHeader(uint16(100+i)), rawtest.EchoBytes(t, 8, 1, uint16(i), msg), 1024)
		h.Inject(sets[i][0])
	}
	// The third datagram's first fragment evicted the first datagram.
	h.WaitCounter(t, "IPv4.ReasmEvictions", 1)
	for _, set := range sets[1:] {
		h.Inject(set[1])
	}
	// The second and third complete.
	for range 2 {
		if _, m := echoReply(t, h); m.Seq == 0 {
			t.Errorf("reply to seq 0, whose assembly was evicted")
		}
	}
	h.ExpectNothing(t)
	if got := h.Counter(t, "IPv4.ReasmOKs"); got != 2 {
		t.Errorf("ReasmOKs = %d, want 2", got)
	}
	if got := h.Counter(t, "IPv4.ReasmLimit"); got != 0 {
		t.Errorf("ReasmLimit = %d, want 0: no fragment refused", got)
	}
}

// A flood of incomplete datagrams does not lock reassembly out until the
// timeout: a whole datagram sent after it is still reassembled.
func TestFragmentFloodDoesNotBlockReassembly(t *testing.T) {
	h := rawtest.New(t, stack.Config{IPv4: ipv4.Config{MaxReassemblies: 4}})
	h.LearnPeer(t)
	msg := data(1500)
	for i := range 50 {
		frags := h.Fragments(t, echoHeader(uint16(1000+i)), rawtest.EchoBytes(t, 8, 1, uint16(100+i), msg), 1024)
		h.Inject(frags[0]) // never completed
	}
	frags := h.Fragments(t, echoHeader(7), rawtest.EchoBytes(t, 8, 1, 7, msg), 1024)
	h.Inject(frags...)
	if _, m := echoReply(t, h); m.Seq != 7 {
		t.Fatalf("reply to seq %d, want 7", m.Seq)
	}
}

func TestMemoryLimitsRefuseFragmentsCleanly(t *testing.T) {
	tests := []struct {
		name        string
		cfg         stack.Config
		wantRefused uint64 // by the stack's budget
	}{
		{"stack memory budget", stack.Config{MemoryLimit: 2500}, 2},
		{"reassembly bytes", stack.Config{IPv4: ipv4.Config{MaxReassemblyBytes: 2500}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, tt.cfg)
			h.LearnPeer(t)
			frags := h.Fragments(t, echoHeader(8), rawtest.EchoBytes(t, 8, 1, 1, data(4000)), 1480)
			h.Inject(frags...)
			// 1500 bytes fit, the next 1500 and the last 1068 do not.
			h.WaitCounter(t, "IPv4.ReasmLimit", 2)
			if got := h.S.Budget().Refused(); got != tt.wantRefused {
				t.Errorf("budget refused %d, want %d", got, tt.wantRefused)
			}
			if used := h.S.Budget().Used(); used != 1500 {
				t.Errorf("budget used %d, want 1500", used)
			}
			h.ExpectNothing(t)
			// The stack still works, and the timeout gives the bytes back.
			h.Advance(t, 1, 30*time.Second)
			h.WaitCounter(t, "IPv4.ReasmTimeouts", 1)
			h.Expect(t, rawtest.Timeout) // time exceeded: fragment 0 came
			h.WaitCounter(t, "IPv4.ReasmBytes", 0)
			if used := h.S.Budget().Used(); used != 0 {
				t.Errorf("budget used %d after the timeout", used)
			}
		})
	}
}

func TestMalformedFragmentDiscardsTheDatagram(t *testing.T) {
	tests := []struct {
		name  string
		frags [][3]int // offset, length, more
	}{
		{"non-final fragment not a multiple of 8", [][3]int{{0, 12, 1}}},
		{"empty non-final fragment", [][3]int{{0, 16, 1}, {16, 0, 1}}},
		{"two different ends", [][3]int{{16, 8, 0}, {32, 8, 0}}},
		{"a fragment past the end", [][3]int{{16, 8, 0}, {24, 8, 1}}},
		{"an end before a fragment held", [][3]int{{16, 16, 1}, {8, 8, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			h.LearnPeer(t)
			payload := rawtest.EchoBytes(t, 8, 1, 1, data(64))
			for _, f := range tt.frags {
				h.Inject(h.Fragment(t, echoHeader(4), f[0], f[2] == 1, payload[f[0]:f[0]+f[1]]))
			}
			h.WaitCounter(t, "IPv4.ReasmMalformed", 1)
			h.ExpectNothing(t)
		})
	}
}

func TestUnknownProtocolIsAnsweredWithProtocolUnreachable(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	hdr := rawtest.IPv4Header(rawtest.PeerAddr, rawtest.StackAddr, 253) // RFC 3692 experimental
	f := h.IPFrame(t, hdr, rawtest.Payload(data(30)))
	h.Inject(f)
	out := h.Expect(t, rawtest.Timeout)
	ip, m := rawtest.ICMPOf(t, out)
	if m.TypeCode != layers.CreateICMPv4TypeCode(layers.ICMPv4TypeDestinationUnreachable, layers.ICMPv4CodeProtocol) {
		t.Fatalf("got %s, want protocol unreachable", rawtest.Describe(out))
	}
	if rawtest.Addr(ip.SrcIP) != rawtest.StackAddr || rawtest.Addr(ip.DstIP) != rawtest.PeerAddr || ip.Protocol != layers.IPProtocolICMPv4 {
		t.Errorf("error %v > %v proto %v", ip.SrcIP, ip.DstIP, ip.Protocol)
	}
	if want := f[14 : 14+50]; !bytes.Equal(m.Payload, want) {
		t.Errorf("quote %x, want the whole datagram %x", m.Payload, want)
	}
	if got := h.Counter(t, "IPv4.InUnknownProtos"); got != 1 {
		t.Errorf("InUnknownProtos = %d", got)
	}
	// To a broadcast address, no error (RFC 1122 section 3.2.2).
	h.Inject(h.IPFrame(t, rawtest.IPv4Header(rawtest.PeerAddr, rawtest.SubnetBroadcast, 253), rawtest.Payload(data(30))))
	h.WaitCounter(t, "IPv4.InUnknownProtos", 2)
	h.ExpectNothing(t)
}

func TestFragmentsOnSendAtMTUBoundaries(t *testing.T) {
	tests := []struct {
		mtu, size int
		frags     int
	}{
		{1500, 1472, 1},
		{1500, 1473, 2},
		{1500, 2952, 2}, // 8+2952 = 2*1480
		{1500, 2953, 3},
		{1500, 65507, 45},
		{576, 1000, 2},
		{1006, 5000, 6}, // odd MTU: 984-byte chunks
		{68, 1000, 21},  // the minimum MTU: 48-byte chunks
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("MTU %d, %d bytes", tt.mtu, tt.size), func(t *testing.T) {
			h := rawtest.New(t, stack.Config{}, rawtest.MTU(tt.mtu))
			h.LearnPeer(t)
			c, err := h.S.ListenUDP(netip.AddrPortFrom(rawtest.StackAddr, 4000))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			msg := data(tt.size)
			if _, err := c.WriteToUDPAddrPort(msg, netip.AddrPortFrom(rawtest.PeerAddr, 5000)); err != nil {
				t.Fatal(err)
			}
			whole, frags := datagram(t, h)
			if len(frags) != tt.frags {
				t.Errorf("%d fragments, want %d", len(frags), tt.frags)
			}
			for i, f := range frags {
				last := i == len(frags)-1
				if int(f.Length) > tt.mtu {
					t.Errorf("fragment %d: %d bytes exceeds the MTU", i, f.Length)
				}
				if (f.Flags&layers.IPv4MoreFragments != 0) == last && len(frags) > 1 {
					t.Errorf("fragment %d of %d: flags %v", i, len(frags), f.Flags)
				}
				if f.Flags&layers.IPv4DontFragment != 0 {
					t.Errorf("fragment %d: DF set", i)
				}
				if !last && (int(f.Length)-20)%8 != 0 {
					t.Errorf("fragment %d carries %d bytes, not a multiple of 8", i, int(f.Length)-20)
				}
				if f.Id != frags[0].Id {
					t.Errorf("fragment %d: id %d, first had %d", i, f.Id, frags[0].Id)
				}
				if i > 0 && int(f.FragOffset)*8 != int(frags[i-1].FragOffset)*8+int(frags[i-1].Length)-20 {
					t.Errorf("fragment %d at offset %d does not follow fragment %d", i, int(f.FragOffset)*8, i-1)
				}
			}
			if len(frags) > 1 && int(frags[0].Length) < tt.mtu-7 {
				t.Errorf("first fragment of %d bytes does not fill the MTU of %d", frags[0].Length, tt.mtu)
			}
			u := &layers.UDP{}
			if err := u.DecodeFromBytes(whole.Payload, gopacket.NilDecodeFeedback); err != nil {
				t.Fatal(err)
			}
			if err := u.SetNetworkLayerForChecksum(whole); err != nil {
				t.Fatal(err)
			}
			if _, v := u.VerifyChecksum(); !v.Valid {
				t.Errorf("reassembled UDP checksum %#04x, want %#04x", v.Actual, v.Correct)
			}
			if u.SrcPort != 4000 || u.DstPort != 5000 || !bytes.Equal(u.Payload, msg) {
				t.Errorf("reassembled UDP %d > %d with %d bytes, want 4000 > 5000 with %d", u.SrcPort, u.DstPort, len(u.Payload), len(msg))
			}
			wantCreates := int64(tt.frags)
			if tt.frags == 1 {
				wantCreates = 0
			}
			if got := h.Counter(t, "IPv4.FragCreates"); got != wantCreates {
				t.Errorf("FragCreates = %d, want %d", got, wantCreates)
			}
		})
	}
}

func TestDontFragmentTooLargeIsEMSGSIZE(t *testing.T) {
	tests := []struct {
		name    string
		size    int // transport bytes
		df      bool
		wantErr bool
	}{
		{"DF, fits the MTU", 1480, true, false},
		{"DF, one byte over", 1481, true, true},
		{"no DF, one byte over fragments", 1481, false, false},
		{"over 65535 even without DF", 65516, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			h.LearnPeer(t)
			pk := h.S.Pool().Get(tt.size)
			copy(pk.Bytes(), data(tt.size))
			err := h.S.IPv4().Send(pk, ip.SendParams{Dst: rawtest.PeerAddr, Proto: 253, DF: tt.df})
			if !tt.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				ip, _ := datagram(t, h)
				if len(ip.Payload) != tt.size || (ip.Flags&layers.IPv4DontFragment != 0) != tt.df {
					t.Errorf("sent %d bytes with flags %v", len(ip.Payload), ip.Flags)
				}
				return
			}
			if !errors.Is(err, syscall.EMSGSIZE) || !ipv4.IsMessageTooLong(err) {
				t.Fatalf("Send = %v, want EMSGSIZE", err)
			}
			h.ExpectNothing(t)
			if tt.df {
				if got := h.Counter(t, "IPv4.FragFails"); got != 1 {
					t.Errorf("FragFails = %d", got)
				}
			}
		})
	}
}

func TestReassembledDatagramKeepsTheFirstFragmentsHeader(t *testing.T) {
	// The reassembled datagram takes the first fragment's header (RFC 791),
	// so an echo with DF on its fragments is answered whole.
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	hdr := echoHeader(12)
	hdr.TOS = 0x10
	frags := h.Fragments(t, hdr, rawtest.EchoBytes(t, 8, 1, 1, data(1000)), 512)
	h.Inject(frags...)
	ip, m := echoReply(t, h)
	if len(m.Payload) != 1000 || ip.TOS != 0x10 {
		t.Errorf("reply with %d bytes, TOS %#x; want 1000 and the request's 0x10", len(m.Payload), ip.TOS)
	}
}
