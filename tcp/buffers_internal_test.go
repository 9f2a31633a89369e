package tcp

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/gonetstack/gonet/budget"
)

// The send buffer against a plain byte slice: random writes, reads at
// random offsets and discards from the front.
func TestSendBufferMatchesASlice(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	bud := budget.New(1 << 30)
	var s sendBuffer
	var model []byte
	next := byte(0)
	for step := 0; step < 20000; step++ {
		switch r.IntN(3) {
		case 0:
			b := make([]byte, r.IntN(3*chunkSize))
			for i := range b {
				b[i] = next
				next++
			}
			if n := s.write(b, bud); n != len(b) {
				t.Fatalf("wrote %d of %d", n, len(b))
			}
			model = append(model, b...)
		case 1:
			if len(model) == 0 {
				continue
			}
			off := r.IntN(len(model))
			n := r.IntN(len(model) - off + 1)
			got := make([]byte, n)
			s.copyAt(got, off)
			if !bytes.Equal(got, model[off:off+n]) {
				t.Fatalf("step %d: copyAt(%d, %d) differs", step, off, n)
			}
		case 2:
			n := r.IntN(len(model) + 1)
			s.discard(n, bud)
			model = model[n:]
		}
		if s.n != len(model) {
			t.Fatalf("step %d: buffer holds %d, model %d", step, s.n, len(model))
		}
	}
	s.discard(s.n, bud)
	if bud.Used() != 0 {
		t.Fatalf("%d bytes of budget left", bud.Used())
	}
}
