package services

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gonetstack/gonet/metrics"
)

// secret is what lies outside the web root: no request may bring it back.
const secret = "the secret outside the web root"

// webRoot makes a web root and, next to it, a directory that must stay
// out of reach:
//
//	outside/secret.txt
//	root/hello.txt, root/big.bin, root/sub/index.html
//	root/inside -> hello.txt           (a link that stays in the root)
//	root/escape -> ../outside/secret.txt
//	root/escapedir -> ../outside
//	root/absolute -> /abs/path/to/outside/secret.txt
func webRoot(t *testing.T) (root string, big []byte) {
	t.Helper()
	dir := t.TempDir()
	root = filepath.Join(dir, "root")
	outside := filepath.Join(dir, "outside")
	big = pattern(3 << 20)
	for _, f := range []struct {
		path, body string
	}{
		{filepath.Join(outside, "secret.txt"), secret},
		{filepath.Join(root, "hello.txt"), "hello, world\n"},
		{filepath.Join(root, "big.bin"), string(big)},
		{filepath.Join(root, "sub", "index.html"), "<p>sub</p>\n"},
	} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.path, []byte(f.body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"inside":    "hello.txt",
		"escape":    "../outside/secret.txt",
		"escapedir": "../outside",
		"absolute":  filepath.Join(outside, "secret.txt"),
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	return root, big
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// httpServer is ServeHTTP running on a loopback listener for a test.
type httpServer struct {
	ln   *countingListener
	url  string
	addr string
}

// startHTTP serves h on a fresh 127.0.0.1 listener; the server is stopped,
// and its return checked, when the test ends.
func startHTTP(t *testing.T, h http.Handler) *httpServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &httpServer{ln: &countingListener{Listener: ln}, addr: ln.Addr().String(), url: "http://" + ln.Addr().String()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeHTTP(ctx, s.ln, h) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeHTTP returned %v after its context was cancelled, want nil", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("ServeHTTP did not return within 30s of its context being cancelled")
		}
	})
	return s
}

// newClient returns an HTTP client of its own, whose idle connections are
// closed when the test ends.
func newClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 100}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// get does a request and returns the response with its body read.
func do(t *testing.T, c *http.Client, method, url string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp, body
}

func TestHTTPServesFilesAsNetHTTPDoes(t *testing.T) {
	root, big := webRoot(t)
	srv := startHTTP(t, HTTPHandler(root, fakeStatus{counters: map[string]int64{"TCP.ActiveOpens": 1}}))
	c := newClient(t)
	tests := []struct {
		name     string
		method   string
		path     string
		header   map[string]string
		status   int
		body     string            // exact; "" with bodyHas empty: not checked
		bodyHas  string            // substring
		respHead map[string]string // headers the response must carry
	}{
		{"a file", "GET", "/hello.txt", nil, 200, "hello, world\n", "", map[string]string{"Content-Length": "13"}},
		{"HEAD: the headers without the body", "HEAD", "/hello.txt", nil, 200, "", "", map[string]string{"Content-Length": "13", "Accept-Ranges": "bytes"}},
		{"a range", "GET", "/hello.txt", map[string]string{"Range": "bytes=7-11"}, 206, "world", "",
			map[string]string{"Content-Range": "bytes 7-11/13"}},
		{"a suffix range", "GET", "/hello.txt", map[string]string{"Range": "bytes=-6"}, 206, "world\n", "", nil},
		{"a range in a large file", "GET", "/big.bin", map[string]string{"Range": "bytes=1000000-1000009"}, 206, string(big[1000000:1000010]), "",
			map[string]string{"Content-Range": fmt.Sprintf("bytes 1000000-1000009/%d", len(big))}},
		{"an unsatisfiable range", "GET", "/hello.txt", map[string]string{"Range": "bytes=100-200"}, 416, "", "",
			map[string]string{"Content-Range": "bytes */13"}},
		{"a missing file", "GET", "/nope.txt", nil, 404, "", "404", nil},
		{"a directory's index.html", "GET", "/sub/", nil, 200, "<p>sub</p>\n", "", nil},
		{"a directory listing", "GET", "/", nil, 200, "", `<a href="hello.txt">hello.txt</a>`, nil},
		{"a file used as a directory", "GET", "/hello.txt/x", nil, 404, "", "", nil},
		{"a link that stays in the root", "GET", "/inside", nil, 200, "hello, world\n", "", nil},
		{"a link out of the root", "GET", "/escape", nil, 404, "", "", nil},
		{"a link to a directory out of the root", "GET", "/escapedir/secret.txt", nil, 404, "", "", nil},
		{"an absolute link", "GET", "/absolute", nil, 404, "", "", nil},
		{"a method other than GET and HEAD", "POST", "/hello.txt", nil, 405, "", "", map[string]string{"Allow": "GET, HEAD"}},
		{"the status under /.gonet/ whatever the root", "GET", "/.gonet/status.json", nil, 200, "", `"TCP.ActiveOpens": 1`,
			map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"}},
		{"the ss table under /.gonet/", "GET", "/.gonet/ss", nil, 200, "", "Local Address:Port", nil},
		{"nothing else under /.gonet/", "GET", "/.gonet/hello.txt", nil, 404, "", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, c, tt.method, srv.url+tt.path, tt.header)
			if resp.StatusCode != tt.status {
				t.Errorf("%s %s: status %d, want %d; body %.200q", tt.method, tt.path, resp.StatusCode, tt.status, body)
			}
			if tt.body != "" && string(body) != tt.body {
				t.Errorf("%s %s: body %.200q, want %.200q", tt.method, tt.path, body, tt.body)
			}
			if tt.method == "HEAD" && len(body) != 0 {
				t.Errorf("HEAD %s: %d bytes of body", tt.path, len(body))
			}
			if !strings.Contains(string(body), tt.bodyHas) {
				t.Errorf("%s %s: body %.300q lacks %q", tt.method, tt.path, body, tt.bodyHas)
			}
			if strings.Contains(string(body), secret) {
				t.Errorf("%s %s: the answer carries the secret from outside the root", tt.method, tt.path)
			}
			for k, v := range tt.respHead {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s %s: header %s %q, want %q", tt.method, tt.path, k, got, v)
				}
			}
		})
	}
}

