//go:build linux

package tap

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/wire"
)

// The virtio-net header of a TCP super-segment, byte by byte as Linux's
// struct virtio_net_hdr lays it out on a little-endian host: flags,
// gso_type, then hdr_len, gso_size, csum_start, csum_offset.
func TestVNetHdrKnownBytes(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the known bytes are a little-endian host's")
	}
	tests := []struct {
		name  string
		off   buffer.Offload
		bytes []byte
	}{
		{"TCP super-segment with partial checksum",
			buffer.Offload{Flags: buffer.NeedsCsum, GSOType: buffer.GSOTCPv4, HdrLen: 66, GSOSize: 1448, CsumStart: 34, CsumOffset: 16},
			[]byte{0x01, 0x01, 0x42, 0x00, 0xa8, 0x05, 0x22, 0x00, 0x10, 0x00}},
		{"UDP partial checksum",
			buffer.Offload{Flags: buffer.NeedsCsum, CsumStart: 34, CsumOffset: 6},
			[]byte{0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x22, 0x00, 0x06, 0x00}},
		{"checksum checked by the device",
			buffer.Offload{Flags: buffer.DataValid},
			[]byte{0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := make([]byte, VNetHdrLen)
			encodeVNetHdr(b, tt.off)
			if !bytes.Equal(b, tt.bytes) {
				t.Errorf("encoded % x, want % x", b, tt.bytes)
			}
			if got := decodeVNetHdr(tt.bytes); got != tt.off {
				t.Errorf("decoded %+v, want %+v", got, tt.off)
			}
		})
	}
}

// With Offload the endpoint advertises every offload, and the kernel
// leaves the checksum of a UDP datagram to us (TUN_F_CSUM): the frame
// comes with NeedsCsum, csum_start at the UDP header, and a partial sum
// that, finished in software, is the datagram's checksum.
func TestOffloadKernelLeavesChecksumsPartial(t *testing.T) {
	ns := newNS(t)
	e := ns.open(t, Options{Offload: true})
	want := link.Capabilities{TxChecksum: true, RxChecksum: true, TSO: true, RxGSO: true, TxGather: true}
	if c := e.Capabilities(); c != want {
		t.Errorf("Capabilities() = %+v, want %+v", c, want)
	}
	ns.up(t, e)
	ns.ip(t, "neigh", "replace", stackIP.String(), "lladdr", e.MAC().String(), "dev", e.Name(), "nud", "permanent")

	var sock int
	ns.do(t, func() {
		var err error
		if sock, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			t.Fatalf("socket in namespace: %v", err)
		}
	})
	defer unix.Close(sock)
	payload := []byte("a checksum left to the reader")
	if err := unix.Sendto(sock, payload, 0, &unix.SockaddrInet4{Port: 9, Addr: stackIP.As4()}); err != nil {
		t.Fatalf("sendto %v:9 in the namespace: %v", stackIP, err)
	}

	// Packets with room for a super-segment: what the endpoint asks for.
	pool := buffer.NewPool()
	defer func() {
		if n := pool.Outstanding(); n != 0 {
			t.Errorf("%d packets outstanding", n)
		}
	}()
	small := pool.Get(link.MaxFrame(e.MTU()))
	if _, err := e.ReadBatch([]*buffer.Packet{small}); err == nil {
		t.Error("ReadBatch took a packet with room for an MTU-sized frame only; super-segments need 64 KiB")
	}
	small.Release()
	p := pool.Get(e.Capabilities().RxFrameSize(e.MTU()))
	defer p.Release()
	for {
		if _, err := e.ReadBatch([]*buffer.Packet{p}); err != nil {
			t.Fatal(err)
		}
		f := p.Bytes()
		if len(f) >= 14+20+8 && binary.BigEndian.Uint16(f[12:14]) == etherTypeIPv4 && f[14+9] == protoUDP {
			break
		}
	}
	f, o := p.Bytes(), p.Offload
	if o.Flags&buffer.NeedsCsum == 0 || o.CsumStart != 14+20 || o.CsumOffset != wire.UDPChecksumOffset || o.GSOType != buffer.GSONone {
		t.Fatalf("UDP datagram's offload %+v, want a partial checksum at 34+6", o)
	}
	if !o.ChecksumVerified() {
		t.Error("ChecksumVerified() = false for a partial checksum")
	}
	if got := e.Stats().RxCsumPartial.Load(); got != 1 {
		t.Errorf("RxCsumPartial = %d, want 1", got)
	}
	udp := f[14+20:]
	src, dst := netip.AddrFrom4([4]byte(f[14+12:])), netip.AddrFrom4([4]byte(f[14+16:]))
	if wire.Checksum(udp, wire.PseudoHeaderSum(src, dst, wire.ProtoUDP, len(udp))) == 0 {
		t.Fatal("the partial checksum already verifies: the test proves nothing")
	}
	if !wire.FinishChecksum(f, int(o.CsumStart), int(o.CsumOffset)) {
		t.Fatal("FinishChecksum refused the kernel's offsets")
	}
	if c := wire.Checksum(udp, wire.PseudoHeaderSum(src, dst, wire.ProtoUDP, len(udp))); c != 0 {
		t.Errorf("the finished checksum does not verify (%#04x)", c)
	}
	if !bytes.Equal(udp[8:], payload) {
		t.Errorf("datagram carries %q, want %q", udp[8:], payload)
	}
}

// ReadBatch and WriteBatch allocate nothing per call: with super-segments
// a batch is a frame or two, so an allocation per call is one per frame.
func TestBatchesDoNotAllocate(t *testing.T) {
	ns := newNS(t)
	e := ns.open(t, Options{Offload: true})
	ns.up(t, e)
	ns.ip(t, "neigh", "replace", stackIP.String(), "lladdr", e.MAC().String(), "dev", e.Name(), "nud", "permanent")
	var sock int
	ns.do(t, func() {
		var err error
		if sock, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			t.Fatalf("socket in namespace: %v", err)
		}
	})
	defer unix.Close(sock)
	to := &unix.SockaddrInet4{Port: 9, Addr: stackIP.As4()}
	msg := []byte("to be read without allocating")

	pool := buffer.NewPool()
	in := []*buffer.Packet{pool.Get(e.Capabilities().RxFrameSize(e.MTU()))}
	out := []*buffer.Packet{pool.Get(64)}
	defer in[0].Release()
	defer out[0].Release()
	copy(out[0].Bytes(), arp{op: arpRequest, senderMAC: e.MAC(), senderIP: stackIP, targetIP: kernelIP}.frame(broadcast))
	out[0].SetLen(42)

	read := func() {
		if err := unix.Sendto(sock, msg, 0, to); err != nil {
			t.Fatal(err)
		}
		in[0].Reset()
		in[0].SetLen(in[0].Cap())
		if _, err := e.ReadBatch(in); err != nil {
			t.Fatal(err)
		}
	}
	read() // the first one may warm up the poller
	if a := testing.AllocsPerRun(100, read); a != 0 {
		t.Errorf("ReadBatch: %v allocations per call, want 0", a)
	}
	write := func() {
		if n, err := e.WriteBatch(out); n != 1 || err != nil {
			t.Fatalf("WriteBatch = %d, %v", n, err)
		}
	}
	if a := testing.AllocsPerRun(100, write); a != 0 {
		t.Errorf("WriteBatch: %v allocations per call, want 0", a)
	}
}
