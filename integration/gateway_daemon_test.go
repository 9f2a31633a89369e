package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
)

// The daemon of issue 11, gonet gateway, as a user runs it: in a "host"
// namespace whose only link is a veth to an "internet" namespace with an
// HTTP server and dnsmasq, serving a "guest" namespace whose TAP device the
// daemon makes there itself (-netns). The guest uses the kernel's own
// tools: ping, curl, dig, udhcpc.

// The internet namespace's network, joined to the host namespace by a veth.
var (
	hostVethAddr = "10.77.0.1/24"
	inetAddr     = "10.77.0.2"
	inetHTTP     = inetAddr + ":8080"
)

// gwGuestTAP is the guest's TAP device, in the guest's namespace.
const gwGuestTAP = "gn0"

// gwWorld is the three namespaces and the internet's servers.
type gwWorld struct {
	bin               string
	host, guest, inet *netns.NS
	blob              string       // a file of random bytes, served at /blob
	accepts           atomic.Int64 // TCP connections the HTTP server accepted
	dir               string
}

func newGWWorld(t *testing.T, bin string) *gwWorld {
	t.Helper()
	for _, tool := range []string{"ping", "curl", "dig", "dnsmasq", "socat"} {
		netnstest.RequireTool(t, tool)
	}
	w := &gwWorld{bin: bin, host: netnstest.New(t), guest: netnstest.New(t), inet: netnstest.New(t), dir: t.TempDir()}
	if err := w.host.AddVeth("veth0", w.inet, "veth1"); err != nil {
		t.Fatal(err)
	}
	if err := w.host.ConfigureLink("veth0", netip.MustParsePrefix(hostVethAddr), 0); err != nil {
		t.Fatal(err)
	}
	if err := w.inet.ConfigureLink("veth1", netip.MustParsePrefix(inetAddr+"/24"), 0); err != nil {
		t.Fatal(err)
	}

	w.blob = filepath.Join(w.dir, "blob")
	data := make([]byte, 16<<20)
	rand.Read(data)
	if err := os.WriteFile(w.blob, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := w.inet.Do(func() (err error) { ln, err = net.Listen("tcp4", inetHTTP); return err }); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /blob", func(rw http.ResponseWriter, r *http.Request) { http.ServeFile(rw, r, w.blob) })
	mux.HandleFunc("GET /hello", func(rw http.ResponseWriter, r *http.Request) { io.WriteString(rw, "hello from the internet\n") })
	// /stream/N is N bytes of payload(streamSeed, N): transfers of any
	// size, checked by their SHA-256, with no file to hold them.
	mux.HandleFunc("GET /stream/{size}", func(rw http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.PathValue("size"), 10, 64)
		if err != nil || n < 0 {
			http.Error(rw, "size: not a byte count", http.StatusBadRequest)
			return
		}
		rw.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		io.Copy(rw, payload(streamSeed, n))
	})
	mux.HandleFunc("POST /upload", func(rw http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		if _, err := io.Copy(h, r.Body); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		io.WriteString(rw, hex.EncodeToString(h.Sum(nil)))
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(countingListener{ln, &w.accepts})
	t.Cleanup(func() { srv.Close() })

	// dnsmasq knows www.gonet.test and asks no one else.
	ctx, cancel := context.WithCancel(context.Background())
	dnsmasq := w.inet.Command(ctx, "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null",
		"--no-resolv", "--no-hosts", "--listen-address="+inetAddr, "--bind-interfaces",
		"--pid-file=", "--log-facility=-", "--local=/test/", "--address=/www.gonet.test/"+inetAddr)
	if err := dnsmasq.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); dnsmasq.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, _ := w.inet.Run(context.Background(), "dig", "+short", "+tries=1", "+time=1", "@"+inetAddr, "www.gonet.test")
		if strings.TrimSpace(string(out)) == inetAddr {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dnsmasq in %s does not answer: %s", w.inet, out)
		}
	}
	return w
}

// streamSeed seeds the bytes /stream serves and the uploads of the same
// size send, so that the test knows their SHA-256 without storing them.
const streamSeed = 11

