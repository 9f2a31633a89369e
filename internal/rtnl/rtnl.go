// Package rtnl configures the kernel's interfaces over route netlink
// (rtnetlink(7)): a link up with its MTU, an IPv4 address, a default route.
// The gateway uses it to set up a guest's TAP in the guest's namespace as
// slirp4netns --configure does, without depending on the ip command.
//
// Each call opens a netlink socket in the network namespace of the calling
// thread, sends one request with NLM_F_ACK and reads the kernel's answer:
// run it inside the namespace to configure (netns.DoPath). A Conn instead
// keeps its socket, and with it its namespace, for reading an interface's
// counters again and again (a daemon's metrics).
package rtnl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// LinkUp sets the MTU of the interface named name, when mtu > 0, and
// brings it up (RTM_NEWLINK with IFF_UP).
func LinkUp(name string, mtu int) error {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return fmt.Errorf("rtnl: link %s: %w", name, err)
	}
	msg := unix.IfInfomsg{Family: unix.AF_UNSPEC, Index: int32(ifi.Index), Flags: unix.IFF_UP, Change: unix.IFF_UP}
	var attrs []byte
	if mtu > 0 {
		attrs = appendAttr(attrs, unix.IFLA_MTU, binary.NativeEndian.AppendUint32(nil, uint32(mtu)))
	}
	if err := request(unix.RTM_NEWLINK, 0, structBytes(&msg), attrs); err != nil {
		return fmt.Errorf("rtnl: link %s up, MTU %d: %w", name, mtu, err)
	}
	return nil
}

// AddAddr adds the IPv4 address addr, with its prefix length, to the
// interface named name (RTM_NEWADDR), with the subnet's broadcast address.
func AddAddr(name string, addr netip.Prefix) error {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return fmt.Errorf("rtnl: address %v on %s: %w", addr, name, err)
	}
	if !addr.Addr().Is4() {
		return fmt.Errorf("rtnl: address %v on %s: not IPv4", addr, name)
	}
	msg := unix.IfAddrmsg{Family: unix.AF_INET, Prefixlen: uint8(addr.Bits()), Index: uint32(ifi.Index)}
	a := addr.Addr().As4()
	bcast := addr.Masked().Addr().As4()
	for i := range bcast {
		bcast[i] |= byte(^uint32(0) >> addr.Bits() >> (8 * (3 - i)))
	}
	var attrs []byte
	attrs = appendAttr(attrs, unix.IFA_LOCAL, a[:])
	attrs = appendAttr(attrs, unix.IFA_ADDRESS, a[:])
	attrs = appendAttr(attrs, unix.IFA_BROADCAST, bcast[:])
	if err := request(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_EXCL, structBytes(&msg), attrs); err != nil {
		return fmt.Errorf("rtnl: address %v on %s: %w", addr, name, err)
	}
	return nil
}

// AddDefaultRoute routes 0.0.0.0/0 through gw on the interface named name
// (RTM_NEWROUTE in the main table).
func AddDefaultRoute(name string, gw netip.Addr) error {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return fmt.Errorf("rtnl: default route via %v on %s: %w", gw, name, err)
	}
	if !gw.Is4() {
		return fmt.Errorf("rtnl: default route via %v on %s: not IPv4", gw, name)
	}
	msg := unix.RtMsg{
		Family:   unix.AF_INET,
		Table:    unix.RT_TABLE_MAIN,
		Protocol: unix.RTPROT_BOOT,
		Scope:    unix.RT_SCOPE_UNIVERSE,
		Type:     unix.RTN_UNICAST,
	}
	g := gw.As4()
	var attrs []byte
	attrs = appendAttr(attrs, unix.RTA_GATEWAY, g[:])
	attrs = appendAttr(attrs, unix.RTA_OIF, binary.NativeEndian.AppendUint32(nil, uint32(ifi.Index)))
	if err := request(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_EXCL, structBytes(&msg), attrs); err != nil {
		return fmt.Errorf("rtnl: default route via %v on %s: %w", gw, name, err)
	}
	return nil
}

// structBytes returns the bytes of a netlink message struct, in the
// kernel's (native) layout.
func structBytes[T any](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}

// appendAttr appends a route attribute (struct rtattr and its data,
// padded to 4 bytes).
func appendAttr(b []byte, typ uint16, data []byte) []byte {
	l := unix.SizeofRtAttr + len(data)
	b = binary.NativeEndian.AppendUint16(b, uint16(l))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%unix.NLMSG_ALIGNTO != 0 {
		b = append(b, 0)
	}
	return b
}

// errShortAck is a netlink acknowledgement too short to hold its error.
var errShortAck = errors.New("short netlink acknowledgement")

// request sends one rtnetlink request and returns the kernel's error for it.
func request(typ uint16, flags uint16, msg, attrs []byte) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	body := append(append([]byte(nil), msg...), attrs...)
	for len(body)%unix.NLMSG_ALIGNTO != 0 {
		body = append(body, 0)
	}
	const seq = 1
	hdr := unix.NlMsghdr{
		Len:   uint32(unix.SizeofNlMsghdr + len(body)),
		Type:  typ,
		Flags: unix.NLM_F_REQUEST | unix.NLM_F_ACK | flags,
		Seq:   seq,
	}
	req := append(append([]byte(nil), structBytes(&hdr)...), body...)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if m.Header.Seq != seq || m.Header.Type != unix.NLMSG_ERROR {
				continue
			}
			if len(m.Data) < 4 {
				return errShortAck
			}
			if errno := -int32(binary.NativeEndian.Uint32(m.Data[:4])); errno != 0 {
				return unix.Errno(errno)
			}
			return nil
		}
	}
}
