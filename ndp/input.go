package ndp

import (
	"bytes"
	"net/netip"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/wire"
)

// Receiving: the validity checks of RFC 4861 sections 6.1.2 (RA), 7.1.1
// (NS), 7.1.2 (NA) and 8.1 (Redirect), then each message's processing
// (sections 6.3.4, 7.2.3, 7.2.5, 8.3, and RFC 4862 section 5.4.3-5.4.4 for
// the addresses under DAD). A message that fails a check is dropped
// silently and counted under the reason.

// Handle takes an ICMPv6 message of the types ndp handles: Router
// Solicitation and Advertisement, Neighbor Solicitation and Advertisement,
// Redirect (133-137) and MLD Queries and Reports (130, 131, 143). The IPv6
// layer's dealer calls it in its own goroutine: pkt holds the whole
// datagram, h says where the ICMPv6 message starts, and reassembled says
// whether the datagram came in fragments. Handle owns pkt and does not
// block.
func (p *Protocol) Handle(pkt *buffer.Packet, h ip.Header, reassembled bool) {
	defer pkt.Release()
	if p.host == nil {
		p.Stats.InUnknown.Inc() // not started: there is no address to answer for
		return
	}
	b := pkt.Bytes()
	if h.Off > len(b) {
		p.Stats.InMalformed.Inc()
		return
	}
	m, ok := wire.ParseICMPv6(b[h.Off:])
	if !ok {
		p.Stats.InMalformed.Inc()
		return
	}
	// ndp is one link's: its addresses carry no zone, where the IPv6
	// layer zones link-scoped ones with the interface's name. A router
	// known from its advertisement's source is then the same router as
	// the target of its Neighbor Advertisement (RFC 4861 section 7.2.5's
	// IsRouter change) and as a Redirect's source.
	h.Src, h.Dst = h.Src.WithZone(""), h.Dst.WithZone("")
	typ := m.Type()
	switch typ {
	case wire.ICMPv6RouterSolicitation:
		p.Stats.InRouterSolicits.Inc()
	case wire.ICMPv6RouterAdvertisement:
		p.Stats.InRouterAdvertisements.Inc()
	case wire.ICMPv6NeighborSolicitation:
		p.Stats.InNeighborSolicits.Inc()
	case wire.ICMPv6NeighborAdvertisement:
		p.Stats.InNeighborAdvertisements.Inc()
	case wire.ICMPv6Redirect:
		p.Stats.InRedirects.Inc()
	case wire.ICMPv6MLDQuery:
		p.Stats.InGroupMembQueries.Inc()
	case wire.ICMPv6MLDv2Report, wire.ICMPv6MLDv1Done:
		// A host does not suppress its reports on hearing another's
		// (RFC 3810 section 6.2 has no such rule), and a Done is the
		// routers' business: nothing to do.
		p.Stats.InMLDReports.Inc()
		return
	case wire.ICMPv6MLDv1Report:
		// In MLDv1 mode another listener's Report answers for us.
		p.Stats.InMLDReports.Inc()
		p.handleV1Report(h, m)
		return
	default:
		p.Stats.InUnknown.Inc()
		return
	}
	// RFC 6980 section 5: "nodes MUST silently ignore NDP messages if the
	// packets carrying them include a Fragment Header" (MLD is not
	// covered by it, but a router's query never needs fragmenting).
	if reassembled {
		p.Stats.InFragmented.Inc()
		return
	}
	if typ == wire.ICMPv6MLDQuery {
		p.handleQuery(h, m)
		return
	}
	// "The IP Hop Limit field has a value of 255, i.e., the packet could
	// not possibly have been forwarded by a router" (sections 6.1.1,
	// 6.1.2, 7.1.1, 7.1.2, 8.1).
	if h.TTL != ndHopLimit {
		p.Stats.InBadHopLimit.Inc()
		return
	}
	if !m.ChecksumValid(h.Src, h.Dst) {
		p.Stats.InBadChecksum.Inc()
		return
	}
	if m.Code() != 0 {
		p.Stats.InBadCode.Inc()
		return
	}
	if src := ipv6.CheckSource(h.Src); src != ipv6.SourceOK && src != ipv6.SourceUnspecified {
		p.Stats.InBadSource.Inc()
		return
	}
	switch typ {
	case wire.ICMPv6RouterSolicitation:
		p.handleRS(h, m)
	case wire.ICMPv6RouterAdvertisement:
		p.handleRA(h, m)
	case wire.ICMPv6NeighborSolicitation:
		p.handleNS(h, m)
	case wire.ICMPv6NeighborAdvertisement:
		p.handleNA(h, m)
	case wire.ICMPv6Redirect:
		p.handleRedirect(h, m)
	}
}

