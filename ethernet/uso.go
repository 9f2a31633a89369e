package ethernet

import (
	"encoding/binary"
	"net/netip"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/wire"
)

// UDP runs in (VIRTIO_NET_HDR_GSO_UDP_L4). A link that takes UDP
// segmentation offload in (a TAP device whose reader set TUN_F_USO4 and
// TUN_F_USO6) hands over a run of one flow's datagrams as one frame, as
// the kernel's UDP GSO made it (a socket's UDP_SEGMENT, another GoNet's
// TAP runs across a bridge) or its GRO gathered it, where it would
// otherwise cut the run apart before the device and the reader would
// read each datagram with a read(2) of its own. The NIC cuts the run
// apart instead, as the kernel would have (__udp_gso_segment,
// inet_gso_segment, ipv6_gso_segment): each datagram a packet of its own
// with the run's headers, its own lengths, IPv4 identification (the
// run's plus its index) and header checksum, and a partial UDP checksum
// over its own length, so that every layer above sees datagrams as any
// link brings them and a socket's queue holds each in a buffer of its
// size. Copying them out of the run's 64 KiB buffer is what copyBreak
// would do for each of them anyway.
//
// The frame is the kernel's, but it is read from outside the process all
// the same: a run whose headers do not hold together is dropped whole
// and counted (RxUSODropped), never cut by lengths it does not vouch for.

// maxRunDatagrams is the most datagrams a run may hold: the kernel's own
// bound on a socket's UDP GSO (UDP_MAX_SEGMENTS, 128 since Linux 6.1). It
// bounds the packets one frame can take from the pool.
const maxRunDatagrams = 128

// udpRun is the layout of a UDP run, its data starting at the IP header.
type udpRun struct {
	l4       int // where UDP starts: the IP header's length
	end      int // where the run ends: its IP length
	size     int // payload bytes per datagram; the last may have fewer
	v6       bool
	src, dst netip.Addr
}

// parseRun checks that b, with offload o, is a UDP run the NIC can cut
// apart: IPv4 (options allowed, not a fragment, its header checksum
// right) or IPv6 with UDP as the next header, a UDP length that is the
// run's, at most maxRunDatagrams datagrams of o.GSOSize bytes, and a
// checksum the link vouches for (partial over UDP, or validated).
func parseRun(b []byte, o buffer.Offload) (udpRun, bool) {
	var r udpRun
	r.size = int(o.GSOSize)
	if o.GSOType != buffer.GSOUDPL4 || r.size == 0 || len(b) < 1 {
		return r, false
	}
	switch b[0] >> 4 {
	case 4:
		h, err := wire.ParseIPv4(b)
		if err != wire.IPv4OK || h.Protocol() != wire.ProtoUDP || h.IsFragment() {
			return r, false
		}
		r.l4, r.end, r.src, r.dst = h.HeaderLen(), h.TotalLen(), h.Src(), h.Dst()
	case 6:
		h, err := wire.ParseIPv6(b)
		if err != wire.IPv6OK || h.NextHeader() != wire.ProtoUDP {
			return r, false // extension headers in a run: not made by the kernel's UDP GSO
		}
		r.l4, r.end, r.v6 = wire.IPv6HeaderLen, wire.IPv6HeaderLen+h.PayloadLen(), true
		r.src, r.dst = h.Src(), h.Dst()
	default:
		return r, false
	}
	u, ok := wire.ParseUDP(b[r.l4:r.end])
	if !ok || u.Length() != r.end-r.l4 {
		return r, false
	}
	payload := r.end - r.l4 - wire.UDPHeaderLen
	if payload == 0 || (payload+r.size-1)/r.size > maxRunDatagrams {
		return r, false
	}
	switch {
	case o.Flags&buffer.NeedsCsum != 0:
		// Offsets count from the frame's start, Ethernet header included
		// (virtio 1.1 section 5.1.6).
		if int(o.CsumStart) != wire.EthernetHeaderLen+r.l4 || o.CsumOffset != wire.UDPChecksumOffset {
			return r, false
		}
	case o.Flags&buffer.DataValid == 0:
		// The run's checksum covers the run, not a datagram: without
		// the link's word for it there is nothing to check each against.
		return r, false
	}
	return r, true
}

// cutRun appends to dst the datagrams of the run p (its data from the IP
// header on), each a packet from the NIC's pool, and returns dst; p is
// left as it was. A run parseRun refuses is counted and yields nothing.
func (n *NIC) cutRun(p *buffer.Packet, dst []*buffer.Packet) []*buffer.Packet {
	b := p.Bytes()
	r, ok := parseRun(b, p.Offload)
	if !ok {
		n.Stats.RxUSODropped.Inc()
		return dst
	}
	hl := r.l4 + wire.UDPHeaderLen
	id := binary.BigEndian.Uint16(b[4:6]) // IPv4's identification; unused over IPv6
	partial := p.Offload.Flags&buffer.NeedsCsum != 0
	first := len(dst)
	for off, i := hl, 0; off < r.end; off, i = off+r.size, i+1 {
		seg := min(r.size, r.end-off)
		d := n.pool.Get(hl + seg)
		db := d.Bytes()
		copy(db, b[:hl])
		copy(db[hl:], b[off:off+seg])
		ipLen := hl + seg
		if r.v6 {
			binary.BigEndian.PutUint16(db[4:6], uint16(ipLen-wire.IPv6HeaderLen))
		} else {
			binary.BigEndian.PutUint16(db[2:4], uint16(ipLen))
			binary.BigEndian.PutUint16(db[4:6], id+uint16(i))
			wire.IPv4(db[:r.l4]).SetChecksum()
		}
		u := db[r.l4:]
		binary.BigEndian.PutUint16(u[4:6], uint16(len(u)))
		if partial {
			binary.BigEndian.PutUint16(u[6:8], wire.PartialChecksum(r.src, r.dst, wire.ProtoUDP, len(u)))
			d.Offload = buffer.Offload{Flags: buffer.NeedsCsum, CsumStart: p.Offload.CsumStart, CsumOffset: wire.UDPChecksumOffset}
		} else {
			wire.SetUDPChecksum(u, r.src, r.dst)
			d.Offload = buffer.Offload{Flags: buffer.DataValid}
		}
		dst = append(dst, d)
	}
	n.Stats.RxUSO.Inc()
	n.Stats.RxUSODatagrams.Add(uint64(len(dst) - first))
	return dst
}
