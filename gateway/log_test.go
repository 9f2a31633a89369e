package gateway

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/internal/logs"
	"github.com/gonetstack/gonet/internal/testkit/logtest"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/stack"
)

// steppedClock is the wall clock, timers and all, whose Now a test can move
// forward: the rate limit of a warning runs on the stack's clock, and a
// stack on a real TAP device needs real timers.
type steppedClock struct {
	clock.Real
	ahead atomic.Int64
}

func (c *steppedClock) Now() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }

func (c *steppedClock) step(d time.Duration) { c.ahead.Add(int64(d)) }

const flowLimitMsg = "flow limit reached: the guest's new flow is refused (raise -max-flows)"

// Flows refused by MaxFlows, one per SYN the guest sends, are logged as
// one warning with the flow, the counter and the limit; after the interval,
// one more that says how many it left out.
func TestGatewayFlowLimitIsLoggedOnceAnIntervalWithTheCountSuppressed(t *testing.T) {
	log, events := logtest.New(slog.LevelInfo)
	clk := &steppedClock{}
	r := newGatewayRigWith(t, Config{MaxFlows: 1}, tap.Options{MTU: 1500}, stack.Config{Logger: log, Clock: clk})
	port := echoServer(t)
	addr := netip.AddrPortFrom(r.net.Gateway, uint16(port))
	held, err := r.dial(addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	refused := func() {
		t.Helper()
		c, err := r.dial(addr.String())
		if err == nil {
			c.Close()
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("a flow beyond the limit: %v, want ECONNREFUSED", err)
		}
	}
	const flood = 5
	for range flood {
		refused()
	}
	got := events.Messages(t, flowLimitMsg)
	if len(got) != 1 {
		t.Fatalf("%d warnings for %d refusals, want 1:\n%s", len(got), flood, events)
	}
	w := got[0]
	if w.Str("level") != "WARN" || w.Str("counter") != "Gateway.FlowLimit" || w.Num("value") != 1 || w.Str("proto") != "tcp" ||
		w.Str("flow.dst") != addr.String() || !hasAddr(w.Str("flow.src"), r.net.Guest) || w.Num("max_flows") != 1 {
		t.Errorf("warning %v\nwant WARN, counter Gateway.FlowLimit 1, tcp from %v to %v, max_flows 1", w, r.net.Guest, addr)
	}

	clk.step(logs.DefaultInterval)
	refused()
	got = events.Messages(t, flowLimitMsg)
	if len(got) != 2 {
		t.Fatalf("%d warnings after the interval, want 2:\n%s", len(got), events)
	}
	if w := got[1]; w.Num("suppressed") != flood-1 || w.Num("value") != flood+1 {
		t.Errorf("second warning %v\nwant %d suppressed, value %d", w, flood-1, flood+1)
	}
}

// hasAddr reports whether s is an address:port with address a.
func hasAddr(s string, a netip.Addr) bool {
	ap, err := netip.ParseAddrPort(s)
	return err == nil && ap.Addr() == a
}

// A flow refused by -deny is the operator's intent: logged at debug with
// its flow, and not at all at info.
func TestGatewayDeniedFlowsAreLoggedAtDebug(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  int
	}{{slog.LevelDebug, 1}, {slog.LevelInfo, 0}} {
		t.Run(tc.level.String(), func(t *testing.T) {
			log, events := logtest.New(tc.level)
			denied := netip.MustParsePrefix("10.77.0.0/24")
			r := newGatewayRigWith(t, Config{Deny: []netip.Prefix{denied}}, tap.Options{MTU: 1500}, stack.Config{Logger: log})
			dst := net.JoinHostPort("10.77.0.1", strconv.Itoa(80))
			if _, err := r.dial(dst); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("a denied flow: %v, want ECONNREFUSED", err)
			}
			got := events.Messages(t, "flow denied")
			if len(got) != tc.want {
				t.Fatalf("%d events, want %d:\n%s", len(got), tc.want, events)
			}
			if tc.want == 1 && (got[0].Str("level") != "DEBUG" || got[0].Str("proto") != "tcp" || got[0].Str("flow.dst") != dst ||
				!hasAddr(got[0].Str("flow.src"), r.net.Guest)) {
				t.Errorf("event %v\nwant DEBUG, tcp from %v to %s", got[0], r.net.Guest, dst)
			}
		})
	}
}
