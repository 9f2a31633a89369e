package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/services"
	"github.com/gonetstack/gonet/stats"
)

// fakeStatus is a services.StatusSource with fixed figures.
type fakeStatus struct {
	counters map[string]int64
	rows     []services.ConnRow
}

// Metrics gives the counters, all as counters.
func (f fakeStatus) Metrics() stats.Snapshot {
	snap := stats.Snapshot{}
	for n, v := range f.counters {
		snap[n] = stats.Sample{Kind: stats.KindCounter, Value: v}
	}
	return snap
}

func (f fakeStatus) Connections() []services.ConnRow { return f.rows }

// shortTempDir returns a directory for Unix sockets, whose paths must fit
// in 108 bytes, which t.TempDir's may not.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gonet")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// useControlDir points controlDir at a fresh directory for the test.
func useControlDir(t *testing.T) string {
	t.Helper()
	dir := shortTempDir(t)
	old := controlDir
	controlDir = dir
	t.Cleanup(func() { controlDir = old })
	return dir
}

// startControl serves src on a control socket at path, as gonet up does,
// until the test ends; it checks then that the socket is gone.
func startControl(t *testing.T, path string, src services.StatusSource) {
	t.Helper()
	startControlHandler(t, path, services.HTTPHandler("", src))
}

// startControlHandler serves h on a control socket at path, as the
// daemons do, until the test ends; it checks then that the socket is gone.
func startControlHandler(t *testing.T, path string, h http.Handler) {
	t.Helper()
	ln, err := listenControl(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		defer ln.Close()
		done <- serveControlHandler(ctx, ln, h)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("control socket: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the control socket did not stop within 10s")
		}
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("control socket %s left behind: %v", path, err)
		}
	})
}

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func TestSSPrintsTheDaemonsConnectionTable(t *testing.T) {
	dir := useControlDir(t)
	tests := []struct {
		name string
		rows []services.ConnRow
		want string
	}{
		{"no connections", nil,
			"State  Recv-Q  Send-Q  Local Address:Port  Peer Address:Port  rtt/ms  rto/ms  cwnd  ssthresh  retrans  rcvbuf  options\n"},
		{"listeners, an established connection and one closing",
			[]services.ConnRow{
				{State: "ESTABLISHED", Local: ap("10.0.0.2:80"), Remote: ap("10.0.0.1:40312"), SendQueue: 2896, RecvQueue: 0,
					RTT: 1500 * time.Microsecond, RTO: 201 * time.Millisecond, CWnd: 14600, SSThresh: 1 << 31, Retransmits: 2, RecvBuffer: 131072,
					Timestamps: true, SACK: true, WScale: true, SndWScale: 7, RcvWScale: 7, MSS: 1448},
				{State: "LISTEN", Local: ap("0.0.0.0:80")},
				{State: "LISTEN", Local: ap("0.0.0.0:7")},
				{State: "TIME-WAIT", Local: ap("10.0.0.2:7"), Remote: ap("10.0.0.1:40000"), RTT: 300 * time.Microsecond,
					RTO: 200 * time.Millisecond, CWnd: 4380, SSThresh: 2920},
			},
			"State      Recv-Q  Send-Q  Local Address:Port  Peer Address:Port  rtt/ms  rto/ms  cwnd   ssthresh  retrans  rcvbuf  options\n" +
				"LISTEN     0       0       0.0.0.0:7           0.0.0.0:*          -       -       -      -         -        -       -\n" +
				"LISTEN     0       0       0.0.0.0:80          0.0.0.0:*          -       -       -      -         -        -       -\n" +
				"TIME-WAIT  0       0       10.0.0.2:7          10.0.0.1:40000     0.3     200     4380   2920      0        0       -\n" +
				"ESTAB      0       2896    10.0.0.2:80         10.0.0.1:40312     1.5     201     14600  -         2        131072  ts sack wscale:7,7 mss:1448\n"},
		{"a connection being opened, with data queued",
			[]services.ConnRow{{State: "SYN-SENT", Local: ap("10.0.0.2:49152"), Remote: ap("10.0.0.1:22"), SendQueue: 0, RecvQueue: 0,
				RTO: time.Second, CWnd: 2920, SSThresh: 0}},
			"State     Recv-Q  Send-Q  Local Address:Port  Peer Address:Port  rtt/ms  rto/ms  cwnd  ssthresh  retrans  rcvbuf  options\n" +
				"SYN-SENT  0       0       10.0.0.2:49152      10.0.0.1:22        -       1000    2920  -         0        0       -\n"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "t"+string(rune('0'+i))+".sock")
			startControl(t, path, fakeStatus{rows: tt.rows})
			code, stdout, stderr := runArgs(t, "ss", "-control", path)
			if code != exitOK || stderr != "" {
				t.Fatalf("gonet ss: exit code %d, stderr %q", code, stderr)
			}
			if stdout != tt.want {
				t.Errorf("gonet ss printed\n%s\nwant\n%s", stdout, tt.want)
			}
		})
	}
}

