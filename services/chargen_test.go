package services

import (
	"bytes"
	"io"
	"testing"
)

// The lines below are written out by hand from RFC 864's rule ("On line N,
// put characters (0+N mod 95) through (71+N mod 95)") and its sample, which
// begins with line 1 (line 0's leading space is invisible in the RFC's text).
func TestChargenLineFollowsRFC864(t *testing.T) {
	tests := []struct {
		name string
		line int
		want string
	}{
		{"line 0 starts with character 0, the space", 0,
			" !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefg\r\n"},
		{"line 1 is the RFC's first sample line", 1,
			"!\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefgh\r\n"},
		{"line 2 is the RFC's second sample line", 2,
			"\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghi\r\n"},
		{"line 23 is the last that does not wrap", 23,
			"789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~\r\n"},
		{"line 24 wraps to the space after the tilde", 24,
			"89:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~ \r\n"},
		{"line 94 starts with the tilde", 94,
			"~ !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdef\r\n"},
		{"line 95 is line 0 again: the ring has 95 characters", 95,
			" !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefg\r\n"},
		{"line -1 is line 94", -1,
			"~ !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdef\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(ChargenLine(tt.line))
			if got != tt.want {
				t.Errorf("ChargenLine(%d) =\n%q\nwant\n%q", tt.line, got, tt.want)
			}
			if len(got) != ChargenLineLen {
				t.Errorf("ChargenLine(%d) is %d bytes, want %d", tt.line, len(got), ChargenLineLen)
			}
		})
	}
}

// wantStream returns the first n bytes of the stream starting at line first,
// built line by line from ChargenLine.
func wantStream(first, n int) []byte {
	var b []byte
	for line := first; len(b) < n; line++ {
		b = append(b, ChargenLine(line)...)
	}
	return b[:n]
}

func TestChargenReadProducesContinuousStream(t *testing.T) {
	tests := []struct {
		name   string
		first  int   // line the stream starts on
		chunks []int // sizes of successive reads
	}{
		{"one byte at a time across a line end", 0, []int{1, 1, 1, 71, 1, 1, 1}},
		{"reads that straddle lines", 3, []int{73, 75, 500, 2}},
		{"a read of exactly one period", 0, []int{ChargenLines * ChargenLineLen}},
		{"reads longer than a period wrap around", 50, []int{10000, 20000, 7}},
		{"an empty read moves nothing", 7, []int{0, 10, 0, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewChargen(tt.first)
			var got []byte
			for _, size := range tt.chunks {
				p := make([]byte, size)
				n, err := c.Read(p)
				if n != size || err != nil {
					t.Fatalf("Read(%d bytes) = %d, %v; want %d, nil", size, n, err, size)
				}
				got = append(got, p...)
			}
			if want := wantStream(tt.first, len(got)); !bytes.Equal(got, want) {
				t.Errorf("stream from line %d differs from the RFC 864 lines:\n got %q\nwant %q", tt.first, got, want)
			}
		})
	}
}

func TestChargenZeroValueStartsAtLineZero(t *testing.T) {
	var c Chargen
	got := make([]byte, 3*ChargenLineLen)
	if _, err := io.ReadFull(&c, got); err != nil {
		t.Fatal(err)
	}
	if want := wantStream(0, len(got)); !bytes.Equal(got, want) {
		t.Errorf("zero Chargen gave %q, want %q", got, want)
	}
}

func BenchmarkChargenRead(b *testing.B) {
	var c Chargen
	p := make([]byte, 64<<10)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		c.Read(p)
	}
}
