package integration

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/services"
)

// Blind injection (RFC 5961) against an established connection between a
// kernel client and GoNet's echo service: the raw socket forges segments
// from the kernel's address and port to GoNet with sequence numbers in and
// out of GoNet's receive window, and the connection must survive every one
// that does not hit RCV.NXT exactly.

// sniffer is a link wrapper that watches GoNet's TCP segments both ways,
// to learn the sequence numbers a real attacker would have to guess.
type sniffer struct {
	link.Endpoint
	mu sync.Mutex
	// For each kernel port: the end of the kernel's sequence space seen
	// (its SND.NXT: GoNet's RCV.NXT once all has arrived), and GoNet's.
	kernelNxt, gonetNxt map[uint16]uint32
	gonetWnd            map[uint16]uint16 // the last window field GoNet sent
	kernelTS            map[uint16]uint32 // the kernel's newest timestamp value
}

func newSniffer(t *testing.T, ep link.Endpoint) link.Endpoint {
	return &sniffer{Endpoint: ep, kernelNxt: map[uint16]uint32{}, gonetNxt: map[uint16]uint32{}, gonetWnd: map[uint16]uint16{}, kernelTS: map[uint16]uint32{}}
}

func (s *sniffer) ReadBatch(pkts []*buffer.Packet) (int, error) {
	n, err := s.Endpoint.ReadBatch(pkts)
	for _, p := range pkts[:n] {
		s.watch(p.Bytes(), true)
	}
	return n, err
}

func (s *sniffer) WriteBatch(pkts []*buffer.Packet) (int, error) {
	for _, p := range pkts {
		s.watch(p.Bytes(), false)
	}
	return s.Endpoint.WriteBatch(pkts)
}

