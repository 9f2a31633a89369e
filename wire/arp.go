package wire

import "net/netip"

// ARP for IPv4 over Ethernet (RFC 826): hardware type 1, protocol 0x0800,
// address lengths 6 and 4.
const (
	ARPLen        = 28
	ARPRequest    = 1
	ARPReply      = 2
	arpHWEthernet = 1
)

// ARP packet layout for IPv4 over Ethernet (RFC 826, "Packet format"): the
// offset of each field, named as the RFC names them.
const (
	arpHrd = 0  // ar$hrd, hardware address space, 2 bytes
	arpPro = 2  // ar$pro, protocol address space, 2 bytes
	arpHln = 4  // ar$hln, hardware address length, 1 byte
	arpPln = 5  // ar$pln, protocol address length, 1 byte
	arpOp  = 6  // ar$op, opcode, 2 bytes
	arpSha = 8  // ar$sha, sender hardware address, 6 bytes
	arpSpa = 14 // ar$spa, sender protocol address, 4 bytes
	arpTha = 18 // ar$tha, target hardware address, 6 bytes
	arpTpa = 24 // ar$tpa, target protocol address, 4 bytes

	arpMACLen  = macLen // ar$hln for Ethernet
	arpIPv4Len = 4      // ar$pln for IPv4
)

// ARP is a view of an ARP packet.
type ARP []byte

// ParseARP checks that b is an ARP packet for IPv4 over Ethernet, the only
// kind the stack answers (RFC 826: "?Do I have the hardware type in ar$hrd?").
func ParseARP(b []byte) (ARP, bool) {
	if len(b) < ARPLen {
		return nil, false
	}
	a := ARP(b)
	if be.Uint16(a[arpHrd:arpHrd+2]) != arpHWEthernet || be.Uint16(a[arpPro:arpPro+2]) != EtherTypeIPv4 || a[arpHln] != arpMACLen || a[arpPln] != arpIPv4Len {
		return nil, false
	}
	return a[:ARPLen], true
}

// Op returns the operation (ARPRequest or ARPReply).
func (a ARP) Op() uint16 { return be.Uint16(a[arpOp : arpOp+2]) }

// SenderMAC returns the sender's hardware address.
func (a ARP) SenderMAC() MAC { return MAC(a[arpSha : arpSha+macLen]) }

// SenderIP returns the sender's protocol address.
func (a ARP) SenderIP() netip.Addr { return netip.AddrFrom4([4]byte(a[arpSpa : arpSpa+4])) }

// TargetMAC returns the target's hardware address.
func (a ARP) TargetMAC() MAC { return MAC(a[arpTha : arpTha+macLen]) }

// TargetIP returns the target's protocol address.
func (a ARP) TargetIP() netip.Addr { return netip.AddrFrom4([4]byte(a[arpTpa : arpTpa+4])) }

// ARPFields describes an ARP packet to encode.
type ARPFields struct {
	Op                   uint16
	SenderMAC, TargetMAC MAC
	SenderIP, TargetIP   netip.Addr
}

// EncodeARP writes the packet f describes into b[:ARPLen].
func EncodeARP(b []byte, f *ARPFields) {
	be.PutUint16(b[arpHrd:arpHrd+2], arpHWEthernet)
	be.PutUint16(b[arpPro:arpPro+2], EtherTypeIPv4)
	b[arpHln], b[arpPln] = arpMACLen, arpIPv4Len
	be.PutUint16(b[arpOp:arpOp+2], f.Op)
	copy(b[arpSha:], f.SenderMAC[:])
	s, t := f.SenderIP.As4(), f.TargetIP.As4()
	copy(b[arpSpa:], s[:])
	copy(b[arpTha:], f.TargetMAC[:])
	copy(b[arpTpa:], t[:])
}
