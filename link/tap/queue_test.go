//go:build linux

package tap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
)

// fakeWrites is a write(2) that answers each call with the next of errs
// (nil: the frame is written), and then with nil. Its descriptor is a
// pipe's writing end: an EAGAIN is made true by filling the pipe, which a
// reader then drains, so that the poller sees the pipe become writable,
// as it sees a device's queue drain.
type fakeWrites struct {
	errs    []error
	frames  int      // frames written
	written [][]byte // and each one's bytes
	r       *os.File // the pipe's reading end
	// drained is closed when the drain, once started, has ended.
	drained chan struct{}
}

func (f *fakeWrites) write(fd int, pieces [][]byte) (int, error) {
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		if err == unix.EAGAIN {
			f.fill(fd)
		}
		if err != nil {
			return -1, err
		}
	}
	f.frames++
	var frame []byte
	for _, b := range pieces {
		frame = append(frame, b...)
	}
	f.written = append(f.written, frame)
	return len(frame), nil
}

// fill fills the pipe and starts a reader that drains it.
func (f *fakeWrites) fill(fd int) {
	chunk := make([]byte, 4096)
	for {
		if _, err := unix.Write(fd, chunk); err != nil {
			break // EAGAIN: full
		}
	}
	f.drained = make(chan struct{})
	go func() {
		defer close(f.drained)
		io.Copy(io.Discard, f.r) // until the writing end closes
	}()
}

// fakeEndpoint is an Endpoint whose one queue is a pipe's writing end and
// whose write(2) is f's, so that each outcome of a write can be had
// without a device or privileges.
func fakeEndpoint(t *testing.T, f *fakeWrites) *Endpoint {
	t.Helper()
	r, wf, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	f.r = r
	e := &Endpoint{name: "fake0", mtu: DefaultMTU, mac: []byte{2, 0, 0, 0, 0, 1}, sysWrite: f.write}
	q := &queue{e: e, file: wf}
	q.rd.fn, q.wr.fn = q.readSome, q.writeSome
	if q.rc, err = wf.SyscallConn(); err != nil {
		t.Fatal(err)
	}
	e.queues = []*queue{q}
	t.Cleanup(func() {
		e.Close()
		if f.drained != nil {
			<-f.drained // the drain saw the close
		}
		r.Close()
	})
	return e
}

// Every frame WriteBatch takes is either written (TxFrames) or refused and
// counted (TxErrors, and its cause): none is lost without a count. What the
// kernel cannot take yet is waited for (EAGAIN) or tried again (ENOBUFS,
// ENOMEM) rather than refused at once.
func TestEveryWriteOutcomeIsCounted(t *testing.T) {
	type counts struct {
		frames, errors, malformed, down, invalid, noBufs, retries, waits uint64
	}
	tests := []struct {
		name  string
		frame int // frame length; 60 unless set
		errs  []error
		taken int
		err   error
		want  counts
	}{
		{name: "written", want: counts{frames: 1}, taken: 1},
		{name: "EINTR: tried again", errs: []error{unix.EINTR}, taken: 1, want: counts{frames: 1}},
		{name: "EAGAIN: waits for the device, then written", errs: []error{unix.EAGAIN}, taken: 1, want: counts{frames: 1, waits: 1}},
		{name: "ENOBUFS twice: tried again, then written", errs: []error{unix.ENOBUFS, unix.ENOBUFS}, taken: 1, want: counts{frames: 1, retries: 2}},
		{name: "ENOBUFS at every try: refused", errs: []error{unix.ENOBUFS, unix.ENOBUFS, unix.ENOBUFS}, taken: 1, want: counts{errors: 1, noBufs: 1, retries: 2}},
		{name: "ENOMEM at every try: refused", errs: []error{unix.ENOMEM, unix.ENOMEM, unix.ENOMEM}, taken: 1, want: counts{errors: 1, noBufs: 1, retries: 2}},
		{name: "EIO: the interface is down", errs: []error{unix.EIO}, taken: 1, want: counts{errors: 1, down: 1}},
		{name: "EINVAL: the kernel finds it malformed", errs: []error{unix.EINVAL}, taken: 1, want: counts{errors: 1, invalid: 1}},
		{name: "EFAULT: refused for no other cause", errs: []error{unix.EFAULT}, taken: 1, want: counts{errors: 1}},
		{name: "a runt: refused before the kernel", frame: 13, taken: 1, want: counts{errors: 1, malformed: 1}},
		{name: "EBADFD: the device is gone", errs: []error{unix.EBADFD}, taken: 0, err: unix.EBADFD},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeWrites{errs: tt.errs}
			e := fakeEndpoint(t, fake)
			pool := buffer.NewPool()
			size := 60
			if tt.frame != 0 {
				size = tt.frame
			}
			p := pool.Get(size)
			defer p.Release()
			n, err := e.WriteBatch([]*buffer.Packet{p})
			if n != tt.taken || (tt.err == nil) != (err == nil) || tt.err != nil && !errors.Is(err, tt.err) {
				t.Errorf("WriteBatch = %d, %v; want %d, %v", n, err, tt.taken, tt.err)
			}
			st := e.Stats()
			got := counts{st.TxFrames.Load(), st.TxErrors.Load(), st.TxMalformed.Load(), st.TxDown.Load(),
				st.TxInvalid.Load(), st.TxNoBufs.Load(), st.TxRetries.Load(), st.TxWaits.Load()}
			if got != tt.want {
				t.Errorf("counters %+v, want %+v", got, tt.want)
			}
			if uint64(n) != got.frames+got.errors {
				t.Errorf("%d frames taken, %d written and %d refused: a frame went uncounted", n, got.frames, got.errors)
			}
			if uint64(fake.frames) != got.frames {
				t.Errorf("write(2) took %d frames, TxFrames = %d", fake.frames, got.frames)
			}
		})
	}
}

