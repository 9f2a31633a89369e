package gateway

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A read's segment size comes only from a well-formed UDP_GRO control
// message that describes the bytes read; anything else is one datagram.
func TestHostReadTakesTheSegmentSizeOnlyFromUDPGRO(t *testing.T) {
	tests := []struct {
		name         string
		level, typ   int32
		cmsgLen, ctl int // the header's length and the control bytes the kernel wrote
		size, n      int
		want         int
	}{
		{"a run", unix.SOL_UDP, unix.UDP_GRO, unix.CmsgLen(4), unix.CmsgSpace(4), 1200, 24000, 1200},
		{"no control message", unix.SOL_UDP, unix.UDP_GRO, unix.CmsgLen(4), 0, 1200, 24000, 0},
		{"another level", unix.SOL_IP, unix.UDP_GRO, unix.CmsgLen(4), unix.CmsgSpace(4), 1200, 24000, 0},
		{"another type", unix.SOL_UDP, unix.UDP_SEGMENT, unix.CmsgLen(4), unix.CmsgSpace(4), 1200, 24000, 0},
		{"a header too short for its data", unix.SOL_UDP, unix.UDP_GRO, unix.CmsgLen(0), unix.CmsgSpace(4), 1200, 24000, 0},
		{"a segment as long as the read: one datagram", unix.SOL_UDP, unix.UDP_GRO, unix.CmsgLen(4), unix.CmsgSpace(4), 1200, 1200, 0},
		{"a zero segment size", unix.SOL_UDP, unix.UDP_GRO, unix.CmsgLen(4), unix.CmsgSpace(4), 0, 24000, 0},
		{"a negative segment size", unix.SOL_UDP, unix.UDP_GRO, unix.CmsgLen(4), unix.CmsgSpace(4), -5, 24000, 0},
	}
	for _, tt := range tests {
		var r hostRead
		h := (*unix.Cmsghdr)(unsafe.Pointer(&r.oob[0]))
		h.Level, h.Type = tt.level, tt.typ
		h.SetLen(tt.cmsgLen)
		binary.NativeEndian.PutUint32(r.oob[unix.CmsgLen(0):], uint32(int32(tt.size)))
		r.msg.SetControllen(tt.ctl)
		if got := r.segmentSize(tt.n); got != tt.want {
			t.Errorf("%s: segment size %d, want %d", tt.name, got, tt.want)
		}
	}
}
