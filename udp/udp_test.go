package udp_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/udp"
)

var (
	peer    = netip.AddrPortFrom(rawtest.PeerAddr, 5353)
	second  = netip.MustParseAddr("10.1.0.3")
	anyAddr = netip.IPv4Unspecified()
)

func listen(t *testing.T, h *rawtest.Host, a netip.Addr, port uint16) *udp.Conn {
	t.Helper()
	c, err := h.S.ListenUDP(netip.AddrPortFrom(a, port))
	if err != nil {
		t.Fatalf("listen %v:%d: %v", a, port, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// read reads one datagram, failing the test unless it comes within
// rawtest.Timeout of wall-clock time (the wait is for the stack's
// goroutines; the conn's deadline is on the virtual clock).
func read(t *testing.T, c *udp.Conn) ([]byte, netip.AddrPort) {
	t.Helper()
	type result struct {
		b    []byte
		from netip.AddrPort
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		b := make([]byte, 65536)
		n, from, err := c.ReadFromUDPAddrPort(b)
		ch <- result{b[:n], from, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("read: %v", r.err)
		}
		return r.b, r.from
	case <-time.After(rawtest.Timeout):
		c.Close()
		<-ch
		t.Fatal("no datagram")
		return nil, netip.AddrPort{}
	}
}

// blockedRead starts a read and returns the channel its error comes on.
func blockedRead(c *udp.Conn) <-chan error {
	ch := make(chan error, 1)
	go func() {
		_, _, err := c.ReadFromUDPAddrPort(make([]byte, 100))
		ch <- err
	}()
	return ch
}

func waitErr(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(rawtest.Timeout):
		t.Fatal("the read did not return")
		return nil
	}
}

func stillBlocked(t *testing.T, h *rawtest.Host, ch <-chan error) {
	t.Helper()
	h.Barrier(t) // give the stack's goroutines every chance to wake it
	select {
	case err := <-ch:
		t.Fatalf("the read returned early: %v", err)
	default:
	}
}

func TestChecksum(t *testing.T) {
	tests := []struct {
		name      string
		mangle    func(f []byte)
		delivered bool
	}{
		{"valid", func([]byte) {}, true},
		{"payload damaged", func(f []byte) { f[14+20+8] ^= 0x01 }, false},
		{"checksum damaged", func(f []byte) { f[14+20+7] ^= 0x80 }, false},
		// RFC 768: zero means the sender computed none.
		{"zero: none computed", func(f []byte) { f[14+20+6], f[14+20+7] = 0, 0 }, true},
		{"zero over damaged data", func(f []byte) { f[14+20+6], f[14+20+7] = 0, 0; f[14+20+8] ^= 0x01 }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			c := listen(t, h, anyAddr, 7)
			f := h.UDPFrame(t, peer, netip.AddrPortFrom(rawtest.StackAddr, 7), []byte("checksummed data"))
			tt.mangle(f)
			h.Inject(f)
			if tt.delivered {
				if b, _ := read(t, c); len(b) != 16 {
					t.Errorf("read %d bytes", len(b))
				}
				return
			}
			h.WaitCounter(t, "UDP.InCsumErrors", 1)
			// Neither delivered nor answered with port unreachable.
			h.ExpectNothing(t)
			if got := h.Counter(t, "UDP.InDatagrams"); got != 0 {
				t.Errorf("InDatagrams = %d", got)
			}
		})
	}
}

func TestLengthField(t *testing.T) {
	tests := []struct {
		name    string
		udpLen  uint16
		want    string // what the reader gets; "" for a drop
		counter string
	}{
		{"exact", 8 + 10, "0123456789", "InDatagrams"},
		{"shorter than the IP payload: trimmed", 8 + 4, "0123", "InDatagrams"},
		{"longer than the IP payload", 8 + 11, "", "InErrors"},
		{"below the header", 7, "", "InErrors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			h.LearnPeer(t)
			c := listen(t, h, anyAddr, 7)
			u := rawtest.UDPBytes(t, peer, netip.AddrPortFrom(rawtest.StackAddr, 7), []byte("0123456789"))
			u[4], u[5] = byte(tt.udpLen>>8), byte(tt.udpLen)
			u[6], u[7] = 0, 0 // no checksum: the length is what is tested
			h.Inject(h.IPFrame(t, rawtest.IPv4Header(rawtest.PeerAddr, rawtest.StackAddr, layers.IPProtocolUDP), rawtest.Payload(u)))
			h.WaitCounter(t, "UDP."+tt.counter, 1)
			if tt.want != "" {
				if b, _ := read(t, c); string(b) != tt.want {
					t.Errorf("read %q, want %q", b, tt.want)
				}
				return
			}
			h.ExpectNothing(t)
		})
	}
}

