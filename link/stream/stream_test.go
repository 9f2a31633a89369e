package stream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	macA = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xa}
	macB = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xb}
)

// frameBytes returns an Ethernet frame of the given length whose payload
// carries seq and then a pattern that depends on it, so that a frame cut,
// merged or misplaced shows.
func frameBytes(length int, seq uint32) []byte {
	b := make([]byte, max(length, link.EthernetHeaderLen))
	copy(b[0:6], macB)
	copy(b[6:12], macA)
	binary.BigEndian.PutUint16(b[12:14], 0x88b5) // IEEE 802 local experimental
	b = b[:length]
	if length >= 18 {
		binary.BigEndian.PutUint32(b[14:18], seq)
	}
	for i := 18; i < length; i++ {
		b[i] = byte(uint32(i) * (seq + 7))
	}
	return b
}

// packet returns a packet from pool holding b.
func packet(pool *buffer.Pool, b []byte) *buffer.Packet {
	p := pool.Get(len(b))
	copy(p.Bytes(), b)
	return p
}

// framed encodes frames as the peer sends them, independently of the
// endpoint's writer: each behind its length, 32 bits big-endian.
func framed(frames ...[]byte) []byte {
	var out []byte
	for _, f := range frames {
		out = binary.BigEndian.AppendUint32(out, uint32(len(f)))
		out = append(out, f...)
	}
	return out
}

// readBufs returns n packets with room for a frame at mtu.
func readBufs(pool *buffer.Pool, mtu, n int) []*buffer.Packet {
	pkts := make([]*buffer.Packet, n)
	for i := range pkts {
		pkts[i] = pool.Get(link.MaxFrame(mtu))
	}
	return pkts
}

func release(pkts []*buffer.Packet) {
	for _, p := range pkts {
		p.Release()
	}
}

// socketpair returns the two ends of a connected UNIX stream socket pair.
func socketpair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socketpair: %v", err)
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f) // a duplicate of fd
		f.Close()
		if err != nil {
			t.Fatalf("socketpair: %v", err)
		}
		conns[i] = c
	}
	return conns[0], conns[1]
}

// endpointOnSocketpair returns an endpoint on one end of a socketpair and
// the raw other end, both closed when the test ends.
func endpointOnSocketpair(t *testing.T) (raw net.Conn, e *Endpoint) {
	t.Helper()
	raw, cb := socketpair(t)
	t.Cleanup(func() { raw.Close() })
	e, err := New(cb, Options{MAC: macA})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return raw, e
}

// readAll reads from e until want frames have come, with a deadline.
func readAll(t *testing.T, e *Endpoint, pool *buffer.Pool, want int) [][]byte {
	t.Helper()
	in := readBufs(pool, e.MTU(), 64)
	defer release(in)
	var got [][]byte
	done := make(chan error, 1)
	go func() {
		for len(got) < want {
			for _, p := range in {
				p.SetLen(p.Cap())
			}
			n, err := e.ReadBatch(in)
			if err != nil {
				done <- err
				return
			}
			for _, p := range in[:n] {
				got = append(got, bytes.Clone(p.Bytes()))
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ReadBatch after %d of %d frames: %v", len(got), want, err)
		}
	case <-time.After(10 * time.Second):
		e.Close()
		<-done
		t.Fatalf("%d of %d frames arrived in 10s", len(got), want)
	}
	return got
}

func checkFrames(t *testing.T, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d frames, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("frame %d: read %d bytes %x..., want %d bytes %x...", i, len(got[i]), got[i][:min(len(got[i]), 24)], len(want[i]), want[i][:min(len(want[i]), 24)])
		}
	}
}

