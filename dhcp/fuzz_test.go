package dhcp

import (
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"github.com/gonetstack/gonet/clock"
)

// FuzzHandle feeds the server arbitrary messages: it must never panic,
// whatever it answers must decode, go to a port a client or relay listens
// on, and the lease table must stay within the pool. Each input is handled
// twice, the second time after the lease time, so that a message meets the
// state its first pass left. The corpus (testdata/fuzz/FuzzHandle) holds a
// message of each type.
func FuzzHandle(f *testing.F) {
	f.Fuzz(func(t *testing.T, msg []byte) {
		vc := clock.NewVirtual(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
		s, err := NewServer(Config{PoolSize: 2, LeaseTime: time.Minute, Clock: vc})
		if err != nil {
			t.Fatal(err)
		}
		from := netip.AddrPortFrom(netip.IPv4Unspecified(), ClientPort)
		for range 2 {
			reply, to, ok := s.handle(msg, from)
			if ok {
				if _, err := dhcpv4.FromBytes(reply); err != nil {
					t.Fatalf("the reply does not decode: %v", err)
				}
				if !to.Addr().Is4() || to.Port() != ClientPort && to.Port() != ServerPort {
					t.Fatalf("reply sent to %v", to)
				}
			}
			for _, l := range s.Leases() {
				if !s.leases.inPool(l.Addr) {
					t.Fatalf("lease of %v outside the pool", l.Addr)
				}
			}
			if n := len(s.leases.byAddr); n > s.cfg.PoolSize {
				t.Fatalf("%d records for a pool of %d", n, s.cfg.PoolSize)
			}
			vc.Advance(time.Minute)
		}
	})
}