// watch notes the sequence space an Ethernet frame's TCP segment covers.
func (s *sniffer) watch(f []byte, fromKernel bool) {
	if len(f) < 14+20 || binary.BigEndian.Uint16(f[12:]) != 0x0800 {
		return
	}
	ip := f[14:]
	ihl := int(ip[0]&0xf) * 4
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if ip[9] != 6 || total > len(ip) || total < ihl+20 || binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 {
		return // not TCP, or a fragment
	}
	tcp := ip[ihl:total]
	doff := int(tcp[12]>>4) * 4
	if doff < 20 || doff > len(tcp) {
		return
	}
	seq := binary.BigEndian.Uint32(tcp[4:])
	end := seq + uint32(len(tcp)-doff)
	if tcp[13]&(rawtest.SYN|rawtest.FIN) != 0 {
		end++
	}
	port := binary.BigEndian.Uint16(tcp[0:]) // the kernel's: source
	nxt := s.kernelNxt
	if !fromKernel {
		port = binary.BigEndian.Uint16(tcp[2:])
		nxt = s.gonetNxt
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := nxt[port]; !ok || int32(end-old) > 0 {
		nxt[port] = end
	}
	if !fromKernel {
		s.gonetWnd[port] = binary.BigEndian.Uint16(tcp[14:])
	} else if ts, ok := tsVal(tcp[20:doff]); ok {
		if old, seen := s.kernelTS[port]; !seen || int32(ts-old) > 0 {
			s.kernelTS[port] = ts
		}
	}
}

// tsVal returns the timestamp value in TCP options, if there is one.
func tsVal(opts []byte) (uint32, bool) {
	for len(opts) > 0 {
		switch opts[0] {
		case 0: // end of options
			return 0, false
		case 1: // no-op
			opts = opts[1:]
			continue
		}
		if len(opts) < 2 || int(opts[1]) < 2 || int(opts[1]) > len(opts) {
			return 0, false
		}
		if opts[0] == 8 && opts[1] == 10 {
			return binary.BigEndian.Uint32(opts[2:]), true
		}
		opts = opts[opts[1]:]
	}
	return 0, false
}

// timestamp returns the kernel's newest timestamp value on the connection
// from port, and whether it sends them.
func (s *sniffer) timestamp(port uint16) (uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts, ok := s.kernelTS[port]
	return ts, ok
}

// seqs returns the kernel's and GoNet's SND.NXT on the connection from the
// kernel's port, and the last window field GoNet sent on it.
func (s *sniffer) seqs(port uint16) (kernel, gonet uint32, wnd uint16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kernelNxt[port], s.gonetNxt[port], s.gonetWnd[port]
}

// injectionTarget is a kernel client of GoNet's echo service, quiet after
// an exchange, with what the sniffer learnt of its sequence numbers.
type injectionTarget struct {
	h      *host
	raw    *rawSender
	c      *net.TCPConn
	kernel netip.AddrPort // the forged source
	gonet  netip.AddrPort
	rcvNxt uint32 // GoNet's RCV.NXT
	sndNxt uint32 // GoNet's SND.NXT
	// The kernel's newest timestamp, which forged segments carry as a
	// sniffing attacker's would: once timestamps are negotiated GoNet
	// drops segments without one before any other test (RFC 7323 3.2).
	ts    uint32
	hasTS bool
}

func newInjectionTarget(t *testing.T) *injectionTarget {
	t.Helper()
	var sn *sniffer
	h := newHost(t, options{wrap: func(t *testing.T, ep link.Endpoint) link.Endpoint {
		sn = newSniffer(t, ep).(*sniffer)
		return sn
	}})
	t.Cleanup(func() { h.logCounters(t, false) })
	h.serve(t, 7, services.ServeEchoTCP)
	c := h.kernelConn(t, gonetTCPAddr(7))
	echoes(t, c, 3)
	it := &injectionTarget{h: h, raw: h.rawSender(t), c: c,
		kernel: c.LocalAddr().(*net.TCPAddr).AddrPort(), gonet: c.RemoteAddr().(*net.TCPAddr).AddrPort()}
	// Quiet: the kernel's ACK of the last echo has reached GoNet.
	time.Sleep(100 * time.Millisecond)
	var wnd uint16
	it.rcvNxt, it.sndNxt, wnd = sn.seqs(it.kernel.Port())
	it.ts, it.hasTS = sn.timestamp(it.kernel.Port())
	t.Logf("GoNet's RCV.NXT %d, SND.NXT %d, window field %d", it.rcvNxt, it.sndNxt, wnd)
	if st := it.state(); st != "ESTABLISHED" {
		t.Fatalf("GoNet's end is %q", st)
	}
	return it
}

// state returns the state of GoNet's end of the connection ("" when it has
// left the table).
func (it *injectionTarget) state() string {
	for _, row := range it.h.stack.Connections() {
		if row.Local == it.gonet && row.Remote == it.kernel {
			return row.State
		}
	}
	return ""
}

// inject sends a forged segment from the kernel's address and port.
func (it *injectionTarget) inject(t *testing.T, flags uint8, seq, ack uint32, payload []byte) {
	t.Helper()
	seg := rawtest.TCPSegment{Src: it.kernel, Dst: it.gonet, Seq: seq, Ack: ack, Flags: flags, Window: 1000, Payload: payload}
	if it.hasTS {
		seg.Opts = rawtest.TCPOpts{HasTimestamp: true, TSVal: it.ts}
	}
	if err := it.raw.send(tcpDatagram(t, seg)); err != nil {
		t.Fatalf("inject %v: %v", seg, err)
	}
}

func TestInjectionBlindSegmentsOutsideRCVNXTChangeNothing(t *testing.T) {
	checkGoroutines(t)
	it := newInjectionTarget(t)
	h := it.h
	// Each injection, and what GoNet must make of it. Challenges come
	// 600 ms apart: GoNet sends at most one per 500 ms per connection
	// (ChallengeACKInterval, as Linux's tcp_invalid_ratelimit).
	tests := []struct {
		name       string
		flags      uint8
		seq, ack   uint32
		payload    []byte
		challenge  bool   // a challenge ACK is sent
		counter    string // and this counter moves
		countDelta int64
	}{
		{"RST at RCV.NXT-1", rawtest.RST, it.rcvNxt - 1, 0, nil, false, "OutOfWindow", 1},
		{"RST in the window", rawtest.RST, it.rcvNxt + 1000, 0, nil, true, "ChallengeACKs", 1},
		{"RST at RCV.NXT+1", rawtest.RST | rawtest.ACK, it.rcvNxt + 1, it.sndNxt, nil, true, "ChallengeACKs", 1},
		{"RST out of the window", rawtest.RST, it.rcvNxt + 1<<30, 0, nil, false, "OutOfWindow", 1},
		{"data out of the window", rawtest.PSH | rawtest.ACK, it.rcvNxt + 1<<30, it.sndNxt, []byte("FORGED"), false, "OutOfWindow", 1},
		{"data before the window", rawtest.PSH | rawtest.ACK, it.rcvNxt - 100000, it.sndNxt, []byte("FORGED"), false, "OutOfWindow", 1},
		{"data in the window, ACK of unsent data", rawtest.PSH | rawtest.ACK, it.rcvNxt + 10, it.sndNxt + 1<<20, []byte("FORGED"), true, "BadACKs", 1},
		{"data in the window, ACK too old", rawtest.PSH | rawtest.ACK, it.rcvNxt + 10, it.sndNxt - 1<<30, []byte("FORGED"), true, "BadACKs", 1},
		{"SYN in the window", rawtest.SYN, it.rcvNxt + 5, 0, nil, true, "ChallengeACKs", 1},
		{"SYN out of the window", rawtest.SYN, it.rcvNxt - 5000, 0, nil, true, "ChallengeACKs", 1},
		{"data in the window without a timestamp", rawtest.PSH | rawtest.ACK, it.rcvNxt + 10, it.sndNxt, []byte("FORGED"), false, "TSOptMissing", 1},
	}
	if !it.hasTS {
		t.Fatal("the kernel sent no timestamps: net.ipv4.tcp_timestamps is off in the namespace?")
	}
	for _, tt := range tests {
		before := h.stack.Counters()
		if tt.counter == "TSOptMissing" {
			it.hasTS = false
		}
		it.inject(t, tt.flags, tt.seq, tt.ack, tt.payload)
		it.hasTS = true
		waitCounter(t, h, tt.counter, before["TCP."+tt.counter]+tt.countDelta, 5*time.Second)
		time.Sleep(600 * time.Millisecond)
		after := h.stack.Counters()
		got := after["TCP.ChallengeACKs"] - before["TCP.ChallengeACKs"]
		if want := int64(b2i(tt.challenge)); got != want {
			t.Errorf("%s: %d challenge ACKs, want %d", tt.name, got, want)
		}
		if n := after["TCP.InRsts"] - before["TCP.InRsts"]; n != 0 {
			t.Errorf("%s: InRsts moved by %d", tt.name, n)
		}
		if st := it.state(); st != "ESTABLISHED" {
			t.Fatalf("%s: GoNet's end is %q, want ESTABLISHED", tt.name, st)
		}
	}
	// The connection works, and nothing forged reached the application:
	// the echo brings back exactly what the kernel sent.
	echoes(t, it.c, 10)
	c := h.stack.Counters()
	t.Logf("GoNet: %d challenge ACKs (%d held back), %d bad ACKs, %d out of the window", c["TCP.ChallengeACKs"],
		c["TCP.ChallengeACKsLimited"], c["TCP.BadACKs"], c["TCP.OutOfWindow"])
	if c["TCP.ChallengeACKs"] < 6 {
		t.Errorf("ChallengeACKs = %d, want 6", c["TCP.ChallengeACKs"])
	}
}

// A burst of in-window resets, as a blind attacker sweeping the window
// would send: none resets, and the challenge ACKs they earn are held to
// the connection's rate.
func TestInjectionResetSweep(t *testing.T) {
	checkGoroutines(t)
	it := newInjectionTarget(t)
	h := it.h
	// 2000 resets 30 bytes apart, 10,000 a second: every one lands in
	// the window GoNet advertised (at least the SYN-ACK's 65535 bytes),
	// none at RCV.NXT.
	const n = 2000
	start := time.Now()
	for i := range n {
		it.inject(t, rawtest.RST, it.rcvNxt+1+uint32(i)*30, 0, nil)
		if i%50 == 49 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	took := time.Since(start)
	deadline := time.Now().Add(5 * time.Second)
	for h.tcpCounter("ChallengeACKs")+h.tcpCounter("ChallengeACKsLimited") < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	sent, held := h.tcpCounter("ChallengeACKs"), h.tcpCounter("ChallengeACKsLimited")
	t.Logf("%d forged resets in the window in %v: %d challenge ACKs sent, %d held back, %d lost on the way",
		n, took.Round(time.Millisecond), sent, held, n-sent-held)
	// One per 500 ms of the burst, and a little slack.
	if most := int64(took/(500*time.Millisecond)) + 2; sent < 1 || sent > most || sent+held < n*9/10 {
		t.Errorf("challenge ACKs sent %d, held back %d; want 1 to %d sent, the rest of %d held back", sent, held, most, n)
	}
	if st := it.state(); st != "ESTABLISHED" {
		t.Fatalf("GoNet's end is %q, want ESTABLISHED", st)
	}
	echoes(t, it.c, 10)
}

// A reset exactly at RCV.NXT is what RFC 5961 cannot tell from the real
// thing: it resets GoNet's end, and the kernel's next segment is answered
// with a reset, so the kernel's end learns too.
func TestInjectionResetAtRCVNXT(t *testing.T) {
	checkGoroutines(t)
	it := newInjectionTarget(t)
	h := it.h
	it.inject(t, rawtest.RST, it.rcvNxt, 0, nil)
	waitCounter(t, h, "InRsts", 1, 5*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for it.state() != "" {
		if time.Now().After(deadline) {
			t.Fatalf("GoNet's end is still %q", it.state())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := h.tcpCounter("EstabResets"); n != 1 {
		t.Errorf("EstabResets = %d, want 1", n)
	}
	it.c.SetDeadline(time.Now().Add(10 * time.Second))
	it.c.Write([]byte("anyone?"))
	_, err := it.c.Read(make([]byte, 10))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the kernel's read after GoNet reset: %v, want ECONNRESET", err)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
