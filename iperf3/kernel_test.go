package iperf3_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/iperf3"
)

// needIperf3 returns the stock iperf3's path, skipping the test without
// it (failing under CI, which installs it).
func needIperf3(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("iperf3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("iperf3 is not installed: %v", err)
		}
		t.Skipf("iperf3 is not installed: %v", err)
	}
	return path
}

// kernelServer runs the server on loopback over the kernel's sockets,
// on a free port for TCP and UDP alike, until the test ends.
func kernelServer(t *testing.T) (*iperf3.Server, string) {
	t.Helper()
	for range 10 {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		pc, err := net.ListenPacket("udp4", ln.Addr().String())
		if err != nil {
			ln.Close()
			continue // the UDP port is taken; try another
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
		return srv, ln.Addr().String()
	}
	t.Fatal("no free port for TCP and UDP together")
	return nil, ""
}

// stockReport is the part of iperf3 -J's output the tests read.
type stockReport struct {
	Error string `json:"error"`
	End   struct {
		SumSent struct {
			Bytes uint64 `json:"bytes"`
		} `json:"sum_sent"`
		SumReceived struct {
			Bytes uint64 `json:"bytes"`
		} `json:"sum_received"`
		Sum struct {
			Bytes       uint64  `json:"bytes"`
			Packets     int64   `json:"packets"`
			LostPackets int64   `json:"lost_packets"`
			LostPercent float64 `json:"lost_percent"`
			JitterMs    float64 `json:"jitter_ms"`
		} `json:"sum"`
		Streams []json.RawMessage `json:"streams"`
	} `json:"end"`
}

func TestStockClientAgainstServerOnLoopback(t *testing.T) {
	bin := needIperf3(t)
	for _, tc := range []struct {
		name    string
		args    []string
		streams int
		udp     bool
	}{
		{"tcp", nil, 1, false},
		{"udp", []string{"-u", "-b", "20M"}, 1, true},
		{"reverse tcp", []string{"-R"}, 1, false},
		{"reverse udp", []string{"-R", "-u", "-b", "20M"}, 1, true},
		{"parallel tcp", []string{"-P", "4"}, 4, false},
		{"parallel udp", []string{"-P", "3", "-u", "-b", "5M"}, 3, true},
		{"ended by a byte count", []string{"-n", "5M", "-l", "64K"}, 1, false},
		{"64-bit udp counters", []string{"-u", "-b", "10M", "--udp-counters-64bit", "-l", "1000"}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, addr := kernelServer(t)
			host, port, _ := net.SplitHostPort(addr)
			args := append([]string{"-c", host, "-p", port, "-J"}, tc.args...)
			if !slices.Contains(tc.args, "-n") {
				args = append(args, "-t", "1") // one end condition only
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin, args...).Output()
			var rep stockReport
			if jerr := json.Unmarshal(out, &rep); jerr != nil {
				t.Fatalf("iperf3 %v: %v; output not JSON (%v):\n%s", args, err, jerr, out)
			}
			if rep.Error != "" || err != nil {
				t.Fatalf("iperf3 %v: %v %s\n%s", args, err, rep.Error, out)
			}
			if rep.End.SumReceived.Bytes == 0 || rep.End.SumSent.Bytes == 0 {
				t.Errorf("sum_sent %d bytes, sum_received %d: want both above 0", rep.End.SumSent.Bytes, rep.End.SumReceived.Bytes)
			}
			if rep.End.SumReceived.Bytes > rep.End.SumSent.Bytes {
				t.Errorf("received %d bytes, more than the %d sent", rep.End.SumReceived.Bytes, rep.End.SumSent.Bytes)
			}
			if len(rep.End.Streams) != tc.streams {
				t.Errorf("%d streams in the report, want %d", len(rep.End.Streams), tc.streams)
			}
			if tc.udp && (rep.End.Sum.Packets == 0 || rep.End.Sum.LostPercent > 5) {
				t.Errorf("UDP: %d packets, %.2f%% lost: want some, and under 5%% lost on loopback", rep.End.Sum.Packets, rep.End.Sum.LostPercent)
			}
			waitFor(t, func() bool { return srv.Stats.Tests.Load() == 1 })
		})
	}
}

