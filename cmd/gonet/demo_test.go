package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/netns"
)

func TestFragmentsCountsIPv4Fragments(t *testing.T) {
	tests := []struct {
		size, mtu, want int
	}{
		{56, 1500, 1},
		{1472, 1500, 1}, // 1472 + 8 + 20 = 1500 exactly
		{1473, 1500, 2},
		{8000, 1500, 6},   // 8008 bytes in 1480-byte pieces
		{65000, 1500, 44}, // 65008 / 1480 = 43.9
		{100, 68, 3},      // 48 bytes a fragment: a multiple of 8
	}
	for _, tt := range tests {
		if got := fragments(tt.size, tt.mtu); got != tt.want {
			t.Errorf("fragments(%d, MTU %d) = %d, want %d", tt.size, tt.mtu, got, tt.want)
		}
	}
}

// The demo's network rule: it sends to 10.99.0.0/24 and nowhere else.
func TestDemoDestRefusesAddressesOutsideTheDemoNetwork(t *testing.T) {
	tests := []struct {
		addr   string
		allow  bool
		reason string
	}{
		{"10.99.0.1", true, "the kernel's side"},
		{"10.99.0.2", true, "GoNet's side"},
		{"10.99.1.1", false, "the next network"},
		{"8.8.8.8", false, "the Internet"},
		{"127.0.0.1", false, "the host's loopback"},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			defer func() {
				if r := recover(); (r == nil) != tt.allow {
					t.Errorf("demoDest(%s): panic %v, want allowed %v", tt.addr, r, tt.allow)
				}
			}()
			demoDest(netip.MustParseAddr(tt.addr))
		})
	}
}

// TestDemoInMemoryShowsRoundTrips runs the whole in-memory demo: two GoNet
// stacks on a pipe, pinging and echoing. It needs a working stack.
func TestDemoInMemoryShowsRoundTrips(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr strings.Builder
	code := func() (code int) {
		// A panic in the stack should fail this test, not the binary.
		defer func() {
			if r := recover(); r != nil {
				stderr.WriteString(fmt.Sprintf("panic: %v\n", r))
				code = -1
			}
		}()
		return run(ctx, []string{"demo", "-mem"}, &stdout, &stderr)
	}()
	t.Logf("stdout:\n%s", stdout.String())
	if code != exitOK {
		t.Fatalf("gonet demo -mem: exit code %d, want 0; stderr:\n%s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []*regexp.Regexp{
		// Ping lines at each size, as the kernel's ping prints them.
		regexp.MustCompile(`(?m)^ +64 bytes from 10\.99\.0\.2: icmp_seq=\d+ time=\d+(\.\d+)? ms$`),
		regexp.MustCompile(`(?m)^ +1480 bytes from 10\.99\.0\.2: icmp_seq=\d+ time=\d+(\.\d+)? ms$`),
		regexp.MustCompile(`(?m)^ +8008 bytes from 10\.99\.0\.2: icmp_seq=\d+ time=\d+(\.\d+)? ms$`),
		regexp.MustCompile(`(?m)^ +65008 bytes from 10\.99\.0\.2: icmp_seq=\d+ time=\d+(\.\d+)? ms$`),
		regexp.MustCompile(`rtt min/avg/max/mdev = [\d.]+/[\d.]+/[\d.]+/[\d.]+ ms`),
		// UDP echoes at each size.
		regexp.MustCompile(`(?m)^ +1 byte echoed by 10\.99\.0\.2:7 in \d+(\.\d+)? ms$`),
		regexp.MustCompile(`(?m)^ +1472 bytes echoed by 10\.99\.0\.2:7 in \d+(\.\d+)? ms$`),
		regexp.MustCompile(`(?m)^ +30000 bytes echoed by 10\.99\.0\.2:7 in \d+(\.\d+)? ms$`),
		regexp.MustCompile(`gonet demo: done`),
	} {
		if !want.MatchString(out) {
			t.Errorf("output does not match %s", want)
		}
	}
}

// TestDemoInNamespaceTalksToTheKernel runs the demo proper: the kernel's
// ping and socat against GoNet in a private namespace. It needs root,
// /dev/net/tun and ip, and checks the namespace is gone afterwards.
func TestDemoInNamespaceTalksToTheKernel(t *testing.T) {
	if err := netns.Available(); err != nil {
		t.Skip(err)
	}
	for _, tool := range []string{"ping", "socat"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not on PATH", tool)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr strings.Builder
	code := run(ctx, []string{"demo"}, &stdout, &stderr)
	t.Logf("stdout:\n%s", stdout.String())
	if code != exitOK {
		t.Fatalf("gonet demo: exit code %d, want 0; stderr:\n%s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^ +5 packets transmitted, 5 received, 0% packet loss`),
		regexp.MustCompile(`(?m)^ +3 packets transmitted, 3 received, 0% packet loss`),
		regexp.MustCompile(`(?m)^ +rtt min/avg/max/mdev = [\d.]+/[\d.]+/[\d.]+/[\d.]+ ms$`),
		regexp.MustCompile(`echo \(socat\): sent (\d+) bytes, (\d+) bytes echoed back, identical`),
		regexp.MustCompile(`daytime \(socat\): "\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d \w+\\r\\n"`),
		regexp.MustCompile(`(?m)^ +64 bytes from 10\.99\.0\.1: icmp_seq=1 time=\d+(\.\d+)? ms$`),
		regexp.MustCompile(`(?m)^ +8008 bytes from 10\.99\.0\.1: icmp_seq=5 time=\d+(\.\d+)? ms$`),
		regexp.MustCompile(`gonet demo: removed namespace gonet-demo-\d+-\d+`),
	} {
		if !want.MatchString(out) {
			t.Errorf("output does not match %s", want)
		}
	}
	left, err := filepath.Glob(filepath.Join(netns.Dir, fmt.Sprintf("%s-%d-*", demoPrefix, os.Getpid())))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("the demo left namespaces behind: %v", left)
	}
}
