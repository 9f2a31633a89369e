package tcp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/tcp"
)

// The raw tests drive one stack segment by segment: the test speaks for
// the peer at rawtest.PeerAddr, injects the peer's segments and checks,
// decoded by gopacket, exactly what the stack sends back. Protocol time is
// the virtual clock; the wall clock only bounds waits for goroutines.

const (
	stackPort = 7     // where tests listen
	peerPort  = 40000 // the peer's port in passive opens
	peerISN   = 1000  // the peer's initial sequence number unless a test says
)

var (
	stackAP = netip.AddrPortFrom(rawtest.StackAddr, stackPort)
	peerAP  = netip.AddrPortFrom(rawtest.PeerAddr, peerPort)
)

// rig is a stack on a raw wire, with the frames it sent that a Barrier read
// before the test asked for them.
type rig struct {
	t       testing.TB
	h       *rawtest.Host
	pending [][]byte
}

// newRig returns a stack configured with cfg that knows the peer's MAC
// address for longer than any test runs, so that no ARP comes between
// segments however far the clock moves.
//
// Its connections send no quick ACKs unless cfg.QuickAcks asks for them
// (rawConfig): the raw tests script exact exchanges, and a young
// connection acknowledges a second segment at once or with the first as
// its goroutine happens to meet them, one at a time or in one batch.
// TestQuickAcks and FuzzPeer ask.
func newRig(t testing.TB, cfg tcp.Config) *rig {
	t.Helper()
	h := rawtest.New(t, stack.Config{TCP: rawConfig(cfg), ARP: arp.Config{CacheTTL: 10000 * time.Hour}})
	h.LearnPeer(t)
	return &rig{t: t, h: h}
}

func (r *rig) proto() *tcp.Protocol { return r.h.S.TCP() }

// rawConfig is cfg with quick ACKs off unless it sets QuickAcks (newRig).
func rawConfig(cfg tcp.Config) tcp.Config {
	if cfg.QuickAcks == 0 {
		cfg.QuickAcks = -1
	}
	return cfg
}

// next returns the next frame the stack sent.
func (r *rig) next() []byte {
	r.t.Helper()
	if len(r.pending) > 0 {
		f := r.pending[0]
		r.pending = r.pending[1:]
		return f
	}
	return r.h.Expect(r.t, rawtest.Timeout)
}

// nextSeg returns the next frame the stack sent, as a TCP segment.
func (r *rig) nextSeg() rawtest.TCPSegment {
	r.t.Helper()
	return rawtest.SegmentOf(r.t, r.next())
}

// settle waits until the stack has handled everything injected and every
// connection's goroutine has acted on what was queued for it; what the
// stack sent meanwhile waits in pending.
func (r *rig) settle() {
	r.t.Helper()
	r.pending = append(r.pending, r.h.Barrier(r.t)...)
	ctx, cancel := context.WithTimeout(context.Background(), rawtest.Timeout)
	defer cancel()
	if err := r.h.S.Sync(ctx); err != nil {
		r.t.Fatalf("settle: %v", err)
	}
	r.pending = append(r.pending, r.h.Barrier(r.t)...)
}

// sent settles and returns every frame the stack sent that the test has not
// read yet.
func (r *rig) sent() []rawtest.TCPSegment {
	r.t.Helper()
	r.settle()
	var out []rawtest.TCPSegment
	for _, f := range r.pending {
		out = append(out, rawtest.SegmentOf(r.t, f))
	}
	r.pending = nil
	return out
}

// nothing fails the test if the stack sent anything not yet read.
func (r *rig) nothing() {
	r.t.Helper()
	for _, s := range r.sent() {
		r.t.Errorf("unexpected segment: %v", s)
	}
}

// advance settles (so that every timer is armed) and moves the virtual
// clock by d. Tests move it to one deadline at a time: a connection re-arms
// its timer after the clock has fired it, and a longer step would race
// with that.
func (r *rig) advance(d time.Duration) {
	r.t.Helper()
	r.settle()
	r.h.Clock.Advance(d)
}