func TestStockClientIsToldWhatTheServerRefuses(t *testing.T) {
	bin := needIperf3(t)
	srv, addr := kernelServer(t)
	host, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, bin, "-c", host, "-p", port, "-t", "1", "-J", "--bidir").Output()
	var rep stockReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("output not JSON (%v):\n%s", err, out)
	}
	// iperf3's own words for IEUNIMP.
	if !strings.Contains(rep.Error, "not implemented") {
		t.Errorf("error %q, want iperf3's \"not implemented\"", rep.Error)
	}
	waitFor(t, func() bool { return srv.Stats.Refused.Load() == 1 })
}

// waitFor polls cond for up to five seconds: the server counts a test
// once the client has its results and has gone.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// freePort returns a loopback port free for TCP and UDP when asked.
func freePort(t *testing.T) int {
	t.Helper()
	for range 10 {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp4", ln.Addr().String())
		ln.Close()
		if err == nil {
			pc.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

func TestClientAgainstStockServerOnLoopback(t *testing.T) {
	bin := needIperf3(t)
	for _, tc := range []struct {
		name string
		cfg  iperf3.Config
	}{
		{"tcp", iperf3.Config{}},
		{"udp", iperf3.Config{UDP: true, Rate: 20e6}},
		{"reverse tcp", iperf3.Config{Reverse: true}},
		{"reverse udp", iperf3.Config{Reverse: true, UDP: true, Rate: 20e6}},
		{"parallel tcp", iperf3.Config{Parallel: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := freePort(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "-s", "-1", "-B", "127.0.0.1", "-p", strconv.Itoa(port))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				cancel()
				cmd.Wait()
			}()
			cfg := tc.cfg
			cfg.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			cfg.Duration = time.Second
			var d net.Dialer
			var res iperf3.Result
			var err error
			// The server takes a moment to listen.
			for range 50 {
				if res, err = iperf3.Run(ctx, d.DialContext, cfg); err == nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("Run: %v; server: %s", err, stderr.String())
			}
			checkResult(t, res, cfg)
		})
	}
}

// checkResult checks that both sides counted traffic, that the receiver
// got no more than was sent, and that a UDP test's counts agree.
func checkResult(t *testing.T, res iperf3.Result, cfg iperf3.Config) {
	t.Helper()
	var buf bytes.Buffer
	res.WriteText(&buf)
	t.Logf("\n%s", buf.String())
	if res.Sent.Bytes == 0 || res.Received.Bytes == 0 {
		t.Errorf("sent %d bytes, received %d: want both above 0", res.Sent.Bytes, res.Received.Bytes)
	}
	if res.Received.Bytes > res.Sent.Bytes {
		t.Errorf("received %d bytes, more than the %d sent", res.Received.Bytes, res.Sent.Bytes)
	}
	for _, s := range res.Streams {
		// Streams are matched by id across the sides: a mismatch
		// shows as a stream receiving more than it sent.
		if s.Received.Bytes > s.Sent.Bytes {
			t.Errorf("stream %d received %d bytes, more than the %d sent", s.ID, s.Received.Bytes, s.Sent.Bytes)
		}
	}
	want := max(cfg.Parallel, 1)
	if len(res.Streams) != want {
		t.Errorf("%d streams, want %d", len(res.Streams), want)
	}
	if cfg.UDP {
		l := uint64(res.Config.Len) // with the default filled in
		if got := uint64(res.Sent.Packets) * l; got != res.Sent.Bytes {
			t.Errorf("sender: %d packets of %d bytes is %d bytes, but it reports %d", res.Sent.Packets, l, got, res.Sent.Bytes)
		}
		if res.Received.LostPercent() > 5 {
			t.Errorf("%.2f%% lost (%d of %d)", res.Received.LostPercent(), res.Received.Lost, res.Received.Packets)
		}
	}
}
