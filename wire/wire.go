// Package wire holds GoNet's wire formats: for each protocol a view type over
// the bytes of a header (type IPv4 []byte, with accessors that do not copy)
// and an encoder that writes a header from a Fields struct. Views assume the
// caller checked the length with the protocol's Valid or Parse function; the
// decoders never panic on any input, which the fuzz targets pin down.
package wire

import (
	"encoding/binary"
	"fmt"
)

// MAC is an IEEE 802 hardware address.
type MAC [6]byte

// Broadcast is the Ethernet broadcast address.
var Broadcast = MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// IsMulticast reports whether the group bit is set (broadcast included).
func (m MAC) IsMulticast() bool { return m[0]&1 == 1 }

// String formats m as six colon-separated hex bytes.
func (m MAC) String() string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}

var be = binary.BigEndian
