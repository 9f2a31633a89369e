package tcp_test

import (
	"context"
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// FuzzPeer lets a broken or hostile peer drive a connection that has data
// to send, or a listener: segments with any control bits, sequence and
// acknowledgement numbers near and far from the window's edges, SACK
// blocks over what the stack sent and beyond it, windows that open, shrink
// and close, payloads in and out of order, SYN cookies good and bad, ICMP
// errors quoting what is in flight; time moving on to fire every timer;
// the application half-closing and closing. Whatever comes, the stack must
// not crash, must send only segments that obey the rules watch checks and,
// once closed, must give back every buffer, every byte of its memory
// budget and every goroutine (the rig checks).
//
// setup's low byte picks the options the peer offers (bits 0-1 the MSS,
// 2-3 the window scale, 4 whether it offers one, 5 SACK, 6 timestamps);
// its high byte whether the stack dials (fuzzActive), whether both ask for
// ECN (fuzzECN), how much the application writes (bits 10-11: none, 3 KB,
// 12 KB or 40 KB), or whether there is no connection yet, only a listener
// (fuzzListen), which may answer with SYN cookies (fuzzCookies). Each op
// of the script is opLen bytes:
//
//	byte 0    what (low two bits): 0-1 a segment, 2 an ICMP error, 3 time or
//	          the application; for a segment, its options (bits 2-3: SACK
//	          blocks, 4: a timestamp, 5: an old one), 6: marked CE, 7: an
//	          urgent pointer
//	byte 1    a segment's control bits; an ICMP error's type (high four
//	          bits) and code (low four); otherwise which action (low two
//	          bits) and its size (the rest)
//	bytes 2-3 the segment's sequence number, signed, from the peer's SND.NXT
//	bytes 4-5 its acknowledgement number, signed, from the highest sequence
//	          number the stack has sent; the SACK blocks start there too; the
//	          sequence number an ICMP error quotes, from there too
//	byte 6    its window, in units of 256 bytes before scaling
//	byte 7    its data, in units of 5 bytes (a frame within the MTU); bytes
//	          6-7 are the next-hop MTU of an ICMP error
func FuzzPeer(f *testing.F) {
	op := func(what, flags uint8, seq, ack int16, wnd, data uint8) []byte {
		b := []byte{what, flags, 0, 0, 0, 0, wnd, data}
		binary.BigEndian.PutUint16(b[2:], uint16(seq))
		binary.BigEndian.PutUint16(b[4:], uint16(ack))
		return b
	}
	script := func(ops ...[]byte) []byte {
		var b []byte
		for _, o := range ops {
			b = append(b, o...)
		}
		return b
	}
	const (
		sackTS = 0x60    // SACK permitted and timestamps
		w3K    = 1 << 10 // the application writes 3 KB
		w40K   = 3 << 10 // 40 KB
	)
	f.Add(uint16(w40K), script(op(0, rawtest.ACK, 0, 0, 255, 0)))
	f.Add(uint16(w40K|sackTS|0x0f), script( // acknowledges part, SACKs beyond a hole, times out
		op(0|1<<2|1<<4, rawtest.ACK, 0, -3000, 255, 0),
		op(0|2<<2|1<<4, rawtest.ACK, 0, -6000, 255, 0),
		op(3, 0|10<<2, 0, 0, 0, 0),
		op(0|1<<4, rawtest.ACK, 0, 0, 255, 0)))
	f.Add(uint16(w40K|sackTS), script( // data out of order, then the hole, a FIN
		op(1<<4, rawtest.ACK|rawtest.PSH, 1000, 0, 16, 128),
		op(1<<4, rawtest.ACK, 0, 0, 16, 192),
		op(1<<4, rawtest.ACK|rawtest.FIN, 1640, 0, 16, 0),
		op(3, 2|3<<2, 0, 0, 0, 0)))
	f.Add(uint16(w40K|0x10), script( // the window closes, probes, opens
		op(0, rawtest.ACK, 0, 0, 0, 0),
		op(3, 0|40<<2, 0, 0, 0, 0),
		op(0, rawtest.ACK, 0, 0, 200, 0)))
	f.Add(uint16(w40K|sackTS), script( // RST and SYN in the window, old timestamps, an ACK of the unsent
		op(1<<5|1<<4, rawtest.ACK, 0, 0, 255, 10),
		op(0, rawtest.SYN, 100, 0, 255, 0),
		op(0, rawtest.ACK, 0, 20000, 255, 0),
		op(0, rawtest.RST, 10, 0, 0, 0)))
	f.Add(uint16(w40K), script( // the application half-closes, then closes
		op(3, 1|1<<2, 0, 0, 0, 0),
		op(0, rawtest.ACK|rawtest.FIN, 0, 0, 255, 0),
		op(3, 3, 0, 0, 0, 0),
		op(3, 0|63<<2, 0, 0, 0, 0)))
	f.Add(uint16(w40K), script( // fragmentation needed quoting what is in flight, then too late
		op(2, 3<<4|4, 0, -2000, 2, 76), // MTU 588
		op(2, 3<<4|4, 0, -20000, 5, 0),
		op(2, 11<<4, 0, -100, 0, 0),
		op(3, 0|5<<2, 0, 0, 0, 0),
		op(0, rawtest.ACK, 0, 0, 255, 0)))
	f.Add(uint16(w3K|fuzzActive|fuzzECN), script( // ECN: CE marks, CWR; both close, TIME_WAIT
		op(1<<6, rawtest.ACK, 0, 0, 255, 20),
		op(0, rawtest.ACK|rawtest.CWR, 0, 0, 255, 20),
		op(3, 3, 0, 0, 0, 0),
		op(3, 0|1<<2, 0, 0, 0, 0),
		op(0, rawtest.ACK|rawtest.FIN, 0, 0, 255, 0),
		op(3, 0|30<<2, 0, 0, 0, 0)))
	f.Add(uint16(fuzzListen|fuzzCookies|sackTS), script( // a handshake by cookie, a bad cookie, a flood
		op(1<<4, rawtest.SYN, 0, 0, 255, 0),
		op(1<<4, rawtest.ACK, 0, 0, 255, 10),
		op(1<<4, rawtest.ACK, 0, 7, 255, 0),
		op(0, rawtest.SYN, 5000, 0, 255, 0),
		op(0, rawtest.SYN|rawtest.ACK, 0, 0, 255, 0)))
	f.Add(uint16(w40K|fuzzECN|fuzzCookies|sackTS|0x15), script( // a connection made from a cookie, with every option
		op(1<<4, rawtest.ACK, 0, 0, 255, 0),
		op(1<<4|1<<6, rawtest.ACK, 0, 0, 255, 100)))
	f.Add(uint16(fuzzListen), script( // the backlog fills, a RST in the handshake, a retransmitted SYN
		op(0, rawtest.SYN, 0, 0, 255, 0),
		op(0, rawtest.SYN, 0, 0, 255, 0),
		op(0, rawtest.RST, 0, 0, 0, 0),
		op(3, 0|20<<2, 0, 0, 0, 0)))
	f.Fuzz(func(t *testing.T, setup uint16, script []byte) {
		const maxOps = 48
		if len(script) > maxOps*opLen {
			script = script[:maxOps*opLen]
		}
		runPeerScript(t, setup, script)
	})
}

const opLen = 8

// runPeerScript is one run of FuzzPeer.
func runPeerScript(t *testing.T, setup uint16, script []byte) {
	cfg := tcp.Config{SendBuffer: 64 << 10, ReceiveBuffer: 16 << 10, ReceiveBufferMax: 16 << 10, MSL: time.Second, QuickAcks: 16}
	if setup&fuzzECN != 0 {
		cfg.ECN = tcp.ECNOn
	}
	if setup&fuzzCookies != 0 {
		cfg.SynCookies = tcp.SynCookiesAlways
	}
	r := newRig(t, cfg)
	opts := rawtest.TCPOpts{
		MSS:           uint16(536 + int(setup&3)*300),
		HasWScale:     setup&0x10 != 0,
		WScale:        uint8(setup>>2&3) * 5, // 0, 5, 10, 15: the last above RFC 7323's 14
		SACKPermitted: setup&0x20 != 0,
		HasTimestamp:  setup&0x40 != 0,
		TSVal:         1,
	}
	var f *fuzzPeer
	var c *tcp.Conn
	if setup&fuzzListen != 0 {
		// No connection yet: the script's segments meet a listener with
		// a backlog of one, which the rig closes when the test ends.
		r.listen(1)
		p := r.synPeer(peerPort, peerISN, opts)
		f = &fuzzPeer{peer: p, peerMax: p.nxt, reopened: true}
	} else {
		var closeApp func()
		c, f, closeApp = r.fuzzEstablished(setup, opts)
		defer closeApp()
	}
	// After each op the stack has dealt with it and its connections have
	// acted (settle) before the next op reads what they sent: the numbers
	// the script gives relative to it then mean the same on every run.
	r.settle() // the first flight, for the script to acknowledge or quote
	f.watch()
	for ; len(script) >= opLen; script = script[opLen:] {
		b := script[:opLen]
		switch b[0] & 3 {
		case 0, 1:
			f.segment(b)
		case 2:
			f.icmpError(b)
		case 3:
			f.act(c, b[1])
		}
		r.settle()
		f.watch()
	}
}

// FuzzPeer's setup bits beyond the SYN's options.
const (
	fuzzActive  uint16 = 1 << 8  // the stack dials; otherwise it accepts
	fuzzECN     uint16 = 1 << 9  // both ends ask for ECN (RFC 3168 section 6.1.1)
	fuzzListen  uint16 = 1 << 12 // no connection: the script starts at a listener
	fuzzCookies uint16 = 1 << 13 // the listener answers every SYN with a cookie
)

// fuzzEstablished opens the connection setup asks for, has the application
// write its data and read in the background, and returns the connection,
// the peer, and what closes the connection and waits for the reader.
func (r *rig) fuzzEstablished(setup uint16, opts rawtest.TCPOpts) (*tcp.Conn, *fuzzPeer, func()) {
	r.t.Helper()
	var c *tcp.Conn
	var p *peer
	if ecn := setup&fuzzECN != 0; setup&fuzzActive != 0 {
		c, p = r.fuzzDialed(opts, ecn)
	} else {
		c, p = r.fuzzAccepted(opts, ecn)
	}
	written := []int{0, 3000, 12000, 40000}[setup>>10&3]
	f := &fuzzPeer{peer: p, sndMax: p.rcv, peerMax: p.nxt, limit: p.rcv + uint32(written) + 1}

	// The data fits the send buffer, so Write returns at once.
	if _, err := c.Write(make([]byte, written)); err != nil {
		r.t.Fatalf("write: %v", err)
	}
	var reader sync.WaitGroup
	reader.Add(1)
	go func() {
		defer reader.Done()
		b := make([]byte, 1000)
		for {
			if _, err := c.Read(b); err != nil {
				return
			}
		}
	}()
	return c, f, func() {
		c.SetLinger(0) // a RST if the script left it open: nothing lingers
		c.Close()
		reader.Wait()
	}
}

// fuzzAccepted is a passive open from a peer whose SYN offers opts, and
// ECN when ecn is set.
func (r *rig) fuzzAccepted(opts rawtest.TCPOpts, ecn bool) (*tcp.Conn, *peer) {
	r.t.Helper()
	l := r.listen(0)
	p := r.synPeer(peerPort, peerISN, opts)
	syn := p.seg(rawtest.SYN, nil)
	if ecn {
		syn.Flags |= rawtest.ECE | rawtest.CWR
	}
	syn.Ack, syn.Opts = 0, opts
	p.inject(syn)
	p.nxt++
	sa := p.nextSeg()
	p.iss, p.rcv = sa.Seq, sa.Seq+1
	ack := p.seg(rawtest.ACK, nil)
	ack.Opts.TSEcr = sa.Opts.TSVal // a cookie's options ride on it (syncookie.go)
	p.inject(ack)
	return acceptOne(r.t, l), p
}

// fuzzDialed is an active open to a peer whose SYN-ACK carries opts, and
// agrees to ECN when ecn is set.
func (r *rig) fuzzDialed(opts rawtest.TCPOpts, ecn bool) (*tcp.Conn, *peer) {
	r.t.Helper()
	raddr := netip.AddrPortFrom(rawtest.PeerAddr, 80)
	ch := r.dial(context.Background(), raddr)
	syn := r.nextSeg()
	p := &peer{rig: r, addr: raddr, stack: syn.Src, iss: syn.Seq, rcv: syn.Seq + 1, nxt: peerISN, wnd: 65535, opts: opts}
	sa := p.seg(rawtest.SYN|rawtest.ACK, nil)
	if ecn {
		sa.Flags |= rawtest.ECE
	}
	sa.Opts = opts
	p.inject(sa)
	p.nxt++
	res := waitDial(r.t, ch)
	if res.err != nil {
		r.t.Fatalf("dial: %v", res.err)
	}
	return res.c, p
}

// fuzzPeer is FuzzPeer's peer: besides the peer's sequence numbers, it
// follows the highest sequence number the stack has sent, so that the
// acknowledgements and SACK blocks it makes up land near what is in
// flight, where the stack's logic is, and the highest the peer has sent,
// which the stack must never acknowledge beyond.
type fuzzPeer struct {
	*peer
	sndMax   uint32 // the stack's highest sequence number sent, plus one
	peerMax  uint32 // the end of the furthest segment the peer sent
	limit    uint32 // the end of the stack's data and FIN
	reopened bool   // the stack answered a SYN with a new connection
	last     []byte // the last frame the stack sent on the connection
	tsVal    uint32 // the peer's timestamp clock
	tsEcr    uint32 // the stack's newest timestamp, which the peer echoes
}

// segment injects the segment op describes.
func (f *fuzzPeer) segment(op []byte) {
	seqOff := int16(binary.BigEndian.Uint16(op[2:]))
	ackOff := int16(binary.BigEndian.Uint16(op[4:]))
	s := rawtest.TCPSegment{
		Src: f.addr, Dst: f.stack,
		Seq:     f.nxt + uint32(int32(seqOff)),
		Ack:     f.sndMax + uint32(int32(ackOff)),
		Flags:   op[1],
		Window:  uint16(op[6]) << 8,
		Payload: make([]byte, int(op[7])*5),
	}
	if s.Flags&rawtest.SYN != 0 { // what the peer offered in its handshake
		s.Opts.MSS, s.Opts.SACKPermitted = f.opts.MSS, f.opts.SACKPermitted
		s.Opts.HasWScale, s.Opts.WScale = f.opts.HasWScale, f.opts.WScale
	}
	if n := int(op[0] >> 2 & 3); n > 0 {
		s.Opts.NumSACK = n
		for i := range n {
			start := s.Ack + uint32(i)*2000
			s.Opts.SACK[i] = [2]uint32{start, start + 1000 + uint32(op[7])*16}
		}
	}
	if op[0]&(1<<4) != 0 {
		f.tsVal += 10
		s.Opts.HasTimestamp, s.Opts.TSVal, s.Opts.TSEcr = true, f.tsVal, f.tsEcr
		if op[0]&(1<<5) != 0 {
			s.Opts.TSVal -= 1 << 31 // PAWS: older than any the stack has seen
		}
	}
	if op[0]&(1<<6) != 0 {
		s.TOS = 3 // CE (RFC 3168 section 5)
	}
	if op[0]&(1<<7) != 0 {
		s.Urgent = uint16(ackOff)
	}
	f.inject(s)
	if end := s.Seq + s.Len(); int32(end-f.peerMax) > 0 {
		f.peerMax = end
	}
	if seqOff == 0 {
		f.nxt += s.Len()
	}
}

// icmpTypes are the ICMP errors icmpError sends, by op's byte 1: mostly
// destination unreachable (RFC 792; code 4 with an MTU is RFC 1191's
// fragmentation needed), and time exceeded, parameter problem and source
// quench.
var icmpTypes = [16]uint8{3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 11, 11, 12, 12, 4, 4}

// icmpError injects the ICMP error op describes, from a router, about the
// last segment the stack sent, quoting the sequence number op gives.
func (f *fuzzPeer) icmpError(op []byte) {
	if f.last == nil {
		return
	}
	seq := f.sndMax + uint32(int32(int16(binary.BigEndian.Uint16(op[4:]))))
	mtu := binary.BigEndian.Uint16(op[6:])
	f.h.Inject(f.icmpAbout(f.last, icmpTypes[op[1]>>4], op[1]&15, uint32(mtu), func(quote []byte) {
		ihl := int(quote[0]&0xf) * 4
		binary.BigEndian.PutUint32(quote[ihl+4:], seq)
	}))
}

// act moves time on or acts for the application, as op asks (time only
// when there is no connection, c nil).
func (f *fuzzPeer) act(c *tcp.Conn, op byte) {
	size := int(op >> 2)
	switch {
	case op&3 == 0: // up to 6.3 s: RTO, TLP, delayed ACK, persist, FIN_WAIT_2
		f.advance(time.Duration(size) * 100 * time.Millisecond)
	case c == nil:
	case op&3 == 1:
		c.CloseWrite()
	case op&3 == 2:
		c.SetReadBuffer(size * 1024)
	case op&3 == 3:
		c.Close()
	}
}

// watch reads what the stack sent and checks it: each frame decodes as TCP
// with a good checksum (SegmentOf); every segment but a RST carries an ACK
// (RFC 9293 section 3.10.7.4: once synchronised, ACK is always set); no
// acknowledgement covers what the peer never sent; no sequence number runs
// past the data the application wrote and its FIN. It follows the highest
// sequence number the stack sent.
func (f *fuzzPeer) watch() {
	frames := append(f.pending, f.h.Pending()...)
	f.pending = nil
	for _, fr := range frames {
		if rawtest.EthernetOf(f.t, fr).EthernetType != layers.EthernetTypeIPv4 ||
			rawtest.IPv4Of(f.t, fr).Protocol != layers.IPProtocolTCP {
			continue
		}
		s := rawtest.SegmentOf(f.t, fr)
		if s.Opts.HasTimestamp {
			f.tsEcr = s.Opts.TSVal
		}
		if s.Flags&rawtest.SYN != 0 {
			// A SYN-ACK: another connection, from another ISS, which the
			// script's acknowledgements now count from.
			f.reopened = true
			f.sndMax = s.Seq + 1
			continue
		}
		if s.Flags&(rawtest.RST|rawtest.ACK) == 0 {
			f.t.Errorf("segment without ACK: %v", s)
		}
		if s.Flags&rawtest.ACK != 0 && int32(s.Ack-f.peerMax) > 0 {
			f.t.Errorf("segment %v acknowledges beyond the peer's furthest, %d", s, f.peerMax)
		}
		if s.Flags&rawtest.RST != 0 || f.reopened {
			continue // a RST's sequence number is the segment's it answers
		}
		f.last = fr
		end := s.Seq + s.Len()
		if int32(end-f.limit) > 0 {
			f.t.Errorf("segment %v ends past the application's data and FIN, %d", s, f.limit)
		}
		if int32(end-f.sndMax) > 0 {
			f.sndMax = end
		}
	}
}
