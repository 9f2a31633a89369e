// Package rawtest drives one GoNet stack through a raw wire, as gVisor's
// protocol tests do: the stack has one NIC on one end of a link/pipe, the
// test holds the other end, injects hand-built Ethernet frames and reads what
// the stack sends back. Frames are built and decoded with gopacket, an
// encoder independent of GoNet's wire package, so that the two check each
// other.
//
// Protocol time runs on a clock.Virtual that the test advances; the wall
// clock is only used to wait, with a timeout, for the stack's goroutines to
// produce a frame. When the test ends the harness closes the stack and checks
// that it gave back every buffer and every byte of its memory budget, and
// that none of its goroutines is left.
package rawtest

import (
	"bytes"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/stack"
)

// The wire's addresses. The stack is StackAddr on NIC; the test speaks for
// the peer and for any other neighbour on the subnet.
var (
	StackMAC  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x02}
	PeerMAC   = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	StackAddr = netip.MustParseAddr("10.1.0.2")
	PeerAddr  = netip.MustParseAddr("10.1.0.1")
	Prefix    = netip.PrefixFrom(StackAddr, 24)
	// SubnetBroadcast is the directed broadcast of Prefix.
	SubnetBroadcast = netip.MustParseAddr("10.1.0.255")
	// LimitedBroadcast is 255.255.255.255.
	LimitedBroadcast = netip.MustParseAddr("255.255.255.255")
	// BroadcastMAC is the Ethernet broadcast address.
	BroadcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

	// BarrierMAC and BarrierAddr are the neighbour Barrier speaks for;
	// tests should not use them.
	BarrierMAC  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xfe}
	BarrierAddr = netip.MustParseAddr("10.1.0.254")

	// Start is the virtual clock's initial time.
	Start = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
)

// NIC is the name of the stack's NIC.
const NIC = "eth0"

// Timeout is how long Expect waits, on the wall clock, for the stack's
// goroutines to send a frame. It bounds a wait for concurrency, not a
// protocol timer, so it is generous: a passing test never waits for it.
const Timeout = 10 * time.Second

// Option changes how New builds the host.
type Option func(*options)

type options struct {
	mtu     int
	manual  bool
	offload bool
	ipv6    bool
}

// MTU sets the pipe's MTU (1500 by default).
func MTU(n int) Option { return func(o *options) { o.mtu = n } }

// IPv6 runs the stack's IPv6 too. Without it the stack is IPv4-only
// (stack.Config.NoIPv6): the harness's frames and expectations are IPv4's,
// and an IPv6 host sends neighbour discovery and MLD of its own accord.
func IPv6() Option { return func(o *options) { o.ipv6 = true } }

// Manual leaves the wire to the test: no goroutine reads it, and the test
// reads frames with ReadBatch on Wire. Benchmarks use it so that the harness
// allocates nothing per frame.
func Manual() Option { return func(o *options) { o.manual = true } }

// Host is a stack with one NIC on a raw wire.
type Host struct {
	// S is the stack under test.
	S *stack.Stack
	// Clock is the stack's clock when it is virtual (the default), or nil.
	Clock *clock.Virtual
	// Wire is the test's end of the pipe.
	Wire *pipe.Endpoint
	// Announcement is the gratuitous ARP request the stack sent when New
	// assigned it StackAddr.
	Announcement []byte

	tb      testing.TB
	nicEnd  *pipe.Endpoint
	offload *offloadLink // with the Offload option
	mtu     int
	pool    *buffer.Pool // the harness's own, for injected and read frames

	injMu sync.Mutex
	inj   []*buffer.Packet

	frames     chan []byte
	stop       chan struct{}
	readerDone chan struct{}

	barrierSeq uint16
}

// New returns a running stack configured by cfg, with NIC on a pipe whose
// other end the test holds and StackAddr/24 assigned. A nil cfg.Clock is a
// clock.Virtual at Start; a nil cfg.Rand is rand.NewPCG(1, 2). The
// gratuitous ARP announcing StackAddr is read into Announcement. When the
// test ends, New's cleanup closes the stack and fails the test if a buffer,
// a byte of the budget or a goroutine of the stack is left.
func New(tb testing.TB, cfg stack.Config, opts ...Option) *Host {
	tb.Helper()
	ignore := goleak.IgnoreCurrent()
	o := options{mtu: 1500}
	for _, f := range opts {
		f(&o)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.NewVirtual(Start)
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.NewPCG(1, 2)
	}
	cfg.NoIPv6 = !o.ipv6
	vc, _ := cfg.Clock.(*clock.Virtual)
	nicEnd, wireEnd := pipe.New(o.mtu, StackMAC, PeerMAC)
	h := &Host{
		S:          stack.New(cfg),
		Clock:      vc,
		Wire:       wireEnd,
		tb:         tb,
		nicEnd:     nicEnd,
		mtu:        o.mtu,
		pool:       buffer.NewPool(),
		inj:        make([]*buffer.Packet, 0, buffer.MaxBatch),
		frames:     make(chan []byte, 1<<14),
		stop:       make(chan struct{}),
		readerDone: make(chan struct{}),
	}
	tb.Cleanup(func() { h.close(ignore) })
	var nicEP link.Endpoint = nicEnd
	if o.offload {
		h.offload = &offloadLink{Endpoint: nicEnd, pool: h.pool}
		nicEP = h.offload
	}
	if err := h.S.AddNIC(NIC, nicEP); err != nil {
		tb.Fatalf("rawtest: %v", err)
	}
	if o.manual {
		close(h.readerDone)
	} else {
		go h.read()
	}
	if err := h.S.AddAddress(NIC, Prefix); err != nil {
		tb.Fatalf("rawtest: %v", err)
	}
	if o.manual {
		pk := h.pool.Get(link.MaxFrame(o.mtu))
		defer pk.Release()
		if _, err := h.Wire.ReadBatch([]*buffer.Packet{pk}); err != nil {
			tb.Fatalf("rawtest: reading the announcement: %v", err)
		}
		h.Announcement = bytes.Clone(pk.Bytes())
	} else {
		h.Announcement = h.Expect(tb, Timeout)
	}
	return h
}