func TestFramesRoundTrip(t *testing.T) {
	conns := []struct {
		name string
		pair func(t *testing.T) (net.Conn, net.Conn)
	}{
		{"net.Pipe", func(*testing.T) (net.Conn, net.Conn) { return net.Pipe() }},
		{"socketpair", socketpair},
	}
	for _, c := range conns {
		for _, mtu := range []int{1500, 65520} {
			t.Run(c.name+"/mtu"+strconv.Itoa(mtu), func(t *testing.T) {
				ca, cb := c.pair(t)
				a, err := New(ca, Options{MTU: mtu, MAC: macA})
				if err != nil {
					t.Fatal(err)
				}
				defer a.Close()
				b, err := New(cb, Options{MTU: mtu, MAC: macB})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				pool := buffer.NewPool()
				var want [][]byte
				var out []*buffer.Packet
				for i, size := range []int{link.EthernetHeaderLen, 60, 1514, link.MaxFrame(mtu), 100, link.MaxFrame(mtu)} {
					want = append(want, frameBytes(size, uint32(i)))
					out = append(out, packet(pool, want[i]))
				}
				for _, dir := range []struct {
					name     string
					from, to *Endpoint
				}{{"a to b", a, b}, {"b to a", b, a}} {
					written := make(chan error, 1)
					go func() { // net.Pipe has no buffer: a write waits for the read
						n, err := dir.from.WriteBatch(out)
						if err == nil && n != len(out) {
							err = errors.New("WriteBatch took " + strconv.Itoa(n) + " frames")
						}
						written <- err
					}()
					got := readAll(t, dir.to, pool, len(want))
					if err := <-written; err != nil {
						t.Fatalf("%s: %v", dir.name, err)
					}
					checkFrames(t, got, want)
					if f, by := dir.from.Stats().TxFrames.Load(), dir.to.Stats().RxBytes.Load(); f != uint64(len(want)) || by != uint64(totalLen(want)) {
						t.Errorf("%s: TxFrames %d, RxBytes %d; want %d, %d", dir.name, f, by, len(want), totalLen(want))
					}
				}
				release(out)
				a.Close()
				b.Close()
				if n := pool.Outstanding(); n != 0 {
					t.Errorf("%d packets outstanding", n)
				}
			})
		}
	}
}

func totalLen(frames [][]byte) int {
	n := 0
	for _, f := range frames {
		n += len(f)
	}
	return n
}

// The bytes on the wire are QEMU's: each frame behind its length, 32 bits
// big-endian, nothing else.
func TestWireFormatIsLengthThenFrame(t *testing.T) {
	raw, e := endpointOnSocketpair(t)
	pool := buffer.NewPool()
	f1, f2 := frameBytes(60, 1), frameBytes(14, 2)
	out := []*buffer.Packet{packet(pool, f1), packet(pool, f2)}
	defer release(out)
	if n, err := e.WriteBatch(out); n != 2 || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	want := append([]byte{0, 0, 0, 60}, f1...)
	want = append(append(want, 0, 0, 0, 14), f2...)
	got := make([]byte, len(want))
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(raw, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("on the wire:\n got %x\nwant %x", got, want)
	}
}

// chunkedWriter writes the stream in pieces of the given sizes, in turn,
// so that frames and prefixes are split across reads.
func writeChunked(t *testing.T, w net.Conn, stream []byte, sizes []int) {
	t.Helper()
	for i := 0; len(stream) > 0; i++ {
		n := min(sizes[i%len(sizes)], len(stream))
		if _, err := w.Write(stream[:n]); err != nil {
			t.Errorf("writing the stream: %v", err)
			return
		}
		stream = stream[n:]
		if i%128 == 0 {
			time.Sleep(time.Millisecond) // let the reader catch up mid-frame
		}
	}
}

func TestFramesSplitAcrossReads(t *testing.T) {
	tests := []struct {
		name  string
		sizes []int
	}{
		{"one byte at a time", []int{1}},
		{"prefix split", []int{2, 3, 5}},
		{"odd pieces", []int{7, 1000, 13, 4096}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, e := endpointOnSocketpair(t)
			var want [][]byte
			for i := range 40 {
				want = append(want, frameBytes(14+i*37, uint32(i)))
			}
			go writeChunked(t, raw, framed(want...), tt.sizes)
			checkFrames(t, readAll(t, e, buffer.NewPool(), len(want)), want)
			if got := e.Stats().RxErrors.Load(); got != 0 {
				t.Errorf("RxErrors = %d", got)
			}
		})
	}
}

