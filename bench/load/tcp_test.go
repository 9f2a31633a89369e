package load

import (
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gonetstack/gonet/bench/handlers"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
)

// A sliced bulk run takes its two addresses ABBA, each slice with a
// connection of its own, and counts at each address what that address's
// server read: each family's rate comes from its own slices alone.
func TestBulkSlicedTakesTheAddressesABBA(t *testing.T) {
	ns := netnstest.New(t)
	const port = 5002
	var (
		mu    sync.Mutex
		order []string
	)
	counters := map[string]*handlers.Counters{"::1": {}, "127.0.0.1": {}}
	for addr, n := range counters {
		var l net.Listener
		if err := ns.Do(func() (err error) {
			l, err = net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go handlers.Serve(l, func(c net.Conn, n *handlers.Counters) {
			mu.Lock()
			order = append(order, addr)
			mu.Unlock()
			handlers.Discard(c, n)
		}, n)
	}
	var r BulkResult
	if err := ns.Do(func() (err error) {
		r, err = BulkSliced([]string{"::1", "127.0.0.1"}, "up", 1, port, 200*time.Millisecond, 50*time.Millisecond)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	a, b := "::1", "127.0.0.1"
	if want := []string{a, b, b, a, a, b, b, a}; !slices.Equal(order, want) {
		t.Errorf("connections to %v, want %v", order, want)
	}
	if r.Twin == nil {
		t.Fatalf("%+v: no twin result", r)
	}
	for _, c := range []struct {
		addr string
		r    BulkResult
	}{{a, r}, {b, *r.Twin}} {
		if c.r.Slices != 4 || len(c.r.SliceGbps) != 4 {
			t.Errorf("%s: %d slices (%v), want 4", c.addr, c.r.Slices, c.r.SliceGbps)
		}
		if got := counters[c.addr].BytesIn.Load(); c.r.Bytes == 0 || got != c.r.Bytes {
			t.Errorf("%s: %d bytes counted, its server read %d", c.addr, c.r.Bytes, got)
		}
		if want := float64(c.r.Bytes) * 8 / c.r.Seconds / 1e9; c.r.Gbps != want || c.r.Seconds < 4*0.05 {
			t.Errorf("%s: %v Gbit/s over %v s, want %v over at least its slices' 0.2 s", c.addr, c.r.Gbps, c.r.Seconds, want)
		}
	}
}

// A sliced run names what it cannot do rather than run something else.
func TestBulkSlicedRefusesWhatItCannotSlice(t *testing.T) {
	for _, c := range []struct {
		name       string
		addrs      []string
		dur, slice time.Duration
	}{
		{"no address", nil, time.Second, 100 * time.Millisecond},
		{"three addresses", []string{"::1", "127.0.0.1", "::2"}, time.Second, 100 * time.Millisecond},
		{"no slice", []string{"::1"}, time.Second, 0},
		{"a slice longer than the run", []string{"::1"}, time.Second, 2 * time.Second},
	} {
		if _, err := BulkSliced(c.addrs, "up", 1, 5002, c.dur, c.slice); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}
