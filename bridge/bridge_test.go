package bridge

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Frames the tests send carry etherTest; the markers that tell a test
// everything sent before has been forwarded carry etherMarker (both IEEE
// 802 local experimental EtherTypes).
const (
	etherTest   = 0x88b5
	etherMarker = 0x88b6
)

var broadcast = "ff:ff:ff:ff:ff:ff"

func hw(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// frame returns an Ethernet frame from src to dst carrying seq.
func frame(dst, src string, etherType uint16, seq uint32) []byte {
	f := make([]byte, 60)
	copy(f[0:6], hw(dst))
	copy(f[6:12], hw(src))
	binary.BigEndian.PutUint16(f[12:14], etherType)
	binary.BigEndian.PutUint32(f[14:18], seq)
	return f
}

// segment is the test's side of one bridge port: a pipe whose other end is
// the port, and a goroutine collecting what the bridge sends it.
type segment struct {
	index int
	ep    *pipe.Endpoint
	pool  *buffer.Pool
	got   chan []byte
	done  chan struct{}
}

// marker is the source address segment i's markers come from.
func marker(i int) string { return fmt.Sprintf("02:ee:00:00:00:%02x", i) }

func newSegment(t *testing.T, b *Bridge, i int) *segment {
	t.Helper()
	theirs, ours := pipe.New(1500, hw(fmt.Sprintf("02:bb:00:00:00:%02x", i)), hw(fmt.Sprintf("02:cc:00:00:00:%02x", i)))
	if err := b.AddPort(fmt.Sprintf("p%d", i), theirs); err != nil {
		t.Fatal(err)
	}
	s := &segment{index: i, ep: ours, pool: buffer.NewPool(), got: make(chan []byte, 4096), done: make(chan struct{})}
	go s.collect()
	t.Cleanup(func() { s.ep.Close(); <-s.done })
	return s
}

func (s *segment) collect() {
	defer close(s.done)
	in := make([]*buffer.Packet, 64)
	for i := range in {
		in[i] = s.pool.Get(link.MaxFrame(1500))
	}
	defer func() {
		for _, p := range in {
			p.Release()
		}
	}()
	for {
		n, err := s.ep.ReadBatch(in)
		if err != nil {
			return
		}
		for _, p := range in[:n] {
			s.got <- slices.Clone(p.Bytes())
		}
	}
}

func (s *segment) send(t *testing.T, frames ...[]byte) {
	t.Helper()
	pkts := make([]*buffer.Packet, len(frames))
	for i, f := range frames {
		pkts[i] = s.pool.Get(len(f))
		copy(pkts[i].Bytes(), f)
	}
	if _, err := s.ep.WriteBatch(pkts); err != nil {
		t.Fatal(err)
	}
	for _, p := range pkts {
		p.Release()
	}
}

// until returns the test frames s receives before the marker from
// segment from, in order.
func (s *segment) until(t *testing.T, from int) [][]byte {
	t.Helper()
	var out [][]byte
	timeout := time.After(5 * time.Second)
	for {
		select {
		case f := <-s.got:
			if binary.BigEndian.Uint16(f[12:14]) == etherMarker {
				if bytes.Equal(f[6:12], hw(marker(from))) {
					return out
				}
				continue
			}
			out = append(out, f)
		case <-timeout:
			t.Fatalf("p%d: no marker from p%d within 5 s", s.index, from)
		}
	}
}

// settle sends a broadcast marker from segment from, and returns what each
// other segment received before it: everything from's earlier frames
// brought them, since a port forwards in order.
func settle(t *testing.T, segs []*segment, from int) map[int][][]byte {
	t.Helper()
	segs[from].send(t, frame(broadcast, marker(from), etherMarker, 0))
	got := make(map[int][][]byte)
	for _, s := range segs {
		if s.index != from {
			if fs := s.until(t, from); len(fs) > 0 {
				got[s.index] = fs
			}
		}
	}
	return got
}

func newBridge(t *testing.T, cfg Config, ports int) (*Bridge, []*segment) {
	t.Helper()
	b := New(cfg)
	segs := make([]*segment, ports)
	for i := range segs {
		segs[i] = newSegment(t, b, i)
	}
	t.Cleanup(func() {
		b.Close()
		if n := b.pool.Outstanding(); n != 0 {
			t.Errorf("%d packets not released", n)
		}
	})
	return b, segs
}

// step is one frame sent into the bridge, or the clock moved on.
type step struct {
	advance  time.Duration
	from     int
	src, dst string
	want     []int // the ports the frame must come out of
}

var (
	stationA = "02:00:00:00:00:0a"
	stationB = "02:00:00:00:00:0b"
	stationC = "02:00:00:00:00:0c"
)

func TestForwarding(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
		// want are counters after the steps, the markers' own floods
		// aside.
		want func(b *Bridge) string
	}{
		{name: "unknown unicast floods to every other port",
			steps: []step{{from: 0, src: stationA, dst: stationB, want: []int{1, 2}}}},
		{name: "broadcast floods to every other port",
			steps: []step{{from: 1, src: stationA, dst: broadcast, want: []int{0, 2}}}},
		{name: "multicast floods to every other port",
			steps: []step{{from: 2, src: stationA, dst: "33:33:00:00:00:01", want: []int{0, 1}}}},
		{name: "a learnt station gets its frames alone",
			steps: []step{
				{from: 1, src: stationB, dst: broadcast, want: []int{0, 2}},
				{from: 0, src: stationA, dst: stationB, want: []int{1}},
				{from: 1, src: stationB, dst: stationA, want: []int{0}},
			}},
		{name: "a frame for a station on its own port is filtered",
			steps: []step{
				{from: 0, src: stationB, dst: broadcast, want: []int{1, 2}},
				{from: 0, src: stationA, dst: stationB},
			},
			want: func(b *Bridge) string {
				return fmt.Sprintf("filtered %d", b.Port("p0").stats.Filtered.Load())
			}},
		{name: "reserved addresses are not relayed",
			steps: []step{
				{from: 0, src: stationA, dst: "01:80:c2:00:00:00"}, // spanning tree
				{from: 0, src: stationA, dst: "01:80:c2:00:00:01"}, // pause
				{from: 0, src: stationA, dst: "01:80:c2:00:00:0e"}, // LLDP
				{from: 0, src: stationA, dst: "01:80:c2:00:00:10", want: []int{1, 2}},
			},
			want: func(b *Bridge) string {
				return fmt.Sprintf("reserved %d", b.Port("p0").stats.Reserved.Load())
			}},
		{name: "a group source address is dropped and not learnt",
			steps: []step{
				{from: 1, src: "01:00:5e:00:00:01", dst: broadcast},
				{from: 0, src: stationA, dst: "01:00:5e:00:00:01", want: []int{1, 2}},
			},
			want: func(b *Bridge) string {
				return fmt.Sprintf("bad source %d", b.Port("p1").stats.BadSource.Load())
			}},
		{name: "a station that moves is followed",
			steps: []step{
				{from: 1, src: stationB, dst: broadcast, want: []int{0, 2}},
				{from: 0, src: stationA, dst: stationB, want: []int{1}},
				{from: 2, src: stationB, dst: broadcast, want: []int{0, 1}},
				{from: 0, src: stationA, dst: stationB, want: []int{2}},
			},
			want: func(b *Bridge) string { return fmt.Sprintf("moved %d", b.stats.Moved.Load()) }},
		{name: "an entry ages out after the ageing time",
			steps: []step{
				{from: 1, src: stationB, dst: broadcast, want: []int{0, 2}},
				{advance: DefaultAgeingTime - time.Second},
				{from: 0, src: stationA, dst: stationB, want: []int{1}},
				{advance: time.Second},
				{from: 0, src: stationA, dst: stationB, want: []int{1, 2}},
			},
			want: func(b *Bridge) string { return fmt.Sprintf("aged %d", b.stats.Aged.Load()) }},
		{name: "a frame from a station refreshes its entry",
			steps: []step{
				{from: 1, src: stationB, dst: broadcast, want: []int{0, 2}},
				{advance: 200 * time.Second},
				{from: 1, src: stationB, dst: stationC, want: []int{0, 2}},
				{advance: 200 * time.Second},
				{from: 0, src: stationA, dst: stationB, want: []int{1}},
			},
			want: func(b *Bridge) string { return fmt.Sprintf("aged %d", b.stats.Aged.Load()) }},
	}
	wantCounters := map[string]string{
		"a frame for a station on its own port is filtered": "filtered 1",
		"reserved addresses are not relayed":                "reserved 3",
		"a group source address is dropped and not learnt":  "bad source 1",
		"a station that moves is followed":                  "moved 1",
		"an entry ages out after the ageing time":           "aged 1",
		"a frame from a station refreshes its entry":        "aged 0",
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vc := clock.NewVirtual(time.Unix(1e9, 0))
			b, segs := newBridge(t, Config{Clock: vc}, 3)
			for i, st := range tt.steps {
				if st.advance > 0 {
					vc.Advance(st.advance)
					continue
				}
				f := frame(st.dst, st.src, etherTest, uint32(i))
				segs[st.from].send(t, f)
				got := settle(t, segs, st.from)
				for _, s := range segs {
					want := slices.Contains(st.want, s.index)
					switch fs := got[s.index]; {
					case want && (len(fs) != 1 || !bytes.Equal(fs[0], f)):
						t.Errorf("step %d (%s to %s from p%d): p%d got %d frames, want the one sent", i, st.src, st.dst, st.from, s.index, len(fs))
					case !want && len(fs) != 0:
						t.Errorf("step %d (%s to %s from p%d): p%d got %d frames, want none", i, st.src, st.dst, st.from, s.index, len(fs))
					}
				}
			}
			if tt.want != nil {
				if got := tt.want(b); got != wantCounters[tt.name] {
					t.Errorf("counters: %s, want %s", got, wantCounters[tt.name])
				}
			}
			if stationsIn(b, "01:00:5e:00:00:01") {
				t.Error("a group address is in the table")
			}
		})
	}
}