func (r *rig) counter(name string) int64 {
	r.t.Helper()
	return r.h.Counter(r.t, "TCP."+name)
}

// info returns the connection table's row for the stack's end of p, and
// whether there is one.
func (r *rig) info(local, remote netip.AddrPort) (tcp.ConnInfo, bool) {
	for _, ci := range r.h.S.Connections() {
		if ci.Local == local && ci.Remote == remote {
			return ci, true
		}
	}
	return tcp.ConnInfo{}, false
}

// peer speaks for the far end of one connection: it keeps the sequence
// numbers the segments it builds carry and checks the stack's.
type peer struct {
	*rig
	addr  netip.AddrPort // the peer's
	stack netip.AddrPort // the stack's end
	iss   uint32         // the stack's initial sequence number
	nxt   uint32         // the peer's SND.NXT
	rcv   uint32         // the peer's RCV.NXT: the next byte it wants from the stack
	wnd   uint16         // the window the peer advertises
	opts  rawtest.TCPOpts
	ts    uint32 // the newest timestamp the peer sent, when it offered them
}

// seg returns a segment from the peer at its SND.NXT acknowledging its
// RCV.NXT. A peer that offered timestamps puts its newest on every
// segment, as RFC 7323 3.2 requires once they are negotiated.
func (p *peer) seg(flags uint8, payload []byte) rawtest.TCPSegment {
	s := rawtest.TCPSegment{Src: p.addr, Dst: p.stack, Seq: p.nxt, Ack: p.rcv, Flags: flags, Window: p.wnd, Payload: payload}
	if p.opts.HasTimestamp {
		s.Opts = rawtest.TCPOpts{HasTimestamp: true, TSVal: p.ts}
	}
	return s
}

// inject sends segments to the stack as they are.
func (p *peer) inject(segs ...rawtest.TCPSegment) {
	p.t.Helper()
	frames := make([][]byte, len(segs))
	for i, s := range segs {
		if s.Src == (netip.AddrPort{}) {
			s.Src, s.Dst = p.addr, p.stack
		}
		if s.Src == p.addr && s.Opts.HasTimestamp && (p.ts == 0 || int32(s.Opts.TSVal-p.ts) > 0) {
			p.ts = s.Opts.TSVal
		}
		frames[i] = p.h.TCPFrame(p.t, s)
	}
	p.h.Inject(frames...)
}

// send injects a segment at SND.NXT and advances SND.NXT past it.
func (p *peer) send(flags uint8, payload []byte) {
	p.t.Helper()
	s := p.seg(flags, payload)
	p.inject(s)
	p.nxt += s.Len()
}

// ack acknowledges everything the peer has received.
func (p *peer) ack() { p.t.Helper(); p.send(rawtest.ACK, nil) }

// expect reads the stack's next segment and checks its flags, sequence and
// acknowledgement numbers and data length; it takes the segment's data and
// FIN into RCV.NXT when they come in order.
func (p *peer) expect(flags uint8, seq, ack uint32, n int) rawtest.TCPSegment {
	p.t.Helper()
	s := p.nextSeg()
	if s.Src != p.stack || s.Dst != p.addr {
		p.t.Fatalf("segment %v, want one from %v to %v", s, p.stack, p.addr)
	}
	if s.Flags != flags || s.Seq != seq || s.Ack != ack || len(s.Payload) != n {
		p.t.Fatalf("segment %v\nwant Flags [%s], seq %d, ack %d, length %d", s, rawtest.FlagString(flags), seq, ack, n)
	}
	p.take(s)
	return s
}

// take advances RCV.NXT over a segment that starts at or before it.
func (p *peer) take(s rawtest.TCPSegment) {
	if int32(s.Seq-p.rcv) <= 0 && int32(s.Seq+s.Len()-p.rcv) > 0 {
		p.rcv = s.Seq + s.Len()
	}
}

// expectACK expects a bare ACK at the peer's RCV.NXT acknowledging SND.NXT.
func (p *peer) expectACK() rawtest.TCPSegment {
	p.t.Helper()
	return p.expect(rawtest.ACK, p.rcv, p.nxt, 0)
}

