package iperf3

import (
	"encoding/binary"
	"time"
)

// The UDP connect handshake: the client's first datagram on a UDP stream
// carries helloMsg and the server answers with helloReply. iperf3
// writes both as host-order integers (0x36373839 and 0x39383736), so on
// the little-endian machines it runs on they cross the wire as the text
// "9876" and "6789"; older servers answer with 987654321 instead.
var (
	helloMsg    = [4]byte{'9', '8', '7', '6'}
	helloReply  = [4]byte{'6', '7', '8', '9'}
	legacyReply = binary.LittleEndian.AppendUint32(nil, 987654321)
)

// isHelloReply reports whether a datagram is a server's answer to the
// hello, in either form.
func isHelloReply(b []byte) bool {
	return len(b) == 4 && (string(b) == string(helloReply[:]) || string(b) == string(legacyReply))
}

// A UDP data datagram begins with the sender's clock and the datagram's
// number in the stream, all big-endian; the rest is filler up to the
// block length.
//
//	0      4      8                 12 or 16
//	| sec  | usec | packet count (32 or 64 bits) | filler ...
const (
	hdrSec   = 0
	hdrUsec  = 4
	hdrCount = 8
	// HeaderLen is the header of a datagram with 32-bit counts, the
	// smallest block a UDP test can use.
	HeaderLen = 12
	// HeaderLen64 is the header with 64-bit counts
	// (--udp-counters-64bit).
	HeaderLen64 = 16
)

// datagram is a view of a UDP data datagram.
type datagram []byte

// headerLen is the header's length with 64-bit counts or not.
func headerLen(wide bool) int {
	if wide {
		return HeaderLen64
	}
	return HeaderLen
}

// encode writes the header: the time sent and the packet count. The
// datagram must be at least headerLen(wide) long.
func (d datagram) encode(sent time.Time, count uint64, wide bool) {
	us := sent.UnixMicro()
	binary.BigEndian.PutUint32(d[hdrSec:], uint32(us/1e6))
	binary.BigEndian.PutUint32(d[hdrUsec:], uint32(us%1e6))
	if wide {
		binary.BigEndian.PutUint64(d[hdrCount:], count)
	} else {
		binary.BigEndian.PutUint32(d[hdrCount:], uint32(count))
	}
}

// valid reports whether the datagram is long enough to hold a header.
func (d datagram) valid(wide bool) bool { return len(d) >= headerLen(wide) }

// sentMicros is the sender's clock, in microseconds of its own epoch
// (iperf3's is a monotonic clock; only differences between datagrams of
// a stream mean anything).
func (d datagram) sentMicros() int64 {
	return int64(binary.BigEndian.Uint32(d[hdrSec:]))*1e6 + int64(binary.BigEndian.Uint32(d[hdrUsec:]))
}

// count is the datagram's number in its stream, from 1.
func (d datagram) count(wide bool) uint64 {
	if wide {
		return binary.BigEndian.Uint64(d[hdrCount:])
	}
	return uint64(binary.BigEndian.Uint32(d[hdrCount:]))
}

// udpReceiver counts what arrives on one UDP stream the way iperf3's
// receiver does, so that both tools report the same numbers for the same
// traffic.
type udpReceiver struct {
	bytes uint64
	// highest is the highest packet count seen, which iperf3 reports as
	// the stream's packets.
	highest uint64
	// lost counts the gaps in the counts; a late datagram fills one.
	lost int64
	// outOfOrder counts datagrams whose count is not above highest.
	outOfOrder int64
	// jitter is the smoothed variation of transit time, RFC 3550
	// section 6.4.1 (RFC 1889's, which iperf3 cites), in microseconds.
	jitter      float64
	prevTransit int64
	seen        bool
}

// add accounts for a datagram of n bytes, numbered count, sent at
// sentUs (the sender's clock) and arriving at arrivalUs (ours).
func (r *udpReceiver) add(n int, count uint64, sentUs, arrivalUs int64) {
	r.bytes += uint64(n)
	switch {
	case count > r.highest:
		// Every number skipped is a datagram lost until it turns up.
		r.lost += int64(count - r.highest - 1)
		r.highest = count
	default:
		r.outOfOrder++
		if r.lost > 0 {
			r.lost--
		}
	}
	// RFC 3550 section 6.4.1: D(i-1,i) = (Rj - Ri) - (Sj - Si), the
	// difference of successive transit times, and J += (|D| - J)/16.
	// The two clocks need not agree: their offset cancels in D.
	transit := arrivalUs - sentUs
	if !r.seen {
		r.prevTransit, r.seen = transit, true
	}
	d := transit - r.prevTransit
	if d < 0 {
		d = -d
	}
	r.prevTransit = transit
	r.jitter += (float64(d) - r.jitter) / 16
}

// Jitter returns the smoothed jitter.
func (r *udpReceiver) Jitter() time.Duration {
	return time.Duration(r.jitter * float64(time.Microsecond))
}