// rawRequest sends a request line exactly as given, bypassing the URL
// cleaning Go's client does, and returns the response and its body.
func rawRequest(t *testing.T, addr, target string) (*http.Response, []byte) {
	t.Helper()
	c := dialTCP(t, addr)
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n", target); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

func TestHTTPNeverLeavesTheRoot(t *testing.T) {
	root, _ := webRoot(t)
	srv := startHTTP(t, HTTPHandler(root, nil))
	for _, target := range []string{
		"/../outside/secret.txt",
		"/../../../../../../etc/passwd",
		"/sub/../../outside/secret.txt",
		"/%2e%2e/outside/secret.txt",
		"/%2E%2E/outside/secret.txt",
		"/..%2foutside%2fsecret.txt",
		"/%2e%2e%2foutside%2fsecret.txt",
		"/sub/%2e%2e/%2e%2e/outside/secret.txt",
		"/..%5coutside%5csecret.txt",
		"/..\\outside\\secret.txt",
		"//../outside/secret.txt",
		"/./../outside/secret.txt",
		"/escape",
		"/escape/",
		"/escapedir/secret.txt",
		"/escapedir/",
		"/absolute",
		"/inside/../escape",
		"../outside/secret.txt",
		"http://test/../outside/secret.txt",
	} {
		t.Run(target, func(t *testing.T) {
			resp, body := rawRequest(t, srv.addr, target)
			if strings.Contains(string(body), secret) {
				t.Fatalf("GET %s: status %d and the secret from outside the root", target, resp.StatusCode)
			}
			if resp.StatusCode == http.StatusOK {
				t.Errorf("GET %s: status 200 (%.100q); want an error or a redirect", target, body)
			}
			// A redirect must lead somewhere inside the root too.
			if loc := resp.Header.Get("Location"); loc != "" {
				resp, body := rawRequest(t, srv.addr, loc)
				if strings.Contains(string(body), secret) {
					t.Fatalf("GET %s, redirected to %s: status %d and the secret", target, loc, resp.StatusCode)
				}
			}
		})
	}
}

func TestHTTPKeepsConnectionsAlive(t *testing.T) {
	root, _ := webRoot(t)
	srv := startHTTP(t, HTTPHandler(root, nil))
	c := newClient(t)
	for i := range 20 {
		path := "/hello.txt"
		if i%2 == 1 {
			path = "/.gonet/status.json"
		}
		if resp, _ := do(t, c, "GET", srv.url+path, nil); resp.StatusCode != 200 {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
	}
	if n := srv.ln.accepted.Load(); n != 1 {
		t.Errorf("20 requests in a row took %d connections, want 1", n)
	}
}

func TestHTTPServes50ClientsAtOnce(t *testing.T) {
	root, big := webRoot(t)
	srv := startHTTP(t, HTTPHandler(root, nil))
	const clients = 50
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Go(func() {
			c := newClient(t)
			// Each asks for a different slice of the large file.
			from := i * 50000
			req, _ := http.NewRequest("GET", srv.url+"/big.bin", nil)
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-", from))
			resp, err := c.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				errs <- err
				return
			}
			if resp.StatusCode != 206 || !bytes.Equal(body, big[from:]) {
				errs <- fmt.Errorf("client %d: status %d, %d bytes, want 206 and %d bytes", i, resp.StatusCode, len(body), len(big)-from)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := srv.ln.accepted.Load(); n != clients {
		t.Errorf("%d clients made %d connections", clients, n)
	}
}

func TestHTTPSlowClientsDelayNoOther(t *testing.T) {
	root, _ := webRoot(t)
	srv := startHTTP(t, HTTPHandler(root, nil))

	// One client downloads the large file at a byte a second, so that
	// its handler sits blocked in Write; another sends half a request
	// header and stops.
	slow := dialTCP(t, srv.addr)
	fmt.Fprintf(slow, "GET /big.bin HTTP/1.1\r\nHost: test\r\n\r\n")
	stopSlow := make(chan struct{})
	var slowDone sync.WaitGroup
	slowDone.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		b := make([]byte, 1)
		for {
			if _, err := slow.Read(b); err != nil {
				return
			}
			select {
			case <-tick.C:
			case <-stopSlow:
				return
			}
		}
	})
	defer func() {
		close(stopSlow)
		slow.Close()
		slowDone.Wait()
	}()
	half := dialTCP(t, srv.addr)
	fmt.Fprintf(half, "GET /hello.txt HTTP/1.1\r\nHo")

	c := newClient(t)
	start := time.Now()
	for range 10 {
		if resp, body := do(t, c, "GET", srv.url+"/hello.txt", nil); resp.StatusCode != 200 || string(body) != "hello, world\n" {
			t.Fatalf("GET /hello.txt next to slow clients: %s %q", resp.Status, body)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("10 requests next to slow clients took %v", d)
	}
}

func TestHTTPShutdownEndsStuckClientsAfterTheGracePeriod(t *testing.T) {
	old := httpShutdownGrace
	httpShutdownGrace = 200 * time.Millisecond
	defer func() { httpShutdownGrace = old }()
	root, _ := webRoot(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeHTTP(ctx, ln, HTTPHandler(root, nil)) }()
	// A client that never reads its download keeps its request in
	// flight for ever.
	stuck := dialTCP(t, ln.Addr().String())
	fmt.Fprintf(stuck, "GET /big.bin HTTP/1.1\r\nHost: test\r\n\r\n")
	if _, err := stuck.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeHTTP returned %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeHTTP did not return within 10s with a stuck client")
	}
}

func TestHTTPStatusPagesWithoutARoot(t *testing.T) {
	src := fakeStatus{
		counters: map[string]int64{"TCP.ActiveOpens": 4, "UDP.InDatagrams": 9, "IPv4.InDiscards": 0},
		rows:     []ConnRow{estabRow, listenRow},
	}
	srv := startHTTP(t, HTTPHandler("", src))
	c := newClient(t)
	rowsText := func() string {
		var b strings.Builder
		WriteConnTable(&b, src.rows)
		return b.String()
	}()
	tests := []struct {
		name   string
		path   string
		accept string
		ctype  string
		has    []string
		hasnt  []string
	}{
		{"a browser gets HTML", "/", "text/html,application/xhtml+xml", "text/html; charset=utf-8",
			[]string{"<h1>GoNet status</h1>", "<td>TCP.ActiveOpens</td><td class=\"n\">4</td>",
				"<td>ESTAB</td><td>0</td><td>1448</td><td>10.0.0.2:80</td><td>10.0.0.1:51234</td><td>0.045</td><td>204</td><td>14480</td>",
				"<td>LISTEN</td>", `href="/.gonet/status.json"`},
			[]string{"IPv4.InDiscards"}},
		{"curl gets text", "/", "*/*", "text/plain; charset=utf-8",
			[]string{rowsText, "TCP.ActiveOpens 4\nUDP.InDatagrams 9\n"}, []string{"<"}},
		{"text by name", "/status.txt", "", "text/plain; charset=utf-8", []string{rowsText}, nil},
		{"the ss table", "/ss", "", "text/plain; charset=utf-8", []string{rowsText}, []string{"TCP.ActiveOpens"}},
		{"the same under /.gonet/", "/.gonet/", "text/html", "text/html; charset=utf-8", []string{"<td>LISTEN</td>"}, nil},
		{"the ss table under /.gonet/", "/.gonet/ss", "", "text/plain; charset=utf-8", []string{rowsText}, nil},
		{"Prometheus metrics, zeros too", "/metrics", "", metrics.ContentType,
			[]string{"# TYPE gonet_tcp_active_opens_total counter\ngonet_tcp_active_opens_total 4\n", "gonet_ipv4_in_discards_total 0\n"}, []string{"ESTAB"}},
		{"the metrics under /.gonet/", "/.gonet/metrics", "", metrics.ContentType, []string{"gonet_udp_in_datagrams_total 9\n"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, c, "GET", srv.url+tt.path, map[string]string{"Accept": tt.accept})
			if resp.StatusCode != 200 {
				t.Fatalf("GET %s: %s", tt.path, resp.Status)
			}
			if got := resp.Header.Get("Content-Type"); got != tt.ctype {
				t.Errorf("GET %s: Content-Type %q, want %q", tt.path, got, tt.ctype)
			}
			for _, s := range tt.has {
				if !strings.Contains(string(body), s) {
					t.Errorf("GET %s: body lacks %q:\n%s", tt.path, s, body)
				}
			}
			for _, s := range tt.hasnt {
				if strings.Contains(string(body), s) {
					t.Errorf("GET %s: body has %q:\n%s", tt.path, s, body)
				}
			}
		})
	}

	for _, path := range []string{"/status.json", "/.gonet/status.json"} {
		resp, body := do(t, c, "GET", srv.url+path, nil)
		var got Status
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, body)
		}
		if want := Snapshot(src); !reflect.DeepEqual(got, want) {
			t.Errorf("GET %s: %+v, want %+v", path, got, want)
		}
		if resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s may be cached", path)
		}
	}
	for _, path := range []string{"/hello.txt", "/.gonet/nope", "/status.json/x"} {
		if resp, _ := do(t, c, "GET", srv.url+path, nil); resp.StatusCode != 404 {
			t.Errorf("GET %s: %s, want 404", path, resp.Status)
		}
	}
	if resp, _ := do(t, c, "DELETE", srv.url+"/status.json", nil); resp.StatusCode != 405 {
		t.Errorf("DELETE /status.json: %s, want 405", resp.Status)
	}
	if resp, body := do(t, c, "HEAD", srv.url+"/", nil); resp.StatusCode != 200 || len(body) != 0 {
		t.Errorf("HEAD /: %s with %d bytes of body, want 200 and none", resp.Status, len(body))
	}
}

