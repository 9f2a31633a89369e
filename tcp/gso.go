package tcp

import (
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/seqnum"
	"github.com/gonetstack/gonet/wire"
)

// Segmentation and checksum offload (TSO/GSO). When the route's link
// offers TSO (a TAP device with the virtio-net header), the sender builds
// one super-segment of up to 64 KiB where it would send several full-sized
// segments, and the link cuts it into segments of SND.MSS, copying the
// headers onto each: one buffer, one trip through IP, the NIC queue and
// the write(2) for up to 45 segments. Everything that is per segment on
// the wire stays per segment here: the retransmission queue gets one
// record per MSS-sized piece (noteSentSegments), retransmissions are
// single segments, and OutSegs counts pieces, as Linux counts
// tcp_skb_pcount. The same link finishes checksums (TxChecksum), so a
// segment carries only the pseudo-header's partial sum (wire/offload.go).
//
// In the other direction, the kernel hands a super-segment to the TAP whole
// and with its checksum partial: the TCP dealer trusts a checksum the link
// vouches for (buffer.Offload.ChecksumVerified), and the receiver counts the
// full-sized segments it holds towards its ACKs (segmentsIn).

// gsoMaxPayload bounds a super-segment's data so that its datagram, with
// the longest TCP header, fits IPv4's 65535 bytes; gsoMaxPayload6 so that
// its payload, TCP header and all, fits IPv6's Payload Length of 65535
// bytes (RFC 8200 section 3; jumbograms, RFC 2675, are not sent), which
// excludes IPv6's fixed header of 40 bytes.
const (
	gsoMaxPayload  = wire.IPv4MaxTotalLen - wire.IPv4MinHeaderLen - wire.TCPMaxHeaderLen
	gsoMaxPayload6 = wire.IPv6MaxPayloadLen - wire.TCPMaxHeaderLen
)

// gsoLimit is the bound on a super-segment's data over the connection's
// family.
func (c *Conn) gsoLimit() int {
	if c.id.local.Addr().Is6() {
		return gsoMaxPayload6
	}
	return gsoMaxPayload
}

// superSegment grows a full-sized segment (n == SND.MSS) into a
// super-segment of whole segments when the route's link offers TSO, within
// the data waiting, the usable window (congestion and peer's) and 64 KiB.
// The rules for small segments hold for the last piece as for any
// segment: sendData has already applied them to the first. Data beyond a
// whole number of segments is left for later when the window ends there,
// and, as Linux's tcp_mss_split_point does, when Nagle would hold it
// (RFC 9293 3.7.4: a small segment while data is unacknowledged).
func (c *Conn) superSegment(n, unsent, usable, inflight int, finDue bool) int {
	if n != c.snd.mss || !c.route.Offloads.TSO {
		return n
	}
	return superSegmentLen(c.snd.mss, unsent, usable, c.gsoLimit(), !c.sock.noDelay && inflight > 0 && !finDue)
}

// superSegmentLen is superSegment's arithmetic for a full-sized segment
// (mss bytes, no more than unsent and usable): as many whole segments as
// fit limit (gsoLimit), the window and the data, with a partial last one only
// when it ends the data and Nagle (nagle) does not hold it. An MSS so
// large that two segments do not fit (a link MTU near 64 KiB) leaves the
// one segment as it is.
func superSegmentLen(mss, unsent, usable, limit int, nagle bool) int {
	if 2*mss > limit {
		return mss
	}
	m := min(unsent, usable, limit/mss*mss)
	if m < unsent || nagle {
		m -= m % mss
	}
	return m
}

// noteSentSegments is noteSent for a segment of n bytes that may be a
// super-segment: one record per MSS-sized piece, the FIN on the last.
func (c *Conn) noteSentSegments(seq seqnum.Value, n int, fin bool) {
	for n > c.snd.mss {
		c.noteSent(seq, c.snd.mss, false)
		seq = seq.Add(seqnum.Size(c.snd.mss))
		n -= c.snd.mss
	}
	c.noteSent(seq, n, fin)
}

// finishSegment sets the checksum of the segment in pk (header of hl
// bytes, n bytes of data), or leaves it to the link, and marks a
// super-segment for the link to cut up. Offsets count from the TCP
// header; the layers below add theirs (buffer.Offload.Prepended).
func (c *Conn) finishSegment(pk *buffer.Packet, hl, n int) {
	caps := c.route.Offloads
	b := pk.Bytes()
	if !caps.TxChecksum {
		wire.SetTCPChecksum(b, c.id.local.Addr(), c.id.remote.Addr())
		c.p.Stats.OutSegs.Inc()
		return
	}
	wire.SetTCPPartialChecksum(b, c.id.local.Addr(), c.id.remote.Addr())
	pk.Offload.Flags = buffer.NeedsCsum
	pk.Offload.CsumStart = 0
	pk.Offload.CsumOffset = wire.TCPChecksumOffset
	if n <= c.snd.mss {
		c.p.Stats.OutSegs.Inc()
		return
	}
	pk.Offload.GSOType = buffer.GSOTCPv4
	if c.id.local.Addr().Is6() {
		pk.Offload.GSOType = buffer.GSOTCPv6
	}
	pk.Offload.GSOSize = uint16(c.snd.mss)
	pk.Offload.HdrLen = uint16(hl)
	c.p.Stats.OutSegs.Add(uint64((n + c.snd.mss - 1) / c.snd.mss))
}

// segmentsIn is how many full-sized segments a received one stands for,
// and whether it ends in a runt, a last segment shorter than the rest. A
// super-segment from the link holds len/GSOSize full-sized ones: GSOSize
// is its sender's own segment size, so the receiver knows which pieces are
// full-sized, as on the wire it does not (a segment shorter than our MSS
// may be full-sized for a sender that carries options or has a smaller
// MTU), and counts a plain segment as one whatever its size. The
// delayed-ACK rule (RFC 5681 section 4.2, RFC 9293 section 3.8.6.3: an ACK
// for at least every second full-sized segment or 2*RMSS bytes) counts
// these, as Linux counts the segments a GRO packet merged; counting the
// super-segment as one would hold the ACK for 64 KiB. A runt does not
// count: a full-sized segment and a runt are less than either bound, and
// their ACK waits a little for the next super-segment (input.go, runtAckDelay).
func segmentsIn(pk *buffer.Packet, n int) (full int, runt bool) {
	size := int(pk.Offload.GSOSize)
	if pk.Offload.GSOType == buffer.GSONone || size == 0 || n < size {
		return 1, false
	}
	return n / size, n%size != 0
}
