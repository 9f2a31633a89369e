//go:build linux

package stream_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/link/stream"
	"github.com/gonetstack/gonet/stack"
)

// passt is a third implementation of the framing: GoNet takes a VM's place
// and dials passt's socket, as QEMU would. passt runs in a test namespace,
// whose network is its "host" side: a veth pair with 10.88.0.1, a default
// route through 10.88.0.254 that leads nowhere, and servers on its
// loopback, which passt maps to the gateway's address. DNS stays out of it
// (--no-dhcp-dns): nothing is sent to the resolvers of /etc/resolv.conf.
var (
	passtHostAddr  = netip.MustParsePrefix("10.88.0.1/24")
	passtGateway   = netip.MustParseAddr("10.88.0.254")
	passtGuestAddr = netip.MustParsePrefix("10.88.0.5/24")
)

func TestPasstAsThePeer(t *testing.T) {
	ns := netnstest.New(t)
	netnstest.RequireTool(t, "passt")
	netnstest.RequireTool(t, "socat")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, args := range [][]string{
		{"link", "add", "v0", "type", "veth", "peer", "name", "v1"},
		{"addr", "add", passtHostAddr.String(), "dev", "v0"},
		{"link", "set", "v0", "up"},
		{"link", "set", "v1", "up"},
		{"route", "add", "default", "via", passtGateway.String()},
	} {
		if _, err := ns.IP(ctx, args...); err != nil {
			t.Fatal(err)
		}
	}
	// passt relays pings through ping sockets, which the namespace's
	// ping_group_range must allow.
	if out, err := ns.Run(ctx, "sysctl", "-qw", "net.ipv4.ping_group_range=0 2147483647"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}

	// passt drops root for nobody before it binds its socket: a directory
	// of the test's own that nobody may write to.
	dir, err := os.MkdirTemp("", "gonet-passt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "passt.sock")

	data := make([]byte, 4<<20)
	rand.Read(data)
	want := sha256.Sum256(data)
	src, dst := filepath.Join(dir, "download"), filepath.Join(dir, "upload")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	download := ns.Command(ctx, "socat", "-u", "OPEN:"+src, "TCP-LISTEN:5001,bind=127.0.0.1,reuseaddr")
	upload := ns.Command(ctx, "socat", "-u", "TCP-LISTEN:5002,bind=127.0.0.1,reuseaddr", "CREATE:"+dst)
	passt := ns.Command(ctx, "passt", "--foreground", "--one-off", "--ipv4-only", "--quiet",
		"--socket", path, "--interface", "v0", "--no-dhcp-dns", "--no-dhcp-search",
		"--address", passtGuestAddr.Addr().String(), "--netmask", "24", "--gateway", passtGateway.String())
	var out [3]syncBuffer
	for i, cmd := range []*exec.Cmd{download, upload, passt} {
		cmd.Stdout, cmd.Stderr = &out[i], &out[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	// The socket file appears when passt binds, a moment before it
	// listens: dial until a connect is taken.
	var ep *stream.Endpoint
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if ep, err = stream.Dial(path, stream.Options{MTU: 65520}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("passt took no connection at %s in 10s: %v: %s", path, err, out[2].String())
		}
	}
	s := stack.New(stack.Config{})
	t.Cleanup(func() { stacktest.Closed(t, s) })
	if err := s.AddNIC("eth0", ep); err != nil {
		ep.Close()
		t.Fatal(err)
	}
	if err := s.AddAddress("eth0", passtGuestAddr); err != nil {
		t.Fatal(err)
	}
	if err := s.SetDefaultGateway(passtGateway, "eth0"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("link: %v", linkCounters(ep))
			t.Logf("passt: %s", out[2].String())
		}
	}()

	if _, err := s.Ping(ctx, passtHostAddr.Addr(), 1000); err != nil {
		t.Errorf("ping of the namespace's address through passt: %v", err)
	}

	c, err := s.DialTCP(ctx, netip.AddrPortFrom(passtGateway, 5001))
	if err != nil {
		t.Fatalf("connecting through passt to socat on the namespace's loopback: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	h := sha256.New()
	n, err := io.Copy(h, c)
	c.Close()
	if err != nil || n != int64(len(data)) || [32]byte(h.Sum(nil)) != want {
		t.Errorf("download through passt: %d bytes, %v, SHA-256 equal %v", n, err, [32]byte(h.Sum(nil)) == want)
	}

	c, err = s.DialTCP(ctx, netip.AddrPortFrom(passtGateway, 5002))
	if err != nil {
		t.Fatalf("connecting through passt for the upload: %v", err)
	}
	if _, err := c.Write(data); err != nil {
		t.Fatalf("upload through passt: %v", err)
	}
	c.Close()
	if err := upload.Wait(); err != nil {
		t.Fatalf("socat receiving the upload: %v: %s", err, out[1].String())
	}
	got, err := os.ReadFile(dst)
	if err != nil || sha256.Sum256(got) != want {
		t.Errorf("socat received %d bytes through passt, want %d with the same SHA-256 (%v)", len(got), len(data), err)
	}
	if st := ep.Stats(); st.FramingErrors.Load() != 0 || st.RxErrors.Load() != 0 {
		t.Errorf("link counters: %v", linkCounters(ep))
	}
}

// syncBuffer collects a command's output while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
