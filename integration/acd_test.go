package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/pcap"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/stack"
)

// Address conflict detection (RFC 5227) and ARP failures against the
// kernel: the kernel answers GoNet's probes for an address it holds,
// claims GoNet's address with iputils arping, and is the link on which
// GoNet's connection to an address no one holds fails.

// acdConfig shortens RFC 5227's timers so that a probe takes a fraction
// of a second; the kernel answers within microseconds.
var acdConfig = arp.ACDConfig{
	ProbeWait: 10 * time.Millisecond, ProbeMin: 50 * time.Millisecond, ProbeMax: 100 * time.Millisecond,
	AnnounceWait: 300 * time.Millisecond, AnnounceInterval: 100 * time.Millisecond,
}

// newBareHost is newHost without GoNet's address: the test assigns it.
// With capture set, GoNet's frames are written to that pcap file.
func newBareHost(t *testing.T, cfg stack.Config, capture string) (*host, net.HardwareAddr) {
	t.Helper()
	ns := netnstest.New(t)
	h := &host{ns: ns, dev: netns.DeviceName()}
	var kernelMAC net.HardwareAddr
	err := ns.Do(func() error {
		var err error
		h.tap, err = tap.Open(h.dev, tap.Options{MTU: 1500})
		return err
	})
	if err != nil {
		t.Fatalf("open TAP in %s: %v", ns, err)
	}
	if err := ns.ConfigureLink(h.dev, kernelAddr, 1500); err != nil {
		h.tap.Close()
		t.Fatal(err)
	}
	err = ns.Do(func() error {
		ifi, err := net.InterfaceByName(h.dev)
		if err == nil {
			kernelMAC = ifi.HardwareAddr
		}
		return err
	})
	if err != nil {
		h.tap.Close()
		t.Fatal(err)
	}
	var ep link.Endpoint = h.tap
	if capture != "" {
		c, err := pcap.Create(ep, capture)
		if err != nil {
			h.tap.Close()
			t.Fatal(err)
		}
		ep = c
	}
	h.stack = stack.New(cfg)
	t.Cleanup(func() { stacktest.Closed(t, h.stack) })
	if err := h.stack.AddNIC(h.dev, ep); err != nil {
		t.Fatal(err)
	}
	return h, kernelMAC
}

