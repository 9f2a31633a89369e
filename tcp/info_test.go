package tcp_test

import (
	"testing"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/tcp"
)

// The connection table shows the options the SYNs agreed on, as ss -ti
// does: only those both sides offered.
func TestConnInfoShowsTheNegotiatedOptions(t *testing.T) {
	tests := []struct {
		name  string
		offer rawtest.TCPOpts
		want  tcp.ConnInfo // the option fields and MSS only
	}{
		{"none", rawtest.TCPOpts{MSS: 1460}, tcp.ConnInfo{MSS: 1460}},
		{"all", rawtest.TCPOpts{MSS: 1460, HasWScale: true, WScale: 5, SACKPermitted: true, HasTimestamp: true, TSVal: 1},
			tcp.ConnInfo{Timestamps: true, SACK: true, WScale: true, SndWScale: 5, RcvWScale: stackWScale, MSS: 1448}},
		{"window scale 0 is still window scaling", rawtest.TCPOpts{MSS: 1000, HasWScale: true},
			tcp.ConnInfo{WScale: true, SndWScale: 0, RcvWScale: stackWScale, MSS: 1000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tcp.Config{})
			_, p := r.accepted(tt.offer)
			ci := p.info()
			got := tcp.ConnInfo{Timestamps: ci.Timestamps, SACK: ci.SACK, WScale: ci.WScale,
				SndWScale: ci.SndWScale, RcvWScale: ci.RcvWScale, MSS: ci.MSS}
			if got != tt.want {
				t.Errorf("options %+v, want %+v", got, tt.want)
			}
		})
	}
}
