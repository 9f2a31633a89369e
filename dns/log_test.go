package dns_test

import (
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/dns"
	"github.com/gonetstack/gonet/internal/logs"
	"github.com/gonetstack/gonet/internal/testkit/logtest"
	mdns "github.com/miekg/dns"
)

// An upstream that fails every query is one warning with the upstream, the
// error and the counter, then one per interval with the count left out;
// not one per query.
func TestAFailingUpstreamIsLoggedOnceAnInterval(t *testing.T) {
	log, events := logtest.New(slog.LevelInfo)
	clk := clock.NewVirtual(time.Unix(1e9, 0))
	up := closedPort(t)
	_, guest := forwarder(t, dns.Config{Upstreams: []netip.AddrPort{up}, Timeout: 200 * time.Millisecond, Logger: log, Clock: clk})
	ask := func(id uint16) {
		t.Helper()
		m := unpack(t, exchangeUDP(t, guest, pack(t, newQuery("gonet.test", mdns.TypeA, id, 0)), 5*time.Second))
		if m.Rcode != mdns.RcodeServerFailure {
			t.Fatalf("rcode %s, want SERVFAIL", mdns.RcodeToString[m.Rcode])
		}
	}
	const queries = 5
	for i := range queries {
		ask(uint16(i + 1))
	}
	got := events.Messages(t, "DNS upstream failed")
	if len(got) != 1 || got[0].Str("level") != "WARN" || got[0].Str("upstream") != up.String() || got[0].Str("err") == "" ||
		got[0].Str("counter") != "DNS.UpstreamErrors" || got[0].Num("value") != 1 {
		t.Fatalf("warnings %v\nwant one WARN with upstream %v, its error, counter DNS.UpstreamErrors 1", got, up)
	}
	clk.Advance(logs.DefaultInterval)
	ask(queries + 1)
	got = events.Messages(t, "DNS upstream failed")
	if len(got) != 2 || got[1].Num("suppressed") != queries-1 || got[1].Num("value") != queries+1 {
		t.Errorf("warnings %v\nwant a second with %d suppressed, value %d", got, queries-1, queries+1)
	}
}
