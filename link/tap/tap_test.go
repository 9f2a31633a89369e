//go:build linux

package tap

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Both framings: plain Ethernet, and Ethernet behind a virtio-net header.
var framings = []struct {
	name    string
	vnetHdr bool
}{
	{"plain", false},
	{"vnethdr", true},
}

func TestKernelAnswersARPRequestWritten(t *testing.T) {
	for _, fr := range framings {
		t.Run(fr.name, func(t *testing.T) {
			ns := newNS(t)
			e := ns.open(t, Options{VNetHdr: fr.vnetHdr})
			ns.up(t, e)
			r := startReader(t, e)

			write(t, e, arp{op: arpRequest, senderMAC: e.MAC(), senderIP: stackIP, targetIP: kernelIP}.frame(broadcast))

			kernelMAC, _ := net.ParseMAC(ns.link(t, e.Name()).Address)
			f := r.await(t, "ARP reply from "+kernelIP.String(), func(f captured) bool {
				a, ok := parseARP(f.data)
				return ok && a.op == arpReply && a.senderIP == kernelIP
			})
			a, _ := parseARP(f.data)
			if !bytes.Equal(f.data[0:6], e.MAC()) || !bytes.Equal(a.targetMAC, e.MAC()) || a.targetIP != stackIP {
				t.Errorf("ARP reply to %v (target %v %v), want to the endpoint's %v at %v", net.HardwareAddr(f.data[0:6]), a.targetMAC, a.targetIP, e.MAC(), stackIP)
			}
			if !bytes.Equal(a.senderMAC, kernelMAC) {
				t.Errorf("ARP reply says %v is at %v, the kernel interface is %v", kernelIP, a.senderMAC, kernelMAC)
			}
			if f.offload.GSOType != buffer.GSONone || f.offload.Flags&buffer.NeedsCsum != 0 {
				t.Errorf("ARP reply offload %+v, want no GSO and no partial checksum", f.offload)
			}
			if got := e.Stats().TxFrames.Load(); got != 1 {
				t.Errorf("TxFrames = %d, want 1", got)
			}
		})
	}
}

// TestKernelTrafficArrives has the kernel start the exchange: a datagram
// sent in the namespace to the stack's address makes the kernel ARP for it
// first, and send the datagram once the endpoint answers.
func TestKernelTrafficArrives(t *testing.T) {
	for _, fr := range framings {
		t.Run(fr.name, func(t *testing.T) {
			ns := newNS(t)
			e := ns.open(t, Options{VNetHdr: fr.vnetHdr})
			ns.up(t, e)
			r := startReader(t, e)

			var sock int
			ns.do(t, func() {
				var err error
				if sock, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
					t.Fatalf("socket in namespace: %v", err)
				}
			})
			defer unix.Close(sock)
			payload := []byte("hello through the tap")
			if err := unix.Sendto(sock, payload, 0, &unix.SockaddrInet4{Port: 9, Addr: stackIP.As4()}); err != nil {
				t.Fatalf("sendto %v:9 in the namespace: %v", stackIP, err)
			}

			f := r.await(t, "ARP request for "+stackIP.String(), func(f captured) bool {
				a, ok := parseARP(f.data)
				return ok && a.op == arpRequest && a.targetIP == stackIP
			})
			req, _ := parseARP(f.data)
			if !bytes.Equal(f.data[0:6], broadcast) || req.senderIP != kernelIP {
				t.Errorf("ARP request to %v from %v, want broadcast from %v", net.HardwareAddr(f.data[0:6]), req.senderIP, kernelIP)
			}
			write(t, e, arp{op: arpReply, senderMAC: e.MAC(), senderIP: stackIP, targetMAC: req.senderMAC, targetIP: kernelIP}.frame(req.senderMAC))

			f = r.await(t, "UDP datagram to "+stackIP.String(), func(f captured) bool {
				return len(f.data) >= 14+20+8 && binary.BigEndian.Uint16(f.data[12:14]) == etherTypeIPv4 && f.data[14+9] == protoUDP
			})
			if !bytes.Equal(f.data[0:6], e.MAC()) {
				t.Errorf("datagram sent to %v, want the endpoint's %v", net.HardwareAddr(f.data[0:6]), e.MAC())
			}
			if got := f.data[14+20+8:]; !bytes.Equal(got, payload) {
				t.Errorf("datagram carries %q, want %q", got, payload)
			}
			if got := e.Stats().RxFrames.Load(); got < 2 {
				t.Errorf("RxFrames = %d, want at least 2", got)
			}
		})
	}
}

