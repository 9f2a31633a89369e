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

// ARP is a view of an ARP packet.
type ARP []byte

// ParseARP checks that b is an ARP packet for IPv4 over Ethernet, the only
// kind the stack answers (RFC 826: "?Do I have the hardware type in ar$hrd?").
func ParseARP(b []byte) (ARP, bool) {
	if len(b) < ARPLen {
		return nil, false
	}
	a := ARP(b)
	if be.Uint16(a[0:2]) != arpHWEthernet || be.Uint16(a[2:4]) != EtherTypeIPv4 || a[4] != 6 || a[5] != 4 {
		return nil, false
	}
	return a[:ARPLen], true
}

// Op returns the operation (ARPRequest or ARPReply).
func (a ARP) Op() uint16 { return be.Uint16(a[6:8]) }

// SenderMAC returns the sender's hardware address.
func (a ARP) SenderMAC() MAC { return MAC(a[8:14]) }

// SenderIP returns the sender's protocol address.
func (a ARP) SenderIP() netip.Addr { return netip.AddrFrom4([4]byte(a[14:18])) }

// TargetMAC returns the target's hardware address.
func (a ARP) TargetMAC() MAC { return MAC(a[18:24]) }

// TargetIP returns the target's protocol address.
func (a ARP) TargetIP() netip.Addr { return netip.AddrFrom4([4]byte(a[24:28])) }

// ARPFields describes an ARP packet to encode.
type ARPFields struct {
	Op                   uint16
	SenderMAC, TargetMAC MAC
	SenderIP, TargetIP   netip.Addr
}

// EncodeARP writes f into b[:ARPLen].
func EncodeARP(b []byte, f ARPFields) {
	be.PutUint16(b[0:2], arpHWEthernet)
	be.PutUint16(b[2:4], EtherTypeIPv4)
	b[4], b[5] = 6, 4
	be.PutUint16(b[6:8], f.Op)
	copy(b[8:14], f.SenderMAC[:])
	s, t := f.SenderIP.As4(), f.TargetIP.As4()
	copy(b[14:18], s[:])
	copy(b[18:24], f.TargetMAC[:])
	copy(b[24:28], t[:])
}