// streamSHA256 returns the SHA-256 of /stream/n.
func streamSHA256(n int64) string {
	h := sha256.New()
	io.Copy(h, payload(streamSeed, n))
	return hex.EncodeToString(h.Sum(nil))
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// gwDaemon is a gonet gateway running in the host namespace.
type gwDaemon struct {
	bin     string
	cmd     *exec.Cmd
	lines   *bufio.Scanner
	stderr  *bytes.Buffer
	ready   string
	control string
	cancel  context.CancelFunc
}

// start runs gonet gateway in the host namespace for the guest's TAP
// device, its DNS upstream dnsmasq, with args added, and waits for its
// ready line.
func (w *gwWorld) start(t *testing.T, args ...string) *gwDaemon {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	d := &gwDaemon{bin: w.bin, stderr: new(bytes.Buffer), control: filepath.Join(t.TempDir(), "gw.sock"), cancel: cancel}
	all := append([]string{"gateway", "-tap", gwGuestTAP, "-netns", w.guest.Path(),
		"-dns-upstream", inetAddr + ":53", "-control", d.control}, args...)
	d.cmd = w.host.Command(ctx, w.bin, all...)
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); d.cmd.Wait() })
	d.lines = bufio.NewScanner(stdout)
	if !d.lines.Scan() {
		d.cmd.Wait()
		t.Fatalf("gonet gateway printed nothing; stderr: %s", d.stderr)
	}
	d.ready = d.lines.Text()
	return d
}

// counters asks the running daemon for all its counters (gonet stats -a).
func (d *gwDaemon) counters(t *testing.T) map[string]int64 {
	t.Helper()
	out, err := exec.Command(d.bin, "stats", "-a", "-control", d.control).CombinedOutput()
	if err != nil {
		t.Fatalf("gonet stats -a -control %s: %v\n%s", d.control, err, out)
	}
	m := map[string]int64{}
	for l := range strings.Lines(string(out)) {
		name, v, _ := strings.Cut(strings.TrimSpace(l), " ")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("gonet stats: line %q: not \"NAME VALUE\"", l)
		}
		m[name] = n
	}
	return m
}

// alive fails the test if the daemon has exited. Until the test waits for
// it, an exited daemon is a zombie, which signal 0 would still find: its
// state in /proc tells.
func (d *gwDaemon) alive(t *testing.T) {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid))
	if i := bytes.LastIndexByte(stat, ')'); err != nil || i < 0 || len(stat) < i+3 || stat[i+2] == 'Z' {
		t.Fatalf("gonet gateway has exited (%v); stderr: %s", err, d.stderr)
	}
}

// stop sends SIGTERM and returns the counters printed, failing the test
// unless gonet exits 0.
func (d *gwDaemon) stop(t *testing.T) string {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var counters strings.Builder
	for d.lines.Scan() {
		counters.WriteString(d.lines.Text() + "\n")
	}
	if err := d.cmd.Wait(); err != nil {
		t.Fatalf("gonet gateway after SIGTERM: %v; stderr: %s", err, d.stderr)
	}
	return counters.String()
}

// gwMetricsPort is where the gateway serves -metrics, on the loopback of
// the test's host namespace.
const gwMetricsPort = "19464"