func stationsIn(b *Bridge, addr string) bool {
	for _, s := range b.Table() {
		if s.MAC.String() == addr {
			return true
		}
	}
	return false
}

func TestTableHoldsAtMostTableSizeEvictingTheOldest(t *testing.T) {
	vc := clock.NewVirtual(time.Unix(1e9, 0))
	b, segs := newBridge(t, Config{Clock: vc, TableSize: 4}, 2)
	var frames [][]byte
	for i := range 6 {
		frames = append(frames, frame(broadcast, fmt.Sprintf("02:00:00:00:01:%02x", i), etherTest, uint32(i)))
	}
	// One batch would give every source the same time; one at a time
	// they age in order.
	for _, f := range frames {
		segs[0].send(t, f)
		settle(t, segs, 0)
		vc.Advance(time.Second)
	}
	// The marker of segment 0 is a station too: 7 sources in all.
	if got, want := b.stats.TableFull.Load(), uint64(3); got != want {
		t.Errorf("TableFull %d, want %d", got, want)
	}
	if got := b.stats.Entries.Load(); got != 4 {
		t.Errorf("Entries %d, want 4", got)
	}
	var got []string
	for _, s := range b.Table() {
		got = append(got, s.MAC.String())
	}
	want := []string{marker(0), "02:00:00:00:01:05", "02:00:00:00:01:04", "02:00:00:00:01:03"}
	if !slices.Equal(got, want) {
		t.Errorf("table %v, want %v (the most recently seen first)", got, want)
	}
}

