package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/logtest"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/link/fault"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/route"
	"github.com/gonetstack/gonet/services"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/tcp"
	"github.com/gonetstack/gonet/wire"
)

// GoNet's IPv6 against the Linux kernel's, end to end over a TAP, with
// the stack in the test process: ping6 of every size both ways, neighbour
// discovery seen from both sides (caches, the kernel's NUD probes, TCP's
// reachability confirmations), TCP and UDP over IPv6 with the kernel's
// tools, a dual-stack listener, DAD against the kernel both ways, SLAAC
// from radvd, TCP through a lossy link, path MTU discovery through a
// kernel router, and hostile frames from the kernel's side.

// 1. The kernel pings GoNet, and each side has the other in its neighbour
// cache.

func TestIPv6KernelPingsGoNetAtEverySize(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	h := newHost6(t, options{}, true)
	for _, dst := range []struct {
		name string
		addr netip.Addr
	}{{"link-local", h.gonetLL}, {"global", gonetAddr6.Addr()}} {
		// 1452 bytes fill a 1500-byte frame exactly; 1500 and more go
		// in fragments both ways.
		for _, size := range []int{56, 1452, 1500, 8000, 65000} {
			t.Run(fmt.Sprintf("%s/%d", dst.name, size), func(t *testing.T) {
				h.ping6(t, dst.addr, size, 3)
			})
		}
	}
	c := h.stack.Counters()
	if c["IPv6.ReasmOKs"] == 0 || c["IPv6.FragCreates"] == 0 {
		t.Errorf("large pings were not reassembled and fragmented: ReasmOKs=%d FragCreates=%d", c["IPv6.ReasmOKs"], c["IPv6.FragCreates"])
	}
	// The kernel learnt GoNet's link-layer address for both addresses,
	// and has seen it reachable lately.
	neigh := h.run(t, 5*time.Second, "ip", "-6", "neigh", "show", "dev", h.dev)
	for _, a := range []netip.Addr{h.gonetLL.WithZone(""), gonetAddr6.Addr()} {
		line := ""
		for l := range strings.Lines(neigh) {
			if f := strings.Fields(l); len(f) > 0 && f[0] == a.String() {
				line = l
			}
		}
		if !strings.Contains(line, "lladdr "+h.tap.MAC().String()) || !strings.Contains(line, "REACHABLE") && !strings.Contains(line, "STALE") && !strings.Contains(line, "DELAY") {
			t.Errorf("kernel's ip -6 neigh has no usable entry for %v at %s:\n%s", a, h.tap.MAC(), neigh)
		}
		// A host's advertisements clear the Router flag (RFC 4861
		// section 4.4).
		if strings.Contains(line, "router") {
			t.Errorf("the kernel takes GoNet for a router: %s", line)
		}
	}
	// GoNet learnt the kernel's, for the addresses the kernel pinged
	// from.
	mac := h.kernelMAC(t)
	for _, a := range []netip.Addr{h.kernelLL, kernelAddr6.Addr()} {
		n, ok := h.nd.Neighbor(a)
		if !ok || n.MAC.String() != mac || n.State == ndp.Incomplete {
			t.Errorf("GoNet's neighbour cache has %+v (%v) for %v, want %s; all: %+v", n, ok, a, mac, h.nd.Neighbors())
		}
	}
	// One entry an address: the link-local one, named with its zone by
	// the IPv6 layer and without by the advertisements, is one neighbour.
	if ns := h.nd.Neighbors(); len(ns) != 2 {
		t.Errorf("GoNet's neighbour cache has %d entries, want the kernel's 2: %+v", len(ns), ns)
	}
}

// 2. GoNet pings the kernel.

func TestIPv6GoNetPingsKernel(t *testing.T) {
	h := newHost6(t, options{}, true)
	for _, dst := range []netip.Addr{h.kernelLL, kernelAddr6.Addr()} {
		for _, size := range []int{56, 1452, 1453, 8000, 65000} {
			t.Run(fmt.Sprintf("%v/%d", dst, size), func(t *testing.T) {
				rtt := h.gonetPing(t, dst, size)
				t.Logf("%d bytes: rtt %v", size, rtt)
			})
		}
	}
	if c := h.stack.Counters(); c["IPv6.ReasmOKs"] == 0 || c["IPv6.FragCreates"] == 0 {
		t.Errorf("large pings were not fragmented and their replies reassembled: ReasmOKs=%d FragCreates=%d", c["IPv6.ReasmOKs"], c["IPv6.FragCreates"])
	}
	// A link-local address without its zone names no interface, unless
	// the host has one alone: GoNet has one NIC, so it is taken.
	h.gonetPing(t, h.kernelLL.WithZone(""), 56)
	// A link-local address the kernel never sent from, so that GoNet has
	// only its own solicitation to learn it by.
	quiet := netip.MustParseAddr("fe80::99")
	h.run(t, 5*time.Second, "ip", "-6", "addr", "add", quiet.String()+"/64", "dev", h.dev, "nodad")
	before := h.ndpCounter("Resolved")
	h.gonetPing(t, quiet.WithZone(h.dev), 56)
	if n := h.ndpCounter("Resolved") - before; n != 1 {
		t.Errorf("NDP Resolved moved by %d, want 1: %v was not resolved by solicitation", n, quiet)
	}
}

// 3. TCP over IPv6 both ways.

// tcpBulk6 is the size of the bulk transfers over IPv6.
const tcpBulk6 = 32 << 20

// addrPort6 is "[addr%zone]:port", as Go's net and socat write it.
func addrPort6(a netip.Addr, port int) string {
	return net.JoinHostPort(a.String(), strconv.Itoa(port))
}

func TestIPv6CurlFromGoNetHTTP(t *testing.T) {
	lookPath(t, "curl")
	checkGoroutines(t)
	h := newHost6(t, options{}, true)
	defer h.logCounters(t, false)
	l, err := h.stack.Listen("tcp6", ":80")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		size, err := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, "/"), 10, 64)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		io.Copy(w, payload(uint64(size), size))
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	for _, tt := range []struct {
		name string
		url  string
		size int64
	}{
		{"global", "http://" + addrPort6(gonetAddr6.Addr(), 80), tcpBulk6},
		// curl takes the zone as RFC 6874 writes it in a URL, "%25".
		{"link-local", "http://[" + h.gonetLL.WithZone("").String() + "%25" + h.dev + "]:80", 1 << 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := newDigest()
			io.Copy(want, payload(uint64(tt.size), tt.size))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := h.ns.Command(ctx, "curl", "-6", "-sS", "--fail", tt.url+"/"+strconv.FormatInt(tt.size, 10))
			got := newDigest()
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = got, &stderr
			start := time.Now()
			if err := cmd.Run(); err != nil {
				t.Fatalf("curl: %v: %s", err, stderr.String())
			}
			if got.n != tt.size || got.sum() != want.sum() {
				t.Fatalf("curl got %d bytes (sha256 %s), want %d (sha256 %s)", got.n, got.sum(), tt.size, want.sum())
			}
			logRate(t, "curl -6", tt.size, time.Since(start))
		})
	}
}