// kernelSocket returns a UDP socket in the namespace, closed with the
// test, and the kernel's ARP entry for the endpoint made permanent, so
// that the kernel sends datagrams to the stack's address at once.
func kernelSocket(t *testing.T, ns *testNS, e *Endpoint) int {
	t.Helper()
	ns.ip(t, "neigh", "replace", stackIP.String(), "lladdr", e.MAC().String(), "dev", e.Name(), "nud", "permanent")
	var sock int
	ns.do(t, func() {
		var err error
		if sock, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			t.Fatalf("socket in namespace: %v", err)
		}
	})
	t.Cleanup(func() { unix.Close(sock) })
	return sock
}

// readRoom is a batch of packets from pool with room for e's frames,
// released when the test ends.
func readRoom(t *testing.T, pool *buffer.Pool, e *Endpoint) []*buffer.Packet {
	pkts := make([]*buffer.Packet, buffer.MaxBatch)
	for i := range pkts {
		pkts[i] = pool.Get(link.MaxFrame(e.MTU()))
	}
	t.Cleanup(func() {
		for _, p := range pkts {
			p.Release()
		}
	})
	return pkts
}

// sendFlows sends one datagram from the kernel to the stack's port 9 from
// each of the source ports, through as many sockets bound to them.
func sendFlows(t *testing.T, ns *testNS, ports []int) {
	t.Helper()
	for _, port := range ports {
		var sock int
		ns.do(t, func() {
			var err error
			if sock, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
				t.Fatalf("socket in namespace: %v", err)
			}
		})
		if err := unix.Bind(sock, &unix.SockaddrInet4{Port: port}); err != nil {
			unix.Close(sock)
			t.Fatalf("bind :%d: %v", port, err)
		}
		err := unix.Sendto(sock, []byte("flow"), 0, &unix.SockaddrInet4{Port: 9, Addr: stackIP.As4()})
		unix.Close(sock)
		if err != nil {
			t.Fatalf("sendto from :%d: %v", port, err)
		}
	}
}

