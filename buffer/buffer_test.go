package buffer_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gonetstack/gonet/buffer"
)

// panics runs f and returns the panic message, or "" when it did not panic.
func panics(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg, _ = r.(string)
			if msg == "" {
				msg = "non-string panic"
			}
		}
	}()
	f()
	return ""
}

func TestGetGivesTheLengthAndHeadroom(t *testing.T) {
	p := buffer.NewPool()
	// The size classes are 2048, 16384 and MaxSize+Headroom bytes.
	tests := []struct {
		n       int
		wantCap int
	}{
		{0, 2048 - buffer.Headroom},
		{1514, 2048 - buffer.Headroom},
		{2048 - buffer.Headroom, 2048 - buffer.Headroom},
		{2048 - buffer.Headroom + 1, 16384 - buffer.Headroom},
		{9014, 16384 - buffer.Headroom},
		{16384 - buffer.Headroom + 1, buffer.MaxSize},
		{buffer.MaxSize, buffer.MaxSize},
	}
	for _, tt := range tests {
		pk := p.Get(tt.n)
		if pk.Len() != tt.n || len(pk.Bytes()) != tt.n || pk.Headroom() != buffer.Headroom || pk.Cap() != tt.wantCap {
			t.Errorf("Get(%d): Len %d Headroom %d Cap %d, want %d %d %d", tt.n, pk.Len(), pk.Headroom(), pk.Cap(), tt.n, buffer.Headroom, tt.wantCap)
		}
		if pk.Offload != (buffer.Offload{}) {
			t.Errorf("Get(%d): offload %+v", tt.n, pk.Offload)
		}
		pk.Release()
	}
	if msg := panics(func() { p.Get(buffer.MaxSize + 1) }); !strings.Contains(msg, "exceeds") {
		t.Errorf("Get(MaxSize+1) panic = %q", msg)
	}
	if p.Outstanding() != 0 {
		t.Errorf("Outstanding = %d", p.Outstanding())
	}
}

func TestOutstandingCountsLentPackets(t *testing.T) {
	p := buffer.NewPool()
	a, b := p.Get(10), p.Get(5000)
	c := p.Clone(a)
	if got := p.Outstanding(); got != 3 {
		t.Fatalf("Outstanding = %d, want 3", got)
	}
	other := buffer.NewPool()
	d := other.Clone(b) // counted by the pool it came from
	if p.Outstanding() != 3 || other.Outstanding() != 1 {
		t.Errorf("Outstanding = %d and %d, want 3 and 1", p.Outstanding(), other.Outstanding())
	}
	for _, pk := range []*buffer.Packet{a, b, c} {
		pk.Release()
	}
	d.Release()
	if p.Outstanding() != 0 || other.Outstanding() != 0 {
		t.Errorf("Outstanding = %d and %d after releasing all", p.Outstanding(), other.Outstanding())
	}
}

func TestReleaseTwicePanics(t *testing.T) {
	p := buffer.NewPool()
	pk := p.Get(1)
	pk.Release()
	if msg := panics(pk.Release); !strings.Contains(msg, "twice") {
		t.Errorf("second Release panic = %q", msg)
	}
	if p.Outstanding() != 0 {
		t.Errorf("Outstanding = %d: the second Release counted", p.Outstanding())
	}
}

