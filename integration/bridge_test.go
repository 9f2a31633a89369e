package integration

import (
	"bufio"
	"bytes"
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
)

// daemon is a gonet process the test started, with its stdout read line
// by line.
type daemon struct {
	cmd    *exec.Cmd
	lines  *bufio.Scanner
	stderr *bytes.Buffer
}

// startDaemon starts bin with args in ns and waits for its ready line,
// which must start with ready.
func startDaemon(t *testing.T, ctx context.Context, ns *netns.NS, ready, bin string, args ...string) *daemon {
	t.Helper()
	d := &daemon{cmd: ns.Command(ctx, bin, args...), stderr: &bytes.Buffer{}}
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.cmd.Process.Kill()
		d.cmd.Wait()
		if t.Failed() {
			t.Logf("gonet %s's log:\n%s", args[0], d.stderr.String())
		}
	})
	d.lines = bufio.NewScanner(stdout)
	if !d.lines.Scan() {
		t.Fatalf("gonet %s printed nothing; stderr: %s", args[0], d.stderr.String())
	}
	if line := d.lines.Text(); !strings.HasPrefix(line, ready) {
		t.Fatalf("gonet %s: ready line %q, want %q...", args[0], line, ready)
	}
	return d
}

// The kernel, on a TAP port of gonet bridge, pings and fetches from a
// GoNet daemon on a socket port; when that daemon is killed and another
// takes its place, the bridge connects to the new one and the kernel
// reaches it, the bridge having stayed up throughout.
func TestBridgeJoinsTheKernelOnATAPToGoNetOnASocket(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	netnstest.RequireTool(t, "curl")
	bin := buildGonet(t)
	ns := netnstest.New(t)
	dev := netns.DeviceName()
	// A short directory: a UNIX socket's path holds at most 107 bytes.
	dir, err := os.MkdirTemp("", "gonet-bridge")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "vm.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	// A restarted daemon keeps its MAC (-mac), so the kernel's neighbour
	// entry stays good.
	upArgs := []string{"up", "-socket", sock, "-addr", gonetAddr.String(), "-mac", "02:00:00:99:00:02",
		"-serve", "echo,http", "-control", "none"}
	up := startDaemon(t, ctx, ns, "gonet: up vm0 "+gonetAddr.String(), bin, upArgs...)
	const metricsAddr = "127.0.0.1:19466" // in the test's namespace
	br := startDaemon(t, ctx, ns, "gonet: bridge up "+dev+" "+sock, bin, "bridge", "-tap", dev, "-connect", sock, "-metrics", metricsAddr)
	if err := ns.ConfigureLink(dev, kernelAddr, 1500); err != nil {
		t.Fatal(err)
	}
	h := &host{ns: ns, dev: dev}
	reach := func(when string) {
		t.Helper()
		// The bridge connects to a new daemon within a second; until
		// then the kernel's pings go nowhere.
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, err := ns.Run(ctx, "ping", "-c", "1", "-W", "1", gonetAddr.Addr().String())
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the kernel cannot ping GoNet through the bridge: %v\nbridge: %s", when, err, br.stderr.String())
			}
		}
		h.run(t, 20*time.Second, "ping", "-c", "3", "-i", "0.2", "-W", "2", "-s", "1400", gonetAddr.Addr().String())
		page := h.run(t, 20*time.Second, "curl", "-sSf", "--max-time", "10", "http://"+gonetAddr.Addr().String()+"/")
		if !strings.Contains(page, "TCP.") {
			t.Errorf("%s: GoNet's status page through the bridge lacks its counters:\n%s", when, page)
		}
	}
	reach("first daemon")

	if err := up.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	up.cmd.Wait()
	// SIGKILL leaves the socket's file, which gonet up will not replace.
	os.Remove(sock)
	startDaemon(t, ctx, ns, "gonet: up vm0 "+gonetAddr.String(), bin, upArgs...)
	reach("second daemon")

	// Prometheus sees the bridge's counters, each port's under its
	// name.
	scrape := h.run(t, 10*time.Second, "curl", "-sSf", "http://"+metricsAddr+"/metrics")
	for _, want := range []string{"gonet_bridge_learnt_total ",
		`gonet_port_rx_frames_total{nic="` + dev + `"} `, `gonet_port_tx_frames_total{nic="connect0"} `} {
		if !strings.Contains(scrape, want) {
			t.Errorf("the scrape lacks %q:\n%s", want, scrape)
		}
	}

	if err := br.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var counters strings.Builder
	for br.lines.Scan() {
		counters.WriteString(br.lines.Text() + "\n")
	}
	if err := br.cmd.Wait(); err != nil {
		t.Fatalf("gonet bridge after SIGTERM: %v; stderr: %s", err, br.stderr.String())
	}
	// The daemon killed is a port lost, and so may be a connection its
	// listener took as it died.
	if !regexp.MustCompile(`(?m)^Bridge.PortsLost [1-9]`).MatchString(counters.String()) {
		t.Errorf("counters show no port lost:\n%s", counters.String())
	}
	for _, want := range []string{"Port." + dev + ".RxFrames ", "Port.connect0.TxFrames "} {
		if !strings.Contains(counters.String(), want) {
			t.Errorf("counters lack %q:\n%s\nlog:\n%s", want, counters.String(), br.stderr.String())
		}
	}
	if !strings.Contains(br.stderr.String(), "port failed; removed") {
		t.Errorf("the bridge's log does not tell of the daemon lost:\n%s", br.stderr.String())
	}
}

