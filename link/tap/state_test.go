//go:build linux

package tap

import (
	"testing"
	"time"
)

// The device's state follows its kernel side: down when opened, up once
// set up, down and up again as ip link sets it, each change told to the
// watchers in order and counted.
func TestStateFollowsTheKernelsSide(t *testing.T) {
	ns := newNS(t)
	e := ns.open(t, Options{})
	if e.Up() {
		t.Fatal("up before the kernel's side was set up")
	}
	changes := make(chan bool, 16)
	e.WatchState(func(up bool) { changes <- up })
	next := func(want bool) {
		t.Helper()
		select {
		case up := <-changes:
			if up != want {
				t.Fatalf("told up=%v, want %v", up, want)
			}
			if e.Up() != want {
				t.Fatalf("Up() = %v after a change to %v", e.Up(), want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no change to up=%v within 5s", want)
		}
	}
	ns.up(t, e)
	next(true)
	ns.ip(t, "link", "set", "dev", e.Name(), "down")
	next(false)
	ns.ip(t, "link", "set", "dev", e.Name(), "up")
	next(true)
	// An address added changes nothing the watchers hear.
	ns.ip(t, "addr", "add", "10.77.9.1/24", "dev", e.Name())
	select {
	case up := <-changes:
		t.Errorf("told up=%v for an address", up)
	case <-time.After(200 * time.Millisecond):
	}
	if s := e.Stats(); s.LinkUps.Load() != 2 || s.LinkDowns.Load() != 1 {
		t.Errorf("LinkUps %d, LinkDowns %d; want 2 and 1", s.LinkUps.Load(), s.LinkDowns.Load())
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}