func TestTableShowsStationsWithPortAndAge(t *testing.T) {
	vc := clock.NewVirtual(time.Unix(1e9, 0))
	b, segs := newBridge(t, Config{Clock: vc, AgeingTime: time.Minute}, 2)
	segs[1].send(t, frame(broadcast, stationB, etherTest, 1))
	settle(t, segs, 1)
	vc.Advance(10 * time.Second)
	tbl := b.Table()
	if len(tbl) != 2 || tbl[0].MAC.String() != stationB && tbl[1].MAC.String() != stationB {
		t.Fatalf("table %v, want %s and p1's marker", tbl, stationB)
	}
	for _, s := range tbl {
		if s.Port != "p1" || s.Age != 10*time.Second {
			t.Errorf("station %v on %s aged %v, want p1 and 10s", s.MAC, s.Port, s.Age)
		}
	}
	vc.Advance(time.Minute)
	if tbl := b.Table(); len(tbl) != 0 || b.stats.Aged.Load() != 2 {
		t.Errorf("after the ageing time: table %v, Aged %d; want empty and 2", tbl, b.stats.Aged.Load())
	}
}

// failingEndpoint wraps a port's endpoint with failures on demand.
type failingEndpoint struct {
	link.Endpoint
	failWrite chan struct{} // closed: WriteBatch fails
	block     chan struct{} // until closed, WriteBatch waits
}

