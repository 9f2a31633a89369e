//go:build linux

package tap

import (
	"bytes"
	"net"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/wire"
)

// datagram is a flow's UDP datagram of size payload bytes, as GoNet's
// UDP and IP layers hand it to the NIC: an Ethernet frame, its checksum
// partial when partial.
type datagram struct {
	v6         bool
	srcPort    uint16
	size       int
	fragment   bool // IPv4's MF flag set
	partial    bool
	fill       byte
	ttl        uint8
	gsoAlready bool
}

func (d datagram) packet(t *testing.T, pool *buffer.Pool) *buffer.Packet {
	t.Helper()
	if d.srcPort == 0 {
		d.srcPort = 4000
	}
	if d.ttl == 0 {
		d.ttl = 64
	}
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	udp := &layers.UDP{SrcPort: layers.UDPPort(d.srcPort), DstPort: 5001}
	var ip gopacket.SerializableLayer
	if d.v6 {
		eth.EthernetType = layers.EthernetTypeIPv6
		ip6 := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolUDP, HopLimit: d.ttl,
			SrcIP: net.ParseIP("fd00::1"), DstIP: net.ParseIP("fd00::2")}
		udp.SetNetworkLayerForChecksum(ip6)
		ip = ip6
	} else {
		ip4 := &layers.IPv4{Version: 4, IHL: 5, TTL: d.ttl, Protocol: layers.IPProtocolUDP, Id: uint16(d.fill),
			SrcIP: net.IPv4(10, 0, 0, 1), DstIP: net.IPv4(10, 0, 0, 2)}
		if d.fragment {
			ip4.Flags = layers.IPv4MoreFragments
		}
		udp.SetNetworkLayerForChecksum(ip4)
		ip = ip4
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, ip, udp, gopacket.Payload(bytes.Repeat([]byte{d.fill}, d.size))); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	p := pool.Get(len(b))
	copy(p.Bytes(), b)
	if d.partial {
		l4 := 14 + 20
		if d.v6 {
			l4 = 14 + 40
		}
		p.Offload = buffer.Offload{Flags: buffer.NeedsCsum, CsumStart: uint16(l4), CsumOffset: wire.UDPChecksumOffset}
	}
	if d.gsoAlready {
		p.Offload.GSOType = buffer.GSOTCPv4
	}
	return p
}

func packets(t *testing.T, pool *buffer.Pool, ds ...datagram) []*buffer.Packet {
	t.Helper()
	pkts := make([]*buffer.Packet, len(ds))
	for i, d := range ds {
		pkts[i] = d.packet(t, pool)
	}
	t.Cleanup(func() {
		for _, p := range pkts {
			p.Release()
		}
	})
	return pkts
}

func TestUSORunsAreOneFlowOfOneSize(t *testing.T) {
	pool := buffer.NewPool()
	d := datagram{size: 1000}
	with := func(f func(*datagram)) datagram { x := d; f(&x); return x }
	many := make([]datagram, maxUSOSegments+3)
	for i := range many {
		many[i] = d
	}
	tests := []struct {
		name string
		ds   []datagram
		want int
	}{
		{"one", []datagram{d}, 1},
		{"a flow's equal sizes", []datagram{d, d, d}, 3},
		{"IPv6", []datagram{{v6: true, size: 1000}, {v6: true, size: 1000}}, 2},
		{"partial checksums", []datagram{with(func(x *datagram) { x.partial = true }), with(func(x *datagram) { x.partial = true })}, 2},
		{"a shorter one ends the run", []datagram{d, d, {size: 100}, d}, 3},
		{"a frame padded to Ethernet's minimum", []datagram{d, {size: 10}}, 1},
		{"a longer one does not join", []datagram{d, {size: 1200}}, 1},
		{"another port", []datagram{d, with(func(x *datagram) { x.srcPort = 4001 })}, 1},
		{"another TTL", []datagram{d, with(func(x *datagram) { x.ttl = 1 })}, 1},
		{"another family", []datagram{d, {v6: true, size: 1000}}, 1},
		{"a fragment", []datagram{d, with(func(x *datagram) { x.fragment = true })}, 1},
		{"a fragment first", []datagram{with(func(x *datagram) { x.fragment = true }), d}, 1},
		{"a super-segment already", []datagram{d, with(func(x *datagram) { x.gsoAlready = true })}, 1},
		{"an empty datagram", []datagram{d, {size: 0}}, 1},
		{"no more than maxUSOSegments", many, maxUSOSegments},
		{"no more than an IP length", []datagram{{size: 30000}, {size: 30000}, {size: 30000}}, 2},
	}
	for _, tt := range tests {
		if got := usoRun(packets(t, pool, tt.ds...)); got != tt.want {
			t.Errorf("%s: run of %d, want %d", tt.name, got, tt.want)
		}
	}
}

