package tcp

import (
	"testing"

	"github.com/gonetstack/gonet/buffer"
)

// A received super-segment counts towards the delayed-ACK rule as the
// full-sized segments it holds, its GSOSize each; a runt, the short last
// one, is reported beside them and not counted. A plain segment is one,
// whatever its size.
func TestSegmentsInCountsFullSizedSegments(t *testing.T) {
	tests := []struct {
		name     string
		off      buffer.Offload
		n        int
		wantFull int
		wantRunt bool
	}{
		{"plain segment", buffer.Offload{}, 1448, 1, false},
		{"short plain segment", buffer.Offload{}, 10, 1, false},
		{"plain segment, checksum partial", buffer.Offload{Flags: buffer.NeedsCsum}, 1448, 1, false},
		{"45 whole segments", buffer.Offload{GSOType: buffer.GSOTCPv4, GSOSize: 1448}, 45 * 1448, 45, false},
		{"a runt after two is not counted", buffer.Offload{GSOType: buffer.GSOTCPv4, GSOSize: 1448}, 2*1448 + 1, 2, true},
		{"one and a runt over IPv6", buffer.Offload{GSOType: buffer.GSOTCPv6, GSOSize: 1428}, 2552, 1, true},
		{"shorter than its segment size", buffer.Offload{GSOType: buffer.GSOTCPv4, GSOSize: 1448}, 752, 1, false},
		{"GSO type without a size", buffer.Offload{GSOType: buffer.GSOTCPv4}, 5000, 1, false},
		{"GSO with no data", buffer.Offload{GSOType: buffer.GSOTCPv4, GSOSize: 1448}, 0, 1, false},
	}
	pool := buffer.NewPool()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pk := pool.Get(0)
			defer pk.Release()
			pk.Offload = tt.off
			if full, runt := segmentsIn(pk, tt.n); full != tt.wantFull || runt != tt.wantRunt {
				t.Errorf("segmentsIn(%+v, %d) = %d, %v, want %d, %v", tt.off, tt.n, full, runt, tt.wantFull, tt.wantRunt)
			}
		})
	}
}

// superSegmentLen never makes a full-sized segment smaller: with an MSS
// above half of what a datagram carries (an MTU near 64 KiB), rounding
// down to whole segments would leave no data at all, and the connection
// would send empty segments in a loop.
func TestSuperSegmentLen(t *testing.T) {
	tests := []struct {
		name                string
		mss, unsent, usable int
		nagle               bool
		want                int
		limit               int // gsoMaxPayload when zero
	}{
		{"as many segments as fit a datagram", 1448, 1 << 20, 1 << 20, false, gsoMaxPayload / 1448 * 1448, 0},
		{"the window's whole segments", 1448, 1 << 20, 3*1448 + 100, false, 3 * 1448, 0},
		{"the data's end, partial last segment", 1448, 2*1448 + 10, 1 << 20, false, 2*1448 + 10, 0},
		{"Nagle holds the partial last segment", 1448, 2*1448 + 10, 1 << 20, true, 2 * 1448, 0},
		{"an MSS of 65456 (MTU 65508) stays one segment", 65456, 1 << 20, 1 << 20, false, 65456, 0},
		{"an MSS just over half a datagram stays one segment", gsoMaxPayload/2 + 1, 1 << 20, 1 << 20, false, gsoMaxPayload/2 + 1, 0},
		{"an MSS of exactly half a datagram makes two", gsoMaxPayload / 2, 1 << 20, 1 << 20, false, gsoMaxPayload / 2 * 2, 0},
		// IPv6's Payload Length leaves out the 40-byte fixed header: its
		// super-segments carry 20 bytes more than IPv4's, 65475 at most.
		{"IPv6: as many segments as fit its payload", 1428, 1 << 20, 1 << 20, false, 45 * 1428, gsoMaxPayload6},
		{"IPv6: 65475 bytes of data at most", 65475 / 3, 1 << 20, 1 << 20, false, 65475, gsoMaxPayload6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limit := tt.limit
			if limit == 0 {
				limit = gsoMaxPayload
			}
			if got := superSegmentLen(tt.mss, tt.unsent, tt.usable, limit, tt.nagle); got != tt.want {
				t.Errorf("superSegmentLen(%d, %d, %d, %v) = %d, want %d", tt.mss, tt.unsent, tt.usable, tt.nagle, got, tt.want)
			}
		})
	}
}