func TestStatsPrintsTheDaemonsCounters(t *testing.T) {
	dir := useControlDir(t)
	startControl(t, filepath.Join(dir, "tap7.sock"), fakeStatus{counters: map[string]int64{
		"TCP.ActiveOpens": 3, "TCP.PassiveOpens": 12, "IPv4.InDiscards": 0, "UDP.InDatagrams": 40,
	}})
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"the non-zero ones, from the only daemon", []string{"stats"},
			"TCP.ActiveOpens 3\nTCP.PassiveOpens 12\nUDP.InDatagrams 40\n"},
		{"all of them, from the daemon on a TAP device", []string{"stats", "-a", "-tap", "tap7"},
			"IPv4.InDiscards 0\nTCP.ActiveOpens 3\nTCP.PassiveOpens 12\nUDP.InDatagrams 40\n"},
		{"as a JSON object of name and value, zeros too, sorted", []string{"stats", "-json"},
			`{
  "IPv4.InDiscards": 0,
  "TCP.ActiveOpens": 3,
  "TCP.PassiveOpens": 12,
  "UDP.InDatagrams": 40
}
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, tt.args...)
			if code != exitOK || stderr != "" {
				t.Fatalf("gonet %s: exit code %d, stderr %q", strings.Join(tt.args, " "), code, stderr)
			}
			if stdout != tt.want {
				t.Errorf("gonet %s printed\n%s\nwant\n%s", strings.Join(tt.args, " "), stdout, tt.want)
			}
		})
	}
}

func TestSSFindsTheDaemon(t *testing.T) {
	dir := useControlDir(t)
	src := fakeStatus{rows: []services.ConnRow{{State: "LISTEN", Local: ap("0.0.0.0:7")}}}

	// With no daemon at all.
	code, _, stderr := runArgs(t, "ss")
	if code != exitFail || !strings.Contains(stderr, "no gonet daemon found") {
		t.Errorf("gonet ss with no daemon: exit code %d, stderr %q; want 1 and no daemon found", code, stderr)
	}

	startControl(t, filepath.Join(dir, "gn0.sock"), src)
	for _, args := range [][]string{{"ss"}, {"ss", "-tap", "gn0"}, {"ss", "-control", filepath.Join(dir, "gn0.sock")}} {
		code, stdout, stderr := runArgs(t, args...)
		if code != exitOK || !strings.Contains(stdout, "0.0.0.0:7") {
			t.Errorf("gonet %s: exit code %d, stdout %q, stderr %q", strings.Join(args, " "), code, stdout, stderr)
		}
	}

	// Two daemons: which one is for the user to say.
	startControl(t, filepath.Join(dir, "gn1.sock"), src)
	code, _, stderr = runArgs(t, "ss")
	if code != exitFail || !strings.Contains(stderr, "gn0, gn1") || !strings.Contains(stderr, "-tap") {
		t.Errorf("gonet ss with two daemons: exit code %d, stderr %q; want 1, both named, and -tap", code, stderr)
	}
	if code, _, _ := runArgs(t, "ss", "-tap", "gn1"); code != exitOK {
		t.Errorf("gonet ss -tap gn1 with two daemons: exit code %d", code)
	}
}

func TestSSSaysWhyItCannotReachTheDaemon(t *testing.T) {
	dir := useControlDir(t)
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // a daemon killed with its socket left behind

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no such daemon", []string{"ss", "-tap", "gn9"}, "no gonet daemon at " + filepath.Join(dir, "gn9.sock")},
		{"a socket left behind", []string{"stats", "-control", stale}, "left from one that has stopped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, tt.args...)
			if code != exitFail || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tt.want) {
				t.Errorf("gonet %s: exit code %d, stdout %q, stderr %q; want 1, nothing, one line with %q",
					strings.Join(tt.args, " "), code, stdout, stderr, tt.want)
			}
		})
	}
}

func TestSSAndStatsRejectBadFlagsWithExitCode2(t *testing.T) {
	for _, cmd := range []string{"ss", "stats"} {
		for _, tt := range []struct {
			name string
			args []string
			want string
		}{
			{"both -tap and -control", []string{"-tap", "t", "-control", "/x.sock"}, "not both"},
			{"a positional argument", []string{"tap0"}, `unexpected argument "tap0"`},
			{"a TAP name with a slash", []string{"-tap", "../x"}, "not a valid interface name"},
			{"a TAP name too long", []string{"-tap", "a-very-long-tap-name"}, "at most 15"},
			{"an unknown flag", []string{"-n"}, "flag provided but not defined: -n"},
		} {
			t.Run(cmd+" "+tt.name, func(t *testing.T) {
				checkUsageError(t, append([]string{cmd}, tt.args...), tt.want)
			})
		}
	}
}

func TestListenControlTakesOverOnlyAStaleSocket(t *testing.T) {
	dir := shortTempDir(t)

	t.Run("a socket left by a daemon that was killed", func(t *testing.T) {
		path := filepath.Join(dir, "stale.sock")
		old, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		old.(*net.UnixListener).SetUnlinkOnClose(false)
		old.Close()
		ln, err := listenControl(path)
		if err != nil {
			t.Fatalf("listenControl over a stale socket: %v", err)
		}
		ln.Close()
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("closing the control listener left %s: %v", path, err)
		}
	})

	t.Run("a daemon that is running", func(t *testing.T) {
		path := filepath.Join(dir, "live.sock")
		startControl(t, path, fakeStatus{})
		if ln, err := listenControl(path); err == nil || !strings.Contains(err.Error(), "another gonet") {
			if ln != nil {
				ln.Close()
			}
			t.Errorf("listenControl over a live daemon's socket: %v, want another gonet", err)
		}
	})

	t.Run("a file that is not a socket", func(t *testing.T) {
		path := filepath.Join(dir, "file.sock")
		if err := os.WriteFile(path, []byte("keep me"), 0o600); err != nil {
			t.Fatal(err)
		}
		if ln, err := listenControl(path); err == nil {
			ln.Close()
			t.Error("listenControl replaced a regular file")
		}
		if b, _ := os.ReadFile(path); string(b) != "keep me" {
			t.Errorf("the file in the way now holds %q", b)
		}
	})

	t.Run("the directory is created", func(t *testing.T) {
		path := filepath.Join(dir, "new", "gn0.sock")
		ln, err := listenControl(path)
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
	})
}

func TestParseUpControl(t *testing.T) {
	base := []string{"-tap", "tap0", "-addr", "10.0.0.2/24"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{base, ""},
		{append(base[:4:4], "-control", "/tmp/g.sock"), "/tmp/g.sock"},
		{append(base[:4:4], "-control", noControl), noControl},
	} {
		c, err := parseUp(tt.args)
		if err != nil {
			t.Fatal(err)
		}
		if c.control != tt.want {
			t.Errorf("parseUp(%q): control %q, want %q", tt.args, c.control, tt.want)
		}
	}
}