func TestIPv6SocatEchoTCP6(t *testing.T) {
	lookPath(t, "socat")
	checkGoroutines(t)
	h := newHost6(t, options{}, true)
	defer h.logCounters(t, false)
	h.serve6(t, 7, services.ServeEchoTCP)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := h.ns.Command(ctx, "socat", "-b", "65536", "-t", "30", "-T", "30", "STDIO", "TCP6:"+addrPort6(gonetAddr6.Addr(), 7))
	sent, got := newDigest(), newDigest()
	cmd.Stdin = io.TeeReader(payload(7, tcpBulk6), sent)
	cmd.Stdout = got
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("socat: %v: %s", err, stderr.String())
	}
	if sent.n != tcpBulk6 || got.n != sent.n || got.sum() != sent.sum() {
		t.Fatalf("sent %d bytes (sha256 %s), echo came back as %d bytes (sha256 %s)", sent.n, sent.sum(), got.n, got.sum())
	}
	logRate(t, "socat TCP6 echo", tcpBulk6, time.Since(start))
}

// serve6 runs a service on GoNet's port for IPv6 alone until the test
// ends.
func (h *host6) serve6(t *testing.T, port uint16, svc func(context.Context, net.Listener) error) {
	t.Helper()
	h.serve(t, "tcp6", port, svc)
}

// serve runs svc on GoNet's listener for network ("tcp" for both
// families) on port until the test ends.
func (h *host6) serve(t *testing.T, network string, port uint16, svc func(context.Context, net.Listener) error) {
	t.Helper()
	l, err := h.stack.Listen(network, ":"+strconv.Itoa(int(port)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		l.Close()
		if err := <-done; err != nil {
			t.Errorf("service on port %d: %v", port, err)
		}
	})
}

// socatEcho6 runs socat's TCP6 echo (through cat: socat's own PIPE deadlocks on
// a full pipe with megabytes in flight) on the kernel's port until the test
// ends, and waits until it listens.
func (h *host6) socatEcho6(t *testing.T, port int) {
	t.Helper()
	lookPath(t, "socat")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := h.ns.Command(ctx, "socat", "-b", "65536", "TCP6-LISTEN:"+strconv.Itoa(port)+",reuseaddr,fork", "EXEC:cat")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	waitFor(t, "socat to listen", 5*time.Second, func() bool {
		out, _ := h.ns.Run(context.Background(), "ss", "-Htln", "sport", "= :"+strconv.Itoa(port))
		return len(bytes.TrimSpace(out)) > 0
	})
}

func TestIPv6GoNetDialsSocat(t *testing.T) {
	checkGoroutines(t)
	h := newHost6(t, options{}, true)
	defer h.logCounters(t, false)
	h.socatEcho6(t, 7)
	for _, dst := range []netip.Addr{kernelAddr6.Addr(), h.kernelLL} {
		t.Run(dst.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := h.stack.DialContext(ctx, "tcp6", addrPort6(dst, 7))
			if err != nil {
				t.Fatalf("GoNet dials %v: %v", dst, err)
			}
			if got := addrPort(c.RemoteAddr()).Addr(); got != dst {
				t.Errorf("remote address %v, want %v (with its zone)", got, dst)
			}
			roundTrip(t, c.(*tcp.Conn), 8<<20, time.Minute)
		})
	}
}

// A listener on "tcp" and the wildcard takes both families, as Go's net's
// on Linux: the kernel reaches it over IPv4 and IPv6, and GoNet reports
// each peer in its own family.
func TestIPv6DualStackListenerReachedByBothFamilies(t *testing.T) {
	checkGoroutines(t)
	h := newHost6(t, options{}, true)
	defer h.logCounters(t, false)
	l, err := h.stack.Listen("tcp", ":8080")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for _, tt := range []struct {
		network, addr string
		v6            bool
	}{
		{"tcp4", gonetTCPAddr(8080), false},
		{"tcp6", addrPort6(gonetAddr6.Addr(), 8080), true},
		{"tcp6", addrPort6(h.gonetLL, 8080), true},
	} {
		t.Run(tt.network+"/"+tt.addr, func(t *testing.T) {
			k := h.dialKernel6(t, tt.network, tt.addr)
			l.(*tcp.Listener).SetDeadline(time.Now().Add(10 * time.Second))
			g, err := l.Accept()
			if err != nil {
				t.Fatalf("accept: %v", err)
			}
			defer g.Close()
			if peer, want := addrPort(g.RemoteAddr()), addrPort(k.LocalAddr()); peer.Addr().WithZone("") != want.Addr().WithZone("") || peer.Port() != want.Port() {
				t.Errorf("GoNet sees its peer as %v, want %v", peer, want)
			}
			if got := addrPort(g.RemoteAddr()).Addr(); got.Is6() != tt.v6 || got.Is4In6() {
				t.Errorf("GoNet's peer %v: want an IPv6 address %v, and IPv4 ones unmapped", got, tt.v6)
			}
			exchangeByte(t, k, g)
			exchangeByte(t, g, k)
		})
	}
}

// The kernel sends GoNet super-segments of both families (GoNet asks the
// TAP for TSO4 and TSO6), and the NIC counts IPv6's apart: without TSO6
// every IPv6 segment would cross at the MTU, a cost IPv4 does not pay.
func TestIPv6KernelSendsSuperSegmentsOfEachFamily(t *testing.T) {
	checkGoroutines(t)
	h := newHost6(t, options{}, true)
	defer h.logCounters(t, false)
	h.serve(t, "tcp", 9, services.ServeDiscardTCP)
	gso := func() (all, v6 int64) {
		return h.counter("NIC." + h.dev + ".RxGSO"), h.counter("NIC." + h.dev + ".RxGSO6")
	}
	for _, tt := range []struct {
		network, addr string
		v6            bool
	}{
		{"tcp4", gonetTCPAddr(9), false},
		{"tcp6", addrPort6(gonetAddr6.Addr(), 9), true},
	} {
		t.Run(tt.network, func(t *testing.T) {
			all0, v60 := gso()
			k := h.dialKernel6(t, tt.network, tt.addr)
			k.SetDeadline(time.Now().Add(30 * time.Second))
			if _, err := k.Write(make([]byte, 8<<20)); err != nil {
				t.Fatalf("kernel writes: %v", err)
			}
			if err := k.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			// Discard closes once it has read everything.
			if _, err := io.Copy(io.Discard, k); err != nil {
				t.Fatalf("waiting for GoNet's FIN: %v", err)
			}
			all1, v61 := gso()
			all, v6 := all1-all0, v61-v60
			want6 := int64(0)
			if tt.v6 {
				want6 = all
			}
			if all == 0 || v6 != want6 {
				t.Errorf("8 MiB over %s: %d super-segments, %d of them IPv6; want some, %d of them IPv6", tt.network, all, v6, want6)
			}
		})
	}
}

// 4. UDP over IPv6.