// close runs when the test ends.
func (h *Host) close(ignore goleak.Option) {
	tb := h.tb
	if err := h.S.Close(); err != nil {
		tb.Errorf("rawtest: closing the stack: %v", err)
	}
	h.nicEnd.Close() // in case AddNIC failed; closing twice does nothing
	h.Wire.Close()
	close(h.stop)
	<-h.readerDone
	if n := h.S.Pool().Outstanding(); n != 0 {
		tb.Errorf("rawtest: %d buffers not returned to the stack's pool", n)
	}
	if u := h.S.Budget().Used(); u != 0 {
		tb.Errorf("rawtest: %d bytes of the memory budget still reserved", u)
	}
	if n := h.pool.Outstanding(); n != 0 {
		tb.Errorf("rawtest: %d buffers not returned to the harness's pool", n)
	}
	goleak.VerifyNone(tb, ignore)
}

// read copies every frame the stack sends into h.frames.
func (h *Host) read() {
	defer close(h.readerDone)
	pkts := make([]*buffer.Packet, buffer.MaxBatch)
	for i := range pkts {
		pkts[i] = h.pool.Get(link.MaxFrame(h.mtu))
	}
	defer func() {
		for _, p := range pkts {
			p.Release()
		}
	}()
	for {
		n, err := h.Wire.ReadBatch(pkts)
		if err != nil {
			return
		}
		for _, p := range pkts[:n] {
			select {
			case h.frames <- bytes.Clone(p.Bytes()):
			case <-h.stop:
				return
			}
		}
	}
}

// Inject writes frames to the stack's NIC, in order.
func (h *Host) Inject(frames ...[]byte) {
	h.injMu.Lock()
	defer h.injMu.Unlock()
	for len(frames) > 0 {
		n := min(len(frames), buffer.MaxBatch)
		for _, f := range frames[:n] {
			pk := h.pool.Get(len(f))
			copy(pk.Bytes(), f)
			h.inj = append(h.inj, pk)
		}
		st := h.Wire.Stats()
		lost := st.TxDropped.Load() + st.TxErrors.Load()
		_, err := h.Wire.WriteBatch(h.inj)
		for _, pk := range h.inj {
			pk.Release()
		}
		clear(h.inj)
		h.inj = h.inj[:0]
		if err != nil {
			h.tb.Errorf("rawtest: inject: %v", err)
			return
		}
		if d := st.TxDropped.Load() + st.TxErrors.Load() - lost; d != 0 {
			h.tb.Errorf("rawtest: inject: the pipe dropped %d of %d frames (queue full or malformed)", d, n)
		}
		frames = frames[n:]
	}
}

// Expect returns the next frame the stack sent, failing the test when none
// comes within timeout of wall-clock time.
func (h *Host) Expect(tb testing.TB, timeout time.Duration) []byte {
	tb.Helper()
	select {
	case f := <-h.frames:
		return f
	case <-time.After(timeout):
		tb.Fatalf("rawtest: the stack sent no frame within %v", timeout)
		return nil
	}
}

// ExpectN returns the next n frames the stack sent.
func (h *Host) ExpectN(tb testing.TB, n int) [][]byte {
	tb.Helper()
	out := make([][]byte, n)
	for i := range out {
		out[i] = h.Expect(tb, Timeout)
	}
	return out
}

// Pending returns the frames the stack has sent and the test not read yet,
// without waiting.
func (h *Host) Pending() [][]byte {
	var out [][]byte
	for {
		select {
		case f := <-h.frames:
			out = append(out, f)
		default:
			return out
		}
	}
}

