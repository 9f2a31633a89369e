//go:build linux

package tap

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
)

// The tests' addresses, used only inside namespaces the tests create: the
// kernel's side of the TAP and the endpoint's (the stack's) side.
var (
	kernelIP = netip.MustParseAddr("10.77.0.1")
	stackIP  = netip.MustParseAddr("10.77.0.2")
)

// skipOrFatal skips the test, or fails it when CI=true: in CI a skip would
// hide a broken feature.
func skipOrFatal(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(reason + "; CI=true: a skip would hide a broken feature")
	}
	t.Skip(reason)
}

// requireTAP skips (fails under CI) a test that needs root, /dev/net/tun
// and the ip command.
func requireTAP(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFatal(t, "tap: test needs root for TUNSETIFF and network namespaces")
	}
	f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0)
	if err != nil {
		skipOrFatal(t, fmt.Sprintf("tap: test needs /dev/net/tun: %v", err))
	}
	f.Close()
	if _, err := exec.LookPath("ip"); err != nil {
		skipOrFatal(t, "tap: test needs the ip command (iproute2)")
	}
}

var nsCounter atomic.Uint32

// testNS is a network namespace of one test's own, so that nothing the test
// does touches the host's interfaces or sends beyond it.
type testNS struct{ name string }

// newNS creates a namespace and deletes it when the test ends, whether it
// passes or fails; deleting it also deletes the devices left in it.
func newNS(t *testing.T) *testNS {
	t.Helper()
	requireTAP(t)
	ns := &testNS{name: fmt.Sprintf("gonet-tap-%d-%d", os.Getpid(), nsCounter.Add(1))}
	if out, err := exec.Command("ip", "netns", "add", ns.name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", ns.name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns.name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", ns.name, err, out)
		}
	})
	return ns
}

// ip runs "ip -n NS args..." and returns its output.
func (ns *testNS) ip(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"-n", ns.name}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip -n %s %s: %v: %s", ns.name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// tc runs "tc -n NS args..." and returns its output.
func (ns *testNS) tc(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("tc", append([]string{"-n", ns.name}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("tc -n %s %s: %v: %s", ns.name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// requireTool skips (fails under CI) a test that needs the named command.
func requireTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		skipOrFatal(t, "tap: test needs the "+name+" command")
	}
}

// do runs fn on an OS thread moved into the namespace. Everything fn
// creates (devices, sockets) belongs to the namespace; the descriptors stay
// usable from any thread afterwards.
func (ns *testNS) do(t *testing.T, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("saving the current namespace: %v", err)
	}
	defer orig.Close()
	target, err := os.Open("/run/netns/" + ns.name)
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("opening namespace %s: %v", ns.name, err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("setns into %s: %v", ns.name, err)
	}
	fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays locked, so the runtime discards it with the
		// goroutine instead of reusing it in the wrong namespace.
		t.Fatalf("setns back from %s: %v", ns.name, err)
	}
	runtime.UnlockOSThread()
}

var devCounter atomic.Uint32

// devName returns a device name unique to this process, within IFNAMSIZ.
func devName() string {
	return fmt.Sprintf("gt%d_%d", os.Getpid()%10000000, devCounter.Add(1))
}

// openIn opens a TAP device in the namespace, with IPv6 off on it so the
// kernel sends nothing unasked (no router solicitations, no MLD).
func (ns *testNS) openIn(t *testing.T, name string, opts Options) (*Endpoint, error) {
	t.Helper()
	var e *Endpoint
	var err error
	ns.do(t, func() {
		if e, err = Open(name, opts); err != nil {
			return
		}
		// /proc/sys/net shows the namespace of the thread that opens it.
		werr := os.WriteFile("/proc/sys/net/ipv6/conf/"+e.Name()+"/disable_ipv6", []byte("1"), 0)
		if werr != nil && !errors.Is(werr, fs.ErrNotExist) {
			t.Errorf("disabling IPv6 on %s: %v", e.Name(), werr)
		}
	})
	if e != nil {
		t.Cleanup(func() { e.Close() })
	}
	return e, err
}

