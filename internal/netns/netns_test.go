package netns_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
)

// listNamespaces returns the names `ip netns list` shows.
func listNamespaces(t *testing.T) []string {
	t.Helper()
	out, err := run(context.Background(), "ip", "netns", "list")
	if err != nil {
		t.Fatalf("ip netns list: %v: %s", err, out)
	}
	var names []string
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names
}

// ours returns the namespaces this test binary made.
func ours(names []string) []string {
	prefix := fmt.Sprintf("-%d-", os.Getpid())
	var r []string
	for _, n := range names {
		if strings.Contains(n, prefix) {
			r = append(r, n)
		}
	}
	return r
}

func run(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return osexec.CommandContext(ctx, name, args...).CombinedOutput()
}

// inode returns the inode of a namespace file, which identifies the
// namespace.
func inode(t testing.TB, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return st.Ino
}

// socketNamespace returns the inode of the namespace a socket lives in
// (ioctl SIOCGSKNS gives a descriptor for it).
func socketNamespace(t testing.TB, c syscall.Conn) uint64 {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ino uint64
	var ierr error
	err = rc.Control(func(fd uintptr) {
		nsfd, err := unix.IoctlRetInt(int(fd), unix.SIOCGSKNS)
		if err != nil {
			ierr = err
			return
		}
		defer unix.Close(nsfd)
		var st unix.Stat_t
		ierr = unix.Fstat(nsfd, &st)
		ino = st.Ino
	})
	if err = errors.Join(err, ierr); err != nil {
		t.Fatalf("SIOCGSKNS: %v", err)
	}
	return ino
}

