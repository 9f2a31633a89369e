package bridge_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetstack/gonet/bridge"
	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/stack"
)

// Three GoNet stacks behind one bridge, each on a port of its own: two
// exchange a megabyte over TCP both ways, checked with SHA-256, while the
// third sees only the floods (ARP's broadcasts), not their unicast.
func TestStacksTalkTCPThroughTheBridge(t *testing.T) {
	br := bridge.New(bridge.Config{})
	defer br.Close()
	var stacks []*stack.Stack
	for i := range 3 {
		mac := net.HardwareAddr{2, 0, 0, 0, 0, byte(i + 1)}
		port, nic := pipe.New(1500, net.HardwareAddr{2, 0xbb, 0, 0, 0, byte(i + 1)}, mac)
		if err := br.AddPort(fmt.Sprintf("p%d", i), port); err != nil {
			t.Fatal(err)
		}
		s := stack.New(stack.Config{})
		defer s.Close()
		if err := s.AddNIC("eth0", nic); err != nil {
			t.Fatal(err)
		}
		if err := s.AddAddress("eth0", netip.MustParsePrefix(fmt.Sprintf("10.9.0.%d/24", i+1))); err != nil {
			t.Fatal(err)
		}
		stacks = append(stacks, s)
	}

	ln, err := stacks[1].Listen("tcp", "10.9.0.2:7")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := stacks[0].DialContext(ctx, "tcp", "10.9.0.2:7")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	data := make([]byte, 1<<20)
	rand.Read(data)
	sent := sha256.Sum256(data)
	go func() {
		c.Write(data)
		c.(interface{ CloseWrite() error }).CloseWrite()
	}()
	h := sha256.New()
	n, err := io.Copy(h, c)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("echo: %d bytes, %v; want %d", n, err, len(data))
	}
	if got := h.Sum(nil); string(got) != string(sent[:]) {
		t.Fatalf("SHA-256 of the echo %x, want %x", got, sent)
	}

	p0, p1, p2 := br.Port("p0").Stats(), br.Port("p1").Stats(), br.Port("p2").Stats()
	if p1.RxFrames.Load() < 700 || p0.RxFrames.Load() < 700 {
		t.Errorf("p0 received %d frames, p1 %d: fewer than a megabyte each way takes", p0.RxFrames.Load(), p1.RxFrames.Load())
	}
	// Once learnt, the two talk to each other alone: the third port had
	// the floods (ARP, and IPv6's multicast), none of the
	// transfer's thousand frames.
	if got := p2.TxFrames.Load(); got > 50 {
		t.Errorf("p2 sent %d frames to its stack, want a few floods", got)
	}
	if got := br.Stats().Learnt.Load(); got < 2 {
		t.Errorf("learnt %d stations, want both talkers", got)
	}
}
