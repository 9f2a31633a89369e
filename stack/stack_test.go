package stack_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/stack"
)

var (
	addrA = stacktest.AddrA
	addrB = stacktest.AddrB
)

// pair returns two stacks joined by an in-memory wire of this MTU.
func pair(t *testing.T, mtu int) (a, b *stack.Stack) {
	t.Helper()
	return stacktest.Pair(t, stacktest.Options{MTU: mtu})
}

func TestPingAnsweredAtEverySize(t *testing.T) {
	a, b := pair(t, 1500)
	for _, size := range []int{0, 56, 1472, 1473, 8000, 65000, 65507} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rtt, err := a.Ping(ctx, addrB.Addr(), size)
		cancel()
		if err != nil {
			t.Fatalf("ping -s %d: %v", size, err)
		}
		if rtt <= 0 {
			t.Errorf("ping -s %d: rtt %v", size, rtt)
		}
	}
	c := b.Counters()
	if c["IPv4.ReasmOKs"] < 4 || c["ICMP.OutEchoReps"] != 7 {
		t.Errorf("counters: ReasmOKs=%d OutEchoReps=%d", c["IPv4.ReasmOKs"], c["ICMP.OutEchoReps"])
	}
	if c := a.Counters(); c["IPv4.FragCreates"] == 0 {
		t.Errorf("no fragments created for the large pings")
	}
}

func TestUDPEchoesDatagramsByteForByte(t *testing.T) {
	a, b := pair(t, 1500)
	srv, err := b.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), 7))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := srv.ReadFrom(buf)
			if err != nil {
				return
			}
			srv.WriteTo(buf[:n], from)
		}
	}()
	cli, err := a.ListenUDP(netip.AddrPort{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	buf := make([]byte, 65536)
	for _, size := range []int{0, 1, 1472, 1473, 30000, 65507} {
		msg := make([]byte, size)
		for i := range msg {
			msg[i] = byte(i * 7)
		}
		if _, err := cli.WriteTo(msg, &net.UDPAddr{IP: net.IP(addrB.Addr().AsSlice()), Port: 7}); err != nil {
			t.Fatalf("write %d bytes: %v", size, err)
		}
		cli.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, from, err := cli.ReadFrom(buf)
		if err != nil {
			t.Fatalf("read echo of %d bytes: %v", size, err)
		}
		if !bytes.Equal(buf[:n], msg) {
			t.Fatalf("echo of %d bytes came back as %d different bytes", size, n)
		}
		if got := from.String(); got != "10.0.0.2:7" {
			t.Errorf("echo from %s", got)
		}
	}
}

func TestUDPTooLargeIsEMSGSIZE(t *testing.T) {
	a, _ := pair(t, 1500)
	cli, err := a.ListenUDP(netip.AddrPort{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	_, err = cli.WriteToUDPAddrPort(make([]byte, 65508), netip.AddrPortFrom(addrB.Addr(), 9))
	var oe *net.OpError
	if !errors.As(err, &oe) || !errors.Is(err, syscallEMSGSIZE) {
		t.Fatalf("err = %v, want *net.OpError wrapping EMSGSIZE", err)
	}
}

func TestReadDeadlineExpires(t *testing.T) {
	a, _ := pair(t, 1500)
	c, err := a.ListenUDP(netip.AddrPort{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, _, err = c.ReadFrom(make([]byte, 10))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("err = %v, want a timeout", err)
	}
}

func TestClosedPortAnswersPortUnreachable(t *testing.T) {
	a, b := pair(t, 1500)
	cli, err := a.ListenUDP(netip.AddrPort{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.WriteToUDPAddrPort([]byte("hello"), netip.AddrPortFrom(addrB.Addr(), 4444)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return a.Counters()["ICMP.InDestUnreachs"] == 1 })
	if got := b.Counters()["UDP.NoPorts"]; got != 1 {
		t.Errorf("UDP.NoPorts = %d", got)
	}
}

func TestPortInUse(t *testing.T) {
	a, _ := pair(t, 1500)
	c, err := a.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), 5000))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := a.ListenUDP(netip.AddrPortFrom(addrA.Addr(), 5000)); !errors.Is(err, syscallEADDRINUSE) {
		t.Fatalf("second bind: %v, want EADDRINUSE", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