// handleNS validates (section 7.1.1) and answers a Neighbor Solicitation
// (section 7.2.3), or takes it as DAD's sign of a duplicate (RFC 4862
// section 5.4.3).
func (p *Protocol) handleNS(h ip.Header, m wire.ICMPv6) {
	ns, ok := wire.ParseNeighborSolicitation(m)
	if !ok {
		p.Stats.InMalformed.Inc()
		return
	}
	target := ns.Target()
	if target.IsMulticast() {
		p.Stats.InBadTarget.Inc()
		return
	}
	mac, hasMAC := linkAddr(ns.Options(), wire.NDOptSourceLinkAddr)
	dad := h.Src.IsUnspecified()
	// "If the IP source address is the unspecified address, the IP
	// destination address is a solicited-node multicast address" and
	// "there is no source link-layer address option in the message".
	if dad && (!ipv6.IsSolicitedNode(h.Dst) || hasSLLA(ns.Options())) {
		p.Stats.InBadDest.Inc()
		return
	}
	p.mu.Lock()
	defer p.unlock()
	a := p.addrs[target]
	if a == nil || a.state == Duplicate {
		p.Stats.InNotOurs.Inc()
		return
	}
	if dad && ownNonce(ns.Options(), a.nonce) {
		// Our own probe, looped back by the link (a bridge's loop, a
		// reflecting switch port): not another node's (RFC 7527
		// section 4.2, enhanced DAD, as Linux's).
		p.Stats.DADLoopedBack.Inc()
		return
	}
	if a.state.underDAD() {
		// RFC 4862 section 5.4.3: from :: it is another node's DAD for
		// the same address, a duplicate; from a unicast source it is
		// address resolution by a node that should not yet know the
		// address, and is silently discarded, unless the address is
		// optimistic and so in use (RFC 4429 section 3.3), answered
		// below.
		if dad {
			p.duplicateLocked(a)
		}
		if dad || a.state == Tentative {
			return
		}
	}
	if dad {
		// Another node's DAD for an address we hold: defend it, to
		// all-nodes, unsolicited (section 7.2.4).
		p.sendLater(p.neighborAdvertisement(target, ipv6.AllNodes, target, false, true))
		return
	}
	if hasMAC {
		p.learnLocked(h.Src, mac)
	}
	// "a node sends a Neighbor Advertisement in response to a valid
	// Neighbor Solicitation targeting one of the node's assigned
	// addresses", solicited, to the solicitation's source; for an
	// optimistic address without Override, so that if the address
	// proves another node's, the asker's entry for that node stands
	// (RFC 4429 section 2.2).
	p.sendLater(p.neighborAdvertisement(target, h.Src, target, true, a.state != Optimistic))
}