// TestVNetHdrChecksumOffloadReachesKernel sends an ICMP echo request whose
// checksum is left partial, with NeedsCsum in the virtio-net header: the
// kernel answers only if it decoded the header (a partial checksum counts as
// verified for local delivery; a wrong one is dropped).
func TestVNetHdrChecksumOffloadReachesKernel(t *testing.T) {
	ns := newNS(t)
	e := ns.open(t, Options{VNetHdr: true})
	ns.up(t, e)
	ns.ip(t, "neigh", "replace", stackIP.String(), "lladdr", e.MAC().String(), "dev", e.Name(), "nud", "permanent")
	r := startReader(t, e)

	kernelMAC, _ := net.ParseMAC(ns.link(t, e.Name()).Address)
	data := []byte("partial checksum")
	echo := ipv4(protoICMP, stackIP, kernelIP, icmpEchoMsg(icmpEcho, 0x4242, 1, data, false))
	off := buffer.Offload{Flags: buffer.NeedsCsum, CsumStart: 14 + 20, CsumOffset: 2}
	writeWithOffload(t, e, off, ethernet(kernelMAC, e.MAC(), etherTypeIPv4, echo))

	f := r.await(t, "ICMP echo reply", func(f captured) bool {
		return len(f.data) >= 14+20+8 && binary.BigEndian.Uint16(f.data[12:14]) == etherTypeIPv4 &&
			f.data[14+9] == protoICMP && f.data[14+20] == icmpEchoReply
	})
	icmp := f.data[14+20:]
	if id, seq := binary.BigEndian.Uint16(icmp[4:6]), binary.BigEndian.Uint16(icmp[6:8]); id != 0x4242 || seq != 1 || !bytes.Equal(icmp[8:], data) {
		t.Errorf("echo reply id %#x seq %d data %q, want %#x 1 %q", id, seq, icmp[8:], 0x4242, data)
	}
	// Offloads are off (TUNSETOFFLOAD 0), so the kernel completes the
	// reply's checksum itself.
	if f.offload.Flags&buffer.NeedsCsum != 0 || f.offload.GSOType != buffer.GSONone {
		t.Errorf("echo reply offload %+v, want complete checksum and no GSO", f.offload)
	}
	if checksum(icmp) != 0 {
		t.Errorf("echo reply's ICMP checksum does not verify: %x", icmp)
	}
}

func TestReadBatchDrainsQueuedFramesInOneCall(t *testing.T) {
	ns := newNS(t)
	requireTool(t, "tc")
	e := ns.open(t, Options{})
	// pfifo counts what it sends whatever net.core.default_qdisc says.
	ns.tc(t, "qdisc", "replace", "dev", e.Name(), "root", "pfifo")
	ns.up(t, e)

	const count = 4
	var requests [][]byte
	for i := range count {
		sender := netip.AddrFrom4([4]byte{10, 77, 0, byte(2 + i)})
		requests = append(requests, arp{op: arpRequest, senderMAC: e.MAC(), senderIP: sender, targetIP: kernelIP}.frame(broadcast))
	}
	write(t, e, requests...)
	// The kernel answers in softirq context, normally before write returns;
	// give it a moment when it has deferred the work to ksoftirqd.
	waitReadable(t, ns, e, count)

	pool := buffer.NewPool()
	pkts := make([]*buffer.Packet, 2*count)
	for i := range pkts {
		pkts[i] = pool.Get(link.MaxFrame(e.MTU()))
	}
	watchdog := time.AfterFunc(10*time.Second, func() { e.Close() })
	n, err := e.ReadBatch(pkts)
	watchdog.Stop()
	if n != count || err != nil {
		t.Fatalf("ReadBatch = %d, %v; want all %d queued replies in one call", n, err, count)
	}
	for i, p := range pkts[:n] {
		a, ok := parseARP(p.Bytes())
		if want := netip.AddrFrom4([4]byte{10, 77, 0, byte(2 + i)}); !ok || a.op != arpReply || a.targetIP != want {
			t.Errorf("frame %d: %x, want the ARP reply to %v", i, p.Bytes(), want)
		}
	}
	if got := e.Stats().RxFrames.Load(); got != count {
		t.Errorf("RxFrames = %d, want %d", got, count)
	}
	for _, p := range pkts {
		p.Release()
	}
	if n := pool.Outstanding(); n != 0 {
		t.Errorf("%d packets outstanding", n)
	}
}