// A run goes out as one frame the kernel can cut back into the datagrams:
// a virtio-net header for UDP segmentation offload of the first's size,
// the first's headers with the run's lengths (gopacket reads them, and
// IPv4's checksum holds), the UDP checksum partial over the run's length,
// and the payloads in order.
func TestUSOFrameCarriesTheRun(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		pool := buffer.NewPool()
		fake := &fakeWrites{}
		e := fakeEndpoint(t, fake)
		e.vnetHdr, e.offload = true, true
		sizes := []int{1000, 1000, 1000, 300}
		var ds []datagram
		var want []byte
		for i, n := range sizes {
			ds = append(ds, datagram{v6: v6, size: n, fill: byte('a' + i), partial: i%2 == 0})
			want = append(want, bytes.Repeat([]byte{byte('a' + i)}, n)...)
		}
		if n, err := e.WriteBatch(packets(t, pool, ds...)); n != len(ds) || err != nil {
			t.Fatalf("v6=%v: WriteBatch = %d, %v", v6, n, err)
		}
		if len(fake.written) != 1 {
			t.Fatalf("v6=%v: %d writes, want the run in one", v6, len(fake.written))
		}
		w := fake.written[0]
		o := decodeVNetHdr(w[:VNetHdrLen])
		l4 := 14 + 20
		if v6 {
			l4 = 14 + 40
		}
		if o.GSOType != buffer.GSOUDPL4 || o.GSOSize != 1000 || o.Flags != buffer.NeedsCsum || int(o.HdrLen) != l4+8 ||
			int(o.CsumStart) != l4 || o.CsumOffset != wire.UDPChecksumOffset {
			t.Errorf("v6=%v: virtio-net header %+v", v6, o)
		}
		frame := w[VNetHdrLen:]
		pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
		u, _ := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if u == nil {
			t.Fatalf("v6=%v: gopacket finds no UDP in the frame: %v", v6, pkt)
		}
		if int(u.Length) != 8+len(want) || !bytes.Equal(u.Payload, want) {
			t.Errorf("v6=%v: UDP length %d, payload of %d bytes equal=%v; want %d", v6, u.Length, len(u.Payload), bytes.Equal(u.Payload, want), 8+len(want))
		}
		var src, dst []byte
		if v6 {
			ip := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
			if int(ip.Length) != 8+len(want) {
				t.Errorf("IPv6 payload length %d", ip.Length)
			}
			src, dst = frame[14+8:14+24], frame[14+24:14+40]
		} else {
			ip := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
			if int(ip.Length) != 20+8+len(want) || wire.Checksum(frame[14:34], 0) != 0 {
				t.Errorf("IPv4 total length %d, header checksum %#x (sums to %#x)", ip.Length, ip.Checksum, wire.Checksum(frame[14:34], 0))
			}
			src, dst = frame[14+12:14+16], frame[14+16:14+20]
		}
		if got, want := u.Checksum, wire.Fold(pseudoSum(src, dst, 8+len(want))); got != want {
			t.Errorf("v6=%v: UDP checksum %#x, want the partial %#x", v6, got, want)
		}
		if e.stats.TxUSO.Load() != uint64(len(ds)) || e.stats.TxFrames.Load() != 1 {
			t.Errorf("v6=%v: TxUSO %d, TxFrames %d", v6, e.stats.TxUSO.Load(), e.stats.TxFrames.Load())
		}
	}
}

// A kernel that refuses the frame (EINVAL: before Linux 6.2) has the run
// written a datagram a frame, and every later one too.
func TestUSORefusedFallsBackToAFrameEach(t *testing.T) {
	pool := buffer.NewPool()
	fake := &fakeWrites{errs: []error{unix.EINVAL}}
	e := fakeEndpoint(t, fake)
	e.vnetHdr, e.offload = true, true
	d := datagram{size: 500}
	if n, err := e.WriteBatch(packets(t, pool, d, d, d)); n != 3 || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	if n, err := e.WriteBatch(packets(t, pool, d, d)); n != 2 || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	if fake.frames != 5 || e.stats.TxUSORefused.Load() != 1 || e.stats.TxErrors.Load() != 0 || e.stats.TxUSO.Load() != 0 {
		t.Errorf("%d frames written, TxUSORefused %d, TxErrors %d, TxUSO %d; want 5, 1, 0, 0",
			fake.frames, e.stats.TxUSORefused.Load(), e.stats.TxErrors.Load(), e.stats.TxUSO.Load())
	}
}
