package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/netnstest"
)

// The kernel's ping -R and ping -T against GoNet: the Record Route and
// Timestamp options come back in the echo reply with GoNet's entries (RFC
// 1122 section 3.2.2.6), as ping prints them.
func TestKernelPingRecordsGoNetInTheOptions(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	h := newHost(t, options{})
	gonet, kernel := gonetAddr.Addr().String(), kernelAddr.Addr().String()
	tests := []struct {
		name string
		args []string
		want []string // in ping's output, in order
	}{
		// The kernel's entry as the request left, GoNet's as it
		// arrived and as the reply left, the kernel's as it arrived.
		{"record route", []string{"-R"}, []string{"RR:", kernel, gonet, gonet, kernel}},
		{"timestamps with addresses", []string{"-T", "tsandaddr"}, []string{"TS:", kernel, gonet, gonet, kernel}},
		{"timestamps only", []string{"-T", "tsonly"}, []string{"TS:"}},
	}
	// entries counts the lines of the option ping prints after its tag:
	// one an entry, up to the blank line.
	entries := func(out, tag string) int {
		_, after, _ := strings.Cut(out, tag)
		block, _, _ := strings.Cut(after, "\n\n")
		return len(strings.Split(strings.TrimSpace(block), "\n"))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := h.run(t, 10*time.Second, "ping", append(tt.args, "-c", "1", "-W", "5", gonet)...)
			rest := out
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("ping %v: no %q where expected in:\n%s", tt.args, w, out)
				}
				rest = rest[i+len(w):]
			}
			if n := entries(out, tt.want[0]); n != 4 {
				t.Fatalf("ping %v printed %d entries, want 4:\n%s", tt.args, n, out)
			}
			if sent, recv := pingCounts(t, out); recv != sent {
				t.Fatalf("ping %v: %d of %d answered:\n%s", tt.args, recv, sent, out)
			}
		})
	}
}