// Frames already in the socket come out of one ReadBatch, from one read.
func TestManyFramesPerRead(t *testing.T) {
	raw, e := endpointOnSocketpair(t)
	var want [][]byte
	for i := range 50 {
		want = append(want, frameBytes(64+i, uint32(i)))
	}
	if _, err := raw.Write(framed(want...)); err != nil {
		t.Fatal(err)
	}
	pool := buffer.NewPool()
	in := readBufs(pool, 1500, 64)
	defer release(in)
	n, err := e.ReadBatch(in)
	if n != len(want) || err != nil {
		t.Fatalf("ReadBatch = %d, %v; want all %d frames at once", n, err, len(want))
	}
	for i := range n {
		if !bytes.Equal(in[i].Bytes(), want[i]) {
			t.Fatalf("frame %d differs", i)
		}
	}
	// A batch smaller than what is buffered takes what fits; the rest
	// follows in order.
	if _, err := raw.Write(framed(want...)); err != nil {
		t.Fatal(err)
	}
	n, err = e.ReadBatch(in[:30])
	if n != 30 || err != nil {
		t.Fatalf("ReadBatch of 30 = %d, %v", n, err)
	}
	n, err = e.ReadBatch(in)
	if n != 20 || err != nil || !bytes.Equal(in[0].Bytes(), want[30]) {
		t.Fatalf("ReadBatch of the rest = %d, %v", n, err)
	}
}

// A runt keeps the framing: it is skipped and counted, and the connection
// lives on.
func TestRuntIsSkippedAndCounted(t *testing.T) {
	raw, e := endpointOnSocketpair(t)
	good := frameBytes(60, 1)
	if _, err := raw.Write(framed([]byte{1, 2, 3, 4, 5}, good, make([]byte, 13), good)); err != nil {
		t.Fatal(err)
	}
	checkFrames(t, readAll(t, e, buffer.NewPool(), 2), [][]byte{good, good})
	if got := e.Stats().RxErrors.Load(); got != 2 {
		t.Errorf("RxErrors = %d, want 2", got)
	}
	if got := e.Stats().Disconnects.Load(); got != 0 || !e.Connected() {
		t.Errorf("Disconnects = %d, Connected %v: a runt dropped the connection", got, e.Connected())
	}
}

func TestBadLengthDropsTheConnection(t *testing.T) {
	tests := []struct {
		name   string
		prefix uint32
	}{
		{"zero", 0},
		{"one over the MTU's frame", uint32(link.MaxFrame(1500)) + 1},
		{"64 KiB", 65536},
		{"all ones", 0xffffffff},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, e := endpointOnSocketpair(t)
			good := frameBytes(60, 1)
			stream := framed(good)
			stream = binary.BigEndian.AppendUint32(stream, tt.prefix)
			stream = append(stream, bytes.Repeat([]byte{0xee}, 100)...)
			if _, err := raw.Write(stream); err != nil {
				t.Fatal(err)
			}
			checkFrames(t, readAll(t, e, buffer.NewPool(), 1), [][]byte{good})
			// The peer sees its connection closed.
			raw.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := raw.Read(make([]byte, 1)); err != io.EOF {
				t.Errorf("peer read after the bad length = %d, %v; want EOF", n, err)
			}
			s := e.Stats()
			if s.FramingErrors.Load() != 1 || s.Disconnects.Load() != 1 || s.RxFrames.Load() != 1 {
				t.Errorf("FramingErrors %d, Disconnects %d, RxFrames %d; want 1, 1, 1", s.FramingErrors.Load(), s.Disconnects.Load(), s.RxFrames.Load())
			}
			if e.Connected() {
				t.Error("still connected")
			}
			// Writes go nowhere now, counted.
			pool := buffer.NewPool()
			out := []*buffer.Packet{packet(pool, good)}
			if n, err := e.WriteBatch(out); n != 1 || err != nil || s.TxDropped.Load() != 1 {
				t.Errorf("WriteBatch after the drop = %d, %v, TxDropped %d; want 1, nil, 1", n, err, s.TxDropped.Load())
			}
			release(out)
		})
	}
}