func TestClosedPortIsAnsweredWithPortUnreachable(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	listen(t, h, anyAddr, 8) // a neighbouring port is no help
	f := h.UDPFrame(t, peer, netip.AddrPortFrom(rawtest.StackAddr, 9), []byte("anyone?"))
	h.Inject(f)
	out := h.Expect(t, rawtest.Timeout)
	ip, m := rawtest.ICMPOf(t, out)
	if m.TypeCode != layers.CreateICMPv4TypeCode(layers.ICMPv4TypeDestinationUnreachable, layers.ICMPv4CodePort) {
		t.Fatalf("got %s, want port unreachable", rawtest.Describe(out))
	}
	if rawtest.Addr(ip.SrcIP) != rawtest.StackAddr || rawtest.Addr(ip.DstIP) != rawtest.PeerAddr {
		t.Errorf("error %v > %v", ip.SrcIP, ip.DstIP)
	}
	if want := f[14 : 14+20+8+7]; !bytes.Equal(m.Payload, want) {
		t.Errorf("quote %x, want the datagram %x", m.Payload, want)
	}
	if got := h.Counter(t, "UDP.NoPorts"); got != 1 {
		t.Errorf("NoPorts = %d", got)
	}
}

func TestBindingPrecedence(t *testing.T) {
	type bind struct {
		addr netip.Addr
		port uint16
	}
	tests := []struct {
		name  string
		binds []bind
		dst   netip.AddrPort
		want  int // index of the conn that gets it; -1 for port unreachable, -2 for a silent drop
	}{
		{"wildcard gets our address", []bind{{anyAddr, 7}}, netip.AddrPortFrom(rawtest.StackAddr, 7), 0},
		{"wildcard gets our second address", []bind{{anyAddr, 7}}, netip.AddrPortFrom(second, 7), 0},
		{"wildcard gets the subnet broadcast", []bind{{anyAddr, 7}}, netip.AddrPortFrom(rawtest.SubnetBroadcast, 7), 0},
		{"wildcard gets the limited broadcast", []bind{{anyAddr, 7}}, netip.AddrPortFrom(rawtest.LimitedBroadcast, 7), 0},
		{"specific gets its address", []bind{{rawtest.StackAddr, 7}}, netip.AddrPortFrom(rawtest.StackAddr, 7), 0},
		{"specific does not get another address", []bind{{rawtest.StackAddr, 7}}, netip.AddrPortFrom(second, 7), -1},
		{"specific does not get broadcasts", []bind{{rawtest.StackAddr, 7}}, netip.AddrPortFrom(rawtest.SubnetBroadcast, 7), -2},
		{"two specifics: the first", []bind{{rawtest.StackAddr, 7}, {second, 7}}, netip.AddrPortFrom(rawtest.StackAddr, 7), 0},
		{"two specifics: the second", []bind{{rawtest.StackAddr, 7}, {second, 7}}, netip.AddrPortFrom(second, 7), 1},
		{"another port", []bind{{anyAddr, 7}}, netip.AddrPortFrom(rawtest.StackAddr, 8), -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			if err := h.S.AddAddress(rawtest.NIC, netip.PrefixFrom(second, 24)); err != nil {
				t.Fatal(err)
			}
			h.Expect(t, rawtest.Timeout) // its announcement
			h.LearnPeer(t)
			var conns []*udp.Conn
			for _, b := range tt.binds {
				conns = append(conns, listen(t, h, b.addr, b.port))
			}
			h.Inject(h.UDPFrame(t, peer, tt.dst, []byte("which?")))
			switch tt.want {
			case -1:
				h.WaitCounter(t, "UDP.NoPorts", 1)
				if _, m := rawtest.ICMPOf(t, h.Expect(t, rawtest.Timeout)); m.TypeCode.Code() != layers.ICMPv4CodePort {
					t.Errorf("got %v, want port unreachable", m.TypeCode)
				}
			case -2:
				h.WaitCounter(t, "UDP.NoPorts", 1)
				h.ExpectNothing(t)
			default:
				if b, _ := read(t, conns[tt.want]); string(b) != "which?" {
					t.Errorf("conn %d read %q", tt.want, b)
				}
			}
			delivered := int64(0)
			if tt.want >= 0 {
				delivered = 1
			}
			h.WaitCounter(t, "UDP.InDatagrams", delivered)
			for i, c := range conns {
				if i == tt.want {
					continue
				}
				c.SetReadDeadline(rawtest.Start) // already passed
				if _, _, err := c.ReadFromUDPAddrPort(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Errorf("conn %d also got it: %v", i, err)
				}
			}
		})
	}
}