func TestPrependTrimFrontSetLenAndTheirBounds(t *testing.T) {
	p := buffer.NewPool()
	tests := []struct {
		name      string
		op        func(pk *buffer.Packet)
		wantPanic bool
		wantLen   int
		wantHead  int
	}{
		{"prepend a header", func(pk *buffer.Packet) { pk.Prepend(14) }, false, 114, buffer.Headroom - 14},
		{"prepend all the headroom", func(pk *buffer.Packet) { pk.Prepend(buffer.Headroom) }, false, 100 + buffer.Headroom, 0},
		{"prepend beyond the headroom", func(pk *buffer.Packet) { pk.Prepend(buffer.Headroom + 1) }, true, 0, 0},
		{"trim a header", func(pk *buffer.Packet) { pk.TrimFront(20) }, false, 80, buffer.Headroom + 20},
		{"trim everything", func(pk *buffer.Packet) { pk.TrimFront(100) }, false, 0, buffer.Headroom + 100},
		{"trim beyond the data", func(pk *buffer.Packet) { pk.TrimFront(101) }, true, 0, 0},
		{"trim then prepend it back", func(pk *buffer.Packet) { pk.TrimFront(20); pk.Prepend(20) }, false, 100, buffer.Headroom},
		{"shorten", func(pk *buffer.Packet) { pk.SetLen(60) }, false, 60, buffer.Headroom},
		{"to zero", func(pk *buffer.Packet) { pk.SetLen(0) }, false, 0, buffer.Headroom},
		{"grow into capacity", func(pk *buffer.Packet) { pk.SetLen(pk.Cap()) }, false, 2048 - buffer.Headroom, buffer.Headroom},
		{"beyond capacity", func(pk *buffer.Packet) { pk.SetLen(pk.Cap() + 1) }, true, 0, 0},
		{"negative", func(pk *buffer.Packet) { pk.SetLen(-1) }, true, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pk := p.Get(100)
			defer pk.Release()
			before := pk.Len()
			msg := panics(func() { tt.op(pk) })
			if (msg != "") != tt.wantPanic {
				t.Fatalf("panic %q, want panic %v", msg, tt.wantPanic)
			}
			if tt.wantPanic {
				if pk.Len() != before || pk.Headroom() != buffer.Headroom {
					t.Errorf("a refused operation changed the packet: Len %d Headroom %d", pk.Len(), pk.Headroom())
				}
				return
			}
			if pk.Len() != tt.wantLen || pk.Headroom() != tt.wantHead {
				t.Errorf("Len %d Headroom %d, want %d %d", pk.Len(), pk.Headroom(), tt.wantLen, tt.wantHead)
			}
		})
	}
}

func TestPrependKeepsThePayloadInPlace(t *testing.T) {
	p := buffer.NewPool()
	pk := p.Get(5)
	defer pk.Release()
	copy(pk.Bytes(), "hello")
	h := pk.Prepend(3)
	if len(h) != 3 {
		t.Fatalf("Prepend returned %d bytes", len(h))
	}
	copy(h, "hdr")
	if got := string(pk.Bytes()); got != "hdrhello" {
		t.Errorf("data %q, want \"hdrhello\"", got)
	}
	pk.TrimFront(3)
	if got := string(pk.Bytes()); got != "hello" {
		t.Errorf("after TrimFront %q", got)
	}
}

func TestResetRestoresHeadroomAndClearsOffload(t *testing.T) {
	p := buffer.NewPool()
	pk := p.Get(100)
	defer pk.Release()
	pk.Prepend(50)
	pk.Offload = buffer.Offload{Flags: buffer.NeedsCsum, GSOType: buffer.GSOTCPv4, GSOSize: 1448}
	pk.Reset()
	if pk.Len() != 0 || pk.Headroom() != buffer.Headroom || pk.Offload != (buffer.Offload{}) {
		t.Errorf("after Reset: Len %d Headroom %d Offload %+v", pk.Len(), pk.Headroom(), pk.Offload)
	}
}

func TestCloneIsAnIndependentCopy(t *testing.T) {
	p := buffer.NewPool()
	pk := p.Get(4)
	copy(pk.Bytes(), "abcd")
	pk.TrimFront(1)
	pk.Offload = buffer.Offload{Flags: buffer.DataValid, CsumStart: 34, CsumOffset: 6}
	c := p.Clone(pk)
	if !bytes.Equal(c.Bytes(), []byte("bcd")) || c.Offload != pk.Offload || c.Headroom() != buffer.Headroom {
		t.Errorf("clone %q offload %+v headroom %d", c.Bytes(), c.Offload, c.Headroom())
	}
	c.Bytes()[0] = 'X'
	if pk.Bytes()[0] != 'b' {
		t.Error("the clone shares the original's bytes")
	}
	pk.Release()
	c.Release()
}

func TestReusedPacketsComeBackClean(t *testing.T) {
	p := buffer.NewPool()
	for range 100 {
		pk := p.Get(64)
		if pk.Headroom() != buffer.Headroom || pk.Offload != (buffer.Offload{}) || pk.Len() != 64 {
			t.Fatalf("reused packet: Headroom %d Len %d Offload %+v", pk.Headroom(), pk.Len(), pk.Offload)
		}
		pk.Prepend(30)
		pk.Offload.Flags = buffer.NeedsCsum
		pk.Release()
	}
}

