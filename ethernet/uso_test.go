package ethernet_test

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ethernet"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/wire"
)

// offloadLink is a link that takes offloads in, in memory: the test puts
// frames with their virtio-net metadata on its receive side.
type offloadLink struct {
	mac    net.HardwareAddr
	rx     chan offloadFrame
	closed chan struct{}
}

type offloadFrame struct {
	b []byte
	o buffer.Offload
}

func newOffloadLink() *offloadLink {
	return &offloadLink{mac: net.HardwareAddr{2, 0, 0, 0, 0, 1}, rx: make(chan offloadFrame, 16), closed: make(chan struct{})}
}

func (l *offloadLink) ReadBatch(pkts []*buffer.Packet) (int, error) {
	select {
	case f := <-l.rx:
		pkts[0].SetLen(len(f.b))
		copy(pkts[0].Bytes(), f.b)
		pkts[0].Offload = f.o
		return 1, nil
	case <-l.closed:
		return 0, link.ErrClosed
	}
}

func (l *offloadLink) WriteBatch(pkts []*buffer.Packet) (int, error) { return len(pkts), nil }
func (l *offloadLink) MTU() int                                      { return 1500 }
func (l *offloadLink) MAC() net.HardwareAddr                         { return l.mac }
func (l *offloadLink) Capabilities() link.Capabilities {
	return link.Capabilities{RxChecksum: true, RxGSO: true}
}
func (l *offloadLink) Close() error { close(l.closed); return nil }

// keeper is a protocol that keeps copies of the packets it is dealt, with
// their offload metadata, and the size of each batch.
type keeper struct {
	pkts    chan offloadFrame
	batches chan int
}

func (k *keeper) Deliver(b *buffer.Batch) {
	k.batches <- len(b.Pkts)
	for _, p := range b.Pkts {
		k.pkts <- offloadFrame{append([]byte(nil), p.Bytes()...), p.Offload}
	}
	b.Release()
}

// run describes a UDP run as the kernel hands one to a TAP reader with
// UDP segmentation offload: datagrams of size payload bytes but the last,
// total bytes in all, behind one set of headers with the run's lengths.
type run struct {
	v6        bool
	options   bool // IPv4 options (a Router Alert) in the header
	size      int
	total     int
	dataValid bool // validated by the device, not partial
}

var (
	runSrc4, runDst4 = net.IPv4(10, 0, 0, 1), net.IPv4(10, 0, 0, 2)
	runSrc6, runDst6 = net.ParseIP("fd00::1"), net.ParseIP("fd00::2")
)