// Barrier makes sure the stack has handled every frame injected before it,
// and returns the frames the stack sent meanwhile. It asks the ARP dealer
// (an ARP request from BarrierAddr) and then the IPv4 dealer (an echo
// request from BarrierAddr) a question and reads up to their answers: each
// dealer handles its frames in order, so anything they send about earlier
// frames comes first. Output of other goroutines (ARP resolutions, timers)
// is not ordered by it.
//
// The barrier shows in the counters: one more ARP request and reply, one
// more echo request and reply, and BarrierAddr in the ARP cache.
func (h *Host) Barrier(tb testing.TB) [][]byte {
	tb.Helper()
	var seen [][]byte
	h.Inject(h.ARPFrame(tb, 1, BarrierMAC, BarrierAddr, nil, StackAddr))
	for {
		f := h.Expect(tb, Timeout)
		if isBarrierARPReply(f) {
			break
		}
		seen = append(seen, f)
	}
	h.barrierSeq++
	seq := h.barrierSeq
	h.Inject(h.IPFrameFrom(tb, BarrierMAC, IPv4Header(BarrierAddr, StackAddr, 1), Payload(EchoBytes(tb, 8, barrierIdent, seq, []byte("barrier")))))
	for {
		f := h.Expect(tb, Timeout)
		if isBarrierEchoReply(f, seq) {
			break
		}
		seen = append(seen, f)
	}
	return seen
}

const barrierIdent = 0xba77

// ExpectNothing fails the test if the stack sent anything about the frames
// injected so far (see Barrier).
func (h *Host) ExpectNothing(tb testing.TB) {
	tb.Helper()
	for _, f := range h.Barrier(tb) {
		tb.Errorf("rawtest: unexpected frame: %s", Describe(f))
	}
}

// Learn teaches the stack that ip is at mac, as a neighbour's ARP request
// for StackAddr does, and consumes the stack's reply.
func (h *Host) Learn(tb testing.TB, ip netip.Addr, mac net.HardwareAddr) {
	tb.Helper()
	h.Inject(h.ARPFrame(tb, 1, mac, ip, nil, StackAddr))
	f := h.Expect(tb, Timeout)
	_, a := ARPOf(tb, f)
	if a.Operation != 2 || !bytes.Equal(a.DstHwAddress, mac) || netip.AddrFrom4([4]byte(a.DstProtAddress)) != ip {
		tb.Fatalf("rawtest: learn %v: expected the ARP reply, got %s", ip, Describe(f))
	}
}

// LearnPeer is Learn for PeerAddr at PeerMAC.
func (h *Host) LearnPeer(tb testing.TB) { tb.Helper(); h.Learn(tb, PeerAddr, PeerMAC) }

// Counter returns a stack counter by its dotted name ("IPv4.ReasmOKs"),
// failing the test for a name the stack does not have.
func (h *Host) Counter(tb testing.TB, name string) int64 {
	tb.Helper()
	v, ok := h.S.Counters()[name]
	if !ok {
		tb.Fatalf("rawtest: the stack has no counter %q", name)
	}
	return v
}

// WaitCounter waits, on the wall clock, for the stack's goroutines to bring
// a counter to want, and fails the test when they do not within Timeout.
func (h *Host) WaitCounter(tb testing.TB, name string, want int64) {
	tb.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		got := h.Counter(tb, name)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("rawtest: %s = %d, want %d", name, got, want)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// WaitTimers waits until at least n timers are armed on the virtual clock,
// so that the test advances time only once the goroutine under test waits
// on it. It fails the test after Timeout of wall-clock time.
func (h *Host) WaitTimers(tb testing.TB, n int) {
	tb.Helper()
	if h.Clock == nil {
		tb.Fatal("rawtest: WaitTimers needs the virtual clock")
	}
	armed := make(chan struct{})
	go func() {
		h.Clock.WaitPending(n)
		close(armed)
	}()
	select {
	case <-armed:
	case <-time.After(Timeout):
		tb.Fatalf("rawtest: %d timers armed after %v, want %d", h.Clock.Pending(), Timeout, n)
	}
}

// Advance waits for n armed timers and moves the virtual clock by d.
func (h *Host) Advance(tb testing.TB, n int, d time.Duration) {
	tb.Helper()
	h.WaitTimers(tb, n)
	h.Clock.Advance(d)
}

// ReadFrames reads the frames the stack sent into pkts, blocking until there
// is at least one, for tests built with Manual. Each packet needs room for a
// frame of the MTU (see NewFrameBuffers).
func (h *Host) ReadFrames(pkts []*buffer.Packet) int {
	n, err := h.Wire.ReadBatch(pkts)
	if err != nil {
		h.tb.Errorf("rawtest: read: %v", err)
	}
	return n
}

// NewFrameBuffers returns n packets with room for a frame of the MTU, from
// the harness's pool; the cleanup checks they were released.
func (h *Host) NewFrameBuffers(n int) []*buffer.Packet {
	pkts := make([]*buffer.Packet, n)
	for i := range pkts {
		pkts[i] = h.pool.Get(link.MaxFrame(h.mtu))
	}
	return pkts
}
