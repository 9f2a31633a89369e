package reassembly_test

import (
	"testing"
	"time"

	"github.com/gonetstack/gonet/budget"
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/reassembly"
	"github.com/gonetstack/gonet/stats"
)

// A toy family: a 2-byte header (the key) before each fragment's data,
// rebuilt as a 2-byte length.
type family struct {
	whole   map[int][]byte
	timeout []int
}

func (family) Rebuild(b []byte, head int, _ []byte) { b[0], b[1] = byte(len(b)>>8), byte(len(b)) }

func (f *family) Reassembled(k int, dg *buffer.Packet, _ string) {
	f.whole[k] = append([]byte(nil), dg.Bytes()...)
	dg.Release()
}

func (f *family) TimedOut(k int, first *buffer.Packet) {
	f.timeout = append(f.timeout, k)
	if first != nil {
		first.Release()
	}
}

type counters struct {
	Reqds, OKs, Fails, Timeouts, Overlaps, Oversize, Malformed, Duplicates, Limit, Evictions stats.Counter
	Active, Bytes                                                                            stats.Gauge
}

func setup(max int) (*reassembly.Reassembler[int], *family, *counters, *env.Env, *clock.Virtual) {
	clk := clock.NewVirtual(time.Unix(0, 0))
	e := &env.Env{Clock: clk, Rand: env.NewRand(nil), Pool: buffer.NewPool(), Budget: budget.New(1 << 20)}
	c := &counters{}
	f := &family{whole: map[int][]byte{}}
	r := reassembly.New(reassembly.Config{Timeout: time.Second, MaxDatagrams: max, MaxBytes: 1 << 16, MaxLen: 1000}, e,
		reassembly.Counters{Reqds: &c.Reqds, OKs: &c.OKs, Fails: &c.Fails, Timeouts: &c.Timeouts, Overlaps: &c.Overlaps,
			Oversize: &c.Oversize, Malformed: &c.Malformed, Duplicates: &c.Duplicates, Limit: &c.Limit,
			Evictions: &c.Evictions, Active: &c.Active, Bytes: &c.Bytes}, f)
	return r, f, c, e, clk
}

func frag(e *env.Env, key, off int, more bool, data string) reassembly.Fragment {
	pk := e.Pool.Get(2 + len(data))
	b := pk.Bytes()
	b[0], b[1] = byte(key>>8), byte(key)
	copy(b[2:], data)
	return reassembly.Fragment{Pkt: pk, Head: 2, Data: 2, Offset: off, More: more}
}

func TestWholeDatagramGoesToTheFamily(t *testing.T) {
	r, f, c, e, _ := setup(4)
	r.Add(7, frag(e, 7, 8, false, "world"))
	r.Add(7, frag(e, 7, 0, true, "hello, w"))
	r.Settle(<-r.Done())
	if got := string(f.whole[7]); got != "\x00\x0fhello, wworld" {
		t.Errorf("whole datagram %q", got)
	}
	r.Stop()
	if c.OKs.Load() != 1 || c.Reqds.Load() != 2 || c.Active.Load() != 0 || c.Bytes.Load() != 0 {
		t.Errorf("OKs %d Reqds %d Active %d Bytes %d", c.OKs.Load(), c.Reqds.Load(), c.Active.Load(), c.Bytes.Load())
	}
	if n := e.Pool.Outstanding(); n != 0 || e.Budget.Used() != 0 {
		t.Errorf("%d packets, %d bytes of budget held", n, e.Budget.Used())
	}
}

// A burst of new datagrams past MaxDatagrams evicts without ever refusing
// or blocking the dealer, even when the evicted have not reported yet.
func TestBurstEvictsWithoutRefusing(t *testing.T) {
	r, _, c, e, _ := setup(2)
	for k := range 50 {
		r.Add(k, frag(e, k, 0, true, "12345678"))
	}
	if c.Evictions.Load() != 48 || c.Limit.Load() != 0 || c.Active.Load() != 2 {
		t.Errorf("Evictions %d Limit %d Active %d, want 48, 0, 2", c.Evictions.Load(), c.Limit.Load(), c.Active.Load())
	}
	r.Stop()
	if n := e.Pool.Outstanding(); n != 0 || e.Budget.Used() != 0 || c.Bytes.Load() != 0 {
		t.Errorf("after Stop: %d packets, %d bytes of budget, gauge %d", n, e.Budget.Used(), c.Bytes.Load())
	}
}

func TestTimeoutHandsTheFirstFragmentOnly(t *testing.T) {
	r, f, c, e, clk := setup(4)
	r.Add(1, frag(e, 1, 8, false, "x"))
	r.Add(2, frag(e, 2, 0, true, "12345678"))
	clk.WaitPending(2)
	clk.Advance(time.Second)
	r.Settle(<-r.Done())
	r.Settle(<-r.Done())
	if len(f.timeout) != 2 || c.Timeouts.Load() != 2 || c.Fails.Load() != 2 {
		t.Errorf("timeouts %v, counted %d, fails %d", f.timeout, c.Timeouts.Load(), c.Fails.Load())
	}
	r.Stop()
	if n := e.Pool.Outstanding(); n != 0 {
		t.Errorf("%d packets held", n)
	}
}
