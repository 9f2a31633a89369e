package suite

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/bench/handlers"
	"github.com/gonetstack/gonet/internal/netns"
)

// The gateway family (issue 11, "Speed") puts a user-mode gateway between
// a guest namespace and an "internet" namespace, as a container runtime
// does: guest → TAP → gateway process in the host namespace → the host's
// own sockets → veth → internet. The internet runs the kernel server;
// the guest runs the load generators; the gateway is the thing measured.
// These addresses exist only inside the namespaces the suite creates.
var (
	gwHostAddr = netip.MustParsePrefix("10.78.0.1/24")
	gwInetAddr = netip.MustParsePrefix("10.78.0.2/24")
)

// Every gateway but gvproxy serves the guest on slirp4netns's layout: the
// guest at .100 of 10.0.2.0/24, its router at .2. gvproxy keeps its own
// default network, 192.168.127.0/24 with the router at .1, and the guest
// takes .2, the address its DHCP server would lease.
const (
	gwGuestAddr = "10.0.2.100"
	gwRouter    = "10.0.2.2"
	gwGuestTAP  = "tap0"
)

var (
	gvproxyGuest  = netip.MustParsePrefix("192.168.127.2/24")
	gvproxyRouter = "192.168.127.1"
)

// gvproxyVersion is the gvisor-tap-vsock release the family installs from
// the module proxy.
const gvproxyVersion = "v0.8.9"

// Gateways are the gateways the family compares, in the order the first
// repetition starts them.
var Gateways = []string{"gonet", "pasta", "slirp4netns", "gvproxy"}

// gatewayBins are the gateways the suite builds rather than finds on PATH.
type gatewayBins struct {
	gonet, gvproxy string
}

// gatewayKind is how to run one gateway.
type gatewayKind struct {
	program string // on PATH, or GoNet's binary
	pkg     string // the Debian package it comes from, for the error when absent
	// maxMTU is the largest guest MTU it accepts: the family's large
	// MTU point runs each gateway at min(point, maxMTU).
	maxMTU int
	// ready is the start of the line on stdout that says it is up; ""
	// when it says nothing and the guest's first connection decides.
	ready string
	args  func(c gatewayArgs) []string
	// attach, when set, joins the guest to a gateway that cannot make a
	// TAP device itself, once it has started.
	attach func(e *Env, c gatewayArgs) error
	// resolvConf gives the gateway a resolv.conf naming only the
	// internet namespace.
	resolvConf bool
}

// netnsEtc is where `ip netns exec` finds files it bind-mounts over /etc
// for the commands it runs in a namespace.
const netnsEtc = "/etc/netns"

// hostResolvConf makes the host namespace's own /etc/resolv.conf, for the
// processes run there by ip netns exec: one name server, the internet
// namespace's address, where nothing answers on port 53.
func (e *Env) hostResolvConf() error {
	dir := filepath.Join(netnsEtc, e.H.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	e.etc = dir
	return os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte("nameserver "+gwInetAddr.Addr().String()+"\n"), 0o644)
}