func TestBatch(t *testing.T) {
	b := buffer.GetBatch()
	if len(b.Pkts) != 0 || b.Full() {
		t.Fatalf("new batch holds %d packets", len(b.Pkts))
	}
	p := buffer.NewPool()
	for i := range buffer.MaxBatch {
		if b.Full() {
			t.Fatalf("full after %d packets", i)
		}
		b.Pkts = append(b.Pkts, p.Get(1))
	}
	if !b.Full() {
		t.Error("not full at MaxBatch")
	}
	for _, pk := range b.Pkts {
		pk.Release()
	}
	b.Put()
	if b := buffer.GetBatch(); len(b.Pkts) != 0 {
		t.Errorf("a batch came back holding %d packets", len(b.Pkts))
	}
}

// lender counts the loans given back to it.
type lender struct{ returned int }

func (l *lender) Return() { l.returned++ }

// A packet's loans stand for the end of its data: they reach a gathering
// writer as pieces (Slices), are copied into place for anyone who reads the
// data (Bytes) or changes its length, and go back to their lender once,
// whichever way the packet's life ends.
func TestLoansAreTheDataTailUntilRead(t *testing.T) {
	tests := []struct {
		name string
		use  func(pk *buffer.Packet) // after the loans, before Release
		// copied, when set, is the packet's data after the use: the loans
		// were copied into its own buffer and returned before Release.
		copied string
	}{
		{name: "released unread", use: func(*buffer.Packet) {}},
		{name: "a header prepended", use: func(pk *buffer.Packet) { copy(pk.Prepend(2), "hh") }},
		{name: "the head trimmed", use: func(pk *buffer.Packet) { pk.TrimFront(2) }},
		{name: "read", use: func(pk *buffer.Packet) { pk.Bytes() }, copied: "headabcdef"},
		{name: "trimmed into the loans", use: func(pk *buffer.Packet) { pk.TrimFront(5) }, copied: "bcdef"},
		{name: "its length set", use: func(pk *buffer.Packet) { pk.SetLen(pk.Len()) }, copied: "headabcdef"},
		{name: "cloned", use: func(pk *buffer.Packet) { buffer.NewPool().Clone(pk).Release() }, copied: "headabcdef"},
		{name: "reset", use: func(pk *buffer.Packet) { pk.Reset() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := buffer.NewPool()
			pk := pool.Get(4 + 6)
			copy(pk.Bytes(), "head")
			var l lender
			pk.Borrow([]byte("abc"), &l)
			pk.Borrow([]byte("def"), &l)
			if pk.Borrowed() != 6 || string(pk.Head()) != "head" {
				t.Fatalf("Borrowed() = %d, Head() = %q; want 6, \"head\"", pk.Borrowed(), pk.Head())
			}
			if got := bytes.Join(pk.Slices(nil), []byte("|")); string(got) != "head|abc|def" {
				t.Fatalf("Slices = %q, want head|abc|def", got)
			}
			tt.use(pk)
			if tt.copied != "" {
				if l.returned != 2 || pk.Borrowed() != 0 {
					t.Fatalf("after the use: %d loans returned, %d bytes borrowed; want 2, 0", l.returned, pk.Borrowed())
				}
				if got := string(pk.Bytes()); got != tt.copied {
					t.Fatalf("data %q, want %q", got, tt.copied)
				}
			}
			pk.Release()
			if l.returned != 2 {
				t.Fatalf("%d loans returned, want 2", l.returned)
			}
		})
	}
}

func TestBorrowBeyondTheDataPanics(t *testing.T) {
	pk := buffer.NewPool().Get(4)
	defer pk.Release()
	var l lender
	pk.Borrow([]byte("ab"), &l)
	if msg := panics(func() { pk.Borrow([]byte("abc"), &l) }); !strings.Contains(msg, "borrow 3 bytes beyond 4") {
		t.Fatalf("panic %q, want one about borrowing beyond the data", msg)
	}
}