// open opens a fresh TAP device in the namespace or fails the test.
func (ns *testNS) open(t *testing.T, opts Options) *Endpoint {
	t.Helper()
	e, err := ns.openIn(t, devName(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return e
}

// up gives the kernel's side kernelIP/24 and brings it up.
func (ns *testNS) up(t *testing.T, e *Endpoint) {
	t.Helper()
	ns.ip(t, "addr", "add", kernelIP.String()+"/24", "dev", e.Name())
	ns.ip(t, "link", "set", "dev", e.Name(), "up")
}

// linkInfo is the part of "ip -j -s link show" the tests read.
type linkInfo struct {
	MTU        int    `json:"mtu"`
	TxQueueLen int    `json:"txqlen"`
	Address    string `json:"address"`
	Stats      struct {
		TX struct {
			Packets uint64 `json:"packets"`
			Dropped uint64 `json:"dropped"`
		} `json:"tx"`
	} `json:"stats64"`
}

// link describes the kernel's side of the device.
func (ns *testNS) link(t *testing.T, dev string) linkInfo {
	t.Helper()
	var infos []linkInfo
	out := ns.ip(t, "-j", "-s", "link", "show", "dev", dev)
	if err := json.Unmarshal([]byte(out), &infos); err != nil || len(infos) != 1 {
		t.Fatalf("ip -j link show %s: %v: %s", dev, err, out)
	}
	return infos[0]
}

// frameReader reads an endpoint on its own goroutine and hands copies of the
// frames to the test, so that a test can wait for a frame with a timeout.
type frameReader struct {
	frames chan captured
	done   chan error
}

// captured is a frame read from the endpoint.
type captured struct {
	data    []byte
	offload buffer.Offload
}

// startReader reads e until it closes; the test's cleanup closes it, waits
// for the reader and checks that no packet leaked.
func startReader(t *testing.T, e *Endpoint) *frameReader {
	r := &frameReader{frames: make(chan captured, 256), done: make(chan error, 1)}
	pool := buffer.NewPool()
	pkts := make([]*buffer.Packet, 8)
	for i := range pkts {
		pkts[i] = pool.Get(link.MaxFrame(e.MTU()))
	}
	go func() {
		for {
			n, err := e.ReadBatch(pkts)
			if err != nil {
				for _, p := range pkts {
					p.Release()
				}
				r.done <- err
				return
			}
			for _, p := range pkts[:n] {
				r.frames <- captured{append([]byte(nil), p.Bytes()...), p.Offload}
			}
		}
	}()
	t.Cleanup(func() {
		e.Close()
		if err := <-r.done; !errors.Is(err, link.ErrClosed) {
			t.Errorf("reader ended with %v, want link.ErrClosed", err)
		}
		if n := pool.Outstanding(); n != 0 {
			t.Errorf("reader pool: %d packets outstanding", n)
		}
	})
	return r
}

// await returns the first frame for which match holds, skipping others; it
// fails the test after five seconds.
func (r *frameReader) await(t *testing.T, what string, match func(captured) bool) captured {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case f := <-r.frames:
			if match(f) {
				return f
			}
			t.Logf("skipping frame %x while waiting for %s", f.data, what)
		case <-timeout:
			t.Fatalf("no %s within 5s", what)
		}
	}
}

// write sends frames built by the test through e.
func write(t *testing.T, e *Endpoint, frames ...[]byte) {
	t.Helper()
	writeWithOffload(t, e, buffer.Offload{}, frames...)
}

func writeWithOffload(t *testing.T, e *Endpoint, off buffer.Offload, frames ...[]byte) {
	t.Helper()
	pool := buffer.NewPool()
	pkts := make([]*buffer.Packet, len(frames))
	for i, f := range frames {
		pkts[i] = pool.Get(len(f))
		copy(pkts[i].Bytes(), f)
		pkts[i].Offload = off
	}
	n, err := e.WriteBatch(pkts)
	if n != len(frames) || err != nil {
		t.Fatalf("WriteBatch = %d, %v; want %d, nil", n, err, len(frames))
	}
	for i, p := range pkts {
		if string(p.Bytes()) != string(frames[i]) || p.Headroom() != buffer.Headroom {
			t.Errorf("WriteBatch changed packet %d: headroom %d, data %x", i, p.Headroom(), p.Bytes())
		}
		p.Release()
	}
	if n := pool.Outstanding(); n != 0 {
		t.Errorf("write pool: %d packets outstanding", n)
	}
}

