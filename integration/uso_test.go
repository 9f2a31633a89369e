package integration

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// GoNet's UDP bursts cross the TAP as UDP segmentation offload frames
// (link/tap/uso.go), and the kernel cuts them back into the datagrams
// GoNet sent: a kernel socket receives every one, whole and in order, the
// last of a run shorter ones included.
func TestUDPBurstsCrossTheTAPSegmentedAndArriveWhole(t *testing.T) {
	h := newHost(t, options{})
	// GoNet learns the kernel's address from its ARP request: the burst
	// does not wait in the neighbour cache's queue.
	h.run(t, 10*time.Second, "ping", "-c", "1", "-W", "5", gonetAddr.Addr().String())
	var ks *net.UDPConn
	if err := h.ns.Do(func() error {
		var err error
		ks, err = net.ListenUDP("udp4", &net.UDPAddr{IP: kernelAddr.Addr().AsSlice(), Port: 5001})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ks.Close()
	// Room for the whole burst: a run reaches the socket at once, faster
	// than a reader takes datagrams one by one.
	setsockopt(t, ks, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20)
	c, err := h.stack.ListenUDP(netip.AddrPortFrom(gonetAddr.Addr(), 0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	to := netip.AddrPortFrom(kernelAddr.Addr(), 5001)
	const n = 3000
	sizes := func(i int) int {
		if i%50 == 49 {
			return 300 // a shorter one now and then ends a run
		}
		return 1200
	}
	got := make(chan error, 1)
	go func() {
		buf := make([]byte, 2048)
		ks.SetReadDeadline(time.Now().Add(20 * time.Second))
		for i := range n {
			m, err := ks.Read(buf)
			if err != nil {
				got <- fmt.Errorf("datagram %d: %v", i, err)
				return
			}
			if want := bytes.Repeat([]byte{byte(i)}, sizes(i)); !bytes.Equal(buf[:m], want) {
				got <- fmt.Errorf("datagram %d: %d bytes starting %d, want %d of %d", i, m, buf[0], len(want), byte(i))
				return
			}
		}
		got <- nil
	}()
	for i := range n {
		if _, err := c.WriteToUDPAddrPort(bytes.Repeat([]byte{byte(i)}, sizes(i)), to); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-got; err != nil {
		t.Log(h.run(t, 5*time.Second, "sh", "-c", "grep -A1 Udp: /proc/net/snmp; ip -s link show "+h.dev))
		t.Fatal(err)
	}
	st := h.tap.Stats()
	t.Logf("TxUSO %d of %d datagrams, TxUSORefused %d", st.TxUSO.Load(), n, st.TxUSORefused.Load())
	if st.TxUSO.Load() == 0 || st.TxUSORefused.Load() != 0 {
		t.Errorf("TxUSO %d, TxUSORefused %d: no run crossed the TAP segmented", st.TxUSO.Load(), st.TxUSORefused.Load())
	}
}

// The kernel's own UDP runs (a socket's UDP_SEGMENT) cross the TAP whole,
// as GoNet asks with TUN_F_USO4 and TUN_F_USO6, and GoNet's NIC cuts them
// into their datagrams (ethernet/uso.go): a GoNet socket receives every
// one, whole and in order, each run's shorter last one included, over
// both families.
func TestKernelUDPRunsCrossTheTAPWholeAndArriveAsDatagrams(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(map[bool]string{false: "ipv4", true: "ipv6"}[v6], func(t *testing.T) {
			h := newHost6(t, options{}, true)
			to, network := gonetAddr.Addr(), "udp4"
			if v6 {
				to, network = gonetAddr6.Addr(), "udp6"
			}
			c, err := h.stack.ListenUDP(netip.AddrPortFrom(to, 5002))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.SetReadBuffer(8 << 20); err != nil {
				t.Fatal(err)
			}
			// The kernel learns GoNet's link-layer address first: runs
			// sent while it resolves wait in a short queue, and the
			// first overflow it.
			h.run(t, 10*time.Second, "ping", "-c", "1", "-W", "5", to.String())
			// Runs of 20 datagrams of 1200 bytes and a last of 300, all
			// sent at once: 840 datagrams, within the socket's queue of
			// 1024 and the 8 MiB asked for, so that a reader kept from
			// its CPU loses none.
			const runs, perRun, size, last = 40, 21, 1200, 300
			var ks *net.UDPConn
			if err := h.ns.Do(func() error {
				var err error
				ks, err = net.DialUDP(network, nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(to, 5002)))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer ks.Close()
			setsockopt(t, ks, unix.SOL_UDP, unix.UDP_SEGMENT, size)
			datagram := func(r, i int) []byte {
				n := size
				if i == perRun-1 {
					n = last
				}
				return bytes.Repeat([]byte{byte(r*perRun + i)}, n)
			}
			got := make(chan error, 1)
			go func() {
				buf := make([]byte, 2048)
				c.SetReadDeadline(time.Now().Add(20 * time.Second))
				for r := range runs {
					for i := range perRun {
						m, _, err := c.ReadFromUDPAddrPort(buf)
						if err != nil {
							got <- fmt.Errorf("run %d, datagram %d: %v", r, i, err)
							return
						}
						if want := datagram(r, i); !bytes.Equal(buf[:m], want) {
							got <- fmt.Errorf("run %d, datagram %d: %d bytes starting %d, want %d of %d", r, i, m, buf[0], len(want), want[0])
							return
						}
					}
				}
				got <- nil
			}()
			for r := range runs {
				var run []byte
				for i := range perRun {
					run = append(run, datagram(r, i)...)
				}
				if _, err := ks.Write(run); err != nil {
					t.Fatalf("run %d: %v", r, err)
				}
			}
			if err := <-got; err != nil {
				t.Fatalf("%v (NIC RxUSODatagrams %d, UDP RcvbufErrors %d)", err, h.counter("NIC."+h.dev+".RxUSODatagrams"), h.counter("UDP.RcvbufErrors"))
			}
			st := h.tap.Stats()
			uso, datagrams := h.counter("NIC."+h.dev+".RxUSO"), h.counter("NIC."+h.dev+".RxUSODatagrams")
			t.Logf("TAP RxUSO %d; NIC RxUSO %d, RxUSODatagrams %d, RxUSODropped %d", st.RxUSO.Load(), uso, datagrams, h.counter("NIC."+h.dev+".RxUSODropped"))
			if uso != runs || datagrams != runs*perRun || st.RxUSO.Load() != runs {
				t.Errorf("%d runs of %d datagrams came whole, want %d of %d", uso, datagrams, runs, runs*perRun)
			}
		})
	}
}

// setsockopt sets a kernel socket's integer option, failing the test if
// the kernel refuses it.
func setsockopt(t *testing.T, c *net.UDPConn, level, opt, v int) {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), level, opt, v) }); err != nil || serr != nil {
		t.Fatalf("setsockopt(%d, %d, %d): %v, %v", level, opt, v, err, serr)
	}
}
