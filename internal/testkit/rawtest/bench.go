package rawtest

import (
	"testing"

	"github.com/gonetstack/gonet/buffer"
)

// RoundTrips runs a benchmark of round trips through the stack, for hosts
// built with Manual: b.N copies of frame injected batch at a time, each
// batch's answers taken by answer(k) before the next batch goes in, after
// a thousand uncounted round trips that fill the stack's pools. One op is
// one round trip of a frame carrying size bytes of payload.
func (h *Host) RoundTrips(b *testing.B, frame []byte, batch, size int, answer func(k int)) {
	frames := make([][]byte, batch)
	for i := range frames {
		frames[i] = frame
	}
	run := func(n int) {
		for done := 0; done < n; {
			k := min(batch, n-done)
			h.Inject(frames[:k]...)
			answer(k)
			done += k
		}
	}
	run(1000)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	run(b.N)
}

// TakeAnswers reads what the stack sent into pkts, as ReadFrames, until k
// frames are answers (isAnswer), passing over the others: an IPv6 host's
// own neighbour discovery and reports, say. An isAnswer that fails the
// benchmark on any other frame makes the wire's traffic exact.
func (h *Host) TakeAnswers(pkts []*buffer.Packet, k int, isAnswer func(frame []byte) bool) {
	for got := 0; got < k; {
		m := h.ReadFrames(pkts[:min(k-got, len(pkts))])
		for _, p := range pkts[:m] {
			if isAnswer(p.Bytes()) {
				got++
			}
		}
	}
}
