//go:build linux

package tap

import (
	"encoding/binary"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gonetstack/gonet/buffer"
)

// A reader that finds the device empty polls it before it sleeps in the
// poller (Options.Spin): a frame that comes while it polls is found there
// and counted in SpinHits; with polling off, never.
func TestReaderPollsTheDeviceBeforeItSleeps(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spin    time.Duration
		wantHit bool
	}{
		{"a frame within the spin is found by polling", 5 * time.Second, true},
		{"with a negative spin the reader only sleeps", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNS(t)
			e := ns.open(t, Options{Spin: tc.spin})
			ns.up(t, e)
			sock := kernelSocket(t, ns, e)
			pool := buffer.NewPool()
			pkts := readRoom(t, pool, e)
			got := make(chan error, 1)
			go func() {
				// Read what the kernel sent on its own (router
				// solicitations, reports), then the datagram, which
				// comes while the reader waits for it.
				for {
					n, err := e.ReadBatch(pkts)
					if err != nil {
						got <- err
						return
					}
					for _, p := range pkts[:n] {
						if b := p.Bytes(); len(b) >= 14+20 && binary.BigEndian.Uint16(b[12:14]) == etherTypeIPv4 && b[14+9] == protoUDP {
							got <- nil
							return
						}
					}
				}
			}()
			time.Sleep(100 * time.Millisecond) // the reader drains the device and waits
			if err := unix.Sendto(sock, []byte("ping"), 0, &unix.SockaddrInet4{Port: 9, Addr: stackIP.As4()}); err != nil {
				t.Fatalf("sendto: %v", err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatalf("ReadBatch: %v", err)
				}
			case <-time.After(10 * time.Second):
				e.Close()
				t.Fatal("the datagram never reached the reader")
			}
			if hits := e.Stats().SpinHits.Load(); (hits > 0) != tc.wantHit {
				t.Errorf("SpinHits = %d with Spin %v; want hits: %v", hits, tc.spin, tc.wantHit)
			}
		})
	}
}
