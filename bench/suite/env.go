package suite

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/bench/server"
	"github.com/gonetstack/gonet/internal/netns"
)

// The same addresses in every set-up: the kernel's side (client) and the
// stack under test (server). They exist only inside the namespaces the
// suite creates. An IPv6 set-up has a unique local prefix (RFC 4193)
// besides IPv4's.
var (
	clientAddr  = netip.MustParsePrefix("10.77.0.1/24")
	serverAddr  = netip.MustParsePrefix("10.77.0.2/24")
	clientAddr6 = netip.MustParsePrefix("fd77::1/64")
	serverAddr6 = netip.MustParsePrefix("fd77::2/64")
)

const (
	mtu = 1500
	// nsPrefix names the suite's namespaces, so that a later run can
	// remove those a killed run left behind (and nothing else).
	nsPrefix = "gnbench"
)

// Env is one stack under test, set up: the client namespace with the
// kernel's side of the link, the server process, and (for the kernel) the
// server's namespace at the other end of a veth pair.
type Env struct {
	Stack string
	C, S  *netns.NS // S is nil but for the kernel and the gateway family
	Addr  string    // the server's address the workloads use
	// IPv6 is set in a set-up that measures IPv6: Addr is then the
	// server's IPv6 address (the stacks have their IPv4 ones too).
	IPv6 bool
	// cc is the congestion control SetupCC gave every sender ("": each
	// its own default).
	cc string

	// The gateway family's: the host namespace between the guest (C)
	// and the internet (S), and the gateway running in it.
	H   *netns.NS
	gw  *gatewayProc
	tmp string // the gateway's pid file
	etc string // the host namespace's /etc/netns/NAME
	// procs are the multikernel family's daemons (a bridge, a server),
	// stopped at Close, the last started first.
	procs []*gatewayProc

	// The paths family's: the forwarder between H and C, and the
	// competing flow's server (paths.go).
	path *pathSet
	// rep is the repetition the set-up serves (Suite.runGroup), which
	// the paths family's loss seeds follow.
	rep int

	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan string
	stderr *limitedBuffer
	bin    string

	// lastClientCPU is the CPU time of the last load generator Client ran.
	lastClientCPU float64

	closeOnce sync.Once
	closeErr  error
}

// live is every Env not yet closed, so that an interrupt can remove them.
var live struct {
	sync.Mutex
	envs map[*Env]bool
}

func register(e *Env, on bool) {
	live.Lock()
	defer live.Unlock()
	if live.envs == nil {
		live.envs = map[*Env]bool{}
	}
	if on {
		live.envs[e] = true
	} else {
		delete(live.envs, e)
	}
}

// CloseAll closes every live Env: the interrupt path.
func CloseAll() {
	live.Lock()
	envs := make([]*Env, 0, len(live.envs))
	for e := range live.envs {
		envs = append(envs, e)
	}
	live.Unlock()
	for _, e := range envs {
		e.Close()
	}
}

// sysctl sets /proc/sys/NAME inside ns (net.* sysctls are per namespace).
func sysctl(ns *netns.NS, name, value string) error {
	path := filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
	return ns.Do(func() error { return os.WriteFile(path, []byte(value), 0o644) })
}

// clientSysctls lets the load generators open many connections and ping
// without raw sockets.
var clientSysctls = [][2]string{
	{"net.ipv4.ip_local_port_range", "1024 65535"},
	{"net.ipv4.tcp_tw_reuse", "1"},
	{"net.ipv4.ping_group_range", "0 2147483647"},
}

// serverSysctls give the kernel as server the same listen backlog the
// user-space stacks have, and more.
var serverSysctls = [][2]string{
	{"net.core.somaxconn", "65535"},
	{"net.ipv4.tcp_max_syn_backlog", "65535"},
}

// Setup brings up stack's environment and waits until the client can
// reach the server over IPv4.
func Setup(ctx context.Context, bin, stack string) (*Env, error) {
	return setup(ctx, bin, stack, false, "")
}

// Setup6 is Setup for the IPv6 workloads: both ends have IPv6 addresses
// beside their IPv4 ones, the server's handlers serve on IPv6, and the
// client reaches the server over IPv6 before it returns (GoNet's address
// answers once its duplicate address detection is over). The kernel's
// addresses skip DAD (nodad) so that it does not delay the run.
func Setup6(ctx context.Context, bin, stack string) (*Env, error) {
	return setup(ctx, bin, stack, true, "")
}