func TestIPv6UDPEchoWithSocat(t *testing.T) {
	netnstest.RequireTool(t, "socat")
	h := newHost6(t, options{}, true)
	c, err := h.stack.ListenPacket("udp6", ":7")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { c.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			c.WriteTo(buf[:n], from)
		}
	}()
	for _, dst := range []string{addrPort6(gonetAddr6.Addr(), 7), addrPort6(h.gonetLL, 7)} {
		// 1452 bytes fill a 1500-byte frame; 30000 go in fragments.
		for _, size := range []int{1, 1452, 30000} {
			t.Run(fmt.Sprintf("%s/%d", dst, size), func(t *testing.T) {
				msg := make([]byte, size)
				for i := range msg {
					msg[i] = 'a' + byte(i%26)
				}
				// A file on stdin: socat reads it in one read(2), so
				// the message goes out as one datagram.
				in := filepath.Join(t.TempDir(), "msg")
				if err := os.WriteFile(in, msg, 0o600); err != nil {
					t.Fatal(err)
				}
				f, err := os.Open(in)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				cmd := h.ns.Command(ctx, "socat", "-b", "65536", "-t", "0.5", "-T", "5", "STDIO", "UDP6:"+dst)
				cmd.Stdin = f
				var out, errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errb
				if err := cmd.Run(); err != nil {
					t.Fatalf("socat: %v: %s", err, errb.String())
				}
				if !bytes.Equal(out.Bytes(), msg) {
					t.Fatalf("echo of %d bytes came back as %d bytes", size, out.Len())
				}
			})
		}
	}
	if c := h.stack.Counters(); c["IPv6.ReasmOKs"] == 0 || c["IPv6.FragCreates"] == 0 {
		t.Errorf("the 30000-byte datagrams were not reassembled and fragmented: ReasmOKs=%d FragCreates=%d", c["IPv6.ReasmOKs"], c["IPv6.FragCreates"])
	}
}

// 5. Duplicate address detection against the kernel.

// GoNet's DAD finds an address the kernel holds, and GoNet never uses it;
// the kernel's DAD finds one GoNet holds, because GoNet defends it.
func TestIPv6DADAgainstKernel(t *testing.T) {
	t.Run("GoNet finds the kernel's address", func(t *testing.T) {
		logger, log := logtest.New(slog.LevelInfo)
		h := newHost6(t, options{stack: stack.Config{Logger: logger}}, false)
		taken := netip.MustParsePrefix("fd00:99::3/64")
		h.run(t, 5*time.Second, "ip", "-6", "addr", "add", taken.String(), "dev", h.dev, "nodad")
		if err := h.stack.AddAddress(h.dev, taken); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "NDP DADFailed to count the duplicate", 10*time.Second, func() bool { return h.ndpCounter("DADFailed") == 1 })
		ev := log.Wait(t, "duplicate IPv6 address: not used", 1)
		if got := ev[0].Str("addr"); got != taken.Addr().String() {
			t.Errorf("the duplicate logged is %q, want %v", got, taken.Addr())
		}
		state := ndp.AddrState(0)
		for _, a := range h.nd.Addresses() {
			if a.Prefix.Addr() == taken.Addr() {
				state = a.State
			}
		}
		if state != ndp.Duplicate {
			t.Errorf("ndp holds %v as %v, want duplicate", taken.Addr(), state)
		}
		if st, ok := h.stack.IPv6().AddressState(taken.Addr()); ok {
			t.Errorf("the IPv6 layer holds the duplicate %v as %v", taken.Addr(), st)
		}
		if n := h.ndpCounter("DADSucceeded"); n != 1 {
			t.Errorf("NDP DADSucceeded = %d, want 1 (the link-local address alone)", n)
		}
		// The kernel keeps its address, and GoNet still answers on its
		// own.
		h.ping6(t, h.gonetLL, 56, 1)
	})
	t.Run("the kernel finds GoNet's address", func(t *testing.T) {
		h := newHost6(t, options{}, true)
		mine := netip.PrefixFrom(gonetAddr6.Addr(), 64)
		// With DAD this time: the kernel solicits from ::, and GoNet's
		// advertisement fails the kernel's address.
		h.run(t, 5*time.Second, "ip", "-6", "addr", "add", mine.String(), "dev", h.dev)
		waitFor(t, "the kernel's DAD to fail", 10*time.Second, func() bool {
			out := h.run(t, 5*time.Second, "ip", "-6", "addr", "show", "dev", h.dev)
			return strings.Contains(out, "dadfailed")
		})
		if st, _ := h.stack.IPv6().AddressState(gonetAddr6.Addr()); st != ipv6.Preferred {
			t.Errorf("GoNet's %v is %v after defending it, want preferred", gonetAddr6.Addr(), st)
		}
	})
}

// 6. SLAAC from radvd in the kernel's namespace.

// slaacPrefix is what radvd advertises.
var slaacPrefix = netip.MustParsePrefix("fd00:98::/64")

// radvd runs radvd on the host's device, advertising slaacPrefix, until the
// test ends. The kernel's end is a router: it forwards, and holds an
// address in the prefix. Each of extra is a line of radvd.conf's
// interface block.
func (h *host6) radvd(t *testing.T, noSourceLLAddr bool, extra ...string) {
	startRadvd(t, h.host, noSourceLLAddr, extra...)
}

// startRadvd is host6.radvd for any host: h.dev in h.ns.
func startRadvd(t *testing.T, h *host, noSourceLLAddr bool, extra ...string) {
	t.Helper()
	lookPath(t, "radvd")
	h.run(t, 5*time.Second, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	h.run(t, 5*time.Second, "ip", "-6", "addr", "add", netip.PrefixFrom(slaacPrefix.Addr().Next(), 64).String(), "dev", h.dev, "nodad")
	dir := t.TempDir()
	conf := filepath.Join(dir, "radvd.conf")
	err := os.WriteFile(conf, fmt.Appendf(nil, `interface %s {
	AdvSendAdvert on;
	AdvSourceLLAddress %s;
	MinRtrAdvInterval 3;
	MaxRtrAdvInterval 10;
	prefix %s {
		AdvOnLink on;
		AdvAutonomous on;
	};
	%s
};
`, h.dev, map[bool]string{false: "on", true: "off"}[noSourceLLAddr], slaacPrefix, strings.Join(extra, "\n\t")), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := h.ns.Command(ctx, "radvd", "-n", "-C", conf, "-p", filepath.Join(dir, "radvd.pid"), "-m", "stderr")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("radvd: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			t.Logf("radvd's output:\n%s", out.String())
		}
	})
}