// removeStaleEtc removes the directories in dir (/etc/netns) hostResolvConf made
// for the namespaces of runs whose process is gone (netns.RemoveStale
// removes the namespaces themselves; the directories outlive them when a
// run is killed outright).
func removeStaleEtc(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, ent := range entries {
		pid, ok := strings.CutPrefix(ent.Name(), nsPrefix+"-")
		pid, _, ok2 := strings.Cut(pid, "-")
		if !ok || !ok2 || pid == "" {
			continue
		}
		if _, err := strconv.Atoi(pid); err != nil {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); err == nil {
			continue // still running, or the ID was reused: leave it
		}
		if err := os.RemoveAll(filepath.Join(dir, ent.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, ent.Name())
	}
	return removed, errors.Join(errs...)
}

// gatewayArgs is what a gateway's command line is made of.
type gatewayArgs struct {
	guestNS string // path of the guest's namespace
	mtu     int
	pidFile string
	socket  string // gvproxy's QEMU socket
}

// gatewayKinds knows every gateway of Gateways. None is given a DNS
// upstream it could reach: the suite's traffic stays in its namespaces,
// and no workload resolves names.
var gatewayKinds = map[string]gatewayKind{
	"gonet": {
		// The bench's inet namespace has nothing on port 53: a harmless
		// upstream instead of the machine's /etc/resolv.conf.
		maxMTU: 65520,
		ready:  "gonet: gateway up ",
		args: func(c gatewayArgs) []string {
			return []string{"gateway", "-tap", gwGuestTAP, "-netns", c.guestNS, "-configure",
				"-mtu", strconv.Itoa(c.mtu), "-no-host-loopback",
				"-dns-upstream", gwInetAddr.Addr().String() + ":53", "-control", "none"}
		},
	},
	"pasta": {
		program: "pasta", pkg: "passt", maxMTU: 65520,
		// Root must say --runas 0 or pasta drops to nobody and cannot
		// enter the namespace; -f keeps it in the foreground, so its
		// process is the one started (the pid file confirms it). The
		// guest is configured explicitly (no copy of the host's
		// addresses), nothing is forwarded into it. DNS is off by
		// default in this version (no -D, no --dns-forward; "-D ''"
		// is refused as "Cannot use DNS address").
		args: func(c gatewayArgs) []string {
			return []string{"--runas", "0", "-f", "-q", "-P", c.pidFile, "--netns", c.guestNS,
				"-I", gwGuestTAP, "-4", "-a", gwGuestAddr, "-n", "24", "-g", gwRouter,
				"-m", strconv.Itoa(c.mtu), "--config-net", "--no-map-gw", "--no-dhcp",
				"-t", "none", "-u", "none", "-T", "none", "-U", "none"}
		},
	},
	"slirp4netns": {
		program: "slirp4netns", pkg: "slirp4netns", maxMTU: 65520, // its maximum is 65521
		args: func(c gatewayArgs) []string {
			return []string{"--configure", "--mtu=" + strconv.Itoa(c.mtu), "--disable-host-loopback",
				"--disable-dns", "--netns-type=path", c.guestNS, gwGuestTAP}
		},
	},
	"gvproxy": {
		pkg: "none: go install github.com/containers/gvisor-tap-vsock/cmd/gvproxy@" + gvproxyVersion,
		// gvproxy itself takes more; the relay's TAP endpoint (GoNet's
		// link/tap) takes 65520 as slirp4netns's.
		maxMTU: 65520,
		// Its DNS server (192.168.127.1) answers what it does not know
		// from /etc/resolv.conf, which cannot be turned off: the host
		// namespace gets one of its own naming the internet namespace,
		// where nothing listens (hostResolvConf).
		resolvConf: true,
		args: func(c gatewayArgs) []string {
			return []string{"-listen-qemu", "unix://" + c.socket, "-mtu", strconv.Itoa(c.mtu), "-pid-file", c.pidFile}
		},
		attach: attachGvproxy,
	},
}

// attachGvproxy waits for gvproxy's socket, connects the guest to it
// through the relay (a TAP device in the guest, the other process the
// family counts as gvproxy's) and configures the guest as gvproxy's DHCP
// would.
func attachGvproxy(e *Env, c gatewayArgs) error {
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(c.socket); err == nil {
			break
		}
		select {
		case <-e.gw.exited:
			return fmt.Errorf("gvproxy exited before listening: %v", e.gw.err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gvproxy made no socket at %s within 15 s", c.socket)
		}
	}
	r := &helperProc{out: e.gw.out, exited: make(chan struct{})}
	r.cmd = e.C.Command(context.Background(), e.bin, "relay", "-tap", gwGuestTAP, "-socket", c.socket, "-mtu", strconv.Itoa(c.mtu))
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	r.cmd.Stderr = e.gw.out
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := r.cmd.Start(); err != nil {
		return fmt.Errorf("start the relay: %w", err)
	}
	e.gw.helpers = append(e.gw.helpers, r)
	go func() { r.cmd.Wait(); close(r.exited) }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		return fmt.Errorf("the relay said %q, not ready: %v", line, err)
	}
	if err := e.C.ConfigureLink(gwGuestTAP, gvproxyGuest, c.mtu); err != nil {
		return err
	}
	_, err = e.C.IP(context.Background(), "route", "add", "default", "via", gvproxyRouter)
	return err
}

// helperProc is a process a gateway needs besides its own (gvproxy's
// relay), measured with it.
type helperProc struct {
	cmd    *exec.Cmd
	out    *limitedBuffer
	exited chan struct{}
}

// gatewayMTU is the MTU gateway runs at for the family's point mtu.
func gatewayMTU(gateway string, mtu int) int {
	return min(mtu, gatewayKinds[gateway].maxMTU)
}

// gatewayProc is a gateway running in the host namespace.
type gatewayProc struct {
	name   string
	cmd    *exec.Cmd
	pid    int // the gateway's own process, whose CPU and memory are measured
	out    *limitedBuffer
	exited chan struct{} // closed once the process has been waited for
	err    error         // its exit, once exited
	// helpers are stopped with it and measured with it.
	helpers []*helperProc
}