func TestAddressInUse(t *testing.T) {
	tests := []struct {
		name          string
		first, second netip.AddrPort
		wantErr       error
	}{
		{"wildcard then specific", netip.AddrPortFrom(anyAddr, 7), netip.AddrPortFrom(rawtest.StackAddr, 7), syscall.EADDRINUSE},
		{"specific then wildcard", netip.AddrPortFrom(rawtest.StackAddr, 7), netip.AddrPortFrom(anyAddr, 7), syscall.EADDRINUSE},
		{"wildcard twice", netip.AddrPortFrom(anyAddr, 7), netip.AddrPortFrom(anyAddr, 7), syscall.EADDRINUSE},
		{"same specific twice", netip.AddrPortFrom(rawtest.StackAddr, 7), netip.AddrPortFrom(rawtest.StackAddr, 7), syscall.EADDRINUSE},
		{"two addresses, one port", netip.AddrPortFrom(rawtest.StackAddr, 7), netip.AddrPortFrom(second, 7), nil},
		{"two ports", netip.AddrPortFrom(anyAddr, 7), netip.AddrPortFrom(anyAddr, 8), nil},
		{"an address not ours", netip.AddrPortFrom(anyAddr, 7), netip.MustParseAddrPort("10.1.0.9:8"), syscall.EADDRNOTAVAIL},
		{"IPv6", netip.AddrPortFrom(anyAddr, 7), netip.MustParseAddrPort("[::1]:8"), syscall.EAFNOSUPPORT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, stack.Config{})
			if err := h.S.AddAddress(rawtest.NIC, netip.PrefixFrom(second, 24)); err != nil {
				t.Fatal(err)
			}
			first := listen(t, h, tt.first.Addr(), tt.first.Port())
			c, err := h.S.ListenUDP(tt.second)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("second bind: %v", err)
				}
				c.Close()
				return
			}
			var oe *net.OpError
			if !errors.Is(err, tt.wantErr) || !errors.As(err, &oe) || oe.Op != "listen" {
				t.Fatalf("second bind: %v, want *net.OpError wrapping %v", err, tt.wantErr)
			}
			if tt.wantErr == syscall.EADDRINUSE {
				// Free again once the first closes.
				first.Close()
				c, err := h.S.ListenUDP(tt.second)
				if err != nil {
					t.Fatalf("bind after close: %v", err)
				}
				c.Close()
			}
		})
	}
}

func TestEphemeralPortsAreInRangeAndDistinct(t *testing.T) {
	tests := []struct{ low, high uint16 }{
		{40000, 40009},
		{65535, 65535},
		{1024, 1031},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d-%d", tt.low, tt.high), func(t *testing.T) {
			h := rawtest.New(t, stack.Config{UDP: udp.Config{EphemeralLow: tt.low, EphemeralHigh: tt.high}})
			seen := map[uint16]*udp.Conn{}
			n := int(tt.high-tt.low) + 1
			for range n {
				c := listen(t, h, anyAddr, 0)
				p := c.LocalAddrPort().Port()
				if p < tt.low || p > tt.high {
					t.Errorf("port %d outside %d-%d", p, tt.low, tt.high)
				}
				if seen[p] != nil {
					t.Errorf("port %d given twice", p)
				}
				seen[p] = c
			}
			if _, err := h.S.ListenUDP(netip.AddrPort{}); !errors.Is(err, syscall.EADDRINUSE) {
				t.Fatalf("bind with the range used up: %v, want EADDRINUSE", err)
			}
			// Closing one frees exactly that port.
			freed := tt.low + uint16(n/2)
			seen[freed].Close()
			if c := listen(t, h, anyAddr, 0); c.LocalAddrPort().Port() != freed {
				t.Errorf("got port %d, want the freed %d", c.LocalAddrPort().Port(), freed)
			}
		})
	}
}

