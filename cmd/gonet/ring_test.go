package main

import (
	"context"
	"io"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/link/shm"
	"github.com/gonetstack/gonet/stack"
)

// TestUpListensOnARing runs gonet up -ring-listen as one of two GoNet
// processes on a shared-memory ring: it comes up only once a peer (here a
// stack in the test, as gonet up -ring would be) has attached, serves
// echo over TCP across the ring with offloads on, and on SIGTERM's
// stand-in prints the ring's counters among the stack's.
func TestUpListensOnARing(t *testing.T) {
	path := filepath.Join(shortTempDir(t), "ring.sock")
	up := startInProcess(t, "up", "-ring-listen", path, "-addr", "10.0.0.1/24", "-no-ipv6", "-serve", "echo", "-control", noControl)
	var ep *shm.Endpoint
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if ep, err = shm.Dial(path, shm.Options{Offload: true}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dialling the ring for 10s: %v; stderr %q", err, up.stderr.String())
		}
	}
	if line := up.readyLine(t); !regexp.MustCompile(`^gonet: up ring0 10\.0\.0\.1/24 ([0-9a-f]{2}:){5}[0-9a-f]{2}$`).MatchString(line) {
		t.Fatalf("ready line %q", line)
	}
	if !ep.Capabilities().TSO {
		t.Error("no offloads on the ring, though both sides offer them")
	}

	s := peerStack(t, ep, stack.Config{NoIPv6: true}, "10.0.0.2/24")
	echoed(t, s, "10.0.0.1:7", strings.Repeat("bytes across the ring. ", 50000))
	s.Close()

	rest := up.stop(t)
	if !regexp.MustCompile(`Ring\.ring0\.RxBytes [1-9]`).MatchString(rest) {
		t.Errorf("the counters printed on exit do not show the ring's:\n%s", rest)
	}
}

// A -ring-listen daemon interrupted before any peer attaches exits
// instead of waiting for one.
func TestUpStopsWaitingForARingPeer(t *testing.T) {
	path := filepath.Join(shortTempDir(t), "ring.sock")
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	var stderr strings.Builder
	go func() {
		exited <- run(ctx, []string{"up", "-ring-listen", path, "-addr", "10.0.0.1/24", "-control", noControl}, io.Discard, &stderr)
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case code := <-exited:
		if code != exitFail {
			t.Errorf("exit code %d, want %d; stderr %q", code, exitFail, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("gonet up still waiting for a ring peer 10s after the signal")
	}
}

// gonet ping -ring attaches a stack to a GoNet process listening on the
// ring (here a stack in the test, as gonet up -ring-listen would be) and
// pings it across.
func TestPingAcrossARing(t *testing.T) {
	path := filepath.Join(shortTempDir(t), "ring.sock")
	ln, err := shm.Listen(path, shm.Options{Offload: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := stack.New(stack.Config{NoIPv6: true})
	defer s.Close()
	attached := make(chan error, 1)
	go func() {
		ep, err := ln.Accept()
		if err == nil {
			if err = s.AddNIC("eth0", ep); err != nil {
				ep.Close()
			} else {
				err = s.AddAddress("eth0", netip.MustParsePrefix("10.0.0.1/24"))
			}
		}
		attached <- err
	}()
	var stdout, stderr strings.Builder
	code := run(context.Background(), []string{"ping", "-ring", path, "-addr", "10.0.0.2/24", "-no-ipv6", "-c", "2", "-i", "0.1", "10.0.0.1"}, &stdout, &stderr)
	if err := <-attached; err != nil {
		t.Fatal(err)
	}
	if code != exitOK || !strings.Contains(stdout.String(), "2 received") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}