// Ethernet, ARP (RFC 826) and IPv4/ICMP (RFC 791, RFC 792) frames, built by
// hand so that these tests depend on no other GoNet package.
const (
	etherTypeIPv4 = 0x0800
	etherTypeARP  = 0x0806
	arpRequest    = 1
	arpReply      = 2
)

var broadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

func ethernet(dst, src net.HardwareAddr, etherType uint16, payload []byte) []byte {
	f := make([]byte, 14, 14+len(payload))
	copy(f[0:6], dst)
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:14], etherType)
	return append(f, payload...)
}

// arp is an ARP packet for IPv4 over Ethernet.
type arp struct {
	op                   uint16
	senderMAC, targetMAC net.HardwareAddr
	senderIP, targetIP   netip.Addr
}

func (a arp) frame(dst net.HardwareAddr) []byte {
	b := make([]byte, 28)
	binary.BigEndian.PutUint16(b[0:2], 1) // Ethernet
	binary.BigEndian.PutUint16(b[2:4], etherTypeIPv4)
	b[4], b[5] = 6, 4
	binary.BigEndian.PutUint16(b[6:8], a.op)
	copy(b[8:14], a.senderMAC)
	s, tg := a.senderIP.As4(), a.targetIP.As4()
	copy(b[14:18], s[:])
	if a.targetMAC != nil {
		copy(b[18:24], a.targetMAC)
	}
	copy(b[24:28], tg[:])
	return ethernet(dst, a.senderMAC, etherTypeARP, b)
}

func parseARP(f []byte) (arp, bool) {
	if len(f) < 14+28 || binary.BigEndian.Uint16(f[12:14]) != etherTypeARP {
		return arp{}, false
	}
	b := f[14:]
	return arp{
		op:        binary.BigEndian.Uint16(b[6:8]),
		senderMAC: net.HardwareAddr(b[8:14]),
		senderIP:  netip.AddrFrom4([4]byte(b[14:18])),
		targetMAC: net.HardwareAddr(b[18:24]),
		targetIP:  netip.AddrFrom4([4]byte(b[24:28])),
	}, true
}

// checksum is the Internet checksum (RFC 1071).
func checksum(b []byte) uint16 {
	var sum uint32
	for ; len(b) >= 2; b = b[2:] {
		sum += uint32(binary.BigEndian.Uint16(b))
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// ipv4 returns an IPv4 packet without options.
func ipv4(proto byte, src, dst netip.Addr, payload []byte) []byte {
	h := make([]byte, 20, 20+len(payload))
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:4], uint16(20+len(payload)))
	h[8] = 64
	h[9] = proto
	s, d := src.As4(), dst.As4()
	copy(h[12:16], s[:])
	copy(h[16:20], d[:])
	binary.BigEndian.PutUint16(h[10:12], checksum(h))
	return append(h, payload...)
}

const (
	protoICMP     = 1
	protoUDP      = 17
	icmpEchoReply = 0
	icmpEcho      = 8
)

// icmpEchoMsg returns an ICMP echo message; with fullSum false its checksum
// is left zero, the partial sum a device completes for ICMP (no pseudo
// header).
func icmpEchoMsg(typ byte, id, seq uint16, data []byte, fullSum bool) []byte {
	m := make([]byte, 8, 8+len(data))
	m[0] = typ
	binary.BigEndian.PutUint16(m[4:6], id)
	binary.BigEndian.PutUint16(m[6:8], seq)
	m = append(m, data...)
	if fullSum {
		binary.BigEndian.PutUint16(m[2:4], checksum(m))
	}
	return m
}
