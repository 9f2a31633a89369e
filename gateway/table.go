package gateway

import (
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"
)

// The gateway's flow table: every flow relayed now, with both of its sides,
// for gonet ss and the status page.

// FlowInfo is a relayed flow as Gateway.Flows shows it, and as the
// daemon's control socket carries it to gonet ss.
type FlowInfo struct {
	Proto   Proto          `json:"proto"`
	Inbound bool           `json:"inbound,omitempty"` // made by an inbound forward: the host's peer opened it
	Guest   netip.AddrPort `json:"guest"`             // the guest's end
	Peer    netip.AddrPort `json:"peer"`              // the other end as the guest sees it: its destination, or the gateway for an inbound flow
	// HostLocal and HostRemote are the host socket's ends.
	HostLocal  netip.AddrPort `json:"host_local"`
	HostRemote netip.AddrPort `json:"host_remote"`
	// ToHost and ToGuest count bytes (TCP) or datagrams (UDP) each way.
	ToHost  uint64 `json:"to_host"`
	ToGuest uint64 `json:"to_guest"`
	// Since is when the flow was relayed; LastActive when it last carried
	// something either way (Since until then).
	Since      time.Time `json:"since"`
	LastActive time.Time `json:"last_active"`
}

// flowRecord is a flow's entry in the table: what does not change, and
// counters its relay adds to.
type flowRecord struct {
	info FlowInfo
	// host gives the host socket's own address when Flows asks: for a
	// socket the gateway connected that is a getsockname(2), which a
	// flow should not pay for unless it is listed.
	host            interface{ LocalAddr() net.Addr }
	toHost, toGuest atomic.Uint64
	last            atomic.Int64 // unix nanoseconds of the last carried either way; 0: none yet
}

// carriedToHost counts n bytes or datagrams carried to the host.
func (r *flowRecord) carriedToHost(n uint64) {
	r.toHost.Add(n)
	r.last.Store(time.Now().UnixNano())
}

// carriedToGuest counts n bytes or datagrams carried to the guest.
func (r *flowRecord) carriedToGuest(n uint64) {
	r.toGuest.Add(n)
	r.last.Store(time.Now().UnixNano())
}

// track enters a flow in the table; the returned function takes it out.
func (g *Gateway) track(info FlowInfo, host interface {
	LocalAddr() net.Addr
	RemoteAddr() net.Addr
}) (*flowRecord, func()) {
	info.HostRemote = addrPortOf(host.RemoteAddr())
	info.Since = time.Now()
	rec := &flowRecord{info: info, host: host}
	g.tableMu.Lock()
	g.table[rec] = struct{}{}
	g.tableMu.Unlock()
	return rec, func() {
		g.tableMu.Lock()
		delete(g.table, rec)
		g.tableMu.Unlock()
	}
}

// addrPortOf returns a TCP or UDP socket address as an AddrPort.
func addrPortOf(a net.Addr) netip.AddrPort {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.AddrPort()
	case *net.UDPAddr:
		return a.AddrPort()
	}
	return netip.AddrPort{}
}

// Flows returns the flows relayed now, oldest first.
func (g *Gateway) Flows() []FlowInfo {
	g.tableMu.Lock()
	recs := make([]*flowRecord, 0, len(g.table))
	for rec := range g.table {
		recs = append(recs, rec)
	}
	g.tableMu.Unlock()
	// The host sockets' addresses are asked outside the lock that new
	// flows take.
	out := make([]FlowInfo, 0, len(recs))
	for _, rec := range recs {
		info := rec.info
		info.HostLocal = addrPortOf(rec.host.LocalAddr())
		info.ToHost, info.ToGuest = rec.toHost.Load(), rec.toGuest.Load()
		info.LastActive = info.Since
		if last := rec.last.Load(); last != 0 {
			info.LastActive = time.Unix(0, last)
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b FlowInfo) int { return a.Since.Compare(b.Since) })
	return out
}
