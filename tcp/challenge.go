package tcp

import (
	"sync"
	"time"

	"github.com/gonetstack/gonet/seqnum"
)

// Blind-injection defences (RFC 5961). An attacker off the path who knows a
// connection's addresses and ports, but not its sequence numbers, must
// guess them to reset it or to inject data. RFC 9293's checks let any
// guess that lands in the receive window through; RFC 5961 narrows them to
// the exact number or, for the acknowledgement, to data really sent. A
// segment that is close but not right earns a challenge ACK instead, which
// the real peer answers with what it really holds: a RST at the exact
// number if it has lost the connection, nothing otherwise.
//
//   - A RST in the window but not at RCV.NXT (section 3.2) and a SYN on a
//     synchronized connection, in the window or not (section 4.2): input.go.
//   - An ACK outside (SND.UNA - MAX.SND.WND) =< SEG.ACK =< SND.NXT
//     (section 5.2): ackAcceptable.
//   - Section 7 asks that challenge ACKs be rate-limited, so that a flood of
//     guesses does not become a flood of ACKs: challengeACK.

// challengeBudget is the stack's allowance of challenge ACKs for the current
// second, shared by every connection.
type challengeBudget struct {
	mu      sync.Mutex
	started bool
	second  int64 // the second it counts, from the protocol's start
	left    int
}

// take spends one challenge ACK of limit per second, if any is left.
func (b *challengeBudget) take(second int64, limit int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.started || second != b.second {
		b.started, b.second, b.left = true, second, limit
	}
	if b.left == 0 {
		return false
	}
	b.left--
	return true
}

// challengeACK has output send a challenge ACK, <SEQ=SND.NXT><ACK=RCV.NXT>
// <CTL=ACK>, unless a rate limit (RFC 5961 section 7) holds it back.
//
// The connection's own limit is checked first, as Linux does: one
// connection under attack spends its own allowance and cannot exhaust the
// stack's for the others. It also closes the side channel of CVE-2016-5696,
// where an attacker counted the challenge ACKs its own connection received
// to learn how many of the shared allowance its guesses at another had
// drawn: one connection can now draw only a couple per second.
func (c *Conn) challengeACK(now time.Time) {
	p := c.p
	if iv := p.cfg.ChallengeACKInterval; iv > 0 && !c.lastChallenge.IsZero() && now.Sub(c.lastChallenge) < iv {
		p.Stats.ChallengeACKsLimited.Inc()
		return
	}
	if lim := p.cfg.ChallengeACKLimit; lim > 0 && !p.challenges.take(int64(now.Sub(p.start)/time.Second), lim) {
		p.Stats.ChallengeACKsLimited.Inc()
		return
	}
	c.lastChallenge = now
	p.Stats.ChallengeACKs.Inc()
	c.rcv.ackNow = true
}

// ackAcceptable is the acceptance test of RFC 5961 section 5.2 for a
// synchronized connection: "The ACK value is considered acceptable only if
// it is in the range of ((SND.UNA - MAX.SND.WND) <= SEG.ACK <= SND.NXT)."
// Anything else is dropped with a challenge ACK; it is what a blind data
// injection, which must carry some ACK, most likely gets wrong. RFC 9293's
// "SEG.ACK > SND.NXT: send an ACK, drop" is the upper half of the same test.
//
// MAX.SND.WND is bounded by the data acknowledged so far, as Linux bounds it
// by bytes_acked: an ACK below our ISS acknowledges nothing this connection
// ever sent. SND.MAX stands for SND.NXT, which goes back on a timeout.
func (c *Conn) ackAcceptable(seg *segment, now time.Time) bool {
	back := min(seqnum.Size(c.snd.maxWnd), c.snd.una.Sub(c.snd.iss+1))
	if seg.ack.GreaterThan(c.snd.max) || seg.ack.LessThan(c.snd.una-seqnum.Value(back)) {
		c.p.Stats.BadACKs.Inc()
		c.challengeACK(now)
		return false
	}
	return true
}
