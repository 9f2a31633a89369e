package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/fault"
	"github.com/gonetstack/gonet/link/pcap"
)

// pingStats extracts "N packets transmitted, M received" from ping's summary.
var pingSummary = regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`)

func pingCounts(t *testing.T, out string) (sent, recv int) {
	t.Helper()
	m := pingSummary.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary in ping output:\n%s", out)
	}
	fmt.Sscan(m[1], &sent)
	fmt.Sscan(m[2], &recv)
	return sent, recv
}

func TestKernelPingsGoNetAtEverySize(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	h := newHost(t, options{})
	for _, size := range []int{56, 1472, 1473, 8000, 65000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			out := h.run(t, 20*time.Second, "ping", "-c", "3", "-i", "0.2", "-W", "2", "-s", fmt.Sprint(size), gonetAddr.Addr().String())
			if sent, recv := pingCounts(t, out); recv != sent {
				t.Fatalf("ping -s %d: %d of %d answered:\n%s", size, recv, sent, out)
			}
			// The reply carries the request's data whole: ping checks it
			// and says "wrong data byte" otherwise.
			if strings.Contains(out, "wrong data") || strings.Contains(out, "truncated") {
				t.Fatalf("ping -s %d saw damaged replies:\n%s", size, out)
			}
		})
	}
	c := h.stack.Counters()
	if c["IPv4.ReasmOKs"] == 0 || c["IPv4.FragCreates"] == 0 {
		t.Errorf("large pings were not reassembled and fragmented: ReasmOKs=%d FragCreates=%d", c["IPv4.ReasmOKs"], c["IPv4.FragCreates"])
	}
}

func TestHundredConcurrentPingers(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	h := newHost(t, options{})
	const pingers, count = 100, 5
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Resolve GoNet's address first: the kernel holds packets waiting on
	// ARP in a queue of unres_qlen_bytes (about 200 KB of buffers), and
	// the first requests of a hundred pingers at once overflow it, lost
	// before they reach the TAP.
	if out, err := h.ns.Run(ctx, "ping", "-c", "1", "-W", "3", gonetAddr.Addr().String()); err != nil {
		t.Fatalf("first ping: %v\n%s", err, out)
	}
	base := h.stack.Counters()["ICMP.OutEchoReps"]
	var wg sync.WaitGroup
	errs := make(chan error, pingers)
	for i := range pingers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := h.ns.Run(ctx, "ping", "-c", fmt.Sprint(count), "-i", "0.2", "-W", "3", "-s", fmt.Sprint(56+i*10), gonetAddr.Addr().String())
			if err != nil {
				errs <- fmt.Errorf("pinger %d: %v", i, err)
			}
			_ = out
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := h.stack.Counters()["ICMP.OutEchoReps"] - base; got < pingers*count {
		// Say where the requests went: dropped in the stack (counted), or
		// never read from the TAP (the kernel's tx_dropped on its side).
		var drops []string
		for name, v := range h.stack.Counters() {
			if v != 0 && (strings.Contains(name, "Drop") || strings.Contains(name, "Echo") || strings.HasPrefix(name, "NIC.Rx")) {
				drops = append(drops, fmt.Sprintf("%s=%d", name, v))
			}
		}
		sort.Strings(drops)
		out, _ := h.ns.Run(ctx, "ip", "-s", "link", "show", "dev", h.dev)
		t.Errorf("ICMP.OutEchoReps = %d, want at least %d; counters %v; kernel side:\n%s", got, pingers*count, drops, out)
	}
}

func TestGoNetPingsKernel(t *testing.T) {
	h := newHost(t, options{})
	for _, size := range []int{56, 1472, 1473, 8000, 65000} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rtt, err := h.stack.Ping(ctx, kernelAddr.Addr(), size)
		cancel()
		if err != nil {
			t.Fatalf("ping the kernel with %d bytes: %v", size, err)
		}
		t.Logf("%d bytes: rtt %v", size, rtt)
	}
}

func TestUDPEchoWithSocat(t *testing.T) {
	netnstest.RequireTool(t, "socat")
	h := newHost(t, options{})
	h.serveUDP(t, 7, func(b []byte) []byte { return b })
	for _, size := range []int{1, 1472, 30000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			msg := make([]byte, size)
			for i := range msg {
				msg[i] = 'a' + byte(i%26)
			}
			// A file on stdin: socat reads it in one read(2), so the
			// message goes out as one datagram.
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
			cmd := h.ns.Command(ctx, "socat", "-b", "65536", "-t", "0.5", "-T", "5", "STDIO", "UDP:"+gonetUDPAddr(7))
			cmd.Stdin = f
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("socat: %v: %s", err, errb.String())
			}
			if !bytes.Equal(out.Bytes(), msg) {
				t.Fatalf("echo of %d bytes came back as %d bytes, equal=%v", size, out.Len(), bytes.Equal(out.Bytes(), msg))
			}
		})
	}
}

func TestKernelSocketSendsLargestDatagram(t *testing.T) {
	h := newHost(t, options{})
	h.serveUDP(t, 7, func(b []byte) []byte { return b })
	c, err := h.ns.DialUDP(gonetUDPAddr(7))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, size := range []int{0, 1, 1472, 1473, 30000, 65507} {
		msg := bytes.Repeat([]byte{byte(size)}, size)
		if _, err := c.Write(msg); err != nil {
			t.Fatalf("kernel send %d bytes: %v", size, err)
		}
		buf := make([]byte, 65536)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("kernel read echo of %d bytes: %v", size, err)
		}
		if !bytes.Equal(buf[:n], msg) {
			t.Fatalf("echo of %d bytes came back as %d bytes", size, n)
		}
	}
}

func TestClosedPortIsRefusedByKernel(t *testing.T) {
	h := newHost(t, options{})
	c, err := h.ns.DialUDP(gonetUDPAddr(4444))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A connected kernel socket reports the ICMP port unreachable that
	// answered its datagram as ECONNREFUSED on the next call.
	if _, err := c.Write([]byte("anyone?")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 10))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("read after sending to a closed port: %v, want ECONNREFUSED", err)
	}
	if got := h.stack.Counters()["ICMP.OutDestUnreachs"]; got != 1 {
		t.Errorf("ICMP.OutDestUnreachs = %d, want 1", got)
	}
}

func TestARPEntriesOnBothSides(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	h := newHost(t, options{})
	h.run(t, 10*time.Second, "ping", "-c", "1", "-W", "2", gonetAddr.Addr().String())
	neigh := h.run(t, 5*time.Second, "ip", "neigh", "show", "dev", h.dev)
	want := fmt.Sprintf("%s lladdr %s", gonetAddr.Addr(), h.tap.MAC())
	if !strings.Contains(neigh, want) {
		t.Fatalf("kernel's ip neigh lacks %q:\n%s", want, neigh)
	}
	// GoNet learned the kernel from its request.
	kernelMAC := strings.TrimSpace(h.run(t, 5*time.Second, "cat", "/sys/class/net/"+h.dev+"/address"))
	ns, err := h.stack.Neighbors(h.dev)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range ns {
		if n.IP == kernelAddr.Addr() && n.MAC.String() == kernelMAC {
			found = true
		}
	}
	if !found {
		t.Fatalf("GoNet's ARP cache %v lacks %v at %s", ns, kernelAddr.Addr(), kernelMAC)
	}
}

// lookPath fails or skips (by the CI rule) when a tool is missing.
func lookPath(t *testing.T, name string) string {
	t.Helper()
	netnstest.RequireTool(t, name)
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCaptureReadByTcpdump(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	tcpdump := lookPath(t, "tcpdump")
	file := filepath.Join(t.TempDir(), "gonet.pcap")
	h := newHost(t, options{wrap: func(t *testing.T, ep link.Endpoint) link.Endpoint {
		c, err := pcap.Create(ep, file)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}})
	h.run(t, 10*time.Second, "ping", "-c", "2", "-i", "0.2", "-W", "2", gonetAddr.Addr().String())
	// The capture has every frame once the stack closed its NIC.
	if err := h.stack.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tcpdump, "-r", file, "-nn").CombinedOutput()
	if err != nil {
		t.Fatalf("tcpdump -r: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{
		"ARP, Request who-has " + gonetAddr.Addr().String(),
		"ARP, Reply " + gonetAddr.Addr().String() + " is-at",
		"ICMP echo request",
		gonetAddr.Addr().String() + " > " + kernelAddr.Addr().String() + ": ICMP echo reply",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("tcpdump output lacks %q:\n%s", want, text)
		}
	}
}

func TestPingsAnsweredThroughLossyLink(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	var f *fault.Endpoint
	h := newHost(t, options{wrap: func(t *testing.T, ep link.Endpoint) link.Endpoint {
		cfg, err := fault.ParseSpec("loss=0.1,dup=0.02,reorder=0.02,corrupt=0.02,seed=7")
		if err != nil {
			t.Fatal(err)
		}
		f = fault.New(ep, cfg)
		return f
	}})
	const count = 100
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// ping exits 1 when some replies are lost: read its summary instead.
	out, _ := h.ns.Run(ctx, "ping", "-c", fmt.Sprint(count), "-i", "0.01", "-W", "1", "-s", "1000", gonetAddr.Addr().String())
	sent, recv := pingCounts(t, string(out))
	st := f.Stats()
	lost := st.Rx.Dropped.Load() + st.Tx.Dropped.Load()
	t.Logf("%d of %d answered; fault link dropped %d frames, corrupted %d, duplicated %d",
		recv, sent, lost, st.Rx.Corrupted.Load()+st.Tx.Corrupted.Load(), st.Rx.Duplicated.Load()+st.Tx.Duplicated.Load())
	if recv < sent/2 {
		t.Errorf("only %d of %d pings answered through a 10%% lossy link", recv, sent)
	}
	if recv == sent || lost == 0 {
		t.Errorf("no loss seen (%d of %d answered, %d dropped): the fault link is not in the path", recv, sent, lost)
	}
	c := h.stack.Counters()
	if st.Rx.Corrupted.Load() > 0 && c["IPv4.InCsumErrors"]+c["ICMP.InCsumErrors"]+c["NIC."+h.dev+".RxNotForUs"]+c["ARP."+h.dev+".InMalformed"]+c["IPv4.InAddrErrors"]+c["IPv4.InBadVersion"]+c["IPv4.InBadHeaderLen"]+c["IPv4.InBadTotalLen"]+c["NIC."+h.dev+".RxUnknownType"]+c["IPv4.InMartians"] == 0 {
		t.Errorf("frames were corrupted on the way in but no layer counted a bad one")
	}
}

// TestDefaultGatewayRoutesOffLink gives the kernel an address on another
// subnet (on its loopback, inside the namespace) and has GoNet reach it
// through the kernel as its default gateway.
func TestDefaultGatewayRoutesOffLink(t *testing.T) {
	h := newHost(t, options{})
	far := netip.MustParseAddr("10.98.0.1")
	h.run(t, 5*time.Second, "ip", "addr", "add", far.String()+"/32", "dev", "lo")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := h.stack.Ping(ctx, far, 56); err == nil {
		t.Fatalf("ping %v without a route succeeded", far)
	}
	if err := h.stack.SetDefaultGateway(kernelAddr.Addr(), h.dev); err != nil {
		t.Fatal(err)
	}
	if _, err := h.stack.Ping(ctx, far, 56); err != nil {
		t.Fatalf("ping %v through the gateway: %v", far, err)
	}
	if got := h.stack.Counters()["IPv4.OutNoRoutes"]; got != 1 {
		t.Errorf("IPv4.OutNoRoutes = %d, want 1 (the ping before the route)", got)
	}
}
