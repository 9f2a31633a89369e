package tcp

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/seqnum"
	"github.com/gonetstack/gonet/wire"
)

// SYN cookies (RFC 4987 section 3.6). A listener whose backlog is full
// answers a SYN without keeping any state: what it would have kept goes
// into its initial sequence number, the cookie, and comes back in the
// client's ACK (SEG.ACK-1), which rebuilds the connection. A flood of SYNs
// from forged addresses then costs a hash and a SYN-ACK each, and fills
// nothing.
//
// The cookie's low bits are an index into a table of common MSS values;
// the rest is a keyed hash (SHA-256 under the Protocol's secret) of the
// 4-tuple, the client's ISN (SEG.SEQ-1 of the ACK), the MSS index, the
// options below and a counter that moves every minute. A cookie is taken
// while the counter has moved at most once since it was made: a minute at
// least, two at most. Guessing one blind takes 2^29 tries on average.
//
// The MSS is the only option the cookie itself has room for. When the SYN
// carried timestamps, as Linux does, the low bits of our timestamp value
// carry the rest (the client's window scale, SACK-permitted, and whether
// an ECN-setup SYN was answered with ECE, RFC 3168 6.1.1), and come back
// as the ACK's TSecr; they are also hashed into the cookie, so a client
// cannot change them on the way back. Without timestamps the SYN-ACK
// offers neither window scaling, SACK nor ECN, which the connection could
// not remember.

// SynCookieMode says when a listener sends SYN cookies.
type SynCookieMode int

const (
	// SynCookiesWhenFull sends cookies while the backlog is full of
	// half-open connections (Linux's tcp_syncookies=1).
	SynCookiesWhenFull SynCookieMode = iota
	// SynCookiesAlways answers every SYN with a cookie
	// (tcp_syncookies=2).
	SynCookiesAlways
	// SynCookiesNever drops SYNs while the backlog is full
	// (tcp_syncookies=0).
	SynCookiesNever
)

const (
	cookiePeriod  = time.Minute
	cookieMSSBits = 3
	cookieMSSMask = 1<<cookieMSSBits - 1

	// Our timestamp value's low bits on a cookie's SYN-ACK: the client's
	// window scale (cookieNoWScale: none), SACK-permitted and ECN, as
	// in Linux's layout.
	cookieTSBits   = 6
	cookieTSMask   = 1<<cookieTSBits - 1
	cookieWSMask   = 0xf
	cookieNoWScale = 0xf
	cookieSACK     = 1 << 4
	cookieECN      = 1 << 5 // the SYN asked for ECN and we answered
	// cookieNoTS stands, in the hash, for a SYN without timestamps.
	cookieNoTS = 0xff
)

// cookieMSS is the table of MSS values a cookie can name: the largest not
// above the client's is used. 536 is RFC 9293's default, 1460 Ethernet's,
// 8960 a 9000-byte jumbo frame's; the others are common below tunnels,
// PPPoE and VPNs.
var cookieMSS = [1 << cookieMSSBits]uint16{536, 1200, 1300, 1360, 1400, 1440, 1460, 8960}

// wantCookie decides, with l.mu held, whether a SYN gets a cookie; full
// says the backlog is. An accept queue that is full gets no cookie either:
// the connection could not be queued, so the SYN is dropped, as Linux
// drops it, and the client tries again.
func (l *Listener) wantCookie(full bool, now time.Time) bool {
	switch l.p.cfg.SynCookies {
	case SynCookiesNever:
		return false
	case SynCookiesWhenFull:
		if !full {
			return false
		}
	}
	if l.closed || len(l.accepted) >= cap(l.accepted) {
		return false
	}
	l.cookieAt = now
	return true
}

