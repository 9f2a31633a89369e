package services

import (
	"encoding/json"
	"math"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/stats"
)

// fakeStatus is a StatusSource with fixed figures.
type fakeStatus struct {
	counters map[string]int64
	rows     []ConnRow
}

// Metrics gives the counters as counters, and "...Active" ones as gauges.
func (f fakeStatus) Metrics() stats.Snapshot {
	if f.counters == nil {
		return nil
	}
	snap := stats.Snapshot{}
	for n, v := range f.counters {
		kind := stats.KindCounter
		if strings.HasSuffix(n, "Active") {
			kind = stats.KindGauge
		}
		snap[n] = stats.Sample{Kind: kind, Value: v}
	}
	return snap
}

func (f fakeStatus) Connections() []ConnRow { return f.rows }

var (
	listenRow = ConnRow{State: "LISTEN", Local: netip.MustParseAddrPort("0.0.0.0:80")}
	estabRow  = ConnRow{
		State: "ESTABLISHED", Local: netip.MustParseAddrPort("10.0.0.2:80"), Remote: netip.MustParseAddrPort("10.0.0.1:51234"),
		SendQueue: 1448, RecvQueue: 0, RTT: 45 * time.Microsecond, RTO: 204 * time.Millisecond,
		CWnd: 14480, SSThresh: math.MaxInt32, Retransmits: 0, RecvBuffer: 131072,
		Timestamps: true, SACK: true, ECN: true, ECNSeen: true, WScale: true, SndWScale: 7, RcvWScale: 9, MSS: 1448,
	}
	finRow = ConnRow{
		State: "FIN-WAIT-2", Local: netip.MustParseAddrPort("10.0.0.2:7"), Remote: netip.MustParseAddrPort("10.0.0.1:40000"),
		RTT: 1234567 * time.Nanosecond, RTO: time.Second, CWnd: 2896, SSThresh: 5792, Retransmits: 3, MSS: 536,
	}
)

