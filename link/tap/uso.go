package tap

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/internal/gsorun"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/wire"
)

// UDP segmentation offload out (VIRTIO_NET_HDR_GSO_UDP_L4, which tun has
// taken since Linux 6.2). A run of a UDP flow's datagrams in one write
// batch, of one size but the last, goes to the kernel as one frame: the
// first's headers, adjusted to the run's length, and every datagram's
// payload behind them, gathered where each lies (no copy). The kernel's
// receive path then runs once for the run, and its UDP GSO cuts the
// datagrams apart where a socket takes them or where a device sends them
// on, each with its own headers and checksum. A write a frame, as before,
// costs the whole path for each datagram: this is what GoNet's UDP
// senders (the gateway's relay to the guest, iperf3, a bridge's TAPs)
// pay most for.

// UDP segmentation offload in: the kernel hands over its own UDP GSO
// runs whole (a socket's UDP_SEGMENT, another GoNet's runs across a
// bridge) when the reader asks for them with TUN_F_USO4 and TUN_F_USO6,
// both or neither (tun_set_offload); ethernet.NIC cuts them apart. Their
// values are linux/if_tun.h's, which x/sys/unix does not name.
const (
	tunFUSO4 = 0x20
	tunFUSO6 = 0x40
)

// maxUSOSegments is the most datagrams one frame carries: as many as a
// write batch holds, and as the kernel's UDP GSO takes from a socket
// (UDP_MAX_SEGMENTS, 64 before Linux 6.1).
const maxUSOSegments = 64

// usoHeadroom is the most header bytes a run's frame has: the virtio-net
// header, Ethernet's, IPv6's fixed one and UDP's.
const usoHeadroom = VNetHdrLen + link.EthernetHeaderLen + wire.IPv6HeaderLen + wire.UDPHeaderLen

// usoDatagram locates a frame's headers, if it is a UDP datagram a run can
// carry: Ethernet, then IPv4 without options and not a fragment or IPv6
// without extension headers, then UDP with a payload, the lengths
// consistent, no loans, its checksum whole or partial over UDP alone.
// l4 is where UDP starts; ok is false for anything else.
func usoDatagram(p *buffer.Packet) (b []byte, l4 int, ok bool) {
	if p.Borrowed() != 0 || p.Offload.GSOType != buffer.GSONone {
		return nil, 0, false
	}
	b = p.Bytes()
	const l3 = link.EthernetHeaderLen
	if len(b) < l3+wire.IPv4MinHeaderLen {
		return nil, 0, false
	}
	switch binary.BigEndian.Uint16(b[12:14]) {
	case wire.EtherTypeIPv4:
		h := b[l3:]
		if h[0] != 0x45 || h[9] != wire.ProtoUDP || binary.BigEndian.Uint16(h[6:8])&0x3fff != 0 ||
			int(binary.BigEndian.Uint16(h[2:4])) != len(h) {
			return nil, 0, false
		}
		l4 = l3 + wire.IPv4MinHeaderLen
	case wire.EtherTypeIPv6:
		if len(b) < l3+wire.IPv6HeaderLen {
			return nil, 0, false
		}
		h := b[l3:]
		if h[0]>>4 != 6 || h[6] != wire.ProtoUDP || int(binary.BigEndian.Uint16(h[4:6])) != len(h)-wire.IPv6HeaderLen {
			return nil, 0, false
		}
		l4 = l3 + wire.IPv6HeaderLen
	default:
		return nil, 0, false
	}
	if len(b) <= l4+wire.UDPHeaderLen || int(binary.BigEndian.Uint16(b[l4+4:l4+6])) != len(b)-l4 {
		return nil, 0, false
	}
	if o := p.Offload; o.Flags&buffer.NeedsCsum != 0 && (int(o.CsumStart) != l4 || o.CsumOffset != wire.UDPChecksumOffset) {
		return nil, 0, false
	}
	return b, l4, true
}

// sameFlow reports whether b's headers before the lengths and checksums
// are first's: the same Ethernet addresses, IP addresses, traffic class,
// TTL or hop limit and flags, and UDP ports, both UDP frames with UDP at l4.
func sameFlow(first, b []byte, l4 int) bool {
	const l3 = link.EthernetHeaderLen
	if string(first[:l3]) != string(b[:l3]) || string(first[l4:l4+4]) != string(b[l4:l4+4]) {
		return false
	}
	if l4 == l3+wire.IPv4MinHeaderLen {
		// TOS; flags (DF) and fragment offset; TTL and protocol;
		// addresses. Not the length, the ID or the checksum.
		return first[l3+1] == b[l3+1] && string(first[l3+6:l3+10]) == string(b[l3+6:l3+10]) &&
			string(first[l3+12:l4]) == string(b[l3+12:l4])
	}
	// Version, traffic class and flow label; next header and hop limit;
	// addresses. Not the payload length.
	return string(first[l3:l3+4]) == string(b[l3:l3+4]) && string(first[l3+6:l4]) == string(b[l3+6:l4])
}

