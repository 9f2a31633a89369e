package fault

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/wire"
)

// A frame read with a partial checksum (a TAP with offloads) is corrupted
// only after its checksum is finished, and loses the flags that would let
// the stack skip checking it: the flipped bit must be detectable, as on a
// wire.
func TestCorruptFinishesAPartialChecksumFirst(t *testing.T) {
	r := newRig(t, Config{Corrupt: 1, Seed: 5})
	src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	for _, flags := range []uint8{buffer.NeedsCsum, buffer.DataValid} {
		p := r.pool.Get(14 + 20 + 8 + 32)
		b := p.Bytes()
		copy(b[0:6], macA)
		copy(b[6:12], macB)
		binary.BigEndian.PutUint16(b[12:14], wire.EtherTypeIPv4)
		wire.EncodeIPv4(b[14:], &wire.IPv4Fields{TotalLen: 20 + 8 + 32, TTL: 64, Protocol: wire.ProtoUDP, Src: src, Dst: dst})
		u := b[14+20:]
		binary.BigEndian.PutUint16(u[0:], 1000)
		binary.BigEndian.PutUint16(u[2:], 2000)
		binary.BigEndian.PutUint16(u[4:], uint16(len(u)))
		copy(u[8:], bytes.Repeat([]byte{0x5a}, 32))
		binary.BigEndian.PutUint16(u[6:], wire.PartialChecksum(src, dst, wire.ProtoUDP, len(u)))
		p.Offload = buffer.Offload{Flags: flags, CsumStart: 14 + 20, CsumOffset: wire.UDPChecksumOffset}
		// What a wire would have carried.
		want := bytes.Clone(b)
		if flags == buffer.NeedsCsum {
			wire.FinishChecksum(want, 14+20, wire.UDPChecksumOffset)
		}
		if _, err := r.peer.WriteBatch([]*buffer.Packet{p}); err != nil {
			t.Fatal(err)
		}
		p.Release()

		in := []*buffer.Packet{r.pool.Get(link.MaxFrame(mtu))}
		if _, err := r.f.ReadBatch(in); err != nil {
			t.Fatal(err)
		}
		got := in[0]
		if got.Offload.ChecksumVerified() {
			t.Errorf("flags %#x: the corrupted frame keeps offload %+v, which skips the stack's checks", flags, got.Offload)
		}
		flipped := 0
		for j := range want {
			flipped += bits.OnesCount8(got.Bytes()[j] ^ want[j])
		}
		if flipped != 1 {
			t.Errorf("flags %#x: %d bits differ from the frame with its checksum finished, want 1", flags, flipped)
		}
		got.Release()
	}
}

// The fault endpoint passes the inner endpoint's receive offloads on and
// offers no transmit offloads.
func TestCapabilitiesOfferNoTransmitOffloads(t *testing.T) {
	inner := offloading{Endpoint: nil, caps: link.Capabilities{TxChecksum: true, RxChecksum: true, TSO: true, RxGSO: true}}
	e := &Endpoint{inner: inner}
	want := link.Capabilities{RxChecksum: true, RxGSO: true}
	if got := e.Capabilities(); got != want {
		t.Errorf("Capabilities() = %+v, want %+v", got, want)
	}
}

// offloading is an endpoint that claims caps.
type offloading struct {
	link.Endpoint
	caps link.Capabilities
}

func (o offloading) Capabilities() link.Capabilities { return o.caps }