var errBroken = errors.New("the device is broken")

func (e *failingEndpoint) WriteBatch(pkts []*buffer.Packet) (int, error) {
	if e.block != nil {
		<-e.block
	}
	select {
	case <-e.failWrite:
		return 0, errBroken
	default:
	}
	return e.Endpoint.WriteBatch(pkts)
}

func TestAFailedPortIsRemovedAndTheOthersForward(t *testing.T) {
	tests := []struct {
		name string
		// breakPort breaks port 2's endpoint, or the pipe behind it.
		breakPort func(ep *failingEndpoint)
	}{
		{"read fails", func(ep *failingEndpoint) { ep.Endpoint.Close() }},
		{"write fails", func(ep *failingEndpoint) { close(ep.failWrite) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, segs := newBridge(t, Config{}, 2)
			theirs, ours := pipe.New(1500, hw("02:bb:00:00:00:02"), hw("02:cc:00:00:00:02"))
			defer ours.Close()
			broken := &failingEndpoint{Endpoint: theirs, failWrite: make(chan struct{})}
			if err := b.AddPort("p2", broken); err != nil {
				t.Fatal(err)
			}
			p2 := b.Port("p2")
			// p2 has a station, so that its removal has an entry to
			// flush; its frame is to LLDP's address, which the bridge
			// learns from and relays nowhere.
			pk := packetOf(segs[0].pool, frame("01:80:c2:00:00:0e", stationC, etherTest, 0))
			ours.WriteBatch([]*buffer.Packet{pk})
			pk.Release()
			waitFor(t, "p2's station learnt", func() bool { return stationsIn(b, stationC) })
			tt.breakPort(broken)
			// A write fails on the next frame for p2.
			segs[0].send(t, frame(broadcast, stationA, etherTest, 1))
			select {
			case <-p2.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the broken port is still in the bridge")
			}
			if b.Port("p2") != nil || b.stats.PortsLost.Load() != 1 {
				t.Errorf("port p2 %v, PortsLost %d; want gone and 1", b.Port("p2"), b.stats.PortsLost.Load())
			}
			if stationsIn(b, stationC) {
				t.Error("the station of the removed port is still in the table")
			}
			settle(t, segs, 0)
			segs[1].send(t, frame(stationA, stationB, etherTest, 2))
			if got := settle(t, segs, 1); len(got[0]) != 1 {
				t.Errorf("p0 got %d frames from p1 after p2 failed, want 1", len(got[0]))
			}
		})
	}
}