func TestIPv6SLAACFromRadvd(t *testing.T) {
	key := bytes.Repeat([]byte{0x5a}, ipv6.MinSecretKeyLen)
	for _, tt := range []struct {
		name string
		key  []byte
		// noSLLA: the advertisements leave out the router's link-layer
		// address (RFC 4861 section 4.2 allows it), so GoNet resolves
		// the router's link-local address by solicitation.
		noSLLA bool
	}{
		{"EUI-64", nil, false},
		{"stable identifier (RFC 7217)", key, false},
		{"no source link-layer address", nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost6(t, options{stack: stack.Config{NDP: ndp.Config{SecretKey: tt.key}}}, false)
			iid := ipv6.EUI64(h.mac())
			if tt.key != nil {
				mac := h.mac()
				var err error
				iid, _, err = ipv6.StableIID(&ipv6.StableIIDInputs{Prefix: slaacPrefix, NetIface: mac[:], SecretKey: tt.key}, 0)
				if err != nil {
					t.Fatal(err)
				}
			}
			want, err := ipv6.FromPrefix(slaacPrefix, iid)
			if err != nil {
				t.Fatal(err)
			}
			// An address beyond the router, added first: the kernel
			// installs its local route a moment after ip returns.
			beyond := netip.MustParseAddr("fd00:96::1")
			h.run(t, 5*time.Second, "ip", "-6", "addr", "add", beyond.String()+"/128", "dev", "lo")
			h.radvd(t, tt.noSLLA)
			waitFor(t, fmt.Sprintf("GoNet to form %v and pass its DAD", want), 15*time.Second, func() bool {
				st, ok := h.stack.IPv6().AddressState(want)
				return ok && st == ipv6.Preferred
			})
			if n := h.ndpCounter("SLAACAddrs"); n != 1 {
				t.Errorf("NDP SLAACAddrs = %d, want 1", n)
			}
			h.ping6(t, want, 56, 2)
			h.ping6(t, want, 8000, 1)
			// The default route is through the router's link-local
			// address, as RFC 4861 section 4.2 has routers send from.
			var def []ipv6.Route
			for _, r := range h.stack.IPv6().Routes() {
				if r.Dst.Bits() == 0 {
					def = append(def, r)
				}
			}
			if len(def) != 1 || def[0].Gateway.WithZone("") != h.kernelLL.WithZone("") || def[0].Iface.Name() != h.dev {
				t.Errorf("GoNet's default routes %v, want one through %v on %s", def, h.kernelLL, h.dev)
			}
			// And GoNet reaches the router's address in the prefix
			// from its new one, and an address beyond the router
			// through its default route.
			h.gonetPing(t, slaacPrefix.Addr().Next(), 56)
			h.gonetPing(t, beyond, 56)
			if n, ok := h.nd.Neighbor(h.kernelLL); !ok || !n.Router {
				t.Errorf("GoNet's entry for the router: %+v (%v), want its Router flag set; cache %+v", n, ok, h.nd.Neighbors())
			}
		})
	}
}

// TestIPv6OptimisticDADAgainstKernel: with optimistic DAD (RFC 4429) GoNet
// uses the address it forms by SLAAC while that address's DAD still runs.
// Its link-local address is optimistic too, so no solicitation of GoNet's
// may carry its link-layer address, and the kernel ignores a multicast
// one without: GoNet's first datagram goes through the router (the
// kernel, as radvd's host), and the kernel resolves GoNet's optimistic
// address itself (GoNet answering without Override). And an address the
// kernel holds is given up when DAD finds it.
func TestIPv6OptimisticDADAgainstKernel(t *testing.T) {
	// DAD of 20 solicitations, a second apart: every address stays
	// optimistic through the test.
	cfg := stack.Config{NDP: ndp.Config{OptimisticDAD: true, DupAddrDetectTransmits: 20}}
	t.Run("used while DAD runs", func(t *testing.T) {
		h := newHost6(t, options{stack: cfg}, false)
		want, err := ipv6.FromPrefix(slaacPrefix, ipv6.EUI64(h.mac()))
		if err != nil {
			t.Fatal(err)
		}
		h.radvd(t, false)
		h.waitState(t, want, ipv6.Optimistic)
		server := slaacPrefix.Addr().Next()
		h.gonetPing(t, server, 56)
		if n := h.ndpCounter("OptimisticDetours"); n == 0 {
			t.Error("NDP OptimisticDetours = 0: the echo request did not go through the router")
		}
		h.ping6(t, want, 56, 2)
		out := h.run(t, 5*time.Second, "ip", "-6", "neigh", "show", want.String(), "dev", h.dev)
		if !strings.Contains(out, h.mac().String()) {
			t.Errorf("the kernel's entry for GoNet's %v: %q, want lladdr %v", want, out, h.mac())
		}
		for _, a := range []netip.Addr{want, h.gonetLL.WithZone("")} {
			if st, _ := h.stack.IPv6().AddressState(a); st != ipv6.Optimistic {
				t.Errorf("GoNet's %v is %v after the pings, want still optimistic: the test proves nothing", a, st)
			}
		}
	})
	t.Run("a duplicate given up", func(t *testing.T) {
		h := newHost6(t, options{stack: cfg}, false)
		taken, err := ipv6.FromPrefix(slaacPrefix, ipv6.EUI64(h.mac()))
		if err != nil {
			t.Fatal(err)
		}
		h.run(t, 5*time.Second, "ip", "-6", "addr", "add", netip.PrefixFrom(taken, 64).String(), "dev", h.dev, "nodad")
		h.radvd(t, false)
		waitFor(t, "GoNet's DAD to find the kernel's "+taken.String(), 15*time.Second, func() bool {
			_, ok := h.stack.IPv6().AddressState(taken)
			return h.ndpCounter("DADFailed") == 1 && !ok
		})
		out := h.run(t, 5*time.Second, "ip", "-6", "addr", "show", "dev", h.dev)
		if strings.Contains(out, "dadfailed") || !strings.Contains(out, taken.String()) {
			t.Errorf("the kernel lost its %v to GoNet's optimistic one:\n%s", taken, out)
		}
	})
}