// handleNA validates (section 7.1.2) a Neighbor Advertisement and applies
// it to the cache (section 7.2.5), or takes it as DAD's sign of a
// duplicate (RFC 4862 section 5.4.4).
func (p *Protocol) handleNA(h ip.Header, m wire.ICMPv6) {
	na, ok := wire.ParseNeighborAdvertisement(m)
	if !ok {
		p.Stats.InMalformed.Inc()
		return
	}
	target := na.Target()
	if target.IsMulticast() {
		p.Stats.InBadTarget.Inc()
		return
	}
	// "If the IP Destination Address is a multicast address the
	// Solicited flag is zero."
	if h.Dst.IsMulticast() && na.Solicited() {
		p.Stats.InBadDest.Inc()
		return
	}
	if h.Src.IsUnspecified() {
		p.Stats.InBadSource.Inc()
		return
	}
	mac, hasMAC := linkAddr(na.Options(), wire.NDOptTargetLinkAddr)
	p.mu.Lock()
	defer p.unlock()
	if a := p.addrs[target]; a != nil {
		switch a.state {
		case Tentative, Optimistic:
			// "If the target address matches a tentative address,
			// the tentative address is not unique."
			p.duplicateLocked(a)
		case Preferred, Deprecated:
			p.Stats.InConflicts.Inc()
			p.later(func() { p.conflicted(target) })
		}
		return
	}
	p.advertisedLocked(target, mac, hasMAC, na.Solicited(), na.Override(), na.Router())
}

// handleRA validates (section 6.1.2) a Router Advertisement and processes
// it (section 6.3.4).
func (p *Protocol) handleRA(h ip.Header, m wire.ICMPv6) {
	ra, ok := wire.ParseRouterAdvertisement(m)
	if !ok {
		p.Stats.InMalformed.Inc()
		return
	}
	// "IP Source Address is a link-local address. Routers must use their
	// link-local address as the source for Router Advertisement ... so
	// that hosts can uniquely identify routers."
	if !h.Src.IsLinkLocalUnicast() {
		p.Stats.InBadSource.Inc()
		return
	}
	p.mu.Lock()
	defer p.unlock()
	if p.host == nil || p.closed {
		return
	}
	if p.adv != nil {
		// Section 6.2.7: a router checks other routers' advertisements
		// for consistency with its own; it takes nothing from them.
		p.Stats.InOtherRouterAds.Inc()
		return
	}
	p.routerAdvertisementLocked(h.Src, ra)
}

// handleRedirect validates (section 8.1) and applies (section 8.3) a
// Redirect.
func (p *Protocol) handleRedirect(h ip.Header, m wire.ICMPv6) {
	r, ok := wire.ParseRedirect(m)
	if !ok {
		p.Stats.InMalformed.Inc()
		return
	}
	target, dst := r.Target(), r.Dst()
	// "The IP source address of the Redirect is the same as the current
	// first-hop router for the specified ICMP Destination Address."
	// "The ICMP Destination Address field in the redirect message does
	// not contain a multicast address." "The ICMP Target Address is
	// either a link-local address (when redirected to a router) or the
	// same as the ICMP Destination Address (when redirected to the
	// on-link destination)."
	// Redirects are for hosts (section 8.3, "Host Specification"): an
	// advertising interface, a router's, refuses them, as Linux's
	// accept_redirects is off once an interface forwards.
	if !h.Src.IsLinkLocalUnicast() || p.host == nil || p.isRouter.Load() {
		p.Stats.RedirectsRefused.Inc()
		return
	}
	if dst.IsMulticast() || (!target.IsLinkLocalUnicast() && target != dst) {
		p.Stats.RedirectsRefused.Inc()
		return
	}
	if hop, ok := p.host.NextHop(dst); !ok || hop.WithZone("") != h.Src {
		p.Stats.RedirectsRefused.Inc()
		return
	}
	p.mu.Lock()
	defer p.unlock()
	if p.closed {
		return
	}
	p.redirectLocked(r)
}

