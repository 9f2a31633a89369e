package tcp_test

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/internal/logs"
	"github.com/gonetstack/gonet/internal/testkit/logtest"
	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/tcp"
)

// What TCP logs (log.go): events, each repeated warning rate-limited.

// newLogRig is newRig with a memory budget of limit bytes (0: the default)
// and a logger at level whose events the test reads.
func newLogRig(t *testing.T, cfg tcp.Config, limit int, level slog.Level) (*rig, *logtest.Log) {
	t.Helper()
	log, events := logtest.New(level)
	h := rawtest.New(t, stack.Config{TCP: cfg, MemoryLimit: int64(limit), Logger: log, ARP: arp.Config{CacheTTL: 10000 * time.Hour}})
	h.LearnPeer(t)
	return &rig{t: t, h: h}, events
}

const memoryMsg = "TCP refused a connection: the memory budget is short (raise -memory)"

// A SYN flood against a full budget is refused SYN by SYN; the log says so
// once, with the flow, the counter and the budget, and after the interval
// once more with how many refusals it left out, not once per SYN.
func TestMemoryRefusalsAreLoggedOnceAnIntervalWithTheCountSuppressed(t *testing.T) {
	r, events := newLogRig(t, tcp.Config{SynCookies: tcp.SynCookiesNever}, 2*tcp.ConnMemory, slog.LevelInfo)
	r.listen(0)
	r.synPeer(41000, peerISN, rawtest.TCPOpts{}).handshake() // the budget's one connection
	refuse := func(port uint16) {
		p := r.synPeer(port, peerISN, rawtest.TCPOpts{})
		syn := p.seg(S, nil)
		syn.Ack = 0
		p.inject(syn)
	}
	const flood = 50
	for i := range flood {
		refuse(uint16(42000 + i))
	}
	r.h.WaitCounter(t, "TCP.MemoryRefusals", flood)
	r.nothing()
	got := events.Wait(t, memoryMsg, 1)
	if len(got) != 1 {
		t.Fatalf("%d warnings for %d refusals, want 1:\n%s", len(got), flood, events)
	}
	first := got[0]
	if first.Str("level") != "WARN" || first.Str("counter") != "TCP.MemoryRefusals" || first.Num("value") != 1 ||
		first.Str("flow.src") != rawtest.PeerAddr.String()+":42000" || first.Str("flow.dst") != stackAP.String() ||
		first.Num("limit") != float64(2*tcp.ConnMemory) || first.Num("suppressed") != -1 {
		t.Errorf("first warning %v\nwant WARN, counter TCP.MemoryRefusals 1, flow %v:42000 to %v, the limit, nothing suppressed",
			first, rawtest.PeerAddr, stackAP)
	}

	r.h.Clock.Advance(logs.DefaultInterval)
	refuse(43000)
	r.h.WaitCounter(t, "TCP.MemoryRefusals", flood+1)
	r.nothing()
	got = events.Wait(t, memoryMsg, 2)
	if len(got) != 2 {
		t.Fatalf("%d warnings after the interval, want 2:\n%s", len(got), events)
	}
	if second := got[1]; second.Num("suppressed") != flood-1 || second.Num("value") != flood+1 ||
		second.Str("flow.src") != rawtest.PeerAddr.String()+":43000" {
		t.Errorf("second warning %v\nwant %d suppressed, value %d, from port 43000", second, flood-1, flood+1)
	}
}

// At -log-level error the same flood logs nothing.
func TestMemoryRefusalsAreNotLoggedBelowTheLevel(t *testing.T) {
	r, events := newLogRig(t, tcp.Config{SynCookies: tcp.SynCookiesNever}, 2*tcp.ConnMemory, slog.LevelError)
	r.listen(0)
	r.synPeer(41000, peerISN, rawtest.TCPOpts{}).handshake()
	for i := range 5 {
		p := r.synPeer(uint16(42000+i), peerISN, rawtest.TCPOpts{})
		syn := p.seg(S, nil)
		syn.Ack = 0
		p.inject(syn)
	}
	r.h.WaitCounter(t, "TCP.MemoryRefusals", 5)
	if e := events.Events(t); len(e) != 0 {
		t.Errorf("logged at level error: %v", e)
	}
}

const cookieMsg = "possible SYN flooding: the backlog is full, sending SYN cookies"

// A listener whose backlog is full answers SYNs with cookies and warns,
// as Linux's "Possible SYN flooding on port X", once for the flood.
func TestSynCookiesForAFullBacklogAreLoggedOnce(t *testing.T) {
	r, events := newLogRig(t, tcp.Config{}, 0, slog.LevelInfo)
	r.listen(1)
	r.synAckISN(41000) // half-open: the backlog is full
	for i := range 10 {
		r.synPeer(uint16(42000+i), peerISN, rawtest.TCPOpts{}).cookieSYN()
	}
	r.wantCounters(map[string]int64{"SynCookiesSent": 10})
	got := events.Messages(t, cookieMsg)
	if len(got) != 1 || got[0].Str("level") != "WARN" || got[0].Str("listener") != "0.0.0.0:"+strconv.Itoa(stackPort) ||
		got[0].Num("backlog") != 1 || got[0].Str("src") != rawtest.PeerAddr.String()+":42000" {
		t.Errorf("warnings %v\nwant one WARN naming the listener 0.0.0.0:%d, its backlog 1 and the first SYN's source", got, stackPort)
	}
}

// SYN cookies answering every SYN by configuration are no flood.
func TestSynCookiesAlwaysAreNotAWarning(t *testing.T) {
	r, events := newLogRig(t, tcp.Config{SynCookies: tcp.SynCookiesAlways}, 0, slog.LevelInfo)
	r.listen(0)
	r.synPeer(42000, peerISN, rawtest.TCPOpts{}).cookieSYN()
	if got := events.Messages(t, cookieMsg); len(got) != 0 {
		t.Errorf("warned %v with SynCookiesAlways", got)
	}
}

// A connection reset by its peer is logged at debug with its flow and the
// state it was in, and not at info.
func TestAResetConnectionIsLoggedAtDebug(t *testing.T) {
	for _, tc := range []struct {
		name  string
		level slog.Level
		want  int
	}{
		{"debug", slog.LevelDebug, 1},
		{"info", slog.LevelInfo, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, events := newLogRig(t, tcp.Config{}, 0, tc.level)
			l := r.listen(0)
			p := r.synPeer(peerPort, peerISN, rawtest.TCPOpts{})
			p.handshake()
			acceptOne(t, l)
			p.send(R, nil)
			p.waitState("")
			got := events.Messages(t, "TCP connection ended")
			if len(got) != tc.want {
				t.Fatalf("%d events, want %d:\n%s", len(got), tc.want, events)
			}
			if tc.want == 1 && (got[0].Str("level") != "DEBUG" || got[0].Str("state") != "ESTABLISHED" ||
				got[0].Str("flow.src") != stackAP.String() || got[0].Str("flow.dst") != peerAP.String() ||
				got[0].Str("err") != "connection reset by peer") {
				t.Errorf("event %v\nwant DEBUG, state ESTABLISHED, flow %v to %v, err connection reset by peer", got[0], stackAP, peerAP)
			}
		})
	}
}