// startGateway starts gateway for the guest namespace e.C in the host
// namespace e.H, and returns once it says it is up (when it says so).
func (e *Env) startGateway(bins gatewayBins, mtu int) error {
	k, ok := gatewayKinds[e.Stack]
	if !ok {
		return fmt.Errorf("unknown gateway %q: %s", e.Stack, strings.Join(Gateways, ", "))
	}
	prog := k.program
	switch e.Stack {
	case "gonet":
		prog = bins.gonet
	case "gvproxy":
		prog = bins.gvproxy
	}
	if _, err := exec.LookPath(prog); err != nil {
		return fmt.Errorf("%s is not installed (Debian package %s): %w", prog, k.pkg, err)
	}
	if k.resolvConf {
		if err := e.hostResolvConf(); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp("", "gnbench-gw-")
	if err != nil {
		return err
	}
	e.tmp = dir
	ga := gatewayArgs{guestNS: e.C.Path(), mtu: mtu, pidFile: filepath.Join(dir, "pid"), socket: filepath.Join(dir, "qemu.sock")}
	args := k.args(ga)
	g := &gatewayProc{name: e.Stack, out: &limitedBuffer{max: 64 << 10}, exited: make(chan struct{})}
	g.cmd = e.H.Command(context.Background(), prog, args...)
	g.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	g.cmd.Stderr = g.out
	stdout, err := g.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := g.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", prog, err)
	}
	e.gw = g
	g.pid = g.cmd.Process.Pid
	up := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		said := false
		for sc.Scan() {
			fmt.Fprintln(g.out, sc.Text())
			if !said && k.ready != "" && strings.HasPrefix(sc.Text(), k.ready) {
				said = true
				close(up)
			}
		}
	}()
	go func() {
		g.err = g.cmd.Wait()
		close(g.exited)
	}()
	if k.ready != "" {
		select {
		case <-up:
		case <-g.exited:
			return fmt.Errorf("%s exited before it was up: %v", e.Stack, g.err)
		case <-time.After(30 * time.Second):
			return fmt.Errorf("%s did not say %q within 30 s", e.Stack, strings.TrimSpace(k.ready))
		}
	}
	if k.attach != nil {
		return k.attach(e, ga)
	}
	return nil
}

// confirmPID takes the gateway's own word for its process ID when it
// writes a pid file (pasta), should it ever not be the process started.
func (g *gatewayProc) confirmPID(pidFile string) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
		g.pid = pid
	}
}

// stop asks the gateway to exit (SIGTERM, as a runtime would), and kills it
// after 5 s.
func (g *gatewayProc) stop() error {
	for _, h := range g.helpers {
		h.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-h.exited:
		case <-time.After(2 * time.Second):
			h.cmd.Process.Kill()
			<-h.exited
		}
	}
	select {
	case <-g.exited:
		return nil
	default:
	}
	g.cmd.Process.Signal(syscall.SIGTERM)
	if g.pid != g.cmd.Process.Pid {
		syscall.Kill(g.pid, syscall.SIGTERM)
	}
	select {
	case <-g.exited:
		return nil
	case <-time.After(5 * time.Second):
		g.cmd.Process.Kill()
		<-g.exited
		return fmt.Errorf("%s ignored SIGTERM for 5 s; killed", g.name)
	}
}

// procStat is a process's CPU time and resident memory at one moment.
type procStat struct {
	cpu float64 // user+system seconds, all threads
	rss int64   // bytes
}

// readProc reads pid's CPU time (/proc/PID/stat: utime, stime) and resident
// set (/proc/PID/status: VmRSS).
func readProc(pid int) (procStat, error) {
	var s procStat
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, fmt.Errorf("gateway process %d: %w", pid, err)
	}
	// The command name, in parentheses, may hold spaces: count fields
	// from after it. utime and stime are fields 14 and 15 of proc(5).
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b)[i+1:])
	if i < 0 || len(f) < 13 {
		return s, fmt.Errorf("gateway process %d: /proc/%d/stat unreadable", pid, pid)
	}
	const hz = 100 // USER_HZ
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	s.cpu = (ut + st) / hz
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("gateway process %d: %w", pid, err)
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			s.rss = kb << 10
		}
	}
	return s, nil
}

// hostSysctls give every gateway's own sockets, in the host namespace, the
// same room for many short connections as the guest has; and ICMP
// datagram sockets, through which the gateways relay pings.
var hostSysctls = clientSysctls

