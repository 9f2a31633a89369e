package tcp

import (
	"net/netip"
	"sort"
	"time"
)

// ConnInfo is one row of the connection table, like a line of `ss -tani`.
type ConnInfo struct {
	State       string
	Local       netip.AddrPort
	Remote      netip.AddrPort
	SendQueue   int // bytes written and not yet acknowledged
	RecvQueue   int // bytes received and not yet read
	RTT         time.Duration
	RTTVar      time.Duration
	RTO         time.Duration
	MSS         int
	CWnd        int // bytes
	SSThresh    int // bytes
	SendWindow  int // the peer's window, bytes
	RecvBuffer  int // the receive buffer, bytes: auto-tuned unless set
	Retransmits uint64
	// Congestion names the congestion control ("cubic", "newreno").
	Congestion string
	// ECN: negotiated (RFC 3168); ECNSeen: a CE mark has arrived.
	ECN, ECNSeen bool
	// The options the SYNs agreed on, as ss -ti lists them: timestamps
	// (RFC 7323), SACK (RFC 2018) and window scaling with the peer's
	// shift (SndWScale) and ours (RcvWScale).
	Timestamps, SACK, WScale bool
	SndWScale, RcvWScale     uint8
}

// Info returns the connection's row of the table.
func (c *Conn) Info() ConnInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	ci := ConnInfo{
		State:       c.state.String(),
		Local:       c.id.local,
		Remote:      c.id.remote,
		SendQueue:   c.sock.sndBuf.n,
		RecvQueue:   c.sock.rcvBuf.n,
		RTT:         c.snd.srtt,
		RTTVar:      c.snd.rttvar,
		RTO:         c.snd.rto,
		MSS:         c.snd.mss,
		SendWindow:  int(c.snd.wnd),
		RecvBuffer:  c.sock.rcvBufSize,
		Retransmits: c.snd.retransmits,
		ECN:         c.ecn.ok,
		ECNSeen:     c.ecn.seen,
	}
	ci.Timestamps, ci.SACK, ci.WScale = c.tsOK, c.sackOK, c.wsOK
	if ci.WScale {
		ci.SndWScale, ci.RcvWScale = c.snd.wscale, c.rcv.wscale
	}
	if c.snd.cc != nil {
		ci.Congestion, ci.CWnd, ci.SSThresh = c.snd.cc.Name(), c.snd.cc.CWnd(), c.snd.cc.SSThresh()
	}
	return ci
}

// Connections returns the table of connections, listeners first, then by
// local and remote address.
func (p *Protocol) Connections() []ConnInfo {
	p.mu.RLock()
	conns := make([]*Conn, 0, len(p.conns))
	for _, c := range p.conns {
		conns = append(conns, c)
	}
	var rows []ConnInfo
	for _, ls := range p.listeners {
		for _, l := range ls {
			rows = append(rows, ConnInfo{State: Listen.String(), Local: l.laddr})
		}
	}
	p.mu.RUnlock()
	for _, c := range conns {
		rows = append(rows, c.Info())
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if (a.State == "LISTEN") != (b.State == "LISTEN") {
			return a.State == "LISTEN"
		}
		if a.Local != b.Local {
			return a.Local.Compare(b.Local) < 0
		}
		return a.Remote.Compare(b.Remote) < 0
	})
	return rows
}