// payload is the run's payload: each byte its offset modulo 251, so that a
// datagram cut at the wrong place shows.
func (r run) payload() []byte {
	b := make([]byte, r.total)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// layers are a datagram's IP and UDP layers with the run's fields, the
// IPv4 identification the run's plus i, for gopacket to build.
func (r run) layers(i int) (ip gopacket.SerializableLayer, udp *layers.UDP) {
	udp = &layers.UDP{SrcPort: 4000, DstPort: 5001}
	if r.v6 {
		ip6 := &layers.IPv6{Version: 6, TrafficClass: 0x10, NextHeader: layers.IPProtocolUDP, HopLimit: 64, SrcIP: runSrc6, DstIP: runDst6}
		udp.SetNetworkLayerForChecksum(ip6)
		return ip6, udp
	}
	ip4 := &layers.IPv4{Version: 4, TOS: 0x10, Id: 0xfffe + uint16(i), Flags: layers.IPv4DontFragment, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: runSrc4, DstIP: runDst4}
	if r.options {
		ip4.Options = []layers.IPv4Option{{OptionType: 148, OptionLength: 4, OptionData: []byte{0, 0}}}
	}
	udp.SetNetworkLayerForChecksum(ip4)
	return ip4, udp
}

// serialize builds ls with gopacket, lengths and checksums computed.
func serialize(t *testing.T, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// frame builds the run's frame with gopacket and its metadata: one set
// of headers with the run's lengths, all of its payload behind them.
func (r run) frame(t *testing.T) offloadFrame {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, EthernetType: layers.EthernetTypeIPv4}
	if r.v6 {
		eth.EthernetType = layers.EthernetTypeIPv6
	}
	ip, udp := r.layers(0)
	b := serialize(t, eth, ip, udp, gopacket.Payload(r.payload()))
	l4 := wire.EthernetHeaderLen + wire.IPv6HeaderLen
	if !r.v6 {
		l4 = wire.EthernetHeaderLen + int(b[wire.EthernetHeaderLen]&0xf)*4
	}
	o := buffer.Offload{GSOType: buffer.GSOUDPL4, GSOSize: uint16(r.size), HdrLen: uint16(l4 + wire.UDPHeaderLen)}
	if r.dataValid {
		o.Flags = buffer.DataValid
	} else {
		o.Flags, o.CsumStart, o.CsumOffset = buffer.NeedsCsum, uint16(l4), wire.UDPChecksumOffset
	}
	return offloadFrame{b, o}
}

// want is the datagram i of the run as the kernel would have cut it,
// built by gopacket with its checksums.
func (r run) want(t *testing.T, i int) []byte {
	t.Helper()
	ip, udp := r.layers(i)
	return serialize(t, ip, udp, gopacket.Payload(r.payload()[i*r.size:min((i+1)*r.size, r.total)]))
}

// startNIC returns a started NIC on a fresh offloadLink with k bound to
// both IP EtherTypes.
func startNIC(t *testing.T) (*offloadLink, *ethernet.NIC, *keeper, *buffer.Pool) {
	t.Helper()
	l, pool := newOffloadLink(), buffer.NewPool()
	n, err := ethernet.NewNIC("uso0", l, pool)
	if err != nil {
		t.Fatal(err)
	}
	k := &keeper{pkts: make(chan offloadFrame, 512), batches: make(chan int, 64)}
	n.Bind(wire.EtherTypeIPv4, k)
	n.Bind(wire.EtherTypeIPv6, k)
	n.Start()
	t.Cleanup(func() { n.Close() })
	return l, n, k, pool
}

// A UDP run read from the link reaches the network layer as the datagrams
// the kernel would have sent one by one: each with the run's headers and
// its own lengths, IPv4 identification and header checksum, and a UDP
// checksum partial over its own length (finished, it is the datagram's
// checksum) or, for a run the device validated, whole.
func TestNICCutsUDPRunsIntoTheirDatagrams(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  run
	}{
		{"ipv4", run{size: 1200, total: 1200*20 + 300}},
		{"ipv4 last full-sized", run{size: 1472, total: 1472 * 8}},
		{"ipv4 with options", run{options: true, size: 1000, total: 5500}},
		{"ipv4 validated", run{dataValid: true, size: 1200, total: 3000}},
		{"ipv4 one datagram", run{size: 1200, total: 700}},
		{"ipv6", run{v6: true, size: 1200, total: 1200*20 + 300}},
		{"ipv6 validated", run{v6: true, dataValid: true, size: 1400, total: 4000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, n, k, _ := startNIC(t)
			l.rx <- tc.run.frame(t)
			count := (tc.run.total + tc.run.size - 1) / tc.run.size
			for i := range count {
				var got offloadFrame
				select {
				case got = <-k.pkts:
				case <-time.After(5 * time.Second):
					t.Fatalf("%d of %d datagrams reached the network layer", i, count)
				}
				b := got.b
				if got.o.GSOType != buffer.GSONone {
					t.Errorf("datagram %d: GSO type %d, want none", i, got.o.GSOType)
				}
				if tc.run.dataValid {
					if got.o.Flags != buffer.DataValid {
						t.Errorf("datagram %d: flags %#x, want DataValid", i, got.o.Flags)
					}
				} else {
					if got.o.Flags != buffer.NeedsCsum || got.o.CsumOffset != wire.UDPChecksumOffset {
						t.Fatalf("datagram %d: offload %+v, want a partial UDP checksum", i, got.o)
					}
					// The NIC strips Ethernet; the offsets count it.
					if !wire.FinishChecksum(b, int(got.o.CsumStart)-wire.EthernetHeaderLen, int(got.o.CsumOffset)) {
						t.Fatalf("datagram %d: checksum at %d+%d outside %d bytes", i, got.o.CsumStart, got.o.CsumOffset, len(b))
					}
				}
				if want := tc.run.want(t, i); !bytes.Equal(b, want) {
					t.Fatalf("datagram %d:\n got % x\nwant % x", i, b, want)
				}
			}
			if got, want := n.Stats.RxUSO.Load(), uint64(1); got != want {
				t.Errorf("RxUSO %d, want %d", got, want)
			}
			if got := n.Stats.RxUSODatagrams.Load(); got != uint64(count) {
				t.Errorf("RxUSODatagrams %d, want %d", got, count)
			}
		})
	}
}