// waitReadable waits until the kernel has handed want frames to e's
// device, judged by the root qdisc's count of packets sent (the interface's
// own transmit counter grows only as the endpoint reads).
func waitReadable(t *testing.T, ns *testNS, e *Endpoint, want uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var qdiscs []struct {
			Packets uint64 `json:"packets"`
		}
		out := ns.tc(t, "-s", "-j", "qdisc", "show", "dev", e.Name())
		if err := json.Unmarshal([]byte(out), &qdiscs); err != nil || len(qdiscs) == 0 {
			t.Fatalf("tc -j qdisc show dev %s: %v: %s", e.Name(), err, out)
		}
		if qdiscs[0].Packets >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kernel sent %d frames within 5s, want %d", qdiscs[0].Packets, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestOpenSetsKernelMTU(t *testing.T) {
	tests := []struct {
		name string
		mtu  int
		want int
	}{
		{"default", 0, DefaultMTU},
		{"IPv6 minimum", 1280, 1280},
		{"jumbo", 9000, 9000},
		{"the kernel's most, 65521", MaxMTU, MaxMTU},
	}
	ns := newNS(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ns.open(t, Options{MTU: tt.mtu})
			if e.MTU() != tt.want {
				t.Errorf("MTU() = %d, want %d", e.MTU(), tt.want)
			}
			if got := ns.link(t, e.Name()).MTU; got != tt.want {
				t.Errorf("kernel interface MTU = %d, want %d", got, tt.want)
			}
			e.Close()
		})
	}
}

func TestOpenMAC(t *testing.T) {
	ns := newNS(t)
	t.Run("default is random, local, unicast and not the kernel's", func(t *testing.T) {
		e1 := ns.open(t, Options{})
		e2 := ns.open(t, Options{})
		for _, e := range []*Endpoint{e1, e2} {
			mac := e.MAC()
			if len(mac) != 6 || mac[0]&0x01 != 0 || mac[0]&0x02 == 0 {
				t.Errorf("MAC %v: want 6 bytes, unicast, locally administered", mac)
			}
			if kernel := ns.link(t, e.Name()).Address; kernel == mac.String() {
				t.Errorf("endpoint MAC %v equals the kernel interface's", mac)
			}
		}
		if bytes.Equal(e1.MAC(), e2.MAC()) {
			t.Errorf("two endpoints got the same MAC %v", e1.MAC())
		}
	})
	t.Run("given MAC is kept", func(t *testing.T) {
		want := net.HardwareAddr{0x02, 0x77, 0, 0, 0, 2}
		e := ns.open(t, Options{MAC: want})
		want[5] = 9 // Open copied it
		if got := e.MAC().String(); got != "02:77:00:00:00:02" {
			t.Errorf("MAC() = %v, want 02:77:00:00:00:02", got)
		}
	})
}