// drainQueue reads queue q without waiting (the device's descriptors are
// non-blocking: a read with nothing queued fails with EAGAIN, which the
// poller would wait out) and returns the UDP source ports of the
// datagrams read.
func drainQueue(t *testing.T, e *Endpoint, q int) []int {
	t.Helper()
	var ports []int
	buf := make([]byte, link.MaxFrame(e.MTU()))
	var readErr error
	for {
		n := 0
		if err := e.queues[q].rc.Read(func(fd uintptr) bool {
			n, readErr = unix.Read(int(fd), buf)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if readErr == unix.EAGAIN {
			return ports
		}
		if readErr != nil {
			t.Fatalf("reading queue %d: %v", q, readErr)
		}
		f := buf[:n]
		if len(f) >= 14+20+8 && binary.BigEndian.Uint16(f[12:14]) == etherTypeIPv4 && f[14+9] == protoUDP {
			ports = append(ports, int(binary.BigEndian.Uint16(f[14+20:])))
		}
	}
}

// udpFrame is a UDP datagram from the stack's port 9 to the kernel's
// port, as the endpoint would write it.
func udpFrame(e *Endpoint, kernelMAC []byte, port int) []byte {
	u := make([]byte, 8+4)
	binary.BigEndian.PutUint16(u[0:2], 9)
	binary.BigEndian.PutUint16(u[2:4], uint16(port))
	binary.BigEndian.PutUint16(u[4:6], uint16(len(u)))
	copy(u[8:], "back")
	return ethernet(kernelMAC, e.MAC(), etherTypeIPv4, ipv4(protoUDP, stackIP, kernelIP, u))
}

// numQueues returns the device's queues attached and detached, as ip -d
// link shows them.
func numQueues(t *testing.T, ns *testNS, dev string) (attached, detached int) {
	t.Helper()
	out := ns.ip(t, "-d", "link", "show", "dev", dev)
	i := strings.Index(out, "numqueues")
	if i < 0 {
		t.Fatalf("ip -d link show %s names no queues: %s", dev, out)
	}
	if _, err := fmt.Sscanf(out[i:], "numqueues %d numdisabled %d", &attached, &detached); err != nil {
		t.Fatalf("ip -d link show %s: %v: %s", dev, err, out)
	}
	return attached, detached
}

// lender counts the loans given back to it.
type lender struct{ returned int }

func (l *lender) Return() { l.returned++ }

// A frame that ends in loans (TCP's payload left in its send buffer) is
// written whole in one writev(2), the virtio-net header and head from the
// packet's buffer and the payload from where it is, and counted in
// TxGathered; the loans go back when the packet is released, not before.
func TestAFrameIsWrittenFromItsLoans(t *testing.T) {
	fake := &fakeWrites{}
	e := fakeEndpoint(t, fake)
	e.vnetHdr = true
	pool := buffer.NewPool()
	p := pool.Get(14 + 1400)
	head := p.Head()[:14]
	copy(head, "ethernet-head.")
	payload := bytes.Repeat([]byte("0123456789"), 140)
	var l lender
	p.Borrow(payload[:1000], &l)
	p.Borrow(payload[1000:], &l)
	p.Offload = buffer.Offload{Flags: buffer.NeedsCsum, CsumStart: 14, CsumOffset: 16}
	if n, err := e.WriteBatch([]*buffer.Packet{p}); n != 1 || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	if len(fake.written) != 1 {
		t.Fatalf("%d writes, want 1", len(fake.written))
	}
	got := fake.written[0]
	want := append(append(make([]byte, VNetHdrLen), "ethernet-head."...), payload...)
	encodeVNetHdr(want, p.Offload)
	if !bytes.Equal(got, want) {
		t.Errorf("wrote %d bytes %q..., want %d bytes %q...", len(got), got[:24], len(want), want[:24])
	}
	if st := e.Stats(); st.TxGathered.Load() != 1 || st.TxFrames.Load() != 1 || st.TxBytes.Load() != 1414 {
		t.Errorf("TxGathered %d, TxFrames %d, TxBytes %d; want 1, 1, 1414", st.TxGathered.Load(), st.TxFrames.Load(), st.TxBytes.Load())
	}
	if l.returned != 0 || p.Borrowed() != 1400 || p.Len() != 1414 {
		t.Errorf("after the write: %d loans returned, %d bytes borrowed, length %d; want 0, 1400, 1414", l.returned, p.Borrowed(), p.Len())
	}
	p.Release()
	if l.returned != 2 {
		t.Errorf("%d loans returned by Release, want 2", l.returned)
	}
}

// With several queues the kernel sends everything to the first until the
// others are attached; then it spreads flows over them all, and sends a
// flow's frames to the queue the endpoint last wrote that flow on.
func TestQueuesCarryFlowsAsTheKernelSteersThem(t *testing.T) {
	ns := newNS(t)
	e := ns.open(t, Options{Queues: 2})
	ns.up(t, e)
	kernelSocket(t, ns, e)
	if a, d := numQueues(t, ns, e.Name()); a != 1 || d != 1 {
		t.Errorf("after Open: %d queues attached, %d detached; want 1 and 1", a, d)
	}
	var ports []int
	for p := 20000; p < 20032; p++ {
		ports = append(ports, p)
	}

	t.Run("before AttachQueues every flow comes on the first queue", func(t *testing.T) {
		sendFlows(t, ns, ports)
		// (A detached queue's reads fail, EBADFD: there is nothing
		// to look for on it.)
		if got := drainQueue(t, e, 0); len(got) != len(ports) {
			t.Errorf("queue 0 has %d of the %d flows", len(got), len(ports))
		}
	})

	if n, err := e.AttachQueues(); n != 2 || err != nil {
		t.Fatalf("AttachQueues = %d, %v; want 2, nil", n, err)
	}
	if a, d := numQueues(t, ns, e.Name()); a != 2 || d != 0 {
		t.Errorf("after AttachQueues: %d queues attached, %d detached; want 2 and 0", a, d)
	}

	t.Run("attached, the flows are spread over both", func(t *testing.T) {
		sendFlows(t, ns, ports)
		q0, q1 := drainQueue(t, e, 0), drainQueue(t, e, 1)
		if len(q0)+len(q1) != len(ports) || len(q0) == 0 || len(q1) == 0 {
			t.Errorf("queues 0 and 1 have %d and %d of %d flows, want all of them on both", len(q0), len(q1), len(ports))
		}
	})

	t.Run("a flow comes back on the queue it was written on", func(t *testing.T) {
		kernelMAC, err := net.ParseMAC(ns.link(t, e.Name()).Address)
		if err != nil {
			t.Fatal(err)
		}
		pool := buffer.NewPool()
		for i, p := range ports {
			q := i % 2
			f := udpFrame(e, kernelMAC, p)
			pkt := pool.Get(len(f))
			copy(pkt.Bytes(), f)
			if n, err := e.WriteQueue(q, []*buffer.Packet{pkt}); n != 1 || err != nil {
				t.Fatalf("WriteQueue(%d) = %d, %v", q, n, err)
			}
			pkt.Release()
		}
		sendFlows(t, ns, ports)
		back := 0
		for q := range 2 {
			got := drainQueue(t, e, q)
			back += len(got)
			for _, p := range got {
				if want := (p - ports[0]) % 2; want != q {
					t.Errorf("the flow from port %d, written on queue %d, came back on queue %d", p, want, q)
				}
			}
		}
		if back != len(ports) {
			t.Errorf("%d of %d flows came back", back, len(ports))
		}
	})
}

// The kernel holds a burst for a reader that is busy elsewhere: at
// DefaultTxQueueLen a burst of 5000 frames waits whole, where the kernel's
// own default of 1000 drops the rest (the device's tx_dropped, which
// gonet_tap_tx_dropped_total shows).
func TestBurstWaitsForABusyReader(t *testing.T) {
	const burst = 5000
	tests := []struct {
		name    string
		qlen    int
		dropped bool
	}{
		{"DefaultTxQueueLen holds it", 0, false},
		{"the kernel's default of 1000 drops", 1000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := newNS(t)
			e := ns.open(t, Options{TxQueueLen: tt.qlen})
			ns.up(t, e)
			sock := kernelSocket(t, ns, e)
			// No one reads while the kernel sends: the reader stalled.
			to := &unix.SockaddrInet4{Port: 9, Addr: stackIP.As4()}
			for i := range burst {
				if err := unix.Sendto(sock, []byte(fmt.Sprint(i)), 0, to); err != nil {
					t.Fatalf("sendto %d: %v", i, err)
				}
			}
			pool := buffer.NewPool()
			pkts := readRoom(t, pool, e)
			// Read until every datagram is either read or dropped;
			// a watchdog ends a read that waits for one that is
			// neither.
			watchdog := time.AfterFunc(10*time.Second, func() { e.Close() })
			defer watchdog.Stop()
			read := 0
			dropped := ns.link(t, e.Name()).Stats.TX.Dropped
			for read+int(dropped) < burst {
				n, err := e.ReadBatch(pkts)
				if err != nil {
					t.Fatalf("read %d datagrams, %d dropped, of %d sent: ReadBatch: %v", read, dropped, burst, err)
				}
				for _, p := range pkts[:n] {
					if b := p.Bytes(); len(b) >= 14+20 && binary.BigEndian.Uint16(b[12:14]) == etherTypeIPv4 && b[14+9] == protoUDP {
						read++
					}
				}
				dropped = ns.link(t, e.Name()).Stats.TX.Dropped
			}
			if read+int(dropped) != burst {
				t.Errorf("read %d datagrams and the kernel dropped %d, of %d sent", read, dropped, burst)
			}
			if (dropped > 0) != tt.dropped {
				t.Errorf("the kernel dropped %d of a burst of %d at txqueuelen %d; want drops: %v", dropped, burst, tt.qlen, tt.dropped)
			}
			if got := ns.link(t, e.Name()).TxQueueLen; tt.qlen == 0 && got != DefaultTxQueueLen {
				t.Errorf("txqueuelen = %d, want %d", got, DefaultTxQueueLen)
			}
		})
	}
}
