package iperf3_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/iperf3"
	"github.com/gonetstack/gonet/stack"
)

// gonetServer runs the server on s's port 5201, TCP and UDP, until the
// test ends.
func gonetServer(t *testing.T, s *stack.Stack) *iperf3.Server {
	t.Helper()
	ln, err := s.Listen("tcp", ":5201")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := s.ListenPacket("udp", ":5201")
	if err != nil {
		t.Fatal(err)
	}
	srv := &iperf3.Server{Timeout: 5 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, pc) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv
}

// serverAddr is stack A's iperf3 service.
var serverAddr = netip.AddrPortFrom(stacktest.AddrA.Addr(), iperf3.Port).String()

func TestClientAndServerOverTwoStacks(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  iperf3.Config
	}{
		{"tcp", iperf3.Config{}},
		{"udp", iperf3.Config{UDP: true, Rate: 20e6}},
		{"reverse tcp", iperf3.Config{Reverse: true}},
		{"reverse udp", iperf3.Config{Reverse: true, UDP: true, Rate: 20e6, Len: 1000}},
		{"parallel tcp", iperf3.Config{Parallel: 4}},
		{"parallel udp", iperf3.Config{Parallel: 4, UDP: true, Rate: 5e6}},
		{"paced tcp", iperf3.Config{Rate: 8e6, Len: 8 << 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := stacktest.Pair(t, stacktest.Options{})
			srv := gonetServer(t, a)
			cfg := tc.cfg
			cfg.Addr, cfg.Duration = serverAddr, time.Second
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res, err := iperf3.Run(ctx, b.DialContext, cfg)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			checkResult(t, res, cfg)
			if cfg.Rate > 0 {
				// A paced sender keeps to its rate, within 20%, per
				// stream.
				want := float64(cfg.Rate) * float64(max(cfg.Parallel, 1))
				if got := res.Sent.BitsPerSecond(); got > 1.2*want || got < 0.8*want {
					t.Errorf("sent at %.3g bit/s, want %.3g within 20%%", got, want)
				}
			}
			waitFor(t, func() bool { return srv.Stats.Tests.Load() == 1 })
		})
	}
}

func TestClientAndServerOverIPv6(t *testing.T) {
	for _, udp := range []bool{false, true} {
		a, b := stacktest.Pair(t, stacktest.Options{IPv6: true})
		srv := gonetServer(t, a)
		cfg := iperf3.Config{Addr: netip.AddrPortFrom(stacktest.AddrA6.Addr(), iperf3.Port).String(),
			UDP: udp, Rate: 20e6, Duration: time.Second}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		res, err := iperf3.Run(ctx, b.DialContext, cfg)
		cancel()
		if err != nil {
			t.Fatalf("UDP %v: Run: %v", udp, err)
		}
		checkResult(t, res, cfg)
		if udp && res.Config.Len != iperf3.DefaultUDPLen6 {
			t.Errorf("UDP over IPv6: %d-byte datagrams by default, want %d", res.Config.Len, iperf3.DefaultUDPLen6)
		}
		waitFor(t, func() bool { return srv.Stats.Tests.Load() == 1 })
	}
}

func TestServerDeniesASecondClient(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{})
	srv := gonetServer(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := iperf3.Run(ctx, b.DialContext, iperf3.Config{Addr: serverAddr, Duration: 2 * time.Second})
		first <- err
	}()
	waitFor(t, func() bool { return len(b.Connections()) >= 2 }) // control and stream
	_, err := iperf3.Run(ctx, b.DialContext, iperf3.Config{Addr: serverAddr, Duration: time.Second})
	if err != iperf3.ErrBusy {
		t.Errorf("second client: %v, want ErrBusy", err)
	}
	if err := <-first; err != nil {
		t.Errorf("first client: %v", err)
	}
	if got := srv.Stats.Denied.Load(); got != 1 {
		t.Errorf("Denied = %d, want 1", got)
	}
}

func TestServerRefusesWhatItDoesNotTake(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{})
	ln, err := a.Listen("tcp", ":5201")
	if err != nil {
		t.Fatal(err)
	}
	// No UDP endpoint: UDP tests are refused.
	srv := &iperf3.Server{Timeout: 5 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, nil) }()
	defer func() { cancel(); <-done }()
	_, err = iperf3.Run(ctx, b.DialContext, iperf3.Config{Addr: serverAddr, UDP: true, Duration: time.Second})
	se, ok := err.(*iperf3.ServerErr)
	if !ok || se.Code != 13 {
		t.Fatalf("UDP test on a TCP-only server: %v, want a ServerErr with code 13 (not implemented)", err)
	}
	waitFor(t, func() bool { return srv.Stats.Refused.Load() == 1 })
}

func TestServerTakesTestsBackToBack(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{})
	srv := gonetServer(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The second starts the moment the first has its results: the
	// server must be idle by then, not deny it.
	for i := range 2 {
		if _, err := iperf3.Run(ctx, b.DialContext, iperf3.Config{Addr: serverAddr, Duration: time.Second, UDP: i == 1}); err != nil {
			t.Fatalf("test %d: %v", i+1, err)
		}
	}
	waitFor(t, func() bool { return srv.Stats.Tests.Load() == 2 })
}
