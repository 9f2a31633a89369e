package pcap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"go.uber.org/goleak"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	macA = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xa}
	macB = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xb}
)

const mtu = 1500

// frame returns a test frame of the given length carrying seq.
func frame(pool *buffer.Pool, dst, src net.HardwareAddr, length int, seq uint32) *buffer.Packet {
	p := pool.Get(length)
	b := p.Bytes()
	clear(b)
	copy(b[0:6], dst)
	copy(b[6:12], src)
	binary.BigEndian.PutUint16(b[12:14], 0x88b5)
	binary.BigEndian.PutUint32(b[14:18], seq)
	return p
}

func release(pkts []*buffer.Packet) {
	for _, p := range pkts {
		p.Release()
	}
}

func checkPool(t *testing.T, pool *buffer.Pool) {
	t.Helper()
	if n := pool.Outstanding(); n != 0 {
		t.Errorf("%d packets outstanding", n)
	}
}

// record is a frame as a capture reader sees it.
type record struct {
	data []byte
	ci   gopacket.CaptureInfo
}

// readCapture parses a capture with gopacket's reader, the oracle, and
// checks its file header.
func readCapture(t *testing.T, r io.Reader) []record {
	t.Helper()
	pr, err := pcapgo.NewReader(r)
	if err != nil {
		t.Fatalf("pcapgo.NewReader: %v", err)
	}
	if pr.LinkType() != layers.LinkTypeEthernet || pr.Snaplen() != SnapLen || pr.Resolution() != gopacket.TimestampResolutionNanosecond {
		t.Errorf("capture header: link type %v, snaplen %d, resolution %v; want Ethernet, %d, nanoseconds", pr.LinkType(), pr.Snaplen(), pr.Resolution(), SnapLen)
	}
	var recs []record
	for {
		data, ci, err := pr.ReadPacketData()
		if err == io.EOF {
			return recs
		}
		if err != nil {
			t.Fatalf("record %d: %v", len(recs), err)
		}
		recs = append(recs, record{bytes.Clone(data), ci})
	}
}