// TestIPv6TemporaryAddressFromRadvd: with temporary addresses on (RFC
// 8981), GoNet forms one beside its SLAAC address from radvd's prefix, and
// the kernel sees GoNet's connections come from it (RFC 6724 rule 7).
func TestIPv6TemporaryAddressFromRadvd(t *testing.T) {
	h := newHost6(t, options{stack: stack.Config{NDP: ndp.Config{TempAddresses: true}}}, false)
	server := slaacPrefix.Addr().Next()
	h.radvd(t, false)
	public, err := ipv6.FromPrefix(slaacPrefix, ipv6.EUI64(h.mac()))
	if err != nil {
		t.Fatal(err)
	}
	var temp netip.Addr
	waitFor(t, "GoNet's temporary address, past DAD", 20*time.Second, func() bool {
		addrs, err := h.stack.Addresses6(h.dev)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			if a.Temporary && a.State == ndp.Preferred && slaacPrefix.Contains(a.Prefix.Addr()) {
				temp = a.Prefix.Addr()
				return true
			}
		}
		return false
	})
	if temp == public {
		t.Fatalf("the temporary address is the public one, %v", temp)
	}
	waitFor(t, "GoNet's public address, past DAD", 10*time.Second, func() bool {
		st, ok := h.stack.IPv6().AddressState(public)
		return ok && st == ipv6.Preferred
	})
	var l net.Listener
	if err := h.ns.Do(func() (err error) {
		l, err = net.Listen("tcp6", addrPort6(server, 7611))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := h.stack.DialTCP(ctx, netip.AddrPortFrom(server, 7611))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	kc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	if from := kc.RemoteAddr().(*net.TCPAddr).AddrPort().Addr(); from != temp {
		t.Errorf("the kernel accepted a connection from %v, want GoNet's temporary address %v (public %v)", from, temp, public)
	}
}

// TestIPv6RouteInformationFromRadvd: radvd advertises itself as no default
// router, with a route to 2001:db8:77::/48 (RFC 4191's Route Information
// option): GoNet takes the route, with its preference, and reaches an
// address beyond the router by it alone.
func TestIPv6RouteInformationFromRadvd(t *testing.T) {
	h := newHost6(t, options{}, false)
	// The kernel's address beyond the route, added first: the kernel
	// installs its local route a moment after ip returns.
	beyond := netip.MustParseAddr("2001:db8:77::1")
	h.run(t, 5*time.Second, "ip", "-6", "addr", "add", beyond.String()+"/128", "dev", "lo")
	h.radvd(t, false, "AdvDefaultLifetime 0;", "route 2001:db8:77::/48 { AdvRoutePreference high; AdvRouteLifetime 1800; };")
	want := ipv6.Route{Dst: netip.MustParsePrefix("2001:db8:77::/48"), Gateway: h.kernelLL.WithZone(""), Preference: route.PreferenceHigh}
	waitFor(t, "the advertised route", 20*time.Second, func() bool {
		for _, r := range h.stack.IPv6().Routes() {
			if r.Dst == want.Dst && r.Gateway == want.Gateway && r.Preference == want.Preference {
				return true
			}
		}
		return false
	})
	for _, r := range h.stack.IPv6().Routes() {
		if r.Dst.Bits() == 0 {
			t.Errorf("a default route %v from a router of lifetime 0", r)
		}
	}
	public, err := ipv6.FromPrefix(slaacPrefix, ipv6.EUI64(h.mac()))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "GoNet's SLAAC address", 10*time.Second, func() bool {
		st, ok := h.stack.IPv6().AddressState(public)
		return ok && st == ipv6.Preferred
	})
	h.gonetPing(t, beyond, 56)
}

// TestIPv6StatelessDHCPv6FromDnsmasq: dnsmasq in the kernel's namespace
// advertises the prefix with the Other flag (ra-stateless) and serves
// DHCPv6 information; GoNet asks for it (RFC 8415 section 18.2.6) and its
// resolver takes the DNS server and search domain dnsmasq gives.
func TestIPv6StatelessDHCPv6FromDnsmasq(t *testing.T) {
	lookPath(t, "dnsmasq")
	h := newHost6(t, options{}, false)
	server := slaacPrefix.Addr().Next()
	h.run(t, 5*time.Second, "ip", "-6", "addr", "add", netip.PrefixFrom(server, 64).String(), "dev", h.dev, "nodad")
	startDnsmasqDHCPv6(t, h, "--dhcp-range="+slaacPrefix.Addr().String()+",ra-stateless,64",
		"--dhcp-option=option6:dns-server,["+server.String()+"]", "--dhcp-option=option6:domain-search,dhcp6.test")
	waitFor(t, "the DNS server and domain DHCPv6 gives", 30*time.Second, func() bool {
		for _, src := range h.stack.DNSSources() {
			if src.From.Protocol == stack.DNSFromDHCPv6 && slices.Contains(src.Search, "dhcp6.test") &&
				slices.Contains(src.Servers, netip.AddrPortFrom(server, 53)) {
				return true
			}
		}
		return false
	})
	if n := h.counter("DHCPv6." + h.dev + ".InReplies"); n < 1 {
		t.Errorf("DHCPv6.%s.InReplies = %d", h.dev, n)
	}
}

// TestIPv6StatefulDHCPv6FromDnsmasq: dnsmasq advertises the prefix with
// the Managed flag and no autonomous flag, and leases addresses by DHCPv6
// (RFC 8415 section 18); GoNet forms no SLAAC address, leases one in
// dnsmasq's range, takes it through DAD, and the kernel reaches it.
func TestIPv6StatefulDHCPv6FromDnsmasq(t *testing.T) {
	lookPath(t, "dnsmasq")
	h := newHost6(t, options{}, false)
	server := slaacPrefix.Addr().Next()
	h.run(t, 5*time.Second, "ip", "-6", "addr", "add", netip.PrefixFrom(server, 64).String(), "dev", h.dev, "nodad")
	first, last := netip.MustParseAddr("fd00:98::100"), netip.MustParseAddr("fd00:98::1ff")
	logged := startDnsmasqDHCPv6(t, h, "--dhcp-range="+first.String()+","+last.String()+",64,1h",
		"--dhcp-option=option6:dns-server,["+server.String()+"]")
	var leased netip.Addr
	waitFor(t, "GoNet to lease an address by DHCPv6 and pass its DAD", 30*time.Second, func() bool {
		addrs, err := h.stack.Addresses6(h.dev)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			if p := a.Prefix.Addr(); a.State == ndp.Preferred && first.Compare(p) <= 0 && p.Compare(last) <= 0 {
				leased = p
				return a.Prefix.Bits() == 128
			}
		}
		return false
	})
	for _, a := range must6(t, h) {
		if a.Prefix.Addr() != leased && slaacPrefix.Contains(a.Prefix.Addr()) {
			t.Errorf("GoNet formed %v in a prefix advertised without the autonomous flag", a.Prefix)
		}
	}
	h.ping6(t, leased, 56, 2)
	if n := h.counter("DHCPv6." + h.dev + ".Leases"); n < 1 {
		t.Errorf("DHCPv6.%s.Leases = %d", h.dev, n)
	}
	// Closing, GoNet gives the lease back (RFC 8415 section 18.2.7).
	h.stack.Close()
	waitFor(t, "dnsmasq to hear GoNet's Release", 5*time.Second, func() bool {
		return strings.Contains(logged(), "DHCPRELEASE")
	})
}

func must6(t *testing.T, h *host6) []ndp.Address {
	t.Helper()
	addrs, err := h.stack.Addresses6(h.dev)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// startDnsmasqDHCPv6 runs dnsmasq in h's namespace as the link's router
// (its advertisements) and DHCPv6 server, with args, until the test ends;
// it serves no DNS. It returns what dnsmasq has logged so far.
func startDnsmasqDHCPv6(t *testing.T, h *host6, args ...string) (logged func() string) {
	t.Helper()
	out := &logtest.Log{} // written by dnsmasq while the test reads it
	cmd := h.ns.Command(context.Background(), "dnsmasq", append([]string{"--keep-in-foreground", "--conf-file=/dev/null",
		"--no-resolv", "--no-hosts", "--port=0", "--interface=" + h.dev, "--bind-interfaces",
		"--pid-file=", "--log-facility=-", "--log-dhcp", "--enable-ra", "--ra-param=" + h.dev + ",3,1800"}, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start dnsmasq: %v", err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("dnsmasq:\n%s", out.String())
		}
	})
	return out.String
}

