package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gonetstack/gonet/stack"
)

func TestMetricsFlagListensOnTheLoopbackUnlessTold(t *testing.T) {
	tests := []struct {
		arg, want string
	}{
		{":9464", "127.0.0.1:9464"},
		{"0.0.0.0:9464", "0.0.0.0:9464"},
		{"192.0.2.1:80", "192.0.2.1:80"},
		{"[::1]:9464", "[::1]:9464"},
		{"localhost:0", "localhost:0"},
	}
	for _, tt := range tests {
		for _, cmd := range []string{"up", "gateway", "run"} {
			var m *metricsConfig
			switch cmd {
			case "up":
				fs, c := upFlags()
				if err := fs.Parse([]string{"-metrics", tt.arg}); err != nil {
					t.Fatalf("up -metrics %s: %v", tt.arg, err)
				}
				m = &c.metrics
			default:
				fs, c := gatewayFlags(cmd)
				if err := fs.Parse([]string{"-metrics", tt.arg}); err != nil {
					t.Fatalf("%s -metrics %s: %v", cmd, tt.arg, err)
				}
				m = &c.metrics
			}
			if m.addr != tt.want {
				t.Errorf("%s -metrics %s: address %q, want %q", cmd, tt.arg, m.addr, tt.want)
			}
		}
	}
}

func TestMetricsFlagRefusesWhatIsNoHostPort(t *testing.T) {
	for _, arg := range []string{"9464", "127.0.0.1", ":http", ":65536", ":-1", ""} {
		var m metricsConfig
		if err := m.set(arg); err == nil {
			t.Errorf("-metrics %q: taken as %q, want an error", arg, m.addr)
		}
	}
	checkUsageError(t, []string{"up", "-tap", "tap0", "-addr", "10.0.0.2/24", "-metrics", "9464"}, "-metrics")
}

// scrape fetches url as Prometheus does and parses what it gets with
// Prometheus' own parser.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping %s: %s, %v", url, resp.Status, err)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("scraping %s: Prometheus' parser: %v", url, err)
	}
	return fams
}

// serveUp starts c's services on a stack and returns the URL its log gives
// after msg, on the loopback; the services stop at the end of the test.
func serveUp(t *testing.T, c *upConfig, b *stack.Stack, msg string) string {
	t.Helper()
	var stderr strings.Builder
	svc, err := startUpServices(context.Background(), slog.New(slog.NewTextHandler(&stderr, nil)), c, &host{stack: b, nic: "b0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := svc.Stop(); err != nil {
			t.Errorf("stopping the services: %v", err)
		}
	})
	_, url, ok := strings.Cut(strings.TrimSpace(stderr.String()), `msg="`+msg+`" url=`)
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") || strings.Contains(url, "\n") {
		t.Fatalf("stderr %q does not say alone where it is %s, on the loopback", stderr.String(), msg)
	}
	return url
}

func TestUpServesMetricsOnTheHost(t *testing.T) {
	_, b := memoryPair(t)
	c := &upConfig{control: noControl}
	if err := c.metrics.set(":0"); err != nil {
		t.Fatal(err)
	}
	url := serveUp(t, c, b, "serving Prometheus metrics")
	fams := scrape(t, url)
	want := b.Metrics()["TCP.CurrEstab"]
	if f := fams["gonet_tcp_curr_estab"]; f.GetType() != dto.MetricType_GAUGE || f.GetMetric()[0].GetGauge().GetValue() != float64(want.Value) {
		t.Errorf("gonet_tcp_curr_estab = %v, want the gauge at %d", f, want.Value)
	}
	if _, ok := fams["gonet_ipv4_in_receives_total"]; !ok {
		t.Error("no gonet_ipv4_in_receives_total in the scrape")
	}
}

// -pprof serves Go's profiles on a listener of its own, on the loopback
// unless told; -metrics is not needed for it.
func TestUpServesProfilesOnTheHost(t *testing.T) {
	_, b := memoryPair(t)
	c := &upConfig{control: noControl}
	if err := c.metrics.pprof.set(":0"); err != nil {
		t.Fatal(err)
	}
	// The log's one line says where (serveUp): -metrics, not given,
	// serves nothing.
	url := serveUp(t, c, b, "serving Go's profiles")
	for _, path := range []string{"", "goroutine?debug=1", "heap?debug=1", "cmdline"} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Errorf("GET %s: %s, %d bytes, %v", url+path, resp.Status, len(body), err)
		}
	}
}

func TestPprofFlagRefusesWhatIsNoHostPort(t *testing.T) {
	checkUsageError(t, []string{"up", "-tap", "tap0", "-addr", "10.0.0.2/24", "-pprof", "6060"}, "-pprof")
	fs, c := upFlags()
	if err := fs.Parse([]string{"-pprof", ":6060"}); err != nil || c.metrics.pprof.addr != "127.0.0.1:6060" {
		t.Errorf("up -pprof :6060: %q, %v; want 127.0.0.1:6060", c.metrics.pprof.addr, err)
	}
}
