package wire_test

import (
	"math/rand/v2"
	"testing"
	"testing/quick"

	"github.com/gopacket/gopacket"

	"github.com/gonetstack/gonet/wire"
)

// randomBytes returns n bytes from r, with runs of 0x00 and 0xff mixed in so
// that sums land on the ones' complement edge cases (all ones, carries out
// of every word) more often than uniform bytes would.
func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		switch r.IntN(4) {
		case 0:
			b[i] = 0xff
		case 1:
			b[i] = 0
		default:
			b[i] = byte(r.Uint32())
		}
	}
	return b
}

func TestChecksumKnownVectors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want uint16
	}{
		{"empty", nil, 0xffff},
		{"all zero", make([]byte, 20), 0xffff},
		{"single odd byte is the high byte", []byte{0x01}, ^uint16(0x0100)},
		// RFC 1071 section 3: the sum of these bytes is ddf2.
		{"RFC 1071 example", []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}, ^uint16(0xddf2)},
		{"all ones sums to negative zero", []byte{0xff, 0xff}, 0x0000},
		{"carry wraps around", []byte{0xff, 0xff, 0x00, 0x01}, ^uint16(0x0001)},
		// A valid IPv4 header (the example of many textbooks) sums to zero.
		{"valid IPv4 header verifies to zero", []byte{
			0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
			0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wire.Checksum(tt.in, 0); got != tt.want {
				t.Errorf("Checksum = %#04x, want %#04x", got, tt.want)
			}
			if got := naiveChecksum(tt.in, 0); got != tt.want {
				t.Errorf("naive reference = %#04x, want %#04x (the reference is wrong)", got, tt.want)
			}
		})
	}
}

func TestChecksumEqualsNaiveReferenceOnRandomData(t *testing.T) {
	r := rand.New(rand.NewPCG(1071, 1624))
	for i := 0; i < 20000; i++ {
		n := r.IntN(300)
		if i%100 == 0 {
			n = r.IntN(70000)
		}
		b := randomBytes(r, n)
		initial := uint32(0)
		switch r.IntN(3) {
		case 1:
			initial = r.Uint32()
		case 2:
			initial = r.Uint32() & 0x3ffff // a pseudo-header sized sum
		}
		if got, want := wire.Checksum(b, initial), naiveChecksum(b, initial); got != want {
			t.Fatalf("len %d initial %#x: Checksum = %#04x, naive = %#04x", n, initial, got, want)
		}
		// gopacket's checksum is a second, independent reference.
		if got, want := wire.Checksum(b, 0), gopacket.FoldChecksum(gopacket.ComputeChecksum(b, 0)); got != want {
			t.Fatalf("len %d: Checksum = %#04x, gopacket = %#04x", n, got, want)
		}
	}
}

func TestChecksumEqualsNaiveReferenceQuick(t *testing.T) {
	f := func(b []byte, initial uint32) bool {
		return wire.Checksum(b, initial) == naiveChecksum(b, initial)
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 5000}); err != nil {
		t.Error(err)
	}
}

func TestSumOverEvenPiecesEqualsSumOverWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 3))
	for i := 0; i < 5000; i++ {
		b := randomBytes(r, r.IntN(400))
		want := wire.Checksum(b, 0)
		// Cut at random even offsets; only the last piece may be odd.
		acc := uint32(0)
		rest := b
		for len(rest) > 0 {
			n := 2 * r.IntN(len(rest)/2+1)
			if n == 0 || r.IntN(5) == 0 {
				n = len(rest)
			}
			acc = wire.Sum(rest[:n], acc)
			rest = rest[n:]
		}
		if got := ^wire.Fold(acc); got != want {
			t.Fatalf("len %d: checksum over pieces = %#04x, over whole = %#04x", len(b), got, want)
		}
		// Summing a prefix and passing it as Checksum's initial is the
		// pseudo-header idiom.
		cut := 2 * r.IntN(len(b)/2+1)
		if got := wire.Checksum(b[cut:], wire.Sum(b[:cut], 0)); got != want {
			t.Fatalf("len %d cut %d: Checksum with initial = %#04x, want %#04x", len(b), cut, got, want)
		}
	}
}

func TestSumChainsManyFullRunningSums(t *testing.T) {
	// Feeding a large running sum back in many times must not lose carries.
	r := rand.New(rand.NewPCG(5, 8))
	var whole []byte
	acc := uint32(0)
	for i := 0; i < 200; i++ {
		b := randomBytes(r, 2*r.IntN(600))
		for j := range b {
			if r.IntN(2) == 0 {
				b[j] = 0xff
			}
		}
		whole = append(whole, b...)
		acc = wire.Sum(b, acc)
	}
	if got, want := ^wire.Fold(acc), naiveChecksum(whole, 0); got != want {
		t.Fatalf("chained = %#04x, naive over whole = %#04x", got, want)
	}
}

func TestFold(t *testing.T) {
	tests := []struct {
		in   uint32
		want uint16
	}{
		{0, 0},
		{0xffff, 0xffff},
		{0x10000, 1},
		{0x1fffe, 0xffff},
		{0xffffffff, 0xffff},
		{0x12345678, 0x68ac},
	}
	for _, tt := range tests {
		if got := wire.Fold(tt.in); got != tt.want {
			t.Errorf("Fold(%#x) = %#x, want %#x", tt.in, got, tt.want)
		}
	}
}

func TestPseudoHeaderSumEqualsSumOfPseudoHeaderBytes(t *testing.T) {
	tests := []struct {
		name     string
		src, dst string
		proto    uint8
		length   int
	}{
		{"udp", "192.0.2.1", "198.51.100.7", wire.ProtoUDP, 8},
		{"tcp max length", "10.0.0.1", "10.0.0.2", wire.ProtoTCP, 65535},
		{"all ones addresses", "255.255.255.255", "255.255.255.255", 255, 65535},
		{"zero", "0.0.0.0", "0.0.0.0", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, dst := addr(tt.src), addr(tt.dst)
			ph := naivePseudoHeader(src, dst, tt.proto, tt.length)
			if got, want := wire.Fold(wire.PseudoHeaderSum(src, dst, tt.proto, tt.length)), ^naiveChecksum(ph, 0); got != want {
				t.Errorf("folded PseudoHeaderSum = %#04x, want %#04x", got, want)
			}
		})
	}
}