// The kernel on a TAP port pings and fetches from two GoNet daemons
// attached to gonet bridge over shared-memory rings; when one is killed,
// the bridge drops its port and the kernel still reaches the other.
func TestBridgeJoinsTheKernelToGoNetsOnRings(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	netnstest.RequireTool(t, "curl")
	bin := buildGonet(t)
	ns := netnstest.New(t)
	dev := netns.DeviceName()
	dir, err := os.MkdirTemp("", "gonet-bridge")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ring := filepath.Join(dir, "ring.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	br := startDaemon(t, ctx, ns, "gonet: bridge up "+dev+" "+ring, bin, "bridge", "-tap", dev, "-ring-listen", ring)
	second := netip.MustParsePrefix("10.99.0.3/24")
	up1 := startDaemon(t, ctx, ns, "gonet: up ring0 "+gonetAddr.String(), bin,
		"up", "-ring", ring, "-addr", gonetAddr.String(), "-serve", "http", "-control", "none")
	startDaemon(t, ctx, ns, "gonet: up ring0 "+second.String(), bin,
		"up", "-ring", ring, "-addr", second.String(), "-serve", "http", "-control", "none")
	if err := ns.ConfigureLink(dev, kernelAddr, 1500); err != nil {
		t.Fatal(err)
	}
	h := &host{ns: ns, dev: dev}
	for _, a := range []netip.Prefix{gonetAddr, second} {
		h.run(t, 20*time.Second, "ping", "-c", "3", "-i", "0.2", "-W", "2", "-s", "1400", a.Addr().String())
		page := h.run(t, 20*time.Second, "curl", "-sSf", "--max-time", "10", "http://"+a.Addr().String()+"/")
		if !strings.Contains(page, "TCP.") {
			t.Errorf("%v: GoNet's status page through the bridge lacks its counters:\n%s", a, page)
		}
	}
	if err := up1.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	up1.cmd.Wait()
	h.run(t, 20*time.Second, "ping", "-c", "3", "-i", "0.2", "-W", "2", second.Addr().String())

	if err := br.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var counters strings.Builder
	for br.lines.Scan() {
		counters.WriteString(br.lines.Text() + "\n")
	}
	if err := br.cmd.Wait(); err != nil {
		t.Fatalf("gonet bridge after SIGTERM: %v; stderr: %s", err, br.stderr.String())
	}
	for _, want := range []string{"Bridge.PortsLost 1\n", "Port.ring1.RxFrames ", "Port.ring2.RxFrames "} {
		if !strings.Contains(counters.String(), want) {
			t.Errorf("counters lack %q:\n%s\nlog:\n%s", want, counters.String(), br.stderr.String())
		}
	}
}
