package wire

// EtherType values (IEEE 802 numbers) the stack deals on.
const (
	EtherTypeIPv4 = 0x0800
	EtherTypeARP  = 0x0806
	EtherTypeIPv6 = 0x86dd
)

// EthernetHeaderLen is the length of an Ethernet II header.
const EthernetHeaderLen = 14

// Ethernet II header layout (IEEE 802.3 section 3.1.1, the Length/Type
// field holding an EtherType): the offset of each field.
const (
	ethDst  = 0  // destination address, 6 bytes
	ethSrc  = 6  // source address, 6 bytes
	ethType = 12 // EtherType, 2 bytes
)

// Ethernet is a view of an Ethernet II frame.
type Ethernet []byte

// ParseEthernet checks that b can hold an Ethernet header.
func ParseEthernet(b []byte) (Ethernet, bool) {
	if len(b) < EthernetHeaderLen {
		return nil, false
	}
	return Ethernet(b), true
}

// Dst returns the destination address.
func (e Ethernet) Dst() MAC { return MAC(e[ethDst : ethDst+macLen]) }

// Src returns the source address.
func (e Ethernet) Src() MAC { return MAC(e[ethSrc : ethSrc+macLen]) }

// Type returns the EtherType.
func (e Ethernet) Type() uint16 { return be.Uint16(e[ethType : ethType+2]) }

// Payload returns the bytes after the header.
func (e Ethernet) Payload() []byte { return e[EthernetHeaderLen:] }

// EthernetFields describes an Ethernet II header to encode.
type EthernetFields struct {
	Dst, Src MAC
	Type     uint16 // EtherType
}

// EncodeEthernet writes the header f describes into b[:EthernetHeaderLen].
func EncodeEthernet(b []byte, f *EthernetFields) {
	copy(b[ethDst:], f.Dst[:])
	copy(b[ethSrc:], f.Src[:])
	be.PutUint16(b[ethType:ethType+2], f.Type)
}
