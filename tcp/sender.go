package tcp

import (
	"time"

	"github.com/gonetstack/gonet/seqnum"
)

// sender is the sending half of the TCB: the send sequence variables of
// RFC 9293 section 3.3.1 and what acts on them, the retransmission queue,
// the RTT estimator (RFC 6298), loss recovery (RFC 5681, RFC 6582, RFC 6675,
// RFC 8985) and congestion control. The connection's goroutine owns it.
//
//	     1         2          3          4
//	----------|----------|----------|----------
//	       SND.UNA    SND.NXT    SND.UNA
//	                            +SND.WND
//
//	1 - old sequence numbers which have been acknowledged
//	2 - sequence numbers of unacknowledged data
//	3 - sequence numbers allowed for new data transmission
//	4 - future sequence numbers which are not yet allowed
type sender struct {
	iss    seqnum.Value // initial send sequence number
	una    seqnum.Value // SND.UNA: oldest unacknowledged
	nxt    seqnum.Value // SND.NXT: next to send
	max    seqnum.Value // highest sequence number sent (nxt goes back on RTO)
	bufSeq seqnum.Value // sequence number of the send buffer's first byte
	wnd    uint32       // SND.WND: the peer's window, scaled
	wl1    seqnum.Value // SND.WL1: segment sequence number of the last window update
	wl2    seqnum.Value // SND.WL2: segment acknowledgment number of the last window update
	maxWnd uint32       // the largest window the peer has offered
	wscale uint8        // the peer's window shift (RFC 7323 section 2)
	mss    int          // payload bytes per segment, options excluded

	cc         CongestionControl
	sent       []sentSeg // the retransmission queue: segments in flight
	srtt       time.Duration
	rttvar     time.Duration
	rto        time.Duration
	rtoMin     time.Duration // Config.RTOMin
	rtoMax     time.Duration // Config.RTOMax
	backoff    int           // consecutive RTO expiries
	dupAcks    int
	recover    seqnum.Value // RFC 6582's "recover"
	inRecovery bool
	lastSend   time.Time
	builtAt    time.Time  // when the last segment was built: its transmission time (RACK)
	sb         scoreboard // SACK scoreboard (sack_sender.go)
	rack       rackState  // RACK (rack.go)
	tlp        tlpState   // tail loss probe (tlp.go)
	eifel      eifelState // a timeout's retransmission to judge (spurious.go)
	prr        prrState   // proportional rate reduction (prr.go)

	retransmits uint64 // shown in the connection table

	// The most bytes in flight since the current window of data began,
	// when SND.UNA passed used.seq (the SND.MAX of the window before),
	// which windowLimited judges the congestion window's use by.
	used flightUse

	// confirm asks the next segment to confirm the next hop's
	// reachability (ip.SendParams.Confirm): set by an acknowledgement
	// of new data at most once per confirmInterval (confirmedAt).
	confirm     bool
	confirmedAt time.Time
}

// sentSeg is a segment in flight: the retransmission queue keeps one per
// transmission, so that Karn's rule, SACK and RACK have per-segment state.
type sentSeg struct {
	start, end seqnum.Value
	sentAt     time.Time
	retrans    bool
	sacked     bool // the peer holds it (RFC 2018): not in flight
	lost       bool // deemed lost (RFC 6675, RFC 8985), not yet retransmitted
}

// ackSeq is the sequence number of a segment without data: SND.MAX, or
// the right edge of the peer's window if that is less, as Linux's
// tcp_acceptable_seq. A peer whose window closed before all we sent
// arrived accepts, with its zero window, only a segment at its RCV.NXT
// (RFC 9293 3.10.7.4): at SND.MAX our ACKs, and the acknowledgement of its
// data they carry, would be dropped until a zero-window probe got through.
func (snd *sender) ackSeq() seqnum.Value {
	if end := snd.una.Add(seqnum.Size(snd.wnd)); end.LessThan(snd.max) {
		return end
	}
	return snd.max
}

// limitedTransmit is the extra window RFC 3042 grants on the first two
// duplicate ACKs: one segment each beyond cwnd, so that a small window
// still produces the three duplicates fast retransmit needs.
func (snd *sender) limitedTransmit() int {
	if snd.inRecovery || snd.dupAcks == 0 {
		return 0
	}
	return min(snd.dupAcks, 2) * snd.mss
}

// startAt makes iss the initial send sequence number: nothing is sent
// yet, and the send buffer's first byte follows the SYN.
func (snd *sender) startAt(iss seqnum.Value) {
	snd.iss = iss
	snd.una, snd.nxt, snd.max = iss, iss, iss
	snd.recover = iss // RFC 6582 3.2 step 1: "initialized to the ISS"
	snd.used = flightUse{seq: iss}
	snd.bufSeq = iss + 1
}

// sampleRTT updates SRTT, RTTVAR and RTO from a measurement (RFC 6298
// section 2, with alpha 1/8 and beta 1/4, and a clock granularity of 1 ms).
func (snd *sender) sampleRTT(r time.Duration) {
	if r <= 0 {
		r = time.Microsecond
	}
	if snd.srtt == 0 {
		snd.srtt = r
		snd.rttvar = r / 2
	} else {
		d := snd.srtt - r
		if d < 0 {
			d = -d
		}
		snd.rttvar = (3*snd.rttvar + d) / 4
		snd.srtt = (7*snd.srtt + r) / 8
	}
	snd.rto = min(max(snd.srtt+max(time.Millisecond, 4*snd.rttvar), snd.rtoMin), snd.rtoMax)
}

// backoffRTO doubles the RTO up to its maximum (RFC 6298 5.5).
func (snd *sender) backoffRTO() { snd.rto = min(2*snd.rto, snd.rtoMax) }

// confirmInterval bounds how often a connection confirms its next hop's
// reachability: neighbour discovery's reachable time is seconds long, and
// each confirmation takes its lock.
const confirmInterval = 100 * time.Millisecond

// forwardProgress notes an acknowledgement of new data, which RFC 4861
// section 7.3.1 counts as a confirmation that the peer's next hop is
// reachable: the next segment carries it to the network layer.
func (snd *sender) forwardProgress(now time.Time) {
	if now.Sub(snd.confirmedAt) >= confirmInterval {
		snd.confirm, snd.confirmedAt = true, now
	}
}

// flightUse is the flight's high-water mark over a window of data, as
// Linux's max_packets_out and cwnd_usage_seq: taken at each transmission,
// it says whether the sender filled its congestion window. The flight
// before an ACK does not: a batch of ACKs read together from the link
// lowers it ACK by ACK with nothing sent in between, so all but the first
// few of a batch found the window "not in use" and slow start grew 1.4
// times a round over a 100 ms path where ACKs came in bursts.
type flightUse struct {
	high int
	seq  seqnum.Value
}

// noteFlight records the flight after a transmission.
func (snd *sender) noteFlight() {
	flight := int(snd.max.Sub(snd.una))
	if !snd.una.LessThan(snd.used.seq) {
		snd.used = flightUse{high: flight, seq: snd.max}
		return
	}
	snd.used.high = max(snd.used.high, flight)
}
