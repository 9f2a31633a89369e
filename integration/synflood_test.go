package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/services"
)

// Attacks from the kernel's side of the namespace: a raw socket there
// sends hand-built segments to GoNet, with forged source addresses that lie
// inside the namespace's own subnet (10.99.0.0/24) and nowhere else.

// rawSender sends IPv4 datagrams built by the test from inside the
// namespace (rawSocket).
type rawSender struct{ fd int }

func (h *host) rawSender(t *testing.T) *rawSender {
	t.Helper()
	return &rawSender{fd: rawSocket(t, h.ns)}
}

// rawSocket opens a raw IPv4 socket in ns, closed when the test ends. Its
// protocol, IPPROTO_RAW, implies IP_HDRINCL: the test writes the IP
// header, source address included, and the namespace's routes choose the
// link.
func rawSocket(t *testing.T, ns *netns.NS) int {
	t.Helper()
	var fd int
	err := ns.Do(func() error {
		var err error
		fd, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_RAW)
		return err
	})
	if err != nil {
		t.Fatalf("raw socket in %s: %v", ns, err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	return fd
}

// send sends one datagram; its destination must be GoNet.
func (s *rawSender) send(pkt []byte) error {
	if !bytes.Equal(pkt[16:20], gonetAddr.Addr().AsSlice()) {
		panic("rawSender: a datagram not for GoNet")
	}
	return syscall.Sendto(s.fd, pkt, 0, &syscall.SockaddrInet4{Addr: gonetAddr.Addr().As4()})
}

// tcpDatagram builds an IPv4 datagram carrying seg (gopacket encodes it,
// checksums included). Its source must be in the namespace's subnet.
func tcpDatagram(t testing.TB, seg rawtest.TCPSegment) []byte {
	t.Helper()
	if !kernelAddr.Contains(seg.Src.Addr()) || seg.Dst.Addr() != gonetAddr.Addr() {
		t.Fatalf("segment %v: only from the namespace's subnet to GoNet", seg)
	}
	ip := rawtest.IPv4Header(seg.Src.Addr(), seg.Dst.Addr(), layers.IPProtocolTCP)
	return rawtest.Serialize(t, ip, rawtest.Payload(rawtest.TCPBytes(t, seg)))
}

// A SYN flood from forged addresses in the subnet (hosts that do not
// exist: GoNet's SYN-ACKs wait on ARP and are dropped) against a listener
// with a small backlog. The half-open connections fill the backlog at once;
// from then on every SYN is answered with a cookie and no state. During
// the flood a connection made before it still echoes, and a new kernel
// client still connects, through a cookie, with its options.
func TestSynFloodKernelStillConnects(t *testing.T) {
	checkGoroutines(t)
	h := newHost(t, options{})
	defer h.logCounters(t, false)
	const port, backlog = 7, 8
	l, err := h.stack.TCP().Listen(netip.AddrPortFrom(netip.IPv4Unspecified(), port), backlog)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- services.ServeEchoTCP(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("echo service: %v", err)
		}
	})

	before := h.kernelConn(t, gonetTCPAddr(port))
	echoes(t, before, 1)

	// Thousands of distinct SYNs, as Linux would send them (MSS, SACK,
	// timestamps, window scale), from 10.99.0.100-250.
	rng := rand.New(rand.NewPCG(6, 1))
	syns := make([][]byte, 4096)
	for i := range syns {
		src := netip.AddrFrom4([4]byte{10, 99, 0, byte(100 + rng.IntN(151))})
		syns[i] = tcpDatagram(t, rawtest.TCPSegment{
			Src: netip.AddrPortFrom(src, uint16(1024+rng.IntN(64000))), Dst: netip.AddrPortFrom(gonetAddr.Addr(), port),
			Seq: rng.Uint32(), Flags: rawtest.SYN, Window: 64240,
			Opts: rawtest.TCPOpts{MSS: 1460, SACKPermitted: true, HasTimestamp: true, TSVal: rng.Uint32(), HasWScale: true, WScale: 7},
		})
	}
	raw := h.rawSender(t)
	var sent, refused atomic.Int64
	stop, stopped := make(chan struct{}), make(chan struct{})
	start := time.Now()
	go func() {
		defer close(stopped)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// ENOBUFS: the TAP's queue is full; the SYN is lost, as
			// on a saturated link.
			if err := raw.send(syns[i%len(syns)]); err != nil {
				refused.Add(1)
			} else {
				sent.Add(1)
			}
			// About 10,000 a second: fast, but within what GoNet can
			// read off the TAP even under the race detector. A flood
			// beyond that fills the TAP's queue, and then the other
			// segments in it are lost too: no defence of the
			// listener's can help a link that is saturated.
			if i%100 == 99 {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-stopped
	}()
	waitCounter(t, h, "SynCookiesSent", 1000, 20*time.Second)
	t.Logf("after %v: %d SYNs sent, the backlog full, cookies answering", time.Since(start).Round(time.Millisecond), sent.Load())

	// The connection made before the flood still echoes.
	echoes(t, before, 20)
	// A new client connects through a cookie.
	after, err := h.dialKernel(t, net.Dialer{Timeout: 30 * time.Second}, gonetTCPAddr(port))
	if err != nil {
		t.Fatalf("a new client during the flood: %v", err)
	}
	echoes(t, after, 20)
	for sent.Load() < 10000 {
		echoes(t, before, 1)
		echoes(t, after, 1)
	}
	during := sent.Load()
	close(stop)
	<-stopped
	elapsed := time.Since(start)
	t.Logf("flood: %d SYNs in %v (%.0f/s), %d refused by the TAP's queue", during, elapsed.Round(time.Millisecond),
		float64(during)/elapsed.Seconds(), refused.Load())

	c := h.stack.Counters()
	t.Logf("GoNet: %d cookies sent, %d validated, %d failed; %d SYNs dropped; ARP dropped %d SYN-ACKs to nobody",
		c["TCP.SynCookiesSent"], c["TCP.SynCookiesValidated"], c["TCP.SynCookiesFailed"], c["TCP.ListenDrops"],
		c["ARP."+h.dev+".UnresolvedDrops"]+c["ARP."+h.dev+".QueueDrops"])
	if c["TCP.SynCookiesValidated"] < 1 || c["TCP.SynCookiesFailed"] != 0 {
		t.Errorf("cookies validated %d, failed %d; want the new client's, and no failure", c["TCP.SynCookiesValidated"], c["TCP.SynCookiesFailed"])
	}
	if during < 10000 {
		t.Errorf("the flood sent %d SYNs, want thousands", during)
	}
	// The new client's connection kept its options: timestamps, SACK and
	// window scaling in the kernel's view, and GoNet's MSS from the
	// cookie's table less the timestamps.
	ki := kernelTCPInfo(t, after)
	if ki.options&(tcpiOptTimestamps|tcpiOptSACK|tcpiOptWScale) != tcpiOptTimestamps|tcpiOptSACK|tcpiOptWScale || ki.sndWScale != 7 {
		t.Errorf("the kernel's end: %+v, want timestamps, SACK and window scaling, GoNet's scale 7", ki)
	}
	local := after.LocalAddr().(*net.TCPAddr).AddrPort()
	for _, ci := range h.stack.Connections() {
		if ci.Remote == local && ci.MSS != 1460-12 {
			t.Errorf("GoNet's end of the new connection: MSS %d, want %d", ci.MSS, 1460-12)
		}
	}
	// After the flood too.
	echoes(t, before, 5)
	echoes(t, after, 5)
}

