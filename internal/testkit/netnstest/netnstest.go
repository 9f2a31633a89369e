// Package netnstest gives tests a network namespace of their own, deleted
// when the test ends, and skips tests that cannot have one.
//
// A test skips when namespaces are unavailable (not root, no /dev/net/tun,
// no ip command) or a tool it needs is missing, except under CI=true, where
// it fails instead: there a skip would hide a broken feature.
package netnstest

import (
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/gonetstack/gonet/internal/netns"
)

// sweep deletes, once per test binary, the namespaces that killed test
// binaries left behind.
var sweep sync.Once

// New returns a fresh namespace, with its loopback up, deleted when the test
// and its subtests end, whether they pass, fail or panic. It skips the test
// (fails it under CI=true) when namespaces are unavailable.
func New(t testing.TB) *netns.NS {
	t.Helper()
	if err := netns.Available(); err != nil {
		skipOrFatal(t, err.Error())
	}
	sweep.Do(func() {
		if _, err := netns.RemoveStale(netns.DefaultPrefix); err != nil {
			t.Logf("netnstest: removing stale namespaces: %v", err)
		}
	})
	ns, err := netns.New(netns.DefaultPrefix)
	if err != nil {
		t.Fatalf("netnstest: %v", err)
	}
	t.Cleanup(func() {
		if err := ns.Close(); err != nil {
			t.Errorf("netnstest: %v", err)
		}
	})
	return ns
}

// RequireTool skips the test (fails it under CI=true) unless the command
// name, such as "ping", "socat" or "tcpdump", is on PATH.
func RequireTool(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		skipOrFatal(t, "netnstest: "+name+" is not on PATH")
	}
}

// skipOrFatal skips the test, or fails it when CI=true.
func skipOrFatal(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(reason + "; CI=true: a skip would hide a broken feature")
	}
	t.Skip(reason)
}
