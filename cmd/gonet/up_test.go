package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/link/stream"
	"github.com/gonetstack/gonet/services"
	"github.com/gonetstack/gonet/stack"
)

// memoryPair returns two stacks on an in-memory link, A at demoKernel's
// address on NIC a0 and B at demoGoNet's on b0, closed when the test ends.
func memoryPair(t *testing.T) (a, b *stack.Stack) {
	t.Helper()
	macA := net.HardwareAddr{0x02, 0x00, 0x00, 0x99, 0x00, 0x01}
	macB := net.HardwareAddr{0x02, 0x00, 0x00, 0x99, 0x00, 0x02}
	epA, epB := pipe.New(demoMTU, macA, macB)
	a, b = stack.New(stack.Config{}), stack.New(stack.Config{})
	t.Cleanup(func() {
		if err := errors.Join(a.Close(), b.Close()); err != nil {
			t.Errorf("closing the stacks: %v", err)
		}
		epA.Close()
		epB.Close()
	})
	for _, x := range []struct {
		s    *stack.Stack
		nic  string
		ep   *pipe.Endpoint
		addr netip.Prefix
	}{{a, "a0", epA, demoKernel}, {b, "b0", epB, demoGoNet}} {
		if err := x.s.AddNIC(x.nic, x.ep); err != nil {
			t.Fatal(err)
		}
		if err := x.s.AddAddress(x.nic, x.addr); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

// TestUpServesEveryServiceOverTCP runs what gonet up runs, on stack B of an
// in-memory pair, and uses it from stack A over GoNet's TCP: echo, daytime,
// chargen, discard, http with a root, and the control socket that gonet ss
// reads.
func TestUpServesEveryServiceOverTCP(t *testing.T) {
	useControlDir(t)
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "hello.txt"), []byte("hello over GoNet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, b := memoryPair(t)
	list, err := services.Lookup("echo,discard,daytime,chargen,http")
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	c := &upConfig{services: list, http: true, httpRoot: root}
	svc, err := startUpServices(context.Background(), slog.New(slog.NewTextHandler(&stderr, nil)), c, &host{stack: b, nic: "b0"})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			if err := svc.Stop(); err != nil {
				t.Errorf("stopping the services: %v", err)
			}
		}
	}
	defer stop()
	if stderr.Len() > 0 {
		t.Errorf("starting the services said %q", stderr.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dial := func(port string) net.Conn {
		t.Helper()
		conn, err := a.DialContext(ctx, "tcp", demoGoNet.Addr().String()+":"+port)
		if err != nil {
			t.Fatalf("dialling port %s: %v", port, err)
		}
		conn.SetDeadline(time.Now().Add(20 * time.Second))
		return conn
	}

	t.Run("echo", func(t *testing.T) {
		conn := dial("7")
		defer conn.Close()
		msg := strings.Repeat("echoed by GoNet's TCP. ", 5000)
		go io.WriteString(conn, msg)
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(conn, got); err != nil || string(got) != msg {
			t.Errorf("echo of %d bytes: %d bytes back, %v", len(msg), len(got), err)
		}
	})
	t.Run("daytime", func(t *testing.T) {
		conn := dial("13")
		defer conn.Close()
		got, err := io.ReadAll(conn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := time.Parse(time.RFC1123, strings.TrimSuffix(string(got), "\r\n")); err != nil {
			t.Errorf("daytime sent %q: %v", got, err)
		}
	})
	t.Run("chargen", func(t *testing.T) {
		conn := dial("19")
		defer conn.Close()
		got := make([]byte, 3*services.ChargenLineLen)
		if _, err := io.ReadFull(conn, got); err != nil {
			t.Fatal(err)
		}
		want := string(services.ChargenLine(0)) + string(services.ChargenLine(1)) + string(services.ChargenLine(2))
		if string(got) != want {
			t.Errorf("chargen sent %q, want %q", got, want)
		}
	})
	t.Run("discard", func(t *testing.T) {
		conn := dial("9")
		defer conn.Close()
		if _, err := conn.Write(make([]byte, 100000)); err != nil {
			t.Fatal(err)
		}
	})

	// HTTP through a client whose connections are GoNet's.
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return a.DialContext(ctx, network, addr)
	}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	url := "http://" + demoGoNet.Addr().String()
	t.Run("http", func(t *testing.T) {
		resp, err := client.Get(url + "/hello.txt")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "hello over GoNet\n" {
			t.Errorf("GET /hello.txt: %s %q", resp.Status, body)
		}
		resp, err = client.Get(url + "/.gonet/status.json")
		if err != nil {
			t.Fatal(err)
		}
		var st services.Status
		err = json.NewDecoder(resp.Body).Decode(&st)
		// Read to the end: a body closed before its EOF was seen closes
		// the connection, and the ss subtest looks for it kept alive.
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if st.Counters["TCP.PassiveOpens"] == 0 {
			t.Errorf("the status page shows no passive opens: %v", st.Counters)
		}
	})

	// The kept-alive HTTP connection is in the table gonet ss prints.
	t.Run("ss", func(t *testing.T) {
		code, stdout, stderr := runArgs(t, "ss", "-tap", "b0")
		if code != exitOK {
			t.Fatalf("gonet ss: exit code %d, stderr %q", code, stderr)
		}
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`(?m)^State +Recv-Q +Send-Q +Local Address:Port +Peer Address:Port +rtt/ms +rto/ms +cwnd +ssthresh +retrans +rcvbuf +options$`),
			// The services listen on both families' wildcard.
			regexp.MustCompile(`(?m)^LISTEN +0 +0 +\[::\]:80 +\[::\]:\*`),
			regexp.MustCompile(`(?m)^LISTEN +0 +0 +\[::\]:7 +\[::\]:\*`),
			regexp.MustCompile(`(?m)^ESTAB +\d+ +\d+ +10\.99\.0\.2:80 +10\.99\.0\.1:\d+ +[\d.]+ +[\d.]+ +\d+ `),
		} {
			if !want.MatchString(stdout) {
				t.Errorf("gonet ss output does not match %s:\n%s", want, stdout)
			}
		}
		code, stdout, _ = runArgs(t, "stats", "-tap", "b0")
		if code != exitOK || !strings.Contains(stdout, "TCP.PassiveOpens ") {
			t.Errorf("gonet stats: exit code %d, output\n%s", code, stdout)
		}
	})

	tr.CloseIdleConnections()
	stop()
	if _, err := os.Lstat(defaultControlPath("b0")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the control socket outlived the services: %v", err)
	}
}