func TestWriteConnTableReadsLikeSS(t *testing.T) {
	tests := []struct {
		name string
		rows []ConnRow
		want string
	}{
		{"no connections: the header alone", nil,
			"State  Recv-Q  Send-Q  Local Address:Port  Peer Address:Port  rtt/ms  rto/ms  cwnd  ssthresh  retrans  rcvbuf  options\n"},
		{"a listener has no figures and a wildcard peer", []ConnRow{listenRow},
			"State   Recv-Q  Send-Q  Local Address:Port  Peer Address:Port  rtt/ms  rto/ms  cwnd  ssthresh  retrans  rcvbuf  options\n" +
				"LISTEN  0       0       0.0.0.0:80          0.0.0.0:*          -       -       -     -         -        -       -\n"},
		{"listeners first, then by local address; an infinite ssthresh is not shown",
			[]ConnRow{estabRow, finRow, listenRow},
			"State       Recv-Q  Send-Q  Local Address:Port  Peer Address:Port  rtt/ms  rto/ms  cwnd   ssthresh  retrans  rcvbuf  options\n" +
				"LISTEN      0       0       0.0.0.0:80          0.0.0.0:*          -       -       -      -         -        -       -\n" +
				"FIN-WAIT-2  0       0       10.0.0.2:7          10.0.0.1:40000     1.235   1000    2896   5792      3        0       mss:536\n" +
				"ESTAB       0       1448    10.0.0.2:80         10.0.0.1:51234     0.045   204     14480  -         0        131072  ts sack ecn ecnseen wscale:7,9 mss:1448\n"},
		{"no RTT sample yet, and an unknown state kept as it came",
			[]ConnRow{{State: "Weird", Local: netip.MustParseAddrPort("10.0.0.2:1"), Remote: netip.MustParseAddrPort("10.0.0.1:2"), RTO: time.Second, CWnd: 1}},
			"State  Recv-Q  Send-Q  Local Address:Port  Peer Address:Port  rtt/ms  rto/ms  cwnd  ssthresh  retrans  rcvbuf  options\n" +
				"Weird  0       0       10.0.0.2:1          10.0.0.1:2         -       1000    1     -         0        0       -\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := WriteConnTable(&b, tt.rows); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("table\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}

func TestSSStateAcceptsEverySpellingOfTheRFCStates(t *testing.T) {
	tests := map[string]string{
		"ESTABLISHED":  "ESTAB",
		"Established":  "ESTAB",
		"SYN-SENT":     "SYN-SENT",
		"SynSent":      "SYN-SENT",
		"SYN-RECEIVED": "SYN-RECV",
		"syn_rcvd":     "SYN-RECV",
		"FIN-WAIT-1":   "FIN-WAIT-1",
		"FinWait2":     "FIN-WAIT-2",
		"CLOSE-WAIT":   "CLOSE-WAIT",
		"LAST-ACK":     "LAST-ACK",
		"CLOSING":      "CLOSING",
		"TIME-WAIT":    "TIME-WAIT",
		"TimeWait":     "TIME-WAIT",
		"LISTEN":       "LISTEN",
		"CLOSED":       "CLOSED",
		"":             "?",
		"NEW-STATE":    "NEW-STATE",
	}
	for in, want := range tests {
		if got := ssState(in); got != want {
			t.Errorf("ssState(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSSEndpoint(t *testing.T) {
	v4, v6, none := netip.IPv4Unspecified(), netip.IPv6Unspecified(), netip.Addr{}
	tests := []struct {
		ap         netip.AddrPort
		listenerOn netip.Addr
		want       string
	}{
		{netip.MustParseAddrPort("10.0.0.2:80"), none, "10.0.0.2:80"},
		{netip.MustParseAddrPort("0.0.0.0:80"), none, "0.0.0.0:80"},
		{netip.MustParseAddrPort("[fd00::2]:80"), none, "[fd00::2]:80"},
		{netip.MustParseAddrPort("[fe80::1%tap0]:22"), none, "[fe80::1%tap0]:22"},
		{netip.MustParseAddrPort("[fd00::2]:0"), none, "[fd00::2]:*"},
		{netip.AddrPort{}, v4, "0.0.0.0:*"},
		{netip.AddrPort{}, v6, "[::]:*"},
		{netip.MustParseAddrPort("0.0.0.0:0"), v4, "0.0.0.0:*"},
		{netip.AddrPort{}, none, "*:*"},
	}
	for _, tt := range tests {
		if got := ssEndpoint(tt.ap, tt.listenerOn); got != tt.want {
			t.Errorf("ssEndpoint(%v, listener on %v) = %q, want %q", tt.ap, tt.listenerOn, got, tt.want)
		}
	}
}

func TestSSThreshHidesTheInitialInfinity(t *testing.T) {
	tests := map[int]string{0: "-", 2920: "2920", 1<<30 - 1: "1073741823", 1 << 30: "-", math.MaxInt32: "-", math.MaxInt: "-"}
	for in, want := range tests {
		if got := ssThresh(in); got != want {
			t.Errorf("ssThresh(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestStatusJSONRoundTrips(t *testing.T) {
	src := fakeStatus{counters: map[string]int64{"TCP.ActiveOpens": 2}, rows: []ConnRow{estabRow, listenRow}}
	st := Snapshot(src)
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"state":"ESTABLISHED"`, `"local":"10.0.0.2:80"`, `"remote":"10.0.0.1:51234"`,
		`"rtt_ns":45000`, `"rto_ns":204000000`, `"cwnd":14480`, `"send_queue":1448`, `"remote":""`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON %s lacks %s", b, want)
		}
	}
	var back Status
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, st) {
		t.Errorf("JSON round trip gave %+v, want %+v", back, st)
	}
	if st.Connections[0].State != "LISTEN" {
		t.Errorf("Snapshot did not put the listener first: %+v", st.Connections)
	}
}

func TestSnapshotOfNothingIsEmptyNotNull(t *testing.T) {
	for _, src := range []StatusSource{nil, fakeStatus{}} {
		b, err := json.Marshal(Snapshot(src))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != `{"counters":{},"connections":[]}` {
			t.Errorf("Snapshot(%v) = %s", src, b)
		}
	}
}
