package pathmtu_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/pathmtu"
)

func TestEntriesExpireAndTheOldestIsEvicted(t *testing.T) {
	clk := clock.NewVirtual(time.Unix(0, 0))
	var c pathmtu.Cache
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}) }
	if _, ok := c.Lookup(addr(0), clk); ok {
		t.Fatal("entry in an empty cache")
	}
	for i := range pathmtu.MaxEntries {
		if c.Store(addr(i), pathmtu.Entry{MTU: 1400, Expires: clk.Now().Add(time.Minute + time.Duration(i))}, clk.Now()) {
			t.Fatalf("eviction at %d entries", i)
		}
	}
	if !c.Store(addr(pathmtu.MaxEntries), pathmtu.Entry{MTU: 1300, Expires: clk.Now().Add(2 * time.Minute)}, clk.Now()) {
		t.Fatal("no eviction past MaxEntries")
	}
	if _, ok := c.Lookup(addr(0), clk); ok {
		t.Error("the entry closest to its end was not the one evicted")
	}
	if e, ok := c.Lookup(addr(pathmtu.MaxEntries), clk); !ok || e.MTU != 1300 {
		t.Errorf("new entry %+v, %v", e, ok)
	}
	clk.Advance(time.Minute + pathmtu.MaxEntries)
	if _, ok := c.Lookup(addr(5), clk); ok {
		t.Error("an expired entry is live")
	}
}