// SetupGateway brings up gateway's three namespaces at guest MTU mtu, the
// internet's kernel server and the gateway, and waits until the guest
// reaches the server through it.
func SetupGateway(ctx context.Context, bin string, bins gatewayBins, gateway string, mtu int) (e *Env, err error) {
	e = &Env{Stack: gateway, Addr: gwInetAddr.Addr().String(), bin: bin, stderr: &limitedBuffer{max: 64 << 10}}
	register(e, true)
	defer func() {
		if err != nil {
			err = fmt.Errorf("set up %s at MTU %d: %w%s%s", gateway, mtu, err, e.gatewayLog(), e.serverLog())
			e.Close()
		}
	}()
	for _, ns := range []**netns.NS{&e.C, &e.H, &e.S} {
		if *ns, err = netns.New(nsPrefix); err != nil {
			return e, err
		}
	}
	for _, s := range clientSysctls {
		if err := sysctl(e.C, s[0], s[1]); err != nil {
			return e, err
		}
	}
	for _, s := range hostSysctls {
		if err := sysctl(e.H, s[0], s[1]); err != nil {
			return e, err
		}
	}
	for _, s := range serverSysctls {
		if err := sysctl(e.S, s[0], s[1]); err != nil {
			return e, err
		}
	}
	dev, peer := netns.DeviceName(), netns.DeviceName()
	if err := e.H.AddVeth(dev, e.S, peer); err != nil {
		return e, err
	}
	if err := e.H.ConfigureLink(dev, gwHostAddr, 0); err != nil {
		return e, err
	}
	if err := e.S.ConfigureLink(peer, gwInetAddr, 0); err != nil {
		return e, err
	}
	// pasta serves the guest from the host's default route's interface;
	// the others need no route beyond the veth's own network.
	if _, err := e.H.IP(ctx, "route", "add", "default", "via", gwInetAddr.Addr().String()); err != nil {
		return e, err
	}
	if err := e.startServer(e.S, []string{"server", "-stack", "kernel", "-addr", gwInetAddr.String()}); err != nil {
		return e, err
	}
	// The internet→guest UDP points' sender (runUDPDown).
	if err := e.startProc(e.S, "iperf3 -s", "Server listening", "iperf3", "-s", "--forceflush"); err != nil {
		return e, err
	}
	if err := e.startGateway(bins, mtu); err != nil {
		return e, err
	}
	if err := e.waitGuest(ctx); err != nil {
		return e, err
	}
	e.gw.confirmPID(filepath.Join(e.tmp, "pid"))
	return e, nil
}

// waitGuest connects from the guest to the internet's echo handler until a
// connection succeeds: the gateway is up, the guest configured, the whole
// path open.
func (e *Env) waitGuest(ctx context.Context) error {
	target := net.JoinHostPort(e.Addr, strconv.Itoa(handlers.EchoPort))
	var last error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		select {
		case <-e.gw.exited:
			return fmt.Errorf("%s exited: %v", e.Stack, e.gw.err)
		default:
		}
		last = e.C.Do(func() error {
			c, err := net.DialTimeout("tcp4", target, time.Second)
			if err == nil {
				c.Close()
			}
			return err
		})
		if last == nil {
			return nil
		}
	}
	return fmt.Errorf("the guest does not reach %s through %s: %w", target, e.Stack, last)
}

func (e *Env) gatewayLog() string {
	if e.gw == nil {
		return ""
	}
	if s := strings.TrimSpace(e.gw.out.String()); s != "" {
		return "\ngateway output:\n" + s
	}
	return ""
}

// gatewayStat samples the gateway process and its helpers, summed.
func (e *Env) gatewayStat() (procStat, error) {
	if e.gw == nil {
		return procStat{}, errors.New("no gateway")
	}
	s, err := readProc(e.gw.pid)
	for _, h := range e.gw.helpers {
		hs, herr := readProc(h.cmd.Process.Pid)
		s.cpu += hs.cpu
		s.rss += hs.rss
		err = errors.Join(err, herr)
	}
	return s, err
}

