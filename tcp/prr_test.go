package tcp_test

import (
	"testing"

	"github.com/gonetstack/gonet/tcp"
)

// RFC 6937: SACK recovery spreads the window's reduction over the ACKs.
// NewReno halves ssthresh to 5000 from a flight (RecoverFS) of 10000.
// While pipe is above ssthresh, the sender sends ssthresh/RecoverFS, half,
// of what each ACK delivers (rounded up to whole segments); once pipe is
// at or below it, it sends up to ssthresh - pipe, at most what was
// delivered plus one segment (PRR-SSRB).
func TestPRRPacesRecovery(t *testing.T) {
	f := newSACKFlight(t, tcp.Config{})
	steps := []struct {
		sackTo int   // the SACK block covers segments 1 to sackTo-1
		sent   []int // segments sent on that ACK
	}{
		// 3000 delivered, pipe 6000: ceil(3000*5000/10000) = 1500 bytes:
		// the hole (sent whatever PRR says) and one new segment.
		{4, []int{0, 10}},
		{5, nil},        // 4000 delivered: 2000 allowed, 2000 sent
		{6, []int{11}},  // 5000: 2500 allowed, rounded up to a segment
		{7, nil},        // 6000: 3000
		{8, nil},        // pipe 5000, no more than ssthresh: ssthresh - pipe = 0
		{9, []int{12}},  // pipe 4000: one segment (PRR-SSRB)
		{10, []int{13}}, // pipe 4000 again
	}
	for _, st := range steps {
		f.sack(0, [2]int{1, st.sackTo})
		if got := f.sentSeqs(); !equalInts(got, st.sent) {
			t.Errorf("SACK of 1-%d: sent %v, want %v", st.sackTo-1, got, st.sent)
		}
	}
}