// TestIPv6DNSFromRadvd: a GoNet configured by SLAAC alone resolves names
// through the DNS server radvd names (RFC 8106's RDNSS option), completing
// a name with no dot in the domain radvd names (DNSSL), as an IPv6-only
// host without DHCPv6 must.
func TestIPv6DNSFromRadvd(t *testing.T) {
	lookPath(t, "dnsmasq")
	h := newHost6(t, options{}, false)
	server := slaacPrefix.Addr().Next() // the kernel's address in the prefix, which startRadvd adds
	web := netip.MustParseAddr("fd00:98::80")
	h.radvd(t, false, fmt.Sprintf("RDNSS %v { };", server), "DNSSL lab.test { };")
	startDnsmasqIn(t, h.host, server, "www.lab.test.", "--local=/lab.test/", "--host-record=www.lab.test,"+web.String())

	want := stack.DNSConfig{Servers: []netip.AddrPort{netip.AddrPortFrom(server, 53)}, Search: []string{"lab.test"}}
	waitFor(t, "the advertised DNS server and domain to reach the resolver", 20*time.Second, func() bool {
		d := h.stack.DNS()
		return slices.Equal(d.Servers, want.Servers) && slices.Equal(d.Search, want.Search)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	addrs, err := h.stack.LookupNetIP(ctx, "ip6", "www")
	if err != nil || !slices.Equal(addrs, []netip.Addr{web}) {
		t.Fatalf("LookupNetIP(www) = %v, %v; want %v (www.lab.test from the advertised server)", addrs, err, web)
	}

	// A server named by hand replaces the advertised ones.
	byHand := stack.DNSConfig{Servers: []netip.AddrPort{netip.MustParseAddrPort("[fd00:98::99]:53")}}
	if err := h.stack.SetDNS(byHand); err != nil {
		t.Fatal(err)
	}
	if d := h.stack.DNS(); !slices.Equal(d.Servers, byHand.Servers) || len(d.Search) != 0 {
		t.Errorf("with a server set by hand, DNS() = %+v, want %+v", d, byHand)
	}
}

// 7. TCP over IPv6 through a lossy link.

// kernelEcho6 runs an echo on a kernel TCP listener on the kernel's global
// address and port, until the test ends.
func (h *host6) kernelEcho6(t *testing.T, port int) {
	t.Helper()
	var l net.Listener
	err := h.ns.Do(func() error {
		var err error
		l, err = net.Listen("tcp6", addrPort6(kernelAddr6.Addr(), port))
		return err
	})
	if err != nil {
		t.Fatalf("kernel listens on port %d: %v", port, err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				c.SetDeadline(time.Now().Add(time.Minute))
				io.Copy(c, c)
				c.(*net.TCPConn).CloseWrite()
			})
		}
	})
}

func TestIPv6TCPThroughLoss(t *testing.T) {
	for i, loss := range []float64{0.01, 0.05} {
		spec := fmt.Sprintf("loss=%g,seed=%d", loss, 61+i)
		for _, dir := range []string{"kernel to GoNet's echo", "GoNet to the kernel's echo"} {
			t.Run(spec+"/"+dir, func(t *testing.T) {
				checkGoroutines(t)
				var f *fault.Endpoint
				h := newHost6(t, options{
					wrap:  faultLink(spec, &f),
					stack: stack.Config{TCP: tcp.Config{RTOMin: 50 * time.Millisecond}},
				}, true)
				defer h.logCounters(t, false)
				var c halfCloser
				if dir == "kernel to GoNet's echo" {
					h.serve6(t, 7, services.ServeEchoTCP)
					c = h.dialKernel6(t, "tcp6", addrPort6(gonetAddr6.Addr(), 7))
				} else {
					h.kernelEcho6(t, 7)
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					gc, err := h.stack.DialContext(ctx, "tcp6", addrPort6(kernelAddr6.Addr(), 7))
					if err != nil {
						t.Fatalf("GoNet dials the kernel: %v", err)
					}
					c = gc.(*tcp.Conn)
				}
				roundTrip(t, c, 4<<20, time.Minute)
				st := f.Stats()
				t.Logf("fault link: dropped %d in, %d out; GoNet: RetransSegs %d, FastRetrans %d, Timeouts %d, SACKRecovery %d",
					st.Rx.Dropped.Load(), st.Tx.Dropped.Load(), h.tcpCounter("RetransSegs"), h.tcpCounter("FastRetrans"),
					h.tcpCounter("Timeouts"), h.tcpCounter("SACKRecovery"))
				if st.Rx.Dropped.Load() == 0 || st.Tx.Dropped.Load() == 0 {
					t.Errorf("the fault link dropped nothing one way: it is not in the path")
				}
			})
		}
	}
}

// 8. Hostile input from the kernel's side of the link.

