package igmp

import (
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/wire"
)

// HandleIP takes an IGMP message the IPv4 layer received on the
// interface: it validates it (length and checksum, RFC 3376 section 4;
// the lengths of section 7.1), counts every drop, and acts on queries and
// on other hosts' reports. It runs in the IPv4 dealer's goroutine and
// takes ownership of pk.
func (p *Protocol) HandleIP(pk *buffer.Packet, h ip.Header) {
	defer pk.Release()
	p.Stats.InMessages.Inc()
	m, verr := wire.ParseIGMP(pk.Bytes()[h.Off:])
	switch verr {
	case wire.IGMPOK:
	case wire.IGMPTruncated:
		p.Stats.InTruncated.Inc()
		return
	case wire.IGMPBadChecksum:
		p.Stats.InCsumErrors.Inc()
		return
	default:
		p.Stats.InBadLength.Inc()
		return
	}
	switch m.Type() {
	case wire.IGMPQuery:
		p.mu.Lock()
		defer p.unlock()
		if !p.closed {
			p.queryLocked(m, h.Dst)
		}
	case wire.IGMPv1Report, wire.IGMPv2Report:
		p.Stats.InReports.Inc()
		p.mu.Lock()
		defer p.unlock()
		if !p.closed {
			p.otherReportLocked(m.Group())
		}
	case wire.IGMPv3Report:
		p.Stats.InReports.Inc()
	case wire.IGMPv2Leave:
		p.Stats.InLeaves.Inc()
	default:
		// RFC 3376 section 4: "Unrecognized message types MUST be
		// silently ignored."
		p.Stats.InUnknownType.Inc()
	}
}
