package gateway

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/stack"
)

// newPairGateway serves a GoNet guest stack from a gateway on the stack
// across an in-memory wire from it (stacktest.Pair): the guest's flows to
// the gateway's address reach this process's loopback, with no namespace.
// It returns a dialer of the guest's.
func newPairGateway(t *testing.T, cfg Config) (dial func(addr netip.AddrPort) (net.Conn, error), gw *Gateway, n Network) {
	t.Helper()
	a, b := stacktest.Pair(t, stacktest.Options{})
	n, err := NewNetwork(DefaultSubnet)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.AddAddress("eth0", netip.PrefixFrom(n.Guest, n.Subnet.Bits())); err != nil {
		t.Fatal(err)
	}
	cfg.Network = n
	gw, err = New(b, "eth0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Registered after Pair's checks, so it runs before them.
	t.Cleanup(func() { gw.Close() })
	dial = func(addr netip.AddrPort) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := a.DialTCP(ctx, addr)
		if err != nil {
			return nil, err
		}
		// The guest reads nothing: a small buffer closes its window soon.
		c.SetReadBuffer(4096)
		return c, nil
	}
	return dial, gw, n
}

// A relay blocked in the guest connection's Write, because the guest reads
// nothing and its window is closed, ends when the gateway closes: Close
// returns promptly and leaves no goroutine of the flow's.
func TestGatewayCloseEndsARelayBlockedWritingToTheGuest(t *testing.T) {
	tests := []struct {
		name  string
		guest func(t *testing.T) (dial func(netip.AddrPort) (net.Conn, error), gw *Gateway, n Network)
	}{
		{"a GoNet guest on an in-memory wire", func(t *testing.T) (func(netip.AddrPort) (net.Conn, error), *Gateway, Network) {
			return newPairGateway(t, Config{})
		}},
		{"a kernel guest on a TAP device", func(t *testing.T) (func(netip.AddrPort) (net.Conn, error), *Gateway, Network) {
			r := newGatewayRig(t, Config{})
			// The TAP's kernel side came up after it opened: the stack
			// may hear of it after AddNIC, and put its IPv6 addresses
			// through DAD again, in goroutines the leak check below
			// must not find. WaitIPv6 outlasts them.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := r.gw.WaitIPv6(ctx); err != nil {
				t.Fatal(err)
			}
			return func(addr netip.AddrPort) (net.Conn, error) {
				var c net.Conn
				err := r.guest.Do(func() (err error) {
					d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
						var serr error
						rc.Control(func(fd uintptr) {
							serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
						})
						return serr
					}}
					c, err = d.Dial("tcp4", addr.String())
					return err
				})
				return c, err
			}, r.gw, r.net
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dial, gw, n := tt.guest(t)
			ignore := goleak.IgnoreCurrent()
			l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			stalled := make(chan error, 1)
			hostDone := make(chan struct{})
			go func() {
				c, err := l.Accept()
				if err != nil {
					stalled <- err
					return
				}
				defer c.Close()
				// Write until the relay stops taking: the guest's window,
				// GoNet's send buffer and the host socket's buffers are full.
				b := make([]byte, 64<<10)
				for {
					c.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
					if _, err := c.Write(b); err != nil {
						stalled <- err
						break
					}
				}
				<-hostDone
			}()
			c, err := dial(netip.AddrPortFrom(n.Gateway, uint16(l.Addr().(*net.TCPAddr).Port)))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			select {
			case err := <-stalled:
				if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
					t.Fatalf("the host's writes ended with %v, not by stalling", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the host's writes never stalled")
			}
			closed := make(chan error, 1)
			go func() { closed <- gw.Close() }()
			select {
			case <-closed:
			case <-time.After(5 * time.Second):
				t.Fatal("Gateway.Close did not return with a relay blocked writing to the guest")
			}
			if n := gw.Stats.Relay.TCPActive.Load(); n != 0 {
				t.Fatalf("TCPActive = %d after Close", n)
			}
			close(hostDone)
			// The guest is told: after what it had received, a reset.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = io.Copy(io.Discard, c)
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("the guest's read after Close: %v, want ECONNRESET", err)
			}
			c.Close()
			goleak.VerifyNone(t, ignore)
		})
	}
}

// A flow the host ended first leaves GoNet's side in TIME-WAIT. Shutting
// down (the gateway, then the stack, as gonet gateway does) sends nothing
// to the TAP device after it is closed: the TIME-WAIT is deleted without a
// reset (RFC 9293 3.10.4), and the NIC counts no link error. IPv4 alone:
// a shutdown this soon after the start can meet IPv6's start-up messages
// (DAD's solicitations, MLD's repeated reports, on random timers) on
// their way out, which the closed endpoint drops by design.
func TestGatewayShutdownLeavesNoLinkErrors(t *testing.T) {
	r := newGatewayRigWith(t, Config{NoIPv6: true}, tap.Options{MTU: 1500}, stack.Config{NoIPv6: true})
	l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Write([]byte("bye"))
		c.Close()
	}()
	c, err := r.dial(netip.AddrPortFrom(r.net.Gateway, uint16(l.Addr().(*net.TCPAddr).Port)).String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if got, err := io.ReadAll(c); err != nil || string(got) != "bye" {
		t.Fatalf("the guest read %q, %v; want bye and the FIN", got, err)
	}
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		conns := r.s.Connections()
		if len(conns) == 1 && conns[0].State == "TIME-WAIT" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GoNet's side of the flow: %+v, want one in TIME-WAIT", conns)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := r.gw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.s.Close(); err != nil {
		t.Fatal(err)
	}
	m := r.s.Counters()
	for _, name := range []string{"NIC.tap0.TxLinkErrors", "NIC.tap0.TxDroppedClose", "TCP.OutRsts"} {
		if m[name] != 0 {
			t.Errorf("%s = %d after the shutdown, want 0", name, m[name])
		}
	}
}
