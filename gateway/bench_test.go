package gateway

import (
	"io"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/gonetstack/gonet/link/tap"
)

// The gateway's cost per relayed connection and per round trip, as
// netperf's TCP_CRR and TCP_RR measure it: the guest is the kernel in a
// namespace, the host's peer a server on this process's loopback (the
// gateway's address stands for it). The figures include the guest's and
// the peer's work, which share the process's CPU with the gateway's; the
// bench's gateway family (bench/suite/gwworkloads.go) measures the gateway
// process alone.

// rrServer answers each byte it reads with one byte, on this process's
// loopback, and returns its port. (An echo server's io.Copy would splice
// each byte through a pipe: two system calls more per transaction.)
func rrServer(tb testing.TB) int {
	return loopbackServer(tb, func(c net.Conn) {
		var b [1]byte
		for {
			if _, err := io.ReadFull(c, b[:]); err != nil {
				return
			}
			if _, err := c.Write(b[:]); err != nil {
				return
			}
		}
	})
}

// BenchmarkGatewayConnectRequestClose is one guest connection an
// iteration: connect through the gateway, one byte each way, close.
func BenchmarkGatewayConnectRequestClose(b *testing.B) {
	for _, mtu := range []int{1500, 65520} {
		b.Run("mtu="+strconv.Itoa(mtu), func(b *testing.B) {
			r := newGatewayRigOn(b, Config{}, tap.Options{MTU: mtu, Offload: true})
			target := netip.AddrPortFrom(r.net.Gateway, uint16(rrServer(b))).String()
			b.ReportAllocs()
			err := r.guest.Do(func() error {
				d := net.Dialer{Timeout: 5 * time.Second}
				var buf [1]byte
				for b.Loop() {
					c, err := d.Dial("tcp4", target)
					if err != nil {
						return err
					}
					if _, err := c.Write(buf[:]); err != nil {
						return err
					}
					if _, err := io.ReadFull(c, buf[:]); err != nil {
						return err
					}
					c.Close()
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(r.gw.Stats.Relay.TCPFlows.Load())/b.Elapsed().Seconds(), "conns/s")
		})
	}
}

// BenchmarkGatewayRequestResponse is one byte each way on one relayed
// connection an iteration.
func BenchmarkGatewayRequestResponse(b *testing.B) {
	for _, mtu := range []int{1500, 65520} {
		b.Run("mtu="+strconv.Itoa(mtu), func(b *testing.B) {
			r := newGatewayRigOn(b, Config{}, tap.Options{MTU: mtu, Offload: true})
			target := netip.AddrPortFrom(r.net.Gateway, uint16(rrServer(b))).String()
			c, err := r.dial(target)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			var buf [1]byte
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Write(buf[:]); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf[:]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
