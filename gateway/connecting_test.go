package gateway

import (
	"testing"
	"time"
)

// A full set of connects in progress makes room only by evicting its
// oldest, and only once that one has waited evictAge.
func TestConnectSlotsEvictTheOldestOnlyWhenOldEnough(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name        string
		starts      []time.Duration // connects begun at t0 plus each, in order
		at          time.Duration   // the new connect begins at t0 plus this
		wantSlot    bool
		wantEvicted int // index in starts of the connect evicted, or -1
	}{
		{"room", []time.Duration{0}, 0, true, -1},
		{"full and all young", []time.Duration{0, 10 * time.Millisecond}, 500 * time.Millisecond, false, -1},
		{"full and the oldest old enough", []time.Duration{0, 10 * time.Millisecond}, evictAge, true, 0},
		{"only the oldest counts", []time.Duration{0, 2 * evictAge}, 2*evictAge + time.Millisecond, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := connectSlots{max: 2}
			var pend []*pendingConnect
			cancelled := make([]bool, len(tt.starts))
			for i, d := range tt.starts {
				p, evicted := s.begin(t0.Add(d), func() { cancelled[i] = true })
				if p == nil || evicted {
					t.Fatalf("setting up connect %d: slot %v, evicted %v", i, p != nil, evicted)
				}
				pend = append(pend, p)
			}
			p, evicted := s.begin(t0.Add(tt.at), func() {})
			if (p != nil) != tt.wantSlot {
				t.Fatalf("begin took a slot: %v, want %v", p != nil, tt.wantSlot)
			}
			if evicted != (tt.wantEvicted >= 0) {
				t.Fatalf("begin evicted: %v, want %v", evicted, tt.wantEvicted >= 0)
			}
			for i, q := range pend {
				want := i == tt.wantEvicted
				if cancelled[i] != want {
					t.Errorf("connect %d cancelled: %v, want %v", i, cancelled[i], want)
				}
				if got := s.end(q); got != want {
					t.Errorf("end(connect %d) reports evicted %v, want %v", i, got, want)
				}
			}
			if p != nil && s.end(p) {
				t.Errorf("the new connect reports itself evicted")
			}
			if len(s.pending) != 0 {
				t.Errorf("%d connects left in progress after every end", len(s.pending))
			}
		})
	}
}
