package dhcp_test

import (
	"log/slog"
	"testing"

	"github.com/gonetstack/gonet/internal/logs"
	"github.com/gonetstack/gonet/internal/testkit/logtest"
	"github.com/gonetstack/gonet/stack"
	"github.com/gopacket/gopacket/layers"
)

// The server logs one event per change of a lease, with the client's MAC
// and the address: granted and released at info, renewed at debug.
func TestLeaseEventsAreLoggedWithTheMACAndAddress(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  []string
	}{
		{slog.LevelInfo, []string{"DHCP lease granted", "DHCP lease released"}},
		{slog.LevelDebug, []string{"DHCP lease granted", "DHCP lease renewed", "DHCP lease released"}},
		{slog.LevelWarn, nil},
	} {
		t.Run(tc.level.String(), func(t *testing.T) {
			log, events := logtest.New(tc.level)
			cfg := testConfig(8)
			cfg.Logger = log
			f := newFixtureOn(t, cfg, stack.Config{})
			c := newClient(1)
			a := f.lease(t, c)
			f.h.Learn(t, a, c.mac)
			f.send(t, c, c.msg(layers.DHCPMsgTypeRequest, a), a, server) // renewing
			if ack := f.expect(t); ack.typ() != layers.DHCPMsgTypeAck {
				t.Fatalf("answer to the renewal: %v, want ACK", ack.typ())
			}
			f.send(t, c, c.msg(layers.DHCPMsgTypeRelease, a, serverID(server)), a, server)
			waitStat(t, "InReleases", &f.srv.Stats.InReleases, 1)
			if tc.want != nil {
				events.Wait(t, "DHCP lease released", 1)
			}
			var got []string
			for _, e := range events.Events(t) {
				got = append(got, e.Str("msg"))
				if e.Str("mac") != c.mac.String() || e.Str("addr") != a.String() {
					t.Errorf("event %v: want mac %v, addr %v", e, c.mac, a)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("logged %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("logged %q, want %q", got, tc.want)
				}
			}
		})
	}
}

const exhaustedMsg = "DHCP pool exhausted: a client gets no offer"

// A client retrying its DISCOVER against an exhausted pool is one warning,
// then one per interval with the count of those left out.
func TestAnExhaustedPoolIsLoggedOnceAnInterval(t *testing.T) {
	log, events := logtest.New(slog.LevelInfo)
	cfg := testConfig(1)
	cfg.Logger = log
	f := newFixtureOn(t, cfg, stack.Config{})
	f.lease(t, newClient(1))
	late := newClient(2)
	const tries = 5
	for i := range tries {
		f.broadcast(t, late, late.msg(layers.DHCPMsgTypeDiscover, anyAddr))
		waitStat(t, "PoolExhausted", &f.srv.Stats.PoolExhausted, uint64(i+1))
	}
	got := events.Wait(t, exhaustedMsg, 1)
	if len(got) != 1 || got[0].Str("level") != "WARN" || got[0].Str("mac") != late.mac.String() ||
		got[0].Str("counter") != "DHCP.PoolExhausted" || got[0].Num("value") != 1 || got[0].Num("pool") != 1 {
		t.Fatalf("warnings %v\nwant one WARN with mac %v, counter DHCP.PoolExhausted 1, pool 1", got, late.mac)
	}
	f.h.Clock.Advance(logs.DefaultInterval)
	f.broadcast(t, late, late.msg(layers.DHCPMsgTypeDiscover, anyAddr))
	waitStat(t, "PoolExhausted", &f.srv.Stats.PoolExhausted, tries+1)
	got = events.Wait(t, exhaustedMsg, 2)
	if len(got) != 2 || got[1].Num("suppressed") != tries-1 || got[1].Num("value") != tries+1 {
		t.Errorf("warnings %v\nwant a second with %d suppressed, value %d", got, tries-1, tries+1)
	}
}