func packetOf(pool *buffer.Pool, f []byte) *buffer.Packet {
	p := pool.Get(len(f))
	copy(p.Bytes(), f)
	return p
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestASlowPortDropsWithoutStallingTheOthers(t *testing.T) {
	const queueLen = 128
	b, segs := newBridge(t, Config{QueueLen: queueLen}, 2)
	theirs, ours := pipe.New(1500, hw("02:bb:00:00:00:02"), hw("02:cc:00:00:00:02"))
	defer ours.Close()
	stuck := &failingEndpoint{Endpoint: theirs, failWrite: make(chan struct{}), block: make(chan struct{})}
	var unblock sync.Once
	defer unblock.Do(func() { close(stuck.block) })
	if err := b.AddPort("p2", stuck); err != nil {
		t.Fatal(err)
	}
	// Rounds of fewer frames than a pipe or p1's queue holds, with room
	// for the last batch of the round before (counted until its write
	// returns, which may be after p1's stack has it), so that p1 loses
	// none whatever the scheduling; many more than p2's queue in all.
	const rounds, perRound = 10, 40
	for r := range rounds {
		for i := range perRound {
			segs[0].send(t, frame(broadcast, stationA, etherTest, uint32(r*perRound+i)))
		}
		if got := settle(t, segs[:2], 0); len(got[1]) != perRound {
			t.Fatalf("round %d: p1 got %d frames while p2 was stuck, want %d", r, len(got[1]), perRound)
		}
	}
	const all = rounds * (perRound + 1) // the markers too
	p2 := b.Port("p2")
	// The queue counts the batch the writer is stuck on: it takes
	// queueLen frames in all. (p0's reader may queue the last frames for
	// p2 after p1's.)
	waitFor(t, fmt.Sprintf("p2 dropping all but its queue of %d", queueLen), func() bool {
		return p2.stats.QueueFull.Load() == all-queueLen
	})
	dropped := p2.stats.QueueFull.Load()
	unblock.Do(func() { close(stuck.block) })
	waitFor(t, "p2's queue emptied", func() bool { return p2.stats.Queued.Load() == 0 })
	if got := p2.stats.TxFrames.Load() + dropped; got != all {
		t.Errorf("p2 sent %d and dropped %d frames, want %d in all", p2.stats.TxFrames.Load(), dropped, all)
	}
}

func TestRemovePortForgetsItsStations(t *testing.T) {
	b, segs := newBridge(t, Config{}, 3)
	segs[2].send(t, frame(broadcast, stationC, etherTest, 0))
	settle(t, segs, 2)
	if err := b.RemovePort("p2"); err != nil {
		t.Fatal(err)
	}
	if stationsIn(b, stationC) || b.stats.PortsLost.Load() != 0 {
		t.Errorf("after RemovePort: station still in the table, or PortsLost %d", b.stats.PortsLost.Load())
	}
	if err := b.RemovePort("p2"); err == nil {
		t.Error("removing p2 twice: no error")
	}
	segs[0].send(t, frame(stationC, stationA, etherTest, 1))
	if got := settle(t, segs[:2], 0); len(got[1]) != 1 {
		t.Errorf("frame for the removed port's station: p1 got %d, want it flooded there", len(got[1]))
	}
}

func TestAddPortRefusesDuplicatesAndAfterClose(t *testing.T) {
	b := New(Config{})
	a1, _ := pipe.New(1500, hw(stationA), hw(stationB))
	a2, _ := pipe.New(1500, hw(stationA), hw(stationB))
	a3, _ := pipe.New(1500, hw(stationA), hw(stationB))
	if err := b.AddPort("x", a1); err != nil {
		t.Fatal(err)
	}
	if err := b.AddPort("x", a2); err == nil {
		t.Error("second port x: no error")
	}
	b.Close()
	if err := b.AddPort("y", a3); !errors.Is(err, ErrClosed) {
		t.Errorf("AddPort after Close: %v, want ErrClosed", err)
	}
	if len(b.Ports()) != 0 {
		t.Errorf("ports after Close: %v", b.Ports())
	}
}

// offloadEndpoint is a pipe end that claims offloads.
type offloadEndpoint struct {
	*pipe.Endpoint
	caps link.Capabilities
}

func (e offloadEndpoint) Capabilities() link.Capabilities { return e.caps }

func TestOffloadsAreDoneForPortsWithout(t *testing.T) {
	// A UDP datagram over IPv4 with a partial checksum: the field holds
	// the pseudo-header's sum, as a stack with checksum offload leaves it.
	src, dst := [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}
	payload := []byte("partial checksum")
	udpLen := 8 + len(payload)
	f := make([]byte, 14+20+udpLen)
	copy(f[0:6], hw(stationB))
	copy(f[6:12], hw(stationA))
	binary.BigEndian.PutUint16(f[12:14], 0x0800)
	ipHdr := f[14:34]
	ipHdr[0] = 0x45
	binary.BigEndian.PutUint16(ipHdr[2:], uint16(20+udpLen))
	ipHdr[8], ipHdr[9] = 64, 17
	copy(ipHdr[12:16], src[:])
	copy(ipHdr[16:20], dst[:])
	udp := f[34:]
	binary.BigEndian.PutUint16(udp[0:], 1000)
	binary.BigEndian.PutUint16(udp[2:], 2000)
	binary.BigEndian.PutUint16(udp[4:], uint16(udpLen))
	copy(udp[8:], payload)
	var pseudo []byte
	pseudo = append(pseudo, src[:]...)
	pseudo = append(pseudo, dst[:]...)
	pseudo = append(pseudo, 0, 17, byte(udpLen>>8), byte(udpLen))
	want := wire.Checksum(append(pseudo, udp...), 0)
	binary.BigEndian.PutUint16(udp[6:], wire.Fold(wire.Sum(pseudo, 0)))

	partial := buffer.Offload{Flags: buffer.NeedsCsum, CsumStart: 34, CsumOffset: 6}
	tests := []struct {
		name    string
		caps    link.Capabilities
		offload buffer.Offload
		len     int
		fits    bool
		csum    uint16 // the checksum field after, for a frame that fits
		kept    buffer.Offload
	}{
		{"partial checksum completed for a port without checksum offload", link.Capabilities{}, partial, len(f), true, want, buffer.Offload{}},
		{"partial checksum passed to a port with checksum offload", link.Capabilities{TxChecksum: true}, partial, len(f), true, binary.BigEndian.Uint16(udp[6:]), partial},
		{"checksum place outside the frame", link.Capabilities{}, buffer.Offload{Flags: buffer.NeedsCsum, CsumStart: 34, CsumOffset: 200}, len(f), false, 0, buffer.Offload{}},
		{"super-segment to a port without TSO", link.Capabilities{}, buffer.Offload{GSOType: buffer.GSOTCPv4, GSOSize: 1000}, len(f), false, 0, buffer.Offload{}},
		{"verified checksum forgotten on a port without offloads", link.Capabilities{}, buffer.Offload{Flags: buffer.DataValid}, len(f), true, binary.BigEndian.Uint16(udp[6:]), buffer.Offload{}},
		{"frame over the MTU", link.Capabilities{}, buffer.Offload{}, link.MaxFrame(1500) + 1, false, 0, buffer.Offload{}},
	}
	pool := buffer.NewPool()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, _ := pipe.New(1500, hw(stationA), hw(stationB))
			p := newPort(New(Config{}), "p", offloadEndpoint{a, tt.caps})
			pk := pool.Get(tt.len)
			defer pk.Release()
			copy(pk.Bytes(), f)
			pk.Offload = tt.offload
			if got := p.fit(pk); got != tt.fits {
				t.Fatalf("fit = %v, want %v", got, tt.fits)
			}
			if !tt.fits {
				if p.stats.OffloadDropped.Load()+p.stats.TooBig.Load() != 1 {
					t.Error("drop not counted")
				}
				return
			}
			if got := binary.BigEndian.Uint16(pk.Bytes()[34+6:]); got != tt.csum {
				t.Errorf("checksum field %#04x, want %#04x", got, tt.csum)
			}
			if pk.Offload != tt.kept {
				t.Errorf("offload %+v, want %+v", pk.Offload, tt.kept)
			}
		})
	}
}

// A port whose reader and writer race with removal and closing leaves no
// goroutine and no packet behind (goleak and the pool check in newBridge).
func TestCloseWhileForwarding(t *testing.T) {
	b, segs := newBridge(t, Config{}, 3)
	var wg sync.WaitGroup
	for _, s := range segs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				s.send(t, frame(broadcast, marker(s.index+10), etherTest, uint32(i)))
			}
		}()
	}
	wg.Wait()
	b.Close()
}