// A peer that sends a bad length to a listening endpoint is dropped; the
// next peer is served.
func TestListenServesTheNextPeerAfterAFramingError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	e, err := Listen(path, Options{MAC: macA})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	bad, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	bad.Write([]byte{0, 0, 0, 0})
	good, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	f := frameBytes(100, 9)
	good.Write(framed(f))
	checkFrames(t, readAll(t, e, buffer.NewPool(), 1), [][]byte{f})
	s := e.Stats()
	if s.FramingErrors.Load() != 1 || s.Connects.Load() != 2 || s.Disconnects.Load() != 1 {
		t.Errorf("FramingErrors %d, Connects %d, Disconnects %d; want 1, 2, 1", s.FramingErrors.Load(), s.Connects.Load(), s.Disconnects.Load())
	}
}

// A VM that disconnects and connects again is served again, and a second
// peer waits while the first is served.
func TestListenTakesOnePeerAtATimeAndReconnects(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vm.sock")
	e, err := Listen(path, Options{MAC: macA})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	pool := buffer.NewPool()

	first, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	f1 := frameBytes(60, 1)
	first.Write(framed(f1))
	checkFrames(t, readAll(t, e, pool, 1), [][]byte{f1})

	// A second peer connects while the first is served: its frame waits.
	second, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	f2 := frameBytes(70, 2)
	second.Write(framed(f2))
	f3 := frameBytes(80, 3)
	first.Write(framed(f3))
	checkFrames(t, readAll(t, e, pool, 1), [][]byte{f3})

	// Writes go to the peer being served.
	out := []*buffer.Packet{packet(pool, frameBytes(90, 4))}
	defer release(out)
	e.WriteBatch(out)
	first.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 94)
	if _, err := io.ReadFull(first, got); err != nil || !bytes.Equal(got, framed(out[0].Bytes())) {
		t.Fatalf("first peer read %x, %v", got, err)
	}

	// The first leaves; the second is served, and then the first again.
	first.Close()
	checkFrames(t, readAll(t, e, pool, 1), [][]byte{f2})
	second.Close()
	again, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	f4 := frameBytes(100, 5)
	again.Write(framed(f4))
	checkFrames(t, readAll(t, e, pool, 1), [][]byte{f4})
	e.WriteBatch(out)
	again.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(again, got); err != nil || !bytes.Equal(got, framed(out[0].Bytes())) {
		t.Fatalf("reconnected peer read %x, %v", got, err)
	}
	s := e.Stats()
	if s.Connects.Load() != 3 || s.Disconnects.Load() != 2 || s.FramingErrors.Load() != 0 {
		t.Errorf("Connects %d, Disconnects %d, FramingErrors %d; want 3, 2, 0", s.Connects.Load(), s.Disconnects.Load(), s.FramingErrors.Load())
	}
	e.Close()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file left after Close: %v", err)
	}
}

func TestDialReachesAListener(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qemu.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	e, err := Dial(path, Options{MAC: macA})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	f := frameBytes(60, 1)
	peer.Write(framed(f))
	checkFrames(t, readAll(t, e, buffer.NewPool(), 1), [][]byte{f})

	if _, err := Dial(filepath.Join(t.TempDir(), "absent"), Options{}); err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("Dial of a missing socket: %v; want an error naming it", err)
	}
}

