package gateway

import (
	"bytes"
	"fmt"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gonetstack/gonet/link/tap"
)

func TestHostBatchRunsAreEqualSizesAndOneShorterLast(t *testing.T) {
	sizes := func(s ...int) [][]byte {
		p := make([][]byte, len(s))
		for i, n := range s {
			p[i] = make([]byte, n)
		}
		return p
	}
	many := make([]int, maxGSOSegments+5)
	for i := range many {
		many[i] = 100
	}
	tests := []struct {
		name     string
		payloads [][]byte
		want     int
	}{
		{"one", sizes(1000), 1},
		{"equal", sizes(1000, 1000, 1000), 3},
		{"a shorter one ends the run", sizes(1000, 1000, 500, 500), 3},
		{"a longer one starts another", sizes(1000, 1200), 1},
		{"an empty one is sent alone", sizes(1000, 0), 1},
		{"an empty first", sizes(0, 0), 1},
		{"no more than maxGSOSegments", sizes(many...), maxGSOSegments},
		{"no more than a datagram's payload", sizes(30000, 30000, 30000), 2},
	}
	for _, tt := range tests {
		var b hostBatch
		if got := b.run(tt.payloads); got != tt.want {
			t.Errorf("%s: run of %d, want %d", tt.name, got, tt.want)
		}
		b.noGSO = true
		if got := b.run(tt.payloads); got != 1 {
			t.Errorf("%s without GSO: run of %d, want 1", tt.name, got)
		}
	}
}

// Sent to a kernel socket over the loopback, segmented or not, each
// datagram arrives whole, in order, as the guest sent it.
func TestHostBatchDatagramsArriveAsSent(t *testing.T) {
	for _, noGSO := range []bool{false, true} {
		t.Run(fmt.Sprintf("noGSO=%v", noGSO), func(t *testing.T) {
			rcv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer rcv.Close()
			snd, err := net.DialUDP("udp4", nil, rcv.LocalAddr().(*net.UDPAddr))
			if err != nil {
				t.Fatal(err)
			}
			defer snd.Close()
			rc, err := snd.SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			var payloads [][]byte
			for i, n := range []int{1000, 1000, 1000, 500, 800, 800, 0, 1200} {
				payloads = append(payloads, bytes.Repeat([]byte{byte('a' + i)}, n))
			}
			b := newHostBatch(rc)
			b.noGSO = noGSO
			sent, segmented, err := b.sendAll(payloads)
			want := 6 // 1000×3 and 500, then 800×2
			if noGSO {
				want = 0
			}
			if err != nil || sent != len(payloads) || segmented != want {
				t.Fatalf("sent %d of %d, %d segmented (want %d): %v", sent, len(payloads), segmented, want, err)
			}
			rcv.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 65536)
			for i, p := range payloads {
				n, err := rcv.Read(buf)
				if err != nil {
					t.Fatalf("datagram %d: %v", i, err)
				}
				if !bytes.Equal(buf[:n], p) {
					t.Errorf("datagram %d: %d bytes of %q, want %d of %q", i, n, buf[:min(n, 1)], len(p), p[:min(len(p), 1)])
				}
			}
		})
	}
}

// udpRuns are the runs the run tests send: runs of perRun datagrams,
// each of size bytes but the last, of last; every byte of a datagram is
// its number, so that one out of place shows.
type udpRuns struct{ runs, perRun, size, last int }

var testRuns = udpRuns{runs: 30, perRun: 20, size: 1200, last: 500}

func (u udpRuns) datagram(r, i int) []byte {
	n := u.size
	if i == u.perRun-1 {
		n = u.last
	}
	return bytes.Repeat([]byte{byte(r*u.perRun + i)}, n)
}

// run is run r's datagrams back to back, as a UDP_SEGMENT send takes them.
func (u udpRuns) run(r int) []byte {
	var b []byte
	for i := range u.perRun {
		b = append(b, u.datagram(r, i)...)
	}
	return b
}

// expect reads run r's datagrams from c, each whole and in order.
func (u udpRuns) expect(t *testing.T, c *net.UDPConn, r int) {
	t.Helper()
	buf := make([]byte, 65536)
	for i := range u.perRun {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("run %d, datagram %d: %v", r, i, err)
		}
		if want := u.datagram(r, i); !bytes.Equal(buf[:n], want) {
			t.Fatalf("run %d, datagram %d: %d bytes of %d, want %d of %d", r, i, n, buf[0], len(want), want[0])
		}
	}
}

