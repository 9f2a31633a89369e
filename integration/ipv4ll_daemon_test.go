package integration

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/ipv4ll"
)

// TestDaemonRemembersItsIPv4LinkLocalAddress: `gonet up -addr ipv4ll
// -ipv4ll-file FILE` keeps the address it claims in FILE, and the next
// start probes for it first (RFC 3927 section 2.1) and takes it back,
// though a new MAC seeds another sequence; once the kernel holds it, the
// start after passes it over for its MAC's first candidate and keeps that
// one instead.
func TestDaemonRemembersItsIPv4LinkLocalAddress(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	bin := buildGonet(t)
	ns := netnstest.New(t)
	dev := netns.DeviceName()
	// The TAP outlives each daemon, its kernel side up throughout.
	if out, err := ns.IP(context.Background(), "tuntap", "add", "dev", dev, "mode", "tap"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := ns.ConfigureLink(dev, kernelAddr, 1500); err != nil {
		t.Fatal(err)
	}
	// The kernel reaches 169.254/16 on the link, GoNet the kernel's
	// 10.99.0.1 from its link-local address alone (section 2.6.2).
	if out, err := ns.IP(context.Background(), "route", "add", ipv4ll.Prefix.String(), "dev", dev); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	file := filepath.Join(t.TempDir(), "ipv4ll")
	macs := []net.HardwareAddr{{0x02, 0, 0x5e, 0x10, 0, 1}, {0x02, 0, 0x5e, 0x10, 0, 2}, {0x02, 0, 0x5e, 0x10, 0, 3}}
	first := ipv4ll.Candidates(macs[0])()
	if ipv4ll.Candidates(macs[1])() == first || ipv4ll.Candidates(macs[2])() == first {
		t.Fatalf("the MACs' sequences start alike at %v: the test proves nothing", first)
	}
	// up runs a daemon with MAC mac until stop, and returns its address
	// and control socket.
	up := func(mac net.HardwareAddr) (netip.Addr, string, func()) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		sock := filepath.Join(t.TempDir(), "up.sock")
		d := startDaemon(t, ctx, ns, "gonet: up "+dev+" 169.254.", bin, "up", "-tap", dev, "-addr", "ipv4ll", "-ipv4ll-file", file,
			"-no-ipv6", "-mac", mac.String(), "-control", sock)
		addr, err := netip.ParsePrefix(strings.Fields(d.lines.Text())[3])
		if err != nil {
			cancel()
			t.Fatalf("ready line %q: %v", d.lines.Text(), err)
		}
		return addr.Addr(), sock, func() { cancel(); d.cmd.Wait() }
	}
	kept := func() netip.Addr {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		a, err := netip.ParseAddr(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("%s holds %q: %v", file, b, err)
		}
		return a
	}
	stats := func(sock string) string {
		t.Helper()
		out, err := exec.Command(bin, "stats", "-control", sock).Output()
		if err != nil {
			t.Fatalf("gonet stats: %v", err)
		}
		return string(out)
	}

	a, _, stop := up(macs[0])
	if a != first {
		t.Errorf("first start claimed %v, want %v, its MAC's first candidate", a, first)
	}
	if k := kept(); k != a {
		t.Errorf("%s holds %v, want %v", file, k, a)
	}
	stop()

	// Another MAC, the same file: the address of last time again.
	a2, sock, stop := up(macs[1])
	if a2 != a {
		t.Errorf("second start claimed %v, want %v, the one remembered", a2, a)
	}
	if st := stats(sock); !strings.Contains(st, "IPv4LL."+dev+".Probes 1\n") {
		t.Errorf("second start's counters, want one probe:\n%s", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if out, err := ns.Run(ctx, "ping", "-c", "2", "-i", "0.2", "-W", "3", a2.String()); err != nil {
		t.Errorf("the kernel pings %v: %v\n%s", a2, err, out)
	}
	stop()

	// The kernel takes it: the next start finds it held and moves on.
	if out, err := ns.IP(ctx, "addr", "add", netip.PrefixFrom(a, 16).String(), "dev", dev); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := ipv4ll.Candidates(macs[2])()
	a3, sock, stop := up(macs[2])
	defer stop()
	if a3 != want {
		t.Errorf("third start claimed %v, want %v: the kernel holds %v", a3, want, a)
	}
	if st := stats(sock); !strings.Contains(st, "IPv4LL."+dev+".InUse 1\n") {
		t.Errorf("third start's counters, want the remembered address found in use:\n%s", st)
	}
	if k := kept(); k != a3 {
		t.Errorf("%s holds %v after the third start, want %v", file, k, a3)
	}
}
