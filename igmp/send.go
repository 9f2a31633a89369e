package igmp

import (
	"net/netip"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/sourcefilter"
	"github.com/gonetstack/gonet/wire"
)

// What IGMP sends (RFC 3376 section 4.2.14, RFC 2236 section 9): version
// 3 reports to all-IGMPv3-routers, version 1 and 2 reports to the group
// reported, Leave Group messages to all-routers. The interface's output
// adds TTL 1 and the Router Alert option.

// sourceLen is a source's size in a record.
const sourceLen = 4

// reportRoom is the room a version 3 report has for group records (RFC
// 3376 section 4.2.16: "if the set of Group Records required in a Report
// does not fit within the size limit of a single Report message (as
// determined by the MTU of the network on which it will be sent)"): what
// a datagram of the interface's MTU with the Router Alert option leaves
// after the report's fixed part, as Linux's igmpv3_newpack, and room for
// one source at least.
func (p *Protocol) reportRoom() int {
	room := p.out.MTU() - wire.IPv4MinHeaderLen - len(wire.IPv4RouterAlert) - wire.IGMPv3ReportLen
	return max(room, wire.IGMPv3RecordLen+sourceLen)
}

// outMsg is a message decided under p.mu, sent by unlock.
type outMsg struct {
	dst netip.Addr
	pkt *buffer.Packet
}

func (p *Protocol) queue1(dst netip.Addr, pkt *buffer.Packet) {
	p.queue = append(p.queue, outMsg{dst, pkt})
}

// queueV3Report queues a version 3 report of recs. p.mu is held.
func (p *Protocol) queueV3Report(recs []wire.IGMPv3Record) {
	pkt := p.env.Pool.Get(wire.IGMPv3ReportLenOf(recs))
	wire.EncodeIGMPv3Report(pkt.Bytes(), recs)
	p.Stats.OutReportsV3.Inc()
	p.queue1(AllIGMPv3Routers, pkt)
}

// queueV3Records queues version 3 reports of recs, as many as they fill
// (RFC 3376 section 4.2.16: records that do not fit one report go in
// more, a record too long for one split, but for an exclude list's, which
// is cut; sourcefilter.Split). p.mu is held.
func (p *Protocol) queueV3Records(recs []sourcefilter.Record) {
	for _, report := range sourcefilter.Split(recs, p.reportRoom(), wire.IGMPv3RecordLen, sourceLen) {
		out := make([]wire.IGMPv3Record, len(report))
		for i, r := range report {
			// sourcefilter's record types have the wire's numbers.
			out[i] = wire.IGMPv3Record{Type: wire.IGMPv3RecordType(r.Type), Group: r.Group, Sources: r.Sources}
		}
		p.queueV3Report(out)
	}
}

// queueV1V2Report queues a version 1 or 2 Membership Report of group, to
// the group. p.mu is held.
func (p *Protocol) queueV1V2Report(group netip.Addr, version int) {
	typ := uint8(wire.IGMPv2Report)
	if version == 1 {
		typ = wire.IGMPv1Report
		p.Stats.OutReportsV1.Inc()
	} else {
		p.Stats.OutReportsV2.Inc()
	}
	pkt := p.env.Pool.Get(wire.IGMPv2Len)
	wire.EncodeIGMPv2(pkt.Bytes(), typ, 0, group)
	p.queue1(group, pkt)
}

// queueLeave queues a version 2 Leave Group of group. p.mu is held.
func (p *Protocol) queueLeave(group netip.Addr) {
	pkt := p.env.Pool.Get(wire.IGMPv2Len)
	wire.EncodeIGMPv2(pkt.Bytes(), wire.IGMPv2Leave, 0, group)
	p.Stats.OutLeaves.Inc()
	p.queue1(AllRouters, pkt)
}

// unlock releases p.mu and sends what was queued under it. Sending waits
// on the NIC's queue, so it is done without p.mu, which the IPv4 dealer
// takes for every IGMP message; sendMu, taken before p.mu is released,
// keeps the messages in the order they were decided.
func (p *Protocol) unlock() {
	q := p.queue
	if len(q) == 0 {
		p.mu.Unlock()
		return
	}
	p.queue = nil
	p.sendMu.Lock()
	p.mu.Unlock()
	defer p.sendMu.Unlock()
	for _, m := range q {
		p.out.SendIGMP(m.dst, m.pkt)
	}
}