// segmentSends makes every send on c a run of datagrams of size bytes
// (UDP_SEGMENT).
func segmentSends(t *testing.T, c *net.UDPConn, size int) {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, size)
	}); err != nil || serr != nil {
		t.Fatalf("UDP_SEGMENT: %v, %v", err, serr)
	}
}

// openUDPFlow opens a flow from the guest to srv, a loopback server,
// through the gateway, and returns the guest's socket and the flow's
// address at srv. The first datagram also resolves the gateway's
// address, so that no run waits in the guest's neighbour queue.
func openUDPFlow(t *testing.T, r *gatewayRig, srv *net.UDPConn) (*net.UDPConn, *net.UDPAddr) {
	t.Helper()
	var c *net.UDPConn
	if err := r.guest.Do(func() error {
		var err error
		c, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: r.net.Gateway.AsSlice(), Port: srv.LocalAddr().(*net.UDPAddr).Port})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte("open")); err != nil {
		t.Fatal(err)
	}
	srv.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64)
	n, from, err := srv.ReadFromUDP(buf)
	if err != nil || string(buf[:n]) != "open" {
		t.Fatalf("the flow's first datagram: %q, %v", buf[:n], err)
	}
	return c, from
}

// loopbackUDP is a UDP socket on this process's IPv4 loopback.
func loopbackUDP(t *testing.T) *net.UDPConn {
	t.Helper()
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// A guest's own UDP runs (a QUIC sender's UDP_SEGMENT) cross the gateway's
// TAP whole, are cut into datagrams by GoNet's NIC and leave the host
// socket in segmented runs again: the host's server receives every
// datagram whole and in order.
func TestGatewayRelaysAGuestsUDPRunsWhole(t *testing.T) {
	r := newGatewayRigOn(t, Config{}, tap.Options{MTU: 1500, Offload: true})
	srv := loopbackUDP(t)
	c, _ := openUDPFlow(t, r, srv)
	segmentSends(t, c, testRuns.size)
	// A run at a time, each read before the next is sent: the host
	// socket's queue may be the kernel's default.
	for run := range testRuns.runs {
		if _, err := c.Write(testRuns.run(run)); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		testRuns.expect(t, srv, run)
	}
	counters := r.s.Counters()
	uso, segmented := counters["NIC.tap0.RxUSO"], r.gw.Stats.UDPToHostSegmented.Load()
	t.Logf("NIC RxUSO %d, RxUSODatagrams %d; UDPToHostSegmented %d", uso, counters["NIC.tap0.RxUSODatagrams"], segmented)
	if uso != int64(testRuns.runs) || segmented == 0 {
		t.Errorf("%d of %d runs came whole, %d datagrams left segmented", uso, testRuns.runs, segmented)
	}
}

// A host server's UDP runs (its UDP_SEGMENT, as a QUIC server's) reach the
// flow's host socket whole (UDP_GRO), one read a run, and the guest, a
// kernel socket, receives every datagram whole and in order.
func TestGatewayReadsTheHostsUDPRunsWhole(t *testing.T) {
	for _, offload := range []bool{false, true} {
		t.Run(fmt.Sprintf("offload=%v", offload), func(t *testing.T) {
			r := newGatewayRigOn(t, Config{}, tap.Options{MTU: 1500, Offload: offload})
			srv := loopbackUDP(t)
			segmentSends(t, srv, testRuns.size)
			c, from := openUDPFlow(t, r, srv)
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			// An empty datagram is one too.
			if _, err := srv.WriteToUDP(nil, from); err != nil {
				t.Fatal(err)
			}
			if n, err := c.Read(make([]byte, 64)); n != 0 || err != nil {
				t.Fatalf("the empty datagram: %d bytes, %v", n, err)
			}
			// A run at a time, each read before the next is sent: the
			// guest's socket queue is the kernel's default.
			for run := range testRuns.runs {
				if _, err := srv.WriteToUDP(testRuns.run(run), from); err != nil {
					t.Fatalf("run %d: %v", run, err)
				}
				testRuns.expect(t, c, run)
			}
			all, coalesced := r.gw.Stats.UDPToGuest.Load(), r.gw.Stats.UDPToGuestCoalesced.Load()
			t.Logf("UDPToGuest %d, UDPToGuestCoalesced %d, TAP TxUSO %d", all, coalesced, r.tap.Stats().TxUSO.Load())
			want := uint64(testRuns.runs * testRuns.perRun)
			if all != want+1 || coalesced != want {
				t.Errorf("UDPToGuest %d, UDPToGuestCoalesced %d; want %d, all but the empty one in runs", all, coalesced, want+1)
			}
		})
	}
}
