package services

import (
	"cmp"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gonetstack/gonet/stats"
)

// StatusSource is what the status pages show: a stack's counters and its
// connection table. cmd/gonet adapts GoNet's stack to it; tests use fakes.
type StatusSource interface {
	// Metrics returns every counter and gauge by dotted name
	// ("TCP.ActiveOpens"), with its kind.
	Metrics() stats.Snapshot
	// Connections returns the connection table, listeners included.
	Connections() []ConnRow
}

// ConnRow is one row of a connection table, as ss -ti shows it. It mirrors
// the TCP layer's own description of a connection, so that this package
// need not depend on it.
type ConnRow struct {
	// State is the RFC 9293 state, as the TCP layer names it
	// ("ESTABLISHED", "LISTEN").
	State string `json:"state"`
	// Congestion names the congestion control ("cubic", "newreno").
	Congestion string `json:"congestion,omitempty"`
	// Local and Remote are the endpoints; a listener's Remote is the
	// zero AddrPort.
	Local  netip.AddrPort `json:"local"`
	Remote netip.AddrPort `json:"remote"`
	// SendQueue is the bytes sent but not yet acknowledged or not yet
	// sent; RecvQueue the bytes received but not yet read.
	SendQueue int `json:"send_queue"`
	RecvQueue int `json:"recv_queue"`
	// RTT is the smoothed round-trip time (zero before the first
	// sample) and RTO the retransmission timeout (RFC 6298).
	RTT time.Duration `json:"rtt_ns"`
	RTO time.Duration `json:"rto_ns"`
	// CWnd and SSThresh are the congestion window and slow-start
	// threshold (RFC 5681), in bytes.
	CWnd     int `json:"cwnd"`
	SSThresh int `json:"ssthresh"`
	// Retransmits counts the segments retransmitted on the connection.
	Retransmits uint64 `json:"retransmits"`
	// RecvBuffer is the receive buffer, in bytes: the most the window
	// offers, auto-tuned unless the application set it (ss -m's rb).
	RecvBuffer int `json:"recv_buffer"`
	// The options the connection negotiated, as ss -ti lists them:
	// timestamps (RFC 7323), SACK (RFC 2018), ECN (RFC 3168) and whether
	// a CE mark has arrived, window scaling with the peer's shift
	// (SndWScale) and ours (RcvWScale), and the MSS it sends with.
	Timestamps bool  `json:"timestamps"`
	SACK       bool  `json:"sack"`
	ECN        bool  `json:"ecn"`
	ECNSeen    bool  `json:"ecn_seen"`
	WScale     bool  `json:"wscale"`
	SndWScale  uint8 `json:"snd_wscale"`
	RcvWScale  uint8 `json:"rcv_wscale"`
	MSS        int   `json:"mss"`
}

// Status is a snapshot of a StatusSource, as /.gonet/status.json carries it.
type Status struct {
	Counters    map[string]int64 `json:"counters"`
	Connections []ConnRow        `json:"connections"`
}

// Snapshot takes a Status from src; a nil src gives an empty one. The
// connections are sorted as WriteConnTable prints them, and neither field
// is nil, so JSON shows {} and [] rather than null.
func Snapshot(src StatusSource) Status {
	st := Status{Counters: map[string]int64{}, Connections: []ConnRow{}}
	if src == nil {
		return st
	}
	st.Counters = metricsOf(src).Values()
	if rows := src.Connections(); rows != nil {
		st.Connections = slices.Clone(rows)
	}
	sortRows(st.Connections)
	return st
}

// metricsOf returns src's counters and gauges; none for a nil src.
func metricsOf(src StatusSource) stats.Snapshot {
	if src == nil {
		return nil
	}
	return src.Metrics()
}

// sortRows orders a connection table as ss does for a single socket
// table: listeners first, then by local and remote endpoint.
func sortRows(rows []ConnRow) {
	slices.SortStableFunc(rows, func(a, b ConnRow) int {
		la, lb := ssState(a.State) == "LISTEN", ssState(b.State) == "LISTEN"
		if la != lb {
			if la {
				return -1
			}
			return 1
		}
		return cmp.Or(a.Local.Compare(b.Local), a.Remote.Compare(b.Remote))
	})
}

// ssStates maps the spellings of the RFC 9293 states, reduced to upper-case
// letters, to the names ss prints.
var ssStates = map[string]string{
	"LISTEN":      "LISTEN",
	"SYNSENT":     "SYN-SENT",
	"SYNRECEIVED": "SYN-RECV",
	"SYNRCVD":     "SYN-RECV",
	"SYNRECV":     "SYN-RECV",
	"ESTABLISHED": "ESTAB",
	"ESTAB":       "ESTAB",
	"FINWAIT1":    "FIN-WAIT-1",
	"FINWAIT2":    "FIN-WAIT-2",
	"CLOSEWAIT":   "CLOSE-WAIT",
	"CLOSING":     "CLOSING",
	"LASTACK":     "LAST-ACK",
	"TIMEWAIT":    "TIME-WAIT",
	"CLOSED":      "CLOSED",
}