// mldValid checks what every MLD message must be, counting a drop: RFC
// 3810 section 5.1.14 (and RFC 2710 section 5): "the node checks if the
// source address of the message is a valid link-local address, if the Hop
// Limit is set to 1 ... If any of these checks fails, the packet is
// dropped", and the checksum; the Router Alert option is the IPv6 layer's
// to see. A Report may come from the unspecified address, from a node
// without an address yet (RFC 3590 section 4); a Query may not.
func (p *Protocol) mldValid(h ip.Header, m wire.ICMPv6, unspecifiedOK bool) bool {
	switch {
	case h.TTL != 1:
		p.Stats.InBadHopLimit.Inc()
	case !h.Src.IsLinkLocalUnicast() && !(unspecifiedOK && h.Src.IsUnspecified()):
		p.Stats.InBadSource.Inc()
	case !m.ChecksumValid(h.Src, h.Dst):
		p.Stats.InBadChecksum.Inc()
	default:
		return true
	}
	return false
}

// handleQuery validates an MLD Query and schedules the answer (RFC 3810
// section 6.2). The Multicast Address is unspecified (a General Query) or
// a group (section 5.1.5), and a General Query lists no sources (section
// 5.1.10: sources are listed "in a Multicast Address and Source Specific
// Query"; Linux drops a General Query with sources too).
func (p *Protocol) handleQuery(h ip.Header, m wire.ICMPv6) {
	if !p.mldValid(h, m, false) {
		return
	}
	q, ok := wire.ParseMLDQuery(m)
	if !ok {
		p.Stats.InMalformed.Inc()
		return
	}
	group := q.Group()
	if !group.IsUnspecified() && !group.IsMulticast() || group.IsUnspecified() && q.NumSources() > 0 {
		p.Stats.InMalformed.Inc()
		return
	}
	var sources []netip.Addr
	if n := q.NumSources(); n > 0 {
		p.Stats.InMLDSourceQueries.Inc()
		sources = make([]netip.Addr, n)
		for i := range sources {
			sources[i] = q.Source(i)
		}
	}
	p.mu.Lock()
	defer p.unlock()
	if p.closed {
		return
	}
	if qrv := q.QRV(); !q.IsV1() && qrv != 0 {
		p.mld.robustness = int(qrv)
	}
	p.queryLocked(group, sources, time.Duration(q.MaxRespDelay())*time.Millisecond, q.IsV1())
}

// handleV1Report takes another listener's MLDv1 Report, sent to the group
// it names (RFC 2710 section 3.6).
func (p *Protocol) handleV1Report(h ip.Header, m wire.ICMPv6) {
	if !p.mldValid(h, m, true) {
		return
	}
	r, ok := wire.ParseMLDv1(m)
	if !ok || !r.Group().IsMulticast() || r.Group() != h.Dst {
		p.Stats.InMalformed.Inc()
		return
	}
	p.mu.Lock()
	defer p.unlock()
	if !p.closed {
		p.otherReportLocked(r.Group())
	}
}

// linkAddr returns the Ethernet address of the first link-layer address
// option of type typ.
func linkAddr(opts wire.NDOptions, typ uint8) (wire.MAC, bool) {
	for len(opts) > 0 {
		var o wire.NDOption
		o, opts = opts.Next()
		if o.Type() == typ {
			return o.LinkLayerAddr()
		}
	}
	return wire.MAC{}, false
}

// ownNonce reports whether opts hold a Nonce option of nonce: a DAD probe
// of ours come back (RFC 7527 section 4.2).
func ownNonce(opts wire.NDOptions, nonce [wire.NDNonceSize]byte) bool {
	for len(opts) > 0 {
		var o wire.NDOption
		o, opts = opts.Next()
		if n, ok := o.Nonce(); ok && bytes.Equal(n, nonce[:]) {
			return true
		}
	}
	return false
}

// hasSLLA reports whether opts hold a Source Link-Layer Address option,
// of any length.
func hasSLLA(opts wire.NDOptions) bool {
	for len(opts) > 0 {
		var o wire.NDOption
		o, opts = opts.Next()
		if o.Type() == wire.NDOptSourceLinkAddr {
			return true
		}
	}
	return false
}
