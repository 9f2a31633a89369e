package tcp

import (
	"testing"

	"github.com/gonetstack/gonet/buffer"
)

// A received super-segment counts towards the delayed-ACK rule as the
// segments it stands for: two of them, or one of two or more segments,
// call for an ACK at once, as on the wire they would have.
func TestSegmentsInCountsTheSegmentsOfASuperSegment(t *testing.T) {
	tests := []struct {
		name string
		off  buffer.Offload
		n    int
		want int
	}{
		{"plain segment", buffer.Offload{}, 1448, 1},
		{"plain segment, checksum partial", buffer.Offload{Flags: buffer.NeedsCsum}, 1448, 1},
		{"45 whole segments", buffer.Offload{GSOType: buffer.GSOTCPv4, GSOSize: 1448}, 45 * 1448, 45},
		{"a short last segment counts", buffer.Offload{GSOType: buffer.GSOTCPv4, GSOSize: 1448}, 2*1448 + 1, 3},
		{"GSO type without a size", buffer.Offload{GSOType: buffer.GSOTCPv4}, 5000, 1},
		{"GSO with no data", buffer.Offload{GSOType: buffer.GSOTCPv4, GSOSize: 1448}, 0, 1},
	}
	pool := buffer.NewPool()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pk := pool.Get(0)
			defer pk.Release()
			pk.Offload = tt.off
			if got := segmentsIn(pk, tt.n); got != tt.want {
				t.Errorf("segmentsIn(%+v, %d) = %d, want %d", tt.off, tt.n, got, tt.want)
			}
		})
	}
}