// prepareGateways builds GoNet's daemon unless given one, and notes what
// the family runs with.
func (s *Suite) prepareGateways(ctx context.Context) error {
	if err := s.buildGoNet(ctx); err != nil {
		return fmt.Errorf("gateway family: %w", err)
	}
	if s.GvproxyBin == "" {
		s.GvproxyBin = filepath.Join(filepath.Dir(s.Bin), "gvproxy")
		if err := installGvproxy(ctx, s.GvproxyBin); err != nil {
			// The family runs without it; its set-ups fail, saying why.
			fmt.Fprintf(s.Log, "bench: %v\n", err)
		}
	}
	g := &GatewayRun{Started: time.Now(), Reps: s.repsOf(group{family: gatewayFamily}), GoNet: s.res.Machine.GoNet, Versions: map[string]string{}}
	for _, name := range Gateways {
		g.Versions[name] = gatewayVersion(name)
	}
	g.Versions["gonet"] = s.res.Machine.GoNet
	s.res.Gateway = g
	return nil
}

// buildGoNet builds GoNet's daemon from Root next to Bin, unless the run
// was given one or has built it already.
func (s *Suite) buildGoNet(ctx context.Context) error {
	if s.GoNetBin != "" {
		return nil
	}
	if s.Root == "" {
		return errors.New("no GoNet daemon given and no module to build it from")
	}
	bin := filepath.Join(filepath.Dir(s.Bin), "gonet")
	fmt.Fprintf(s.Log, "bench: building GoNet's daemon into %s\n", bin)
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", bin, "./cmd/gonet")
	cmd.Dir = s.Root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/gonet in %s: %w: %s", s.Root, err, strings.TrimSpace(string(out)))
	}
	s.GoNetBin = bin
	return nil
}

// installGvproxy puts gvisor-tap-vsock's gvproxy at path, from the Go
// module proxy, unless the release the family pins is there already. It is
// installed apart from the bench module, whose gVisor it would move.
func installGvproxy(ctx context.Context, path string) error {
	if out, err := exec.Command(path, "-version").CombinedOutput(); err == nil && strings.Contains(string(out), gvproxyVersion) {
		return nil
	}
	cmd := exec.CommandContext(ctx, goTool(), "install", "github.com/containers/gvisor-tap-vsock/cmd/gvproxy@"+gvproxyVersion)
	cmd.Dir = os.TempDir() // outside any module: the release's own go.mod decides
	cmd.Env = append(os.Environ(), "GOBIN="+filepath.Dir(path), "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("gateway family: go install gvproxy@%s: %w: %s", gvproxyVersion, err, firstLine(strings.TrimSpace(string(out))))
	}
	return nil
}

// gatewayVersion is the distribution package's version of a peer gateway
// (pasta's own --version says "unknown version" in Debian's build).
func gatewayVersion(name string) string {
	k := gatewayKinds[name]
	switch name {
	case "gonet":
		return ""
	case "gvproxy":
		return "gvisor-tap-vsock " + gvproxyVersion + " (go install from the module proxy)"
	}
	out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", k.pkg).Output()
	if err == nil && len(out) > 0 {
		return k.pkg + " " + string(out) + " (Debian)"
	}
	out, _ = exec.Command(k.program, "--version").CombinedOutput()
	l, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(l)
}

// mergeEarlier puts the records of a run of families alone (gateways,
// multikernel, paths) into the results an earlier run left in OutDir,
// replacing the earlier records of the workloads it ran and keeping
// everything else as it was measured, so that the report keeps the stack
// comparison's numbers.
func (s *Suite) mergeEarlier() error {
	path := filepath.Join(s.OutDir, "results.json")
	old, ok, err := readResults(path)
	if !ok || err != nil {
		return err
	}
	old.Records = slices.DeleteFunc(old.Records, func(r Record) bool { return slices.Contains(s.res.Workloads, r.Workload) })
	old.Records = append(old.Records, s.res.Records...)
	if len(old.Workloads) == 0 && len(old.Records) > 0 {
		old.Workloads = []string{"ping", "short", "bulk", "rr", "udp", "scale"}
	}
	for _, w := range s.res.Workloads {
		if !slices.Contains(old.Workloads, w) {
			old.Workloads = append(old.Workloads, w)
		}
	}
	var merged []string
	if s.res.Gateway != nil {
		old.Plan.Gateway = s.res.Plan.Gateway
		old.Gateway = s.res.Gateway
		merged = append(merged, "the gateway family")
	}
	if s.res.Multikernel != nil {
		old.Plan.Multikernel = s.res.Plan.Multikernel
		old.Multikernel = s.res.Multikernel
		merged = append(merged, "the multikernel family")
	}
	if s.res.Paths != nil {
		old.Plan.Paths = s.res.Plan.Paths
		old.Paths = s.res.Paths
		merged = append(merged, "the paths family")
	}
	s.res = old
	fmt.Fprintf(s.Log, "bench: merged %s into the earlier results in %s\n", strings.Join(merged, " and "), path)
	return nil
}
