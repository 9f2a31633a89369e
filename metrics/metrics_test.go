package metrics_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gonetstack/gonet/dhcp"
	"github.com/gonetstack/gonet/dns"
	"github.com/gonetstack/gonet/gateway"
	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/metrics"
	"github.com/gonetstack/gonet/stats"
)

// parse reads the text exposition format with Prometheus' own parser,
// holding names to the classic character set, as a Prometheus without
// UTF-8 names would.
func parse(t *testing.T, r io.Reader) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("Prometheus' parser: %v", err)
	}
	return fams
}

// everything is a snapshot with every counter and gauge a gateway daemon
// shows: a stack's after some traffic, and the gateway's, the DNS
// forwarder's and the DHCP server's.
func everything(t *testing.T) stats.Snapshot {
	a, b := stacktest.Pair(t, stacktest.Options{MTU: 1500})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := a.Ping(ctx, stacktest.AddrB.Addr(), 3000); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	snap := b.Metrics()
	snap.Add("Gateway", &gateway.Stats{})
	snap.Add("DNS", &dns.Stats{})
	snap.Add("DHCP", &dhcp.Stats{})
	return snap
}

func TestWriteIsReadBackByPrometheusParser(t *testing.T) {
	snap := everything(t)
	var b strings.Builder
	if err := metrics.Write(&b, snap); err != nil {
		t.Fatal(err)
	}
	fams := parse(t, strings.NewReader(b.String()))
	for dotted, x := range snap {
		name, nic := metrics.Name(dotted, x)
		f := fams[name]
		if f == nil {
			t.Errorf("%s: no family %s", dotted, name)
			continue
		}
		wantType := map[stats.Kind]dto.MetricType{stats.KindCounter: dto.MetricType_COUNTER, stats.KindGauge: dto.MetricType_GAUGE}[x.Kind]
		if f.GetType() != wantType {
			t.Errorf("%s: TYPE %v, want %v", name, f.GetType(), wantType)
		}
		if f.GetHelp() != metrics.Help(dotted) {
			t.Errorf("%s: HELP %q, want %q", name, f.GetHelp(), metrics.Help(dotted))
		}
		m := findNIC(f, nic)
		if m == nil {
			t.Errorf("%s: no metric %s{nic=%q}", dotted, name, nic)
			continue
		}
		got := m.GetCounter().GetValue()
		if wantType == dto.MetricType_GAUGE {
			got = m.GetGauge().GetValue()
		}
		if got != float64(x.Value) {
			t.Errorf("%s = %v, want %d as %s has it", name, got, x.Value, dotted)
		}
	}
	var n int
	for _, f := range fams {
		n += len(f.GetMetric())
	}
	if n != len(snap) {
		t.Errorf("%d metrics parsed, want one for each of the %d values", n, len(snap))
	}
	// The values the example in the issue and the README name.
	for _, want := range []string{
		"# TYPE gonet_tcp_retrans_segs_total counter\n",
		"# TYPE gonet_memory_used_bytes gauge\n",
		"\ngonet_nic_rx_frames_total{nic=\"eth0\"} ",
		"\ngonet_gateway_relay_to_host_bytes_total 0\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
}

// findNIC returns f's metric labelled with nic, or its unlabelled one for
// nic "".
func findNIC(f *dto.MetricFamily, nic string) *dto.Metric {
	for _, m := range f.GetMetric() {
		var got string
		for _, l := range m.GetLabel() {
			if l.GetName() == metrics.NICLabel {
				got = l.GetValue()
			}
		}
		if got == nic {
			return m
		}
	}
	return nil
}

func TestFamiliesGroupNICsUnderOneName(t *testing.T) {
	snap := stats.Snapshot{
		"NIC.tap1.RxFrames": {Kind: stats.KindCounter, Value: 2},
		"NIC.tap0.RxFrames": {Kind: stats.KindCounter, Value: 5},
	}
	fams, err := metrics.Families(snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) != 1 || len(fams[0].GetMetric()) != 2 {
		t.Fatalf("families = %v, want one of two metrics", fams)
	}
	for i, want := range []string{"tap0", "tap1"} {
		if got := fams[0].GetMetric()[i].GetLabel()[0].GetValue(); got != want {
			t.Errorf("metric %d has nic=%q, want %q (sorted)", i, got, want)
		}
	}
}

func TestFamiliesRefuseWhatTheFormatCannotShow(t *testing.T) {
	tests := []struct {
		behaviour string
		snap      stats.Snapshot
		want      string
	}{
		{"two names, one metric", stats.Snapshot{
			"X.RxBytes":  {Kind: stats.KindCounter},
			"X.Rx.Bytes": {Kind: stats.KindCounter},
		}, "both become gonet_x_rx_bytes_total"},
		{"one name, two kinds", stats.Snapshot{
			"NIC.a.Level":      {Kind: stats.KindCounter},
			"NIC.b.LevelTotal": {Kind: stats.KindGauge},
		}, "gonet_nic_level_total is a COUNTER"},
	}
	for _, tt := range tests {
		t.Run(tt.behaviour, func(t *testing.T) {
			_, err := metrics.Families(tt.snap)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Families = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestHandlerServesTheTextFormat(t *testing.T) {
	snap := stats.Snapshot{"TCP.RetransSegs": {Kind: stats.KindCounter, Value: 7}}
	srv := httptest.NewServer(metrics.Handler(func() stats.Snapshot { return snap }))
	defer srv.Close()
	tests := []struct {
		method string
		status int
	}{
		{http.MethodGet, http.StatusOK},
		{http.MethodHead, http.StatusOK},
		{http.MethodPost, http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, srv.URL+"/metrics", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("%s: status %d, want %d", tt.method, resp.StatusCode, tt.status)
		}
		if tt.method != http.MethodGet || resp.StatusCode != http.StatusOK {
			continue
		}
		if ct := resp.Header.Get("Content-Type"); expfmt.ResponseFormat(resp.Header).FormatType() != expfmt.TypeTextPlain {
			t.Errorf("Content-Type %q is not the text format to Prometheus", ct)
		}
		fams := parse(t, strings.NewReader(string(body)))
		if v := fams["gonet_tcp_retrans_segs_total"].GetMetric()[0].GetCounter().GetValue(); v != 7 {
			t.Errorf("gonet_tcp_retrans_segs_total = %v, want 7", v)
		}
	}
}