func TestACDFindsTheKernelHoldingTheAddress(t *testing.T) {
	h, kernelMAC := newBareHost(t, stack.Config{ARP: arp.Config{ACD: acdConfig}, NoIPv6: true}, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The kernel answers a probe for its address (Linux's arp_process
	// replies to sender 0.0.0.0 for an address of its own).
	err := h.stack.AddAddressWith(ctx, h.dev, kernelAddr, stack.AddressOptions{ACD: true})
	var ce *arp.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("adding the kernel's address with ACD: %v, want a conflict", err)
	}
	if !bytes.Equal(ce.MAC[:], kernelMAC) || ce.Addr != kernelAddr.Addr() {
		t.Errorf("conflict %v, want %v held by the kernel's %v", ce, kernelAddr.Addr(), kernelMAC)
	}
	if !strings.Contains(err.Error(), kernelMAC.String()) {
		t.Errorf("error %q does not name the kernel's MAC %v", err, kernelMAC)
	}
	if h.stack.IPv4().IsLocal(kernelAddr.Addr()) {
		t.Error("the kernel's address was assigned to GoNet")
	}
	// The DHCP client's entry point says the same.
	if inUse, err := h.stack.Probe(ctx, h.dev, kernelAddr.Addr()); !inUse || err != nil {
		t.Errorf("Probe(%v) = %v, %v; want in use", kernelAddr.Addr(), inUse, err)
	}
	// An address no one holds is free, and then assigned.
	if inUse, err := h.stack.Probe(ctx, h.dev, gonetAddr.Addr()); inUse || err != nil {
		t.Fatalf("Probe(%v) = %v, %v; want free", gonetAddr.Addr(), inUse, err)
	}
	if err := h.stack.AddAddressWith(ctx, h.dev, gonetAddr, stack.AddressOptions{ACD: true}); err != nil {
		t.Fatalf("adding a free address with ACD: %v", err)
	}
	h.run(t, 10*time.Second, "ping", "-c", "1", "-W", "5", gonetAddr.Addr().String())
	c := h.stack.Counters()
	// The probes of the kernel's address end at its reply to their
	// first; those of a free one send three each.
	if c["ARP."+h.dev+".ProbeConflicts"] != 2 || c["ARP."+h.dev+".OutProbes"] != 1+1+3+3 {
		t.Errorf("ProbeConflicts %d, OutProbes %d; want 2 and 8",
			c["ARP."+h.dev+".ProbeConflicts"], c["ARP."+h.dev+".OutProbes"])
	}
}

func TestACDDefendsAgainstTheKernelClaimingTheAddress(t *testing.T) {
	netnstest.RequireTool(t, "arping")
	capture := filepath.Join(t.TempDir(), "acd.pcap")
	h, kernelMAC := newBareHost(t, stack.Config{ARP: arp.Config{ACD: acdConfig}, NoIPv6: true}, capture)
	events := make(chan arp.Conflict, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o := stack.AddressOptions{ACD: true, Defend: arp.DefendOnce, OnConflict: func(c arp.Conflict) { events <- c }}
	if err := h.stack.AddAddressWith(ctx, h.dev, gonetAddr, o); err != nil {
		t.Fatal(err)
	}
	// Both announcements out (section 2.3), before the kernel speaks.
	for deadline := time.Now().Add(5 * time.Second); h.stack.Counters()["ARP."+h.dev+".OutGratuitous"] < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("GoNet did not announce its address twice")
		}
	}
	addr := gonetAddr.Addr().String()
	// The kernel probing for GoNet's address hears it is taken (RFC
	// 5227 section 2.1.1: the holder answers): arping -D exits 1 on a
	// reply.
	out, err := h.ns.Run(ctx, "arping", "-D", "-c", "2", "-w", "3", "-I", h.dev, addr)
	if err == nil || !strings.Contains(string(out), "Received 1 response") {
		t.Fatalf("arping -D for GoNet's address: %v\n%s\nwant GoNet's answer", err, out)
	}
	// The kernel claims the address: assigned to its side and announced.
	h.run(t, 5*time.Second, "ip", "addr", "add", addr+"/32", "dev", h.dev)
	claim := func() {
		t.Helper()
		h.run(t, 5*time.Second, "arping", "-U", "-c", "1", "-I", h.dev, "-s", addr, addr)
	}
	next := func() arp.Conflict {
		t.Helper()
		select {
		case c := <-events:
			return c
		case <-time.After(5 * time.Second):
			t.Fatal("no conflict reported")
			return arp.Conflict{}
		}
	}
	claim()
	c := next()
	if !c.Defended || c.GaveUp || !bytes.Equal(c.MAC[:], kernelMAC) {
		t.Fatalf("first claim: %+v, want defended against %v", c, kernelMAC)
	}
	if !h.stack.IPv4().IsLocal(gonetAddr.Addr()) {
		t.Fatal("address removed after the first claim")
	}
	// A second claim within DEFEND_INTERVAL (10 s): given up (section
	// 2.4 (b)).
	claim()
	c = next()
	if c.Defended || !c.GaveUp {
		t.Fatalf("second claim: %+v, want given up", c)
	}
	if h.stack.IPv4().IsLocal(gonetAddr.Addr()) {
		t.Error("address still GoNet's after giving it up")
	}
	cs := h.stack.Counters()
	if cs["ARP."+h.dev+".Defences"] != 1 || cs["ARP."+h.dev+".AddressesLost"] != 1 {
		t.Errorf("Defences %d, AddressesLost %d; want 1 and 1", cs["ARP."+h.dev+".Defences"], cs["ARP."+h.dev+".AddressesLost"])
	}
	// On the wire, decoded by gopacket from GoNet's capture: three
	// probes, two announcements, the answer to arping's probe, and one
	// announcement in defence, after the kernel's first claim only.
	if err := h.stack.Close(); err != nil {
		t.Fatal(err)
	}
	got := arpsFrom(t, capture, h.tap.MAC())
	want := []string{"probe", "probe", "probe", "announce", "announce", "reply to probe", "announce"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("GoNet sent %v, want %v", got, want)
	}
}

