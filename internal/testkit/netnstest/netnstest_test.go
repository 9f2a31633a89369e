package netnstest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/netns"
)

// fakeTB records what a helper does to its test. Like the real thing, Skip
// and Fatal end the goroutine, so run helpers on it through runFake.
type fakeTB struct {
	testing.TB
	skipped, failed string
	cleanups        []func()
}

func (f *fakeTB) Helper()                   {}
func (f *fakeTB) Cleanup(fn func())         { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Logf(string, ...any)       {}
func (f *fakeTB) Errorf(s string, a ...any) { f.failed += fmt.Sprintf(s, a...) }
func (f *fakeTB) Skip(a ...any)             { f.skipped = fmt.Sprint(a...); runtime.Goexit() }
func (f *fakeTB) Fatal(a ...any)            { f.failed = fmt.Sprint(a...); runtime.Goexit() }
func (f *fakeTB) Fatalf(s string, a ...any) { f.failed = fmt.Sprintf(s, a...); runtime.Goexit() }

func runFake(t *testing.T, fn func(tb testing.TB)) *fakeTB {
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f
}

func TestSkipOrFatal(t *testing.T) {
	t.Setenv("CI", "")
	f := runFake(t, func(tb testing.TB) { skipOrFatal(tb, "no tun") })
	if f.skipped != "no tun" || f.failed != "" {
		t.Errorf("without CI: skipped %q, failed %q", f.skipped, f.failed)
	}

	t.Setenv("CI", "true")
	f = runFake(t, func(tb testing.TB) { skipOrFatal(tb, "no tun") })
	if f.skipped != "" || !strings.Contains(f.failed, "no tun") || !strings.Contains(f.failed, "CI=true") {
		t.Errorf("with CI=true: skipped %q, failed %q", f.skipped, f.failed)
	}
}

func TestRequireTool(t *testing.T) {
	const missing = "gonet-no-such-tool"
	t.Setenv("CI", "")
	f := runFake(t, func(tb testing.TB) { RequireTool(tb, missing) })
	if !strings.Contains(f.skipped, missing) || f.failed != "" {
		t.Errorf("missing tool without CI: skipped %q, failed %q", f.skipped, f.failed)
	}
	t.Setenv("CI", "true")
	f = runFake(t, func(tb testing.TB) { RequireTool(tb, missing) })
	if f.skipped != "" || !strings.Contains(f.failed, missing) {
		t.Errorf("missing tool with CI=true: skipped %q, failed %q", f.skipped, f.failed)
	}
	f = runFake(t, func(tb testing.TB) { RequireTool(tb, "sh") })
	if f.skipped != "" || f.failed != "" {
		t.Errorf("present tool: skipped %q, failed %q", f.skipped, f.failed)
	}
}

// listed reports whether `ip netns list` shows name.
func listed(t *testing.T, name string) bool {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v: %s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return true
		}
	}
	return false
}

func TestNewRegistersCleanup(t *testing.T) {
	New(t) // skips or fails where namespaces are unavailable
	var ns *netns.NS
	f := runFake(t, func(tb testing.TB) { ns = New(tb) })
	for _, fn := range f.cleanups {
		defer fn()
	}
	if f.failed != "" || len(f.cleanups) != 1 {
		t.Fatalf("failed %q, %d cleanups", f.failed, len(f.cleanups))
	}
	if !listed(t, ns.Name) {
		t.Fatalf("%s not listed", ns.Name)
	}
	f.cleanups[0]()
	if listed(t, ns.Name) {
		t.Errorf("%s still listed after its cleanup", ns.Name)
	}
}

func TestNewDeletedWhenSubtestEnds(t *testing.T) {
	var ns *netns.NS
	t.Run("sub", func(t *testing.T) {
		ns = New(t)
		if !listed(t, ns.Name) {
			t.Fatalf("%s not listed", ns.Name)
		}
	})
	if ns == nil {
		t.Skip("subtest skipped")
	}
	if listed(t, ns.Name) {
		t.Errorf("%s still listed after the subtest", ns.Name)
	}
}

// childEnv selects, in a re-executed test binary, how TestChild ends.
const childEnv = "GONET_NETNSTEST_CHILD"

// TestChild is run by TestCleanupWhenTestDies in a child test binary: it
// makes a namespace, says its name, and fails or panics.
func TestChild(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip("run by TestCleanupWhenTestDies")
	}
	ns := New(t)
	fmt.Printf("NAMESPACE=%s\n", ns.Name)
	switch mode {
	case "fatal":
		t.Fatal("failing on purpose")
	case "panic":
		panic("panicking on purpose")
	}
}

func TestCleanupWhenTestDies(t *testing.T) {
	New(t) // skips or fails where namespaces are unavailable
	re := regexp.MustCompile(`NAMESPACE=(\S+)`)
	for _, mode := range []string{"fatal", "panic"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestChild$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), childEnv+"="+mode)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("child passed:\n%s", out)
			}
			m := re.FindSubmatch(out)
			if m == nil {
				t.Fatalf("child made no namespace:\n%s", out)
			}
			if listed(t, string(m[1])) {
				exec.Command("ip", "netns", "delete", string(m[1])).Run()
				t.Fatalf("%s left behind after the child's test died (%s):\n%s", m[1], mode, out)
			}
		})
	}
}
