package gsorun

import "testing"

func TestLenTakesOneSizeAndOneShorterLast(t *testing.T) {
	tests := []struct {
		name     string
		sizes    []int
		refused  int // index of a datagram that cannot join (-1: none)
		maxItems int
		maxBytes int
		want     int
	}{
		{"one", []int{1000}, -1, 64, 65507, 1},
		{"equal sizes", []int{1000, 1000, 1000}, -1, 64, 65507, 3},
		{"a shorter one ends the run", []int{1000, 1000, 500, 500}, -1, 64, 65507, 3},
		{"a longer one does not join", []int{1000, 1200}, -1, 64, 65507, 1},
		{"an empty one does not join", []int{1000, 0}, -1, 64, 65507, 1},
		{"an empty first starts none", []int{0, 0}, -1, 64, 65507, 1},
		{"a refused first starts none", []int{1000, 1000}, 0, 64, 65507, 1},
		{"a refused one ends the run", []int{1000, 1000, 1000}, 2, 64, 65507, 2},
		{"no more than maxItems", []int{100, 100, 100, 100}, -1, 3, 65507, 3},
		{"no more than maxBytes", []int{30000, 30000, 30000}, -1, 64, 65507, 2},
	}
	for _, tt := range tests {
		got := Len(len(tt.sizes), tt.maxItems, tt.maxBytes, func(i int) (int, bool) {
			return tt.sizes[i], i != tt.refused
		})
		if got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
}