// expectData expects a segment of n bytes at RCV.NXT (PSH when pushed).
func (p *peer) expectData(n int, push bool) rawtest.TCPSegment {
	p.t.Helper()
	f := rawtest.ACK
	if push {
		f |= rawtest.PSH
	}
	return p.expect(f, p.rcv, p.nxt, n)
}

// info returns the connection's row of the table.
func (p *peer) info() tcp.ConnInfo {
	p.t.Helper()
	ci, ok := p.rig.info(p.stack, p.addr)
	if !ok {
		p.t.Fatalf("no connection %v-%v in the table", p.stack, p.addr)
	}
	return ci
}

// state returns the connection's state ("" when it has left the table).
func (p *peer) state() string {
	ci, ok := p.rig.info(p.stack, p.addr)
	if !ok {
		return ""
	}
	return ci.State
}

// waitFor waits, on the wall clock, for the stack's or the application's
// goroutines to make cond true.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(rawtest.Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", rawtest.Timeout, what)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// waitState waits, on the wall clock, for the connection's goroutine to
// bring it to state ("" for gone from the table).
func (p *peer) waitState(state string) {
	p.t.Helper()
	waitFor(p.t, fmt.Sprintf("state %q", state), func() bool { return p.state() == state })
}

// listen opens a listener on stackPort, closed when the test ends.
func (r *rig) listen(backlog int) *tcp.Listener {
	r.t.Helper()
	l, err := r.proto().Listen(netip.AddrPortFrom(netip.IPv4Unspecified(), stackPort), backlog)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { l.Close() })
	return l
}

// acceptOne waits for Accept, on the wall clock.
func acceptOne(t testing.TB, l *tcp.Listener) *tcp.Conn {
	t.Helper()
	type res struct {
		c   *tcp.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := l.AcceptTCP()
		ch <- res{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("accept: %v", r.err)
		}
		return r.c
	case <-time.After(rawtest.Timeout):
		l.Close()
		<-ch
		t.Fatal("accept: no connection")
		return nil
	}
}

// synPeer returns a peer on port that has not yet sent its SYN.
func (r *rig) synPeer(port uint16, isn uint32, opts rawtest.TCPOpts) *peer {
	return &peer{rig: r, addr: netip.AddrPortFrom(rawtest.PeerAddr, port), stack: stackAP, nxt: isn, wnd: 65535, opts: opts}
}

// handshake runs the peer's side of a passive open: SYN with opts, the
// stack's SYN-ACK, the ACK. It leaves the SYN-ACK's options in synAck.
func (p *peer) handshake() (synAck rawtest.TCPSegment) {
	p.t.Helper()
	s := p.seg(rawtest.SYN, nil)
	s.Ack = 0
	s.Opts = p.opts
	p.inject(s)
	p.nxt++
	sa := p.nextSeg()
	if sa.Flags != rawtest.SYN|rawtest.ACK || sa.Ack != p.nxt {
		p.t.Fatalf("SYN-ACK %v, want ack %d", sa, p.nxt)
	}
	p.iss = sa.Seq
	p.rcv = sa.Seq + 1
	p.ack()
	return sa
}

// accepted opens a connection from the peer on peerPort to a listener on
// stackPort and returns the accepted connection. The peer offers the
// options in opts (none when zero) and advertises 65535.
func (r *rig) accepted(opts rawtest.TCPOpts) (*tcp.Conn, *peer) {
	r.t.Helper()
	l := r.listen(0)
	p := r.synPeer(peerPort, peerISN, opts)
	p.handshake()
	c := acceptOne(r.t, l)
	return c, p
}

// dialResult is the outcome of a Dial running in the background.
type dialResult struct {
	c   *tcp.Conn
	err error
}

// dial starts an active open to the peer at raddr; the result comes on the
// channel.
func (r *rig) dial(ctx context.Context, raddr netip.AddrPort) <-chan dialResult {
	ch := make(chan dialResult, 1)
	go func() {
		c, err := r.proto().Dial(ctx, netip.AddrPort{}, raddr)
		ch <- dialResult{c, err}
	}()
	return ch
}