func TestFileHeaderBytes(t *testing.T) {
	a, b := pipe.New(mtu, macA, macB)
	defer b.Close()
	var out bytes.Buffer
	e, err := New(a, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	want := []byte{
		0x4d, 0x3c, 0xb2, 0xa1, // magic, nanosecond variant, little-endian
		2, 0, 4, 0, // version 2.4
		0, 0, 0, 0, // thiszone
		0, 0, 0, 0, // sigfigs
		0, 0, 4, 0, // snaplen 262144
		1, 0, 0, 0, // LINKTYPE_ETHERNET
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("file header\n got % x\nwant % x", out.Bytes(), want)
	}
}

// TestRecordsEveryFrameBothWays writes and reads frames through a capture
// on a virtual clock and checks the file with gopacket: every frame, in
// each direction, whole, with its batch's timestamp to the nanosecond.
func TestRecordsEveryFrameBothWays(t *testing.T) {
	pool := buffer.NewPool()
	a, peer := pipe.New(mtu, macA, macB)
	clk := clock.NewVirtual(time.Unix(1700000000, 123456789))
	var out bytes.Buffer
	e, err := New(a, &out, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}

	type sent struct {
		data []byte
		at   time.Time
	}
	var want []sent
	// Written: a batch of three at t0.
	var batch []*buffer.Packet
	for i, length := range []int{60, 1514, 14} {
		batch = append(batch, frame(pool, macB, macA, length, uint32(i)))
	}
	if n, err := e.WriteBatch(batch); n != 3 || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	for _, p := range batch {
		want = append(want, sent{bytes.Clone(p.Bytes()), clk.Now()})
	}
	release(batch)

	// Read: two frames the peer sent, captured at t0+1.5s.
	clk.Advance(1500 * time.Millisecond)
	batch = batch[:0]
	for i, length := range []int{100, 200} {
		batch = append(batch, frame(pool, macA, macB, length, uint32(10+i)))
	}
	peer.WriteBatch(batch)
	in := []*buffer.Packet{pool.Get(link.MaxFrame(mtu)), pool.Get(link.MaxFrame(mtu)), pool.Get(link.MaxFrame(mtu))}
	if n, err := e.ReadBatch(in); n != 2 || err != nil {
		t.Fatalf("ReadBatch = %d, %v; want 2, nil", n, err)
	}
	for _, p := range batch {
		want = append(want, sent{bytes.Clone(p.Bytes()), clk.Now()})
	}
	release(batch)
	release(in)

	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	peer.Close()
	recs := readCapture(t, &out)
	if len(recs) != len(want) {
		t.Fatalf("capture holds %d records, want %d", len(recs), len(want))
	}
	for i, r := range recs {
		if !bytes.Equal(r.data, want[i].data) {
			t.Errorf("record %d: % x, want % x", i, r.data, want[i].data)
		}
		if r.ci.Length != len(want[i].data) || r.ci.CaptureLength != len(want[i].data) {
			t.Errorf("record %d: lengths %d/%d, want %d", i, r.ci.CaptureLength, r.ci.Length, len(want[i].data))
		}
		if !r.ci.Timestamp.Equal(want[i].at) {
			t.Errorf("record %d: timestamp %v, want %v", i, r.ci.Timestamp, want[i].at)
		}
	}
	if e.Stats().Frames.Load() != 5 || e.Stats().Bytes.Load() != 60+1514+14+100+200 {
		t.Errorf("Stats: %d frames, %d bytes; want 5, %d", e.Stats().Frames.Load(), e.Stats().Bytes.Load(), 60+1514+14+100+200)
	}
	checkPool(t, pool)
}

func TestOffloadMetadataIsNotRecorded(t *testing.T) {
	pool := buffer.NewPool()
	a, peer := pipe.New(mtu, macA, macB)
	defer peer.Close()
	var out bytes.Buffer
	e, _ := New(a, &out)
	p := frame(pool, macB, macA, 74, 1)
	p.Offload = buffer.Offload{Flags: buffer.NeedsCsum, GSOType: buffer.GSOTCPv4, HdrLen: 54, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}
	orig := bytes.Clone(p.Bytes())
	// As a wire would carry it: the partial checksum finished.
	want := bytes.Clone(orig)
	wire.FinishChecksum(want, 34, 16)
	e.WriteBatch([]*buffer.Packet{p})
	e.Close()
	recs := readCapture(t, &out)
	if len(recs) != 1 || !bytes.Equal(recs[0].data, want) {
		t.Errorf("capture of a frame with offload metadata: %d records, first % x; want the 74-byte Ethernet frame alone, checksum finished: % x", len(recs), recs[0].data, want)
	}
	if !bytes.Equal(p.Bytes(), orig) {
		t.Errorf("the frame written changed: % x, want % x", p.Bytes(), orig)
	}
	p.Release()
	checkPool(t, pool)
}

// TestConcurrentReadAndWriteRecordsStayWhole reads and writes from two
// goroutines: the records must not interleave.
func TestConcurrentReadAndWriteRecordsStayWhole(t *testing.T) {
	const each = 1000
	pool := buffer.NewPool()
	a, peer := pipe.New(mtu, macA, macB)
	var out bytes.Buffer
	e, _ := New(a, &out)

	var wg sync.WaitGroup
	wg.Add(3)
	send := func(w link.Endpoint, dst, src net.HardwareAddr, base uint32) {
		defer wg.Done()
		for i := uint32(0); i < each; i++ {
			p := frame(pool, dst, src, 60+int(i%1000), base+i)
			w.WriteBatch([]*buffer.Packet{p})
			p.Release()
			if i%100 == 99 {
				time.Sleep(time.Millisecond) // let the reader keep up with the pipe's queue
			}
		}
	}
	go send(e, macB, macA, 0)        // recorded on the way out
	go send(peer, macA, macB, 1<<20) // recorded on the way in
	var read int
	readDone := make(chan struct{})
	go func() { // the peer drains what e writes
		defer wg.Done()
		in := []*buffer.Packet{pool.Get(link.MaxFrame(mtu))}
		defer release(in)
		for {
			if _, err := peer.ReadBatch(in); err != nil {
				return
			}
		}
	}()
	go func() {
		defer close(readDone)
		in := make([]*buffer.Packet, 16)
		for i := range in {
			in[i] = pool.Get(link.MaxFrame(mtu))
		}
		defer release(in)
		for {
			n, err := e.ReadBatch(in)
			if err != nil {
				return
			}
			read += n
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for e.Stats().Frames.Load() < uint64(each+each-int(peer.Stats().TxDropped.Load())) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	e.Close()
	peer.Close()
	wg.Wait()
	<-readDone

	recs := readCapture(t, &out)
	if want := each + read; len(recs) != want {
		t.Errorf("capture holds %d records, want %d written + %d read", len(recs), each, read)
	}
	for i, r := range recs {
		seq := binary.BigEndian.Uint32(r.data[14:18])
		if want := 60 + int(seq&(1<<20-1)%1000); len(r.data) != want {
			t.Fatalf("record %d (seq %#x) is %d bytes, want %d: records interleaved", i, seq, len(r.data), want)
		}
	}
	checkPool(t, pool)
}

// failingWriter accepts limit bytes, then fails.
type failingWriter struct {
	limit int
	n     int
}

var errDiskFull = errors.New("disk full")

func (w *failingWriter) Write(b []byte) (int, error) {
	if w.n+len(b) > w.limit {
		return 0, errDiskFull
	}
	w.n += len(b)
	return len(b), nil
}

func TestWriteErrorStopsCaptureNotTraffic(t *testing.T) {
	pool := buffer.NewPool()
	a, peer := pipe.New(mtu, macA, macB)
	defer peer.Close()
	w := &failingWriter{limit: fileHeaderLen + recordHeaderLen + 60}
	e, err := New(a, w)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for i := range 3 {
		p := frame(pool, macB, macA, 60, uint32(i))
		if n, err := e.WriteBatch([]*buffer.Packet{p}); n != 1 || err != nil {
			t.Errorf("WriteBatch #%d = %d, %v; a capture failure must not fail the link", i, n, err)
		}
		p.Release()
	}
	if got := peer.Queued(); got != 3 {
		t.Errorf("peer received %d frames, want 3", got)
	}
	if err := e.Err(); !errors.Is(err, errDiskFull) || !strings.HasPrefix(err.Error(), "pcap: writing records") {
		t.Errorf("Err() = %v, want it to say pcap: writing records and wrap the cause", err)
	}
	if e.Stats().Frames.Load() != 1 || e.Stats().Errors.Load() != 1 {
		t.Errorf("Stats: %d frames, %d errors; want 1 frame then 1 error, after which capture stops", e.Stats().Frames.Load(), e.Stats().Errors.Load())
	}
	checkPool(t, pool)
}

func TestNewFailsWhenHeaderCannotBeWritten(t *testing.T) {
	a, b := pipe.New(mtu, macA, macB)
	defer a.Close()
	defer b.Close()
	_, err := New(a, &failingWriter{limit: 10})
	if !errors.Is(err, errDiskFull) || !strings.Contains(err.Error(), "pcap: writing file header") {
		t.Errorf("New on a failing writer: %v, want a wrapped error about the file header", err)
	}
}

func TestCreate(t *testing.T) {
	t.Run("writes a file tcpdump and gopacket read", func(t *testing.T) {
		pool := buffer.NewPool()
		a, peer := pipe.New(mtu, macA, macB)
		defer peer.Close()
		path := filepath.Join(t.TempDir(), "out.pcap")
		e, err := Create(a, path)
		if err != nil {
			t.Fatal(err)
		}
		const count = 7
		for i := range count {
			// An ARP request, so that tcpdump prints one line per frame.
			p := arpRequest(pool, macA, uint32(i))
			e.WriteBatch([]*buffer.Packet{p})
			p.Release()
		}
		if err := e.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := e.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if recs := readCapture(t, f); len(recs) != count {
			t.Errorf("gopacket reads %d records, want %d", len(recs), count)
		}

		tcpdump := findTcpdump(t)
		out, err := exec.Command(tcpdump, "-r", path, "-nn").CombinedOutput()
		if err != nil {
			t.Fatalf("tcpdump -r %s: %v\n%s", path, err, out)
		}
		var lines int
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "ARP, Request who-has 10.77.0.1 tell 10.77.0.") {
				lines++
			}
		}
		if lines != count {
			t.Errorf("tcpdump printed %d ARP requests, want %d:\n%s", lines, count, out)
		}
		checkPool(t, pool)
	})
	t.Run("error names the path", func(t *testing.T) {
		a, b := pipe.New(mtu, macA, macB)
		defer a.Close()
		defer b.Close()
		path := filepath.Join(t.TempDir(), "no-such-dir", "out.pcap")
		if _, err := Create(a, path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("Create(%s): %v, want an error naming the path", path, err)
		}
	})
	t.Run("Close closes the inner endpoint", func(t *testing.T) {
		a, peer := pipe.New(mtu, macA, macB)
		defer peer.Close()
		e, err := Create(a, filepath.Join(t.TempDir(), "out.pcap"))
		if err != nil {
			t.Fatal(err)
		}
		e.Close()
		pool := buffer.NewPool()
		p := pool.Get(link.MaxFrame(mtu))
		defer p.Release()
		if _, err := e.ReadBatch([]*buffer.Packet{p}); !errors.Is(err, link.ErrClosed) {
			t.Errorf("ReadBatch after Close: %v, want link.ErrClosed", err)
		}
	})
}

// findTcpdump returns tcpdump's path, skipping the test when it is absent
// (failing it under CI=true, where a skip would hide a broken feature).
func findTcpdump(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/sbin/tcpdump", "/usr/bin/tcpdump"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("tcpdump"); err == nil {
		return p
	}
	const reason = "pcap: tcpdump is not installed"
	if os.Getenv("CI") == "true" {
		t.Fatal(reason + "; CI=true: a skip would hide a broken feature")
	}
	t.Skip(reason)
	return ""
}