// TestUpServesAVMOnASocket runs gonet up -socket as a VM's network would:
// a GoNet stack standing in for the VM connects to the socket, as QEMU's
// -netdev stream,server=off does, and uses echo over TCP; the VM then
// reconnects and is served again. SIGTERM's stand-in, the end of the
// context, stops the daemon with exit 0, its counters and no socket file.
func TestUpServesAVMOnASocket(t *testing.T) {
	dir := shortTempDir(t)
	path := filepath.Join(dir, "vm.sock")
	up := startInProcess(t, "up", "-socket", path, "-addr", "10.0.2.2/24", "-mtu", "65520", "-serve", "echo", "-control", noControl)
	if line := up.readyLine(t); !regexp.MustCompile(`^gonet: up vm0 10\.0\.2\.2/24 ([0-9a-f]{2}:){5}[0-9a-f]{2}$`).MatchString(line) {
		t.Fatalf("ready line %q", line)
	}

	vm := func(t *testing.T) {
		ep, err := stream.Dial(path, stream.Options{MTU: 65520})
		if err != nil {
			t.Fatal(err)
		}
		s := peerStack(t, ep, stack.Config{}, "10.0.2.100/24")
		defer s.Close()
		echoed(t, s, "10.0.2.2:7", strings.Repeat("a VM's bytes through the socket. ", 10000))
	}
	t.Run("first connection", vm)
	t.Run("after reconnecting", vm)

	rest := up.stop(t)
	if !strings.Contains(rest, "TCP.PassiveOpens 2") {
		t.Errorf("the counters printed on exit do not show two connections:\n%s", rest)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket outlived the daemon: %v", err)
	}
}
