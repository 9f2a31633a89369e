package tcp

import (
	"testing"

	"github.com/gonetstack/gonet/buffer"
)

// The mailbox's bound, order, wake-ups and close, without a goroutine
// taking from it.
func TestMailbox(t *testing.T) {
	pool := buffer.NewPool()
	get := func() *segment { return &segment{pk: pool.Get(20)} }
	woken := func(m *mailbox) bool {
		select {
		case <-m.wakeup:
			return true
		default:
			return false
		}
	}
	// event is what run does on a wake-up: the next chunk, released as
	// input would, then done.
	event := func(m *mailbox) int {
		chunk := m.next()
		for i := range chunk {
			chunk[i].discard()
		}
		m.done()
		return len(chunk)
	}
	tests := []struct {
		name string
		run  func(t *testing.T, m *mailbox)
	}{
		{"the first segment wakes the goroutine, the rest do not", func(t *testing.T, m *mailbox) {
			for i := range 3 {
				if !m.put(get()) {
					t.Fatalf("put %d refused", i)
				}
				if w := woken(m); w != (i == 0) {
					t.Fatalf("put %d: woken %v", i, w)
				}
			}
			m.close()
		}},
		{"take returns the segments in order and empties the mailbox", func(t *testing.T, m *mailbox) {
			var want []*segment
			for range 5 {
				seg := get()
				want = append(want, seg)
				m.put(seg)
			}
			got := m.take()
			if len(got) != len(want) {
				t.Fatalf("took %d, want %d", len(got), len(want))
			}
			for i := range got {
				if got[i].pk != want[i].pk {
					t.Fatalf("segment %d out of order", i)
				}
				got[i].pk.Release()
			}
			woken(m)
			if !m.put(get()) || !woken(m) {
				t.Fatal("a put after take did not wake the goroutine")
			}
			m.close()
		}},
		{"a full mailbox refuses", func(t *testing.T, m *mailbox) {
			for i := range inQueueLen {
				if !m.put(get()) {
					t.Fatalf("put %d of %d refused", i, inQueueLen)
				}
			}
			seg := get()
			if m.put(seg) {
				t.Fatalf("put %d accepted", inQueueLen+1)
			}
			seg.pk.Release()
			m.close()
		}},
		{"the bound counts run's batch beyond the chunk in hand", func(t *testing.T, m *mailbox) {
			for range inQueueLen {
				m.put(get())
			}
			woken(m)
			event(m) // one chunk handled, the next in hand
			room := 0
			for {
				seg := get()
				if !m.put(seg) {
					seg.pk.Release()
					break
				}
				room++
			}
			if want := 2 * buffer.MaxBatch; room != want {
				t.Fatalf("room for %d after one chunk, want %d", room, want)
			}
			m.close()
		}},
		{"a closed mailbox releases what waits and refuses", func(t *testing.T, m *mailbox) {
			m.put(get())
			m.put(get())
			m.close()
			if n := pool.Outstanding(); n != 0 {
				t.Fatalf("%d packets outstanding after close", n)
			}
			seg := get()
			if m.put(seg) {
				t.Fatal("put after close accepted")
			}
			seg.pk.Release()
		}},
		{"run takes a batch a chunk at a time and wakes itself for the rest", func(t *testing.T, m *mailbox) {
			for range buffer.MaxBatch + 10 {
				m.put(get())
			}
			for i, want := range []int{buffer.MaxBatch, 10} {
				if !woken(m) {
					t.Fatalf("chunk %d: no wake-up", i)
				}
				if n := event(m); n != want {
					t.Fatalf("chunk %d: %d segments, want %d", i, n, want)
				}
			}
			if woken(m) {
				t.Fatal("woken with nothing left")
			}
			m.close()
		}},
		{"a segment arriving while run resumes its batch is not forgotten", func(t *testing.T, m *mailbox) {
			for range buffer.MaxBatch + 1 {
				m.put(get())
			}
			woken(m)
			event(m)     // the first chunk; run wakes itself for the rest
			m.put(get()) // its wake-up is the one already pending
			woken(m)     // run resumes: the batch's last segment
			if n := event(m); n != 1 {
				t.Fatalf("resumed with %d segments, want 1", n)
			}
			if !woken(m) || event(m) != 1 {
				t.Fatal("the segment that came meanwhile waits unseen")
			}
			m.close()
		}},
		{"after a burst the slices shrink back", func(t *testing.T, m *mailbox) {
			for range 3 * mailboxKeep {
				m.put(get())
			}
			for woken(m) {
				event(m)
			}
			if cap(m.batch) != 0 || cap(m.q) > mailboxKeep {
				t.Fatalf("idle after a burst: batch capacity %d, mailbox %d", cap(m.batch), cap(m.q))
			}
			m.close()
		}},
		{"a Sync marker passes a full mailbox and comes after what waits", func(t *testing.T, m *mailbox) {
			for range inQueueLen {
				m.put(get())
			}
			synced := make(chan struct{})
			if !m.putMarker(synced) {
				t.Fatal("a full mailbox refused the marker")
			}
			for woken(m) {
				chunk := m.next()
				for i := range chunk {
					last := m.pos == len(m.batch) && i == len(chunk)-1
					if (chunk[i].synced != nil) != last {
						t.Fatalf("marker at %d of a chunk of %d, batch position %d", i, len(chunk), m.pos)
					}
					chunk[i].discard()
				}
				m.done()
			}
			select {
			case <-synced:
			default:
				t.Fatal("the marker was not answered")
			}
			m.close()
		}},
		{"close answers a waiting marker, and a closed mailbox refuses one", func(t *testing.T, m *mailbox) {
			m.put(get())
			synced := make(chan struct{})
			m.putMarker(synced)
			m.close()
			select {
			case <-synced:
			default:
				t.Fatal("close left the marker unanswered")
			}
			if m.putMarker(make(chan struct{})) {
				t.Fatal("a closed mailbox took a marker")
			}
		}},
		{"close releases what is left of run's batch", func(t *testing.T, m *mailbox) {
			for range buffer.MaxBatch + 3 {
				m.put(get())
			}
			woken(m)
			event(m)
			m.put(get())
			m.close()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMailbox(newWaker())
			tt.run(t, &m)
			if n := pool.Outstanding(); n != 0 {
				t.Fatalf("%d packets outstanding", n)
			}
		})
	}
}

// Steady delivery reuses the mailbox's two slices: no allocation per
// segment or per batch once they have grown to the batch's size.
func TestMailboxSteadyDeliveryDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	pool := buffer.NewPool()
	m := newMailbox(newWaker())
	deliver := func(segs []segment) {
		for i := range segs {
			segs[i] = segment{pk: pool.Get(20)}
		}
		for i := range segs {
			m.put(&segs[i])
		}
		<-m.wakeup
		chunk := m.next()
		for i := range chunk {
			chunk[i].pk.Release()
		}
		m.done()
	}
	segs := make([]segment, 8)
	for range 10 { // both slices reach the batch's size
		deliver(segs)
	}
	if allocs := testing.AllocsPerRun(100, func() { deliver(segs) }); allocs != 0 {
		t.Fatalf("%v allocations per batch of %d", allocs, len(segs))
	}
	m.close()
	if n := pool.Outstanding(); n != 0 {
		t.Fatalf("%d packets outstanding", n)
	}
}