// arpRequest returns a broadcast ARP request (RFC 826) for 10.77.0.1 from
// 10.77.0.(2+i%200).
func arpRequest(pool *buffer.Pool, src net.HardwareAddr, i uint32) *buffer.Packet {
	p := pool.Get(42)
	b := p.Bytes()
	copy(b[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(b[6:12], src)
	binary.BigEndian.PutUint16(b[12:14], 0x0806)
	a := b[14:]
	binary.BigEndian.PutUint16(a[0:2], 1)
	binary.BigEndian.PutUint16(a[2:4], 0x0800)
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:8], 1)
	copy(a[8:14], src)
	copy(a[14:18], []byte{10, 77, 0, byte(2 + i%200)})
	clear(a[18:24])
	copy(a[24:28], []byte{10, 77, 0, 1})
	return p
}

// BenchmarkCapture records batches of 64 full-size frames written through a
// pipe; it reports allocations to show recording makes none per frame.
func BenchmarkCapture(b *testing.B) {
	pool := buffer.NewPool()
	a, peer := pipe.New(mtu, macA, macB)
	defer peer.Close()
	e, err := New(a, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	out := make([]*buffer.Packet, buffer.MaxBatch)
	for i := range out {
		out[i] = frame(pool, macB, macA, link.MaxFrame(mtu), uint32(i))
	}
	in := make([]*buffer.Packet, buffer.MaxBatch)
	for i := range in {
		in[i] = pool.Get(link.MaxFrame(mtu))
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(out) * link.MaxFrame(mtu)))
	for b.Loop() {
		e.WriteBatch(out)
		peer.ReadBatch(in)
	}
	release(out)
	release(in)
}
