package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/stack"
)

// buildGonet compiles the daemon once per test binary.
func buildGonet(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gonet")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/gonetstack/gonet/cmd/gonet").CombinedOutput()
	if err != nil {
		t.Fatalf("go build gonet: %v\n%s", err, out)
	}
	return bin
}

// TestDaemonServesUntilSignalled runs `gonet up` in a namespace as a user
// would, checks its ready line, talks to its services with the kernel's
// tools, stops it with SIGTERM and reads its counters.
func TestDaemonServesUntilSignalled(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	netnstest.RequireTool(t, "socat")
	netnstest.RequireTool(t, "curl")
	bin := buildGonet(t)
	ns := netnstest.New(t)
	dev := netns.DeviceName()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const metricsAddr = "127.0.0.1:19465" // in the test's namespace
	cmd := ns.Command(ctx, bin, "up", "-tap", dev, "-addr", gonetAddr.String(), "-serve", "echo,daytime",
		"-control", filepath.Join(t.TempDir(), "up.sock"), "-metrics", metricsAddr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		t.Fatalf("gonet up printed nothing; stderr: %s", stderr.String())
	}
	ready := lines.Text()
	if f := strings.Fields(ready); len(f) != 5 || f[0] != "gonet:" || f[1] != "up" || f[2] != dev || f[3] != gonetAddr.String() {
		t.Fatalf("ready line %q, want \"gonet: up %s %s <mac>\"", ready, dev, gonetAddr)
	}
	if err := ns.ConfigureLink(dev, kernelAddr, 1500); err != nil {
		t.Fatal(err)
	}
	h := &host{ns: ns, dev: dev}
	h.run(t, 10*time.Second, "ping", "-c", "2", "-i", "0.2", "-W", "2", "-s", "8000", gonetAddr.Addr().String())
	day := h.run(t, 10*time.Second, "sh", "-c", "echo | socat -t 1 -T 3 STDIO UDP:"+gonetUDPAddr(13))
	if _, err := time.Parse(time.RFC1123, strings.TrimSpace(day)); err != nil {
		t.Errorf("daytime answered %q: %v", day, err)
	}
	// Prometheus scrapes -metrics: GoNet's counters, and the kernel's of
	// the TAP device (Tx: the frames it handed GoNet).
	body := h.run(t, 10*time.Second, "curl", "-sSf", "http://"+metricsAddr+"/metrics")
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("Prometheus' parser: %v", err)
	}
	value := func(name string) (float64, string) {
		f := fams[name]
		if f.GetType() != dto.MetricType_COUNTER || len(f.GetMetric()) != 1 {
			t.Errorf("scrape: %s is %v, want one counter", name, f)
			return 0, ""
		}
		m := f.GetMetric()[0]
		var nic string
		for _, l := range m.GetLabel() {
			nic = l.GetValue()
		}
		return m.GetCounter().GetValue(), nic
	}
	// The collector as the daemon sets it (stack.TuneGC), unless this
	// test's environment sets it.
	if _, set := os.LookupEnv("GOGC"); !set {
		if v := fams["go_gc_gogc_percent"].GetMetric()[0].GetGauge().GetValue(); v != -1 {
			t.Errorf("scrape: go_gc_gogc_percent %v, want -1 (GOGC off)", v)
		}
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		if v := fams["go_gc_gomemlimit_bytes"].GetMetric()[0].GetGauge().GetValue(); v != stack.DefaultMemoryLimit+stack.GCHeadroom {
			t.Errorf("scrape: go_gc_gomemlimit_bytes %v, want the budget plus headroom, %d", v, stack.DefaultMemoryLimit+stack.GCHeadroom)
		}
	}
	if v, _ := value("gonet_icmp_out_echo_reps_total"); v != 2 {
		t.Errorf("scrape: gonet_icmp_out_echo_reps_total %v, want 2", v)
	}
	if v, nic := value("gonet_tap_tx_packets_total"); v < 2 || nic != dev {
		t.Errorf("scrape: gonet_tap_tx_packets_total{nic=%q} %v, want {nic=%q} at least 2", nic, v, dev)
	}
	if _, nic := value("gonet_tap_tx_dropped_total"); nic != dev {
		t.Errorf("scrape: gonet_tap_tx_dropped_total{nic=%q}, want nic %q", nic, dev)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var counters strings.Builder
	for lines.Scan() {
		counters.WriteString(lines.Text() + "\n")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("gonet up after SIGTERM: %v; stderr: %s", err, stderr.String())
	}
	for _, want := range []string{"ICMP.OutEchoReps 2", "IPv4.ReasmOKs 2", "UDP.InDatagrams 1"} {
		if !strings.Contains(counters.String(), want) {
			t.Errorf("counters lack %q:\n%s", want, counters.String())
		}
	}
}

func TestDaemonRejectsBadFlagsWithExit2(t *testing.T) {
	bin := buildGonet(t)
	for _, args := range [][]string{
		{"up", "-tap", "x", "-addr", "10.1.2.3"}, // no prefix
		{"up", "-tap", "x", "-addr", "10.1.2.3/24", "-mtu", "20"},
		{"up", "-tap", "x", "-addr", "10.1.2.3/24", "-serve", "gopher"},
		{"up", "-nosuchflag"},
	} {
		cmd := exec.Command(bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("gonet %v: %v, want exit status 2", args, err)
		}
		if n := strings.Count(strings.TrimRight(stderr.String(), "\n"), "\n"); n != 0 {
			t.Errorf("gonet %v: %d-line error, want one line:\n%s", args, n+1, stderr.String())
		}
	}
}