// A run of more datagrams than a batch holds goes up in several batches,
// none over buffer.MaxBatch, every datagram in order.
func TestNICDealsALongRunInBatches(t *testing.T) {
	l, _, k, _ := startNIC(t)
	r := run{size: 500, total: 500 * 128}
	l.rx <- r.frame(t)
	seen := 0
	for seen < 128 {
		select {
		case size := <-k.batches:
			if size > buffer.MaxBatch {
				t.Fatalf("a batch of %d packets, over MaxBatch %d", size, buffer.MaxBatch)
			}
			for range size {
				p := <-k.pkts
				if id := binary.BigEndian.Uint16(p.b[4:6]); id != 0xfffe+uint16(seen) {
					t.Fatalf("datagram %d has identification %#x, want %#x", seen, id, 0xfffe+uint16(seen))
				}
				seen++
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of 128 datagrams reached the network layer", seen)
		}
	}
}

// A run whose headers do not hold together is dropped whole and counted,
// never cut by lengths it does not vouch for; the NIC goes on reading.
func TestNICDropsMalformedUDPRuns(t *testing.T) {
	good := run{size: 1000, total: 3000}
	for _, tc := range []struct {
		name   string
		mangle func(f *offloadFrame) // f.b from the Ethernet header
	}{
		{"no segment size", func(f *offloadFrame) { f.o.GSOSize = 0 }},
		{"checksum neither partial nor validated", func(f *offloadFrame) { f.o.Flags = 0 }},
		{"partial checksum elsewhere", func(f *offloadFrame) { f.o.CsumStart += 2 }},
		{"partial checksum at another offset", func(f *offloadFrame) { f.o.CsumOffset = wire.TCPChecksumOffset }},
		{"not UDP", func(f *offloadFrame) { f.b[14+9] = wire.ProtoTCP; fixIPv4Checksum(f.b[14:]) }},
		{"a fragment", func(f *offloadFrame) { f.b[14+6] |= 0x20; fixIPv4Checksum(f.b[14:]) }},
		{"bad header checksum", func(f *offloadFrame) { f.b[14+10] ^= 0xff }},
		{"IP length past the frame", func(f *offloadFrame) { f.b = f.b[:len(f.b)-1] }},
		{"UDP length not the run's", func(f *offloadFrame) {
			binary.BigEndian.PutUint16(f.b[14+20+4:], uint16(good.total))
		}},
		{"more datagrams than the kernel makes", func(f *offloadFrame) { f.o.GSOSize = 20 }},
		{"IPv6 extension header first", func(f *offloadFrame) {
			*f = run{v6: true, size: 1000, total: 3000}.frame(t)
			f.b[14+6] = wire.ProtoDestOpts
		}},
		{"not IP", func(f *offloadFrame) { f.b[14] = 0x55 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, n, k, _ := startNIC(t)
			f := good.frame(t)
			tc.mangle(&f)
			l.rx <- f
			l.rx <- good.frame(t) // the next run still gets through
			for i := range 3 {
				select {
				case p := <-k.pkts:
					if got := binary.BigEndian.Uint16(p.b[2:4]); got != 20+8+1000 {
						t.Fatalf("datagram %d has total length %d: the malformed run was cut", i, got)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("%d of the good run's 3 datagrams arrived", i)
				}
			}
			if got := n.Stats.RxUSODropped.Load(); got != 1 {
				t.Errorf("RxUSODropped %d, want 1", got)
			}
			select {
			case p := <-k.pkts:
				t.Errorf("an extra datagram of %d bytes reached the network layer", len(p.b))
			default:
			}
		})
	}
}

// fixIPv4Checksum recomputes the header checksum of an IPv4 header of 20
// bytes after a test changed it.
func fixIPv4Checksum(h []byte) {
	h[10], h[11] = 0, 0
	binary.BigEndian.PutUint16(h[10:12], wire.Checksum(h[:20], 0))
}