// SetupCC is Setup with every sender on the congestion control cc rather
// than its own default: the kernel's, in the client's namespace and, for
// the kernel as server, in the server's, by the route to the other end
// (ip route ... congctl, which a socket taking it gets at connect and at
// accept; a namespace other than the first cannot make a restricted
// algorithm its default), and gVisor's by its option. GoNet runs CUBIC,
// its default, and nothing else here.
func SetupCC(ctx context.Context, bin, stack, cc string) (*Env, error) {
	if stack == "gonet" && cc != "cubic" {
		return nil, fmt.Errorf("set up gonet with %s: the bench runs GoNet with CUBIC only", cc)
	}
	return setup(ctx, bin, stack, false, cc)
}

func setup(ctx context.Context, bin, stack string, v6 bool, cc string) (e *Env, err error) {
	e = &Env{Stack: stack, Addr: serverAddr.Addr().String(), IPv6: v6, bin: bin, stderr: &limitedBuffer{max: 64 << 10}}
	if v6 {
		e.Addr = serverAddr6.Addr().String()
	}
	register(e, true)
	defer func() {
		if err != nil {
			err = fmt.Errorf("set up %s: %w%s", stack, err, e.serverLog())
			e.Close()
		}
	}()
	if e.C, err = netns.New(nsPrefix); err != nil {
		return e, err
	}
	for _, s := range clientSysctls {
		if err := sysctl(e.C, s[0], s[1]); err != nil {
			return e, err
		}
	}
	args := []string{"server", "-stack", stack, "-addr", serverAddr.String(), "-mtu", fmt.Sprint(mtu)}
	if v6 {
		args = append(args, "-addr6", serverAddr6.String())
	}
	if cc != "" && stack == "gvisor" {
		args = append(args, "-cc", cc)
	}
	serverNS := e.C
	dev := netns.DeviceName()
	switch stack {
	case "kernel":
		if e.S, err = netns.New(nsPrefix); err != nil {
			return e, err
		}
		for _, s := range serverSysctls {
			if err := sysctl(e.S, s[0], s[1]); err != nil {
				return e, err
			}
		}
		peer := netns.DeviceName()
		if err := e.C.AddVeth(dev, e.S, peer); err != nil {
			return e, err
		}
		if err := e.C.ConfigureLink(dev, clientAddr, mtu); err != nil {
			return e, err
		}
		if err := e.S.ConfigureLink(peer, serverAddr, mtu); err != nil {
			return e, err
		}
		if v6 {
			if err := addNoDAD(e.C, dev, clientAddr6); err != nil {
				return e, err
			}
			if err := addNoDAD(e.S, peer, serverAddr6); err != nil {
				return e, err
			}
		}
		if cc != "" {
			if err := routeCC(ctx, e.S, peer, serverAddr, cc); err != nil {
				return e, err
			}
		}
		serverNS = e.S
	default:
		// The server creates the TAP device in the client namespace;
		// it goes away with the server, so every run has a fresh one.
		args = append(args, "-tap", dev)
	}
	if err := e.startServer(serverNS, args); err != nil {
		return e, err
	}
	if stack != "kernel" {
		if err := e.C.ConfigureLink(dev, clientAddr, mtu); err != nil {
			return e, err
		}
		if v6 {
			if err := addNoDAD(e.C, dev, clientAddr6); err != nil {
				return e, err
			}
		}
	}
	if cc != "" {
		if err := routeCC(ctx, e.C, dev, clientAddr, cc); err != nil {
			return e, err
		}
		e.cc = cc
	}
	return e, e.waitReachable(ctx)
}

// routeCC gives the connected route of addr's prefix on dev in ns the
// congestion control cc, for the sockets that take it.
func routeCC(ctx context.Context, ns *netns.NS, dev string, addr netip.Prefix, cc string) error {
	_, err := ns.IP(ctx, "route", "replace", addr.Masked().String(), "dev", dev, "proto", "kernel", "scope", "link",
		"src", addr.Addr().String(), "congctl", cc)
	return err
}

// addNoDAD gives dev in ns an IPv6 address usable at once: the kernel's
// duplicate address detection (a second or more) is off for it, nothing
// else on the link holding it.
func addNoDAD(ns *netns.NS, dev string, addr netip.Prefix) error {
	_, err := ns.IP(context.Background(), "-6", "addr", "add", addr.String(), "dev", dev, "nodad")
	return err
}

func (e *Env) startServer(ns *netns.NS, args []string) error {
	e.cmd = ns.Command(context.Background(), e.bin, args...)
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	e.cmd.Stderr = e.stderr
	var err error
	if e.in, err = e.cmd.StdinPipe(); err != nil {
		return err
	}
	out, err := e.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := e.cmd.Start(); err != nil {
		return err
	}
	e.lines = make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			e.lines <- sc.Text()
		}
		close(e.lines)
	}()
	line, err := e.readLine(30 * time.Second)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "ready") {
		return fmt.Errorf("server said %q, not ready", line)
	}
	return nil
}