// ssState returns the name ss gives state, however the TCP layer spells it
// ("SYN-RECEIVED", "SynReceived", "syn_rcvd"); a state it does not know is
// returned as it came.
func ssState(state string) string {
	key := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return -1
	}, state)
	if s, ok := ssStates[key]; ok {
		return s
	}
	if state == "" {
		return "?"
	}
	return state
}

// ssEndpoint formats an endpoint as ss -n does: "10.0.0.2:80",
// "[fd00::2]:80", with "*" for an unspecified port and "*:*" for no
// endpoint at all. A listener's missing peer is the wildcard of the
// listener's family ("0.0.0.0:*", "[::]:*"): listenerOn is the listener's
// local address, or invalid for a connection.
func ssEndpoint(ap netip.AddrPort, listenerOn netip.Addr) string {
	switch {
	case !ap.Addr().IsValid() && listenerOn.Is6():
		return "[::]:*"
	case !ap.Addr().IsValid() && listenerOn.IsValid():
		return "0.0.0.0:*"
	case !ap.Addr().IsValid():
		return "*:*"
	case ap.Port() == 0 && ap.Addr().Is6():
		return "[" + ap.Addr().String() + "]:*"
	case ap.Port() == 0:
		return ap.Addr().String() + ":*"
	}
	return ap.String()
}

// ssMillis formats a duration in milliseconds to the microsecond, as ss
// prints rtt and rto ("0.045", "204"); "-" for zero, which means no value.
func ssMillis(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(d.Round(time.Microsecond))/float64(time.Millisecond), 'f', -1, 64)
}

// ssThresh formats a slow-start threshold; "-" while it is still the
// "arbitrarily high" initial value of RFC 5681 section 3.1, or unset, as ss
// leaves it out. Any value of 2^30 bytes or more is taken for that: no
// window can be larger (RFC 7323 section 2.3).
func ssThresh(n int) string {
	if n <= 0 || n >= 1<<30 {
		return "-"
	}
	return strconv.Itoa(n)
}

// WriteConnTable prints a connection table as ss -tan does (State, Recv-Q,
// Send-Q, Local Address:Port, Peer Address:Port), with the figures ss -ti
// adds as further columns: rtt and rto in milliseconds, cwnd, ssthresh and
// retrans, and ss -m's receive buffer (rcvbuf). Listeners come first, then the rest by local and remote
// endpoint; a listener has no figures of its own, and shows "-".
func WriteConnTable(w io.Writer, rows []ConnRow) error {
	rows = slices.Clone(rows)
	sortRows(rows)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(connHeader, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(connCells(r), "\t"))
	}
	return tw.Flush()
}

// connHeader names the connection table's columns.
var connHeader = []string{"State", "Recv-Q", "Send-Q", "Local Address:Port", "Peer Address:Port",
	"rtt/ms", "rto/ms", "cwnd", "ssthresh", "retrans", "rcvbuf", "options"}

// connCells formats one row of the connection table, under connHeader.
func connCells(r ConnRow) []string {
	state := ssState(r.State)
	listener := state == "LISTEN"
	var listenerOn netip.Addr
	if listener {
		listenerOn = r.Local.Addr()
	}
	cells := []string{state, strconv.Itoa(r.RecvQueue), strconv.Itoa(r.SendQueue),
		ssEndpoint(r.Local, netip.Addr{}), ssEndpoint(r.Remote, listenerOn)}
	if listener {
		return append(cells, "-", "-", "-", "-", "-", "-", "-")
	}
	return append(cells, ssMillis(r.RTT), ssMillis(r.RTO), strconv.Itoa(r.CWnd), ssThresh(r.SSThresh),
		strconv.FormatUint(r.Retransmits, 10), strconv.Itoa(r.RecvBuffer), ssOptions(r))
}

// ssOptions lists a connection's options in ss -ti's words and order
// ("ts sack ecn ecnseen wscale:7,7 mss:1448"); "-" when there are none.
func ssOptions(r ConnRow) string {
	var o []string
	for _, f := range []struct {
		on   bool
		name string
	}{{r.Timestamps, "ts"}, {r.SACK, "sack"}, {r.ECN, "ecn"}, {r.ECNSeen, "ecnseen"}} {
		if f.on {
			o = append(o, f.name)
		}
	}
	if r.WScale {
		o = append(o, fmt.Sprintf("wscale:%d,%d", r.SndWScale, r.RcvWScale))
	}
	if r.MSS > 0 {
		o = append(o, "mss:"+strconv.Itoa(r.MSS))
	}
	if len(o) == 0 {
		return "-"
	}
	return strings.Join(o, " ")
}