// Close wakes ReadBatch wherever it waits: for a peer, for a frame, or on
// a link whose one connection has ended.
func TestCloseUnblocksReaders(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T) *Endpoint
	}{
		{"listening for a peer", func(t *testing.T) *Endpoint {
			e, err := Listen(filepath.Join(t.TempDir(), "s"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			return e
		}},
		{"reading an idle peer", func(t *testing.T) *Endpoint {
			raw, cb := socketpair(t)
			t.Cleanup(func() { raw.Close() })
			e, err := New(cb, Options{})
			if err != nil {
				t.Fatal(err)
			}
			return e
		}},
		{"mid-frame", func(t *testing.T) *Endpoint {
			raw, cb := socketpair(t)
			t.Cleanup(func() { raw.Close() })
			raw.Write([]byte{0, 0, 0, 60, 1, 2, 3})
			e, err := New(cb, Options{})
			if err != nil {
				t.Fatal(err)
			}
			return e
		}},
		{"after the peer left", func(t *testing.T) *Endpoint {
			raw, cb := socketpair(t)
			raw.Close()
			e, err := New(cb, Options{})
			if err != nil {
				t.Fatal(err)
			}
			return e
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.setup(t)
			pool := buffer.NewPool()
			in := readBufs(pool, 1500, 4)
			defer release(in)
			done := make(chan error, 1)
			go func() {
				n, err := e.ReadBatch(in)
				if n != 0 {
					err = errors.New("read frames")
				}
				done <- err
			}()
			select {
			case err := <-done:
				t.Fatalf("ReadBatch returned %v before Close", err)
			case <-time.After(30 * time.Millisecond):
			}
			disconnects := e.Stats().Disconnects.Load()
			if err := e.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			select {
			case err := <-done:
				if !errors.Is(err, link.ErrClosed) {
					t.Errorf("ReadBatch after Close = %v, want link.ErrClosed", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("ReadBatch still blocked 5s after Close")
			}
			if got := e.Stats().Disconnects.Load(); got != disconnects {
				t.Errorf("Close counted as a disconnect: %d, was %d", got, disconnects)
			}
			if n, err := e.WriteBatch(in[:1]); n != 0 || !errors.Is(err, link.ErrClosed) {
				t.Errorf("WriteBatch after Close = %d, %v", n, err)
			}
			if err := e.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	}
}

// Close also wakes a writer stuck on a peer that does not read.
func TestCloseUnblocksAWriterOnAStuckPeer(t *testing.T) {
	raw, cb := socketpair(t)
	defer raw.Close()
	e, err := New(cb, Options{MAC: macA})
	if err != nil {
		t.Fatal(err)
	}
	pool := buffer.NewPool()
	out := []*buffer.Packet{packet(pool, frameBytes(1514, 1))}
	defer release(out)
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := e.WriteBatch(out); err != nil {
				done <- err
				return
			}
		}
	}()
	time.Sleep(50 * time.Millisecond) // the socket's buffers fill
	e.Close()
	select {
	case err := <-done:
		if !errors.Is(err, link.ErrClosed) {
			t.Errorf("WriteBatch = %v, want link.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WriteBatch still blocked 5s after Close")
	}
}

func TestWriteBatchCountsMalformedAndPeerlessFrames(t *testing.T) {
	e, err := Listen(filepath.Join(t.TempDir(), "s"), Options{MAC: macA})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	pool := buffer.NewPool()
	out := []*buffer.Packet{
		packet(pool, frameBytes(link.EthernetHeaderLen-1, 0)),
		packet(pool, frameBytes(60, 1)),
		packet(pool, frameBytes(link.MaxFrame(1500)+1, 2)),
	}
	defer release(out)
	if n, err := e.WriteBatch(out); n != 3 || err != nil {
		t.Fatalf("WriteBatch = %d, %v; want 3, nil", n, err)
	}
	s := e.Stats()
	if s.TxErrors.Load() != 2 || s.TxDropped.Load() != 1 || s.TxFrames.Load() != 0 {
		t.Errorf("TxErrors %d, TxDropped %d, TxFrames %d; want 2, 1, 0", s.TxErrors.Load(), s.TxDropped.Load(), s.TxFrames.Load())
	}
}

func TestReadBatchRefusesPacketsWithoutRoom(t *testing.T) {
	raw, cb := socketpair(t)
	defer raw.Close()
	e, err := New(cb, Options{MTU: 65520, MAC: macA})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	small := buffer.NewPool().Get(100)
	defer small.Release()
	if _, err := e.ReadBatch([]*buffer.Packet{small}); err == nil || !strings.Contains(err.Error(), "room") {
		t.Errorf("ReadBatch with a 100-byte packet: %v", err)
	}
}

func TestOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		mtu     int
		wantErr string
	}{
		{"defaults", Options{}, 1500, ""},
		{"passt's MTU", Options{MTU: 65520}, 65520, ""},
		{"largest", Options{MTU: MaxMTU}, MaxMTU, ""},
		{"IPv4's least", Options{MTU: MinMTU}, MinMTU, ""},
		{"below IPv4's least", Options{MTU: MinMTU - 1}, 0, "MTU 67 outside"},
		{"over a buffer", Options{MTU: MaxMTU + 1}, 0, "outside"},
		{"multicast MAC", Options{MAC: net.HardwareAddr{1, 0, 0x5e, 0, 0, 1}}, 0, "not a unicast"},
		{"short MAC", Options{MAC: net.HardwareAddr{2, 0}}, 0, "not a unicast"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ca, cb := net.Pipe()
			defer cb.Close()
			e, err := New(ca, tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New: %v; want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if e.MTU() != tt.mtu {
				t.Errorf("MTU %d, want %d", e.MTU(), tt.mtu)
			}
			if mac := e.MAC(); len(mac) != 6 || mac[0]&1 != 0 || (tt.opts.MAC == nil && mac[0]&2 == 0) {
				t.Errorf("MAC %v", mac)
			}
			if e.Capabilities() != (link.Capabilities{}) {
				t.Errorf("Capabilities %+v, want none", e.Capabilities())
			}
		})
	}
}

// TestNoAllocationPerFrame checks the steady state allocates nothing. It
// needs a build without -race: the race detector makes sync.Pool drop
// items at random.
func TestNoAllocationPerFrame(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector; run without -race")
	}
	ca, cb := socketpair(t)
	a, err := New(ca, Options{MAC: macA})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(cb, Options{MAC: macB})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pool := buffer.NewPool()
	out := make([]*buffer.Packet, 32)
	for i := range out {
		out[i] = packet(pool, frameBytes(1514, uint32(i)))
	}
	defer release(out)
	in := readBufs(pool, 1500, 32)
	defer release(in)
	once := func() {
		if n, err := a.WriteBatch(out); n != len(out) || err != nil {
			t.Fatalf("WriteBatch = %d, %v", n, err)
		}
		for got := 0; got < len(out); {
			n, err := b.ReadBatch(in[:len(out)-got])
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
	}
	once() // the first call sizes the writer's slices and warms the poller
	if allocs := testing.AllocsPerRun(200, once); allocs != 0 {
		t.Errorf("a write and read of 32 frames allocated %v times, want 0", allocs)
	}
}

// syscw returns the write system calls this process has made, from
// /proc/self/io (proc(5)): writev counts as one.
func syscw(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no syscw in /proc/self/io")
	return 0
}

// A batch goes out in one writev on a socket, not a write per frame (nor
// two, prefix and frame).
func TestWriteBatchIsOneSystemCall(t *testing.T) {
	raw, e := endpointOnSocketpair(t)
	pool := buffer.NewPool()
	out := make([]*buffer.Packet, 32)
	for i := range out {
		out[i] = packet(pool, frameBytes(1514, uint32(i)))
	}
	defer release(out)
	e.WriteBatch(out[:1]) // size the writer's slices
	io.ReadFull(raw, make([]byte, PrefixLen+1514))
	before := syscw(t)
	if n, err := e.WriteBatch(out); n != len(out) || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	// Other goroutines of the runtime may write too (rarely): allow one.
	calls := syscw(t) - before
	t.Logf("%d write calls", calls)
	if calls > 2 {
		t.Errorf("a batch of %d frames took %d write calls, want 1", len(out), calls)
	}
	got := make([]byte, len(out)*(PrefixLen+1514))
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(raw, got); err != nil {
		t.Fatal(err)
	}
}

// With EndWithPeer, the end of New's one connection is an error from
// ReadBatch, after the frames read before it; without, ReadBatch waits for
// Close.
func TestEndWithPeerReportsTheConnectionsEnd(t *testing.T) {
	raw, cb := socketpair(t)
	e, err := New(cb, Options{MAC: macA, EndWithPeer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	good := frameBytes(60, 1)
	if _, err := raw.Write(framed(good)); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	pool := buffer.NewPool()
	checkFrames(t, readAll(t, e, pool, 1), [][]byte{good})
	in := readBufs(pool, e.MTU(), 4)
	defer release(in)
	done := make(chan error, 1)
	go func() { _, err := e.ReadBatch(in); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrPeerGone) {
			t.Errorf("ReadBatch after the peer closed: %v, want ErrPeerGone", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadBatch still waiting after the peer closed")
	}
}
