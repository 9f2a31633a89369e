package ip_test

import (
	"testing"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/wire"
)

func TestSuperSegmentGoesWholeOnlyToALinkThatCutsIt(t *testing.T) {
	gsoOffload := buffer.Offload{GSOType: buffer.GSOTCPv6, GSOSize: 1428, HdrLen: 94, Flags: buffer.NeedsCsum}
	for _, c := range []struct {
		name          string
		offload       buffer.Offload
		tso           bool
		want          bool
		gso, fallback uint64
		wantGSOType   uint8
	}{
		{"a datagram that is no super-segment", buffer.Offload{}, true, false, 0, 0, buffer.GSONone},
		{"a super-segment to a link with TSO", gsoOffload, true, true, 1, 0, buffer.GSOTCPv6},
		{"a super-segment to a link without TSO loses its offload", gsoOffload, false, false, 0, 1, buffer.GSONone},
	} {
		t.Run(c.name, func(t *testing.T) {
			pk := buffer.NewPool().Get(100)
			defer pk.Release()
			pk.Offload = c.offload
			var gso, fallbacks stats.Counter
			r := ip.Route{Offloads: link.Capabilities{TxChecksum: c.tso, TSO: c.tso}}
			if got := ip.SuperSegment(pk, &r, &gso, &fallbacks); got != c.want {
				t.Errorf("SuperSegment = %v, want %v", got, c.want)
			}
			if gso.Load() != c.gso || fallbacks.Load() != c.fallback {
				t.Errorf("counted %d super-segments, %d fallbacks; want %d, %d", gso.Load(), fallbacks.Load(), c.gso, c.fallback)
			}
			if pk.Offload.GSOType != c.wantGSOType || c.wantGSOType == buffer.GSONone && (pk.Offload.GSOSize != 0 || pk.Offload.HdrLen != 0) {
				t.Errorf("offload left %+v, want GSO type %d", pk.Offload, c.wantGSOType)
			}
			if pk.Offload.Flags != c.offload.Flags {
				t.Errorf("checksum flags %#x, want %#x: the checksum stays the link's to finish", pk.Offload.Flags, c.offload.Flags)
			}
		})
	}
}

func TestFinishChecksum(t *testing.T) {
	pk := buffer.NewPool().Get(8)
	defer pk.Release()
	copy(pk.Bytes(), []byte{1, 2, 3, 4, 0, 0, 0, 0})
	pk.Offload = buffer.Offload{Flags: buffer.NeedsCsum, CsumStart: 0, CsumOffset: 6}
	ip.FinishChecksum(pk)
	if c := wire.Checksum(pk.Bytes(), 0); c != 0 {
		t.Errorf("the bytes sum to %#x, want a finished checksum", c)
	}
	if pk.Offload != (buffer.Offload{}) {
		t.Errorf("offload %+v left after finishing", pk.Offload)
	}
	// A packet whose checksum is whole is left alone.
	before := append([]byte(nil), pk.Bytes()...)
	ip.FinishChecksum(pk)
	if string(pk.Bytes()) != string(before) {
		t.Error("a finished checksum was changed")
	}
}
