package udp

import (
	"net"
	"net/netip"
	"os"
	"syscall"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/wire"
)

// Packet information: the address a datagram was sent to and the interface
// it came in on, and the source and interface of one to send, as Linux's
// IP_PKTINFO and RFC 3542's IPV6_PKTINFO (section 6) give them. A server
// bound to a wildcard address needs them to answer from the address it
// was asked at: a host with two addresses on a subnet would otherwise
// answer a query to its second from its first, the route's source, and a
// client whose socket is connected to the second drops that answer
// (RFC 1122 section 4.1.3.5: "A UDP reply ... MUST be sent ... from the
// specific-destination address of the request").

// PacketInfo is a datagram's packet information. Read, Addr is the
// address the datagram was sent to (one of the host's, a broadcast or a
// group) and NIC the interface it came in on; written, Addr is the
// source to send from (one of the host's unicast addresses of the
// destination's family; invalid or unspecified: the route's, as
// WriteToUDPAddrPort) and NIC the interface to send through ("": the
// route's).
type PacketInfo struct {
	Addr netip.Addr
	NIC  string
}

// SetPacketInfo says whether ReadMsg is to tell the interface each
// datagram came in on, as the IP_PKTINFO and IPV6_RECVPKTINFO socket
// options turn that on: it costs a record per datagram queued, so it is
// off until asked for. Datagrams queued before the call go without it.
// The address a datagram was sent to is told either way.
func (c *Conn) SetPacketInfo(on bool) {
	c.mu.Lock()
	c.pktinfo = on
	c.mu.Unlock()
}

// ReadMsg reads one datagram into b as ReadFromUDPAddrPort does, and tells
// where it was sent to and, after SetPacketInfo(true), the interface it
// came in on. A destination of link scope carries the interface's zone.
func (c *Conn) ReadMsg(b []byte) (n int, from netip.AddrPort, info PacketInfo, err error) {
	pk, a, err := c.next()
	if err != nil {
		return 0, netip.AddrPort{}, PacketInfo{}, err
	}
	payload, from := datagram(pk, a.zone)
	n = copy(b, payload)
	info = PacketInfo{Addr: destination(pk, a), NIC: a.in}
	pk.Release()
	return n, from, info, nil
}

// destination is a queued datagram's destination address (queueable),
// zoned with the interface it came in on when it is of link scope.
func destination(pk *buffer.Packet, a arrival) netip.Addr {
	b := pk.Bytes()
	if b[0]>>4 != 6 {
		return wire.IPv4(b).Dst()
	}
	dst := wire.IPv6(b).Dst()
	if dst.IsLinkLocalUnicast() || dst.IsLinkLocalMulticast() || dst.IsInterfaceLocalMulticast() {
		zone := a.in
		if zone == "" {
			// The source's zone, when it has one, is the interface
			// too: a link-local source came in on its own link.
			zone = a.zone
		}
		dst = dst.WithZone(zone)
	}
	return dst
}

// WriteMsg sends b as one datagram to addr as WriteToUDPAddrPort does, from
// info.Addr and through info.NIC when they are set. A source that is not
// one of the host's unicast addresses of addr's family fails with EINVAL,
// as Linux's IP_PKTINFO does, and so does an interface other than the one
// the endpoint is bound to (BindToDevice) or than addr's zone.
func (c *Conn) WriteMsg(b []byte, addr netip.AddrPort, info PacketInfo) (int, error) {
	if err := c.writable(addr); err != nil {
		return 0, err
	}
	laddr, device := c.laddr, c.boundDevice()
	var o *mcastOpts
	if addr.Addr().IsMulticast() {
		opts := c.sendOpts()
		o = &opts
	}
	if src := info.Addr.Unmap(); src.IsValid() && !src.IsUnspecified() {
		if !c.p.isUnicastLocal(src, addr.Addr()) {
			return 0, c.opError("write", addr, syscall.EINVAL)
		}
		laddr = netip.AddrPortFrom(src, laddr.Port())
	}
	if nic := info.NIC; nic != "" {
		if device != "" && device != nic || addr.Addr().Zone() != "" && addr.Addr().Zone() != nic {
			return 0, c.opError("write", addr, syscall.EINVAL)
		}
		switch {
		case o != nil:
			o.ifname = nic
		case addr.Addr().Is6() && !addr.Addr().Is4In6():
			// IPv6 routes out of an interface by the destination's
			// zone, which it drops once routed (send).
			addr = netip.AddrPortFrom(addr.Addr().WithZone(nic), addr.Port())
		default:
			device = nic
		}
	}
	if err := c.p.send(c.binding(), laddr, addr, device, b, o); err != nil {
		return 0, c.opError("write", addr, err)
	}
	return len(b), nil
}

// writable fails a write on a closed endpoint or past its deadline.
func (c *Conn) writable(addr netip.AddrPort) error {
	select {
	case <-c.done:
		return c.opError("write", addr, net.ErrClosed)
	case <-c.writeDL.Done():
		return c.opError("write", addr, os.ErrDeadlineExceeded)
	default:
		return nil
	}
}

// isUnicastLocal reports whether src is one of the host's unicast
// addresses, of dst's family.
func (p *Protocol) isUnicastLocal(src, dst netip.Addr) bool {
	if src.Is4() != dst.Unmap().Is4() || src.IsMulticast() {
		return false
	}
	nw, err := p.nets.For(src)
	if err != nil {
		return false
	}
	if nw.IsLocal(src) {
		if b, ok := nw.(interface{ IsBroadcast(netip.Addr) bool }); !ok || !b.IsBroadcast(src) {
			return true
		}
	}
	return false
}
