package server

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"

	"gvisor.dev/gvisor/pkg/tcpip"
	gvgonet "gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/link/ethernet"
	"gvisor.dev/gvisor/pkg/tcpip/network/arp"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	gvstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	gvtcp "gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"

	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/stack"
)

// goNetHost is GoNet on a TAP device, set up as its daemon and its
// integration tests set it up: the default configuration, which runs IPv6
// beside IPv4 on every NIC. Its IPv6 address, when the set-up has one,
// goes through duplicate address detection as any would (RFC 4862 section
// 5.4): the suite pings it from the client until it answers, which it does
// once DAD is over.
type goNetHost struct {
	s   *stack.Stack
	dev string
}

func newGoNet(c Config) (*goNetHost, error) {
	ep, err := tap.Open(c.TAP, tap.Options{MTU: c.MTU, Offload: true})
	if err != nil {
		return nil, err
	}
	// The collector as the gonet daemon sets it (issue 14), so that the
	// report's pauses are the daemon's.
	stack.TuneGC(0)
	s := stack.New(stack.Config{})
	if err := s.AddNIC(ep.Name(), ep); err != nil {
		s.Close()
		ep.Close()
		return nil, err
	}
	for _, a := range []netip.Prefix{c.Addr, c.Addr6} {
		if !a.IsValid() {
			continue
		}
		if err := s.AddAddress(ep.Name(), a); err != nil {
			s.Close()
			return nil, err
		}
	}
	return &goNetHost{s: s, dev: ep.Name()}, nil
}

// listen and listenPacket use the wildcard of both families (GoNet's
// "tcp" and "udp" on an empty host, as Go's net): the same listener in an
// IPv4 set-up and an IPv6 one.
func (h *goNetHost) listen(port int) (net.Listener, error) {
	return h.s.Listen("tcp", ":"+strconv.Itoa(port))
}

func (h *goNetHost) listenPacket(port int) (net.PacketConn, error) {
	return h.s.ListenPacket("udp", ":"+strconv.Itoa(port))
}

func (h *goNetHost) frames() (int64, int64) {
	m := h.s.Counters()
	return m["NIC."+h.dev+".RxFrames"], m["NIC."+h.dev+".TxFrames"]
}

func (h *goNetHost) counters() map[string]int64 {
	m := h.s.Counters()
	for k, v := range m {
		if v == 0 {
			delete(m, k)
		}
	}
	return m
}

func (h *goNetHost) close() { h.s.Close() }

// gVisorHost is gVisor netstack on a TAP with offloads (gvisorTAP), its
// servers on the gonet adapter, SACK and receive-buffer moderation on and
// Nagle off (as Go's net package and GoNet): the set-up a careful user of
// gVisor would choose. In an IPv6 set-up it has its IPv6 protocol too, as
// ipv6.NewProtocol makes it: gVisor's defaults, which do no duplicate
// address detection (DADConfigurations' zero DupAddrDetectTransmits) and
// form no link-local address, with neighbour discovery otherwise as its
// defaults have it; the handlers then listen on IPv6 endpoints.
type gVisorHost struct {
	s    *gvstack.Stack
	link *gvisorTAP
	net  tcpip.NetworkProtocolNumber // the handlers' family
}

const gvisorNIC = 1

func newGVisor(c Config) (*gVisorHost, error) {
	mac := net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x02}
	link, err := openGvisorTAP(c.TAP, c.MTU, mac, 4096)
	if err != nil {
		return nil, err
	}
	nets := []gvstack.NetworkProtocolFactory{ipv4.NewProtocol, arp.NewProtocol}
	transports := []gvstack.TransportProtocolFactory{gvtcp.NewProtocol, udp.NewProtocol, icmp.NewProtocol4}
	if c.Addr6.IsValid() {
		nets = append(nets, ipv6.NewProtocol)
		transports = append(transports, icmp.NewProtocol6)
	}
	s := gvstack.New(gvstack.Options{NetworkProtocols: nets, TransportProtocols: transports})
	opts := []tcpip.SettableTransportProtocolOption{
		ptr(tcpip.TCPSACKEnabled(true)),
		ptr(tcpip.TCPModerateReceiveBufferOption(true)),
		ptr(tcpip.TCPDelayEnabled(false)),
		// runsc's defaults for a sandbox: 1 MiB buffers growing to 4 MiB
		// (GoNet's buffers are 4 MiB).
		&tcpip.TCPReceiveBufferSizeRangeOption{Min: 4096, Default: 1 << 20, Max: 4 << 20},
		&tcpip.TCPSendBufferSizeRangeOption{Min: 4096, Default: 1 << 20, Max: 4 << 20},
	}
	if c.CC != "" {
		opts = append(opts, ptr(tcpip.CongestionControlOption(c.CC)))
	}
	for _, o := range opts {
		if err := s.SetTransportProtocolOption(gvtcp.ProtocolNumber, o); err != nil {
			link.close()
			return nil, fmt.Errorf("tcp option %T: %v", o, err)
		}
	}
	if err := s.CreateNIC(gvisorNIC, ethernet.New(link.ch)); err != nil {
		link.close()
		return nil, fmt.Errorf("create NIC: %v", err)
	}
	h := &gVisorHost{s: s, link: link, net: ipv4.ProtocolNumber}
	var routes []tcpip.Route
	for _, a := range []netip.Prefix{c.Addr, c.Addr6} {
		if !a.IsValid() {
			continue
		}
		proto, addr := ipv4.ProtocolNumber, tcpip.AddrFromSlice(a.Addr().AsSlice())
		if a.Addr().Is6() {
			proto = ipv6.ProtocolNumber
			h.net = proto
		}
		prefix := tcpip.AddressWithPrefix{Address: addr, PrefixLen: a.Bits()}
		if err := s.AddProtocolAddress(gvisorNIC, tcpip.ProtocolAddress{Protocol: proto, AddressWithPrefix: prefix}, gvstack.AddressProperties{}); err != nil {
			link.close()
			return nil, fmt.Errorf("add address %v: %v", a, err)
		}
		routes = append(routes, tcpip.Route{Destination: prefix.Subnet(), NIC: gvisorNIC})
	}
	s.SetRouteTable(routes)
	link.start()
	return h, nil
}