// usoRun is how many frames of pkts, from the first, one frame can carry
// (gsorun.Len): UDP datagrams of one flow (usoDatagram, sameFlow), within
// maxUSOSegments and the 65535 bytes of an IP length; 1 when none can
// follow the first.
func usoRun(pkts []*buffer.Packet) int {
	first, l4, ok := usoDatagram(pkts[0])
	if !ok {
		return 1
	}
	hl := l4 + wire.UDPHeaderLen
	maxBytes := 0xffff - runLength(l4, 0)
	return gsorun.Len(len(pkts), maxUSOSegments, maxBytes, func(i int) (int, bool) {
		if i == 0 {
			return len(first) - hl, true
		}
		b, bl4, ok := usoDatagram(pkts[i])
		if !ok || bl4 != l4 || !sameFlow(first, b, l4) {
			return 0, false
		}
		return len(b) - hl, true
	})
}

// runLength is the IP length field of a run's frame of total payload
// bytes: IPv4's total length, IPv6's payload length.
func runLength(l4, total int) int {
	if l4 == link.EthernetHeaderLen+wire.IPv4MinHeaderLen {
		return wire.IPv4MinHeaderLen + wire.UDPHeaderLen + total
	}
	return wire.UDPHeaderLen + total
}

// writeUSO writes pkts, a run (usoRun), as one frame with
// VIRTIO_NET_HDR_GSO_UDP_L4: the headers built in q.usoHdr from the
// first's, and every payload where it lies.
func (q *queue) writeUSO(fd int, pkts []*buffer.Packet) error {
	first, l4, _ := usoDatagram(pkts[0])
	hl := l4 + wire.UDPHeaderLen
	size := len(first) - hl
	total := 0
	q.pieces = append(q.pieces[:0], nil)
	for _, p := range pkts {
		payload := p.Bytes()[hl:]
		total += len(payload)
		q.pieces = append(q.pieces, payload)
	}
	h := q.usoHdr[:VNetHdrLen+hl]
	encodeVNetHdr(h, buffer.Offload{
		Flags: buffer.NeedsCsum, GSOType: buffer.GSOUDPL4, HdrLen: uint16(hl), GSOSize: uint16(size),
		CsumStart: uint16(l4), CsumOffset: wire.UDPChecksumOffset,
	})
	frame := h[VNetHdrLen:]
	copy(frame, first[:hl])
	const l3 = link.EthernetHeaderLen
	ipLen := runLength(l4, total)
	var src, dst []byte
	if l4 == l3+wire.IPv4MinHeaderLen {
		ip := frame[l3:l4]
		binary.BigEndian.PutUint16(ip[2:4], uint16(ipLen))
		wire.IPv4(ip).SetChecksum()
		src, dst = ip[12:16], ip[16:20]
	} else {
		ip := frame[l3:l4]
		binary.BigEndian.PutUint16(ip[4:6], uint16(ipLen))
		src, dst = ip[8:24], ip[24:40]
	}
	// The partial checksum over the run's length, as a socket's UDP GSO
	// leaves it: the kernel adjusts it to each datagram's length as it
	// cuts them apart (__udp_gso_segment).
	udp := frame[l4:hl]
	udpLen := wire.UDPHeaderLen + total
	binary.BigEndian.PutUint16(udp[4:6], uint16(udpLen))
	binary.BigEndian.PutUint16(udp[6:8], wire.Fold(pseudoSum(src, dst, udpLen)))
	q.pieces[0] = h
	_, err := q.e.sysWrite(fd, q.pieces)
	clear(q.pieces)
	return err
}

// pseudoSum is the UDP pseudo-header's sum (RFC 768, RFC 8200 section
// 8.1) for addresses as they lie in a header.
func pseudoSum(src, dst []byte, length int) uint32 {
	sum := wire.Sum(src, 0)
	sum = wire.Sum(dst, sum)
	return sum + uint32(wire.ProtoUDP) + uint32(length>>16) + uint32(length&0xffff)
}

// writeRun writes the run of n frames at q.wr.n as one, counting it; a
// kernel that refuses the frame type (EINVAL: older than Linux 6.2) has
// runs written a frame each from then on.
func (q *queue) writeRun(fd int, n int) error {
	e := q.e
	err := q.writeUSO(fd, q.wr.pkts[q.wr.n:q.wr.n+n])
	switch err {
	case nil:
		e.stats.TxFrames.Inc()
		e.stats.TxGSO.Inc()
		e.stats.TxCsumPartial.Inc()
		e.stats.TxUSO.Add(uint64(n))
		for _, p := range q.wr.pkts[q.wr.n : q.wr.n+n] {
			e.stats.TxBytes.Add(uint64(p.Len()))
		}
	case unix.EINVAL:
		e.noUSO.Store(true)
		e.stats.TxUSORefused.Inc()
	}
	return err
}