// sendCookie answers a SYN with a SYN-ACK whose sequence number is a
// cookie, and forgets it.
func (l *Listener) sendCookie(seg *segment, id fourTuple) {
	p, syn := l.p, &seg.opts
	nw, route, err := p.route(id.remote.Addr())
	if err != nil {
		p.Stats.ListenDrops.Inc()
		return
	}
	mssIdx := uint8(0)
	for i := len(cookieMSS) - 1; i > 0; i-- {
		if syn.MSS >= cookieMSS[i] {
			mssIdx = uint8(i)
			break
		}
	}
	opts := wire.TCPOptions{MSS: uint16(min(mssFor(nw, &route), 65535))}
	bits := uint8(cookieNoTS)
	flags := uint8(wire.TCPFlagSYN | wire.TCPFlagACK)
	if syn.HasTimestamp {
		bits = cookieNoWScale
		if syn.HasWScale {
			bits = min(syn.WScale, wire.TCPMaxWScale)
			opts.HasWScale, opts.WScale = true, p.cookieWScale()
		}
		if syn.SACKPermitted && !p.cfg.DisableSACK {
			bits |= cookieSACK
			opts.SACKPermitted = true
		}
		if seg.flags&(wire.TCPFlagECE|wire.TCPFlagCWR) == wire.TCPFlagECE|wire.TCPFlagCWR && p.cfg.ECN != ECNOff {
			bits |= cookieECN
			flags |= wire.TCPFlagECE // RFC 3168 6.1.1: the ECN-setup SYN-ACK
		}
		// Our clock, rounded down to make room for the bits: never
		// ahead of what the connection sends later, or the client's
		// PAWS would drop those as old.
		now := p.tsNow() + p.cookieTSOffset(id)
		ts := now&^cookieTSMask | uint32(bits)
		if int32(ts-now) > 0 {
			ts -= 1 << cookieTSBits
		}
		opts.HasTimestamp, opts.TSVal, opts.TSEcr = true, ts, syn.TSVal
	}
	cookie := p.cookie(id, seg.seq, p.cookieCounter(), mssIdx, bits)

	optLen := wire.TCPOptionsLen(&opts)
	pk := p.env.Pool.Get(wire.TCPMinHeaderLen + optLen)
	b := pk.Bytes()
	wire.EncodeTCPOptions(b[wire.TCPMinHeaderLen:], &opts)
	wire.EncodeTCP(b, &wire.TCPFields{
		SrcPort: id.local.Port(), DstPort: id.remote.Port(),
		Seq: uint32(cookie), Ack: uint32(seg.seq + 1),
		Flags:      flags,
		Window:     uint16(min(p.cfg.ReceiveBuffer, 65535)), // a SYN's window is never scaled
		OptionsLen: optLen,
	})
	wire.SetTCPChecksum(b, id.local.Addr(), id.remote.Addr())
	p.Stats.SynCookiesSent.Inc()
	p.Stats.OutSegs.Inc()
	nw.SendRoute(pk, ip.SendParams{Src: id.local.Addr(), Dst: id.remote.Addr(), Proto: wire.ProtoTCP}, route)
}

// cookieACK takes an ACK that reached the listener: if the listener sent
// cookies lately (as Linux, it does not look for one otherwise) and SEG.ACK-1
// is a valid cookie, the connection it describes is made and queued for
// Accept. It reports whether the ACK was taken; the caller answers one
// that was not with a reset, as RFC 9293 says for an ACK in LISTEN. That
// also tells a client whose cookie expired at once that it has no
// connection, rather than when its data times out.
func (l *Listener) cookieACK(seg *segment, id fourTuple) bool {
	p := l.p
	if p.cfg.SynCookies == SynCookiesNever || seg.has(wire.TCPFlagSYN) {
		return false
	}
	now := p.env.Clock.Now()
	l.mu.Lock()
	recent := !l.cookieAt.IsZero() && now.Sub(l.cookieAt) < 2*cookiePeriod
	l.mu.Unlock()
	if !recent {
		return false
	}
	bits := uint8(cookieNoTS)
	if seg.opts.HasTimestamp { // empty if they did not parse
		bits = uint8(seg.opts.TSEcr & cookieTSMask)
	}
	cookie := seg.ack - 1
	mssIdx := uint8(cookie & cookieMSSMask)
	counter := p.cookieCounter()
	if cookie != p.cookie(id, seg.seq-1, counter, mssIdx, bits) &&
		cookie != p.cookie(id, seg.seq-1, counter-1, mssIdx, bits) {
		p.Stats.SynCookiesFailed.Inc()
		return false
	}
	p.Stats.SynCookiesValidated.Inc()
	syn := wire.TCPOptions{MSS: cookieMSS[mssIdx]}
	if bits != cookieNoTS {
		syn.HasTimestamp, syn.TSVal = true, seg.opts.TSVal
		if ws := bits & cookieWSMask; ws != cookieNoWScale {
			syn.HasWScale, syn.WScale = true, ws
		}
		syn.SACKPermitted = bits&cookieSACK != 0
	}
	l.openFromCookie(seg, id, &syn, bits != cookieNoTS && bits&cookieECN != 0, now)
	return true
}