func TestHTTPWithAMissingRootSaysSo(t *testing.T) {
	srv := startHTTP(t, HTTPHandler(filepath.Join(t.TempDir(), "gone"), nil))
	c := newClient(t)
	if resp, _ := do(t, c, "GET", srv.url+"/x", nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET with the root gone: %s, want 503", resp.Status)
	}
	if resp, _ := do(t, c, "GET", srv.url+"/.gonet/status.json", nil); resp.StatusCode != 200 {
		t.Errorf("the status with the root gone: %s, want 200", resp.Status)
	}
}

func TestMetricsPageIsReadByPrometheusParser(t *testing.T) {
	src := fakeStatus{counters: map[string]int64{
		"TCP.RetransSegs": 3, "NIC.tap0.RxBytes": 1500, "NIC.tap1.RxBytes": 60, "Gateway.UDPActive": 2,
	}}
	for _, root := range []string{"", t.TempDir()} {
		srv := startHTTP(t, HTTPHandler(root, src))
		resp, body := do(t, newClient(t), "GET", srv.url+StatusPrefix+"metrics", nil)
		if resp.StatusCode != 200 {
			t.Fatalf("root %q: GET %smetrics: %s", root, StatusPrefix, resp.Status)
		}
		p := expfmt.NewTextParser(model.LegacyValidation)
		fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("root %q: Prometheus' parser: %v in\n%s", root, err, body)
		}
		got := map[string]float64{}
		for name, f := range fams {
			if strings.HasPrefix(name, "go_") {
				continue // the runtime's own (metrics.Runtime), pinned in package metrics
			}
			for _, m := range f.GetMetric() {
				key := name
				for _, l := range m.GetLabel() {
					key += "{" + l.GetName() + "=" + l.GetValue() + "}"
				}
				got[key] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
		want := map[string]float64{
			"gonet_tcp_retrans_segs_total":       3,
			"gonet_nic_rx_bytes_total{nic=tap0}": 1500,
			"gonet_nic_rx_bytes_total{nic=tap1}": 60,
			"gonet_gateway_udp_active":           2,
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("root %q: parsed %v, want %v", root, got, want)
		}
		if typ := fams["gonet_gateway_udp_active"].GetType(); typ != dto.MetricType_GAUGE {
			t.Errorf("gonet_gateway_udp_active is a %v, want a gauge", typ)
		}
	}
}