func TestReceiveQueueOverflowIsCounted(t *testing.T) {
	// Each datagram holds 20+8+100 bytes of the queue.
	tests := []struct {
		name   string
		cfg    stack.Config
		rcvbuf int
		fits   int
	}{
		{"socket buffer", stack.Config{}, 3*128 + 127, 3},
		{"memory budget", stack.Config{MemoryLimit: 2*128 + 127}, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := rawtest.New(t, tt.cfg)
			c := listen(t, h, anyAddr, 7)
			if tt.rcvbuf > 0 {
				if err := c.SetReadBuffer(tt.rcvbuf); err != nil {
					t.Fatal(err)
				}
			}
			for i := range tt.fits + 2 {
				h.Inject(h.UDPFrame(t, peer, netip.AddrPortFrom(rawtest.StackAddr, 7), bytes.Repeat([]byte{byte(i)}, 100)))
			}
			h.WaitCounter(t, "UDP.RcvbufErrors", 2)
			if got := h.Counter(t, "UDP.InDatagrams"); got != int64(tt.fits) {
				t.Errorf("InDatagrams = %d, want %d", got, tt.fits)
			}
			for i := range tt.fits {
				if b, _ := read(t, c); b[0] != byte(i) {
					t.Errorf("datagram %d carries %d: the queue is not FIFO", i, b[0])
				}
			}
			// Reading made room.
			h.Inject(h.UDPFrame(t, peer, netip.AddrPortFrom(rawtest.StackAddr, 7), bytes.Repeat([]byte{9}, 100)))
			if b, _ := read(t, c); b[0] != 9 {
				t.Errorf("read %d after making room", b[0])
			}
		})
	}
}

func TestSetReadBufferRejectsNonPositive(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	c := listen(t, h, anyAddr, 7)
	for _, n := range []int{0, -1} {
		if err := c.SetReadBuffer(n); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("SetReadBuffer(%d) = %v, want EINVAL", n, err)
		}
	}
}

func TestCloseWakesABlockedReader(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	c := listen(t, h, anyAddr, 7)
	// Datagrams still queued at Close are released (the harness checks).
	h.Inject(h.UDPFrame(t, peer, netip.AddrPortFrom(rawtest.StackAddr, 7), []byte("first")))
	read(t, c)
	ch := blockedRead(c)
	stillBlocked(t, h, ch)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	err := waitErr(t, ch)
	var oe *net.OpError
	if !errors.As(err, &oe) || !errors.Is(err, net.ErrClosed) || oe.Op != "read" || oe.Net != "udp" {
		t.Fatalf("read = %#v, want *net.OpError{Op: read} wrapping net.ErrClosed", err)
	}
	// Later calls fail the same way, and so does a second Close.
	if _, _, err := c.ReadFrom(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("read after close = %v", err)
	}
	if _, err := c.WriteToUDPAddrPort([]byte("x"), peer); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write after close = %v", err)
	}
	if err := c.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second close = %v", err)
	}
	// The port is free again, and nothing is delivered to the closed conn.
	h.LearnPeer(t)
	h.Inject(h.UDPFrame(t, peer, netip.AddrPortFrom(rawtest.StackAddr, 7), []byte("late")))
	h.WaitCounter(t, "UDP.NoPorts", 1)
	if got := h.Counter(t, "UDP.Sockets"); got != 0 {
		t.Errorf("Sockets = %d after close", got)
	}
}

func TestCloseReleasesQueuedDatagrams(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	c, err := h.S.ListenUDP(netip.AddrPortFrom(anyAddr, 7))
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		h.Inject(h.UDPFrame(t, peer, netip.AddrPortFrom(rawtest.StackAddr, 7), make([]byte, 1000)))
	}
	h.WaitCounter(t, "UDP.InDatagrams", 5)
	if used := h.S.Budget().Used(); used != 5*1028 {
		t.Errorf("budget used %d, want %d", used, 5*1028)
	}
	c.Close()
	if used := h.S.Budget().Used(); used != 0 {
		t.Errorf("budget used %d after close", used)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.Is(err, os.ErrDeadlineExceeded) && errors.As(err, &ne) && ne.Timeout() && errors.As(err, &oe)
}

