package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/wire"
)

// The IPv6 side of the harness: newHost's namespace and stack, with the
// kernel's end holding a unique local address beside its link-local one,
// and GoNet's link-local address (and a static global one) through DAD.

// Every test has a namespace of its own, so all use the same prefix (RFC
// 4193 unique local addresses: never routed off the namespace anyway).
var (
	kernelAddr6 = netip.MustParsePrefix("fd00:99::1/64")
	gonetAddr6  = netip.MustParsePrefix("fd00:99::2/64")
)

// host6 is a host whose two ends run IPv6 too.
type host6 struct {
	*host
	kernelLL netip.Addr // the kernel's link-local address, zoned with the NIC's name
	gonetLL  netip.Addr // GoNet's, zoned with the device's name (the same name)
	nd       *ndp.Protocol
}

// newHost6 is newHost with IPv6 up at both ends: the kernel's link-local
// address past its DAD and kernelAddr6 added (nodad); GoNet's link-local
// address past its DAD and, with global set, gonetAddr6 added through
// stack.AddAddress and past its DAD too.
func newHost6(t *testing.T, o options, global bool) *host6 {
	t.Helper()
	h := &host6{host: newHost(t, o)}
	h.run(t, 5*time.Second, "ip", "-6", "addr", "add", kernelAddr6.String(), "dev", h.dev, "nodad")
	nd, err := h.stack.NeighborDiscovery(h.dev)
	if err != nil {
		t.Fatal(err)
	}
	h.nd = nd
	if global {
		if err := h.stack.AddAddress(h.dev, gonetAddr6); err != nil {
			t.Fatal(err)
		}
	}
	// The kernel's link-local address, once its DAD is over: until then
	// the kernel neither answers for it nor sends from it.
	deadline := time.Now().Add(10 * time.Second)
	for !h.kernelLL.IsValid() {
		out := h.run(t, 5*time.Second, "ip", "-6", "-o", "addr", "show", "dev", h.dev, "scope", "link", "-tentative")
		if f := strings.Fields(out); len(f) >= 4 && f[2] == "inet6" {
			p, err := netip.ParsePrefix(f[3])
			if err != nil {
				t.Fatalf("kernel's link-local address %q: %v", f[3], err)
			}
			h.kernelLL = p.Addr().WithZone(h.dev)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kernel's link-local address on %s is still tentative:\n%s", h.dev, h.run(t, 5*time.Second, "ip", "-6", "addr", "show", "dev", h.dev))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// GoNet's link-local address: the EUI-64 of its MAC, or a stable
	// identifier when the test configured one.
	waitFor(t, "GoNet's link-local address", 10*time.Second, func() bool {
		for _, a := range h.nd.Addresses() {
			if a.Prefix.Addr().IsLinkLocalUnicast() {
				h.gonetLL = a.Prefix.Addr().WithZone(h.dev)
			}
		}
		return h.gonetLL.IsValid()
	})
	if o.stack.NDP.OptimisticDAD {
		h.waitState(t, h.gonetLL, ipv6.Optimistic, ipv6.Preferred) // in use already (RFC 4429)
	} else {
		h.waitPreferred(t, h.gonetLL)
	}
	if global {
		h.waitPreferred(t, gonetAddr6.Addr())
	}
	return h
}

// mac is GoNet's MAC.
func (h *host6) mac() wire.MAC { return wire.MAC(h.tap.MAC()) }

// waitPreferred waits until GoNet's address a is past its DAD.
func (h *host6) waitPreferred(t *testing.T, a netip.Addr) {
	t.Helper()
	h.waitState(t, a, ipv6.Preferred)
}

// waitState waits until GoNet's IPv6 layer holds a in one of states.
func (h *host6) waitState(t *testing.T, a netip.Addr, states ...ipv6.AddrState) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, ok := h.stack.IPv6().AddressState(a)
		if ok && slices.Contains(states, st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GoNet's %v is not %v (state %v, assigned %v); ndp has %+v", a, states, st, ok, h.nd.Addresses())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ping6 has the kernel ping dst (zoned for a link-local address) count
// times with size bytes of data, and fails the test unless every request
// is answered with its data whole.
func (h *host6) ping6(t *testing.T, dst netip.Addr, size, count int) {
	t.Helper()
	out := h.run(t, 20*time.Second, "ping", "-6", "-c", fmt.Sprint(count), "-i", "0.2", "-W", "2", "-s", fmt.Sprint(size), dst.String())
	if sent, recv := pingCounts(t, out); recv != sent {
		t.Fatalf("ping -6 -s %d %v: %d of %d answered:\n%s", size, dst, recv, sent, out)
	}
	if strings.Contains(out, "wrong data") || strings.Contains(out, "truncated") {
		t.Fatalf("ping -6 -s %d %v saw damaged replies:\n%s", size, dst, out)
	}
}

// gonetPing has GoNet ping dst with size bytes of data.
func (h *host6) gonetPing(t *testing.T, dst netip.Addr, size int) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rtt, err := h.stack.Ping(ctx, dst, size)
	if err != nil {
		t.Fatalf("GoNet pings %v with %d bytes: %v", dst, size, err)
	}
	return rtt
}

// counter returns one of GoNet's counters by its full name.
func (h *host6) counter(name string) int64 { return h.stack.Counters()[name] }

// ndpCounter returns one of the NIC's neighbour discovery counters.
func (h *host6) ndpCounter(name string) int64 { return h.counter("NDP." + h.dev + "." + name) }

// waitFor polls cond until it holds, failing the test after within.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kernelMAC is the MAC of the kernel's end of the TAP.
func (h *host6) kernelMAC(t *testing.T) string {
	t.Helper()
	return strings.TrimSpace(h.run(t, 5*time.Second, "cat", "/sys/class/net/"+h.dev+"/address"))
}

// dialKernel6 opens a kernel connection over network ("tcp4", "tcp6")
// from inside the namespace, closed when the test ends.
func (h *host6) dialKernel6(t *testing.T, network, addr string) *net.TCPConn {
	t.Helper()
	var c net.Conn
	err := h.ns.Do(func() error {
		var err error
		c, err = (&net.Dialer{Timeout: 10 * time.Second}).Dial(network, addr)
		return err
	})
	if err != nil {
		t.Fatalf("kernel dials %s %s: %v", network, addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// linkInjector writes hand-built Ethernet frames onto the kernel's end of
// the TAP through a packet socket in the namespace, which the kernel sends
// to GoNet as they are, and reads GoNet's frames back from the same
// socket. It sends only to GoNet's MAC or to IPv6 multicast MACs.
type linkInjector struct {
	fd        int
	ifindex   int
	gonetMAC  wire.MAC
	kernelMAC wire.MAC
}

// injector opens the host's link injector, closed when the test ends.
func (h *host6) injector(t *testing.T) *linkInjector {
	t.Helper()
	li := &linkInjector{gonetMAC: h.mac()}
	km, err := net.ParseMAC(h.kernelMAC(t))
	if err != nil {
		t.Fatal(err)
	}
	copy(li.kernelMAC[:], km)
	err = h.ns.Do(func() error {
		ifi, err := net.InterfaceByName(h.dev)
		if err != nil {
			return err
		}
		li.ifindex = ifi.Index
		if li.fd, err = syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, int(htons(syscall.ETH_P_IPV6))); err != nil {
			return err
		}
		tv := syscall.NsecToTimeval((50 * time.Millisecond).Nanoseconds())
		if err := syscall.SetsockoptTimeval(li.fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
			syscall.Close(li.fd)
			return err
		}
		return syscall.Bind(li.fd, &syscall.SockaddrLinklayer{Protocol: htons(syscall.ETH_P_IPV6), Ifindex: ifi.Index})
	})
	if err != nil {
		t.Fatalf("packet socket on %s in %s: %v", h.dev, h.ns, err)
	}
	t.Cleanup(func() { syscall.Close(li.fd) })
	return li
}

// send writes one IPv6 datagram in a frame from the kernel's MAC to dst
// (GoNet's MAC or a multicast one).
func (li *linkInjector) send(t *testing.T, dst wire.MAC, datagram []byte) {
	t.Helper()
	if dst != li.gonetMAC && (dst[0] != 0x33 || dst[1] != 0x33) {
		t.Fatalf("link injector: frame to %v, neither GoNet nor IPv6 multicast", dst)
	}
	f := make([]byte, 0, 14+len(datagram))
	f = append(f, dst[:]...)
	f = append(f, li.kernelMAC[:]...)
	f = append(f, 0x86, 0xdd)
	f = append(f, datagram...)
	if err := syscall.Sendto(li.fd, f, 0, &syscall.SockaddrLinklayer{Ifindex: li.ifindex, Halen: 6}); err != nil {
		t.Fatalf("link injector: send: %v", err)
	}
}

// recv returns the IPv6 datagrams GoNet sends within d for which match
// holds, returning early once it has most.
func (li *linkInjector) recv(d time.Duration, most int, match func(datagram []byte) bool) [][]byte {
	var got [][]byte
	buf := make([]byte, 65536)
	for deadline := time.Now().Add(d); time.Now().Before(deadline) && len(got) < most; {
		n, _, err := syscall.Recvfrom(li.fd, buf, 0)
		if err != nil || n < 14+40 || !bytes.Equal(buf[6:12], li.gonetMAC[:]) {
			continue
		}
		if dg := buf[14:n]; match(dg) {
			got = append(got, bytes.Clone(dg))
		}
	}
	return got
}

// drain discards what the injector's socket has queued.
func (li *linkInjector) drain() { li.recv(60*time.Millisecond, 1, func([]byte) bool { return false }) }

// IPv6 datagrams built by hand, for what no well-behaved sender makes.

// ipv6Datagram is an IPv6 header (RFC 8200 section 3) before payload.
func ipv6Datagram(src, dst netip.Addr, next, hopLimit uint8, payload []byte) []byte {
	b := make([]byte, 40, 40+len(payload))
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], uint16(len(payload)))
	b[6], b[7] = next, hopLimit
	s, d := src.As16(), dst.As16()
	copy(b[8:], s[:])
	copy(b[24:], d[:])
	return append(b, payload...)
}

// icmpv6Message is an ICMPv6 message (RFC 4443 section 2.1) with its
// checksum over the pseudo-header of src and dst (RFC 8200 section 8.1).
func icmpv6Message(src, dst netip.Addr, typ, code uint8, body []byte) []byte {
	m := append([]byte{typ, code, 0, 0}, body...)
	s, d := src.As16(), dst.As16()
	var sum uint32
	for _, a := range [][]byte{s[:], d[:]} {
		for i := 0; i < 16; i += 2 {
			sum += uint32(a[i])<<8 | uint32(a[i+1])
		}
	}
	sum += uint32(len(m)) + 58
	c := checksum(m, sum)
	m[2], m[3] = byte(c>>8), byte(c)
	return m
}

// echoRequest is an echo request's body (RFC 4443 section 4.1): identifier,
// sequence number and data.
func echoRequest(id, seq uint16, data []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, id)
	b = binary.BigEndian.AppendUint16(b, seq)
	return append(b, data...)
}

// fragmentHeader is a Fragment header (RFC 8200 section 4.5) for the bytes
// at offset (a multiple of 8), more fragments to follow or not.
func fragmentHeader(next uint8, offset int, more bool, id uint32) []byte {
	off := uint16(offset/8) << 3
	if more {
		off |= 1
	}
	b := []byte{next, 0}
	b = binary.BigEndian.AppendUint16(b, off)
	return binary.BigEndian.AppendUint32(b, id)
}