// TestIPv6HostileFramesFromTheLink writes hand-built frames onto the link
// from the kernel's side: each must be answered as its RFC says, or
// dropped and counted, and GoNet must answer pings afterwards. Each
// hostile case follows a well-formed twin that GoNet answers, so that a
// drop is known to come from what the case changes and not from how the
// test built the frame.
func TestIPv6HostileFramesFromTheLink(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	h := newHost6(t, options{}, true)
	li := h.injector(t)
	// GoNet learns the kernel's link-layer address first, so that its
	// answers leave at once.
	h.ping6(t, gonetAddr6.Addr(), 56, 1)
	src, dst := kernelAddr6.Addr(), gonetAddr6.Addr()
	mac := li.gonetMAC
	echo := func(seq uint16, data []byte) []byte {
		return icmpv6Message(src, dst, 128, 0, echoRequest(0xbeef, seq, data))
	}
	// isICMPv6 matches GoNet's datagrams carrying ICMPv6 of type typ
	// right after the fixed header.
	isICMPv6 := func(typ uint8) func([]byte) bool {
		return func(d []byte) bool { return d[6] == 58 && len(d) > 40 && d[40] == typ }
	}
	solicitedNode := ipv6.SolicitedNode(dst)
	snMAC := wire.MAC{0x33, 0x33, 0xff, dst.As16()[13], dst.As16()[14], dst.As16()[15]}
	ns := func(hopLimit uint8) []byte {
		body := make([]byte, 4, 4+16+8) // reserved
		t16 := dst.As16()
		body = append(body, t16[:]...)
		body = append(body, 1, 1) // source link-layer address option
		body = append(body, li.kernelMAC[:]...)
		return ipv6Datagram(src, solicitedNode, 58, hopLimit, icmpv6Message(src, solicitedNode, 135, 0, body))
	}
	// routed is an echo request behind a Routing header of type 0 (RFC
	// 2460's, deprecated by RFC 5095) naming one more address.
	routed := func(segmentsLeft uint8) []byte {
		rh := []byte{58, 2, 0, segmentsLeft, 0, 0, 0, 0}
		via := src.As16()
		rh = append(rh, via[:]...)
		return ipv6Datagram(src, dst, 43, 64, append(rh, echo(10, []byte("routed"))...))
	}
	// fragments splits an upper-layer payload of next header next into
	// fragments at the given offsets (multiples of 8), the last to the
	// end; ends, when set, gives each fragment's end instead, so that
	// they can overlap.
	fragments := func(next uint8, payload []byte, id uint32, starts []int, ends []int) [][]byte {
		var out [][]byte
		for i, s := range starts {
			e := len(payload)
			if ends != nil {
				e = ends[i]
			} else if i+1 < len(starts) {
				e = starts[i+1]
			}
			fh := fragmentHeader(next, s, e < len(payload), id)
			out = append(out, ipv6Datagram(src, dst, 44, 64, append(fh, payload[s:e]...)))
		}
		return out
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 4) // 64 bytes: the message is 72
	// destOptsEcho is an echo request behind an 8-byte Destination
	// Options header of padding alone.
	destOptsEcho := append([]byte{58, 0, 1, 4, 0, 0, 0, 0}, echo(30, data)...)
	nsTarget := dst.As16()
	fragmentedNS := append(append(make([]byte, 4), nsTarget[:]...), 1, 1)
	fragmentedNS = append(fragmentedNS, li.kernelMAC[:]...)
	fragmentedNS = icmpv6Message(src, dst, 135, 0, fragmentedNS)

	for _, tt := range []struct {
		name    string
		to      wire.MAC
		frames  [][]byte
		counter string // moves by one
		answer  uint8  // the ICMPv6 type GoNet answers with; 0: none
		check   func(t *testing.T, answer []byte)
	}{
		{"neighbour solicitation with hop limit 255", snMAC, [][]byte{ns(255)}, "NDP." + h.dev + ".OutNeighborAdvertisements", 136, nil},
		{"neighbour solicitation with hop limit 254 (RFC 4861 section 7.1.1)", snMAC, [][]byte{ns(254)}, "NDP." + h.dev + ".InBadHopLimit", 0, nil},
		{"routing header type 0 with no segments left (RFC 8200 section 4.4)", mac, [][]byte{routed(0)}, "ICMPv6.OutEchoReplies", 129, nil},
		{"routing header type 0 with a segment left (RFC 5095 section 3)", mac, [][]byte{routed(1)}, "IPv6.InUnknownRouting", 4, func(t *testing.T, a []byte) {
			// Parameter Problem, code 0, pointing at the routing
			// type: the Routing header's third byte.
			if code, ptr := a[41], binary.BigEndian.Uint32(a[44:]); code != 0 || ptr != 40+2 {
				t.Errorf("Parameter Problem code %d pointer %d, want code 0 pointer 42", code, ptr)
			}
		}},
		{"fragments whose first holds the whole chain", mac, fragments(60, destOptsEcho, 1, []int{0, 32}, nil), "ICMPv6.OutEchoReplies", 129, nil},
		// The Destination Options header alone in the first
		// fragment: the ICMPv6 header is in the second.
		{"a first fragment without the upper-layer header (RFC 7112)", mac, fragments(60, destOptsEcho, 2, []int{0, 8}, nil), "IPv6.InIncompleteChain", 0, nil},
		{"overlapping fragments (RFC 5722)", mac, fragments(60, destOptsEcho, 3, []int{0, 24}, []int{32, len(destOptsEcho)}), "IPv6.ReasmOverlaps", 0, nil},
		{"a fragmented neighbour solicitation (RFC 6980 section 5)", mac, fragments(58, fragmentedNS, 4, []int{0, 16}, nil), "IPv6.InFragmentedND", 0, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			li.drain()
			before := h.counter(tt.counter)
			for _, f := range tt.frames {
				li.send(t, tt.to, f)
			}
			waitFor(t, tt.counter+" to move", 5*time.Second, func() bool { return h.counter(tt.counter) > before })
			var got [][]byte
			if tt.answer != 0 {
				got = li.recv(2*time.Second, 1, isICMPv6(tt.answer))
				if len(got) == 0 {
					t.Fatalf("no ICMPv6 type %d from GoNet", tt.answer)
				}
				if tt.check != nil {
					tt.check(t, got[0])
				}
				return
			}
			// Nothing in answer: no advertisement, echo reply or
			// error.
			got = li.recv(300*time.Millisecond, 1, func(d []byte) bool {
				return isICMPv6(136)(d) || isICMPv6(129)(d) || isICMPv6(4)(d) || isICMPv6(1)(d)
			})
			if len(got) != 0 {
				t.Errorf("GoNet answered with ICMPv6 type %d", got[0][40])
			}
		})
	}
	if t.Failed() {
		h.logCounters(t, true)
	}
	// Still alive, and still reassembling.
	h.ping6(t, gonetAddr6.Addr(), 56, 2)
	h.ping6(t, h.gonetLL, 8000, 2)
}

// Path MTU discovery (RFC 8201) through a kernel router: the kernel's
// namespace forwards, over a veth of the IPv6 minimum MTU, 1280, to a
// second namespace whose host announces a larger MSS than its link
// carries, so only the router's Packet Too Big tells GoNet to send less.

var (
	routerVeth6 = netip.MustParsePrefix("fd00:97::1/64")
	farAddr6    = netip.MustParsePrefix("fd00:97::2/64")
)