func TestNewAndClose(t *testing.T) {
	ns := netnstest.New(t)
	if !strings.HasPrefix(ns.Name, fmt.Sprintf("%s-%d-", netns.DefaultPrefix, os.Getpid())) {
		t.Errorf("name %q does not carry prefix and pid", ns.Name)
	}
	if !slices.Contains(listNamespaces(t), ns.Name) {
		t.Fatalf("%s not in ip netns list", ns.Name)
	}
	out, err := ns.IP(context.Background(), "-j", "link", "show", "dev", "lo")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"UP"`) {
		t.Errorf("loopback not up: %s", out)
	}
	if err := ns.Close(); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(listNamespaces(t), ns.Name) {
		t.Fatalf("%s still listed after Close", ns.Name)
	}
	if _, err := os.Stat(ns.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s: %v, want not exist", ns.Path(), err)
	}
	if err := ns.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestNewRejectsBadPrefix(t *testing.T) {
	for _, p := range []string{"a/b", "..", "a b"} {
		if ns, err := netns.New(p); err == nil {
			ns.Close()
			t.Errorf("New(%q) succeeded", p)
		}
	}
}

func TestNamesUnique(t *testing.T) {
	netnstest.New(t) // skips where namespaces are unavailable
	const n = 8
	var (
		mu    sync.Mutex
		names []string
		wg    sync.WaitGroup
	)
	for range n {
		wg.Go(func() {
			ns, err := netns.New("gonet")
			if err != nil {
				t.Error(err)
				return
			}
			t.Cleanup(func() { ns.Close() })
			mu.Lock()
			names = append(names, ns.Name)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(names)
	if len(slices.Compact(names)) != n {
		t.Errorf("names not unique: %v", names)
	}
}

func TestDeviceName(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		d := netns.DeviceName()
		if len(d) > 15 || !strings.HasPrefix(d, "gn") {
			t.Fatalf("DeviceName() = %q", d)
		}
		if seen[d] {
			t.Fatalf("DeviceName() repeated %q", d)
		}
		seen[d] = true
	}
}

func TestDoEntersAndReturns(t *testing.T) {
	ns := netnstest.New(t)
	// Keep the test on one thread so that the thread Do restores is the
	// one checked afterwards; Do's own lock nests inside this one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	outside := inode(t, "/proc/thread-self/ns/net")
	want := inode(t, ns.Path())
	if outside == want {
		t.Fatal("test already runs inside the namespace")
	}
	var inside uint64
	if err := ns.Do(func() error {
		inside = inode(t, "/proc/thread-self/ns/net")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if inside != want {
		t.Errorf("inside Do: namespace inode %d, want %d", inside, want)
	}
	if got := inode(t, "/proc/thread-self/ns/net"); got != outside {
		t.Errorf("after Do: namespace inode %d, want %d", got, outside)
	}

	errBoom := errors.New("boom")
	if err := ns.Do(func() error { return errBoom }); !errors.Is(err, errBoom) {
		t.Errorf("Do returned %v, want %v", err, errBoom)
	}
	if got := inode(t, "/proc/thread-self/ns/net"); got != outside {
		t.Errorf("after failing fn: namespace inode %d, want %d", got, outside)
	}

	func() {
		defer func() {
			if r := recover(); r != "panic in fn" {
				t.Errorf("recovered %v", r)
			}
		}()
		ns.Do(func() error { panic("panic in fn") })
	}()
	if got := inode(t, "/proc/thread-self/ns/net"); got != outside {
		t.Errorf("after panicking fn: namespace inode %d, want %d", got, outside)
	}
}

func TestDoAfterClose(t *testing.T) {
	ns := netnstest.New(t)
	if err := ns.Close(); err != nil {
		t.Fatal(err)
	}
	called := false
	err := ns.Do(func() error { called = true; return nil })
	if err == nil || called {
		t.Fatalf("Do on a closed namespace: err %v, fn called %v", err, called)
	}
	if !strings.Contains(err.Error(), ns.Name) {
		t.Errorf("error %q does not name the namespace", err)
	}
}

// TestTAPInNamespace opens a TAP device from inside Do and checks that it
// lives in the namespace, not in the test's own.
func TestTAPInNamespace(t *testing.T) {
	ns := netnstest.New(t)
	dev := netns.DeviceName()
	var tap *os.File
	err := ns.Do(func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		ifr, err := unix.NewIfreq(dev)
		if err != nil {
			unix.Close(fd)
			return err
		}
		ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			return fmt.Errorf("TUNSETIFF: %w", err)
		}
		tap = os.NewFile(uintptr(fd), "/dev/net/tun")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()
	if _, err := ns.IP(context.Background(), "link", "show", "dev", dev); err != nil {
		t.Errorf("TAP not in the namespace: %v", err)
	}
	if _, err := net.InterfaceByName(dev); err == nil {
		t.Errorf("TAP %s visible outside the namespace", dev)
	}
	if err := ns.ConfigureLink(dev, netip.MustParsePrefix("10.213.0.1/24"), 1400); err != nil {
		t.Fatal(err)
	}
}

// linkInfo is what `ip -j addr show` says about a device.
type linkInfo struct {
	IfName   string   `json:"ifname"`
	MTU      int      `json:"mtu"`
	Flags    []string `json:"flags"`
	AddrInfo []struct {
		Family    string `json:"family"`
		Local     string `json:"local"`
		PrefixLen int    `json:"prefixlen"`
	} `json:"addr_info"`
}

func showLink(t *testing.T, ns *netns.NS, dev string) linkInfo {
	t.Helper()
	out, err := ns.IP(context.Background(), "-j", "addr", "show", "dev", dev)
	if err != nil {
		t.Fatal(err)
	}
	var infos []linkInfo
	if err := json.Unmarshal(out, &infos); err != nil || len(infos) != 1 {
		t.Fatalf("parse %s: %v", out, err)
	}
	return infos[0]
}

func checkLink(t *testing.T, ns *netns.NS, dev string, addr netip.Prefix, mtu int) {
	t.Helper()
	l := showLink(t, ns, dev)
	if l.MTU != mtu {
		t.Errorf("%s: mtu %d, want %d", dev, l.MTU, mtu)
	}
	if !slices.Contains(l.Flags, "UP") {
		t.Errorf("%s: flags %v, want UP", dev, l.Flags)
	}
	found := false
	for _, a := range l.AddrInfo {
		if a.Family == "inet" && a.Local == addr.Addr().String() && a.PrefixLen == addr.Bits() {
			found = true
		}
	}
	if !found {
		t.Errorf("%s: addresses %+v, want %v", dev, l.AddrInfo, addr)
	}
}

// TestConfigureLink configures one end of a veth pair whose ends are both in
// the namespace (veth rather than dummy: some kernels have no dummy driver).
func TestConfigureLink(t *testing.T) {
	ns := netnstest.New(t)
	dev, peer := netns.DeviceName(), netns.DeviceName()
	if err := ns.AddVeth(dev, ns, peer); err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParsePrefix("10.211.7.1/24")
	if err := ns.ConfigureLink(dev, addr, 1280); err != nil {
		t.Fatal(err)
	}
	checkLink(t, ns, dev, addr, 1280)
	for _, d := range []string{dev, peer} {
		if _, err := net.InterfaceByName(d); err == nil {
			t.Errorf("%s visible outside the namespace", d)
		}
	}

	err := ns.ConfigureLink("gn-no-such-dev", addr, 1500)
	if err == nil || !strings.Contains(err.Error(), ns.Name) || !strings.Contains(err.Error(), "gn-no-such-dev") {
		t.Errorf("ConfigureLink on a missing device: %v", err)
	}
}

func TestRun(t *testing.T) {
	ns := netnstest.New(t)
	out, err := ns.Run(context.Background(), "ip", "-o", "link", "show")
	if err != nil {
		t.Fatal(err)
	}
	// A fresh namespace has only its loopback.
	if n := strings.Count(strings.TrimSpace(string(out)), "\n") + 1; n != 1 || !strings.Contains(string(out), "lo:") {
		t.Errorf("links in a fresh namespace:\n%s", out)
	}

	_, err = ns.Run(context.Background(), "sh", "-c", "echo marker-output >&2; exit 3")
	if err == nil {
		t.Fatal("failing command returned no error")
	}
	for _, want := range []string{ns.Name, "sh -c", "marker-output", "exit status 3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestCloseKillsCommands starts a long-running command inside the namespace
// and checks that Close ends it.
func TestCloseKillsCommands(t *testing.T) {
	ns := netnstest.New(t)
	cmd := ns.Command(context.Background(), "sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Wait until ip netns exec has become sleep inside the namespace.
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids, _ := run(context.Background(), "ip", "netns", "pids", ns.Name)
		if strings.Contains(string(pids), fmt.Sprint(cmd.Process.Pid)) {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("command never entered the namespace")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := ns.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("command still running after Close")
	}
}

func TestCommandContextCancel(t *testing.T) {
	ns := netnstest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := ns.Run(ctx, "sleep", "60")
	if err == nil {
		t.Fatal("cancelled command returned no error")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("cancel took %v", d)
	}
}

func exchange(t *testing.T, a, b *net.UDPConn, msg string) {
	t.Helper()
	if _, err := a.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1500)
	n, from, err := b.ReadFromUDP(buf)
	if err != nil {
		t.Fatal(err)
	}
	if string(buf[:n]) != msg {
		t.Errorf("received %q, want %q", buf[:n], msg)
	}
	if from.String() != a.LocalAddr().String() {
		t.Errorf("from %v, want %v", from, a.LocalAddr())
	}
	// And back, to the dialer's address.
	if _, err := b.WriteToUDP([]byte("re:"+msg), from); err != nil {
		t.Fatal(err)
	}
	a.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err = a.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if string(buf[:n]) != "re:"+msg {
		t.Errorf("reply %q, want %q", buf[:n], "re:"+msg)
	}
}

func TestUDPOnNamespaceLoopback(t *testing.T) {
	ns := netnstest.New(t)
	srv, err := ns.ListenUDP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli, err := ns.DialUDP(srv.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	want := inode(t, ns.Path())
	for _, c := range []*net.UDPConn{srv, cli} {
		if got := socketNamespace(t, c); got != want {
			t.Errorf("socket %v in namespace %d, want %d", c.LocalAddr(), got, want)
		}
	}
	exchange(t, cli, srv, "hello over the namespace's loopback")
}

func TestUDPOverVeth(t *testing.T) {
	a, b := netnstest.New(t), netnstest.New(t)
	devA, devB := netns.DeviceName(), netns.DeviceName()
	if err := a.AddVeth(devA, b, devB); err != nil {
		t.Fatal(err)
	}
	addrA := netip.MustParsePrefix("10.212.0.1/24")
	addrB := netip.MustParsePrefix("10.212.0.2/24")
	if err := a.ConfigureLink(devA, addrA, 1400); err != nil {
		t.Fatal(err)
	}
	if err := b.ConfigureLink(devB, addrB, 1400); err != nil {
		t.Fatal(err)
	}
	checkLink(t, a, devA, addrA, 1400)
	checkLink(t, b, devB, addrB, 1400)

	srv, err := b.ListenUDP(addrB.Addr().String() + ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli, err := a.DialUDP(srv.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if ip := cli.LocalAddr().(*net.UDPAddr).IP.String(); ip != addrA.Addr().String() {
		t.Errorf("dialer bound to %s, want %s", ip, addrA.Addr())
	}
	exchange(t, cli, srv, "hello across the veth pair")

	t.Run("ping", func(t *testing.T) {
		netnstest.RequireTool(t, "ping")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if out, err := a.Run(ctx, "ping", "-c", "2", "-i", "0.2", "-W", "2", addrB.Addr().String()); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	})

	// Deleting one namespace deletes its end of the pair, and with it
	// the other end, once nothing holds the namespace: the socket opened
	// in it does until it is closed.
	cli.Close()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := b.IP(context.Background(), "link", "show", "dev", devB)
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%s still in %s after the peer namespace was deleted", devB, b.Name)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRemoveStale(t *testing.T) {
	netnstest.New(t) // skips or fails where namespaces are unavailable
	// A prefix of its own, so that the sweep of a test binary running at
	// the same time cannot take the stale namespace first.
	const prefix = "gonetstale"
	// A namespace named for a process that cannot exist: PIDs stop at
	// 2^22.
	const stale = prefix + "-99999999-1"
	if out, err := run(context.Background(), "ip", "netns", "add", stale); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Cleanup(func() { run(context.Background(), "ip", "netns", "delete", stale) })
	live, err := netns.New(prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Close() })

	removed, err := netns.RemoveStale(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{stale}) {
		t.Errorf("removed %v, want [%s]", removed, stale)
	}
	if _, err := os.Stat(filepath.Join(netns.Dir, stale)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there", stale)
	}
	if _, err := os.Stat(live.Path()); err != nil {
		t.Errorf("live namespace removed: %v", err)
	}
}

func TestAvailable(t *testing.T) {
	err := netns.Available()
	t.Logf("Available() = %v", err)
	if err != nil && !strings.HasPrefix(err.Error(), "netns: unavailable: ") {
		t.Errorf("error %q does not say namespaces are unavailable", err)
	}
	if err == nil {
		if _, err := osexec.LookPath("ip"); err != nil {
			t.Errorf("available without ip: %v", err)
		}
	}
}

// TestNoNamespaceLeft runs last in this file: every namespace the tests
// above made must be gone once their cleanups have run, and those made in a
// subtest must be gone when the subtest ends.
func TestNoNamespaceLeft(t *testing.T) {
	if err := netns.Available(); err != nil {
		t.Skip(err)
	}
	before := ours(listNamespaces(t))
	t.Run("make", func(t *testing.T) {
		for range 3 {
			netnstest.New(t)
		}
		if got := len(ours(listNamespaces(t))); got < len(before)+3 {
			t.Errorf("%d namespaces, want at least %d", got, len(before)+3)
		}
	})
	if after := ours(listNamespaces(t)); len(after) != len(before) {
		t.Errorf("namespaces before %v, after %v", before, after)
	}
}