func waitDial(t testing.TB, ch <-chan dialResult) dialResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(rawtest.Timeout):
		t.Fatal("Dial did not return")
		return dialResult{}
	}
}

// dialed runs an active open to peerAP's address, port 80, whose SYN-ACK
// carries opts, and returns the connection and the peer.
func (r *rig) dialed(opts rawtest.TCPOpts) (*tcp.Conn, *peer) {
	r.t.Helper()
	return r.dialedWindow(opts, 65535)
}

// dialedWindow is dialed with the SYN-ACK's window field set to wnd.
func (r *rig) dialedWindow(opts rawtest.TCPOpts, wnd uint16) (*tcp.Conn, *peer) {
	r.t.Helper()
	raddr := netip.AddrPortFrom(rawtest.PeerAddr, 80)
	ch := r.dial(context.Background(), raddr)
	syn := r.nextSeg()
	if syn.Flags != rawtest.SYN || syn.Dst != raddr {
		r.t.Fatalf("SYN %v", syn)
	}
	p := &peer{rig: r, addr: raddr, stack: syn.Src, iss: syn.Seq, rcv: syn.Seq + 1, nxt: peerISN, wnd: wnd, opts: opts}
	sa := p.seg(rawtest.SYN|rawtest.ACK, nil)
	sa.Opts = opts
	p.inject(sa)
	p.nxt++
	p.expectACK()
	res := waitDial(r.t, ch)
	if res.err != nil {
		r.t.Fatalf("dial: %v", res.err)
	}
	return res.c, p
}

// Application calls that may block run in goroutines, bounded on the wall
// clock.

type ioResult struct {
	n   int
	b   []byte
	err error
}

// readAsync starts a Read of up to n bytes.
func readAsync(c *tcp.Conn, n int) <-chan ioResult {
	ch := make(chan ioResult, 1)
	go func() {
		b := make([]byte, n)
		k, err := c.Read(b)
		ch <- ioResult{k, b[:k], err}
	}()
	return ch
}

// writeAsync starts a Write of b.
func writeAsync(c *tcp.Conn, b []byte) <-chan ioResult {
	ch := make(chan ioResult, 1)
	go func() {
		k, err := c.Write(b)
		ch <- ioResult{n: k, err: err}
	}()
	return ch
}

func wait(t testing.TB, ch <-chan ioResult) ioResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(rawtest.Timeout):
		t.Fatal("the call did not return")
		return ioResult{}
	}
}

// blocked fails the test if the call has returned.
func blocked(t testing.TB, ch <-chan ioResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("the call returned early: n=%d err=%v", r.n, r.err)
	default:
	}
}

// readAll reads exactly n bytes.
func readAll(t testing.TB, c *tcp.Conn, n int) []byte {
	t.Helper()
	ch := make(chan ioResult, 1)
	go func() {
		b := make([]byte, n)
		k, err := io.ReadFull(c, b)
		ch <- ioResult{k, b[:k], err}
	}()
	r := wait(t, ch)
	if r.err != nil {
		t.Fatalf("read %d of %d bytes: %v", r.n, n, r.err)
	}
	return r.b
}

// write writes b, which must fit in the send buffer.
func write(t testing.TB, c *tcp.Conn, b []byte) {
	t.Helper()
	r := wait(t, writeAsync(c, b))
	if r.err != nil || r.n != len(b) {
		t.Fatalf("write: %d, %v", r.n, r.err)
	}
}

// pattern returns n bytes of a recognisable sequence.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

func checkData(t testing.TB, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("data %q, want %q", trunc(got), trunc(want))
	}
}

func trunc(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// isErr reports whether err is a *net.OpError-wrapped target.
func isErr(err, target error) bool { return err != nil && errors.Is(err, target) }

// delayedAck is the default DelayedAck.
const delayedAck = 40 * time.Millisecond