// arpsFrom names the ARP packets mac sent about gonetAddr, in a capture
// of both directions, as RFC 5227 calls them.
func arpsFrom(t *testing.T, file string, mac net.HardwareAddr) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	ours := gonetAddr.Addr()
	var names []string
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		eth, _ := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		a, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP)
		if !ok || eth == nil || !bytes.Equal(eth.SrcMAC, mac) {
			continue
		}
		spa, _ := netip.AddrFromSlice(a.SourceProtAddress)
		tpa, _ := netip.AddrFromSlice(a.DstProtAddress)
		switch {
		case a.Operation == layers.ARPRequest && spa.IsUnspecified() && tpa == ours:
			names = append(names, "probe")
		case a.Operation == layers.ARPRequest && spa == ours && tpa == ours:
			names = append(names, "announce")
		case a.Operation == layers.ARPReply && spa == ours && tpa.IsUnspecified():
			names = append(names, "reply to probe")
		case spa == ours || tpa == ours:
			names = append(names, fmt.Sprintf("op %d %v > %v", a.Operation, spa, tpa))
		}
	}
	return names
}

// TestConnectToAnAddressNoOneHoldsIsHostUnreachable pins RFC 1122 section
// 2.3.2.2 against the kernel's link: GoNet's connection to an address of
// the kernel's subnet that no one holds fails with EHOSTUNREACH once ARP
// gives up, as the kernel's own connect does.
func TestConnectToAnAddressNoOneHoldsIsHostUnreachable(t *testing.T) {
	h := newHost(t, options{stack: stack.Config{ARP: arp.Config{RetryInterval: 100 * time.Millisecond}, NoIPv6: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := h.stack.DialContext(ctx, "tcp", "10.99.0.77:80")
	if !errors.Is(err, syscall.EHOSTUNREACH) {
		t.Fatalf("dial an address no one holds: %v, want EHOSTUNREACH", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the error took %v, want ARP's give-up time (300 ms)", d)
	}
	if got := h.stack.Counters()["ARP."+h.dev+".ResolveFailed"]; got != 1 {
		t.Errorf("ResolveFailed = %d, want 1", got)
	}
	// The kernel's own connect, on the same link, fails the same way
	// (after its own 3 s of ARP).
	err = h.ns.Do(func() error {
		c, err := net.DialTimeout("tcp", "10.99.0.78:80", 10*time.Second)
		if c != nil {
			c.Close()
		}
		return err
	})
	if !errors.Is(err, syscall.EHOSTUNREACH) {
		t.Errorf("the kernel's connect to an address no one holds: %v, want EHOSTUNREACH as GoNet's", err)
	}
}

// TestDaemonACDFailsOnAnAddressInUse runs `gonet up -acd` for the address
// the kernel holds on the TAP device: the daemon must not come up, and
// its error must name the MAC that holds the address.
func TestDaemonACDFailsOnAnAddressInUse(t *testing.T) {
	bin := buildGonet(t)
	ns := netnstest.New(t)
	dev := netns.DeviceName()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The kernel holds its address on the TAP device before the daemon
	// opens it.
	if out, err := ns.IP(ctx, "tuntap", "add", "dev", dev, "mode", "tap"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := ns.ConfigureLink(dev, kernelAddr, 1500); err != nil {
		t.Fatal(err)
	}
	var kernelMAC net.HardwareAddr
	if err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err == nil {
			kernelMAC = ifi.HardwareAddr
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	cmd := ns.Command(ctx, bin, "up", "-tap", dev, "-addr", kernelAddr.String(), "-acd", "-no-ipv6", "-control", "none")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("gonet up -acd on the kernel's address: %v\n%s\nwant a failure", err, out)
	}
	for _, want := range []string{kernelAddr.Addr().String() + " is already in use", kernelMAC.String()} {
		if !strings.Contains(string(out), want) {
			t.Errorf("gonet up said %q, want %q in it", out, want)
		}
	}
	t.Logf("gonet up: %s", bytes.TrimSpace(out))
}
