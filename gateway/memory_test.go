package gateway

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// What an idle relayed flow costs the gateway's process: the Go heap and
// goroutine stacks it holds, over flows many enough that the rest is
// noise. The guest is the kernel in a namespace and the host's peer a
// listener of raw descriptors, so that nothing of either side is in the
// Go heap: what grows is the gateway's and its stack's alone.

// maxIdleFlowBytes is the goal for an idle relayed flow (issue 11:
// at most 32 KiB resident).
const maxIdleFlowBytes = 32 << 10

// flowCount is how many idle flows a measurement holds.
const flowCount = 1000

// footprint is what the process holds: heap, goroutine stacks, and
// goroutines.
type footprint struct{ heap, stacks, goroutines int64 }

// measure takes the footprint after collecting garbage (which also shrinks
// stacks that grew and are no longer used).
func measure() footprint {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return footprint{int64(m.HeapInuse), int64(m.StackInuse), int64(runtime.NumGoroutine())}
}

// perFlow is the footprint f has over base, per flow of n.
func (f footprint) perFlow(base footprint, n int64) footprint {
	return footprint{(f.heap - base.heap) / n, (f.stacks - base.stacks) / n, (f.goroutines - base.goroutines) / n}
}

// rawSocket makes a socket of the given type as a bare descriptor, closed
// when the test ends.
func rawSocket(t *testing.T, typ int) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, typ|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	return fd
}

// rawLoopback binds a raw socket of typ to the loopback and returns it
// with its port.
func rawLoopback(t *testing.T, typ int) (int, uint16) {
	t.Helper()
	fd := rawSocket(t, typ)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fd, uint16(sa.(*syscall.SockaddrInet4).Port)
}

// waitIdle waits until the gateway relays want flows and holds no relay
// buffer.
func waitIdle(t *testing.T, gw *Gateway, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(gw.Flows()) != want || gw.Stats.Relay.BuffersHeld.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d flows relayed, %d relay buffers held; want %d flows, idle", len(gw.Flows()), gw.Stats.Relay.BuffersHeld.Load(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the last datagrams and ACKs settle
}

// TestGatewayIdleFlowMemoryAlloc pins the memory of an idle relayed flow,
// TCP and UDP, each having carried a few bytes both ways. It skips under
// the race detector, whose shadow memory would count, and runs in the
// allocs target (go test -run Alloc).
func TestGatewayIdleFlowMemoryAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector inflates the heap; run without -race (make allocs)")
	}
	if testing.Short() {
		t.Skip("opens a thousand flows")
	}
	tests := []struct {
		name string
		// open opens n flows from the guest through the gateway to a host
		// peer, each carrying a little both ways.
		open func(t *testing.T, r *gatewayRig, n int)
	}{
		{"TCP", openTCPFlows},
		{"UDP", openUDPFlows},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newGatewayRig(t, Config{UDPTimeout: time.Hour, UDPStreamTimeout: time.Hour})
			// A few flows first, so that what a first flow sets up once
			// (pools, the dealers' batches, the table) is not counted.
			tt.open(t, r, 10)
			waitIdle(t, r.gw, 10)
			before := measure()
			tt.open(t, r, flowCount)
			waitIdle(t, r.gw, 10+flowCount)
			f := measure().perFlow(before, flowCount)
			per := f.heap + f.stacks
			t.Logf("an idle relayed %s flow holds %d bytes: %d of heap, %d of stacks for %d goroutines (%d flows)",
				tt.name, per, f.heap, f.stacks, f.goroutines, flowCount)
			if per > maxIdleFlowBytes {
				t.Errorf("an idle %s flow holds %d bytes, more than the %d of the goal", tt.name, per, maxIdleFlowBytes)
			}
		})
	}
}

// openTCPFlows connects n times from the guest to a host listener on the
// gateway's address; the guest sends a byte, the host peer answers one.
func openTCPFlows(t *testing.T, r *gatewayRig, n int) {
	t.Helper()
	lfd, port := rawLoopback(t, syscall.SOCK_STREAM)
	if err := syscall.Listen(lfd, n); err != nil {
		t.Fatal(err)
	}
	gw := &syscall.SockaddrInet4{Addr: r.net.Gateway.As4(), Port: int(port)}
	for i := 0; i < n; i++ {
		var fd int
		err := r.guest.Do(func() error {
			fd = rawSocket(t, syscall.SOCK_STREAM)
			return syscall.Connect(fd, gw)
		})
		if err != nil {
			t.Fatalf("guest connect %d: %v", i, err)
		}
		if _, err := syscall.Write(fd, []byte("x")); err != nil {
			t.Fatal(err)
		}
		afd, _, err := syscall.Accept4(lfd, syscall.SOCK_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Close(afd) })
		if _, err := syscall.Write(afd, []byte("y")); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		if _, err := syscall.Read(fd, b); err != nil || b[0] != 'y' {
			t.Fatalf("flow %d: the guest read %q, %v", i, b, err)
		}
	}
}

// openUDPFlows sends a datagram from n guest sockets to a host socket on
// the gateway's address, which answers each: every flow is a stream.
func openUDPFlows(t *testing.T, r *gatewayRig, n int) {
	t.Helper()
	sfd, port := rawLoopback(t, syscall.SOCK_DGRAM)
	gw := &syscall.SockaddrInet4{Addr: r.net.Gateway.As4(), Port: int(port)}
	b := make([]byte, 16)
	for i := 0; i < n; i++ {
		var fd int
		err := r.guest.Do(func() error {
			fd = rawSocket(t, syscall.SOCK_DGRAM)
			return syscall.Connect(fd, gw)
		})
		if err != nil {
			t.Fatalf("guest socket %d: %v", i, err)
		}
		if _, err := syscall.Write(fd, []byte("x")); err != nil {
			t.Fatal(err)
		}
		_, from, err := syscall.Recvfrom(sfd, b, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Sendto(sfd, []byte("y"), 0, from); err != nil {
			t.Fatal(err)
		}
		if _, err := syscall.Read(fd, b); err != nil || b[0] != 'y' {
			t.Fatalf("flow %d: the guest read %q, %v", i, b[:1], err)
		}
	}
}
