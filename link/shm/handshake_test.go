package shm

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openFds counts this process's open descriptors, to catch a leak.
func openFds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// The dialler trusts the listener no more than a peer: memory that could
// shrink under the mapping, that is smaller than announced or says
// something else in its header, the wrong descriptors, a geometry out of
// bounds or offloads it did not offer are refused, with an error, no
// panic, and every descriptor received closed.
func TestDiallerRefusesABadListener(t *testing.T) {
	g := Options{}.geometryOrDefault()
	sealed := func(t *testing.T, size int, hdr geometry) int {
		fd, err := unix.MemfdCreate("test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Ftruncate(fd, int64(size)); err != nil {
			t.Fatal(err)
		}
		mem, err := unix.Mmap(fd, 0, pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		hdr.writeHeader(mem)
		unix.Munmap(mem)
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
			t.Fatal(err)
		}
		return fd
	}
	eventfd := func(t *testing.T) int {
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	welcome := message{kind: kindWelcome, version: version, mtu: DefaultMTU, mac: macL, ringSize: g.ringSize, dataSize: g.dataSize}
	for _, tc := range []struct {
		name string
		msg  func() message
		fds  func(t *testing.T) []int
	}{
		{"memory not sealed", func() message { return welcome }, func(t *testing.T) []int {
			fd, err := unix.MemfdCreate("test", unix.MFD_CLOEXEC)
			if err != nil {
				t.Fatal(err)
			}
			unix.Ftruncate(fd, int64(g.size()))
			return []int{fd, eventfd(t), eventfd(t)}
		}},
		{"memory smaller than announced", func() message { return welcome }, func(t *testing.T) []int {
			return []int{sealed(t, g.size()-pageSize, g), eventfd(t), eventfd(t)}
		}},
		{"header disagreeing", func() message { return welcome }, func(t *testing.T) []int {
			return []int{sealed(t, g.size(), geometry{ringSize: 2 * g.ringSize, dataSize: g.dataSize}), eventfd(t), eventfd(t)}
		}},
		{"a regular file", func() message { return welcome }, func(t *testing.T) []int {
			f, err := os.CreateTemp(t.TempDir(), "mem")
			if err != nil {
				t.Fatal(err)
			}
			f.Truncate(int64(g.size()))
			fd, _ := unix.Dup(int(f.Fd()))
			f.Close()
			return []int{fd, eventfd(t), eventfd(t)}
		}},
		{"two descriptors", func() message { return welcome }, func(t *testing.T) []int {
			return []int{sealed(t, g.size(), g), eventfd(t)}
		}},
		{"four descriptors", func() message { return welcome }, func(t *testing.T) []int {
			return []int{sealed(t, g.size(), g), eventfd(t), eventfd(t), eventfd(t)}
		}},
		{"no descriptors", func() message { return welcome }, func(t *testing.T) []int { return nil }},
		{"ring size not a power of two", func() message { m := welcome; m.ringSize = 100; return m }, func(t *testing.T) []int {
			return []int{sealed(t, g.size(), g), eventfd(t), eventfd(t)}
		}},
		{"offloads not offered", func() message { m := welcome; m.offload = true; return m }, func(t *testing.T) []int {
			return []int{sealed(t, g.size(), g), eventfd(t), eventfd(t)}
		}},
		{"another version", func() message { m := welcome; m.version = version + 1; return m }, func(t *testing.T) []int {
			return []int{sealed(t, g.size(), g), eventfd(t), eventfd(t)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ring.sock")
			ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			before := openFds(t)
			fds := tc.fds(t)
			served := make(chan error, 1)
			go func() {
				c, err := ln.AcceptUnix()
				if err != nil {
					served <- err
					return
				}
				defer c.Close()
				b := make([]byte, msgLen)
				if _, err := c.Read(b); err != nil {
					served <- err
					return
				}
				var oob []byte
				if len(fds) > 0 {
					oob = unix.UnixRights(fds...)
				}
				_, _, err = c.WriteMsgUnix(tc.msg().encode(), oob, nil)
				for _, fd := range fds {
					unix.Close(fd)
				}
				c.Read(b) // until the dialler hangs up
				c.Close()
				served <- err
			}()
			e, err := Dial(path, Options{})
			if err == nil {
				e.Close()
				t.Fatal("Dial accepted the listener")
			}
			t.Logf("dialler: %v", err)
			if err := <-served; err != nil {
				t.Fatal(err)
			}
			if after := openFds(t); after != before {
				t.Errorf("%d descriptors open before Dial, %d after", before, after)
			}
		})
	}
}

// geometryOrDefault is the geometry of options with their defaults.
func (o Options) geometryOrDefault() geometry {
	r, _ := o.resolve()
	return r.geometry()
}

// A dialler that connects and says nothing is dropped after the handshake
// timeout, and the listener takes the next.
func TestListenerDropsASilentDialler(t *testing.T) {
	defer func(d time.Duration) { handshakeTimeout = d }(handshakeTimeout)
	handshakeTimeout = 100 * time.Millisecond
	path := filepath.Join(t.TempDir(), "ring.sock")
	ln, err := Listen(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	silent, err := net.Dial("unixpacket", path)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if _, err := ln.Accept(); err == nil || errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept of a silent dialler: %v", err)
	}
	if ln.Stats().Refused.Load() != 1 {
		t.Errorf("Refused %d, want 1", ln.Stats().Refused.Load())
	}
	accepted := make(chan error, 1)
	go func() {
		e, err := ln.Accept()
		if err == nil {
			e.Close()
		}
		accepted <- err
	}()
	d, err := Dial(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
}

// Closing both sides of a link releases everything it held: no
// descriptor stays open (socket, eventfds, memfd) and no mapping of the
// shared memory remains.
func TestCloseReleasesEverything(t *testing.T) {
	mappings := func() int {
		maps, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Skipf("no /proc/self/maps: %v", err)
		}
		return strings.Count(string(maps), "memfd:gonet-shm")
	}
	fds, maps := openFds(t), mappings()
	l, d := pair(t, Options{}, Options{})
	if mappings() != maps+2 {
		t.Fatalf("%d mappings of the shared memory with a link up, want %d", mappings(), maps+2)
	}
	l.Close()
	d.Close()
	if got := openFds(t); got != fds {
		t.Errorf("%d descriptors open before the link, %d after", fds, got)
	}
	if got := mappings(); got != maps {
		t.Errorf("%d mappings of the shared memory left after Close", got-maps)
	}
}