// echoes sends n messages through the echo at the other end of c, one at a
// time, and checks each comes back.
func echoes(t *testing.T, c net.Conn, n int) {
	t.Helper()
	msg := make([]byte, 1000)
	back := make([]byte, len(msg))
	for i := range n {
		copy(msg, fmt.Sprintf("message %d of %d through %v", i, n, c.LocalAddr()))
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Write(msg); err != nil {
			t.Fatalf("echo %d: write: %v", i, err)
		}
		if _, err := io.ReadFull(c, back); err != nil {
			t.Fatalf("echo %d: read: %v", i, err)
		}
		if !bytes.Equal(back, msg) {
			t.Fatalf("echo %d came back as %q", i, back[:40])
		}
	}
	c.SetDeadline(time.Time{})
}

// The bits of tcp_info's tcpi_options (linux/tcp.h).
const (
	tcpiOptTimestamps = 1
	tcpiOptSACK       = 2
	tcpiOptWScale     = 4
)

// tcpInfo is what the tests read of a kernel socket's struct tcp_info.
type tcpInfo struct {
	options              uint8
	sndWScale, rcvWScale uint8
}

// kernelTCPInfo reads the options a kernel socket negotiated. The bytes are
// read raw: x/sys/unix's TCPInfo has no field for the window scales, which
// share a byte as bit fields.
func kernelTCPInfo(t *testing.T, c *net.TCPConn) tcpInfo {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var b [104]byte
	var serr error
	err = rc.Control(func(fd uintptr) {
		n := uint32(len(b))
		_, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_INFO,
			uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&n)), 0)
		if e != 0 {
			serr = e
		}
	})
	if err = errors.Join(err, serr); err != nil {
		t.Fatalf("TCP_INFO: %v", err)
	}
	return tcpInfo{options: b[5], sndWScale: b[6] & 0xf, rcvWScale: b[6] >> 4}
}

// waitCounter waits, on the wall clock, for one of GoNet's TCP counters to
// reach want.
func waitCounter(t *testing.T, h *host, name string, want int64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for h.tcpCounter(name) < want {
		if time.Now().After(deadline) {
			t.Fatalf("TCP.%s = %d after %v, want %d", name, h.tcpCounter(name), timeout, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