// checkMetrics reads the daemon's counters as a script does (gonet stats
// -json) and as Prometheus does (a scrape of -metrics, in the host
// namespace, read by Prometheus' parser): both carry the kernel's counters
// of the guest's TAP device, read in the guest's namespace.
func (w *gwWorld) checkMetrics(t *testing.T, d *gwDaemon) {
	t.Helper()
	out, err := exec.Command(d.bin, "stats", "-json", "-control", d.control).Output()
	if err != nil {
		t.Fatalf("gonet stats -json: %v", err)
	}
	var js map[string]int64
	if err := json.Unmarshal(out, &js); err != nil {
		t.Fatalf("gonet stats -json: %v in %s", err, out)
	}
	tap := "TAP." + gwGuestTAP + "."
	if js[tap+"TxPackets"] == 0 || js[tap+"RxPackets"] == 0 || js["Gateway.Relay.TCPFlows"] == 0 {
		t.Errorf("gonet stats -json: %sTxPackets %d, %sRxPackets %d, Gateway.Relay.TCPFlows %d; want each above 0",
			tap, js[tap+"TxPackets"], tap, js[tap+"RxPackets"], js["Gateway.Relay.TCPFlows"])
	}
	if _, ok := js[tap+"TxDropped"]; !ok {
		t.Errorf("gonet stats -json has no %sTxDropped", tap)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body, err := w.host.Run(ctx, "curl", "-sSf", "http://127.0.0.1:"+gwMetricsPort+"/metrics")
	if err != nil {
		t.Fatalf("scraping -metrics: %v: %s", err, body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("Prometheus' parser: %v", err)
	}
	for _, tt := range []struct {
		name, nic string
		min       float64
	}{
		{"gonet_tap_tx_packets_total", gwGuestTAP, 1},
		{"gonet_tap_tx_dropped_total", gwGuestTAP, 0},
		{"gonet_nic_rx_frames_total", gwGuestTAP, 1},
		{"gonet_gateway_relay_tcp_flows_total", "", 1},
		{"gonet_dns_answers_total", "", 1},
	} {
		f := fams[tt.name]
		if f.GetType() != dto.MetricType_COUNTER || len(f.GetMetric()) != 1 {
			t.Errorf("scrape: %s is %v, want one counter", tt.name, f)
			continue
		}
		m := f.GetMetric()[0]
		var nic string
		for _, l := range m.GetLabel() {
			nic = l.GetValue()
		}
		if v := m.GetCounter().GetValue(); nic != tt.nic || v < tt.min {
			t.Errorf("scrape: %s{nic=%q} %v, want {nic=%q} at least %v", tt.name, nic, v, tt.nic, tt.min)
		}
	}
}

// guestRun runs a command in the guest namespace and returns its combined
// output and error.
func (w *gwWorld) guestRun(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := w.guest.Run(ctx, name, args...)
	return string(out), err
}

func (w *gwWorld) mustGuest(t *testing.T, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	out, err := w.guestRun(timeout, name, args...)
	if err != nil {
		t.Fatalf("guest: %s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// dhcpTestdata returns the absolute path of a file in the DHCP server's
// testdata, which the real clients' tests there share with these.
func dhcpTestdata(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "dhcp", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if name == "" {
		p += string(filepath.Separator)
	}
	return p
}

// waitDHCPEvent waits for the client script's record of event in dir
// and returns the environment the client gave the script.
func waitDHCPEvent(t *testing.T, dir, event string) map[string]string {
	t.Helper()
	for deadline := time.Now().Add(25 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if b, err := os.ReadFile(filepath.Join(dir, "env."+event)); err == nil {
			env := map[string]string{}
			for l := range strings.Lines(string(b)) {
				if k, v, ok := strings.Cut(strings.TrimSuffix(l, "\n"), "="); ok {
					env[k] = v
				}
			}
			return env
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client's script saw no %s in 25 s", event)
		}
	}
}

// curlExit returns curl's exit status for err.
func curlExit(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// refused fails the test unless the guest's connect to addr is refused
// (ECONNREFUSED, which socat names), as the kernel reports a reset.
func (w *gwWorld) refused(t *testing.T, addr string) {
	t.Helper()
	out, err := w.guestRun(10*time.Second, "socat", "-u", "OPEN:/dev/null", "TCP:"+addr)
	if err == nil || !strings.Contains(out, "Connection refused") {
		t.Errorf("guest's connect to %s: %v, %q; want connection refused", addr, err, out)
	}
}

// tapGone fails the test if the guest's TAP device, or any process in the
// host namespace, outlived the daemon.
func (w *gwWorld) tapGone(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "pids", w.host.Name).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("processes left in the host namespace: %v %s", err, out)
	}
	if out, err := w.guest.IP(context.Background(), "link", "show", gwGuestTAP); err == nil {
		t.Errorf("%s is still in the guest after the daemon exited:\n%s", gwGuestTAP, out)
	}
}

func TestGatewayDaemon(t *testing.T) {
	bin := buildGonet(t)

	for _, mtu := range []string{"", "1500"} {
		name := "default MTU"
		if mtu != "" {
			name = "MTU " + mtu
		}
		t.Run("guest reaches the internet at "+name, func(t *testing.T) {
			w := newGWWorld(t, bin)
			args := []string{"-configure", "-metrics", ":" + gwMetricsPort}
			if mtu != "" {
				args = append(args, "-mtu", mtu)
			}
			d := w.start(t, args...)
			if f := strings.Fields(d.ready); len(f) != 6 || strings.Join(f[:5], " ") != "gonet: gateway up "+gwGuestTAP+" 10.0.2.2/24" {
				t.Fatalf("ready line %q, want \"gonet: gateway up %s 10.0.2.2/24 <mac>\"", d.ready, gwGuestTAP)
			}
			w.mustGuest(t, 10*time.Second, "ping", "-c", "1", "-W", "3", "10.0.2.2")
			w.mustGuest(t, 10*time.Second, "ping", "-c", "1", "-W", "3", inetAddr)

			got := filepath.Join(w.dir, "got")
			w.mustGuest(t, 30*time.Second, "curl", "-sSf", "-o", got, "http://"+inetHTTP+"/blob")
			if a, b := fileSHA256(t, got), fileSHA256(t, w.blob); a != b {
				t.Errorf("downloaded blob's SHA-256 %s, served %s", a, b)
			}
			sum := w.mustGuest(t, 30*time.Second, "curl", "-sSf", "--data-binary", "@"+w.blob, "http://"+inetHTTP+"/upload")
			if want := fileSHA256(t, w.blob); sum != want {
				t.Errorf("uploaded blob's SHA-256 at the server %q, want %s", sum, want)
			}

			for _, proto := range []string{"+notcp", "+tcp"} {
				if a := w.mustGuest(t, 10*time.Second, "dig", proto, "+short", "+tries=2", "+time=2", "@10.0.2.3", "www.gonet.test"); strings.TrimSpace(a) != inetAddr {
					t.Errorf("dig %s @10.0.2.3 www.gonet.test answered %q, want %s", proto, a, inetAddr)
				}
			}

			// Nothing listens on port 9 of the internet's server: the
			// host's connect is refused, and so is the guest's.
			w.refused(t, inetAddr+":9")
			if mtu != "" {
				// No one has 10.77.0.9 on the internet's network: the
				// host's ARP goes unanswered and its connect fails with
				// EHOSTUNREACH, which the guest hears as ICMP host
				// unreachable, as from a router.
				out, err := w.guestRun(15*time.Second, "socat", "-u", "OPEN:/dev/null", "TCP:10.77.0.9:80")
				if err == nil || !strings.Contains(out, "No route to host") {
					t.Errorf("guest's connect to an absent host: %v, %q; want no route to host", err, out)
				}
			}

			stats, err := exec.Command(bin, "stats", "-control", d.control).CombinedOutput()
			if err != nil || !strings.Contains(string(stats), "Gateway.TCPConnects") || !strings.Contains(string(stats), "DNS.Answers") {
				t.Errorf("gonet stats on the control socket: %v\n%s", err, stats)
			}
			w.checkMetrics(t, d)

			counters := d.stop(t)
			for _, want := range []string{"Gateway.TCPRefused 1", "Gateway.PingReplies 1", "DNS.Answers 2", "TCP.PassiveOpens"} {
				if !strings.Contains(counters, want) {
					t.Errorf("counters lack %q:\n%s", want, counters)
				}
			}
			// The log is complete once the daemon has exited.
			if !strings.Contains(d.stderr.String(), `msg="relaying pings" nic=`+gwGuestTAP+` through=`) {
				t.Errorf("stderr does not say how pings are relayed:\n%s", d.stderr)
			}
			w.tapGone(t)
		})
	}

	t.Run("transfers intact over a lossy guest link", func(t *testing.T) {
		w := newGWWorld(t, bin)
		capture := filepath.Join(t.TempDir(), "gw.pcap")
		d := w.start(t, "-configure", "-mtu", "1500", "-impair", "loss=0.01,seed=7", "-pcap", capture)
		got := filepath.Join(w.dir, "got")
		w.mustGuest(t, 30*time.Second, "curl", "-sSf", "-o", got, "http://"+inetHTTP+"/blob")
		if a, b := fileSHA256(t, got), fileSHA256(t, w.blob); a != b {
			t.Errorf("downloaded blob's SHA-256 %s, served %s", a, b)
		}
		sum := w.mustGuest(t, 30*time.Second, "curl", "-sSf", "--data-binary", "@"+w.blob, "http://"+inetHTTP+"/upload")
		if want := fileSHA256(t, w.blob); sum != want {
			t.Errorf("uploaded blob's SHA-256 at the server %q, want %s", sum, want)
		}
		counters := d.stop(t)
		if !strings.Contains(counters, "TCP.RetransSegs") {
			t.Errorf("no retransmissions over a lossy link:\n%s", counters)
		}
		if !strings.Contains(d.stderr.String(), "-impair") {
			t.Errorf("stderr does not say how to replay the impairment:\n%s", d.stderr)
		}
		if fi, err := os.Stat(capture); err != nil {
			t.Error(err)
		} else if fi.Size() < 16<<20 {
			t.Errorf("capture file of %d bytes, want the transfers in it", fi.Size())
		}
	})

	t.Run("deny refuses without a host connect", func(t *testing.T) {
		w := newGWWorld(t, bin)
		d := w.start(t, "-configure", "-deny", "10.77.0.0/24")
		w.refused(t, inetHTTP)
		if n := w.accepts.Load(); n != 0 {
			t.Errorf("the denied server accepted %d connections", n)
		}
		counters := d.stop(t)
		if !strings.Contains(counters, "Gateway.Denied 1") || strings.Contains(counters, "Gateway.TCPConnects") {
			t.Errorf("counters after a denied connect:\n%s", counters)
		}
		w.tapGone(t)
	})

	t.Run("inbound forwards, from the flag and at run time", func(t *testing.T) {
		w := newGWWorld(t, bin)
		d := w.start(t, "-configure", "-mtu", "1500", "-forward", "tcp:127.0.0.1:8022:80")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		srv := w.guest.Command(ctx, "socat", "TCP-LISTEN:80,fork,reuseaddr", "SYSTEM:echo from the guest")
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		defer srv.Wait()
		// dial connects from the host namespace and returns what the
		// guest's server said.
		dial := func(port string) (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			out, err := w.host.Run(ctx, "socat", "-u", "TCP:127.0.0.1:"+port, "STDOUT")
			return string(out), err
		}
		var out string
		var err error
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if out, err = dial("8022"); err == nil && out != "" {
				break
			}
		}
		if out != "from the guest\n" {
			t.Fatalf("through -forward tcp:127.0.0.1:8022:80: %v, %q", err, out)
		}
		forward := func(args ...string) string {
			t.Helper()
			out, err := exec.Command(bin, append([]string{"forward", "-control", d.control}, args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("gonet forward %v: %v\n%s", args, err, out)
			}
			return string(out)
		}
		forward("add", "tcp:127.0.0.1:8023:80")
		if got, want := forward("list"), "tcp:127.0.0.1:8022:80\ntcp:127.0.0.1:8023:80\n"; got != want {
			t.Errorf("gonet forward list: %q, want %q", got, want)
		}
		if out, err := dial("8023"); err != nil || out != "from the guest\n" {
			t.Errorf("through the forward added at run time: %v, %q", err, out)
		}
		forward("remove", "tcp:127.0.0.1:8023")
		if got := forward("list"); got != "tcp:127.0.0.1:8022:80\n" {
			t.Errorf("gonet forward list after remove: %q", got)
		}
		if out, err := dial("8023"); err == nil {
			t.Errorf("a removed forward still answers: %q", out)
		}
		if out, err := exec.Command(bin, "forward", "-control", d.control, "remove", "tcp:127.0.0.1:8023").CombinedOutput(); curlExit(err) != 1 {
			t.Errorf("removing a forward twice: %v, %s; want exit 1", err, out)
		}
		if counters := d.stop(t); !strings.Contains(counters, "Gateway.InboundTCP ") {
			t.Errorf("counters lack Gateway.InboundTCP:\n%s", counters)
		}
		cancel()
	})

	t.Run("DHCP clients get the guest's address", func(t *testing.T) {
		w := newGWWorld(t, bin)
		d := w.start(t, "-mtu", "1500")
		if _, err := w.guest.IP(context.Background(), "link", "set", gwGuestTAP, "up"); err != nil {
			t.Fatal(err)
		}
		// The clients' configuration and script are the DHCP server's
		// tests' (dhcp/testdata): the script records the lease in
		// $GONET_DHCP_DIR/env.EVENT and applies it to the interface,
		// and nothing else (no resolv.conf); the client keeps its
		// leases and pid in dir.
		script, conf := dhcpTestdata(t, "client-script.sh"), dhcpTestdata(t, "")
		// dhclient and dhcpcd name the lease's fields alike.
		iscLease := map[string]string{"new_ip_address": "10.0.2.100", "new_subnet_mask": "255.255.255.0",
			"new_routers": "10.0.2.2", "new_domain_name_servers": "10.0.2.3", "new_interface_mtu": "1500"}
		clients := []struct {
			tool string
			// argv is the command line, with its state in dir.
			argv  func(dir string) []string
			event string
			// want is what the client must tell its script, in its
			// own variables' names.
			want map[string]string
			// exits: the client quits once bound, where the others
			// stay to renew and are killed.
			exits bool
		}{
			{"udhcpc", func(dir string) []string {
				return []string{"udhcpc", "-i", gwGuestTAP, "-f", "-n", "-q", "-t", "5", "-T", "1", "-O", "mtu", "-s", script}
			}, "bound", map[string]string{"ip": "10.0.2.100", "subnet": "255.255.255.0", "router": "10.0.2.2", "dns": "10.0.2.3", "mtu": "1500"}, true},
			{"dhclient", func(dir string) []string {
				return []string{"dhclient", "-4", "-d", "-1", "-v", "-sf", script, "-e", "GONET_DHCP_DIR=" + dir,
					"-cf", conf + "dhclient.conf", "-lf", filepath.Join(dir, "leases"), "-pf", filepath.Join(dir, "pid"), gwGuestTAP}
			}, "BOUND", iscLease, false},
			// dhcpcd keeps its leases in /var/lib/dhcpcd and its
			// sockets in /run, paths built in: in the mount namespace
			// of ip netns exec they become bind mounts of dir.
			// --noarp: no 5 s of probes for a conflict (RFC 5227) on
			// a link where only the gateway answers.
			{"dhcpcd", func(dir string) []string {
				return []string{"sh", "-c", `mkdir "$1/db" "$1/run" && mount --bind "$1/db" /var/lib/dhcpcd && mount --bind "$1/run" /run && shift && exec dhcpcd "$@"`,
					"sh", dir, "--nobackground", "--oneshot", "--ipv4only", "--noarp", "--timeout", "20", "--config", conf + "dhcpcd.conf",
					"--script", script, "--env", "GONET_DHCP_DIR=" + dir, gwGuestTAP}
			}, "BOUND", iscLease, true},
		}
		leased := 0 // clients that ran: a missing one skips
		for _, c := range clients {
			t.Run(c.tool, func(t *testing.T) {
				netnstest.RequireTool(t, c.tool)
				leased++
				// Each client starts from an interface with no address.
				if _, err := w.guest.IP(context.Background(), "addr", "flush", "dev", gwGuestTAP); err != nil {
					t.Fatal(err)
				}
				dir := t.TempDir()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				argv := c.argv(dir)
				cmd := w.guest.Command(ctx, argv[0], argv[1:]...)
				cmd.Env = append(os.Environ(), "GONET_DHCP_DIR="+dir)
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				exited := make(chan error, 1)
				go func() { exited <- cmd.Wait() }()
				defer func() {
					cancel()
					<-exited
					if t.Failed() {
						t.Logf("%s said:\n%s", c.tool, out.String())
					}
				}()
				env := waitDHCPEvent(t, dir, c.event)
				for k, want := range c.want {
					if env[k] != want {
						t.Errorf("%s gave its script %s=%q, want %q", c.tool, k, env[k], want)
					}
				}
				if c.exits {
					select {
					case err := <-exited:
						exited <- err // for the deferred wait
						if err != nil {
							t.Errorf("%s exited: %v", c.tool, err)
						}
					case <-ctx.Done():
						t.Errorf("%s did not exit once bound", c.tool)
					}
				}
				// The lease, applied, takes the guest to the internet.
				w.mustGuest(t, 10*time.Second, "ping", "-c", "1", "-W", "3", inetAddr)
			})
		}
		want := fmt.Sprintf("DHCP.OutAcks %d\n", leased)
		if counters := d.stop(t); !strings.Contains(counters, want) || strings.Contains(counters, "DHCP.OutNaks") {
			t.Errorf("counters lack %q or have NAKs:\n%s", want, counters)
		}
		w.tapGone(t)
	})

	t.Run("run gives a command the network and its status", func(t *testing.T) {
		w := newGWWorld(t, bin)
		tmp := t.TempDir()
		run := func(args ...string) (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := w.host.Command(ctx, bin, append([]string{"run", "-dns-upstream", inetAddr + ":53", "-control", "none", "--"}, args...)...)
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		// The name is resolved through the resolv.conf gonet run puts in
		// the command's mount namespace: the gateway's DNS forwarder.
		out, err := run("curl", "-sSf", "http://www.gonet.test:8080/hello")
		if err != nil || out != "hello from the internet\n" {
			t.Errorf("gonet run -- curl: %v, %q", err, out)
		}
		for _, dst := range []string{"10.0.2.2", "127.0.0.1"} {
			if out, err := run("ping", "-c", "1", "-W", "3", dst); err != nil {
				t.Errorf("gonet run -- ping %s: %v\n%s", dst, err, out)
			}
		}
		if _, err := run("sh", "-c", "exit 3"); curlExit(err) != 3 {
			t.Errorf("gonet run -- sh -c 'exit 3': %v, want exit status 3", err)
		}
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Errorf("gonet run left %d files in TMPDIR", len(left))
		}
		if out, err := exec.Command("ip", "netns", "pids", w.host.Name).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) != 0 {
			t.Errorf("processes left in the host namespace: %v %s", err, out)
		}
	})

	t.Run("bad flags exit 2 with one line", func(t *testing.T) {
		for _, args := range [][]string{
			{"gateway"}, // no -tap
			{"gateway", "-tap", "gn0", "-mtu", "20"},
			{"gateway", "-tap", "gn0", "-subnet", "10.0.2.0/28"},
			{"gateway", "-tap", "gn0", "-forward", "sctp:1:2"},
			{"gateway", "-tap", "gn0", "-deny", "nowhere"},
			{"gateway", "-tap", "gn0", "-configure"}, // no -netns
			{"gateway", "-tap", "gn0", "-dns-upstream", "resolver"},
			{"run", "curl"}, // no --
			{"run", "--"},
			{"run", "-netns", "1", "--", "true"},
			{"forward", "add", "tcp:80"},
			{"forward", "frobnicate"},
		} {
			cmd := exec.Command(bin, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if curlExit(err) != 2 {
				t.Errorf("gonet %v: %v, want exit status 2", args, err)
			}
			if n := strings.Count(strings.TrimRight(stderr.String(), "\n"), "\n"); n != 0 || stderr.Len() == 0 {
				t.Errorf("gonet %v: want a one-line error, got:\n%s", args, stderr.String())
			}
		}
	})
}