func TestIPv6PathMTUDiscoveryThroughKernelRouter(t *testing.T) {
	lookPath(t, "socat")
	checkGoroutines(t)
	h := newHost6(t, options{}, true)
	defer h.logCounters(t, false)
	far := netnstest.New(t)
	if err := h.ns.AddVeth("vrouter", far, "vfar"); err != nil {
		t.Fatal(err)
	}
	if err := h.ns.ConfigureLink("vrouter", routerVeth6, 1280); err != nil {
		t.Fatal(err)
	}
	if err := far.ConfigureLink("vfar", farAddr6, 1280); err != nil {
		t.Fatal(err)
	}
	h.run(t, 5*time.Second, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The veth's addresses were added with DAD: wait for them.
	for _, ns := range []*netns.NS{h.ns, far} {
		waitFor(t, "DAD on the veth", 10*time.Second, func() bool {
			out, err := ns.IP(ctx, "-6", "addr", "show", "tentative")
			return err == nil && len(bytes.TrimSpace(out)) == 0
		})
	}
	if _, err := far.IP(ctx, "-6", "route", "add", kernelAddr6.Masked().String(), "via", routerVeth6.Addr().String(), "advmss", "1440"); err != nil {
		t.Fatal(err)
	}
	if err := h.stack.AddRoute(farAddr6.Masked(), h.kernelLL, h.dev); err != nil {
		t.Fatal(err)
	}
	c := sendThroughRouter(ctx, t, h.stack, far, "TCP6-LISTEN:5001,reuseaddr", netip.AddrPortFrom(farAddr6.Addr(), 5001))
	defer c.Close()
	ri, err := h.stack.IPv6().Route(farAddr6.Addr())
	if err != nil {
		t.Fatal(err)
	}
	checkPathMTU(t, h.stack, c, ri.MTU, wire.IPv6HeaderLen, "IPv6.PMTUUpdates", "ICMPv6.InPktTooBigs", "TCP.PMTUReductions")
	// Pings larger than the path now go in fragments that fit it.
	h.gonetPing(t, farAddr6.Addr(), 1452)
	h.gonetPing(t, farAddr6.Addr(), 8000)
}

// A hundred kernel pingers at once, each with its own size, all answered.
func TestIPv6HundredConcurrentPingers(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	h := newHost6(t, options{}, true)
	const pingers, count = 100, 5
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h.ping6(t, gonetAddr6.Addr(), 56, 1) // resolve first, as TestHundredConcurrentPingers says why
	base := h.counter("ICMPv6.OutEchoReplies")
	var wg sync.WaitGroup
	errs := make(chan error, pingers)
	for i := range pingers {
		wg.Go(func() {
			dst := gonetAddr6.Addr()
			if i%2 == 1 {
				dst = h.gonetLL
			}
			out, err := h.ns.Run(ctx, "ping", "-6", "-c", fmt.Sprint(count), "-i", "0.2", "-W", "3", "-s", fmt.Sprint(56+i*20), dst.String())
			if err != nil {
				errs <- fmt.Errorf("pinger %d: %v\n%s", i, err, out)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := h.counter("ICMPv6.OutEchoReplies") - base; got < pingers*count {
		t.Errorf("ICMPv6.OutEchoReplies = %d, want at least %d", got, pingers*count)
	}
}

// A datagram to a closed port is answered with ICMPv6 port unreachable
// (RFC 4443 section 3.1), which a connected kernel socket reports as
// ECONNREFUSED; a SYN to a closed port with a reset.
func TestIPv6ClosedPortsRefuseTheKernel(t *testing.T) {
	h := newHost6(t, options{}, true)
	var uc *net.UDPConn
	err := h.ns.Do(func() error {
		c, err := net.Dial("udp6", addrPort6(gonetAddr6.Addr(), 4444))
		if err == nil {
			uc = c.(*net.UDPConn)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	if _, err := uc.Write([]byte("anyone?")); err != nil {
		t.Fatal(err)
	}
	uc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := uc.Read(make([]byte, 10)); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("read after sending to a closed port: %v, want ECONNREFUSED", err)
	}
	if got := h.counter("ICMPv6.OutDestUnreachs"); got != 1 {
		t.Errorf("ICMPv6.OutDestUnreachs = %d, want 1", got)
	}
	err = h.ns.Do(func() error {
		c, err := net.DialTimeout("tcp6", addrPort6(gonetAddr6.Addr(), 4444), 5*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("TCP to a closed port: %v, want ECONNREFUSED", err)
	}
}

// The kernel's UDP socket sends GoNet's echo datagrams up to the largest
// IPv6 carries, 65527 bytes (RFC 8200 section 3's 16-bit payload length
// less the UDP header), in fragments both ways, and gets each back whole.
func TestIPv6KernelSocketSendsLargestDatagram(t *testing.T) {
	h := newHost6(t, options{}, true)
	c, err := h.stack.ListenPacket("udp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { c.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			c.WriteTo(buf[:n], from)
		}
	}()
	var kc *net.UDPConn
	err = h.ns.Do(func() error {
		c, err := net.Dial("udp6", addrPort6(gonetAddr6.Addr(), 7))
		if err == nil {
			kc = c.(*net.UDPConn)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	for _, size := range []int{0, 1, 1452, 1453, 30000, 65488, 65527} {
		msg := bytes.Repeat([]byte{byte(size)}, size)
		if _, err := kc.Write(msg); err != nil {
			t.Fatalf("kernel sends %d bytes: %v", size, err)
		}
		buf := make([]byte, 65536)
		kc.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := kc.Read(buf)
		if err != nil {
			var nz []string
			for k, v := range h.stack.Counters() {
				if v != 0 && (strings.HasPrefix(k, "IPv6.") || strings.HasPrefix(k, "UDP.")) {
					nz = append(nz, fmt.Sprintf("%s=%d", k, v))
				}
			}
			slices.Sort(nz)
			t.Fatalf("kernel reads the echo of %d bytes: %v; GoNet's counters: %v", size, err, nz)
		}
		if !bytes.Equal(buf[:n], msg) {
			t.Fatalf("echo of %d bytes came back as %d bytes", size, n)
		}
	}
}

// GoNet answers the kernel's neighbour unreachability detection (RFC 4861
// section 7.3): with the kernel's reachable time cut to half a second,
// its entry for GoNet goes stale between pings, and the unicast probes it
// then sends must be answered, or the pings would stop.
func TestIPv6KernelProbesGoNetsReachability(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	h := newHost6(t, options{}, true)
	h.run(t, 5*time.Second, "sysctl", "-qw",
		"net.ipv6.neigh."+h.dev+".base_reachable_time_ms=500",
		"net.ipv6.neigh."+h.dev+".delay_first_probe_time=1")
	before := h.ndpCounter("InNeighborSolicits")
	// Ten pings, 0.7 s apart: each finds the entry stale or being
	// probed.
	h.ping6(t, gonetAddr6.Addr(), 56, 1)
	out := h.run(t, 20*time.Second, "ping", "-6", "-c", "10", "-i", "0.7", "-W", "2", gonetAddr6.Addr().String())
	if sent, recv := pingCounts(t, out); recv != sent {
		t.Fatalf("%d of %d pings answered while the kernel probed:\n%s", recv, sent, out)
	}
	if n := h.ndpCounter("InNeighborSolicits") - before; n < 2 {
		t.Errorf("GoNet received %d solicitations in 7 s: the kernel did not probe", n)
	}
	neigh := h.run(t, 5*time.Second, "ip", "-6", "neigh", "show", gonetAddr6.Addr().String(), "dev", h.dev)
	if strings.Contains(neigh, "FAILED") || !strings.Contains(neigh, h.tap.MAC().String()) {
		t.Errorf("the kernel's entry for GoNet: %s", neigh)
	}
}

// TCP's forward progress confirms the kernel's reachability to GoNet's
// neighbour discovery (RFC 4861 section 7.3.1): with a reachable time of
// about a second, a connection exchanging data for eight seconds keeps
// the kernel's entry REACHABLE, and GoNet never probes it. Without the
// confirmations the entry would go STALE, then DELAY, and after
// DELAY_FIRST_PROBE_TIME (5 s) be probed with unicast solicitations.
func TestIPv6TCPProgressConfirmsTheKernelsReachability(t *testing.T) {
	checkGoroutines(t)
	h := newHost6(t, options{stack: stack.Config{NDP: ndp.Config{BaseReachableTime: time.Second}}}, true)
	h.kernelEcho6(t, 7)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := h.stack.DialContext(ctx, "tcp6", addrPort6(kernelAddr6.Addr(), 7))
	if err != nil {
		t.Fatalf("GoNet dials the kernel: %v", err)
	}
	defer c.Close()
	before := h.ndpCounter("OutNeighborSolicits")
	c.SetDeadline(time.Now().Add(15 * time.Second))
	buf := make([]byte, 1024)
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); {
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := h.ndpCounter("OutNeighborSolicits") - before; n != 0 {
		t.Errorf("GoNet sent %d solicitations during the exchange: TCP's progress did not confirm the kernel's reachability", n)
	}
	if n, ok := h.nd.Neighbor(kernelAddr6.Addr()); !ok || n.State != ndp.Reachable {
		t.Errorf("GoNet's entry for the kernel: %+v (%v), want REACHABLE", n, ok)
	}
}