func TestPastDeadlineFailsImmediately(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	c := listen(t, h, anyAddr, 7)
	// Even with a datagram waiting: once the deadline has passed, calls
	// fail (net.Conn: "will return an error that wraps
	// os.ErrDeadlineExceeded").
	h.Inject(h.UDPFrame(t, peer, netip.AddrPortFrom(rawtest.StackAddr, 7), []byte("queued")))
	h.WaitCounter(t, "UDP.InDatagrams", 1)
	for _, past := range []time.Time{h.Clock.Now(), h.Clock.Now().Add(-time.Hour)} {
		c.SetDeadline(past)
		for range 20 {
			if _, _, err := c.ReadFromUDPAddrPort(make([]byte, 10)); !isTimeout(err) {
				t.Fatalf("read with the deadline at %v: %v, want a timeout", past, err)
			}
		}
		if _, err := c.WriteToUDPAddrPort([]byte("x"), peer); !isTimeout(err) {
			t.Fatalf("write with the deadline at %v: %v, want a timeout", past, err)
		}
	}
	h.ExpectNothing(t)
	// Clearing the deadline lets the queued datagram through.
	c.SetDeadline(time.Time{})
	if b, _ := read(t, c); string(b) != "queued" {
		t.Errorf("read %q", b)
	}
	if _, err := c.WriteToUDPAddrPort([]byte("x"), peer); err != nil {
		t.Errorf("write after clearing: %v", err)
	}
}

func TestReadDeadlineOnTheVirtualClock(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	c := listen(t, h, anyAddr, 7)
	c.SetReadDeadline(h.Clock.Now().Add(time.Second))
	ch := blockedRead(c)
	h.Advance(t, 1, time.Second-time.Nanosecond)
	stillBlocked(t, h, ch)
	h.Clock.Advance(time.Nanosecond)
	if err := waitErr(t, ch); !isTimeout(err) {
		t.Fatalf("read = %v, want a timeout", err)
	}
	// Moving the deadline into the future makes reads block again.
	c.SetReadDeadline(h.Clock.Now().Add(time.Second))
	ch = blockedRead(c)
	stillBlocked(t, h, ch)
	h.Inject(h.UDPFrame(t, peer, netip.AddrPortFrom(rawtest.StackAddr, 7), []byte("in time")))
	if err := waitErr(t, ch); err != nil {
		t.Fatalf("read = %v", err)
	}
}

func TestClearingTheReadDeadline(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	c := listen(t, h, anyAddr, 7)
	c.SetReadDeadline(h.Clock.Now().Add(time.Second))
	ch := blockedRead(c)
	c.SetReadDeadline(time.Time{})
	if n := h.Clock.Pending(); n != 0 {
		t.Errorf("%d timers armed after clearing the deadline", n)
	}
	h.Clock.Advance(time.Hour)
	stillBlocked(t, h, ch)
	h.Inject(h.UDPFrame(t, peer, netip.AddrPortFrom(rawtest.StackAddr, 7), []byte("late but fine")))
	if err := waitErr(t, ch); err != nil {
		t.Fatalf("read = %v", err)
	}
}

func TestReadTruncatesToTheBufferAndReportsTheSource(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	c := listen(t, h, anyAddr, 7)
	h.Inject(h.UDPFrame(t, peer, netip.AddrPortFrom(rawtest.StackAddr, 7), []byte("0123456789")))
	b := make([]byte, 4)
	n, from, err := c.ReadFrom(b)
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 || string(b) != "0123" || from.String() != peer.String() {
		t.Errorf("read %d bytes %q from %v, want 4 \"0123\" from %v", n, b[:n], from, peer)
	}
}

func TestWriteErrors(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	c := listen(t, h, anyAddr, 0)
	tests := []struct {
		name string
		to   net.Addr
		size int
		want error
	}{
		{"not a UDP address", &net.TCPAddr{IP: net.IPv4(10, 1, 0, 1), Port: 7}, 1, syscall.EINVAL},
		{"port zero", &net.UDPAddr{IP: net.IPv4(10, 1, 0, 1), Port: 0}, 1, syscall.EINVAL},
		{"IPv6", &net.UDPAddr{IP: net.IPv6loopback, Port: 7}, 1, syscall.EINVAL},
		{"too large", &net.UDPAddr{IP: net.IPv4(10, 1, 0, 1), Port: 7}, udp.MaxPayload + 1, syscall.EMSGSIZE},
		{"no route", &net.UDPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 7}, 1, syscall.ENETUNREACH},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.WriteTo(make([]byte, tt.size), tt.to)
			var oe *net.OpError
			if !errors.Is(err, tt.want) || !errors.As(err, &oe) || oe.Op != "write" {
				t.Errorf("WriteTo = %v, want *net.OpError wrapping %v", err, tt.want)
			}
		})
	}
	h.ExpectNothing(t)
}

