//go:build linux

package stack_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/stack"
)

// pattern fills b with stream's bytes from offset off on: a sequence that
// repeats only every 251 bytes, a prime, so that a segment delivered out of
// order, twice or not at all shows as a wrong byte.
func pattern(b []byte, stream, off int) {
	for i := range b {
		b[i] = byte((off+i)%251 + stream)
	}
}

// checkPattern reads n bytes of stream's pattern from r.
func checkPattern(r io.Reader, stream, n int) error {
	buf, want := make([]byte, 32<<10), make([]byte, 32<<10)
	for off := 0; off < n; {
		m, err := r.Read(buf[:min(len(buf), n-off)])
		pattern(want[:m], stream, off)
		for i := range m {
			if buf[i] != want[i] {
				return fmt.Errorf("stream %d: byte %d is %d, want %d", stream, off+i, buf[i], want[i])
			}
		}
		off += m
		if err != nil {
			return fmt.Errorf("stream %d: after %d of %d bytes: %w", stream, off, n, err)
		}
	}
	return nil
}

// writePattern writes n bytes of stream's pattern to w.
func writePattern(w io.Writer, stream, n int) error {
	buf := make([]byte, 32<<10)
	for off := 0; off < n; off += len(buf) {
		b := buf[:min(len(buf), n-off)]
		pattern(b, stream, off)
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("stream %d: writing at %d: %w", stream, off, err)
		}
	}
	return nil
}

// A stack on a TAP device with two queues: the data of the kernel's TCP
// connections to it, sent each way, arrives whole and in order, each flow
// kept on one queue by the kernel's steering and the NIC's; and every
// buffer comes back.
func TestConnectionsOverTwoTAPQueues(t *testing.T) {
	const streams, size = 4, 4 << 20
	ns := netnstest.New(t)
	dev := netns.DeviceName()
	var ep *tap.Endpoint
	if err := ns.Do(func() (err error) {
		ep, err = tap.Open(dev, tap.Options{Queues: 2, Offload: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s := stack.New(stack.Config{NoIPv6: true})
	defer s.Close()
	if err := s.AddNIC(dev, ep); err != nil {
		ep.Close()
		t.Fatal(err)
	}
	if err := s.AddAddress(dev, netip.MustParsePrefix("10.77.0.2/24")); err != nil {
		t.Fatal(err)
	}
	if err := ns.ConfigureLink(dev, netip.MustParsePrefix("10.77.0.1/24"), 0); err != nil {
		t.Fatal(err)
	}
	out, err := ns.IP(context.Background(), "-d", "link", "show", "dev", dev)
	if err != nil || !strings.Contains(string(out), "numqueues 2 numdisabled 0") {
		t.Fatalf("the device's queues: %v: %s; want 2 attached", err, out)
	}
	ln, err := s.Listen("tcp", ":5001")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	// The server reads each stream's pattern, then sends it back.
	var wg sync.WaitGroup
	errs := make(chan error, 2*streams)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range streams {
			c, err := ln.Accept()
			if err != nil {
				errs <- err
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				var stream [1]byte
				if _, err := io.ReadFull(c, stream[:]); err != nil {
					errs <- err
					return
				}
				if err := checkPattern(c, int(stream[0]), size); err != nil {
					errs <- fmt.Errorf("GoNet received: %w", err)
					return
				}
				if err := writePattern(c, int(stream[0]), size); err != nil {
					errs <- fmt.Errorf("GoNet sent: %w", err)
				}
			}()
		}
	}()
	for i := range streams {
		var c net.Conn
		if err := ns.Do(func() (err error) {
			c, err = net.Dial("tcp", "10.77.0.2:5001")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			if _, err := c.Write([]byte{byte(i)}); err != nil {
				errs <- err
				return
			}
			if err := writePattern(c, i, size); err != nil {
				errs <- fmt.Errorf("the kernel sent: %w", err)
				return
			}
			if err := checkPattern(c, i, size); err != nil {
				errs <- fmt.Errorf("the kernel received: %w", err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ln.Close()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if n := s.Pool().Outstanding(); n != 0 {
		t.Errorf("%d buffers outstanding after Close", n)
	}
}