func TestOpenNames(t *testing.T) {
	ns := newNS(t)
	t.Run("kernel fills in a pattern", func(t *testing.T) {
		e, err := ns.openIn(t, "gtp%d", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(e.Name(), "gtp") || strings.Contains(e.Name(), "%") {
			t.Errorf("Name() = %q, want the kernel's gtpN", e.Name())
		}
		ns.link(t, e.Name()) // fails the test when there is no such interface
	})
	t.Run("attaches to an existing persistent device and leaves it", func(t *testing.T) {
		name := devName()
		ns.ip(t, "tuntap", "add", "dev", name, "mode", "tap")
		e, err := ns.openIn(t, name, Options{MTU: 1400})
		if err != nil {
			t.Fatal(err)
		}
		if got := ns.link(t, name).MTU; got != 1400 {
			t.Errorf("kernel MTU = %d, want 1400", got)
		}
		e.Close()
		ns.link(t, name) // still there
		ns.ip(t, "tuntap", "del", "dev", name, "mode", "tap")
	})
	t.Run("created device goes away on Close", func(t *testing.T) {
		e := ns.open(t, Options{})
		name := e.Name()
		if err := e.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if out, err := exec.Command("ip", "-n", ns.name, "link", "show", "dev", name).CombinedOutput(); err == nil {
			t.Errorf("device %s still exists after Close: %s", name, out)
		}
	})
}

func TestOpenErrorsNameTheDeviceAndCause(t *testing.T) {
	tests := []struct {
		name string
		dev  string
		opts Options
		want string
	}{
		{"name too long", "a-very-long-name-indeed", Options{}, "tap a-very-long-name-indeed: interface name"},
		{"MTU below IPv4's minimum", "gt0", Options{MTU: 67}, "tap gt0: MTU 67 outside 68.."},
		{"MTU beyond the kernel's", "gt0", Options{MTU: MaxMTU + 1}, "tap gt0: MTU 65522 outside"},
		{"multicast MAC", "gt0", Options{MAC: net.HardwareAddr{1, 0, 0x5e, 0, 0, 1}}, "tap gt0: MAC 01:00:5e:00:00:01 is not a unicast"},
		{"short MAC", "gt0", Options{MAC: net.HardwareAddr{2, 0, 0}}, "tap gt0: MAC 02:00:00 is not a unicast"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := Open(tt.dev, tt.opts)
			if err == nil {
				e.Close()
				t.Fatalf("Open(%q, %+v) succeeded", tt.dev, tt.opts)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open error %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestOpenWithoutPrivilegeSaysWhy(t *testing.T) {
	ns := newNS(t)
	var err error
	ns.do(t, func() {
		// Capabilities are per thread: drop CAP_NET_ADMIN from this
		// locked thread's effective set only, and restore it after.
		var hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			t.Fatalf("capget: %v", err)
		}
		saved := data
		data[0].Effective &^= 1 << unix.CAP_NET_ADMIN
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			t.Fatalf("capset: %v", err)
		}
		var e *Endpoint
		if e, err = Open(devName(), Options{}); err == nil {
			e.Close()
		}
		if err := unix.Capset(&hdr, &saved[0]); err != nil {
			t.Fatalf("restoring capabilities: %v", err)
		}
	})
	if !errors.Is(err, unix.EPERM) || !strings.Contains(err.Error(), ": TUNSETIFF: operation not permitted") {
		t.Errorf("Open without CAP_NET_ADMIN: err = %v, want it to name TUNSETIFF and wrap EPERM", err)
	}
}

func TestCloseWakesBlockedReader(t *testing.T) {
	ns := newNS(t)
	e := ns.open(t, Options{})
	pool := buffer.NewPool()
	pkts := []*buffer.Packet{pool.Get(link.MaxFrame(e.MTU()))}
	errc := make(chan error)
	go func() {
		_, err := e.ReadBatch(pkts)
		errc <- err
	}()
	select {
	case err := <-errc:
		t.Fatalf("ReadBatch returned %v on an idle device", err)
	case <-time.After(50 * time.Millisecond): // blocked in the poller, presumably
	}
	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, link.ErrClosed) || !errors.Is(err, net.ErrClosed) {
			t.Errorf("ReadBatch after Close: err = %v, want link.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake the blocked ReadBatch")
	}
	if _, err := e.ReadBatch(pkts); !errors.Is(err, link.ErrClosed) {
		t.Errorf("ReadBatch on a closed endpoint: %v, want link.ErrClosed", err)
	}
	if n, err := e.WriteBatch(pkts); n != 0 || !errors.Is(err, link.ErrClosed) {
		t.Errorf("WriteBatch on a closed endpoint = %d, %v; want 0, link.ErrClosed", n, err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	pkts[0].Release()
	if n := pool.Outstanding(); n != 0 {
		t.Errorf("%d packets outstanding", n)
	}
}

func TestWriteBatchCountsAndSkipsMalformedFrames(t *testing.T) {
	for _, fr := range framings {
		t.Run(fr.name, func(t *testing.T) {
			ns := newNS(t)
			e := ns.open(t, Options{VNetHdr: fr.vnetHdr})
			ns.up(t, e)
			good := arp{op: arpRequest, senderMAC: e.MAC(), senderIP: stackIP, targetIP: kernelIP}.frame(broadcast)
			runt := good[:13]
			oversize := make([]byte, link.MaxFrame(e.MTU())+1)
			copy(oversize, good)
			write(t, e, runt, good, oversize, good)
			if got := e.Stats().TxErrors.Load(); got != 2 {
				t.Errorf("TxErrors = %d, want 2 (the runt and the oversize frame)", got)
			}
			if got := e.Stats().TxFrames.Load(); got != 2 {
				t.Errorf("TxFrames = %d, want 2", got)
			}
		})
	}
}

func TestWriteToADownDeviceIsCountedNotFatal(t *testing.T) {
	ns := newNS(t)
	e := ns.open(t, Options{}) // never brought up: the kernel refuses frames
	frame := arp{op: arpRequest, senderMAC: e.MAC(), senderIP: stackIP, targetIP: kernelIP}.frame(broadcast)
	write(t, e, frame, frame)
	if got := e.Stats().TxErrors.Load(); got != 2 {
		t.Errorf("TxErrors = %d, want 2", got)
	}
	if got := e.Stats().TxFrames.Load(); got != 0 {
		t.Errorf("TxFrames = %d, want 0", got)
	}
}

// TestFramesOverTheMTUAreCountedAndSkipped raises the kernel interface's MTU
// behind the endpoint's back: the kernel's big frame is dropped and counted,
// and the next frame still arrives.
func TestFramesOverTheMTUAreCountedAndSkipped(t *testing.T) {
	ns := newNS(t)
	e := ns.open(t, Options{MTU: 1500})
	ns.up(t, e)
	ns.ip(t, "link", "set", "dev", e.Name(), "mtu", "9000")
	ns.ip(t, "neigh", "replace", stackIP.String(), "lladdr", e.MAC().String(), "dev", e.Name(), "nud", "permanent")
	r := startReader(t, e)

	var sock int
	ns.do(t, func() {
		var err error
		if sock, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			t.Fatalf("socket in namespace: %v", err)
		}
	})
	defer unix.Close(sock)
	to := &unix.SockaddrInet4{Port: 9, Addr: stackIP.As4()}
	if err := unix.Sendto(sock, make([]byte, 3000), 0, to); err != nil {
		t.Fatalf("sendto: %v", err)
	}
	if err := unix.Sendto(sock, []byte("small"), 0, to); err != nil {
		t.Fatalf("sendto: %v", err)
	}
	f := r.await(t, "the small datagram", func(f captured) bool {
		return len(f.data) >= 14+20+8 && binary.BigEndian.Uint16(f.data[12:14]) == etherTypeIPv4 && f.data[14+9] == protoUDP
	})
	if got := string(f.data[14+20+8:]); got != "small" {
		t.Errorf("first datagram read carries %d bytes, want the small one (the 3000-byte one exceeds the MTU)", len(got))
	}
	if got := e.Stats().RxErrors.Load(); got != 1 {
		t.Errorf("RxErrors = %d, want 1", got)
	}
}

func TestReadBatchRefusesPacketsWithoutRoom(t *testing.T) {
	ns := newNS(t)
	e := ns.open(t, Options{VNetHdr: true})
	pool := buffer.NewPool()
	short := pool.Get(0)
	short.SetLen(short.Cap() - 100)
	short.TrimFront(short.Len()) // room for 100 bytes
	noHeadroom := pool.Get(link.MaxFrame(e.MTU()))
	noHeadroom.Prepend(noHeadroom.Headroom())
	noHeadroom.SetLen(0)
	tests := []struct {
		name string
		pkt  *buffer.Packet
		want string
	}{
		{"no room for a frame", short, "packet 0 has room for 100 bytes, frames need 1514"},
		{"no headroom for the virtio-net header", noHeadroom, "packet 0 has 0 bytes of headroom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.ReadBatch([]*buffer.Packet{tt.pkt})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "tap "+e.Name()) {
				t.Errorf("ReadBatch: err = %v, want it to name the device and contain %q", err, tt.want)
			}
		})
	}
	short.Release()
	noHeadroom.Release()
	if n := pool.Outstanding(); n != 0 {
		t.Errorf("%d packets outstanding", n)
	}
}

func TestVNetHdrEncoding(t *testing.T) {
	tests := []struct {
		name string
		off  buffer.Offload
	}{
		{"zero", buffer.Offload{}},
		{"partial checksum", buffer.Offload{Flags: buffer.NeedsCsum, CsumStart: 34, CsumOffset: 16}},
		{"data valid", buffer.Offload{Flags: buffer.DataValid}},
		{"TCP super-segment", buffer.Offload{Flags: buffer.NeedsCsum, GSOType: buffer.GSOTCPv4, HdrLen: 66, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}},
		{"every field distinct", buffer.Offload{Flags: 0x81, GSOType: 0x84, HdrLen: 0x0102, GSOSize: 0x0304, CsumStart: 0x0506, CsumOffset: 0x0708}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := make([]byte, VNetHdrLen)
			encodeVNetHdr(b, tt.off)
			// struct virtio_net_hdr: u8 flags, u8 gso_type, then four
			// __virtio16 in the host's order (legacy header).
			want := []byte{tt.off.Flags, tt.off.GSOType}
			for _, v := range []uint16{tt.off.HdrLen, tt.off.GSOSize, tt.off.CsumStart, tt.off.CsumOffset} {
				want = binary.NativeEndian.AppendUint16(want, v)
			}
			if !bytes.Equal(b, want) {
				t.Errorf("encoded % x, want % x", b, want)
			}
			if got := decodeVNetHdr(b); got != tt.off {
				t.Errorf("decoded %+v, want %+v", got, tt.off)
			}
		})
	}
}