func ptr[T any](v T) *T { return &v }

func (h *gVisorHost) listen(port int) (net.Listener, error) {
	return gvgonet.ListenTCP(h.s, tcpip.FullAddress{NIC: gvisorNIC, Port: uint16(port)}, h.net)
}

func (h *gVisorHost) listenPacket(port int) (net.PacketConn, error) {
	return gvgonet.DialUDP(h.s, &tcpip.FullAddress{NIC: gvisorNIC, Port: uint16(port)}, nil, h.net)
}

func (h *gVisorHost) frames() (int64, int64) { return h.link.rxFrames.Load(), h.link.txFrames.Load() }

func (h *gVisorHost) counters() map[string]int64 {
	st := h.s.Stats()
	t := st.TCP
	m := map[string]int64{
		"TCP.InSegs":          int64(t.ValidSegmentsReceived.Value()),
		"TCP.OutSegs":         int64(t.SegmentsSent.Value()),
		"TCP.RetransSegs":     int64(t.Retransmits.Value()),
		"TCP.FastRetrans":     int64(t.FastRetransmit.Value()),
		"TCP.Timeouts":        int64(t.Timeouts.Value()),
		"TCP.ListenOverflows": int64(t.ListenOverflowSynDrop.Value()),
		"TCP.InErrs":          int64(t.InvalidSegmentsReceived.Value()),
		"UDP.RcvBufErrors":    int64(st.UDP.ReceiveBufferErrors.Value()),
		"IP.InDrops":          int64(st.IP.MalformedPacketsReceived.Value() + st.IP.InvalidDestinationAddressesReceived.Value()),
		"NIC.RxDropped":       int64(st.NICs.MalformedL4RcvdPackets.Value()),
		"Link.RxGSO":          h.link.rxGSO.Load(),
		"Link.RxErrors":       h.link.rxErrors.Load(),
		"Link.TxErrors":       h.link.txErrors.Load(),
		"Link.TxQueueFull":    int64(st.NICs.TxPacketsDroppedNoBufferSpace.Value()),
	}
	for k, v := range m {
		if v == 0 {
			delete(m, k)
		}
	}
	return m
}

func (h *gVisorHost) close() {
	h.link.close()
	h.s.Close()
}

// kernelHost is the Linux kernel's stack through Go's net package, in a
// namespace of its own on one end of a veth pair (the suite gives the
// veth its addresses). Its sockets are bound to the address of the family
// the set-up measures.
type kernelHost struct {
	addr   string
	family string // "4" or "6"
}

func newKernel(c Config) (*kernelHost, error) {
	// A socket is a file here: the overload workload's thousands of
	// connections need more than a small hard limit allows (Go raises
	// the soft limit to the hard one by itself); root may raise both.
	raiseFileLimit(kernelMaxFiles)
	if c.Addr6.IsValid() {
		return &kernelHost{addr: c.Addr6.Addr().String(), family: "6"}, nil
	}
	return &kernelHost{addr: c.Addr.Addr().String(), family: "4"}, nil
}

// kernelMaxFiles is the open-file limit the kernel's server asks for:
// the overload's 5000 connections and room to spare.
const kernelMaxFiles = 1 << 16

// raiseFileLimit raises the open-file limit to at least want, when it can.
func raiseFileLimit(want uint64) {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil || l.Cur >= want {
		return
	}
	l.Cur, l.Max = want, max(l.Max, want)
	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
}

func (h *kernelHost) listen(port int) (net.Listener, error) {
	return net.Listen("tcp"+h.family, net.JoinHostPort(h.addr, strconv.Itoa(port)))
}

func (h *kernelHost) listenPacket(port int) (net.PacketConn, error) {
	return net.ListenPacket("udp"+h.family, net.JoinHostPort(h.addr, strconv.Itoa(port)))
}

func (h *kernelHost) frames() (int64, int64) { return -1, -1 }

func (h *kernelHost) counters() map[string]int64 { return nil }

func (h *kernelHost) close() {}
