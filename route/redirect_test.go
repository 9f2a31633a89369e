package route_test

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/route"
)

// redirectTable is a family's table as Redirects changes it.
type redirectTable struct {
	mu sync.Mutex
	t  route.Table[nic]
}

func (rt *redirectTable) add(x route.Route[nic]) error {
	if x.Gateway == netip.MustParseAddr("192.0.2.66") {
		return errors.New("refused")
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.t.Add(x)
	return nil
}

func (rt *redirectTable) has(x route.Route[nic]) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.t.Has(x)
}

func (rt *redirectTable) remove(x route.Route[nic]) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.t.Remove(x)
}

func (rt *redirectTable) all() []route.Route[nic] {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.t.All()
}

// host is dst's host route through gw on eth0.
func host(dst, gw string) route.Route[nic] { return r(dst+"/32", gw, "eth0", route.PreferenceMedium) }

func TestRedirectsHoldForTheirLifetime(t *testing.T) {
	vc := clock.NewVirtual(time.Unix(0, 0))
	var tab redirectTable
	rs := route.NewRedirects(vc, tab.has, tab.add, tab.remove)
	defer rs.Stop()
	if err := rs.Take(host("198.51.100.7", "192.0.2.9")); err != nil {
		t.Fatal(err)
	}
	vc.Advance(route.RedirectLifetime / 2)
	// A later redirect for the destination takes the earlier's place
	// and holds a lifetime from now.
	if err := rs.Take(host("198.51.100.7", "192.0.2.10")); err != nil {
		t.Fatal(err)
	}
	if got, want := tab.all(), []route.Route[nic]{host("198.51.100.7", "192.0.2.10")}; !slices.Equal(got, want) {
		t.Fatalf("table %v, want %v", got, want)
	}
	vc.Advance(route.RedirectLifetime/2 + time.Second)
	time.Sleep(10 * time.Millisecond) // time for a wrong expiry's goroutine to run
	if got := tab.all(); len(got) != 1 {
		t.Fatalf("the later redirect's route expired with the earlier's lifetime: %v", got)
	}
	vc.Advance(route.RedirectLifetime / 2)
	// The virtual clock fires an AfterFunc timer in a goroutine.
	for deadline := time.Now().Add(5 * time.Second); len(tab.all()) != 0 || rs.Len() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after its lifetime the table holds %v, %d redirects", tab.all(), rs.Len())
		}
	}
}

func TestRedirectsAreBounded(t *testing.T) {
	vc := clock.NewVirtual(time.Unix(0, 0))
	var tab redirectTable
	rs := route.NewRedirects(vc, tab.has, tab.add, tab.remove)
	defer rs.Stop()
	for i := range route.MaxRedirects + 1 {
		if err := rs.Take(host(fmt.Sprintf("198.51.%d.%d", 100+i/256, i%256), "192.0.2.9")); err != nil {
			t.Fatal(err)
		}
		vc.Advance(time.Millisecond)
	}
	got := tab.all()
	if len(got) != route.MaxRedirects || rs.Len() != route.MaxRedirects {
		t.Fatalf("%d routes and %d redirects, want %d", len(got), rs.Len(), route.MaxRedirects)
	}
	if slices.Contains(got, host("198.51.100.0", "192.0.2.9")) {
		t.Fatal("the oldest redirect stayed when the bound was reached")
	}
}

func TestARedirectTheTableRefusesIsNotKept(t *testing.T) {
	vc := clock.NewVirtual(time.Unix(0, 0))
	var tab redirectTable
	rs := route.NewRedirects(vc, tab.has, tab.add, tab.remove)
	defer rs.Stop()
	if err := rs.Take(host("198.51.100.7", "192.0.2.66")); err == nil {
		t.Fatal("Take succeeded where the table refused the route")
	}
	if rs.Len() != 0 {
		t.Fatalf("%d redirects kept", rs.Len())
	}
}

// A redirect to a route the table holds already, by configuration, is not
// the redirect's: it stays when the redirect's lifetime ends.
func TestARedirectLeavesAConfiguredRouteBe(t *testing.T) {
	vc := clock.NewVirtual(time.Unix(0, 0))
	var tab redirectTable
	configured := host("198.51.100.7", "192.0.2.9")
	if err := tab.add(configured); err != nil {
		t.Fatal(err)
	}
	rs := route.NewRedirects(vc, tab.has, tab.add, tab.remove)
	defer rs.Stop()
	if err := rs.Take(configured); err != nil {
		t.Fatal(err)
	}
	vc.Advance(route.RedirectLifetime + time.Second)
	time.Sleep(10 * time.Millisecond) // time for a wrong expiry's goroutine to run
	if got := tab.all(); !slices.Equal(got, []route.Route[nic]{configured}) || rs.Len() != 0 {
		t.Fatalf("table %v, %d redirects: want the configured route kept, none tracked", got, rs.Len())
	}
}