// openFromCookie makes the connection a valid cookie describes, in
// ESTABLISHED, and queues it for Accept; syn holds the options the SYN
// had, and ecn whether its SYN-ACK agreed to ECN. With the accept queue
// full the ACK is dropped, as Linux drops it: the client's next segment
// carries the cookie again.
func (l *Listener) openFromCookie(seg *segment, id fourTuple, syn *wire.TCPOptions, ecn bool, now time.Time) {
	p := l.p
	nw, route, err := p.route(id.remote.Addr())
	if err != nil {
		p.Stats.ListenDrops.Inc()
		return
	}
	c := p.newConn(id, nw, route, SynReceived)
	c.snd.iss = seg.ack - 1
	c.snd.una, c.snd.nxt, c.snd.max, c.snd.bufSeq = seg.ack, seg.ack, seg.ack, seg.ack
	c.snd.recover = c.snd.iss
	synSeg := *seg
	synSeg.seq--
	synSeg.opts = *syn
	c.negotiate(&synSeg)
	if c.wsOK {
		c.rcv.wscale = p.cookieWScale() // what the SYN-ACK said
	}
	c.tsOffset = p.cookieTSOffset(id)
	if ecn {
		c.ecn.ok = true // negotiate saw the ACK, not the SYN: the cookie says
		p.Stats.ECNNegotiated.Inc()
	}
	c.rcv.adv = c.rcv.nxt.Add(seqnum.Size(min(p.cfg.ReceiveBuffer, 65535)))
	c.rcv.synWnd = true // what the SYN-ACK said, unscaled
	c.snd.wnd = uint32(seg.wnd) << c.sndWScaleIf()
	c.snd.wl1, c.snd.wl2 = seg.seq, seg.ack
	c.snd.maxWnd = c.snd.wnd

	// The room checked is the room used: every send on l.accepted holds
	// l.mu (lock order: l.mu, then p.mu).
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || len(l.accepted) >= cap(l.accepted) {
		p.Stats.ListenOverflows.Inc()
		p.Stats.ListenDrops.Inc()
		return
	}
	if !p.register(c) {
		p.Stats.ListenDrops.Inc()
		return
	}
	p.Stats.PassiveOpens.Inc()
	c.mu.Lock() // registered: the connection table can see it
	c.setState(Established)
	c.armKeepalive(now)
	close(c.established)
	c.mu.Unlock()
	l.accepted <- c
	c.start()
	if len(seg.payload) > 0 || seg.has(wire.TCPFlagFIN) {
		// The ACK brought data too: the connection takes it as any
		// segment, and with it the packet, which handle then leaves.
		c.deliver(seg)
		seg.pk = nil
	}
}

// cookieCounter is the coarse clock cookies are made with.
func (p *Protocol) cookieCounter() uint64 {
	return uint64(p.env.Clock.Now().Sub(p.start) / cookiePeriod)
}

// cookie computes the cookie for a SYN from id with the client's ISN, at
// counter, for the MSS index and option bits (cookieNoTS: no timestamps).
func (p *Protocol) cookie(id fourTuple, isn seqnum.Value, counter uint64, mssIdx, bits uint8) seqnum.Value {
	var buf [32 + 1 + 36 + 4 + 8 + 2]byte
	b := append(buf[:0], p.secret[:]...)
	b = append(b, 'C') // not an ISN (isn) nor a timestamp offset
	b = appendTuple(b, id)
	b = binary.BigEndian.AppendUint32(b, uint32(isn))
	b = binary.BigEndian.AppendUint64(b, counter)
	b = append(b, mssIdx, bits)
	sum := sha256.Sum256(b)
	return seqnum.Value(binary.BigEndian.Uint32(sum[:4])&^cookieMSSMask | uint32(mssIdx))
}

// cookieTSOffset is the timestamp offset (RFC 7323 section 7.1) of a
// connection made from a cookie: a keyed hash of the 4-tuple, so that the
// SYN-ACK, sent before the connection exists, and the connection agree.
func (p *Protocol) cookieTSOffset(id fourTuple) uint32 {
	var buf [32 + 1 + 36]byte
	b := append(buf[:0], p.secret[:]...)
	b = append(b, 'T')
	b = appendTuple(b, id)
	sum := sha256.Sum256(b)
	return binary.BigEndian.Uint32(sum[:4])
}

// appendTuple appends id's addresses and ports, in 12 bytes for IPv4's
// and 36 for IPv6's.
func appendTuple(b []byte, id fourTuple) []byte {
	if la, ra := id.local.Addr(), id.remote.Addr(); la.Is4() {
		l, r := la.As4(), ra.As4()
		b = append(b, l[:]...)
		b = append(b, r[:]...)
	} else {
		l, r := la.As16(), ra.As16()
		b = append(b, l[:]...)
		b = append(b, r[:]...)
	}
	b = binary.BigEndian.AppendUint16(b, id.local.Port())
	return binary.BigEndian.AppendUint16(b, id.remote.Port())
}

// cookieWScale is the window scale a cookie's SYN-ACK offers: as newConn
// chooses it for the configured receive buffer (RFC 7323 section 2.3).
func (p *Protocol) cookieWScale() uint8 {
	s := uint8(0)
	for s < wire.TCPMaxWScale && 65535<<s < max(p.cfg.ReceiveBuffer, p.cfg.ReceiveBufferMax) {
		s++
	}
	return s
}