// waitReachable pings the server from the client namespace until it
// answers, which also settles ARP (neighbour discovery) on both sides; in
// an IPv6 set-up it pings over IPv6, which GoNet answers once its address
// has passed duplicate address detection.
func (e *Env) waitReachable(ctx context.Context) error {
	var last error
	family := "-4"
	if e.IPv6 {
		family = "-6"
	}
	for range 20 {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := e.C.Run(cctx, "ping", family, "-c", "1", "-W", "1", e.Addr)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("server unreachable: %w%s", last, e.ndpState())
}

// ndpState is the server's neighbour discovery counters, for an IPv6
// set-up whose server did not answer: whether GoNet's duplicate address
// detection ended, found a duplicate, or resolution failed.
func (e *Env) ndpState() string {
	if !e.IPv6 {
		return ""
	}
	snap, err := e.Stats()
	if err != nil {
		return ""
	}
	var kv []string
	for k, v := range snap.Counters {
		if strings.HasPrefix(k, "NDP.") || strings.HasPrefix(k, "ICMPv6.") {
			kv = append(kv, fmt.Sprintf("%s=%d", k, v))
		}
	}
	if len(kv) == 0 {
		return ""
	}
	slices.Sort(kv)
	return " (server: " + strings.Join(kv, " ") + ")"
}

func (e *Env) readLine(timeout time.Duration) (string, error) {
	select {
	case l, ok := <-e.lines:
		if !ok {
			return "", errors.New("server exited")
		}
		return l, nil
	case <-time.After(timeout):
		return "", fmt.Errorf("server silent for %v", timeout)
	}
}

// Stats asks the server for a snapshot.
func (e *Env) Stats() (server.Snapshot, error) {
	var s server.Snapshot
	if _, err := io.WriteString(e.in, "stats\n"); err != nil {
		return s, err
	}
	l, err := e.readLine(10 * time.Second)
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal([]byte(l), &s)
}

// Command sends the server a command answered by ok or an error.
func (e *Env) Command(cmd string) error {
	if _, err := io.WriteString(e.in, cmd+"\n"); err != nil {
		return err
	}
	l, err := e.readLine(10 * time.Second)
	if err != nil {
		return err
	}
	var r struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(l), &r); err != nil {
		return err
	}
	if !r.OK {
		return errors.New(r.Error)
	}
	return nil
}

// Client runs a load generator in the client namespace and returns what it
// printed.
func (e *Env) Client(ctx context.Context, timeout time.Duration, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := e.ClientCommand(ctx, args...)
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	err := cmd.Run()
	e.lastClientCPU = 0
	if cmd.ProcessState != nil {
		e.lastClientCPU = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	if err != nil {
		return out.Bytes(), fmt.Errorf("client %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}

// ClientCommand returns the command that runs a load generator in the
// client namespace.
func (e *Env) ClientCommand(ctx context.Context, args ...string) *exec.Cmd {
	cmd := e.C.Command(ctx, e.bin, append([]string{"client"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Close stops the gateway and the server and removes the namespaces (and
// with them the veth pair; the TAP device went with the server or the
// gateway).
func (e *Env) Close() error {
	e.closeOnce.Do(func() { e.closeErr = e.close() })
	return e.closeErr
}

func (e *Env) close() error {
	register(e, false)
	var errs []error
	if e.path != nil {
		errs = append(errs, e.path.close())
	}
	for i := len(e.procs) - 1; i >= 0; i-- {
		if err := e.procs[i].stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if e.gw != nil {
		if err := e.gw.stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if e.tmp != "" {
		os.RemoveAll(e.tmp)
	}
	if e.etc != "" {
		os.RemoveAll(e.etc)
	}
	if e.cmd != nil && e.cmd.Process != nil {
		if e.in != nil {
			io.WriteString(e.in, "quit\n")
			e.in.Close()
		}
		done := make(chan error, 1)
		go func() { done <- e.cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			e.cmd.Process.Kill()
			<-done
		}
		e.cmd = nil
	}
	for _, ns := range []*netns.NS{e.C, e.H, e.S} {
		if ns != nil {
			if err := ns.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (e *Env) serverLog() string {
	if s := strings.TrimSpace(e.stderr.String()); s != "" {
		return "\nserver stderr:\n" + s
	}
	return ""
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
