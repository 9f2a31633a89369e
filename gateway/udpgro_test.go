package gateway

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"slices"
	"testing"
	"unsafe"

	"github.com/gonetstack/gonet/stats"
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
		var oob [unix.SizeofCmsghdr + 8]byte
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		h.Level, h.Type = tt.level, tt.typ
		h.SetLen(tt.cmsgLen)
		binary.NativeEndian.PutUint32(oob[unix.CmsgLen(0):], uint32(int32(tt.size)))
		if got := segmentSize(oob[:], tt.ctl, tt.n); got != tt.want {
			t.Errorf("%s: segment size %d, want %d", tt.name, got, tt.want)
		}
	}
}

// A read takes what queued on the host socket in one system call, into as
// many slots as the flow's last reads found waiting (doubling while they
// fill every slot, up to maxHostReads), each datagram whole in a buffer
// of its own, the largest too; a read that fills fewer than half its
// slots halves the offer. The buffers are lent until release, and none is
// held by a read that finds nothing.
func TestHostReadsTakeWhatQueuedOneBufferADatagram(t *testing.T) {
	sizes := []int{1, 1472, 0, 65507, 9000}
	for len(sizes) < 40 {
		sizes = append(sizes, 100+len(sizes))
	}
	conn, send := loopbackPair(t)
	for i, n := range sizes {
		send(datagramOf(i, n))
	}
	var held stats.Gauge
	r := newHostReads(&held)
	var got [][]byte
	var counts []int
	readAll(t, conn, func(fd int) error {
		slots, err := r.read(fd)
		if err != nil {
			return err
		}
		if held.Load() != int64(len(slots)) {
			t.Errorf("%d buffers held for %d slots read", held.Load(), len(slots))
		}
		counts = append(counts, len(slots))
		for _, s := range slots {
			got = append(got, append([]byte(nil), s.b...))
		}
		r.release(slots)
		if held.Load() != 0 {
			t.Errorf("%d buffers held after release", held.Load())
		}
		return nil
	})
	if want := []int{1, 2, 4, 8, 16, 9}; !slices.Equal(counts, want) {
		t.Errorf("reads took %v datagrams, want %v", counts, want)
	}
	if len(got) != len(sizes) {
		t.Fatalf("read %d datagrams, want %d", len(got), len(sizes))
	}
	for i, n := range sizes {
		if !bytes.Equal(got[i], datagramOf(i, n)) {
			t.Errorf("datagram %d: %d bytes not the %d sent", i, len(got[i]), n)
		}
	}
	if _, err := readOnce(t, conn, r); !errors.Is(err, unix.EAGAIN) {
		t.Errorf("a read of an empty socket: %v, want EAGAIN", err)
	}
	if held.Load() != 0 {
		t.Errorf("%d buffers held after a read that found nothing", held.Load())
	}
	if r.offer != maxHostReads {
		t.Errorf("after a read that filled 9 of %d slots the offer is %d, want it kept", maxHostReads, r.offer)
	}
	send(datagramOf(0, 10))
	slots, err := readOnce(t, conn, r)
	if err != nil || len(slots) != 1 {
		t.Fatalf("read %d datagrams (%v), want 1", len(slots), err)
	}
	r.release(slots)
	if r.offer != maxHostReads/2 {
		t.Errorf("after a read that filled 1 of %d slots the offer is %d, want %d (half)", maxHostReads, r.offer, maxHostReads/2)
	}
}

// While the gateway's relays hold batchBuffersCap buffers, a read offers
// one slot whatever its flow's last reads found.
func TestHostReadsOfferOneSlotAtTheCap(t *testing.T) {
	conn, send := loopbackPair(t)
	for i := range 4 {
		send(datagramOf(i, 100))
	}
	var held stats.Gauge
	held.Add(batchBuffersCap)
	r := newHostReads(&held)
	r.offer = maxHostReads
	slots, err := readOnce(t, conn, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(slots) != 1 {
		t.Errorf("at the cap a read took %d datagrams, want 1", len(slots))
	}
	r.release(slots)
}

// loopbackPair returns a UDP socket on the loopback and a function that
// sends it a datagram, both closed with the test.
func loopbackPair(t *testing.T) (*net.UDPConn, func([]byte)) {
	t.Helper()
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.SetReadBuffer(4 << 20); err != nil {
		t.Fatal(err)
	}
	out, err := net.DialUDP("udp4", nil, conn.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	return conn, func(b []byte) {
		if _, err := out.Write(b); err != nil {
			t.Fatal(err)
		}
	}
}

// datagramOf is datagram i of n bytes, each byte telling i and its place.
func datagramOf(i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i + j)
	}
	return b
}

// readOnce makes one read of the socket's queue, without waiting.
func readOnce(t *testing.T, conn *net.UDPConn, r *hostReads) (slots []hostSlot, err error) {
	t.Helper()
	rc, cerr := conn.SyscallConn()
	if cerr != nil {
		t.Fatal(cerr)
	}
	if cerr := rc.Control(func(fd uintptr) { slots, err = r.read(int(fd)) }); cerr != nil {
		t.Fatal(cerr)
	}
	return slots, err
}

// readAll calls read until the socket's queue is empty (EAGAIN).
func readAll(t *testing.T, conn *net.UDPConn, read func(fd int) error) {
	t.Helper()
	rc, err := conn.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for {
		var rerr error
		if err := rc.Control(func(fd uintptr) { rerr = read(int(fd)) }); err != nil {
			t.Fatal(err)
		}
		if errors.Is(rerr, unix.EAGAIN) {
			return
		}
		if rerr != nil {
			t.Fatal(rerr)
		}
	}
}