func TestWriteFromTheBoundAddress(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	if err := h.S.AddAddress(rawtest.NIC, netip.PrefixFrom(second, 24)); err != nil {
		t.Fatal(err)
	}
	h.Expect(t, rawtest.Timeout)
	h.LearnPeer(t)
	for _, a := range []netip.Addr{anyAddr, rawtest.StackAddr, second} {
		c := listen(t, h, a, 4000+uint16(a.As4()[3]))
		if _, err := c.WriteToUDPAddrPort([]byte("hi"), peer); err != nil {
			t.Fatal(err)
		}
		ip, u := rawtest.UDPOf(t, h.Expect(t, rawtest.Timeout))
		want := a
		if a.IsUnspecified() {
			want = rawtest.StackAddr // the route's source
		}
		if rawtest.Addr(ip.SrcIP) != want || uint16(u.SrcPort) != c.LocalAddrPort().Port() || uint16(u.DstPort) != peer.Port() || string(u.Payload) != "hi" {
			t.Errorf("bound to %v: sent %v:%d > %v:%d %q", a, ip.SrcIP, u.SrcPort, ip.DstIP, u.DstPort, u.Payload)
		}
	}
}

// A host without an address yet (a DHCP client, RFC 2131 section 4.1) sends
// from 0.0.0.0 to the limited broadcast: RFC 1122 section 3.2.1.3 allows
// the unspecified source for exactly this, so the datagram reaches a
// wildcard socket with its source as it was.
func TestDatagramFromTheUnspecifiedSourceIsDelivered(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	c := listen(t, h, anyAddr, 67)
	src := netip.AddrPortFrom(anyAddr, 68)
	dst := netip.AddrPortFrom(rawtest.LimitedBroadcast, 67)
	f := rawtest.Serialize(t, rawtest.Ethernet(rawtest.PeerMAC, rawtest.BroadcastMAC, layers.EthernetTypeIPv4),
		rawtest.IPv4Header(src.Addr(), dst.Addr(), layers.IPProtocolUDP), rawtest.Payload(rawtest.UDPBytes(t, src, dst, []byte("discover"))))
	h.Inject(f)
	b, from := read(t, c)
	if string(b) != "discover" || from != src {
		t.Errorf("read %q from %v, want %q from %v", b, from, "discover", src)
	}
	if n := h.Counter(t, "IPv4.InMartians"); n != 0 {
		t.Errorf("IPv4.InMartians = %d: the unspecified source was taken for a martian", n)
	}
}

// Nobody on port 67 either way: no port unreachable goes to 0.0.0.0, which
// is no one host (RFC 1122 section 3.2.2), even for a unicast datagram.
func TestNoPortUnreachableToTheUnspecifiedSource(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	src := netip.AddrPortFrom(anyAddr, 68)
	for _, dst := range []netip.Addr{rawtest.LimitedBroadcast, rawtest.StackAddr} {
		h.Inject(h.UDPFrame(t, src, netip.AddrPortFrom(dst, 67), []byte("discover")))
	}
	h.WaitCounter(t, "UDP.NoPorts", 2)
	h.ExpectNothing(t)
}

// A DHCP server answers a client without an address by broadcast (RFC 2131
// section 4.1): to 255.255.255.255 at the Ethernet broadcast address, with
// no ARP, from the interface's address.
func TestWriteToTheLimitedBroadcast(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	c := listen(t, h, anyAddr, 67)
	// gopacket decodes port 68 as DHCP: an empty BOOTP message with the
	// magic cookie and the end option.
	offer := append(make([]byte, 236), 99, 130, 83, 99, 255)
	if _, err := c.WriteToUDPAddrPort(offer, netip.AddrPortFrom(rawtest.LimitedBroadcast, 68)); err != nil {
		t.Fatal(err)
	}
	f := h.Expect(t, rawtest.Timeout)
	ip, u := rawtest.UDPOf(t, f)
	if e := rawtest.EthernetOf(t, f); !bytes.Equal(e.DstMAC, rawtest.BroadcastMAC) {
		t.Errorf("sent to %v, want the Ethernet broadcast", e.DstMAC)
	}
	if rawtest.Addr(ip.SrcIP) != rawtest.StackAddr || rawtest.Addr(ip.DstIP) != rawtest.LimitedBroadcast || u.SrcPort != 67 || u.DstPort != 68 || !bytes.Equal(u.Payload, offer) {
		t.Errorf("sent %s, want 10.1.0.2:67 > 255.255.255.255:68 with the message", rawtest.Describe(f))
	}
}
